"""memvault's MCP server: the tool registry, the vault's notes, and how to use memory.

Built on the official ``mcp`` SDK's low-level server:

- **tools**: every registry tool up to tier 2 (tier 3, the deletions, only
  when ``tools.mcp_dangerous`` is set), with annotations so the client can
  decide what to confirm with its user. Over MCP the client is the
  approver, so calls are not asked again here. Served by the daemon, a
  :class:`ToolGate` also lists and runs only the tools the caller's token
  may call (its scope).
- **resources**: each note as ``memvault://vault/<path>`` (Markdown), plus
  a template for any path.
- **prompts**: ``memory_guide`` (when to search, when to remember) and
  ``memory_context`` (the context builder's Markdown for a request).

Blocking work (files, SQLite, the model) runs in worker threads. A watcher
keeps the index current with edits made in Obsidian, and a backfill thread
fills pending embeddings, for as long as the server runs. The embedding
model starts loading when the server starts; until it is ready, searches
answer from keywords and say so (a ``notice`` in the result), so a client
never waits for it.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
from collections.abc import AsyncIterator, Callable
from typing import Any, Protocol, TypeVar
from urllib.parse import quote, unquote

import anyio.to_thread
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError
from starlette.routing import BaseRoute

from memvault import __version__
from memvault.acting import Actor, acting_as
from memvault.errors import MemvaultError
from memvault.index.backfill import Backfill
from memvault.index.watch import follow
from memvault.memory.guide import MEMORY_GUIDE
from memvault.runtime import Runtime
from memvault.tools import ToolRegistry, default_registry
from memvault.tools.policy import AllowAll, Policy, Tier
from memvault.tools.registry import Tool, ToolContext

log = logging.getLogger(__name__)

URI_PREFIX = "memvault://vault/"
PAGE_SIZE = 500
T = TypeVar("T")


def note_uri(path: str) -> str:
    """The resource URI of a vault note."""
    return URI_PREFIX + quote(path, safe="/")


def _tool_result(result: Any) -> types.CallToolResult:
    structured = result.data if result.ok and isinstance(result.data, dict) else None
    return types.CallToolResult(
        content=[types.TextContent(text=result.text())],
        structured_content=structured,
        is_error=not result.ok,
    )


PROMPTS = (
    types.Prompt(
        name="memory_guide",
        title="How to use memory",
        description="When to search memory, when to remember, and which tools do it.",
    ),
    types.Prompt(
        name="memory_context",
        title="Memory context",
        description="The owner's profile, status, tasks and memories relevant to a request.",
        arguments=[
            types.PromptArgument(name="query", description="The request at hand.", required=False),
            types.PromptArgument(
                name="budget", description="Token budget (default 2000).", required=False
            ),
        ],
    ),
)


class ToolGate(Protocol):
    """Who may call which tool, judged by the HTTP request a call came with (the daemon's
    token scopes, :mod:`memvault.gateway.access`)."""

    def refusal(self, request: Any, tool: Tool) -> str | None:
        """Why the caller of ``request`` may not call ``tool``; None when it may."""
        ...

    def actor(self, request: Any) -> Actor:
        """Whom the caller acts for (:mod:`memvault.acting`): the agent recorded on what it
        creates, what it may see, whether its searches are recalls."""
        ...


class MemvaultMCP:
    """The MCP server of one vault."""

    def __init__(
        self,
        runtime: Runtime,
        registry: ToolRegistry | None = None,
        *,
        serve_dangerous: bool | None = None,
        background: bool = True,
        gate: ToolGate | None = None,
    ) -> None:
        self.runtime = runtime
        self.gate = gate
        self.registry = registry or default_registry()
        dangerous = (
            runtime.settings.tools.mcp_dangerous if serve_dangerous is None else serve_dangerous
        )
        self.max_tier = Tier.DANGEROUS if dangerous else Tier.WRITE
        self.background = background
        # The client asks its user (guided by the annotations): nothing is asked again here.
        self.policy = Policy(approver=AllowAll(), mode="autonomous")
        self._watching = threading.Event()
        self._stop = threading.Event()

    # -- lifecycle -------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def lifespan(self, _server: Server[Any]) -> AsyncIterator[dict[str, Any]]:
        """Start the watcher, the model's loading and the embedding backfill; stop them on
        shutdown."""
        watcher: threading.Thread | None = None
        backfill: Backfill | None = None
        if self.background:
            self.runtime.index.warm_in_background()
            watcher = threading.Thread(target=self._watch, name="memvault-watch", daemon=True)
            watcher.start()
            backfill = Backfill(self.runtime.index)
            backfill.start()
        try:
            yield {}
        finally:
            self._stop.set()
            if backfill is not None:
                backfill.stop()
            if watcher is not None:
                watcher.join(5)

    def _watch(self) -> None:
        try:
            follow(self.runtime.index, stop=self._stop, ready=self._watching)
        except Exception:
            log.exception("the vault watcher stopped; searches will sync the index themselves")
            self._watching.clear()

    async def _run(self, fn: Callable[..., T], *args: Any) -> T:
        return await anyio.to_thread.run_sync(functools.partial(fn, *args))

    # -- tools -----------------------------------------------------------------------

    def tools(self, request: Any = None) -> list[Tool]:
        """The registry tools this server offers (to the caller of ``request``, when a gate
        judges callers)."""
        offered = self.registry.offered(self.runtime.settings, self.max_tier)
        if self.gate is None:
            return offered
        gate = self.gate
        return [tool for tool in offered if gate.refusal(request, tool) is None]

    async def list_tools(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(
            tools=[
                types.Tool(
                    name=tool.name,
                    title=tool.title,
                    description=tool.description,
                    input_schema=tool.input_schema(),
                    annotations=types.ToolAnnotations(
                        title=tool.title,
                        read_only_hint=tool.annotations.read_only,
                        destructive_hint=tool.annotations.destructive,
                        idempotent_hint=tool.annotations.idempotent,
                        open_world_hint=tool.annotations.open_world,
                    ),
                )
                for tool in self.tools(ctx.request)
            ]
        )

    async def call_tool(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        offered = {tool.name for tool in self.tools(ctx.request)}
        if params.name not in offered:
            tool = self.registry.get(params.name) if params.name in self.registry.names() else None
            refusal = (
                self.gate.refusal(ctx.request, tool)
                if tool is not None and self.gate is not None
                else None
            )
            if tool is not None and not tool.offered(self.runtime.settings):
                message = tool.turned_off()
            elif refusal is not None:
                message = refusal
            elif tool is not None:
                message = (
                    f"{params.name} is not offered over MCP: it is a tier-3 tool (it deletes "
                    "things or runs commands). The owner can "
                    "enable it with tools.mcp_dangerous = true in the vault's config."
                )
            else:
                message = f"There is no tool named {params.name!r}; list the tools first."
            return types.CallToolResult(content=[types.TextContent(text=message)], is_error=True)
        context = ToolContext(
            runtime=self.runtime,
            policy=self.policy,
            surface="mcp",
            index_followed=self._watching.is_set(),
            wait_for_model=False,
        )
        actor = self.gate.actor(ctx.request) if self.gate is not None else None
        with acting_as(actor):  # the worker thread runs in a copy of this context
            result = await self._run(
                self.registry.call, params.name, params.arguments or {}, context
            )
        return _tool_result(result)

    # -- resources -------------------------------------------------------------------

    async def list_resources(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        entries = await self._run(self.runtime.vault.list)
        start = int(params.cursor) if params and params.cursor and params.cursor.isdigit() else 0
        page = entries[start : start + PAGE_SIZE]
        following = str(start + PAGE_SIZE) if start + PAGE_SIZE < len(entries) else None
        return types.ListResourcesResult(
            resources=[
                types.Resource(
                    uri=note_uri(entry.path),
                    name=entry.path,
                    title=entry.path.rsplit("/", 1)[-1].removesuffix(".md"),
                    mime_type="text/markdown",
                    size=entry.size,
                )
                for entry in page
            ],
            next_cursor=following,
        )

    async def list_resource_templates(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(
            resource_templates=[
                types.ResourceTemplate(
                    uri_template=URI_PREFIX + "{+path}",
                    name="vault_note",
                    title="Vault note",
                    description="Any note of the vault, by its vault-relative path.",
                    mime_type="text/markdown",
                )
            ]
        )

    async def read_resource(
        self, ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        uri = str(params.uri)
        if not uri.startswith(URI_PREFIX):
            raise MCPError(code=types.INVALID_PARAMS, message=f"Unknown resource: {uri}")
        path = unquote(uri.removeprefix(URI_PREFIX))
        try:
            view = await self._run(self.runtime.notes.read, path)
        except MemvaultError as exc:
            raise MCPError(
                code=types.INVALID_PARAMS, message=f"Resource not found: {exc.message}"
            ) from None
        return types.ReadResourceResult(
            contents=[
                types.TextResourceContents(uri=uri, mime_type="text/markdown", text=view.text)
            ]
        )

    # -- prompts ---------------------------------------------------------------------

    async def list_prompts(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListPromptsResult:
        return types.ListPromptsResult(prompts=list(PROMPTS))

    async def get_prompt(
        self, ctx: ServerRequestContext[Any], params: types.GetPromptRequestParams
    ) -> types.GetPromptResult:
        args = params.arguments or {}
        if params.name == "memory_guide":
            return types.GetPromptResult(
                description="How to use memvault's memory",
                messages=[
                    types.PromptMessage(role="user", content=types.TextContent(text=MEMORY_GUIDE))
                ],
            )
        if params.name == "memory_context":
            budget_text = args.get("budget")
            if budget_text is not None and not str(budget_text).isdigit():
                raise MCPError(
                    code=types.INVALID_PARAMS, message="budget must be a whole number of tokens"
                )
            budget = int(budget_text) if budget_text else None
            try:
                text = await self._run(self._context, args.get("query"), budget)
            except MemvaultError as exc:
                raise MCPError(code=types.INVALID_PARAMS, message=exc.message) from None
            return types.GetPromptResult(
                description="What memvault knows that matters now",
                messages=[types.PromptMessage(role="user", content=types.TextContent(text=text))],
            )
        raise MCPError(code=types.INVALID_PARAMS, message=f"Unknown prompt: {params.name}")

    def _context(self, query: str | None, budget: int | None) -> str:
        if query and not self._watching.is_set():
            self.runtime.index.sync()
        return self.runtime.context.build_result(query, budget, wait_for_model=False).text()

    # -- the server ------------------------------------------------------------------

    def server(self) -> Server[Any]:
        """The SDK server with every handler wired."""
        return Server(
            "memvault",
            version=__version__,
            title="memvault",
            instructions=MEMORY_GUIDE,
            lifespan=self.lifespan,
            on_list_tools=self.list_tools,
            on_call_tool=self.call_tool,
            on_list_resources=self.list_resources,
            on_list_resource_templates=self.list_resource_templates,
            on_read_resource=self.read_resource,
            on_list_prompts=self.list_prompts,
            on_get_prompt=self.get_prompt,
        )


async def serve_stdio(mcp: MemvaultMCP) -> None:
    """Serve over stdin/stdout until the client goes away."""
    from mcp.server.stdio import stdio_server

    server = mcp.server()
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")


def streamable_http(
    mcp: MemvaultMCP, *, path: str = "/mcp", host: str = "127.0.0.1"
) -> tuple[list[BaseRoute], Callable[[], contextlib.AbstractAsyncContextManager[None]]]:
    """The streamable-HTTP route for ``path``, and the session manager to run beside it.

    On loopback, DNS-rebinding protection is on: only loopback hosts and
    origins are accepted. Bound elsewhere, the Host header is the machine's
    own address and the caller's token is what protects the endpoint.
    """
    from mcp.server.transport_security import TransportSecuritySettings

    server = mcp.server()
    loopback = host in LOOPBACK_HOSTS
    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=loopback,
        allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*"] if loopback else [],
        allowed_origins=(
            ["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"] if loopback else []
        ),
    )
    app = server.streamable_http_app(
        streamable_http_path=path, transport_security=security, host=host
    )
    return list(app.routes), server.session_manager.run


def http_app(mcp: MemvaultMCP, *, path: str = "/mcp", host: str = "127.0.0.1") -> Any:
    """A Starlette app serving MCP over streamable HTTP at ``path`` (``memvault mcp --http``)."""
    from starlette.applications import Starlette

    routes, run_sessions = streamable_http(mcp, path=path, host=host)

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        async with run_sessions():
            yield

    return Starlette(routes=routes, lifespan=lifespan)
