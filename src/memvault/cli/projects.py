"""``memvault project add | link | list | show``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from memvault.cli.common import (
    JsonOption,
    TagsOption,
    VaultOption,
    answer,
    group,
    listing,
    open_runtime,
    say,
    split_tags,
)
from memvault.cli.typed_notes import show_command
from memvault.vocabulary import counted

if TYPE_CHECKING:
    from memvault.vault.projects import Project

app = group("Projects: one note each in Projects/, listing their tasks.")

PROJECT = typer.Argument(metavar="PROJECT", help="Project name, alias or file name.")
ProjectRef = Annotated[str, PROJECT]


@app.command("add")
def add(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="Project name; also the note's file name.")],
    description: Annotated[
        str, typer.Option("--description", "-d", help="What the project is about.")
    ] = "",
    status: Annotated[
        str, typer.Option("--status", help="active, paused, done or archived.")
    ] = "active",
    tags: TagsOption = None,
    vault: VaultOption = None,
    as_json: JsonOption = False,
) -> None:
    """Create a project."""
    project = open_runtime(ctx, vault).projects.create(
        name, description, status=status, tags=split_tags(tags)
    )
    answer(as_json, project, f"Created project {project.path}")


@app.command("link")
def link(
    ctx: typer.Context,
    project: ProjectRef,
    task: Annotated[str, typer.Argument(metavar="TASK", help="Task title or file name.")],
    vault: VaultOption = None,
    as_json: JsonOption = False,
) -> None:
    """Make a task part of a project."""
    updated = open_runtime(ctx, vault).projects.link_task(project, task)
    answer(as_json, updated, f"{updated.name} now lists {counted(len(updated.tasks), 'task')}.")


@app.command("list")
def list_projects(
    ctx: typer.Context,
    status: Annotated[
        str | None, typer.Option("--status", help="Only projects with this status.")
    ] = None,
    vault: VaultOption = None,
    as_json: JsonOption = False,
) -> None:
    """List projects."""
    found = open_runtime(ctx, vault).projects.list(status=status)
    listing(
        as_json,
        found,
        noun="project",
        empty="No projects yet. Add one with `memvault project add NAME`.",
        columns=["Project", "Status", "Tasks", "Tags"],
        row=lambda p: [p.name, p.status, len(p.tasks), " ".join(f"#{t}" for t in p.tags)],
    )


@show_command(
    app, PROJECT, "Show one project and its tasks.", service=lambda runtime: runtime.projects
)
def _print_project(found: Project) -> None:
    say(f"{found.name}  [{found.status}]")
    if found.overview:
        say(found.overview)
    for task in found.tasks:
        say(f"  - {task}")
    say(f"\n{found.path}")
