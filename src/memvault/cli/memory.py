"""``memvault memory review [ID --apply|--dismiss] | history ID``: consolidation on write.

Both work on the vault and state.db directly, also while a daemon serves
the vault (a review applied here edits the vault under its lock; the
daemon's watcher re-indexes it).
"""

from __future__ import annotations

from typing import Annotated

import typer

from memvault.cli.common import (
    DirectOption,
    JsonOption,
    VaultOption,
    emit_json,
    group,
    open_runtime,
    say,
    stdout,
    table,
)
from memvault.cli.reads import access
from memvault.errors import InvalidInputError
from memvault.vocabulary import counted

app = group("Consolidation on write: decisions held for review, a memory's history.")


def _short(text: str | None, width: int = 70) -> str:
    text = text or ""
    return text if len(text) <= width else text[: width - 1] + "…"


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
    direct: DirectOption = False,
    vault: VaultOption = None,
    as_json: JsonOption = False,
) -> None:
    """List the consolidation decisions held for review, or apply or dismiss one."""
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
            _short(r.text, 50),
            f"{r.action or '?'} {r.target or ''}".strip(),
            "" if r.confidence is None else f"{r.confidence:.2f}",
            _short(r.problem, 60),
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


@app.command()
def history(
    ctx: typer.Context,
    memory_id: Annotated[str, typer.Argument(metavar="ID", help="Memory id, e.g. m-3f9a1c2b.")],
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
            _short(c.old_text, 40),
            _short(c.new_text, 40),
            f"{c.decided_by}: {_short(c.reason, 50)}" if c.reason else c.decided_by,
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


app.command()(access)  # memvault.cli.reads: who read a memory, when and how
