"""The channels' durable state in ``state.db``: inbox, outbox, senders, approvals.

- **Inbox**: every message an adapter delivers is a row before the
  platform is told it arrived; ``(channel, message_id)`` is unique, so a
  redelivery after a crash is recognised and dropped. A row moves from
  ``new`` to ``captured`` (in the session and the journal) to ``done``
  (answered: the reply is in the outbox), or ``held`` (a stranger waiting
  for the owner) / ``ignored`` (a blocked sender).
- **Outbox**: every message memvault sends is a row first; the hub's
  dispatcher sends due rows in order per chat, and retries failures with
  backoff until ``channels.send_retries`` is spent (then ``failed``,
  listed by ``memvault channels outbox``). A reply is queued in the same
  transaction that marks its inbound ``done``, so a restart neither loses
  nor repeats it.
- **Senders**: who wrote besides the owner, and what the owner decided.
- **Approvals**: tool calls waiting for the owner's reply.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from memvault.channels.base import Button, Inbound
from memvault.clock import Clock
from memvault.memory.state import StateStore

INBOX_NEW = "new"
INBOX_CAPTURED = "captured"
INBOX_DONE = "done"
INBOX_HELD = "held"
INBOX_IGNORED = "ignored"


@dataclass(frozen=True)
class Queued:
    """One outbox row."""

    id: int
    channel: str
    chat_id: str
    kind: str
    text: str
    reply_to: str | None
    media: tuple[str, ...]
    buttons: tuple[Button, ...]
    inbox_id: int | None
    part: int
    parts: int
    status: str
    attempts: int
    next_attempt_at: datetime
    last_error: str | None
    created_at: datetime
    sent_at: datetime | None
    platform_ids: tuple[str, ...] = ()  # what the platform called it, once sent

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "id": self.id,
            "channel": self.channel,
            "chat_id": self.chat_id,
            "kind": self.kind,
            "text": self.text,
            "reply_to": self.reply_to,
            "media": list(self.media),
            "part": self.part,
            "parts": self.parts,
            "status": self.status,
            "attempts": self.attempts,
            "next_attempt_at": _iso(self.next_attempt_at),
            "last_error": self.last_error,
            "created_at": _iso(self.created_at),
            "sent_at": _iso(self.sent_at),
        }


@dataclass(frozen=True)
class Sender:
    """Someone other than the owner who wrote on a channel."""

    channel: str
    sender_id: str
    chat_id: str | None
    name: str | None
    username: str | None
    status: str  # pending | approved | blocked
    code: str | None
    code_expires_at: datetime | None
    first_seen: datetime
    last_seen: datetime
    messages: int
    owner_told: bool
    decided_at: datetime | None
    decided_by: str | None

    @property
    def label(self) -> str:
        """How the owner is shown this sender: name, @username and id."""
        parts = [self.name or "someone"]
        if self.username:
            parts.append(f"@{self.username}")
        return f"{' '.join(parts)} (id {self.sender_id})"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (the pairing code is the owner's to see)."""
        return {
            "channel": self.channel,
            "sender_id": self.sender_id,
            "chat_id": self.chat_id,
            "name": self.name,
            "username": self.username,
            "status": self.status,
            "code": self.code,
            "code_expires_at": _iso(self.code_expires_at),
            "first_seen": _iso(self.first_seen),
            "last_seen": _iso(self.last_seen),
            "messages": self.messages,
            "decided_at": _iso(self.decided_at),
            "decided_by": self.decided_by,
        }


def _iso(moment: datetime | None) -> str | None:
    return moment.isoformat(timespec="seconds") if moment else None


def _when(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value else None


class ChannelStore:
    """Reads and writes the channel tables of ``state.db``."""

    def __init__(self, db: StateStore, clock: Clock) -> None:
        self.db = db
        self.clock = clock

    def _now(self) -> str:
        return self.clock.now().isoformat()

    # -- inbox -------------------------------------------------------------------------

    def receive(self, message: Inbound) -> int | None:
        """Store an arrived message; its row id, or None when it was stored before."""
        with self.db.transaction() as conn:
            cursor = conn.execute(
                "INSERT OR IGNORE INTO channel_inbox (channel, message_id, chat_id, sender_id, "
                "received_at, payload) VALUES (?, ?, ?, ?, ?, ?)",
                (
                    message.channel,
                    message.message_id,
                    message.chat_id,
                    message.sender_id,
                    self._now(),
                    json.dumps(message.to_dict(), ensure_ascii=False),
                ),
            )
            return int(cursor.lastrowid or 0) if cursor.rowcount else None

    def mark(self, inbox_id: int, status: str, note: str | None = None) -> None:
        """Move an inbox row on (captured, held, ignored, done)."""
        with self.db.transaction() as conn:
            conn.execute(
                "UPDATE channel_inbox SET status = ?, note = coalesce(?, note), "
                "handled_at = ? WHERE id = ?",
                (status, note, self._now(), inbox_id),
            )

    def unfinished(self) -> list[tuple[int, str, Inbound]]:
        """``(id, status, message)`` of rows a crash left before ``done``, oldest first."""
        rows = self.db.query(
            "SELECT id, status, payload FROM channel_inbox WHERE status IN (?, ?) ORDER BY id",
            (INBOX_NEW, INBOX_CAPTURED),
        )
        return [
            (int(r["id"]), str(r["status"]), Inbound.from_dict(json.loads(r["payload"])))
            for r in rows
        ]

    def held(self, channel: str, sender_id: str) -> list[tuple[int, Inbound]]:
        """A sender's messages kept while the owner had not decided on them, oldest first."""
        rows = self.db.query(
            "SELECT id, payload FROM channel_inbox WHERE channel = ? AND sender_id = ? "
            "AND status = ? ORDER BY id",
            (channel, sender_id, INBOX_HELD),
        )
        return [(int(r["id"]), Inbound.from_dict(json.loads(r["payload"]))) for r in rows]

    def inbox(
        self, channel: str, *, chat_id: str | None = None, limit: int = 50
    ) -> list[dict[str, Any]]:
        """Recent inbox rows of a channel, newest last."""
        clause = " AND chat_id = ?" if chat_id else ""
        params: tuple[Any, ...] = (channel, chat_id) if chat_id else (channel,)
        rows = self.db.query(
            "SELECT * FROM (SELECT * FROM channel_inbox WHERE channel = ?"
            f"{clause} ORDER BY id DESC LIMIT ?) ORDER BY id",
            (*params, limit),
        )
        out = []
        for row in rows:
            payload = json.loads(row["payload"])
            out.append(
                {
                    "id": int(row["id"]),
                    "direction": "inbound",
                    "status": row["status"],
                    "received_at": row["received_at"],
                    **{k: payload.get(k) for k in ("chat_id", "sender_id", "sender_name", "text")},
                    "attachments": payload.get("attachments", []),
                }
            )
        return out

    def last_received(self, channel: str) -> datetime | None:
        """When the channel last delivered a message."""
        rows = self.db.query(
            "SELECT max(received_at) AS last FROM channel_inbox WHERE channel = ?", (channel,)
        )
        return _when(rows[0]["last"]) if rows else None

    def chats(self, channel: str, limit: int) -> list[dict[str, Any]]:
        """The channel's conversations memvault has seen, the most recent first."""
        rows = self.db.query(
            "SELECT chats.*, latest.payload FROM (SELECT chat_id, count(*) AS messages, "
            "max(received_at) AS last, max(id) AS last_id FROM channel_inbox "
            "WHERE channel = ? GROUP BY chat_id) AS chats "
            "JOIN channel_inbox AS latest ON latest.id = chats.last_id "
            "ORDER BY chats.last_id DESC LIMIT ?",
            (channel, limit),
        )
        out = []
        for row in rows:
            payload = json.loads(row["payload"])
            out.append(
                {
                    "chat_id": row["chat_id"],
                    "name": payload.get("sender_name"),
                    "username": payload.get("username"),
                    "chat_type": payload.get("chat_type"),
                    "messages": int(row["messages"]),
                    "last_message_at": row["last"],
                    "last_text": payload.get("text"),
                }
            )
        return out

    # -- outbox ------------------------------------------------------------------------

    def queue(
        self,
        channel: str,
        chat_id: str,
        parts: list[str],
        *,
        kind: str,
        reply_to: str | None = None,
        media: tuple[str, ...] = (),
        buttons: tuple[Button, ...] = (),
        inbox_id: int | None = None,
        done: int | None = None,
    ) -> list[int]:
        """Queue a message (its parts, in order); ``done`` marks that inbox row answered
        in the same transaction, so a reply is never queued twice nor lost."""
        now = self._now()
        ids = []
        with self.db.transaction() as conn:
            total = len(parts)
            for number, text in enumerate(parts, start=1):
                last = number == total
                cursor = conn.execute(
                    "INSERT INTO channel_outbox (channel, chat_id, kind, text, reply_to, media, "
                    "buttons, inbox_id, part, parts, next_attempt_at, created_at) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        channel,
                        chat_id,
                        kind,
                        text,
                        reply_to,  # every part: a threaded platform keeps them all there
                        json.dumps(list(media)) if media and last else None,
                        json.dumps([[b.label, b.data] for b in buttons])
                        if buttons and last
                        else None,
                        inbox_id,
                        number,
                        total,
                        now,
                        now,
                    ),
                )
                ids.append(int(cursor.lastrowid or 0))
            if done is not None:
                conn.execute(
                    "UPDATE channel_inbox SET status = ?, handled_at = ? WHERE id = ?",
                    (INBOX_DONE, now, done),
                )
        return ids

    def pending(self, channel: str | None = None) -> list[Queued]:
        """Pending outbox rows (of one channel), oldest first (the dispatcher keeps each
        chat in order)."""
        where, args = ("AND channel = ?", (channel,)) if channel else ("", ())
        rows = self.db.query(
            f"SELECT * FROM channel_outbox WHERE status = 'pending' {where} ORDER BY id LIMIT 500",
            args,
        )
        return [_queued(row) for row in rows]

    def claim(self, outbox_id: int) -> bool:
        """Take a pending row for sending; False when another process took it first."""
        with self.db.transaction() as conn:
            cursor = conn.execute(
                "UPDATE channel_outbox SET status = 'sending' WHERE id = ? AND status = 'pending'",
                (outbox_id,),
            )
            return bool(cursor.rowcount)

    def release_claims(self) -> int:
        """Rows a process died sending go back to the queue (at the daemon's start)."""
        with self.db.transaction() as conn:
            cursor = conn.execute(
                "UPDATE channel_outbox SET status = 'pending' WHERE status = 'sending'"
            )
            return int(cursor.rowcount)

    def sent(self, outbox_id: int, platform_ids: tuple[str, ...]) -> None:
        """Record a delivered row."""
        with self.db.transaction() as conn:
            conn.execute(
                "UPDATE channel_outbox SET status = 'sent', sent_at = ?, attempts = attempts + 1, "
                "platform_ids = ?, last_error = NULL WHERE id = ?",
                (self._now(), json.dumps(list(platform_ids)), outbox_id),
            )

    def drop_buttons(self, outbox_id: int) -> bool:
        """Take the buttons off a row not sent yet (it leaves without them); False when
        it is being sent or was sent already."""
        with self.db.transaction() as conn:
            cursor = conn.execute(
                "UPDATE channel_outbox SET buttons = NULL WHERE id = ? AND status = 'pending'",
                (outbox_id,),
            )
            return int(cursor.rowcount) > 0

    def retry_later(self, outbox_id: int, error: str, delay: float, *, give_up: bool) -> None:
        """Record a failed attempt: try again after ``delay`` seconds, or give up."""
        later = (self.clock.now() + timedelta(seconds=delay)).isoformat()
        with self.db.transaction() as conn:
            conn.execute(
                "UPDATE channel_outbox SET attempts = attempts + 1, last_error = ?, "
                "next_attempt_at = ?, status = ? WHERE id = ?",
                (error, later, "failed" if give_up else "pending", outbox_id),
            )

    def requeue(self, outbox_id: int) -> Queued | None:
        """Put a failed row back in the queue (``memvault channels outbox --retry``)."""
        with self.db.transaction() as conn:
            conn.execute(
                "UPDATE channel_outbox SET status = 'pending', attempts = 0, next_attempt_at = ? "
                "WHERE id = ? AND status = 'failed'",
                (self._now(), outbox_id),
            )
        return self.queued(outbox_id)

    def queued(self, outbox_id: int) -> Queued | None:
        """One outbox row."""
        rows = self.db.query("SELECT * FROM channel_outbox WHERE id = ?", (outbox_id,))
        return _queued(rows[0]) if rows else None

    def outbox(
        self, *, status: str | None = None, channel: str | None = None, limit: int = 50
    ) -> list[Queued]:
        """Outbox rows, newest first."""
        where, params = _where(status=status, channel=channel)
        rows = self.db.query(
            f"SELECT * FROM channel_outbox {where} ORDER BY id DESC LIMIT ?", (*params, limit)
        )
        return [_queued(row) for row in rows]

    def counts(self, channel: str) -> dict[str, int]:
        """Outbox rows of a channel by status."""
        rows = self.db.query(
            "SELECT status, count(*) AS n FROM channel_outbox WHERE channel = ? GROUP BY status",
            (channel,),
        )
        return {str(r["status"]): int(r["n"]) for r in rows}

    # -- senders -----------------------------------------------------------------------

    def sender(self, channel: str, sender_id: str) -> Sender | None:
        """What is known of a sender."""
        rows = self.db.query(
            "SELECT * FROM channel_senders WHERE channel = ? AND sender_id = ?",
            (channel, sender_id),
        )
        return _sender(rows[0]) if rows else None

    def seen(self, message: Inbound) -> Sender:
        """Count a message from a sender (a new sender is ``pending``)."""
        now = self._now()
        with self.db.transaction() as conn:
            conn.execute(
                "INSERT INTO channel_senders (channel, sender_id, chat_id, name, username, status, "
                "first_seen, last_seen, messages) VALUES (?, ?, ?, ?, ?, 'pending', ?, ?, 1) "
                "ON CONFLICT (channel, sender_id) DO UPDATE SET last_seen = excluded.last_seen, "
                "messages = channel_senders.messages + 1, name = excluded.name, "
                "username = excluded.username, "
                "chat_id = coalesce(channel_senders.chat_id, excluded.chat_id)",
                (
                    message.channel,
                    message.sender_id,
                    message.chat_id,
                    message.sender_name,
                    message.username,
                    now,
                    now,
                ),
            )
        found = self.sender(message.channel, message.sender_id)
        assert found is not None
        return found

    def senders(self, *, channel: str | None = None, status: str | None = None) -> list[Sender]:
        """Known senders, the most recent first."""
        where, params = _where(channel=channel, status=status)
        rows = self.db.query(
            f"SELECT * FROM channel_senders {where} ORDER BY last_seen DESC", params
        )
        return [_sender(row) for row in rows]

    def update_sender(self, channel: str, sender_id: str, **fields: Any) -> Sender:
        """Change a sender's row (status, code, owner_told, ...); it is created if needed."""
        now = self._now()
        with self.db.transaction() as conn:
            conn.execute(
                "INSERT OR IGNORE INTO channel_senders (channel, sender_id, status, first_seen, "
                "last_seen, messages) VALUES (?, ?, 'pending', ?, ?, 0)",
                (channel, sender_id, now, now),
            )
            for name, value in fields.items():
                if isinstance(value, datetime):
                    value = value.isoformat()
                conn.execute(
                    f"UPDATE channel_senders SET {name} = ? WHERE channel = ? AND sender_id = ?",
                    (value, channel, sender_id),
                )
        found = self.sender(channel, sender_id)
        assert found is not None
        return found

    # -- approvals ---------------------------------------------------------------------

    def open_approval(self, fields: dict[str, Any]) -> int:
        """Record a pending approval; its row id."""
        names = ", ".join(fields)
        marks = ", ".join("?" for _ in fields)
        with self.db.transaction() as conn:
            cursor = conn.execute(
                f"INSERT INTO channel_approvals ({names}) VALUES ({marks})", tuple(fields.values())
            )
            return int(cursor.lastrowid or 0)

    def close_approval(self, row_id: int, status: str, scope: str | None, by: str | None) -> bool:
        """Resolve a pending approval; False when it was no longer pending."""
        with self.db.transaction() as conn:
            cursor = conn.execute(
                "UPDATE channel_approvals SET status = ?, scope = ?, resolved_at = ?, "
                "resolved_by = ? WHERE id = ? AND status = 'pending'",
                (status, scope, self._now(), by, row_id),
            )
            return bool(cursor.rowcount)

    def resolved_approvals(self, limit: int = 50) -> list[dict[str, Any]]:
        """Approvals no longer waiting, newest first: what was asked, the answer (approved,
        denied, expired), its scope (once, always) and who gave it (``console``, or the
        channel and sender of a reply from the phone; none when it timed out)."""
        names = (
            "short_id, session, channel, tool, tier, category, summary, status, scope,"
            " requested_at, resolved_at, resolved_by"
        )
        rows = self.db.query(
            f"SELECT {names} FROM channel_approvals"
            " WHERE status != 'pending' ORDER BY resolved_at DESC, id DESC LIMIT ?",
            (limit,),
        )
        keys = [n.strip() for n in names.split(",")]
        return [{key: row[key] for key in keys} for row in rows]

    def pending_short_ids(self) -> set[str]:
        """Short ids of approvals still waiting."""
        rows = self.db.query("SELECT short_id FROM channel_approvals WHERE status = 'pending'")
        return {str(r["short_id"]) for r in rows}

    def expire_approvals(self) -> int:
        """Approvals a stopped daemon left waiting are expired (their runs are gone)."""
        with self.db.transaction() as conn:
            cursor = conn.execute(
                "UPDATE channel_approvals SET status = 'expired', resolved_at = ? "
                "WHERE status = 'pending'",
                (self._now(),),
            )
            return int(cursor.rowcount)


def _where(**filters: str | None) -> tuple[str, tuple[str, ...]]:
    """``WHERE a = ? AND b = ?`` for the filters given (None: not filtered), and the values."""
    given = {name: value for name, value in filters.items() if value}
    if not given:
        return "", ()
    return "WHERE " + " AND ".join(f"{name} = ?" for name in given), tuple(given.values())


def _queued(row: Any) -> Queued:
    buttons = json.loads(row["buttons"]) if row["buttons"] else []
    return Queued(
        id=int(row["id"]),
        channel=str(row["channel"]),
        chat_id=str(row["chat_id"]),
        kind=str(row["kind"]),
        text=str(row["text"]),
        reply_to=row["reply_to"],
        media=tuple(json.loads(row["media"])) if row["media"] else (),
        buttons=tuple(Button(label, data) for label, data in buttons),
        inbox_id=row["inbox_id"],
        part=int(row["part"]),
        parts=int(row["parts"]),
        status=str(row["status"]),
        attempts=int(row["attempts"]),
        next_attempt_at=datetime.fromisoformat(row["next_attempt_at"]),
        last_error=row["last_error"],
        created_at=datetime.fromisoformat(row["created_at"]),
        sent_at=_when(row["sent_at"]),
        platform_ids=tuple(str(i) for i in json.loads(row["platform_ids"] or "[]")),
    )


def _sender(row: Any) -> Sender:
    return Sender(
        channel=str(row["channel"]),
        sender_id=str(row["sender_id"]),
        chat_id=row["chat_id"],
        name=row["name"],
        username=row["username"],
        status=str(row["status"]),
        code=row["code"],
        code_expires_at=_when(row["code_expires_at"]),
        first_seen=datetime.fromisoformat(row["first_seen"]),
        last_seen=datetime.fromisoformat(row["last_seen"]),
        messages=int(row["messages"]),
        owner_told=bool(row["owner_told"]),
        decided_at=_when(row["decided_at"]),
        decided_by=row["decided_by"],
    )
