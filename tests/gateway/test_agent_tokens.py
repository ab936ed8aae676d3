"""Token decisions against a live daemon: a read token's searches are not recalls, and a token
bound to an agent (``memvault tokens create NAME --agent A``) sees only that agent's memories
and sessions, on every route, in search, and in what consolidation weighs a new memory
against."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import anyio
import httpx2 as httpx
import pytest
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client

from cli_support import EXIT_INVALID, fail, ok, ok_json
from gateway_support import Live, StartDaemon, failed
from gateway_support import ok as answered
from mcp import Client
from memvault.gateway.tokens import Scope
from memvault.memory.consolidation import NEAR_IDENTICAL, jaccard, tokens
from memvault.vault.layout import init_vault
from memvault.vault.store import Vault
from waiting import WAIT

pytestmark = pytest.mark.timeout(3 * WAIT)

# What a token bound to an agent may use, written as the policy (its own memories,
# sessions and runs, the spec), in the spec's templates.
AGENT_ROUTES = {
    ("GET", "/openapi.json"),
    ("GET", "/v1/memories"),
    ("POST", "/v1/memories"),
    ("GET", "/v1/memories/search"),
    ("GET", "/v1/memories/{memory_id}/history"),
    ("GET", "/v1/memories/{memory_id}/access"),
    ("GET", "/v1/memories/{memory_id}"),
    ("DELETE", "/v1/memories/{memory_id}"),
    ("GET", "/v1/search"),
    ("GET", "/v1/sessions"),
    ("POST", "/v1/sessions/{key}/messages"),
    ("POST", "/v1/sessions/{key}/end"),
    ("GET", "/v1/sessions/{key}"),
    ("GET", "/v1/runs"),
    ("GET", "/v1/runs/{run_id}"),
}
PLAIN_ROUTES = [("GET", "/openapi.json"), ("GET", "/mcp"), ("POST", "/mcp"), ("DELETE", "/mcp")]
# Twenty words and a number: one number apart, two such memories are nearly the same words.
SAFE = (
    "The combination of the small grey safe behind the painting in the upstairs study "
    "at the lake house was changed last spring to {code}"
)


def recalls(live: Live) -> dict[str, int]:
    rows = live.daemon.state.query("SELECT memory_id, times FROM memory_recalls")
    return {str(r["memory_id"]): int(r["times"]) for r in rows}


def test_a_read_tokens_searches_are_not_recalls(start_daemon: StartDaemon) -> None:
    live = start_daemon(background=False)
    reader = live.daemon.tokens.create("reader", [Scope.READ])[1]
    rememberer = live.daemon.tokens.create("notetaker", [Scope.REMEMBER])[1]
    with live.client() as owner:
        boiler = answered(
            owner.post("/v1/memories", json={"text": "The boiler is serviced in March"})
        )
    query = {"q": "boiler serviced", "keyword": "true"}
    with live.client(token=reader) as client:
        for path in ("/v1/search", "/v1/memories/search"):
            hits = answered(client.get(path, params=query))
            assert [h["id"] for h in hits] == [boiler["id"]], path
        answered(client.get("/v1/context", params={"query": "boiler serviced"}))
        called = answered(client.post("/v1/tools/memory_search", json={"query": "boiler serviced"}))
        assert boiler["id"] in str(called)

    async def over_mcp() -> str:
        http = create_mcp_http_client(headers={"Authorization": f"Bearer {reader}"})
        async with (
            http,
            Client(streamable_http_client(f"{live.url}/mcp", http_client=http)) as client,
        ):
            result = await client.call_tool("memory_search", {"query": "boiler serviced"})
            assert not result.is_error
            return str(result.content[0])

    assert boiler["id"] in anyio.run(over_mcp)
    assert recalls(live) == {}, "a read token's searches changed what archival keeps"
    # A token that may remember, and the owner, do recall.
    with live.client(token=rememberer) as client:
        answered(client.get("/v1/search", params=query))
    assert recalls(live) == {boiler["id"]: 1}
    with live.client() as owner:
        answered(owner.get("/v1/memories/search", params=query))
    assert recalls(live) == {boiler["id"]: 2}


def test_the_cli_binds_a_token_to_an_agent(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    init_vault(Vault(vault))
    made = ok_json(vault, "tokens", "create", "alice-phone", "-s", "remember", "--agent", "alice")
    assert made["agent"] == "alice" and made["scope"] == "remember"
    plain = ok_json(vault, "tokens", "create", "bob", "-s", "write")
    assert plain["agent"] is None
    assert [(t["name"], t["agent"]) for t in ok_json(vault, "tokens", "list")] == [
        ("alice-phone", "alice"),
        ("bob", None),
    ]
    listed = ok(vault, "tokens", "list").stdout
    assert re.search(r"alice-phone\s.*remember\s.*alice", listed), listed
    assert "agent name" in fail(
        vault, "tokens", "create", "x", "-s", "read", "--agent", "two words", code=EXIT_INVALID
    )
    assert "admin" in fail(
        vault, "tokens", "create", "y", "-s", "admin", "--agent", "alice", code=EXIT_INVALID
    )
    said = ok(vault, "tokens", "create", "alice-laptop", "-s", "read", "--agent", "alice").stdout
    assert "bound to the agent 'alice'" in said


@pytest.fixture
def agents(tmp_path: Path, start_daemon: StartDaemon) -> tuple[Live, dict[str, str]]:
    """A daemon whose vault has tokens made by the CLI: two bound to the agent alice
    (remember, write), one to alice for reading, and bob's, not bound."""
    vault = tmp_path / "vault"
    init_vault(Vault(vault))
    secrets = {
        name: ok_json(vault, "tokens", "create", name, "-s", scope, *agent)["token"]
        for name, scope, agent in [
            ("alice-phone", "remember", ("--agent", "alice")),
            ("alice-desk", "write", ("--agent", "alice")),
            ("alice-eyes", "read", ("--agent", "alice")),
            ("bob", "write", ()),
        ]
    }
    return start_daemon(vault, background=False), secrets


def operations(live: Live) -> list[tuple[str, str]]:
    with live.client() as api:
        spec = api.get("/openapi.json").json()
    found = [(m.upper(), t) for t, entries in spec["paths"].items() for m in entries]
    return found + PLAIN_ROUTES


def test_a_token_bound_to_an_agent_may_use_only_its_memories_and_sessions(
    agents: tuple[Live, dict[str, str]],
) -> None:
    live, secrets = agents
    routes = operations(live)
    assert len(routes) > 40 and set(routes) >= AGENT_ROUTES
    headers = {"Authorization": f"Bearer {secrets['alice-desk']}", "Accept": "application/json"}
    with httpx.Client(base_url=live.url, timeout=WAIT) as client:
        for method, template in routes:
            path = re.sub(r"\{(\w+)\}", "7", template)
            body: Any = {} if method in ("POST", "PUT", "PATCH") else None
            with client.stream(method, path, headers=headers, json=body) as response:
                status = response.status_code
                code = None
                if status == 403:
                    response.read()
                    code = response.json()["error"]["code"]
                    message = response.json()["error"]["message"]
            where = f"{method} {template}"
            if (method, template) in AGENT_ROUTES or template == "/v1/health":
                assert code != "insufficient_scope", where
            else:
                assert (status, code) == (403, "insufficient_scope"), where
                assert "bound to the agent 'alice'" in message, where


def test_a_token_bound_to_an_agent_sees_only_that_agents_memories_and_sessions(
    agents: tuple[Live, dict[str, str]],
) -> None:
    live, secrets = agents
    alice = live.client(token=secrets["alice-phone"])
    desk = live.client(token=secrets["alice-desk"])
    eyes = live.client(token=secrets["alice-eyes"])
    bob = live.client(token=secrets["bob"])
    owner = live.client()
    with alice, desk, eyes, bob, owner:
        secret = answered(owner.post("/v1/memories", json={"text": SAFE.format(code=4711)}))
        answered(
            owner.put("/v1/notes/Tea.md", json={"content": "Green tea from the owner's notes"})
        )
        boiler = answered(bob.post("/v1/memories", json={"text": "Bob keeps the boiler log"}))
        tea = answered(alice.post("/v1/memories", json={"text": "Alice drinks green tea"}))
        assert (secret["agent"], boiler["agent"], tea["agent"]) == (None, "bob", "alice")
        answered(bob.post("/v1/sessions/bob:1/messages", json={"text": "Bob's words"}))
        answered(alice.post("/v1/sessions/alice:1/messages", json={"text": "Alice's words"}))

        # Every token of the agent sees the agent's own memories, and nobody else's.
        for client in (alice, desk, eyes):
            assert [m["id"] for m in answered(client.get("/v1/memories"))] == [tea["id"]]
            assert answered(client.get(f"/v1/memories/{tea['id']}"))["text"] == tea["text"]
        missing = failed(eyes.get("/v1/memories/m-00000000"), 404, "not_found")
        for other in (secret, boiler):
            hidden = failed(eyes.get(f"/v1/memories/{other['id']}"), 404, "not_found")
            assert hidden["message"] == missing["message"].replace("m-00000000", other["id"])
            failed(eyes.get(f"/v1/memories/{other['id']}/history"), 404, "not_found")
            failed(desk.delete(f"/v1/memories/{other['id']}"), 404, "not_found")
        assert len(answered(owner.get("/v1/memories"))) == 3  # nothing was forgotten

        # Search finds the agent's memories only: no other agent's, no owner's, no note.
        for path in ("/v1/search", "/v1/memories/search"):
            for words in ("boiler log", "safe combination", "green tea"):
                hits = answered(eyes.get(path, params={"q": words, "keyword": "true"}))
                assert {h["id"] for h in hits} <= {tea["id"]}, (path, words, hits)
            hits = answered(eyes.get(path, params={"q": "green tea", "keyword": "true"}))
            assert [h["id"] for h in hits] == [tea["id"]]
        assert len(answered(owner.get("/v1/search", params={"q": "green tea"}))) == 2

        # Sessions: its own listed and read; another's is not there, and its key is not taken.
        assert [s["key"] for s in answered(eyes.get("/v1/sessions"))] == ["alice:1"]
        assert answered(eyes.get("/v1/sessions/alice:1"))["messages"][0]["text"] == "Alice's words"
        failed(eyes.get("/v1/sessions/bob:1"), 404, "not_found")
        failed(
            alice.post("/v1/sessions/bob:1/messages", json={"text": "Mine now"}), 409, "conflict"
        )
        failed(alice.post("/v1/sessions/bob:1/end"), 404, "not_found")
        bobs = answered(owner.get("/v1/sessions/bob:1"))
        assert bobs["session"]["active"] and [m["text"] for m in bobs["messages"]] == [
            "Bob's words"
        ]
        answered(alice.post("/v1/sessions/alice:1/end"))
        assert [s["key"] for s in answered(owner.get("/v1/sessions"))] == ["alice:1", "bob:1"]

        # Storing: another's memory is no duplicate of the agent's, nor a candidate to merge.
        mine = answered(alice.post("/v1/memories", json={"text": "Bob keeps the boiler log"}))
        assert mine["created_new"] and mine["agent"] == "alice" and mine["id"] != boiler["id"]
        near = SAFE.format(code=4712)
        assert jaccard(tokens(near), tokens(secret["text"])) >= NEAR_IDENTICAL
        kept = answered(alice.post("/v1/memories", json={"text": near}))
        assert kept["created_new"] and kept["text"] == near and "4711" not in str(kept)
        # The same words from an unbound token are consolidation's no-op, as before.
        same = answered(bob.post("/v1/memories", json={"text": SAFE.format(code=4713)}))
        assert not same["created_new"] and same["id"] in (secret["id"], kept["id"])
        # The agent's own duplicate is still one.
        again = answered(desk.post("/v1/memories", json={"text": "Alice drinks green tea"}))
        assert not again["created_new"] and again["id"] == tea["id"]
        answered(desk.delete(f"/v1/memories/{tea['id']}"))
