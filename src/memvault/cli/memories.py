"""``memvault remember | get | forget | memories``."""

from __future__ import annotations

from typing import Annotated

import typer

from memvault.cli.common import (
    JsonOption,
    VaultOption,
    emit_json,
    open_runtime,
    say,
    split_tags,
    stdout,
    table,
)
from memvault.vault.memories import CATEGORIES, Memory

CategoryOption = Annotated[
    str | None,
    typer.Option("--category", "-c", help=f"One of: {', '.join(CATEGORIES)}.", show_default=False),
]


def _short(text: str, width: int = 90) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _memory_rows(memories: list[Memory]) -> list[list[str]]:
    return [
        [
            m.id,
            m.category,
            f"{m.importance:.2f}",
            _short(m.text),
            " ".join(f"#{t}" for t in m.tags),
            m.created.strftime("%Y-%m-%d %H:%M") if m.created else "",
        ]
        for m in memories
    ]


def remember(
    ctx: typer.Context,
    text: Annotated[str, typer.Argument(help="What to remember, in one sentence.")],
    category: CategoryOption = None,
    importance: Annotated[
        float | None,
        typer.Option("--importance", "-i", help="0 (trivia) to 1 (essential).", show_default=False),
    ] = None,
    tags: Annotated[
        list[str] | None, typer.Option("--tags", "-t", help="Tags, comma-separated or repeated.")
    ] = None,
    source: Annotated[str | None, typer.Option("--source", help="Where this came from.")] = "cli",
    vault: VaultOption = None,
    as_json: JsonOption = False,
) -> None:
    """Store a memory (an exact duplicate is not stored twice)."""
    runtime = open_runtime(ctx, vault)
    result = runtime.memories.remember(
        text, category=category, importance=importance, tags=split_tags(tags), source=source
    )
    if as_json:
        emit_json({**result.memory.to_dict(), "created_new": result.created})
    elif result.created:
        say(f"Remembered {result.memory.id} in {result.memory.path}")
    else:
        say(f"Already remembered as {result.memory.id} in {result.memory.path}")


def get(
    ctx: typer.Context,
    memory_id: Annotated[str, typer.Argument(metavar="ID", help="Memory id, e.g. m-3f9a1c2b.")],
    vault: VaultOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show one memory."""
    memory = open_runtime(ctx, vault).memories.get(memory_id)
    if as_json:
        emit_json(memory.to_dict())
        return
    say(memory.text)
    say(
        f"{memory.id} · {memory.category} · importance {memory.importance:.2f}"
        + (f" · {' '.join('#' + t for t in memory.tags)}" if memory.tags else "")
        + (f" · {memory.created:%Y-%m-%d %H:%M}" if memory.created else "")
        + (f" · from {memory.source}" if memory.source else "")
    )
    say(f"{memory.path}:{memory.line}")


def forget(
    ctx: typer.Context,
    memory_id: Annotated[str, typer.Argument(metavar="ID", help="Memory id, e.g. m-3f9a1c2b.")],
    vault: VaultOption = None,
    as_json: JsonOption = False,
) -> None:
    """Remove a memory from the vault."""
    memory = open_runtime(ctx, vault).memories.forget(memory_id)
    if as_json:
        emit_json({**memory.to_dict(), "forgotten": True})
    else:
        say(f"Forgot {memory.id}: {_short(memory.text)}")


def memories(
    ctx: typer.Context,
    category: CategoryOption = None,
    tag: Annotated[str | None, typer.Option("--tag", help="Only memories with this tag.")] = None,
    archived: Annotated[
        bool, typer.Option("--archived", help="Include archived memories.")
    ] = False,
    limit: Annotated[
        int | None, typer.Option("--limit", "-n", min=1, help="Show at most N (newest).")
    ] = None,
    vault: VaultOption = None,
    as_json: JsonOption = False,
) -> None:
    """List memories, oldest first."""
    found = open_runtime(ctx, vault).memories.list(
        category=category, tag=tag, include_archived=archived
    )
    if limit is not None:
        found = found[-limit:]
    if as_json:
        emit_json([m.to_dict() for m in found])
        return
    if not found:
        say('No memories yet. Store one with `memvault remember "..."`.')
        return
    stdout.print(
        table(
            f"{len(found)} memories",
            ["ID", "Category", "Imp.", "Text", "Tags", "Created"],
            _memory_rows(found),
        )
    )


def register(app: typer.Typer) -> None:
    """Add the memory commands to the root app."""
    app.command()(remember)
    app.command()(get)
    app.command()(forget)
    app.command()(memories)
