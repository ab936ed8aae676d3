"""``memvault note read | write | append | list | links | move | delete``."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Annotated

import typer

from memvault.cli.common import (
    JsonOption,
    VaultOption,
    emit_json,
    emit_raw,
    group,
    open_runtime,
    read_content,
    say,
    stderr,
    stdout,
    table,
)
from memvault.errors import EXIT_FAILED
from memvault.vocabulary import counted

if TYPE_CHECKING:
    from memvault.privacy.secrets import Removed

app = group("Any note in the vault, by vault-relative path.")

NotePath = Annotated[
    str, typer.Argument(metavar="PATH", help="Vault-relative path, e.g. 'Projects/Apollo.md'.")
]
ContentOption = Annotated[
    str | None,
    typer.Option(
        "--content", "-c", help="The text; read from stdin when omitted.", show_default=False
    ),
]


@app.command("read")
def read(
    ctx: typer.Context, path: NotePath, vault: VaultOption = None, as_json: JsonOption = False
) -> None:
    """Print a note."""
    view = open_runtime(ctx, vault).notes.read(path)
    if as_json:
        emit_json(view.to_dict())
    else:
        emit_raw(view.text)


@app.command("write")
def write(
    ctx: typer.Context,
    path: NotePath,
    content: ContentOption = None,
    no_overwrite: Annotated[
        bool, typer.Option("--no-overwrite", help="Fail if the note exists.")
    ] = False,
    allow_empty: Annotated[
        bool, typer.Option("--allow-empty", help="Allow writing an empty note.")
    ] = False,
    expect: Annotated[
        str | None,
        typer.Option(
            "--expect",
            metavar="HASH",
            help="Only replace the note if its hash (from `note read --json`) is still HASH.",
            show_default=False,
        ),
    ] = None,
    vault: VaultOption = None,
    as_json: JsonOption = False,
) -> None:
    """Write a whole note (atomically); creates folders as needed.

    With --expect, a note changed since it was read is left alone (exit 4).
    """
    runtime = open_runtime(ctx, vault)
    with _told_secrets() as removed:
        written = runtime.notes.write(
            path,
            read_content(content),
            overwrite=not no_overwrite,
            allow_empty=allow_empty,
            expected_hash=expect,
        )
    if as_json:
        emit_json({"path": written, "written": True, **removed.field()})
    else:
        say(f"Wrote {written}")


@contextlib.contextmanager
def _told_secrets() -> Iterator[Removed]:
    """What the block's write replaced by markers, said once on stderr."""
    from memvault.privacy.secrets import noticed

    with noticed() as removed:
        yield removed
    if removed.kinds:
        stderr.print(removed.notice())


@app.command("append")
def append(
    ctx: typer.Context,
    path: NotePath,
    content: ContentOption = None,
    vault: VaultOption = None,
    as_json: JsonOption = False,
) -> None:
    """Append text to the end of a note, creating it if needed."""
    runtime = open_runtime(ctx, vault)
    with _told_secrets() as removed:
        written = runtime.notes.append(path, read_content(content))
    if as_json:
        emit_json({"path": written, "appended": True, **removed.field()})
    else:
        say(f"Appended to {written}")


@app.command("list")
def list_notes(
    ctx: typer.Context,
    folder: Annotated[str, typer.Argument(help="Folder to list (default: the whole vault).")] = "",
    shallow: Annotated[
        bool, typer.Option("--shallow", help="Only this folder, not its subfolders.")
    ] = False,
    all_files: Annotated[
        bool, typer.Option("--all-files", help="Include attachments, not only notes.")
    ] = False,
    vault: VaultOption = None,
    as_json: JsonOption = False,
) -> None:
    """List notes with their sizes and modification times."""
    entries = open_runtime(ctx, vault).notes.list(
        folder, recursive=not shallow, notes_only=not all_files
    )
    if as_json:
        emit_json([e.to_dict() for e in entries])
        return
    if not entries:
        say("No notes here.")
        return
    rows = [
        [e.path, f"{e.size:,}", e.modified.astimezone().strftime("%Y-%m-%d %H:%M")] for e in entries
    ]
    stdout.print(table(counted(len(entries), "note"), ["Path", "Bytes", "Modified"], rows))


@app.command("links")
def links(
    ctx: typer.Context, path: NotePath, vault: VaultOption = None, as_json: JsonOption = False
) -> None:
    """Show a note's outgoing links (resolved) and its backlinks."""
    notes = open_runtime(ctx, vault).notes
    resolver = notes.resolver()
    outgoing = notes.links(path, resolver)
    incoming = notes.backlinks(path, resolver)
    if as_json:
        emit_json(
            {
                "path": notes.locate(path),
                "links": [r.to_dict() for r in outgoing],
                "backlinks": [b.to_dict() for b in incoming],
            }
        )
        return
    rows = [
        [
            ("!" if r.link.embed else "")
            + r.link.target
            + (f"#{r.link.subpath}" if r.link.subpath else ""),
            r.resolved or "(unresolved)",
            r.link.line,
        ]
        for r in outgoing
    ]
    stdout.print(
        table(counted(len(outgoing), "outgoing link"), ["Link", "Resolves to", "Line"], rows)
    )
    stdout.print(
        table(
            counted(len(incoming), "backlink"),
            ["From", "Line"],
            [[b.source, b.line] for b in incoming],
        )
    )


@app.command("move")
def move(
    ctx: typer.Context,
    source: NotePath,
    destination: Annotated[
        str, typer.Argument(metavar="DEST", help="New path or an existing folder.")
    ],
    vault: VaultOption = None,
    as_json: JsonOption = False,
) -> None:
    """Move or rename a note (never over an existing one)."""
    moved = open_runtime(ctx, vault).notes.move(source, destination)
    if as_json:
        emit_json({"path": moved, "moved": True})
    else:
        say(f"Moved to {moved}")


@app.command("delete")
def delete(
    ctx: typer.Context,
    path: NotePath,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    vault: VaultOption = None,
    as_json: JsonOption = False,
) -> None:
    """Delete a note."""
    notes = open_runtime(ctx, vault).notes
    target = notes.locate(path)
    if not yes and not typer.confirm(f"Delete {target}?", default=False):
        raise typer.Exit(EXIT_FAILED)
    notes.delete(target)
    if as_json:
        emit_json({"path": target, "deleted": True})
    else:
        say(f"Deleted {target}")
