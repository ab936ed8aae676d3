"""Named locks that hold across processes, so two writers never edit one note at once.

A read-modify-write of a note, and the memory store's and other stores' own
namespaces, hold a lock named for what they change. Each is a file lock under
``<vault>/.memvault/locks/`` (named by a hash of the key, case-folded), which other
memvault processes share, behind a re-entrant in-process queue, so this process's
threads wait in turn without polling and an operation holding a lock may call
another that takes the same one.
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
from collections.abc import Iterator
from pathlib import Path

from filelock import FileLock, Timeout

from memvault.errors import VaultError
from memvault.locations import PRIVATE_DIR, PRIVATE_FILE, private_state_dir


def digest(key: str) -> str:
    """A short name for ``key`` that a file may carry (case-folded, as the locks are)."""
    return hashlib.sha1(key.casefold().encode("utf-8")).hexdigest()[:16]


class NamedLocks:
    """Cross-process locks by name, each a file in ``state_dir/locks``."""

    def __init__(self, state_dir: Path, timeout: float) -> None:
        self.state_dir = state_dir
        self.timeout = timeout
        # Per lock name: the file lock other processes share, and the in-process queue
        # this process's threads wait in before it (see lock()).
        self._locks: dict[str, tuple[FileLock, threading.RLock]] = {}
        self._guard = threading.Lock()

    def _lock_for(self, key: str) -> tuple[FileLock, threading.RLock]:
        """The file lock and the in-process queue for ``key``, made on first use."""
        name = digest(key)
        with self._guard:
            pair = self._locks.get(name)
            if pair is None:
                lock_dir = self.state_dir / "locks"
                try:
                    private_state_dir(self.state_dir)
                    lock_dir.mkdir(mode=PRIVATE_DIR, exist_ok=True)
                except OSError as exc:
                    raise VaultError(
                        f"Cannot create the lock folder {lock_dir}: {exc.strerror}."
                    ) from exc
                lock = FileLock(
                    str(lock_dir / f"{name}.lock"), timeout=self.timeout, mode=PRIVATE_FILE
                )
                pair = self._locks[name] = (lock, threading.RLock())
            return pair

    @contextlib.contextmanager
    def lock(self, key: str) -> Iterator[None]:
        """Hold a cross-process lock named ``key`` (a note path or a namespace).

        Re-entrant within one process, so an operation holding a lock may call
        another that takes the same one. Threads of this process wait in a
        queue that wakes the next one at once; only the file lock, which other
        processes share, is polled.
        """
        lock, queue = self._lock_for(key)
        if not queue.acquire(timeout=self.timeout):
            raise VaultError(f"{key} is busy in this process; try again in a moment.")
        try:
            try:
                lock.acquire()
            except Timeout:
                raise VaultError(
                    f"{key} is locked by another memvault process; try again in a moment."
                ) from None
            try:
                yield
            finally:
                lock.release()
        finally:
            queue.release()
