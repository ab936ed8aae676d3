"""Where memvault keeps things: the vault folder, and its own files inside ``.memvault/``.

Standard library only: the CLI reads these paths to find a running daemon
before it imports anything heavy.
"""

from __future__ import annotations

import os
from pathlib import Path

VAULT_ENV = "MEMVAULT_VAULT"
DEFAULT_VAULT = Path("~/memvault")
STATE_DIR = ".memvault"

CONFIG_FILE = "config.toml"
STATE_DB = "state.db"
TOKEN_FILE = "token"
APPROVAL_FILE = "approval-token"
DAEMON_FILE = "daemon.json"


def choose_vault(flag: Path | str | None = None) -> Path:
    """The vault folder: the flag, else ``$MEMVAULT_VAULT``, else ``~/memvault``."""
    chosen = flag or os.environ.get(VAULT_ENV) or DEFAULT_VAULT
    return Path(chosen).expanduser().absolute()


def state_dir(vault: Path) -> Path:
    """``<vault>/.memvault``: config, index, state, token; Obsidian ignores it."""
    return vault / STATE_DIR
