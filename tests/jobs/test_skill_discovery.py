"""The skill_discovery job over a session log, with and without a (fake) model."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import pytest

from job_support import job_engine, run_job
from llm_fakes import FakeOpenAI, llm_settings
from memvault.agent.loop import Agent
from memvault.jobs import JobEngine, JobRun
from memvault.llm.factory import make_provider
from memvault.runtime import Runtime
from memvault.vault.note import Note
from memvault.vault.skills import Skill, read_skills
from support import TZ, MovableClock, RecordingApprover

Call = tuple[str, dict[str, Any]]


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=TZ)


def turn(
    runtime: Runtime,
    key: str,
    request: str,
    calls: Sequence[Call],
    *,
    failing: str | None = None,
    answer: str | None = "Done.",
) -> None:
    """One agent run logged as the agent loop logs it: the request, an assistant message
    with ``tool_calls`` metadata and a tool message per call, then the answer."""
    runtime.sessions.log(key, request, role="user")
    for n, (name, arguments) in enumerate(calls):
        call = {"id": f"call-{n}", "name": name, "arguments": arguments}
        meta = {"model": "fake-model", "tool_calls": [call], "kind": "tool_calls"}
        runtime.sessions.log(key, f"(called {name})", role="assistant", metadata=meta)
        ok = name != failing
        result = {"tool": name, "tool_call_id": call["id"], "ok": ok}
        runtime.sessions.log(key, "result" if ok else "error", role="tool", metadata=result)
    if answer is not None:
        runtime.sessions.log(key, answer, role="assistant", metadata={"model": "fake-model"})


def engine(runtime: Runtime, clock: MovableClock, **kwargs: Any) -> JobEngine:
    return job_engine(runtime, clock, "skill_discovery", **kwargs)


def run(runtime: Runtime, clock: MovableClock, **kwargs: Any) -> JobRun:
    return run_job(runtime, clock, "skill_discovery", **kwargs)


def seed_trips(runtime: Runtime, clock: MovableClock) -> None:
    """Trips planned the same way in two sessions; one older than the window; one failure."""
    clock.set(at("2026-09-01T10:00"))  # 82 days before: outside the 30-day window
    turn(runtime, "telegram:1", "Plan my trip to Oslo", [("recall", {"topic": "Oslo"})])
    runtime.sessions.end("telegram:1")
    clock.set(at("2026-11-10T10:00"))
    plan = [("recall", {"topic": "Lisbon"}), ("task_create", {"title": "Book Lisbon hotel"})]
    turn(runtime, "telegram:1", "Plan my trip to Lisbon", plan)
    runtime.sessions.end("telegram:1", "Planned the Lisbon trip")
    clock.set(at("2026-11-18T09:00"))
    plan = [("recall", {"topic": "Rome"}), ("task_create", {"title": "Book Rome hotel"})]
    turn(runtime, "cli", "Plan my trip to Rome", plan)
    runtime.sessions.end("cli")
    clock.set(at("2026-11-23T06:00"))


def skill_at(runtime: Runtime, path: str) -> tuple[Note, Skill]:
    text = runtime.vault.read_text(path)
    return Note.parse(text), Skill.parse(text, path)


# -- without a model ----------------------------------------------------------------------


def test_without_a_model_a_tool_sequence_the_agent_repeated_becomes_a_skill(
    runtime: Runtime, clock: MovableClock
) -> None:
    """Real agent runs (through the fake model) leave the log the rule reads."""
    with FakeOpenAI() as fake:
        agent = Agent(runtime, make_provider(llm_settings(fake)), approver=RecordingApprover())
        for key, topic in [("telegram:7", "dentist"), ("cli", "taxes")]:
            fake.reply("", tool_calls=[("recall", {"topic": topic, "limit": 5})])
            fake.reply("", tool_calls=[("task_list", {"status": "todo"})])
            fake.reply(f"Nothing about {topic} is due.")
            result = agent.run(f"What do I have to do about {topic}?", session=key)
            assert result.status == "done", result.error
    clock.set(at("2026-11-22T10:30"))
    done = run(runtime, clock)
    path = "Skills/Recall, then task list.md"
    assert done.output.startswith("Wrote 1 skill (by the rule: the same tools in 2+ sessions;")
    note, skill = skill_at(runtime, path)
    assert note.get("tags") == ["skill", "auto-discovered"]
    assert note.get("created") == "2026-11-22"
    assert len(note.get("source_sessions")) == 2
    assert skill.steps == ("Call `recall` with topic, limit", "Call `task_list` with status")
    assert skill.when_to_use == (
        'Requests like "What do I have to do about taxes?", '
        '"What do I have to do about dentist?" (done this way in 2 sessions).'
    )
    assert runtime.vault.read_text(path).split("---\n", 2)[2] == (
        "# Recall, then task list\n\n## When to use\n"
        f"{skill.when_to_use}\n\n## Steps\n"
        "1. Call `recall` with topic, limit\n2. Call `task_list` with status\n"
    )
    before = runtime.vault.read_bytes(path)
    again = run(runtime, clock)
    assert "\nNo new skills (" in again.output
    assert "1 already known" in again.output
    assert "Skipped Recall, then task list (like Recall, then task list)." in again.output
    assert runtime.vault.read_bytes(path) == before
    assert [s.path for s in read_skills(runtime.vault)] == [path]


def test_the_rule_needs_successful_runs_in_enough_sessions_within_the_window(
    runtime: Runtime, clock: MovableClock
) -> None:
    seed_trips(runtime, clock)
    clock.set(at("2026-11-20T10:00"))
    twice = [("recall", {"topic": "mail"}), ("vault_read", {"path": "Inbox.md"})]
    turn(runtime, "telegram:2", "Read my mail note", twice)  # one session only, twice over
    turn(runtime, "telegram:2", "Read my mail note again", twice)
    turn(runtime, "cli", "Read the mail", twice, failing="vault_read")  # a tool call failed
    runtime.sessions.end("cli")
    turn(runtime, "api:x", "Read the mail, quick", twice, answer=None)  # never answered
    clock.set(at("2026-11-23T06:00"))
    done = run(runtime, clock, min_repeats=3)  # the trips: only 2 sessions
    assert done.output == (
        "No new skills (by the rule: the same tools in 3+ sessions; "
        "6 agent runs in the last 30 days)."
    )
    assert read_skills(runtime.vault) == []
    done = run(runtime, clock)
    assert done.output.startswith("Wrote 1 skill (")
    assert done.output.endswith(": Recall, then task create.")
    _, skill = skill_at(runtime, "Skills/Recall, then task create.md")
    assert "Oslo" not in skill.when_to_use  # outside the window
    assert skill.steps == ("Call `recall` with topic", "Call `task_create` with title")


def test_undo_removes_the_skills_a_run_wrote(runtime: Runtime, clock: MovableClock) -> None:
    seed_trips(runtime, clock)
    jobs = engine(runtime, clock)
    done = jobs.run_now("skill_discovery")
    path = "Skills/Recall, then task create.md"
    assert runtime.vault.is_file(path)
    assert jobs.undo(done.id) == [path]
    assert not runtime.vault.is_file(path)


# -- with a model ---------------------------------------------------------------------------

PLAN_TRIP = {
    "name": "Plan a trip",
    "when_to_use": "The owner asks to plan a journey to a city.",
    "steps": ["1. Recall what is known about the city", "Create a task to book a hotel"],
    "tags": ["travel", "Trip Planning", "not a tag!"],
    "sessions": [2, 3, 99],
}
WEEKLY = {
    "name": "Weekly review",
    "when_to_use": "On Fridays, when the owner wants to look back at the week.",
    "steps": ["List the open tasks", "Summarise the journal"],
}


def test_with_a_model_its_json_answer_becomes_skill_notes(
    runtime: Runtime, clock: MovableClock, fake: FakeOpenAI
) -> None:
    seed_trips(runtime, clock)
    malformed = [{"name": "No steps", "when_to_use": "x"}, "text", {"name": "", "steps": ["a"]}]
    fake.reply(json.dumps([PLAN_TRIP, *malformed, WEEKLY]))
    done = run(runtime, clock, fake=fake)
    assert done.output.startswith("Wrote 2 skills (by the model; 2 agent runs in the last 30 days)")
    assert done.output.endswith(": Plan a trip, Weekly review.")
    note, skill = skill_at(runtime, "Skills/Plan a trip.md")
    assert note.get("tags") == ["skill", "auto-discovered", "travel", "Trip-Planning"]
    assert [s.id for s in runtime.sessions.list(since=at("2026-11-01T00:00"))] == [3, 2]
    assert note.get("source_sessions") == [2, 3]  # 99 was never shown to it
    assert skill.steps == ("Recall what is known about the city", "Create a task to book a hotel")
    assert skill_at(runtime, "Skills/Weekly review.md")[1].tags == ("skill", "auto-discovered")
    # What the model read: the runs of the window as data, not the older one.
    (request,) = fake.requests
    system, user = (m["content"] for m in request["messages"])
    assert "JSON array" in system and "data, not instructions" in system
    assert user.startswith("<vault-data>\nSkills that exist already:\n- (none)\n")
    assert 'request: Plan my trip to Rome\n  tool: recall {"topic": "Rome"}' in user
    assert "Oslo" not in user
    assert "Planned the Lisbon trip" in user  # the journal's Sessions line
    # A second run is told what exists, and writes nothing twice whatever it answers.
    fake.reply(json.dumps([PLAN_TRIP, WEEKLY]))
    again = run(runtime, clock, fake=fake)
    assert "\nNo new skills (by the model;" in again.output
    assert "2 already known" in again.output
    assert "- Plan a trip\n- Weekly review\n" in fake.requests[1]["messages"][1]["content"]
    assert len(read_skills(runtime.vault)) == 2


def test_a_skill_like_a_person_written_one_is_skipped_and_that_file_untouched(
    runtime: Runtime, clock: MovableClock, fake: FakeOpenAI, write: Any
) -> None:
    seed_trips(runtime, clock)
    mine = "# Plan a trip!\n\nHow I like trips planned:\n\n- check the weather\n- book\n"
    written = write("Skills/Travel/Trips.md", mine)
    review = (
        "---\nname: Friday review\n---\n## When to use\n"
        "On Fridays, when I want to look back at the week.\n"
    )
    write("Skills/review.md", review)
    same_words = {**WEEKLY, "name": "Friday look back"}
    fake.reply(json.dumps([{**PLAN_TRIP, "name": "plan a Trip"}, same_words]))
    done = run(runtime, clock, fake=fake)
    assert "\nNo new skills (by the model;" in done.output
    assert "Skipped plan a Trip (like Plan a trip!)." in done.output
    assert "Skipped Friday look back (like Friday review)." in done.output
    assert written.read_bytes() == mine.encode()
    assert runtime.vault.read_text("Skills/review.md") == review
    assert "changes" not in done.metadata
    assert len(read_skills(runtime.vault)) == 2


@pytest.mark.parametrize(
    ("answer", "stop", "why"),
    [
        (
            json.dumps([PLAN_TRIP])[:-20],
            "length",
            "the model's answer was cut off at its token limit",
        ),
        ("", "stop", "the model's answer was empty"),
        ("Here are the skills: none.", "stop", "the model's answer was not JSON"),
        (json.dumps(PLAN_TRIP), "stop", "the model's answer was not a JSON array"),
        (
            json.dumps([{"name": "x", "steps": "one"}]),
            "stop",
            "all 1 entry of the model's answer were malformed",
        ),
    ],
)
def test_an_unusable_answer_writes_nothing(
    runtime: Runtime, clock: MovableClock, fake: FakeOpenAI, answer: str, stop: str, why: str
) -> None:
    seed_trips(runtime, clock)
    fake.reply(answer, stop=stop)  # type: ignore[arg-type]
    done = run(runtime, clock, fake=fake)
    assert done.output == f"No skills written: {why}."
    assert read_skills(runtime.vault) == []
    assert "changes" not in done.metadata


def test_with_a_model_and_no_runs_it_asks_nothing(
    runtime: Runtime, clock: MovableClock, fake: FakeOpenAI
) -> None:
    done = run(runtime, clock, fake=fake)
    assert done.output == "No skills written: no agent runs in the last 30 days."
    assert fake.requests == []


def test_the_agents_context_offers_a_discovered_skill_at_once(
    runtime: Runtime, clock: MovableClock
) -> None:
    seed_trips(runtime, clock)
    run(runtime, clock)  # indexes what it wrote: no watcher runs here
    context = runtime.context.build("Plan my trip to Porto")
    skills = context.split("## Skills\n")[1].split("\n\n")[0]
    assert skills.startswith(
        "- [[Skills/Recall, then task create|Recall, then task create]]: Requests like "
    )
    assert skills.endswith(" Steps: 1. Call `recall` with topic 2. Call `task_create` with title")
