"""The "Why did it say that" page: each agent run, newest first, and what one was given.

A run's page shows its record (:mod:`memvault.memory.runs`): where it came from, the
context it was given section by section (the lines shown, and those the token budget
left out), the memories and notes its context's search recalled with their scores
(each memory linking to its page), its tool calls with their arguments and results,
the model and its tokens. The list filters by session and by channel; a session's
transcript links each turn to its run (:mod:`memvault.console.sessions_page`).

Any scope may look, as at the sessions; a console confined to an agent sees that
agent's runs only. Everything shown is data (a channel's words included): the
templates escape it.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from memvault.acting import sees
from memvault.console.pages import Console, PageRefusedError
from memvault.errors import NotFoundError
from memvault.gateway.daemon import Daemon
from memvault.memory.runs import RunRecord

RUNS_SHOWN = 50
_MAX_FILTER = 200


def listed(daemon: Daemon, session_id: int | None, channel: str) -> dict[str, Any]:
    """The newest runs (of one session, or one channel), and the channels to filter by."""
    runs = daemon.runtime.runs
    found = runs.list(session_id=session_id, channel=channel or None, limit=RUNS_SHOWN)
    return {
        "runs": [local(daemon, r) for r in found if sees(r.agent)],
        "channels": runs.channels(),
        "keep_days": runs.keep_days,
    }


def shown(daemon: Daemon, run_id: int) -> dict[str, Any]:
    """One run's record."""
    record = daemon.runtime.runs.get(run_id)
    if not sees(record.agent):
        raise NotFoundError(f"There is no agent run {run_id} (or it is older than kept).")
    return {"run": local(daemon, record)}


def local(daemon: Daemon, record: RunRecord) -> dict[str, Any]:
    """A record as a page shows it: its times in the owner's timezone."""
    shown = record.to_dict()
    localize = daemon.runtime.clock.localize
    shown["started_at"] = localize(record.started_at).isoformat(timespec="seconds")
    if record.finished_at is not None:
        shown["finished_at"] = localize(record.finished_at).isoformat(timespec="seconds")
    return shown


class RunsPage:
    """The runs page's routes, on a console."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.daemon = console.daemon

    def routes(self) -> list[BaseRoute]:
        """``/runs`` and a run's page."""
        return [
            Route("/runs", self.runs_page),
            Route("/runs/{run_id:int}", self.run_page),
        ]

    async def runs_page(self, request: Request) -> Response:
        """The newest runs, filtered by ``session`` (its id) or ``channel``."""
        console = self.console
        params = request.query_params
        given = params.get("session", "").strip()
        channel = params.get("channel", "").strip()[:_MAX_FILTER]
        try:
            visit = console.visit(request)
            console.plain(channel, "channel")
            if given and not (given.isdigit() and len(given) < 19):
                raise PageRefusedError(400, "A session is chosen by its number.")
            session_id = int(given) if given else None
            data = await console.run(visit, listed, self.daemon, session_id, channel)
        except PageRefusedError as refusal:
            return console.refused(refusal)
        return console.render(
            "runs.html", visit, page="runs", session=session_id, channel=channel, **data
        )

    async def run_page(self, request: Request) -> Response:
        """One run: what it was given, what it recalled, what it called."""
        run_id = request.path_params["run_id"]
        return await self.console.show(request, "run.html", "runs", shown, self.daemon, run_id)
