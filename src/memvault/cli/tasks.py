"""``memvault task add | list | show | update | done | note``."""

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
from memvault.vocabulary import PRIORITIES, STATUSES

if TYPE_CHECKING:
    from memvault.vault.tasks import Task

app = group("Tasks: one note each in Tasks/active and Tasks/completed.")

TASK = typer.Argument(metavar="TASK", help="Title, file name or a unique part of the title.")
TaskRef = Annotated[str, TASK]


@app.command("add")
def add(
    ctx: typer.Context,
    title: Annotated[str, typer.Argument(help="Short title; also the note's file name.")],
    description: Annotated[str, typer.Option("--description", "-d", help="What needs doing.")] = "",
    priority: Annotated[
        str, typer.Option("--priority", "-p", help=f"One of: {', '.join(PRIORITIES)}.")
    ] = "medium",
    due: Annotated[
        str | None, typer.Option("--due", help="YYYY-MM-DD, today, tomorrow or +3d.")
    ] = None,
    project: Annotated[str | None, typer.Option("--project", help="Project name (linked).")] = None,
    tags: TagsOption = None,
    steps: Annotated[
        list[str] | None, typer.Option("--step", "-s", help="A checklist step; repeat for more.")
    ] = None,
    vault: VaultOption = None,
    as_json: JsonOption = False,
) -> None:
    """Create a task."""
    task = open_runtime(ctx, vault).tasks.create(
        title,
        description,
        priority=priority,
        due=due,
        project=project,
        tags=split_tags(tags),
        steps=steps or [],
    )
    answer(as_json, task, f"Created task {task.path}")


@app.command("list")
def list_tasks(
    ctx: typer.Context,
    status: Annotated[
        list[str] | None,
        typer.Option("--status", help=f"{', '.join(STATUSES)} or all; repeatable."),
    ] = None,
    project: Annotated[
        str | None, typer.Option("--project", help="Only this project's tasks.")
    ] = None,
    tag: Annotated[str | None, typer.Option("--tag", help="Only tasks with this tag.")] = None,
    due_before: Annotated[
        str | None, typer.Option("--due-before", help="Due on or before this day.")
    ] = None,
    include_closed: Annotated[
        bool, typer.Option("--all", "-a", help="Include done and cancelled tasks.")
    ] = False,
    vault: VaultOption = None,
    as_json: JsonOption = False,
) -> None:
    """List tasks, most urgent first (open ones unless --all or --status)."""
    statuses = split_tags(status) or None
    wanted: str | list[str] | None = "all" if statuses == ["all"] else statuses
    found = open_runtime(ctx, vault).tasks.list(
        status=wanted,
        project=project,
        tag=tag,
        due_before=due_before,
        include_closed=include_closed,
    )
    listing(
        as_json,
        found,
        noun="task",
        empty="No matching tasks.",
        columns=["Task", "Status", "Priority", "Due", "Project", "Tags"],
        row=lambda t: [
            t.title,
            t.status,
            t.priority,
            t.due or "",
            t.project or "",
            " ".join(f"#{x}" for x in t.tags),
        ],
    )


@show_command(app, TASK, "Show one task.", service=lambda runtime: runtime.tasks)
def _print_task(task: Task) -> None:
    say(f"{task.title}  [{task.status}, {task.priority}]")
    details = [
        f"due {task.due}" if task.due else "",
        f"project {task.project}" if task.project else "",
        " ".join(f"#{t}" for t in task.tags),
        f"completed {task.completed}" if task.completed else "",
    ]
    line = " · ".join(d for d in details if d)
    if line:
        say(line)
    if task.description:
        say("")
        say(task.description)
    if task.steps:
        say("")
        for step in task.steps:
            say(f"  [{'x' if step.done else ' '}] {step.text}")
    if task.notes:
        say("")
        say(task.notes)
    say(f"\n{task.path}")


@app.command("update")
def update(
    ctx: typer.Context,
    task: TaskRef,
    field: Annotated[
        str,
        typer.Argument(help="status, priority, due, project, tags, title, description, notes ..."),
    ],
    value: Annotated[str, typer.Argument(help="The new value ('' clears due or project).")],
    vault: VaultOption = None,
    as_json: JsonOption = False,
) -> None:
    """Change one field of a task (status done/cancelled closes it)."""
    updated = open_runtime(ctx, vault).tasks.update(task, field, value)
    answer(as_json, updated, f"Updated {updated.path}: {field} = {value}")


@app.command("done")
def done(
    ctx: typer.Context, task: TaskRef, vault: VaultOption = None, as_json: JsonOption = False
) -> None:
    """Complete a task: status done, dated, moved to Tasks/completed."""
    completed = open_runtime(ctx, vault).tasks.complete(task)
    answer(as_json, completed, f"Completed {completed.title} -> {completed.path}")


@app.command("note")
def note(
    ctx: typer.Context,
    task: TaskRef,
    text: Annotated[str, typer.Argument(help="A line for the task's Notes section.")],
    vault: VaultOption = None,
    as_json: JsonOption = False,
) -> None:
    """Add a dated note to a task."""
    updated = open_runtime(ctx, vault).tasks.add_note(task, text)
    answer(as_json, updated, f"Noted on {updated.path}")
