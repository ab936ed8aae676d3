"""Where memvault keeps things: the vault, its files in ``.memvault/``, the model cache.

``.memvault/`` holds the tokens, the index (the vault's text), ``state.db``
(conversation logs) and the daemon's files: it is the owner's alone (0700,
its files 0600), and a looser folder is tightened whenever memvault opens it.

Standard library only: the CLI reads these paths to find a running daemon
before it imports anything heavy.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

VAULT_ENV = "MEMVAULT_VAULT"
MODEL_CACHE_ENV = "MEMVAULT_MODEL_CACHE"
DEFAULT_VAULT = Path("~/memvault")
STATE_DIR = ".memvault"
PRIVATE_DIR = 0o700  # the mode of .memvault/
PRIVATE_FILE = 0o600  # the mode of every file in it

CONFIG_FILE = "config.toml"
STATE_DB = "state.db"
TOKEN_FILE = "token"
APPROVAL_FILE = "approval-token"
DAEMON_FILE = "daemon.json"
DAEMON_LOCK = "daemon.lock"  # held by the running daemon for its whole life
AUTOSTART_LOCK = "autostart.lock"  # held while a command starts a daemon
DAEMON_LOG = "daemon.log"  # output of a daemon a command started
INDEX_DB = "index.db"
# What makes a folder a vault: ``memvault init`` writes the config; vaults made by
# versions before the marker was checked hold at least an index or a state database.
VAULT_MARKERS = (CONFIG_FILE, INDEX_DB, STATE_DB)


def choose_vault(flag: Path | str | None = None) -> Path:
    """The vault folder: the flag, else ``$MEMVAULT_VAULT``, else ``~/memvault``."""
    chosen = flag or os.environ.get(VAULT_ENV) or DEFAULT_VAULT
    return Path(chosen).expanduser().absolute()


def state_dir(vault: Path) -> Path:
    """``<vault>/.memvault``: config, index, state, token; Obsidian ignores it."""
    return vault / STATE_DIR


def is_vault(folder: Path) -> bool:
    """Whether ``folder`` is a vault: ``memvault init`` made it, or an older memvault used it."""
    state = state_dir(folder)
    return any((state / marker).is_file() for marker in VAULT_MARKERS)


def private_state_dir(state: Path) -> Path:
    """``state`` (a vault's ``.memvault``) created owner-only, or tightened to 0700.

    A folder found open to others (made by an older memvault) is tightened
    with everything in it, once. OSError when it cannot be created. A folder
    that is not the user's to change (a read-only or shared vault) keeps its
    mode; ``memvault doctor`` reports it.
    """
    state.mkdir(mode=PRIVATE_DIR, parents=True, exist_ok=True)
    if tighten(state, PRIVATE_DIR):
        for path, _ in loose_modes(state):
            tighten(path, PRIVATE_DIR if path.is_dir() else PRIVATE_FILE)
    return state


def private_file(path: Path) -> Path:
    """``path`` created empty and owner-only when missing, else tightened to 0600.

    OSError when it cannot be created. SQLite gives a database's ``-wal`` and
    ``-shm`` files the database's own mode, so a database made this way keeps
    its journals private too.
    """
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE))
    except FileExistsError:
        tighten(path, PRIVATE_FILE)
    return path


def tighten(path: Path, mode: int = PRIVATE_FILE) -> bool:
    """Take group's and others' access away: whether that was needed and done (quietly
    not where it is not allowed).

    Only bits are removed: the owner's own access is kept as it was, so a
    vault its owner made read-only stays read-only. ``mode`` bounds what is kept.
    """
    try:
        current = stat.S_IMODE(path.lstat().st_mode)
        if current & 0o077 and not path.is_symlink():
            os.chmod(path, current & mode)
            return True
    except OSError:
        pass  # read-only, or another user's: doctor reports it
    return False


def loose_modes(state: Path) -> list[tuple[Path, int]]:
    """Entries of ``state`` (itself included) that group or others may access, with modes."""
    loose: list[tuple[Path, int]] = []
    try:
        entries = [state, *state.rglob("*")]
    except OSError:
        return loose
    for entry in entries:
        try:
            mode = stat.S_IMODE(entry.lstat().st_mode)
        except OSError:
            continue
        if mode & 0o077 and not entry.is_symlink():
            loose.append((entry, mode))
    return loose


def model_cache(configured: Path | str | None = None) -> Path:
    """Where model files memvault derives are kept (shared by every vault of the user).

    The setting ``embedder.model_cache``, else ``$MEMVAULT_MODEL_CACHE``, else
    ``$XDG_CACHE_HOME/memvault/models``, else ``~/.cache/memvault/models``.
    """
    chosen = configured or os.environ.get(MODEL_CACHE_ENV)
    if not chosen:
        base = os.environ.get("XDG_CACHE_HOME") or "~/.cache"
        chosen = Path(base) / "memvault" / "models"
    return Path(chosen).expanduser().absolute()
