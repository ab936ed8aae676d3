"""The event bus: what happened in memvault, for pollers and event streams.

An in-memory ring buffer of the last N events (1000 by default) with ids
that only ever grow, also across restarts: ids are reserved from the state
database in blocks, so a restart (or a crash) continues above every id a
client may have seen. Publishing is thread-safe; subscribers are asyncio
queues fed with ``call_soon_threadsafe``, so worker threads, the watcher and
the backfill can all publish.

Observers (:meth:`EventBus.observe`) see every event as it is published, in
the publisher's thread: the fan-out to other daemons sharing a PostgreSQL
database (:mod:`memvault.storage.notify`) is one. An event relayed from another
daemon carries that daemon's ``origin`` and gets an id of this bus, so each
daemon's ids (and a client's Last-Event-ID) keep their meaning per daemon.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import json
import logging
import threading
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

log = logging.getLogger(__name__)

ID_BLOCK = 1000
_RESERVED_KEY = "events.reserved_through"


@dataclass(frozen=True)
class Event:
    """One thing that happened."""

    id: int
    type: str
    source: str
    payload: dict[str, Any]
    observed_at: datetime
    # The daemon an event was relayed from (None: it happened in this one).
    origin: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (the shape of ``/v1/poll`` and ``/v1/events``)."""
        return {
            "id": self.id,
            "type": self.type,
            "source": self.source,
            "payload": self.payload,
            "observed_at": self.observed_at.isoformat(timespec="milliseconds").replace(
                "+00:00", "Z"
            ),
        }


class IdStore:
    """Where the bus keeps the highest id it may have handed out."""

    def __init__(self, read: Callable[[], str | None], write: Callable[[str], None]) -> None:
        self._read = read
        self._write = write

    def reserved(self) -> int:
        """The highest id reserved so far (0 for a new vault)."""
        value = self._read()
        return int(value) if value and value.isdigit() else 0

    def reserve(self, through: int) -> None:
        """Record that ids up to ``through`` may be used."""
        self._write(str(through))


@dataclass
class Subscription:
    """An event stream's queue, fed from any thread."""

    loop: asyncio.AbstractEventLoop
    queue: asyncio.Queue[Event | None] = field(default_factory=lambda: asyncio.Queue(2000))
    overflowed: bool = False

    def offer(self, event: Event | None) -> None:
        """Queue an event (None closes the stream); a full queue closes it too."""
        try:
            self.queue.put_nowait(event)
        except asyncio.QueueFull:
            # A reader this slow reconnects with Last-Event-ID and replays instead.
            self.overflowed = True
            with contextlib.suppress(asyncio.QueueEmpty):
                self.queue.get_nowait()
            with contextlib.suppress(asyncio.QueueFull):
                self.queue.put_nowait(None)


class EventBus:
    """A ring buffer of events with monotonic ids and live subscribers."""

    def __init__(self, capacity: int = 1000, ids: IdStore | None = None) -> None:
        self.capacity = capacity
        self._ids = ids
        self._buffer: collections.deque[Event] = collections.deque(maxlen=capacity)
        self._lock = threading.Lock()
        self._subscribers: list[Subscription] = []
        self._observers: list[Callable[[Event], None]] = []
        self._closed = False
        start = ids.reserved() if ids is not None else 0
        self._last_id = start
        self._reserved = start

    @property
    def last_id(self) -> int:
        """The id of the newest event (or where ids continue from)."""
        with self._lock:
            return self._last_id

    def publish(
        self,
        type: str,
        payload: dict[str, Any] | None = None,
        *,
        source: str,
        origin: str | None = None,
        observed_at: datetime | None = None,
    ) -> Event:
        """Record an event and hand it to every subscriber and observer; ``origin`` and
        ``observed_at`` are those of an event relayed from another daemon."""
        with self._lock:
            next_id = self._last_id + 1
            if next_id > self._reserved and self._ids is not None:
                self._reserved = next_id + ID_BLOCK - 1
                self._ids.reserve(self._reserved)
            self._last_id = next_id
            event = Event(
                next_id, type, source, payload or {}, observed_at or datetime.now(UTC), origin
            )
            self._buffer.append(event)
            subscribers = list(self._subscribers)
            observers = list(self._observers)
        for subscriber in subscribers:
            try:
                subscriber.loop.call_soon_threadsafe(subscriber.offer, event)
            except RuntimeError:  # the subscriber's loop is gone
                self._drop(subscriber)
        for observer in observers:
            try:
                observer(event)
            except Exception:  # an observer's failure never fails the publisher
                log.exception("an event observer failed", extra={"event_type": type})
        return event

    def observe(self, observer: Callable[[Event], None]) -> None:
        """Call ``observer`` with every event published from now on (in the publisher's
        thread: it must be quick)."""
        with self._lock:
            self._observers.append(observer)

    def since(self, cursor: int | None, limit: int | None = None) -> list[Event]:
        """Buffered events with ids above ``cursor`` (all of them without one), oldest first."""
        with self._lock:
            events = [e for e in self._buffer if cursor is None or e.id > cursor]
        return events[:limit] if limit is not None else events

    def scrub(self, holds: Callable[[str], bool], *, spare: Collection[str] = ()) -> int:
        """Empty the payload of every buffered event whose payload ``holds`` accepts (as
        JSON), but for the event types in ``spare``: a memory forgotten is not handed out
        again by ``/v1/poll`` or a reconnecting stream. The events keep their ids and types;
        returns how many were emptied."""
        with self._lock:
            kept: list[Event] = []
            emptied = 0
            for event in self._buffer:
                payload = json.dumps(event.payload, ensure_ascii=False)
                if event.payload and event.type not in spare and holds(payload):
                    event = dataclasses.replace(event, payload={"forgotten": True})
                    emptied += 1
                kept.append(event)
            if emptied:
                self._buffer.clear()
                self._buffer.extend(kept)
        return emptied

    def oldest_id(self) -> int | None:
        """The id of the oldest buffered event."""
        with self._lock:
            return self._buffer[0].id if self._buffer else None

    def last(self, count: int) -> list[Event]:
        """The newest ``count`` events, oldest first."""
        with self._lock:
            return list(self._buffer)[-count:] if count > 0 else []

    @contextlib.contextmanager
    def subscribe(self, loop: asyncio.AbstractEventLoop) -> Iterator[Subscription]:
        """A live queue of new events for as long as the block runs."""
        subscription = Subscription(loop)
        with self._lock:
            if self._closed:
                subscription.queue.put_nowait(None)
            else:
                self._subscribers.append(subscription)
        try:
            yield subscription
        finally:
            self._drop(subscription)

    def subscriber_count(self) -> int:
        """How many streams are connected."""
        with self._lock:
            return len(self._subscribers)

    def close(self) -> None:
        """End every stream (on shutdown): each subscriber receives None."""
        with self._lock:
            self._closed = True
            subscribers = list(self._subscribers)
        for subscriber in subscribers:
            with contextlib.suppress(RuntimeError):
                subscriber.loop.call_soon_threadsafe(subscriber.offer, None)

    def _drop(self, subscription: Subscription) -> None:
        with self._lock, contextlib.suppress(ValueError):
            self._subscribers.remove(subscription)
