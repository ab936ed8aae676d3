"""Who read each memory, when, and how (``memory_reads`` in state.db, or PostgreSQL's).

Every memory a search returns, a context shows, a tool reads or a route hands out is a
read: one row with the memory's id, the time (UTC), who read it (the named API token's
agent, :func:`memvault.acting.acting_agent`; whether the token only observes; the
audience of the conversation, :func:`memvault.acting.current_audience`), the surface
it came through (``cli``, ``http``, ``mcp``, ``agent``, ``channel``, ``job``) and the
path (``search``, ``context``, ``tool``, ``get``). ``memvault memory access ID`` and
``GET /v1/memories/{id}/access`` show them, newest first.

Unlike recalls (:mod:`memvault.memory.recalls`), a read-scoped token's reads are
recorded too: observing is reading. The surface and the path are not the memory
layer's to know: the edges say them with :func:`reading` (the HTTP middleware, a tool
call, a job run, a channel), the context builder's searches are marked by
:class:`RecordedContext`, and what nobody marked is the CLI's own ``search``.

The log is bounded, pruned as it is written: rows older than ``[privacy]
reads_keep_days`` go (checked at most once a minute), and each memory keeps its
newest ``reads_per_memory``. A search writes its reads in one statement, in one
transaction; ``reads_keep_days = 0`` records nothing.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from memvault.acting import current_actor
from memvault.memory.context import ContextBuilder, ContextResult
from memvault.memory.state import StateStore
from memvault.memory.windowed import WindowedLog, utc_text

SURFACES = ("cli", "http", "mcp", "agent", "channel", "job")
PATHS = ("search", "context", "tool", "get")
DEFAULT_LIMIT = 100  # reads shown by default

# A memory shown in a context ends its line with its id: "- text (fact, ^m-3f9a1c2b)".
_SHOWN_ID = re.compile(r"\^(m-[A-Za-z0-9-]+)\)\s*$")


@dataclass(frozen=True)
class ReadWay:
    """How the current request reads: its surface and path, and (inside a context build)
    where the ids its searches return are gathered instead of written one search at a
    time."""

    surface: str | None = None
    path: str | None = None
    collect: list[str] | None = None


_UNSAID = ReadWay()
_WAY: ContextVar[ReadWay | None] = ContextVar("memvault_read_way", default=None)


def current_way() -> ReadWay:
    """How the current request reads (nothing said: the CLI's own search)."""
    return _WAY.get() or _UNSAID


@contextlib.contextmanager
def reading(
    *, surface: str | None = None, path: str | None = None, collect: list[str] | None = None
) -> Iterator[None]:
    """Run the block with these parts of the read's way said (the others as they were)."""
    now = current_way()
    token = _WAY.set(
        replace(
            now,
            surface=surface or now.surface,
            path=path or now.path,
            collect=collect if collect is not None else now.collect,
        )
    )
    try:
        yield
    finally:
        _WAY.reset(token)


@dataclass(frozen=True)
class Read:
    """One read of one memory."""

    memory_id: str
    at: datetime
    path: str
    surface: str
    agent: str | None
    observer: bool
    audience: str | None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "memory_id": self.memory_id,
            "at": self.at.isoformat(timespec="seconds"),
            "path": self.path,
            "surface": self.surface,
            "agent": self.agent,
            "observer": self.observer,
            "audience": self.audience,
        }


class ReadLog(WindowedLog):
    """Records and answers who read which memory (kept ``reads_keep_days``)."""

    table = "memory_reads"
    column = "at"

    def __init__(
        self,
        state: StateStore,
        now: Callable[[], datetime],
        *,
        keep_days: int = 90,
        per_memory: int = 1000,
    ) -> None:
        super().__init__(state, now, keep_days)
        self.per_memory = per_memory

    def record(self, memory_ids: Iterable[str], path: str | None = None) -> int:
        """Record one read of each memory (one row a memory, however often it was
        returned); ``path`` overrides the way's. Returns how many rows were written."""
        ids = sorted({i for i in memory_ids if i})
        if not ids or not self.enabled:
            return 0
        actor = current_actor()
        way = current_way()
        moment = self.now()
        row = (
            utc_text(moment),
            path or way.path or "search",
            way.surface or "cli",
            actor.agent,
            1 if actor.observer else 0,
            actor.audience,
        )
        with self.state.transaction() as conn:
            conn.executemany(
                "INSERT INTO memory_reads (memory_id, at, path, surface, agent, observer, "
                "audience) VALUES (?, ?, ?, ?, ?, ?, ?)",
                [(memory_id, *row) for memory_id in ids],
            )
            # Each memory keeps its newest ``per_memory`` rows: what is past the newest
            # ones goes (walked in the memory's own index order, so it stays cheap).
            conn.executemany(
                "DELETE FROM memory_reads WHERE memory_id = ? AND id <= (SELECT id FROM "
                "memory_reads WHERE memory_id = ? ORDER BY id DESC LIMIT 1 OFFSET ?)",
                [(memory_id, memory_id, self.per_memory) for memory_id in ids],
            )
            self.prune_within(conn, moment)
        return len(ids)

    def of(self, memory_id: str, limit: int = DEFAULT_LIMIT) -> list[Read]:
        """The reads of ``memory_id`` within the window, newest first (at most ``limit``)."""
        rows = self.state.query(
            "SELECT memory_id, at, path, surface, agent, observer, audience FROM memory_reads "
            "WHERE memory_id = ? AND at >= ? ORDER BY id DESC LIMIT ?",
            (memory_id, self.cutoff(), limit),
        )
        return [
            Read(
                memory_id=str(r["memory_id"]),
                at=datetime.fromisoformat(str(r["at"])),
                path=str(r["path"]),
                surface=str(r["surface"]),
                agent=r["agent"],
                observer=bool(r["observer"]),
                audience=r["audience"],
            )
            for r in rows
        ]


def shown_ids(result: ContextResult) -> list[str]:
    """The ids of the memories a built context shows (each memory line ends with one)."""
    found: list[str] = []
    for section in result.sections:
        for line in section.shown:
            match = _SHOWN_ID.search(line)
            if match is not None:
                found.append(match.group(1))
    return found


class RecordedContext(ContextBuilder):
    """The context builder whose every build is recorded as a read of each memory it
    searched for or shows (path ``context``), in one batch."""

    def __init__(self, *, record: Callable[[Iterable[str], str], Any], **parts: Any) -> None:
        super().__init__(**parts)
        self._record = record

    def build_result(self, *args: Any, **kwargs: Any) -> ContextResult:
        """The context (see :meth:`ContextBuilder.build_result`); its reads recorded."""
        return recorded_context(
            self._record, lambda: super(RecordedContext, self).build_result(*args, **kwargs)
        )


def recorded_context(
    record: Callable[[Iterable[str], str], Any] | None, build: Callable[[], ContextResult]
) -> ContextResult:
    """``build()``'s context, with each memory it searched for or shows recorded as read
    (path ``context``) in one batch: the owner's context and a narrowed audience's alike."""
    searched: list[str] = []
    with reading(path="context", collect=searched):
        result = build()
    if record is not None:
        record([*searched, *shown_ids(result)], "context")
    return result
