"""``memvault ui``: a one-time link that signs a browser in to the console the daemon serves.

The link's code works once, for ``[console] link_minutes``; the browser trades
it for a session cookie and never sees a token. The console has the scope of
the token the link was asked with (the owner's, or ``--token`` a named one:
a read token opens a read-only console). ``--revoke`` ends every console
session and every unused link.
"""

from __future__ import annotations

import os
import sys
from typing import Annotated

import typer

from memvault.cli.common import JsonOption, VaultOption, emit_json, root_vault, say
from memvault.errors import VaultError
from memvault.vocabulary import counted


def ui(
    ctx: typer.Context,
    revoke: Annotated[
        bool, typer.Option("--revoke", help="End every console session and unused link.")
    ] = False,
    token: Annotated[
        str | None,
        typer.Option(
            "--token",
            envvar="MEMVAULT_UI_TOKEN",
            help="Open the console with this named token's scope (default: the owner's).",
            show_default=False,
        ),
    ] = None,
    open_browser: Annotated[
        bool | None,
        typer.Option(
            "--open/--no-open",
            help="Open the link in a browser (default: when a desktop is there).",
            show_default=False,
        ),
    ] = None,
    vault: VaultOption = None,
    as_json: JsonOption = False,
) -> None:
    """Print a one-time link to the web console (or end its sessions with --revoke)."""
    from memvault.gateway.client import DaemonClient, DaemonUnavailableError
    from memvault.locations import choose_vault

    root = choose_vault(vault or root_vault(ctx))
    client = DaemonClient.discover(root)
    if client is None:
        raise VaultError(
            f"No daemon serves {root}; the console is the daemon's: start it with "
            "`memvault serve`, then run `memvault ui` again."
        )
    if token:
        client = DaemonClient(client.info, token.strip())
    try:
        if revoke:
            ended = client.request("DELETE", "/v1/console/sessions")["ended"]
            if as_json:
                emit_json({"ended": ended})
            else:
                say(f"Ended {counted(ended, 'console session')}; unused links no longer work.")
            return
        link = client.request("POST", "/v1/console/links")
    except DaemonUnavailableError:
        raise VaultError(
            f"The daemon of {root} did not answer; is `memvault serve` still running?"
        ) from None
    if as_json:
        emit_json(link)
        return
    minutes = max(round(link["expires_in_seconds"] / 60), 1)
    say(link["url"])
    say(
        f"Open it within {minutes} min (it works once); the console has the "
        f"{link['scope']} scope. `memvault ui --revoke` signs every browser out."
    )
    if open_browser if open_browser is not None else _desktop():
        import webbrowser

        webbrowser.open(link["url"])


def _desktop() -> bool:
    """Whether a browser can be opened here (a graphical session, or macOS / Windows)."""
    if sys.platform in ("darwin", "win32"):
        return True
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))
