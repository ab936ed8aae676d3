"""Named API tokens: several agents on one daemon, each with a name and a scope.

The daemon's own token (``<vault>/.memvault/token``) is the owner's: it may do
everything and records no agent. A named token is made with ``memvault tokens
create NAME --scope ...``; ``state.db`` keeps its name, its scopes and the
SHA-256 of its secret, never the secret itself. Its scope says what it may do
(:mod:`memvault.gateway.access` says what each route and tool needs), each
scope including the ones before it:

- ``read``: searches, reads, context, sessions, events;
- ``remember``: read, and storing memories and session messages;
- ``write``: remember, and every other change to notes, tasks and memories;
- ``admin``: everything (jobs, channels, the agent, tier-2 and tier-3 tools).

What a request with a named token creates records the token's name as its
agent (:mod:`memvault.acting`). A token made with ``--agent A`` is bound to the
agent A instead: what it creates records A, and it sees only what A stored, its
memories and its sessions with their messages (``AGENT_ROUTES`` in
:mod:`memvault.gateway.access` lists the routes it may use). A read-scoped token only observes:
its searches are not recalls (:mod:`memvault.memory.recalls`). A named token
never stands in for the owner's approval token (``X-Memvault-Approval``). The
daemon looks a named token up in ``state.db`` on every request, so a revoked
token stops working at once.
"""

from __future__ import annotations

import builtins
import contextlib
import hashlib
import logging
import re
import secrets
import sqlite3
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import IntEnum
from typing import Any

from memvault.acting import Actor
from memvault.errors import ConflictError, InvalidInputError, MemvaultError, NotFoundError
from memvault.memory.state import StateStore

log = logging.getLogger(__name__)

SECRET_PREFIX = "mvt_"
SECRET_BYTES = 32
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"
_NAME = re.compile(NAME_PATTERN)
OWNER_NAME = "owner"
# last_used_at is written at most this often per token (seconds): not a write per request.
_LAST_USED_EVERY = 60.0


class Scope(IntEnum):
    """What a token may do; each scope includes the ones below it."""

    READ = 1
    REMEMBER = 2
    WRITE = 3
    ADMIN = 4

    @property
    def label(self) -> str:
        """The scope's name as written: read, remember, write, admin."""
        return self.name.lower()

    @classmethod
    def parse(cls, text: str) -> Scope:
        """The scope named ``text`` (any case); a clear error listing them otherwise."""
        try:
            return cls[text.strip().upper()]
        except KeyError:
            names = ", ".join(scope.label for scope in cls)
            raise InvalidInputError(f"Unknown scope {text!r}; use one of {names}.") from None


@dataclass(frozen=True)
class Principal:
    """Whom a request comes from: the owner, or the agent of a named token."""

    name: str | None  # None: the owner
    scope: Scope
    agent: str | None = None  # the agent a token is bound to: it sees only that agent's

    @property
    def owner(self) -> bool:
        """Whether this is the owner's own token."""
        return self.name is None

    @property
    def actor(self) -> Actor:
        """Whom its requests act for (:mod:`memvault.acting`): the bound agent, confined to
        what that agent stored, else the token's name; a read token only observes."""
        return Actor(
            agent=self.agent or self.name,
            confined=self.agent is not None,
            observer=self.scope == Scope.READ,
        )

    def allows(self, needed: Scope) -> bool:
        """Whether this principal's scope covers ``needed``."""
        return self.scope >= needed

    def refusal(self, needed: Scope) -> str | None:
        """The sentence a request beyond this principal's scope gets; None when allowed."""
        if self.allows(needed):
            return None
        return (
            f"The token {self.name!r} has the {self.scope.label} scope; this needs the "
            f"{needed.label} scope (memvault tokens create NAME --scope {needed.label})."
        )


OWNER = Principal(None, Scope.ADMIN)


@dataclass(frozen=True)
class NamedToken:
    """One named token as ``state.db`` keeps it (without its secret)."""

    name: str
    scopes: tuple[Scope, ...]
    created_at: str
    last_used_at: str | None
    revoked_at: str | None
    agent: str | None = None  # bound to this agent: it sees only what the agent stored

    @property
    def scope(self) -> Scope:
        """The widest of its scopes: what it may do."""
        return max(self.scopes)

    @property
    def active(self) -> bool:
        """Whether it still opens the API (not revoked)."""
        return self.revoked_at is None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (never the secret)."""
        return {
            "name": self.name,
            "scopes": [scope.label for scope in self.scopes],
            "scope": self.scope.label,
            "agent": self.agent,
            "active": self.active,
            "created_at": self.created_at,
            "last_used_at": self.last_used_at,
            "revoked_at": self.revoked_at,
        }


def digest(secret: str) -> str:
    """The SHA-256 (hex) kept in place of a secret."""
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def check_name(name: str, what: str = "token") -> str:
    """A token's (or an agent's) name as stored: 1 to 64 letters, digits, '.', '_' or '-';
    not 'owner'."""
    clean = name.strip()
    if not _NAME.match(clean):
        raise InvalidInputError(
            f"{name!r} is not {'an' if what[0] in 'aeiou' else 'a'} {what} name: use 1 to 64 "
            "letters, digits, '.', '_' or '-', starting with a letter or digit."
        )
    if clean.casefold() == OWNER_NAME:
        raise InvalidInputError(
            f"'owner' names the daemon's own token; choose another {what} name."
        )
    return clean


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


class TokenBook:
    """The named tokens of one vault's ``state.db``."""

    def __init__(self, state: StateStore) -> None:
        self.state = state
        self._used: dict[str, float] = {}  # secret digest -> when last_used_at was written
        self._used_guard = threading.Lock()

    def create(
        self, name: str, scopes: Iterable[Scope], *, agent: str | None = None
    ) -> tuple[NamedToken, str]:
        """A new token and its secret (shown once: only its digest is kept); with ``agent``,
        bound to that agent (it sees only what the agent stored)."""
        clean = check_name(name)
        bound = check_name(agent, "agent") if agent is not None else None
        chosen = tuple(sorted(set(scopes)))
        if not chosen:
            raise InvalidInputError("Give at least one scope: read, remember, write or admin.")
        if bound is not None and max(chosen) == Scope.ADMIN:
            raise InvalidInputError(
                "A token bound to an agent cannot have the admin scope: admin reaches the "
                "whole vault (jobs, channels, the agent); choose read, remember or write."
            )
        secret = SECRET_PREFIX + secrets.token_urlsafe(SECRET_BYTES)
        created = _now()
        try:
            with self.state.transaction() as conn:
                conn.execute(
                    "INSERT INTO api_tokens (name, scopes, secret_sha256, created_at, agent) "
                    "VALUES (?, ?, ?, ?, ?)",
                    (clean, ",".join(s.label for s in chosen), digest(secret), created, bound),
                )
        except sqlite3.IntegrityError:
            raise ConflictError(
                f"A token named {clean!r} exists; revoke it first or choose another name."
            ) from None
        return NamedToken(clean, chosen, created, None, None, bound), secret

    def list(self, *, include_revoked: bool = False) -> builtins.list[NamedToken]:
        """The tokens, oldest first (the revoked ones too when asked)."""
        where = "" if include_revoked else "WHERE revoked_at IS NULL"
        rows = self.state.query(f"SELECT * FROM api_tokens {where} ORDER BY id")
        return [_token(row) for row in rows]

    def revoke(self, name: str) -> NamedToken:
        """Revoke the live token called ``name``; it stops working at once."""
        clean = name.strip()
        with self.state.transaction() as conn:
            row = conn.execute(
                "SELECT * FROM api_tokens WHERE name = ? COLLATE NOCASE AND revoked_at IS NULL",
                (clean,),
            ).fetchone()
            if row is None:
                raise NotFoundError(
                    f"There is no active token named {clean!r}.",
                    hint="List them with `memvault tokens list`.",
                )
            revoked = _now()
            conn.execute("UPDATE api_tokens SET revoked_at = ? WHERE id = ?", (revoked, row["id"]))
        token = _token(row)
        return NamedToken(
            token.name, token.scopes, token.created_at, token.last_used_at, revoked, token.agent
        )

    def authenticate(self, secret: str) -> Principal | None:
        """The principal of a live named token's secret; None for anything else."""
        if not secret.startswith(SECRET_PREFIX):
            return None
        hashed = digest(secret)
        rows = self.state.query(
            "SELECT name, scopes, agent FROM api_tokens "
            "WHERE secret_sha256 = ? AND revoked_at IS NULL",
            (hashed,),
        )
        if not rows:
            return None
        self._note_use(hashed)
        row = rows[0]
        return Principal(str(row["name"]), max(_scopes(row["scopes"])), row["agent"])

    def _note_use(self, hashed: str) -> None:
        now = time.monotonic()
        with self._used_guard:
            if now - self._used.get(hashed, -_LAST_USED_EVERY) < _LAST_USED_EVERY:
                return
            self._used[hashed] = now
        # A read-only vault, or state.db busy: the time of use is a nicety, not worth a 500.
        with contextlib.suppress(sqlite3.Error, MemvaultError), self.state.transaction() as conn:
            conn.execute(
                "UPDATE api_tokens SET last_used_at = ? WHERE secret_sha256 = ?", (_now(), hashed)
            )


def parse_scopes(texts: Iterable[str]) -> tuple[Scope, ...]:
    """Scopes from their names (repeated or comma-separated)."""
    return tuple(Scope.parse(part) for text in texts for part in text.split(",") if part.strip())


def _scopes(stored: str) -> tuple[Scope, ...]:
    return tuple(Scope.parse(part) for part in stored.split(",") if part)


def _token(row: sqlite3.Row) -> NamedToken:
    return NamedToken(
        name=str(row["name"]),
        scopes=_scopes(str(row["scopes"])),
        created_at=str(row["created_at"]),
        last_used_at=row["last_used_at"],
        revoked_at=row["revoked_at"],
        agent=row["agent"],
    )
