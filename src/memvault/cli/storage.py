"""``memvault storage migrate --to postgres|sqlite | status``: where the index and state live.

``migrate`` moves a vault between the backends (:mod:`memvault.backend_migration`):
the index is rebuilt in the target from the vault and takes the source's vectors,
the operational state is copied, and both sides are counted at the end. It works on
the databases directly, so it refuses while a daemon serves the vault.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from memvault.cli.common import (
    JsonOption,
    VaultOption,
    emit_json,
    group,
    root_vault,
    say,
    stdout,
    table,
)
from memvault.cli.progress import INDEX_STAGES, QuietOption, progress
from memvault.errors import ConflictError, InvalidInputError

if TYPE_CHECKING:
    from memvault.backend_migration import MigrationReport
    from memvault.config import LoadedSettings
    from memvault.runtime import Runtime

app = group("Storage backends: move a vault between SQLite and PostgreSQL, show where it lives.")


def _open(ctx: typer.Context, settings: Any, **kwargs: Any) -> Runtime:
    from memvault.runtime import Runtime

    runtime = Runtime.open(settings, **kwargs)
    ctx.call_on_close(runtime.close)
    return runtime


@app.command("migrate")
def migrate(
    ctx: typer.Context,
    to: Annotated[
        str,
        typer.Option("--to", metavar="BACKEND", help="The backend to move to: postgres or sqlite."),
    ],
    replace: Annotated[
        bool,
        typer.Option(
            "--replace", help="Empty the target's index and state first if they hold rows."
        ),
    ] = False,
    quiet: QuietOption = False,
    vault: VaultOption = None,
    as_json: JsonOption = False,
) -> None:
    """Rebuild the index in the other backend and copy the state there; the source stays."""
    from memvault.backend_migration import BACKENDS, VerificationError, target_settings
    from memvault.backend_migration import migrate as run
    from memvault.config import load_settings
    from memvault.gateway.client import find_daemon

    if to not in BACKENDS:
        raise InvalidInputError(f"--to takes postgres or sqlite, not {to!r}.")
    loaded = load_settings(vault or root_vault(ctx))
    settings = loaded.settings
    if settings.storage.backend == to:
        raise InvalidInputError(
            f'The vault is on {to} already ([storage] backend = "{to}"); migrate --to the '
            "other backend."
        )
    source = _open(ctx, settings)
    running = find_daemon(source.vault.root).running
    if running is not None:
        raise ConflictError(
            f"A memvault daemon (pid {running.pid}) serves this vault; stop it with "
            "`memvault serve --stop`, migrate, then start it again."
        )
    target = _open(ctx, target_settings(settings, to), clock=source.clock, embedder=source.embedder)
    with progress("Indexing", quiet=as_json or quiet, stages=INDEX_STAGES) as update:
        report = run(source, target, replace=replace, progress=update, embed_progress=update)
    advice = _advice(report, loaded)
    if as_json:
        emit_json({**report.to_dict(), "next": advice})
    else:
        _show(report)
    if report.differences:
        raise VerificationError(
            f"The {report.target} copy differs from the source in {', '.join(report.differences)}; "
            "look at the counts above and run the migration again with --replace."
        )
    if not as_json:
        say(advice)


def _show(report: MigrationReport) -> None:
    rows = [
        [c.part, c.table, c.source, c.target, "ok" if c.ok else f"expected {c.expected}"]
        for c in report.counts
    ]
    title = f"{report.source} -> {report.target} ({report.target_location})"
    stdout.print(table(title, ["Part", "Table", report.source, report.target, "Check"], rows))
    say(
        f"Copied {report.copied_vectors} vectors from the source and embedded {report.embedded} "
        "chunks anew."
    )


def _advice(report: MigrationReport, loaded: LoadedSettings) -> str:
    """What to change so memvault uses the target: where the backend is set now."""
    origin = loaded.sources.get("storage.backend", "default")
    if origin.startswith("env "):
        where = f"set {origin.removeprefix('env ')}={report.target} where memvault runs"
    else:
        config = loaded.config_file or loaded.settings.vault / ".memvault" / "config.toml"
        where = f'set [storage] backend = "{report.target}" in {config}'
    if report.target == "postgres":
        return (
            f"To use it, {where} and keep {loaded.settings.storage.dsn_env} set wherever "
            "memvault runs; the SQLite files stay as they were."
        )
    return f"To use it, {where}; the PostgreSQL database stays as it was."


@app.command("status")
def status(ctx: typer.Context, vault: VaultOption = None, as_json: JsonOption = False) -> None:
    """Which backend the vault uses, where, at which schema, with how many rows."""
    from memvault.config import load_settings

    settings = load_settings(vault or root_vault(ctx)).settings
    runtime = _open(ctx, settings)
    data = describe(runtime)
    if as_json:
        emit_json(data)
        return
    say(f"Backend: {data['backend']}")
    for name, where in data["location"].items():
        say(f"{name.capitalize()}: {where}")
    schema = ", ".join(f"{k} {v}" for k, v in data["schema"].items())
    say(f"Schema: {schema}")
    rows = [
        [part, name, count]
        for part, counts in data["counts"].items()
        for name, count in counts.items()
    ]
    stdout.print(table(None, ["Part", "Table", "Rows"], rows))


def describe(runtime: Runtime) -> dict[str, Any]:
    """Backend, location (never a password), schema versions and row counts."""
    from memvault.backend_migration import index_counts, state_counts
    from memvault.locations import STATE_DB

    storage = runtime.storage
    if storage is not None:
        return {
            "backend": "postgres",
            "location": {"database": storage.describe()},
            "schema": {"postgres": storage.schema_version},
            "counts": {"state": state_counts(runtime.state), "index": index_counts(runtime.index)},
        }
    state_file = runtime.vault.state_dir / STATE_DB
    index_file = runtime.index.path
    schema: dict[str, Any] = {"index": None, "state": None}
    counts: dict[str, Any] = {"state": {}, "index": {}}
    if index_file.exists():
        with runtime.index.lock:
            schema["index"] = int(runtime.index.conn.execute("PRAGMA user_version").fetchone()[0])
        counts["index"] = index_counts(runtime.index)
    if state_file.exists():
        schema["state"] = int(runtime.state.query("PRAGMA user_version")[0][0])
        counts["state"] = state_counts(runtime.state)
    return {
        "backend": "sqlite",
        "location": {
            "index": str(index_file) + ("" if index_file.exists() else " (not made yet)"),
            "state": str(state_file) + ("" if state_file.exists() else " (not made yet)"),
        },
        "schema": schema,
        "counts": counts,
    }
