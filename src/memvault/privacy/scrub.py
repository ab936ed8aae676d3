"""Forgetting in the state database: the rows that hold a copy of what is forgotten.

:mod:`memvault.privacy.forgetting` edits the vault's files; this module finds and removes
(or redacts) the rows of ``state.db`` (or PostgreSQL's state) that hold a forgotten
memory or person: chat messages, sessions' summaries, the channels' inbox, outbox and
approvals, the recall and read logs, consolidation's history, job runs' output and agent
runs' records. A :class:`Scope` says what is forgotten (the memories' :class:`Trace`, the
person) and holds the rules that tell a line holding it, which the file edits use too.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from memvault.memory.state import StateStore
from memvault.privacy.traces import Trace, prose_of
from memvault.vault.memories import Memory


@dataclass
class Person:
    """Someone being forgotten: their note, the names they go by, their identities."""

    path: str
    names: list[str]
    identities: dict[str, list[str]]

    def __post_init__(self) -> None:
        spelled = sorted({" ".join(n.split()) for n in self.names if n.strip()}, key=len)
        alternatives = "|".join(
            r"\s+".join(re.escape(w) for w in name.split()) for name in reversed(spelled)
        )
        self._names = re.compile(rf"(?<!\w)(?:{alternatives})(?!\w)", re.IGNORECASE)
        self.keys = {f"{ch}:{v}" for ch, values in self.identities.items() for v in values}
        self.slugs = {re.sub(r"[\W_]+", "-", n.casefold()).strip("-") for n in spelled}

    def mentions(self, line: str) -> bool:
        """Whether ``line`` names the person, links to their note or holds a chat key."""
        if self._names.search(line) is not None:
            return True
        return any(key in line for key in self.keys)

    def tagged(self, memory: Memory) -> bool:
        """Whether ``memory`` names the person or carries their name as a tag, or is a turn
        of a conversation with them (:mod:`memvault.privacy.capture`)."""
        if self._names.search(memory.text) is not None:
            return True
        if memory.source in self.keys or memory.fields.get("contact") == self.path[:-3]:
            return True
        return any(part in self.slugs for tag in memory.tags for part in tag.casefold().split("/"))


@dataclass
class Scope:
    """What one forgetting pass forgets, and the rules that tell a line holding it."""

    trace: Trace
    person: Person | None
    dropped: set[str] = field(default_factory=set)  # note stems dropped this pass

    def derived(self, line: str) -> bool:
        """The rule for job-written lines, with the person and the dropped notes."""
        return (
            self.trace.strong(line)
            or (self.person is not None and self.person.mentions(line))
            or self.links_dropped(line)
        )

    def captured(self, line: str) -> bool:
        """The rule for what people and conversations wrote, with the person."""
        return self.trace.exact(line) or (self.person is not None and self.person.mentions(line))

    def links_dropped(self, line: str) -> bool:
        """Whether ``line`` links to a note dropped in this pass."""
        return any(
            re.search(rf"\[\[(?:[^\]|#]*/)?{re.escape(s)}(?:[#|][^\]]*)?\]\]", line)
            for s in self.dropped
        )


# What each count of :func:`scrub_state` is: the receipt's action and its words.
STATE_PLACES = {
    "memory_recalls": ("removed", "when searches returned it"),
    "memory_reads": ("removed", "who read it"),
    "memory_changes": ("removed", "consolidation's history of it"),
    "memory_reviews": ("removed", "consolidation's reviews of it"),
    "messages": ("removed", "chat messages that cited or copied it"),
    "session summaries": ("removed", "sentences of sessions' summaries"),
    "channel inbox": ("redacted", "messages received: their text"),
    "channel outbox": ("redacted", "messages sent: their text"),
    "approvals": ("redacted", "approval requests: their summary"),
    "job runs": ("redacted", "job runs' output: its words"),
    "agent runs": ("redacted", "agent runs' records: their context and tool calls"),
    "events": ("removed", "events daemons sent each other (memvault_events)"),
    "sessions": ("removed", "the person's sessions and their messages"),
    "senders": ("removed", "the person's identities on the channels"),
}


def count_chats(state: StateStore, person: Person) -> int:
    """How many chat messages were captured from (or sent to) ``person``."""
    keys = sorted(person.keys)
    if not keys:
        return 0
    marks = ",".join("?" * len(keys))
    rows = state.query(
        f"SELECT count(*) FROM messages m JOIN sessions s ON s.id = m.session_id "
        f"WHERE s.key IN ({marks})",
        tuple(keys),
    )
    return int(rows[0][0]) if rows else 0


def scrub_state(conn: Any, scope: Scope, *, events: bool) -> dict[str, int]:
    """Remove or redact, in one transaction ``conn`` of the state database, every row
    that holds what ``scope`` forgets: counts by place (:data:`STATE_PLACES` names them).
    ``events``: the database also holds the events daemons sent each other (PostgreSQL)."""
    trace, person = scope.trace, scope.person
    ids = sorted(trace.ids)
    counts: dict[str, int] = {}
    if person is not None:
        counts.update(_forget_person_rows(conn, person))
    if ids:
        marks = ",".join("?" * len(ids))
        for table, column in (
            ("memory_recalls", "memory_id"),
            ("memory_reads", "memory_id"),
        ):
            counts[table] = _deleted(
                conn.execute(f"DELETE FROM {table} WHERE {column} IN ({marks})", ids)
            )
        counts["memory_changes"] = _deleted(
            conn.execute(
                f"DELETE FROM memory_changes WHERE memory_id IN ({marks}) "
                f"OR related_id IN ({marks})",
                ids + ids,
            )
        )
        reviews = [
            int(r["id"])
            for r in conn.execute(
                "SELECT id, memory_id, text, target, candidates FROM memory_reviews"
            ).fetchall()
            if str(r["memory_id"]) in trace.ids
            or str(r["target"] or "") in trace.ids
            or trace.exact(str(r["text"]))
            or trace.cites(str(r["candidates"] or ""))
        ]
        counts["memory_reviews"] = _delete_ids(conn, "memory_reviews", reviews)
    if not trace.empty:
        counts["messages"] = _forget_messages(conn, scope)
        counts["session summaries"] = _scrub_summaries(conn, scope)
        counts["channel inbox"], counts["channel outbox"], counts["approvals"] = _scrub_channels(
            conn, scope
        )
        counts["job runs"] = _redact_runs(conn, trace)
        counts["agent runs"] = _redact_agent_runs(conn, trace)
        if events:
            counts["events"] = _scrub_events(conn, scope)
    return counts


def _deleted(cursor: Any) -> int:
    return max(int(getattr(cursor, "rowcount", 0) or 0), 0)


def _delete_ids(conn: Any, table: str, ids: Sequence[int], key: str = "id") -> int:
    """Delete the rows whose ``key`` is one of ``ids``, 500 at a time; how many went."""
    total = 0
    for start in range(0, len(ids), 500):
        batch = list(ids[start : start + 500])
        total += _deleted(
            conn.execute(
                f"DELETE FROM {table} WHERE {key} IN ({','.join('?' * len(batch))})", batch
            )
        )
    return total


def _likes(trace: Trace, person: Person | None) -> list[str]:
    """LIKE patterns (lower case) that every row holding a trace matches one of: the ids,
    a word of each text, the distinctive words, the person's names and chat keys."""
    patterns = {f"%{i}%" for i in trace.ids}
    for text in trace.texts:
        longest = max(re.findall(r"[a-z0-9]+", text) or [""], key=len)
        patterns.add(f"%{longest}%" if len(longest) >= 3 else "%")
    patterns |= {f"%{w}%" for w in trace.words if w.isascii()}
    if any(not w.isascii() for w in trace.words):
        patterns.add("%")  # SQLite's lower() folds ASCII only: look at every row
    if person is not None:
        patterns |= {f"%{n.casefold()}%" if n.isascii() else "%" for n in person.names}
        patterns |= {f"%{k.casefold()}%" for k in person.keys}
    return sorted(patterns)


def _candidates(conn: Any, select: str, column: str, patterns: Sequence[str]) -> list[Any]:
    """The rows of ``select`` whose ``column`` matches one of the LIKE ``patterns`` (every
    row when one of them is ``%``): the few worth reading in Python."""
    if "%" in patterns:
        return list(conn.execute(select).fetchall())
    where = " OR ".join(f"lower({column}) LIKE ?" for _ in patterns)
    return list(conn.execute(f"{select} WHERE ({where})", list(patterns)).fetchall())


def _forget_messages(conn: Any, scope: Scope) -> int:
    """Delete the chat messages that cite or copy a forgotten memory (or that the person
    sent); their sessions' counts follow."""
    patterns = _likes(scope.trace, scope.person)
    rows = _candidates(
        conn, "SELECT id, session_id, role, text, sender, metadata FROM messages", "text", patterns
    )
    person = scope.person
    doomed = [
        (int(r["id"]), int(r["session_id"]))
        for r in rows
        if scope.trace.exact(str(r["text"]))
        or (
            person is not None
            and (
                person.mentions(str(r["text"]))
                or (str(r["role"]) == "user" and person.mentions(str(r["sender"] or "")))
            )
        )
    ]
    if person is not None:  # what the person sent in a group chat, by their sender id
        values = sorted({v for vs in person.identities.values() for v in vs})
        for value in values:
            for row in conn.execute(
                "SELECT id, session_id, metadata FROM messages WHERE role = 'user' "
                "AND metadata LIKE ?",
                (f"%{value}%",),
            ).fetchall():
                try:
                    meta = json.loads(row["metadata"] or "{}")
                except ValueError:
                    continue
                if isinstance(meta, dict) and str(meta.get("sender_id", "")) == value:
                    doomed.append((int(row["id"]), int(row["session_id"])))
    ids = sorted({d[0] for d in doomed})
    count = _delete_ids(conn, "messages", ids)
    for session_id in sorted({d[1] for d in doomed}):
        conn.execute(
            "UPDATE sessions SET message_count = "
            "(SELECT count(*) FROM messages WHERE session_id = ?) WHERE id = ?",
            (session_id, session_id),
        )
    return count


def _scrub_summaries(conn: Any, scope: Scope) -> int:
    """Sessions' summaries (a job's or a model's words): their sentences about it go."""
    changed = 0
    for row in conn.execute(
        "SELECT id, summary FROM sessions WHERE summary IS NOT NULL"
    ).fetchall():
        summary = str(row["summary"])
        left = prose_of(summary, scope.derived)
        if left != summary:
            conn.execute("UPDATE sessions SET summary = ? WHERE id = ?", (left, int(row["id"])))
            changed += 1
    return changed


FORGOTTEN = "[forgotten]"


def _scrub_channels(conn: Any, scope: Scope) -> tuple[int, int, int]:
    """The channels' inbox (what arrived), outbox (what was sent) and approval requests:
    text that cites or copies it is replaced (the rows stay, so a redelivered message is
    still known as one)."""
    patterns = _likes(scope.trace, scope.person)
    inbox = 0
    for row in _candidates(conn, "SELECT id, payload FROM channel_inbox", "payload", patterns):
        try:
            payload = json.loads(row["payload"])
        except ValueError:
            continue
        if not isinstance(payload, dict) or not scope.captured(str(payload.get("text", ""))):
            continue
        payload["text"] = FORGOTTEN
        conn.execute(
            "UPDATE channel_inbox SET payload = ? WHERE id = ?",
            (json.dumps(payload, ensure_ascii=False), int(row["id"])),
        )
        inbox += 1
    outbox = 0
    for row in _candidates(conn, "SELECT id, text FROM channel_outbox", "text", patterns):
        if scope.captured(str(row["text"])) or scope.trace.strong(str(row["text"])):
            conn.execute(
                "UPDATE channel_outbox SET text = ? WHERE id = ?", (FORGOTTEN, int(row["id"]))
            )
            outbox += 1
    approvals = 0
    for row in _candidates(conn, "SELECT id, summary FROM channel_approvals", "summary", patterns):
        if scope.captured(str(row["summary"])):
            conn.execute(
                "UPDATE channel_approvals SET summary = ? WHERE id = ?",
                (FORGOTTEN, int(row["id"])),
            )
            approvals += 1
    return inbox, outbox, approvals


def _scrub_events(conn: Any, scope: Scope) -> int:
    """The events PostgreSQL keeps an hour for daemons that reconnect (a stored memory's
    text, a message's): those holding a trace go; ``memory_forgotten`` stays, so every
    daemon's clients learn what to drop."""
    patterns = _likes(scope.trace, scope.person)
    rows = _candidates(
        conn,
        "SELECT seq, type, payload::text AS payload FROM memvault_events",
        "payload::text",
        patterns,
    )
    doomed = [
        int(r["seq"])
        for r in rows
        if r["type"] != "memory_forgotten" and scope.derived(str(r["payload"]))
    ]
    return _delete_ids(conn, "memvault_events", doomed, key="seq")


def _redact_runs(conn: Any, trace: Trace) -> int:
    """Job runs' output, error and metadata with the memory's ids and words replaced (a
    run's line names an insight by its title, and a title is made of such words)."""
    patterns = sorted({f"%{i}%" for i in trace.ids} | {f"%{w}%" for w in trace.words})
    if not patterns:
        return 0
    columns = ("output", "coalesce(error, '')", "metadata")
    clause = " OR ".join(f"lower({c}) LIKE ?" for _ in patterns for c in columns)
    params = [p for p in patterns for _ in range(3)]
    changed = 0
    for row in conn.execute(
        f"SELECT id, output, error, metadata FROM job_runs WHERE {clause}", params
    ).fetchall():
        output = trace.redact(str(row["output"] or ""))
        error = None if row["error"] is None else trace.redact(str(row["error"]))
        metadata = _redact_json(str(row["metadata"] or "{}"), trace)
        if (output, error, metadata) != (row["output"], row["error"], row["metadata"]):
            conn.execute(
                "UPDATE job_runs SET output = ?, error = ?, metadata = ? WHERE id = ?",
                (output, error, metadata, int(row["id"])),
            )
            changed += 1
    return changed


def _redact_agent_runs(conn: Any, trace: Trace) -> int:
    """Agent runs' records (memvault.memory.runs) with the memory's ids and words replaced
    in what each was asked, given, recalled and called."""
    patterns = sorted({f"%{i}%" for i in trace.ids} | {f"%{w}%" for w in trace.words})
    if not patterns:
        return 0
    columns = ("command", "summary", "context", "recalled", "marks", "tool_calls")
    clause = " OR ".join(f"lower({c}) LIKE ?" for _ in patterns for c in columns)
    params = [p for p in patterns for _ in columns]
    changed = 0
    for row in conn.execute(
        f"SELECT id, command, summary, context, recalled, marks, tool_calls FROM agent_runs "
        f"WHERE {clause}",
        params,
    ).fetchall():
        now = (
            trace.redact(str(row["command"])),
            trace.redact(str(row["summary"] or "")),
            _redact_json(str(row["context"] or "{}"), trace),
            _redact_json(str(row["recalled"] or "[]"), trace),
            _redact_json(str(row["marks"] or "{}"), trace),
            _redact_json(str(row["tool_calls"] or "[]"), trace),
        )
        if now != tuple(row[c] for c in columns):
            conn.execute(
                "UPDATE agent_runs SET command = ?, summary = ?, context = ?, recalled = ?, "
                "marks = ?, tool_calls = ? WHERE id = ?",
                (*now, int(row["id"])),
            )
            changed += 1
    return changed


def _redact_json(text: str, trace: Trace) -> str:
    """A JSON document with its string values redacted (its keys and shape kept)."""
    try:
        data = json.loads(text)
    except ValueError:
        return trace.redact(text)

    def walk(value: Any) -> Any:
        if isinstance(value, str):
            return trace.redact(value)
        if isinstance(value, list):
            return [walk(v) for v in value]
        if isinstance(value, dict):
            return {k: walk(v) for k, v in value.items()}
        return value

    redacted = walk(data)
    return text if redacted == data else json.dumps(redacted)


def _forget_person_rows(conn: Any, person: Person) -> dict[str, int]:
    """The person's sessions (their messages go with them), their identities on the
    channels (a message from them is a stranger's again), and what was queued to them."""
    counts = {"sessions": 0, "senders": 0}
    keys = sorted(person.keys)
    if keys:
        marks = ",".join("?" * len(keys))
        sessions = [
            int(r[0]) for r in conn.execute(f"SELECT id FROM sessions WHERE key IN ({marks})", keys)
        ]
        for session_id in sessions:  # not left to the foreign key: it may be off
            conn.execute("DELETE FROM messages WHERE session_id = ?", (session_id,))
            conn.execute("DELETE FROM agent_runs WHERE session_id = ?", (session_id,))
        counts["sessions"] = _delete_ids(conn, "sessions", sessions)
    for channel, values in person.identities.items():
        for value in values:
            counts["senders"] += _deleted(
                conn.execute(
                    "DELETE FROM channel_senders WHERE channel = ? AND sender_id = ?",
                    (channel, value),
                )
            )
            conn.execute(
                "DELETE FROM channel_outbox WHERE channel = ? AND chat_id = ?", (channel, value)
            )
            conn.execute(
                "DELETE FROM channel_approvals WHERE channel = ? AND chat_id = ?",
                (channel, value),
            )
            conn.execute(
                "DELETE FROM channel_inbox WHERE channel = ? AND sender_id = ? "
                "AND status NOT IN ('new', 'held')",
                (channel, value),
            )
    return counts
