"""The reminders job: due tasks and contact follow-ups, messaged to the owner once each.

An open task with a due date is announced at ``remind_at`` (local time) on
that day, or at the time its due date names (``due: 2026-11-23 14:30``); a
contact whose note has ``follow_up: 2026-11-23`` in its frontmatter is
announced at ``remind_at`` that day. A run after that moment sends it: the
daemon down at 09:00 sends it when it is back, and a task whose day has
passed gets one "overdue" reminder, never one a day. Several at once go in
one message. No model is used.

Once means once: each reminder's key (what it is for and its date, e.g.
``task:Tasks/active/Pay rent.md:2026-11-23``) goes into ``reminders_sent``
in state.db when the channel has sent or queued the message, so a restart
does not repeat it; a task given a new due date is a new reminder; a closed
task gets none.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from typing import TYPE_CHECKING, Any

from memvault.config import RemindersJob
from memvault.errors import InvalidInputError, MemvaultError
from memvault.jobs.engine import SkipRun
from memvault.vocabulary import counted

if TYPE_CHECKING:
    from memvault.jobs.engine import JobContext
    from memvault.runtime import Runtime

DESCRIPTION = "Message the owner when a task falls due or a contact's follow-up date comes."

_HH_MM = re.compile(r"^([01]?\d|2[0-3]):([0-5]\d)$")


@dataclass(frozen=True)
class Reminder:
    """One thing to tell the owner, and the moment it became due."""

    key: str
    kind: str  # "due", "overdue" or "follow_up"
    path: str
    moment: datetime
    text: str

    def to_dict(self) -> dict[str, str]:
        """What the run's metadata keeps of it."""
        return {"key": self.key, "kind": self.kind, "path": self.path}


def remind_time(value: str) -> time:
    """``remind_at`` as a time of day; a clear error for anything but HH:MM."""
    match = _HH_MM.match(value.strip())
    if match is None:
        raise InvalidInputError(
            f"jobs.reminders.remind_at must be a time of day as HH:MM, e.g. 09:00 (got {value!r})."
        )
    return time(int(match.group(1)), int(match.group(2)))


def _day(day: date, today: date) -> str:
    if day == today:
        return "today"
    if day == today - timedelta(days=1):
        return "yesterday"
    return f"{day:%a %d %b %Y}"


def due_reminders(runtime: Runtime, now: datetime, remind_at: time) -> list[Reminder]:
    """Every reminder whose moment has come by ``now``, sent or not, oldest first."""
    tz = now.tzinfo
    today = now.date()
    found: list[Reminder] = []
    for task in runtime.tasks.list():  # open tasks only
        if task.due is None:
            continue
        moment = datetime.combine(task.due, task.due_time or remind_at, tzinfo=tz)
        if moment > now:
            continue
        stamp = task.due.isoformat() + (f"T{task.due_time:%H:%M}" if task.due_time else "")
        if task.due < today:
            kind, text = "overdue", f"{task.title} was due {_day(task.due, today)} (overdue)"
        elif task.due_time is not None:
            kind, text = "due", f"{task.title} is due at {task.due_time:%H:%M}"
        else:
            kind, text = "due", f"{task.title} is due today"
        found.append(Reminder(f"task:{task.path}:{stamp}", kind, task.path, moment, text))
    for contact in runtime.contacts.list():
        if contact.follow_up is None:
            continue
        moment = datetime.combine(contact.follow_up, remind_at, tzinfo=tz)
        if moment > now:
            continue
        text = f"Follow up with {contact.name} (planned for {_day(contact.follow_up, today)})"
        key = f"follow_up:{contact.path}:{contact.follow_up.isoformat()}"
        found.append(Reminder(key, "follow_up", contact.path, moment, text))
    found.sort(key=lambda r: (r.moment, r.text))
    return found


def message(reminders: list[Reminder]) -> str:
    """The one message telling the owner about ``reminders``."""
    if len(reminders) == 1:
        return f"Reminder: {reminders[0].text}."
    return "Reminders:\n" + "\n".join(f"- {r.text}" for r in reminders)


def _sent_keys(ctx: JobContext, keys: list[str]) -> set[str]:
    if not keys:
        return set()
    rows = ctx.services.state.query(
        f"SELECT key FROM reminders_sent WHERE key IN ({','.join('?' * len(keys))})",
        tuple(keys),
    )
    return {str(row["key"]) for row in rows}


def run(ctx: JobContext) -> str:
    """Send the reminders that have come due and were not sent before."""
    settings: RemindersJob = ctx.settings or RemindersJob()
    now = ctx.clock.now()
    due = due_reminders(ctx.services, now, remind_time(settings.remind_at))
    sent_before = _sent_keys(ctx, [r.key for r in due])
    pending = [r for r in due if r.key not in sent_before]
    if not pending:
        return "nothing due"
    if ctx.notify is None:
        raise SkipRun(
            f"{counted(len(pending), 'reminder')} wait: no channel can reach the owner; "
            "enable a channel with an owner ([channels.NAME] owner = ...)."
        )
    result: dict[str, Any] = ctx.notify(message(pending), settings.channel)
    status = str(result.get("status", ""))
    ctx.metadata["reminders"] = [r.to_dict() for r in pending]
    ctx.metadata["sent"] = {"status": status, "channel": result.get("adapter", settings.channel)}
    if status not in ("sent", "queued"):
        why = result.get("error") or status or "no answer"
        raise MemvaultError(
            f"The reminder message could not be sent ({why}); it is tried again at the next run."
        )
    stamp = now.isoformat(timespec="seconds")
    with ctx.services.state.transaction() as conn:
        conn.executemany(
            "INSERT INTO reminders_sent (key, sent_at, run_id, status) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (key) DO NOTHING",
            [(r.key, stamp, ctx.run_id, status) for r in pending],
        )
    for reminder in pending:
        ctx.record(reminder.text)
    return f"{counted(len(pending), 'reminder')} {status}"
