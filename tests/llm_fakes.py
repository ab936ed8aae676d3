"""Fake OpenAI and Anthropic servers on loopback, speaking each API's wire format.

The real SDKs talk to them over real HTTP, so a test exercises the same
request building, response parsing, SSE decoding and error mapping as
production. Script the answers, then read back what the SDK sent::

    with FakeOpenAI() as fake:              # or FakeAnthropic()
        fake.reply("Hello")                 # a plain answer
        fake.reply("", tool_calls=[("remember", {"fact": "x"})])
        fake.reply("partial", stop="length")
        fake.reply_with(lambda request: ("echo", []))
        fake.fail(429, retry_after="1")
        fake.fail(500, times=2)
        provider = make_provider(llm_settings(fake))
        ...
        fake.requests                       # JSON bodies received, in order
        fake.headers                        # their headers (dicts, lower-case names)

Replies are consumed one per request, in order. A request with nothing
scripted gets a 500 whose message is "fake server: nothing scripted", so a
test that asks more than it scripted fails loudly (after the retries).

Every call to ``reply``, ``reply_with`` and ``fail`` also takes ``delay``
(seconds the server waits before answering, to provoke client timeouts);
``reply(..., cut_after=n)`` drops a stream's connection after ``n`` text
deltas.

Tool-call arguments given as a ``str`` are sent verbatim, so invalid JSON
can be scripted. Usage is ``len(json.dumps(messages)) // 4`` input tokens
and ``len(text) // 4`` output tokens unless ``usage=(input, output)`` is
given; ``model=`` overrides the model named in the answer (default: the
requested one). Tool-call ids count up per server: ``call_1``, ``call_2``,
... (OpenAI) and ``toolu_1``, ... (Anthropic).
"""

from __future__ import annotations

import itertools
import json
import os
import re
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from types import TracebackType
from typing import Any, Literal

from memvault.config import LLMSettings
from support import LoopbackHandler, LoopbackServer
from waiting import WAIT

FAKE_KEY_ENV = "FAKE_LLM_API_KEY"
"""The variable :func:`llm_settings` points ``api_key_env`` at (set to ``FAKE_KEY`` if unset)."""
FAKE_KEY = "fake-key"
NOTHING_SCRIPTED = "fake server: nothing scripted"

Stop = Literal["stop", "tool_use", "length"]
ScriptedCall = tuple[str, dict[str, Any] | str]
ReplyFn = Callable[[dict[str, Any]], "tuple[str, Sequence[ScriptedCall]] | str"]


@dataclass(frozen=True)
class _Reply:
    text: str = ""
    tool_calls: Sequence[ScriptedCall] = ()
    stop: Stop | None = None
    usage: tuple[int, int] | None = None
    model: str | None = None
    compute: ReplyFn | None = None
    delay: float = 0.0
    cut_after: int | None = None
    pieces: tuple[str, ...] | None = None


@dataclass(frozen=True)
class _Failure:
    status: int
    retry_after: str | None = None
    message: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    in_stream: bool = False


@dataclass(frozen=True)
class Call:
    """A tool call as the fake sends it: id assigned, arguments as JSON text."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class Answer:
    """A reply resolved against its request, ready to render in a wire format."""

    text: str
    calls: tuple[Call, ...]
    stop: Stop
    input_tokens: int
    output_tokens: int
    model: str
    pieces: tuple[str, ...] | None = None  # the stream's text deltas, when scripted


class FakeLLMServer:
    """The scripting and HTTP plumbing both fakes share; subclasses render the wire format."""

    provider: str = ""
    path: str = ""
    url_suffix: str = ""
    call_prefix: str = ""
    text_marker: str = ""  # how a text delta event of the stream can be recognised

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self._script: deque[_Reply | _Failure] = deque()
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._http: LoopbackServer | None = None

    # -- scripting ---------------------------------------------------------------------------

    def reply(
        self,
        text: str = "",
        *,
        tool_calls: Sequence[ScriptedCall] = (),
        stop: Stop | None = None,
        usage: tuple[int, int] | None = None,
        model: str | None = None,
        delay: float = 0.0,
        cut_after: int | None = None,
        pieces: Sequence[str] | None = None,
    ) -> None:
        """Queue an answer; ``stop`` defaults to ``tool_use`` with tool calls, else ``stop``.

        ``cut_after=n`` (streams only) drops the connection after ``n`` text
        deltas, as a network failure in the middle of an answer would.
        ``pieces`` (instead of ``text``) streams exactly these deltas, e.g.
        ``["HEART", "BEAT", "_OK"]``.
        """
        if pieces is not None:
            text = "".join(pieces)
        reply = _Reply(
            text,
            tuple(tool_calls),
            stop,
            usage,
            model,
            delay=delay,
            cut_after=cut_after,
            pieces=tuple(pieces) if pieces is not None else None,
        )
        self._queue(reply)

    def reply_with(self, fn: ReplyFn, *, delay: float = 0.0) -> None:
        """Queue an answer computed from the request JSON: ``fn(request) -> (text, tool_calls)``
        (or just the text)."""
        self._queue(_Reply(compute=fn, delay=delay))

    def fail(
        self,
        status: int,
        retry_after: str | None = None,
        message: str | None = None,
        *,
        times: int = 1,
        headers: dict[str, str] | None = None,
        delay: float = 0.0,
        in_stream: bool = False,
    ) -> None:
        """Queue ``times`` error responses with the API's error body (and ``retry-after``).

        ``in_stream=True``: a streaming request gets a 200 whose stream reports
        the error, as the APIs do when a model fails after it started.
        """
        failure = _Failure(status, retry_after, message, dict(headers or {}), delay, in_stream)
        for _ in range(times):
            self._queue(failure)

    @property
    def pending(self) -> int:
        """Scripted responses not consumed yet."""
        with self._lock:
            return len(self._script)

    # -- lifecycle ---------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """The base URL to configure the SDK with."""
        if self._http is None:
            raise RuntimeError("the fake server is not running; use it as a context manager")
        return f"{self._http.address}{self.url_suffix}"

    def __enter__(self) -> FakeLLMServer:
        self._http = LoopbackServer(_handler_for(self), type(self).__name__)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._http is not None:
            self._http.close()
        self._http = None

    # -- what subclasses provide ---------------------------------------------------------------

    def render(self, request: dict[str, Any], answer: Answer) -> dict[str, Any]:
        raise NotImplementedError

    def render_stream(self, request: dict[str, Any], answer: Answer) -> Iterator[str]:
        raise NotImplementedError

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        raise NotImplementedError

    def stream_error(self, status: int, message: str) -> Iterator[str]:
        raise NotImplementedError

    # -- internals ---------------------------------------------------------------------------

    def _queue(self, item: _Reply | _Failure) -> None:
        with self._lock:
            self._script.append(item)

    def _take(self, request: dict[str, Any], headers: dict[str, str]) -> _Reply | _Failure | None:
        with self._lock:
            self.requests.append(request)
            self.headers.append(headers)
            return self._script.popleft() if self._script else None

    def _resolve(self, request: dict[str, Any], reply: _Reply) -> Answer:
        text, scripted = reply.text, reply.tool_calls
        if reply.compute is not None:
            computed = reply.compute(request)
            text, scripted = (computed, ()) if isinstance(computed, str) else computed
        calls = tuple(
            Call(
                f"{self.call_prefix}{next(self._ids)}",
                name,
                arguments if isinstance(arguments, str) else json.dumps(arguments),
            )
            for name, arguments in scripted
        )
        stop: Stop = reply.stop or ("tool_use" if calls else "stop")
        tokens_in, tokens_out = reply.usage or (
            len(json.dumps(request.get("messages", []))) // 4,
            len(text) // 4,
        )
        model = reply.model or str(request.get("model", "fake-model"))
        return Answer(text, calls, stop, tokens_in, tokens_out, model, reply.pieces)


def _handler_for(fake: FakeLLMServer) -> type[BaseHTTPRequestHandler]:
    class Handler(LoopbackHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            body = self.rfile.read(int(self.headers.get("content-length") or 0))
            try:
                request = json.loads(body or b"{}")
            except ValueError:
                self._json(400, fake.error_body(400, "fake server: the body is not JSON"))
                return
            if self.path.split("?")[0] != fake.path:
                self._json(404, fake.error_body(404, f"fake server: no route {self.path}"))
                return
            headers = {name.lower(): value for name, value in self.headers.items()}
            script = fake._take(request, headers)
            self._answer(request, script)

        def _answer(self, request: dict[str, Any], script: _Reply | _Failure | None) -> None:
            if script is None:
                self._json(500, fake.error_body(500, NOTHING_SCRIPTED))
                return
            if script.delay:
                time.sleep(script.delay)
            if isinstance(script, _Failure):
                extra = dict(script.headers)
                if script.retry_after is not None:
                    extra["retry-after"] = script.retry_after
                message = script.message or _DEFAULT_MESSAGES.get(script.status, "fake failure")
                if script.in_stream and request.get("stream"):
                    self._stream(fake.stream_error(script.status, message), None)
                else:
                    self._json(script.status, fake.error_body(script.status, message), extra)
                return
            answer = fake._resolve(request, script)
            if request.get("stream"):
                self._stream(fake.render_stream(request, answer), script.cut_after)
            else:
                self._json(200, fake.render(request, answer))

        def _json(
            self, status: int, body: dict[str, Any], extra: dict[str, str] | None = None
        ) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            for name, value in (extra or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

        def _stream(self, events: Iterator[str], cut_after: int | None) -> None:
            self.send_response(200)
            self.send_header("content-type", "text/event-stream; charset=utf-8")
            self.send_header("cache-control", "no-cache")
            self.send_header("transfer-encoding", "chunked")
            self.end_headers()
            texts = 0
            for event in events:
                data = event.encode()
                self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                self.wfile.flush()
                texts += fake.text_marker in event
                if cut_after is not None and texts >= cut_after:
                    self.close_connection = True  # no final chunk: the body ends mid-stream
                    return
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()

    return Handler


_DEFAULT_MESSAGES = {
    400: "Invalid request.",
    401: "Invalid API key.",
    403: "This key may not use this model.",
    404: "The model does not exist.",
    429: "Rate limit reached, please retry later.",
    500: "The server had an error while processing your request.",
    503: "The service is unavailable.",
    529: "Overloaded.",
}

OPENAI_FINISH = {"stop": "stop", "tool_use": "tool_calls", "length": "length"}
ANTHROPIC_STOP = {"stop": "end_turn", "tool_use": "tool_use", "length": "max_tokens"}
ANTHROPIC_ERRORS = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    529: "overloaded_error",
}


def _pieces(text: str) -> list[str]:
    """``text`` cut as a model streams it: word by word, keeping the spaces."""
    return re.findall(r"\s*\S+\s*|\s+", text) or ([text] if text else [])


def _thirds(text: str) -> list[str]:
    """``text`` in (up to) three pieces, so JSON arrives split mid-token."""
    if len(text) < 3:
        return [text]
    step = -(-len(text) // 3)
    return [text[start : start + step] for start in range(0, len(text), step)]


class FakeOpenAI(FakeLLMServer):
    """``POST /v1/chat/completions``: JSON or SSE chunks, as OpenAI answers."""

    provider = "openai"
    path = "/v1/chat/completions"
    url_suffix = "/v1"
    call_prefix = "call_"
    text_marker = '"delta": {"content": '

    def __enter__(self) -> FakeOpenAI:
        super().__enter__()
        return self

    def render(self, request: dict[str, Any], answer: Answer) -> dict[str, Any]:
        message: dict[str, Any] = {
            "role": "assistant",
            "content": answer.text or None,
            "refusal": None,
            "annotations": [],
        }
        if answer.calls:
            message["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments},
                }
                for call in answer.calls
            ]
        return {
            **self._envelope("chat.completion", answer),
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "logprobs": None,
                    "finish_reason": OPENAI_FINISH[answer.stop],
                }
            ],
            "usage": self._usage(answer),
        }

    def render_stream(self, request: dict[str, Any], answer: Answer) -> Iterator[str]:
        with_usage = bool((request.get("stream_options") or {}).get("include_usage"))
        envelope = self._envelope("chat.completion.chunk", answer)

        def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
            body = {
                **envelope,
                "choices": [
                    {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
                ],
            }
            if with_usage:
                body["usage"] = None
            return f"data: {json.dumps(body)}\n\n"

        yield chunk({"role": "assistant", "content": "" if answer.text else None, "refusal": None})
        for piece in answer.pieces or _pieces(answer.text):
            yield chunk({"content": piece})
        for index, call in enumerate(answer.calls):
            opening = {"name": call.name, "arguments": ""}
            yield chunk(
                {
                    "tool_calls": [
                        {"index": index, "id": call.id, "type": "function", "function": opening}
                    ]
                }
            )
            for piece in _thirds(call.arguments):
                yield chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
        yield chunk({}, OPENAI_FINISH[answer.stop])
        if with_usage:
            last = {**envelope, "choices": [], "usage": self._usage(answer)}
            yield f"data: {json.dumps(last)}\n\n"
        yield "data: [DONE]\n\n"

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        kind, code = {
            401: ("invalid_request_error", "invalid_api_key"),
            403: ("invalid_request_error", "model_not_allowed"),
            404: ("invalid_request_error", "model_not_found"),
            429: ("requests", "rate_limit_exceeded"),
        }.get(status, ("server_error" if status >= 500 else "invalid_request_error", None))
        return {"error": {"message": message, "type": kind, "param": None, "code": code}}

    def stream_error(self, status: int, message: str) -> Iterator[str]:
        yield f"data: {json.dumps(self.error_body(status, message))}\n\n"

    def _envelope(self, kind: str, answer: Answer) -> dict[str, Any]:
        return {
            "id": f"chatcmpl-fake{len(self.requests)}",
            "object": kind,
            "created": int(time.time()),
            "model": answer.model,
            "service_tier": "default",
            "system_fingerprint": "fp_fake",
        }

    @staticmethod
    def _usage(answer: Answer) -> dict[str, Any]:
        return {
            "prompt_tokens": answer.input_tokens,
            "completion_tokens": answer.output_tokens,
            "total_tokens": answer.input_tokens + answer.output_tokens,
            "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0},
        }


class FakeAnthropic(FakeLLMServer):
    """``POST /v1/messages``: JSON or SSE events, as Anthropic answers."""

    provider = "anthropic"
    path = "/v1/messages"
    url_suffix = ""
    call_prefix = "toolu_"
    text_marker = '"type": "text_delta"'

    def __enter__(self) -> FakeAnthropic:
        super().__enter__()
        return self

    def render(self, request: dict[str, Any], answer: Answer) -> dict[str, Any]:
        content: list[dict[str, Any]] = []
        if answer.text:
            content.append({"type": "text", "text": answer.text})
        for call in answer.calls:
            content.append(
                {"type": "tool_use", "id": call.id, "name": call.name, "input": _input(call)}
            )
        return {
            **self._message(answer),
            "content": content,
            "stop_reason": ANTHROPIC_STOP[answer.stop],
            "usage": self._usage(answer.input_tokens, answer.output_tokens),
        }

    def render_stream(self, request: dict[str, Any], answer: Answer) -> Iterator[str]:
        start = {
            **self._message(answer),
            "content": [],
            "stop_reason": None,
            "usage": self._usage(answer.input_tokens, 1),
        }
        yield _event("message_start", {"message": start})
        yield _event("ping", {})
        index = 0
        if answer.text:
            yield _event(
                "content_block_start",
                {"index": index, "content_block": {"type": "text", "text": ""}},
            )
            for piece in answer.pieces or _pieces(answer.text):
                delta = {"type": "text_delta", "text": piece}
                yield _event("content_block_delta", {"index": index, "delta": delta})
            yield _event("content_block_stop", {"index": index})
            index += 1
        for call in answer.calls:
            block = {"type": "tool_use", "id": call.id, "name": call.name, "input": {}}
            yield _event("content_block_start", {"index": index, "content_block": block})
            for piece in _thirds(call.arguments):
                delta = {"type": "input_json_delta", "partial_json": piece}
                yield _event("content_block_delta", {"index": index, "delta": delta})
            yield _event("content_block_stop", {"index": index})
            index += 1
        yield _event(
            "message_delta",
            {
                "delta": {"stop_reason": ANTHROPIC_STOP[answer.stop], "stop_sequence": None},
                "usage": {"output_tokens": answer.output_tokens},
            },
        )
        yield _event("message_stop", {})

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        kind = ANTHROPIC_ERRORS.get(status, "api_error")
        return {
            "type": "error",
            "error": {"type": kind, "message": message},
            "request_id": f"req_fake{len(self.requests)}",
        }

    def stream_error(self, status: int, message: str) -> Iterator[str]:
        answer = Answer("", (), "stop", 0, 0, "fake-model")
        start = {**self._message(answer), "content": [], "stop_reason": None}
        start["usage"] = self._usage(0, 0)
        yield _event("message_start", {"message": start})
        yield _event("error", self.error_body(status, message))

    def _message(self, answer: Answer) -> dict[str, Any]:
        return {
            "id": f"msg_fake{len(self.requests)}",
            "type": "message",
            "role": "assistant",
            "model": answer.model,
            "stop_sequence": None,
        }

    @staticmethod
    def _usage(input_tokens: int, output_tokens: int) -> dict[str, Any]:
        return {
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
            "service_tier": "standard",
        }


def _event(kind: str, body: dict[str, Any]) -> str:
    """One server-sent event as Anthropic writes them: named, its type repeated in the data."""
    return f"event: {kind}\ndata: {json.dumps({'type': kind, **body})}\n\n"


def _input(call: Call) -> Any:
    """The ``input`` object of a tool_use block; scripted invalid JSON goes out as a string."""
    try:
        return json.loads(call.arguments)
    except ValueError:
        return call.arguments


def llm_settings(fake: FakeLLMServer, **overrides: Any) -> LLMSettings:
    """Settings pointed at ``fake``: model ``fake-model``, key in ``FAKE_KEY_ENV``, tiny backoff.

    Sets ``FAKE_KEY_ENV`` to ``FAKE_KEY`` in the environment when it is unset
    (a name nothing else reads, outside the ``MEMVAULT_`` prefix), so the
    provider always finds a key; tests of a missing key pass ``api_key_env``
    of their own.
    """
    os.environ.setdefault(FAKE_KEY_ENV, FAKE_KEY)
    values: dict[str, Any] = {
        "provider": fake.provider,
        "model": "fake-model",
        "base_url": fake.url,
        "api_key_env": FAKE_KEY_ENV,
        "timeout": WAIT,  # a loaded machine answers late; a test that wants a timeout sets its own
        "retry_base_seconds": 0.01,
        "retry_cap_seconds": 5.0,
    }
    values.update(overrides)
    return LLMSettings(**values)
