"""Autostart: a search with no daemon running starts one, and the CLI never loads the model.

Every command here runs as its own process, through a small wrapper around
``memvault.cli.app:main`` that writes, at exit, which model libraries the
process imported. Every daemon a test caused is stopped at the end, however
the test went. The model comes from the run's cache (``$MEMVAULT_MODEL_CACHE``), as
everywhere in the suite: exported once, never into the user's own cache.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from cli_support import ok, ok_json
from memvault.gateway.client import DaemonInfo, DaemonLock, read_info
from memvault.locations import MODEL_CACHE_ENV
from waiting import WAIT, wait_for

pytestmark = [
    # A hang guard, well above what a test may spend: the first also indexes with the model.
    pytest.mark.timeout(5 * WAIT),
    pytest.mark.skipif(not Path("/proc/self/cmdline").exists(), reason="finds daemons in /proc"),
]

# Runs the CLI; at exit writes the model libraries this process imported to $MODEL_PROBE.
PROBE = """
import atexit, json, os, sys

def report():
    names = ("onnxruntime", "torch", "sentence_transformers")
    with open(os.environ["MODEL_PROBE"], "w") as out:
        json.dump([name for name in names if name in sys.modules], out)

atexit.register(report)
from memvault.cli.app import main
main()
"""
STARTED = "Started a memvault daemon"


@dataclass
class Ran:
    """A finished ``memvault`` process."""

    code: int
    stdout: str
    stderr: str
    model_libraries: list[str]

    def json(self) -> Any:
        assert self.code == 0, self.stderr
        return json.loads(self.stdout)


def _environment() -> dict[str, str]:
    """This process's environment without MEMVAULT_* settings, the run's model cache kept."""
    return {
        k: v for k, v in os.environ.items() if not k.startswith("MEMVAULT_") or k == MODEL_CACHE_ENV
    }


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Shell:
    """Runs ``memvault`` commands for one vault, as a person at a terminal would."""

    def __init__(self, vault: Path, port: int, scratch: Path) -> None:
        self.vault = vault
        self.port = port
        self.scratch = scratch
        self.runs = 0

    def env(self, probe: Path, extra: dict[str, str] | None) -> dict[str, str]:
        env = _environment()
        env.update(
            MEMVAULT_VAULT=str(self.vault),
            MEMVAULT_EMBEDDER__PROVIDER="local",
            MEMVAULT_SERVER__PORT=str(self.port),
            COLUMNS="200",
            MODEL_PROBE=str(probe),
        )
        env.update(extra or {})
        return env

    def start(
        self, *args: str, env: dict[str, str] | None = None
    ) -> tuple[subprocess.Popen[str], Path]:
        self.runs += 1
        probe = self.scratch / f"probe-{self.runs}.json"
        process = subprocess.Popen(
            [sys.executable, "-c", PROBE, *args],
            env=self.env(probe, env),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        return process, probe

    @staticmethod
    def finish(process: subprocess.Popen[str], probe: Path) -> Ran:
        stdout, stderr = process.communicate(timeout=WAIT)
        libraries = json.loads(probe.read_text()) if probe.exists() else ["(no report)"]
        return Ran(process.returncode, stdout, stderr, libraries)

    def run(self, *args: str, env: dict[str, str] | None = None) -> Ran:
        return self.finish(*self.start(*args, env=env))


def serving(vault: Path) -> list[int]:
    """Ids of the ``memvault serve`` processes for ``vault`` (zombies aside)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"serve" in argv and str(vault).encode() in argv:
            found.append(int(entry.name))
    return sorted(found)


def stop_daemons(vault: Path) -> None:
    """Stop every daemon serving ``vault``: SIGTERM, then SIGKILL if one is still there."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in serving(vault):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        with contextlib.suppress(AssertionError):
            wait_for(lambda: not serving(vault), "the vault's daemons to end")
            return


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A vault indexed with the local model (in a process of its own), and a memory's id."""
    root = tmp_path_factory.mktemp("autostart") / "vault"
    ok(None, "init", root)
    oolong = ok_json(root, "remember", "The owner drinks oolong every morning")["id"]
    ok(root, "remember", "The car is parked in the garage on level 3")
    env = _environment()
    env["MEMVAULT_EMBEDDER__PROVIDER"] = "local"
    subprocess.run(
        [sys.executable, "-m", "memvault", "--vault", str(root), "index"],
        env=env,
        check=True,
        capture_output=True,
        timeout=3 * WAIT,  # the first use of the local model in a run exports it
    )
    return root, oolong


@pytest.fixture
def shell(indexed: tuple[Path, str], tmp_path: Path) -> Iterator[Shell]:
    """A copy of the indexed vault, and a way to run commands on it; its daemons stop after."""
    root = tmp_path / "vault"
    shutil.copytree(indexed[0], root)
    try:
        yield Shell(root, _free_port(), tmp_path)
    finally:
        stop_daemons(root)


def ids(hits: Sequence[dict[str, Any]]) -> list[str]:
    return [hit["id"] for hit in hits]


@pytest.mark.slow
def test_a_search_starts_a_daemon_that_later_commands_use(
    shell: Shell, indexed: tuple[Path, str]
) -> None:
    oolong = indexed[1]
    with socket.socket() as taken:  # the configured port is in use: the daemon takes another
        taken.bind(("127.0.0.1", shell.port))
        taken.listen()
        first = shell.run("search", "oolong", "--json")

        assert ids(first.json())[0] == oolong
        assert first.model_libraries == [], "the CLI loaded the model itself"
        started, how = first.stderr.splitlines()[:2]
        assert started.startswith(STARTED) and f"for {shell.vault} at http://127.0.0.1:" in started
        assert "memvault serve --stop" in how and "--no-autostart" in how
        info = read_info(shell.vault)
        assert info is not None and info.port != shell.port
        assert serving(shell.vault) == [info.pid]
        assert (shell.vault / ".memvault/daemon.log").exists()

        later = shell.run("recall", "oolong", "--json")
        assert ids(later.json()) == [oolong]
        assert STARTED not in later.stderr and later.model_libraries == []
        tool = shell.run(
            "tools", "call", "memory_search", "--args", '{"query": "oolong"}', "--json"
        )
        assert ids(tool.json()["result"]["results"])[0] == oolong
        assert tool.model_libraries == []
        context = shell.run("context", "--query", "what does the owner drink")
        assert "oolong" in context.stdout and context.model_libraries == []

    assert serving(shell.vault) == [info.pid], "one daemon serves every command"
    stopped = shell.run("serve", "--stop")
    assert f"Stopped the daemon (pid {info.pid})" in stopped.stdout
    assert serving(shell.vault) == []


@pytest.mark.slow
def test_racing_commands_start_one_daemon(shell: Shell, indexed: tuple[Path, str]) -> None:
    racing = [shell.start("search", "oolong", "--json") for _ in range(2)]
    finished = [shell.finish(*started) for started in racing]

    for ran in finished:
        assert ids(ran.json())[0] == indexed[1]
        assert ran.model_libraries == []
    assert sum(STARTED in ran.stderr for ran in finished) == 1
    info = read_info(shell.vault)
    assert info is not None and info.port == shell.port  # the configured port was free
    assert serving(shell.vault) == [info.pid]


@pytest.mark.slow
def test_opting_out_answers_in_process(shell: Shell, indexed: tuple[Path, str]) -> None:
    config = shell.vault / ".memvault/config.toml"
    for how, args, env in (
        ("flag", ("--no-autostart",), None),
        ("--direct", ("--direct",), None),
        ("environment", (), {"MEMVAULT_CLI__AUTOSTART": "false"}),
        ("config file", (), None),
    ):
        if how == "config file":
            config.write_text("[cli]\nautostart = false\n")
        ran = shell.run(*args, "search", "oolong", "--json", env=env)

        assert ids(ran.json())[0] == indexed[1], how
        assert ran.stderr == "", how
        assert ran.model_libraries, (
            f"{how}: the model did not load in the CLI (is the probe blind?)"
        )
        assert read_info(shell.vault) is None and serving(shell.vault) == [], how


def test_commands_that_need_no_model_start_nothing(shell: Shell) -> None:
    for args in (
        ("remember", "Tea is best at 80 degrees"),
        ("memories",),
        ("search", "oolong", "--keyword"),
        ("recall", "oolong", "--keyword"),
        ("context",),
        ("tools", "call", "vault_list"),
    ):
        ran = shell.run(*args)
        assert ran.code == 0, (args, ran.stderr)
        assert STARTED not in ran.stderr and ran.model_libraries == [], args
    assert read_info(shell.vault) is None and serving(shell.vault) == []


@pytest.mark.slow
def test_a_daemon_that_cannot_start_is_explained(shell: Shell, indexed: tuple[Path, str]) -> None:
    # Announced as running (this process holds the daemon's lock) but listening nowhere:
    # the daemon started for the search refuses to run beside it.
    lock = DaemonLock.claim(shell.vault)
    lock.announce(
        DaemonInfo(pid=os.getpid(), host="127.0.0.1", port=_free_port(), version="", started_at=""),
    )
    (shell.vault / ".memvault/token").write_text("not-a-real-token\n")

    try:
        ran = shell.run("search", "oolong", "--json")
    finally:
        lock.release()

    assert ids(ran.json())[0] == indexed[1]
    message = ran.stderr.strip()
    assert message.startswith("The daemon stopped at start (") and "already serves" in message
    assert message.endswith("; answering in this process instead.")
    assert len(message.splitlines()) == 1
    assert ran.model_libraries  # answered here
    assert serving(shell.vault) == []
