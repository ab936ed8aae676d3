"""``POST /v1/agent/run`` and the agent's parts of the daemon, against a fake model."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import httpx2 as httpx
import pytest

from gateway_support import Live, StartDaemon, failed, ok, sse_frames
from llm_fakes import FakeOpenAI, llm_settings
from support import MovableClock
from waiting import WAIT, wait_for


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


@pytest.fixture
def agent_live(start_daemon: StartDaemon, fake: FakeOpenAI) -> Live:
    llm = llm_settings(fake, max_retries=0, timeout=WAIT).model_dump()
    return start_daemon(settings={"llm": llm, "agent": {"summary": "auto"}})


def _events(live: Live, kind: str) -> list[dict[str, Any]]:
    return [e.to_dict() for e in live.daemon.bus.since(0) if e.type == kind]


def test_a_run_answers_with_its_result_and_is_announced(agent_live: Live, fake: FakeOpenAI) -> None:
    fake.reply("", tool_calls=[("task_list", {})])
    fake.reply("Nothing is open.")
    with agent_live.client() as api:
        result = ok(api.post("/v1/agent/run", json={"command": "What is open?"}))
    assert result["status"] == "done" and result["answer"] == "Nothing is open."
    assert result["session"] == "api" and result["iterations"] == 2
    assert result["tool_calls"] == [{"name": "task_list", "ok": True, "code": None}]
    assert result["usage"]["input_tokens"] > 0
    announced = _events(agent_live, "agent_run")
    assert announced[-1]["payload"]["status"] == "done"
    messages = _events(agent_live, "session_message")
    assert [m["payload"]["role"] for m in messages] == ["user", "assistant", "tool", "assistant"]
    assert "done" in agent_live.daemon.runtime.journal.sections()["Actions Taken"][0]


def test_the_stream_carries_steps_text_and_the_result(agent_live: Live, fake: FakeOpenAI) -> None:
    fake.reply("", tool_calls=[("recall", {"topic": "boats"})])
    fake.reply("You have not told me about boats yet.")
    with (
        agent_live.client() as api,
        api.stream(
            "POST", "/v1/agent/run", json={"command": "Boats?", "stream": True, "session": "sse"}
        ) as response,
    ):
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        frames = sse_frames(response)
    kinds = [k for k, _ in frames]
    assert kinds[-1] == "done" and kinds.count("done") == 1
    steps = [d["kind"] for k, d in frames if k == "step"]
    assert steps[:4] == ["run_started", "model_call", "tool_call", "tool_result"]
    text = "".join(d["text"] for k, d in frames if k == "text")
    assert text == "You have not told me about boats yet."
    assert frames[-1][1]["answer"] == text and frames[-1][1]["session"] == "sse"


def test_write_tools_need_the_approval_token_unless_autonomous(
    agent_live: Live, fake: FakeOpenAI
) -> None:
    daemon = agent_live.daemon
    fake.reply("", tool_calls=[("remember", {"fact": "The boat is called Kestrel"})])
    fake.reply("I was not allowed to store that.")
    with agent_live.client() as api:
        refused = ok(api.post("/v1/agent/run", json={"command": "Remember Kestrel"}))
    assert refused["tool_calls"][0]["code"] == "not_approved"
    assert daemon.runtime.memories.list() == []
    fed_back = fake.requests[1]["messages"][-1]["content"]
    assert "did not approve remember" in fed_back

    fake.reply("", tool_calls=[("remember", {"fact": "The boat is called Kestrel"})])
    fake.reply("Stored.")
    with agent_live.client(**{"X-Memvault-Approval": daemon.approval_token}) as api:
        allowed = ok(api.post("/v1/agent/run", json={"command": "Remember Kestrel"}))
    assert allowed["tool_calls"][0]["ok"] is True
    assert [m.text for m in daemon.runtime.memories.list()] == ["The boat is called Kestrel"]

    fake.reply("", tool_calls=[("remember", {"fact": "Wrong token"})])
    fake.reply("Refused.")
    with agent_live.client(**{"X-Memvault-Approval": "guess"}) as api:
        guessed = ok(api.post("/v1/agent/run", json={"command": "Remember"}))
    assert guessed["tool_calls"][0]["code"] == "not_approved"


def test_ending_a_session_over_http_summarises_it(agent_live: Live, fake: FakeOpenAI) -> None:
    fake.reply("Noted, Friday at seven.")
    with agent_live.client() as api:
        ok(
            api.post(
                "/v1/agent/run",
                json={"command": "Dinner with Bram on Friday at 7", "session": "telegram:5"},
            )
        )
        fake.reply("Dinner with Bram is set for Friday at 7.")
        ended = ok(api.post("/v1/sessions/telegram:5/end"))
    assert ended["summary"] == "Dinner with Bram is set for Friday at 7."
    assert _events(agent_live, "session_ended")[-1]["payload"]["summary"] == ended["summary"]
    journal = agent_live.daemon.runtime.journal.sections()["Sessions"]
    assert "Dinner with Bram is set for Friday at 7." in journal[-1]


def test_bad_run_requests_are_refused_clearly(agent_live: Live) -> None:
    with agent_live.client() as api:
        failed(api.post("/v1/agent/run", json={}), 400, "validation_failed")
        failed(api.post("/v1/agent/run", json={"command": ""}), 400, "validation_failed")
        failed(
            api.post("/v1/agent/run", json={"command": "x", "extra": 1}), 400, "validation_failed"
        )
        failed(
            api.post("/v1/agent/run", json={"command": "x", "channel": "Not A Channel"}),
            400,
            "validation_failed",
        )
        failed(api.get("/v1/agent/run"), 405, "method_not_allowed")
    with agent_live.client(token=None) as anonymous:
        failed(anonymous.post("/v1/agent/run", json={"command": "x"}), 401, "unauthorized")


def test_without_a_model_the_run_says_how_to_configure_one(live: Live, api: httpx.Client) -> None:
    error = failed(api.post("/v1/agent/run", json={"command": "hello"}), 503, "llm_not_configured")
    assert "No language model is configured" in error["message"]
    assert "[llm]" in error["details"]["hint"]
    checks = {c["name"]: c for c in ok(api.get("/v1/doctor"))["checks"]}
    assert checks["llm"]["status"] == "warning"


def test_doctor_reports_a_model_that_keeps_failing(agent_live: Live, fake: FakeOpenAI) -> None:
    fake.fail(500, times=3)
    with agent_live.client() as api:
        for _ in range(3):
            result = ok(api.post("/v1/agent/run", json={"command": "Are you there?"}))
            assert result["status"] == "failed"
        error = failed(api.get("/v1/doctor"), 503, "unhealthy")
    checks = {c["name"]: c for c in error["details"]["checks"]}
    assert checks["llm"]["status"] == "error"
    assert "failed 3 calls in a row" in checks["llm"]["message"]
    fake.reply("Yes.")
    with agent_live.client() as api:
        ok(api.post("/v1/agent/run", json={"command": "Now?"}))
        checks = {c["name"]: c for c in ok(api.get("/v1/doctor"))["checks"]}
    assert checks["llm"]["status"] == "ok"


def test_a_client_that_goes_away_cancels_the_run(agent_live: Live, fake: FakeOpenAI) -> None:
    requests = agent_live.server.server_state.tasks  # the daemon's requests being answered

    def once_the_client_has_gone(_request: dict[str, Any]) -> tuple[str, list[Any]]:
        # The model answers once the daemon is done with the stream: the client went away.
        wait_for(lambda: not requests, "the daemon to end the stream of a client that left")
        return "", [("task_list", {})]

    fake.reply_with(once_the_client_has_gone)
    with (
        agent_live.client() as api,
        api.stream("POST", "/v1/agent/run", json={"command": "Slow", "stream": True}) as response,
    ):
        for line in response.iter_lines():
            if "run_started" in line:
                break
    wait_for(lambda: _events(agent_live, "agent_run"), "the run to finish")
    run = _events(agent_live, "agent_run")[-1]["payload"]
    assert run["status"] == "cancelled" and run["tool_calls"] == 0  # the scripted call never ran
    assert len(fake.requests) <= 1


def test_the_daemon_ends_idle_sessions_with_a_summary(
    start_daemon: StartDaemon, clock: MovableClock
) -> None:
    live = start_daemon(settings={"agent": {"session_idle_minutes": 0.01, "summary": "extractive"}})
    text = "We agreed to repaint the Kestrel in April with Bram."
    with live.client() as api:
        ok(api.post("/v1/sessions/telegram:9/messages", json={"text": text}))
        clock.set(clock.now() + timedelta(minutes=5))
        wait_for(lambda: _events(live, "session_ended"), "the idle session to be ended")
        session = ok(api.get("/v1/sessions/telegram:9"))["session"]
    assert session["active"] is False
    assert "repaint the Kestrel in April" in session["summary"]
    assert "Kestrel" in live.daemon.runtime.journal.sections()["Sessions"][-1]
