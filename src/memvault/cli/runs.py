"""``memvault runs list | show ID``: the agent runs record, what each run was given.

Each run of the agent (``ask`` and ``chat``, a channel's message, the API, a
job that asks the model) is kept for ``[agent] runs_keep_days``
(:mod:`memvault.memory.runs`): ``list`` shows the newest first, ``show`` one
run's context section by section (with what the token budget left out), the
memories it recalled with their scores, and its tool calls. With a daemon
serving the vault both ask it (``/v1/runs``); without one they read state.db.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from memvault.cli.common import (
    DirectOption,
    JsonOption,
    VaultOption,
    emit_json,
    group,
    minute,
    open_runtime,
    say,
    stdout,
    table,
    via_daemon,
)
from memvault.memory.runs import LISTED
from memvault.text import one_line
from memvault.vocabulary import counted

app = group("The agent runs record: what each run was given, recalled and called.")


def _where(run: dict[str, Any]) -> str:
    parts = [run["surface"]]
    if run["channel"] and run["channel"] != run["surface"]:
        parts.append(run["channel"])
    if run["sender"]:
        parts.append(run["sender"])
    return " · ".join(parts)


@app.command("list")
def list_runs(
    ctx: typer.Context,
    session: Annotated[
        int | None,
        typer.Option("--session", min=1, metavar="ID", help="Only this session's runs (its id)."),
    ] = None,
    channel: Annotated[
        str | None, typer.Option("--channel", help="Only runs from this channel, e.g. telegram.")
    ] = None,
    limit: Annotated[
        int, typer.Option("--limit", "-n", min=1, max=1000, help="Show at most N (newest).")
    ] = LISTED,
    direct: DirectOption = False,
    vault: VaultOption = None,
    as_json: JsonOption = False,
) -> None:
    """The newest agent runs first: where each came from, what it was asked, how it ended."""
    query = {"session_id": session, "channel": channel, "limit": limit}
    runs = via_daemon(ctx, vault, "GET", "/v1/runs", query=query)
    if runs is None:
        found = open_runtime(ctx, vault).runs.list(session_id=session, channel=channel, limit=limit)
        runs = [r.to_listed_dict() for r in found]
    if as_json:
        emit_json(runs)
        return
    if not runs:
        say("No agent runs are recorded (yet, or within [agent] runs_keep_days).")
        return
    rows = [
        [
            str(r["id"]),
            minute(r["started_at"]),
            _where(r),
            r["status"],
            one_line(r["command"], 50),
            one_line(r["error"] or r["summary"], 50),
        ]
        for r in runs
    ]
    stdout.print(
        table(
            counted(len(rows), "agent run"),
            ["ID", "Started", "From", "Status", "Asked", "Outcome"],
            rows,
        )
    )
    say("See what one was given with `memvault runs show ID`.")


@app.command("show")
def show(
    ctx: typer.Context,
    run_id: Annotated[int, typer.Argument(metavar="ID", min=1, help="The run's id (runs list).")],
    direct: DirectOption = False,
    vault: VaultOption = None,
    as_json: JsonOption = False,
) -> None:
    """One run: its context section by section (and what the budget left out), the memories
    it recalled with their scores, its tool calls."""
    run = via_daemon(ctx, vault, "GET", f"/v1/runs/{run_id}")
    if run is None:
        run = open_runtime(ctx, vault).runs.get(run_id).to_dict()
    if as_json:
        emit_json(run)
        return
    _print_run(run)


def _print_run(run: dict[str, Any]) -> None:
    say(f"Run {run['id']}: {run['status']}, {minute(run['started_at'])}, from {_where(run)}.")
    say(f"Asked: {run['command']}")
    if run["error"]:
        say(f"Error: {run['error']}")
    elif run["summary"]:
        say(f"Outcome: {run['summary']}")
    if run["model"]:
        used = f"{run['input_tokens'] or 0} in, {run['output_tokens'] or 0} out"
        say(f"Model: {run['model']} ({used}; {counted(run['iterations'], 'step')})")
    context = run["context"] or {}
    if context.get("budget_tokens"):
        say(f"Context: {context.get('tokens')} of {context['budget_tokens']} tokens.")
    if context.get("notice"):
        say(context["notice"])
    for section in context.get("sections", []):
        say("")
        say(f"## {section['title']}")
        for line in section["shown"]:
            say(f"  {line}")
        if section["left_out_count"]:
            say(f"  (left out for the budget: {counted(section['left_out_count'], 'line')})")
            for line in section["left_out"]:
                say(f"  - {line}")
    if run["recalled"]:
        say("")
        rows = [
            [
                h["id"] or h["path"],
                f"{h['score']:.3f}",
                f"{h['text_score']:.3f}",
                f"{h['vector_score']:.3f}",
                "yes" if h["shown"] else "left out",
                one_line(h["line"], 60),
            ]
            for h in run["recalled"]
        ]
        stdout.print(
            table(
                f"Recalled: {counted(len(rows), 'hit')}",
                ["Memory", "Score", "Keywords", "Meaning", "In context", "Line"],
                rows,
            )
        )
    for call in run["tool_calls"]:
        say("")
        outcome = "ok" if call["ok"] else f"failed ({call['code']})"
        say(f"Tool call {call['name']}: {outcome}")
        say(f"  arguments: {one_line(call['arguments'], 200)}")
        say(f"  result: {one_line(call['result'], 200)}")
