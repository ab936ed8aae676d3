"""Signing in to the console: one-time links, sessions, CSRF tokens.

``memvault ui`` asks the daemon (with a token, over the API) for a link. The
link carries a random code, usable once and for ``[console] link_minutes``;
the daemon keeps only the code's SHA-256. Opening the link trades the code for
a session: a random id in an HttpOnly, SameSite=Strict cookie (again only its
hash is kept) and a CSRF token the pages send back with every change. The
session holds the principal of the token that asked for the link, so a
read-only token opens a read-only console, and a named token revoked later
ends its sessions at their next request.

Everything is kept in the daemon's memory: a restart signs everyone out, and
``memvault ui --revoke`` ends every session and every unused link at once.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from memvault.errors import MemvaultError
from memvault.gateway.tokens import Principal

CODE_BYTES = 24
SESSION_BYTES = 32
CSRF_BYTES = 24


class SignInRefusedError(MemvaultError):
    """A sign-in code that is wrong, expired or already used."""

    code = "sign_in_refused"
    http_status = 403


@dataclass(frozen=True)
class ConsoleSession:
    """One signed-in browser."""

    principal: Principal
    csrf: str
    expires: float  # time.monotonic()

    def csrf_matches(self, given: str | None) -> bool:
        """Whether ``given`` is this session's CSRF token (compared in constant time)."""
        return given is not None and hmac.compare_digest(given.encode(), self.csrf.encode())


@dataclass(frozen=True)
class Link:
    """A one-time code just made, and how long it may be used."""

    code: str
    seconds: float


def _hash(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8", "replace")).hexdigest()


class SignIns:
    """The console's unused codes and live sessions (thread-safe)."""

    def __init__(
        self,
        *,
        link_seconds: float,
        session_seconds: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.link_seconds = link_seconds
        self.session_seconds = session_seconds
        self._clock = clock
        self._codes: dict[str, tuple[Principal, float]] = {}
        self._sessions: dict[str, ConsoleSession] = {}
        self._lock = threading.Lock()

    def link(self, principal: Principal) -> Link:
        """A new one-time code for ``principal``."""
        code = secrets.token_urlsafe(CODE_BYTES)
        with self._lock:
            self._prune()
            self._codes[_hash(code)] = (principal, self._clock() + self.link_seconds)
        return Link(code, self.link_seconds)

    def exchange(self, code: str) -> tuple[str, ConsoleSession]:
        """The session a code opens (the code is spent) and its cookie value;
        :class:`SignInRefusedError` for a wrong, expired or used code."""
        with self._lock:
            entry = self._codes.pop(_hash(code), None) if code else None
            if entry is None or entry[1] <= self._clock():
                raise SignInRefusedError(
                    "This sign-in link is wrong, expired or already used; run `memvault ui` "
                    "for a new one."
                )
            cookie = secrets.token_urlsafe(SESSION_BYTES)
            session = ConsoleSession(
                entry[0], secrets.token_urlsafe(CSRF_BYTES), self._clock() + self.session_seconds
            )
            self._sessions[_hash(cookie)] = session
            self._prune()
        return cookie, session

    def session(self, cookie: str | None) -> ConsoleSession | None:
        """The live session of a cookie value; None when unknown or expired."""
        if not cookie:
            return None
        key = _hash(cookie)
        with self._lock:
            session = self._sessions.get(key)
            if session is not None and session.expires <= self._clock():
                del self._sessions[key]
                return None
        return session

    def end(self, cookie: str | None) -> None:
        """Sign one browser out."""
        if cookie:
            with self._lock:
                self._sessions.pop(_hash(cookie), None)

    def end_all(self) -> int:
        """End every session and every unused code; how many sessions were live."""
        with self._lock:
            self._prune()
            ended = len(self._sessions)
            self._sessions.clear()
            self._codes.clear()
        return ended

    def _prune(self) -> None:
        """Drop what has expired (the lock is held)."""
        now = self._clock()
        for key in [k for k, (_, until) in self._codes.items() if until <= now]:
            del self._codes[key]
        for key in [k for k, s in self._sessions.items() if s.expires <= now]:
            del self._sessions[key]
