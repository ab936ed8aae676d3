"""Rows kept for a window of days: the runs the agent made, the reads of memories.

Each log is a table of dated rows (UTC ISO text, to the second) that the owner
keeps for ``keep_days`` days (0: nothing is recorded). Old rows go as new ones
are written, at most once a minute per process so a busy writer does not delete
on every row, and whenever :meth:`WindowedLog.prune` is called; a row past the
window is never shown even before it is deleted (readers ask for
:meth:`WindowedLog.cutoff`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar

from memvault.memory.state import StateStore

PRUNE_EVERY = 60.0  # seconds between two age prunes of one process


def utc_text(moment: datetime) -> str:
    """``moment`` as the logs store it: UTC, ISO 8601, to the second."""
    return moment.astimezone(UTC).isoformat(timespec="seconds")


class WindowedLog:
    """A table of rows dated by ``column``, kept ``keep_days`` days."""

    table: ClassVar[str]
    column: ClassVar[str]

    def __init__(self, state: StateStore, now: Callable[[], datetime], keep_days: int) -> None:
        self.state = state
        self.now = now
        self.keep_days = keep_days
        self._pruned = 0.0  # time.monotonic() of the last age prune
        self._guard = threading.Lock()

    @property
    def enabled(self) -> bool:
        """Whether anything is recorded (a window of more than 0 days)."""
        return self.keep_days > 0

    def cutoff(self, moment: datetime | None = None) -> str:
        """The oldest date a row may have to be kept, seen from ``moment`` (now)."""
        return utc_text((moment or self.now()) - timedelta(days=self.keep_days))

    def prune_within(self, conn: Any, moment: datetime | None = None) -> None:
        """In the writer's transaction on ``conn``: delete the rows past the window, when
        the last prune of this process is a minute old."""
        with self._guard:
            now = time.monotonic()
            if self._pruned and now - self._pruned < PRUNE_EVERY:
                return
            self._pruned = now
        conn.execute(f"DELETE FROM {self.table} WHERE {self.column} < ?", (self.cutoff(moment),))

    def prune(self) -> int:
        """Remove the rows past the window now; how many went."""
        with self.state.transaction() as conn:
            cursor = conn.execute(
                f"DELETE FROM {self.table} WHERE {self.column} < ?", (self.cutoff(),)
            )
        return max(int(cursor.rowcount or 0), 0)
