"""Events: ``/v1/poll`` (cursor-based) and ``/v1/events`` (Server-Sent Events)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import APIRouter, Header, Query, Request
from fastapi.responses import StreamingResponse

from memvault.gateway.events import Event
from memvault.gateway.routes import COMMON_ERRORS, MAX_ROW_ID, DaemonDep, errors
from memvault.gateway.schemas import Envelope, Poll

router = APIRouter(prefix="/v1", tags=["events"])

POLL_LIMIT = 1000
REPLAY_ON_CONNECT = 3


@router.get("/poll", response_model=Envelope[Poll], responses=errors(*COMMON_ERRORS))
def poll(
    daemon: DaemonDep,
    since: Annotated[
        int | None,
        Query(ge=0, le=MAX_ROW_ID, description="Events with ids above this; all buffered without."),
    ] = None,
    limit: Annotated[int, Query(ge=1, le=POLL_LIMIT)] = POLL_LIMIT,
) -> dict[str, Any]:
    """Buffered events after a cursor, oldest first; ``next_cursor`` continues."""
    events = daemon.bus.since(since, limit)
    oldest = daemon.bus.oldest_id()
    gap = since is not None and oldest is not None and since + 1 < oldest
    if events:
        cursor = events[-1].id
    else:
        # Nothing new: the cursor stays, but never beyond the newest id.
        cursor = min(since, daemon.bus.last_id) if since is not None else daemon.bus.last_id
    return {
        "ok": True,
        "result": {"events": [e.to_dict() for e in events], "next_cursor": cursor, "gap": gap},
    }


def _frame(event: Event) -> str:
    data = json.dumps(event.to_dict(), ensure_ascii=False, separators=(",", ":"))
    return f"id: {event.id}\ndata: {data}\n\n"


def _heartbeat(last_id: int) -> str:
    beat = {
        "type": "heartbeat",
        "source": "system",
        "last_id": last_id,
        "observed_at": datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
    }
    return f"data: {json.dumps(beat, separators=(',', ':'))}\n\n"


def _cursor(last_event_id: str | None, since: int | None) -> int | None:
    """The id to replay after: Last-Event-ID when it is one (an id no row can have is not),
    else ``since``."""
    given = (last_event_id or "").strip()
    if given.isdigit() and len(given) < 20 and int(given) <= MAX_ROW_ID:
        return int(given)
    return since


@router.get(
    "/events",
    response_class=StreamingResponse,
    responses={
        200: {
            "description": "text/event-stream: `id: N` and `data: {event}` per event; "
            "heartbeats carry no id.",
            "content": {"text/event-stream": {"schema": {"type": "string"}}},
        },
        **errors(*COMMON_ERRORS),
    },
)
async def events(
    request: Request,
    daemon: DaemonDep,
    last_event_id: Annotated[
        str | None,
        Header(alias="Last-Event-ID", description="Replay every event after this id."),
    ] = None,
    since: Annotated[
        int | None,
        Query(ge=0, le=MAX_ROW_ID, description="Like Last-Event-ID, for clients without headers."),
    ] = None,
) -> StreamingResponse:
    """A live stream of events. Without a cursor it starts with the last 3 events."""
    cursor = _cursor(last_event_id, since)
    heartbeat = daemon.runtime.settings.server.sse_heartbeat_seconds
    loop = asyncio.get_running_loop()
    bus = daemon.bus

    async def stream() -> AsyncIterator[str]:
        with bus.subscribe(loop) as subscription:
            backlog = bus.since(cursor) if cursor is not None else bus.last(REPLAY_ON_CONNECT)
            sent = backlog[-1].id if backlog else (cursor or 0)
            yield f"retry: 2000\n: memvault events from {sent}\n\n"
            for event in backlog:
                yield _frame(event)
            while True:
                try:  # not wait_for: on Python 3.11 it can swallow a disconnect's cancel
                    async with asyncio.timeout(heartbeat):
                        latest = await subscription.queue.get()
                except TimeoutError:
                    yield _heartbeat(sent)
                    continue
                if latest is None:  # shutting down, or this reader fell too far behind
                    return
                if latest.id > sent:
                    sent = latest.id
                    yield _frame(latest)

    return StreamingResponse(
        stream(),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )
