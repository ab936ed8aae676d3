"""``memvault tokens create NAME --scope ... | list | revoke NAME``: named API tokens.

Each agent that uses the daemon gets a token of its own, with a scope
(read, remember, write, admin: :mod:`memvault.gateway.tokens`), and what it
stores records its name. With ``--agent A`` the token is bound to the agent A:
what it stores records A, and it sees only A's own memories and sessions.
These commands work on ``state.db`` directly: a
running daemon looks tokens up there on every request, so a new token works,
and a revoked one stops working, at once.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from memvault.cli.common import (
    JsonOption,
    VaultOption,
    emit_json,
    group,
    minute,
    open_runtime,
    say,
    stdout,
    table,
)
from memvault.vocabulary import counted

if TYPE_CHECKING:
    from memvault.gateway.tokens import TokenBook

app = group("Named API tokens: one per agent, each with a scope (read, remember, write, admin).")

TokenName = Annotated[
    str, typer.Argument(metavar="NAME", help="The agent's name, e.g. research-bot.")
]


def _book(ctx: typer.Context, vault: Path | None) -> TokenBook:
    from memvault.gateway.tokens import TokenBook

    return TokenBook(open_runtime(ctx, vault).state)


def _stamp(value: str | None) -> str:
    return minute(value) or "-"


@app.command("create")
def create(
    ctx: typer.Context,
    name: TokenName,
    scope: Annotated[
        list[str],
        typer.Option(
            "--scope",
            "-s",
            help="read, remember, write or admin (repeat or comma-separate; each includes "
            "the ones before it).",
        ),
    ],
    agent: Annotated[
        str | None,
        typer.Option(
            "--agent",
            help="Bind the token to this agent: it sees only the agent's own memories and "
            "sessions, and what it stores records the agent (not the token's name).",
        ),
    ] = None,
    vault: VaultOption = None,
    as_json: JsonOption = False,
) -> None:
    """Create a token; its secret is shown this once (only a hash of it is kept)."""
    from memvault.gateway.tokens import parse_scopes

    token, secret = _book(ctx, vault).create(name, parse_scopes(scope), agent=agent)
    if as_json:
        emit_json({**token.to_dict(), "token": secret})
        return
    bound = f", bound to the agent {token.agent!r}" if token.agent else ""
    say(
        f"Created the token {token.name!r} ({token.scope.label} scope{bound}). "
        "Its secret, shown once:"
    )
    say(secret)
    if token.agent:
        recorded = f"the agent {token.agent!r}, and it sees only that agent's own"
        say(
            f"Send it as 'Authorization: Bearer <token>'; what it stores records {recorded} "
            f"memories and sessions. `memvault tokens revoke {token.name}` ends it."
        )
        return
    say(
        "Send it as 'Authorization: Bearer <token>'; what the agent stores records its "
        f"name. `memvault tokens revoke {token.name}` ends it."
    )


@app.command("list")
def list_tokens(
    ctx: typer.Context,
    include_revoked: Annotated[
        bool, typer.Option("--all", "-a", help="Include revoked tokens.")
    ] = False,
    vault: VaultOption = None,
    as_json: JsonOption = False,
) -> None:
    """List the named tokens: name, scope, when made and last used (never the secrets)."""
    tokens = _book(ctx, vault).list(include_revoked=include_revoked)
    if as_json:
        emit_json([token.to_dict() for token in tokens])
        return
    if not tokens:
        say("No named tokens; create one with `memvault tokens create NAME --scope read`.")
        return
    rows = [
        [
            token.name,
            token.scope.label,
            token.agent or "-",
            _stamp(token.created_at),
            _stamp(token.last_used_at),
            "active" if token.active else f"revoked {_stamp(token.revoked_at)}",
        ]
        for token in tokens
    ]
    stdout.print(
        table(
            counted(len(rows), "token"),
            ["Name", "Scope", "Agent", "Created", "Last used", "State"],
            rows,
        )
    )


@app.command("revoke")
def revoke(
    ctx: typer.Context,
    name: TokenName,
    vault: VaultOption = None,
    as_json: JsonOption = False,
) -> None:
    """Revoke a token: a running daemon refuses it from the next request on."""
    token = _book(ctx, vault).revoke(name)
    if as_json:
        emit_json(token.to_dict())
        return
    say(f"Revoked the token {token.name!r}; it no longer opens the API.")
