"""The keyword index behind one interface: FTS5 on SQLite, tsvectors on PostgreSQL.

The index keeps every chunk's words twice: stemmed (``statue`` and ``status``
are one word there) and as written (the *exact* view, lower-cased, accents
removed). Search and ranking ask it a few questions, and only these
(:class:`Keywords`): the best chunks for a query by BM25 (each chunk's BM25
over its own words and over its context, as FTS5's ``bm25()`` computes them
on the stems, higher is better; with a word being typed, the best chunks by
that prefix's BM25 in the exact view join them: see :func:`merged`), with and
without the search's filters; which chunks hold a phrase
as typed; the BM25 of given chunks; the index's tokens of a text, stemmed or
exact; how many chunks hold a token, an exact word or a prefix (kept until
the index changes); which chunks hold each of them in their own columns.
Each backend answers them in its own SQL; the query's parsing
(:mod:`memvault.index.query`) is shared.

:class:`Fts5Keywords` is SQLite's FTS5 tables ``chunks_fts`` (stems) and
``chunks_exact`` (words as written); ``memvault.index.pg_keywords.PgKeywords``
the PostgreSQL table ``chunks_fts``, which holds both views.
:func:`memvault.index.keyword_backends.keywords_for` picks one for a connection.
"""

from __future__ import annotations

import contextlib
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from memvault.index.db import EXACT_TOKENIZER, TOKENIZER, Connection, DatabaseError
from memvault.index.query import ParsedQuery
from memvault.index.stemming import KeywordRow, lookups

# A keyword match: (chunk id, BM25 of its own words, BM25 of its context), on the stems.
Scored = tuple[int, float, float]

# How many word counts are kept between searches (until the index changes).
COUNTS_KEPT = 4096
# Tokenisations kept (they depend on the words only, never on the index).
TOKENS_KEPT = 4096
# BM25 of a chunk's own words (text, title twice over, tags), and of its context alone.
_OWN_BM25 = "bm25(chunks_fts, 1.0, 0.0, 2.0, 1.0)"
_CONTEXT_BM25 = "bm25(chunks_fts, 0.0, 1.0, 0.0, 0.0)"
# The BM25 of the word being typed as a prefix in the exact view (every column, the title
# twice: own and context together).
_STARTED_BM25 = "bm25(chunks_exact, 1.0, 1.0, 2.0, 1.0)"


def merged(
    stemmed: Sequence[Scored], started: Sequence[tuple[int, float]], limit: int
) -> list[Scored]:
    """The best ``limit`` of the stems' matches (their own and context BM25) and of the
    prefix's (its BM25 in the exact view), by the sum of the three, ties by id; a chunk in
    one list only has 0 from the other.

    Each list is the best ``limit`` of its own (each a top-k SQLite computes cheaply: the
    union of every match, grouped, costs twice the stems' ranking at 100k chunks).
    """
    prefix = dict(started)
    both = [(-(own + ctx + prefix.pop(i, 0.0)), i, own, ctx) for i, own, ctx in stemmed]
    both += [(-bm25, i, 0.0, 0.0) for i, bm25 in prefix.items()]
    both.sort()
    return [(chunk_id, own, ctx) for _, chunk_id, own, ctx in both[:limit]]


def keyword_tables(dialect: str) -> tuple[str, ...]:
    """The tables a chunk's words are written to and deleted from (PostgreSQL derives the
    exact view in the same row)."""
    return ("chunks_fts", "chunks_exact") if dialect == "sqlite" else ("chunks_fts",)


def write_keywords(conn: Connection, dialect: str, chunk_id: int, row: KeywordRow) -> None:
    """Write a chunk's keyword row: its stems to ``chunks_fts``, its words as written to the
    exact view (SQLite's ``chunks_exact``; PostgreSQL's ``written`` column where they
    differ), and its language to ``keyword_languages`` (see memvault.index.stemming)."""
    columns = "rowid, text, context, title, tags"
    if dialect == "sqlite":
        conn.execute(
            f"INSERT INTO chunks_fts({columns}) VALUES (?,?,?,?,?)", (chunk_id, *row.stemmed)
        )
        conn.execute(
            f"INSERT INTO chunks_exact({columns}) VALUES (?,?,?,?,?)", (chunk_id, *row.written)
        )
        for language in row.languages:
            conn.execute("INSERT OR IGNORE INTO keyword_languages VALUES (?)", (language,))
        return
    written = list(row.written) if row.written != row.stemmed else None
    conn.execute(
        f"INSERT INTO chunks_fts({columns}, written) VALUES (?,?,?,?,?,?)",
        (chunk_id, *row.stemmed, written),
    )
    for language in row.languages:
        conn.execute("INSERT INTO keyword_languages VALUES (?) ON CONFLICT DO NOTHING", (language,))


@dataclass(frozen=True)
class Form:
    """A word as the exact view holds it: whole (``statue``) or the start of words
    (``vendo``, with ``prefix``)."""

    token: str
    prefix: bool = False


class Keywords(Protocol):
    """What search and ranking ask of the keyword index."""

    conn: Any

    def ranked(self, query: ParsedQuery, limit: int) -> list[Scored]:
        """The ``limit`` best matches of any of the query's words, best first."""
        ...

    def ranked_where(
        self, query: ParsedQuery, where: str, params: Sequence[Any], limit: int
    ) -> list[Scored]:
        """The same, over the chunks passing a filter (SQLite's SQL over ``chunks c JOIN
        notes n``)."""
        ...

    def phrased(self, phrases: Sequence[Sequence[str]], limit: int) -> list[int]:
        """Up to ``limit`` chunks holding every one of ``phrases`` (each a sequence of words)
        as typed (the exact view) in their own words (text, title, tags)."""
        ...

    def scores(self, query: ParsedQuery, ids: Sequence[int]) -> dict[int, tuple[float, float]]:
        """Own and context BM25 of the chunks ``ids`` that match the query."""
        ...

    def tokens(self, text: str) -> list[str]:
        """The index's tokens of ``text`` (stems), in order."""
        ...

    def exact_tokens(self, text: str) -> list[str]:
        """The exact view's tokens of ``text`` (lower case, no accents, not stemmed)."""
        ...

    def tokens_each(self, texts: Sequence[str]) -> list[list[str]]:
        """The tokens (stems) of each of ``texts``: :meth:`tokens` for several at once."""
        ...

    def document_frequencies(self, stems: Collection[str]) -> dict[str, int]:
        """How many chunks hold each token, in any column (kept until the index changes)."""
        ...

    def form_frequencies(self, forms: Collection[Form]) -> dict[Form, int]:
        """How many chunks hold each exact word or prefix, in any column (kept as above)."""
        ...

    def documents(self) -> int:
        """How many chunks the keyword index holds (BM25's N; kept until the index changes)."""
        ...

    def holders(self, words: Sequence[str], among: Collection[int]) -> list[set[int]]:
        """For each of ``words``, which of ``among`` hold it in their own words (text,
        title, tags)."""
        ...

    def form_holders(self, forms: Sequence[Form], among: Collection[int]) -> list[set[int]]:
        """For each of ``forms``, which of ``among`` hold it in their own words."""
        ...

    def text_frequency(self, word: str) -> int:
        """How many chunks hold ``word`` in their text."""
        ...

    def pinned(self) -> contextlib.AbstractContextManager[None]:
        """A block (one search) that may take the index's state as read once."""
        ...

    def languages(self) -> frozenset[str]:
        """The languages other than English whose stems the index holds (kept as above)."""
        ...


def fts_phrase(words: Sequence[str]) -> str:
    """An FTS5 phrase for ``words`` (safe for any input: quotes are doubled)."""
    return '"' + " ".join(w.replace('"', '""') for w in words) + '"'


def fts_form(form: Form) -> str:
    """An FTS5 expression for an exact word or a prefix."""
    return fts_phrase([form.token]) + (" *" if form.prefix else "")


class Fts5Keywords:
    """SQLite's FTS5 tables ``chunks_fts`` and ``chunks_exact`` (text, context, title, tags),
    stemmed and as written.

    Query text is tokenised by in-memory FTS5 tables with the index's own
    tokenizers, so tokens always agree with what BM25 counted; document
    frequencies come from ``fts5vocab`` tables.
    """

    def __init__(self, conn: Connection, tokenizer: str = TOKENIZER) -> None:
        self.conn = conn
        self.tokenizer = tokenizer
        self._prepared = False
        self._df: dict[str, int] = {}
        self._form_df: dict[Form, int] = {}
        self._documents: int | None = None
        self._df_version: tuple[int, int] | None = None
        self._scratch = 0  # changes made tokenising queries (not the index's)
        self._tokens: dict[tuple[str, bool], list[str]] = {}
        self._languages: frozenset[str] | None = None

    def _match(self, query: ParsedQuery) -> str | None:
        """The query's FTS5 MATCH: each word as English and as its stems in the languages
        looked up (see memvault.index.stemming.lookups); English only: ``query.fts``."""
        held = self.languages()
        if query.fts is None or not held:
            return query.fts
        asked = (k for term in query.terms for k in lookups(term, query.language, held))
        return " OR ".join(fts_phrase([key]) for key in dict.fromkeys(asked))

    def languages(self) -> frozenset[str]:
        self._check_version()
        if self._languages is None:
            try:
                rows = self.conn.execute("SELECT language FROM keyword_languages").fetchall()
            except DatabaseError:  # keyword tables made by hand (bench/tests): English only
                rows = []
            self._languages = frozenset(str(r[0]) for r in rows)
        self._df_version = self._version()
        return self._languages

    # -- matches -------------------------------------------------------------------

    def ranked(self, query: ParsedQuery, limit: int) -> list[Scored]:
        match = self._match(query)
        if match is None:
            return []
        rows = self.conn.execute(
            f"SELECT rowid, {_OWN_BM25} AS own, {_CONTEXT_BM25} AS ctx"
            " FROM chunks_fts WHERE chunks_fts MATCH ? ORDER BY own + ctx LIMIT ?",
            (match, limit),
        ).fetchall()
        stemmed = [(int(r[0]), -float(r[1]), -float(r[2])) for r in rows]
        if query.prefix_fts is None:
            return stemmed
        rows = self.conn.execute(
            f"SELECT rowid, {_STARTED_BM25} AS bm25 FROM chunks_exact WHERE chunks_exact MATCH ?"
            " ORDER BY bm25, rowid LIMIT ?",
            (query.prefix_fts, limit),
        ).fetchall()
        return merged(stemmed, [(int(r[0]), -float(r[1])) for r in rows], limit)

    def ranked_where(
        self, query: ParsedQuery, where: str, params: Sequence[Any], limit: int
    ) -> list[Scored]:
        match = self._match(query)
        if match is None:
            return []
        # Materialised first: joined directly, SQLite would run the MATCH once per chunk row.
        rows = self.conn.execute(
            "WITH m AS MATERIALIZED ("
            f" SELECT rowid AS id, {_OWN_BM25} AS own, {_CONTEXT_BM25} AS ctx"
            " FROM chunks_fts WHERE chunks_fts MATCH ?)"
            " SELECT m.id, m.own, m.ctx FROM m JOIN chunks c ON c.id = m.id"
            f" JOIN notes n ON n.id = c.note_id WHERE {where} ORDER BY m.own + m.ctx LIMIT ?",
            [match, *params, limit],
        ).fetchall()
        stemmed = [(int(r[0]), -float(r[1]), -float(r[2])) for r in rows]
        if query.prefix_fts is None:
            return stemmed
        rows = self.conn.execute(
            "WITH m AS MATERIALIZED ("
            f" SELECT rowid AS id, {_STARTED_BM25} AS bm25"
            " FROM chunks_exact WHERE chunks_exact MATCH ?)"
            " SELECT m.id, m.bm25 FROM m JOIN chunks c ON c.id = m.id"
            f" JOIN notes n ON n.id = c.note_id WHERE {where} ORDER BY m.bm25, m.id LIMIT ?",
            [query.prefix_fts, *params, limit],
        ).fetchall()
        return merged(stemmed, [(int(r[0]), -float(r[1])) for r in rows], limit)

    def phrased(self, phrases: Sequence[Sequence[str]], limit: int) -> list[int]:
        joined = " AND ".join(fts_phrase(words) for words in phrases)
        rows = self.conn.execute(
            "SELECT rowid FROM chunks_exact WHERE chunks_exact MATCH ? ORDER BY rank LIMIT ?",
            (f"{{text title tags}} : ({joined})", limit),
        ).fetchall()
        return [int(r[0]) for r in rows]

    def scores(self, query: ParsedQuery, ids: Sequence[int]) -> dict[int, tuple[float, float]]:
        match = self._match(query) if ids else None
        if match is None:
            return {}
        marks = ",".join("?" * len(ids))
        rows = self.conn.execute(
            f"SELECT rowid, {_OWN_BM25}, {_CONTEXT_BM25}"
            f" FROM chunks_fts WHERE chunks_fts MATCH ? AND rowid IN ({marks})",
            [match, *ids],
        ).fetchall()
        return {int(r[0]): (-float(r[1]), -float(r[2])) for r in rows}

    # -- the vocabulary --------------------------------------------------------------

    def _prepare(self) -> None:
        if self._prepared:
            return
        for name, tokenizer in (("query_words", self.tokenizer), ("query_forms", EXACT_TOKENIZER)):
            self.conn.execute(
                f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.{name}"
                f" USING fts5(text, tokenize = '{tokenizer}')"
            )
            self.conn.execute(
                f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.{name}_seen"
                f" USING fts5vocab('temp', '{name}', 'instance')"
            )
        self.conn.execute(
            "CREATE VIRTUAL TABLE IF NOT EXISTS temp.chunk_words"
            " USING fts5vocab('main', 'chunks_fts', 'row')"
        )
        self.conn.execute(
            "CREATE VIRTUAL TABLE IF NOT EXISTS temp.chunk_forms"
            " USING fts5vocab('main', 'chunks_exact', 'row')"
        )
        self._prepared = True

    def tokens(self, text: str) -> list[str]:
        return self._tokenised(text, exact=False)

    def exact_tokens(self, text: str) -> list[str]:
        return self._tokenised(text, exact=True)

    def tokens_each(self, texts: Sequence[str]) -> list[list[str]]:
        return [self._tokenised(text, exact=False) for text in texts]

    def _tokenised(self, text: str, *, exact: bool) -> list[str]:
        known = self._tokens.get((text, exact))
        if known is not None:
            return list(known)
        self._prepare()
        table = "query_forms" if exact else "query_words"
        before = int(self.conn.total_changes)
        self.conn.execute(f"INSERT INTO temp.{table}(rowid, text) VALUES (1, ?)", (text,))
        try:
            rows = self.conn.execute(
                f"SELECT term FROM temp.{table}_seen ORDER BY offset"
            ).fetchall()
        finally:
            self.conn.execute(f"DELETE FROM temp.{table}")
            self._scratch += int(self.conn.total_changes) - before
        if len(self._tokens) > TOKENS_KEPT:
            self._tokens.clear()
        found = self._tokens[(text, exact)] = [str(r[0]) for r in rows]
        return list(found)

    def document_frequencies(self, stems: Collection[str]) -> dict[str, int]:
        self._prepare()
        self._check_version()
        for stem in stems:
            if stem not in self._df:
                row = self.conn.execute(
                    "SELECT doc FROM temp.chunk_words WHERE term = ?", (stem,)
                ).fetchone()
                self._df[stem] = int(row[0]) if row else 0
        self._df_version = self._version()
        return {stem: self._df[stem] for stem in stems}

    def form_frequencies(self, forms: Collection[Form]) -> dict[Form, int]:
        self._prepare()
        self._check_version()
        for form in forms:
            if form in self._form_df:
                continue
            if form.prefix:
                # Rows, not the sum over the words that start so: a row may hold several.
                row = self.conn.execute(
                    "SELECT count(*) FROM chunks_exact WHERE chunks_exact MATCH ?",
                    (fts_form(form),),
                ).fetchone()
                self._form_df[form] = int(row[0])
            else:
                row = self.conn.execute(
                    "SELECT doc FROM temp.chunk_forms WHERE term = ?", (form.token,)
                ).fetchone()
                self._form_df[form] = int(row[0]) if row else 0
        self._df_version = self._version()
        return {form: self._form_df[form] for form in forms}

    def documents(self) -> int:
        self._check_version()
        if self._documents is None:
            # FTS5 keeps one row per document in its docsize table: counted without the text.
            row = self.conn.execute("SELECT count(*) FROM chunks_fts_docsize").fetchone()
            self._documents = int(row[0])
        self._df_version = self._version()
        return self._documents

    def _check_version(self) -> None:
        """Forget the counts when anything was written since, here or by another process."""
        kept = len(self._df) + len(self._form_df)
        if self._version() != self._df_version or kept > COUNTS_KEPT:
            self._df.clear()
            self._form_df.clear()
            self._documents = None
            self._languages = None

    def _version(self) -> tuple[int, int]:
        """Changes made on this connection (but tokenising), and SQLite's count of other
        connections' commits."""
        changes = int(self.conn.total_changes) - self._scratch
        return changes, int(self.conn.execute("PRAGMA data_version").fetchone()[0])

    def holders(self, words: Sequence[str], among: Collection[int]) -> list[set[int]]:
        return [self._holding("chunks_fts", fts_phrase([word]), among) for word in words]

    def form_holders(self, forms: Sequence[Form], among: Collection[int]) -> list[set[int]]:
        return [self._holding("chunks_exact", fts_form(form), among) for form in forms]

    def _holding(self, table: str, match: str, among: Collection[int]) -> set[int]:
        """Which of ``among`` hold ``match`` in their own words. SQLite keeps those of the
        matches: 3x faster than in Python for a common word at 100k chunks. (``+rowid``: as
        ``rowid IN``, FTS5 would answer the match again for each id, 40x slower for a rare
        word, 20x for a common prefix; bench/results/2026-11-28-pg-postings.md.)"""
        ids = [int(i) for i in among]
        if not ids:
            return set()
        rows = self.conn.execute(
            f"SELECT rowid FROM {table} WHERE {table} MATCH ?"
            f" AND +rowid IN ({','.join('?' * len(ids))})",
            (f"{{text title tags}} : {match}", *ids),
        )
        return {int(chunk_id) for (chunk_id,) in rows}

    def pinned(self) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()  # asking SQLite whether anything changed is free

    def text_frequency(self, word: str) -> int:
        row = self.conn.execute(
            "SELECT count(*) FROM chunks_fts WHERE chunks_fts MATCH ?",
            ("text : " + fts_phrase([word]),),
        ).fetchone()
        return int(row[0])
