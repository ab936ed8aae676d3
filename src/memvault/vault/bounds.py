"""Where a vault path really leads: inside the vault, never into its hidden folders.

A path is checked as written by :func:`memvault.vault.paths.normalize_relpath`; a
symlink inside the vault may still lead elsewhere. :class:`VaultBounds` follows it and
refuses, in one sentence, a path whose real location is outside the vault, inside
``.memvault`` (the tokens, config and index) or another hidden folder, a symlink loop,
or longer than the vault's filesystem takes. :class:`memvault.vault.store.Vault`
checks every path it touches here.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from memvault.errors import UnsafePathError
from memvault.locations import STATE_DIR


class VaultBounds:
    """The vault folder's real extent on disk, which every path it touches must stay in."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._path_max_bytes: int | None = None
        self._real_root: str | None = None

    def check(self, path: Path, shown: str) -> None:
        """Refuse a path whose real location is outside the vault, hidden or a symlink loop.

        ``shown`` names the path in the sentence a refusal gives.
        """
        if len(os.fsencode(path)) >= self._path_max():
            raise UnsafePathError(f"Path {shown[:60]!r}... is too long for the vault's filesystem.")
        try:
            real = os.path.realpath(path, strict=True)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise UnsafePathError(
                    f"Path {shown!r} is a symlink loop; fix or remove the link."
                ) from None
            real = os.path.realpath(path)  # not there yet: check where it would be
        real_root = self._resolved_root()
        if not _within(real, real_root):
            raise UnsafePathError(f"Path {shown!r} leads outside the vault through a symlink.")
        real_state = os.path.join(real_root, STATE_DIR)
        if os.path.islink(real_state):
            real_state = os.path.realpath(real_state)
        inside = real[len(real_root) :].strip(os.sep).split(os.sep) if real != real_root else []
        if _within(real, real_state) or (inside and inside[0] == STATE_DIR):
            raise UnsafePathError(
                f"Path {shown!r} leads into {STATE_DIR}, memvault's own folder "
                "(tokens, config, index), which no note may reach."
            )
        hidden = next((part for part in inside if part.startswith(".")), None)
        if hidden is not None:
            raise UnsafePathError(
                f"Path {shown!r} leads through a symlink to the hidden name {hidden!r}, "
                "and hidden files and folders are not notes."
            )

    def _resolved_root(self) -> str:
        """The vault folder's real location, found once it exists: a path is checked
        against where the vault was, so a root moved under a running process refuses
        paths rather than following it."""
        if self._real_root is not None:
            return self._real_root
        real = os.path.realpath(self.root)
        if os.path.isdir(real):
            self._real_root = real
        return real

    def _path_max(self) -> int:
        """The longest path the vault's filesystem takes, in bytes (4096 on Linux)."""
        if self._path_max_bytes is None:
            try:
                self._path_max_bytes = os.pathconf(self.root, "PC_PATH_MAX")
            except (OSError, ValueError):
                return 4096  # the vault is not there yet: ask again later
        return self._path_max_bytes


def _within(path: str, folder: str) -> bool:
    """Whether the real path ``path`` is ``folder`` or inside it."""
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)
