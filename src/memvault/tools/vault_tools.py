"""Vault tools: read, write, append, search, list, delete and move notes."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from memvault.index.filters import SearchFilters
from memvault.tools.inputs import (
    CONTENT,
    FOLDER,
    ToolInput,
    limit_field,
    min_score_field,
    names,
    path_field,
)
from memvault.tools.policy import DELETIONS, FILE_WRITES, Tier
from memvault.tools.registry import Annotations, Tool, ToolContext, noted

_FIND = "Try vault_list to see what exists, or vault_search to find a note by its content."


class VaultRead(ToolInput):
    path: str = path_field()


class VaultWrite(ToolInput):
    path: str = path_field(
        "Vault-relative path to write, e.g. 'Projects/Apollo.md'; folders are created."
    )
    content: str = Field(
        description="The full Markdown text of the note.", validation_alias=CONTENT
    )
    expected_hash: str | None = Field(
        None,
        description=(
            "When changing an existing note, pass the 'hash' vault_read returned: the note "
            "is written only if nobody changed it since (else a conflict error; read it "
            "again and reapply your change). Leave it out to create a new note."
        ),
        validation_alias=names("expected_hash", "hash", "if_match", "expectedHash"),
    )


class VaultAppend(ToolInput):
    path: str = path_field("Vault-relative path of the note to extend (created if missing).")
    content: str = Field(
        description="Markdown to add as new lines at the end.",
        validation_alias=CONTENT,
        min_length=1,
    )


class VaultSearch(ToolInput):
    query: str = Field(
        description="What to look for: keywords, a phrase, or a question in your own words.",
        validation_alias=names("query", "q", "text", "topic"),
        min_length=1,
    )
    folder: str | None = Field(
        None,
        description="Only notes under this folder, e.g. 'Projects' or 'Journal'.",
        validation_alias=FOLDER,
    )
    limit: int = limit_field(10)
    min_score: float | None = min_score_field()


class VaultList(ToolInput):
    folder: str = Field(
        "",
        description="Folder to list, e.g. 'Tasks/active' or 'Contacts'; empty for the vault root.",
        validation_alias=FOLDER,
    )
    recursive: bool = Field(False, description="Also list notes in subfolders.")


class VaultDelete(ToolInput):
    path: str = path_field("Vault-relative path of the note to delete.")


class VaultMove(ToolInput):
    source: str = Field(
        description="Current vault-relative path of the note.",
        validation_alias=names("source", "from", "path", "old_path", "src"),
        min_length=1,
    )
    destination: str = Field(
        description="New vault-relative path, or an existing folder to move it into.",
        validation_alias=names("destination", "to", "new_path", "target", "dest"),
        min_length=1,
    )


def _read(ctx: ToolContext, args: VaultRead) -> dict[str, Any]:
    view = ctx.runtime.notes.read(args.path)
    return {"path": view.path, "content": view.text, "hash": view.hash}


def _write(ctx: ToolContext, args: VaultWrite) -> dict[str, Any]:
    path = ctx.runtime.notes.write(
        args.path, args.content, allow_empty=True, expected_hash=args.expected_hash
    )
    return {"path": path, "written": True}


def _append(ctx: ToolContext, args: VaultAppend) -> dict[str, Any]:
    return {"path": ctx.runtime.notes.append(args.path, args.content), "appended": True}


def _search(ctx: ToolContext, args: VaultSearch) -> dict[str, Any]:
    ctx.fresh_index()
    hits = ctx.search(
        args.query,
        limit=args.limit,
        filters=SearchFilters(folder=args.folder or None),
        min_score=args.min_score,
    )
    return noted({"query": args.query, "results": [hit.to_dict() for hit in hits]}, hits)


def _list(ctx: ToolContext, args: VaultList) -> dict[str, Any]:
    notes = ctx.runtime.notes
    entries = notes.list(args.folder, recursive=args.recursive)
    return {
        "folder": args.folder,
        "folders": ctx.runtime.vault.list_folders(args.folder),
        "notes": [entry.to_dict() for entry in entries],
    }


def _delete(ctx: ToolContext, args: VaultDelete) -> dict[str, Any]:
    return {"path": ctx.runtime.notes.delete(args.path), "deleted": True}


def _move(ctx: ToolContext, args: VaultMove) -> dict[str, Any]:
    moved = ctx.runtime.notes.move(args.source, args.destination)
    return {"from": args.source, "path": moved, "moved": True}


TOOLS = [
    Tool(
        name="vault_read",
        title="Read a note",
        description=(
            "Read a note from the memory vault and return its full Markdown. Paths are "
            "vault-relative, e.g. 'Projects/Apollo.md', 'User Profile.md' or "
            "'Journal/2026-11-22.md'."
        ),
        input_model=VaultRead,
        handler=_read,
        not_found_hint=_FIND,
    ),
    Tool(
        name="vault_write",
        title="Write a note",
        description=(
            "Write (or overwrite) a whole note in the vault; folders are created. Use "
            "[[wikilinks]] to connect notes. This replaces the note: to change one, "
            "vault_read it first and pass its hash as expected_hash, so an edit the owner "
            "made meanwhile is never lost; use vault_append to add to it instead."
        ),
        input_model=VaultWrite,
        handler=_write,
        tier=Tier.WRITE,
        category=FILE_WRITES,
        annotations=Annotations(destructive=True, idempotent=True),
        summarize=lambda a: f"write {a.path}",
    ),
    Tool(
        name="vault_append",
        title="Append to a note",
        description=(
            "Append lines to the end of a note without changing what is there; the note "
            "is created if missing. Good for logs and running lists."
        ),
        input_model=VaultAppend,
        handler=_append,
        tier=Tier.WRITE,
        category=FILE_WRITES,
        annotations=Annotations(),
        summarize=lambda a: f"append to {a.path}",
    ),
    Tool(
        name="vault_search",
        title="Search the vault",
        description=(
            "Search every note and memory by keywords and meaning; returns the best "
            "matches with path, line numbers and a snippet. Use it when you do not know "
            "which note holds something. Optionally limit it to one folder."
        ),
        input_model=VaultSearch,
        handler=_search,
        searches=True,
    ),
    Tool(
        name="vault_list",
        title="List notes",
        description=(
            "List the notes (with sizes and modification times) and subfolders of a vault "
            "folder, e.g. 'Tasks/active', 'Contacts' or 'Journal'."
        ),
        input_model=VaultList,
        handler=_list,
        not_found_hint="List the vault root (folder '') to see which folders exist.",
    ),
    Tool(
        name="vault_delete",
        title="Delete a note",
        description="Delete a note from the vault. Needs the owner's approval every time.",
        input_model=VaultDelete,
        handler=_delete,
        tier=Tier.DANGEROUS,
        category=DELETIONS,
        annotations=Annotations(destructive=True, idempotent=True),
        summarize=lambda a: f"delete {a.path}",
        not_found_hint=_FIND,
    ),
    Tool(
        name="vault_move",
        title="Move or rename a note",
        description=(
            "Move or rename a note; links to it elsewhere in the vault are updated, as "
            "Obsidian does. Never overwrites an existing note."
        ),
        input_model=VaultMove,
        handler=_move,
        tier=Tier.WRITE,
        category=FILE_WRITES,
        annotations=Annotations(),
        summarize=lambda a: f"move {a.source} to {a.destination}",
        not_found_hint=_FIND,
    ),
]
