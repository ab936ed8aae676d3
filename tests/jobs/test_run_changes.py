"""What a run changed, and putting it back; a run's model budget; skipped runs; a run
killed with SIGKILL in another process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from datetime import timedelta
from typing import Any

import pytest

from llm_fakes import FakeOpenAI, llm_settings
from memvault.errors import ConflictError, InvalidInputError
from memvault.jobs import Job, JobContext, JobEngine, Schedule, SkipRun, changes
from memvault.llm.base import ChatMessage
from memvault.llm.factory import make_provider
from memvault.runtime import Runtime
from support import MovableClock
from waiting import WAIT, wait_for

HOURLY = Schedule(every_seconds=3600)


def rewrite(ctx: JobContext) -> str:
    """Rewrites one note, creates a second, deletes a third."""
    vault = ctx.services.vault
    ctx.will_change("Notes/a.md")
    vault.edit_text("Notes/a.md", lambda text: (text or "") + "job line\n")
    ctx.will_change("Notes/b.md")
    vault.write_text("Notes/b.md", "made by the job\n")
    ctx.will_change("Notes/c.md")
    vault.delete("Notes/c.md")
    return "rewrote a, made b, deleted c"


@pytest.fixture
def seeded(runtime: Runtime) -> Runtime:
    runtime.vault.write_text("Notes/a.md", "owner's a\r\nsecond line\r\n")
    runtime.vault.write_text("Notes/c.md", "owner's c\n")
    return runtime


def engine_for(runtime: Runtime, clock: MovableClock, *jobs: Job, **options: Any) -> JobEngine:
    return JobEngine(runtime.state, clock, list(jobs), runtime=runtime, **options)


def read(runtime: Runtime, path: str) -> bytes | None:
    file = runtime.vault.root / path
    return file.read_bytes() if file.exists() else None


def test_undo_restores_every_file_a_run_touched(seeded: Runtime, clock: MovableClock) -> None:
    engine = engine_for(seeded, clock, Job("rewrite", HOURLY, rewrite))
    run = engine.run_now("rewrite")
    assert run.status == "ok"
    assert [c["path"] for c in run.metadata["changes"]] == [
        "Notes/a.md",
        "Notes/b.md",
        "Notes/c.md",
    ]
    assert read(seeded, "Notes/c.md") is None
    assert engine.undo(run.id) == ["Notes/a.md", "Notes/b.md", "Notes/c.md"]
    assert read(seeded, "Notes/a.md") == b"owner's a\r\nsecond line\r\n"  # byte for byte
    assert read(seeded, "Notes/b.md") is None
    assert read(seeded, "Notes/c.md") == b"owner's c\n"
    assert engine.run_record(run.id).metadata["undone"]
    with pytest.raises(ConflictError, match="already undone"):
        engine.undo(run.id)


def test_undo_refuses_and_changes_nothing_after_a_person_edited(
    seeded: Runtime, clock: MovableClock
) -> None:
    engine = engine_for(seeded, clock, Job("rewrite", HOURLY, rewrite))
    run = engine.run_now("rewrite")
    with (seeded.vault.root / "Notes/b.md").open("a") as f:
        f.write("the owner added this\n")
    before = {p: read(seeded, p) for p in ("Notes/a.md", "Notes/b.md", "Notes/c.md")}
    with pytest.raises(ConflictError, match=r"Notes/b\.md was edited after run") as caught:
        engine.undo(run.id)
    assert "nothing was undone" in caught.value.message
    assert {p: read(seeded, p) for p in before} == before
    assert "undone" not in engine.run_record(run.id).metadata


def test_versions_show_each_file_before_the_run_and_now(
    seeded: Runtime, clock: MovableClock
) -> None:
    engine = engine_for(seeded, clock, Job("rewrite", HOURLY, rewrite))
    run = engine.run_now("rewrite")
    shown = {v.path: v for v in changes.versions(seeded.vault, run.id, run.metadata["changes"])}
    a, b, c = shown["Notes/a.md"], shown["Notes/b.md"], shown["Notes/c.md"]
    assert a.before == b"owner's a\r\nsecond line\r\n" and a.now is not None
    assert a.now.endswith(b"job line\n") and a.as_left and a.kept
    assert (b.before, b.now, b.as_left) == (None, b"made by the job\n", True)  # made by it
    assert (c.before, c.now, c.as_left) == (b"owner's c\n", None, True)  # deleted by it

    (seeded.vault.root / "Notes/b.md").write_text("the owner's now\n", encoding="utf-8")
    edited = changes.versions(seeded.vault, run.id, run.metadata["changes"])
    assert [v.as_left for v in edited] == [True, False, True]
    with (seeded.vault.root / "Notes/b.md").open("w") as f:
        f.write("made by the job\n")
    engine.undo(run.id)
    gone = changes.versions(seeded.vault, run.id, run.metadata["changes"])
    assert [(v.kept, v.before) for v in gone if v.path == "Notes/a.md"] == [(False, None)]


def test_a_run_that_changed_nothing_has_nothing_to_undo(
    runtime: Runtime, clock: MovableClock
) -> None:
    engine = engine_for(runtime, clock, Job("idle", HOURLY, lambda ctx: "nothing"))
    run = engine.run_now("idle")
    with pytest.raises(InvalidInputError, match="changed no files"):
        engine.undo(run.id)


def test_a_skipped_run_says_why_and_counts_as_the_last_run(
    runtime: Runtime, clock: MovableClock
) -> None:
    def skip(ctx: JobContext) -> str:
        raise SkipRun("nothing to check: HEARTBEAT.md is empty")

    engine = engine_for(runtime, clock, Job("skipper", Schedule(every_seconds=60), skip))
    clock.set(clock.moment + timedelta(seconds=61))
    (run,) = engine.tick()
    assert (run.status, run.error) == ("skipped", "nothing to check: HEARTBEAT.md is empty")
    assert engine.tick() == []  # not retried at every tick
    assert engine.failures("skipper") == 0


def test_the_model_budget_stops_a_run_at_its_limit(runtime: Runtime, clock: MovableClock) -> None:
    def chatty(ctx: JobContext) -> str:
        assert ctx.model is not None
        answers = []
        for n in range(5):
            reply = ctx.model.complete([ChatMessage("user", f"question {n}")], max_tokens=500)
            answers.append(reply.text)
            ctx.record(reply.text)
        return ", ".join(answers)

    with FakeOpenAI() as fake:
        for n in range(5):
            fake.reply(f"answer {n}", usage=(100, 20))
        engine = engine_for(
            runtime,
            clock,
            Job("chatty", HOURLY, chatty, budget=(2, 10_000)),
            provider=make_provider(llm_settings(fake)),
        )
        run = engine.run_now("chatty")
        assert len(fake.requests) == 2
    assert run.status == "failed"
    assert "budget of 2 model call(s)" in (run.error or "")
    assert run.output == "answer 0\nanswer 1"
    assert run.metadata["model"] == {"model_calls": 2, "input_tokens": 200, "output_tokens": 40}


def test_the_token_budget_caps_the_answer_and_refuses_what_cannot_fit(
    runtime: Runtime, clock: MovableClock
) -> None:
    def one_call(ctx: JobContext) -> str:
        assert ctx.model is not None
        return ctx.model.complete([ChatMessage("user", "x" * 400)], max_tokens=4000).text

    with FakeOpenAI() as fake:
        fake.reply("short", usage=(101, 5))
        provider = make_provider(llm_settings(fake))
        engine = engine_for(
            runtime, clock, Job("one", HOURLY, one_call, budget=(5, 300)), provider=provider
        )
        assert engine.run_now("one").status == "ok"
        sent = fake.requests[0]
        asked = sent.get("max_completion_tokens") or sent.get("max_tokens")
        assert asked is not None and asked <= 300 - 100
        tight = engine_for(
            runtime, clock, Job("tight", HOURLY, one_call, budget=(5, 80)), provider=provider
        )
        run = tight.run_now("tight")
        assert len(fake.requests) == 1  # the second job never called the model
    assert run.status == "failed" and "does not fit its budget" in (run.error or "")


def test_without_a_model_a_job_gets_none(runtime: Runtime, clock: MovableClock) -> None:
    seen: list[object] = []
    engine = engine_for(
        runtime, clock, Job("m", HOURLY, lambda ctx: seen.append(ctx.model), budget=(1, 100))
    )
    engine.run_now("m")
    assert seen == [None]


_HOLDER = """
import sys, time
from pathlib import Path
from datetime import datetime
from zoneinfo import ZoneInfo
from memvault.clock import Clock
from memvault.jobs import Job, JobEngine, Schedule
from memvault.memory.state import StateDB

def hold(ctx):
    print("running", flush=True)
    time.sleep(3600)  # until the test kills it

state = StateDB(Path(sys.argv[1]))
job = Job("hold", Schedule(every_seconds=60), hold)
engine = JobEngine(state, Clock(ZoneInfo("Europe/Berlin")), [job])
engine.run_now("hold")
"""


def test_a_run_killed_with_sigkill_is_failed_at_the_next_start_not_before(
    runtime: Runtime, clock: MovableClock
) -> None:
    state_dir = runtime.vault.state_dir
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(state_dir)], stdout=subprocess.PIPE, env=env, text=True
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "running"
        job = Job("hold", Schedule(every_seconds=60), lambda ctx: "second")
        beside = engine_for(runtime, clock, job)
        assert beside.recover() == 0  # its process lives: a run beside the daemon goes on
        with pytest.raises(ConflictError, match="already running"):
            beside.claim("hold")
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=WAIT)
    finally:
        if holder.poll() is None:
            holder.kill()
    rows = runtime.state.query("SELECT id, status, metadata FROM job_runs")
    assert [r["status"] for r in rows] == ["running"]
    assert json.loads(rows[0]["metadata"])["pid"] == holder.pid
    restarted = engine_for(runtime, clock, job)
    # The killed process may linger a moment as a zombie.
    wait_for(restarted.recover, "the killed run to be recovered")
    record = restarted.run_record(rows[0]["id"])
    assert record.status == "failed" and "interrupted" in (record.error or "")
    assert restarted.run_now("hold").status == "ok"


def test_quiet_runs_are_pruned_and_telling_ones_kept(runtime: Runtime, clock: MovableClock) -> None:
    said: list[int] = []

    def sometimes(ctx: JobContext) -> str:
        said.append(1)
        if len(said) % 5 == 0:
            ctx.metadata["fired"] = ["Tasks/Active/x.md"]
        return "looked"

    engine = engine_for(runtime, clock, Job("looker", Schedule(every_seconds=60), sometimes))
    for _ in range(20):
        engine.run_now("looker")
    assert engine.prune(keep=3) == 14  # 16 quiet runs; 2 are among the newest 3
    kept = engine.history("looker", limit=100)
    assert len(kept) == 6
    assert sum(1 for r in kept if r.metadata.get("fired")) == 4
