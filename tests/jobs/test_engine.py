"""The job engine on a movable clock: cron across DST, crash recovery, catch-up, backoff."""

from __future__ import annotations

import threading
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from memvault.errors import ConflictError, NotFoundError
from memvault.jobs import Job, JobContext, JobEngine, Schedule
from memvault.memory.state import StateDB
from support import TZ, MovableClock
from waiting import WAIT, wait_for

pytestmark = pytest.mark.both_backends


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=TZ)


@pytest.fixture
def state(tmp_path: Path) -> StateDB:
    return StateDB(tmp_path / ".memvault")


def ticks(schedule: Schedule, start: datetime, count: int) -> list[str]:
    out, moment = [], start
    for _ in range(count):
        moment = schedule.next_after(moment, TZ)
        out.append(moment.isoformat())
    return out


def test_cron_keeps_local_time_across_spring_forward() -> None:
    # Berlin skips 02:00-03:00 on the last Sunday of March (2026-03-29).
    daily = Schedule(cron="30 9 * * *")
    assert ticks(daily, at("2026-03-28T10:00"), 2) == [
        "2026-03-29T09:30:00+02:00",
        "2026-03-30T09:30:00+02:00",
    ]
    assert ticks(daily, at("2026-03-27T10:00"), 1) == ["2026-03-28T09:30:00+01:00"]


def test_cron_keeps_local_time_across_fall_back() -> None:
    # Berlin repeats 02:00-03:00 on the last Sunday of October (2026-10-25).
    daily = Schedule(cron="0 8 * * *")
    assert ticks(daily, at("2026-10-24T09:00"), 2) == [
        "2026-10-25T08:00:00+01:00",
        "2026-10-26T08:00:00+01:00",
    ]


def test_hourly_cron_steps_over_the_missing_hour() -> None:
    hourly = Schedule(cron="0 * * * *")
    got = ticks(hourly, at("2026-03-29T00:30"), 3)
    utc = [datetime.fromisoformat(t).astimezone(TZ).utcoffset() for t in got]
    assert got[0] == "2026-03-29T01:00:00+01:00"
    assert got[1] == "2026-03-29T03:00:00+02:00"  # 02:00 does not exist that night
    assert utc[-1] == timedelta(hours=2)


def test_schedule_needs_exactly_one_form() -> None:
    from memvault.errors import ConfigError

    with pytest.raises(ConfigError):
        Schedule()
    with pytest.raises(ConfigError):
        Schedule(cron="0 9 * * *", every_seconds=60)
    with pytest.raises(ConfigError, match="cron expression"):
        Schedule(cron="every morning")


def recorder(outcomes: list[str] | None = None) -> tuple[list[int], Any]:
    runs: list[int] = []

    def run(context: JobContext) -> str:
        runs.append(context.run_id)
        context.record("looked")
        context.metadata["n"] = len(runs)
        if outcomes and outcomes.pop(0) == "fail":
            raise RuntimeError("boom")
        return "done"

    return runs, run


def test_interval_job_runs_when_due_and_records_the_run(state: StateDB) -> None:
    clock = MovableClock(at("2026-05-01T12:00"))
    _runs, fn = recorder()
    events: list[tuple[str, dict[str, Any]]] = []
    engine = JobEngine(
        state,
        clock,
        [Job("ping", Schedule(every_seconds=60), fn)],
        publish=lambda k, d: events.append((k, d)),
    )
    assert engine.tick() == []
    clock.set(at("2026-05-01T12:01"))
    (run,) = engine.tick()
    assert (run.status, run.output, run.metadata) == ("ok", "looked\ndone", {"n": 1})
    assert [k for k, _ in events] == ["job_started", "job_finished"]
    assert events[1][1]["status"] == "ok"
    assert engine.tick() == []  # next due at 12:02
    assert engine.next_due("ping") == at("2026-05-01T12:02")


def test_catch_up_runs_once_after_missed_ticks(state: StateDB) -> None:
    clock = MovableClock(at("2026-05-01T08:00"))
    runs, fn = recorder()
    job = Job("daily", Schedule(cron="0 9 * * *"), fn)
    engine = JobEngine(state, clock, [job])
    clock.set(at("2026-05-01T09:00"))
    assert len(engine.tick()) == 1
    # The daemon is down for four days; a new engine (a restart) runs the job once.
    clock.set(at("2026-05-05T12:00"))
    restarted = JobEngine(state, clock, [job])
    assert len(restarted.tick()) == 1
    assert restarted.tick() == []
    assert restarted.next_due("daily") == at("2026-05-06T09:00")
    assert len(runs) == 2


def test_crash_mid_run_is_marked_failed_and_never_runs_twice(
    state: StateDB, tmp_path: Path
) -> None:
    clock = MovableClock(at("2026-05-01T12:00"))
    _runs, fn = recorder()
    job = Job("ping", Schedule(every_seconds=60), fn)
    engine = JobEngine(state, clock, [job])
    crashed = engine.claim("ping")  # the process dies here, leaving the row running
    # A second process sharing state.db cannot claim it meanwhile.
    other = JobEngine(StateDB(tmp_path / ".memvault"), clock, [job])
    with pytest.raises(ConflictError, match="already running"):
        other.claim("ping")
    clock.set(at("2026-05-01T12:05"))
    assert other.tick() == []  # due, but busy: skipped without a second run
    restarted = JobEngine(state, clock, [job])
    assert restarted.recover() == 1
    record = restarted.run_record(crashed)
    assert record.status == "failed" and "interrupted" in (record.error or "")
    clock.set(at("2026-05-01T12:06"))  # 30 s backoff after the failure
    assert [r.status for r in restarted.tick()] == ["ok"]
    assert state.query("SELECT count(*) FROM job_runs WHERE status = 'running'")[0][0] == 0


def test_concurrent_claims_let_one_through(state: StateDB) -> None:
    clock = MovableClock(at("2026-05-01T12:00"))
    gate = threading.Event()

    def slow(context: JobContext) -> str:
        gate.wait(WAIT)
        return "slow"

    engine = JobEngine(state, clock, [Job("slow", Schedule(every_seconds=60), slow)])
    worker = threading.Thread(target=engine.run_now, args=("slow",))
    worker.start()
    try:
        wait_for(lambda: engine.history("slow"), "the first run to claim the job")
        with pytest.raises(ConflictError):
            engine.run_now("slow")
    finally:
        gate.set()
        worker.join(WAIT)
    assert [r.status for r in engine.history("slow")] == ["ok"]


def test_failing_job_backs_off_without_holding_others(state: StateDB) -> None:
    start = at("2026-05-01T12:00")
    clock = MovableClock(start)
    _, failing = recorder(["fail"] * 7)
    healthy_runs, healthy = recorder()
    engine = JobEngine(
        state,
        clock,
        [
            Job("bad", Schedule(every_seconds=1), failing),
            Job("good", Schedule(every_seconds=1), healthy),
        ],
    )
    clock.set(start + timedelta(seconds=1))
    engine.tick()
    pauses = []
    for _ in range(6):
        failed_at = clock.now()
        due = engine.next_due("bad")
        assert due is not None
        pauses.append(int((due - failed_at).total_seconds()))
        clock.set(due)
        engine.tick()
    assert pauses == [30, 60, 300, 900, 3600, 3600]
    assert engine.failures("bad") == 7
    assert len(healthy_runs) == 7  # the good job ran on every tick that happened
    assert engine.history("bad")[0].error == "boom"


def test_disabled_job_is_never_due_and_unknown_job_is_not_found(state: StateDB) -> None:
    clock = MovableClock(at("2026-05-01T12:00"))
    _runs, fn = recorder()
    engine = JobEngine(state, clock, [Job("off", Schedule(every_seconds=1), fn, enabled=False)])
    clock.set(at("2026-05-02T12:00"))
    assert engine.tick() == [] and engine.next_due("off") is None
    assert engine.run_now("off").status == "ok"  # a person may still run it by hand
    with pytest.raises(NotFoundError, match="no job called 'nope'"):
        engine.history("nope")
