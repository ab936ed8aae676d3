"""What claims an agent's attention: the search hits worth showing, the pinned memories,
and the memories ranked by importance and recency.

Apart from the builder (:mod:`memvault.memory.context`) because these judgements are
shared: the living summary job ranks memories and the audience views pick hits the
same way, without building a context.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from datetime import datetime

from memvault.index.search import Hit
from memvault.vault.memories import LOW_TRUST, Memory

_RECENCY_HALF_LIFE_DAYS = 30.0
_RELEVANT_SHARE = 0.5  # keep hits scoring at least half the best one
_RELEVANT_COSINE = 0.35  # a hit without keywords must be this close in meaning


def worth_attention(hits: list[Hit]) -> list[Hit]:
    """The hits worth an agent's attention: close to the best, and a real match (a keyword,
    or a cosine that means something)."""
    if not hits:
        return []
    floor = hits[0].score * _RELEVANT_SHARE
    return [
        hit
        for hit in hits
        if hit.score >= floor and (hit.text_score != 0 or hit.vector_score >= _RELEVANT_COSINE)
    ]


def pinned_memories(memories: Iterable[Memory], pinned_tags: Iterable[str]) -> list[Memory]:
    """The memories tagged (or categorised) with one of ``pinned_tags``, most important first.
    A low-trust memory is never pinned, whatever its tags (:mod:`memvault.privacy.trust`)."""
    wanted = {t.casefold() for t in pinned_tags}
    pinned = [
        m
        for m in memories
        if wanted & ({t.casefold() for t in m.tags} | {m.category.casefold()})
        and m.trust != LOW_TRUST
    ]
    return sorted(pinned, key=lambda m: -m.importance)


def rank_memories(
    memories: Iterable[Memory], *, now: datetime, recency_bias: float
) -> list[Memory]:
    """Memories by ``importance * (1 - recency_bias) + recency * recency_bias``, best first;
    recency halves every 30 days."""

    def rank(memory: Memory) -> float:
        age_days = (now - memory.created).total_seconds() / 86400 if memory.created else math.inf
        recency = math.pow(0.5, max(age_days, 0.0) / _RECENCY_HALF_LIFE_DAYS)
        return memory.importance * (1 - recency_bias) + recency * recency_bias

    return sorted(memories, key=rank, reverse=True)
