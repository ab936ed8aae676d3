"""Tasks: ``/v1/tasks``: create, list, update, complete."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query

from memvault.errors import InvalidInputError
from memvault.gateway.routes import COMMON_ERRORS, DaemonDep, errors
from memvault.gateway.schemas import Envelope, TaskCreateBody, TaskOut, TaskUpdateBody

router = APIRouter(prefix="/v1", tags=["tasks"])

TaskRef = Annotated[
    str,
    Path(
        min_length=1,
        max_length=300,
        description="The task's title, file name or path (or a unique part of the title).",
    ),
]


@router.get("/tasks", response_model=Envelope[list[TaskOut]], responses=errors(*COMMON_ERRORS))
def list_tasks(
    daemon: DaemonDep,
    status: Annotated[
        str | None, Query(description="Only this status (todo, in_progress, ..., or all).")
    ] = None,
    project: Annotated[str | None, Query(description="Only this project's tasks.")] = None,
    tag: Annotated[str | None, Query(description="Only tasks with this tag.")] = None,
    due_before: Annotated[
        str | None, Query(description="Only tasks due on or before this day.")
    ] = None,
    include_closed: Annotated[bool, Query(description="Include done and cancelled.")] = False,
) -> dict[str, Any]:
    """Tasks, most urgent first (open ones only unless asked)."""
    found = daemon.runtime.tasks.list(
        status=status,
        project=project,
        tag=tag,
        due_before=due_before,
        include_closed=include_closed,
    )
    return {"ok": True, "result": [task.to_dict() for task in found]}


@router.post("/tasks", response_model=Envelope[TaskOut], responses=errors(*COMMON_ERRORS, 409))
def create_task(body: TaskCreateBody, daemon: DaemonDep) -> dict[str, Any]:
    """Create a task note in Tasks/active/."""
    task = daemon.runtime.tasks.create(
        body.title,
        body.description,
        priority=body.priority,
        status=body.status,
        due=body.due,
        project=body.project,
        tags=body.tags,
        steps=body.steps,
    )
    return {"ok": True, "result": task.to_dict()}


@router.get("/tasks/{ref}", response_model=Envelope[TaskOut], responses=errors(*COMMON_ERRORS, 404))
def get_task(ref: TaskRef, daemon: DaemonDep) -> dict[str, Any]:
    """One task."""
    return {"ok": True, "result": daemon.runtime.tasks.get(ref).to_dict()}


@router.patch(
    "/tasks/{ref}",
    response_model=Envelope[TaskOut],
    responses=errors(*COMMON_ERRORS, 404, 409),
)
def update_task(ref: TaskRef, body: TaskUpdateBody, daemon: DaemonDep) -> dict[str, Any]:
    """Change fields of a task; a status of done or cancelled closes it."""
    changes = body.model_dump(exclude_unset=True)
    if not changes:
        raise InvalidInputError(
            "Nothing to change: give status, priority, due, project, tags, title, "
            "description or note."
        )
    note = changes.pop("note", None)
    status = changes.pop("status", None)
    task = daemon.runtime.tasks.change(ref, changes, note=note, status=status)
    return {"ok": True, "result": task.to_dict()}


@router.post(
    "/tasks/{ref}/complete",
    response_model=Envelope[TaskOut],
    responses=errors(*COMMON_ERRORS, 404),
)
def complete_task(ref: TaskRef, daemon: DaemonDep) -> dict[str, Any]:
    """Mark a task done and move it to Tasks/completed/."""
    return {"ok": True, "result": daemon.runtime.tasks.complete(ref).to_dict()}
