"""Finding a running daemon, and talking to it: what the CLI uses for client mode.

The daemon announces itself in ``<vault>/.memvault/daemon.json`` (pid,
host, port). A CLI command that finds a live daemon there sends its request
over loopback with the vault's token instead of loading the index and the
model itself. Standard library only, so a client-mode command starts fast.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import quote, urlencode

from memvault.errors import MemvaultError
from memvault.gateway.security import read_secret
from memvault.locations import DAEMON_FILE, TOKEN_FILE, state_dir

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

    @property
    def connect_host(self) -> str:
        """The address a local client dials."""
        return _CONNECT_TO.get(self.host, self.host)

    @property
    def url(self) -> str:
        """Base URL of the API."""
        host = self.connect_host
        return f"http://[{host}]:{self.port}" if ":" in host else f"http://{host}:{self.port}"


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
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def write_info(vault: Path, info: DaemonInfo) -> None:
    """Announce a daemon (atomically: a reader never sees half a file)."""
    path = info_path(vault)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.write_text(json.dumps(asdict(info), indent=2) + "\n", encoding="utf-8")
    os.replace(temporary, path)


def remove_info(vault: Path, pid: int) -> None:
    """Withdraw the announcement, if it is still this process's."""
    info = read_info(vault)
    if info is not None and info.pid == pid:
        with contextlib.suppress(FileNotFoundError):
            info_path(vault).unlink()


def process_alive(pid: int) -> bool:
    """Whether a process with this id runs (an exited one its parent has not reaped does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True  # no /proc (macOS): the signal test is all there is
    return stat.rpartition(")")[2].split()[:1] != ["Z"]


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
        return self._EXIT_CODES.get(self.status, 1)

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
        """A client for the daemon serving ``vault``, when one is announced and alive."""
        info = read_info(vault)
        if info is None or not process_alive(info.pid):
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
            "Host": f"{self.info.connect_host}:{self.info.port}",
            "Authorization": f"Bearer {self.token}",
            "Accept": "application/json",
            "Connection": "close",
            **(headers or {}),
        }
        payload = b""
        if body is not None:
            payload = json.dumps(body, ensure_ascii=False).encode("utf-8")
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
