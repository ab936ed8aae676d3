"""``memvault serve`` as a real process: CLI client mode, status and stop, graceful shutdown."""

from __future__ import annotations

import json
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest

from cli_support import EXIT_CONFLICT, EXIT_NOT_FOUND, fail, invoke, ok, ok_json
from daemon_process import DaemonProcess, daemon_env
from memvault.vault.layout import init_vault
from memvault.vault.store import Vault
from waiting import WAIT, wait_for

pytestmark = pytest.mark.timeout(3 * WAIT)  # a hang guard: every wait has its own bound


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    root = tmp_path / "vault"
    init_vault(Vault(root))
    return root


@pytest.fixture
def served(vault: Path) -> Iterator[DaemonProcess]:
    running = DaemonProcess(vault)
    yield running
    running.stop()


def events(served: DaemonProcess) -> list[dict[str, Any]]:
    with served.client() as api:
        return list(api.get("/v1/poll").json()["result"]["events"])


def test_cli_goes_through_the_daemon_and_answers_like_direct_mode(
    vault: Path, served: DaemonProcess
) -> None:
    stored = ok_json(
        vault, "remember", "The boat is called Halcyon", "--category", "fact", "-t", "boat"
    )
    assert stored["created_new"] is True
    served_ids = [e["payload"]["id"] for e in events(served) if e["type"] == "memory_stored"]
    assert served_ids == [stored["id"]], "the daemon stored it"

    direct = ok_json(vault, "--direct", "remember", "The boat is called Halcyon")
    assert direct["consolidation"]["action"] == "noop"
    assert {**direct, "consolidation": None} == {
        **stored,
        "created_new": False,
        "consolidation": None,
    }
    ok_json(vault, "--direct", "remember", "The mooring is in Kiel harbour", "-c", "fact")
    assert [e["payload"]["id"] for e in events(served) if e["type"] == "memory_stored"] == [
        stored["id"]
    ], "--direct did not use the daemon"

    for args in (
        ("get", stored["id"]),
        ("memories",),
        ("memories", "--category", "fact", "--limit", "1"),
        ("search", "boat Halcyon"),
        ("search", "harbour", "--kind", "memory", "--keyword"),
        ("recall", "mooring"),
        ("context", "--query", "where is the boat", "--budget", "300"),
    ):
        via_daemon = ok_json(vault, *args)
        assert via_daemon == ok_json(vault, "--direct", *args), args
    for args in (("get", stored["id"]), ("recall", "boat"), ("memories",)):
        assert ok(vault, *args).stdout == ok(vault, "--direct", *args).stdout, args

    text = ok(vault, "remember", "The boat is called Halcyon").stdout
    assert text == f"Already remembered as {stored['id']} in Memory/Facts.md\n"

    forgotten = ok_json(vault, "forget", stored["id"])
    assert forgotten["forgotten"] is True and forgotten["id"] == stored["id"]
    assert f"^{stored['id']}" not in (vault / "Memory/Facts.md").read_text()
    message = fail(vault, "get", stored["id"], code=EXIT_NOT_FOUND)
    assert message == fail(vault, "--direct", "get", stored["id"], code=EXIT_NOT_FOUND)
    assert fail(vault, "recall", "", code=2)


def test_doctor_and_status_through_the_daemon(vault: Path, served: DaemonProcess) -> None:
    report = ok_json(vault, "doctor")
    assert report["checked_by"] == "daemon"
    assert {"token_file", "server_bind", "state_db"} <= {c["name"] for c in report["checks"]}
    status = ok_json(vault, "serve", "--status")
    assert status["running"] is True and status["pid"] == served.process.pid
    assert status["url"] == served.url
    assert "serves" in ok(vault, "serve", "--status").stdout

    message = fail(vault, "serve", "--port", "0", code=EXIT_CONFLICT)
    assert f"pid {served.process.pid}" in message


def test_without_a_daemon_commands_work_directly(vault: Path) -> None:
    report = ok_json(vault, "doctor")
    assert report["checked_by"] == "local"
    assert "token_file" not in {c["name"] for c in report["checks"]}
    stopped = invoke(vault, "serve", "--status")
    assert stopped.exit_code == 1 and "No daemon serves" in stopped.stdout
    stored = ok_json(vault, "remember", "Works without the daemon")
    assert stored["created_new"] is True
    # A stale daemon.json (its process is gone) is ignored.
    (vault / ".memvault/daemon.json").write_text(
        json.dumps({"pid": 999_999_999, "host": "127.0.0.1", "port": 9, "version": "x"})
    )
    assert ok_json(vault, "get", stored["id"])["id"] == stored["id"]


def test_serve_stop_ends_the_daemon_cleanly(vault: Path) -> None:
    served = DaemonProcess(vault)
    result = ok(vault, "serve", "--stop")
    assert f"Stopped the daemon (pid {served.process.pid})" in result.stdout
    code, err = served.stop()
    assert code == 0, err
    assert not (vault / ".memvault/daemon.json").exists()
    assert "Traceback" not in err
    lines = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
    assert any(line["message"] == "memvault daemon stopped" for line in lines)
    assert all({"time", "level", "logger", "message"} <= set(line) for line in lines)
    assert "No daemon serves" in ok(vault, "serve", "--stop").stdout


def test_ctrl_c_stops_cleanly(vault: Path) -> None:
    served = DaemonProcess(vault)
    code, err = served.stop(signal.SIGINT)
    assert code == 0, err
    assert not (vault / ".memvault/daemon.json").exists()


def test_sigterm_loses_no_accepted_write(vault: Path) -> None:
    served = DaemonProcess(vault)
    accepted: list[str] = []
    lock = threading.Lock()
    stop = threading.Event()

    def writer(n: int) -> None:
        with served.client() as api:
            for i in range(1000):
                if stop.is_set():
                    return
                try:
                    response = api.post("/v1/memories", json={"text": f"writer {n} fact {i}"})
                except httpx.TransportError:
                    return  # the daemon is gone: this one was never accepted
                if response.status_code == 200:
                    with lock:
                        accepted.append(response.json()["result"]["id"])

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    try:
        wait_for(lambda: len(accepted) >= 40, "40 accepted writes")
    finally:  # stopped while the writers write, whatever came of the wait
        code, err = served.stop(signal.SIGTERM)
        stop.set()
        for thread in threads:
            thread.join(WAIT)
    assert code == 0, err[-2000:]
    assert len(accepted) >= 40
    stored = (vault / "Memory/Facts.md").read_text()
    missing = [memory_id for memory_id in accepted if f"^{memory_id}" not in stored]
    assert missing == []


def test_non_loopback_bind_says_the_token_is_required(vault: Path) -> None:
    served = DaemonProcess(
        vault, "--host", "0.0.0.0", env=daemon_env(MEMVAULT_SERVER__ALLOW_REMOTE="true")
    )
    try:
        with httpx.Client(base_url=served.url, timeout=WAIT) as anonymous:
            assert anonymous.get("/v1/poll").status_code == 401
    finally:
        code, err = served.stop()
    assert code == 0
    assert "other machines can reach this API" in err and "TLS" in err and "named token" in err
