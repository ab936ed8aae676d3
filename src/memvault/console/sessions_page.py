"""The Sessions page: the conversations, the most recently active first, and one
conversation's transcript (what ``GET /v1/sessions`` and ``/v1/sessions/{key}`` give).

Any scope may look, as on the API. Each turn that asked the agent links to its run
(the "Why did it say that" page, :mod:`memvault.console.runs_page`) and marks the
memories its context recalled, with their scores: the runs' records
(:mod:`memvault.memory.runs`) are kept by session and turn.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from memvault.console.pages import Console, PageRefusedError
from memvault.gateway.daemon import Daemon

SESSIONS_SHOWN = 50
MESSAGES_SHOWN = 200


def listed(daemon: Daemon) -> list[dict[str, Any]]:
    """The newest sessions."""
    return [s.to_dict() for s in daemon.sessions.list(limit=SESSIONS_SHOWN)]


def transcript(daemon: Daemon, session_id: int) -> dict[str, Any]:
    """A session and its last messages, oldest first; the runs its turns asked for, by
    the message id that asked (each with the memories it recalled)."""
    session = daemon.sessions.find(session_id)
    messages = daemon.sessions.messages(session.id, limit=MESSAGES_SHOWN)
    since = messages[0].id if messages else 0
    runs = daemon.runtime.runs.of_session(session.id, since)
    return {
        "session": session.to_dict(),
        "messages": [m.to_dict() for m in messages],
        "runs": runs,
    }


class SessionsPage:
    """The Sessions page's routes, on a console."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.daemon = console.daemon

    def routes(self) -> list[BaseRoute]:
        """``/sessions`` and a session's transcript."""
        return [
            Route("/sessions", self.sessions_page),
            Route("/sessions/{session_id:int}", self.transcript_page),
        ]

    async def sessions_page(self, request: Request) -> Response:
        """The newest sessions."""
        console = self.console
        try:
            visit = console.visit(request)
            sessions = await console.run(visit, listed, self.daemon)
        except PageRefusedError as refusal:
            return console.refused(refusal)
        return console.render("sessions.html", visit, page="sessions", sessions=sessions)

    async def transcript_page(self, request: Request) -> Response:
        """One session's transcript."""
        console = self.console
        try:
            visit = console.visit(request)
            data = await console.run(
                visit, transcript, self.daemon, request.path_params["session_id"]
            )
        except PageRefusedError as refusal:
            return console.refused(refusal)
        return console.render("session.html", visit, page="sessions", **data, shown=MESSAGES_SHOWN)
