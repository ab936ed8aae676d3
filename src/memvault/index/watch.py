"""Following edits made outside memvault (Obsidian, git, an editor) with watchfiles.

Changes are debounced by watchfiles into batches. A batch of notes goes to
:meth:`MemoryIndex.sync_paths`, which tells edits, moves (same content at a
new path) and deletions apart. A batch that touches anything else (a folder
renamed, moved in or out, or created with notes inside) runs a full sync,
which only stats files it has seen before. memvault's own writes arrive
here too; re-checking them is cheap because their content hash matches.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path

from watchfiles import Change, DefaultFilter, watch

from memvault.errors import UnsafePathError
from memvault.index.index import MemoryIndex, SyncReport
from memvault.vault.store import Vault

log = logging.getLogger(__name__)


class VaultFilter(DefaultFilter):
    """Everything outside hidden folders (``.memvault``, ``.obsidian``, ``.git`` ...).

    The watcher follows symlinked folders, so a change is also dropped when
    its real place is one the vault refuses (``.memvault`` through a link,
    outside the vault, a loop): the index's own writes never wake it.
    """

    def __init__(self, vault: Vault) -> None:
        super().__init__()
        self.vault = vault
        self.root = vault.root

    def __call__(self, change: Change, path: str) -> bool:
        try:
            relative = Path(path).relative_to(self.root)
        except ValueError:
            return False
        if any(part.startswith(".") for part in relative.parts):
            return False
        try:
            self.vault.check_target(Path(path), relative.as_posix())
        except UnsafePathError:
            return False
        return super().__call__(change, path)


def follow(
    index: MemoryIndex,
    *,
    stop: threading.Event | None = None,
    debounce_ms: int = 400,
    on_batch: Callable[[SyncReport], None] | None = None,
    ready: threading.Event | None = None,
) -> None:
    """Keep ``index`` current until ``stop`` is set (or Ctrl-C).

    A full sync runs first, so edits made while nothing was watching are
    picked up too. ``ready`` is set once the watcher is running.
    """
    root = index.vault.root
    report = index.sync()
    if on_batch is not None and report.touched:
        on_batch(report)
    for changes in watch(
        root,
        watch_filter=VaultFilter(index.vault),
        debounce=debounce_ms,
        step=50,
        stop_event=stop,
        rust_timeout=200,
        yield_on_timeout=True,
        raise_interrupt=False,
    ):
        if ready is not None and not ready.is_set():
            ready.set()  # the first timeout proves the watcher is up
        if not changes:
            continue
        paths = {Path(path).relative_to(root).as_posix() for _, path in changes}
        notes_only = all(p.lower().endswith(".md") for p in paths)
        try:
            report = index.sync_paths(paths) if notes_only else index.sync()
        except Exception:
            log.exception("could not index changed notes", extra={"paths": sorted(paths)})
            continue
        if on_batch is not None and report.touched:
            on_batch(report)
