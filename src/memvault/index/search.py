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

The candidates are found in :mod:`memvault.index.candidates` (steps 1 and 3),
digests handled in :mod:`memvault.index.digests` (step 5), results shaped in
:mod:`memvault.index.hits`. The weights live in
:class:`memvault.config.SearchSettings`; filters in :mod:`memvault.index.filters`,
tags, links and related notes in :mod:`memvault.index.graph`.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

import numpy as np

from memvault.errors import InvalidInputError
from memvault.index.candidates import KEYWORD_DEPTH, Candidate, Pool
from memvault.index.chunking import is_conversation
from memvault.index.digests import DigestSearch
from memvault.index.embedding import show_embeds
from memvault.index.expansion import Neighbourhood
from memvault.index.filters import SearchFilters
from memvault.index.hits import Hit, SearchObserver, SearchResults, snippet
from memvault.index.index import MemoryIndex
from memvault.index.query import ParsedQuery, parse_query
from memvault.index.ranking import Evidence, Fusion, QueryTerms, Spread

__all__ = ["SEARCH_MODES", "Hit", "SearchObserver", "SearchResults", "Searcher", "snippet"]

log = logging.getLogger(__name__)

SEARCH_MODES: tuple[str, ...] = ("hybrid", "keyword", "vector")


class Searcher(DigestSearch):
    """Runs hybrid searches on one index."""

    def __init__(self, index: MemoryIndex) -> None:
        super().__init__(index)
        self.fusion = Fusion(self.settings)
        self._observers: list[SearchObserver] = []

    def observe(self, observer: SearchObserver) -> None:
        """Call ``observer(results)`` after every search (the runtime records recalls)."""
        self._observers.append(observer)

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
                if qvec is not None and used == "hybrid":
                    self.index.vectors.begin(qvec)  # beside the keyword search
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
        terms = (
            self.vocabulary.terms(parsed.terms, parsed.prefix, parsed.language)
            if use_keywords
            else None
        )
        if terms is not None and parsed.prefix is not None and not terms.started:
            parsed = replace(parsed, prefix=None)  # no longer word starts so: whole words
        # A longer keyword list than the candidates, to score the others' keywords too.
        keyword = (
            self._keyword(parsed, where, params, n * KEYWORD_DEPTH, n, checked.restrictive)
            if use_keywords
            else []
        )
        text_scores = {chunk_id: (own, ctx) for chunk_id, own, ctx in keyword}
        candidates: dict[int, Candidate] = {}
        # Digests are not in the keyword index (see ``MemoryIndex._store_chunks``).
        for chunk_id, own, ctx in keyword[:n]:
            candidates[chunk_id] = Candidate(row=None, own=own, ctx=ctx)
        phrased = self._phrased(parsed, n, where, params) if use_keywords else set()
        for chunk_id in phrased:
            candidates.setdefault(chunk_id, Candidate(row=None))  # flagged in _complete
        spread: Spread | None = None
        if qvec is not None:
            spread = Spread(*self.index.vectors.spread(qvec))
            nearest = self._besides_digests(
                lambda m: self._nearest(qvec, m, where, params, checked.restrictive), n
            )
            for chunk_id, cosine in nearest:
                candidates.setdefault(chunk_id, Candidate(row=None)).cosine = cosine
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
        pool = Pool(text_scores, qvec, where, params, phrased, keyword_query)
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

    def _texts(self, ids: Sequence[int]) -> dict[int, str]:
        """The text of the chunks shown (only those: texts are the bulk of a row)."""
        if not ids:
            return {}
        rows = self.conn.execute(
            f"SELECT id, text FROM chunks WHERE id IN ({','.join('?' * len(ids))})", list(ids)
        )
        return {int(r[0]): str(r[1]) for r in rows}

    # -- scoring -------------------------------------------------------------------

    def _score(
        self,
        candidates: dict[int, Candidate],
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
        candidates: dict[int, Candidate],
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

    def _mmr(self, ranked: list[Candidate], lam: float, limit: int) -> list[Candidate]:
        """Maximal marginal relevance: each pick trades score against likeness to earlier picks."""
        pool = ranked[: max(limit * 5, 50)]
        vectors = self.index.vectors.get([int(c.row["id"]) for c in pool])
        chosen: list[Candidate] = []
        chosen_vectors: list[np.ndarray[Any, Any]] = []
        rest = list(pool)
        while rest and len(chosen) < limit:

            def value(c: Candidate) -> float:
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

    def _hit(self, c: Candidate, text: str) -> Hit:
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
