"""Running the daemon: uvicorn on a bound socket, JSON logs, a clean shutdown.

On SIGTERM or SIGINT the server stops accepting connections, event streams
end, in-flight requests finish (up to ``server.shutdown_grace_seconds``),
the background threads stop and the databases close; then the process exits
0. Every write a client saw acknowledged is on disk by then, because writes
are acknowledged only after the vault file is written.

A thread still busy after that (the model still loading, a request stuck on
a silent model) neither holds the exit up nor meets the interpreter's
finalisation: see :mod:`memvault.shutdown`.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import signal
import socket
import sys
import threading
from datetime import UTC, datetime
from types import FrameType

import uvicorn
from pythonjsonlogger.json import JsonFormatter

from memvault import __version__
from memvault.errors import ConflictError, VaultError
from memvault.gateway.app import WebFront, create_app
from memvault.gateway.client import DaemonInfo
from memvault.gateway.daemon import Daemon
from memvault.processes import process_start
from memvault.shutdown import EXIT_GRACE, leave_cleanly

log = logging.getLogger("memvault.gateway")

_M_ARENA_MAX = -8  # glibc's mallopt() parameter number


def limit_malloc_arenas(count: int = 2) -> None:
    """Ask glibc's malloc for at most ``count`` arenas; elsewhere nothing happens.

    Each thread of the daemon (request handlers, the model's workers, the
    backfill) otherwise gets arenas of its own that keep what it freed:
    bench/daemon.py measured about 30 MB less resident with two. Call it
    before threads start. ``MALLOC_ARENA_MAX`` in the environment wins.
    """
    if not sys.platform.startswith("linux") or "MALLOC_ARENA_MAX" in os.environ:
        return
    with contextlib.suppress(OSError, AttributeError):  # AttributeError: not glibc
        ctypes.CDLL(None).mallopt(_M_ARENA_MAX, count)


def configure_logging(fmt: str, level: int = logging.INFO) -> None:
    """Log lines on stderr: one JSON object each (``json``) or plain text."""
    handler = logging.StreamHandler(sys.stderr)
    handler.addFilter(_drop_color)
    if fmt == "json":
        handler.setFormatter(
            JsonFormatter(
                "{levelname}{name}{message}",
                style="{",
                timestamp="time",
                rename_fields={"levelname": "level", "name": "logger"},
            )
        )
    else:
        handler.setFormatter(TextFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for name in ("uvicorn", "uvicorn.error"):
        logging.getLogger(name).handlers.clear()
        logging.getLogger(name).propagate = True
    logging.getLogger("uvicorn.access").disabled = True  # AccessLog logs requests
    logging.getLogger("watchfiles").setLevel(logging.WARNING)  # one line per change otherwise


# Attributes every LogRecord has; anything else was passed as ``extra``.
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message",
    "asctime",
}


class TextFormatter(logging.Formatter):
    """A plain line, then the record's structured fields as ``key=value``."""

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        fields = {k: v for k, v in vars(record).items() if k not in _STANDARD}
        if fields:
            line += " " + " ".join(f"{k}={v}" for k, v in fields.items())
        return line


def _drop_color(record: logging.LogRecord) -> bool:
    """uvicorn attaches a terminal-coloured copy of some messages; the log needs one."""
    record.__dict__.pop("color_message", None)
    return True


def bind(host: str, port: int) -> socket.socket:
    """A listening socket, or a clear error when the address is taken or invalid."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise VaultError(f"Cannot listen on {host!r}: {exc.strerror}.") from exc
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
    except OSError as exc:
        sock.close()
        if exc.errno in (98, 48):  # EADDRINUSE on Linux / macOS
            raise ConflictError(
                f"Port {port} on {host} is in use; choose another with --port."
            ) from exc
        raise VaultError(f"Cannot listen on {host}:{port}: {exc.strerror}.") from exc
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


class DaemonServer(uvicorn.Server):
    """uvicorn, plus: announce the daemon once bound; end event streams on shutdown."""

    def __init__(self, config: uvicorn.Config, daemon: Daemon) -> None:
        super().__init__(config)
        self.daemon = daemon
        # Set once daemon.json names this daemon (uvicorn's `started` comes a moment
        # before): from then on a client finds it.
        self.announced = threading.Event()

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.should_exit or not sockets:
            return
        host, port = sockets[0].getsockname()[:2]
        self.daemon.port = int(port)
        self.daemon.lock.announce(
            DaemonInfo(
                pid=os.getpid(),
                host=self.daemon.host,
                port=int(port),
                version=__version__,
                started_at=datetime.now(UTC).isoformat(timespec="seconds"),
                process_start=process_start(os.getpid()),
            )
        )
        self.announced.set()
        log.info(
            "memvault daemon listening",
            extra={"host": host, "port": port, "vault": str(self.daemon.runtime.vault.root)},
        )

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        self.daemon.begin_shutdown()
        super().handle_exit(sig, frame)


def serve(daemon: Daemon, sock: socket.socket, *, front: WebFront | None = None) -> None:
    """Serve until a signal asks to stop; returns after a clean shutdown (or ends the
    process, status 0, when a thread is still busy: see :func:`leave_cleanly`). ``front``:
    pages served beside the API (the console)."""
    settings = daemon.runtime.settings.server
    config = uvicorn.Config(
        create_app(daemon, front=front),
        log_config=None,
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=int(settings.shutdown_grace_seconds),
        timeout_keep_alive=5,
        server_header=False,
    )
    try:
        run_until_stopped(DaemonServer(config, daemon), sock)
    finally:
        daemon.lock.release()  # when the app never started, its shutdown did not either
    leave_cleanly("memvault daemon stopped", grace=min(settings.shutdown_grace_seconds, EXIT_GRACE))
    log.info("memvault daemon stopped")


def run_until_stopped(server: uvicorn.Server, sock: socket.socket) -> None:
    """Run ``server`` on the bound ``sock`` until SIGTERM or SIGINT, which end it cleanly."""
    # uvicorn re-raises the stop signal once it is done; these handlers take it then,
    # so the process exits normally (status 0) instead of dying of the signal.
    previous = {sig: signal.signal(sig, _absorb) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        server.run(sockets=[sock])
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        sock.close()


def _absorb(_signum: int, _frame: FrameType | None) -> None:
    """A stop signal arriving after uvicorn handled it: nothing more to do."""
