"""Sessions and their messages: ``/v1/sessions``."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Path, Query

from memvault.gateway.routes import COMMON_ERRORS, DaemonDep, errors
from memvault.gateway.schemas import (
    EndBody,
    Envelope,
    Logged,
    MessageBody,
    NoticedEnvelope,
    SessionDetail,
    SessionOut,
    moment,
)
from memvault.memory.sessions import CHANNEL_PATTERN
from memvault.privacy.secrets import noticed

router = APIRouter(prefix="/v1", tags=["sessions"])

SessionKey = Annotated[
    str,
    Path(min_length=1, max_length=200, description="The conversation, e.g. telegram:42."),
]


@router.get(
    "/sessions", response_model=Envelope[list[SessionOut]], responses=errors(*COMMON_ERRORS)
)
def list_sessions(
    daemon: DaemonDep,
    active: Annotated[bool | None, Query(description="Only open (true) or ended (false).")] = None,
    channel: Annotated[
        str | None, Query(pattern=CHANNEL_PATTERN, description="Only this channel.")
    ] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 50,
) -> dict[str, Any]:
    """Sessions, the most recently active first."""
    found = daemon.sessions.list(active=active, channel=channel, limit=limit)
    return {"ok": True, "result": [s.to_dict() for s in found]}


@router.post(
    "/sessions/{key:path}/messages",
    response_model=NoticedEnvelope[Logged],
    responses=errors(*COMMON_ERRORS, 422),
)
def log_message(key: SessionKey, body: MessageBody, daemon: DaemonDep) -> dict[str, Any]:
    """Log an inbound or outbound message; opens a session for the key if none is open.
    A secret in the text is logged as a marker (the notice names it); a user's message
    holding one is a 422 with ``[privacy] secrets = "refuse"``."""
    with noticed() as removed:
        session, message = daemon.log_message(
            key,
            body.text,
            role=body.role,
            direction=body.direction,
            channel=body.channel,
            sender=body.sender,
            sent_at=moment(body.timestamp) if body.timestamp is not None else None,
            metadata=body.metadata,
        )
    answer = {"session": session.to_dict(), "message": message.to_dict()}
    return {"ok": True, "result": answer, "notice": removed.notice()}


@router.post(
    "/sessions/{key:path}/end",
    response_model=Envelope[SessionOut],
    responses=errors(*COMMON_ERRORS, 404),
)
def end_session(
    key: SessionKey,
    daemon: DaemonDep,
    body: Annotated[EndBody | None, Body()] = None,
) -> dict[str, Any]:
    """Close the key's open session (noted in today's journal)."""
    session = daemon.end_session(key, body.summary if body else None)
    return {"ok": True, "result": session.to_dict()}


@router.get(
    "/sessions/{key:path}",
    response_model=Envelope[SessionDetail],
    responses=errors(*COMMON_ERRORS, 404),
)
def get_session(
    key: SessionKey,
    daemon: DaemonDep,
    limit: Annotated[int, Query(ge=1, le=1000, description="Last N messages.")] = 100,
) -> dict[str, Any]:
    """The key's open session (else its latest) and its last messages."""
    session = daemon.sessions.get(key)
    messages = daemon.sessions.messages(session.id, limit=limit)
    return {
        "ok": True,
        "result": {"session": session.to_dict(), "messages": [m.to_dict() for m in messages]},
    }
