"""Events fan out between daemons through a real PostgreSQL: LISTEN / NOTIFY over a table."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime

import psycopg
import pytest

from memvault.gateway.events import Event, EventBus
from memvault.storage.notify import TABLE, EventFanOut, RemoteEvent
from memvault.storage.postgres import Target
from waiting import WAIT, wait_for


@dataclass
class Instance:
    """One daemon's bus wired to the database as the daemon wires it."""

    bus: EventBus
    fanout: EventFanOut


def wire(dsn: str) -> Instance:
    bus = EventBus()

    def deliver(event: RemoteEvent) -> None:
        bus.publish(
            event.type,
            event.payload,
            source=event.source,
            origin=event.origin,
            observed_at=event.observed_at,
        )

    fanout = EventFanOut(dsn, Target.of(dsn, "MEMVAULT_PG_DSN"), deliver)

    def send(event: Event) -> None:
        if event.origin is None:
            fanout.send(event.type, event.source, event.payload, event.observed_at)

    bus.observe(send)
    fanout.start()
    assert fanout.listening.wait(WAIT), "the listener did not connect"
    return Instance(bus, fanout)


@pytest.fixture
def instances(database: str) -> Iterator[Callable[[], Instance]]:
    made: list[Instance] = []

    def make() -> Instance:
        made.append(wire(database))
        return made[-1]

    yield make
    for instance in made:
        instance.fanout.stop()


def arrived(bus: EventBus, kind: str) -> list[Event]:
    """The events of type ``kind`` on ``bus``, once at least one is there."""
    return wait_for(lambda: [e for e in bus.since(None) if e.type == kind], f"a {kind} event")


def test_an_event_published_on_one_bus_reaches_the_other_once_and_never_echoes(
    instances: Callable[[], Instance],
) -> None:
    primary, replica = instances(), instances()
    replica.bus.publish("warming", {}, source="test")  # the replica's ids run ahead
    replica.bus.publish("warming", {}, source="test")
    published = primary.bus.publish("memory_stored", {"text": "Ada likes tea"}, source="memory")

    [relayed] = arrived(replica.bus, "memory_stored")
    assert relayed.payload == {"text": "Ada likes tea"}
    assert relayed.source == "memory"
    assert relayed.origin == primary.fanout.instance
    assert relayed.observed_at == published.observed_at
    # Ids are the replica's own: they continue after its last one (Last-Event-ID per daemon).
    assert relayed.id == 3
    assert relayed.to_dict().keys() == published.to_dict().keys()

    # The primary heard its own announcement and skipped it; the replica's relay is not
    # sent back either; nor does either bus see the "warming" events twice. (A short
    # window: that nothing more comes within it is the assertion.)
    time.sleep(0.5)
    assert [e.type for e in primary.bus.since(None)] == ["memory_stored", "warming", "warming"]
    assert [e.type for e in replica.bus.since(None)] == ["warming", "warming", "memory_stored"]


def test_three_daemons_each_see_the_others_events(instances: Callable[[], Instance]) -> None:
    a, b, c = instances(), instances(), instances()
    a.bus.publish("from_a", {}, source="test")
    b.bus.publish("from_b", {}, source="test")
    for bus, expected in ((a.bus, "from_b"), (b.bus, "from_a"), (c.bus, "from_a")):
        arrived(bus, expected)
    arrived(c.bus, "from_b")


def test_an_event_larger_than_a_notify_payload_arrives_whole(
    instances: Callable[[], Instance],
) -> None:
    primary, replica = instances(), instances()
    text = "ünïcode and a long memory " * 2000  # ~52 kB; NOTIFY takes 8000 bytes at most
    assert len(text.encode()) > 8000
    primary.bus.publish("memory_stored", {"text": text, "tags": ["big"]}, source="memory")
    [relayed] = arrived(replica.bus, "memory_stored")
    assert relayed.payload == {"text": text, "tags": ["big"]}


def test_the_listener_reconnects_after_its_backend_is_terminated_and_catches_up(
    instances: Callable[[], Instance], database: str, caplog: pytest.LogCaptureFixture
) -> None:
    primary, replica = instances(), instances()
    pid = replica.fanout.listener_pid
    assert pid is not None
    with caplog.at_level(logging.INFO, logger="memvault.storage.notify"):
        with psycopg.connect(database, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        deadline = time.monotonic() + WAIT
        while replica.fanout.listener_pid in (pid, None) and time.monotonic() < deadline:
            # Published while the replica is away: read from the table when it is back.
            primary.bus.publish("while_away", {}, source="test")
            time.sleep(0.05)
        assert replica.fanout.listener_pid not in (pid, None), "the listener did not come back"
        primary.bus.publish("after", {"n": 1}, source="test")
        arrived(replica.bus, "after")
    relayed = [e.type for e in replica.bus.since(None)]
    sent = [e.type for e in primary.bus.since(None)]
    # Every event the primary sent arrived, once, in order.
    assert relayed == sent
    lost = [r for r in caplog.records if "lost PostgreSQL" in r.getMessage()]
    back = [r for r in caplog.records if "PostgreSQL is back" in r.getMessage()]
    assert len(lost) == 1 and len(back) == 1, [r.getMessage() for r in caplog.records]


def test_a_database_that_is_unreachable_neither_blocks_publishing_nor_raises(
    caplog: pytest.LogCaptureFixture,
) -> None:
    dsn = "postgresql://nobody:x@127.0.0.1:1/none"
    received: list[RemoteEvent] = []
    fanout = EventFanOut(dsn, Target.of(dsn, "MEMVAULT_PG_DSN"), received.append)
    expected = {
        "lost PostgreSQL while sending events to the other daemons; reconnecting",
        "lost PostgreSQL while receiving events from the other daemons; reconnecting",
    }

    def fanout_said() -> set[str]:  # only the fan-out's words (other threads may log too)
        return {r.getMessage() for r in caplog.records if r.name == "memvault.storage.notify"}

    with caplog.at_level(logging.WARNING, logger="memvault.storage.notify"):
        fanout.start()
        for n in range(100):  # each returns at once: the events wait in the fan-out's queue
            fanout.send("tick", "test", {"n": n}, datetime.now(UTC))
        wait_for(
            lambda: fanout_said() >= expected,
            "both loops to report the lost database",
        )
        fanout.stop(timeout=2)  # how long it tries to hand the queue over: all of it, here
    assert not fanout.listening.is_set()
    assert fanout_said() == expected


def test_each_event_is_one_row_whoever_made_the_table(
    instances: Callable[[], Instance], database: str
) -> None:
    primary, _replica = instances(), instances()
    primary.bus.publish("kept", {}, source="test")
    with psycopg.connect(database, autocommit=True) as admin:
        row = wait_for(
            lambda: admin.execute(
                f"SELECT count(*), min(type) FROM {TABLE} HAVING count(*) > 0"
            ).fetchone(),
            "the event's row",
        )
    assert row == (1, "kept")
