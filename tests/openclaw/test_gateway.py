"""memvault as the memory of a running OpenClaw gateway, end to end.

One real gateway per module (its cold start takes 15-55 s): installed by
``memvault openclaw install`` into a temporary HOME beside a real ``memvault
serve``, with a scripted OpenAI-compatible model on loopback. The tools are
called through the gateway's ``POST /tools/invoke``; one agent turn runs
through ``openclaw agent``.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from daemon_process import DaemonProcess
from llm_fakes import FakeOpenAI
from openclaw_support import Gateway, Home, home_env, make_home, scripted_model
from waiting import WAIT, wait_for

# A hang guard only, above the bounds a test may meet: the first one also sets up
# OpenClaw, the daemon, the install and the gateway (about twelve of WAIT in all).
pytestmark = [pytest.mark.timeout(15 * WAIT), pytest.mark.slow]

QUESTION = "Which coffee do I like?"
# The installed plugin gives the daemon 1.5 s a call (a turn must not wait long for an
# optional helper); a loaded test machine's daemon may answer later than a person's.
PATIENT = {"entries": {"memvault": {"config": {"timeoutMs": int(WAIT * 1000)}}}}


@dataclass
class Running:
    home: Home
    daemon: DaemonProcess
    gateway: Gateway
    model: FakeOpenAI


def _answer(request: dict[str, Any]) -> tuple[str, list[tuple[str, dict[str, Any]]]] | str:
    """The scripted model: asks memory_search once, then answers with what it returned."""
    messages = request.get("messages", [])
    tools = {t.get("function", {}).get("name") for t in request.get("tools", [])}
    results = [m for m in messages if m.get("role") == "tool"]
    if results:
        content = results[-1].get("content")
        text = content if isinstance(content, str) else json.dumps(content)
        return f"From memory: {text[:400]}"
    if "memory_search" in tools:
        return "", [("memory_search", {"query": "coffee roast"})]
    return "NO_REPLY"


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    tmp = tmp_path_factory.mktemp("gw")
    home = make_home(tmp)
    daemon = DaemonProcess(home.vault)
    model = FakeOpenAI().__enter__()
    gateway: Gateway | None = None
    try:
        home.memvault("install", "--openclaw", str(home.command))
        for _ in range(40):
            model.reply_with(_answer)
        gateway = Gateway(
            home.command,
            home.root,
            before_start=lambda port: _patch(
                home,
                {**scripted_model(model.url), "gateway": {"port": port}, "plugins": PATIENT},
            ),
        )
        gateway.wait_ready()
        yield Running(home, daemon, gateway, model)
    finally:
        if gateway is not None:
            gateway.stop()
        model.__exit__(None, None, None)
        daemon.stop()


def _patch(home: Home, patch: dict[str, Any]) -> None:
    done = subprocess.run(
        [str(home.command), "config", "patch", "--stdin"],
        input=json.dumps(patch),
        env=home_env(home.root),
        capture_output=True,
        text=True,
        timeout=1.5 * WAIT,
        check=False,
    )
    assert done.returncode == 0, done.stderr


def _details(response: Any) -> dict[str, Any]:
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["ok"] is True, body
    result = body["result"]
    assert json.loads(result["content"][0]["text"]) == result["details"]
    return dict(result["details"])


def test_memory_search_and_get_answer_from_memvault(running: Running) -> None:
    found = _details(running.gateway.invoke("memory_search", {"query": "dark roast coffee"}))
    assert found["provider"] == "memvault", found
    top = found["results"][0]
    assert "Kaffeerösterei" in top["snippet"], found
    assert {"path", "startLine", "endLine", "score", "snippet", "source"} <= set(top)
    read = _details(
        running.gateway.invoke("memory_get", {"path": top["path"], "from": top["startLine"]})
    )
    assert read["status"] == "ok" and "Kaffeerösterei" in read["text"], read
    missing = _details(running.gateway.invoke("memory_get", {"path": "Nowhere/missing.md"}))
    assert missing["status"] == "not_found" and missing["text"] == "", missing


def test_an_agent_turn_recalls_searches_and_is_logged(running: Running) -> None:
    done = subprocess.run(
        [str(running.home.command), "agent", "--agent", "main", "--message", QUESTION, "--json"],
        env=running.gateway.env(),
        capture_output=True,
        text=True,
        timeout=2.5 * WAIT,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:] + running.gateway.tail()
    answer = json.loads(done.stdout[done.stdout.index("{") :])
    receipt = json.dumps(answer, ensure_ascii=False)
    used = answer["result"]["meta"]["agentMeta"]["terminalReceipt"]["successfulToolNames"]
    assert "memory_search" in used, receipt[:3000]
    assert "Kaffeerösterei" in receipt, receipt[:3000]
    # What the model was shown: the recall, the memory section, the skill and the note.
    first = next(r for r in running.model.requests if QUESTION in json.dumps(r))
    shown = json.dumps(first, ensure_ascii=False)
    assert "<memvault-recall>" in shown, shown[:2000]
    assert "## Memory Recall" in shown
    assert "<name>memvault</name>" in shown
    assert "Your long-term memory is memvault" in shown
    # The turn landed in a memvault session: the plugin logs the answer once the turn has
    # ended, on its own time (agent_end), so it is waited for.
    with running.daemon.client() as client:

        def logged() -> list[tuple[str, str]]:
            sessions = client.get("/v1/sessions", params={"channel": "openclaw"}).json()
            if not sessions["result"]:
                return []
            key = sessions["result"][0]["key"]
            messages = client.get(f"/v1/sessions/{key}").json()["result"]["messages"]
            return [(m["role"], m["text"]) for m in messages]

        texts = wait_for(
            lambda: (
                any(role == "assistant" and "From memory" in text for role, text in logged())
                and logged()
            ),
            "the answer logged in a memvault session",
        )
    assert ("user", QUESTION) in texts, texts
    assert not any("<memvault-recall>" in text for _, text in texts), texts


def test_a_session_reset_ends_the_memvault_session_with_a_summary(running: Running) -> None:
    with running.daemon.client() as client:
        before = client.get("/v1/sessions", params={"channel": "openclaw"}).json()["result"]
    open_ones = [s for s in before if s["ended_at"] is None]
    assert open_ones, before
    key = open_ones[0]["key"]
    assert key.startswith("openclaw:"), key
    done = subprocess.run(
        [
            str(running.home.command),
            "gateway",
            "call",
            "sessions.reset",
            "--params",
            json.dumps({"key": key.removeprefix("openclaw:")}),
            "--json",
        ],
        env=running.gateway.env(),
        capture_output=True,
        text=True,
        timeout=1.5 * WAIT,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]

    with running.daemon.client() as client:

        def ended() -> dict[str, Any] | None:
            found: dict[str, Any] = client.get(f"/v1/sessions/{key}").json()["result"]["session"]
            return found if found["ended_at"] is not None else None

        session = wait_for(ended, "the memvault session to end")
    assert session["summary"] and "Kaffeerösterei" in session["summary"], session


def _bench_openclaw() -> Any:
    """bench/openclaw.py, loaded by its path (its ``scale`` beside it)."""
    bench = Path(__file__).resolve().parents[2] / "bench"
    sys.path.insert(0, str(bench))
    spec = importlib.util.spec_from_file_location("bench_openclaw", bench / "openclaw.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_openclaw_benchmark_measures_the_running_gateway(running: Running) -> None:
    """The OpenClaw benchmark stays runnable: its timings, taken on this module's gateway
    (``make bench`` starts its own, on a larger vault; a gateway's cold start is paid once)."""
    bench = _bench_openclaw()
    with running.daemon.client() as daemon:
        timed = bench.measure(running.gateway, daemon, ["dark roast coffee", "kayak trip"])
    for call in ("daemon_search", "gateway_search", "gateway_get"):
        assert 0 < timed[call]["p50_ms"] <= timed[call]["p95_ms"], timed
