"""Folders outside the vault that the shell and the file bridge may use.

The owner lists them (``allowed_folders`` under ``[tools.shell]`` and
``[tools.files]``); a path is checked by its real location, symlinks
followed, so a link inside an allowed folder cannot lead out of it.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from memvault.errors import InvalidInputError
from memvault.vault.store import Vault


def allowed_folders(folders: Iterable[Path], section: str) -> list[str]:
    """The real paths of ``section``'s allowed folders; none is a refusal naming the setting."""
    real: list[str] = []
    for folder in folders:
        expanded = folder.expanduser()
        if not expanded.is_absolute():
            raise InvalidInputError(
                f"[{section}] allowed_folders holds {str(folder)!r}, which is not an absolute "
                "path; the owner should write it in full (~ is fine)."
            )
        real.append(os.path.realpath(expanded))
    if not real:
        raise InvalidInputError(
            f"No folder is allowed yet: the owner sets allowed_folders under [{section}] "
            "in the vault's config."
        )
    return real


def within(path: str, folder: str) -> bool:
    """Whether the real path ``path`` is ``folder`` or inside it."""
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def outside_vault(real: str, vault: Vault, shown: str) -> None:
    """Refuse a real path inside the vault: the vault's files go through the vault tools."""
    if within(real, os.path.realpath(vault.root)):
        raise InvalidInputError(
            f"{shown} is inside the vault; use the vault tools (vault_read, vault_write, "
            "vault_move) for the vault's own files."
        )


def confined(real: str, folders: list[str], section: str, shown: str) -> None:
    """Refuse a real path outside ``section``'s allowed folders."""
    if not any(within(real, folder) for folder in folders):
        raise InvalidInputError(
            f"{shown} is outside the allowed folders ([{section}] allowed_folders: "
            f"{', '.join(folders)}); symlinks are followed before this check."
        )
