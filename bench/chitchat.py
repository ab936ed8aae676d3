"""A second conversational memory benchmark: a question asked in a real chat, its answer
to be found among weeks of the same two people's chats.

Data: the ``chitchat-dataset`` package (PyPI, MIT licence): the BYU Perception, Control
and Cognition lab's Chit-Chat Challenge (2018), 7,168 conversations typed by volunteers
(1,315 participants) with timestamps. The file ships inside the package and is read
from there; nothing is downloaded. It is a bench-only dependency.

Protocol (fixed before any memvault run; no step looks at a ranking):

- **Conversations.** Each pair of participants who chatted in at least
  ``MIN_SESSIONS`` sessions and ``MIN_TURNS``..``MAX_TURNS`` turns in all is one
  memory store (11 pairs, 15 to 42 sessions over 4 days to 3 weeks each). A session is one
  chat, dated by its start; a turn is a run of messages by one sender (the data
  set's own grouping), stored as ``"<A|B>: <messages joined by spaces>"``, one memory
  per turn, as bench/locomo.py stores LoCoMo.
- **Questions.** A turn whose last message ends with "?" and holds at least 3 content
  words (3+ letters, not a stopword), answered in the next turn: by the other person,
  at least 5 words, not itself ending with "?". The question is that last message, as
  typed; one whose text occurs twice in the pair's history is left out. The answer
  turn is the evidence. The question's own turn is left out of the store (else it
  would find itself, and its answer as the line after it).
- **Metric.** Unit: a turn. recall@k for k = 5 and 10: the answer turn among the
  first k turns returned. With one evidence turn per question, recall_any@k,
  recall_all@k and evidence recall@k are the same number. Also MRR@10.

The labels come from who answered whom in the chat, so they favour no retriever. They
are noisy in the same way for every retriever: many questions lean on their context
("Did you like it?"), and a person may answer the same thing in two sessions (only
the answer to this asking counts). Figures are lower than LoCoMo's; the baselines on
the same turns (BM25 alone, MiniLM cosine alone, OpenClaw's 0.7 * cosine + 0.3 /
(1 + BM25 rank)) say how hard it is.

    python bench/chitchat.py [--quick] [--cache] [--json]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import locomo

from memvault.index.embedders import Embedder, LocalEmbedder
from memvault.index.query import STOPWORDS

MIN_SESSIONS = 15
MIN_TURNS = 700
MAX_TURNS = 1400
MIN_QUESTIONS = 30
QUICK_PAIRS = 3  # --quick: the pairs with the fewest turns
KS = (5, 10)


def dataset_path() -> Path:
    """The data set's file inside the installed package (a clear error when absent)."""
    try:
        import chitchat_dataset  # type: ignore[import-not-found]
    except ImportError:
        raise SystemExit(
            "bench/chitchat.py needs the chitchat-dataset package: "
            "pip install chitchat-dataset (bench only)"
        ) from None
    return Path(chitchat_dataset.__file__).parent / "dataset.json"


def available() -> bool:
    """Whether the data set's package is installed."""
    try:
        dataset_path()
    except SystemExit:
        return False
    return True


def _content_words(text: str) -> list[str]:
    return [w for w in re.findall(r"[a-z']+", text.lower()) if len(w) >= 3 and w not in STOPWORDS]


def _normal(text: str) -> str:
    return " ".join(re.findall(r"\w+", text.lower()))


def _when(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp.rstrip("Z")).replace(tzinfo=locomo.UTC)


def samples(data: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Each chosen pair as a sample: ``sample_id``, its ``turns`` in the form of
    :func:`locomo.turns_of` (question turns left out) and its ``questions`` in the form
    of :func:`locomo.questions_of`; the pairs with the fewest turns first."""
    if data is None:
        data = json.loads(dataset_path().read_text())
    by_pair: dict[tuple[str, ...], list[dict[str, Any]]] = defaultdict(list)
    for chat in data.values():
        senders = tuple(sorted({m["sender"] for turn in chat["messages"] for m in turn}))
        if len(senders) == 2 and chat["messages"]:
            by_pair[senders].append(chat)
    chosen = []
    for pair, chats in by_pair.items():
        turns = sum(len(c["messages"]) for c in chats)
        if len(chats) >= MIN_SESSIONS and MIN_TURNS <= turns <= MAX_TURNS:
            sample = _sample(pair, sorted(chats, key=lambda c: c["start"]))
            if len(sample["questions"]) >= MIN_QUESTIONS:
                chosen.append(sample)
    return sorted(chosen, key=lambda s: (s["size"], s["sample_id"]))


def _sample(pair: tuple[str, ...], chats: list[dict[str, Any]]) -> dict[str, Any]:
    letter = {pair[0]: "A", pair[1]: "B"}
    turns: list[dict[str, Any]] = []
    asked: list[tuple[int, str, str]] = []  # (turn index, question, answer turn id)
    for number, chat in enumerate(chats, start=1):
        session, created = f"session_{number}", _when(chat["start"])
        messages = chat["messages"]
        for i, turn in enumerate(messages):
            text = " ".join(m["text"].strip() for m in turn)
            turn_id = f"D{number}:{i + 1}"
            turns.append(
                {
                    "id": turn_id,
                    "text": f"{letter[turn[0]['sender']]}: {text}",
                    "session": session,
                    "created": created,
                }
            )
            if i + 1 < len(messages):
                question, answer = turn[-1]["text"].strip(), messages[i + 1]
                reply = " ".join(m["text"].strip() for m in answer)
                if (
                    question.endswith("?")
                    and len(_content_words(question)) >= 3
                    and answer[0]["sender"] != turn[0]["sender"]
                    and len(reply.split()) >= 5
                    and not reply.endswith("?")
                ):
                    asked.append((len(turns) - 1, question, f"D{number}:{i + 2}"))
    said = Counter(_normal(m["text"]) for chat in chats for turn in chat["messages"] for m in turn)
    kept = [(i, q, a) for i, q, a in asked if said[_normal(q)] == 1]
    left_out = {i for i, _, _ in kept}
    return {
        "sample_id": f"{pair[0][:4]}-{pair[1][:4]}",
        "sessions": len(chats),
        "size": len(turns),
        "turns": [t for i, t in enumerate(turns) if i not in left_out],
        "questions": [{"question": q, "evidence": [a], "category": 0} for _, q, a in kept],
    }


def mrr(scores: locomo.Scores, k: int = 10) -> float:
    """Mean reciprocal rank of the first evidence turn within the first ``k``."""
    total = 0.0
    for _, evidence, ranked in scores.rows:
        for rank, slot in enumerate(ranked[:k], start=1):
            if evidence & set(slot.split("|")):
                total += 1 / rank
                break
    return total / max(len(scores.rows), 1)


def run(
    *, quick: bool = False, quiet: bool = False, embedder: Embedder | None = None
) -> dict[str, Any]:
    """memvault and the baselines on every chosen pair (the smallest few with ``quick``)."""
    embedder = LocalEmbedder() if embedder is None else embedder
    chosen = samples()
    if quick:
        chosen = chosen[:QUICK_PAIRS]
    methods = {name: locomo.Scores() for name in ("memvault", "bm25", "cosine", "hybrid_0.7")}
    timings: dict[str, float] = defaultdict(float)
    started = time.perf_counter()
    for sample in chosen:
        with tempfile.TemporaryDirectory(prefix="chitchat-") as tmp:
            locomo.evaluate_conversation(
                Path(tmp), sample, sample["turns"], sample["questions"], embedder, methods, timings
            )
        if not quiet:
            print(
                f"  {sample['sample_id']}: {sample['sessions']} sessions, "
                f"{len(sample['turns'])} turns, {len(sample['questions'])} questions",
                file=sys.stderr,
            )
    result: dict[str, Any] = {
        name: {
            **{f"recall@{k}": m[f"recall_any@{k}"] for k in KS for m in [s.metrics()]},
            "mrr@10": mrr(s),
        }
        for name, s in methods.items()
    }
    per_pair = locomo.by_conversation(methods)
    result["_meta"] = {
        "pairs": len(chosen),
        "sessions": sum(s["sessions"] for s in chosen),
        "turns": sum(len(s["turns"]) for s in chosen),
        "questions": sum(len(s["questions"]) for s in chosen),
        "by_conversation": per_pair,
        "seconds": {**{k: round(v, 2) for k, v in timings.items()}},
        "total_seconds": round(time.perf_counter() - started, 1),
    }
    return result


def render(result: dict[str, Any]) -> str:
    """The overall table, then recall@5 / recall@10 per pair and their spread."""
    columns = [*(f"recall@{k}" for k in KS), "mrr@10"]
    lines = ["| method | " + " | ".join(columns) + " |", "|---" * (len(columns) + 1) + "|"]
    for name, metrics in result.items():
        if not name.startswith("_"):
            lines.append(f"| {name} | " + " | ".join(f"{metrics[c]:.3f}" for c in columns) + " |")
    meta = result["_meta"]
    lines += [
        "",
        f"{meta['pairs']} pairs, {meta['sessions']} sessions, {meta['turns']} turns, "
        f"{meta['questions']} questions; seconds: {meta['seconds']}",
        "",
        "Per pair (one evidence turn per question: any = all; the baselines' recall@10 beside):",
        "",
    ]
    per = meta["by_conversation"]
    others = [m for m in next(iter(per.values()), {}) if m != "memvault"]
    head = ["pair", "n", "recall@5", "recall@10", *(f"{o} @10" for o in others)]
    lines += ["| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
    for pair, methods in per.items():
        cells = [methods["memvault"]["recall_any@5"], methods["memvault"]["recall_any@10"]]
        cells += [methods[o]["recall_any@10"] for o in others]
        n = int(methods["memvault"]["n"])
        lines.append(f"| {pair} | {n} | " + " | ".join(f"{c:.3f}" for c in cells) + " |")
    spread = [("memvault", "recall_any@5"), ("memvault", "recall_any@10")]
    spread += [(o, "recall_any@10") for o in others]
    cells_text = []
    for method, metric in spread:
        values = [methods[method][metric] for methods in per.values()]
        cells_text.append(f"{min(values):.3f}..{max(values):.3f}")
    lines.append("| spread (min..max) | | " + " | ".join(cells_text) + " |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help=f"the {QUICK_PAIRS} smallest pairs")
    parser.add_argument(
        "--cache",
        action="store_true",
        help="keep MiniLM's vectors on disk between runs (bench/knownitem.py's cache)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    embedder: Embedder | None = None
    if args.cache:
        import knownitem

        embedder = knownitem.CachedEmbedder(LocalEmbedder(), knownitem.DEFAULT_CACHE)
    result = run(quick=args.quick, quiet=args.json, embedder=embedder)
    if args.json:
        out = {k: v for k, v in result.items() if not k.startswith("_")}
        out["by_conversation"] = result["_meta"]["by_conversation"]
        print(json.dumps(out))
    else:
        print(render(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
