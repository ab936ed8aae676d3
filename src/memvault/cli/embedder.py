"""``memvault embedder status`` and ``memvault embedder prepare``: the local model's ONNX file.

``make install`` runs ``prepare`` once, so no first search or index waits for
the export; without it the first use exports the file itself.
"""

from __future__ import annotations

import typer

from memvault.cli.common import JsonOption, VaultOption, emit_json, group, root_vault, say
from memvault.cli.progress import QuietOption, spinner

app = group("The local embedding model: how it runs, and its ONNX file.")


def _megabytes(size: int) -> str:
    return f"{size / 1_000_000:.1f} MB"


@app.command("status")
def status(ctx: typer.Context, vault: VaultOption = None, as_json: JsonOption = False) -> None:
    """Show the local model's runtime and whether its ONNX file is ready."""
    from memvault.config import load_settings
    from memvault.index.local_model import PREPARE_COMMAND, ModelFile, configured_model

    settings = load_settings(vault or root_vault(ctx)).settings.embedder
    state = ModelFile(settings.model_cache, configured_model(settings)).status()
    if as_json:
        emit_json({"provider": settings.provider, "runtime": settings.runtime, **state.to_dict()})
        return
    say(f"Embedder: {settings.provider}; the local model runs on {settings.runtime}.")
    if state.ready:
        say(f"ONNX file: {state.path} ({_megabytes(state.size_bytes)}), ready.")
    else:
        say(f"ONNX file: {state.path} is not prepared yet; run `{PREPARE_COMMAND}`.")
    if settings.provider != "local":
        say("The configured embedder is not the local model, so neither is used now.")


@app.command("prepare")
def prepare(
    ctx: typer.Context,
    quiet: QuietOption = False,
    vault: VaultOption = None,
    as_json: JsonOption = False,
) -> None:
    """Export the local model to ONNX if it is missing or damaged, and check that it loads."""
    from memvault.config import load_settings
    from memvault.index.local_model import ModelFile, configured_model

    settings = load_settings(vault or root_vault(ctx)).settings.embedder
    model_file = ModelFile(settings.model_cache, configured_model(settings))
    exporting = f"Exporting the local model to {model_file.path} (once, a few seconds)"
    with spinner(exporting, quiet=as_json or quiet or model_file.status().ready):
        done = model_file.prepare()
    if as_json:
        emit_json(done.to_dict())
        return
    size = _megabytes(done.size_bytes)
    if done.exported:
        say(f"Prepared {done.path} ({size}) in {done.seconds:.1f} s.")
    else:
        say(f"Already prepared: {done.path} ({size}) loads in {done.seconds:.2f} s.")
