"""Channels: their status, messages, conversations, senders and outbox."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from memvault.gateway.schemas.base import Body, Result


class SendPayload(Body):
    # Optional here, so an empty one is refused in the earlier design's words
    # (invalid_conversation_hint, invalid_text) rather than as validation_failed.
    conversation_hint: str | None = Field(
        None,
        description="Who to write to: 'owner', a chat id, or the name of a contact with an "
        "id on the channel (400 invalid_conversation_hint when empty).",
    )
    text: str | None = Field(
        None, description="The message, in Markdown (400 invalid_text when empty)."
    )
    enter_to_send: bool | None = Field(
        None, description="Accepted from the earlier design's clients; memvault always sends."
    )


class SendBody(Body):
    adapter: str | None = Field(
        None,
        description="The channel, e.g. telegram; default the owner's primary channel (the "
        "first enabled channel with an owner id); 400 adapter_not_found.",
    )
    action: str | None = Field(
        None,
        description="send_message, the only action (the default; 400 unsupported_action).",
    )
    payload: SendPayload | None = None


class SentMessage(Result):
    adapter: str
    action: Literal["send_message"]
    message_id: str = Field(description="The outbox ids of the message's parts, joined by ','.")
    status: Literal["sent", "queued", "failed", "suppressed"] = Field(
        description="sent; queued (the channel is not reachable now: it is retried); "
        "failed (the platform refused it: see error and the outbox); or suppressed (the "
        "text was only a protocol token such as HEARTBEAT_OK: nothing was sent)."
    )
    chat_id: str
    outbox_ids: list[int]
    parts: int
    error: str | None
    timestamp: str


class ChannelMessage(Result):
    id: int
    direction: Literal["inbound", "outbound"]
    status: str
    received_at: str
    chat_id: str | None
    sender_id: str | None
    sender_name: str | None
    text: str | None
    attachments: list[Any]


class ChannelMessages(Result):
    adapter: str
    conversation: str | None = Field(description="The chat shown, or null for every chat.")
    messages: list[ChannelMessage] = Field(description="Oldest first.")
    message_count: int


class ChannelConversation(Result):
    chat_id: str
    name: str | None = None
    messages: int | None = None
    last_message_at: str | None = None
    last_text: str | None = None


class ChannelConversations(Result):
    adapter: str
    conversations: list[ChannelConversation] = Field(description="The most recent first.")
    count: int
    source: Literal["platform", "memvault"] = Field(
        description="Who listed them: the platform, or memvault's own log of the channel."
    )


class ChannelContext(Result):
    adapter: str
    conversation: str = Field(description="The chat id.")
    conversation_name: str | None
    contact: str | None = Field(description="The sender's contact note, if there is one.")
    owner: bool
    session: dict[str, Any] | None
    platform: dict[str, Any] | None
    timestamp: str


class ChannelStatus(Result):
    channel: str
    enabled: bool
    state: str
    error: str | None
    identity: str | None
    restarts: int
    policy: str
    owner_set: bool
    respond: bool
    last_received: str | None
    outbox: dict[str, int] = Field(description="Outbox messages by status.")
    waiting_senders: int
    connected: bool = Field(False, description="Whether its adapter runs now (in the daemon).")
    running_since: str | None = Field(None, description="When its adapter started running.")
    uptime_seconds: int | None = Field(None, description="Seconds it has run since then.")
    receiving: str | None = Field(
        None,
        description="How its messages arrive now, when it has more than one way (the "
        "OpenClaw bridge: the gateway's events, or polling and why).",
    )


class SenderBody(Body):
    sender: str = Field(
        description="The sender's id, or the pairing code they were given (ABCD-EFGH)."
    )


class SenderOut(Result):
    channel: str
    sender_id: str
    chat_id: str | None
    name: str | None
    username: str | None
    status: Literal["pending", "approved", "blocked"]
    code: str | None
    code_expires_at: str | None
    first_seen: str
    last_seen: str
    messages: int
    decided_at: str | None
    decided_by: str | None


class OutboxMessage(Result):
    id: int
    channel: str
    chat_id: str
    kind: str
    text: str
    status: Literal["pending", "failed", "sent"]
    attempts: int
    part: int
    parts: int
    next_attempt_at: str
    last_error: str | None
    created_at: str
    sent_at: str | None
