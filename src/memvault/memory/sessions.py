"""Sessions and messages: the log of every conversation the agent takes part in.

A session is one conversation under a key (``telegram:42``, ``cli``,
``openclaw:main``). Logging a message to a key appends it to the key's open
session, or opens a new one; ending a session closes it and notes it in the
day's journal, so the vault knows that the conversation happened. A session
opened by a request with a named API token records the token's name as its
``agent`` (:mod:`memvault.acting`). A request confined to one agent (a token
bound to it) lists, reads, continues and ends only that agent's sessions:
another's is not there for it, and a key another agent's open session holds
is refused (409) rather than continued.
"""

from __future__ import annotations

import builtins
import json
import re
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from memvault.acting import acting_agent, confined_agent, sees
from memvault.clock import Clock
from memvault.errors import ConflictError, InvalidInputError, NotFoundError
from memvault.memory.state import StateStore
from memvault.text import TextScreen
from memvault.vault.journal import Journal
from memvault.vocabulary import counted

ROLES = ("user", "assistant", "system", "tool")
DIRECTIONS = ("inbound", "outbound")
MAX_KEY = 200
MAX_TEXT = 100_000
JOURNAL_SECTION = "Sessions"

CHANNEL_PATTERN = r"^[a-z][a-z0-9_-]{0,39}$"
_CHANNEL = re.compile(CHANNEL_PATTERN)
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


@dataclass(frozen=True)
class Session:
    """One conversation."""

    id: int
    key: str
    channel: str
    started_at: datetime
    last_message_at: datetime | None
    ended_at: datetime | None
    message_count: int
    summary: str | None
    agent: str | None = None

    @property
    def active(self) -> bool:
        """Whether the session is still open."""
        return self.ended_at is None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "id": self.id,
            "key": self.key,
            "channel": self.channel,
            "active": self.active,
            "started_at": self.started_at.isoformat(timespec="seconds"),
            "last_message_at": _iso(self.last_message_at),
            "ended_at": _iso(self.ended_at),
            "message_count": self.message_count,
            "summary": self.summary,
            "agent": self.agent,
        }


@dataclass(frozen=True)
class Message:
    """One message of a session."""

    id: int
    session_id: int
    channel: str
    direction: str
    role: str
    sender: str | None
    text: str
    sent_at: datetime
    metadata: dict[str, Any] | None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "id": self.id,
            "session_id": self.session_id,
            "channel": self.channel,
            "direction": self.direction,
            "role": self.role,
            "sender": self.sender,
            "text": self.text,
            "sent_at": self.sent_at.isoformat(timespec="seconds"),
            "metadata": self.metadata,
        }


def _iso(moment: datetime | None) -> str | None:
    return moment.isoformat(timespec="seconds") if moment else None


def _when(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value else None


def check_key(key: str) -> str:
    """A session key as stored: trimmed, non-empty, one line, at most 200 characters."""
    clean = key.strip()
    if not clean:
        raise InvalidInputError("The session key is empty; use e.g. 'telegram:42'.")
    if len(clean) > MAX_KEY or _CONTROL.search(clean):
        raise InvalidInputError(
            f"The session key must be one line of at most {MAX_KEY} characters."
        )
    return clean


def channel_of(key: str, channel: str | None) -> str:
    """The channel given, else the key's prefix (``telegram`` of ``telegram:42``), else ``api``."""
    if channel is not None:
        name = channel.strip().lower()
        if not _CHANNEL.match(name):
            raise InvalidInputError(
                f"{channel!r} is not a channel name: use lowercase letters, digits, '-' or '_'."
            )
        return name
    prefix = key.split(":", 1)[0].strip().lower()
    return prefix if ":" in key and _CHANNEL.match(prefix) else "api"


class Sessions:
    """The sessions and messages of ``state.db``."""

    def __init__(
        self,
        db: StateStore,
        clock: Clock,
        journal: Journal | None = None,
        *,
        screen: TextScreen | None = None,
    ) -> None:
        self.db = db
        self.clock = clock
        self.journal = journal
        # Keeps secrets out of state.db ([privacy] secrets; the runtime gives it).
        self.screen = screen
        self._observers: builtins.list[Callable[[Session, Message], None]] = []

    def observe(self, observer: Callable[[Session, Message], None]) -> None:
        """Call ``observer(session, message)`` once each message is stored."""
        self._observers.append(observer)

    def log(
        self,
        key: str,
        text: str,
        *,
        role: str = "user",
        direction: str | None = None,
        channel: str | None = None,
        sender: str | None = None,
        sent_at: datetime | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> tuple[Session, Message]:
        """Add a message to the key's open session (opening one if needed)."""
        key = check_key(key)
        if role not in ROLES:
            raise InvalidInputError(f"role must be one of {', '.join(ROLES)}, not {role!r}.")
        direction = direction or ("inbound" if role == "user" else "outbound")
        if direction not in DIRECTIONS:
            raise InvalidInputError(f"direction must be inbound or outbound, not {direction!r}.")
        if not text.strip():
            raise InvalidInputError("The message text is empty.")
        if len(text) > MAX_TEXT:
            raise InvalidInputError(f"A message is at most {MAX_TEXT} characters.")
        if self.screen is not None:
            # What was already said (a reply) is recorded redacted, never refused.
            text = self.screen(text, refuse=role == "user")
            metadata = _screened(metadata, self.screen) if metadata else metadata
        moment = self.clock.localize(sent_at) if sent_at else self.clock.now()
        stamp = moment.isoformat()
        meta = json.dumps(metadata, ensure_ascii=False) if metadata else None
        with self.db.transaction() as conn:
            row = conn.execute(
                "SELECT * FROM sessions WHERE key = ? AND ended_at IS NULL", (key,)
            ).fetchone()
            if row is None:
                session_channel = channel_of(key, channel)
                session_id = int(
                    conn.execute(
                        "INSERT INTO sessions (key, channel, started_at, agent) "
                        "VALUES (?, ?, ?, ?)",
                        (key, session_channel, stamp, acting_agent()),
                    ).lastrowid
                    or 0
                )
            elif not sees(row["agent"]):
                raise ConflictError(
                    f"Another agent's session is open under the key {key!r}; use a key of your own."
                )
            else:
                session_id = int(row["id"])
                session_channel = str(row["channel"])
            message_channel = channel_of(key, channel) if channel else session_channel
            message_id = int(
                conn.execute(
                    "INSERT INTO messages (session_id, channel, direction, role, sender, text, "
                    "sent_at, metadata) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (session_id, message_channel, direction, role, sender, text, stamp, meta),
                ).lastrowid
                or 0
            )
            conn.execute(
                "UPDATE sessions SET message_count = message_count + 1, "
                "last_message_at = max(coalesce(last_message_at, ''), ?) WHERE id = ?",
                (stamp, session_id),
            )
            session = _session(
                conn.execute("SELECT * FROM sessions WHERE id = ?", (session_id,)).fetchone()
            )
        message = Message(
            id=message_id,
            session_id=session_id,
            channel=message_channel,
            direction=direction,
            role=role,
            sender=sender,
            text=text,
            sent_at=moment,
            metadata=metadata or None,
        )
        for observer in self._observers:
            observer(session, message)
        return session, message

    def end(self, key: str, summary: str | None = None) -> Session:
        """Close the key's open session; it is noted in today's journal."""
        key = check_key(key)
        now = self.clock.now()
        if summary and self.screen is not None:
            summary = self.screen(summary, refuse=False)  # it goes to the journal too
        with self.db.transaction() as conn:
            row = conn.execute(
                "SELECT * FROM sessions WHERE key = ? AND ended_at IS NULL", (key,)
            ).fetchone()
            if row is None or not sees(row["agent"]):
                raise NotFoundError(f"There is no open session {key!r}.")
            conn.execute(
                "UPDATE sessions SET ended_at = ?, summary = coalesce(?, summary) WHERE id = ?",
                (now.isoformat(), summary.strip() if summary else None, row["id"]),
            )
            session = _session(
                conn.execute("SELECT * FROM sessions WHERE id = ?", (row["id"],)).fetchone()
            )
        if self.journal is not None:
            started = session.started_at.astimezone(self.clock.tz).strftime("%H:%M")
            line = (
                f"Session {session.key} ({session.channel}): "
                f"{counted(session.message_count, 'message')} since {started}"
            )
            if session.summary:
                line += f". {session.summary}"
            self.journal.append(JOURNAL_SECTION, line, when=now)
        return session

    def list(
        self,
        *,
        active: bool | None = None,
        channel: str | None = None,
        since: datetime | None = None,
        limit: int = 50,
    ) -> builtins.list[Session]:
        """Sessions, the most recently active first (with ``since``: active since then)."""
        clauses: list[str] = []
        params: list[Any] = []
        agent = confined_agent()
        if agent is not None:
            clauses.append("agent = ?")
            params.append(agent)
        if since is not None:
            clauses.append("coalesce(last_message_at, started_at) >= ?")
            params.append(self.clock.localize(since).isoformat())
        if active is not None:
            clauses.append("ended_at IS NULL" if active else "ended_at IS NOT NULL")
        if channel is not None:
            clauses.append("channel = ?")
            params.append(channel.strip().lower())
        where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
        rows = self.db.query(
            f"SELECT * FROM sessions {where} "
            "ORDER BY coalesce(last_message_at, started_at) DESC, id DESC LIMIT ?",
            (*params, limit),
        )
        return [_session(row) for row in rows]

    def get(self, key: str) -> Session:
        """The key's open session, else its latest one (of the confined agent's own)."""
        key = check_key(key)
        agent = confined_agent()
        mine = "" if agent is None else " AND agent = ?"
        rows = self.db.query(
            f"SELECT * FROM sessions WHERE key = ?{mine} "
            "ORDER BY (ended_at IS NULL) DESC, id DESC LIMIT 1",
            (key,) if agent is None else (key, agent),
        )
        if not rows:
            raise NotFoundError(f"There is no session {key!r}.")
        return _session(rows[0])

    def find(self, session_id: int) -> Session:
        """One session by its id (of the confined agent's own)."""
        rows = self.db.query("SELECT * FROM sessions WHERE id = ?", (session_id,))
        agent = confined_agent()
        if not rows or (agent is not None and rows[0]["agent"] != agent):
            raise NotFoundError(f"There is no session {session_id}.")
        return _session(rows[0])

    def last_ended(self) -> Session | None:
        """The session that ended most recently, if any."""
        rows = self.db.query(
            "SELECT * FROM sessions WHERE ended_at IS NOT NULL ORDER BY ended_at DESC, id DESC "
            "LIMIT 1"
        )
        return _session(rows[0]) if rows else None

    def idle(self, before: datetime) -> builtins.list[Session]:
        """Open sessions whose last message (or start) is older than ``before``."""
        rows = self.db.query(
            "SELECT * FROM sessions WHERE ended_at IS NULL "
            "AND coalesce(last_message_at, started_at) < ? ORDER BY id",
            (self.clock.localize(before).isoformat(),),
        )
        return [_session(row) for row in rows]

    def messages(self, session_id: int, *, limit: int = 100) -> builtins.list[Message]:
        """The session's last ``limit`` messages, oldest first."""
        rows = self.db.query(
            "SELECT * FROM (SELECT * FROM messages WHERE session_id = ? ORDER BY id DESC "
            "LIMIT ?) ORDER BY id",
            (session_id, limit),
        )
        return [_message(row) for row in rows]


def _screened(value: Any, screen: TextScreen) -> Any:
    """Every string of a message's metadata screened (a tool call's arguments, say)."""
    if isinstance(value, str):
        return screen(value, refuse=False)
    if isinstance(value, dict):
        return {key: _screened(item, screen) for key, item in value.items()}
    if isinstance(value, list):
        return [_screened(item, screen) for item in value]
    return value


def _session(row: sqlite3.Row) -> Session:
    return Session(
        id=int(row["id"]),
        key=str(row["key"]),
        channel=str(row["channel"]),
        started_at=datetime.fromisoformat(row["started_at"]),
        last_message_at=_when(row["last_message_at"]),
        ended_at=_when(row["ended_at"]),
        message_count=int(row["message_count"]),
        summary=row["summary"],
        agent=row["agent"],
    )


def _message(row: sqlite3.Row) -> Message:
    return Message(
        id=int(row["id"]),
        session_id=int(row["session_id"]),
        channel=str(row["channel"]),
        direction=str(row["direction"]),
        role=str(row["role"]),
        sender=row["sender"],
        text=str(row["text"]),
        sent_at=datetime.fromisoformat(row["sent_at"]),
        metadata=json.loads(row["metadata"]) if row["metadata"] else None,
    )
