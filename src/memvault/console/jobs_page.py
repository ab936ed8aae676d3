"""The Jobs page: each job's schedule, last and next run; run one now; what each run
changed, file by file, and undo.

A run started here takes the path ``memvault jobs run`` and ``POST
/v1/jobs/{name}/run`` take (:meth:`~memvault.jobs.engine.JobEngine.trigger`), and
an undo the engine's own :meth:`~memvault.jobs.engine.JobEngine.undo`, which
refuses, changing nothing, when a file was edited since the run: the page shows
its sentence. Both are the owner's (the admin scope, as on the API); any scope
may look.

A run's diff is each file as the run found it (the copy the engine keeps for
undo) against the file now, shown only while the file still holds what the run
left; once edited since, or undone, the page says so instead.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from memvault.console.pages import Console, PageRefusedError, Visit, is_fragment
from memvault.gateway.daemon import Daemon
from memvault.gateway.tokens import Scope as TokenScope
from memvault.jobs import changes

RUNS_SHOWN = 20
# A diff longer than this is cut (a run may rewrite a long note); the page says by how much.
DIFF_LINES = 400
_MAX_NAME = 100


@dataclass(frozen=True)
class FileDiff:
    """One file a run changed, as the page shows it."""

    path: str
    state: str  # "changed", "made", "deleted", "same", "edited", "undone", "gone"
    lines: list[tuple[str, str]]  # (kind: add, del, hunk, same; the line)
    cut: int = 0  # lines left out


def overview(daemon: Daemon) -> dict[str, Any]:
    """Every job as ``memvault jobs list`` shows it, and the newest runs of all."""
    return {
        "jobs": daemon.jobs.overview(),
        "runs": [r.as_dict() for r in daemon.jobs.history(None, RUNS_SHOWN)],
    }


def run_details(daemon: Daemon, run_id: int) -> dict[str, Any]:
    """One run: its record, each file's diff, and whether undo is offered."""
    run = daemon.jobs.run_record(run_id)
    listed = run.metadata.get("changes", [])
    undone = run.metadata.get("undone")
    files = (
        [FileDiff(c["path"], "undone", []) for c in listed]
        if undone
        else [diff_of(v) for v in changes.versions(daemon.runtime.vault, run_id, listed)]
    )
    return {
        "run": run.as_dict(),
        "files": files,
        "undone": undone,
        "undoable": bool(listed) and not undone and run.status != "running",
    }


def diff_of(found: changes.FileVersions) -> FileDiff:
    """What the run did to one file, if the file still shows it."""
    if not found.as_left:
        return FileDiff(found.path, "edited", [])
    if not found.kept:
        return FileDiff(found.path, "gone", [])
    if found.before == found.now:
        return FileDiff(found.path, "same", [])
    state = "made" if found.before is None else "deleted" if found.now is None else "changed"
    lines: list[tuple[str, str]] = []
    for line in difflib.unified_diff(
        _lines(found.before), _lines(found.now), "before the run", "after it", n=2, lineterm=""
    ):
        if line.startswith(("---", "+++")):
            continue
        kind = {"+": "add", "-": "del", "@": "hunk"}.get(line[:1], "same")
        lines.append((kind, line))
    return FileDiff(found.path, state, lines[:DIFF_LINES], max(len(lines) - DIFF_LINES, 0))


def _lines(data: bytes | None) -> list[str]:
    return [] if data is None else data.decode("utf-8", "replace").splitlines()


class JobsPage:
    """The Jobs page's routes, on a console."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.daemon = console.daemon

    def routes(self) -> list[BaseRoute]:
        """``/jobs``, a run's page, run now and undo."""
        return [
            Route("/jobs", self.jobs_page),
            Route("/jobs/runs/{run_id:int}", self.run_page),
            Route("/jobs/runs/{run_id:int}/undo", self.undo, methods=["POST"]),
            Route("/jobs/{name}/run", self.run_now, methods=["POST"]),
        ]

    async def jobs_page(self, request: Request) -> Response:
        """Every job and the newest runs."""
        return await self.console.show(request, "jobs.html", "jobs", overview, self.daemon)

    async def run_page(self, request: Request) -> Response:
        """One run; while it runs, htmx asks again for its part until it has ended."""
        console = self.console
        try:
            visit = console.visit(request)
            shown = await self._run_shown(visit, request.path_params["run_id"])
        except PageRefusedError as refusal:
            return console.refused(refusal)
        template = "job_run_body.html" if is_fragment(request) else "job_run.html"
        return console.render(template, visit, page="jobs", refusal=None, **shown)

    async def run_now(self, request: Request) -> Response:
        """Start a run of a job now, as ``memvault jobs run`` does; show its page."""
        console = self.console
        visit: Visit | None = None
        try:
            visit = console.visit(request)
            console.needs(visit, TokenScope.ADMIN)
            await console.changing(request, visit)
            name = request.path_params["name"][:_MAX_NAME]
            console.plain(name, "job")
            run_id = await console.run(visit, self.daemon.jobs.trigger, name)
        except PageRefusedError as refusal:
            return console.refused(refusal, visit)
        return RedirectResponse(f"/jobs/runs/{run_id}", status_code=303)

    async def undo(self, request: Request) -> Response:
        """Put back the files a run changed; a refusal is shown on the run's page."""
        console = self.console
        run_id = request.path_params["run_id"]
        visit: Visit | None = None
        try:
            visit = console.visit(request)
            console.needs(visit, TokenScope.ADMIN)
            await console.changing(request, visit)
            try:
                await console.run(visit, self.daemon.jobs.undo, run_id)
            except PageRefusedError as refused:
                if refused.status != 409:
                    raise
                shown = await self._run_shown(visit, run_id)
                return console.render(
                    "job_run.html", visit, 409, page="jobs", refusal=refused.message, **shown
                )
        except PageRefusedError as refusal:
            return console.refused(refusal, visit)
        return RedirectResponse(f"/jobs/runs/{run_id}", status_code=303)

    async def _run_shown(self, visit: Visit, run_id: int) -> dict[str, Any]:
        shown: dict[str, Any] = await self.console.run(visit, run_details, self.daemon, run_id)
        return shown
