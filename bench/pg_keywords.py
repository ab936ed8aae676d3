"""PostgreSQL's BM25 (memvault.index.pg_keywords) against FTS5's, at 10k chunks.

The question (issue 17): where should the PostgreSQL index compute FTS5's
BM25, in SQL or in Python from fetched tsvectors, and what does it cost
beside FTS5? Chunks are bench/scale.py's Zipfian words (text 20-80 words,
a context of 3-8, a title of 1-3, 0-2 tags) in SQLite's FTS5 table and in
PostgreSQL's ``chunks_fts``; queries are 2-5 mid-frequency words (as
scale.py's). Each method returns the best 400 matches (search asks for
candidates x 4); each query runs once cold and is then timed.

- ``fts5``: :class:`memvault.index.keywords.Fts5Keywords` (SQLite, in process).
- ``pg_postings``: :class:`memvault.index.pg_keywords.PgKeywords` since issue 31:
  the sum in SQL over the postings (``chunk_words``: a word, a chunk, its counts and
  length), one index scan of the query's words, only the best 400 returned.
- ``pg_python``: what PgKeywords did before (issue 17's choice): the matches'
  vectors cut to the query's lexemes (ts_filter over setweight) fetched as text
  and scored in Python.
- ``pg_sql_subquery``: the same sum in SQL, a correlated subquery per vector;
  ``pg_sql_lateral``: one lateral unnest of both vectors, grouped;
  ``pg_sql_uncut``: the subquery over the whole vectors (no cut).

Agreement: the share of queries whose 400 ids (and scores, to 1e-9) equal FTS5's
(the words are plain, so both tokenisers read them alike).

    python bench/pg_keywords.py [--chunks 10000] [--queries 200]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from scale import _query, _words

from memvault.index.db import EXACT_TABLE, TOKENIZER, sqlite3
from memvault.index.keywords import Fts5Keywords, Scored
from memvault.index.pg_keywords import PgKeywords
from memvault.index.query import ParsedQuery, parse_query
from memvault.sqlite import transaction

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from pg_index_support import index_connection, migrate_index
from pg_server import TemporaryPostgres, server_bin

LIMIT = 400
NOW = datetime(2026, 11, 24, 12, 0)


def rows(n: int, seed: int = 7) -> list[tuple[int, str, str, str, str]]:
    rng = random.Random(seed)
    return [
        (
            i,
            " ".join(_words(rng, rng.randint(20, 80))),
            " ".join(_words(rng, rng.randint(3, 8))),
            " ".join(_words(rng, rng.randint(1, 3))),
            " ".join(_words(rng, rng.randint(0, 2))),
        )
        for i in range(1, n + 1)
    ]


def sqlite_index(data: Sequence[tuple[int, str, str, str, str]]) -> Fts5Keywords:
    conn = sqlite3.connect(":memory:", isolation_level=None)
    conn.execute(
        f"CREATE VIRTUAL TABLE chunks_fts USING fts5(text, context, title, tags,"
        f" tokenize = '{TOKENIZER}')"
    )
    conn.execute(EXACT_TABLE)
    for table in ("chunks_fts", "chunks_exact"):
        conn.executemany(
            f"INSERT INTO {table} (rowid, text, context, title, tags) VALUES (?, ?, ?, ?, ?)", data
        )
    return Fts5Keywords(conn)


def pg_index(dsn: str, data: Sequence[tuple[int, str, str, str, str]]) -> PgKeywords:
    conn = index_connection(migrate_index(dsn))
    with transaction(conn):
        conn.executemany(
            "INSERT INTO chunks_fts (rowid, text, context, title, tags) VALUES (?, ?, ?, ?, ?)",
            data,
        )
    conn.raw.execute("ANALYZE chunks_fts")
    conn.raw.execute("ANALYZE chunk_words")
    conn.raw.execute("ANALYZE chunk_forms")
    return PgKeywords(conn)


# BM25 summed in SQL instead (the variants measured against PgKeywords' Python sum).
# Parameters: avgdl, lexemes, idf, tsquery, limit.
_P = (
    "WITH p AS (SELECT ?::float8 AS avgdl, ?::text[] AS lexemes, ?::float8[] AS idf,"
    " ?::tsquery AS query),"
)
_CUT = (
    " m AS MATERIALIZED (SELECT f.rowid, f.tokens,"
    " ts_filter(setweight(f.own, 'A', p.lexemes), '{a}') AS own,"
    " ts_filter(setweight(f.ctx, 'A', p.lexemes), '{a}') AS ctx"
    " FROM chunks_fts f, p WHERE f.own @@ p.query OR f.ctx @@ p.query)"
)
_TERM = (
    "p.idf[array_position(p.lexemes, u.lexeme)] * cardinality(u.positions) * 2.2"
    " / (cardinality(u.positions) + 1.2 * (0.25 + 0.75 * m.tokens / p.avgdl))"
)
SQL = {
    # a correlated sum per vector
    "pg_sql_subquery": _P
    + _CUT
    + f" SELECT * FROM (SELECT m.rowid, coalesce((SELECT sum({_TERM}) FROM unnest(m.own) u), 0)"
    f" AS own, coalesce((SELECT sum({_TERM}) FROM unnest(m.ctx) u), 0) AS ctx FROM m, p) s"
    " ORDER BY s.own + s.ctx DESC, s.rowid LIMIT ?",
    # one lateral unnest of both vectors, grouped
    "pg_sql_lateral": _P + _CUT + " SELECT * FROM (SELECT m.rowid,"
    f" coalesce(sum({_TERM}) FILTER (WHERE u.col = 0), 0) AS own,"
    f" coalesce(sum({_TERM}) FILTER (WHERE u.col = 1), 0) AS ctx"
    " FROM m, p, LATERAL (SELECT 0 AS col, * FROM unnest(m.own)"
    " UNION ALL SELECT 1, * FROM unnest(m.ctx)) u GROUP BY m.rowid) s"
    " ORDER BY s.own + s.ctx DESC, s.rowid LIMIT ?",
}
SQL["pg_sql_uncut"] = (
    SQL["pg_sql_subquery"]
    .replace("ts_filter(setweight(f.own, 'A', p.lexemes), '{a}')", "f.own")
    .replace("ts_filter(setweight(f.ctx, 'A', p.lexemes), '{a}')", "f.ctx")
)


def in_python(keywords: PgKeywords, query: ParsedQuery, limit: int) -> list[Scored]:
    """The matches' cut vectors fetched and scored here (PgKeywords before issue 31)."""
    prepared = keywords._query(query)
    if prepared is None:
        return []
    found = keywords.conn.execute(
        "WITH p AS (SELECT ?::text[] AS lexemes, ?::tsquery AS query)"
        " SELECT f.rowid, f.tokens, ts_filter(setweight(f.own, 'A', p.lexemes), '{a}')::text,"
        " ts_filter(setweight(f.ctx, 'A', p.lexemes), '{a}')::text"
        " FROM chunks_fts f, p WHERE f.own @@ p.query OR f.ctx @@ p.query",
        [list(prepared.weights), prepared.tsquery],
    ).fetchall()
    scored = [(int(r[0]), *prepared.score(int(r[1]), str(r[2]), str(r[3]))) for r in found]
    scored.sort(key=lambda s: (-(s[1] + s[2]), s[0]))
    return scored[:limit]


def in_sql(keywords: PgKeywords, sql: str, query: ParsedQuery, limit: int) -> list[Scored]:
    """The matches scored by ``sql``."""
    prepared = keywords._query(query)
    if prepared is None:
        return []
    lexemes = list(prepared.weights)
    idf = [prepared.weights[lex] for lex in lexemes]
    found = keywords.conn.execute(
        sql, [prepared.avgdl, lexemes, idf, prepared.tsquery, limit]
    ).fetchall()
    return [(int(r[0]), float(r[1]), float(r[2])) for r in found]


def timed(run: Callable[[ParsedQuery], list[Scored]], queries: Sequence[ParsedQuery]) -> Any:
    answers, times = [], []
    for query in queries:
        run(query)  # the word counts and pages cached, as in a running daemon
        started = time.perf_counter()
        answers.append(run(query))
        times.append(time.perf_counter() - started)
    times.sort()
    return answers, {
        "p50_ms": round(1000 * statistics.median(times), 2),
        "p95_ms": round(1000 * times[int(len(times) * 0.95) - 1], 2),
    }


def same(a: list[Scored], b: list[Scored]) -> bool:
    if {i for i, _, _ in a} != {i for i, _, _ in b}:
        return False
    by_id = {i: (o, c) for i, o, c in b}
    return all(
        abs(o - by_id[i][0]) <= 1e-9 * max(1.0, o) and abs(c - by_id[i][1]) <= 1e-9 * max(1.0, c)
        for i, o, c in a
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=200)
    args = parser.parse_args(argv)
    bindir = server_bin()
    if bindir is None:
        raise SystemExit("no PostgreSQL: install the dev dependencies (make install)")
    data = rows(args.chunks)
    rng = random.Random(11)
    queries = [parse_query(_query(rng), NOW) for _ in range(args.queries)]
    lite = sqlite_index(data)
    with TemporaryPostgres(bindir) as server:
        server.start()
        pg = pg_index(server.create_database("bench"), data)
        matches = [len(in_python(pg, q, 10**9)) for q in queries]
        results = {
            "fts5": timed(lambda q: lite.ranked(q, LIMIT), queries),
            "pg_postings (PgKeywords)": timed(lambda q: pg.ranked(q, LIMIT), queries),
            "pg_python (before)": timed(lambda q: in_python(pg, q, LIMIT), queries),
        }
        for name, sql in SQL.items():
            results[name] = timed(lambda q, sql=sql: in_sql(pg, sql, q, LIMIT), queries)
    base = results["fts5"][0]
    print(f"{args.chunks:,} chunks, {len(queries)} queries, the best {LIMIT} of each;")
    print(f"matches per query: median {int(statistics.median(matches)):,}, max {max(matches):,}")
    print()
    print("| method | p50 ms | p95 ms | same ids and scores as fts5 |")
    print("|---|---|---|---|")
    for name, (answers, timing) in results.items():
        agree = sum(same(a, b) for a, b in zip(answers, base, strict=True)) / len(queries)
        print(f"| {name} | {timing['p50_ms']} | {timing['p95_ms']} | {agree:.1%} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
