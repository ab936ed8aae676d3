"""The daemon's secrets (the API token and the approval token) and where it may listen.

Both secrets live in ``<vault>/.memvault/`` with mode 0600, created at the
daemon's first start. The API token lets a local process use the API at all
(named tokens, :mod:`memvault.gateway.tokens`, let other agents in with less);
the approval token, sent as ``X-Memvault-Approval``, is the owner's consent
to a tier-2 or tier-3 tool call. Standard library only: the CLI reads the
token before it imports anything heavy.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

from memvault.errors import ConfigError
from memvault.locations import PRIVATE_FILE, private_state_dir

TOKEN_BYTES = 32
LOOPBACK_HOSTS = ("127.0.0.1", "::1", "localhost")
REMOTE_WARNING = (
    "Listening on {host}: other machines can reach this API, and it speaks plain HTTP. "
    "Put TLS in front of it (a reverse proxy such as Caddy or nginx; docs/security.md shows one), "
    "and give each agent a named token (memvault tokens create) rather than the token in {path}."
)


def is_loopback(host: str) -> bool:
    """Whether ``host`` is reached from this machine only."""
    return host in LOOPBACK_HOSTS or host.startswith("127.")


def check_bind(host: str, *, allow_remote: bool) -> None:
    """Refuse to listen where other machines reach the API unless the owner chose it
    (``[server] allow_remote = true``): a ConfigError saying how."""
    if is_loopback(host) or allow_remote:
        return
    raise ConfigError(
        f"Listening on {host} would let other machines reach this vault's API; set "
        "allow_remote = true under [server] in the vault's config to mean it (and put TLS "
        "in front), or listen on 127.0.0.1."
    )


def read_secret(path: Path) -> str | None:
    """The secret in ``path``, or None when the file is missing, empty or unreadable."""
    try:
        value = path.read_text(encoding="utf-8").strip()
    except OSError:
        return None
    return value or None


def ensure_secret(path: Path) -> str:
    """The secret in ``path``; a new random one (mode 0600) when there is none yet."""
    existing = read_secret(path)
    if existing is not None:
        return existing
    import secrets  # here, not at the top: the CLI's client mode only reads secrets

    private_state_dir(path.parent)
    value = secrets.token_urlsafe(TOKEN_BYTES)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE)
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            handle.write(value + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        # A link, not a rename: if another process created it first, its token wins.
        with contextlib.suppress(FileExistsError):
            os.link(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)
    return read_secret(path) or value


def loose_permissions(path: Path) -> int | None:
    """The file's mode when group or others may access it, else None."""
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except OSError:
        return None
    return mode if mode & 0o077 else None


def matches(given: str | None, secret: str) -> bool:
    """Constant-time comparison of a presented secret."""
    import hmac

    return given is not None and hmac.compare_digest(given.encode(), secret.encode())


def bearer(authorization: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header."""
    if not authorization:
        return None
    scheme, _, value = authorization.strip().partition(" ")
    return value.strip() or None if scheme.lower() == "bearer" else None
