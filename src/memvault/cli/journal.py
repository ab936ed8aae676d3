"""``memvault journal add | show | list``."""

from __future__ import annotations

from datetime import date
from typing import Annotated

import typer

from memvault.cli.common import (
    JsonOption,
    VaultOption,
    emit_json,
    emit_raw,
    group,
    open_runtime,
    say,
)
from memvault.clock import parse_date
from memvault.errors import InvalidInputError
from memvault.vocabulary import SECTIONS

app = group("The journal: one daily note per day in Journal/.")


@app.command("add")
def add(
    ctx: typer.Context,
    text: Annotated[str, typer.Argument(help="The entry.")],
    section: Annotated[
        str, typer.Option("--section", "-s", help=f"{', '.join(SECTIONS)} or any heading.")
    ] = "Observations",
    vault: VaultOption = None,
    as_json: JsonOption = False,
) -> None:
    """Append a timestamped entry to today's note."""
    entry = open_runtime(ctx, vault).journal.append(section, text)
    if as_json:
        emit_json(entry.to_dict())
    else:
        say(f"Added to {entry.path} under {entry.section}")


@app.command("show")
def show(
    ctx: typer.Context,
    day: Annotated[
        str | None, typer.Argument(help="YYYY-MM-DD, today or yesterday (default today).")
    ] = None,
    vault: VaultOption = None,
    as_json: JsonOption = False,
) -> None:
    """Print a day's note."""
    runtime = open_runtime(ctx, vault)
    try:
        target = parse_date(day, runtime.clock.today()) if day else runtime.clock.today()
    except ValueError as exc:
        raise InvalidInputError(str(exc)) from None
    if as_json:
        emit_json(
            {
                "date": target.isoformat(),
                "path": runtime.journal.path_for(target),
                "sections": runtime.journal.sections(target),
            }
        )
    else:
        emit_raw(runtime.journal.read(target))


@app.command("list")
def list_days(ctx: typer.Context, vault: VaultOption = None, as_json: JsonOption = False) -> None:
    """List the days that have a journal note."""
    days: list[date] = open_runtime(ctx, vault).journal.days()
    if as_json:
        emit_json([d.isoformat() for d in days])
    elif not days:
        say("No journal notes yet.")
    else:
        for day in days:
            say(day.isoformat())
