"""What a page works out from every note of a few vault folders, kept until one changes.

Some pages show what every note of a folder says: the contacts, the insights and
their evidence, the sources memories came from, the newest memories. Reading and
parsing each note again on every request was most of those pages' time (a hundred
contacts, or 10,000 memories). One listing of the folders (each file's path, size,
mtime, ctime and inode, without reading it) tells whether anything changed since the
value was worked out; only then are the notes read again. The vault stays the source
of truth: a note written by memvault (a new file put in place: a new inode) or by hand
(a new ctime, which no tool can put back) changes its stamp, so the next request sees it.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

from memvault.errors import NotFoundError
from memvault.vault.store import Vault

T = TypeVar("T")
Stamp = tuple[str, tuple[tuple[str, int, int, int, int], ...]]


def stamp(vault: Vault, folder: str) -> Stamp:
    """Every file under ``folder`` with its size, times and inode (empty when there is no
    folder)."""
    try:
        entries = vault.list(folder)
    except NotFoundError:
        entries = []
    root = str(vault.root)
    out = []
    for e in entries:
        try:  # a path the listing has just checked: no second check
            inode = os.stat(os.path.join(root, e.path)).st_ino
        except OSError:  # gone since the listing
            inode = -1
        out.append((e.path, e.size, e.mtime_ns, e.ctime_ns, inode))
    return folder, tuple(out)


class Stamped(Generic[T]):
    """Values worked out from the notes of some folders, each kept under the folders'
    stamps and the question it answers (``extra``); a few are kept, the latest first."""

    def __init__(self, keep: int = 8) -> None:
        self.keep = keep
        self._values: dict[Hashable, T] = {}
        self._lock = threading.Lock()

    def get(
        self,
        vault: Vault,
        folders: tuple[str, ...],
        work_out: Callable[[], T],
        extra: Hashable = None,
    ) -> T:
        """The value for the folders as they are now, worked out only if none is kept."""
        key = (str(vault.root), tuple(stamp(vault, f) for f in folders), extra)
        with self._lock:
            if key in self._values:
                return self._values[key]
        value = work_out()
        with self._lock:
            # A value of older stamps will not be asked for again: keep the newest few.
            self._values.pop(key, None)
            self._values[key] = value
            while len(self._values) > self.keep:
                del self._values[next(iter(self._values))]
        return value
