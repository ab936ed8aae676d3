"""Which chunks a search scores: its candidates.

First the best ``candidates`` chunks by keywords (BM25), by meaning (cosine) and the
chunks holding the query as typed, each under the filters (checked on the best ids
first; the exact query runs only when a filter leaves too few). Then those that join
late: the neighbouring lines of the best memory candidates in a conversation, and what
the knowledge graph links to the entities the query names. Every candidate is given
its row, its keyword scores, its phrase flag and its cosine, to be scored like the
others (:mod:`memvault.index.search`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from memvault.index.chunking import is_conversation, is_digest
from memvault.index.expansion import EntityNames, Neighbourhood, neighbourhood
from memvault.index.index import MemoryIndex
from memvault.index.keyword_backends import keywords_for
from memvault.index.keywords import Keywords
from memvault.index.query import ParsedQuery
from memvault.index.ranking import Vocabulary

_EXPAND_TOP = 30
KEYWORD_DEPTH = 4  # keyword matches scored per candidate slot


@dataclass
class Candidate:
    """A chunk a search scores: its row, its evidence, and its scores once computed."""

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
class Pool:
    """What scoring a chunk that joins the candidates late needs: the keyword scores, the
    query's vector, the filters and the phrase matches."""

    text_scores: dict[int, tuple[float, float]]
    qvec: np.ndarray[Any, Any] | None
    where: str
    params: list[Any]
    phrased: set[int]
    query: ParsedQuery | None  # None: keywords not used


class CandidateSearch:
    """The chunks a search on one index scores, found and completed."""

    def __init__(self, index: MemoryIndex) -> None:
        self.index = index
        self.settings = index.search_settings
        self._keywords: Keywords | None = None
        self._vocabulary: Vocabulary | None = None
        self._entity_names = EntityNames()

    @property
    def conn(self) -> Any:
        """The index's database connection."""
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
    def _best(candidates: dict[int, Candidate]) -> list[Candidate]:
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
        the filter keeps much), then one deeper still; only when too little
        survives both is the search run again over exactly the chunks the
        filter allows (listing them took 47 ms for half of 100k chunks).
        """
        vectors = self.index.vectors
        if not restrictive:
            return vectors.search(qvec, n)
        for depth in (KEYWORD_DEPTH, KEYWORD_DEPTH**2):
            deep = vectors.search(qvec, n * depth)
            passing = self._passing([chunk_id for chunk_id, _ in deep], where, params)
            kept = [(chunk_id, score) for chunk_id, score in deep if chunk_id in passing]
            if len(kept) >= n or len(deep) < n * depth:
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
        candidates: dict[int, Candidate],
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

    def _admit(self, candidates: dict[int, Candidate], ids: Sequence[int], pool: Pool) -> None:
        """Make the chunks ``ids`` that pass the filters candidates, scored like the others."""
        if not ids:
            return
        passing = self._passing(ids, pool.where, pool.params)
        for chunk_id in ids:
            if chunk_id in passing:
                candidates.setdefault(chunk_id, Candidate(row=None))
        self._complete(candidates, pool.text_scores, pool.qvec, pool.phrased, pool.query)

    def _expand(self, candidates: dict[int, Candidate], pool: Pool) -> None:
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
        # Joined from the positions: SQLite's `(note_id, ordinal) IN (VALUES ...)` seeks by
        # note alone and reads every chunk of it (9 ms in a 30k-bullet Memory note).
        found = self.conn.execute(
            f"WITH wanted(note_id, ordinal) AS (VALUES {','.join('(?, ?)' for _ in positions)})"
            " SELECT c.id, c.note_id, c.ordinal, c.grp FROM wanted"
            " JOIN chunks c ON c.note_id = wanted.note_id AND c.ordinal = wanted.ordinal",
            [value for position in positions for value in position],
        ).fetchall()
        same_group = [
            int(r["id"])
            for r in found
            if wanted.get((int(r["note_id"]), int(r["ordinal"]))) == r["grp"]
        ]
        self._admit(candidates, same_group, pool)

    def _graph(
        self, candidates: dict[int, Candidate], query: str, pool: Pool
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
