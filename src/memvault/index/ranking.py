"""Ranking: keyword, meaning and phrase evidence turned into one calibrated score.

Each kind of evidence is put on a scale that means the same for every query
and every vault, so that neither input can drown the other and the fused
score can be held against a floor ("nothing relevant"):

- **Keywords** (0..1): the share of the query's information a chunk holds.
  Each query word weighs its inverse document frequency (idf, as FTS5's
  BM25 computes it), so the one word that occurs in a single note weighs a
  lot and a common word little. Which chunks hold which word is looked up
  in the index (for all but the commonest words), so a long note is not
  marked down for its length. A query word no chunk holds counts as much as
  the query's average word: "favourite pizza topping" is not answered in
  full by a chunk that merely says "top". A chunk's context (a note's title
  and headings, the neighbouring lines of a conversation) can lift its
  share part of the way. The word being typed (the query ends with it) is
  also held by a chunk holding a word that starts with it: worth the idf of
  the chunks holding its stem or such a word (counted apart: an upper bound
  of them together), always less than the word itself; where no chunk holds
  the word, its start is all it has and is worth its own idf.
- **Meaning** (0..1, a little more for a very clear match): how far a
  chunk's cosine stands above the query's cosines with the vault at large
  (median and spread, measured on a sample of stored vectors) and above an
  absolute floor (``search.cosine_floor`` .. ``cosine_clear``). Both must
  hold, so the best of a weak lot is not inflated into a match, in a small
  vault or a large one.
- **Phrases**: a chunk holding every quoted phrase of the query, or the
  whole query (a single word too), as typed (the keyword index's exact view,
  not its stems: ``statue`` is not ``status``), has a phrase match: the one
  note holding a rare word as typed comes before the many holding only a
  common word of its stem.

Fusion: ``max(k, m) + 0.5 * min(k, m)**2``, plus ``COMPLETE * k**8`` and
``phrase_weight`` for a phrase. Either signal alone carries a result; two
weak signals that happen to coincide add little; a chunk holding every
query word (a rare word, a name, a code) comes before one that is only
close in meaning, and a phrase as typed before both. ``vector_weight``
above 0.5 scales keywords down, below 0.5 meaning. Boosts for importance,
recency and a named date scale the result in :mod:`memvault.index.search`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

from memvault.config import SearchSettings
from memvault.index.keywords import Form, Keywords
from memvault.index.stemming import lookups

# Which chunks hold a word is listed for words in at most this share of the chunks (or
# this many): commoner words carry little information and their lists are long.
_COMMON_SHARE = 0.1
_LIST_ALWAYS = 2000
# Meaning counts from 1 standard deviation above the vault's cosines and is clear at 4.
_Z_FLOOR = 1.0
_Z_CLEAR = 4.0
_ABOVE_CLEAR = 0.2  # slope of meaning beyond a clear match
_AGREEMENT = 0.5  # weight of the weaker signal (squared) added to the stronger
_COMPLETE = 0.3  # a chunk holding every query word comes before one only close in meaning


@dataclass(frozen=True)
class QueryTerm:
    """One query word as the index stores it."""

    word: str  # as typed (lower case)
    stem: str  # as the index's tokenizer stores it
    idf: float  # its information: its stem's idf (none held: its start's)
    hits: int  # chunks holding its stem (none: its start): whether its holders are listed
    start: Form | None = None  # the word being typed: held by the words that start so
    start_idf: float = 0.0  # what holding only a word that starts so is worth
    # What the index is asked for the word (memvault.index.stemming.lookups): () is the
    # word itself; else its stems by language (``stem`` is the first's).
    looked_up: tuple[str, ...] = ()

    @property
    def asked(self) -> tuple[str, ...]:
        """What the index is asked for to find the chunks holding the word."""
        return self.looked_up or (self.word,)


@dataclass(frozen=True)
class QueryTerms:
    """The query's words with their idf; which of them each chunk holds is found later."""

    terms: tuple[QueryTerm, ...]
    total: int  # chunks in the index
    absent: int = 0  # query words no chunk holds
    # The BM25 score of a chunk holding every query word once: the keyword scale.
    information: float = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "information", sum(t.idf for t in self.terms))

    @property
    def started(self) -> bool:
        """Whether the word being typed is also held by longer words (its start counts)."""
        return any(t.start is not None for t in self.terms)


class Vocabulary:
    """The keyword index seen from the query side: the query words' stems and frequencies.

    Stems come from the index itself (:meth:`Keywords.tokens`), so they always
    agree with what BM25 counted.
    """

    def __init__(self, keywords: Keywords) -> None:
        self.keywords = keywords

    def terms(
        self, words: Iterable[str], prefix: str | None = None, language: str | None = None
    ) -> QueryTerms:
        """Each query word with its stem and its idf, as FTS5's BM25 computes it; and for
        ``prefix`` (the word being typed) its start and what holding it is worth.

        A word is looked up as the query's ``language`` says (see
        :func:`memvault.index.stemming.lookups`): in several languages, it is held by
        the chunks holding any of its stems (each chunk holds one: its own language's).
        """
        keywords = self.keywords
        total = keywords.documents()
        held = keywords.languages()
        first: dict[str, str] = {}  # stem -> the first word that has it
        others: dict[str, tuple[str, ...]] = {}  # stem -> its word's stems in other languages
        asked: dict[str, tuple[str, ...]] = {}  # stem -> what its word is looked up as
        listed = list(words)
        keys = [lookups(word, language, held) for word in listed]
        flat = list(dict.fromkeys(k for each in keys for k in each))
        tokens = dict(zip(flat, keywords.tokens_each(flat), strict=True))
        for word, each in zip(listed, keys, strict=True):
            stems = tokens[each[0]]
            if len(stems) == 1 and stems[0] not in first:
                first[stems[0]] = word
                if len(each) > 1 or each[0] != word:
                    asked[stems[0]] = each
                    others[stems[0]] = tuple(
                        t[0] for k in each[1:] if len(t := tokens[k]) == 1 and t[0] != stems[0]
                    )
        counts = keywords.document_frequencies([*first, *(s for o in others.values() for s in o)])
        typed = [s for s, w in first.items() if w == prefix]
        start, started = None, 0
        if typed:
            exact = keywords.exact_tokens(first[typed[0]])
            if len(exact) == 1:
                begun, whole = Form(exact[0], prefix=True), Form(exact[0])
                known = keywords.form_frequencies([begun, whole])
                # Where every chunk with a word starting so holds the word itself, the
                # start adds nothing (and costs a search).
                if known[begun] > known[whole]:
                    start, started = begun, known[begun]
        found: list[QueryTerm] = []
        absent = 0
        for stem, word in first.items():
            hits = counts[stem] + sum(counts[other] for other in others.get(stem, ()))
            also = asked.get(stem, ())
            if stem in typed and started:
                # Held whole, the word is worth its stem's idf; by a longer word, the idf of
                # the stem's and the start's holders counted apart: always less.
                idf = bm25_idf(total, hits or started)
                later = bm25_idf(total, min(total, hits + started))
                found.append(QueryTerm(word, stem, idf, hits or started, start, later, also))
            elif hits:
                found.append(QueryTerm(word, stem, bm25_idf(total, hits), hits, looked_up=also))
            else:
                absent += 1
        return QueryTerms(tuple(found), total, absent)

    def holders(self, terms: QueryTerms, chunk_ids: Iterable[int]) -> dict[int, float] | None:
        """For each of ``chunk_ids``, the idf-weighted share of the query words it holds.

        Only a chunk's own words count (text, title, tags). Words held by more
        than a tenth of the chunks say little and would be slow to list: they
        are left out of the share; when every word is that common the answer
        is None (the caller falls back on BM25).
        """
        wanted = set(chunk_ids)
        limit = max(_LIST_ALWAYS, int(terms.total * _COMMON_SHARE))
        listed = [t for t in terms.terms if t.hits <= limit]
        if not listed:
            return None
        scale = sum(t.idf for t in listed)  # each idf is above zero
        worth: dict[int, dict[str, float]] = {chunk_id: {} for chunk_id in wanted}
        starting = [t for t in listed if t.start is not None]
        started = self.keywords.form_holders([t.start for t in starting if t.start], wanted)
        for term, holders in zip(starting, started, strict=True):
            for chunk_id in holders:
                worth[chunk_id][term.stem] = term.start_idf
        asked = list(dict.fromkeys(k for t in listed for k in t.asked))
        holding = dict(zip(asked, self.keywords.holders(asked, wanted), strict=True))
        for term in listed:
            for chunk_id in set().union(*(holding[k] for k in term.asked)):
                worth[chunk_id][term.stem] = term.idf
        return {chunk_id: sum(w.values()) / scale for chunk_id, w in worth.items()}


def bm25_idf(total: int, hits: int) -> float:
    """FTS5's idf: ``log((N - n + 0.5) / (n + 0.5))``, kept above zero."""
    return max(math.log((total - hits + 0.5) / (hits + 0.5)), 1e-6)


@dataclass(frozen=True)
class Spread:
    """A query's cosines with the vault's vectors: their median, and a standard deviation
    estimated from their interquartile range (see ``VectorStore.spread``)."""

    median: float
    std: float


@dataclass(frozen=True)
class Evidence:
    """One chunk's calibrated signals."""

    keyword: float
    meaning: float | None  # None: no vector yet (its embedding is pending)
    phrase: bool


class Fusion:
    """Turns a chunk's evidence into its relevance (0: unrelated; above 1: an exact match)."""

    def __init__(self, settings: SearchSettings) -> None:
        weight = float(settings.vector_weight)
        self.keyword_scale = min(1.0, 2.0 * (1.0 - weight))
        self.meaning_scale = min(1.0, 2.0 * weight)
        self.phrase_weight = float(settings.phrase_weight)
        self.context_share = float(settings.context_weight)
        self.cos_floor = float(settings.cosine_floor)
        self.cos_clear = float(settings.cosine_clear)

    def keyword(self, held: float | None, own: float, context: float, terms: QueryTerms) -> float:
        """Share of the query's information the chunk holds; its context can lift it partway.

        ``held`` is the idf-weighted share of the listed query words the chunk
        holds (None when unknown: its BM25 over the keyword scale stands in).
        """
        present = terms.information
        if present <= 0:
            return 0.0
        scale = present + terms.absent * present / len(terms.terms)
        own_share = held * present / scale if held is not None else min(1.0, own / scale)
        context_share = min(1.0, max(context, 0.0) / scale)
        return own_share + self.context_share * max(0.0, context_share - own_share)

    def meaning(self, cosine: float, spread: Spread, *, capped: bool = True) -> float:
        """How clearly a cosine stands out, from the vault's cosines and in itself (0 .. ~1).

        ``capped=False`` keeps the slope above a clear match (vector-only ranking).
        """
        z = (cosine - spread.median) / max(spread.std, 1e-6)
        relative = (z - _Z_FLOOR) / (_Z_CLEAR - _Z_FLOOR)
        absolute = (cosine - self.cos_floor) / (self.cos_clear - self.cos_floor)
        value = max(0.0, min(relative, absolute))
        if not capped or value <= 1.0:
            return value
        # Above a clear match, cosines still order the candidates, on a flatter slope.
        return 1.0 + _ABOVE_CLEAR * (value - 1.0)

    def relevance(self, evidence: Evidence) -> float:
        """Soft maximum of the two signals, the bonus of a complete match, and the phrase."""
        k = self.keyword_scale * evidence.keyword
        m = self.meaning_scale * (evidence.meaning or 0.0)
        score = max(k, m) + _AGREEMENT * min(k, m) ** 2 + _COMPLETE * evidence.keyword**8
        if evidence.phrase:
            score += self.phrase_weight
        return score
