"""Finding a running daemon, and talking to it: what the CLI uses for client mode.

The daemon announces itself in ``<vault>/.memvault/daemon.json`` (pid, the
pid's start time, host, port) and holds an exclusive lock on
``.memvault/daemon.lock`` for as long as it runs. A crash leaves the file
behind but not the lock (the kernel drops it with the process), and by then
the pid may belong to any other program: a ``daemon.json`` whose lock is free
is stale and removed, and one whose pid started at another time is not
believed. A CLI command that finds a live daemon sends its request over
loopback with the vault's token instead of loading the index and the model
itself. Standard library only, so a client-mode command starts fast.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import quote, urlencode

from memvault.errors import (
    EXIT_FAILED,
    ConflictError,
    MemvaultError,
    VaultError,
    exit_code_for,
)
from memvault.gateway.security import read_secret
from memvault.locations import (
    DAEMON_FILE,
    DAEMON_LOCK,
    PRIVATE_FILE,
    TOKEN_FILE,
    private_state_dir,
    state_dir,
)
from memvault.processes import process_alive, process_start

# Where a client connects when the daemon listens on every address.
_CONNECT_TO = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}


@dataclass(frozen=True)
class DaemonInfo:
    """What ``daemon.json`` says about the running daemon."""

    pid: int
    host: str
    port: int
    version: str
    started_at: str
    # The pid's start time (clock ticks after boot, from /proc), when the system says.
    process_start: int | None = None

    @property
    def connect_host(self) -> str:
        """The address a local client dials."""
        return _CONNECT_TO.get(self.host, self.host)

    @property
    def url(self) -> str:
        """Base URL of the API."""
        return f"http://{self.authority}"

    @property
    def authority(self) -> str:
        """``host:port`` as a URL and a ``Host`` header write it (IPv6 in brackets)."""
        host = self.connect_host
        return f"[{host}]:{self.port}" if ":" in host else f"{host}:{self.port}"


def info_path(vault: Path) -> Path:
    """``<vault>/.memvault/daemon.json``."""
    return state_dir(vault) / DAEMON_FILE


def read_info(vault: Path) -> DaemonInfo | None:
    """The daemon announced for ``vault``, if the file is there and readable."""
    try:
        data = json.loads(info_path(vault).read_text(encoding="utf-8"))
        return DaemonInfo(
            pid=int(data["pid"]),
            host=str(data["host"]),
            port=int(data["port"]),
            version=str(data.get("version", "")),
            started_at=str(data.get("started_at", "")),
            process_start=_optional_int(data.get("process_start")),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _optional_int(value: Any) -> int | None:
    return None if value is None else int(value)


def write_info(vault: Path, info: DaemonInfo) -> None:
    """Announce a daemon (atomically: a reader never sees half a file; owner-only)."""
    path = info_path(vault)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, PRIVATE_FILE)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        handle.write(json.dumps(asdict(info), indent=2) + "\n")
    os.replace(temporary, path)


def remove_info(vault: Path, pid: int) -> None:
    """Withdraw the announcement, if it is still this process's."""
    info = read_info(vault)
    if info is not None and info.pid == pid:
        with contextlib.suppress(FileNotFoundError):
            info_path(vault).unlink()


def is_process(info: DaemonInfo) -> bool:
    """Whether the process ``info`` names still runs (the same one, not a reused pid)."""
    if not process_alive(info.pid):
        return False
    if info.process_start is None:
        return True
    now = process_start(info.pid)
    return now is None or now == info.process_start


# -- the daemon's lock ---------------------------------------------------------------------

_CLAIM_WAIT = 2.0  # a command checking the lock holds it for microseconds


def lock_path(vault: Path) -> Path:
    """``<vault>/.memvault/daemon.lock``: held by the running daemon, and only by it."""
    return state_dir(vault) / DAEMON_LOCK


class DaemonLock:
    """The lock a daemon holds for its whole life; released by the kernel when it dies."""

    def __init__(self, vault: Path, descriptor: int) -> None:
        self.vault = vault
        self._descriptor: int | None = descriptor

    @classmethod
    def claim(cls, vault: Path, *, wait: float = _CLAIM_WAIT) -> DaemonLock:
        """Take the lock for ``vault``; ConflictError when another daemon holds it."""
        try:
            private_state_dir(state_dir(vault))
            descriptor = os.open(lock_path(vault), os.O_RDWR | os.O_CREAT, PRIVATE_FILE)
        except OSError as exc:
            raise VaultError(f"Cannot create {lock_path(vault)}: {exc.strerror or exc}.") from exc
        deadline = time.monotonic() + wait
        while True:
            try:
                fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return cls(vault, descriptor)
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    os.close(descriptor)
                    raise already_served(vault, read_info(vault)) from None
                time.sleep(0.02)

    @property
    def held(self) -> bool:
        """Whether this process still holds it."""
        return self._descriptor is not None

    def announce(self, info: DaemonInfo) -> None:
        """Write ``daemon.json`` for the daemon holding the lock."""
        write_info(self.vault, info)

    def release(self) -> None:
        """Withdraw the announcement (if it is still this process's), then let go."""
        if self._descriptor is None:
            return
        remove_info(self.vault, os.getpid())
        os.close(self._descriptor)  # closing the descriptor releases the lock
        self._descriptor = None


def already_served(vault: Path, info: DaemonInfo | None) -> ConflictError:
    """The sentence for a second daemon on one vault."""
    where = f" at {info.url} (pid {info.pid})" if info is not None else ""
    return ConflictError(
        f"A daemon already serves {vault}{where}; stop it with `memvault serve --stop`."
    )


@dataclass(frozen=True)
class Sighting:
    """What ``daemon.json`` turned out to be: a running daemon, or a stale file (removed)."""

    running: DaemonInfo | None = None
    stale: DaemonInfo | None = None


def find_daemon(vault: Path) -> Sighting:
    """The daemon serving ``vault``, judged by its lock and its process, not by a pid alone.

    A ``daemon.json`` whose lock no process holds is left from a daemon that
    died: it is removed (while this process holds the lock, so a daemon
    starting meanwhile cannot lose its fresh announcement) and reported as
    stale. One whose pid now names another process is not believed either.
    """
    info = read_info(vault)
    if info is None:
        return Sighting()
    descriptor = _open_lock(lock_path(vault), os.O_RDONLY)
    if descriptor is None:  # missing (no daemon holds it): made here, so it can be held
        descriptor = _open_lock(lock_path(vault), os.O_RDWR | os.O_CREAT)
    if descriptor is None:  # unreadable: the process is all there is to go by
        return Sighting(running=info) if is_process(info) else Sighting()
    try:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:  # a daemon holds it: is it the one announced?
            return Sighting(running=info) if is_process(info) else Sighting()
        current = read_info(vault)
        if current is not None:
            with contextlib.suppress(OSError):
                info_path(vault).unlink()
        return Sighting(stale=current or info)
    finally:
        os.close(descriptor)


def _open_lock(path: Path, flags: int) -> int | None:
    """A descriptor on the lock file; None when it cannot be opened."""
    try:
        return os.open(path, flags, PRIVATE_FILE)
    except OSError:
        return None


def daemon_version_at(host: str, port: int, *, timeout: float = 2.0) -> str | None:
    """The version of the memvault daemon answering at ``host:port``, if one does."""
    info = DaemonInfo(pid=0, host=host, port=port, version="", started_at="")
    try:
        health = DaemonClient(info, "", timeout=timeout).request("GET", "/v1/health")
    except (DaemonUnavailableError, MemvaultError):
        return None
    if isinstance(health, dict) and health.get("status") == "ok" and "version" in health:
        return str(health["version"])
    return None


@dataclass(frozen=True)
class Answer:
    """A successful answer: its result, and the notice that came with it (if any)."""

    result: Any
    notice: str | None = None


class DaemonUnavailableError(Exception):
    """The daemon could not be reached; nothing was sent."""


class RemoteError(MemvaultError):
    """An error the daemon answered with: its code, message and matching exit code."""

    _EXIT_CODES: ClassVar[dict[int, int]] = {400: 2, 403: 2, 404: 3, 409: 4, 503: 5}

    def __init__(self, status: int, code: str, message: str, details: Any = None) -> None:
        hint = details.get("hint") if isinstance(details, dict) else None
        super().__init__(message, hint=hint)
        self.status = status
        self.remote_code = code
        self.remote_details = details

    @property
    def exit_code(self) -> int:  # type: ignore[override]
        """The exit code the same error has in this process; else one by HTTP status."""
        local = exit_code_for(self.remote_code)
        return local if local != EXIT_FAILED else self._EXIT_CODES.get(self.status, EXIT_FAILED)

    @property
    def code(self) -> str:  # type: ignore[override]
        return self.remote_code


class DaemonClient:
    """A connection to the daemon's HTTP API."""

    def __init__(self, info: DaemonInfo, token: str, *, timeout: float = 60.0) -> None:
        self.info = info
        self.token = token
        self.timeout = timeout

    @classmethod
    def discover(cls, vault: Path) -> DaemonClient | None:
        """A client for the daemon serving ``vault``, when one runs (a stale
        ``daemon.json`` is removed on the way)."""
        info = find_daemon(vault).running
        if info is None:
            return None
        token = read_secret(state_dir(vault) / TOKEN_FILE)
        return cls(info, token) if token else None

    def request(
        self,
        method: str,
        path: str,
        *,
        query: dict[str, Any] | None = None,
        body: Any = None,
        headers: dict[str, str] | None = None,
    ) -> Any:
        """Send one request; the envelope's ``result`` on success, RemoteError otherwise.

        Raises DaemonUnavailableError when no connection could be made (nothing was sent).
        """
        return self.send(method, path, query=query, body=body, headers=headers).result

    def send(
        self,
        method: str,
        path: str,
        *,
        query: dict[str, Any] | None = None,
        body: Any = None,
        headers: dict[str, str] | None = None,
    ) -> Answer:
        """Send one request; the result and its notice (keywords only while the model
        loads, say) on success, RemoteError otherwise.

        Raises DaemonUnavailableError when no connection could be made (nothing was sent).
        """
        target = path
        if query:
            pairs = [
                (k, str(v).lower() if isinstance(v, bool) else v)
                for k, values in query.items()
                for v in (values if isinstance(values, list | tuple) else [values])
                if v is not None
            ]
            if pairs:
                target += "?" + urlencode(pairs)
        headers_out = {
            "Host": self.info.authority,
            "Authorization": f"Bearer {self.token}",
            "Accept": "application/json",
            "Connection": "close",
            **(headers or {}),
        }
        payload = b""
        if body is not None:
            # ASCII with \u escapes: text UTF-8 cannot carry (a lone surrogate) still
            # reaches the daemon, which refuses it in the same words as direct mode.
            payload = json.dumps(body).encode("ascii")
            headers_out["Content-Type"] = "application/json"
        headers_out["Content-Length"] = str(len(payload))
        head = f"{method} {target} HTTP/1.1\r\n" + "".join(
            f"{k}: {v}\r\n" for k, v in headers_out.items()
        )
        try:
            connection = socket.create_connection(
                (self.info.connect_host, self.info.port), timeout=self.timeout
            )
        except OSError as exc:
            raise DaemonUnavailableError(str(exc)) from exc
        try:
            with connection:
                connection.sendall(head.encode("latin-1") + b"\r\n" + payload)
                status, raw = read_response(connection)
        except (OSError, ValueError) as exc:
            raise MemvaultError(
                f"The daemon at {self.info.url} stopped answering ({exc}); "
                "check `memvault serve --status`."
            ) from exc
        try:
            envelope = json.loads(raw)
        except ValueError as exc:
            raise MemvaultError(f"The daemon answered {status} with something not JSON.") from exc
        if not isinstance(envelope, dict):
            raise MemvaultError(f"The daemon answered {status} with an unexpected body.")
        if envelope.get("ok") is False:
            error = envelope.get("error") or {}
            raise RemoteError(
                status,
                str(error.get("code", "error")),
                str(error.get("message", f"The daemon answered {status}.")),
                error.get("details"),
            )
        notice = envelope.get("notice")
        return Answer(envelope.get("result", envelope), notice if isinstance(notice, str) else None)


def read_response(connection: socket.socket) -> tuple[int, bytes]:
    """Status and body of one HTTP/1.1 response on a ``Connection: close`` socket.

    A minimal reader for the daemon's own answers (JSON with a
    Content-Length, or chunked): the CLI's start-up budget has no room for
    http.client's imports (the email parser and ssl).
    """
    chunks: list[bytes] = []
    while True:
        chunk = connection.recv(65536)
        if not chunk:
            break
        chunks.append(chunk)
    data = b"".join(chunks)
    head, separator, body = data.partition(b"\r\n\r\n")
    if not separator:
        raise ValueError("incomplete HTTP response")
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit():
        raise ValueError(f"not an HTTP response: {lines[0][:60]!r}")
    fields = {
        name.strip().lower(): value.strip()
        for name, _, value in (line.partition(":") for line in lines[1:])
    }
    if fields.get("transfer-encoding", "").lower() == "chunked":
        body = _unchunk(body)
    elif fields.get("content-length", "").isdigit():
        body = body[: int(fields["content-length"])]
    return int(parts[1]), body


def _unchunk(data: bytes) -> bytes:
    out = bytearray()
    while data:
        size_line, _, rest = data.partition(b"\r\n")
        size = int(size_line.split(b";")[0].strip() or b"0", 16)
        if size == 0:
            break
        out += rest[:size]
        data = rest[size + 2 :]
    return bytes(out)


def path_part(value: str) -> str:
    """A value made safe for one segment (or a vault path) of a URL."""
    return quote(value, safe="/")
