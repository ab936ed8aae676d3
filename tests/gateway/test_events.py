"""The event bus over HTTP: poll cursors, SSE replay, heartbeats, overflow, ids across restarts."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import httpx2 as httpx
import pytest

from gateway_support import Live, StartDaemon, ok
from memvault.gateway.events import ID_BLOCK, EventBus, IdStore
from waiting import WAIT, wait_for

# A hang guard (every wait has its own bound), on both backends.
pytestmark = [pytest.mark.timeout(3 * WAIT), pytest.mark.both_backends]


def remember(api: httpx.Client, text: str) -> str:
    return str(ok(api.post("/v1/memories", json={"text": text}))["id"])


def poll(api: httpx.Client, since: int | None = None) -> dict[str, Any]:
    params = {} if since is None else {"since": since}
    return dict(ok(api.get("/v1/poll", params=params)))


class Stream:
    """An SSE connection read on a thread: frames parsed into (id, data) pairs."""

    def __init__(self, live: Live, headers: dict[str, str] | None = None, query: str = "") -> None:
        self.frames: list[tuple[int | None, dict[str, Any]]] = []
        self.comments: list[str] = []
        self.closed = threading.Event()
        self._client = live.client()
        self._context = self._client.stream(
            "GET", "/v1/events" + query, headers=headers or {}, timeout=None
        )
        self.response = self._context.__enter__()
        assert self.response.status_code == 200
        assert self.response.headers["content-type"].startswith("text/event-stream")
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        event_id: int | None = None
        data: list[str] = []
        try:
            for line in self.response.iter_lines():
                if line.startswith("id: "):
                    event_id = int(line[4:])
                elif line.startswith("data: "):
                    data.append(line[6:])
                elif line.startswith(":"):
                    self.comments.append(line)
                elif line == "" and data:
                    self.frames.append((event_id, json.loads("\n".join(data))))
                    event_id, data = None, []
        except (httpx.ReadError, httpx.RemoteProtocolError, httpx.StreamClosed):
            pass
        finally:
            self.closed.set()

    def events(self) -> list[dict[str, Any]]:
        return [data for event_id, data in self.frames if event_id is not None]

    def ids(self) -> list[int]:
        return [event_id for event_id, _ in self.frames if event_id is not None]

    def close(self) -> None:
        self._context.__exit__(None, None, None)
        self._client.close()


@pytest.fixture
def streams(live: Live) -> Iterator[list[Stream]]:
    opened: list[Stream] = []
    yield opened
    for stream in opened:
        stream.close()


def test_memory_events_and_poll_cursors(live: Live, api: httpx.Client) -> None:
    first = remember(api, "Alpha fact for the poll")
    everything = poll(api)
    stored = [e for e in everything["events"] if e["type"] == "memory_stored"]
    assert [e["payload"]["id"] for e in stored] == [first]
    assert stored[0]["source"] == "memory" and stored[0]["payload"]["text"].startswith("Alpha")
    assert stored[0]["observed_at"].endswith("Z")
    changed = [
        e
        for e in everything["events"]
        if e["type"] == "note_changed" and e["payload"]["origin"] == "memvault"
    ]
    assert changed[0]["payload"] == {
        "path": "Memory/Facts.md",
        "change": "append",
        "new_path": None,
        "origin": "memvault",
    }
    ids = [e["id"] for e in everything["events"]]
    assert ids == sorted(ids) and everything["next_cursor"] == ids[-1]

    cursor = everything["next_cursor"]
    assert poll(api, cursor) == {"events": [], "next_cursor": cursor, "gap": False}
    second = remember(api, "Beta fact for the poll")
    ok(api.delete(f"/v1/memories/{first}"))
    later = poll(api, cursor)
    kinds = [(e["type"], e["payload"].get("id")) for e in later["events"] if "id" in e["payload"]]
    assert kinds == [("memory_stored", second), ("memory_forgotten", first)]
    assert all(e["id"] > cursor for e in later["events"])
    assert poll(api, later["next_cursor"])["events"] == []
    # A cursor from the future is not trusted beyond the newest id.
    assert poll(api, 10**9)["next_cursor"] == later["next_cursor"]


def test_task_and_session_events(live: Live, api: httpx.Client) -> None:
    ok(api.post("/v1/tasks", json={"title": "Paint the fence"}))
    ok(api.post("/v1/sessions/telegram:7/messages", json={"text": "hello"}))
    ok(api.post("/v1/sessions/telegram:7/end"))
    events = poll(api)["events"]
    types = [e["type"] for e in events]
    assert "task_changed" in types and "session_message" in types and "session_ended" in types
    task = next(e for e in events if e["type"] == "task_changed")
    assert task["payload"]["path"] == "Tasks/active/Paint the fence.md"
    message = next(e for e in events if e["type"] == "session_message")
    assert message["source"] == "session:telegram"
    assert message["payload"]["key"] == "telegram:7" and message["payload"]["text"] == "hello"


def test_external_edits_become_events(live: Live, api: httpx.Client) -> None:
    cursor = poll(api)["next_cursor"]
    (live.vault / "Projects").mkdir(exist_ok=True)
    (live.vault / "Projects/Orion.md").write_text("# Orion\n\nWritten in Obsidian.\n")

    def seen() -> list[dict[str, Any]]:
        return [
            e
            for e in poll(api, cursor)["events"]
            if e["type"] == "note_changed" and e["payload"]["path"] == "Projects/Orion.md"
        ]

    event = wait_for(seen, "the edit's event")[0]
    assert event["payload"]["origin"] == "external" and event["payload"]["change"] == "added"
    hits = ok(api.get("/v1/search", params={"q": "Orion Obsidian", "kind": "project"}))
    assert hits[0]["path"] == "Projects/Orion.md"


def test_backfill_reports_index_progress(live: Live, api: httpx.Client) -> None:
    for n in range(5):
        remember(api, f"Progress fact number {n}")

    def progress() -> list[dict[str, Any]]:
        return [e for e in poll(api)["events"] if e["type"] == "index_progress"]

    events = wait_for(progress, "index progress")
    assert events[-1]["payload"]["stage"] == "embedding" and events[-1]["source"] == "index"
    wait_for(lambda: live.daemon.runtime.index.pending() == 0, "the backfill to finish")


def test_sse_replays_last_three_then_streams_live(start_daemon: StartDaemon) -> None:
    # No background work (the backfill's progress), so no event comes but the test's own:
    # the newest three when the stream opens are the three polled before.
    live = start_daemon(background=False)
    with live.client() as api:
        for n in range(3):
            remember(api, f"Before the stream {n}")
        newest = poll(api)["events"]
        stream = Stream(live)
        try:
            wait_for(lambda: len(stream.ids()) >= 3, "three replayed events")
            assert stream.ids() == [e["id"] for e in newest[-3:]]
            assert stream.comments and stream.comments[0].startswith(": memvault events")

            fresh = remember(api, "During the stream")
            wait_for(
                lambda: any(e["payload"].get("id") == fresh for e in stream.events()),
                "the live event",
            )
            ids = stream.ids()
            assert ids == sorted(set(ids)), "ids arrive once each, in order"
            live_event = next(e for e in stream.events() if e["payload"].get("id") == fresh)
            assert live_event["type"] == "memory_stored"
        finally:
            stream.close()


def test_sse_last_event_id_replays_everything_after_it(
    live: Live, api: httpx.Client, streams: list[Stream]
) -> None:
    remember(api, "One")
    cursor = poll(api)["next_cursor"]
    remember(api, "Two")
    remember(api, "Three")
    expected = [e["id"] for e in poll(api, cursor)["events"]]
    assert len(expected) >= 4

    stream = Stream(live, headers={"Last-Event-ID": str(cursor)})
    streams.append(stream)
    wait_for(lambda: len(stream.ids()) >= len(expected), "the replay after Last-Event-ID")
    # Background work (the embedding backfill) may add events after these.
    assert stream.ids()[: len(expected)] == expected
    by_query = Stream(live, query=f"?since={cursor}")
    streams.append(by_query)
    wait_for(lambda: len(by_query.ids()) >= len(expected), "the replay after ?since")
    assert by_query.ids()[: len(expected)] == expected
    caught_up = Stream(live, headers={"Last-Event-ID": str(expected[-1])})
    streams.append(caught_up)
    remember(api, "Four")
    wait_for(lambda: caught_up.ids(), "the event after the newest one")
    assert caught_up.ids()[0] > expected[-1]


def test_sse_heartbeats_carry_no_id(start_daemon: StartDaemon) -> None:
    live = start_daemon(settings={"server": {"sse_heartbeat_seconds": 0.2}})
    stream = Stream(live)
    try:
        wait_for(lambda: len([d for i, d in stream.frames if i is None]) >= 2, "two heartbeats")
        beats = [data for event_id, data in stream.frames if event_id is None]
        assert all(b["type"] == "heartbeat" and b["source"] == "system" for b in beats)
        assert all(b["last_id"] <= max(stream.ids(), default=0) for b in beats)
        assert all(data["type"] != "heartbeat" for data in stream.events())
    finally:
        stream.close()


def test_ring_buffer_overflow_and_gap(start_daemon: StartDaemon) -> None:
    live = start_daemon(settings={"server": {"event_buffer": 10}})
    with live.client() as api:
        remember(api, "The first of many")
        first_cursor = poll(api)["events"][0]["id"]
        for n in range(12):
            remember(api, f"Overflowing fact {n}")
        kept = poll(api)
        assert len(kept["events"]) == 10
        answer = poll(api, first_cursor)
        assert answer["gap"] is True and len(answer["events"]) == 10
        oldest = answer["events"][0]["id"]
        assert poll(api, oldest - 1)["gap"] is False
        ok(api.get("/v1/poll", params={"limit": 2}))
        assert len(poll(api, 0)["events"]) == 10


def test_streams_end_when_the_daemon_stops(live: Live, streams: list[Stream]) -> None:
    stream = Stream(live)
    streams.append(stream)
    wait_for(lambda: stream.comments, "the stream's opening comment")  # it is streaming
    live.stop()
    assert stream.closed.wait(WAIT), "the stream did not end on shutdown"


def test_event_ids_keep_increasing_across_restarts(start_daemon: StartDaemon) -> None:
    first = start_daemon()
    with first.client() as api:
        remember(api, "Before the restart")
        last = poll(api)["next_cursor"]
    first.stop()
    second = start_daemon(first.vault)
    with second.client() as api:
        remember(api, "After the restart")
        events = poll(api)["events"]
    assert events and all(e["id"] > last for e in events)
    assert events[0]["id"] <= last + ID_BLOCK + 1


def test_bus_reserves_ids_in_blocks() -> None:
    stored: list[str] = []

    def ids() -> IdStore:
        return IdStore(lambda: stored[-1] if stored else None, stored.append)

    bus = EventBus(capacity=5, ids=ids())
    events = [bus.publish("x", {"n": n}, source="test") for n in range(ID_BLOCK + 2)]
    assert [e.id for e in events[:3]] == [1, 2, 3]
    assert stored == [str(ID_BLOCK), str(2 * ID_BLOCK)]
    assert [e.id for e in bus.since(None)] == [e.id for e in events[-5:]]
    restarted = EventBus(capacity=5, ids=ids())
    assert restarted.publish("y", source="test").id == 2 * ID_BLOCK + 1
