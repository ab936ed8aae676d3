"""``memvault import openclaw | memory-md | daily-logs | sessions | todo | learnings PATH``.

Brings an OpenClaw workspace's Markdown into the vault (``openclaw/importers.py``
says how each kind maps). It works on the vault directly; importing the same
files again adds nothing, and ``--dry-run`` writes nothing at all.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from memvault.cli.common import JsonOption, VaultOption, emit_json, group, open_runtime, say
from memvault.cli.progress import QuietOption, progress

if TYPE_CHECKING:
    from memvault.openclaw.importers import ImportReport, Progress
    from memvault.runtime import Runtime

app = group("Import memory from other tools: an OpenClaw workspace or its files.")

# More daily logs than this get a progress bar (when stderr is a terminal).
_PROGRESS_AFTER = 10

DryRunOption = Annotated[
    bool, typer.Option("--dry-run", help="Read and report what would be imported; write nothing.")
]


def _run(
    ctx: typer.Context,
    vault: Path | None,
    as_json: bool,
    work: Callable[[Runtime, Progress | None], ImportReport],
    quiet: bool,
) -> None:
    runtime = open_runtime(ctx, vault)
    with progress("Daily logs", quiet=as_json or quiet, after=_PROGRESS_AFTER) as update:
        report = work(runtime, update)
    if as_json:
        emit_json(report.to_dict())
        return
    say(report.summary())
    if report.secrets_removed:
        from memvault.privacy.secrets import notice_for

        say(str(notice_for(report.secrets_removed)))
    if report.missing:
        say(f"Not in the workspace (skipped): {', '.join(report.missing)}.")
    if report.imported and not report.dry_run:
        from memvault.openclaw.importers import EMBEDDINGS_NOTE

        say(EMBEDDINGS_NOTE)
    if report.problems:
        say(f"Problems ({len(report.problems)}):")
        for problem in report.problems:
            say(f"  - {problem}")


# name, the PATH argument's help, the command's help, the importer, whether it shows progress
_KINDS = (
    (
        "openclaw",
        "The workspace folder (~/.openclaw/workspace).",
        "Import a workspace: MEMORY.md, memory/*.md, TODO.md, LEARNINGS.md (those that exist) "
        "and, from the folder around it (~/.openclaw), the past conversations.",
        "import_workspace",
        True,
    ),
    (
        "memory-md",
        "A MEMORY.md file.",
        "Import MEMORY.md: bullets and paragraphs to memories, ## headings to categories.",
        "import_memory_md",
        False,
    ),
    (
        "daily-logs",
        "The memory/ folder of YYYY-MM-DD.md logs, or one log.",
        "Import daily logs: each day's lines to its journal and one ended session.",
        "import_daily_logs",
        True,
    ),
    (
        "sessions",
        "OpenClaw's state folder (~/.openclaw), which holds agents/.",
        "Import OpenClaw's past conversations: each session to a session, each message to "
        "a conversation memory.",
        "import_sessions",
        False,
    ),
    (
        "todo",
        "A TODO.md file.",
        "Import TODO.md: - [ ] and plain bullets to open tasks, - [x] to completed tasks.",
        "import_todo",
        False,
    ),
    (
        "learnings",
        "A LEARNINGS.md file.",
        "Import LEARNINGS.md: each learning to a memory of category correction or pattern.",
        "import_learnings",
        False,
    ),
)


def _command(name: str, path_help: str, doc: str, importer: str, shows_progress: bool) -> None:
    """Register ``memvault import NAME PATH``, which runs ``importers.<importer>``."""

    def command(
        ctx: typer.Context,
        path: Path = typer.Argument(..., help=path_help, metavar="PATH"),
        dry_run: DryRunOption = False,
        quiet: QuietOption = False,
        vault: VaultOption = None,
        as_json: JsonOption = False,
    ) -> None:
        from memvault.openclaw import importers

        run = getattr(importers, importer)

        def work(runtime: Runtime, update: Progress | None) -> ImportReport:
            extra = {"progress": update} if shows_progress else {}
            report: ImportReport = run(runtime, path, dry_run=dry_run, **extra)
            return report

        _run(ctx, vault, as_json, work, quiet)

    command.__doc__ = doc
    app.command(name)(command)


for _kind in _KINDS:
    _command(*_kind)
