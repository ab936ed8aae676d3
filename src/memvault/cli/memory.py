"""``memvault memory review [ID --apply|--dismiss] | review --trust low | trust ID |
history ID | edit ID --text TEXT [--expect HASH]``: consolidation on write, what the
owner decides of low-trust memories, and the owner's own edit of a memory.

They work on the vault and state.db directly, also while a daemon serves
the vault (a review applied here edits the vault under its lock; the
daemon's watcher re-indexes it). ``edit`` goes through the daemon when one
serves the vault (``PATCH /v1/memories/{id}``, as the console's edit does),
else in this process.
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
    group,
    open_runtime,
    say,
    stdout,
    table,
    via_daemon,
)
from memvault.cli.reads import access
from memvault.errors import InvalidInputError
from memvault.privacy.trust import low_trust, set_trust
from memvault.text import cut
from memvault.vault.memories import LOW_TRUST, Memory
from memvault.vocabulary import counted

app = group(
    "Consolidation on write: decisions held for review, a memory's history; "
    "low-trust memories to review and trust; your own edit of a memory."
)


@app.command()
def review(
    ctx: typer.Context,
    review_id: Annotated[
        int | None, typer.Argument(metavar="ID", help="A review to apply or dismiss.")
    ] = None,
    apply: Annotated[bool, typer.Option("--apply", help="Apply the held decision.")] = False,
    dismiss: Annotated[
        bool, typer.Option("--dismiss", help="Drop it; the memory stays as it was added.")
    ] = False,
    trust: Annotated[
        str | None,
        typer.Option(
            "--trust",
            metavar="LEVEL",
            help="List the memories of this trust instead (low: text from someone else "
            "that reads as an instruction to the agent).",
        ),
    ] = None,
    direct: DirectOption = False,
    vault: VaultOption = None,
    as_json: JsonOption = False,
) -> None:
    """List the consolidation decisions held for review, or apply or dismiss one; with
    --trust low, the memories marked low trust, with why and where they came from."""
    if trust is not None:
        if review_id is not None or apply or dismiss:
            raise InvalidInputError(
                "--trust lists memories; trust one with `memvault memory trust ID`."
            )
        _review_trust(ctx, vault, trust, as_json)
        return
    if apply and dismiss:
        raise InvalidInputError("Choose --apply or --dismiss, not both.")
    if (apply or dismiss) and review_id is None:
        raise InvalidInputError("Name the review to apply or dismiss: memory review ID --apply.")
    if review_id is not None and not (apply or dismiss):
        raise InvalidInputError(f"Say what to do with review {review_id}: --apply or --dismiss.")
    consolidation = open_runtime(ctx, vault).consolidation
    if review_id is not None:
        done = (
            consolidation.apply_review(review_id)
            if apply
            else consolidation.dismiss_review(review_id)
        )
        if as_json:
            emit_json(done.to_dict())
        else:
            say(f"Review {done.id} {done.status}: {done.action or 'nothing'} for {done.memory_id}.")
        return
    pending = consolidation.reviews()
    if as_json:
        emit_json([r.to_dict() for r in pending])
        return
    if not pending:
        say("No consolidation decisions are waiting for review.")
        return
    rows = [
        [
            str(r.id),
            r.memory_id,
            cut(r.text, 50),
            f"{r.action or '?'} {r.target or ''}".strip(),
            "" if r.confidence is None else f"{r.confidence:.2f}",
            cut(r.problem or "", 60),
        ]
        for r in pending
    ]
    stdout.print(
        table(
            counted(len(pending), "review"),
            ["ID", "Memory", "Text", "Nominated", "Conf.", "Why held"],
            rows,
        )
    )
    say("Apply one with `memvault memory review ID --apply`, or drop it with --dismiss.")


def _from(memory: Memory) -> str:
    return memory.fields.get("trust_from") or memory.source or ""


def _review_trust(ctx: typer.Context, vault: VaultOption, level: str, as_json: bool) -> None:
    """``memory review --trust low``: the low-trust memories for the owner to look at."""
    if level.strip().casefold() != LOW_TRUST:
        raise InvalidInputError(f"Only low-trust memories are listed: --trust low, not {level!r}.")
    doubted = low_trust(open_runtime(ctx, vault).memories)
    if as_json:
        emit_json([{**m.to_dict(), "from": _from(m)} for m in doubted])
        return
    if not doubted:
        say("No memory is marked low trust.")
        return
    rows = [
        [
            m.id,
            cut(m.text, 50),
            cut(_from(m), 30),
            cut(m.trust_reason or "", 60),
            m.created.strftime("%Y-%m-%d %H:%M") if m.created else "",
        ]
        for m in doubted
    ]
    stdout.print(
        table(
            f"{counted(len(doubted), 'memory')} marked low trust",
            ["ID", "Text", "From", "Why", "Stored"],
            rows,
        )
    )
    say(
        "They are shown to models only as data. Trust one with `memvault memory trust ID`, "
        "or forget it with `memvault forget ID`."
    )


@app.command("trust")
def trust_memory(
    ctx: typer.Context,
    memory_id: MemoryIdArgument,
    low: Annotated[
        bool, typer.Option("--low", help="Mark it low trust instead (shown only as data).")
    ] = False,
    reason: Annotated[
        str | None, typer.Option("--reason", help="Why, with --low.", show_default=False)
    ] = None,
    direct: DirectOption = False,
    vault: VaultOption = None,
    as_json: JsonOption = False,
) -> None:
    """Trust a memory marked low trust (the owner decides), or mark one low with --low."""
    if reason is not None and not low:
        raise InvalidInputError("--reason goes with --low: say why it is not to be trusted.")
    memory = set_trust(open_runtime(ctx, vault).memories, memory_id, low=low, reason=reason)
    if as_json:
        emit_json(memory.to_dict())
    elif low:
        say(f"Marked {memory.id} low trust: {memory.trust_reason}.")
    else:
        say(f"Trusted {memory.id}: it may be pinned and shown as your own again.")


@app.command()
def history(
    ctx: typer.Context,
    memory_id: MemoryIdArgument,
    direct: DirectOption = False,
    vault: VaultOption = None,
    as_json: JsonOption = False,
) -> None:
    """What consolidation changed in a memory: updates, supersessions, duplicates declined."""
    runtime = open_runtime(ctx, vault)
    changes = runtime.consolidation.history(memory_id)
    if as_json:
        emit_json([c.to_dict() for c in changes])
        return
    if not changes:
        say(f"Consolidation has not changed {memory_id.strip().lstrip('^')}.")
        return
    rows = [
        [
            c.at.strftime("%Y-%m-%d %H:%M"),
            c.memory_id,
            c.action + (f" {c.related_id}" if c.related_id else ""),
            cut(c.old_text or "", 40),
            cut(c.new_text or "", 40),
            f"{c.decided_by}: {cut(c.reason, 50)}" if c.reason else c.decided_by,
        ]
        for c in changes
    ]
    stdout.print(
        table(
            counted(len(changes), "change"),
            ["When", "Memory", "Action", "Before", "After", "Why"],
            rows,
        )
    )


@app.command()
def edit(
    ctx: typer.Context,
    memory_id: MemoryIdArgument,
    text: Annotated[str, typer.Option("--text", help="The memory's new text.", show_default=False)],
    expect: Annotated[
        str | None,
        typer.Option(
            "--expect",
            metavar="HASH",
            help="Only edit if the memory's note still has this hash (from `note read "
            "--json`); default: the note as it is now.",
            show_default=False,
        ),
    ] = None,
    direct: DirectOption = False,
    vault: VaultOption = None,
    as_json: JsonOption = False,
) -> None:
    """Change a memory's text (its id, date, source and fields kept), logged in its history.

    With --expect, a note changed since it was read (in Obsidian, say) is left alone
    (exit 4).
    """
    segment = f"/v1/memories/{quote(memory_id.strip(), safe='')}"
    memory: dict[str, Any] | None = None
    if expect is None:  # the note as it reads now: its hash, then the edit
        found = via_daemon(ctx, vault, "GET", segment)
        if found is not None:
            note = via_daemon(ctx, vault, "GET", f"/v1/notes/{quote(found['path'])}")
            expect = note["hash"] if note is not None else None
    if expect is not None:
        body = {"text": text, "expected_hash": expect}
        memory = via_daemon(ctx, vault, "PATCH", segment, body=body)
    if memory is None:
        runtime = open_runtime(ctx, vault)
        if expect is None:
            expect = runtime.notes.read(runtime.memories.get(memory_id).path).hash
        memory = runtime.consolidation.edit(memory_id, text, expected_hash=expect).to_dict()
    if as_json:
        emit_json(memory)
    else:
        say(f"Edited {memory['id']} in {memory['path']}: {memory['text']}")


app.command()(access)  # memvault.cli.reads: who read a memory, when and how
