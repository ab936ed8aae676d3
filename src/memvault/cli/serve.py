"""``memvault serve`` (the daemon, its status, stopping it) and ``memvault doctor``."""

from __future__ import annotations

import os
import signal
import socket
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from memvault.cli.common import (
    DirectOption,
    JsonOption,
    VaultOption,
    daemon_client,
    emit_json,
    open_runtime,
    root_vault,
    say,
    stderr,
    stdout,
    table,
)
from memvault.errors import MemvaultError
from memvault.vocabulary import counted

if TYPE_CHECKING:
    from memvault.runtime import Runtime

# The daemon may take 2 x server.shutdown_grace_seconds (20 s by default) to drain and wind
# down, and longer on a slow machine; the wait ends the moment it has gone.
_STOP_WAIT = 60.0


def serve(
    ctx: typer.Context,
    host: Annotated[
        str | None,
        typer.Option("--host", help="Address to listen on (default 127.0.0.1: this machine only)."),
    ] = None,
    port: Annotated[
        int | None,
        typer.Option(
            "--port", "-p", min=0, max=65535, help="TCP port (default 8765; 0 picks one)."
        ),
    ] = None,
    status: Annotated[
        bool, typer.Option("--status", help="Say whether a daemon serves the vault, and exit.")
    ] = False,
    stop: Annotated[
        bool, typer.Option("--stop", help="Stop the daemon serving the vault, and exit.")
    ] = False,
    log_format: Annotated[
        str | None, typer.Option("--log-format", help="json (default) or text log lines.")
    ] = None,
    replica: Annotated[
        bool,
        typer.Option(
            "--replica",
            help="Serve as a replica of a primary on the same PostgreSQL database: answer "
            "searches here, forward writes and vault reads to [replica] primary_url.",
        ),
    ] = False,
    primary: Annotated[
        str | None,
        typer.Option(
            "--primary", help="The primary's URL for --replica (overrides [replica] primary_url)."
        ),
    ] = None,
    vault: VaultOption = None,
    as_json: JsonOption = False,
) -> None:
    """Run the daemon: HTTP API, event stream, MCP at /mcp, watcher and backfill.

    With --replica: a read replica of the primary at [replica] primary_url (PostgreSQL
    storage only); its folder holds only its config and token. Stop it with Ctrl-C,
    SIGTERM or `memvault serve --stop`.
    """
    from memvault.locations import choose_vault

    chosen = choose_vault(vault or root_vault(ctx))
    if status:
        _status(chosen, as_json)
        return
    if stop:
        _stop(chosen, as_json)
        return
    if primary is not None and not replica:
        from memvault.errors import InvalidInputError

        raise InvalidInputError("--primary names the primary of a replica; add --replica.")
    _run(ctx, vault, host, port, log_format, replica=replica, primary=primary)


def _status(vault: Path, as_json: bool) -> None:
    from memvault.gateway.client import DaemonClient, DaemonUnavailableError, RemoteError

    client = DaemonClient.discover(vault)
    health: dict[str, Any] | None = None
    if client is not None:
        try:
            health = client.request("GET", "/v1/health")
        except (DaemonUnavailableError, RemoteError, MemvaultError):
            health = None
    role = health.get("role", "primary") if health is not None else "primary"
    if client is None or health is None:
        if as_json:
            emit_json({"running": False, "vault": str(vault)})
        else:
            say(f"No daemon serves {vault}. Start one with `memvault serve`.")
        raise typer.Exit(1)
    info = client.info
    if as_json:
        emit_json(
            {
                "running": True,
                "vault": str(vault),
                "pid": info.pid,
                "url": info.url,
                "version": health.get("version"),
                "uptime_seconds": health.get("uptime_seconds"),
                "role": role,
                "primary_url": health.get("primary_url"),
            }
        )
        return
    uptime = float(health.get("uptime_seconds", 0.0))
    replica = f", a replica of {health.get('primary_url')}" if role == "replica" else ""
    say(
        f"memvault {health.get('version')} serves {vault} at {info.url} "
        f"(pid {info.pid}, up {_duration(uptime)}{replica})."
    )


def _duration(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    if hours:
        return f"{hours}h {minutes}m"
    return f"{minutes}m {secs}s" if minutes else f"{secs}s"


def _stop(vault: Path, as_json: bool) -> None:
    from memvault.gateway.client import find_daemon, is_process

    # Only a process that holds the vault's daemon lock, under the pid and start time
    # daemon.json names, is signalled: never whatever reuses a crashed daemon's pid.
    sighting = find_daemon(vault)
    info = sighting.running
    if info is None:
        stale = sighting.stale
        if as_json:
            emit_json(
                {"stopped": False, "running": False, "stale_pid": stale.pid if stale else None}
            )
        elif stale is not None:
            say(
                f"No daemon serves {vault}; its daemon.json was stale (left by a daemon that "
                f"ended without cleaning up; pid {stale.pid} is not it) and is removed."
            )
        else:
            say(f"No daemon serves {vault}.")
        return
    os.kill(info.pid, signal.SIGTERM)
    deadline = time.monotonic() + _STOP_WAIT
    while is_process(info) and time.monotonic() < deadline:
        time.sleep(0.1)
    if is_process(info):
        raise MemvaultError(
            f"The daemon (pid {info.pid}) is still running after {_STOP_WAIT:.0f}s; "
            f"it may be finishing requests. Check again, or `kill {info.pid}`."
        )
    if as_json:
        emit_json({"stopped": True, "pid": info.pid})
    else:
        say(f"Stopped the daemon (pid {info.pid}).")


def _run(
    ctx: typer.Context,
    vault: Path | None,
    host: str | None,
    port: int | None,
    log_format: str | None,
    *,
    replica: bool = False,
    primary: str | None = None,
) -> None:
    from memvault.errors import InvalidInputError
    from memvault.gateway.client import already_served, find_daemon
    from memvault.gateway.daemon import Daemon
    from memvault.gateway.security import REMOTE_WARNING, check_bind, is_loopback
    from memvault.gateway.server import configure_logging, limit_malloc_arenas, serve
    from memvault.processes import hide_environment

    limit_malloc_arenas()  # before any thread starts
    hide_environment()  # no command run_shell_command runs reads the keys from /proc
    runtime = _replica_runtime(ctx, vault, primary) if replica else open_runtime(ctx, vault)
    server = runtime.settings.server
    host = host or server.host
    port = server.port if port is None else port
    fmt = log_format or server.log_format
    if fmt not in ("json", "text"):
        raise InvalidInputError(f"--log-format is json or text, not {fmt!r}.")
    check_bind(host, allow_remote=server.allow_remote)  # before anything listens
    other = find_daemon(runtime.vault.root).running  # a stale daemon.json is removed
    if other is not None:
        raise already_served(runtime.vault.root, other)
    sock = _bind(host, port)
    try:
        daemon = Daemon(runtime, host=host, port=sock.getsockname()[1], replica=replica)
    except BaseException:
        sock.close()
        raise
    actual_port = sock.getsockname()[1]
    role = f" as a replica of {daemon.primary_url}" if daemon.primary_url else ""
    stderr.print(
        f"memvault serves {runtime.vault.root}{role} at http://{_url_host(host)}:{actual_port} "
        f"(token in {daemon.token_path}; Ctrl-C stops)."
    )
    if not is_loopback(host):
        stderr.print(REMOTE_WARNING.format(host=host, path=daemon.token_path))
    configure_logging(fmt)
    front = None
    if runtime.settings.console.enabled and daemon.primary_url is None:
        from memvault.console import console_front  # the web console: the primary serves it

        front = console_front(daemon)
    serve(daemon, sock, front=front)


def _replica_runtime(ctx: typer.Context, vault: Path | None, primary: str | None) -> Runtime:
    """The services of a replica's folder, once its settings make a replica (PostgreSQL,
    a primary's URL): checked before anything opens, so a wrong setting is one sentence."""
    from memvault.config import load_settings
    from memvault.gateway.replica import primary_url
    from memvault.runtime import Runtime

    overrides = {"replica": {"primary_url": primary}} if primary is not None else None
    settings = load_settings(vault or root_vault(ctx), overrides).settings
    primary_url(settings)
    runtime = Runtime.open(settings)
    ctx.call_on_close(runtime.close)
    return runtime


def _bind(host: str, port: int) -> socket.socket:
    """The listening socket; a port another memvault daemon holds is named as such."""
    from memvault.errors import ConflictError
    from memvault.gateway.client import daemon_version_at
    from memvault.gateway.server import bind

    try:
        return bind(host, port)
    except ConflictError:
        version = daemon_version_at(host, port)
        if version is None:
            raise
        raise ConflictError(
            f"Port {port} on {host} is in use by the memvault daemon of another vault "
            f"(version {version}); choose another with --port."
        ) from None


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def doctor(
    ctx: typer.Context,
    direct: DirectOption = False,
    vault: VaultOption = None,
    as_json: JsonOption = False,
) -> None:
    """Check the vault, index, embedder, disk (and the daemon, when one runs)."""
    from memvault.gateway.client import DaemonUnavailableError, RemoteError

    report: dict[str, Any] | None = None
    where = "daemon"
    client = daemon_client(ctx, vault)
    if client is not None:
        try:
            report = client.request("GET", "/v1/doctor")
        except RemoteError as exc:
            if exc.code != "unhealthy" or not isinstance(exc.remote_details, dict):
                raise
            report = exc.remote_details
        except DaemonUnavailableError:
            report = None
    if report is None:
        from memvault.gateway.doctor import diagnose

        where = "local"
        runtime = open_runtime(ctx, vault, require=False)
        report = diagnose(runtime).to_dict()
    summary = report["summary"]
    if as_json:
        emit_json({**report, "checked_by": where})
    else:
        marks = {"ok": "ok", "warning": "warn", "error": "FAIL"}
        rows = [[marks[c["status"]], c["name"], c["message"]] for c in report["checks"]]
        title = "Checked by the daemon" if where == "daemon" else "Checked locally (no daemon)"
        stdout.print(table(title, ["", "Check", "Result"], rows))
        say(
            f"{summary['passed']} ok, {counted(summary['warnings'], 'warning')}, "
            f"{counted(summary['errors'], 'error')}."
        )
    if summary["errors"]:
        raise typer.Exit(1)
