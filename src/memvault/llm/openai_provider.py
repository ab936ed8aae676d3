"""Any OpenAI-compatible chat completions API, through the official SDK.

One provider covers OpenAI itself and the servers that speak its wire
format: Ollama, vLLM, LM Studio, OpenRouter, Gemini's OpenAI endpoint. Local
servers need no key, so with a ``base_url`` and no key a placeholder is sent.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import cast

import httpx2
import openai
from openai import OpenAI, Stream, omit
from openai.types.chat import (
    ChatCompletion,
    ChatCompletionChunk,
    ChatCompletionFunctionToolParam,
    ChatCompletionMessageFunctionToolCallParam,
    ChatCompletionMessageParam,
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
from memvault.llm.retry import (
    Endpoint,
    Failure,
    RetryingProvider,
    Sleep,
    service_message,
)

DEFAULT_KEY_ENV = "OPENAI_API_KEY"
PLACEHOLDER_KEY = "not-needed"  # local servers (Ollama, LM Studio) ignore the key
OPENAI_HOST = "api.openai.com"


class OpenAIProvider(RetryingProvider):
    """A chat model behind an OpenAI-compatible ``/chat/completions`` endpoint."""

    name = "openai"

    def __init__(self, settings: LLMSettings, *, sleep: Sleep = time.sleep) -> None:
        key_env, key = self._configure(settings, DEFAULT_KEY_ENV, sleep)
        if not key and not settings.base_url:
            raise LLMNotConfiguredError(
                f"No API key for OpenAI: set the environment variable {key_env}, "
                "or set llm.base_url to a local server that needs none (e.g. Ollama)."
            )
        self._settings = settings
        self._client = OpenAI(
            api_key=key or PLACEHOLDER_KEY,
            base_url=settings.base_url,
            timeout=settings.timeout,
            max_retries=0,  # the retry policy below is the only one
        )
        self.endpoint = Endpoint(
            str(self._client.base_url).rstrip("/"), self.model, key_env, key_is_set=bool(key)
        )

    def _request(
        self, messages: Sequence[ChatMessage], tools: Sequence[ToolSpec], max_tokens: int | None
    ) -> _Request:
        return _Request(
            [to_openai_message(message) for message in messages],
            [to_openai_tool(tool) for tool in tools],
            max_tokens or self._settings.max_tokens,
        )

    def _send(
        self, request: _Request, *, stream: bool
    ) -> ChatCompletion | Stream[ChatCompletionChunk]:
        # OpenAI itself wants max_completion_tokens (its reasoning models refuse max_tokens);
        # the compatible servers know max_tokens.
        official = self._settings.base_url is None or OPENAI_HOST in self._settings.base_url
        temperature = self._settings.temperature
        return self._client.chat.completions.create(
            model=self.model,
            messages=request.messages,
            tools=request.tools or omit,
            max_completion_tokens=request.max_tokens if official else omit,
            max_tokens=omit if official else request.max_tokens,
            temperature=temperature if temperature is not None else omit,
            stream=stream,
            stream_options={"include_usage": True} if stream else omit,
        )

    def _create(self, request: _Request) -> Completion:
        response = cast(ChatCompletion, self._send(request, stream=False))
        usage = response.usage
        spent = Usage(usage.prompt_tokens, usage.completion_tokens) if usage else Usage()
        if not response.choices:
            return Completion("", (), "other", response.model or self.model, spent)
        choice = response.choices[0]
        message = choice.message
        calls = tuple(
            ToolCall.from_json(call.id, call.function.name, call.function.arguments)
            for call in message.tool_calls or ()
            if call.type == "function"
        )
        text = message.content or message.refusal or ""
        return Completion(
            text, calls, stop_reason(choice.finish_reason, bool(calls)), response.model, spent
        )

    def _stream(self, request: _Request, sink: TextSink) -> Completion:
        text: list[str] = []
        calls: dict[int, _PartialCall] = {}
        finish: str | None = None
        model = self.model
        spent = Usage()
        with cast(Stream[ChatCompletionChunk], self._send(request, stream=True)) as stream:
            for chunk in stream:
                model = chunk.model or model
                if chunk.usage is not None:
                    spent = Usage(chunk.usage.prompt_tokens, chunk.usage.completion_tokens)
                for choice in chunk.choices[:1]:
                    delta = choice.delta
                    if delta.content:
                        text.append(delta.content)
                        sink(delta.content)
                    for part in delta.tool_calls or ():
                        call = calls.setdefault(part.index, _PartialCall())
                        call.id = part.id or call.id
                        if part.function is not None:
                            call.name = part.function.name or call.name
                            call.arguments.append(part.function.arguments or "")
                    finish = choice.finish_reason or finish
        tool_calls = tuple(calls[index].finish() for index in sorted(calls))
        return Completion(
            "".join(text), tool_calls, stop_reason(finish, bool(tool_calls)), model, spent
        )

    def _classify(self, exc: Exception) -> Failure | None:
        if isinstance(exc, openai.APIStatusError):
            return self.endpoint.status_failure(
                exc.status_code, exc.response.headers, exc.body, fallback=exc.message
            )
        if isinstance(exc, openai.APITimeoutError | httpx2.TimeoutException):
            return self.endpoint.timeout_failure(self._settings.timeout)
        if isinstance(exc, openai.APIConnectionError):
            cause = exc.__cause__
            return self.endpoint.connection_failure(
                cause, connected=not isinstance(cause, httpx2.ConnectError)
            )
        if isinstance(exc, httpx2.TransportError):
            return self.endpoint.connection_failure(
                exc, connected=not isinstance(exc, httpx2.ConnectError)
            )
        if isinstance(exc, openai.APIError):  # an error event in the middle of a stream
            return Failure(f"the stream reported: {service_message(exc.body, exc.message)}", True)
        return None


@dataclass(frozen=True)
class _Request:
    messages: list[ChatCompletionMessageParam]
    tools: list[ChatCompletionFunctionToolParam]
    max_tokens: int


@dataclass
class _PartialCall:
    """A tool call being put together from stream deltas."""

    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)

    def finish(self) -> ToolCall:
        return ToolCall.from_json(self.id, self.name, "".join(self.arguments))


def to_openai_message(message: ChatMessage) -> ChatCompletionMessageParam:
    """A provider-neutral message in the chat completions wire format."""
    if message.role == "system":
        return {"role": "system", "content": message.content}
    if message.role == "user":
        return {"role": "user", "content": message.content}
    if message.role == "tool":
        return {
            "role": "tool",
            "tool_call_id": message.tool_call_id or "",
            "content": message.content,
        }
    if not message.tool_calls:
        return {"role": "assistant", "content": message.content}
    calls: list[ChatCompletionMessageFunctionToolCallParam] = [
        {
            "id": call.id,
            "type": "function",
            # Invalid arguments go back as {}: several compatible servers reject bad JSON here.
            "function": {"name": call.name, "arguments": json.dumps(call.arguments)},
        }
        for call in message.tool_calls
    ]
    return {"role": "assistant", "content": message.content or None, "tool_calls": calls}


def to_openai_tool(tool: ToolSpec) -> ChatCompletionFunctionToolParam:
    """A tool in the chat completions wire format."""
    return {
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.input_schema,
        },
    }


def stop_reason(finish_reason: str | None, has_tool_calls: bool) -> StopReason:
    """Why the model stopped, from the API's ``finish_reason``.

    Some compatible servers (older Ollama) say ``stop`` even when the answer
    is a tool call; the tool calls win.
    """
    if finish_reason in ("tool_calls", "function_call"):
        return "tool_use"
    if finish_reason == "length":
        return "length"
    if finish_reason == "stop":
        return "tool_use" if has_tool_calls else "stop"
    return "other"
