"""``memvault config show``."""

from __future__ import annotations

import json

import typer

from memvault.cli.common import JsonOption, VaultOption, emit_json, group, root_vault, stdout, table

app = group("Settings: config.toml, MEMVAULT_* variables and flags.")


@app.command("show")
def show(ctx: typer.Context, vault: VaultOption = None, as_json: JsonOption = False) -> None:
    """Print the effective settings and where each came from."""
    from memvault.config import load_settings

    loaded = load_settings(vault or root_vault(ctx))
    rows = loaded.rows()
    if as_json:
        emit_json(
            {
                "config_file": str(loaded.config_file),
                "settings": {
                    key: {"value": value, "source": source} for key, value, source in rows
                },
            }
        )
        return
    cells = [
        [
            key,
            json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else value,
            source,
        ]
        for key, value, source in rows
    ]
    stdout.print(
        table(
            f"Settings (config file: {loaded.config_file})", ["Setting", "Value", "Source"], cells
        )
    )
