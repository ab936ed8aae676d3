"""Notes: ``/v1/notes`` (list) and ``/v1/notes/{path}`` (read, write, append, delete)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query

from memvault.gateway.routes import COMMON_ERRORS, DaemonDep, errors
from memvault.gateway.schemas import (
    Envelope,
    NoteAppendBody,
    NoteEntry,
    NoteOut,
    NoteWriteBody,
    NoteWritten,
)

router = APIRouter(prefix="/v1", tags=["notes"])

NotePath = Annotated[
    str,
    Path(
        min_length=1,
        max_length=1000,
        description="Vault-relative path, e.g. Projects/Apollo.md ('.md' may be left out).",
    ),
]


@router.get(
    "/notes", response_model=Envelope[list[NoteEntry]], responses=errors(*COMMON_ERRORS, 404)
)
def list_notes(
    daemon: DaemonDep,
    folder: Annotated[
        str, Query(max_length=1000, description="Folder to list; '' the vault.")
    ] = "",
    recursive: Annotated[bool, Query(description="Include subfolders.")] = True,
) -> dict[str, Any]:
    """Notes under a folder, with sizes and modification times."""
    entries = daemon.runtime.notes.list(folder, recursive=recursive)
    return {"ok": True, "result": [entry.to_dict() for entry in entries]}


@router.get(
    "/notes/{path:path}", response_model=Envelope[NoteOut], responses=errors(*COMMON_ERRORS, 404)
)
def read_note(path: NotePath, daemon: DaemonDep) -> dict[str, Any]:
    """One note: its content, frontmatter, tags, headings and links."""
    return {"ok": True, "result": daemon.runtime.notes.read(path).to_dict()}


@router.put(
    "/notes/{path:path}",
    response_model=Envelope[NoteWritten],
    responses=errors(*COMMON_ERRORS, 409),
)
def write_note(path: NotePath, body: NoteWriteBody, daemon: DaemonDep) -> dict[str, Any]:
    """Write a whole note (atomically); ``overwrite: false`` refuses to replace one."""
    written = daemon.runtime.notes.write(path, body.content, overwrite=body.overwrite)
    return {"ok": True, "result": {"path": written}}


@router.post(
    "/notes/{path:path}", response_model=Envelope[NoteWritten], responses=errors(*COMMON_ERRORS)
)
def append_note(path: NotePath, body: NoteAppendBody, daemon: DaemonDep) -> dict[str, Any]:
    """Append lines to a note, creating it if needed."""
    written = daemon.runtime.notes.append(path, body.content)
    return {"ok": True, "result": {"path": written}}


@router.delete(
    "/notes/{path:path}",
    response_model=Envelope[NoteWritten],
    responses=errors(*COMMON_ERRORS, 404),
)
def delete_note(path: NotePath, daemon: DaemonDep) -> dict[str, Any]:
    """Delete a note."""
    return {"ok": True, "result": {"path": daemon.runtime.notes.delete(path)}}
