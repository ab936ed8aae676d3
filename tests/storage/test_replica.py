"""``memvault serve --replica``: searches answered here, everything else forwarded to the
primary unchanged, events from the primary on the replica's stream.

Every daemon here keeps its index and state in one real PostgreSQL database (a fresh
one per test), as a primary and its replicas do.
"""

from __future__ import annotations

import json
import shutil
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest
import uvicorn
from fastapi import FastAPI, Request, Response
from fastapi.responses import PlainTextResponse, StreamingResponse

from cli_support import invoke
from daemon_process import DaemonProcess, daemon_env
from gateway_support import Live, failed, ok, serve
from memvault.config import load_settings
from memvault.errors import ConfigError
from memvault.gateway.daemon import Daemon
from memvault.gateway.server import bind
from memvault.gateway.tokens import Scope, TokenBook
from memvault.runtime import Runtime
from memvault.vault.layout import init_vault
from memvault.vault.store import Vault
from pg_server import free_port
from support import HashEmbedder, MovableClock
from waiting import WAIT, wait_for


@dataclass
class Seen:
    """One request the stand-in primary received."""

    method: str
    path: str
    query: str
    body: bytes
    authorization: str | None
    content_type: str | None


@dataclass
class StandIn:
    """A small real HTTP server on loopback standing in for the primary: it records each
    request and answers with what the test can recognise."""

    url: str
    seen: list[Seen] = field(default_factory=list)
    server: uvicorn.Server | None = None
    thread: threading.Thread | None = None

    def stop(self) -> None:
        assert self.server is not None and self.thread is not None
        self.server.should_exit = True
        self.thread.join(WAIT)


def stand_in_app(seen: list[Seen]) -> FastAPI:
    app = FastAPI()

    @app.get("/v1/notes/{path:path}")
    async def note(path: str, request: Request) -> PlainTextResponse:
        seen.append(await _seen(request))
        return PlainTextResponse(f"# {path}\n", headers={"X-Primary": "yes"})

    @app.get("/v1/jobs/{name}/runs")
    async def stream(name: str, request: Request) -> StreamingResponse:
        seen.append(await _seen(request))

        async def chunks() -> Any:
            for n in range(3):
                yield f"data: {n}\n\n"

        return StreamingResponse(chunks(), media_type="text/event-stream")

    @app.api_route("/{rest:path}", methods=["GET", "POST", "PUT", "PATCH", "DELETE"])
    async def anything(rest: str, request: Request) -> Response:
        seen.append(await _seen(request))
        answer = {"ok": True, "result": {"primary": True, "echo": seen[-1].body.decode()}}
        return Response(
            json.dumps(answer), status_code=201, media_type="application/json; charset=utf-8"
        )

    return app


async def _seen(request: Request) -> Seen:
    return Seen(
        request.method,
        request.scope["raw_path"].decode(),
        request.url.query,
        await request.body(),
        request.headers.get("authorization"),
        request.headers.get("content-type"),
    )


@pytest.fixture
def stand_in() -> Iterator[StandIn]:
    sock = bind("127.0.0.1", 0)
    found = StandIn(f"http://127.0.0.1:{sock.getsockname()[1]}")
    config = uvicorn.Config(stand_in_app(found.seen), log_config=None, lifespan="off")
    found.server = uvicorn.Server(config)
    found.thread = threading.Thread(
        target=found.server.run, kwargs={"sockets": [sock]}, daemon=True
    )
    found.thread.start()
    wait_for(lambda: found.server is not None and found.server.started, "the stand-in primary")
    yield found
    found.stop()


class EventWatch:
    """Reads a daemon's ``/v1/events`` in a thread until an event of ``kind`` arrives."""

    def __init__(self, client: Callable[[], httpx.Client], kind: str, since: int) -> None:
        self.kind = kind
        self.events: list[dict[str, Any]] = []
        self._connected = threading.Event()
        self._thread = threading.Thread(target=self._read, args=(client, since), daemon=True)
        self._thread.start()
        assert self._connected.wait(WAIT), "the event stream did not open"

    def _read(self, client: Callable[[], httpx.Client], since: int) -> None:
        with client() as api, api.stream("GET", "/v1/events", params={"since": since}) as sse:
            self._connected.set()
            for line in sse.iter_lines():
                if line.startswith("data: "):
                    self.events.append(json.loads(line[6:]))
                    if self.events[-1].get("type") == self.kind:
                        return

    def wait(self, timeout: float = WAIT) -> dict[str, Any]:
        """The first event of ``kind`` (fails the test after ``timeout`` seconds)."""
        self._thread.join(timeout)
        found = [e for e in self.events if e.get("type") == self.kind]
        assert found, f"no {self.kind} event arrived: {self.events}"
        return found[0]


StartDaemon = Callable[..., Live]


@pytest.fixture
def start(
    tmp_path: Path, clock: MovableClock, database: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[StartDaemon]:
    """Start a daemon on PostgreSQL settings (the database fixture's DSN in
    MEMVAULT_PG_DSN) in a new folder: ``start("primary")`` or
    ``start("replica", primary=URL)``."""
    monkeypatch.setenv("MEMVAULT_PG_DSN", database)
    started: list[Live] = []

    def _start(name: str, *, primary: str | None = None, token_from: Live | None = None) -> Live:
        root = tmp_path / name
        init_vault(Vault(root))
        if token_from is not None:  # the owner's token, the same on both (README)
            shutil.copy(token_from.vault / ".memvault/token", root / ".memvault/token")
        overrides: dict[str, Any] = {
            "timezone": "Europe/Berlin",
            "storage": {"backend": "postgres"},
        }
        if primary is not None:
            overrides["replica"] = {"primary_url": primary}
        settings = load_settings(root, overrides=overrides).settings
        runtime = Runtime.open(settings, clock=clock, embedder=HashEmbedder())
        live = serve(runtime, replica=primary is not None)
        started.append(live)
        if live.daemon.fanout is not None:
            assert live.daemon.fanout.listening.wait(WAIT), "the event listener did not connect"
        return live

    yield _start
    for live in started:
        if live.thread.is_alive():
            live.stop()


def test_writes_and_vault_reads_reach_the_primary_unchanged(
    start: StartDaemon, stand_in: StandIn
) -> None:
    replica = start("replica", primary=stand_in.url)
    body = json.dumps({"text": "Ada prefers tea ☕", "tags": ["x"]}, ensure_ascii=False)
    with replica.client() as api:
        stored = api.post(
            "/v1/memories?consolidate=false&x=%20y",
            content=body.encode(),
            headers={"Content-Type": "application/json"},
        )
        note = api.get("/v1/notes/Some%20Note.md")
        deleted = api.delete("/v1/memories/m-abc123")
        patched = api.patch("/v1/tasks/t-1", json={"status": "done"})
        streamed = api.get("/v1/jobs/daily_note/runs")
        mcp = api.post(
            "/mcp",
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            headers={"Accept": "application/json, text/event-stream", "Mcp-Session-Id": "s-1"},
        )

    # The primary's status, content type and body come back unchanged.
    assert stored.status_code == 201, stored.text
    assert stored.headers["content-type"] == "application/json; charset=utf-8"
    assert stored.json() == {"ok": True, "result": {"primary": True, "echo": body}}
    assert note.status_code == 200 and note.text == "# Some Note.md\n"
    assert note.headers["content-type"].startswith("text/plain")
    assert note.headers["x-primary"] == "yes"
    assert deleted.status_code == 201 and patched.status_code == 201
    assert streamed.headers["content-type"].startswith("text/event-stream")
    assert streamed.text == "data: 0\n\ndata: 1\n\ndata: 2\n\n"

    token = f"Bearer {replica.daemon.token}"
    assert [(s.method, s.path, s.query, s.authorization) for s in stand_in.seen] == [
        ("POST", "/v1/memories", "consolidate=false&x=%20y", token),
        ("GET", "/v1/notes/Some%20Note.md", "", token),
        ("DELETE", "/v1/memories/m-abc123", "", token),
        ("PATCH", "/v1/tasks/t-1", "", token),
        ("GET", "/v1/jobs/daily_note/runs", "", token),
        ("POST", "/mcp", "", token),
    ]
    assert mcp.status_code == 201
    assert json.loads(stand_in.seen[-1].body)["method"] == "tools/list"
    assert stand_in.seen[0].body == body.encode()
    assert stand_in.seen[0].content_type == "application/json"
    assert stand_in.seen[3].body == b'{"status":"done"}'


def test_searches_events_and_health_are_answered_by_the_replica(
    start: StartDaemon, stand_in: StandIn
) -> None:
    replica = start("replica", primary=stand_in.url)
    with replica.client() as api:
        health = ok(api.get("/v1/health"))
        ok(api.get("/v1/search", params={"q": "tea"}))
        ok(api.get("/v1/memories/search", params={"q": "tea"}))
        ok(api.get("/v1/graph"))
        ok(api.get("/v1/poll"))
        ok(api.get("/v1/tools"))
        assert api.get("/openapi.json").status_code == 200
        # No route at all: the replica's own 404, nothing forwarded.
        failed(api.get("/v1/nothing-here"), 404, "not_found")
    assert health["role"] == "replica"
    assert health["primary_url"] == stand_in.url
    assert stand_in.seen == []
    status = invoke(replica.vault, "serve", "--status")
    assert status.exit_code == 0, status.stderr
    assert f", a replica of {stand_in.url})." in status.stdout
    status = invoke(replica.vault, "serve", "--status", "--json")
    assert json.loads(status.stdout)["role"] == "replica"
    # The replica never indexed its own folder (which is not the vault).
    assert replica.daemon.watching.is_set() is False


def test_a_primary_that_does_not_answer_is_a_503_naming_it(start: StartDaemon) -> None:
    gone = f"http://127.0.0.1:{free_port()}"
    replica = start("replica", primary=gone)
    with replica.client() as api:
        error = failed(api.post("/v1/memories", json={"text": "x"}), 503, "primary_unreachable")
        # Searches still answer: they never needed the primary.
        ok(api.get("/v1/search", params={"q": "x"}))
    assert error["message"] == (
        f"This replica forwards writes and vault reads to the primary memvault at {gone}, "
        "which did not answer (connection refused or host unreachable); check that it "
        "runs and that [replica] primary_url names it."
    )
    assert error["retriable"] is True
    assert error["details"] == {"primary_url": gone}


def test_a_tokens_scope_is_checked_on_the_replica_before_anything_is_forwarded(
    start: StartDaemon, stand_in: StandIn
) -> None:
    replica = start("replica", primary=stand_in.url)
    _, secret = TokenBook(replica.daemon.state).create("reader", [Scope.READ])
    with replica.client(token=secret) as api:
        refused = failed(api.post("/v1/memories", json={"text": "x"}), 403, "insufficient_scope")
        failed(api.post("/v1/agent/run", json={"command": "hi"}), 403, "insufficient_scope")
        read = api.get("/v1/notes/Home.md")
    with replica.client(token="not-a-token") as api:
        failed(api.get("/v1/notes/Home.md"), 401, "unauthorized")
    assert refused["details"] == {"scope": "read", "needed": "remember"}
    assert read.status_code == 200
    # Only the read within the token's scope reached the primary, with that token.
    assert [(s.method, s.path, s.authorization) for s in stand_in.seen] == [
        ("GET", "/v1/notes/Home.md", f"Bearer {secret}")
    ]


def test_a_replica_needs_postgres_and_a_primary(
    vault: Vault, clock: MovableClock, monkeypatch: pytest.MonkeyPatch, database: str
) -> None:
    settings = load_settings(vault.root, overrides={"replica": {"primary_url": "http://p:1"}})
    runtime = Runtime(settings.settings, clock, embedder=HashEmbedder())
    with pytest.raises(ConfigError, match='set \\[storage\\] backend = "postgres"'):
        Daemon(runtime, replica=True)
    runtime.close()

    result = invoke(vault.root, "serve", "--replica", "--primary", "http://10.0.0.5:8765")
    assert result.exit_code == 6
    assert result.stderr.strip() == (
        "Error: A replica reads the primary's index from PostgreSQL: set [storage] backend = "
        '"postgres" in its config, and the connection string in the variable [storage] '
        "dsn_env names, as on the primary."
    )
    assert "Traceback" not in result.stderr + result.stdout

    monkeypatch.setenv("MEMVAULT_PG_DSN", database)
    result = invoke(vault.root, "serve", "--replica", env={"MEMVAULT_STORAGE__BACKEND": "postgres"})
    assert result.exit_code == 6
    assert "A replica needs the primary's address: set [replica] primary_url" in result.stderr

    result = invoke(vault.root, "serve", "--primary", "http://10.0.0.5:8765")
    assert result.exit_code == 2
    assert "add --replica" in result.stderr

    result = invoke(vault.root, "serve", "--replica", "--primary", "ftp://p")
    assert result.exit_code == 6
    assert "not an http:// or https:// URL" in result.stderr


def test_a_memory_stored_through_the_replica_is_written_by_the_primary_and_its_event_is_on_the_replicas_stream(  # noqa: E501
    start: StartDaemon,
) -> None:
    """Two daemons on one database, in this process: the replica forwards the write to a
    real primary daemon, whose event comes back to the replica's SSE over NOTIFY."""
    primary = start("primary")
    replica = start("replica", primary=primary.url, token_from=primary)
    assert primary.daemon.role == "primary" and primary.daemon.fanout is not None

    watch = EventWatch(replica.client, "memory_stored", since=replica.daemon.bus.last_id)
    with replica.client() as api:
        stored = ok(api.post("/v1/memories", json={"text": "Ada prefers green tea"}))
    event = watch.wait()
    assert event["payload"]["id"] == stored["id"]
    assert event["payload"]["text"] == "Ada prefers green tea"
    assert event["id"] > 0 and event["source"] == "memory"
    # The primary wrote its vault; nothing in the replica's folder holds the memory.
    assert "Ada prefers green tea" in (primary.vault / stored["path"]).read_text()
    assert not [f for f in replica.vault.rglob("*.md") if "Ada prefers green tea" in f.read_text()]


def test_two_serve_processes_on_one_database(tmp_path: Path, database: str) -> None:
    """The issue's check: ``memvault serve`` and ``memvault serve --replica`` on one
    database; a memory stored through the primary is found through the replica, and its
    event arrives on the replica's SSE stream."""
    primary_root, replica_root = tmp_path / "primary", tmp_path / "replica"
    for root in (primary_root, replica_root):
        assert invoke(root, "init").exit_code == 0
    env = daemon_env(MEMVAULT_PG_DSN=database, MEMVAULT_STORAGE__BACKEND="postgres")
    primary = DaemonProcess(primary_root, env=env)
    try:
        shutil.copy(primary_root / ".memvault/token", replica_root / ".memvault/token")
        replica = DaemonProcess(replica_root, "--replica", "--primary", primary.url, env=env)
        try:
            with replica.client() as api:
                health = ok(api.get("/v1/health"))
            assert health["role"] == "replica" and health["primary_url"] == primary.url
            watch = EventWatch(replica.client, "memory_stored", since=0)
            with primary.client() as api:
                stored = ok(api.post("/v1/memories", json={"text": "Ada's locker code is 4711"}))
            with replica.client() as api:

                def found() -> list[dict[str, Any]]:
                    answer = api.get("/v1/search", params={"q": "locker code", "keyword": True})
                    return [h for h in answer.json()["result"] if "4711" in h["snippet"]]

                wait_for(found, "the replica to find the memory")
            assert watch.wait()["payload"]["id"] == stored["id"]
        finally:
            replica.stop()
    finally:
        primary.stop()
