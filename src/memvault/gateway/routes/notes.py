"""Notes: ``/v1/notes`` (list) and ``/v1/notes/{path}`` (read, write, append, delete)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Header, Path, Query, Response

from memvault.errors import InvalidInputError
from memvault.gateway.routes import COMMON_ERRORS, DaemonDep, errors
from memvault.gateway.schemas import (
    Envelope,
    NoteAppendBody,
    NoteEntry,
    NoteOut,
    NoteWriteBody,
    NoteWritten,
    NoticedEnvelope,
)
from memvault.privacy.secrets import noticed
from memvault.vault.notes import parse_hash

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
def read_note(path: NotePath, daemon: DaemonDep, response: Response) -> dict[str, Any]:
    """One note: its content, hash, frontmatter, tags, headings and links.

    The hash is also the ``ETag``: send it back (``expected_hash`` or
    ``If-Match``) with a PUT to replace the note only if it is unchanged.
    """
    view = daemon.runtime.notes.read(path)
    response.headers["ETag"] = f'"{view.hash}"'
    return {"ok": True, "result": view.to_dict()}


@router.put(
    "/notes/{path:path}",
    response_model=NoticedEnvelope[NoteWritten],
    responses=errors(*COMMON_ERRORS, 409, 422),
)
def write_note(
    path: NotePath,
    body: NoteWriteBody,
    daemon: DaemonDep,
    if_match: Annotated[
        str | None,
        Header(max_length=200, description="The note's hash (ETag), as expected_hash."),
    ] = None,
) -> dict[str, Any]:
    """Write a whole note (atomically); ``overwrite: false`` refuses to replace one.

    With ``expected_hash`` (or ``If-Match``) the note is replaced only if it
    still has that hash: a change since it was read is a 409, nothing written.
    A new secret in the content is replaced by a marker (the notice names it), or is a
    422 with ``[privacy] secrets = "refuse"``.
    """
    expected = body.expected_hash
    if if_match is not None:
        if expected is not None and parse_hash(expected) != parse_hash(if_match):
            raise InvalidInputError("expected_hash and If-Match differ; send one hash.")
        expected = if_match
    with noticed() as removed:
        written = daemon.runtime.notes.write(
            path, body.content, overwrite=body.overwrite, expected_hash=expected
        )
    answer = {"path": written, **removed.field()}
    return {"ok": True, "result": answer, "notice": removed.notice()}


@router.post(
    "/notes/{path:path}",
    response_model=NoticedEnvelope[NoteWritten],
    responses=errors(*COMMON_ERRORS, 422),
)
def append_note(path: NotePath, body: NoteAppendBody, daemon: DaemonDep) -> dict[str, Any]:
    """Append lines to a note, creating it if needed (a secret in them as for a write)."""
    with noticed() as removed:
        written = daemon.runtime.notes.append(path, body.content)
    answer = {"path": written, **removed.field()}
    return {"ok": True, "result": answer, "notice": removed.notice()}


@router.delete(
    "/notes/{path:path}",
    response_model=Envelope[NoteWritten],
    responses=errors(*COMMON_ERRORS, 404),
)
def delete_note(path: NotePath, daemon: DaemonDep) -> dict[str, Any]:
    """Delete a note."""
    return {"ok": True, "result": {"path": daemon.runtime.notes.delete(path)}}
