"""When a search last returned each memory (``memory_recalls`` in state.db).

Every search goes through :class:`~memvault.index.search.Searcher`: the CLI's
``recall``, the ``memory_search`` tool, ``GET /v1/search``, channel commands
and the agent's context. The runtime tells this log which memories each one
returned, so the archival job can leave alone what is still being recalled.
Times are stored in UTC, so they compare as text across a DST change.

A search made with a read-scoped API token is not a recall
(:func:`memvault.acting.records_recalls`): such a token only observes, and
reading the memory must not change what it keeps. Searches by the owner, a
token that may remember or write, the agent, a channel or the CLI are.

The log also keeps when it began (``recalls_since`` in ``meta``): before it
has covered a whole recall window, "not recalled lately" is not known, and
the archival job leaves memories alone.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime

from memvault.acting import records_recalls
from memvault.memory.state import StateStore

_SINCE = "recalls_since"


def _utc(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="seconds")


class RecallLog:
    """Records and answers when memories were last recalled."""

    def __init__(self, state: StateStore) -> None:
        self.state = state
        self._begun = False  # recalls_since is written (it is never removed)

    def begin(self, moment: datetime) -> datetime:
        """When recording began; ``moment`` if it had not yet (then it begins now)."""
        with self.state.transaction() as conn:
            conn.execute(
                "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO NOTHING",
                (_SINCE, _utc(moment)),
            )
            row = conn.execute("SELECT value FROM meta WHERE key = ?", (_SINCE,)).fetchone()
        self._begun = True
        return datetime.fromisoformat(row[0])

    def record(self, memory_ids: Iterable[str], when: datetime) -> None:
        """Note that a search returned these memories at ``when`` (unless the search was
        an observer's)."""
        ids = sorted({i for i in memory_ids if i})
        if not ids or not records_recalls():
            return
        stamp = _utc(when)
        with self.state.transaction() as conn:
            if not self._begun:
                conn.execute(
                    "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO NOTHING",
                    (_SINCE, stamp),
                )
            conn.executemany(
                "INSERT INTO memory_recalls (memory_id, last_recalled) VALUES (?, ?) "
                "ON CONFLICT (memory_id) DO UPDATE SET "
                "last_recalled = max(memory_recalls.last_recalled, excluded.last_recalled), "
                "times = memory_recalls.times + 1",
                [(memory_id, stamp) for memory_id in ids],
            )
        self._begun = True

    def recalled_since(self, moment: datetime) -> set[str]:
        """Ids of the memories a search returned at or after ``moment``."""
        rows = self.state.query(
            "SELECT memory_id FROM memory_recalls WHERE last_recalled >= ?", (_utc(moment),)
        )
        return {str(row["memory_id"]) for row in rows}

    def last(self, memory_id: str) -> datetime | None:
        """When a search last returned ``memory_id``, or None if never."""
        rows = self.state.query(
            "SELECT last_recalled FROM memory_recalls WHERE memory_id = ?", (memory_id,)
        )
        return datetime.fromisoformat(rows[0]["last_recalled"]) if rows else None
