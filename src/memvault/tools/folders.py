"""Folders outside the vault that the shell and the file bridge may use.

The owner lists them (``allowed_folders`` under ``[tools.shell]`` and
``[tools.files]``). The shell checks a working folder by its real location,
symlinks followed: it only chooses where a command starts.

The file bridge opens what it reads and writes, so it must not check a path
and then use it by name: another process could swap a symlink in between.
It walks from an opened allowed folder down, one component at a time,
relative to the folder opened before and following no symlink
(:func:`folder_of`), then judges what it opened by its descriptor: whether
it lies in the vault (:func:`outside_vault`, up the ``..`` entries, which no
symlink can stand in for).
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterable, Iterator
from pathlib import Path

from memvault.errors import InvalidInputError, MemvaultError, NotFoundError, VaultError
from memvault.vault.store import Vault

_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
_BELOW = _FOLDER | os.O_NOFOLLOW
# Walking up needs no read permission on the folders above, where the system has O_PATH.
_UP = getattr(os, "O_PATH", os.O_RDONLY) | os.O_DIRECTORY | os.O_CLOEXEC


def _configured(folders: Iterable[Path], section: str) -> list[Path]:
    """``section``'s allowed folders as written (``~`` expanded); none is a refusal."""
    expanded = [folder.expanduser() for folder in folders]
    for folder in expanded:
        if not folder.is_absolute():
            raise InvalidInputError(
                f"[{section}] allowed_folders holds {str(folder)!r}, which is not an absolute "
                "path; the owner should write it in full (~ is fine)."
            )
    if not expanded:
        raise InvalidInputError(
            f"No folder is allowed yet: the owner sets allowed_folders under [{section}] "
            "in the vault's config."
        )
    return expanded


def allowed_folders(folders: Iterable[Path], section: str) -> list[str]:
    """The real paths of ``section``'s allowed folders; none is a refusal naming the setting."""
    return [os.path.realpath(folder) for folder in _configured(folders, section)]


def within(path: str, folder: str) -> bool:
    """Whether the real path ``path`` is ``folder`` or inside it."""
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def confined(real: str, folders: list[str], section: str, shown: str) -> None:
    """Refuse a real path outside ``section``'s allowed folders."""
    if not any(within(real, folder) for folder in folders):
        raise InvalidInputError(
            f"{shown} is outside the allowed folders ([{section}] allowed_folders: "
            f"{', '.join(folders)}); symlinks are followed before this check."
        )


# -- opening below an allowed folder ------------------------------------------------------


def symlink_refusal(shown: str) -> InvalidInputError:
    """The refusal of a path that is, or passes through, a symlink."""
    return InvalidInputError(
        f"{shown} is or passes through a symlink, and the file bridge follows none (a link "
        "could lead outside the allowed folders); give the path of the file itself."
    )


def os_refusal(exc: OSError, shown: str, doing: str) -> MemvaultError:
    """One sentence for a failed system call on ``shown``."""
    if exc.errno == errno.ELOOP:
        return symlink_refusal(shown)
    if exc.errno in (errno.EACCES, errno.EPERM):
        return VaultError(f"Permission denied: memvault cannot {doing} {shown}.")
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return VaultError(f"No space left to {doing} {shown}.")
    if exc.errno == errno.EISDIR:
        return InvalidInputError(f"{shown} is a folder; give the path of a file.")
    return VaultError(f"Cannot {doing} {shown}: {exc.strerror or exc}.")


@contextlib.contextmanager
def folder_of(path: Path, folders: Iterable[Path], section: str) -> Iterator[tuple[int, str]]:
    """The opened folder that holds the absolute ``path``, and the name of ``path`` in it.

    ``path`` must lie, as written (``..`` taken away lexically), in one of ``section``'s
    allowed folders, as configured or as its real path. From there every folder is opened
    relative to the one above it with ``O_NOFOLLOW``: a symlink below the allowed folder,
    there from the start or swapped in by another process, is refused, never followed.
    The descriptor is closed when the block ends.
    """
    shown = str(path)
    wanted = os.path.normpath(path)
    configured = _configured(folders, section)
    forms = [os.path.normpath(folder) for folder in configured]
    for folder in configured:
        with contextlib.suppress(OSError):  # realpath fails while a link is being swapped
            forms.append(os.path.realpath(folder))
    if wanted in forms:
        raise InvalidInputError(
            f"{shown} is an allowed folder itself; give the path of a file in it."
        )
    holding = [form for form in forms if within(wanted, form)]
    if not holding:
        raise InvalidInputError(
            f"{shown} is outside the allowed folders ([{section}] allowed_folders: "
            f"{', '.join(str(folder) for folder in configured)})."
        )
    root = max(holding, key=len)  # the nearest, so no more of the path is walked than need be
    names = wanted[len(root.rstrip(os.sep)) + 1 :].split(os.sep)
    fd = _open_below(root, names[:-1], section)
    try:
        yield fd, names[-1]
    finally:
        os.close(fd)


def _open_below(root: str, names: list[str], section: str) -> int:
    """A descriptor of the folder ``root``/``names``, no name below ``root`` a symlink."""
    try:
        fd = os.open(root, _FOLDER)
    except OSError as exc:
        raise InvalidInputError(
            f"The allowed folder {root} cannot be opened ({exc.strerror}); the owner should "
            f"create it or correct [{section}] allowed_folders."
        ) from None
    reached = root
    for name in names:
        reached = os.path.join(reached, name)
        try:
            below = os.open(name, _BELOW, dir_fd=fd)
        except OSError as exc:
            refusal = _walk_refusal(exc, fd, name, reached)
            os.close(fd)
            raise refusal from None
        os.close(fd)
        fd = below
    return fd


def _walk_refusal(exc: OSError, fd: int, name: str, reached: str) -> MemvaultError:
    if exc.errno == errno.ENOENT:
        return NotFoundError(f"The folder {reached} does not exist.")
    if exc.errno == errno.ENOTDIR:  # O_DIRECTORY | O_NOFOLLOW on a symlink says ENOTDIR
        with contextlib.suppress(OSError):
            if stat.S_ISLNK(os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode):
                return symlink_refusal(reached)
        return InvalidInputError(f"{reached} is not a folder.")
    return os_refusal(exc, reached, "open")


def outside_vault(folder_fd: int, vault: Vault, shown: str) -> None:
    """Refuse an opened folder that is the vault or lies inside it, judged by the folders
    above it on disk (``..``), so no symlink can hide where it is; the vault's own files
    go through the vault tools."""
    try:
        root = os.stat(vault.root)
        current = os.open(".", _UP, dir_fd=folder_fd)
    except OSError as exc:
        raise _undecided(shown, exc) from None
    vault_id = (root.st_dev, root.st_ino)
    try:
        while True:
            here = os.fstat(current)
            if (here.st_dev, here.st_ino) == vault_id:
                raise InvalidInputError(
                    f"{shown} is inside the vault; use the vault tools (vault_read, "
                    "vault_write, vault_move) for the vault's own files."
                )
            above = os.open("..", _UP, dir_fd=current)
            os.close(current)
            current = above
            top = os.fstat(current)
            if (top.st_dev, top.st_ino) == (here.st_dev, here.st_ino):
                return  # the root of the file system
    except OSError as exc:
        raise _undecided(shown, exc) from None
    finally:
        os.close(current)


def _undecided(shown: str, exc: OSError) -> InvalidInputError:
    return InvalidInputError(
        f"memvault cannot tell whether {shown} lies outside the vault ({exc.strerror}), "
        "so it does not use it."
    )
