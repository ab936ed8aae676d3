"""Sessions, their messages, and agent runs."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from memvault.gateway.schemas.base import Body, Moment, Result
from memvault.memory.sessions import CHANNEL_PATTERN, DIRECTIONS, MAX_TEXT, ROLES


class MessageBody(Body):
    text: str = Field(min_length=1, max_length=MAX_TEXT)
    role: Literal[ROLES] = "user"  # type: ignore[valid-type]
    direction: Literal[DIRECTIONS] | None = Field(  # type: ignore[valid-type]
        None, description="inbound or outbound; default: inbound for the user, else outbound."
    )
    channel: str | None = Field(
        None,
        pattern=CHANNEL_PATTERN,
        description="Lowercase name; default: the key's prefix (telegram of telegram:42).",
    )
    sender: str | None = Field(None, max_length=200)
    timestamp: Moment | None = Field(
        None, description="When it was sent: ISO 8601 or Unix time; default now."
    )
    metadata: dict[str, Any] | None = None


class EndBody(Body):
    summary: str | None = Field(None, max_length=5000)


class AgentRunBody(Body):
    command: str = Field(min_length=1, max_length=MAX_TEXT, description="What the agent should do.")
    session: str = Field(
        "api",
        min_length=1,
        max_length=200,
        description="Session key; turns of a session build on each other.",
    )
    channel: str | None = Field(
        None,
        pattern=CHANNEL_PATTERN,
        description="Where the owner is, e.g. telegram; default the key's prefix.",
    )
    sender: str | None = Field(None, max_length=200)
    stream: bool = Field(
        False,
        description="Answer with Server-Sent Events of the run's steps and text as they happen.",
    )


class AgentUsage(Result):
    input_tokens: int
    output_tokens: int


class AgentRun(Result):
    status: Literal["done", "failed", "cancelled"]
    answer: str
    summary: str
    iterations: int
    session: str
    model: str | None
    usage: AgentUsage
    tool_calls: list[dict[str, Any]]
    error: str | None


class SessionOut(Result):
    id: int
    key: str
    channel: str
    active: bool
    started_at: str
    last_message_at: str | None
    ended_at: str | None
    message_count: int
    summary: str | None
    agent: str | None = Field(
        None, description="The named API token that opened it; null for the owner."
    )


class MessageOut(Result):
    id: int
    session_id: int
    channel: str
    direction: str
    role: str
    sender: str | None
    text: str
    sent_at: str
    metadata: dict[str, Any] | None


class Logged(Result):
    session: SessionOut
    message: MessageOut


class SessionDetail(Result):
    session: SessionOut
    messages: list[MessageOut]
