"""What each route and each tool needs: the one table of scopes.

Every authenticated route of the daemon is listed in :data:`ROUTE_SCOPES`
by method and path template, with the scope a token needs for it
(:class:`~memvault.gateway.tokens.Scope`). A route the table does not list
needs ``admin``: a new route is closed to named tokens until someone decides
otherwise here.

The table is applied once the router has chosen the route, so the template
looked up is the one that runs, never a second guess at matching: by
:func:`authorized`, a dependency of the whole app, on the API's routes, and
by :class:`Authorized` around the app's plain routes (``/mcp``,
``/openapi.json``), which :func:`gate_routes` puts there. The middleware
(:class:`~memvault.gateway.middleware.Guard`) has by then found whom the
request comes from.

Two routes run tools, and what a tool needs depends on the tool
(:func:`tool_scope`): ``POST /v1/tools/{name}`` and MCP at ``/mcp``. They are
open to every scope, then each tool call is checked on its own, and each lists
only the tools its caller may call.

A token bound to an agent may use only :data:`AGENT_ROUTES`, the routes that
show and change that agent's own memories and sessions (and its runs) (the routes narrow what
they answer to it: :func:`memvault.acting.sees`); any other route (notes, tasks,
context, events, channels, jobs, tools, MCP) answers 403 ``insufficient_scope``.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.routing import APIRoute
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Receive, Send
from starlette.types import Scope as AsgiScope

from memvault.acting import OWNER as OWNER_ACTOR
from memvault.acting import Actor
from memvault.gateway.errors import ApiError
from memvault.gateway.tokens import Principal, Scope
from memvault.tools.policy import Tier
from memvault.tools.registry import Tool

READ, REMEMBER, WRITE, ADMIN = Scope.READ, Scope.REMEMBER, Scope.WRITE, Scope.ADMIN

ROUTE_SCOPES: dict[tuple[str, str], Scope] = {
    # system
    ("GET", "/v1/doctor"): ADMIN,
    ("GET", "/openapi.json"): READ,
    # memory, search, context
    ("GET", "/v1/memories"): READ,
    ("POST", "/v1/memories"): REMEMBER,
    ("GET", "/v1/memories/search"): READ,
    ("GET", "/v1/memories/reviews"): READ,
    ("GET", "/v1/memories/{memory_id:path}/history"): READ,
    ("GET", "/v1/memories/{memory_id:path}/access"): READ,
    ("GET", "/v1/memories/{memory_id:path}"): READ,
    ("DELETE", "/v1/memories/{memory_id:path}"): WRITE,
    ("PATCH", "/v1/memories/{memory_id}"): WRITE,
    ("POST", "/v1/forget"): WRITE,
    ("GET", "/v1/search"): READ,
    ("GET", "/v1/context"): READ,
    # the knowledge graph
    ("GET", "/v1/graph"): READ,
    ("GET", "/v1/graph/entities/{name:path}/facts"): READ,
    # notes
    ("GET", "/v1/notes"): READ,
    ("GET", "/v1/notes/{path:path}"): READ,
    ("PUT", "/v1/notes/{path:path}"): WRITE,
    ("POST", "/v1/notes/{path:path}"): WRITE,
    ("DELETE", "/v1/notes/{path:path}"): WRITE,
    # tasks
    ("GET", "/v1/tasks"): READ,
    ("POST", "/v1/tasks"): WRITE,
    ("GET", "/v1/tasks/{ref}"): READ,
    ("PATCH", "/v1/tasks/{ref}"): WRITE,
    ("POST", "/v1/tasks/{ref}/complete"): WRITE,
    # tools: each call is checked against tool_scope() by the route
    ("GET", "/v1/tools"): READ,
    ("POST", "/v1/tools/{name}"): READ,
    # sessions
    ("GET", "/v1/sessions"): READ,
    ("POST", "/v1/sessions/{key:path}/messages"): REMEMBER,
    ("POST", "/v1/sessions/{key:path}/end"): REMEMBER,
    ("GET", "/v1/sessions/{key:path}"): READ,
    # the agent runs record (what each run was given, recalled and called)
    ("GET", "/v1/runs"): READ,
    ("GET", "/v1/runs/{run_id}"): READ,
    # the agent: its tools write, send and may run commands
    ("POST", "/v1/agent/run"): ADMIN,
    # channels: reading them is a read; sending, approving and the outbox are the owner's
    ("POST", "/v1/send"): ADMIN,
    ("GET", "/v1/messages"): READ,
    ("GET", "/v1/conversations"): READ,
    ("GET", "/v1/channels"): READ,
    ("GET", "/v1/channels/pending"): ADMIN,
    ("POST", "/v1/channels/{channel}/approve"): ADMIN,
    ("POST", "/v1/channels/{channel}/block"): ADMIN,
    ("GET", "/v1/channels/outbox"): READ,
    ("POST", "/v1/channels/outbox/{outbox_id}/retry"): ADMIN,
    # events
    ("GET", "/v1/poll"): READ,
    ("GET", "/v1/events"): READ,
    # the owner's phone
    ("POST", "/api/telemetry"): WRITE,
    # jobs
    ("GET", "/v1/jobs"): READ,
    ("POST", "/v1/jobs/{name}/run"): ADMIN,
    ("GET", "/v1/jobs/{name}/runs"): READ,
    ("GET", "/v1/jobs/runs"): READ,
    ("GET", "/v1/jobs/runs/{run_id}"): READ,
    ("POST", "/v1/jobs/runs/{run_id}/undo"): ADMIN,
    # the console (memvault.console): a sign-in link opens a console of the token's own
    # scope; ending every console session is the owner's
    ("POST", "/v1/console/links"): READ,
    ("DELETE", "/v1/console/sessions"): ADMIN,
    # MCP over streamable HTTP: each tool call is checked against tool_scope()
    ("GET", "/mcp"): READ,
    ("POST", "/mcp"): READ,
    ("DELETE", "/mcp"): READ,
}

# What a token bound to an agent may use: its own memories and sessions, and the spec.
AGENT_ROUTES = frozenset(
    {
        ("GET", "/openapi.json"),
        ("GET", "/v1/memories"),
        ("POST", "/v1/memories"),
        ("GET", "/v1/memories/search"),
        ("GET", "/v1/memories/{memory_id:path}/history"),
        ("GET", "/v1/memories/{memory_id:path}/access"),
        ("GET", "/v1/memories/{memory_id:path}"),
        ("DELETE", "/v1/memories/{memory_id:path}"),
        ("GET", "/v1/search"),
        ("GET", "/v1/sessions"),
        ("POST", "/v1/sessions/{key:path}/messages"),
        ("POST", "/v1/sessions/{key:path}/end"),
        ("GET", "/v1/sessions/{key:path}"),
        ("GET", "/v1/runs"),
        ("GET", "/v1/runs/{run_id}"),
    }
)

# Tools that store what an agent was told or learned, and nothing else.
REMEMBER_TOOLS = frozenset({"remember"})


def tool_scope(tool: Tool) -> Scope:
    """The scope a call of ``tool`` needs: tier-1 reads ``read``, ``remember``
    ``remember``, other tier-1 tools ``write``, tier 2 and 3 ``admin`` (and, as
    before, the owner's approval where the tier policy asks for it)."""
    if tool.name in REMEMBER_TOOLS:
        return REMEMBER
    if tool.tier == Tier.READ:
        return READ if tool.annotations.read_only else WRITE
    return ADMIN


def needed(method: str, path: str | None) -> Scope:
    """The scope a request of ``method`` to the route ``path`` (its template) needs: the
    table's entry, else ``admin``."""
    method = "GET" if method == "HEAD" else method
    return ROUTE_SCOPES.get((method, path or ""), ADMIN)


UNKNOWN_CALLER = "The daemon could not tell whose token this request carried; send it again."


def unconfined(principal: Principal, method: str, path: str | None) -> ApiError | None:
    """The 403 ``insufficient_scope`` for a token bound to an agent on a route beyond that
    agent's own memories and sessions; None when the route is one of those, or the token
    is not bound."""
    if principal.agent is None:
        return None
    method = "GET" if method == "HEAD" else method
    if (method, path or "") in AGENT_ROUTES:
        return None
    return ApiError(
        403,
        "insufficient_scope",
        f"The token {principal.name!r} is bound to the agent {principal.agent!r}: it may "
        "use only that agent's memories and sessions (/v1/memories, /v1/search, "
        "/v1/sessions).",
        details={"scope": principal.scope.label, "agent": principal.agent},
    )


def insufficient(principal: Principal, needed: Scope) -> ApiError | None:
    """The 403 ``insufficient_scope`` for a request beyond ``principal``'s scope; None when
    its scope covers ``needed``."""
    refusal = principal.refusal(needed)
    if refusal is None:
        return None
    return ApiError(
        403,
        "insufficient_scope",
        refusal,
        details={"scope": principal.scope.label, "needed": needed.label},
    )


def authorize(scope: AsgiScope, path: str | None) -> None:
    """Refuse a request to the route ``path`` beyond its token's scope (403
    ``insufficient_scope``); one the middleware did not look at is refused too (401),
    closed rather than open."""
    state = scope.get("state") or {}
    if "principal" not in state:
        raise ApiError(401, "unauthorized", UNKNOWN_CALLER)
    principal = state["principal"]
    if principal is None:
        return  # an open route: the health check, a platform's signed webhook
    # A bound token hears first what it may use at all: a wider scope would not open more.
    refused = unconfined(principal, scope["method"], path) or insufficient(
        principal, needed(scope["method"], path)
    )
    if refused is not None:
        raise refused


async def authorized(request: Request) -> None:
    """:func:`authorize` as a dependency of every API route (FastAPI names the route chosen
    in the request's scope)."""
    route = request.scope.get("route")
    authorize(request.scope, route.path if isinstance(route, APIRoute) else None)


class Authorized:
    """:func:`authorize` around the ASGI app of the plain route ``path``."""

    def __init__(self, app: ASGIApp, path: str) -> None:
        self.app = app
        self.path = path

    async def __call__(self, scope: AsgiScope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            try:
                authorize(scope, self.path)
            except ApiError as error:
                await error.response()(scope, receive, send)
                return
        await self.app(scope, receive, send)


def gate_routes(app: FastAPI) -> None:
    """Put :class:`Authorized` around every plain route of ``app``. The API's routes, and
    FastAPI's inclusions of routers holding only API routes, run :func:`authorized` as an
    app dependency already; any other kind of route (a mount, say) is refused here, a
    programming error rather than a door left open."""
    for route in app.router.routes:
        if isinstance(route, APIRoute) or _api_routes_only(route):
            continue
        if type(route) is Route:
            if not isinstance(route.app, Authorized):
                route.app = Authorized(route.app, route.path)
            continue
        raise TypeError(f"{route!r}: token scopes cannot be checked on this kind of route")


def _api_routes_only(route: BaseRoute) -> bool:
    """Whether ``route`` is FastAPI's inclusion of a router whose routes are all API routes."""
    routes = getattr(getattr(route, "original_router", None), "routes", None)
    if routes is None:
        return False
    return all(isinstance(r, APIRoute) or _api_routes_only(r) for r in routes)


def principal_of(request: Any) -> Principal | None:
    """Whom an HTTP request (Starlette's) comes from, as the middleware found; None when
    it did not look or the route is open (which a caller treats as a refusal)."""
    state = getattr(request, "state", None)
    principal = getattr(state, "principal", None) if state is not None else None
    return principal if isinstance(principal, Principal) else None


class ToolScopes:
    """The MCP server's gate (:class:`memvault.mcp.server.ToolGate`): a tool call over
    ``/mcp`` is allowed by the scope of the token the HTTP request came with."""

    def refusal(self, request: Any, tool: Tool) -> str | None:
        """Why the caller may not call ``tool``; None when it may."""
        principal = principal_of(request)
        if principal is None:
            return UNKNOWN_CALLER
        return principal.refusal(tool_scope(tool))

    def actor(self, request: Any) -> Actor:
        """Whom the caller acts for (:mod:`memvault.acting`)."""
        principal = principal_of(request)
        return principal.actor if principal is not None else OWNER_ACTOR
