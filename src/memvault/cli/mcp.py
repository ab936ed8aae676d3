"""``memvault mcp``: serve the tools, notes and prompts to MCP clients."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from memvault.cli.common import VaultOption, open_runtime
from memvault.errors import InvalidInputError
from memvault.gateway.security import is_loopback
from memvault.shutdown import leave_cleanly


def mcp(
    ctx: typer.Context,
    http: Annotated[
        bool, typer.Option("--http", help="Serve streamable HTTP instead of stdio.")
    ] = False,
    host: Annotated[
        str, typer.Option("--host", help="Address to bind with --http (loopback only).")
    ] = "127.0.0.1",
    port: Annotated[
        int, typer.Option("--port", min=0, max=65535, help="Port with --http (0: a free one).")
    ] = 8766,
    vault: VaultOption = None,
) -> None:
    """Run the MCP server (stdio by default, for Claude Desktop, Claude Code, Cursor, OpenClaw)."""
    import logging

    # stdout is the protocol channel on stdio: every log line goes to stderr.
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="memvault: %(message)s")
    from memvault.processes import hide_environment

    hide_environment()  # no command run_shell_command runs reads the keys from /proc
    runtime = open_runtime(ctx, vault)
    from memvault.channels.tools import full_registry
    from memvault.mcp.server import MemvaultMCP, http_app, serve_stdio

    server = MemvaultMCP(runtime, full_registry())
    if not http:
        import anyio

        anyio.run(serve_stdio, server)
        runtime.close()
        leave_cleanly("memvault MCP server stopped")  # the model may still be loading
        return
    if not is_loopback(host):
        raise InvalidInputError(
            f"memvault mcp --http binds to loopback only, not {host!r}; "
            "serve other machines through `memvault serve`, which requires a token."
        )
    import uvicorn

    from memvault.gateway.server import bind, run_until_stopped

    sock = bind(host, port)  # a busy port is one sentence (exit 4), as for `memvault serve`
    address = f"[{host}]" if ":" in host else host
    print(
        f"memvault MCP at http://{address}:{sock.getsockname()[1]}/mcp (Ctrl-C to stop)",
        file=sys.stderr,
    )
    config = uvicorn.Config(http_app(server, host=host), log_level="warning", lifespan="on")
    run_until_stopped(uvicorn.Server(config), sock)
    runtime.close()
    leave_cleanly("memvault MCP server stopped")
