"""``memvault mcp``: serve the tools, notes and prompts to MCP clients."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from memvault.cli.common import VaultOption, open_runtime
from memvault.errors import InvalidInputError

LOOPBACK = ("127.0.0.1", "localhost", "::1")


def mcp(
    ctx: typer.Context,
    http: Annotated[
        bool, typer.Option("--http", help="Serve streamable HTTP instead of stdio.")
    ] = False,
    host: Annotated[
        str, typer.Option("--host", help="Address to bind with --http (loopback only).")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=1, max=65535, help="Port with --http.")] = 8766,
    vault: VaultOption = None,
) -> None:
    """Run the MCP server (stdio by default, for Claude Desktop, Claude Code, Cursor, OpenClaw)."""
    import logging

    # stdout is the protocol channel on stdio: every log line goes to stderr.
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="memvault: %(message)s")
    runtime = open_runtime(ctx, vault)
    from memvault.mcp.server import MemvaultMCP, http_app, serve_stdio

    server = MemvaultMCP(runtime)
    if not http:
        import anyio

        anyio.run(serve_stdio, server)
        return
    if host not in LOOPBACK:
        raise InvalidInputError(
            f"memvault mcp --http binds to loopback only, not {host!r}; "
            "serve other machines through `memvault serve`, which requires a token."
        )
    import uvicorn

    print(f"memvault MCP at http://{host}:{port}/mcp (Ctrl-C to stop)", file=sys.stderr)
    uvicorn.run(http_app(server, host=host), host=host, port=port, log_level="warning")
