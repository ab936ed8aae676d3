"""Events across daemons: PostgreSQL ``LISTEN`` / ``NOTIFY`` over a table of events.

Daemons that share one database (a primary and its replicas) each keep their own
event bus. :class:`EventFanOut` carries the events of one to all the others: every
event a daemon publishes is written as a row of ``memvault_events`` and announced on
the channel ``memvault_events`` by a ``NOTIFY`` whose payload is only
``<origin>:<seq>`` (the daemon's instance id and the row's number). Every other
daemon's listener reads that row and hands it to its bus; a daemon skips the
announcements of its own events, so nothing echoes back.

Why the row, not the event itself, in the ``NOTIFY``: a ``NOTIFY`` payload holds at
most 8000 bytes and an event (a memory's text, a session message, a job's report)
may be longer. With a table every event takes one path whatever its size, and a
listener that lost its connection reads what it missed when it is back (the rows
after the last one it saw), where a ``NOTIFY`` sent while it was away is gone. The
cost is one ``INSERT`` per event; events are few (progress is throttled to one a
second). Rows older than :data:`RETENTION` are deleted now and then.

Two threads, each with its own autocommit connection: the sender drains a queue
(so a publisher never waits for the database, and a database that is down delays
events, it does not block requests), the listener waits on ``conn.notifies()`` with a
timeout so it can stop. Either one that loses its connection logs one line,
reconnects with a growing pause and carries on: the daemon never stops for it.

The table is one of the versioned migrations (:mod:`memvault.storage.pg_schema`);
:func:`ensure_table` makes it too (``IF NOT EXISTS``, under an advisory lock), so the
fan-out also stands on a database nothing else migrated.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import json
import logging
import queue
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from memvault.errors import MemvaultError
from memvault.storage.pg_schema import EVENTS_SQL
from memvault.storage.postgres import Connection, Target, connect

log = logging.getLogger(__name__)

CHANNEL = "memvault_events"
TABLE = "memvault_events"
# Rows are kept this long for listeners that reconnect; older ones are deleted.
RETENTION = timedelta(hours=1)
# pg_advisory_xact_lock's key while the table is made: "mv-event" in ASCII.
_SCHEMA_LOCK = int.from_bytes(b"mv-event", "big")
_SCHEMA = EVENTS_SQL
# One statement: the row and its announcement commit together (NOTIFY is sent on commit).
_INSERT = f"""
WITH stored AS (
    INSERT INTO {TABLE} (origin, type, source, payload, observed_at)
    VALUES (%s, %s, %s, %s, %s) RETURNING seq, origin
)
SELECT pg_notify('{CHANNEL}', origin || ':' || seq) FROM stored
"""
_COLUMNS = "seq, origin, type, source, payload, observed_at"
_PRUNE_EVERY = 60.0  # seconds between deletions of old rows
_POLL = 0.5  # seconds the listener waits for a notification before checking for stop
_PING_EVERY = 10.0  # an idle listener checks its connection this often
_BACKOFF_FIRST = 0.5
_BACKOFF_MOST = 30.0
_RECENT = 4096  # seqs remembered as delivered, so a catch-up never delivers one twice
_dumps = functools.partial(json.dumps, default=str, ensure_ascii=False)


@dataclass(frozen=True)
class RemoteEvent:
    """An event another daemon published, as read from the database."""

    seq: int
    origin: str
    type: str
    source: str
    payload: dict[str, Any]
    observed_at: datetime


@dataclass(frozen=True)
class _Outgoing:
    type: str
    source: str
    payload: dict[str, Any]
    observed_at: datetime


def new_instance_id() -> str:
    """A name for one daemon process, unique among the daemons sharing a database."""
    return uuid.uuid4().hex[:16]


def ensure_table(conn: Connection) -> None:
    """Make the events table if no daemon has yet (``conn`` in autocommit mode)."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
        conn.execute(_SCHEMA.encode())  # bytes: two statements, no parameters


class EventFanOut:
    """Sends this daemon's events to the other daemons on one database, and hands theirs
    to ``deliver``.

    :meth:`send` is called for every event of this daemon (from any thread);
    ``deliver`` is called, in the listener's thread, with every event another daemon
    sent while this one listened (and those it missed while reconnecting).
    """

    def __init__(
        self,
        dsn: str,
        target: Target,
        deliver: Callable[[RemoteEvent], None],
        *,
        instance: str | None = None,
        queue_size: int = 10_000,
        connect_timeout: float = 10.0,
    ) -> None:
        self.instance = instance or new_instance_id()
        self._dsn = dsn
        self._target = target
        self._deliver = deliver
        self._timeout = connect_timeout
        self._queue: queue.Queue[_Outgoing | None] = queue.Queue(queue_size)
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._dropping = False
        self._recent: collections.deque[int] = collections.deque(maxlen=_RECENT)
        self._recent_set: set[int] = set()
        self._listener_pid: int | None = None
        #: Set while the listener is connected and listening (tests and health wait on it).
        self.listening = threading.Event()

    # -- lifecycle ---------------------------------------------------------------------

    def start(self) -> None:
        """Start the sender and the listener threads."""
        for name, target in (
            ("memvault-events-out", self._send_loop),
            ("memvault-events-in", self._listen_loop),
        ):
            thread = threading.Thread(target=target, name=name, daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self, timeout: float = 5.0) -> None:
        """Send what is queued (while the database answers, within ``timeout``), stop
        listening and close both connections."""
        deadline = time.monotonic() + timeout
        with contextlib.suppress(queue.Full):
            self._queue.put(None, timeout=max(timeout, 0.01))
        if self._threads:
            self._threads[0].join(max(deadline - time.monotonic(), 0.0))
        self._stop.set()
        for thread in self._threads:
            thread.join(max(deadline - time.monotonic(), 0.0))

    @property
    def listener_pid(self) -> int | None:
        """The PostgreSQL backend process of the listener's connection, while connected."""
        return self._listener_pid if self.listening.is_set() else None

    # -- sending -----------------------------------------------------------------------

    def send(self, type: str, source: str, payload: dict[str, Any], observed_at: datetime) -> None:
        """Queue an event of this daemon for the others; never blocks (a full queue, the
        database long gone, drops the event with one log line)."""
        try:
            self._queue.put_nowait(_Outgoing(type, source, payload, observed_at))
            self._dropping = False
        except queue.Full:
            if not self._dropping:
                log.warning(
                    "events are not reaching PostgreSQL fast enough; other daemons miss some",
                    extra={"queued": self._queue.qsize()},
                )
            self._dropping = True

    def _send_loop(self) -> None:
        conn: Connection | None = None
        pruned = 0.0
        outage = _Outage("sending events to the other daemons")
        try:
            while True:
                try:
                    item = self._queue.get(timeout=_POLL)
                except queue.Empty:
                    if self._stop.is_set():
                        return
                    continue
                if item is None:
                    return
                while not self._stop.is_set():
                    try:
                        if conn is None or conn.closed:
                            conn = self._connect()
                            ensure_table(conn)
                            outage.over()
                        self._insert(conn, item)
                        break
                    except (psycopg.OperationalError, psycopg.InterfaceError, MemvaultError) as exc:
                        _close(conn)
                        conn = None
                        self._stop.wait(outage.failed(exc))
                    except psycopg.Error as exc:  # this event (a value jsonb refuses): drop it
                        log.warning(
                            "an event could not be stored for the other daemons",
                            extra={"event_type": item.type, "error": str(exc).strip()},
                        )
                        break
                if conn is not None and time.monotonic() - pruned > _PRUNE_EVERY:
                    pruned = time.monotonic()
                    self._prune(conn)
        finally:
            _close(conn)

    def _insert(self, conn: Connection, item: _Outgoing) -> None:
        conn.execute(
            _INSERT,
            (
                self.instance,
                item.type,
                item.source,
                Jsonb(item.payload, dumps=_dumps),
                item.observed_at,
            ),
        )

    def _prune(self, conn: Connection) -> None:
        with contextlib.suppress(psycopg.Error):  # a pruning missed is tried again later
            conn.execute(f"DELETE FROM {TABLE} WHERE stored_at < now() - %s", (RETENTION,))

    # -- listening ---------------------------------------------------------------------

    def _listen_loop(self) -> None:
        last_seq: int | None = None
        outage = _Outage("receiving events from the other daemons")
        while not self._stop.is_set():
            conn: Connection | None = None
            try:
                conn = self._connect()
                ensure_table(conn)
                conn.execute(f"LISTEN {CHANNEL}")
                if last_seq is None:  # a fresh start: what came before is not replayed
                    row = conn.execute(f"SELECT coalesce(max(seq), 0) FROM {TABLE}").fetchone()
                    last_seq = int(row[0]) if row else 0
                else:  # back after an outage: what the others sent meanwhile
                    last_seq = self._catch_up(conn, last_seq)
                self._listener_pid = conn.info.backend_pid
                self.listening.set()
                outage.over()
                last_seq = self._follow(conn, last_seq)
            except (psycopg.Error, MemvaultError) as exc:
                self.listening.clear()
                if not self._stop.is_set():
                    self._stop.wait(outage.failed(exc))
            finally:
                self.listening.clear()
                _close(conn)

    def _follow(self, conn: Connection, last_seq: int) -> int:
        """Deliver the events announced on ``conn`` until stopped; raises when the
        connection fails."""
        pinged = time.monotonic()
        while not self._stop.is_set():
            # Gathered first: the generator holds the connection, a query inside it would
            # wait forever. Announcements that arrive meanwhile wait in psycopg's backlog.
            notices = list(conn.notifies(timeout=_POLL, stop_after=1))
            for notice in notices:
                origin, _, seq_text = notice.payload.rpartition(":")
                if origin == self.instance or not seq_text.isdigit():
                    continue
                seq = int(seq_text)
                for event in self._rows(conn, "seq = %s", (seq,)):
                    self._hand_over(event)
                last_seq = max(last_seq, seq)
            if time.monotonic() - pinged > _PING_EVERY:
                conn.execute("SELECT 1")  # a connection dropped silently shows here
                pinged = time.monotonic()
        return last_seq

    def _catch_up(self, conn: Connection, last_seq: int) -> int:
        for event in self._rows(conn, "seq > %s AND origin <> %s", (last_seq, self.instance)):
            self._hand_over(event)
            last_seq = max(last_seq, event.seq)
        return last_seq

    def _rows(self, conn: Connection, where: str, params: tuple[Any, ...]) -> list[RemoteEvent]:
        rows = conn.execute(
            f"SELECT {_COLUMNS} FROM {TABLE} WHERE {where} ORDER BY seq", params
        ).fetchall()
        return [
            RemoteEvent(
                int(seq),
                str(origin),
                str(kind),
                str(source),
                dict(payload),
                observed.astimezone(UTC),
            )
            for seq, origin, kind, source, payload, observed in rows
        ]

    def _hand_over(self, event: RemoteEvent) -> None:
        if event.seq in self._recent_set:
            return
        if len(self._recent) == self._recent.maxlen:
            self._recent_set.discard(self._recent[0])
        self._recent.append(event.seq)
        self._recent_set.add(event.seq)
        try:
            self._deliver(event)
        except Exception:
            log.exception("an event from another daemon could not be published here")

    def _connect(self) -> Connection:
        return connect(self._dsn, self._target, timeout=self._timeout)


class _Outage:
    """One log line when a connection is lost, one when it is back; the pause before
    the next attempt grows from 0.5 s to 30 s."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.since: float | None = None
        self.pause = _BACKOFF_FIRST

    def failed(self, exc: BaseException) -> float:
        """Note a failed attempt; the seconds to wait before the next."""
        if self.since is None:
            self.since = time.monotonic()
            reason = exc.message if isinstance(exc, MemvaultError) else str(exc).strip()
            log.warning(
                f"lost PostgreSQL while {self.what}; reconnecting",
                extra={"error": reason.splitlines()[0] if reason else type(exc).__name__},
            )
        pause = self.pause
        self.pause = min(self.pause * 2, _BACKOFF_MOST)
        return pause

    def over(self) -> None:
        """Note a working connection."""
        if self.since is not None:
            log.info(
                f"PostgreSQL is back for {self.what}",
                extra={"outage_seconds": round(time.monotonic() - self.since, 1)},
            )
        self.since = None
        self.pause = _BACKOFF_FIRST


def _close(conn: Connection | None) -> None:
    if conn is not None:
        with contextlib.suppress(Exception):
            conn.close()
