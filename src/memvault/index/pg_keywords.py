"""The keyword index on PostgreSQL: FTS5's BM25, computed over postings of tsvectors.

``chunks_fts`` (:mod:`memvault.storage.pg_schema`) holds a chunk's four
columns, and PostgreSQL derives from them ``own`` (text, title twice, tags:
FTS5's column weights 1, 2, 1), ``ctx`` (the context) and ``tokens`` (the
row's length over all four columns), with GIN indexes on both vectors; and the
same two vectors unstemmed (``own_exact``, ``ctx_exact``: the exact view of
:mod:`memvault.index.keywords`, FTS5's ``chunks_exact``).

The method is FTS5's ``bm25()``, so that ranking gets the same numbers on
both backends (:mod:`memvault.index.ranking` calibrates them), and it reads what
FTS5 reads: postings, not documents. A trigger keeps, for every word of a row,
``chunk_words`` (the stem, the chunk, its positions in ``own`` and in ``ctx``,
the row's length ``tokens``) and ``chunk_forms`` (the same for the exact view).
A query's BM25 is one statement: an index scan of its stems' postings, summed
per chunk, for each query lexeme
``idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * |D| / avgdl))`` with k1 1.2,
b 0.75, tf the lexeme's positions in ``own`` (or ``ctx``), |D| ``tokens`` and
``idf = ln((N - n + 0.5) / (n + 0.5))`` floored at 1e-6; only the best come
back. The document frequencies n, N and avgdl are counted once and kept until a
write to ``chunks_fts`` counts up ``keywords_version`` in ``meta`` (read once
per search: :meth:`PgKeywords.pinned`). With a word being typed, the rows holding
a word that starts so join the matches, ordered, as on SQLite, with the prefix's
BM25 over the exact postings (own and context together) added: its tf the
positions of every word starting with it, a range scan of ``chunk_forms``.

Before issue 31 each match's vectors came back cut to the query's lexemes and were
scored in Python (7.9 ms at 10k chunks on a quiet machine, issue 17); reading every
match's vectors on the server was itself most of a search's cost, and grew with the
matches (bench/pg_keywords.py; bench/results/2026-11-27-pg-speed.md).

Text is cut into words at punctuation and stemmed by the same Porter stemmer as
FTS5's ``porter unicode61``, so the numbers agree; they differ for accents (FTS5
removes them, PostgreSQL built without ``unaccent`` keeps them) and for Unicode
punctuation beyond the common marks ``words()`` lists.
"""

from __future__ import annotations

import contextlib
import re
from collections import Counter
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

from memvault.index.keywords import COUNTS_KEPT, TOKENS_KEPT, Form, Scored, merged
from memvault.index.query import ParsedQuery
from memvault.index.ranking import bm25_idf
from memvault.index.read_once import ReadOnce
from memvault.index.stemming import lookups
from memvault.storage.dialect import PgConnection
from memvault.storage.pg_schema import TS_CONFIG

_CONFIG = f"'{TS_CONFIG}'::regconfig"
_EXACT_CONFIG = "'pg_catalog.simple'::regconfig"
K1 = 1.2
B = 0.75


# BM25 of the chunks holding any of the query's stems, from the postings: per stem its
# weight (idf times the query's count), per chunk its own and context score. Takes the
# stems, their weights, avgdl, then what ``{extra}`` takes, then the limit.
_STEMMED = (
    "WITH q AS (SELECT * FROM unnest(?::text[], ?::float8[]) AS q(lexeme, weight)),"
    " s AS (SELECT w.rowid,"
    " sum(q.weight * w.own * {k1_plus} / (w.own + {norm})) AS own,"
    " sum(q.weight * w.ctx * {k1_plus} / (w.ctx + {norm})) AS ctx"
    " FROM q JOIN chunk_words w ON w.lexeme = q.lexeme{among} GROUP BY w.rowid)"
    " SELECT s.rowid, s.own, s.ctx FROM s{join} WHERE TRUE{extra}"
    " ORDER BY s.own + s.ctx DESC, s.rowid LIMIT ?"
)
# The BM25 of the word being typed as a prefix of the exact words (own and context
# together), from the postings of every word starting so. Takes the prefix's idf, avgdl,
# the range of words (from, below), what ``{extra}`` takes, then the limit.
_STARTED = (
    "WITH s AS (SELECT f.rowid, sum(f.own + f.ctx) AS started, max(f.tokens) AS tokens"
    " FROM chunk_forms f WHERE f.lexeme >= ? AND f.lexeme < ? GROUP BY f.rowid)"
    " SELECT s.rowid, ?::float8 * s.started * {k1_plus} / (s.started + {norm}) AS bm25"
    " FROM s{join} WHERE TRUE{extra} ORDER BY bm25 DESC, s.rowid LIMIT ?"
)
_FILTER_JOIN = " JOIN chunks c ON c.id = s.rowid JOIN notes n ON n.id = c.note_id"
_K1_PLUS = f"{K1 + 1!r}::float8"


def _norm(tokens: str, avgdl: str) -> str:
    """SQL: BM25's length normalisation, as :meth:`_Query._norm` computes it."""
    return f"{K1!r}::float8 * ({1 - B!r}::float8 + {B!r}::float8 * {tokens} / {avgdl})"


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


def _prefix_range(prefix: str) -> tuple[str, str]:
    """The words (in the postings' ``C`` order) that start with ``prefix``: from it, and
    below the word that follows every word starting so."""
    last = ord(prefix[-1]) + 1
    if 0xD800 <= last <= 0xDFFF:  # no UTF-8 for surrogates: the next character is past them
        last = 0xE000
    return prefix, prefix[:-1] + chr(min(last, 0x10FFFF))


def _form_range(form: Form) -> tuple[str, str]:
    """The range of exact words a form covers: itself (a word), or its prefix's range."""
    return _prefix_range(form.token) if form.prefix else (form.token, form.token + "\x01")


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
        self._version_read: ReadOnce[str] = ReadOnce()  # keywords_version, once a search
        self._languages: frozenset[str] | None = None

    # -- matches -------------------------------------------------------------------

    def _query(self, query: ParsedQuery) -> _Query | None:
        """The query's lexemes and their idf, or None when no word of it has a lexeme."""
        times: Counter[str] = Counter()
        held = self.languages()
        asked = [k for term in query.terms for k in lookups(term, query.language, held)]
        for stems in self.tokens_each(asked):
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
        stemmed = self._stemmed(prepared, join, extra, params, limit)
        prefix = prepared.prefix
        if prefix is None:
            return stemmed
        sql = _STARTED.format(
            k1_plus=_K1_PLUS, norm=_norm("s.tokens", "?::float8"), join=join, extra=extra
        )
        rows = self.conn.execute(
            sql, [*_prefix_range(prefix), prepared.prefix_idf, prepared.avgdl, *params, limit]
        ).fetchall()
        return merged(stemmed, [(int(r[0]), float(r[1])) for r in rows], limit)

    def _stemmed(
        self,
        prepared: _Query,
        join: str,
        extra: str,
        params: Sequence[Any],
        limit: int,
        among: Sequence[int] | None = None,
    ) -> list[Scored]:
        """The best ``limit`` chunks holding a stem of ``prepared``: their own and context
        BM25, computed on the postings (only ``among``, when given)."""
        sql = _STEMMED.format(
            k1_plus=_K1_PLUS,
            norm=_norm("w.tokens", "?::float8"),
            among="" if among is None else " AND w.rowid = ANY(?::bigint[])",
            join=join,
            extra=extra,
        )
        lexemes = list(prepared.weights)
        weights = [prepared.weights[lex] for lex in lexemes]
        before = [] if among is None else [[int(i) for i in among]]
        # avgdl once per score (own, context), each in its own norm.
        rows = self.conn.execute(
            sql, [lexemes, weights, prepared.avgdl, prepared.avgdl, *before, *params, limit]
        ).fetchall()
        return [(int(r[0]), float(r[1]), float(r[2])) for r in rows]

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
        found = self._stemmed(prepared, "", "", [], len(ids), among=ids)
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
        """The tokens of each of ``texts``, stemmed or ``exact``: one round trip for those
        not seen before, which learns both (a query's words are asked both ways)."""
        unseen = list(dict.fromkeys(t for t in texts if (t, exact) not in self._tokens))
        if unseen:
            if len(self._tokens) > TOKENS_KEPT:
                self._tokens.clear()
            wanted = [(t, e) for t in unseen for e in (False, True)]
            found: dict[int, list[str]] = {i: [] for i in range(1, len(wanted) + 1)}
            rows = self.conn.execute(
                "SELECT w.i, u.lexeme"
                " FROM unnest(?::text[], ?::boolean[]) WITH ORDINALITY AS w(text, exact, i)"
                " CROSS JOIN LATERAL unnest(to_tsvector(CASE WHEN w.exact"
                f" THEN {_EXACT_CONFIG} ELSE {_CONFIG} END, words(w.text))) AS u"
                " CROSS JOIN LATERAL unnest(u.positions) AS at(position)"
                " ORDER BY w.i, at.position",
                [[t for t, _ in wanted], [e for _, e in wanted]],
            )
            for i, lexeme in rows:
                found[int(i)].append(str(lexeme))
            for i, key in enumerate(wanted, start=1):
                self._tokens[key] = found[i]
        return [list(self._tokens[(t, exact)]) for t in texts]

    def pinned(self) -> contextlib.AbstractContextManager[None]:
        """Within the block (one search), whether the index changed is asked once."""
        return self._version_read.pinned()

    def _check_version(self) -> None:
        """Forget the counts when ``chunks_fts`` changed since they were counted."""
        self._version_read.get(self._read_version)

    def _read_version(self) -> str:
        row = self.conn.execute("SELECT value FROM meta WHERE key = 'keywords_version'").fetchone()
        version = str(row[0]) if row is not None else "0"
        if version != self._version or len(self._df) + len(self._form_df) > COUNTS_KEPT:
            self._df.clear()
            self._form_df.clear()
            self._corpus = None
            self._languages = None
            self._version = version
        return version

    def languages(self) -> frozenset[str]:
        self._check_version()
        if self._languages is None:
            rows = self.conn.execute("SELECT language FROM keyword_languages").fetchall()
            self._languages = frozenset(str(r[0]) for r in rows)
        return self._languages

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
                "SELECT lexeme, count(*) FROM chunk_words WHERE lexeme = ANY(?::text[])"
                " GROUP BY lexeme",
                [missing],
            )
            found = {str(lexeme): int(count) for lexeme, count in rows}
            for stem in missing:
                self._df[stem] = found.get(stem, 0)
        return {stem: self._df[stem] for stem in stems}

    def form_frequencies(self, forms: Collection[Form]) -> dict[Form, int]:
        self._counted()
        missing = [f for f in dict.fromkeys(forms) if f not in self._form_df]
        if missing:
            # A prefix counts the rows holding any word starting so (a row may hold several).
            rows = self.conn.execute(
                "SELECT w.i, (SELECT count(DISTINCT f.rowid) FROM chunk_forms f"
                " WHERE f.lexeme >= w.low AND f.lexeme < w.high)"
                " FROM unnest(?::text[], ?::text[]) WITH ORDINALITY AS w(low, high, i)",
                [list(bounds) for bounds in zip(*map(_form_range, missing), strict=True)],
            )
            for i, count in rows:
                self._form_df[missing[int(i) - 1]] = int(count)
        return {form: self._form_df[form] for form in forms}

    def form_holders(self, forms: Sequence[Form], among: Collection[int]) -> list[set[int]]:
        found: list[set[int]] = [set() for _ in forms]
        if not among or not forms:
            return found
        rows = self.conn.execute(
            "SELECT DISTINCT w.i, f.rowid"
            " FROM unnest(?::text[], ?::text[]) WITH ORDINALITY AS w(low, high, i)"
            " JOIN chunk_forms f ON f.lexeme >= w.low AND f.lexeme < w.high"
            " AND f.rowid = ANY(?::bigint[]) AND f.own > 0",
            [
                *(list(bounds) for bounds in zip(*map(_form_range, forms), strict=True)),
                [int(i) for i in among],
            ],
        )
        for i, chunk_id in rows:
            found[int(i) - 1].add(int(chunk_id))
        return found

    def holders(self, words: Sequence[str], among: Collection[int]) -> list[set[int]]:
        found: list[set[int]] = [set() for _ in words]
        if not among or not words:
            return found
        # A word of one stem is looked up in the postings; one of several stems (a phrase
        # to the stemmer: "e-mail") in the chunks' vectors. Every word in one round trip.
        stems = self.tokens_each(words)
        single = [(i, s[0]) for i, s in enumerate(stems, start=1) if len(s) == 1]
        phrases = [
            (i, w) for i, (w, s) in enumerate(zip(words, stems, strict=True), start=1) if len(s) > 1
        ]
        rows = self.conn.execute(
            "SELECT w.i, p.rowid FROM unnest(?::bigint[], ?::text[]) AS w(i, lexeme)"
            " JOIN chunk_words p ON p.lexeme = w.lexeme AND p.rowid = ANY(?::bigint[])"
            " AND p.own > 0"
            " UNION ALL SELECT w.i, f.rowid FROM unnest(?::bigint[], ?::text[]) AS w(i, word)"
            " JOIN chunks_fts f ON f.rowid = ANY(?::bigint[])"
            f" AND f.own @@ phraseto_tsquery({_CONFIG}, words(w.word))",
            [
                [i for i, _ in single],
                [s for _, s in single],
                [int(i) for i in among],
                [i for i, _ in phrases],
                [w for _, w in phrases],
                [int(i) for i in among] if phrases else [],
            ],
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
