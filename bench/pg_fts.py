"""PostgreSQL full-text search and pgvector against SQLite FTS5 and exact cosine, on LoCoMo.

The research behind the PostgreSQL backend's keyword search (issue 17): which of
PostgreSQL's own rankings comes closest to the BM25 that memvault's SQLite index
ranks by, and whether pgvector's HNSW index returns what exact cosine does.

Per conversation (LoCoMo's protocol, as bench/locomo.py: one memory per turn, the
questions of categories 1-4 with evidence), the turns go through memvault's real
ingestion for the SQLite baseline ("fts5_bm25", bench/locomo.py's "bm25": FTS5 over
the turn text, any of the question's words, ranked by bm25()), and into one
PostgreSQL table: ``tsv = to_tsvector('english', text)`` with a GIN index, and the
turn's all-MiniLM-L6-v2 vector in a ``vector(384)`` column with an HNSW index
(cosine). Keyword variants, each the first 200 matches:

- ``and``: ``websearch_to_tsquery('english', question)`` (every word must match);
- ``or``: the question's words (memvault's ``terms_of``: stop words dropped) joined
  by ``or`` through ``websearch_to_tsquery``;
- ranked by ``ts_rank_cd`` (cover density) or ``ts_rank`` with normalisation 1|32
  (divided by 1 + log of the length; the 32 maps to 0..1 and keeps the order);
- ``and>or``: the AND matches first, then the OR matches not already in;
- ``or_bm25sql``: the OR matches ranked by BM25 computed in SQL from the tsvectors
  (FTS5's formula: k1 1.2, b 0.75, idf ln((N - n + 0.5) / (n + 0.5)), document
  frequencies from ``ts_stat``, lengths from the lexemes' positions).

Vectors: for every question the ten nearest turns by pgvector's HNSW index (forced,
``ef_search`` 40, the default) against the exact ten (numpy); agreement is the mean
share of the exact ten the index returns. Evidence recall of both is scored too.

    python bench/pg_fts.py [FILE ...] [--json]
"""

from __future__ import annotations

import contextlib
import json
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from locomo import (
    Scores,
    arguments,
    bm25_ranking,
    chunk_turns,
    ingest,
    load,
    questions_of,
    turns_of,
)
from pgvector.psycopg import register_vector

from memvault.index.embedders import LocalEmbedder
from memvault.index.query import terms_of

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from pg_server import TemporaryPostgres, server_bin

LIMIT = 200
DIMENSIONS = 384

SCHEMA = f"""
DROP TABLE IF EXISTS turns;
CREATE TABLE turns (
    ord integer PRIMARY KEY,
    id text NOT NULL,
    text text NOT NULL,
    tsv tsvector GENERATED ALWAYS AS (to_tsvector('english', text)) STORED,
    len integer,
    embedding vector({DIMENSIONS}) NOT NULL
);
"""
INDEXES = """
UPDATE turns SET len = (SELECT coalesce(sum(cardinality(positions)), 0) FROM unnest(tsv));
CREATE INDEX turns_tsv ON turns USING gin (tsv);
CREATE INDEX turns_hnsw ON turns USING hnsw (embedding vector_cosine_ops);
DROP TABLE IF EXISTS lexemes;
CREATE TABLE lexemes AS SELECT word AS lexeme, ndoc AS df FROM ts_stat('SELECT tsv FROM turns');
CREATE UNIQUE INDEX lexemes_lexeme ON lexemes (lexeme);
ANALYZE turns;
ANALYZE lexemes;
"""

RANKED = (
    "SELECT id FROM turns, websearch_to_tsquery('english', %(q)s) q"
    " WHERE tsv @@ q ORDER BY {rank} DESC, ord LIMIT {limit}"
)
RANKS = {"cd": "ts_rank_cd(tsv, q)", "rank1|32": "ts_rank(tsv, q, 1|32)"}

BM25_SQL = f"""
WITH q AS (SELECT websearch_to_tsquery('english', %(q)s) AS q),
words AS (
    SELECT DISTINCT lexeme FROM unnest(tsvector_to_array(to_tsvector('english', %(words)s)))
    AS lexeme
),
corpus AS (SELECT count(*)::float8 AS n, avg(len)::float8 AS avglen FROM turns),
matched AS (SELECT t.ord, t.id, t.tsv, t.len FROM turns t, q WHERE t.tsv @@ q.q)
SELECT m.id
FROM matched m
CROSS JOIN LATERAL unnest(m.tsv) AS u(lexeme, positions, weights)
JOIN words w ON w.lexeme = u.lexeme
JOIN lexemes s ON s.lexeme = u.lexeme
CROSS JOIN corpus c
GROUP BY m.ord, m.id
ORDER BY sum(
    greatest(ln((c.n - s.df + 0.5) / (s.df + 0.5)), 1e-6)
    * cardinality(u.positions) * 2.2
    / (cardinality(u.positions) + 1.2 * (0.25 + 0.75 * m.len / c.avglen))
) DESC, m.ord
LIMIT {LIMIT}
"""

HNSW = "SELECT id FROM turns ORDER BY embedding <=> %s LIMIT 10"


def or_query(question: str) -> str:
    """The question's words, any of which may match (websearch syntax)."""
    return " or ".join(t for t in terms_of(question) if t != "or")


def run(files: Sequence[Path], *, quiet: bool = False) -> dict[str, Any]:
    bindir = server_bin()
    if bindir is None:
        raise SystemExit("no PostgreSQL: install the dev dependencies (make install)")
    embedder = LocalEmbedder()
    methods: dict[str, Scores] = defaultdict(Scores)
    agreement: list[float] = []
    chosen: list[bool] = []  # did the planner pick the HNSW index on its own?
    timings: dict[str, list[float]] = defaultdict(list)
    counts = {"conversations": 0, "turns": 0, "questions": 0}
    with TemporaryPostgres(bindir) as pg:
        pg.start()
        with psycopg.connect(pg.dsn(), autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            register_vector(conn)
            for sample in load(files):
                turns = turns_of(sample)
                questions = questions_of(sample)
                counts["conversations"] += 1
                counts["turns"] += len(turns)
                counts["questions"] += len(questions)
                with tempfile.TemporaryDirectory() as tmp:
                    _one_conversation(
                        conn, Path(tmp), sample, turns, questions, embedder, methods,
                        agreement, timings, chosen,
                    )  # fmt: skip
                if not quiet:
                    print(
                        f"  {sample.get('sample_id', '?')}: {len(turns)} turns, "
                        f"{len(questions)} questions",
                        file=sys.stderr,
                    )
    result: dict[str, Any] = {name: scores.metrics() for name, scores in methods.items()}
    result["_meta"] = {
        **counts,
        "hnsw_agreement@10": float(np.mean(agreement)),
        "hnsw_exact@10_share": float(np.mean([a == 1.0 for a in agreement])),
        "hnsw_chosen_unforced": chosen,
        "ms_per_query": {k: round(1000 * float(np.mean(v)), 2) for k, v in timings.items()},
        "files": [str(f) for f in files],
    }
    return result


@contextlib.contextmanager
def _timer(timings: dict[str, list[float]], name: str) -> Iterator[None]:
    started = time.perf_counter()
    yield
    timings[name].append(time.perf_counter() - started)


def _one_conversation(
    conn: psycopg.Connection[Any],
    root: Path,
    sample: dict[str, Any],
    turns: list[dict[str, Any]],
    questions: list[dict[str, Any]],
    embedder: LocalEmbedder,
    methods: dict[str, Scores],
    agreement: list[float],
    timings: dict[str, list[float]],
    chosen: list[bool],
) -> None:
    conversation = ingest(root, sample, turns, embedder)
    turn_of_chunk = chunk_turns(conversation, turns)
    texts = [t["text"] for t in turns]
    ids = [t["id"] for t in turns]
    turn_vectors = np.asarray(embedder.embed(texts), dtype=np.float32)
    question_vectors = np.asarray(
        embedder.embed([q["question"] for q in questions]), dtype=np.float32
    )
    conn.execute(SCHEMA.encode())
    with conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO turns (ord, id, text, embedding) VALUES (%s, %s, %s, %s)",
            [(i, ids[i], texts[i], turn_vectors[i]) for i in range(len(turns))],
        )
    conn.execute(INDEXES.encode())

    def rows(sql: str, **params: str) -> list[str]:
        if not params.get("q"):
            return []  # no words left to look for
        return [str(r[0]) for r in conn.execute(sql.encode(), params)]

    for q, qv in zip(questions, question_vectors, strict=True):
        question, words = q["question"], or_query(q["question"])
        ranked: dict[str, list[str]] = {}
        with _timer(timings, "fts5_bm25"):
            ranked["fts5_bm25"] = bm25_ranking(conversation, turn_of_chunk, question)
        for form, text in (("and", question), ("or", words)):
            for rank_name, rank in RANKS.items():
                name = f"pg_{form}_{rank_name}"
                with _timer(timings, name):
                    ranked[name] = rows(RANKED.format(rank=rank, limit=LIMIT), q=text)
        for rank_name in RANKS:
            first = ranked[f"pg_and_{rank_name}"]
            seen = set(first)
            rest = [t for t in ranked[f"pg_or_{rank_name}"] if t not in seen]
            ranked[f"pg_and>or_{rank_name}"] = first + rest
        with _timer(timings, "pg_or_bm25sql"):
            ranked["pg_or_bm25sql"] = rows(BM25_SQL, q=words, words=" ".join(terms_of(question)))

        ranked["cosine_exact"] = [
            ids[i] for i in np.argsort(-(turn_vectors @ qv), kind="stable")[:10]
        ]
        with conn.transaction():
            conn.execute("SET LOCAL enable_seqscan = off")  # a few hundred rows: force it
            with _timer(timings, "pgvector_hnsw"):
                ranked["pgvector_hnsw"] = [str(r[0]) for r in conn.execute(HNSW.encode(), (qv,))]
        overlap = set(ranked["pgvector_hnsw"]) & set(ranked["cosine_exact"])
        agreement.append(len(overlap) / 10)
        for name, found in ranked.items():
            methods[name].add(q["category"], q["evidence"], found)
    plan = conn.execute(b"EXPLAIN " + HNSW.encode(), (question_vectors[0],)).fetchall()
    chosen.append(any("turns_hnsw" in str(r[0]) for r in plan))
    conversation.close()


def render(result: dict[str, Any]) -> str:
    """A Markdown table: recall_any@5/@10 and the gap to FTS5 BM25."""
    base = result["fts5_bm25"]
    lines = [
        "| method | recall_any@5 | recall_any@10 | vs fts5_bm25 @5 | @10 | ms/query |",
        "|---|---|---|---|---|---|",
    ]
    ms = result["_meta"]["ms_per_query"]
    for name, metrics in result.items():
        if name.startswith("_"):
            continue
        d5 = metrics["recall_any@5"] - base["recall_any@5"]
        d10 = metrics["recall_any@10"] - base["recall_any@10"]
        lines.append(
            f"| {name} | {metrics['recall_any@5']:.3f} | {metrics['recall_any@10']:.3f} | "
            f"{d5:+.3f} | {d10:+.3f} | {ms.get(name, '')} |"
        )
    meta = result["_meta"]
    lines += [
        "",
        f"{meta['conversations']} conversations, {meta['turns']} turns, "
        f"{meta['questions']} questions.",
        f"HNSW vs exact cosine: mean recall@10 agreement {meta['hnsw_agreement@10']:.4f}; "
        f"identical top-10 sets for {meta['hnsw_exact@10_share']:.1%} of questions.",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    args, files = arguments(__doc__, argv)
    result = run(files, quiet=args.json)
    print(json.dumps(result, indent=1) if args.json else render(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
