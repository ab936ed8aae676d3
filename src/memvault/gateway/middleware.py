"""What every request passes before a route sees it: the host rule, the origin rule, the token
and its scope, the size and depth limits of the body, and the access log.

Plain ASGI middleware, so event streams and the MCP endpoint pass through
unbuffered; only a request's body is read whole before its route runs, as every
route reads it whole anyway.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection

from starlette.concurrency import run_in_threadpool
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from memvault.acting import acting_as
from memvault.gateway.errors import ApiError
from memvault.gateway.security import bearer, matches
from memvault.gateway.tokens import OWNER, Principal
from memvault.privacy.reads import reading

log = logging.getLogger("memvault.gateway.access")

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "::1"})
# Bound to every address, the daemon cannot know all the names it is reached by.
_EVERY_ADDRESS = frozenset({"0.0.0.0", "::", ""})
# Platforms' webhooks carry no token: the platform signs the body with a secret it shares
# with memvault, and the route checks that signature before anything is stored.
SIGNED_PATHS = frozenset({"/v1/channels/line/webhook", "/v1/channels/whatsapp/webhook"})
# A platform's subscription check (Meta's GET with hub.verify_token): no token either; the
# route answers only when the platform names the verify token the owner gave it.
VERIFIED_PATHS = frozenset({"/v1/channels/whatsapp/webhook"})
# How deep a body's JSON may nest (objects and arrays, the body itself the first level): far
# deeper than anything a client of this API sends, far below where a parser gives up
# (Python's json recurses about 1000 levels, then raises RecursionError).
MAX_JSON_DEPTH = 64
_NOT_BRACKETS = bytes(byte for byte in range(256) if byte not in b"[]{}")
_OPENERS = (ord("["), ord("{"))
# A body up to this size is measured on the event loop; a larger one in a worker thread.
_MEASURED_INLINE = 64 * 1024
# The API's paths; with a web front (the console, memvault.console), every other path is the
# front's, whose pages sign their visitors in themselves.
API_PATHS = ("/v1", "/mcp", "/api", "/openapi.json")


def api_path(path: str) -> bool:
    """Whether ``path`` is one of the API's (not a web front's page)."""
    return any(path == prefix or path.startswith(prefix + "/") for prefix in API_PATHS)


class FrontDoor:
    """Sends every request outside :data:`API_PATHS` to ``front`` (the console's pages);
    the API's requests go on to the API."""

    def __init__(self, app: ASGIApp, *, front: ASGIApp) -> None:
        self.app = app
        self.front = front

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not api_path(scope["path"]):
            await self.front(scope, receive, send)
            return
        await self.app(scope, receive, send)


def nests_deeper(body: bytes, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether the JSON ``body`` nests objects and arrays more than ``limit`` levels deep.

    Measured without parsing and without recursion: escaped backslashes and quotes
    are dropped, then what lies between quotes (the strings), then the brackets
    that are left are counted. Bytes that are not JSON are measured the same way;
    the parser refuses them anyway.
    """
    if body.count(b"[") + body.count(b"{") <= limit:
        return False  # the common case, at C speed: too few brackets to be that deep
    # After \\ is gone, every \" left escapes a quote inside a string.
    unescaped = body.replace(b"\\\\", b"").replace(b'\\"', b"")
    brackets = b"".join(unescaped.split(b'"')[::2]).translate(None, _NOT_BRACKETS)
    depth = 0
    for byte in brackets:
        if byte in _OPENERS:
            depth += 1
            if depth > limit:
                return True
        else:
            depth -= 1
    return False


class HostCheck:
    """Answers 421 ``misdirected_request`` when the ``Host`` header names another server.

    A web page whose domain is re-pointed at 127.0.0.1 (DNS rebinding) sends its
    own name as the Host; local programs send the address they dialled. Accepted:
    the bound host, 127.0.0.1, localhost and ::1, each with the daemon's port (read
    per request: a daemon asked for port 0 learns its port once bound). A daemon
    bound to every address (0.0.0.0, ::) checks nothing here; the token guards it.
    """

    def __init__(self, app: ASGIApp, *, host: str, port: Callable[[], int]) -> None:
        self.app = app
        self.names = None if host in _EVERY_ADDRESS else LOOPBACK_NAMES | {host.lower()}
        self.port = port

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not self.allowed(Headers(scope=scope).get("host", "")):
            error = ApiError(
                421,
                "misdirected_request",
                "The Host header names another server; "
                f"send Host: 127.0.0.1:{self.port()} (or localhost, ::1, the bound address).",
            )
            await error.response()(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def allowed(self, header: str) -> bool:
        """Whether a ``Host`` header value names this daemon."""
        if self.names is None:
            return True
        name, port = split_host(header.strip().lower())
        return name in self.names and (port or 80) == self.port()


def split_host(value: str) -> tuple[str, int | None]:
    """``host[:port]`` (IPv6 in brackets) as the name and the port (None when absent or bad)."""
    if value.startswith("["):
        name, _, rest = value[1:].partition("]")
        port = rest.removeprefix(":") if rest.startswith(":") else ""
    elif value.count(":") == 1:
        name, _, port = value.partition(":")
    else:
        name, port = value, ""
    if not port:
        return name, None
    return (name, int(port)) if port.isdigit() else ("", None)


# A named token's secret -> its principal, or None (unknown or revoked). Blocking: SQLite.
TokenLookup = Callable[[str], Principal | None]


class Guard:
    """Rejects browser-made writes, requests without a token or beyond its scope, and
    bodies too large or nested too deep.

    - A request that changes something (any method but GET, HEAD, OPTIONS)
      with a non-empty ``Origin`` header comes from a web page: 403
      ``browser_origin_rejected``. Local agents and scripts send no Origin.
    - Every route but ``open_paths`` needs ``Authorization: Bearer <token>``,
      the daemon's own (the owner's) or a live named token: 401
      ``unauthorized``. A platform's webhook (:data:`SIGNED_PATHS`) is posted
      without it; its route checks the platform's signature instead (and
      answers a subscription check, :data:`VERIFIED_PATHS`, only for the
      platform's verify token).
    - Whom the request comes from is left in ``request.state.principal``
      (None on an open route), for the route's scope check once routed
      (:mod:`memvault.gateway.access`: 403 ``insufficient_scope``); meanwhile a
      named token acts for its agent (:mod:`memvault.acting`: the agent
      recorded, what it may see, whether its searches are recalls).
    - A body larger than ``max_body`` bytes: 413 ``payload_too_large``. A body
      whose JSON nests deeper than :data:`MAX_JSON_DEPTH` levels: 400
      ``invalid_json``, before any parser sees it (FastAPI's, the routes', LINE's,
      MCP's). The body is read whole for this; the route gets it as sent.
    - With ``front`` (a web front serves the paths outside :data:`API_PATHS`), a
      request to a page passes without a token and with its ``Origin``: the page
      checks its own sign-in cookie, CSRF token and origin. The body limits apply.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        token: str,
        max_body: int,
        tokens: TokenLookup,
        open_paths: Collection[str] = ("/v1/health",),
        front: bool = False,
    ) -> None:
        self.app = app
        self.front = front
        self.token = token
        self.max_body = max_body
        self.tokens = tokens
        self.open_paths = frozenset(open_paths)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        try:
            principal = None
            if not (self.front and not api_path(scope["path"])):  # a page checks its own
                self._check_origin(scope)
                principal = await self._admit(scope)
            self._check_length(scope)
            body = await self._body(receive)
        except ApiError as error:
            await error.response()(scope, receive, send)
            return
        if body is None:
            return  # the client went away while sending it: nobody to answer
        scope.setdefault("state", {})["principal"] = principal
        given = False

        async def replay() -> Message:
            """The body as read, then what the client does next (a disconnect)."""
            nonlocal given
            if given:
                return await receive()
            given = True
            return {"type": "http.request", "body": body, "more_body": False}

        actor = principal.actor if principal is not None else None
        with acting_as(actor), reading(surface="http"):  # who reads, and through what
            await self.app(scope, replay, send)

    async def _body(self, receive: Receive) -> bytes | None:
        """The whole body within the limits; None if the client disconnected first."""
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return None
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body:  # sent without a Content-Length, or more than it said
                raise _too_large(self.max_body)
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        deep = (
            nests_deeper(body)
            if len(body) <= _MEASURED_INLINE
            else await run_in_threadpool(nests_deeper, body)
        )
        if deep:
            raise ApiError(
                400,
                "invalid_json",
                f"The request body nests deeper than {MAX_JSON_DEPTH} levels.",
                details={"max_depth": MAX_JSON_DEPTH},
            )
        return body

    def _check_origin(self, scope: Scope) -> None:
        if scope["method"] not in SAFE_METHODS and Headers(scope=scope).get("origin", "").strip():
            raise ApiError(
                403,
                "browser_origin_rejected",
                "Requests from web pages are refused: this API is for local programs.",
            )

    def _check_length(self, scope: Scope) -> None:
        length = Headers(scope=scope).get("content-length", "").lstrip("0")
        # Twenty digits and more are past any limit (and past what int() reads quickly).
        if length.isdigit() and (len(length) >= 20 or int(length) > self.max_body):
            raise _too_large(self.max_body)

    async def _admit(self, scope: Scope) -> Principal | None:
        """Whom the request comes from, once its token is checked; None on an open route."""
        method = scope["method"]
        path = scope["path"]
        if (
            (path in self.open_paths and method in ("GET", "HEAD"))
            or (path in SIGNED_PATHS and method == "POST")
            or (path in VERIFIED_PATHS and method == "GET")
        ):
            return None
        presented = bearer(Headers(scope=scope).get("authorization"))
        if matches(presented, self.token):
            return OWNER
        principal = await run_in_threadpool(self.tokens, presented) if presented else None
        if principal is None:
            raise ApiError(
                401,
                "unauthorized",
                "Send the daemon's token as 'Authorization: Bearer <token>' (it is in "
                "<vault>/.memvault/token), or a named token from memvault tokens create.",
                headers={"WWW-Authenticate": 'Bearer realm="memvault"'},
            )
        return principal


def _too_large(limit: int) -> ApiError:
    return ApiError(
        413,
        "payload_too_large",
        f"The request body is larger than the limit of {limit} bytes.",
        details={"limit_bytes": limit},
    )


class AccessLog:
    """One structured log record per request: method, path, status, duration."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        began = time.perf_counter()
        status = [500]

        async def recording_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                status[0] = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, recording_send)
        finally:
            client = scope.get("client")
            log.info(
                "request",
                extra={
                    "method": scope["method"],
                    "path": scope["path"],
                    "status": status[0],
                    "duration_ms": round((time.perf_counter() - began) * 1000, 2),
                    "client": f"{client[0]}:{client[1]}" if client else None,
                },
            )
