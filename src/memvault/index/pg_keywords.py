"""The keyword index on PostgreSQL: FTS5's BM25, computed over tsvectors.

``chunks_fts`` (:mod:`memvault.storage.pg_schema`) holds a chunk's four
columns, and PostgreSQL derives from them ``own`` (text, title twice, tags:
FTS5's column weights 1, 2, 1), ``ctx`` (the context) and ``tokens`` (the
row's length over all four columns), with GIN indexes on both vectors.

The method is FTS5's ``bm25()``, so that ranking gets the same numbers on
both backends (:mod:`memvault.index.ranking` calibrates them): the OR of the
query words' lexemes finds the matches through the GIN indexes, each match's
vectors come back cut down to the query's lexemes (``ts_filter`` over
``setweight``), and each is scored, for each query lexeme,
``idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * |D| / avgdl))`` with k1 1.2,
b 0.75, tf the lexeme's positions in ``own`` (or ``ctx``), |D| ``tokens`` and
``idf = ln((N - n + 0.5) / (n + 0.5))`` floored at 1e-6. The document
frequencies n, N and avgdl are counted once and kept until a write to
``chunks_fts`` counts up ``keywords_version`` in ``meta``.

The score is computed here rather than in SQL: at 10k chunks (a median of
1,300 matches a query) Python takes 7.9 ms a query at the median, the same sum
in SQL 8.8 to 10.7 ms (bench/pg_keywords.py; bench/results/2026-11-24-pg-keywords.md).

Text is cut into words at punctuation and stemmed by the same Porter stemmer as
FTS5's ``porter unicode61``, so the numbers agree; they differ for accents (FTS5
removes them, PostgreSQL built without ``unaccent`` keeps them) and for Unicode
punctuation beyond the common marks ``words()`` lists.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

from memvault.index.keywords import COUNTS_KEPT, Scored
from memvault.index.query import ParsedQuery
from memvault.index.ranking import bm25_idf
from memvault.storage.dialect import PgConnection
from memvault.storage.pg_schema import TS_CONFIG

_CONFIG = f"'{TS_CONFIG}'::regconfig"
# Tokenisations kept (they depend on the words only, never on the index).
_TOKENS_KEPT = 4096
K1 = 1.2
B = 0.75


# The matches of a tsquery: each row's length and its vectors cut down to the query's
# lexemes (as text: ``'garden':3A,9A 'water':1A``). Takes the lexemes, the tsquery, then
# what ``{extra}`` takes.
_MATCHES = (
    "WITH p AS (SELECT ?::text[] AS lexemes, ?::tsquery AS query)"
    " SELECT f.rowid, f.tokens, ts_filter(setweight(f.own, 'A', p.lexemes), '{{a}}')::text,"
    " ts_filter(setweight(f.ctx, 'A', p.lexemes), '{{a}}')::text"
    " FROM chunks_fts f{join}, p WHERE (f.own @@ p.query OR f.ctx @@ p.query){extra}"
)
_FILTER_JOIN = " JOIN chunks c ON c.id = f.rowid JOIN notes n ON n.id = c.note_id"
# One lexeme of a tsvector's text: quoted, ' and \ doubled; its positions (and weights).
_LEXEME = re.compile(r"'((?:[^'\\]|''|\\.)*)':([0-9A-D,]+)")
_UNESCAPE = re.compile(r"''|\\(.)")


@dataclass(frozen=True)
class _Query:
    """A query's lexemes with their idf (times the query holds them), and the corpus."""

    weights: dict[str, float]
    avgdl: float
    tsquery: str

    def score(self, tokens: int, own: str, ctx: str) -> tuple[float, float]:
        """The BM25 of a row's own and context vectors (cut to the query's lexemes)."""
        norm = K1 * (1 - B + B * tokens / self.avgdl)
        return self._bm25(own, norm), self._bm25(ctx, norm)

    def _bm25(self, vector: str, norm: float) -> float:
        score = 0.0
        for quoted, positions in _LEXEME.findall(vector):
            lexeme = _UNESCAPE.sub(lambda m: m.group(1) or "'", quoted)
            tf = positions.count(",") + 1
            score += self.weights.get(lexeme, 0.0) * tf * (K1 + 1) / (tf + norm)
        return score


def lexeme_query(lexeme: str) -> str:
    """A tsquery matching ``lexeme`` as it is (no parsing, no stemming: safe for any text)."""
    return "'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'"


class PgKeywords:
    """The keyword index of a PostgreSQL database (``conn``'s ``search_path`` on it)."""

    def __init__(self, conn: PgConnection) -> None:
        self.conn = conn
        self._tokens: dict[str, list[str]] = {}
        self._df: dict[str, int] = {}
        self._corpus: tuple[int, float] | None = None  # N and avgdl
        self._version: str | None = None

    # -- matches -------------------------------------------------------------------

    def _query(self, query: ParsedQuery) -> _Query | None:
        """The query's lexemes and their idf, or None when no word of it has a lexeme."""
        times: Counter[str] = Counter()
        for stems in self.tokens_each(query.terms):
            times.update(stems)
        if not times:
            return None
        counts = self.document_frequencies(times)
        total, avgdl = self._counted()
        return _Query(
            {lex: n * bm25_idf(total, counts[lex]) for lex, n in times.items()},
            max(avgdl, 1e-9),
            " | ".join(lexeme_query(lex) for lex in times),
        )

    def _scored(
        self, prepared: _Query, join: str, extra: str, params: Sequence[Any]
    ) -> list[Scored]:
        """The matches of ``prepared`` (joined and filtered), scored, best first."""
        rows = self.conn.execute(
            _MATCHES.format(join=join, extra=extra),
            [list(prepared.weights), prepared.tsquery, *params],
        ).fetchall()
        scored = [(int(r[0]), *prepared.score(int(r[1]), str(r[2]), str(r[3]))) for r in rows]
        scored.sort(key=lambda s: (-(s[1] + s[2]), s[0]))
        return scored

    def ranked(self, query: ParsedQuery, limit: int) -> list[Scored]:
        prepared = self._query(query)
        return [] if prepared is None else self._scored(prepared, "", "", [])[:limit]

    def ranked_where(
        self, query: ParsedQuery, where: str, params: Sequence[Any], limit: int
    ) -> list[Scored]:
        prepared = self._query(query)
        if prepared is None:
            return []
        return self._scored(prepared, _FILTER_JOIN, f" AND ({where})", params)[:limit]

    def scores(self, query: ParsedQuery, ids: Sequence[int]) -> dict[int, tuple[float, float]]:
        prepared = self._query(query) if ids else None
        if prepared is None:
            return {}
        found = self._scored(
            prepared, "", " AND f.rowid = ANY(?::bigint[])", [[int(i) for i in ids]]
        )
        return {chunk_id: (own, ctx) for chunk_id, own, ctx in found}

    def phrased(self, phrases: Sequence[Sequence[str]], limit: int) -> list[int]:
        if not phrases:
            return []
        each = " && ".join(f"phraseto_tsquery({_CONFIG}, words(?))" for _ in phrases)
        rows = self.conn.execute(
            f"WITH p AS (SELECT {each} AS query)"
            " SELECT f.rowid FROM chunks_fts f, p WHERE f.own @@ p.query"
            " ORDER BY ts_rank(f.own, p.query) DESC, f.rowid LIMIT ?",
            [*(" ".join(words) for words in phrases), limit],
        ).fetchall()
        return [int(r[0]) for r in rows]

    # -- the vocabulary --------------------------------------------------------------

    def tokens(self, text: str) -> list[str]:
        return self.tokens_each([text])[0]

    def tokens_each(self, texts: Sequence[str]) -> list[list[str]]:
        """The tokens of each of ``texts`` (one round trip for those not seen before)."""
        unseen = list(dict.fromkeys(t for t in texts if t not in self._tokens))
        if unseen:
            if len(self._tokens) > _TOKENS_KEPT:
                self._tokens.clear()
            found: dict[int, list[str]] = {i: [] for i in range(1, len(unseen) + 1)}
            rows = self.conn.execute(
                "SELECT w.i, u.lexeme FROM unnest(?::text[]) WITH ORDINALITY AS w(text, i)"
                f" CROSS JOIN LATERAL unnest(to_tsvector({_CONFIG}, words(w.text))) AS u"
                " CROSS JOIN LATERAL unnest(u.positions) AS at(position)"
                " ORDER BY w.i, at.position",
                [unseen],
            )
            for i, lexeme in rows:
                found[int(i)].append(str(lexeme))
            for i, text in enumerate(unseen, start=1):
                self._tokens[text] = found[i]
        return [list(self._tokens[t]) for t in texts]

    def _check_version(self) -> None:
        """Forget the counts when ``chunks_fts`` changed since they were counted."""
        row = self.conn.execute("SELECT value FROM meta WHERE key = 'keywords_version'").fetchone()
        version = str(row[0]) if row is not None else "0"
        if version != self._version or len(self._df) > COUNTS_KEPT:
            self._df.clear()
            self._corpus = None
            self._version = version

    def documents(self) -> int:
        return self._counted()[0]

    def _counted(self) -> tuple[int, float]:
        """BM25's N and average document length (kept until the index changes)."""
        self._check_version()
        if self._corpus is None:
            row = self.conn.execute(
                "SELECT count(*), coalesce(avg(tokens), 0) FROM chunks_fts"
            ).fetchone()
            assert row is not None
            self._corpus = (int(row[0]), float(row[1]))
        return self._corpus

    def document_frequencies(self, stems: Collection[str]) -> dict[str, int]:
        self._counted()
        missing = [s for s in dict.fromkeys(stems) if s not in self._df]
        if missing:
            rows = self.conn.execute(
                "SELECT w.stem, (SELECT count(*) FROM chunks_fts f"
                " WHERE f.own @@ w.query OR f.ctx @@ w.query)"
                " FROM unnest(?::text[], ?::text[]::tsquery[]) AS w(stem, query)",
                [missing, [lexeme_query(s) for s in missing]],
            )
            for stem, count in rows:
                self._df[str(stem)] = int(count)
        return {stem: self._df[stem] for stem in stems}

    def holders(self, words: Sequence[str], among: Collection[int]) -> list[set[int]]:
        found: list[set[int]] = [set() for _ in words]
        if not among or not words:
            return found
        # Every word in one round trip.
        rows = self.conn.execute(
            "SELECT w.i, f.rowid FROM unnest(?::text[]) WITH ORDINALITY AS w(word, i)"
            " JOIN chunks_fts f ON f.rowid = ANY(?::bigint[])"
            f" AND f.own @@ phraseto_tsquery({_CONFIG}, words(w.word))",
            [list(words), [int(i) for i in among]],
        )
        for i, chunk_id in rows:
            found[int(i) - 1].add(int(chunk_id))
        return found

    def text_frequency(self, word: str) -> int:
        row = self.conn.execute(
            f"WITH p AS (SELECT phraseto_tsquery({_CONFIG}, words(?)) AS query)"
            " SELECT count(*) FROM chunks_fts f, p"
            f" WHERE f.own @@ p.query AND to_tsvector({_CONFIG}, words(f.text)) @@ p.query",
            [word],
        ).fetchone()
        return int(row[0]) if row is not None else 0
