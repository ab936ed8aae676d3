"""What the filesystem's refusals mean to a user: one sentence, never a traceback.

An OSError on a vault path (a file where a folder should be, no permission, a full
disk, a name too long ...) and a path that holds no regular file (a folder, a named
pipe, a socket, a device where a note should be) become the :class:`MemvaultError`
that says so in one sentence, with the path as the vault names it. The vault's file
operations (:mod:`memvault.vault.store`, :mod:`memvault.vault.disk`) raise these.
"""

from __future__ import annotations

import errno
import os
import stat as stat_mode
from pathlib import Path

from memvault.errors import (
    ConflictError,
    InvalidInputError,
    MemvaultError,
    NotFoundError,
    UnsafePathError,
    VaultError,
)
from memvault.vault.paths import normalize_relpath


def explain(exc: OSError, root: Path, relpath: str, doing: str) -> MemvaultError:
    """The MemvaultError an OSError on ``relpath`` (in the vault at ``root``) stands for
    (``doing``: 'read', ...)."""
    clean = normalize_relpath(relpath, allow_root=True) or "the vault root"
    code = exc.errno
    if code in (errno.ENOTDIR, errno.EEXIST):
        blocker = _file_in_the_way(root, clean)
        if blocker is not None:
            kind = "a note" if blocker.lower().endswith(".md") else "a file"
            return InvalidInputError(
                f"{blocker} is {kind}, not a folder, so {clean} cannot be inside it."
            )
    if code in (errno.ENOENT, errno.ENOTDIR):  # no file in the way: nothing is there
        return NotFoundError(f"No note at {clean}.")
    if code == errno.EEXIST:
        return ConflictError(f"{clean} already exists; choose another name.")
    if code == errno.ELOOP:
        return UnsafePathError(f"Path {clean!r} is a symlink loop; fix or remove the link.")
    if code == errno.EISDIR:
        return InvalidInputError(f"{clean} is a folder, not a note.")
    if code == errno.ENOTEMPTY:
        return InvalidInputError(f"Folder {clean} is not empty.")
    if code == errno.ENAMETOOLONG:
        return UnsafePathError(f"Path {clean!r} is too long for the vault's filesystem.")
    if code == errno.ENXIO:  # opening a socket
        return InvalidInputError(f"{clean} is not a regular file, so memvault cannot use it.")
    if code in (errno.EACCES, errno.EPERM):
        return VaultError(
            f"Permission denied: memvault cannot {doing} {clean}; "
            "check the permissions of the vault's files and folders."
        )
    if code == errno.EROFS:
        return VaultError(f"The vault is on a read-only filesystem; cannot {doing} {clean}.")
    if code in (errno.ENOSPC, errno.EDQUOT):
        return VaultError(f"No space left for the vault; cannot {doing} {clean}.")
    return VaultError(f"Cannot {doing} {clean}: {exc.strerror or exc}.")


def _file_in_the_way(root: Path, clean: str) -> str | None:
    """The first folder of ``clean``'s parents that exists as a file, if any."""
    parts = clean.split("/")[:-1]
    for depth in range(1, len(parts) + 1):
        prefix = "/".join(parts[:depth])
        try:
            mode = os.stat(root / prefix).st_mode
        except OSError:
            return None
        if not stat_mode.S_ISDIR(mode):
            return prefix
    return None


def not_regular(clean: str, mode: int) -> InvalidInputError:
    """The refusal of what is at ``clean`` when its ``mode`` is not a regular file's."""
    if stat_mode.S_ISFIFO(mode):
        kind = "a named pipe"
    elif stat_mode.S_ISSOCK(mode):
        kind = "a socket"
    elif stat_mode.S_ISCHR(mode) or stat_mode.S_ISBLK(mode):
        kind = "a device"
    else:
        kind = "a special file"
    return InvalidInputError(
        f"{clean} is not a regular file but {kind}; memvault only reads and writes regular files."
    )


def require_regular(mode: int, clean: str) -> None:
    """Refuse a folder, a named pipe, a socket or a device where a note should be."""
    if stat_mode.S_ISDIR(mode):
        raise InvalidInputError(f"{clean} is a folder, not a note.")
    if not stat_mode.S_ISREG(mode):
        raise not_regular(clean, mode)
