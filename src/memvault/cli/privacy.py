"""``memvault privacy scan [--redact] | undo [RUN_ID]``: secrets already in the vault.

What comes in is screened as it is stored (``[privacy] secrets``); what a
person typed into a note, or stored before, is only listed here, and
replaced by markers when the owner says so (``--redact``, after showing what
will change). A redaction is a run recorded in state.db's ``job_runs`` (job
``privacy_redact``) with the job engine's undo store, so ``memvault privacy
undo`` (or ``memvault jobs undo RUN_ID``) puts the files back, and refuses,
naming the file, when one was edited since.

Both work on the vault in this process, also while a daemon serves it: the
files are locked as any writer locks them, and the daemon's watcher re-indexes
what changed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from memvault.cli.common import (
    JsonOption,
    VaultOption,
    emit_json,
    group,
    open_runtime,
    say,
    stdout,
    table,
)
from memvault.cli.progress import QuietOption, progress
from memvault.errors import ConflictError, InvalidInputError, MemvaultError, NotFoundError
from memvault.vocabulary import counted

if TYPE_CHECKING:
    from memvault.jobs.engine import JobEngine
    from memvault.privacy.scanning import Found
    from memvault.runtime import Runtime

app = group("Privacy: secrets already in the vault (scan, redact, undo).")

REDACT_JOB = "privacy_redact"
# More notes than this get a progress bar while they are scanned (when stderr is a terminal).
_PROGRESS_AFTER = 200


def _scan(runtime: Runtime, *, quiet: bool) -> list[Found]:
    from memvault.privacy.scanning import scan_vault

    with progress("Scanning notes", quiet=quiet, after=_PROGRESS_AFTER) as update:
        return scan_vault(runtime.vault, runtime.memories, progress=update)


def _show(found: list[Found]) -> None:
    rows = [[f.path, f.line, f.kind, f.memory or "", f.preview] for f in found]
    files = len({f.path for f in found})
    title = f"{counted(len(found), 'secret')} in {counted(files, 'file')}"
    stdout.print(table(title, ["Path", "Line", "Kind", "Memory", "Preview"], rows))


def _engine(runtime: Runtime) -> JobEngine:
    """A job engine with the one job a redaction is recorded as (never scheduled)."""
    from memvault.jobs.engine import Job, JobEngine
    from memvault.jobs.schedule import Schedule

    job = Job(
        REDACT_JOB,
        Schedule(every_seconds=86_400),
        run=lambda context: None,  # each redaction brings its own run (see _redact)
        enabled=False,
        description="Secrets already in the vault replaced by markers (memvault privacy scan)",
    )
    return JobEngine(runtime.state, runtime.clock, [job], runtime=runtime)


def _redact(runtime: Runtime, found: list[Found]) -> dict[str, Any]:
    """Replace what was listed, as one recorded run; its id and what it changed."""
    from dataclasses import replace

    from memvault.jobs.engine import JobContext
    from memvault.privacy.scanning import redact_found

    engine = _engine(runtime)
    changed: list[tuple[str, int]] = []

    def run(context: JobContext) -> str:
        changed.extend(redact_found(runtime.vault, found, context.will_change))
        replaced = sum(count for _, count in changed)
        files = counted(len(changed), "file")
        return f"Replaced {counted(replaced, 'secret')} by markers in {files}."

    engine.add(replace(engine.job(REDACT_JOB), run=run))
    record = engine.run_now(REDACT_JOB)
    if record.status == "failed":
        raise MemvaultError(f"The secrets were not all replaced: {record.error}")
    return {
        "run_id": record.id,
        "redacted": [{"path": path, "count": count} for path, count in changed],
    }


@app.command("scan")
def scan(
    ctx: typer.Context,
    redact: Annotated[
        bool,
        typer.Option(
            "--redact",
            help="Replace the secrets listed by markers (asks first; undo with `privacy undo`).",
        ),
    ] = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Redact without asking.")] = False,
    quiet: QuietOption = False,
    vault: VaultOption = None,
    as_json: JsonOption = False,
) -> None:
    """List the secrets (keys, tokens, passwords, card numbers) in the vault's notes and
    memories: path, line, kind and a masked preview, never the secret itself."""
    runtime = open_runtime(ctx, vault)
    found = _scan(runtime, quiet=as_json or quiet)
    report: dict[str, Any] = {"found": [f.to_dict() for f in found]}
    if not as_json:
        if not found:
            say("No secrets found in the vault's notes and memories.")
            return
        _show(found)
    if not redact:
        if as_json:
            emit_json(report)
        else:
            say(
                "Nothing was changed. `memvault privacy scan --redact` replaces them by "
                "markers (and `memvault privacy undo` puts them back)."
            )
        return
    if found:
        files = len({f.path for f in found})
        question = (
            f"Replace {counted(len(found), 'secret')} in {counted(files, 'file')} by "
            "markers such as [secret removed: AWS key]?"
        )
        if not yes and not typer.confirm(question, default=False, err=True):
            raise typer.Exit(1)
        report.update(_redact(runtime, found))
    else:
        report.update({"run_id": None, "redacted": []})
    if as_json:
        emit_json(report)
        return
    replaced = sum(item["count"] for item in report["redacted"])
    if not replaced:
        say("Nothing was replaced: the files changed since the scan.")
        return
    where = counted(len(report["redacted"]), "file")
    say(
        f"Replaced {counted(replaced, 'secret')} in {where}; "
        f"`memvault privacy undo {report['run_id']}` puts them back."
    )


@app.command("undo")
def undo(
    ctx: typer.Context,
    run_id: Annotated[
        int | None,
        typer.Argument(metavar="[RUN_ID]", help="The redaction to undo (default: the latest)."),
    ] = None,
    vault: VaultOption = None,
    as_json: JsonOption = False,
) -> None:
    """Put back the files a `privacy scan --redact` changed (not if one was edited since)."""
    runtime = open_runtime(ctx, vault)
    engine = _engine(runtime)
    if run_id is None:
        run_id = _latest(engine)
    record = engine.run_record(run_id)
    if record.job != REDACT_JOB:
        raise InvalidInputError(
            f"Run {run_id} is a run of {record.job}, not a redaction; "
            f"`memvault jobs undo {run_id}` undoes it."
        )
    restored = engine.undo(run_id)
    if as_json:
        emit_json({"run_id": run_id, "restored": restored})
        return
    say(f"Redaction {run_id} undone: restored {', '.join(restored)}.")


def _latest(engine: JobEngine) -> int:
    """The newest redaction not undone yet."""
    for record in engine.history(REDACT_JOB, limit=50):
        if record.metadata.get("changes") and not record.metadata.get("undone"):
            return record.id
    if engine.history(REDACT_JOB, limit=1):
        raise ConflictError("Every redaction was undone already; there is nothing to undo.")
    raise NotFoundError("No redaction to undo: `memvault privacy scan --redact` makes one.")
