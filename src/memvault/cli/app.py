"""The ``memvault`` command line."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, ClassVar

import typer

from memvault import __version__
from memvault.cli import agent as agent_cli
from memvault.cli import archive as archive_cli
from memvault.cli import mcp as mcp_cli
from memvault.cli import memories as memory_cli
from memvault.cli import recall as recall_cli
from memvault.cli import serve as serve_cli
from memvault.cli import ui as ui_cli
from memvault.cli.common import (
    ErrorBoundaryGroup,
    JsonOption,
    VaultOption,
    emit_json,
    open_runtime,
    root_vault,
    say,
    stdout,
    table,
)


class RootGroup(ErrorBoundaryGroup):
    """``memvault``: the commands, and the groups loaded when used."""

    lazy_groups: ClassVar[dict[str, str]] = {
        "task": "memvault.cli.tasks",
        "contact": "memvault.cli.contacts",
        "project": "memvault.cli.projects",
        "journal": "memvault.cli.journal",
        "note": "memvault.cli.notes",
        "config": "memvault.cli.config",
        "tools": "memvault.cli.tools",
        "embedder": "memvault.cli.embedder",
        "channels": "memvault.cli.channels",
        "import": "memvault.cli.imports",
        "openclaw": "memvault.cli.openclaw",
        "jobs": "memvault.cli.jobs",
        "runs": "memvault.cli.runs",
        "memory": "memvault.cli.memory",
        "graph": "memvault.cli.graph",
        "tokens": "memvault.cli.tokens",
        "storage": "memvault.cli.storage",
        "privacy": "memvault.cli.privacy",
        "service": "memvault.cli.service",
    }


app = typer.Typer(
    name="memvault",
    cls=RootGroup,
    help="Memory for AI agents, kept in an Obsidian-compatible Markdown vault.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        say(f"memvault {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    ctx: typer.Context,
    vault: VaultOption = None,
    direct: Annotated[
        bool,
        typer.Option(
            "--direct",
            help="Work on the vault files even when a daemon serves the vault; start none.",
        ),
    ] = False,
    no_autostart: Annotated[
        bool,
        typer.Option(
            "--no-autostart",
            help="Never start a daemon in the background; search in this process instead.",
        ),
    ] = False,
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """Memory for AI agents, kept in an Obsidian-compatible Markdown vault."""
    ctx.obj = {"vault": vault, "direct": direct, "no_autostart": no_autostart}


@app.command()
def init(
    ctx: typer.Context,
    path: Annotated[
        Path | None,
        typer.Argument(help="Vault folder (default: --vault, $MEMVAULT_VAULT or ~/memvault)."),
    ] = None,
    vault: VaultOption = None,
    as_json: JsonOption = False,
) -> None:
    """Create the vault layout; existing files are never changed."""
    from memvault.clock import Clock, load_timezone
    from memvault.config import load_settings
    from memvault.runtime import Runtime
    from memvault.vault.layout import init_vault

    settings = load_settings(path or vault or root_vault(ctx)).settings
    # The one place a folder becomes a vault: wired without Runtime.open's check, so
    # the notes made here are indexed as they are written.
    runtime = Runtime(settings, Clock(load_timezone(settings.timezone)))
    ctx.call_on_close(runtime.close)
    report = init_vault(runtime.vault)
    if as_json:
        emit_json(report.to_dict())
        return
    if report.created:
        say(
            f"Initialised vault at {report.root}: "
            f"created {len(report.created)}, kept {len(report.kept)} existing."
        )
    else:
        say(f"Vault at {report.root} is already complete; nothing changed.")
    say(
        "Open it in Obsidian, or try: "
        'memvault remember "I prefer short answers" --category preference'
    )


@app.command()
def status(ctx: typer.Context, vault: VaultOption = None, as_json: JsonOption = False) -> None:
    """Summarise the vault: counts per kind and the latest activity."""
    from memvault.vault.summary import summarize

    runtime = open_runtime(ctx, vault)
    summary = summarize(runtime.vault, runtime.memories)
    if as_json:
        emit_json(summary.to_dict())
        return
    labels = {
        "memories": "Memories",
        "tasks_open": "Open tasks",
        "tasks_closed": "Closed tasks",
        "projects": "Projects",
        "contacts": "Contacts",
        "journal_days": "Journal days",
        "insights": "Insights",
        "skills": "Skills",
    }
    rows = [[label, summary.counts.get(key, 0)] for key, label in labels.items()]
    rows.append(["Notes in total", summary.notes])
    stdout.print(table(f"Vault {summary.root}", ["Kind", "Count"], rows))
    if summary.memories_by_category:
        say(
            "Memories by category: "
            + ", ".join(f"{k} {v}" for k, v in summary.memories_by_category.items())
        )
    if summary.last_modified is not None:
        when = summary.last_modified.astimezone(runtime.clock.tz).strftime("%Y-%m-%d %H:%M")
        say(f"Last activity: {summary.last_modified_path} at {when}")


memory_cli.register(app)
recall_cli.register(app)
app.command()(mcp_cli.mcp)
app.command()(agent_cli.ask)
app.command()(agent_cli.chat)
app.command()(serve_cli.serve)
app.command()(serve_cli.doctor)
app.command()(ui_cli.ui)
app.command()(archive_cli.unarchive)


def main() -> None:
    """Console-script entry point."""
    app()
