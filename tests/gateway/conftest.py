"""A real daemon on a free loopback port, in this process: uvicorn in a thread."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest
import uvicorn

from gateway_support import Live, StartDaemon
from memvault.config import load_settings
from memvault.gateway.app import create_app
from memvault.gateway.daemon import Daemon
from memvault.gateway.server import DaemonServer, bind
from memvault.runtime import Runtime
from memvault.vault.layout import init_vault
from memvault.vault.store import Vault
from support import HashEmbedder, MovableClock


@pytest.fixture
def start_daemon(tmp_path: Path, clock: MovableClock) -> Iterator[StartDaemon]:
    """Start daemons on a vault (initialised if new); all are stopped at the end."""
    started: list[Live] = []

    def start(
        vault: Path | None = None,
        *,
        settings: dict[str, Any] | None = None,
        embedder: Any = "hash",
        background: bool = True,
    ) -> Live:
        root = vault or tmp_path / "vault"
        if not root.exists():
            init_vault(Vault(root))
        loaded = load_settings(root, overrides={"timezone": "Europe/Berlin", **(settings or {})})
        runtime = Runtime.open(
            loaded.settings,
            clock=clock,
            embedder=HashEmbedder() if embedder == "hash" else embedder,
        )
        sock = bind("127.0.0.1", 0)
        port = sock.getsockname()[1]
        daemon = Daemon(runtime, host="127.0.0.1", port=port, background=background)
        config = uvicorn.Config(create_app(daemon), log_config=None, lifespan="on")
        server = DaemonServer(config, daemon)
        thread = threading.Thread(
            target=server.run, kwargs={"sockets": [sock]}, name="test-daemon", daemon=True
        )
        thread.start()
        deadline = time.monotonic() + 20
        while not server.announced.is_set():
            assert thread.is_alive() and time.monotonic() < deadline, "the daemon did not start"
            time.sleep(0.01)
        live = Live(daemon, server, thread, f"http://127.0.0.1:{port}")
        started.append(live)
        return live

    yield start
    for live in started:
        if live.thread.is_alive():
            live.stop()


@pytest.fixture
def live(start_daemon: StartDaemon) -> Live:
    """A daemon on a fresh vault, its index followed by the watcher."""
    running = start_daemon()
    deadline = time.monotonic() + 20
    while not running.daemon.watching.is_set():
        assert time.monotonic() < deadline, "the watcher did not start"
        time.sleep(0.02)
    return running


@pytest.fixture
def api(live: Live) -> Iterator[httpx.Client]:
    with live.client() as client:
        yield client
