"""The console's pages: server-rendered HTML, htmx, a strict Content-Security-Policy.

Every page but the sign-in exchange and the static files needs a live
session cookie (:mod:`memvault.console.signin`); without one a page answers
401 with a sentence saying how to sign in, and no data. Each page runs as the
principal its session holds (:mod:`memvault.acting`: a named token's agent,
what a read token may see), and an action checks that principal's scope, so
a console opened with a read token only reads. A change is a POST that must
carry the session's CSRF token and come from the console's own origin.

No response has inline script or style: :data:`CSP` holds on every one, and
the pages' script (``static/console.js``) and htmx are files of the package.
htmx keeps no history in the browser's storage (``historyCacheSize`` 0): a
memory forgotten is not left behind in a page snapshot.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, quote

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from starlette.applications import Starlette
from starlette.datastructures import MutableHeaders
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from memvault.acting import acting_as
from memvault.channels.approvals import ALWAYS, APPROVE, DENY, HASH_SHOWN, Reply
from memvault.console import views
from memvault.console.signin import ConsoleSession, SignIns
from memvault.errors import MemvaultError
from memvault.gateway.daemon import Daemon
from memvault.gateway.routes.memory import visible
from memvault.gateway.tokens import Scope as TokenScope
from memvault.privacy.reads import reading
from memvault.text import check_text
from memvault.tools.policy import ONCE

log = logging.getLogger(__name__)

CSP = (
    "default-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'; "
    "object-src 'none'"
)
SECURITY_HEADERS = {
    "content-security-policy": CSP,
    "x-content-type-options": "nosniff",
    "referrer-policy": "same-origin",  # "no-referrer" makes a form's Origin "null"
    "x-frame-options": "DENY",
    "cross-origin-opener-policy": "same-origin",
}
CSRF_HEADER = "x-csrf-token"
CSRF_FIELD = "csrf"
SIGN_IN_HINT = "Run `memvault ui` in a terminal for a sign-in link."
# A form of the console is a few fields; anything longer is not one of its forms.
_MAX_FORM = 16 * 1024


class PageRefusedError(Exception):
    """A page refused: its status and the one sentence shown."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class SecurityHeaders:
    """Puts :data:`SECURITY_HEADERS` on every response of the console (static files too)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def headed(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in SECURITY_HEADERS.items():
                    headers[name] = value
                if not scope["path"].startswith("/static/"):
                    headers["cache-control"] = "no-store"
            await send(message)

        await self.app(scope, receive, headed)


@dataclass(frozen=True)
class Visit:
    """A signed-in request: its session and its cookie."""

    session: ConsoleSession
    cookie: str

    @property
    def can_write(self) -> bool:
        """Whether the session's scope may change memories."""
        return self.session.principal.allows(TokenScope.WRITE)

    @property
    def is_admin(self) -> bool:
        """Whether the session's scope is the owner's (health, approvals)."""
        return self.session.principal.allows(TokenScope.ADMIN)


class Console:
    """The console of one daemon: its sign-ins and its pages."""

    def __init__(self, daemon: Daemon, signins: SignIns) -> None:
        self.daemon = daemon
        self.signins = signins
        self.health = views.Health(daemon)
        self.env = Environment(
            loader=PackageLoader("memvault.console", "templates"),
            autoescape=select_autoescape(default=True),
            undefined=StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
        )
        self.env.filters["tojson_pretty"] = lambda v: json.dumps(v, indent=2, ensure_ascii=False)
        self.env.filters["when"] = lambda v: (v or "")[:16].replace("T", " ")

    @property
    def cookie_name(self) -> str:
        """The session cookie's name: per port, as cookies are shared across a host's ports."""
        return f"memvault_console_{self.daemon.port}"

    def app(self, more: Sequence[BaseRoute] = ()) -> ASGIApp:
        """The pages as one ASGI app (with ``more`` pages' routes)."""
        routes = [
            Route("/", self.today_page),
            Route("/feed", self.feed),
            Route("/memories", self.memories_page),
            Route("/memories/{memory_id}", self.memory_page),
            Route("/memories/{memory_id}/forget", self.forget, methods=["GET", "POST"]),
            Route("/approvals", self.approvals_page),
            Route("/approvals/{short_id}", self.decide, methods=["POST"]),
            Route("/signin", self.sign_in),
            Route("/signout", self.sign_out, methods=["POST"]),
            *more,
            Mount("/static", StaticFiles(packages=[("memvault.console", "static")])),
        ]
        pages = Starlette(
            routes=routes, exception_handlers={404: self._not_found, Exception: self._failed}
        )
        return SecurityHeaders(pages)

    # -- rendering and checks ----------------------------------------------------------

    def render(
        self, name: str, visit: Visit | None, status: int = 200, **context: Any
    ) -> HTMLResponse:
        """A template as a page (or a fragment), with what every page needs."""
        template = self.env.get_template(name)
        context.setdefault("page", "")
        html = template.render(
            visit=visit,
            csrf=visit.session.csrf if visit else "",
            vault=self.daemon.runtime.vault.root.name,
            **context,
        )
        return HTMLResponse(html, status_code=status)

    def refused(
        self,
        refusal: PageRefusedError,
        visit: Visit | None = None,
        request: Request | None = None,
    ) -> HTMLResponse:
        """The page of a refusal: one sentence; alone, for htmx asking for a part of a page."""
        if request is not None and is_fragment(request):
            return self.render("message_inline.html", None, refusal.status, message=refusal.message)
        return self.render("message.html", visit, refusal.status, message=refusal.message)

    async def _not_found(self, request: Request, exc: Exception) -> Response:
        return self.refused(PageRefusedError(404, "There is no such page in the console."))

    async def _failed(self, request: Request, exc: Exception) -> Response:
        log.error("a console page failed", exc_info=exc, extra={"path": request.url.path})
        return self.refused(PageRefusedError(500, "This page failed; the daemon's log says why."))

    def visit(self, request: Request) -> Visit:
        """The request's live session; :class:`PageRefusedError` (401) without one."""
        cookie = request.cookies.get(self.cookie_name, "")
        session = self.signins.session(cookie)
        if session is None:
            raise PageRefusedError(
                401, f"You are not signed in (or your session ended). {SIGN_IN_HINT}"
            )
        principal = session.principal
        if not principal.owner and not self._token_alive(principal.name):
            self.signins.end(cookie)
            raise PageRefusedError(
                401, f"The token this console was opened with was revoked. {SIGN_IN_HINT}"
            )
        return Visit(session, cookie)

    def _token_alive(self, name: str | None) -> bool:
        return any(t.name == name and t.active for t in self.daemon.tokens.list())

    @staticmethod
    def needs(visit: Visit, scope: TokenScope) -> None:
        """Refuse (403) what the session's scope does not cover."""
        refusal = visit.session.principal.refusal(scope)
        if refusal is not None:
            raise PageRefusedError(403, refusal)

    async def changing(self, request: Request, visit: Visit) -> dict[str, str]:
        """A change's form fields, once it came from this console: the same origin, and
        the session's CSRF token (as the header htmx sends or a form field)."""
        origin = request.headers.get("origin", "").strip().lower()
        host = request.headers.get("host", "").strip().lower()
        if origin != f"{request.url.scheme}://{host}":
            raise PageRefusedError(403, "This change did not come from a page of this console.")
        body = await request.body()
        if len(body) > _MAX_FORM:
            raise PageRefusedError(413, "That form is larger than any form of the console.")
        fields = {k: v[0] for k, v in parse_qs(body.decode("utf-8", "replace")).items()}
        if not visit.session.csrf_matches(
            request.headers.get(CSRF_HEADER) or fields.get(CSRF_FIELD)
        ):
            raise PageRefusedError(
                403, "This form is stale or was not made by the console; reload the page."
            )
        return fields

    @staticmethod
    def plain(value: str, name: str) -> None:
        """Refuse (400) text memvault cannot keep (:mod:`memvault.text`), naming the field."""
        try:
            check_text(value, name)
        except MemvaultError as exc:
            raise PageRefusedError(400, exc.message) from exc

    @contextlib.contextmanager
    def acting(self, visit: Visit) -> Iterator[None]:
        """Run the block as the session's principal, its reads recorded as the console's."""
        with acting_as(visit.session.principal.actor), reading(surface="console"):
            yield

    async def show(
        self, request: Request, template: str, page: str, work: Any, *args: Any
    ) -> Response:
        """A page that only reads: the visit checked, ``work(*args)`` run as its principal,
        the dict it returns rendered with ``template``; a refusal as its one sentence."""
        try:
            visit = self.visit(request)
            data = await self.run(visit, work, *args)
        except PageRefusedError as refusal:
            return self.refused(refusal)
        return self.render(template, visit, page=page, **data)

    async def run(self, visit: Visit, work: Any, *args: Any) -> Any:
        """``work(*args)`` in a worker thread, as the session's principal; a memvault error
        becomes a :class:`PageRefusedError` with its sentence."""

        def acted() -> Any:
            with self.acting(visit):
                return work(*args)

        try:
            return await asyncio.to_thread(acted)
        except MemvaultError as exc:
            raise PageRefusedError(
                exc.http_status if exc.http_status < 500 else 503, exc.message
            ) from exc

    # -- pages -------------------------------------------------------------------------

    async def today_page(self, request: Request) -> Response:
        """Today: health, counts, what waits, what is down, the live feed; htmx's request
        (an event arrived, or a minute passed) gets the cards alone."""
        try:
            visit = self.visit(request)
            data = await self.run(
                visit,
                lambda: views.today(
                    self.daemon,
                    self.health if visit.is_admin else None,
                    approvals=visit.is_admin,
                ),
            )
        except PageRefusedError as refusal:
            return self.refused(refusal)
        template = "today_cards.html" if is_fragment(request) else "today.html"
        return self.render(template, visit, today=data, page="today")

    async def feed(self, request: Request) -> Response:
        """The live feed: the bus's events after ``since``, as Server-Sent Events."""
        try:
            visit = self.visit(request)
        except PageRefusedError as refusal:
            return self.refused(refusal)
        # A reconnecting EventSource names the last event it had; a first one, the page's.
        given = request.headers.get("last-event-id") or request.query_params.get("since", "")
        since = int(given) if given.isdigit() and len(given) < 19 else self.daemon.bus.last_id
        bus = self.daemon.bus
        loop = asyncio.get_running_loop()
        heartbeat = self.daemon.runtime.settings.server.sse_heartbeat_seconds
        signins = self.signins

        async def stream() -> AsyncIterator[str]:
            with bus.subscribe(loop) as subscription:
                yield "retry: 2000\n: memvault console feed\n\n"
                for event in bus.since(since):
                    yield _frame(views.feed_item(event))
                sent = bus.last_id
                while True:
                    try:
                        latest = await asyncio.wait_for(subscription.queue.get(), heartbeat)
                    except TimeoutError:
                        if signins.session(visit.cookie) is None:
                            return  # signed out or revoked: the stream ends with it
                        yield ": still here\n\n"
                        continue
                    if latest is None or signins.session(visit.cookie) is None:
                        return
                    if latest.id > sent:
                        sent = latest.id
                        yield _frame(views.feed_item(latest))

        return StreamingResponse(
            stream(),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )

    async def memories_page(self, request: Request) -> Response:
        """Memories: the search form and its results (only the results for htmx)."""
        try:
            visit = self.visit(request)
            params = request.query_params
            for name, value in params.multi_items():
                self.plain(value, name)
            filters = views.Filters(
                q=params.get("q", "").strip()[:500],
                kind=params.get("kind", "memory")
                if params.get("kind") in views.KIND_CHOICES
                else "memory",
                category=params.get("category", "").strip()[:40],
                tag=params.get("tag", "").strip().lstrip("#")[:80],
                source=params.get("source", "").strip()[:80],
                since=params.get("since", "").strip()[:10],
                until=params.get("until", "").strip()[:10],
                trust=params.get("trust", "") if params.get("trust") in views.TRUST_CHOICES else "",
            )
            hits: list[dict[str, Any]] = []
            listed: list[dict[str, Any]] = []
            notice = None
            if filters.q:
                hits, notice = await self.run(visit, views.search, self.daemon, filters)
            else:
                listed = await self.run(visit, views.recent, self.daemon, filters)
            fragment = is_fragment(request)
            sources = [] if fragment else await self.run(visit, views.sources, self.daemon)
        except PageRefusedError as refusal:
            return self.refused(refusal, request=request)
        template = "results.html" if is_fragment(request) else "memories.html"
        return self.render(
            template,
            visit,
            page="memories",
            filters=filters,
            hits=hits,
            listed=listed,
            notice=notice,
            kinds=views.KIND_CHOICES,
            categories=views.CATEGORY_CHOICES,
            trusts=views.TRUST_CHOICES,
            sources=sources,
            forgotten=params.get("forgotten", "")[:40],
            said=params.get("said", "")[:300],
        )

    async def memory_page(self, request: Request) -> Response:
        """One memory: its text, source, Obsidian link, changes and reads."""
        memory_id = request.path_params["memory_id"]
        return await self.show(
            request, "memory.html", "memories", views.memory, self.daemon, memory_id
        )

    async def forget(self, request: Request) -> Response:
        """Forget a memory: GET asks to confirm, POST forgets it everywhere."""
        memory_id = request.path_params["memory_id"]
        visit: Visit | None = None
        try:
            visit = self.visit(request)
            self.needs(visit, TokenScope.WRITE)
            if request.method == "GET":
                data = await self.run(visit, views.memory, self.daemon, memory_id)
                return self.render("forget.html", visit, page="memories", **data)
            await self.changing(request, visit)
            receipt = await self.run(visit, self._forget, memory_id)
        except PageRefusedError as refusal:
            return self.refused(refusal, visit)
        log.info("memory forgotten from the console", extra={"memory_id": memory_id})
        return RedirectResponse(f"/memories?forgotten={quote(receipt, safe='')}", status_code=303)

    def _forget(self, memory_id: str) -> str:
        found = visible(self.daemon, memory_id)
        receipt = self.daemon.runtime.forgetter.forget(found.id)
        (forgotten,) = receipt.forgotten
        return forgotten.id

    async def approvals_page(self, request: Request) -> Response:
        """The tool calls waiting for the owner and those decided (the owner's scope only);
        for htmx, only the lists: the page's script asks for them again when the live
        feed says a call was asked or decided (on the phone, here, or by the timeout)."""
        visit: Visit | None = None
        try:
            visit = self.visit(request)
            self.needs(visit, TokenScope.ADMIN)
            # Read before the lists: an event in between is replayed, never missed.
            last_event = self.daemon.bus.last_id
            waiting = await self.run(visit, views.approvals, self.daemon)
            history = await self.run(visit, views.approval_history, self.daemon)
        except PageRefusedError as refusal:
            return self.refused(refusal, visit, request)
        template = "approvals_lists.html" if is_fragment(request) else "approvals.html"
        return self.render(
            template,
            visit,
            page="approvals",
            waiting=waiting,
            history=history,
            said=request.query_params.get("said", "")[:300],
            last_event=last_event,
        )

    async def decide(self, request: Request) -> Response:
        """Approve once, approve always (a tier-2 call's category, for the rest of its
        session, as the phone's Always button does) or deny a waiting call, by the path the
        phone's buttons take (bound to the call's hash, so a stale page never approves
        another call)."""
        visit: Visit | None = None
        try:
            visit = self.visit(request)
            self.needs(visit, TokenScope.ADMIN)
            fields = await self.changing(request, visit)
            decision = fields.get("decision")
            call = fields.get("hash", "")
            if decision not in (APPROVE, ALWAYS, DENY) or len(call) < HASH_SHOWN:
                raise PageRefusedError(400, "Choose approve or deny on the call's own row.")
            short_id = request.path_params["short_id"]
            if decision == ALWAYS:
                reply = Reply(APPROVE, short_id, ALWAYS, call)
            else:
                reply = Reply(decision, short_id, ONCE, call)
            said = await self.run(
                visit, lambda: self.daemon.hub.approvals.resolve(reply, by="console")
            )
        except PageRefusedError as refusal:
            return self.refused(refusal, visit)
        return RedirectResponse(f"/approvals?said={quote(said, safe='')}", status_code=303)

    # -- signing in and out ------------------------------------------------------------

    async def sign_in(self, request: Request) -> Response:
        """Trade a one-time code for a session cookie, then show Today (the code leaves the
        address bar)."""
        code = request.query_params.get("code", "")
        try:
            cookie, session = self.signins.exchange(code[:200])
        except MemvaultError as exc:
            return self.refused(PageRefusedError(403, exc.message))
        response = RedirectResponse("/", status_code=303)
        response.set_cookie(
            self.cookie_name,
            cookie,
            max_age=int(self.signins.session_seconds),
            path="/",
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
        )
        who = session.principal.name or "owner"
        log.info("console signed in", extra={"token": who})
        return response

    async def sign_out(self, request: Request) -> Response:
        """End this browser's session."""
        try:
            visit = self.visit(request)
            await self.changing(request, visit)
        except PageRefusedError as refusal:
            return self.refused(refusal)
        self.signins.end(visit.cookie)
        response = self.render("message.html", None, message=f"Signed out. {SIGN_IN_HINT}")
        response.delete_cookie(self.cookie_name, path="/")
        return response


def is_fragment(request: Request) -> bool:
    """Whether htmx asks for a part of the page (a history restore wants the whole page)."""
    headers = request.headers
    return bool(headers.get("hx-request")) and not headers.get("hx-history-restore-request")


def _frame(item: views.FeedItem) -> str:
    data = json.dumps(item.to_dict(), ensure_ascii=False, separators=(",", ":"))
    return f"id: {item.id}\ndata: {data}\n\n"
