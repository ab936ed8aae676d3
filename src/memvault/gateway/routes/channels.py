"""The messaging channels over HTTP: send, read, and the owner's decisions.

The earlier design's routes, with its error codes: ``POST /v1/send``,
``GET /v1/messages``, ``GET /v1/conversations`` (and ``GET /v1/context``
with ``adapter=``, in :mod:`~memvault.gateway.routes.memory`), answering
``adapter_not_found``, ``unsupported_action``, ``invalid_conversation_hint``,
``invalid_text``, ``not_supported`` and ``invalid_json``. A send obeys the
channel's access rules: a recipient the owner has not let in is
``403 recipient_not_allowed``, and nothing is sent.

memvault's own: ``GET /v1/channels`` (each channel's state), who waits for
approval, the outbox and its retry, and ``approve`` / ``block``. Those two
change who may talk to the agent, so, like a tier-3 tool call, they need the
owner's approval token in ``X-Memvault-Approval``.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Header, Path, Query

from memvault.channels import owner
from memvault.channels.hub import Hub
from memvault.channels.tools import primary_channel
from memvault.gateway.daemon import Daemon
from memvault.gateway.errors import ApiError
from memvault.gateway.routes import COMMON_ERRORS, DaemonDep, errors, row_id
from memvault.gateway.schemas import (
    ChannelConversations,
    ChannelMessages,
    ChannelStatus,
    Envelope,
    OutboxMessage,
    SendBody,
    SenderBody,
    SenderOut,
    SendPayload,
    SentMessage,
)
from memvault.gateway.security import matches

router = APIRouter(prefix="/v1", tags=["channels"])

ACTION = "send_message"
BY = "api"

Adapter = Annotated[
    str | None,
    Query(
        description="The channel, e.g. telegram; default the owner's primary channel (the "
        "first enabled channel with an owner id)."
    ),
]
ChannelLimit = Annotated[int, Query(ge=1, le=200, description="How many at most (1 to 200).")]
ChannelPath = Annotated[str, Path(description="The channel, e.g. telegram.")]
Approval = Annotated[
    str | None,
    Header(
        alias="X-Memvault-Approval",
        description="The owner's approval token (<vault>/.memvault/approval-token).",
    ),
]


def _channel(hub: Hub, adapter: str | None) -> str:
    """The channel a request names, else the owner's primary one."""
    return hub.channel_named(adapter) if adapter else primary_channel(hub)


def _require_approval(daemon: Daemon, approval: str | None, doing: str) -> None:
    if not matches(approval, daemon.approval_token):
        raise ApiError(
            403,
            "approval_required",
            f"{doing} changes who may talk to the agent; send the owner's approval token "
            "as X-Memvault-Approval.",
        )


@router.post("/send", response_model=Envelope[SentMessage], responses=errors(*COMMON_ERRORS))
def send(body: SendBody, daemon: DaemonDep) -> dict[str, Any]:
    """Send a message on a channel: to the owner, or to a chat or contact the owner let in.

    Waits up to 15 seconds for the platform: ``status`` says whether the message
    was sent, is queued (retried with backoff), or failed (the platform refused
    it; ``memvault channels outbox`` shows it).
    """
    action = ACTION if body.action is None else body.action
    if action != ACTION:
        raise ApiError(
            400,
            "unsupported_action",
            f"The action {action!r} is not supported; the only action is {ACTION}.",
        )
    payload = body.payload or SendPayload()
    hub = daemon.hub
    channel = _channel(hub, body.adapter)
    result = hub.send(channel, payload.conversation_hint or "", payload.text or "")
    return {"ok": True, "result": result}


@router.get("/messages", response_model=Envelope[ChannelMessages], responses=errors(*COMMON_ERRORS))
def messages(
    daemon: DaemonDep,
    adapter: Adapter = None,
    conversation: Annotated[
        str | None,
        Query(description="Only this chat: 'owner', a chat id, or a contact's name."),
    ] = None,
    limit: ChannelLimit = 50,
) -> dict[str, Any]:
    """Recent messages of a channel, oldest first: what arrived and what was sent."""
    channel = _channel(daemon.hub, adapter)
    return {"ok": True, "result": daemon.hub.messages(channel, conversation or None, limit)}


@router.get(
    "/conversations",
    response_model=Envelope[ChannelConversations],
    responses=errors(*COMMON_ERRORS),
)
def conversations(
    daemon: DaemonDep, adapter: Adapter = None, limit: ChannelLimit = 50
) -> dict[str, Any]:
    """A channel's conversations, the most recent first (from the platform where it can
    list them, else from memvault's own log of the channel)."""
    channel = _channel(daemon.hub, adapter)
    return {"ok": True, "result": daemon.hub.conversations(channel, limit)}


@router.get(
    "/channels", response_model=Envelope[list[ChannelStatus]], responses=errors(*COMMON_ERRORS)
)
def channels(daemon: DaemonDep) -> dict[str, Any]:
    """Every channel: enabled, its state (and why it stopped), policy, last message, outbox."""
    return {"ok": True, "result": daemon.hub.status()}


@router.get(
    "/channels/pending",
    response_model=Envelope[list[SenderOut]],
    responses=errors(*COMMON_ERRORS),
)
def pending(
    daemon: DaemonDep,
    channel: Annotated[str | None, Query(description="Only this channel.")] = None,
) -> dict[str, Any]:
    """Senders waiting for the owner's decision, the most recent first (with pairing codes)."""
    waiting = owner.pending(daemon.hub, channel or None)
    return {"ok": True, "result": [s.to_dict() for s in waiting]}


@router.post(
    "/channels/{channel}/approve",
    response_model=Envelope[SenderOut],
    responses=errors(*COMMON_ERRORS, 404, 409),
)
def approve(
    channel: ChannelPath, body: SenderBody, daemon: DaemonDep, approval: Approval = None
) -> dict[str, Any]:
    """Let a sender talk to the agent (their id, or their pairing code); they become a
    contact. Needs the owner's approval token."""
    _require_approval(daemon, approval, "Approving a sender")
    sender = owner.approve(daemon.hub, channel, body.sender, by=BY)
    return {"ok": True, "result": sender.to_dict()}


@router.post(
    "/channels/{channel}/block",
    response_model=Envelope[SenderOut],
    responses=errors(*COMMON_ERRORS, 404, 409),
)
def block(
    channel: ChannelPath, body: SenderBody, daemon: DaemonDep, approval: Approval = None
) -> dict[str, Any]:
    """Shut a sender out for good: no earlier approval gets them back in, and nothing is
    sent to them. Needs the owner's approval token."""
    _require_approval(daemon, approval, "Blocking a sender")
    sender = owner.block(daemon.hub, channel, body.sender, by=BY)
    return {"ok": True, "result": sender.to_dict()}


@router.get(
    "/channels/outbox",
    response_model=Envelope[list[OutboxMessage]],
    responses=errors(*COMMON_ERRORS),
)
def outbox(
    daemon: DaemonDep,
    status: Annotated[
        Literal["pending", "failed", "sent", "all"], Query(description="Only these messages.")
    ] = "all",
    limit: ChannelLimit = 50,
) -> dict[str, Any]:
    """What memvault sends and sent on the channels, newest first."""
    rows = owner.outbox(daemon.hub, status, limit)
    return {"ok": True, "result": [row.to_dict() for row in rows]}


@router.post(
    "/channels/outbox/{outbox_id}/retry",
    response_model=Envelope[OutboxMessage],
    responses=errors(*COMMON_ERRORS, 404, 409),
)
def retry(
    outbox_id: Annotated[int, row_id("The outbox message's id.")],
    daemon: DaemonDep,
) -> dict[str, Any]:
    """Queue a message that could not be sent again; it goes out with the next ones."""
    return {"ok": True, "result": owner.retry(daemon.hub, outbox_id).to_dict()}
