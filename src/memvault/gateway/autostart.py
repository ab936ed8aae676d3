"""Starting the daemon in the background for a command that would load the model.

Without a daemon, every ``memvault search`` loads the embedding model in its
own process: seconds each time. The first such command instead starts
``memvault serve`` for the vault, detached (its own session, its output in
``.memvault/daemon.log``), waits until it answers, and sends its request
there; later commands find it through ``daemon.json`` and answer at once.

A lock file (``.memvault/autostart.lock``) is held from "is one running?"
to "it answers", so two commands racing to start one end with one daemon:
the second waits, then finds the first one's. (The daemon itself holds
``daemon.lock`` for its whole life; see :mod:`memvault.gateway.client`.)
The daemon listens on loopback at the configured port, or on a free one
when that is taken; it announces the port it got. Standard library and
filelock only: this runs before anything heavy is imported.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock, Timeout

from memvault.errors import MemvaultError
from memvault.gateway.client import DaemonClient, read_info
from memvault.gateway.security import read_secret
from memvault.locations import (
    AUTOSTART_LOCK,
    DAEMON_LOG,
    PRIVATE_FILE,
    TOKEN_FILE,
    is_vault,
    private_state_dir,
    state_dir,
)

# A cold start takes seconds, tens of them on a slow machine with other work running; the
# wait ends the moment the daemon answers or exits, so only one that hangs is waited out.
START_TIMEOUT = 60.0
HOST = "127.0.0.1"  # a daemon nobody asked for explicitly is never reachable from elsewhere
_POLL = 0.05
_HEALTH_TIMEOUT = 5.0
# Processes this one started: kept referenced, so no "still running" warning fires on exit.
_STARTED: list[subprocess.Popen[bytes]] = []


class AutostartError(MemvaultError):
    """The daemon could not be started or did not answer; the command runs in-process."""


@dataclass(frozen=True)
class Autostarted:
    """The daemon serving the vault, and whether this command started it."""

    client: DaemonClient
    started: bool
    log: Path


def log_path(vault: Path) -> Path:
    """``<vault>/.memvault/daemon.log``: what a started daemon wrote."""
    return state_dir(vault) / DAEMON_LOG


def ensure_daemon(vault: Path, *, port: int, timeout: float = START_TIMEOUT) -> Autostarted:
    """A daemon answering for ``vault``: the running one, or one started now.

    Raises AutostartError, in one sentence, when none could be started in
    ``timeout`` seconds (a daemon that did not answer in time is stopped).
    """
    if not is_vault(vault):
        raise AutostartError(f"{vault} is not a memvault vault")
    state = state_dir(vault)
    log = log_path(vault)
    lock = FileLock(str(state / AUTOSTART_LOCK), mode=PRIVATE_FILE)
    try:
        private_state_dir(state)
        lock.acquire(timeout=timeout)
    except Timeout:
        raise AutostartError(
            f"Another command has been starting the daemon for {timeout:.0f}s"
        ) from None
    except OSError as exc:
        raise AutostartError(f"Cannot start a daemon: {exc.strerror or exc}") from exc
    try:
        running = _answering(vault)
        if running is not None:
            return Autostarted(running, started=False, log=log)
        process = _spawn(vault, port, log)
        try:
            return Autostarted(_wait(vault, process, timeout, log), started=True, log=log)
        except AutostartError:
            running = _answering(vault)  # one started by hand meanwhile
            if running is None:
                raise
            return Autostarted(running, started=False, log=log)
    finally:
        lock.release()


def _answering(vault: Path) -> DaemonClient | None:
    """A client for the announced daemon, if it answers its health check."""
    client = DaemonClient.discover(vault)
    return client if client is not None and _healthy(client) else None


def _healthy(client: DaemonClient) -> bool:
    probe = DaemonClient(client.info, client.token, timeout=_HEALTH_TIMEOUT)
    try:
        probe.request("GET", "/v1/health")
    except Exception:  # unreachable, or not answering like a memvault daemon
        return False
    return True


def port_free(port: int, host: str = HOST) -> bool:
    """Whether ``port`` can be bound on ``host`` now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the daemon binds
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


def _spawn(vault: Path, port: int, log: Path) -> subprocess.Popen[bytes]:
    """``memvault serve`` for ``vault``, detached, its output in ``log``."""
    command = [sys.executable, "-m", "memvault", "--vault", str(vault), "serve"]
    command += ["--host", HOST, "--port", str(port if port_free(port) else 0)]
    try:
        if log.exists():
            os.replace(log, log.with_name(log.name + ".1"))  # the previous daemon's, kept once
        descriptor = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, PRIVATE_FILE)
        with os.fdopen(descriptor, "ab") as output:
            process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                cwd=vault,
                start_new_session=True,  # the terminal closing or Ctrl-C does not reach it
            )
    except OSError as exc:
        raise AutostartError(f"Cannot start a daemon: {exc.strerror or exc}") from exc
    _STARTED.append(process)
    return process


def _wait(vault: Path, process: subprocess.Popen[bytes], timeout: float, log: Path) -> DaemonClient:
    """A client once the started daemon has announced itself and answers."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AutostartError(f"The daemon stopped at start ({last_words(log)})")
        info = read_info(vault)
        token = read_secret(state_dir(vault) / TOKEN_FILE)
        if info is not None and info.pid == process.pid and token:
            client = DaemonClient(info, token)
            if _healthy(client):
                return client
        time.sleep(_POLL)
    with contextlib.suppress(OSError):
        os.kill(process.pid, signal.SIGTERM)  # half started: it must not linger unannounced
    raise AutostartError(f"The daemon did not answer within {timeout:.0f}s (its log: {log})")


def last_words(log: Path) -> str:
    """The last line the daemon wrote (a JSON log line's message), without a final stop."""
    try:
        lines = [line.strip() for line in log.read_text(errors="replace").splitlines()]
    except OSError:
        lines = []
    lines = [line for line in lines if line]
    if not lines:
        return f"nothing in {log}"
    line = lines[-1]
    with contextlib.suppress(ValueError, AttributeError):
        line = str(json.loads(line).get("message", line))
    return line.removeprefix("Error: ")[:300].rstrip(".")
