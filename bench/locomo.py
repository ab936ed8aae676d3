"""LoCoMo evidence retrieval through memvault's real ingestion and search.

Protocol (../shared/data/locomo/README.md): each conversation is its own
memory store, one memory per dialogue turn ("<speaker>: <text>", an image's
caption included as "[shares ...]", the session date as its timestamp, the
session as its source); the queries are the questions of categories 1-4 that
have evidence; a hit is a retrieved turn whose dia_id is in the evidence.

Besides memvault's own search, three baselines run on the same turns:
BM25 alone (FTS5 over the turn text), cosine alone (all-MiniLM-L6-v2 on the
turn text), and OpenClaw's hybrid (0.7 * cosine + 0.3 / (1 + BM25 rank)).

    python bench/locomo.py [FILE ...] [--json]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import backends
import numpy as np

from memvault.clock import Clock
from memvault.config import Settings
from memvault.index.embedders import Embedder, LocalEmbedder
from memvault.index.query import parse_query, terms_of
from memvault.runtime import Runtime
from memvault.vault.memories import Remembered

DEFAULT_FILE = Path(__file__).resolve().parents[1].parent / "shared/data/locomo/locomo_dev.json"
KS = (5, 10)
UTC = ZoneInfo("UTC")


def session_date(text: str) -> datetime:
    """LoCoMo's "1:56 pm on 8 May, 2023"."""
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)


def load(files: Sequence[Path]) -> list[dict[str, Any]]:
    """Every conversation of the LoCoMo-format ``files``, in order."""
    return [sample for file in files for sample in json.loads(file.read_text())]


def turns_of(sample: dict[str, Any]) -> list[dict[str, Any]]:
    """Every turn of a conversation, in order, with its session and date."""
    conversation = sample["conversation"]
    keys = sorted(
        (k for k in conversation if re.fullmatch(r"session_\d+", k)),
        key=lambda k: int(k.split("_")[1]),
    )
    turns = []
    for key in keys:
        when = session_date(conversation[f"{key}_date_time"])
        for turn in conversation[key]:
            text = f"{turn['speaker']}: {turn['text']}"
            if turn.get("blip_caption"):
                text += f" [shares {turn['blip_caption']}]"
            turns.append({"id": turn["dia_id"], "text": text, "session": key, "created": when})
    return turns


def questions_of(sample: dict[str, Any]) -> list[dict[str, Any]]:
    """Questions of categories 1-4 with evidence."""
    return [q for q in sample["qa"] if q.get("category") in (1, 2, 3, 4) and q.get("evidence")]


class Scores:
    """recall_any@k, recall_all@k and mean evidence recall@k, overall, per category and
    per conversation."""

    def __init__(self) -> None:
        self.rows: list[tuple[int, set[str], list[str]]] = []
        self.conversations: list[str] = []  # the conversation of each row

    def add(
        self, category: int, evidence: Sequence[str], ranked: Sequence[str], conversation: str = ""
    ) -> None:
        self.rows.append((category, set(evidence), list(ranked)))
        self.conversations.append(conversation)

    def metrics(
        self, rows: list[tuple[int, set[str], list[str]]] | None = None
    ) -> dict[str, float]:
        rows = self.rows if rows is None else rows
        out: dict[str, float] = {}
        for k in KS:
            # A slot may hold several turns ("D1:3|D1:4": a note quoting them) or none ("").
            hits = [
                len(ev & {d for slot in ranked[:k] for d in slot.split("|")})
                for _, ev, ranked in rows
            ]
            sizes = [len(ev) for _, ev, _ in rows]
            n = max(len(rows), 1)
            out[f"recall_any@{k}"] = sum(h > 0 for h in hits) / n
            out[f"recall_all@{k}"] = sum(h == s for h, s in zip(hits, sizes, strict=True)) / n
            out[f"evidence_recall@{k}"] = sum(h / s for h, s in zip(hits, sizes, strict=True)) / n
        return out

    def by_category(self) -> dict[int, float]:
        groups: dict[int, list[tuple[int, set[str], list[str]]]] = defaultdict(list)
        for row in self.rows:
            groups[row[0]].append(row)
        return {c: self.metrics(rows)["recall_any@10"] for c, rows in sorted(groups.items())}

    def by_conversation(self) -> dict[str, dict[str, float]]:
        """The metrics of each conversation's questions alone, with their count ("n")."""
        groups: dict[str, list[tuple[int, set[str], list[str]]]] = defaultdict(list)
        for conversation, row in zip(self.conversations, self.rows, strict=True):
            groups[conversation].append(row)
        return {c: {**self.metrics(rows), "n": len(rows)} for c, rows in groups.items()}


def spread(by_conversation: dict[str, dict[str, float]]) -> dict[str, tuple[float, float]]:
    """Each metric's lowest and highest value across the conversations."""
    metrics = [m for m in next(iter(by_conversation.values()), {}) if m != "n"]
    return {
        m: (
            min(v[m] for v in by_conversation.values()),
            max(v[m] for v in by_conversation.values()),
        )
        for m in metrics
    }


PER_CONVERSATION = ("recall_any@5", "recall_any@10", "recall_all@5", "recall_all@10")


def render_conversations(
    by_conversation: dict[str, dict[str, dict[str, float]]], main: str = "memvault"
) -> str:
    """A table of ``main``'s metrics per conversation (and the others' recall_any@10 beside
    them), then the spread: each column's lowest and highest value."""
    first = next(iter(by_conversation.values()), {})
    others = [m for m in first if m != main]
    head = ["conversation", "n", *PER_CONVERSATION, *(f"{o} any@10" for o in others)]
    lines = ["| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
    for conversation, methods in by_conversation.items():
        cells = [f"{methods[main][m]:.3f}" for m in PER_CONVERSATION]
        cells += [f"{methods[o]['recall_any@10']:.3f}" for o in others]
        lines.append(f"| {conversation} | {int(methods[main]['n'])} | " + " | ".join(cells) + " |")
    columns = [(main, m) for m in PER_CONVERSATION] + [(o, "recall_any@10") for o in others]
    cells = []
    for method, metric in columns:
        values = [methods[method][metric] for methods in by_conversation.values()]
        cells.append(f"{min(values):.3f}..{max(values):.3f}")
    lines.append("| spread (min..max) | | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def run(
    files: Sequence[Path], *, quiet: bool = False, embedder: Embedder | None = None
) -> dict[str, Any]:
    """memvault and the baselines on every conversation of ``files`` (embedding with
    ``embedder``, MiniLM by default)."""
    embedder = LocalEmbedder() if embedder is None else embedder
    methods = {"memvault": Scores(), "bm25": Scores(), "cosine": Scores(), "hybrid_0.7": Scores()}
    counts = {"conversations": 0, "turns": 0, "questions": 0}
    timings: dict[str, float] = defaultdict(float)
    for sample in load(files):
        turns = turns_of(sample)
        questions = questions_of(sample)
        counts["conversations"] += 1
        counts["turns"] += len(turns)
        counts["questions"] += len(questions)
        with tempfile.TemporaryDirectory() as tmp:
            evaluate_conversation(Path(tmp), sample, turns, questions, embedder, methods, timings)
        if not quiet:
            print(
                f"  {sample.get('sample_id', '?')}: {len(turns)} turns, {len(questions)} questions",
                file=sys.stderr,
            )
    result: dict[str, Any] = {name: scores.metrics() for name, scores in methods.items()}
    result["_meta"] = {
        **counts,
        "by_category_recall_any@10": {n: s.by_category() for n, s in methods.items()},
        "by_conversation": by_conversation(methods),
        "seconds": {k: round(v, 2) for k, v in timings.items()},
        "files": [str(f) for f in files],
    }
    return result


def by_conversation(methods: dict[str, Scores]) -> dict[str, dict[str, dict[str, float]]]:
    """``{conversation: {method: metrics}}``, conversations in the order asked."""
    per_method = {name: scores.by_conversation() for name, scores in methods.items()}
    conversations = list(next(iter(per_method.values()), {}))
    return {c: {name: per_method[name][c] for name in methods} for c in conversations}


@dataclass
class Conversation:
    """One conversation ingested into its own memvault, one memory per turn."""

    runtime: Runtime
    remembered: list[Remembered]
    dia_of: dict[str, list[str]]  # memory id -> the dia_ids of the turns it holds

    def search(self, question: str, k: int = 10, *, quoted: bool = False) -> list[str]:
        """The dia_ids of the turns memvault's search returns for ``question``, best first
        (with ``quoted``, see :meth:`rankings`)."""
        plain, credited = self.rankings(question, k)
        return credited if quoted else plain

    def rankings(self, question: str, k: int = 10) -> tuple[list[str], list[str]]:
        """From one search, the turns ranked two ways: a note among the hits takes a slot
        and hands over no turn; or (the second) it counts the turns whose text its snippet
        holds whole (an embedded memory is shown by its text): what it hands over, nothing
        it merely links. A slot holding several turns joins them by "|" (see Scores)."""
        plain: list[str] = []
        credited: list[str] = []
        for h in self.runtime.searcher.search(question, limit=k):
            if h.id:
                plain += self.dia_of[h.id]
                credited += self.dia_of[h.id]
                continue
            quotes = [
                dia
                for r in self.remembered
                if r.memory.text in h.snippet
                for dia in self.dia_of[r.memory.id]
            ]
            plain.append("")
            credited.append("|".join(dict.fromkeys(quotes)))
        return plain, credited

    def close(self) -> None:
        """Close its index and state."""
        self.runtime.close()


def ingest(
    root: Path,
    sample: dict[str, Any],
    turns: list[dict[str, Any]],
    embedder: Embedder,
    timings: dict[str, float] | None = None,
) -> Conversation:
    """A memvault in ``root`` holding ``turns`` through its real ingestion, indexed and embedded."""
    timings = defaultdict(float) if timings is None else timings
    settings = Settings(vault=root / "vault", timezone="UTC", storage=backends.storage())
    runtime = Runtime.open(settings, clock=Clock(UTC), embedder=embedder, create=True)
    started = time.perf_counter()
    remembered = runtime.memories.remember_many(
        [
            (
                t["text"],
                "context",
                None,
                (),
                f"{sample.get('sample_id', 'conv')}/{t['session']}",
                t["created"],
            )
            for t in turns
        ]
    )
    runtime.index.sync()
    timings["ingest"] += time.perf_counter() - started
    started = time.perf_counter()
    runtime.index.embed_pending()
    timings["embed"] += time.perf_counter() - started
    dia_of: dict[str, list[str]] = defaultdict(list)
    for turn, result in zip(turns, remembered, strict=True):
        dia_of[result.memory.id].append(turn["id"])
    return Conversation(runtime, remembered, dia_of)


def evaluate_conversation(
    root: Path,
    sample: dict[str, Any],
    turns: list[dict[str, Any]],
    questions: list[dict[str, Any]],
    embedder: Embedder,
    methods: dict[str, Scores],
    timings: dict[str, float],
) -> None:
    """Ingest one conversation, ask every question of memvault and of the baselines, and
    add each ranking to ``methods`` under the conversation's name."""
    conversation = ingest(root, sample, turns, embedder, timings)
    name = str(sample.get("sample_id", "?"))
    started = time.perf_counter()
    for q in questions:
        methods["memvault"].add(
            q["category"], q["evidence"], conversation.search(q["question"]), name
        )
    timings["search"] += time.perf_counter() - started

    # Baselines on the same turns.
    ids = [t["id"] for t in turns]
    texts = [t["text"] for t in turns]
    turn_vectors = embedder.embed(texts)
    question_vectors = embedder.embed([q["question"] for q in questions])
    turn_of_chunk = chunk_turns(conversation, turns)
    for q, qv in zip(questions, question_vectors, strict=True):
        bm25_ranked = bm25_ranking(conversation, turn_of_chunk, q["question"])
        cos = turn_vectors @ qv
        cos_ranked = [ids[i] for i in np.argsort(-cos)]
        bm25_rank = {turn_id: rank for rank, turn_id in enumerate(bm25_ranked)}
        fused = cos * 0.7 + np.array(
            [0.3 / (1 + bm25_rank[i]) if i in bm25_rank else 0.0 for i in ids]
        )
        methods["bm25"].add(q["category"], q["evidence"], bm25_ranked, name)
        methods["cosine"].add(q["category"], q["evidence"], cos_ranked, name)
        methods["hybrid_0.7"].add(
            q["category"], q["evidence"], [ids[i] for i in np.argsort(-fused)], name
        )
    conversation.close()


def chunk_turns(conversation: Conversation, turns: list[dict[str, Any]]) -> dict[int, str]:
    """The turn each row of the keyword index (a memory's chunk) holds."""
    conn = conversation.runtime.index.conn
    turn_of_chunk: dict[int, str] = {}
    for result, turn in zip(conversation.remembered, turns, strict=True):
        row = conn.execute(
            "SELECT chunk_id FROM memories WHERE id = ?", (result.memory.id,)
        ).fetchone()
        turn_of_chunk.setdefault(int(row[0]), turn["id"])
    return turn_of_chunk


def bm25_ranking(
    conversation: Conversation, turn_of_chunk: dict[int, str], question: str
) -> list[str]:
    """BM25 alone: FTS5 over the turns' text for any of the question's words, best first."""
    terms = terms_of(question)
    if not terms:
        return []
    runtime = conversation.runtime
    if runtime.index.dialect != "sqlite":  # PostgreSQL: the keyword index's own BM25
        parsed = parse_query(" ".join(terms) + ".", runtime.clock.now())  # no word being typed
        scored = runtime.searcher.keywords.ranked(parsed, 200)
        return [turn_of_chunk[i] for i, _, _ in scored if i in turn_of_chunk]
    expr = "text : (" + " OR ".join(f'"{t}"' for t in terms) + ")"
    rows = runtime.index.conn.execute(
        "SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH ? ORDER BY bm25(chunks_fts) LIMIT 200",
        (expr,),
    ).fetchall()
    return [turn_of_chunk[int(r[0])] for r in rows if int(r[0]) in turn_of_chunk]


def render(result: dict[str, Any]) -> str:
    """A Markdown table of the metrics."""
    columns = [f"{m}@{k}" for m in ("recall_any", "recall_all", "evidence_recall") for k in KS]
    lines = ["| method | " + " | ".join(columns) + " |", "|---" * (len(columns) + 1) + "|"]
    for name, metrics in result.items():
        if name.startswith("_"):
            continue
        lines.append(f"| {name} | " + " | ".join(f"{metrics[c]:.3f}" for c in columns) + " |")
    meta = result["_meta"]
    lines.append("")
    lines.append(
        f"{meta['conversations']} conversations, {meta['turns']} turns, "
        f"{meta['questions']} questions; "
        f"seconds: {meta['seconds']}"
    )
    lines.append(
        "recall_any@10 by category (1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop):"
    )
    for name, cats in meta["by_category_recall_any@10"].items():
        lines.append(f"- {name}: " + ", ".join(f"{c}: {v:.3f}" for c, v in cats.items()))
    lines += ["", "Per conversation (memvault; the baselines' recall_any@10 beside it):", ""]
    lines.append(render_conversations(meta["by_conversation"]))
    return "\n".join(lines)


def arguments(
    doc: str | None, argv: Sequence[str] | None, *, limit: bool = False
) -> tuple[argparse.Namespace, list[Path]]:
    """A LoCoMo bench's command line (files, ``--json``, optionally ``--limit``) and the
    files it names (the development split when none), each checked to exist."""
    parser = argparse.ArgumentParser(description=(doc or "").splitlines()[0])
    parser.add_argument("files", nargs="*", type=Path, help="LoCoMo-format JSON files")
    if limit:
        parser.add_argument("--limit", type=int, help="only the first N conversations")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    files = args.files or [DEFAULT_FILE]
    for file in files:
        if not file.is_file():
            parser.error(f"{file} does not exist")
    return args, files


def main(argv: Sequence[str] | None = None) -> int:
    args, files = arguments(__doc__, argv)
    result = run(files, quiet=args.json)
    if args.json:
        out = {k: v for k, v in result.items() if not k.startswith("_")}
        out["by_conversation"] = result["_meta"]["by_conversation"]
        out["spread"] = {
            name: spread({c: m[name] for c, m in out["by_conversation"].items()})
            for name in result
            if not name.startswith("_")
        }
        print(json.dumps(out))
    else:
        print(render(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
