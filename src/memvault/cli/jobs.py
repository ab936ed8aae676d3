"""``memvault jobs list | run NAME | history [NAME] | undo RUN_ID``.

With a daemon serving the vault every command goes through it (a run then
shares its scheduler's one-at-a-time rule and its channels); without one,
``run`` runs the job in this process, messaging the owner from here, and
the others read and write state.db and the vault directly.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from memvault.cli.common import (
    DirectOption,
    JsonOption,
    VaultOption,
    emit_json,
    emit_raw,
    group,
    minute,
    open_runtime,
    say,
    stdout,
    table,
    via_daemon,
)
from memvault.cli.progress import QuietOption, spinner
from memvault.errors import MemvaultError
from memvault.vocabulary import counted

if TYPE_CHECKING:
    from memvault.jobs import JobEngine

app = group("Scheduled jobs: daily note, MEMORY.md, archival, heartbeat, reminders.")

JobName = Annotated[str, typer.Argument(metavar="NAME", help="The job, e.g. daily_note.")]
_POLL = 0.2


def _engine(ctx: typer.Context, vault: Path | None) -> JobEngine:
    """An engine in this process; its messages to the owner leave from here."""
    import memvault.channels.hub  # noqa: F401 - makes the channels' error classes known
    from memvault.channels.hub import Hub
    from memvault.channels.owner import tell_owner
    from memvault.jobs.catalog import make_engine
    from memvault.llm.factory import optional_provider

    runtime = open_runtime(ctx, vault)
    hubs: list[Hub] = []

    def notify(text: str, channel: str | None) -> dict[str, Any]:
        if not hubs:
            hubs.append(Hub(runtime))
        return tell_owner(hubs[0], text, channel)

    return make_engine(
        runtime, provider=optional_provider(runtime.settings.llm, "jobs"), notify=notify
    )


@app.command("list")
def list_jobs(
    ctx: typer.Context,
    direct: DirectOption = False,
    vault: VaultOption = None,
    as_json: JsonOption = False,
) -> None:
    """List the jobs: on or off, schedule, last run and next run."""
    jobs = via_daemon(ctx, vault, "GET", "/v1/jobs")
    if jobs is None:
        jobs = _engine(ctx, vault).overview()
    if as_json:
        emit_json(jobs)
        return
    rows = []
    for job in jobs:
        last = job["last_run"]
        rows.append(
            [
                job["name"],
                "on" if job["enabled"] else "off",
                job["schedule"],
                f"{last['status']} {minute(last['started'])}" if last else "never",
                minute(job["next_run"]) or "-",
                job["description"],
            ]
        )
    stdout.print(
        table(
            counted(len(rows), "job"),
            ["Job", "On", "Schedule", "Last run", "Next run", "What it does"],
            rows,
        )
    )
    for job in jobs:
        if job["failures_in_a_row"]:
            error = job["last_run"]["error"] if job["last_run"] else ""
            say(f"{job['name']} failed {job['failures_in_a_row']} time(s) in a row: {error}")


def _show_run(run: dict[str, Any]) -> None:
    changed = [c["path"] for c in run["metadata"].get("changes", [])]
    say(f"Run {run['id']} of {run['job']}: {run['status']}.")
    if run["output"]:
        emit_raw(run["output"])
    if run["error"]:
        say(run["error"])
    if changed:
        say(f"Changed {', '.join(changed)}; `memvault jobs undo {run['id']}` puts them back.")


@app.command("run")
def run(
    ctx: typer.Context,
    name: JobName,
    no_wait: Annotated[
        bool, typer.Option("--no-wait", help="With a daemon: start it and return at once.")
    ] = False,
    direct: DirectOption = False,
    quiet: QuietOption = False,
    vault: VaultOption = None,
    as_json: JsonOption = False,
) -> None:
    """Run a job now (even one that is off), through the daemon or in this process."""
    started = via_daemon(ctx, vault, "POST", f"/v1/jobs/{name}/run")
    if started is None:
        engine = _engine(ctx, vault)
        with spinner(f"Running {name}", quiet=as_json or quiet):
            record = engine.run_now(name).as_dict()
    elif no_wait:
        if as_json:
            emit_json(started)
        else:
            say(f"Started run {started['run_id']} of {name} in the daemon.")
        return
    else:
        with spinner(f"Running {name} in the daemon", quiet=as_json or quiet):
            record = _await_run(ctx, vault, started["run_id"])
    if as_json:
        emit_json(record)
    else:
        _show_run(record)
    if record["status"] == "failed":
        raise typer.Exit(1)


def _await_run(ctx: typer.Context, vault: Path | None, run_id: int) -> dict[str, Any]:
    """The daemon's record of a run, once it has finished."""
    while True:
        record: dict[str, Any] | None = via_daemon(ctx, vault, "GET", f"/v1/jobs/runs/{run_id}")
        if record is None:
            raise MemvaultError(
                f"The daemon went away during run {run_id}; `memvault jobs history` shows "
                "how it ended."
            )
        if record["status"] != "running":
            return record
        time.sleep(_POLL)


@app.command("history")
def history(
    ctx: typer.Context,
    name: Annotated[str | None, typer.Argument(metavar="[NAME]", help="Only this job.")] = None,
    limit: Annotated[int, typer.Option("--limit", "-n", min=1, max=1000)] = 20,
    direct: DirectOption = False,
    vault: VaultOption = None,
    as_json: JsonOption = False,
) -> None:
    """The latest runs, newest first."""
    path = f"/v1/jobs/{name}/runs" if name is not None else "/v1/jobs/runs"
    runs = via_daemon(ctx, vault, "GET", path, query={"limit": limit})
    if runs is None:
        runs = [r.as_dict() for r in _engine(ctx, vault).history(name, limit)]
    if as_json:
        emit_json(runs)
        return
    rows = [
        [
            r["id"],
            r["job"],
            r["status"],
            minute(r["started"]),
            len(r["metadata"].get("changes", [])) or "",
            (r["error"] or r["output"].splitlines()[-1] if r["output"] or r["error"] else "")[:80],
        ]
        for r in runs
    ]
    stdout.print(
        table(counted(len(rows), "run"), ["Run", "Job", "Status", "Started", "Files", "Said"], rows)
    )


@app.command("undo")
def undo(
    ctx: typer.Context,
    run_id: Annotated[int, typer.Argument(metavar="RUN_ID", help="The run, from history.")],
    direct: DirectOption = False,
    vault: VaultOption = None,
    as_json: JsonOption = False,
) -> None:
    """Put back the files a run changed (not if a person edited them since)."""
    done = via_daemon(ctx, vault, "POST", f"/v1/jobs/runs/{run_id}/undo")
    if done is None:
        done = {"run_id": run_id, "restored": _engine(ctx, vault).undo(run_id)}
    if as_json:
        emit_json(done)
        return
    say(f"Run {run_id} undone: restored {', '.join(done['restored'])}.")
