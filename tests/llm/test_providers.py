"""The LLM providers through the real SDKs, against fake API servers on loopback."""

from __future__ import annotations

import dataclasses
import json
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any

import pytest

from llm_fakes import (
    FAKE_KEY,
    FAKE_KEY_ENV,
    NOTHING_SCRIPTED,
    FakeAnthropic,
    FakeLLMServer,
    FakeOpenAI,
    llm_settings,
)
from memvault.config import LLMSettings
from memvault.llm.anthropic_provider import AnthropicProvider
from memvault.llm.base import (
    ChatMessage,
    Completion,
    LLMError,
    LLMNotConfiguredError,
    Provider,
    ToolCall,
    ToolSpec,
    Usage,
)
from memvault.llm.factory import describe, make_provider
from memvault.llm.openai_provider import OpenAIProvider
from memvault.llm.retry import RetryPolicy, parse_retry_after

REMEMBER = ToolSpec(
    "remember",
    "Store one fact in long-term memory.",
    {"type": "object", "properties": {"fact": {"type": "string"}}, "required": ["fact"]},
)
RECALL = ToolSpec(
    "recall",
    "Search memory.",
    {"type": "object", "properties": {"query": {"type": "string"}, "limit": {"type": "integer"}}},
)
ASK = [ChatMessage("system", "You are a careful assistant."), ChatMessage("user", "Hi there")]


@pytest.fixture(params=["openai", "anthropic"])
def fake(request: pytest.FixtureRequest) -> Iterator[FakeLLMServer]:
    server: FakeLLMServer = FakeOpenAI() if request.param == "openai" else FakeAnthropic()
    with server:
        yield server


def provider_for(
    fake: FakeLLMServer, *, sleep: Callable[[float], None] | None = None, **overrides: Any
) -> Provider:
    """The provider for ``fake``: built by ``make_provider``, or directly to record its sleeps."""
    settings = llm_settings(fake, **overrides)
    if sleep is None:
        return make_provider(settings)
    kind = OpenAIProvider if isinstance(fake, FakeOpenAI) else AnthropicProvider
    return kind(settings, sleep=sleep)


def without_ids(completion: Completion) -> Completion:
    calls = tuple(dataclasses.replace(call, id="") for call in completion.tool_calls)
    return dataclasses.replace(completion, tool_calls=calls)


# -- answers ---------------------------------------------------------------------------------


def test_plain_text_with_usage_and_model(fake: FakeLLMServer) -> None:
    fake.reply("Hello! How can I help?")
    provider = provider_for(fake)

    completion = provider.complete(ASK)

    assert completion == Completion(
        "Hello! How can I help?",
        (),
        "stop",
        "fake-model",
        Usage(
            len(json.dumps(fake.requests[0]["messages"])) // 4, len("Hello! How can I help?") // 4
        ),
    )
    assert provider.name == fake.provider
    assert provider.model == "fake-model"
    assert provider.health.healthy and provider.health.last_success_at is not None


@pytest.mark.parametrize("streaming", [False, True])
def test_usage_and_model_come_from_the_answer(fake: FakeLLMServer, streaming: bool) -> None:
    fake.reply("Done.", usage=(1234, 56), model="fake-model-2026-01-01")
    deltas: list[str] = []

    completion = provider_for(fake).complete(ASK, on_text=deltas.append if streaming else None)

    assert completion.usage == Usage(1234, 56)
    assert completion.model == "fake-model-2026-01-01"


def test_tool_calls_stream_exactly_as_they_answer(fake: FakeLLMServer) -> None:
    calls = [
        ("remember", {"fact": "Ada prefers tea over coffee", "tags": ["preference"]}),
        ("recall", {"query": "Ada's birthday", "limit": 3}),
    ]
    fake.reply("Let me note that and look something up.", tool_calls=calls)
    fake.reply("Let me note that and look something up.", tool_calls=calls)
    provider = provider_for(fake)
    deltas: list[str] = []

    plain = provider.complete(ASK, [REMEMBER, RECALL])
    streamed = provider.complete(ASK, [REMEMBER, RECALL], on_text=deltas.append)

    assert plain.stop_reason == "tool_use"
    assert [(call.name, call.arguments) for call in plain.tool_calls] == calls
    assert all(call.invalid is None for call in plain.tool_calls)
    assert without_ids(streamed) == without_ids(plain)
    assert len(deltas) > 1 and "".join(deltas) == plain.text
    ids = [call.id for call in plain.tool_calls + streamed.tool_calls]
    assert len(set(ids)) == 4 and all(ids)


@pytest.mark.parametrize("streaming", [False, True])
def test_tool_calls_without_text(fake: FakeLLMServer, streaming: bool) -> None:
    fake.reply("", tool_calls=[("remember", {"fact": "x"})])
    deltas: list[str] = []

    completion = provider_for(fake).complete(
        ASK, [REMEMBER], on_text=deltas.append if streaming else None
    )

    assert completion.text == "" and deltas == []
    assert [(c.name, c.arguments) for c in completion.tool_calls] == [("remember", {"fact": "x"})]
    assert completion.stop_reason == "tool_use"


@pytest.mark.parametrize("streaming", [False, True])
def test_stop_at_the_token_limit(fake: FakeLLMServer, streaming: bool) -> None:
    fake.reply("The answer was cut", stop="length")
    deltas: list[str] = []

    completion = provider_for(fake).complete(
        ASK, max_tokens=64, on_text=deltas.append if streaming else None
    )

    assert completion.stop_reason == "length"
    assert completion.text == "The answer was cut"
    assert fake.requests[0]["max_tokens"] == 64


@pytest.mark.parametrize("streaming", [False, True])
def test_arguments_that_are_not_a_json_object(fake: FakeLLMServer, streaming: bool) -> None:
    fake.reply("", tool_calls=[("remember", '{"fact": "unterminated'), ("recall", "[1, 2]")])

    completion = provider_for(fake).complete(
        ASK, [REMEMBER, RECALL], on_text=(lambda _: None) if streaming else None
    )

    first, second = completion.tool_calls
    assert (first.name, first.arguments, first.invalid) == (
        "remember",
        {},
        '{"fact": "unterminated',
    )
    assert (second.arguments, second.invalid) == ({}, "[1, 2]")


def test_reply_computed_from_the_request(fake: FakeLLMServer) -> None:
    fake.reply_with(lambda request: (f"{len(request['messages'])} messages", []))

    assert provider_for(fake).complete(ASK).text.endswith("messages")


# -- what the SDK sends ------------------------------------------------------------------------

CONVERSATION = [
    ChatMessage("system", "You are a careful assistant."),
    ChatMessage("user", "Remember two things."),
    ChatMessage(
        "assistant",
        "Noting them.",
        tool_calls=(
            ToolCall("id_a", "remember", {"fact": "tea"}),
            ToolCall("id_b", "remember", {"fact": "cats"}),
        ),
    ),
    ChatMessage("tool", "Stored as m-1.", tool_call_id="id_a"),
    ChatMessage("tool", "The vault is locked.", tool_call_id="id_b", is_error=True),
    ChatMessage("system", "Answer briefly."),
    ChatMessage("user", "Thanks."),
]


def test_openai_wire_shape_of_a_tool_round_trip() -> None:
    with FakeOpenAI() as fake:
        fake.reply("You're welcome.")
        provider = provider_for(fake, temperature=0.2)

        provider.complete(CONVERSATION, [REMEMBER])

        sent = fake.requests[0]
    assert sent["messages"] == [
        {"role": "system", "content": "You are a careful assistant."},
        {"role": "user", "content": "Remember two things."},
        {
            "role": "assistant",
            "content": "Noting them.",
            "tool_calls": [
                {
                    "id": "id_a",
                    "type": "function",
                    "function": {"name": "remember", "arguments": '{"fact": "tea"}'},
                },
                {
                    "id": "id_b",
                    "type": "function",
                    "function": {"name": "remember", "arguments": '{"fact": "cats"}'},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "id_a", "content": "Stored as m-1."},
        {"role": "tool", "tool_call_id": "id_b", "content": "The vault is locked."},
        {"role": "system", "content": "Answer briefly."},
        {"role": "user", "content": "Thanks."},
    ]
    assert sent["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "remember",
                "description": REMEMBER.description,
                "parameters": REMEMBER.input_schema,
            },
        }
    ]
    assert sent["model"] == "fake-model"
    assert sent["temperature"] == 0.2
    assert sent["max_tokens"] == 4096  # a compatible server: max_tokens, not max_completion_tokens
    assert "max_completion_tokens" not in sent
    assert not sent.get("stream")
    assert fake.headers[0]["authorization"] == f"Bearer {FAKE_KEY}"


def test_anthropic_wire_shape_of_a_tool_round_trip() -> None:
    with FakeAnthropic() as fake:
        fake.reply("You're welcome.")
        provider = provider_for(fake, temperature=0.2)

        provider.complete(CONVERSATION, [REMEMBER])

        sent = fake.requests[0]
    assert sent["system"] == "You are a careful assistant.\n\nAnswer briefly."
    assert sent["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Remember two things."}]},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Noting them."},
                {"type": "tool_use", "id": "id_a", "name": "remember", "input": {"fact": "tea"}},
                {"type": "tool_use", "id": "id_b", "name": "remember", "input": {"fact": "cats"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "id_a", "content": "Stored as m-1."},
                {
                    "type": "tool_result",
                    "tool_use_id": "id_b",
                    "content": "The vault is locked.",
                    "is_error": True,
                },
                {"type": "text", "text": "Thanks."},
            ],
        },
    ]
    assert sent["tools"] == [
        {
            "name": "remember",
            "description": REMEMBER.description,
            "input_schema": REMEMBER.input_schema,
        }
    ]
    assert sent["max_tokens"] == 4096
    assert sent["temperature"] == 0.2
    # This SDK sends the key as a bearer token, not as x-api-key.
    assert fake.headers[0]["authorization"] == f"Bearer {FAKE_KEY}"
    assert "anthropic-version" in fake.headers[0]


def test_anthropic_merges_consecutive_turns_of_one_role() -> None:
    with FakeAnthropic() as fake:
        fake.reply("ok")
        messages = [
            ChatMessage("user", "one"),
            ChatMessage("user", "two"),
            ChatMessage("assistant", "three"),
            ChatMessage("assistant", ""),  # nothing to say: dropped, the API refuses empty text
            ChatMessage("user", "four"),
        ]

        provider_for(fake).complete(messages)

        sent = fake.requests[0]
    assert "system" not in sent
    assert sent["messages"] == [
        {
            "role": "user",
            "content": [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}],
        },
        {"role": "assistant", "content": [{"type": "text", "text": "three"}]},
        {"role": "user", "content": [{"type": "text", "text": "four"}]},
    ]


def test_streaming_requests_usage(fake: FakeLLMServer) -> None:
    fake.reply("Hello there", usage=(10, 2))

    completion = provider_for(fake).complete(ASK, on_text=lambda _: None)

    assert fake.requests[0]["stream"] is True
    if isinstance(fake, FakeOpenAI):
        assert fake.requests[0]["stream_options"] == {"include_usage": True}
    assert completion.usage == Usage(10, 2)


# -- retries -----------------------------------------------------------------------------------


def test_retry_after_is_really_waited_for(fake: FakeLLMServer) -> None:
    fake.fail(429, retry_after="1")
    fake.reply("At last.")
    provider = provider_for(fake)

    started = time.monotonic()
    completion = provider.complete(ASK)
    elapsed = time.monotonic() - started

    assert completion.text == "At last."
    assert len(fake.requests) == 2
    assert elapsed >= 0.9


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"retry-after": "3"}, 3.0),
        ({"retry-after": "0.5"}, 0.5),
        ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),
        ({"retry-after": "120"}, 5.0),  # capped at retry_cap_seconds
    ],
)
def test_retry_after_sets_the_wait(
    fake: FakeLLMServer, headers: dict[str, str], expected: float
) -> None:
    sleeps: list[float] = []
    fake.fail(429, headers=headers)
    fake.reply("ok")

    provider_for(fake, sleep=sleeps.append, retry_cap_seconds=5.0).complete(ASK)

    assert sleeps == [expected]


def test_retry_after_as_an_http_date() -> None:
    now = datetime(2026, 11, 22, 9, 30, tzinfo=UTC)
    later = format_datetime(now + timedelta(seconds=7), usegmt=True)

    assert parse_retry_after({"retry-after": later}, now=now.timestamp()) == 7.0
    assert parse_retry_after({"retry-after": "not a date"}) is None
    assert parse_retry_after({}) is None


def test_server_errors_are_retried_with_backoff(fake: FakeLLMServer) -> None:
    sleeps: list[float] = []
    fake.fail(500, times=2)
    fake.reply("Recovered.")

    completion = provider_for(fake, sleep=sleeps.append).complete(ASK)

    assert completion.text == "Recovered."
    assert len(fake.requests) == 3
    assert len(sleeps) == 2
    assert 0.01 <= sleeps[0] <= 0.011 and 0.02 <= sleeps[1] <= 0.022


def test_overloaded_and_unavailable_are_retried(fake: FakeLLMServer) -> None:
    fake.fail(529)
    fake.fail(503)
    fake.reply("ok")

    assert provider_for(fake).complete(ASK, on_text=lambda _: None).text == "ok"
    assert len(fake.requests) == 3


def test_an_error_reported_inside_a_stream_is_retried(fake: FakeLLMServer) -> None:
    fake.fail(529, message="Overloaded", in_stream=True)
    fake.reply("Second try.")
    deltas: list[str] = []

    completion = provider_for(fake).complete(ASK, on_text=deltas.append)

    assert completion.text == "Second try." and "".join(deltas) == "Second try."
    assert len(fake.requests) == 2


def test_a_refusal_reported_inside_a_stream_fails_at_once() -> None:
    with FakeAnthropic() as fake:
        fake.fail(400, message="prompt is too long", in_stream=True)

        with pytest.raises(LLMError, match=r"\(400\): prompt is too long\."):
            provider_for(fake).complete(ASK, on_text=lambda _: None)

        assert len(fake.requests) == 1


def test_backoff_grows_and_is_capped() -> None:
    policy = RetryPolicy(max_retries=9, base_seconds=1.0, cap_seconds=30.0, jitter=0.0)

    assert [policy.delay(attempt) for attempt in range(7)] == [1, 2, 4, 8, 16, 30, 30]
    assert policy.delay(0, retry_after=45.0) == 30.0


def test_persistent_failure_and_health(fake: FakeLLMServer) -> None:
    provider = provider_for(fake, max_retries=2, unhealthy_after=2)
    fake.fail(500, message="The engine room is flooded.", times=3)

    with pytest.raises(LLMError) as failed:
        provider.complete(ASK)

    assert len(fake.requests) == 3
    assert failed.value.details["attempts"] == 3
    message = str(failed.value)
    assert "after 3 attempts" in message and "The engine room is flooded." in message
    assert "'fake-model'" in message and fake.url in message
    assert provider.health.failures == 1 and provider.health.healthy

    fake.fail(503, times=3)
    with pytest.raises(LLMError):
        provider.complete(ASK, on_text=lambda _: None)
    assert not provider.health.healthy
    assert provider.health.to_dict()["consecutive_failures"] == 2

    fake.reply("Back.")
    assert provider.complete(ASK).text == "Back."
    assert provider.health.healthy and provider.health.failures == 0


def test_nothing_scripted_fails_loudly(fake: FakeLLMServer) -> None:
    with pytest.raises(LLMError, match=NOTHING_SCRIPTED):
        provider_for(fake, max_retries=0).complete(ASK)
    assert len(fake.requests) == 1


@pytest.mark.parametrize("streaming", [False, True])
def test_a_refused_key_fails_at_once(fake: FakeLLMServer, streaming: bool) -> None:
    fake.fail(401)
    provider = provider_for(fake)

    with pytest.raises(LLMError) as failed:
        provider.complete(ASK, on_text=(lambda _: None) if streaming else None)

    assert str(failed.value) == f"The API key in {FAKE_KEY_ENV} was refused (401)."
    assert len(fake.requests) == 1
    assert provider.health.failures == 1


@pytest.mark.parametrize(
    ("status", "words"),
    [
        (400, "rejected the request for model 'fake-model' (400): messages must not be empty."),
        (404, "answered 404 for model 'fake-model' (check llm.model and llm.base_url)"),
        (403, f"The API key in {FAKE_KEY_ENV} may not use model 'fake-model' (403)"),
    ],
)
def test_other_client_errors_fail_at_once(fake: FakeLLMServer, status: int, words: str) -> None:
    fake.fail(status, message="messages must not be empty" if status == 400 else None)

    with pytest.raises(LLMError) as failed:
        provider_for(fake).complete(ASK)

    assert words in str(failed.value)
    assert len(fake.requests) == 1


@pytest.mark.parametrize("streaming", [False, True])
def test_a_timeout_is_retried(fake: FakeLLMServer, streaming: bool) -> None:
    # The timeout is the test's length and the bound on the second, prompt answer: a few
    # seconds hold any loopback answer on a loaded machine; the first one comes far later.
    timeout = 2.0
    fake.reply("too late", delay=10 * timeout)
    fake.reply("in time")

    completion = provider_for(fake, timeout=timeout).complete(
        ASK, on_text=(lambda _: None) if streaming else None
    )

    assert completion.text == "in time"
    assert len(fake.requests) == 2


def test_timeouts_to_the_end(fake: FakeLLMServer) -> None:
    fake.reply("late", delay=1.0)
    fake.reply("late", delay=1.0)

    with pytest.raises(LLMError, match=r"after 2 attempts; .*no answer within 0\.2 s"):
        provider_for(fake, timeout=0.2, max_retries=1).complete(ASK)


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_an_unreachable_server_is_retried_then_reported(
    kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(FAKE_KEY_ENV, FAKE_KEY)
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}" + ("/v1" if kind == "openai" else "")
    settings = LLMSettings(
        provider=kind,  # type: ignore[arg-type]
        model="fake-model",
        base_url=url,
        api_key_env=FAKE_KEY_ENV,
        max_retries=2,
        retry_base_seconds=0.01,
    )
    sleeps: list[float] = []
    kinds = {"openai": OpenAIProvider, "anthropic": AnthropicProvider}
    provider = kinds[kind](settings, sleep=sleeps.append)

    with pytest.raises(LLMError, match=f"after 3 attempts; the last one: cannot connect to {url}"):
        provider.complete(ASK)
    assert len(sleeps) == 2


def test_a_stream_that_breaks_after_text_is_not_replayed(fake: FakeLLMServer) -> None:
    fake.reply("The first words and then some more", cut_after=2)
    fake.reply("The first words and then some more")
    provider = provider_for(fake)
    deltas: list[str] = []

    with pytest.raises(LLMError, match="broke off after part of it had arrived"):
        provider.complete(ASK, on_text=deltas.append)

    assert "".join(deltas) == "The first "
    assert len(fake.requests) == 1
    assert provider.health.failures == 1


def test_a_stream_that_breaks_before_any_text_is_retried(fake: FakeLLMServer) -> None:
    fake.reply("", tool_calls=[("remember", {"fact": "x"})], cut_after=0)
    fake.reply("whole")
    deltas: list[str] = []

    completion = provider_for(fake).complete(ASK, on_text=deltas.append)

    assert completion.text == "whole" and deltas == ["whole"]
    assert len(fake.requests) == 2


def test_an_exception_from_the_text_sink_is_not_a_model_failure(fake: FakeLLMServer) -> None:
    class CancelledError(Exception):
        pass

    def cancel(_: str) -> None:
        raise CancelledError

    fake.reply("Hello there")
    provider = provider_for(fake)

    with pytest.raises(CancelledError):
        provider.complete(ASK, on_text=cancel)
    assert len(fake.requests) == 1
    assert provider.health.failures == 0


# -- configuration -----------------------------------------------------------------------------


def test_openai_without_a_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MEMVAULT_TEST_NO_KEY", raising=False)
    settings = LLMSettings(
        provider="openai", model="gpt-4o-mini", api_key_env="MEMVAULT_TEST_NO_KEY"
    )

    with pytest.raises(
        LLMNotConfiguredError, match="set the environment variable MEMVAULT_TEST_NO_KEY"
    ):
        make_provider(settings)


def test_openai_compatible_local_server_needs_no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with FakeOpenAI() as fake:
        fake.reply("Hi from Ollama.")
        fake.fail(401)
        provider = make_provider(
            LLMSettings(provider="openai", model="llama3.2", base_url=fake.url, max_retries=0)
        )

        assert provider.complete(ASK).text == "Hi from Ollama."
        with pytest.raises(LLMError) as failed:
            provider.complete(ASK)

        assert fake.headers[0]["authorization"] == "Bearer not-needed"
        assert str(failed.value) == (
            f"{fake.url} wants an API key (401); put it in the environment variable OPENAI_API_KEY."
        )


def test_anthropic_without_a_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    settings = LLMSettings(provider="anthropic", model="claude-sonnet-4-5")

    with pytest.raises(
        LLMNotConfiguredError, match="set the environment variable ANTHROPIC_API_KEY"
    ):
        make_provider(settings)


@pytest.mark.parametrize(
    "settings",
    [LLMSettings(), LLMSettings(provider="openai"), LLMSettings(provider="anthropic")],
    ids=["none", "openai-without-model", "anthropic-without-model"],
)
def test_make_provider_says_how_to_configure_a_model(settings: LLMSettings) -> None:
    with pytest.raises(LLMNotConfiguredError) as failed:
        make_provider(settings)

    text = str(failed.value)
    for words in (
        ".memvault/config.toml",
        "[llm]",
        'provider = "openai"',
        'model = "gpt-4o-mini"',
        "api_key_env",
        "MEMVAULT_LLM__PROVIDER",
        "MEMVAULT_LLM__MODEL",
    ):
        assert words in text


def test_describe_never_shows_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-value")
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)

    openai = describe(LLMSettings(provider="openai", model="gpt-4o-mini"))
    anthropic = describe(LLMSettings(provider="anthropic", model="claude-sonnet-4-5"))

    assert openai == {
        "provider": "openai",
        "model": "gpt-4o-mini",
        "base_url": None,
        "api_key_env": "OPENAI_API_KEY",
        "api_key_set": True,
    }
    assert "sk-secret-value" not in repr(openai)
    assert anthropic["api_key_env"] == "ANTHROPIC_API_KEY" and not anthropic["api_key_set"]
    assert describe(LLMSettings())["api_key_set"] is False


def test_the_sdks_load_only_when_a_provider_is_built() -> None:
    code = (
        "import sys, memvault.llm.factory, memvault.llm.retry; "
        "print(sorted(m for m in ('openai', 'anthropic') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"
