"""A replica's door: what it answers itself and what it forwards to the primary.

``memvault serve --replica`` runs a daemon beside a primary on one PostgreSQL
database. It never writes the vault and runs no jobs, channels, watcher or
backfill; it answers searches and the other pure reads of the shared index and
state (:data:`ANSWERED_HERE`) from the database, and hands every other request
(every write, and every read that needs the vault's files) to the primary over
HTTP, unchanged: method, path, query, body and the caller's ``Authorization``
header go, the primary's status, headers and body come back. Named tokens live in
the shared state, so the caller's token is the primary's too.

:class:`Forward` sits inside the token check (:class:`~memvault.gateway.middleware.Guard`):
a request reaches the primary only once the replica has found whom it comes from
and that its scope covers the route (:func:`~memvault.gateway.access.authorize`),
so a refusal costs the primary nothing. A primary that cannot be reached is a 503
``primary_unreachable`` naming its URL.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator

import httpx2 as httpx
from starlette.routing import BaseRoute, Match
from starlette.types import ASGIApp, Message, Receive, Send
from starlette.types import Scope as AsgiScope

from memvault.config import Settings
from memvault.errors import ConfigError
from memvault.gateway.access import authorize
from memvault.gateway.errors import ApiError

log = logging.getLogger(__name__)

# Routes a replica answers from the shared database: searches, the graph view (the
# index), the event streams (its own bus, fed from every daemon), the health check,
# the API's description and the tool list. Everything else is forwarded: a route
# added later goes to the primary until someone decides otherwise here.
ANSWERED_HERE: frozenset[tuple[str, str]] = frozenset(
    {
        ("GET", "/v1/health"),
        ("GET", "/openapi.json"),
        ("GET", "/v1/search"),
        ("GET", "/v1/memories/search"),
        ("GET", "/v1/graph"),
        ("GET", "/v1/events"),
        ("GET", "/v1/poll"),
        ("GET", "/v1/tools"),
    }
)

# Headers about one hop of a connection, never passed on (RFC 9110, 7.6.1), and the
# ones the forwarding request sets itself.
_HOP_BY_HOP = frozenset(
    {
        b"connection",
        b"keep-alive",
        b"proxy-authenticate",
        b"proxy-authorization",
        b"te",
        b"trailer",
        b"transfer-encoding",
        b"upgrade",
    }
)
_NOT_FORWARDED = _HOP_BY_HOP | {b"host", b"content-length"}
_NOT_RETURNED = _HOP_BY_HOP | {b"server", b"date"}


def primary_url(settings: Settings) -> str:
    """The primary a replica forwards to; a ConfigError when the settings cannot make one
    (not PostgreSQL, no ``[replica] primary_url``)."""
    if settings.storage.backend != "postgres":
        raise ConfigError(
            "A replica reads the primary's index from PostgreSQL: set [storage] backend = "
            '"postgres" in its config, and the connection string in the variable [storage] '
            "dsn_env names, as on the primary."
        )
    if not settings.replica.primary_url:
        raise ConfigError(
            "A replica needs the primary's address: set [replica] primary_url = "
            '"http://HOST:8765" in its config (or pass --primary URL).'
        )
    return settings.replica.primary_url


def answered_here(method: str, template: str) -> bool:
    """Whether a replica answers a request to the route ``template`` itself."""
    return ("GET" if method == "HEAD" else method, template) in ANSWERED_HERE


def route_template(scope: AsgiScope) -> str | None:
    """The path template of the app's route that will answer ``scope`` (None when no
    route takes its path and method: the app answers 404 or 405 itself)."""
    router = getattr(scope.get("app"), "router", None)
    for route in _leaves(getattr(router, "routes", ())):
        match, _ = route.matches(scope)
        if match == Match.FULL:
            path = getattr(route, "path", None)
            return path if isinstance(path, str) else None
    return None


def _leaves(routes: Iterable[BaseRoute]) -> Iterator[BaseRoute]:
    """The routes themselves, in order, inside FastAPI's inclusions of routers (whose
    routes carry their router's prefix in their path)."""
    for route in routes:
        included = getattr(route, "original_router", None)
        if included is not None:
            yield from _leaves(included.routes)
        else:
            yield route


class Primary:
    """The primary daemon as a replica reaches it: one pooled HTTP client."""

    def __init__(self, url: str, *, connect_timeout: float, timeout: float) -> None:
        self.url = url.rstrip("/")
        self.connect_timeout = connect_timeout
        self.timeout = timeout
        self._client: httpx.AsyncClient | None = None

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = httpx.AsyncClient(
                timeout=httpx.Timeout(self.timeout, connect=self.connect_timeout),
                follow_redirects=False,
            )
        return self._client

    async def aclose(self) -> None:
        """Close the pooled connections (on shutdown)."""
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    async def forward(self, scope: AsgiScope, receive: Receive, send: Send) -> None:
        """Send the request of ``scope`` to the primary and stream its answer back."""
        body = await _body(receive)
        path = scope.get("raw_path") or scope["path"].encode()
        query = scope.get("query_string") or b""
        target = (
            self.url + path.decode("latin-1") + (f"?{query.decode('latin-1')}" if query else "")
        )
        headers = [(k, v) for k, v in scope["headers"] if k.lower() not in _NOT_FORWARDED]
        client = self._http()
        request = client.build_request(scope["method"], target, headers=headers, content=body)
        try:
            response = await client.send(request, stream=True)
        except httpx.TransportError as exc:
            await self.unreachable(exc).response()(scope, receive, send)
            return
        try:
            await send(
                {
                    "type": "http.response.start",
                    "status": response.status_code,
                    "headers": _returned(response.headers.raw),
                }
            )
            async for chunk in response.aiter_raw():
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except httpx.TransportError as exc:  # the primary went away mid-answer: it ends here
            log.warning(
                "the primary's answer broke off",
                extra={"primary": self.url, "path": scope["path"], "error": type(exc).__name__},
            )
        finally:
            await response.aclose()

    def unreachable(self, exc: httpx.TransportError) -> ApiError:
        """The 503 for a primary that did not answer."""
        if isinstance(exc, httpx.ConnectTimeout):
            reason, retriable = f"no connection within {self.connect_timeout:g} s", True
        elif isinstance(exc, httpx.TimeoutException):
            # The request may have been applied: the caller checks before sending it again.
            reason, retriable = f"no answer within {self.timeout:g} s", False
        elif isinstance(exc, httpx.ConnectError):
            reason, retriable = "connection refused or host unreachable", True
        else:
            reason, retriable = type(exc).__name__, False
        log.warning("the primary did not answer", extra={"primary": self.url, "error": reason})
        return ApiError(
            503,
            "primary_unreachable",
            f"This replica forwards writes and vault reads to the primary memvault at "
            f"{self.url}, which did not answer ({reason}); check that it runs and that "
            "[replica] primary_url names it.",
            retriable=retriable,
            details={"primary_url": self.url},
        )


class Forward:
    """ASGI middleware of a replica: requests to routes not :data:`ANSWERED_HERE` go to
    the primary once their token's scope is checked; the rest reach the app."""

    def __init__(self, app: ASGIApp, *, primary: Primary) -> None:
        self.app = app
        self.primary = primary

    async def __call__(self, scope: AsgiScope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        template = route_template(scope)
        if template is None or answered_here(scope["method"], template):
            await self.app(scope, receive, send)
            return
        try:
            authorize(scope, template)
        except ApiError as error:
            await error.response()(scope, receive, send)
            return
        await self.primary.forward(scope, receive, send)


async def _body(receive: Receive) -> bytes:
    """The whole request body (the Guard outside has limited its size)."""
    parts: list[bytes] = []
    while True:
        message: Message = await receive()
        if message["type"] == "http.disconnect":
            break
        parts.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    return b"".join(parts)


def _returned(headers: Iterable[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    return [(k.lower(), v) for k, v in headers if k.lower() not in _NOT_RETURNED]
