"""``GET /v1/runs`` and ``GET /v1/runs/{id}``: the agent runs record over the API, what the
console's "Why did it say that" pages show, against a real daemon whose model is the fake
OpenAI server. A token bound to an agent sees that agent's runs only."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from gateway_support import Live, StartDaemon, failed, ok
from llm_fakes import FakeOpenAI, llm_settings
from memvault.gateway.tokens import Scope
from memvault.memory.runs import RunRecord
from waiting import WAIT

TEA = "I prefer green tea in the morning, never coffee"


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


@pytest.fixture
def agent_live(start_daemon: StartDaemon, fake: FakeOpenAI) -> Live:
    llm = llm_settings(fake, max_retries=0, timeout=WAIT).model_dump()
    memory = {"consolidation": "rule", "capture": False}
    return start_daemon(settings={"llm": llm, "memory": memory})


def _ask(live: Live, fake: FakeOpenAI, command: str, session: str) -> None:
    fake.reply("", tool_calls=[("recall", {"topic": "tea in the morning"})], usage=(300, 12))
    fake.reply("Green tea, never coffee.", usage=(340, 7))
    with live.client() as api:
        result = ok(api.post("/v1/agent/run", json={"command": command, "session": session}))
    assert result["status"] == "done", result


def test_runs_are_listed_newest_first_and_one_shows_its_context_recalls_and_calls(
    agent_live: Live, fake: FakeOpenAI
) -> None:
    with agent_live.client() as api:
        tea = ok(api.post("/v1/memories", json={"text": TEA, "category": "fact"}))
    _ask(agent_live, fake, "Do I prefer green tea or coffee in the morning?", "api")
    _ask(agent_live, fake, "And in the evening?", "telegram:42")
    with agent_live.client() as api:
        listed = ok(api.get("/v1/runs"))
        assert [r["command"] for r in listed] == [
            "And in the evening?",
            "Do I prefer green tea or coffee in the morning?",
        ]
        assert "context" not in listed[0] and "tool_calls" not in listed[0]
        assert listed[0]["surface"] == "http" and listed[0]["model"] == "fake-model"
        assert [r["command"] for r in ok(api.get("/v1/runs", params={"limit": 1}))] == [
            "And in the evening?"
        ]
        first = listed[1]
        by_session = ok(api.get("/v1/runs", params={"session_id": first["session_id"]}))
        assert [r["id"] for r in by_session] == [first["id"]]
        assert ok(api.get("/v1/runs", params={"channel": "nowhere"})) == []

        run = ok(api.get(f"/v1/runs/{first['id']}"))
        assert run["command"] == "Do I prefer green tea or coffee in the morning?"
        assert (run["input_tokens"], run["output_tokens"], run["iterations"]) == (640, 19, 2)
        titles = [s["title"] for s in run["context"]["sections"]]
        assert any(t.startswith("Relevant to:") for t in titles), titles
        recalled = {h["id"]: h for h in run["recalled"]}
        assert recalled[tea["id"]]["score"] > 0 and TEA in recalled[tea["id"]]["line"]
        (call,) = run["tool_calls"]
        assert (call["name"], call["ok"]) == ("recall", True)
        assert "tea in the morning" in call["arguments"]

        failed(api.get("/v1/runs/999999"), 404, "not_found")
        failed(api.get("/v1/runs/0"), 400, "validation_failed")
        failed(api.get("/v1/runs", params={"limit": 0}), 400, "validation_failed")
        spec = api.get("/openapi.json").json()
    assert {"/v1/runs", "/v1/runs/{run_id}"} <= set(spec["paths"])


def test_a_token_bound_to_an_agent_sees_that_agents_runs_only(agent_live: Live) -> None:
    runs = agent_live.daemon.runtime.runs
    now = agent_live.daemon.runtime.clock.now()
    owners = runs.record(RunRecord(started_at=now, surface="cli", command="The owner's question"))
    scouts = runs.record(
        RunRecord(started_at=now, surface="mcp", command="The scout's question", agent="scout")
    )
    tokens = agent_live.daemon.tokens
    reader = tokens.create("reader", [Scope.READ])[1]
    scout = tokens.create("scout-desk", [Scope.READ], agent="scout")[1]

    with agent_live.client(token=reader) as api:
        assert {r["id"] for r in ok(api.get("/v1/runs"))} == {owners, scouts}
        assert ok(api.get(f"/v1/runs/{owners}"))["command"] == "The owner's question"
    with agent_live.client(token=scout) as api:
        assert [r["id"] for r in ok(api.get("/v1/runs"))] == [scouts]
        assert ok(api.get(f"/v1/runs/{scouts}"))["agent"] == "scout"
        gone = failed(api.get(f"/v1/runs/{owners}"), 404, "not_found")
        assert "no agent run" in gone["message"]
    with agent_live.client(token=None) as api:
        failed(api.get("/v1/runs"), 401, "unauthorized")
