"""The daemon as a process: who it is, what it leaves on disk, how it ends, where it binds.

Real ``memvault serve`` and ``memvault mcp --http`` processes, real signals, a real
unrelated process whose pid a stale ``daemon.json`` names; every wait is bounded.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import select
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx2 as httpx
import pytest

from cli_support import EXIT_CONFLICT, fail, invoke, ok, ok_json
from daemon_process import DaemonProcess, daemon_env
from gateway_support import Live, failed
from memvault.gateway.client import DaemonClient, DaemonInfo, read_info, write_info
from memvault.index.local_model import ModelFile
from memvault.locations import private_state_dir
from memvault.processes import process_start
from memvault.vault.layout import init_vault
from memvault.vault.store import Vault
from waiting import WAIT, wait_for

pytestmark = pytest.mark.timeout(3 * WAIT)  # a hang guard: every wait has its own bound

TERMINATE = "terminate called"
MEMVAULT_VAULT = (sys.executable, "-m", "memvault", "--vault")


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    root = tmp_path / "vault"
    init_vault(Vault(root))
    return root


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    """An unrelated process: what a crashed daemon's pid may name by now."""
    process = subprocess.Popen(["sleep", "3600"])  # outlives any test: killed at its end
    yield process
    process.kill()
    process.wait(WAIT)


@pytest.fixture
def loose_umask() -> Iterator[None]:
    """The common umask (022): files come out 0644 unless memvault says otherwise."""
    previous = os.umask(0o022)
    yield
    os.umask(previous)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# -- 6: a stale daemon.json ---------------------------------------------------------------


def _announce(vault: Path, pid: int) -> DaemonInfo:
    info = DaemonInfo(
        pid=pid,
        host="127.0.0.1",
        port=_free_port(),
        version="0.0.0",
        started_at="2026-11-24T08:00:00+00:00",
        process_start=process_start(pid),  # even its start time matches: only the lock tells
    )
    write_info(vault, info)
    return info


def test_a_stale_daemon_json_naming_another_process_is_not_believed(
    vault: Path, sleeper: subprocess.Popen[bytes]
) -> None:
    _announce(vault, sleeper.pid)
    status = invoke(vault, "serve", "--status")
    assert status.exit_code == 1 and "No daemon serves" in status.stdout
    assert read_info(vault) is None, "the stale file is removed"

    _announce(vault, sleeper.pid)
    stopped = ok(vault, "serve", "--stop").stdout
    assert "stale" in stopped and f"pid {sleeper.pid}" in stopped
    assert sleeper.poll() is None, "serve --stop signalled an unrelated process"
    assert read_info(vault) is None

    _announce(vault, sleeper.pid)
    (vault / ".memvault/token").write_text("not-the-token\n")
    stored = ok_json(vault, "remember", "Works beside a stale daemon.json")  # direct mode
    assert stored["created_new"] is True and read_info(vault) is None

    _announce(vault, sleeper.pid)
    serving = DaemonProcess(vault)
    try:
        assert serving.info.pid == serving.process.pid
        assert ok_json(vault, "serve", "--status")["pid"] == serving.process.pid
        assert (
            f"Stopped the daemon (pid {serving.process.pid})" in ok(vault, "serve", "--stop").stdout
        )
        code, err = serving.stop()
        assert code == 0, err[-2000:]
    finally:
        serving.stop(signal.SIGKILL)
    assert sleeper.poll() is None
    assert "No daemon serves" in invoke(vault, "serve", "--status").stdout


def test_a_killed_daemon_leaves_nothing_that_blocks_the_next(vault: Path) -> None:
    first = DaemonProcess(vault)
    first.stop(signal.SIGKILL)
    assert read_info(vault) is not None, "SIGKILL leaves daemon.json behind"

    assert invoke(vault, "serve", "--status").exit_code == 1
    second = DaemonProcess(vault)  # starts: the dead daemon's lock went with it
    try:
        again = fail(vault, "serve", "--port", "0", code=EXIT_CONFLICT)
        assert f"already serves {vault}" in again and f"pid {second.process.pid}" in again
        code, err = second.stop()
        assert code == 0, err[-2000:]
    finally:
        second.stop(signal.SIGKILL)


# -- 7: private files, and the Host rule --------------------------------------------------


def _modes(state: Path) -> dict[str, str]:
    found = {}
    for path in [state, *state.rglob("*")]:
        mode = stat.S_IMODE(path.lstat().st_mode)
        found[str(path.relative_to(state.parent))] = f"{mode:o}"
    return found


def _loose(state: Path) -> dict[str, str]:
    return {name: mode for name, mode in _modes(state).items() if int(mode, 8) & 0o077}


def test_the_state_folder_and_its_files_are_the_owners_alone(
    vault: Path, loose_umask: None
) -> None:
    state = vault / ".memvault"
    assert _modes(state)[".memvault"] == "700" and _loose(state) == {}, "after init"

    ok_json(vault, "remember", "The boat is called Halcyon")
    assert {".memvault/index.db", ".memvault/locks"} <= set(_modes(state))
    assert _loose(state) == {}, "after remember"

    serving = DaemonProcess(vault)
    with httpx.Client(base_url=serving.info.url, timeout=WAIT) as api:
        token = (state / "token").read_text().strip()
        api.headers["Authorization"] = f"Bearer {token}"
        assert api.post("/v1/memories", json={"text": "The mooring is in Kiel"}).is_success
        assert api.post("/v1/sessions/s1/messages", json={"text": "hello"}).is_success
        running = _modes(state)
        assert {".memvault/daemon.json", ".memvault/daemon.lock", ".memvault/state.db"} <= set(
            running
        )
        assert {".memvault/index.db-wal", ".memvault/state.db-wal"} <= set(running)
        assert _loose(state) == {}, "while the daemon runs"
    code, err = serving.stop()
    assert code == 0, err[-2000:]
    assert _loose(state) == {}, "after the daemon"


def test_an_older_vault_is_tightened_when_opened_and_doctor_names_loose_files(
    vault: Path, loose_umask: None
) -> None:
    ok_json(vault, "remember", "Written before the upgrade")
    state = vault / ".memvault"
    for path in [state, *state.rglob("*")]:  # what an older memvault left
        os.chmod(path, 0o755 if path.is_dir() else 0o644)

    ok_json(vault, "memories")
    assert _loose(state) == {}, "opening the vault tightened it"
    checks = {c["name"]: c for c in ok_json(vault, "doctor")["checks"]}
    assert checks["state_private"]["status"] == "ok"

    os.chmod(state / "config.toml", 0o644)  # loosened by hand, behind a private folder
    check = {c["name"]: c for c in ok_json(vault, "doctor")["checks"]}["state_private"]
    assert check["status"] == "warning" and ".memvault/config.toml (644)" in check["message"]
    assert f"chmod -R go-rwx {state}" in check["message"]


ROUTES = (
    ("GET", "/v1/health"),
    ("GET", "/v1/memories"),
    ("POST", "/v1/memories"),
    ("GET", "/v1/search?q=boat"),
    ("GET", "/v1/poll"),
    ("GET", "/v1/events"),
    ("POST", "/mcp"),
)


def test_every_route_answers_only_to_the_daemons_own_names(live: Live) -> None:
    port = live.daemon.port
    with live.client() as api:
        for host in ("evil.example", f"evil.example:{port}", f"localhost:{port + 1}", ""):
            for method, path in ROUTES:
                answer = api.request(method, path, headers={"Host": host}, json={"text": "x"})
                error = failed(answer, 421, "misdirected_request")
                assert "Host" in error["message"], (host, path)
        assert api.get("/v1/memories").json()["result"] == [], "nothing was written"
        for host in (
            f"127.0.0.1:{port}",
            f"localhost:{port}",
            f"LocalHost:{port}",
            f"[::1]:{port}",
        ):
            assert api.get("/v1/poll", headers={"Host": host}).status_code == 200, host
    client = DaemonClient(read_info(live.vault) or pytest.fail("no daemon.json"), live.daemon.token)
    assert client.request("GET", "/v1/memories") == []  # the CLI's client sends its Host


# -- 8 and 9: stopping while the model loads, or while a request hangs ----------------


@pytest.mark.slow
def test_sigterm_while_the_local_model_loads_exits_cleanly(
    vault: Path, prepared_model: ModelFile
) -> None:
    for i in range(40):
        (vault / f"n{i}.md").write_text(f"# Note {i}\n\nThe harbour log, entry {i}.\n")
    env = daemon_env(
        MEMVAULT_EMBEDDER__PROVIDER="local",
        MEMVAULT_MODEL_CACHE=str(prepared_model.cache),
        # No time for the loading thread: the process must still leave cleanly.
        MEMVAULT_SERVER__SHUTDOWN_GRACE_SECONDS="0.01",
    )
    for delay in (0.0, 0.05, 0.3):  # before, during and (mostly) after the load
        serving = DaemonProcess(vault, env=env)
        time.sleep(delay)
        code, err = serving.stop()
        assert code == 0 and TERMINATE not in err, (delay, err[-2000:])
        assert read_info(vault) is None, delay


class BlackHole:
    """A port that takes requests and never answers (an API gone silent); ``asked`` holds
    the first line of each request."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.asked: list[str] = []
        self._held: list[socket.socket] = []
        threading.Thread(target=self._take, name="black-hole", daemon=True).start()

    def _take(self) -> None:
        with contextlib.suppress(OSError):  # closed
            while True:
                connection, _ = self.listener.accept()
                self._held.append(connection)
                threading.Thread(target=self._hear, args=(connection,), daemon=True).start()

    def _hear(self, connection: socket.socket) -> None:
        with contextlib.suppress(OSError):
            self.asked.append(connection.makefile("rb").readline().decode().strip())

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.listener.shutdown(socket.SHUT_RDWR)  # wakes the accept
        self.listener.close()
        for connection in self._held:
            connection.close()


def test_sigterm_ends_the_daemon_while_requests_and_threads_hang(vault: Path) -> None:
    hole = BlackHole()
    silent = f"http://127.0.0.1:{hole.port}/v1"
    ok_json(vault, "remember", "The boat is called Halcyon")  # work for the backfill
    env = daemon_env(
        # The backfill thread waits on the silent embeddings API ...
        MEMVAULT_EMBEDDER__PROVIDER="openai",
        MEMVAULT_EMBEDDER__BASE_URL=silent,
        MEMVAULT_EMBEDDER__TIMEOUT="300",
        MEMVAULT_EMBEDDER__MAX_RETRIES="0",
        # ... and agent runs (request worker threads) on the silent model.
        MEMVAULT_LLM__PROVIDER="openai",
        MEMVAULT_LLM__MODEL="silent",
        MEMVAULT_LLM__BASE_URL=silent,
        MEMVAULT_LLM__API_KEY_ENV="SILENT_KEY",
        MEMVAULT_LLM__TIMEOUT="300",
        MEMVAULT_LLM__MAX_RETRIES="0",
        SILENT_KEY="not-used",
        MEMVAULT_SERVER__SHUTDOWN_GRACE_SECONDS="1",
    )
    serving = DaemonProcess(vault, env=env)
    token = (vault / ".memvault/token").read_text().strip()
    answers: list[object] = []

    def run_agent() -> None:
        try:
            answers.append(
                httpx.post(
                    f"{serving.info.url}/v1/agent/run",
                    json={"command": "What is the boat called?"},
                    headers={"Authorization": f"Bearer {token}"},
                    timeout=None,  # they hang until the daemon goes
                )
            )
        except httpx.TransportError as exc:
            answers.append(exc)

    hanging = [threading.Thread(target=run_agent, daemon=True) for _ in range(2)]
    for thread in hanging:
        thread.start()

    def all_waiting() -> bool:
        asked = [line.split()[1] for line in hole.asked if line]
        return asked.count("/v1/chat/completions") == 2 and "/v1/embeddings" in asked

    wait_for(all_waiting, "the backfill and both agent runs to wait on the silent APIs")
    assert answers == [], "the agent runs were meant to hang on the silent model"
    try:
        code, err = serving.stop()  # fails unless the daemon exits long before the hang ends
    finally:
        hole.close()
    assert code == 0, err[-2000:]
    lines = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
    assert any(line["message"].startswith("threads still busy") for line in lines), err[-2000:]
    assert lines[-1]["message"] == "memvault daemon stopped"
    assert read_info(vault) is None


# -- 15: a busy port ----------------------------------------------------------------------


def test_mcp_http_on_a_busy_port_says_so_in_one_sentence(vault: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        ran = subprocess.run(
            [*MEMVAULT_VAULT, str(vault), "mcp", "--http", "--port", str(port)],
            env=daemon_env(),
            capture_output=True,
            text=True,
            timeout=WAIT,
        )
    assert ran.returncode == EXIT_CONFLICT, ran.stderr
    message = ran.stderr.strip()
    assert message == f"Error: Port {port} on 127.0.0.1 is in use; choose another with --port."
    assert "memvault MCP at" not in ran.stderr


def _answers(url: str, process: subprocess.Popen[str]) -> bool:
    """Whether ``url`` gives any HTTP answer; the test fails if ``process`` has ended."""
    assert process.poll() is None, "the server ended"
    try:
        httpx.get(url, timeout=WAIT)
    except httpx.TransportError:
        return False
    return True


def test_mcp_http_stops_cleanly_on_sigterm(vault: Path) -> None:
    port = _free_port()
    process = subprocess.Popen(
        [*MEMVAULT_VAULT, str(vault), "mcp", "--http", "--port", str(port)],
        env=daemon_env(),
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        # Serving, not only bound (SIGTERM before uvicorn runs is the default kill).
        wait_for(lambda: _answers(f"http://127.0.0.1:{port}/mcp", process), "the MCP server")
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=WAIT)
    finally:
        process.kill()
    assert process.returncode == 0, err
    assert f"memvault MCP at http://127.0.0.1:{port}/mcp" in err and "Traceback" not in err


def test_mcp_http_on_port_zero_announces_the_port_it_picked(vault: Path) -> None:
    """As `serve --port 0` does: a free port is picked, and the announced address answers."""
    process = subprocess.Popen(
        [*MEMVAULT_VAULT, str(vault), "mcp", "--http", "--port", "0"],
        env=daemon_env(),
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stderr is not None
        ready, _, _ = select.select([process.stderr], [], [], WAIT)
        assert ready, f"mcp --http announced nothing in {WAIT:g} s"
        line = process.stderr.readline()
        match = re.search(r"memvault MCP at http://127\.0\.0\.1:(\d+)/mcp", line)
        assert match and int(match.group(1)) > 0, line
        url = f"http://127.0.0.1:{match.group(1)}/mcp"
        # Serving, not only bound: any HTTP answer will do.
        wait_for(lambda: _answers(url, process), "the announced address to answer")
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=WAIT)
    finally:
        process.kill()
    assert process.returncode == 0


def test_serve_on_a_port_another_vaults_daemon_holds_names_it(vault: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    init_vault(Vault(other))
    serving = DaemonProcess(other)
    try:
        port = serving.info.port
        message = fail(vault, "serve", "--port", port, code=EXIT_CONFLICT)
        assert message == "Error: " + (
            f"Port {port} on 127.0.0.1 is in use by the memvault daemon of another vault "
            f"(version {serving.info.version}); choose another with --port."
        )
        assert read_info(vault) is None
    finally:
        code, err = serving.stop()
    assert code == 0, err[-2000:]


def test_tightening_keeps_the_owners_own_bits(tmp_path: Path) -> None:
    """A state folder its owner made read-only (0555) loses others' access, never gains write."""
    state = tmp_path / ".memvault"
    state.mkdir()
    config = state / "config.toml"
    config.write_text("x = 1\n")
    os.chmod(config, 0o444)
    os.chmod(state, 0o555)
    try:
        private_state_dir(state)
        assert stat.S_IMODE(state.stat().st_mode) == 0o500
        assert stat.S_IMODE(config.stat().st_mode) == 0o400
    finally:
        os.chmod(state, 0o700)
