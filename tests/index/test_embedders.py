"""Embedders against a faithful fake of the OpenAI embeddings API, and the bundled model for real.

The fake server speaks the wire format of ``POST /v1/embeddings`` (including the
base64 float32 encoding the official SDK asks for) on loopback, records every
request, and can be scripted to misbehave the ways real services do.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import socket
import struct
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np
import openai
import pytest

from memvault.config import EmbedderSettings
from memvault.errors import ConfigError
from memvault.index.embedders import (
    LOCAL_DIM,
    LOCAL_MODEL,
    EmbeddingError,
    LocalEmbedder,
    NoEmbedder,
    OpenAIEmbedder,
    make_embedder,
)
from waiting import WAIT

FAKE_DIM = 8
FAST_RETRY = {"retry-after-ms": "10"}  # the SDK honours this before its own 0.5 s backoff


# --- the fake OpenAI-compatible server -------------------------------------------------------


def raw_vector(text: str, dim: int = FAKE_DIM) -> list[float]:
    """A deterministic, deliberately non-unit vector for ``text``."""
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    while len(digest) < dim:
        digest += hashlib.sha256(digest).digest()
    return [(byte - 100) / 8.0 for byte in digest[:dim]]


def unit(vector: list[float]) -> np.ndarray:
    array = np.asarray(vector, dtype=np.float32)
    return array / np.linalg.norm(array)


def openai_error(message: str, type_: str, code: str | None) -> dict[str, Any]:
    return {"error": {"message": message, "type": type_, "param": None, "code": code}}


@dataclass
class Reply:
    """How the server answers one request; the default is a correct answer."""

    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    error: dict[str, Any] | None = None
    shuffle: bool = False  # list the data items in reverse, each keeping its own index
    count_delta: int = 0  # return this many vectors more (or fewer) than inputs
    dim: int | None = None  # ignore the requested size and answer with this one
    force_float: bool = False  # answer with float lists even when base64 was asked for
    delay: float = 0.0


@dataclass
class Recorded:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


class FakeEmbeddingsServer:
    """An OpenAI-compatible ``/v1/embeddings`` endpoint on 127.0.0.1, in a thread."""

    def __init__(self) -> None:
        self.requests: list[Recorded] = []
        self.script: list[Reply] = []
        self.default = Reply()
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._httpd.daemon_threads = True
        self.port = self._httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def queue(self, reply: Reply, times: int = 1) -> None:
        self.script.extend([reply] * times)

    def fail(self, status: int, times: int, **kwargs: Any) -> None:
        """Answer the next ``times`` requests with ``status`` and an OpenAI error body."""
        kinds = {429: "requests", 500: "server_error", 503: "server_error"}
        error = openai_error(f"fake failure {status}", kinds.get(status, "invalid_request"), None)
        self.queue(Reply(status=status, error=error, **kwargs), times)

    @property
    def inputs(self) -> list[list[str]]:
        return [recorded.body["input"] for recorded in self.requests]

    def _next_reply(self, recorded: Recorded) -> Reply:
        with self._lock:
            self.requests.append(recorded)
            return self.script.pop(0) if self.script else self.default

    def answer(self, body: dict[str, Any], reply: Reply) -> tuple[int, dict[str, Any]]:
        if reply.status != 200:
            return reply.status, reply.error or openai_error("error", "server_error", None)
        texts = body.get("input")
        if isinstance(texts, str):
            texts = [texts]
        if not isinstance(body.get("model"), str) or not isinstance(texts, list) or not texts:
            return 400, openai_error("'model' and 'input' are required.", "invalid_request", None)
        if any(text == "" for text in texts):
            # What OpenAI says about an empty string in the batch.
            return 400, openai_error("'$.input' is invalid.", "invalid_request_error", None)
        encoding = body.get("encoding_format", "float")
        if encoding not in ("float", "base64"):
            return 400, openai_error("Invalid encoding_format.", "invalid_request_error", None)
        dim = reply.dim or body.get("dimensions") or FAKE_DIM
        count = len(texts) + reply.count_delta
        padded = [*texts, *texts][:count]
        data = []
        for index, text in enumerate(padded):
            vector = raw_vector(text, dim)
            if encoding == "base64" and not reply.force_float:
                packed = struct.pack(f"<{dim}f", *vector)
                embedding: Any = base64.b64encode(packed).decode("ascii")
            else:
                embedding = vector
            data.append({"object": "embedding", "index": index, "embedding": embedding})
        if reply.shuffle:
            data.reverse()
        tokens = sum(len(text.split()) or 1 for text in texts)
        return 200, {
            "object": "list",
            "data": data,
            "model": body["model"],
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                raw = self.rfile.read(length)
                headers = {key.lower(): value for key, value in self.headers.items()}
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = {}
                reply = server._next_reply(Recorded(self.path, headers, body))
                if reply.delay:
                    time.sleep(reply.delay)
                if not self.path.endswith("/v1/embeddings"):
                    self._send(404, openai_error("Not found.", "invalid_request_error", None), {})
                    return
                status, payload = server.answer(body, reply)
                self._send(status, payload, reply.headers)

            def _send(self, status: int, payload: dict[str, Any], headers: dict[str, str]) -> None:
                data = json.dumps(payload).encode("utf-8")
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for key, value in headers.items():
                        self.send_header(key, value)
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:
                    pass  # the client gave up (a timeout test)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler


@pytest.fixture
def server() -> Iterator[FakeEmbeddingsServer]:
    fake = FakeEmbeddingsServer()
    fake.start()
    yield fake
    fake.stop()


def openai_embedder(server: FakeEmbeddingsServer, **kwargs: Any) -> OpenAIEmbedder:
    options: dict[str, Any] = {
        "base_url": server.url,
        "api_key": "sk-test",
        "max_retries": 0,
        "timeout": WAIT,
    }
    options.update(kwargs)
    return OpenAIEmbedder("text-embedding-3-small", **options)


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# --- OpenAIEmbedder on the wire ---------------------------------------------------------------


def test_sdk_asks_for_base64_and_vectors_come_back_unit_length(
    server: FakeEmbeddingsServer,
) -> None:
    texts = ["alpha", "beta gamma", "delta"]
    vectors = openai_embedder(server).embed(texts)

    (request,) = server.requests
    assert request.path == "/v1/embeddings"
    assert request.headers["content-type"] == "application/json"
    assert request.body["model"] == "text-embedding-3-small"
    assert request.body["input"] == texts
    # openai 3.x asks for base64 float32 and decodes it itself.
    assert request.body["encoding_format"] == "base64"
    assert "dimensions" not in request.body

    assert vectors.shape == (3, FAKE_DIM)
    assert vectors.dtype == np.float32
    assert abs(np.linalg.norm(raw_vector("alpha")) - 1.0) > 0.5  # the server's are not unit
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-6)
    expected = np.stack([unit(raw_vector(text)) for text in texts])
    np.testing.assert_allclose(vectors, expected, rtol=1e-6, atol=1e-7)


def test_float_answers_from_servers_that_ignore_encoding_format(
    server: FakeEmbeddingsServer,
) -> None:
    server.queue(Reply(force_float=True))
    vectors = openai_embedder(server).embed(["alpha", "beta"])
    expected = np.stack([unit(raw_vector("alpha")), unit(raw_vector("beta"))])
    np.testing.assert_allclose(vectors, expected, rtol=1e-6, atol=1e-7)


def test_rows_follow_input_order_when_the_server_shuffles_index(
    server: FakeEmbeddingsServer,
) -> None:
    texts = ["one", "two", "three", "four"]
    server.queue(Reply(shuffle=True))
    vectors = openai_embedder(server).embed(texts)
    expected = np.stack([unit(raw_vector(text)) for text in texts])
    np.testing.assert_allclose(vectors, expected, rtol=1e-6, atol=1e-7)


def test_batches_of_batch_size(server: FakeEmbeddingsServer) -> None:
    texts = [f"text {n}" for n in range(7)]
    vectors = openai_embedder(server, batch_size=3).embed(texts)
    assert [len(batch) for batch in server.inputs] == [3, 3, 1]
    assert [text for batch in server.inputs for text in batch] == texts
    expected = np.stack([unit(raw_vector(text)) for text in texts])
    np.testing.assert_allclose(vectors, expected, rtol=1e-6, atol=1e-7)


def test_make_embedder_reads_the_key_from_the_named_variable(
    server: FakeEmbeddingsServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-process-env")
    settings = EmbedderSettings(
        provider="openai", base_url=server.url, api_key_env="MEMVAULT_TEST_KEY", max_retries=0
    )
    embedder = make_embedder(settings, {"MEMVAULT_TEST_KEY": "sk-test-123"}.get)
    assert isinstance(embedder, OpenAIEmbedder)
    assert embedder.identity == "openai:text-embedding-3-small"
    embedder.embed(["hello"])
    assert server.requests[0].headers["authorization"] == "Bearer sk-test-123"


def test_missing_key_sends_a_placeholder_not_the_process_env(
    server: FakeEmbeddingsServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Local servers (Ollama, LM Studio) need no key; OPENAI_API_KEY is not the named variable.
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-process-env")
    settings = EmbedderSettings(
        provider="openai", base_url=server.url, api_key_env="MEMVAULT_TEST_KEY", max_retries=0
    )
    make_embedder(settings, {}.get).embed(["hello"])
    assert server.requests[0].headers["authorization"] == "Bearer not-needed"


def test_base_url_and_model_are_honoured(server: FakeEmbeddingsServer) -> None:
    settings = EmbedderSettings(
        provider="openai",
        model="nomic-embed-text",
        base_url=f"http://127.0.0.1:{server.port}/proxy/v1",
        max_retries=0,
    )
    make_embedder(settings, {}.get).embed(["hello"])
    (request,) = server.requests
    assert request.path == "/proxy/v1/embeddings"
    assert request.body["model"] == "nomic-embed-text"


def test_rate_limit_is_retried(server: FakeEmbeddingsServer) -> None:
    server.fail(429, times=2, headers=FAST_RETRY)
    vectors = openai_embedder(server, max_retries=3).embed(["alpha"])
    assert len(server.requests) == 3
    np.testing.assert_allclose(vectors[0], unit(raw_vector("alpha")), rtol=1e-6)


def test_rate_limit_with_retry_after_zero_is_retried(server: FakeEmbeddingsServer) -> None:
    # Retry-After: 0 falls back to the SDK's own short backoff (about half a second).
    server.fail(429, times=1, headers={"retry-after": "0"})
    openai_embedder(server, max_retries=2).embed(["alpha"])
    assert len(server.requests) == 2


@pytest.mark.parametrize("status", [500, 503])
def test_server_errors_are_retried(server: FakeEmbeddingsServer, status: int) -> None:
    server.fail(status, times=2, headers=FAST_RETRY)
    vectors = openai_embedder(server, max_retries=2).embed(["alpha", "beta"])
    assert len(server.requests) == 3
    assert vectors.shape == (2, FAKE_DIM)


def test_persistent_server_error_names_the_status(server: FakeEmbeddingsServer) -> None:
    server.fail(500, times=10, headers=FAST_RETRY)
    with pytest.raises(EmbeddingError) as caught:
        openai_embedder(server, max_retries=1).embed(["alpha"])
    assert len(server.requests) == 2  # the first try and one retry
    message = str(caught.value)
    assert "500" in message
    assert "text-embedding-3-small" in message
    assert "fake failure 500" in message
    assert "\n" not in message
    assert caught.value.code == "embedding_failed"


@pytest.mark.parametrize(
    ("status", "error"),
    [
        (
            401,
            openai_error(
                "Incorrect API key provided: sk-bad",
                "invalid_request_error",
                "invalid_api_key",
            ),
        ),
        (
            400,
            openai_error(
                "This model does not support specifying dimensions",
                "invalid_request_error",
                None,
            ),
        ),
    ],
)
def test_client_errors_are_not_retried(
    server: FakeEmbeddingsServer, status: int, error: dict[str, Any]
) -> None:
    server.queue(Reply(status=status, error=error))
    with pytest.raises(EmbeddingError) as caught:
        openai_embedder(server, max_retries=3).embed(["alpha"])
    assert len(server.requests) == 1
    assert str(status) in str(caught.value)
    assert error["error"]["message"] in str(caught.value)


def test_error_message_does_not_double_the_full_stop(server: FakeEmbeddingsServer) -> None:
    # OpenAI's real 401 message ends with a full stop.
    message = (
        "Incorrect API key provided: sk-bad. "
        "You can find your API key at https://platform.openai.com/account/api-keys."
    )
    server.queue(Reply(status=401, error=openai_error(message, "invalid_request_error", None)))
    with pytest.raises(EmbeddingError) as caught:
        openai_embedder(server).embed(["alpha"])
    assert not str(caught.value).endswith("..")


def test_connection_refused_names_the_address_quickly() -> None:
    url = f"http://127.0.0.1:{closed_port()}/v1"
    embedder = OpenAIEmbedder(base_url=url, api_key="sk-test", timeout=WAIT, max_retries=0)
    started = time.monotonic()
    with pytest.raises(EmbeddingError) as caught:
        embedder.embed(["alpha"])
    # Refused at once: the error is the refusal, not the timeout run out.
    assert not isinstance(caught.value.__cause__, openai.APITimeoutError)
    assert time.monotonic() - started < WAIT
    assert url in str(caught.value)


def test_timeout_is_an_embedding_error(server: FakeEmbeddingsServer) -> None:
    server.queue(Reply(delay=1.0))
    with pytest.raises(EmbeddingError) as caught:
        openai_embedder(server, timeout=0.2).embed(["alpha"])
    assert server.url in str(caught.value)


def test_dimensions_setting_is_sent_and_trusted(server: FakeEmbeddingsServer) -> None:
    embedder = openai_embedder(server, dimensions=4)
    assert embedder.dimension() == 4
    assert server.requests == []  # known from the settings: no probe
    vectors = embedder.embed(["alpha", "beta"])
    assert server.requests[0].body["dimensions"] == 4
    assert vectors.shape == (2, 4)
    np.testing.assert_allclose(vectors[0], unit(raw_vector("alpha", 4)), rtol=1e-6)


def test_server_ignoring_requested_dimensions_is_an_error(server: FakeEmbeddingsServer) -> None:
    server.queue(Reply(dim=FAKE_DIM))
    with pytest.raises(EmbeddingError, match=r"8-dimensional vectors, expected 4"):
        openai_embedder(server, dimensions=4).embed(["alpha"])


def test_dimension_probes_once_and_caches(server: FakeEmbeddingsServer) -> None:
    embedder = openai_embedder(server)
    assert embedder.dimension() == FAKE_DIM
    assert embedder.dimension() == FAKE_DIM
    assert server.inputs == [["dimension probe"]]


def test_dimension_change_between_calls_is_an_error(server: FakeEmbeddingsServer) -> None:
    embedder = openai_embedder(server)
    embedder.embed(["alpha"])
    server.queue(Reply(dim=5))
    with pytest.raises(EmbeddingError, match=r"5-dimensional vectors, expected 8"):
        embedder.embed(["beta"])


def test_dimension_change_between_batches_is_an_embedding_error(
    server: FakeEmbeddingsServer,
) -> None:
    server.queue(Reply())
    server.queue(Reply(dim=5))
    with pytest.raises(EmbeddingError):
        openai_embedder(server, batch_size=1).embed(["alpha", "beta"])


@pytest.mark.parametrize("delta", [-1, 1])
def test_wrong_number_of_vectors_is_an_error(server: FakeEmbeddingsServer, delta: int) -> None:
    server.queue(Reply(count_delta=delta))
    with pytest.raises(EmbeddingError, match=rf"returned {3 + delta} vectors for 3 texts"):
        openai_embedder(server).embed(["a", "b", "c"])


def test_no_vectors_at_all_is_an_embedding_error(server: FakeEmbeddingsServer) -> None:
    server.queue(Reply(count_delta=-2))
    with pytest.raises(EmbeddingError):
        openai_embedder(server).embed(["a", "b"])


def test_empty_input_makes_no_request(server: FakeEmbeddingsServer) -> None:
    embedder = openai_embedder(server, dimensions=4)
    empty = embedder.embed([])
    assert empty.shape == (0, 4)
    assert empty.dtype == np.float32
    probed = openai_embedder(server)
    probed.dimension()
    assert probed.embed([]).shape == (0, FAKE_DIM)
    assert len(server.requests) == 1  # the probe only


def test_blank_texts_are_sent_as_a_space(server: FakeEmbeddingsServer) -> None:
    # OpenAI rejects "" in a batch; the fake does too, so this passes only if blanks are replaced.
    vectors = openai_embedder(server).embed(["", "   ", "\n", "real text"])
    assert server.inputs == [[" ", " ", " ", "real text"]]
    assert vectors.shape == (4, FAKE_DIM)
    np.testing.assert_allclose(vectors[0], unit(raw_vector(" ")), rtol=1e-6)
    np.testing.assert_allclose(vectors[3], unit(raw_vector("real text")), rtol=1e-6)


# --- NoEmbedder and make_embedder -------------------------------------------------------------


def test_no_embedder_is_disabled_and_refuses_to_embed() -> None:
    embedder = NoEmbedder()
    assert embedder.enabled is False
    assert embedder.identity == "none:none"
    assert embedder.dimension() == 0
    with pytest.raises(EmbeddingError, match="No embedder is configured"):
        embedder.embed(["alpha"])


@pytest.mark.parametrize(
    ("provider", "kind"),
    [("none", NoEmbedder), ("local", LocalEmbedder), ("openai", OpenAIEmbedder)],
)
def test_make_embedder_picks_the_provider(provider: str, kind: type) -> None:
    embedder = make_embedder(EmbedderSettings(provider=provider), {}.get)
    assert isinstance(embedder, kind)
    assert embedder.provider == provider


def test_local_embedder_settings_reach_it() -> None:
    settings = EmbedderSettings(provider="local", model=LOCAL_MODEL, batch_size=16)
    embedder = make_embedder(settings, {}.get)
    assert isinstance(embedder, LocalEmbedder)
    assert embedder.batch_size == 16
    assert embedder.identity == f"local:{LOCAL_MODEL}"


def test_local_embedder_refuses_other_models() -> None:
    with pytest.raises(ConfigError, match="runs all-MiniLM-L6-v2 or multilingual-e5-small"):
        make_embedder(EmbedderSettings(provider="local", model="bge-small-en-v1.5"), {}.get)


# --- the bundled local model, for real --------------------------------------------------------


@pytest.fixture(scope="module")
def local_embedder() -> LocalEmbedder:
    return LocalEmbedder()


def test_local_embedder_does_not_load_until_needed() -> None:
    embedder = LocalEmbedder()
    assert embedder.dimension() == LOCAL_DIM
    assert embedder.embed([]).shape == (0, LOCAL_DIM)
    assert embedder.loaded is False


def test_local_embedder_embeds_offline(local_embedder: LocalEmbedder) -> None:
    vectors = local_embedder.embed(["a dog runs in the park", "", "notes about tea"])
    assert local_embedder.loaded is True
    assert os.environ.get("HF_HUB_OFFLINE") == "1"
    assert vectors.shape == (3, LOCAL_DIM)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-5)


def test_local_embedder_is_semantically_sane(local_embedder: LocalEmbedder) -> None:
    dog, puppy, taxes = local_embedder.embed(
        ["a dog runs in the park", "a puppy playing outside", "quarterly tax spreadsheet"]
    )
    assert float(dog @ puppy) > float(dog @ taxes)
