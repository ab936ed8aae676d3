"""Named API tokens against a live daemon: scopes on every route, the agent recorded, revocation,
the CLI, and where the daemon may listen."""

from __future__ import annotations

import re
import sqlite3
import threading
from pathlib import Path
from typing import Any

import anyio
import httpx2 as httpx
import pytest
import uvicorn
from fastapi import FastAPI
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client

from cli_support import EXIT_CONFIG, EXIT_CONFLICT, EXIT_INVALID, EXIT_NOT_FOUND, fail, ok_json
from daemon_process import DaemonProcess
from gateway_support import Live, StartDaemon, failed, ok, sse_frames
from llm_fakes import FakeOpenAI, llm_settings
from mcp import Client
from memvault.config import load_settings
from memvault.errors import ConfigError
from memvault.gateway.app import create_app
from memvault.gateway.daemon import Daemon
from memvault.gateway.server import DaemonServer, bind
from memvault.gateway.tokens import Scope
from memvault.runtime import Runtime
from memvault.vault.layout import init_vault
from memvault.vault.store import Vault
from support import HashEmbedder
from waiting import WAIT, wait_for

# A hang guard (every wait has its own bound), on both backends.
pytestmark = [pytest.mark.timeout(3 * WAIT), pytest.mark.both_backends]

READ, REMEMBER, WRITE, ADMIN = Scope.READ, Scope.REMEMBER, Scope.WRITE, Scope.ADMIN

# What each scope may do, written as the policy rather than copied from the daemon's table:
# a read token changes nothing; remember adds memories and session messages; write changes
# the vault; admin alone runs the agent, jobs and sends, decides who may talk, and sees the
# doctor's report and the pairing codes.
ADMIN_ONLY = {
    ("GET", "/v1/doctor"),
    ("GET", "/v1/channels/pending"),
    ("POST", "/v1/agent/run"),
    ("POST", "/v1/send"),
    ("POST", "/v1/channels/{channel}/approve"),
    ("POST", "/v1/channels/{channel}/block"),
    ("POST", "/v1/channels/outbox/{outbox_id}/retry"),
    ("POST", "/v1/jobs/{name}/run"),
    ("POST", "/v1/jobs/runs/{run_id}/undo"),
}
REMEMBERING = {
    ("POST", "/v1/memories"),
    ("POST", "/v1/sessions/{key}/messages"),
    ("POST", "/v1/sessions/{key}/end"),
}
# Open to every scope; each tool call behind them is checked on its own (tests below).
TOOL_DOORS = {("POST", "/v1/tools/{name}"), ("GET", "/mcp"), ("POST", "/mcp"), ("DELETE", "/mcp")}
# Routes outside the OpenAPI spec that still need a token.
PLAIN_ROUTES = [("GET", "/openapi.json"), ("GET", "/mcp"), ("POST", "/mcp"), ("DELETE", "/mcp")]


def expected_scope(method: str, template: str) -> Scope:
    """The scope the policy says a route needs."""
    if (method, template) in ADMIN_ONLY:
        return ADMIN
    if method == "GET" or (method, template) in TOOL_DOORS:
        return READ
    if (method, template) in REMEMBERING:
        return REMEMBER
    return WRITE


@pytest.fixture
def served(start_daemon: StartDaemon) -> Live:
    """A daemon without background work: the routes, the tokens, nothing else."""
    return start_daemon(background=False)


@pytest.fixture
def secrets(served: Live) -> dict[Scope, str]:
    """One named token per scope, made as ``memvault tokens create`` makes them."""
    return {
        scope: served.daemon.tokens.create(f"agent-{scope.label}", [scope])[1] for scope in Scope
    }


def operations(live: Live) -> list[tuple[str, str, dict[str, str]]]:
    """Every operation of the daemon's spec, and the plain routes: (method, template, the
    type of each path parameter)."""
    with live.client() as api:
        spec = api.get("/openapi.json").json()
    found = []
    for template, entries in spec["paths"].items():
        for method, operation in entries.items():
            kinds = {
                p["name"]: p["schema"].get("type", "string")
                for p in operation.get("parameters", [])
                if p["in"] == "path"
            }
            found.append((method.upper(), template, kinds))
    return found + [(method, template, {}) for method, template in PLAIN_ROUTES]


def fill(template: str, kinds: dict[str, str], values: dict[str, str] | None = None) -> str:
    """A concrete path for a template: 7 for a number, ``x`` (or the given value) for text."""
    values = values or {}

    def value(match: re.Match[str]) -> str:
        name = match.group(1)
        return "7" if kinds.get(name) == "integer" else values.get(name, "x")

    return re.sub(r"\{(\w+)\}", value, template)


def status_of(client: httpx.Client, secret: str, method: str, path: str) -> tuple[int, str | None]:
    """The status and error code of one request (the body of a stream is not waited for)."""
    headers = {"Authorization": f"Bearer {secret}", "Accept": "application/json"}
    body: Any = {} if method in ("POST", "PUT", "PATCH") else None
    with client.stream(method, path, headers=headers, json=body) as response:
        if response.status_code < 400:
            return response.status_code, None
        response.read()
        try:
            return response.status_code, response.json()["error"]["code"]
        except (ValueError, KeyError, TypeError):
            return response.status_code, None


def check_scopes(
    client: httpx.Client, secrets: dict[Scope, str], method: str, path: str, needs: Scope
) -> None:
    for scope, secret in secrets.items():
        status, code = status_of(client, secret, method, path)
        where = f"{method} {path} with a {scope.label} token"
        if scope >= needs:
            assert status != 401 and code != "insufficient_scope", f"{where}: {status} {code}"
        else:
            assert (status, code) == (403, "insufficient_scope"), f"{where}: {status} {code}"


def test_every_route_needs_the_scope_the_policy_gives_it(
    served: Live, secrets: dict[Scope, str]
) -> None:
    routes = operations(served)
    assert len(routes) > 40  # the whole API, not a page of it
    with httpx.Client(base_url=served.url, timeout=WAIT) as client:
        for method, template, kinds in routes:
            path = fill(template, kinds)
            check_scopes(client, secrets, method, path, expected_scope(method, template))


_SEGMENT = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-_:", min_size=1, max_size=12)
# The route whose memory_id is one segment: PATCH .../a/b is a 405 for every token, not it.
_ONE_SEGMENT = {("PATCH", "/v1/memories/{memory_id}")}


@pytest.fixture
def every_operation(served: Live) -> list[tuple[str, str, dict[str, str]]]:
    return operations(served)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_no_path_value_lets_a_token_past_its_scope(
    served: Live,
    secrets: dict[Scope, str],
    every_operation: list[tuple[str, str, dict[str, str]]],
    data: st.DataObject,
) -> None:
    """Whatever the path's values (nested paths, session keys with colons, a note called
    'search'), a route needs its scope: the check follows the route that runs."""
    method, template, kinds = data.draw(st.sampled_from(every_operation))
    values = {}
    for name in re.findall(r"\{(\w+)\}", template):
        # Path parameters that take slashes.
        if name in ("path", "key", "memory_id") and (method, template) not in _ONE_SEGMENT:
            values[name] = "/".join(data.draw(st.lists(_SEGMENT, min_size=1, max_size=3)))
        else:
            values[name] = data.draw(_SEGMENT)
    path = fill(template, kinds, values)
    with httpx.Client(base_url=served.url, timeout=WAIT) as client:
        check_scopes(client, secrets, method, path, expected_scope(method, template))


def test_a_route_nobody_gave_a_scope_is_for_admin_only(tmp_path: Path) -> None:
    root = tmp_path / "vault"
    init_vault(Vault(root))
    runtime = Runtime.open(load_settings(root).settings, embedder=HashEmbedder())
    daemon = Daemon(runtime, host="127.0.0.1", port=0, background=False)
    app = create_app(daemon)

    @app.get("/v1/brand-new")
    def brand_new() -> dict[str, bool]:
        return {"ok": True}

    with _Serving(app, daemon) as url:
        admin = daemon.tokens.create("boss", [ADMIN])[1]
        writer = daemon.tokens.create("writer", [WRITE])[1]
        with httpx.Client(base_url=url, timeout=WAIT) as client:
            bearer = {"Authorization": f"Bearer {writer}"}
            failed(client.get("/v1/brand-new", headers=bearer), 403, "insufficient_scope")
            bearer = {"Authorization": f"Bearer {admin}"}
            assert client.get("/v1/brand-new", headers=bearer).json() == {"ok": True}


class _Serving:
    """``app`` served on a free loopback port while the block runs (its daemon stops after)."""

    def __init__(self, app: FastAPI, daemon: Daemon) -> None:
        sock = bind("127.0.0.1", 0)
        daemon.port = sock.getsockname()[1]
        self.server = DaemonServer(uvicorn.Config(app, log_config=None, lifespan="on"), daemon)
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [sock]}, daemon=True
        )
        self.url = f"http://127.0.0.1:{daemon.port}"

    def __enter__(self) -> str:
        self.thread.start()
        server, thread = self.server, self.thread
        wait_for(lambda: server.announced.is_set() or not thread.is_alive(), "the daemon to start")
        assert thread.is_alive(), "no daemon"
        return self.url

    def __exit__(self, *_: object) -> None:
        self.server.handle_exit(15, None)
        self.thread.join(WAIT)


def test_unknown_and_malformed_tokens_are_unauthorized(
    served: Live, secrets: dict[Scope, str]
) -> None:
    for guess in ("mvt_" + "a" * 43, secrets[READ] + "x", secrets[READ][4:], "Bearer"):
        with served.client(token=guess) as client:
            failed(client.get("/v1/memories"), 401, "unauthorized")
    with served.client(token=secrets[READ]) as client:
        ok(client.get("/v1/memories"))
        error = failed(client.post("/v1/memories", json={"text": "x"}), 403, "insufficient_scope")
    assert "read scope" in error["message"] and "remember scope" in error["message"]
    assert error["details"] == {"scope": "read", "needed": "remember"}


def test_tools_are_listed_and_called_by_scope(start_daemon: StartDaemon) -> None:
    live = start_daemon(background=False, settings={"tools": {"mode": "autonomous"}})
    reader = live.daemon.tokens.create("reader", [READ])[1]
    bot = live.daemon.tokens.create("bot", [REMEMBER])[1]
    boss = live.daemon.tokens.create("boss", [ADMIN])[1]
    with live.client(token=reader) as client:
        listed = {t["name"] for t in ok(client.get("/v1/tools"))}
        assert {"memory_search", "vault_read"} <= listed
        assert not listed & {"remember", "vault_write", "vault_delete", "task_create"}
        ok(client.post("/v1/tools/vault_list", json={"folder": "Templates"}))
        failed(client.post("/v1/tools/remember", json={"fact": "x"}), 403, "insufficient_scope")
        failed(
            client.post("/v1/tools/vault_write", json={"path": "a.md", "content": "x"}),
            403,
            "insufficient_scope",
        )
        failed(client.post("/v1/tools/no_such_tool", json={}), 404, "not_found")
    with live.client(token=bot) as client:
        assert "remember" in {t["name"] for t in ok(client.get("/v1/tools"))}
        stored = ok(client.post("/v1/tools/remember", json={"fact": "Tools record the agent"}))
        assert live.daemon.runtime.memories.get(stored["result"]["id"]).agent == "bot"
        failed(client.post("/v1/tools/task_create", json={"title": "t"}), 403, "insufficient_scope")
    # An admin token is no approval: a tier-3 call still wants the owner's approval token.
    with live.client(token=boss) as client:
        for approval in (None, boss, live.daemon.token):
            headers = {"X-Memvault-Approval": approval} if approval else {}
            failed(
                client.post("/v1/tools/vault_delete", json={"path": "Home.md"}, headers=headers),
                403,
                "approval_required",
            )
    assert (live.vault / "Home.md").exists()


def test_mcp_lists_and_runs_tools_by_scope_and_records_the_agent(served: Live) -> None:
    reader = served.daemon.tokens.create("reader", [READ])[1]
    bot = served.daemon.tokens.create("mcp-bot", [REMEMBER])[1]
    seen: dict[str, Any] = {}

    async def session(secret: str, fact: str) -> None:
        http = create_mcp_http_client(headers={"Authorization": f"Bearer {secret}"})
        async with (
            http,
            Client(streamable_http_client(f"{served.url}/mcp", http_client=http)) as client,
        ):
            seen[secret] = {t.name for t in (await client.list_tools()).tools}
            seen[secret + "call"] = await client.call_tool("remember", {"fact": fact})

    anyio.run(session, reader, "A reader cannot store this")
    anyio.run(session, bot, "MCP calls record the agent")
    assert "remember" not in seen[reader] and "memory_search" in seen[reader]
    refused = seen[reader + "call"]
    assert refused.is_error and "remember scope" in refused.content[0].text
    assert "remember" in seen[bot] and "vault_write" not in seen[bot]
    stored = seen[bot + "call"]
    assert not stored.is_error and stored.structured_content is not None
    memory = served.daemon.runtime.memories.get(stored.structured_content["id"])
    assert memory.agent == "mcp-bot" and memory.source == "mcp"
    texts = [m.text for m in served.daemon.runtime.memories.all()]
    assert "A reader cannot store this" not in texts


def test_the_agent_is_recorded_on_memories_and_sessions(
    served: Live, secrets: dict[Scope, str]
) -> None:
    with served.client(token=secrets[REMEMBER]) as bot:
        stored = ok(bot.post("/v1/memories", json={"text": "Agents sign their memories"}))
        assert stored["agent"] == "agent-remember"
        logged = ok(bot.post("/v1/sessions/telegram:42/messages", json={"text": "hello"}))
        assert logged["session"]["agent"] == "agent-remember"
        # The agent is the token's to say, not the caller's: a forged field stays text.
        forged = ok(bot.post("/v1/memories", json={"text": "Trust me [agent:: owner]"}))
        assert forged["agent"] == "agent-remember"
    with served.client() as owner:
        mine = ok(owner.post("/v1/memories", json={"text": "The owner signs nothing"}))
        assert mine["agent"] is None
        assert ok(owner.get(f"/v1/memories/{stored['id']}"))["agent"] == "agent-remember"
        assert ok(owner.get("/v1/sessions/telegram:42"))["session"]["agent"] == "agent-remember"
        ok(owner.post("/v1/sessions/cli:1/messages", json={"text": "mine"}))
        assert ok(owner.get("/v1/sessions/cli:1"))["session"]["agent"] is None
    lines = (served.vault / "Memory/Facts.md").read_text().splitlines()
    signed = next(line for line in lines if "Agents sign their memories" in line)
    assert "[source:: api] [agent:: agent-remember] ^m-" in signed
    unsigned = next(line for line in lines if "The owner signs nothing" in line)
    assert "[agent::" not in unsigned
    forged_line = next(line for line in lines if "Trust me" in line)
    assert forged_line.count("[agent::") == 1 and "[agent:: agent-remember]" in forged_line


@pytest.mark.parametrize("stream", [False, True])
def test_an_agent_run_records_the_token_that_asked_for_it(
    start_daemon: StartDaemon, stream: bool
) -> None:
    with FakeOpenAI() as fake:
        llm = llm_settings(fake, max_retries=0, timeout=WAIT).model_dump()
        live = start_daemon(
            background=False, settings={"llm": llm, "tools": {"mode": "autonomous"}}
        )
        boss = live.daemon.tokens.create("planner", [ADMIN])[1]
        fake.reply("", tool_calls=[("remember", {"fact": "The planner ran the agent"})])
        fake.reply("Stored.")
        body = {"command": "Remember this", "session": "runs:1", "stream": stream}
        with (
            live.client(token=boss) as client,
            client.stream("POST", "/v1/agent/run", json=body) as response,
        ):
            assert response.status_code == 200
            if stream:
                assert sse_frames(response)[-1][0] == "done"
            else:
                response.read()
    memory = live.daemon.runtime.memories.list()[0]
    assert memory.text == "The planner ran the agent" and memory.agent == "planner"
    assert live.daemon.sessions.get("runs:1").agent == "planner"


def test_the_cli_creates_lists_and_revokes_tokens(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    init_vault(Vault(vault))
    made = ok_json(vault, "tokens", "create", "research-bot", "--scope", "read", "-s", "remember")
    secret = made.pop("token")
    assert secret.startswith("mvt_") and len(secret) > 40
    assert made["scopes"] == ["read", "remember"] and made["scope"] == "remember"
    assert made["active"] is True and made["last_used_at"] is None
    listed = ok_json(vault, "tokens", "list")
    assert [t["name"] for t in listed] == ["research-bot"] and "token" not in listed[0]
    # state.db keeps a hash of the secret, never the secret.
    with sqlite3.connect(vault / ".memvault/state.db") as db:
        stored = [str(value) for row in db.execute("SELECT * FROM api_tokens") for value in row]
    assert secret not in " ".join(stored)

    assert "exists" in fail(
        vault, "tokens", "create", "Research-Bot", "-s", "read", code=EXIT_CONFLICT
    )
    assert "admin" in fail(vault, "tokens", "create", "x", "-s", "root", code=EXIT_INVALID)
    fail(vault, "tokens", "create", "owner", "-s", "read", code=EXIT_INVALID)
    fail(vault, "tokens", "create", "two words", "-s", "read", code=EXIT_INVALID)

    revoked = ok_json(vault, "tokens", "revoke", "research-bot")
    assert revoked["active"] is False and revoked["revoked_at"]
    assert ok_json(vault, "tokens", "list") == []
    assert [t["name"] for t in ok_json(vault, "tokens", "list", "--all")] == ["research-bot"]
    fail(vault, "tokens", "revoke", "research-bot", code=EXIT_NOT_FOUND)
    # The name is free again once its token is revoked.
    assert ok_json(vault, "tokens", "create", "research-bot", "-s", "write")["scope"] == "write"


def test_a_revoked_token_stops_working_at_once_on_a_running_daemon(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    init_vault(Vault(vault))
    daemon = DaemonProcess(vault)
    try:
        secret = ok_json(vault, "tokens", "create", "short-lived", "-s", "remember")["token"]
        with httpx.Client(
            base_url=daemon.url, headers={"Authorization": f"Bearer {secret}"}, timeout=WAIT
        ) as agent:
            ok(agent.post("/v1/memories", json={"text": "Made while the token lived"}))
            used = ok_json(vault, "tokens", "list")[0]["last_used_at"]
            assert used is not None
            ok_json(vault, "tokens", "revoke", "short-lived")
            failed(agent.get("/v1/memories"), 401, "unauthorized")
            failed(agent.post("/v1/memories", json={"text": "Too late"}), 401, "unauthorized")
    finally:
        code, err = daemon.stop()
    assert code == 0, err[-2000:]
    text = (vault / "Memory/Facts.md").read_text()
    assert "[agent:: short-lived]" in text and "Too late" not in text


@pytest.fixture
def plain_vault(tmp_path: Path) -> Path:
    root = tmp_path / "vault"
    init_vault(Vault(root))
    return root


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.20"])
def test_listening_beyond_loopback_needs_allow_remote(plain_vault: Path, host: str) -> None:
    message = fail(plain_vault, "serve", "--host", host, "--port", "0", code=EXIT_CONFIG)
    assert "allow_remote = true" in message and "TLS" in message
    assert not (plain_vault / ".memvault/daemon.json").exists()
    runtime = Runtime.open(load_settings(plain_vault).settings, embedder=HashEmbedder())
    try:
        with pytest.raises(ConfigError):
            Daemon(runtime, host=host, port=0, background=False)
    finally:
        runtime.close()
