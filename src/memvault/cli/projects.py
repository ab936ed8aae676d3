"""``memvault project add | link | list | show``."""

from __future__ import annotations

from typing import Annotated

import typer

from memvault.cli.common import (
    JsonOption,
    VaultOption,
    emit_json,
    group,
    open_runtime,
    say,
    split_tags,
    stdout,
    table,
)
from memvault.vocabulary import counted

app = group("Projects: one note each in Projects/, listing their tasks.")

ProjectRef = Annotated[
    str, typer.Argument(metavar="PROJECT", help="Project name, alias or file name.")
]


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
    tags: Annotated[
        list[str] | None, typer.Option("--tags", "-t", help="Tags, comma-separated or repeated.")
    ] = None,
    vault: VaultOption = None,
    as_json: JsonOption = False,
) -> None:
    """Create a project."""
    project = open_runtime(ctx, vault).projects.create(
        name, description, status=status, tags=split_tags(tags)
    )
    if as_json:
        emit_json(project.to_dict())
    else:
        say(f"Created project {project.path}")


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
    if as_json:
        emit_json(updated.to_dict())
    else:
        say(f"{updated.name} now lists {counted(len(updated.tasks), 'task')}.")


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
    if as_json:
        emit_json([p.to_dict() for p in found])
        return
    if not found:
        say("No projects yet. Add one with `memvault project add NAME`.")
        return
    rows = [[p.name, p.status, len(p.tasks), " ".join(f"#{t}" for t in p.tags)] for p in found]
    stdout.print(
        table(counted(len(found), "project"), ["Project", "Status", "Tasks", "Tags"], rows)
    )


@app.command("show")
def show(
    ctx: typer.Context, project: ProjectRef, vault: VaultOption = None, as_json: JsonOption = False
) -> None:
    """Show one project and its tasks."""
    found = open_runtime(ctx, vault).projects.get(project)
    if as_json:
        emit_json(found.to_dict())
        return
    say(f"{found.name}  [{found.status}]")
    if found.overview:
        say(found.overview)
    for task in found.tasks:
        say(f"  - {task}")
    say(f"\n{found.path}")
