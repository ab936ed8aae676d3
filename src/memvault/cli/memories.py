"""``memvault remember | get | forget | memories``.

When a daemon serves the vault these go through it (no index or model is
loaded here); otherwise they work on the vault directly. Both ways print
the same thing.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from memvault.cli.common import (
    ArchivedOption,
    DirectOption,
    JsonOption,
    MemoryIdArgument,
    VaultOption,
    emit_json,
    open_runtime,
    say,
    split_tags,
    stderr,
    stdout,
    table,
    via_daemon,
)
from memvault.cli.forgetting import forget
from memvault.text import cut
from memvault.vocabulary import CATEGORIES, counted

CategoryOption = Annotated[
    str | None,
    typer.Option("--category", "-c", help=f"One of: {', '.join(CATEGORIES)}.", show_default=False),
]


def _memory_rows(memories: list[dict[str, Any]]) -> list[list[str]]:
    return [
        [
            m["id"],
            m["category"],
            f"{m['importance']:.2f}",
            ("(superseded) " if m.get("superseded_by") is not None else "")
            + ("(archived) " if m.get("archived") else "")
            + ("(low trust) " if m.get("trust") == "low" else "")
            + cut(m["text"], 90),
            " ".join(f"#{t}" for t in m["tags"]),
            (m["created"] or "")[:16].replace("T", " "),
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
    direct: DirectOption = False,
    vault: VaultOption = None,
    as_json: JsonOption = False,
) -> None:
    """Store a memory, consolidated with the nearest ones (a duplicate is not stored twice)."""
    tag_list = split_tags(tags)
    body = {
        "text": text,
        "category": category,
        "importance": importance,
        "tags": tag_list,
        "source": source,
    }

    def here() -> dict[str, Any]:
        from memvault.privacy.secrets import noticed

        with noticed() as removed:
            result = open_runtime(ctx, vault).consolidation.remember(
                text, category=category, importance=importance, tags=tag_list, source=source
            )
        if removed.kinds:  # said once, on stderr, as the daemon's notice is
            stderr.print(removed.notice())
        return {**result.response(), **removed.field()}

    data = via_daemon(ctx, vault, "POST", "/v1/memories", body=body) or here()
    action = (data.get("consolidation") or {}).get("action", "add")
    if as_json:
        emit_json(data)
    elif action == "update":
        say(f"Merged into {data['id']} in {data['path']}: {cut(data['text'], 90)}")
    elif action == "supersede":
        target = data["consolidation"]["target"]
        say(f"Remembered {data['id']} in {data['path']}; it supersedes {target}")
    elif action == "review":
        note = data["consolidation"]["note"]
        say(f"Remembered {data['id']} in {data['path']} ({note})")
    elif data["created_new"]:
        say(f"Remembered {data['id']} in {data['path']}")
    else:
        say(f"Already remembered as {data['id']} in {data['path']}")


def get(
    ctx: typer.Context,
    memory_id: MemoryIdArgument,
    direct: DirectOption = False,
    vault: VaultOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show one memory."""

    def here() -> dict[str, Any]:
        runtime = open_runtime(ctx, vault)
        found = runtime.memories.get(memory_id)
        runtime.record_reads([found.id], "get")  # as the daemon's route records it
        return found.to_dict()

    memory = via_daemon(ctx, vault, "GET", f"/v1/memories/{_segment(memory_id)}") or here()
    if as_json:
        emit_json(memory)
        return
    say(memory["text"])
    say(
        f"{memory['id']} · {memory['category']} · importance {memory['importance']:.2f}"
        + (f" · {' '.join('#' + t for t in memory['tags'])}" if memory["tags"] else "")
        + (f" · {memory['created'][:16].replace('T', ' ')}" if memory["created"] else "")
        + (f" · from {memory['source']}" if memory["source"] else "")
    )
    say(f"{memory['path']}:{memory['line']}")


def memories(
    ctx: typer.Context,
    category: CategoryOption = None,
    tag: Annotated[str | None, typer.Option("--tag", help="Only memories with this tag.")] = None,
    archived: ArchivedOption = False,
    limit: Annotated[
        int | None, typer.Option("--limit", "-n", min=1, help="Show at most N (newest).")
    ] = None,
    direct: DirectOption = False,
    vault: VaultOption = None,
    as_json: JsonOption = False,
) -> None:
    """List memories, oldest first."""
    query = {"category": category, "tag": tag, "archived": archived, "limit": limit}

    def here() -> list[dict[str, Any]]:
        found = open_runtime(ctx, vault).memories.list(
            category=category, tag=tag, include_archived=archived
        )
        return [m.to_dict() for m in (found[-limit:] if limit is not None else found)]

    listed = via_daemon(ctx, vault, "GET", "/v1/memories", query=query)
    found: list[dict[str, Any]] = listed if listed is not None else here()
    if as_json:
        emit_json(found)
        return
    if not found:
        say('No memories yet. Store one with `memvault remember "..."`.')
        return
    stdout.print(
        table(
            counted(len(found), "memory"),
            ["ID", "Category", "Imp.", "Text", "Tags", "Created"],
            _memory_rows(found),
        )
    )


def _segment(value: str) -> str:
    from urllib.parse import quote

    return quote(value, safe="")


def register(app: typer.Typer) -> None:
    """Add the memory commands to the root app."""
    app.command()(remember)
    app.command()(get)
    app.command()(forget)  # memvault.cli.forgetting: everywhere, with a receipt
    app.command()(memories)
