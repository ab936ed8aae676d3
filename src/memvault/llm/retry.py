"""The one retry policy of the LLM providers.

Worth another attempt: 429 (after the ``retry-after`` the server asked for),
408 and 5xx (529 "overloaded" included), timeouts and connection errors,
with exponential backoff ``base * 2**attempt`` capped at ``cap``. Anything
else a server refuses (401, 400, 404, ...) fails at once with one sentence
saying what to fix. The SDKs' own retries are switched off so that this
policy is the only one.

Providers translate their SDK's exceptions into a :class:`Failure`; the
policy never imports an SDK.
"""

from __future__ import annotations

import email.utils
import logging
import os
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from memvault.config import LLMSettings
from memvault.llm.base import (
    ChatMessage,
    Completion,
    Health,
    LLMError,
    LLMNotConfiguredError,
    TextSink,
    ToolSpec,
)
from memvault.text import one_line
from memvault.vocabulary import counted

log = logging.getLogger(__name__)

T = TypeVar("T")
Sleep = Callable[[float], None]

DETAIL_CHARS = 200


@dataclass(frozen=True)
class Failure:
    """One failed attempt, as the retry policy sees it.

    ``reason`` ends a sentence (e.g. "the server answered 500: Overloaded.");
    ``message`` is the whole sentence to raise when the failure is not
    retried.
    """

    reason: str
    retriable: bool
    status: int | None = None
    retry_after: float | None = None
    message: str | None = None

    def not_retried(self, message: str) -> Failure:
        """The same failure, to be raised at once with ``message``."""
        return replace(self, retriable=False, message=message)


@dataclass(frozen=True)
class Endpoint:
    """What error sentences name: the service, its model and its key variable."""

    url: str
    model: str
    key_env: str
    key_is_set: bool = True

    def status_failure(
        self, status: int, headers: Mapping[str, str], body: object, *, fallback: str = ""
    ) -> Failure:
        """The failure an HTTP error status stands for."""
        detail = service_message(body, fallback or f"HTTP {status}")
        reason = f"the server answered {status}: {detail}"
        if status in (408, 429) or status >= 500:
            return Failure(reason, True, status, parse_retry_after(headers))
        return Failure(reason, False, status, message=self._refusal(status, detail))

    def timeout_failure(self, seconds: float) -> Failure:
        """The failure of a request that got no answer in time."""
        return Failure(f"no answer within {seconds:g} s (llm.timeout).", True)

    def connection_failure(self, cause: BaseException | None, *, connected: bool) -> Failure:
        """The failure of a request that could not reach the server (``connected``: or
        that lost it half-way)."""
        what = (
            f"the connection to {self.url} broke" if connected else f"cannot connect to {self.url}"
        )
        why = f" ({one_line(str(cause), DETAIL_CHARS)})" if cause is not None and str(cause) else ""
        return Failure(f"{what}{why}.", True)

    def _refusal(self, status: int, detail: str) -> str:
        if status == 401 and not self.key_is_set:
            return (
                f"{self.url} wants an API key (401); put it in the environment variable "
                f"{self.key_env}."
            )
        if status == 401:
            return f"The API key in {self.key_env} was refused (401)."
        if status == 403:
            return f"The API key in {self.key_env} may not use model {self.model!r} (403): {detail}"
        if status == 404:
            return (
                f"{self.url} answered 404 for model {self.model!r} (check llm.model and "
                f"llm.base_url): {detail}"
            )
        return f"{self.url} rejected the request for model {self.model!r} ({status}): {detail}"


class DeliveredText:
    """An ``on_text`` sink that remembers whether any text went out.

    A stream that breaks after text reached the caller is not retried: the
    caller would see the same words twice.
    """

    def __init__(self, sink: TextSink) -> None:
        self._sink = sink
        self.delivered = False

    def __call__(self, text: str) -> None:
        if text:
            self.delivered = True
            self._sink(text)


class RetryPolicy:
    """Runs one model call, retrying what is worth retrying, and keeps ``health``.

    ``sleep`` is injectable so tests can record the waits instead of taking
    them.
    """

    def __init__(
        self,
        *,
        max_retries: int,
        base_seconds: float,
        cap_seconds: float,
        sleep: Sleep = time.sleep,
        jitter: float = 0.1,
    ) -> None:
        self.max_retries = max_retries
        self.base_seconds = base_seconds
        self.cap_seconds = cap_seconds
        self.sleep = sleep
        self.jitter = jitter

    @classmethod
    def from_settings(cls, settings: LLMSettings, sleep: Sleep = time.sleep) -> RetryPolicy:
        """The policy ``[llm]`` configures."""
        return cls(
            max_retries=settings.max_retries,
            base_seconds=settings.retry_base_seconds,
            cap_seconds=settings.retry_cap_seconds,
            sleep=sleep,
        )

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        """Seconds to wait after the failed attempt number ``attempt`` (0-based).

        The server's ``retry-after`` wins when it gave one; both are capped.
        """
        if retry_after is not None:
            return min(max(retry_after, 0.0), self.cap_seconds)
        backoff = self.base_seconds * 2.0 ** min(attempt, 60)
        backoff += random.uniform(0, self.jitter * backoff)
        return min(backoff, self.cap_seconds)

    def run(
        self,
        call: Callable[[], T],
        *,
        classify: Callable[[Exception], Failure | None],
        health: Health,
        what: str,
        streamed: DeliveredText | None = None,
    ) -> T:
        """``call()`` until it succeeds, fails for good, or the attempts run out.

        ``classify`` turns an exception into a :class:`Failure`, or ``None``
        for exceptions that are not the model's fault (they propagate as
        they are). ``what`` names the call in the final error, e.g. "model
        'gpt-4o' at https://api.openai.com/v1". Once ``streamed`` has passed
        text on, a failure is final.
        """
        attempts = self.max_retries + 1
        for attempt in range(attempts):
            try:
                result = call()
            except Exception as exc:
                failure = classify(exc)
                if failure is None:
                    raise
                if failure.retriable and streamed is not None and streamed.delivered:
                    failure = failure.not_retried(
                        f"The answer of the {what} broke off after part of it had arrived; "
                        + failure.reason
                    )
                last = attempt + 1 == attempts
                if failure.retriable and not last:
                    wait = self.delay(attempt, failure.retry_after)
                    log.warning(
                        "llm call failed, retrying",
                        extra={
                            "llm": what,
                            "attempt": attempt + 1,
                            "status": failure.status,
                            "wait_seconds": round(wait, 3),
                            "reason": failure.reason,
                        },
                    )
                    self.sleep(wait)
                    continue
                if failure.retriable:
                    tries = counted(attempts, "attempt")
                    message = f"The {what} did not answer after {tries}; the last one: "
                    message += failure.reason
                else:
                    message = failure.message or failure.reason
                health.failed(message)
                raise LLMError(message, attempts=attempt + 1, status=failure.status) from exc
            health.succeeded()
            return result
        raise AssertionError("unreachable: the loop returns or raises")  # pragma: no cover


def parse_retry_after(headers: Mapping[str, str], *, now: float | None = None) -> float | None:
    """Seconds the server asked to wait: ``retry-after-ms``, or ``retry-after`` in
    seconds or as an HTTP date; ``None`` when it did not say."""
    millis = headers.get("retry-after-ms")
    if millis is not None:
        try:
            return max(float(millis) / 1000.0, 0.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        moment = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(moment.timestamp() - (time.time() if now is None else now), 0.0)


def service_message(body: object, fallback: str) -> str:
    """The service's own error sentence (``error.message``), ending in one full stop."""
    message: object = None
    if isinstance(body, Mapping):
        inner = body.get("error")
        message = inner.get("message") if isinstance(inner, Mapping) else body.get("message")
    elif isinstance(body, str):
        message = body
    text = one_line(str(message), DETAIL_CHARS) if message else fallback
    return text if text.endswith((".", "…", "!", "?")) else text + "."


class RetryingProvider:
    """What every SDK-backed provider shares: ``complete`` through the retry policy.

    A subclass sets ``model``, ``endpoint``, ``retry`` and ``health``, and
    says how to build its request, call the API with and without streaming,
    and classify the SDK's exceptions.
    """

    model: str
    context_window: int
    endpoint: Endpoint
    retry: RetryPolicy
    health: Health

    def _configure(
        self, settings: LLMSettings, default_key_env: str, sleep: Sleep
    ) -> tuple[str, str | None]:
        """Take the model, window, health and retry policy from ``settings``.

        Returns the name of the key's environment variable and the key (None when unset).
        """
        if not settings.model:
            raise LLMNotConfiguredError("llm.model is not set; name the model to use.")
        self.model = settings.model
        self.context_window = settings.context_window
        self.health = Health(unhealthy_after=settings.unhealthy_after)
        self.retry = RetryPolicy.from_settings(settings, sleep)
        key_env = settings.api_key_env or default_key_env
        return key_env, os.environ.get(key_env) or None

    def complete(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolSpec] | None = None,
        *,
        max_tokens: int | None = None,
        on_text: TextSink | None = None,
    ) -> Completion:
        """One completion; streamed to ``on_text`` when given, identical either way."""
        request = self._request(messages, tools or (), max_tokens)
        sink = DeliveredText(on_text) if on_text is not None else None

        def attempt() -> Completion:
            return self._create(request) if sink is None else self._stream(request, sink)

        return self.retry.run(
            attempt,
            classify=self._classify,
            health=self.health,
            what=f"model {self.model!r} at {self.endpoint.url}",
            streamed=sink,
        )

    def _request(
        self, messages: Sequence[ChatMessage], tools: Sequence[ToolSpec], max_tokens: int | None
    ) -> Any:
        raise NotImplementedError

    def _create(self, request: Any) -> Completion:
        raise NotImplementedError

    def _stream(self, request: Any, sink: TextSink) -> Completion:
        raise NotImplementedError

    def _classify(self, exc: Exception) -> Failure | None:
        raise NotImplementedError
