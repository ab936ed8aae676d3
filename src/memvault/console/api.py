"""The console's API routes: ``memvault ui`` asks here for a sign-in link, and ends every
console session. They sit behind the token like every ``/v1`` route
(:mod:`memvault.gateway.access` lists their scopes)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from memvault.console.signin import SignIns
from memvault.gateway.access import principal_of
from memvault.gateway.errors import ApiError
from memvault.gateway.routes import COMMON_ERRORS, errors
from memvault.gateway.schemas import Envelope, Result


class ConsoleLink(Result):
    """A one-time sign-in link."""

    url: str
    path: str
    expires_in_seconds: int
    scope: str


class ConsoleSessionsEnded(Result):
    """How many console sessions were ended."""

    ended: int


def console_router(signins: SignIns) -> APIRouter:
    """``POST /v1/console/links`` and ``DELETE /v1/console/sessions`` over ``signins``."""
    router = APIRouter(prefix="/v1/console", tags=["console"])

    @router.post("/links", response_model=Envelope[ConsoleLink], responses=errors(*COMMON_ERRORS))
    def create_link(request: Request) -> dict[str, Any]:
        """A one-time link signing a browser in to the console with this token's scope
        (``[console] link_minutes`` to use it; the bearer token never reaches the page)."""
        principal = principal_of(request)
        if principal is None:
            raise ApiError(401, "unauthorized", "Send a token to open the console.")
        link = signins.link(principal)
        path = f"/signin?code={link.code}"
        host = request.headers.get("host", "")
        return {
            "ok": True,
            "result": {
                "url": f"{request.url.scheme}://{host}{path}",
                "path": path,
                "expires_in_seconds": int(link.seconds),
                "scope": principal.scope.label,
            },
        }

    @router.delete(
        "/sessions",
        response_model=Envelope[ConsoleSessionsEnded],
        responses=errors(*COMMON_ERRORS),
    )
    def end_sessions() -> dict[str, Any]:
        """End every console session and every unused sign-in link."""
        return {"ok": True, "result": {"ended": signins.end_all()}}

    return router
