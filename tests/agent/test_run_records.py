"""Each agent run's record: what it was given (its context section by section, the
memories recalled with their scores), its tool calls, its model and tokens; bounded by
``[agent] runs_keep_days``; never a reason for a run to fail."""

from __future__ import annotations

import json
import sqlite3
from datetime import timedelta

from agent.conftest import AgentFactory
from llm_fakes import FakeOpenAI
from memvault.errors import NotFoundError
from support import MovableClock

TEA = "Ada prefers green tea in the morning, never coffee"


def test_a_run_records_its_context_recalled_memories_and_tool_calls(
    fake_openai: FakeOpenAI, make_agent: AgentFactory
) -> None:
    agent = make_agent(fake_openai)
    runtime = agent.runtime
    tea = runtime.memories.remember(TEA, category="fact").memory.id
    fake_openai.reply("", tool_calls=[("recall", {"topic": "green tea"})], usage=(120, 8))
    fake_openai.reply("Green tea, never coffee.", usage=(150, 6))
    result = agent.run("Which tea do I like in the morning?", session="cli")
    assert result.ok

    (listed,) = runtime.runs.list()
    assert listed.surface == "cli" and listed.status == "done"
    assert listed.command == "Which tea do I like in the morning?"
    run = runtime.runs.get(listed.id or 0)
    session = runtime.sessions.get("cli")
    asked = runtime.sessions.messages(session.id)[0]
    assert (run.session_id, run.turn, run.session_key) == (session.id, asked.id, "cli")
    assert run.model == "fake-model" and (run.input_tokens, run.output_tokens) == (270, 14)
    assert run.iterations == 2
    titles = [s["title"] for s in run.context["sections"]]
    assert any(t.startswith("Relevant to: Which tea") for t in titles)
    recalled = {r["id"]: r for r in run.recalled}
    assert recalled[tea]["score"] > 0 and recalled[tea]["shown"] is True
    assert TEA in recalled[tea]["line"]
    (call,) = run.tool_calls
    assert call["name"] == "recall" and call["ok"] is True
    assert '"topic": "green tea"' in call["arguments"] and "green tea" in call["result"]
    # The transcript's view: the turn that asked, and what it recalled.
    turns = runtime.runs.of_session(session.id)
    assert list(turns) == [asked.id] and turns[asked.id]["id"] == run.id
    (mark,) = turns[asked.id]["top"]
    assert mark == {"id": tea, "score": f"{recalled[tea]['score']:.3f}", "line": mark["line"]}
    assert mark["line"].startswith(TEA[:40]) and turns[asked.id]["more"] == 0


def test_what_the_budget_left_out_is_recorded_line_by_line(
    fake_openai: FakeOpenAI, make_agent: AgentFactory
) -> None:
    agent = make_agent(fake_openai, context_budget=60)
    runtime = agent.runtime
    for n in range(12):
        runtime.memories.remember(
            f"Fact number {n} about the allotment garden plots", category="fact"
        )
    fake_openai.reply("Noted.")
    agent.run("Tell me about the allotment garden", session="cli")
    (listed,) = runtime.runs.list()
    sections = runtime.runs.get(listed.id or 0).context["sections"]
    cut = [s for s in sections if s["left_out_count"]]
    assert cut, sections
    for section in cut:
        assert len(section["left_out"]) == min(section["left_out_count"], 40)
        assert not set(section["left_out"]) & set(section["shown"])


def test_old_records_are_pruned_and_zero_days_records_none(
    fake_openai: FakeOpenAI, make_agent: AgentFactory, clock: MovableClock
) -> None:
    agent = make_agent(fake_openai, runs_keep_days=2)
    fake_openai.reply("First.")
    agent.run("The first question", session="cli")
    (old,) = agent.runtime.runs.list()
    clock.set(clock.now() + timedelta(days=3))
    fake_openai.reply("Second.")
    agent.run("The second question", session="cli")
    assert [r.command for r in agent.runtime.runs.list()] == ["The second question"]
    try:
        agent.runtime.runs.get(old.id or 0)
        raise AssertionError("a record past the window was still shown")
    except NotFoundError as exc:
        assert "older than kept" in exc.message
    assert agent.runtime.runs.prune() == 1  # the row itself goes, not only its showing
    assert agent.runtime.runs.prune() == 0

    silent = make_agent(fake_openai, runs_keep_days=0)
    fake_openai.reply("Third.")
    assert silent.run("The third question", session="cli").ok
    assert len(agent.runtime.runs.list()) == 1


def test_a_record_that_cannot_be_written_never_fails_the_run(
    fake_openai: FakeOpenAI, make_agent: AgentFactory
) -> None:
    agent = make_agent(fake_openai)
    state = agent.runtime.state
    with state.transaction() as conn:
        conn.execute("DROP TABLE agent_runs")  # what a broken state.db would do
    fake_openai.reply("The answer still goes out.")
    result = agent.run("Anything?", session="cli")
    assert result.ok and result.answer == "The answer still goes out."
    try:
        agent.runtime.runs.list()
        raise AssertionError("the table was not gone")
    except sqlite3.OperationalError:
        pass


def test_forgetting_a_memory_leaves_no_copy_in_the_runs_records(
    fake_openai: FakeOpenAI, make_agent: AgentFactory
) -> None:
    agent = make_agent(fake_openai)
    runtime = agent.runtime
    tea = runtime.memories.remember(TEA, category="fact").memory.id
    fake_openai.reply("", tool_calls=[("recall", {"topic": "green tea"})])
    fake_openai.reply("Green tea.")
    agent.run("Which tea do I like in the morning?", session="cli")
    (listed,) = runtime.runs.list()
    before = json.dumps(runtime.runs.get(listed.id or 0).to_dict())
    assert tea in before and "green tea" in before

    receipt = runtime.forgetter.forget(tea)
    after = json.dumps(runtime.runs.get(listed.id or 0).to_dict())
    assert tea not in after and "green tea" not in after.lower()
    assert "[forgotten]" in after
    assert any("agent runs" in place.place for place in receipt.places)
    marked = json.dumps(runtime.runs.of_session(runtime.sessions.get("cli").id))
    assert tea not in marked and "green tea" not in marked.lower()
