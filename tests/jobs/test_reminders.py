"""The reminders job on a movable clock: when reminders fire, and that each fires once."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest

from channel_support import OWNER, delivered
from memvault.channels.hub import Hub
from memvault.config import RemindersJob, Settings
from memvault.jobs import Job, JobEngine, JobRun, Schedule, reminders
from memvault.runtime import Runtime
from support import TZ, HashEmbedder, MovableClock
from telegram_fake import FakeTelegram
from waiting import WAIT, wait_for


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=TZ)


class Outbox:
    """A notify that records what it was asked to send and answers like the hub."""

    def __init__(self, status: str = "sent") -> None:
        self.status = status
        self.sent: list[tuple[str, str | None]] = []

    def __call__(self, text: str, channel: str | None) -> dict[str, Any]:
        self.sent.append((text, channel))
        error = "chat not found" if self.status == "failed" else None
        return {"adapter": channel or "telegram", "status": self.status, "error": error}

    @property
    def texts(self) -> list[str]:
        return [text for text, _ in self.sent]


def engine(runtime: Runtime, clock: MovableClock, notify: Any, **settings: Any) -> JobEngine:
    job = Job(
        "reminders",
        Schedule(every_seconds=60),
        reminders.run,
        settings=RemindersJob(**settings),
    )
    return JobEngine(runtime.state, clock, [job], runtime=runtime, notify=notify)


def run_at(jobs: JobEngine, clock: MovableClock, moment: str) -> JobRun:
    clock.set(at(moment))
    return jobs.run_now("reminders")


@pytest.fixture
def outbox() -> Outbox:
    return Outbox()


def test_a_task_due_on_a_day_fires_at_remind_at_and_not_before(
    runtime: Runtime, clock: MovableClock, outbox: Outbox
) -> None:
    runtime.tasks.create("Pay rent", due="2026-11-23")
    jobs = engine(runtime, clock, outbox, remind_at="09:00", channel="telegram")

    assert run_at(jobs, clock, "2026-11-22T23:00").output == "nothing due"
    assert run_at(jobs, clock, "2026-11-23T08:59").output == "nothing due"
    assert outbox.sent == []

    run = run_at(jobs, clock, "2026-11-23T09:00")

    assert (run.status, run.output) == ("ok", "Pay rent is due today\n1 reminder sent")
    assert outbox.sent == [("Reminder: Pay rent is due today.", "telegram")]
    assert run.metadata["reminders"] == [
        {
            "key": "task:Tasks/active/Pay rent.md:2026-11-23",
            "kind": "due",
            "path": "Tasks/active/Pay rent.md",
        }
    ]


def test_a_reminder_fires_once_across_runs_and_a_restart(
    runtime: Runtime, clock: MovableClock, outbox: Outbox
) -> None:
    runtime.tasks.create("Call the plumber", due="2026-11-23")
    run_at(engine(runtime, clock, outbox), clock, "2026-11-23T09:01")
    assert len(outbox.sent) == 1

    assert run_at(engine(runtime, clock, outbox), clock, "2026-11-23T09:02").output == "nothing due"
    # A restart: a new runtime and engine on the same vault and state.db, a day later.
    settings = Settings(vault=runtime.vault.root, timezone="Europe/Berlin")
    again = Runtime.open(settings, clock=clock, embedder=HashEmbedder())
    try:
        later = run_at(engine(again, clock, outbox), clock, "2026-11-24T10:00")
    finally:
        again.close()
    assert later.output == "nothing due"
    assert len(outbox.sent) == 1


def test_the_engine_runs_it_on_its_interval(
    runtime: Runtime, clock: MovableClock, outbox: Outbox
) -> None:
    runtime.tasks.create("Water plants", due="2026-11-22")
    clock.set(at("2026-11-22T08:58:30"))
    jobs = engine(runtime, clock, outbox)
    outputs = []
    for moment in ("08:59:30", "09:00:30", "09:01:30", "09:02:30"):  # one tick a minute
        clock.set(at(f"2026-11-22T{moment}"))
        outputs.append([run.output for run in jobs.tick()])
    assert outputs == [
        ["nothing due"],
        ["Water plants is due today\n1 reminder sent"],
        ["nothing due"],
        ["nothing due"],
    ]
    assert outbox.texts == ["Reminder: Water plants is due today."]


def test_a_queued_send_counts_as_sent(runtime: Runtime, clock: MovableClock) -> None:
    queued = Outbox("queued")
    runtime.tasks.create("Book flights", due="2026-11-22")
    jobs = engine(runtime, clock, queued)
    assert run_at(jobs, clock, "2026-11-22T09:30").output.endswith("1 reminder queued")
    assert run_at(jobs, clock, "2026-11-22T09:31").output == "nothing due"
    assert len(queued.sent) == 1


def test_a_failed_send_is_tried_again(runtime: Runtime, clock: MovableClock) -> None:
    broken = Outbox("failed")
    runtime.tasks.create("Renew passport", due="2026-11-22")
    jobs = engine(runtime, clock, broken)

    run = run_at(jobs, clock, "2026-11-22T09:30")

    assert run.status == "failed"
    assert run.error == (
        "The reminder message could not be sent (chat not found); "
        "it is tried again at the next run."
    )
    broken.status = "sent"
    assert run_at(jobs, clock, "2026-11-22T09:40").output.endswith("1 reminder sent")
    assert len(broken.sent) == 2


def test_a_changed_due_date_fires_again(
    runtime: Runtime, clock: MovableClock, outbox: Outbox
) -> None:
    runtime.tasks.create("Dentist", due="2026-11-22")
    jobs = engine(runtime, clock, outbox)
    run_at(jobs, clock, "2026-11-22T09:30")
    runtime.tasks.update("Dentist", "due", "2026-11-25")

    assert run_at(jobs, clock, "2026-11-24T09:30").output == "nothing due"
    run_at(jobs, clock, "2026-11-25T09:00")

    assert outbox.texts == ["Reminder: Dentist is due today."] * 2


def test_a_completed_task_gets_no_reminder(
    runtime: Runtime, clock: MovableClock, outbox: Outbox
) -> None:
    runtime.tasks.create("Send invoice", due="2026-11-22")
    runtime.tasks.complete("Send invoice")
    jobs = engine(runtime, clock, outbox)
    assert run_at(jobs, clock, "2026-11-22T09:30").output == "nothing due"
    assert run_at(jobs, clock, "2026-11-30T09:30").output == "nothing due"
    assert outbox.sent == []


def test_an_overdue_task_gets_one_overdue_reminder(
    runtime: Runtime, clock: MovableClock, outbox: Outbox
) -> None:
    runtime.tasks.create("File taxes", due="2026-11-18")  # the daemon was down since
    jobs = engine(runtime, clock, outbox)

    run = run_at(jobs, clock, "2026-11-22T09:30")
    for day in ("23", "24", "25"):
        run_at(jobs, clock, f"2026-11-{day}T09:30")

    assert outbox.texts == ["Reminder: File taxes was due Wed 18 Nov 2026 (overdue)."]
    assert run.metadata["reminders"][0]["kind"] == "overdue"


def test_a_due_time_is_kept(runtime: Runtime, clock: MovableClock, write: Any) -> None:
    task = runtime.tasks.create("Pick up Mia", due="2026-11-23")
    text = runtime.vault.read_text(task.path).replace("due: 2026-11-23", "due: 2026-11-23 14:30")
    write(task.path, text)
    outbox = Outbox()
    jobs = engine(runtime, clock, outbox, remind_at="09:00")

    assert run_at(jobs, clock, "2026-11-23T09:00").output == "nothing due"
    assert run_at(jobs, clock, "2026-11-23T14:29").output == "nothing due"
    run_at(jobs, clock, "2026-11-23T14:30")

    assert outbox.texts == ["Reminder: Pick up Mia is due at 14:30."]


def test_a_contact_follow_up_fires(
    runtime: Runtime, clock: MovableClock, outbox: Outbox, write: Any
) -> None:
    ana = runtime.contacts.create("Ana Silva", relationship="friend")
    text = runtime.vault.read_text(ana.path).replace("---\n", "---\nfollow_up: 2026-11-24\n", 1)
    write(ana.path, text)
    assert runtime.contacts.get("Ana Silva").follow_up is not None
    jobs = engine(runtime, clock, outbox, remind_at="10:15")

    assert run_at(jobs, clock, "2026-11-24T10:14").output == "nothing due"
    run = run_at(jobs, clock, "2026-11-24T10:15")
    run_at(jobs, clock, "2026-11-25T10:15")

    assert outbox.texts == ["Reminder: Follow up with Ana Silva (planned for today)."]
    assert run.metadata["reminders"][0]["key"] == "follow_up:Contacts/Ana Silva.md:2026-11-24"


def test_several_due_at_once_make_one_message(
    runtime: Runtime, clock: MovableClock, outbox: Outbox
) -> None:
    runtime.tasks.create("Pay rent", due="2026-11-22")
    runtime.tasks.create("Old bill", due="2026-11-20")
    runtime.tasks.create("Later thing", due="2026-11-29")
    runtime.tasks.create("No date")

    run = run_at(engine(runtime, clock, outbox), clock, "2026-11-22T09:30")

    assert outbox.texts == [
        "Reminders:\n- Old bill was due Fri 20 Nov 2026 (overdue)\n- Pay rent is due today"
    ]
    assert run.output.endswith("2 reminders sent")


def test_without_a_channel_to_the_owner_it_skips_and_keeps_them(
    runtime: Runtime, clock: MovableClock, outbox: Outbox
) -> None:
    runtime.tasks.create("Pay rent", due="2026-11-22")

    run = run_at(engine(runtime, clock, None), clock, "2026-11-22T09:30")

    assert run.status == "skipped"
    assert run.error == (
        "1 reminder wait: no channel can reach the owner; "
        "enable a channel with an owner ([channels.NAME] owner = ...)."
    )
    run_at(engine(runtime, clock, outbox), clock, "2026-11-22T09:31")
    assert outbox.texts == ["Reminder: Pay rent is due today."]


def test_a_bad_remind_at_is_refused_when_the_config_loads(runtime: Runtime) -> None:
    from memvault.config import load_settings
    from memvault.errors import ConfigError

    overrides = {"jobs": {"reminders": {"remind_at": "9am"}}}
    with pytest.raises(ConfigError, match="remind_at"):
        load_settings(runtime.vault.root, overrides=overrides)


def test_the_reminder_reaches_the_owner_on_telegram(
    telegram_runtime: Runtime, clock: MovableClock, tg: FakeTelegram
) -> None:
    runtime = telegram_runtime
    runtime.tasks.create("Pay rent", due="2026-11-22")
    hub = Hub(runtime)
    hub.start()
    try:
        jobs = engine(
            runtime, clock, lambda text, ch: hub.send(ch or "telegram", "owner", text, wait=WAIT)
        )
        run = run_at(jobs, clock, "2026-11-22T09:30")
        wait_for(lambda: delivered(tg, OWNER), "the reminder to reach the owner")
        again = run_at(jobs, clock, "2026-11-22T09:31")
    finally:
        hub.stop()

    assert run.status == "ok", run.error
    assert run.metadata["sent"] == {"status": "sent", "channel": "telegram"}
    assert delivered(tg, OWNER) == ["Reminder: Pay rent is due today."]
    assert again.output == "nothing due"
