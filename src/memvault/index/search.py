"""Hybrid search over the index: keywords (FTS5 BM25), meaning (vectors) and phrases.

1. Candidates: the best ``candidates`` chunks by BM25, by cosine, and the
   chunks holding the query as typed (or its quoted phrases), each under
   the filters.
2. Every candidate gets calibrated keyword and meaning evidence and a phrase
   flag, fused into a relevance that means the same in every vault
   (:mod:`memvault.index.ranking`).
3. The neighbours of the best memory candidates join the set: in a
   conversation the answer is often the line after the one that matches.
4. Each chunk then receives a share of its best neighbour's relevance (0.3
   at distance one, 0.15 at two by default), and small boosts for
   importance, recency, and a date the query names.
5. A digest (an insight the distill job wrote without a model: a title and
   embedded memories, no words of its own) gives its place to its sources,
   which join the candidates on their own evidence; an insight with words
   of its own comes after a source of it shown above it.
6. What scores below the floor (``search.min_score``) is not relevant and
   is left out; maximal marginal relevance optionally trades a little score
   for variety.

The weights live in :class:`memvault.config.SearchSettings`; filters in
:mod:`memvault.index.filters`, tags, links and related notes in
:mod:`memvault.index.graph`.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

import numpy as np

from memvault.errors import InvalidInputError
from memvault.index.chunking import is_conversation, is_digest
from memvault.index.expansion import EntityNames, Neighbourhood, neighbourhood
from memvault.index.filters import SearchFilters
from memvault.index.index import MemoryIndex, show_embeds
from memvault.index.keyword_backends import keywords_for
from memvault.index.keywords import Keywords
from memvault.index.query import ParsedQuery, parse_query
from memvault.index.ranking import Evidence, Fusion, QueryTerms, Spread, Vocabulary

log = logging.getLogger(__name__)

SNIPPET_CHARS = 700
_EXPAND_TOP = 30
_KEYWORD_DEPTH = 4  # keyword matches scored per candidate slot


@dataclass
class Hit:
    """One search result, compatible with OpenClaw's ``memory_search`` shape."""

    path: str
    start_line: int
    end_line: int
    score: float
    vector_score: float
    text_score: float
    snippet: str
    kind: str
    source: str  # "memory" for memory bullets, "vault" for notes
    id: str | None  # the memory id when the hit is a memory
    title: str = ""
    heading: str = ""
    category: str | None = None
    created: datetime | None = None
    tags: list[str] = field(default_factory=list)
    origin: str | None = None  # where a memory came from (cli, telegram, ...)
    chunk_id: int = 0

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "path": self.path,
            "start_line": self.start_line,
            "end_line": self.end_line,
            "score": round(self.score, 4),
            "vector_score": round(self.vector_score, 4),
            "text_score": round(self.text_score, 4),
            "snippet": self.snippet,
            "kind": self.kind,
            "source": self.source,
            "id": self.id,
            "title": self.title,
            "heading": self.heading,
            "category": self.category,
            "created": self.created.isoformat(timespec="seconds") if self.created else None,
            "tags": list(self.tags),
            "origin": self.origin,
        }


def snippet(text: str, limit: int = SNIPPET_CHARS) -> str:
    """At most ``limit`` characters, cut at a word boundary."""
    text = text.strip()
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    space = cut.rfind(" ")
    return (cut[:space] if space > limit // 2 else cut) + "…"


@dataclass
class _Candidate:
    row: Any
    own: float = 0.0
    ctx: float = 0.0
    cosine: float | None = None
    phrase: bool = False
    held: float | None = None  # idf-weighted share of the query words it holds
    scored: bool = False
    keyword: float = 0.0
    meaning: float | None = None
    base: float = 0.0
    final: float = 0.0
    digest: bool = False  # an insight the distill job wrote without a model


@dataclass
class _Pool:
    """What scoring a chunk that joins the candidates late needs: the keyword scores, the
    query's vector, the filters and the phrase matches."""

    text_scores: dict[int, tuple[float, float]]
    qvec: np.ndarray[Any, Any] | None
    where: str
    params: list[Any]
    phrased: set[int]
    query: ParsedQuery | None  # None: keywords not used


SEARCH_MODES: tuple[str, ...] = ("hybrid", "keyword", "vector")


class SearchResults(list[Hit]):
    """Hits, best first, and how they were found.

    ``mode`` is what the search could use (``keyword`` when no vector was
    available); ``notice`` says why, in one sentence, when that differs from
    what was asked.
    """

    def __init__(
        self, hits: Iterable[Hit] = (), *, mode: str = "hybrid", notice: str | None = None
    ) -> None:
        super().__init__(hits)
        self.mode = mode
        self.notice = notice


# Told each search's results after it answered.
SearchObserver = Callable[[SearchResults], None]


class Searcher:
    """Runs hybrid searches on one index."""

    def __init__(self, index: MemoryIndex) -> None:
        self.index = index
        self.settings = index.search_settings
        self.fusion = Fusion(self.settings)
        self._keywords: Keywords | None = None
        self._vocabulary: Vocabulary | None = None
        self._entity_names = EntityNames()
        self._observers: list[SearchObserver] = []

    def observe(self, observer: SearchObserver) -> None:
        """Call ``observer(results)`` after every search (the runtime records recalls)."""
        self._observers.append(observer)

    @property
    def conn(self) -> Any:
        return self.index.conn

    @property
    def keywords(self) -> Keywords:
        """The index's keyword search (made again when the index opened a new connection)."""
        conn = self.index.conn
        if self._keywords is None or self._keywords.conn is not conn:
            self._keywords = keywords_for(conn, self.index.dialect)
            self._vocabulary = None
        return self._keywords

    @property
    def vocabulary(self) -> Vocabulary:
        """The query words' stems and frequencies, from the keyword index."""
        keywords = self.keywords
        if self._vocabulary is None:
            self._vocabulary = Vocabulary(keywords)
        return self._vocabulary

    def search(
        self,
        query: str,
        limit: int = 10,
        filters: SearchFilters | None = None,
        *,
        mode: str = "hybrid",
        mmr_lambda: float | None = None,
        min_score: float | None = None,
        wait_for_model: bool = True,
    ) -> SearchResults:
        """The best ``limit`` chunks for ``query`` under ``filters``.

        ``mode`` is ``hybrid`` (keywords and meaning, fused), ``keyword`` or
        ``vector``. Without ``wait_for_model`` a model still loading is not
        waited for: the answer comes from keywords and says so.
        """
        if mode not in SEARCH_MODES:
            raise InvalidInputError(
                f"Unknown search mode {mode!r}; use one of hybrid, keyword, vector."
            )
        if not isinstance(query, str) or not query.strip():
            raise InvalidInputError("The search query is empty.")
        if not 1 <= limit <= 1000:
            raise InvalidInputError("The result limit must be between 1 and 1000.")
        qvec, notice = (None, None)
        # The stores' state (PostgreSQL's versions) is read once for the whole search.
        with self.index.vectors.pinned():
            if mode != "keyword":
                # Outside the index lock: other searches go on while the model works.
                qvec, notice = self.index.embed_query(query, wait=wait_for_model)
            used = mode if qvec is not None else "keyword"
            with self.index.lock, self.keywords.pinned():
                hits = self._search(query, limit, filters, qvec, used, mmr_lambda, min_score)
        results = SearchResults(hits, mode=used, notice=notice)
        for observer in self._observers:
            try:
                observer(results)
            except Exception:  # a listener must not fail the search
                log.warning("search observer failed", exc_info=True)
        return results

    def _search(
        self,
        query: str,
        limit: int,
        filters: SearchFilters | None,
        qvec: np.ndarray[Any, Any] | None,
        mode: str,
        mmr_lambda: float | None,
        min_score: float | None,
    ) -> list[Hit]:
        checked = (filters or SearchFilters()).checked()
        if checked.folder and not self.index.vault.resolve(checked.folder).is_dir():
            raise InvalidInputError(f"There is no folder {checked.folder!r} in the vault.")
        clock = self.index.clock
        parsed = parse_query(query.strip(), clock.now(), clock.locale)
        where, params = checked.sql()
        n = self.settings.candidates
        use_keywords = mode != "vector"
        terms = self.vocabulary.terms(parsed.terms, parsed.prefix) if use_keywords else None
        if terms is not None and parsed.prefix is not None and not terms.started:
            parsed = replace(parsed, prefix=None)  # no longer word starts so: whole words
        # A longer keyword list than the candidates, to score the others' keywords too.
        keyword = (
            self._keyword(parsed, where, params, n * _KEYWORD_DEPTH, n, checked.restrictive)
            if use_keywords
            else []
        )
        text_scores = {chunk_id: (own, ctx) for chunk_id, own, ctx in keyword}
        candidates: dict[int, _Candidate] = {}
        # Digests are not in the keyword index (see ``MemoryIndex._store_chunks``).
        for chunk_id, own, ctx in keyword[:n]:
            candidates[chunk_id] = _Candidate(row=None, own=own, ctx=ctx)
        phrased = self._phrased(parsed, n, where, params) if use_keywords else set()
        for chunk_id in phrased:
            candidates.setdefault(chunk_id, _Candidate(row=None))  # flagged in _complete
        spread: Spread | None = None
        if qvec is not None:
            spread = Spread(*self.index.vectors.spread(qvec))
            nearest = self._besides_digests(
                lambda m: self._nearest(qvec, m, where, params, checked.restrictive), n
            )
            for chunk_id, cosine in nearest:
                candidates.setdefault(chunk_id, _Candidate(row=None)).cosine = cosine
        if not candidates:
            return []
        keyword_query = parsed if use_keywords else None
        self._complete(candidates, text_scores, qvec, phrased, keyword_query)
        if not checked.include_archived:
            # Vector candidates are only pre-filtered for restrictive filters.
            for chunk_id in [i for i, c in candidates.items() if c.row["archived"]]:
                del candidates[chunk_id]
        if not candidates:
            return []
        self._score(candidates, terms, spread)
        pool = _Pool(text_scores, qvec, where, params, phrased, keyword_query)
        self._expand(candidates, pool)
        self._score(candidates, terms, spread)
        graph = self._graph(candidates, query, pool)
        self._score(candidates, terms, spread)
        digests = self._digests(candidates, pool)
        self._score(candidates, terms, spread)
        self._finish(candidates, parsed, graph)
        self._digests_give_way(candidates, digests)
        ranked = sorted(candidates.values(), key=lambda c: -c.final)
        floor = self.settings.min_score if min_score is None else min_score
        ranked = [c for c in ranked if c.final >= floor]
        lam = mmr_lambda if mmr_lambda is not None else self.settings.mmr_lambda
        if lam is not None and qvec is not None:
            ranked = self._mmr(ranked, lam, limit)
        chosen = self._summaries_last(ranked, limit)
        texts = show_embeds(self.conn, self._texts([int(c.row["id"]) for c in chosen]))
        return [self._hit(c, texts.get(int(c.row["id"]), "")) for c in chosen]

    def _summaries_last(self, ranked: list[_Candidate], limit: int) -> list[_Candidate]:
        """The first ``limit`` of ``ranked``, where an insight drawn from a memory ranked
        above it gives its place to the next result and comes after them.

        An insight restates its sources: once one of them is in the results, the next
        result adds more than the summary does (it still shows when there is room).
        """
        chosen: list[_Candidate] = []
        later: list[_Candidate] = []
        shown: set[str] = set()
        for c in ranked:
            if len(chosen) >= limit:
                break
            if (
                c.row["kind"] == "insight"
                and shown
                and shown & self._sources_of(int(c.row["note_id"]))
            ):
                later.append(c)
                continue
            chosen.append(c)
            if c.row["memory_id"]:
                shown.add(str(c.row["memory_id"]))
        return (chosen + later)[:limit]

    def _digests(self, candidates: dict[int, _Candidate], pool: _Pool) -> dict[int, set[int]]:
        """The candidates that are digests (insight notes with ``digest: true``: the distill
        job wrote them without a model, a title from their sources' shared words and the
        sources embedded), each with its sources' chunks, which join the candidates."""
        digest_notes = {int(c.row["note_id"]) for c in candidates.values() if c.digest}
        if not digest_notes:
            return {}
        marks = ",".join("?" * len(digest_notes))
        sources: dict[int, set[int]] = {}
        for r in self.conn.execute(
            "SELECT l.note_id, m.chunk_id FROM links l"
            " JOIN memories m ON m.id = substr(l.subpath, 2)"
            f" WHERE l.note_id IN ({marks}) AND l.subpath LIKE '^m-%'"
            " AND m.chunk_id IS NOT NULL",
            list(digest_notes),
        ):
            sources.setdefault(int(r[0]), set()).add(int(r[1]))
        digests = {
            chunk_id: sources.get(int(c.row["note_id"]), set())
            for chunk_id, c in candidates.items()
            if int(c.row["note_id"]) in digest_notes
        }
        wanted = set().union(*digests.values()) - candidates.keys()
        self._admit(candidates, sorted(wanted), pool)
        return digests

    @staticmethod
    def _digests_give_way(candidates: dict[int, _Candidate], digests: dict[int, set[int]]) -> None:
        """Each digest whose sources can be shown leaves them its place.

        A digest has no words of its own (a title from its sources' shared words, their
        embeds): what it matches, its sources match, and they are the answer, each on its
        own evidence. Its score is not passed on: it is the container's (its title, the
        vector of its links, the recency of a note written today), not a source's. A
        digest none of whose sources can be shown (a filter leaves memories out) stays.
        """
        for chunk_id, sources in digests.items():
            if any(s in candidates for s in sources):
                del candidates[chunk_id]

    def _sources_of(self, note_id: int) -> set[str]:
        """The memory ids a note links by block reference."""
        return {
            str(r[0])[1:]
            for r in self.conn.execute(
                "SELECT subpath FROM links WHERE note_id = ? AND subpath LIKE '^m-%'", (note_id,)
            )
        }

    def _texts(self, ids: Sequence[int]) -> dict[int, str]:
        """The text of the chunks shown (only those: texts are the bulk of a row)."""
        if not ids:
            return {}
        rows = self.conn.execute(
            f"SELECT id, text FROM chunks WHERE id IN ({','.join('?' * len(ids))})", list(ids)
        )
        return {int(r[0]): str(r[1]) for r in rows}

    # -- candidates --------------------------------------------------------------

    def _besides_digests(
        self, nearest: Callable[[int], list[tuple[int, float]]], n: int
    ) -> list[tuple[int, float]]:
        """The first of ``nearest(m)`` (``(chunk id, cosine)``, best first) up to ``n`` that
        are not digests, and the digests among them.

        A digest stands for its sources (see ``_digests``): it must not take a candidate's
        slot, or distilling would cost a search the memories it would have found.
        """
        want = n
        while True:
            got = nearest(want)
            digests = self._digest_ids([item[0] for item in got])
            if len(got) - len(digests) >= n or len(got) < want:
                break
            want = n + len(digests)
        kept: list[tuple[int, float]] = []
        others = 0
        for item in got:
            if others >= n:
                break
            kept.append(item)
            others += item[0] not in digests
        return kept

    def _digest_ids(self, ids: Sequence[int]) -> set[int]:
        """Which of the chunks ``ids`` belong to digests."""
        rows = self._by_ids(
            "SELECT c.id, c.kind, n.frontmatter FROM chunks c JOIN notes n ON n.id = c.note_id"
            " WHERE c.kind = 'insight' AND c.id IN ({ids})",
            ids,
        )
        return {int(r[0]) for r in rows if is_digest(str(r[1]), r[2])}

    def _by_ids(self, sql: str, ids: Sequence[int], params: Sequence[Any] = ()) -> list[Any]:
        """The rows of ``sql`` for the chunks ``ids``, asked 500 at a time: ``{ids}`` in
        ``sql`` stands for their placeholders, and ``params`` follow them."""
        out: list[Any] = []
        for start in range(0, len(ids), 500):
            batch = list(ids[start : start + 500])
            marks = ",".join("?" * len(batch))
            out.extend(self.conn.execute(sql.replace("{ids}", marks), [*batch, *params]).fetchall())
        return out

    @staticmethod
    def _best(candidates: dict[int, _Candidate]) -> list[_Candidate]:
        """The best candidates whose neighbours join: not digests, whose sources join."""
        ranked = sorted((c for c in candidates.values() if not c.digest), key=lambda c: -c.base)
        return ranked[:_EXPAND_TOP]

    def _keyword(
        self,
        parsed: ParsedQuery,
        where: str,
        params: list[Any],
        n: int,
        need: int,
        restrictive: bool,
    ) -> list[tuple[int, float, float]]:
        """Up to ``n`` best keyword matches under the filters: ``(chunk id, own, context)``.

        The keyword index ranks on its own (fast); the filters are then checked on
        the best ids only. When a filter leaves fewer than ``need``, the exact query runs.
        """
        if parsed.fts is None:
            return []
        scored = self.keywords.ranked(parsed, n)
        if not restrictive:
            return scored  # archived chunks are dropped once their rows are loaded
        passing = self._passing([chunk_id for chunk_id, _, _ in scored], where, params)
        kept = [item for item in scored if item[0] in passing]
        if len(kept) >= need or len(scored) < n:
            return kept
        return self.keywords.ranked_where(parsed, where, params, n)

    def _phrased(self, parsed: ParsedQuery, n: int, where: str, params: list[Any]) -> set[int]:
        """Chunks holding every quoted phrase, or else the whole query (one word too), as
        typed: a word as typed comes before the words it shares a stem with.

        Only a chunk's own words count (its text, title and tags), not its context.
        """
        if parsed.phrases:
            phrases: Sequence[Sequence[str]] = parsed.phrases
        elif parsed.words:
            phrases = [parsed.words]
        else:
            return set()
        ids = self.keywords.phrased(phrases, n)  # never a digest: not in the keyword index
        return self._passing(ids, where, params) if ids else set()

    def _nearest(
        self, qvec: np.ndarray[Any, Any], n: int, where: str, params: list[Any], restrictive: bool
    ) -> list[tuple[int, float]]:
        """The ``n`` nearest chunks that pass the filters.

        With filters, a deeper unfiltered search is filtered first (cheap when
        the filter keeps much); only when too little survives is the search
        run again over exactly the chunks the filter allows.
        """
        vectors = self.index.vectors
        if not restrictive:
            return vectors.search(qvec, n)
        deep = vectors.search(qvec, n * _KEYWORD_DEPTH)
        passing = self._passing([chunk_id for chunk_id, _ in deep], where, params)
        kept = [(chunk_id, score) for chunk_id, score in deep if chunk_id in passing]
        if len(kept) >= n or len(deep) < n * _KEYWORD_DEPTH:
            return kept[:n]
        rows = self.conn.execute(
            f"SELECT c.id FROM chunks c JOIN notes n ON n.id = c.note_id WHERE {where}", params
        )
        return vectors.search(qvec, n, [int(r[0]) for r in rows])

    def _passing(self, ids: Sequence[int], where: str, params: list[Any]) -> set[int]:
        """Which of ``ids`` pass the filters."""
        # NOT INDEXED: look the ids up by rowid, not scan a filter's index (kind, ...).
        sql = "SELECT c.id FROM chunks c NOT INDEXED JOIN notes n ON n.id = c.note_id"
        rows = self._by_ids(sql + " WHERE c.id IN ({ids}) AND " + where, ids, params)
        return {int(r[0]) for r in rows}

    def _complete(
        self,
        candidates: dict[int, _Candidate],
        text_scores: dict[int, tuple[float, float]],
        qvec: np.ndarray[Any, Any] | None,
        phrased: set[int],
        query: ParsedQuery | None,
    ) -> None:
        """Give every candidate its row, its keyword scores, its phrase flag and its cosine.

        Keyword scores come from the keyword list; a phrase match beyond it is
        scored on its own. Any other chunk beyond it scores 0: its BM25 is
        below all of those.
        """
        missing_rows = [i for i, c in candidates.items() if c.row is None]
        for row in self._rows(missing_rows):
            candidate = candidates[int(row["id"])]
            candidate.row = row
            candidate.digest = is_digest(str(row["kind"]), row["frontmatter"])
        for chunk_id in [i for i, c in candidates.items() if c.row is None]:
            del candidates[chunk_id]  # deleted meanwhile
        unscored = [i for i in phrased if i in candidates and i not in text_scores]
        if unscored and query is not None:
            text_scores.update(self.keywords.scores(query, unscored))
        for chunk_id, candidate in candidates.items():
            candidate.phrase = chunk_id in phrased
            if candidate.own == 0 and candidate.ctx == 0 and chunk_id in text_scores:
                candidate.own, candidate.ctx = text_scores[chunk_id]
        if qvec is not None:
            lacking_vec = [i for i, c in candidates.items() if c.cosine is None]
            for chunk_id, vector in self.index.vectors.get(lacking_vec).items():
                candidates[chunk_id].cosine = float(vector @ qvec)

    def _rows(self, ids: Sequence[int]) -> list[Any]:
        return self._by_ids(
            "SELECT c.id, c.note_id, c.ordinal, c.kind, c.start_line, c.end_line,"
            " c.heading, c.grp, c.memory_id, c.category, c.importance, c.created,"
            " c.archived, n.path, n.title, m.tags AS memory_tags, m.source AS origin,"
            " n.tags AS note_tags,"
            " CASE WHEN c.kind = 'insight' THEN n.frontmatter END AS frontmatter"
            " FROM chunks c JOIN notes n ON n.id = c.note_id"
            " LEFT JOIN memories m ON m.id = c.memory_id WHERE c.id IN ({ids})",
            ids,
        )

    def _admit(self, candidates: dict[int, _Candidate], ids: Sequence[int], pool: _Pool) -> None:
        """Make the chunks ``ids`` that pass the filters candidates, scored like the others."""
        if not ids:
            return
        passing = self._passing(ids, pool.where, pool.params)
        for chunk_id in ids:
            if chunk_id in passing:
                candidates.setdefault(chunk_id, _Candidate(row=None))
        self._complete(candidates, pool.text_scores, pool.qvec, pool.phrased, pool.query)

    def _expand(self, candidates: dict[int, _Candidate], pool: _Pool) -> None:
        """Add the conversational neighbours of the best memory candidates (same source).

        Only memories: in a conversation the answer often follows the line that
        matches; a note's neighbouring section is no such answer.
        """
        window = len(self.settings.neighbour_boost)
        if window == 0:
            return
        best = self._best(candidates)
        top = [c for c in best if c.row["memory_id"] and is_conversation(c.row["grp"])]
        wanted: dict[tuple[int, int], str] = {}
        for c in top:
            note_id, ordinal, group = int(c.row["note_id"]), int(c.row["ordinal"]), c.row["grp"]
            for d in range(1, window + 1):
                wanted[(note_id, ordinal - d)] = group
                wanted[(note_id, ordinal + d)] = group
        for c in candidates.values():
            wanted.pop((int(c.row["note_id"]), int(c.row["ordinal"])), None)
        if not wanted:
            return
        positions = list(wanted)
        found = self.conn.execute(
            "SELECT id, note_id, ordinal, grp FROM chunks WHERE (note_id, ordinal) IN"
            f" (VALUES {','.join('(?, ?)' for _ in positions)})",
            [value for position in positions for value in position],
        ).fetchall()
        same_group = [
            int(r["id"])
            for r in found
            if wanted.get((int(r["note_id"]), int(r["ordinal"]))) == r["grp"]
        ]
        self._admit(candidates, same_group, pool)

    def _graph(
        self, candidates: dict[int, _Candidate], query: str, pool: _Pool
    ) -> Neighbourhood | None:
        """Add what the knowledge graph links to the entities in play (see ``expansion``)."""
        if not self.settings.graph_expansion or not self.settings.graph_boost:
            return None
        focus = self._entity_names.named_in(self.conn, query)
        if focus is None:
            return None
        best = self._best(candidates)
        graph = neighbourhood(
            self.conn,
            [int(c.row["id"]) for c in best],
            focus,
            query,
            hub_limit=self.settings.graph_hub_limit,
            depth=len(self.settings.graph_boost),
        )
        self._admit(
            candidates, sorted(graph.chunks - candidates.keys())[: self.settings.candidates], pool
        )
        return graph

    # -- scoring -------------------------------------------------------------------

    def _score(
        self,
        candidates: dict[int, _Candidate],
        terms: QueryTerms | None,
        spread: Spread | None,
    ) -> None:
        """Each new candidate's calibrated evidence and its fused relevance (``base``)."""
        fusion = self.fusion
        fresh = [c for c in candidates.values() if not c.scored]
        if terms is not None:
            ids = [int(c.row["id"]) for c in fresh]
            held = self.vocabulary.holders(terms, ids) if ids else {}
            for c in fresh:
                c.held = None if held is None else held[int(c.row["id"])]
        for c in fresh:
            c.scored = True
            if spread is not None and c.cosine is not None:
                # Alone, meaning is uncapped so that it keeps the cosines' order.
                c.meaning = fusion.meaning(c.cosine, spread, capped=terms is not None)
            if terms is None:
                c.base = c.meaning or 0.0
                continue
            c.keyword = fusion.keyword(c.held, c.own, c.ctx, terms)
            c.base = fusion.relevance(Evidence(c.keyword, c.meaning, c.phrase))

    def _finish(
        self,
        candidates: dict[int, _Candidate],
        parsed: ParsedQuery,
        graph: Neighbourhood | None = None,
    ) -> None:
        by_position = {
            (int(c.row["note_id"]), int(c.row["ordinal"])): c for c in candidates.values()
        }
        decays = self.settings.neighbour_boost
        graph_boost = self.settings.graph_boost
        now = self.index.clock.now().timestamp()
        half_life = self.settings.recency_half_life_days * 86400
        time_range = parsed.time
        for c in candidates.values():
            note_id, ordinal, group = int(c.row["note_id"]), int(c.row["ordinal"]), c.row["grp"]
            bonus = 0.0
            # Neighbours: lines of one conversation (the answer often follows the question).
            # A note's sections do not lend each other score: a long note would outrank a
            # short one for holding more near misses.
            related = bool(c.row["memory_id"]) and is_conversation(group)
            for distance, decay in enumerate(decays if related else (), start=1):
                for other in (ordinal - distance, ordinal + distance):
                    neighbour = by_position.get((note_id, other))
                    if neighbour is not None and neighbour.row["grp"] == group:
                        bonus = max(bonus, decay * neighbour.base)
            # Graph neighbours: what an entity links, and the entity itself.
            for other, hops in graph.hops.get(int(c.row["id"]), {}).items() if graph else ():
                linked = candidates.get(other)
                if linked is not None and hops <= len(graph_boost):
                    bonus = max(bonus, graph_boost[hops - 1] * linked.base)
            # Boosts scale relevance rather than add to it: what is not relevant stays so.
            factor = 1.0
            if c.row["memory_id"]:
                factor += self.settings.importance_weight * (float(c.row["importance"]) - 0.5)
            created = c.row["created"]
            if created is not None:
                age = max(0.0, now - float(created))
                factor += self.settings.recency_weight * math.pow(0.5, age / half_life)
                if (
                    time_range is not None
                    and time_range.start.timestamp() <= float(created) < time_range.end.timestamp()
                ):
                    factor += self.settings.time_weight
            score = (c.base + bonus) * factor
            c.final = score

    def _mmr(self, ranked: list[_Candidate], lam: float, limit: int) -> list[_Candidate]:
        """Maximal marginal relevance: each pick trades score against likeness to earlier picks."""
        pool = ranked[: max(limit * 5, 50)]
        vectors = self.index.vectors.get([int(c.row["id"]) for c in pool])
        chosen: list[_Candidate] = []
        chosen_vectors: list[np.ndarray[Any, Any]] = []
        rest = list(pool)
        while rest and len(chosen) < limit:

            def value(c: _Candidate) -> float:
                v = vectors.get(int(c.row["id"]))
                if v is None or not chosen_vectors:
                    return lam * c.final
                return lam * c.final - (1 - lam) * max(float(v @ o) for o in chosen_vectors)

            best = max(rest, key=value)
            chosen.append(best)
            rest.remove(best)
            picked = vectors.get(int(best.row["id"]))
            if picked is not None:
                chosen_vectors.append(picked)
        return chosen + [c for c in ranked if c not in chosen]

    def _hit(self, c: _Candidate, text: str) -> Hit:
        row = c.row
        is_memory = bool(row["memory_id"])
        tags_json = row["memory_tags"] if is_memory else row["note_tags"]
        created = row["created"]
        return Hit(
            path=str(row["path"]),
            start_line=int(row["start_line"]),
            end_line=int(row["end_line"]),
            score=c.final,
            vector_score=float(c.cosine) if c.cosine is not None else 0.0,
            text_score=c.keyword,
            snippet=snippet(text),
            kind=str(row["kind"]),
            source="memory" if is_memory else "vault",
            id=str(row["memory_id"]) if is_memory else None,
            title="" if is_memory else str(row["title"]),
            heading=str(row["heading"]),
            category=row["category"],
            created=datetime.fromtimestamp(float(created)).astimezone(self.index.clock.tz)
            if created is not None
            else None,
            tags=json.loads(tags_json) if tags_json else [],
            origin=row["origin"] if is_memory else None,
            chunk_id=int(row["id"]),
        )
