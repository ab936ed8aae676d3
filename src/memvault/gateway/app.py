"""The HTTP app of the daemon: the ``/v1`` API, telemetry, and MCP at ``/mcp``.

Built on FastAPI, so the OpenAPI spec (``/openapi.json``) is derived from
the same models that validate requests and responses. Every route but
``GET /v1/health`` and the platforms' signed webhooks (LINE's, WhatsApp's) needs the token
(the owner's, or a named token whose scope covers the route:
:mod:`memvault.gateway.access`); writes from web pages are refused; bodies
are size-limited (:mod:`memvault.gateway.middleware`). Blocking work (files,
SQLite, the model) runs in FastAPI's worker threads.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from fastapi import APIRouter, Depends, FastAPI
from fastapi.openapi.utils import get_openapi
from starlette.types import ASGIApp

from memvault import __version__
from memvault.gateway import errors
from memvault.gateway.access import authorized, gate_routes
from memvault.gateway.daemon import Daemon
from memvault.gateway.middleware import AccessLog, FrontDoor, Guard, HostCheck
from memvault.gateway.replica import Forward, Primary
from memvault.gateway.routes import (
    agent,
    channels,
    events,
    graph,
    jobs,
    line,
    memory,
    notes,
    plain_text,
    runs,
    sessions,
    system,
    tasks,
    telemetry,
    tools,
    whatsapp,
)
from memvault.mcp.server import streamable_http

MCP_PATH = "/mcp"

DESCRIPTION = """\
memvault's local daemon: memory, notes, tasks, tools, sessions and events of one vault.

Send `Authorization: Bearer <token>` (the token is in `<vault>/.memvault/token`) on every
route except `GET /v1/health`. A named token (`memvault tokens create NAME --scope ...`)
may use the routes its scope covers (read, remember, write, admin); others answer
403 `insufficient_scope`. A token bound to an agent (`--agent`) may use only that agent's
memories, sessions and runs. Answers are `{"ok": true, "result": ...}` or
`{"ok": false, "error": {"code", "message", "retriable", "failed_step", "details"}}`.
"""


@dataclass(frozen=True)
class WebFront:
    """Pages served beside the API (the console, :mod:`memvault.console`, built above this
    layer): its ``router`` joins the API, behind the token and the scope table like every
    route; every path outside the API is its ``pages``', which sign their visitors in
    themselves. The host check and the body limits hold for both."""

    router: APIRouter
    pages: ASGIApp


def create_app(daemon: Daemon, *, front: WebFront | None = None) -> FastAPI:
    """The ASGI app serving ``daemon`` (and ``front``'s pages, when given)."""
    mcp_routes, run_mcp_sessions = streamable_http(daemon.mcp, path=MCP_PATH, host=daemon.host)
    primary = _primary(daemon)

    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        daemon.start()
        try:
            async with run_mcp_sessions():
                yield
        finally:
            try:
                if primary is not None:
                    await primary.aclose()
            finally:
                daemon.stop()

    app = FastAPI(
        title="memvault",
        version=__version__,
        description=DESCRIPTION,
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
        # A token's scope is checked first (memvault.gateway.access); then text no file,
        # index or answer can hold is refused before any route runs.
        dependencies=[Depends(authorized), Depends(plain_text)],
    )
    app.state.daemon = daemon
    errors.install(app)
    for module in (
        system,
        memory,
        notes,
        tasks,
        tools,
        sessions,
        runs,
        agent,
        channels,
        line,
        whatsapp,
        events,
        telemetry,
        jobs,
        graph,
    ):
        app.include_router(module.router)
    if front is not None:
        app.include_router(front.router)
    app.router.routes.extend(mcp_routes)
    gate_routes(app)  # /mcp and /openapi.json: the scope table applies to them too
    app.openapi = lambda: _openapi(app)  # type: ignore[method-assign]
    max_body = int(daemon.runtime.settings.server.max_body_mb * 1024 * 1024)
    if primary is not None:
        # Inside the Guard: a request is forwarded only once its token and scope passed.
        app.add_middleware(Forward, primary=primary)
    if front is not None:  # inside the Guard (its body limits), before any forwarding
        app.add_middleware(FrontDoor, front=front.pages)
    app.add_middleware(
        Guard,
        token=daemon.token,
        max_body=max_body,
        tokens=daemon.tokens.authenticate,
        front=front is not None,
    )
    # DNS rebinding: every route, /v1 and /mcp alike, answers only to this daemon's names.
    app.add_middleware(HostCheck, host=daemon.host, port=lambda: daemon.port)
    app.add_middleware(AccessLog)
    return app


def _primary(daemon: Daemon) -> Primary | None:
    """The primary a replica forwards to (None on the primary itself)."""
    if daemon.primary_url is None:
        return None
    settings = daemon.runtime.settings.replica
    return Primary(
        daemon.primary_url, connect_timeout=settings.connect_timeout, timeout=settings.timeout
    )


def _openapi(app: FastAPI) -> dict[str, Any]:
    """The spec, with the bearer token every route but the health check needs."""
    if app.openapi_schema is None:
        spec = get_openapi(
            title=app.title, version=app.version, description=app.description, routes=app.routes
        )
        spec.setdefault("components", {})["securitySchemes"] = {
            "token": {
                "type": "http",
                "scheme": "bearer",
                "description": "The daemon's token, from <vault>/.memvault/token, or a "
                "named token (memvault tokens create).",
            }
        }
        spec["security"] = [{"token": []}]
        for operations in spec["paths"].values():
            for operation in operations.values():
                # Invalid input answers 400 validation_failed, never FastAPI's 422.
                operation.get("responses", {}).pop("422", None)
        for name in ("HTTPValidationError", "ValidationError"):
            spec["components"].get("schemas", {}).pop(name, None)
        spec["paths"]["/v1/health"]["get"]["security"] = []
        app.openapi_schema = spec
    return app.openapi_schema
