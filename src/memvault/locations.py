"""Where memvault keeps things: the vault, its files in ``.memvault/``, the model cache.

Standard library only: the CLI reads these paths to find a running daemon
before it imports anything heavy.
"""

from __future__ import annotations

import os
from pathlib import Path

VAULT_ENV = "MEMVAULT_VAULT"
MODEL_CACHE_ENV = "MEMVAULT_MODEL_CACHE"
DEFAULT_VAULT = Path("~/memvault")
STATE_DIR = ".memvault"

CONFIG_FILE = "config.toml"
STATE_DB = "state.db"
TOKEN_FILE = "token"
APPROVAL_FILE = "approval-token"
DAEMON_FILE = "daemon.json"
DAEMON_LOCK = "daemon.lock"  # held while a command starts a daemon
DAEMON_LOG = "daemon.log"  # output of a daemon a command started


def choose_vault(flag: Path | str | None = None) -> Path:
    """The vault folder: the flag, else ``$MEMVAULT_VAULT``, else ``~/memvault``."""
    chosen = flag or os.environ.get(VAULT_ENV) or DEFAULT_VAULT
    return Path(chosen).expanduser().absolute()


def state_dir(vault: Path) -> Path:
    """``<vault>/.memvault``: config, index, state, token; Obsidian ignores it."""
    return vault / STATE_DIR


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
