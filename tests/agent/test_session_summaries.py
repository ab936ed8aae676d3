"""Ending a session writes its summary: by the model when there is one, else extracted."""

from __future__ import annotations

from datetime import datetime

import pytest

from agent.conftest import AgentFactory, system_of, user_texts
from llm_fakes import FakeLLMServer, FakeOpenAI
from memvault.agent.loop import Agent
from memvault.agent.sessions import SUMMARY_PROMPT
from memvault.errors import MemvaultError
from support import TZ, MovableClock

TRIP = "We decided to fly to Lisbon with Maria on 12 March and stay in Alfama."


def _talk(agent_fake: FakeLLMServer, agent: Agent) -> None:
    agent_fake.reply("Lovely. I will keep Lisbon in mind.")
    agent.run(TRIP, session="cli")


def test_the_model_writes_the_summary_into_the_journal_and_the_next_context(
    fake: FakeLLMServer, make_agent: AgentFactory
) -> None:
    agent = make_agent(fake, summary="auto")
    _talk(fake, agent)
    fake.reply("Ada and Maria fly to Lisbon on 12 March and will stay in Alfama.")
    ended = agent.end_session("cli")

    assert ended.summary == "Ada and Maria fly to Lisbon on 12 March and will stay in Alfama."
    request = fake.requests[-1]
    assert system_of(request).startswith(SUMMARY_PROMPT[:40])
    transcript = user_texts(request)[-1]
    assert f"user: {TRIP}" in transcript
    assert "assistant: Lovely. I will keep Lisbon in mind." in transcript
    assert "tools" not in request or not request["tools"]

    lines = agent.runtime.journal.sections()["Sessions"]
    assert lines == [
        "09:30 Session cli (cli): 2 messages since 09:30. "
        "Ada and Maria fly to Lisbon on 12 March and will stay in Alfama."
    ]
    fake.reply("Welcome back.")
    agent.run("Hello again", session="cli")
    prompt = system_of(fake.requests[-1])
    last = "## Last session\n- cli (cli), 2 messages, ended 2026-11-22 09:30: Ada and Maria"
    assert last in prompt


def test_without_a_model_answer_the_summary_is_extracted(
    fake_openai: FakeOpenAI, make_agent: AgentFactory
) -> None:
    agent = make_agent(fake_openai, summary="auto", llm={"max_retries": 0})
    _talk(fake_openai, agent)
    fake_openai.fail(500, message="summary model down")
    ended = agent.end_session("cli")

    assert ended.summary is not None
    assert "Decisions: We decided to fly to Lisbon with Maria on 12 March" in ended.summary
    assert "Lisbon" in agent.runtime.journal.sections()["Sessions"][0]


def test_extractive_summaries_ask_no_model(
    fake_openai: FakeOpenAI, make_agent: AgentFactory
) -> None:
    agent = make_agent(fake_openai, summary="extractive")
    _talk(fake_openai, agent)
    asked = len(fake_openai.requests)
    ended = agent.end_session("cli")
    assert len(fake_openai.requests) == asked
    assert ended.summary is not None and "Maria" in ended.summary


def test_llm_only_summaries_keep_the_session_open_when_the_model_fails(
    fake_openai: FakeOpenAI, make_agent: AgentFactory
) -> None:
    agent = make_agent(fake_openai, summary="llm", llm={"max_retries": 0})
    _talk(fake_openai, agent)
    fake_openai.fail(503, message="busy")
    with pytest.raises(MemvaultError, match="busy"):
        agent.end_session("cli")
    assert agent.runtime.sessions.get("cli").active  # nothing lost: try again later
    fake_openai.reply("Lisbon trip planned.")
    assert agent.end_session("cli").summary == "Lisbon trip planned."


def test_idle_sessions_are_swept(
    fake_openai: FakeOpenAI, make_agent: AgentFactory, clock: MovableClock
) -> None:
    agent = make_agent(fake_openai, summary="extractive", session_idle_minutes=10)
    _talk(fake_openai, agent)
    assert agent.closer.end_idle() == []
    clock.set(datetime(2026, 11, 22, 9, 45, tzinfo=TZ))
    ended = agent.closer.end_idle()
    assert [s.key for s in ended] == ["cli"]
    assert not agent.runtime.sessions.get("cli").active
    with pytest.raises(MemvaultError, match="no open session"):
        agent.end_session("cli")
