"""The keyword index behind one interface: FTS5 on SQLite, tsvectors on PostgreSQL.

Search and ranking ask the keyword index a few questions, and only these
(:class:`Keywords`): the best chunks for a query by BM25 (each chunk's BM25
over its own words and over its context, as FTS5's ``bm25()`` computes them,
higher is better), with and without the search's filters; which chunks hold
a phrase; the BM25 of given chunks; the index's tokens of a text; how many
chunks hold a token (document frequencies, kept until the index changes);
which chunks hold a word in their own columns. Each backend answers them in
its own SQL; the query's parsing (:mod:`memvault.index.query`) is shared.

:class:`Fts5Keywords` is SQLite's FTS5 table ``chunks_fts``;
``memvault.index.pg_keywords.PgKeywords`` the PostgreSQL table of the same
name. :func:`memvault.index.keyword_backends.keywords_for` picks one for a connection.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any, Protocol

from memvault.index.db import TOKENIZER, Connection
from memvault.index.query import ParsedQuery

# A keyword match: (chunk id, BM25 of its own words, BM25 of its context).
Scored = tuple[int, float, float]

# How many word counts are kept between searches (until the index changes).
COUNTS_KEPT = 4096
# BM25 of a chunk's own words (text, title twice over, tags), and of its context alone.
_OWN_BM25 = "bm25(chunks_fts, 1.0, 0.0, 2.0, 1.0)"
_CONTEXT_BM25 = "bm25(chunks_fts, 0.0, 1.0, 0.0, 0.0)"


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
        in their own words (text, title, tags)."""
        ...

    def scores(self, query: ParsedQuery, ids: Sequence[int]) -> dict[int, tuple[float, float]]:
        """Own and context BM25 of the chunks ``ids`` that match the query."""
        ...

    def tokens(self, text: str) -> list[str]:
        """The index's tokens of ``text`` (stems), in order."""
        ...

    def document_frequencies(self, stems: Collection[str]) -> dict[str, int]:
        """How many chunks hold each token, in any column (kept until the index changes)."""
        ...

    def documents(self) -> int:
        """How many chunks the keyword index holds (BM25's N; kept until the index changes)."""
        ...

    def holders(self, words: Sequence[str], among: Collection[int]) -> list[set[int]]:
        """For each of ``words``, which of ``among`` hold it in their own words (text,
        title, tags)."""
        ...

    def text_frequency(self, word: str) -> int:
        """How many chunks hold ``word`` in their text."""
        ...


def fts_phrase(words: Sequence[str]) -> str:
    """An FTS5 phrase for ``words`` (safe for any input: quotes are doubled)."""
    return '"' + " ".join(w.replace('"', '""') for w in words) + '"'


class Fts5Keywords:
    """SQLite's FTS5 table ``chunks_fts`` (text, context, title, tags).

    Query text is tokenised by an in-memory FTS5 table with the index's own
    tokenizer, so stems always agree with what BM25 counted; document
    frequencies come from an ``fts5vocab`` table.
    """

    def __init__(self, conn: Connection, tokenizer: str = TOKENIZER) -> None:
        self.conn = conn
        self.tokenizer = tokenizer
        self._prepared = False
        self._df: dict[str, int] = {}
        self._documents: int | None = None
        self._df_version: tuple[int, int] | None = None
        self._scratch = 0  # changes made tokenising queries (not the index's)

    # -- matches -------------------------------------------------------------------

    def ranked(self, query: ParsedQuery, limit: int) -> list[Scored]:
        if query.fts is None:
            return []
        rows = self.conn.execute(
            f"SELECT rowid, {_OWN_BM25} AS own, {_CONTEXT_BM25} AS ctx"
            " FROM chunks_fts WHERE chunks_fts MATCH ? ORDER BY own + ctx LIMIT ?",
            (query.fts, limit),
        ).fetchall()
        return [(int(r[0]), -float(r[1]), -float(r[2])) for r in rows]

    def ranked_where(
        self, query: ParsedQuery, where: str, params: Sequence[Any], limit: int
    ) -> list[Scored]:
        if query.fts is None:
            return []
        # Materialised first: joined directly, SQLite would run the MATCH once per chunk row.
        rows = self.conn.execute(
            "WITH m AS MATERIALIZED ("
            f" SELECT rowid AS id, {_OWN_BM25} AS own, {_CONTEXT_BM25} AS ctx"
            " FROM chunks_fts WHERE chunks_fts MATCH ?)"
            " SELECT m.id, m.own, m.ctx FROM m JOIN chunks c ON c.id = m.id"
            f" JOIN notes n ON n.id = c.note_id WHERE {where} ORDER BY m.own + m.ctx LIMIT ?",
            [query.fts, *params, limit],
        ).fetchall()
        return [(int(r[0]), -float(r[1]), -float(r[2])) for r in rows]

    def phrased(self, phrases: Sequence[Sequence[str]], limit: int) -> list[int]:
        joined = " AND ".join(fts_phrase(words) for words in phrases)
        rows = self.conn.execute(
            "SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH ? ORDER BY rank LIMIT ?",
            (f"{{text title tags}} : ({joined})", limit),
        ).fetchall()
        return [int(r[0]) for r in rows]

    def scores(self, query: ParsedQuery, ids: Sequence[int]) -> dict[int, tuple[float, float]]:
        if query.fts is None or not ids:
            return {}
        marks = ",".join("?" * len(ids))
        rows = self.conn.execute(
            f"SELECT rowid, {_OWN_BM25}, {_CONTEXT_BM25}"
            f" FROM chunks_fts WHERE chunks_fts MATCH ? AND rowid IN ({marks})",
            [query.fts, *ids],
        ).fetchall()
        return {int(r[0]): (-float(r[1]), -float(r[2])) for r in rows}

    # -- the vocabulary --------------------------------------------------------------

    def _prepare(self) -> None:
        if self._prepared:
            return
        self.conn.execute(
            "CREATE VIRTUAL TABLE IF NOT EXISTS temp.query_words"
            f" USING fts5(text, tokenize = '{self.tokenizer}')"
        )
        self.conn.execute(
            "CREATE VIRTUAL TABLE IF NOT EXISTS temp.query_words_seen"
            " USING fts5vocab('temp', 'query_words', 'instance')"
        )
        self.conn.execute(
            "CREATE VIRTUAL TABLE IF NOT EXISTS temp.chunk_words"
            " USING fts5vocab('main', 'chunks_fts', 'row')"
        )
        self._prepared = True

    def tokens(self, text: str) -> list[str]:
        self._prepare()
        before = int(self.conn.total_changes)
        self.conn.execute("INSERT INTO temp.query_words(rowid, text) VALUES (1, ?)", (text,))
        try:
            rows = self.conn.execute(
                "SELECT term FROM temp.query_words_seen ORDER BY offset"
            ).fetchall()
        finally:
            self.conn.execute("DELETE FROM temp.query_words")
            self._scratch += int(self.conn.total_changes) - before
        return [str(r[0]) for r in rows]

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
        if self._version() != self._df_version or len(self._df) > COUNTS_KEPT:
            self._df.clear()
            self._documents = None

    def _version(self) -> tuple[int, int]:
        """Changes made on this connection (but tokenising), and SQLite's count of other
        connections' commits."""
        changes = int(self.conn.total_changes) - self._scratch
        return changes, int(self.conn.execute("PRAGMA data_version").fetchone()[0])

    def holders(self, words: Sequence[str], among: Collection[int]) -> list[set[int]]:
        return [self._holders(word, among) for word in words]

    def _holders(self, word: str, among: Collection[int]) -> set[int]:
        rows = self.conn.execute(
            "SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH ?",
            (f"{{text title tags}} : {fts_phrase([word])}",),
        )
        return {chunk_id for (chunk_id,) in rows if chunk_id in among}

    def text_frequency(self, word: str) -> int:
        row = self.conn.execute(
            "SELECT count(*) FROM chunks_fts WHERE chunks_fts MATCH ?",
            ("text : " + fts_phrase([word]),),
        ).fetchone()
        return int(row[0])
