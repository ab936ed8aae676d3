"""Anthropic's Messages API, through the official SDK.

The Messages API wants what the neutral :class:`ChatMessage` list does not
guarantee: system text apart (``system=``), tool results inside a user turn
(``tool_result`` blocks), and turns that alternate between user and
assistant. :func:`to_anthropic` makes it so.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal, cast

import anthropic
import httpx2
from anthropic import Anthropic, Stream, omit
from anthropic.types import (
    ContentBlockParam,
    Message,
    MessageDeltaUsage,
    MessageParam,
    RawMessageStreamEvent,
    ToolParam,
    ToolResultBlockParam,
)

from memvault.config import LLMSettings
from memvault.llm.base import (
    ChatMessage,
    Completion,
    LLMNotConfiguredError,
    StopReason,
    TextSink,
    ToolCall,
    ToolSpec,
    Usage,
)
from memvault.llm.retry import Endpoint, Failure, RetryingProvider, Sleep

DEFAULT_KEY_ENV = "ANTHROPIC_API_KEY"

# An error event inside a 200 stream carries only its type; the status it stands for.
STREAM_ERROR_STATUS = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "timeout_error": 504,
    "overloaded_error": 529,
}

STOP_REASONS: dict[str, StopReason] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_use",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
}

Role = Literal["user", "assistant"]


class AnthropicProvider(RetryingProvider):
    """A Claude model behind Anthropic's ``/v1/messages`` endpoint."""

    name = "anthropic"

    def __init__(self, settings: LLMSettings, *, sleep: Sleep = time.sleep) -> None:
        key_env, key = self._configure(settings, DEFAULT_KEY_ENV, sleep)
        if not key:
            raise LLMNotConfiguredError(
                f"No API key for Anthropic: set the environment variable {key_env} "
                "(or name another one in llm.api_key_env)."
            )
        self._settings = settings
        self._client = Anthropic(
            api_key=key,
            base_url=settings.base_url,
            timeout=settings.timeout,
            max_retries=0,  # the retry policy below is the only one
        )
        self.endpoint = Endpoint(str(self._client.base_url).rstrip("/"), self.model, key_env)

    def _request(
        self, messages: Sequence[ChatMessage], tools: Sequence[ToolSpec], max_tokens: int | None
    ) -> _Request:
        system, turns = to_anthropic(messages)
        return _Request(
            system,
            turns,
            [to_anthropic_tool(tool) for tool in tools],
            max_tokens or self._settings.max_tokens,
        )

    def _send(self, request: _Request, *, stream: bool) -> Message | Stream[RawMessageStreamEvent]:
        temperature = self._settings.temperature
        return self._client.messages.create(
            model=self.model,
            max_tokens=request.max_tokens,
            messages=request.messages,
            system=request.system or omit,
            tools=request.tools or omit,
            stream=stream,
            # This SDK no longer lists temperature; the API still takes it where the model does.
            extra_body={"temperature": temperature} if temperature is not None else None,
        )

    def _create(self, request: _Request) -> Completion:
        response = cast(Message, self._send(request, stream=False))
        text: list[str] = []
        calls: list[ToolCall] = []
        for block in response.content:
            if block.type == "text":
                text.append(block.text)
            elif block.type == "tool_use":
                arguments: object = block.input
                if isinstance(arguments, dict):
                    calls.append(ToolCall(block.id, block.name, arguments))
                else:
                    calls.append(ToolCall(block.id, block.name, invalid=_raw(arguments)))
        spent = Usage(_input_tokens(response.usage) or 0, response.usage.output_tokens)
        return Completion(
            "".join(text), tuple(calls), stop_reason(response.stop_reason), response.model, spent
        )

    def _stream(self, request: _Request, sink: TextSink) -> Completion:
        text: list[str] = []
        calls: dict[int, _PartialCall] = {}
        stop: str | None = None
        model = self.model
        input_tokens = output_tokens = 0
        with cast(Stream[RawMessageStreamEvent], self._send(request, stream=True)) as stream:
            for event in stream:
                if event.type == "message_start":
                    model = event.message.model or model
                    input_tokens = _input_tokens(event.message.usage) or 0
                    output_tokens = event.message.usage.output_tokens
                elif event.type == "content_block_start":
                    block = event.content_block
                    if block.type == "tool_use":
                        calls[event.index] = _PartialCall(block.id, block.name, block.input)
                    elif block.type == "text" and block.text:
                        text.append(block.text)
                        sink(block.text)
                elif event.type == "content_block_delta":
                    delta = event.delta
                    if delta.type == "text_delta":
                        text.append(delta.text)
                        sink(delta.text)
                    elif delta.type == "input_json_delta" and event.index in calls:
                        calls[event.index].pieces.append(delta.partial_json)
                elif event.type == "message_delta":
                    stop = event.delta.stop_reason or stop
                    output_tokens = event.usage.output_tokens  # a running total
                    input_tokens = _input_tokens(event.usage) or input_tokens
        tool_calls = tuple(calls[index].finish() for index in sorted(calls))
        return Completion(
            "".join(text), tool_calls, stop_reason(stop), model, Usage(input_tokens, output_tokens)
        )

    def _classify(self, exc: Exception) -> Failure | None:
        if isinstance(exc, anthropic.APIStatusError):
            status = exc.status_code
            if status < 400:  # an error event in the middle of a 200 stream
                status = STREAM_ERROR_STATUS.get(str(exc.type), 500)
            return self.endpoint.status_failure(
                status, exc.response.headers, exc.body, fallback=exc.message
            )
        if isinstance(exc, anthropic.APITimeoutError | httpx2.TimeoutException):
            return self.endpoint.timeout_failure(self._settings.timeout)
        if isinstance(exc, anthropic.APIConnectionError):
            cause = exc.__cause__
            return self.endpoint.connection_failure(
                cause, connected=not isinstance(cause, httpx2.ConnectError)
            )
        if isinstance(exc, httpx2.TransportError):  # the SDK lets these through mid-stream
            return self.endpoint.connection_failure(
                exc, connected=not isinstance(exc, httpx2.ConnectError)
            )
        return None


@dataclass(frozen=True)
class _Request:
    system: str
    messages: list[MessageParam]
    tools: list[ToolParam]
    max_tokens: int


@dataclass
class _PartialCall:
    """A tool call being put together from stream deltas."""

    id: str
    name: str
    start: object
    pieces: list[str] = field(default_factory=list)

    def finish(self) -> ToolCall:
        if self.pieces:
            return ToolCall.from_json(self.id, self.name, "".join(self.pieces))
        if isinstance(self.start, dict):
            return ToolCall(self.id, self.name, self.start)
        return ToolCall(self.id, self.name, invalid=_raw(self.start))


def _input_tokens(usage: anthropic.types.Usage | MessageDeltaUsage) -> int | None:
    """Input tokens with the cached ones: all of them fill the context window."""
    if usage.input_tokens is None:
        return None
    cached = (usage.cache_creation_input_tokens or 0) + (usage.cache_read_input_tokens or 0)
    return usage.input_tokens + cached


def _raw(arguments: object) -> str:
    """Tool input that is not an object, as text for ``ToolCall.invalid``."""
    return arguments if isinstance(arguments, str) else json.dumps(arguments)


def to_anthropic(messages: Sequence[ChatMessage]) -> tuple[str, list[MessageParam]]:
    """``(system, messages)`` in the Messages API's shape.

    System messages are lifted out and joined; tool results become
    ``tool_result`` blocks of a user turn; consecutive turns of one role
    are merged, since the API wants user and assistant to alternate.
    Messages with nothing to say (the API refuses empty text) are dropped.
    """
    system: list[str] = []
    turns: list[tuple[Role, list[ContentBlockParam]]] = []
    for message in messages:
        if message.role == "system":
            if message.content:
                system.append(message.content)
            continue
        role, blocks = _blocks(message)
        if not blocks:
            continue
        if turns and turns[-1][0] == role:
            turns[-1][1].extend(blocks)
        else:
            turns.append((role, blocks))
    return "\n\n".join(system), [_turn(role, blocks) for role, blocks in turns]


def _turn(role: Role, blocks: list[ContentBlockParam]) -> MessageParam:
    if role == "user":
        return {"role": "user", "content": blocks}
    return {"role": "assistant", "content": blocks}


def _blocks(message: ChatMessage) -> tuple[Role, list[ContentBlockParam]]:
    blocks: list[ContentBlockParam] = []
    if message.role == "tool":
        result: ToolResultBlockParam = {
            "type": "tool_result",
            "tool_use_id": message.tool_call_id or "",
        }
        if message.content:
            result["content"] = message.content
        if message.is_error:
            result["is_error"] = True
        return "user", [result]
    if message.content:
        blocks.append({"type": "text", "text": message.content})
    if message.role == "user":
        return "user", blocks
    for call in message.tool_calls:
        # Invalid arguments go back as {}: the API only takes an object here.
        blocks.append(
            {"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments}
        )
    return "assistant", blocks


def to_anthropic_tool(tool: ToolSpec) -> ToolParam:
    """A tool in the Messages API's shape."""
    return {"name": tool.name, "description": tool.description, "input_schema": tool.input_schema}


def stop_reason(reason: str | None) -> StopReason:
    """Why the model stopped, from the API's ``stop_reason``."""
    return STOP_REASONS.get(reason or "", "other")
