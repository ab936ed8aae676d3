"""MCP on the daemon at /mcp: the official client, the same token, the same event bus."""

from __future__ import annotations

import anyio
import httpx2 as httpx
import pytest
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client

from gateway_support import Live, failed, ok
from mcp import Client
from waiting import WAIT

pytestmark = pytest.mark.timeout(3 * WAIT)  # a hang guard: every wait has its own bound


def test_mcp_is_served_with_the_daemons_token(live: Live) -> None:
    async def body() -> None:
        http = create_mcp_http_client(headers={"Authorization": f"Bearer {live.daemon.token}"})
        async with (
            http,
            Client(streamable_http_client(f"{live.url}/mcp", http_client=http)) as client,
        ):
            tools = {t.name for t in (await client.list_tools()).tools}
            assert {"remember", "memory_search", "vault_read"} <= tools
            assert "vault_delete" not in tools
            stored = await client.call_tool("remember", {"fact": "MCP and HTTP share one vault"})
            assert not stored.is_error and stored.structured_content is not None
            found = await client.call_tool("memory_search", {"query": "share one vault"})
            assert found.structured_content is not None
            assert found.structured_content["results"][0]["id"] == stored.structured_content["id"]

    anyio.run(body)
    with live.client() as api:
        events = ok(api.get("/v1/poll"))["events"]
        stored = [e for e in events if e["type"] == "memory_stored"]
        assert stored and stored[0]["payload"]["source"] == "mcp"


def test_mcp_without_the_token_is_refused(live: Live) -> None:
    with live.client(token=None) as anonymous:
        response = anonymous.post(
            "/mcp",
            json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
            headers={"Accept": "application/json, text/event-stream"},
        )
        failed(response, 401, "unauthorized")
    with httpx.Client(base_url=live.url, timeout=WAIT) as browser:
        response = browser.post(
            "/mcp",
            json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
            headers={
                "Authorization": f"Bearer {live.daemon.token}",
                "Origin": "http://evil.example",
            },
        )
        failed(response, 403, "browser_origin_rejected")
