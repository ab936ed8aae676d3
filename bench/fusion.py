"""memvault's first pass over one conversation, and the rank fusion that reorders it: what
bench/levers.py's levers and bench/embedders.py's second view (its part b) both start from.

A conversation's turns go through memvault's real ingestion (bench/locomo.py's protocol)
into a :class:`Store`; :func:`first_pass` is memvault's own top ``DEPTH`` for a question;
another ranking of the turns (:meth:`Store.ranked_by` of a :meth:`Store.view`'s cosines,
say) is fused with it by :func:`rrf`. A result whose keyword share reaches ``EXACT`` holds
every query word: the fusions keep such a hit in its slot.

Both benches import this module; it imports neither, so neither imports the other back.
"""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import locomo
import numpy as np

from memvault.index.embedders import Embedder
from memvault.index.query import STOPWORDS

DEPTH = 50  # how many of memvault's results a lever may reorder
EXACT = 0.999  # a keyword share this high: every query word held


@dataclass
class Item:
    """One memory among a question's first-pass results."""

    memory: str
    score: float
    cosine: float
    keyword: float
    session: str


@dataclass
class Store:
    """One conversation ingested into memvault, with what other rankings of its turns need
    beside it (vectors, idf, a second model)."""

    name: str
    conversation: locomo.Conversation
    memories: list[str]  # the memory of each turn, in turn order
    sessions: list[str]  # the session of each turn
    texts: list[str]
    vectors: np.ndarray[Any, Any]  # each turn's MiniLM vector
    idf: dict[str, float]
    embedder: Embedder
    second: Embedder | None = None  # lever e: the second model's passage role
    text_of: dict[str, str] = field(default_factory=dict)  # a memory's (first) turn text
    _views: dict[tuple[int, bool], np.ndarray[Any, Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for memory, text in zip(self.memories, self.texts, strict=True):
            self.text_of.setdefault(memory, text)

    def dias(self, memories: Sequence[str]) -> list[str]:
        """The turns (dia ids) the ranked memories hold, in order."""
        return [d for m in memories for d in self.conversation.dia_of[m]]

    def view(self, window: int, second: bool = False) -> np.ndarray[Any, Any]:
        """Each turn's vector with ``window`` neighbours on either side (same session),
        by MiniLM or by the ``second`` model (window 0: the turn alone)."""
        key = (window, second)
        if key not in self._views:
            embedder = self.second if second else self.embedder
            assert embedder is not None, "no second model was given"
            texts = []
            for i in range(len(self.texts)):
                lo, hi = max(0, i - window), min(len(self.texts), i + window + 1)
                texts.append(
                    "\n".join(
                        self.texts[j] for j in range(lo, hi) if self.sessions[j] == self.sessions[i]
                    )
                )
            self._views[key] = embedder.embed(texts)
        return self._views[key]

    def ranked_by(self, scores: np.ndarray[Any, Any], n: int = DEPTH) -> list[str]:
        """Memories by the best score of their turns, best first, the first ``n``."""
        out: list[str] = []
        for i in np.argsort(-scores):
            memory = self.memories[int(i)]
            if memory not in out:
                out.append(memory)
                if len(out) == n:
                    break
        return out


def words(text: str) -> list[str]:
    """Lower-case words of 3+ letters that are not stopwords."""
    return [w for w in re.findall(r"[a-z][a-z']+", text.lower()) if w not in STOPWORDS]


def build(
    root: Path, sample: dict[str, Any], turns: list[dict[str, Any]], embedder: Embedder
) -> Store:
    """``turns`` ingested through memvault, with their vectors and idf."""
    conversation = locomo.ingest(root, sample, turns, embedder)
    memory_of = {d: m for m, ds in conversation.dia_of.items() for d in ds}
    texts = [t["text"] for t in turns]
    df = Counter(w for text in texts for w in set(words(text)))
    n = len(texts)
    return Store(
        name=str(sample.get("sample_id", "?")),
        conversation=conversation,
        memories=[memory_of[t["id"]] for t in turns],
        sessions=[t["session"] for t in turns],
        texts=texts,
        vectors=embedder.embed(texts),
        idf={w: math.log((n + 1) / (c + 0.5)) for w, c in df.items()},
        embedder=embedder,
    )


def first_pass(store: Store, question: str, depth: int = DEPTH) -> list[Item]:
    """memvault's first ``depth`` results for ``question``, as items (memories only)."""
    items = []
    for h in store.conversation.runtime.searcher.search(question, limit=depth):
        if h.id:
            items.append(Item(h.id, h.score, h.vector_score, h.text_score, h.origin or ""))
    return items


def rrf(
    rankings: Sequence[Sequence[str]], k: float, weights: Sequence[float] | None = None
) -> list[str]:
    """Reciprocal rank fusion: each list gives ``weight / (k + rank)`` (weight 1 unless
    ``weights`` says otherwise)."""
    score: dict[str, float] = defaultdict(float)
    for n, ranking in enumerate(rankings):
        weight = 1.0 if weights is None else weights[n]
        for rank, memory in enumerate(ranking, start=1):
            score[memory] += weight / (k + rank)
    return sorted(score, key=lambda m: -score[m])
