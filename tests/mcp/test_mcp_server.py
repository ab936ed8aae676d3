"""``memvault mcp`` driven by the official MCP client, over stdio and streamable HTTP."""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from datetime import date
from pathlib import Path

import anyio
import mcp_types as types
import pytest

from cli_support import snapshot
from mcp import Client, MCPError, StdioServerParameters
from memvault.vault.layout import init_vault
from memvault.vault.store import Vault
from support import schema_problems
from waiting import WAIT, wait_for

pytestmark = pytest.mark.timeout(3 * WAIT)  # a hang guard: every wait has its own bound


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMVAULT_")}
    env["MEMVAULT_EMBEDDER__PROVIDER"] = "none"  # no model load in these tests
    env.update(extra)
    return env


@pytest.fixture
def vault_dir(tmp_path: Path) -> Path:
    root = tmp_path / "vault"
    init_vault(Vault(root))
    return root


def _stdio(vault: Path, **env: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "memvault", "mcp", "--vault", str(vault)],
        env=_env(**env),
    )


def run(body: Callable[[], Awaitable[None]]) -> None:
    anyio.run(body)


async def exercise(client: Client, vault: Path) -> None:
    """The whole MCP surface: tools, resources, prompts, errors."""
    tools = {t.name: t for t in (await client.list_tools()).tools}
    assert len(tools) == 33 and "vault_delete" not in tools and "forget" not in tools
    search = tools["memory_search"].annotations
    assert search is not None and search.read_only_hint and not search.destructive_hint
    write = tools["vault_write"].annotations
    assert write is not None and write.destructive_hint and not write.read_only_hint
    assert set(tools["memory_get"].input_schema["properties"]) == {"path", "from", "lines"}
    for tool in tools.values():  # what a client sees: typed, described, no stray required
        assert schema_problems(tool.input_schema) == [], tool.name
    assert tools["task_create"].input_schema["properties"]["title"]["type"] == "string"

    stored = await client.call_tool(
        "remember", {"fact": "The owner's boat is called Halcyon", "category": "fact"}
    )
    assert not stored.is_error and stored.structured_content is not None
    memory_id = stored.structured_content["id"]
    assert f"^{memory_id}" in (vault / "Memory/Facts.md").read_text()

    found = await client.call_tool("memory_search", {"query": "boat name", "maxResults": 3})
    assert not found.is_error and found.structured_content is not None
    first = found.structured_content["results"][0]
    assert first["id"] == memory_id and first["snippet"] == "The owner's boat is called Halcyon"
    recalled = await client.call_tool("recall", {"topic": "Halcyon"})
    assert recalled.structured_content is not None
    assert recalled.structured_content["memories"][0]["id"] == memory_id
    # The earlier designs' categories: contact is memvault's person, general its fact.
    assert {"contact", "general"} <= set(
        tools["remember"].input_schema["properties"]["category"]["enum"]
    )
    coach = await client.call_tool(
        "remember", {"fact": "Ana Ruiz coaches the owner in sailing", "category": "contact"}
    )
    assert not coach.is_error and coach.structured_content is not None
    assert coach.structured_content["category"] == "person"
    assert coach.structured_content["path"] == "Memory/People.md"

    created = await client.call_tool("task_create", {"title": "Sand the hull", "priority": "high"})
    assert not created.is_error and (vault / "Tasks/active/Sand the hull.md").exists()
    listed = await client.call_tool("task_list", {})
    assert listed.structured_content is not None
    assert [t["title"] for t in listed.structured_content["tasks"]] == ["Sand the hull"]
    done = await client.call_tool("task_complete", {"title": "sand the hull"})
    assert not done.is_error and (vault / "Tasks/completed/Sand the hull.md").exists()

    logged = await client.call_tool(
        "journal_append", {"section": "Actions Taken", "entry": "Sanded the hull"}
    )
    assert not logged.is_error
    journal = f"Journal/{date.today().isoformat()}.md"
    read = await client.call_tool("vault_read", {"path": journal})
    assert (
        read.structured_content is not None
        and "Sanded the hull" in read.structured_content["content"]
    )

    # Bad input: a clear tool error (not a protocol error), and nothing changes.
    before = snapshot(vault)
    for name, arguments, message in (
        ("vault_write", {"path": "../escape.md", "content": "x"}, "'..' is not allowed"),
        ("remember", {}, "'fact' is required"),
        ("vault_search", {"query": "x", "limit": "lots"}, "'limit'"),
        ("vault_delete", {"path": "Home.md"}, "not offered over MCP"),
        ("bogus_tool", {}, "no tool named"),
    ):
        bad = await client.call_tool(name, arguments)
        assert bad.is_error and message in bad.content[0].text, (name, bad.content)
    assert snapshot(vault) == before

    resources = (await client.list_resources()).resources
    uris = {str(r.uri) for r in resources}
    assert "memvault://vault/Tasks/completed/Sand%20the%20hull.md" in uris
    assert all(r.mime_type == "text/markdown" for r in resources)
    home = await client.read_resource("memvault://vault/Home.md")
    content = home.contents[0]
    assert isinstance(content, types.TextResourceContents) and content.text.startswith(
        "---\ntags: [home]"
    )
    with pytest.raises(MCPError, match="Resource not found"):
        await client.read_resource("memvault://vault/Nope.md")
    templates = (await client.list_resource_templates()).resource_templates
    assert templates[0].uri_template == "memvault://vault/{+path}"

    prompts = {p.name for p in (await client.list_prompts()).prompts}
    assert prompts == {"memory_guide", "memory_context"}
    guide = await client.get_prompt("memory_guide", {})
    text = guide.messages[0].content
    assert isinstance(text, types.TextContent)
    assert "explicit" in text.text and "implicit" in text.text and "defensive" in text.text
    context = await client.get_prompt("memory_context", {"query": "the boat"})
    assert isinstance(context.messages[0].content, types.TextContent)
    assert "Halcyon" in context.messages[0].content.text


def test_stdio(vault_dir: Path) -> None:
    async def body() -> None:
        async with Client(_stdio(vault_dir)) as client:
            await exercise(client, vault_dir)

    run(body)


def test_stdio_legacy_protocol(vault_dir: Path) -> None:
    async def body() -> None:
        async with Client(_stdio(vault_dir), mode="legacy") as client:
            tools = (await client.list_tools()).tools
            assert len(tools) == 33
            result = await client.call_tool("remember", {"fact": "legacy clients work too"})
            assert not result.is_error

    run(body)


def test_deletions_are_served_when_the_owner_enables_them(vault_dir: Path) -> None:
    (vault_dir / ".memvault/config.toml").write_text("[tools]\nmcp_dangerous = true\n")
    (vault_dir / "Scratch.md").write_text("temporary\n")

    async def body() -> None:
        async with Client(_stdio(vault_dir)) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            assert {"vault_delete", "forget"} <= names
            deleted = await client.call_tool("vault_delete", {"path": "Scratch.md"})
            assert not deleted.is_error

    run(body)
    assert not (vault_dir / "Scratch.md").exists()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def http_server(vault: Path) -> Iterator[str]:
    port = _free_port()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "memvault",
            "mcp",
            "--http",
            "--port",
            str(port),
            "--vault",
            str(vault),
        ],
        env=_env(),
        stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}/mcp"
    try:

        def listening() -> bool:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port)):
                return True
            if process.poll() is not None:
                raise AssertionError(process.stderr.read().decode() if process.stderr else "")
            return False

        wait_for(listening, "memvault mcp --http to listen")
        yield url
    finally:
        process.terminate()
        process.wait(WAIT)


def test_streamable_http(vault_dir: Path) -> None:
    with http_server(vault_dir) as url:

        async def body() -> None:
            async with Client(url) as client:
                await exercise(client, vault_dir)

        run(body)
        # Browsers cannot reach it from another site: DNS rebinding is refused.
        port = int(url.split(":")[2].split("/")[0])
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=WAIT)
        connection.request(
            "POST",
            "/mcp",
            body=json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}),
            headers={
                "Host": "evil.example",
                "Content-Type": "application/json",
                "Accept": "application/json, text/event-stream",
            },
        )
        assert connection.getresponse().status == 421


def test_http_refuses_to_bind_beyond_loopback(vault_dir: Path) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "memvault",
            "mcp",
            "--http",
            "--host",
            "0.0.0.0",
            "--vault",
            str(vault_dir),
        ],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=WAIT,
    )
    assert result.returncode == 2
    assert "loopback only" in result.stderr and "Traceback" not in result.stderr


def test_server_sees_edits_made_in_obsidian(vault_dir: Path) -> None:
    async def body() -> None:
        async with Client(_stdio(vault_dir)) as client:
            (vault_dir / "Ideas.md").write_text("# Ideas\n\nBuild a zeppelin hangar.\n")
            deadline = time.monotonic() + WAIT
            while True:
                found = await client.call_tool("vault_search", {"query": "zeppelin"})
                assert found.structured_content is not None
                if found.structured_content["results"]:
                    break
                assert time.monotonic() < deadline, "the edit never reached the index"
                await anyio.sleep(0.2)
            assert found.structured_content["results"][0]["path"] == "Ideas.md"

    run(body)
