"""``memvault service install | uninstall | status``: the daemon started with the computer.

A systemd user unit on Linux, a launchd agent on macOS (:mod:`memvault.gateway.service`),
one per vault, with an environment file beside it for the daemon's secrets.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from memvault.cli.common import JsonOption, VaultOption, emit_json, group, root_vault, say
from memvault.errors import VaultError
from memvault.gateway.service import Outcome, Service, install, plan, status, uninstall
from memvault.locations import choose_vault, is_vault

app = group("Start the daemon with the computer: a systemd user unit or a launchd agent.")

ForceOption = Annotated[
    bool,
    typer.Option("--force", help="Replace or remove the file even if it was edited by hand."),
]


def _service(ctx: typer.Context, vault: Path | None) -> Service:
    folder = choose_vault(vault or root_vault(ctx))
    if not is_vault(folder):
        raise VaultError(
            f"{folder} is not a memvault vault; run `memvault init {folder}` first, "
            "or pass --vault PATH."
        )
    return plan(folder)


def _report(outcome: Outcome, as_json: bool) -> None:
    if as_json:
        emit_json(outcome.as_dict())
    else:
        say(outcome.message)


@app.command("install")
def install_command(
    ctx: typer.Context,
    force: ForceOption = False,
    no_start: Annotated[
        bool,
        typer.Option("--no-start", help="Write the files only; say how to start the service."),
    ] = False,
    vault: VaultOption = None,
    as_json: JsonOption = False,
) -> None:
    """Write the service for the vault and start it (now, and at every login)."""
    _report(install(_service(ctx, vault), force=force, start=not no_start), as_json)


@app.command("uninstall")
def uninstall_command(
    ctx: typer.Context,
    force: ForceOption = False,
    vault: VaultOption = None,
    as_json: JsonOption = False,
) -> None:
    """Stop the vault's service and remove its file (the secrets file is kept)."""
    _report(uninstall(_service(ctx, vault), force=force), as_json)


@app.command("status")
def status_command(
    ctx: typer.Context,
    vault: VaultOption = None,
    as_json: JsonOption = False,
) -> None:
    """Whether the vault's service is installed and running."""
    _report(status(_service(ctx, vault)), as_json)
