"""Filling pending embeddings in the background, in small batches.

Writes only add keyword rows; this loop computes the vectors afterwards, a
batch at a time, so a long-running process (the MCP server, the daemon)
never makes a request wait for a model. The index lock is released while
the model works, so searches go on meanwhile.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from memvault.errors import MemvaultError
from memvault.index.index import MemoryIndex

log = logging.getLogger(__name__)

_MAX_DELAY = 60.0


class Backfill:
    """A thread that embeds pending chunks until stopped."""

    def __init__(
        self,
        index: MemoryIndex,
        *,
        interval: float = 2.0,
        batch: int = 64,
        on_progress: Callable[[int, int], None] | None = None,
    ) -> None:
        self.index = index
        self.interval = interval
        self.batch = batch
        self.on_progress = on_progress
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self.last_error: str | None = None

    def start(self) -> None:
        """Start the thread (once)."""
        if self._thread is None and self.index.embedder.enabled:
            self._thread = threading.Thread(target=self._run, name="memvault-backfill", daemon=True)
            self._thread.start()

    def poke(self) -> None:
        """Look for pending work now rather than at the next interval."""
        self._wake.set()

    def stop(self, timeout: float = 10.0) -> None:
        """Stop after the current batch."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self) -> None:
        delay = self.interval
        while not self._stop.is_set():
            try:
                pending = self.index.pending()
                if pending and self.index.mismatch() is None:
                    done = self.index.embed_pending(limit=self.batch, batch=self.batch)
                    self.last_error = None
                    delay = self.interval
                    if self.on_progress is not None:
                        self.on_progress(done, pending)
                    if done:
                        continue  # more may be waiting: no pause between batches
            except MemvaultError as exc:
                if exc.message != self.last_error:
                    log.warning("embedding backfill paused", extra={"error": exc.message})
                self.last_error = exc.message
                delay = min(delay * 2, _MAX_DELAY)  # a failing model is retried less and less often
            except Exception:
                log.exception("embedding backfill failed")
                delay = min(delay * 2, _MAX_DELAY)
            self._wake.wait(delay)
            self._wake.clear()
