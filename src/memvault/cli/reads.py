"""``memvault memory access ID``: who read a memory, when and how
(:mod:`memvault.privacy.reads`).

Through the daemon when one serves the vault (``GET /v1/memories/{id}/access``), else
from state.db directly; both print the same.
"""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import quote

import typer

from memvault.cli.common import (
    DirectOption,
    JsonOption,
    MemoryIdArgument,
    VaultOption,
    emit_json,
    open_runtime,
    say,
    stdout,
    table,
    via_daemon,
)
from memvault.vocabulary import counted


def access(
    ctx: typer.Context,
    memory_id: MemoryIdArgument,
    limit: Annotated[
        int, typer.Option("--limit", "-n", min=1, max=10_000, help="Show at most N (newest).")
    ] = 100,
    direct: DirectOption = False,
    vault: VaultOption = None,
    as_json: JsonOption = False,
) -> None:
    """Who read a memory (an agent's token, an observer, a contact's conversation), when,
    through what (cli, http, mcp, agent, channel, job) and how (search, context, tool, get)."""
    path = f"/v1/memories/{quote(memory_id, safe='')}/access"
    reads: list[dict[str, Any]] | None = via_daemon(ctx, vault, "GET", path, query={"limit": limit})
    if reads is None:
        runtime = open_runtime(ctx, vault)
        memory = runtime.memories.get(memory_id)  # an unknown id: not found, as the route says
        reads = [r.to_dict() for r in runtime.reads.of(memory.id, limit)]
    if as_json:
        emit_json(reads)
        return
    wanted = memory_id.strip().lstrip("^")
    if not reads:
        say(f"No read of {wanted} is recorded (reads are kept for [privacy] reads_keep_days).")
        return
    rows = [
        [
            r["at"].replace("T", " ").replace("+00:00", "Z"),
            r["path"],
            r["surface"],
            (r["agent"] or "owner") + (" (observer)" if r["observer"] else ""),
            r["audience"] or "",
        ]
        for r in reads
    ]
    stdout.print(
        table(
            f"{counted(len(reads), 'read')} of {wanted}, newest first",
            ["When (UTC)", "How", "Through", "Who", "Conversation with"],
            rows,
        )
    )
