"""Helpers for tests of the daemon's HTTP API: a live daemon handle, envelope checks."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2 as httpx
import uvicorn

from memvault.gateway.app import create_app
from memvault.gateway.daemon import Daemon
from memvault.gateway.server import DaemonServer, bind
from memvault.runtime import Runtime
from waiting import WAIT, wait_for


@dataclass
class Live:
    """A running daemon and a client with its token."""

    daemon: Daemon
    server: DaemonServer
    thread: threading.Thread
    url: str

    @property
    def vault(self) -> Path:
        return self.daemon.runtime.vault.root

    def client(self, token: str | None = "default", **headers: str) -> httpx.Client:
        """An HTTP client; the daemon's token unless another (or None) is given."""
        sent = dict(headers)
        if token == "default":
            token = self.daemon.token
        if token is not None:
            sent["Authorization"] = f"Bearer {token}"
        return httpx.Client(base_url=self.url, headers=sent, timeout=WAIT)

    def stop(self) -> None:
        self.server.handle_exit(15, None)
        self.thread.join(WAIT)
        assert not self.thread.is_alive(), "the daemon did not stop"


StartDaemon = Callable[..., Live]


def serve(runtime: Runtime, *, background: bool = True, replica: bool = False) -> Live:
    """A daemon over ``runtime`` on a free loopback port: uvicorn in a thread of this
    process, announced in the vault's daemon.json as ``memvault serve`` does."""
    sock = bind("127.0.0.1", 0)
    port = sock.getsockname()[1]
    daemon = Daemon(runtime, host="127.0.0.1", port=port, background=background, replica=replica)
    config = uvicorn.Config(create_app(daemon), log_config=None, lifespan="on")
    server = DaemonServer(config, daemon)
    thread = threading.Thread(
        target=server.run, kwargs={"sockets": [sock]}, name="test-daemon", daemon=True
    )
    thread.start()
    wait_for(lambda: server.announced.is_set() or not thread.is_alive(), "the daemon to start")
    assert thread.is_alive(), "the daemon did not start"
    return Live(daemon, server, thread, f"http://127.0.0.1:{port}")


def ok(response: httpx.Response, status: int = 200, notice: str | None = None) -> Any:
    """The result of a successful envelope (asserting the status, the shape and the
    notice: routes that search have one, null unless the answer is less than asked)."""
    assert response.status_code == status, response.text
    body = response.json()
    assert body["ok"] is True and set(body) - {"notice"} == {"ok", "result"}, body
    assert body.get("notice") == notice, body
    return body["result"]


def failed(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    """The error of a failed envelope (asserting status, code and the envelope's fields)."""
    assert response.status_code == status, response.text
    body = response.json()
    assert body["ok"] is False, body
    error = body["error"]
    assert set(error) == {"code", "message", "retriable", "failed_step", "details"}, error
    assert error["code"] == code, error
    assert error["message"] and error["message"].endswith((".", "?")), error
    return dict(error)


def sse_frames(response: httpx.Response) -> list[tuple[str, dict[str, Any]]]:
    """The (event, data) frames of a server-sent event stream, in order."""
    frames = []
    kind = ""
    for line in response.iter_lines():
        if line.startswith("event: "):
            kind = line[7:]
        elif line.startswith("data: "):
            frames.append((kind, json.loads(line[6:])))
    return frames
