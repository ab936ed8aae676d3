"""The keyword index on PostgreSQL: FTS5's BM25, computed over tsvectors.

``chunks_fts`` (:mod:`memvault.storage.pg_schema`) holds a chunk's four
columns, and PostgreSQL derives from them ``own`` (text, title twice, tags:
FTS5's column weights 1, 2, 1), ``ctx`` (the context) and ``tokens`` (the
row's length over all four columns), with GIN indexes on both vectors; and the
same two vectors unstemmed (``own_exact``, ``ctx_exact``: the exact view of
:mod:`memvault.index.keywords`, FTS5's ``chunks_exact``).

The method is FTS5's ``bm25()``, so that ranking gets the same numbers on
both backends (:mod:`memvault.index.ranking` calibrates them): the OR of the
query words' lexemes finds the matches through the GIN indexes, each match's
vectors come back cut down to the query's lexemes (``ts_filter`` over
``setweight``), and each is scored, for each query lexeme,
``idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * |D| / avgdl))`` with k1 1.2,
b 0.75, tf the lexeme's positions in ``own`` (or ``ctx``), |D| ``tokens`` and
``idf = ln((N - n + 0.5) / (n + 0.5))`` floored at 1e-6. The document
frequencies n, N and avgdl are counted once and kept until a write to
``chunks_fts`` counts up ``keywords_version`` in ``meta``. With a word being
typed, the rows holding a word that starts so join the matches, ordered, as on
SQLite, with the prefix's BM25 over the exact vectors (own and context
together) added: its tf the positions of every lexeme starting with it.

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
from dataclasses import dataclass, replace
from typing import Any

from memvault.index.keywords import COUNTS_KEPT, TOKENS_KEPT, Form, Scored, merged
from memvault.index.query import ParsedQuery
from memvault.index.ranking import bm25_idf
from memvault.storage.dialect import PgConnection
from memvault.storage.pg_schema import TS_CONFIG

_CONFIG = f"'{TS_CONFIG}'::regconfig"
_EXACT_CONFIG = "'pg_catalog.simple'::regconfig"
K1 = 1.2
B = 0.75


# The matches of a tsquery: each row's length and its vectors cut down to the query's
# lexemes (as text: ``'garden':3A,9A 'water':1A``), ``{started}``: how often a word
# starting with the prefix being typed stands in its exact vectors, and whether it holds
# a query word (it may hold only the prefix). Takes the lexemes, the tsquery, what
# ``{started}`` and ``{either}`` take, then what ``{extra}`` takes.
_MATCHES = (
    "WITH p AS (SELECT ?::text[] AS lexemes, ?::tsquery AS query)"
    " SELECT f.rowid, f.tokens, ts_filter(setweight(f.own, 'A', p.lexemes), '{{a}}')::text,"
    " ts_filter(setweight(f.ctx, 'A', p.lexemes), '{{a}}')::text, {started},"
    " f.own @@ p.query OR f.ctx @@ p.query"
    " FROM chunks_fts f{join}, p WHERE (f.own @@ p.query OR f.ctx @@ p.query{either}){extra}"
)
# With a prefix (given twice as text, then twice as its tsquery): the positions of the
# words starting so, and a row holding one matches.
_STARTED = (
    "(SELECT coalesce(sum(cardinality(u.positions)), 0) FROM unnest(f.own_exact) u"
    " WHERE starts_with(u.lexeme, ?::text))"
    " + (SELECT coalesce(sum(cardinality(u.positions)), 0) FROM unnest(f.ctx_exact) u"
    " WHERE starts_with(u.lexeme, ?::text))"
)
_EITHER = " OR f.own_exact @@ ?::tsquery OR f.ctx_exact @@ ?::tsquery"
_FILTER_JOIN = " JOIN chunks c ON c.id = f.rowid JOIN notes n ON n.id = c.note_id"
# One lexeme of a tsvector's text: quoted, ' and \ doubled; its positions (and weights).
_LEXEME = re.compile(r"'((?:[^'\\]|''|\\.)*)':([0-9A-D,]+)")
_UNESCAPE = re.compile(r"''|\\(.)")


@dataclass(frozen=True)
class _Query:
    """A query's lexemes with their idf (times the query holds them), the corpus, and the
    word being typed as the exact view holds it, with its prefix's idf."""

    weights: dict[str, float]
    avgdl: float
    tsquery: str
    prefix: str | None = None
    prefix_idf: float = 0.0

    def score(self, tokens: int, own: str, ctx: str) -> tuple[float, float]:
        """The BM25 of a row's own and context vectors (cut to the query's lexemes)."""
        norm = self._norm(tokens)
        return _bm25(self.weights, own, norm), _bm25(self.weights, ctx, norm)

    def started_score(self, tokens: int, started: int) -> float:
        """The BM25 of the prefix in a row's exact vectors, ``started`` its words there."""
        norm = self._norm(tokens)
        return self.prefix_idf * started * (K1 + 1) / (started + norm) if started else 0.0

    def _norm(self, tokens: int) -> float:
        return K1 * (1 - B + B * tokens / self.avgdl)


def _lexemes(vector: str) -> list[tuple[str, int]]:
    """Each lexeme of a tsvector's text and its number of positions."""
    return [
        (_UNESCAPE.sub(lambda m: m.group(1) or "'", quoted), positions.count(",") + 1)
        for quoted, positions in _LEXEME.findall(vector)
    ]


def _bm25(weights: dict[str, float], vector: str, norm: float) -> float:
    return sum(weights.get(lex, 0.0) * tf * (K1 + 1) / (tf + norm) for lex, tf in _lexemes(vector))


def lexeme_query(lexeme: str) -> str:
    """A tsquery matching ``lexeme`` as it is (no parsing, no stemming: safe for any text)."""
    return "'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'"


def form_query(form: Form) -> str:
    """A tsquery matching an exact word, or every word starting with a prefix."""
    return lexeme_query(form.token) + (":*" if form.prefix else "")


class PgKeywords:
    """The keyword index of a PostgreSQL database (``conn``'s ``search_path`` on it)."""

    def __init__(self, conn: PgConnection) -> None:
        self.conn = conn
        self._tokens: dict[tuple[str, bool], list[str]] = {}
        self._df: dict[str, int] = {}
        self._form_df: dict[Form, int] = {}
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
        prefix = self.exact_tokens(query.prefix) if query.prefix else []
        start = Form(prefix[0], prefix=True) if len(prefix) == 1 else None
        counts = self.document_frequencies(times)
        started = self.form_frequencies([start])[start] if start else 0
        total, avgdl = self._counted()
        return _Query(
            {lex: n * bm25_idf(total, counts[lex]) for lex, n in times.items()},
            max(avgdl, 1e-9),
            " | ".join(lexeme_query(lex) for lex in times),
            start.token if start else None,
            bm25_idf(total, started) if start else 0.0,
        )

    def _scored(
        self, prepared: _Query, join: str, extra: str, params: Sequence[Any], limit: int
    ) -> list[Scored]:
        """The best ``limit`` matches of ``prepared`` (joined and filtered), best first; with
        a word being typed, the stems' best and the prefix's best, :func:`merged` as FTS5's."""
        prefix = prepared.prefix
        started = [prefix, prefix, *[form_query(Form(prefix, prefix=True))] * 2] if prefix else []
        sql = _MATCHES.format(
            join=join,
            extra=extra,
            started=_STARTED if prefix else "0",
            either=_EITHER if prefix else "",
        )
        rows = self.conn.execute(
            sql, [list(prepared.weights), prepared.tsquery, *started, *params]
        ).fetchall()
        stemmed: list[Scored] = []
        starting: list[tuple[int, float]] = []
        for r in rows:
            chunk_id, tokens = int(r[0]), int(r[1])
            if r[5]:
                stemmed.append((chunk_id, *prepared.score(tokens, str(r[2]), str(r[3]))))
            if int(r[4]):
                starting.append((chunk_id, prepared.started_score(tokens, int(r[4]))))
        stemmed.sort(key=lambda s: (-(s[1] + s[2]), s[0]))
        if prefix is None:
            return stemmed[:limit]
        starting.sort(key=lambda s: (-s[1], s[0]))
        return merged(stemmed[:limit], starting[:limit], limit)

    def ranked(self, query: ParsedQuery, limit: int) -> list[Scored]:
        prepared = self._query(query)
        return [] if prepared is None else self._scored(prepared, "", "", [], limit)

    def ranked_where(
        self, query: ParsedQuery, where: str, params: Sequence[Any], limit: int
    ) -> list[Scored]:
        prepared = self._query(query)
        if prepared is None:
            return []
        return self._scored(prepared, _FILTER_JOIN, f" AND ({where})", params, limit)

    def scores(self, query: ParsedQuery, ids: Sequence[int]) -> dict[int, tuple[float, float]]:
        prepared = self._query(query) if ids else None
        if prepared is None:
            return {}
        # The stems' BM25 of the chunks holding a query word (the prefix aside, as in FTS5).
        found = self._scored(
            replace(prepared, prefix=None),
            "",
            " AND f.rowid = ANY(?::bigint[])",
            [[int(i) for i in ids]],
            len(ids),
        )
        return {chunk_id: (own, ctx) for chunk_id, own, ctx in found}

    def phrased(self, phrases: Sequence[Sequence[str]], limit: int) -> list[int]:
        if not phrases:
            return []
        each = " && ".join(f"phraseto_tsquery({_EXACT_CONFIG}, words(?))" for _ in phrases)
        rows = self.conn.execute(
            f"WITH p AS (SELECT {each} AS query)"
            " SELECT f.rowid FROM chunks_fts f, p WHERE f.own_exact @@ p.query"
            " ORDER BY ts_rank(f.own_exact, p.query) DESC, f.rowid LIMIT ?",
            [*(" ".join(words) for words in phrases), limit],
        ).fetchall()
        return [int(r[0]) for r in rows]

    # -- the vocabulary --------------------------------------------------------------

    def tokens(self, text: str) -> list[str]:
        return self.tokens_each([text])[0]

    def exact_tokens(self, text: str) -> list[str]:
        return self.tokens_each([text], exact=True)[0]

    def tokens_each(self, texts: Sequence[str], *, exact: bool = False) -> list[list[str]]:
        """The tokens of each of ``texts``, stemmed or ``exact`` (one round trip for those
        not seen before)."""
        unseen = list(dict.fromkeys(t for t in texts if (t, exact) not in self._tokens))
        if unseen:
            if len(self._tokens) > TOKENS_KEPT:
                self._tokens.clear()
            found: dict[int, list[str]] = {i: [] for i in range(1, len(unseen) + 1)}
            config = _EXACT_CONFIG if exact else _CONFIG
            rows = self.conn.execute(
                "SELECT w.i, u.lexeme FROM unnest(?::text[]) WITH ORDINALITY AS w(text, i)"
                f" CROSS JOIN LATERAL unnest(to_tsvector({config}, words(w.text))) AS u"
                " CROSS JOIN LATERAL unnest(u.positions) AS at(position)"
                " ORDER BY w.i, at.position",
                [unseen],
            )
            for i, lexeme in rows:
                found[int(i)].append(str(lexeme))
            for i, text in enumerate(unseen, start=1):
                self._tokens[(text, exact)] = found[i]
        return [list(self._tokens[(t, exact)]) for t in texts]

    def _check_version(self) -> None:
        """Forget the counts when ``chunks_fts`` changed since they were counted."""
        row = self.conn.execute("SELECT value FROM meta WHERE key = 'keywords_version'").fetchone()
        version = str(row[0]) if row is not None else "0"
        if version != self._version or len(self._df) + len(self._form_df) > COUNTS_KEPT:
            self._df.clear()
            self._form_df.clear()
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

    def form_frequencies(self, forms: Collection[Form]) -> dict[Form, int]:
        self._counted()
        missing = [f for f in dict.fromkeys(forms) if f not in self._form_df]
        if missing:
            rows = self.conn.execute(
                "SELECT w.i, (SELECT count(*) FROM chunks_fts f"
                " WHERE f.own_exact @@ w.query OR f.ctx_exact @@ w.query)"
                " FROM unnest(?::text[]::tsquery[]) WITH ORDINALITY AS w(query, i)",
                [[form_query(f) for f in missing]],
            )
            for i, count in rows:
                self._form_df[missing[int(i) - 1]] = int(count)
        return {form: self._form_df[form] for form in forms}

    def form_holders(self, forms: Sequence[Form], among: Collection[int]) -> list[set[int]]:
        found: list[set[int]] = [set() for _ in forms]
        if not among or not forms:
            return found
        rows = self.conn.execute(
            "SELECT w.i, f.rowid FROM unnest(?::text[]::tsquery[]) WITH ORDINALITY AS w(query, i)"
            " JOIN chunks_fts f ON f.rowid = ANY(?::bigint[]) AND f.own_exact @@ w.query",
            [[form_query(f) for f in forms], [int(i) for i in among]],
        )
        for i, chunk_id in rows:
            found[int(i) - 1].add(int(chunk_id))
        return found

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
