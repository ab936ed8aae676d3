"""The daily_note job: a summary of the day at the top of its journal note.

What the day held is gathered from the vault and state.db: memories created
that day, tasks created and closed, sessions that were active, messages per
channel chat, who wrote on which channel (matched to their contact notes),
and other jobs' runs. It is written as a ``## Summary`` inside
memvault's markers (see :mod:`memvault.jobs.marked_section`), right under
the note's title; the rest of the note is the owner's and is never touched.

Without a model (or with ``use_model = false``) the summary is a count line
and a bullet digest. With one, a single call turns the digest into a few
sentences, put above the digest; an answer that is cut off, empty or fails
leaves the digest alone, and the run's output says why.

A run before 03:00 summarises the day before: it is the catch-up of a
21:00 run missed while the daemon was down.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta
from typing import TYPE_CHECKING, Any

from memvault.errors import MemvaultError
from memvault.jobs.engine import JobContext, SkipRun
from memvault.jobs.marked_section import Markers, item_line
from memvault.jobs.model_draft import draft
from memvault.vault.memories import Memory
from memvault.vault.tasks import Task
from memvault.vocabulary import counted

if TYPE_CHECKING:
    from memvault.runtime import Runtime

DESCRIPTION = (
    "Writes the day's summary (memories, tasks, sessions, chats, job runs) into its journal note."
)

MARKERS = Markers("daily-summary")
HEADING = "## Summary"
# A run this early belongs to the day before (its own 21:00 run was missed).
CATCH_UP_BEFORE = time(3, 0)
MAX_ITEMS = 30  # per list; the rest is counted
MAX_ITEM_CHARS = 200
MODEL_ANSWER_TOKENS = 400
INSTRUCTIONS = (
    "You write the summary at the top of the owner's journal note for {day}. From the "
    "material, write two to five plain sentences on what happened that day: what was "
    "remembered, tasks started or finished, who they talked with, anything that stands "
    "out. Use only facts from the material. No headings, no lists, no preamble."
)


@dataclass
class DayDigest:
    """What one local day held, as lines ready for the note."""

    day: date
    remembered: list[str] = field(default_factory=list)
    tasks: list[str] = field(default_factory=list)
    sessions: list[str] = field(default_factory=list)
    conversations: list[str] = field(default_factory=list)
    contacts: list[str] = field(default_factory=list)  # who wrote, on which channel, how much
    runs: list[str] = field(default_factory=list)
    counts: list[str] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        """Whether nothing happened that day."""
        return not (
            self.remembered
            or self.tasks
            or self.sessions
            or self.conversations
            or self.contacts
            or self.runs
        )

    def lists(self) -> str:
        """The digest's bullet lists, each under a bold label: not a heading, which
        ``Journal.append`` could take for one of the note's own sections."""
        parts = []
        for title, items in (
            ("Remembered", self.remembered),
            ("Tasks", self.tasks),
            ("Sessions", self.sessions),
            ("Conversations", self.conversations),
            ("Contacts", self.contacts),
            ("Job runs", self.runs),
        ):
            if items:
                shown = items[:MAX_ITEMS]
                more = [f"- ({len(items) - MAX_ITEMS} more not shown)"] if items[MAX_ITEMS:] else []
                parts.append("\n".join([f"**{title}**", *shown, *more]))
        return "\n\n".join(parts)

    def count_line(self) -> str:
        """One sentence counting what the lists hold."""
        if not self.counts:
            return "Nothing was recorded this day."
        return ", ".join(self.counts).capitalize() + "."


def summary_day(moment: datetime) -> date:
    """The day a run at ``moment`` (local) summarises."""
    if moment.time() < CATCH_UP_BEFORE:
        return moment.date() - timedelta(days=1)
    return moment.date()


def run(ctx: JobContext) -> str | None:
    """Write (or rewrite) the summary section of the day's journal note."""
    services = ctx.services
    day = summary_day(ctx.clock.now())
    digest = gather(services, day, skip_job=ctx.job)
    path = services.journal.path_for(day)
    if digest.empty and not services.vault.is_file(path):
        raise SkipRun(
            f"Nothing happened on {day.isoformat()} (no memories, tasks, sessions, messages "
            "or job runs), so no journal note was made for it."
        )
    prose, how = None, "extractive"
    settings = ctx.settings
    if ctx.model is not None and (settings is None or settings.use_model) and not digest.empty:
        answer = draft(
            ctx.model,
            INSTRUCTIONS.format(day=day.strftime("%A %d %B %Y")),
            f"{digest.count_line()}\n\n{digest.lists()}",
            markers=MARKERS,
            max_tokens=MODEL_ANSWER_TOKENS,
        )
        if answer.text is not None:
            prose, how = _as_prose(answer.text), "by the model"
        else:
            how = f"extractive: {answer.problem}"
        if answer.cut:
            how += "; the material was cut to fit the token budget"
    body = "\n\n".join(p for p in (HEADING, prose, digest.count_line(), digest.lists()) if p)
    ctx.will_change(path)
    services.journal.ensure(day)

    def put(text: str | None) -> str:
        current = text or ""
        return MARKERS.put(current, body, path, insert_at=_after_title(current))

    services.vault.edit_text(path, put, must_exist=False)
    return f"Summarised {day.isoformat()} in {path} ({how}): {digest.count_line()}"


def gather(services: Runtime, day: date, *, skip_job: str | None = None) -> DayDigest:
    """What ``day`` held; ``skip_job``'s own runs are left out (they wrote this note)."""
    tz = services.clock.tz
    start = datetime.combine(day, time(0), tzinfo=tz)
    end = datetime.combine(day + timedelta(days=1), time(0), tzinfo=tz)
    digest = DayDigest(day)
    memories = [
        m
        for m in services.memories.all()
        if not m.said and _on(m.created, start, end)  # said: under conversations
    ]
    digest.remembered = [_memory_line(m) for m in memories]
    created, closed = _tasks(services, day)
    digest.tasks = [f"- Created [[{t.title}]] ({t.priority})" for t in created] + [
        f"- {'Completed' if t.status == 'done' else t.status.capitalize()} [[{t.title}]]"
        for t in closed
    ]
    digest.sessions = _sessions(services, start, end)
    conversations, messages = _conversations(services, start, end)
    digest.conversations = conversations
    digest.contacts, people = _contact_lines(services, start, end)
    digest.runs = _runs(services, start, end, skip_job)
    if memories:
        digest.counts.append(counted(len(memories), "memory") + " remembered")
    if created:
        digest.counts.append(counted(len(created), "task") + " created")
    if closed:
        digest.counts.append(counted(len(closed), "task") + " closed")
    if digest.sessions:
        digest.counts.append(counted(len(digest.sessions), "session"))
    if messages:
        digest.counts.append(
            f"{counted(messages, 'channel message')} in {counted(len(conversations), 'chat')}"
        )
    if people:
        digest.counts.append(f"{counted(people, 'person', 'people')} wrote")
    if digest.runs:
        digest.counts.append(counted(len(digest.runs), "job run"))
    return digest


def _on(moment: datetime | None, start: datetime, end: datetime) -> bool:
    return moment is not None and start <= moment < end


def _memory_line(memory: Memory) -> str:
    text = item_line(memory.text, MAX_ITEM_CHARS)
    return f"- {text} ({memory.category}, importance {memory.importance:g})"


def _tasks(services: Runtime, day: date) -> tuple[list[Task], list[Task]]:
    tasks = services.tasks.list(status="all")
    created = [t for t in tasks if t.created == day]
    closed = [t for t in tasks if t.completed == day and not t.is_open]
    return created, closed


def _window(start: datetime, end: datetime) -> tuple[str, str]:
    """ISO strings a day either side of [start, end): stored times carry their own offset,
    so rows are picked loosely in SQL and exactly in Python."""
    return (start - timedelta(days=1)).date().isoformat(), (end + timedelta(days=1)).isoformat()


def _parse(value: Any) -> datetime | None:
    try:
        return datetime.fromisoformat(str(value)) if value else None
    except ValueError:
        return None


def _sessions(services: Runtime, start: datetime, end: datetime) -> list[str]:
    low, high = _window(start, end)
    rows = services.state.query(
        "SELECT * FROM sessions WHERE started_at < ? "
        "AND coalesce(ended_at, last_message_at, started_at) >= ? ORDER BY started_at, id",
        (high, low),
    )
    lines = []
    tz = services.clock.tz
    for row in rows:
        began = _parse(row["started_at"])
        last = _parse(row["ended_at"]) or _parse(row["last_message_at"]) or began
        if began is None or last is None or not (began < end and last >= start):
            continue
        first, latest = began.astimezone(tz), last.astimezone(tz)
        shape = "%H:%M" if first.date() == latest.date() else "%Y-%m-%d %H:%M"
        span = f"{first.strftime(shape)} to {latest.strftime(shape)}"
        line = (
            f"- {item_line(row['key'], 80)} ({row['channel']}), "
            f"{counted(int(row['message_count']), 'message')}, {span}"
        )
        if row["ended_at"] is None:
            line += ", still open"
        if row["summary"]:
            line += f": {item_line(row['summary'], MAX_ITEM_CHARS)}"
        lines.append(line)
    return lines


def _conversations(services: Runtime, start: datetime, end: datetime) -> tuple[list[str], int]:
    """A line per channel chat with messages that day (in and out), and the total count."""
    low, high = _window(start, end)
    inbound: dict[tuple[str, str], int] = defaultdict(int)
    outbound: dict[tuple[str, str], int] = defaultdict(int)
    names: dict[tuple[str, str], str] = {}
    for row in services.state.query(
        "SELECT channel, chat_id, received_at, payload FROM channel_inbox "
        "WHERE received_at >= ? AND received_at < ? ORDER BY id",
        (low, high),
    ):
        if not _on(_parse(row["received_at"]), start, end):
            continue
        chat = (str(row["channel"]), str(row["chat_id"]))
        inbound[chat] += 1
        name = _sender_name(row["payload"])
        if name:
            names[chat] = name
    for row in services.state.query(
        "SELECT channel, chat_id, created_at FROM channel_outbox "
        "WHERE part = 1 AND created_at >= ? AND created_at < ? ORDER BY id",
        (low, high),
    ):
        if _on(_parse(row["created_at"]), start, end):
            outbound[(str(row["channel"]), str(row["chat_id"]))] += 1
    chats = sorted(set(inbound) | set(outbound), key=lambda c: (-inbound[c] - outbound[c], c))
    lines = []
    for chat in chats:
        who = f" ({item_line(names[chat], 60)})" if chat in names else ""
        lines.append(
            f"- {chat[0]} chat {item_line(chat[1], 60)}{who}: "
            f"{inbound[chat]} received, {outbound[chat]} sent"
        )
    return lines, sum(inbound.values()) + sum(outbound.values())


def _contact_lines(services: Runtime, start: datetime, end: datetime) -> tuple[list[str], int]:
    """A line per person who wrote that day, per channel: their contact note (or who they
    are when none matches), their messages, and the agent's replies in their chats; and
    how many people that is (a contact writing on two channels is one).

    From the sessions' logged messages: a sender is known by the id the channel gave
    (``sender_id``) and matched to a contact by that identity; the owner is not a contact
    interaction and is left out, as are messages without a sender (the terminal, the API).
    A reply counts for a person in a chat only they wrote in that day (not in a group).
    """
    low, high = _window(start, end)
    owners = {
        name: {str(i) for i in channel.owner}
        for name, channel in services.settings.channels.sections().items()
    }
    written: dict[tuple[str, str], int] = defaultdict(int)
    names: dict[tuple[str, str], str] = {}
    writers: dict[int, set[tuple[str, str]]] = defaultdict(set)
    replies: dict[int, int] = defaultdict(int)
    for row in services.state.query(
        "SELECT session_id, channel, direction, role, sender, sent_at, metadata FROM messages "
        "WHERE sent_at >= ? AND sent_at < ? AND role IN ('user', 'assistant') ORDER BY id",
        (low, high),
    ):
        if not _on(_parse(row["sent_at"]), start, end):
            continue
        session = int(row["session_id"])
        if row["role"] == "assistant":
            if not _metadata(row["metadata"]).get("tool_calls"):
                replies[session] += 1
            continue
        channel = str(row["channel"])
        sender_id = _metadata(row["metadata"]).get("sender_id") or row["sender"]
        if row["direction"] != "inbound" or not sender_id:
            continue
        if str(sender_id) in owners.get(channel, set()):
            continue
        who = (channel, str(sender_id))
        written[who] += 1
        writers[session].add(who)
        if row["sender"]:
            names[who] = str(row["sender"])
    answered: dict[tuple[str, str], int] = defaultdict(int)
    for session, wrote in writers.items():
        if len(wrote) == 1:
            answered[next(iter(wrote))] += replies[session]
    lines = []
    people: set[str] = set()
    for who in sorted(written, key=lambda w: (-written[w], w)):
        channel, sender_id = who
        contact = _contact_of(services, channel, sender_id)
        if contact is not None:
            people.add(contact)
            label = f"[[{contact}]] on {channel}"
        else:
            people.add(f"{channel}:{sender_id}")
            name = names.get(who)
            if name and name != sender_id:
                shown_id = item_line(sender_id, 60)
                label = f"{item_line(name, 60)} on {channel} (id {shown_id}, not a contact)"
            else:
                label = f"{item_line(sender_id, 60)} on {channel} (not a contact)"
        line = f"- {label}: {counted(written[who], 'message')}"
        if answered[who]:
            line += f", {counted(answered[who], 'reply', 'replies')}"
        lines.append(line)
    return lines, len(people)


def _contact_of(services: Runtime, channel: str, sender_id: str) -> str | None:
    """The name of the contact whose ``channel`` identity is ``sender_id``, if any."""
    try:
        contact = services.contacts.find_by_identity(channel, sender_id)
    except MemvaultError:  # a channel contacts have no identity on (the API, the terminal)
        return None
    return contact.name if contact is not None else None


def _metadata(value: Any) -> dict[str, Any]:
    try:
        data = json.loads(value) if value else None
    except (TypeError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _sender_name(payload: Any) -> str | None:
    try:
        data = json.loads(payload)
    except (TypeError, ValueError):
        return None
    name = data.get("sender_name") if isinstance(data, dict) else None
    return str(name) if name else None


def _runs(services: Runtime, start: datetime, end: datetime, skip_job: str | None) -> list[str]:
    low, high = _window(start, end)
    lines = []
    for row in services.state.query(
        "SELECT job, started, status, output, error FROM job_runs "
        "WHERE started >= ? AND started < ? AND status != 'running' ORDER BY started, id",
        (low, high),
    ):
        began = _parse(row["started"])
        if row["job"] == skip_job or began is None or not _on(began, start, end):
            continue
        what = row["error"] if row["status"] != "ok" else row["output"]
        first = next((x for x in str(what or "").splitlines() if x.strip()), "")
        line = f"- {began.astimezone(services.clock.tz):%H:%M} {row['job']}: {row['status']}"
        lines.append(f"{line}, {item_line(first, 120)}" if first else line)
    return lines


def _as_prose(text: str) -> str:
    """The model's answer as paragraphs: headings and comments defused."""
    lines = [
        line.lstrip("#").strip() if line.lstrip().startswith("#") else line
        for line in text.split("\n")
    ]
    return "\n".join(lines).replace("<!--", "&lt;!--").strip()


def _after_title(text: str) -> int | None:
    """The offset just after the note's ``# Title`` line (None: none, so at the end)."""
    offset = 0
    in_frontmatter = text.startswith("---")
    for number, line in enumerate(text.splitlines(keepends=True)):
        offset += len(line)
        stripped = line.strip()
        if in_frontmatter:
            if number > 0 and stripped == "---":
                in_frontmatter = False
            continue
        if stripped.startswith("# "):
            return offset
        if stripped.startswith("## "):
            return offset - len(line)
    return None
