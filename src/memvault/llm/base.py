"""One interface for every language model memvault talks to.

A provider turns a list of :class:`ChatMessage` (and optionally the tools a
model may call) into one :class:`Completion`: the text, the tool calls, why
the model stopped, which model answered, and the tokens used. Streaming is
the same call with an ``on_text`` callback that receives the text as it
arrives; the returned completion is identical either way.

Providers retry what is worth retrying (429 honouring ``retry-after``, 5xx,
timeouts, with capped exponential backoff) and keep a :class:`Health`
record, so a model that keeps failing is reported by ``memvault doctor``.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal, Protocol

from memvault.errors import MemvaultError

Role = Literal["system", "user", "assistant", "tool"]
StopReason = Literal["stop", "tool_use", "length", "other"]


class LLMError(MemvaultError):
    """The model could not be reached or refused the request (after retries)."""

    code = "llm_failed"
    exit_code = 7
    http_status = 502
    retriable = True


class LLMNotConfiguredError(MemvaultError):
    """No language model is configured; the message says how to configure one."""

    code = "llm_not_configured"
    exit_code = 6
    http_status = 503


@dataclass(frozen=True)
class ToolCall:
    """A model's request to run one tool.

    ``arguments`` is the parsed JSON object; when the model produced text
    that is not a JSON object, ``arguments`` is empty and ``invalid`` holds
    the raw text, so the agent can tell the model what went wrong.
    """

    id: str
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    invalid: str | None = None

    @classmethod
    def from_json(cls, call_id: str, name: str, raw: str) -> ToolCall:
        """A call whose arguments arrived as JSON text; blank text means no arguments."""
        if not raw.strip():
            return cls(call_id, name)
        try:
            parsed = json.loads(raw)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict):
            return cls(call_id, name, parsed)
        return cls(call_id, name, invalid=raw)


@dataclass(frozen=True)
class ChatMessage:
    """One turn of a conversation, provider-neutral.

    - ``system``: instructions (providers that take them apart, e.g.
      Anthropic's ``system=``, lift them out);
    - ``user`` / ``assistant``: text; an assistant turn may carry
      ``tool_calls``;
    - ``tool``: the result of the call ``tool_call_id`` (``is_error`` marks a
      failed call).
    """

    role: Role
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    is_error: bool = False


@dataclass(frozen=True)
class ToolSpec:
    """A tool as a model sees it: name, description, JSON schema of the input."""

    name: str
    description: str
    input_schema: dict[str, Any]


@dataclass(frozen=True)
class Usage:
    """Tokens the provider billed for one completion."""

    input_tokens: int = 0
    output_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens, self.output_tokens + other.output_tokens
        )


@dataclass(frozen=True)
class Completion:
    """What the model answered."""

    text: str
    tool_calls: tuple[ToolCall, ...]
    stop_reason: StopReason
    model: str
    usage: Usage = field(default_factory=Usage)


TextSink = Callable[[str], None]


class Provider(Protocol):
    """A chat model behind one API."""

    name: str
    model: str
    context_window: int
    health: Health

    def complete(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolSpec] | None = None,
        *,
        max_tokens: int | None = None,
        on_text: TextSink | None = None,
    ) -> Completion:
        """One completion; ``on_text`` (when given) streams the text as it arrives.

        Raises :class:`LLMError` when the model cannot answer after retries.
        """
        ...


@dataclass
class Health:
    """Whether a model answers: consecutive failures make it unhealthy.

    A success resets the count. Thread-safe: the daemon's requests share one
    provider.
    """

    unhealthy_after: int = 3
    failures: int = 0
    last_error: str | None = None
    last_failure_at: datetime | None = None
    last_success_at: datetime | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    @property
    def healthy(self) -> bool:
        """False once ``unhealthy_after`` calls in a row have failed."""
        return self.failures < self.unhealthy_after

    def succeeded(self) -> None:
        """Record an answered call."""
        with self._lock:
            self.failures = 0
            self.last_success_at = datetime.now(UTC)

    def failed(self, error: str) -> None:
        """Record a call that failed after its retries."""
        with self._lock:
            self.failures += 1
            self.last_error = error
            self.last_failure_at = datetime.now(UTC)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "healthy": self.healthy,
            "consecutive_failures": self.failures,
            "last_error": self.last_error,
            "last_failure_at": _iso(self.last_failure_at),
            "last_success_at": _iso(self.last_success_at),
        }


def _iso(moment: datetime | None) -> str | None:
    return moment.isoformat(timespec="seconds") if moment else None
