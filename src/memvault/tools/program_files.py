"""Which program a file is: the files of the programs the guard knows, compared.

A program named on a command is known by its file as well as its name: the
file is compared with the files of the programs the lists and the wrapper
tables name, by real path, by inode and, for a file of the same size, by
content (its SHA-256, cached by identity and modification time). So a
symlink, hard link or copy of ``rm`` under another name is still ``rm``.
Apart from the walk over the command (:mod:`memvault.tools.shell_guard`)
because it asks the file system, not the command's text.
"""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass, field

from memvault.tools.shell_programs import MULTI_CALL, program_name


@dataclass(frozen=True)
class ProgramFile:
    """One program file, as the guard compares it."""

    path: str
    real: str
    device: int
    inode: int
    size: int
    mtime: int


def program_file(path: str) -> ProgramFile | None:
    """The regular file at ``path``, as the guard compares it; None for no such file."""
    try:
        info = os.stat(path)
    except (OSError, ValueError):
        return None
    if not stat.S_ISREG(info.st_mode):
        return None
    return ProgramFile(
        path, os.path.realpath(path), info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns
    )


_DIGESTS: dict[tuple[int, int, int, int], bytes] = {}


def _digest(file: ProgramFile) -> bytes | None:
    """The file's SHA-256, cached by its identity and modification time."""
    key = (file.device, file.inode, file.size, file.mtime)
    digest = _DIGESTS.get(key)
    if digest is None:
        try:
            with open(file.path, "rb") as handle:
                digest = hashlib.file_digest(handle, "sha256").digest()
        except OSError:
            return None
        if len(_DIGESTS) > 512:
            _DIGESTS.clear()
        _DIGESTS[key] = digest
    return digest


@dataclass
class KnownPrograms:
    """The files of the programs the guard knows by name, and the names of each file."""

    by_real: dict[str, set[str]] = field(default_factory=dict)
    by_inode: dict[tuple[int, int], set[str]] = field(default_factory=dict)
    by_size: dict[int, list[tuple[ProgramFile, str]]] = field(default_factory=dict)

    def add(self, name: str, file: ProgramFile) -> None:
        """Know ``file`` as the program ``name`` (a multi-call binary's file is no one's)."""
        if program_name(file.real) in MULTI_CALL:
            return  # its file is every name's: only the name it is called by tells
        self.by_real.setdefault(file.real, set()).add(name)
        self.by_inode.setdefault((file.device, file.inode), set()).add(name)
        self.by_size.setdefault(file.size, []).append((file, name))

    def names(self, file: ProgramFile, called: str) -> set[str]:
        """The names ``file`` is known by: its own, and those of the same file or a copy;
        a multi-call binary is only the name it is ``called`` by."""
        if program_name(file.real) in MULTI_CALL:
            return {called}
        found = {program_name(file.real)}
        found |= self.by_real.get(file.real, set())
        found |= self.by_inode.get((file.device, file.inode), set())
        copies = [
            (other, name) for other, name in self.by_size.get(file.size, []) if name not in found
        ]
        if copies:
            digest = _digest(file)
            found |= {name for other, name in copies if digest and _digest(other) == digest}
        return found


_KNOWN_CACHE: dict[tuple[frozenset[str], tuple[str, ...]], tuple[list[int], KnownPrograms]] = {}


def known_programs(names: frozenset[str], folders: tuple[str, ...]) -> KnownPrograms:
    """The files of ``names`` found in ``folders``, rebuilt when a folder changes."""
    stamps = []
    for folder in folders:
        try:
            stamps.append(os.stat(folder).st_mtime_ns)
        except OSError:
            stamps.append(-1)
    cached = _KNOWN_CACHE.get((names, folders))
    if cached is not None and cached[0] == stamps:
        return cached[1]
    known = KnownPrograms()
    for name in names:
        places = [name] if "/" in name else [os.path.join(f, name) for f in folders]
        for place in places:
            file = program_file(place)
            if file is not None:
                known.add(program_name(name), file)
    if len(_KNOWN_CACHE) > 16:
        _KNOWN_CACHE.clear()
    _KNOWN_CACHE[(names, folders)] = (stamps, known)
    return known
