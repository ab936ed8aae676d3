"""Notes and tasks written and read through the API."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from memvault.gateway.schemas.base import Body, Result
from memvault.vocabulary import PRIORITIES, STATUSES


class NoteWriteBody(Body):
    content: str = Field(description="The whole note, Markdown with optional frontmatter.")
    overwrite: bool = Field(True, description="False refuses to replace an existing note.")
    expected_hash: str | None = Field(
        None,
        max_length=200,
        description=(
            "The note's hash from GET: replace it only if unchanged since (else 409, "
            "nothing written). Same as the If-Match header."
        ),
    )


class NoteAppendBody(Body):
    content: str = Field(min_length=1, description="Lines to add at the end of the note.")


class NoteEntry(Result):
    path: str
    size: int
    modified: str
    is_dir: bool


class NoteOut(Result):
    path: str
    title: str
    hash: str = Field(description="sha256 of the note's bytes; send it back to write safely.")
    size: int
    modified: str
    frontmatter: dict[str, Any]
    tags: list[str]
    content: str


class NoteWritten(Result):
    path: str


class TaskCreateBody(Body):
    title: str = Field(min_length=1, max_length=200)
    description: str = ""
    priority: Literal[PRIORITIES] = "medium"  # type: ignore[valid-type]
    status: Literal["todo", "in_progress", "blocked"] = "todo"
    due: str | None = Field(None, description="YYYY-MM-DD, or +3d / tomorrow.")
    project: str | None = None
    tags: list[str] = Field(default_factory=list, max_length=50)
    steps: list[str] = Field(default_factory=list, max_length=100)


class TaskUpdateBody(Body):
    status: Literal[STATUSES] | None = None  # type: ignore[valid-type]
    priority: Literal[PRIORITIES] | None = None  # type: ignore[valid-type]
    due: str | None = Field(None, description="YYYY-MM-DD, or +3d / tomorrow.")
    project: str | None = None
    tags: list[str] | None = Field(None, max_length=50)
    title: str | None = Field(None, min_length=1, max_length=200)
    description: str | None = None
    note: str | None = Field(None, min_length=1, description="A dated line for the Notes section.")


class TaskOut(Result):
    path: str
    title: str
    status: str
    priority: str
    created: str | None
    due: str | None
    completed: str | None
    project: str | None
    tags: list[str]
