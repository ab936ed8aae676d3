"""Does self-improving memory hurt recall? LoCoMo evidence retrieval with the graph off and on.

Per conversation, one memvault holds one memory per dialog turn (as in
``locomo.py``); every question is asked at each stage:

- ``off``: search with graph expansion off, nothing distilled;
- ``contacts``: the two speakers have contact notes and the knowledge_graph
  job has run (no model: each entity's mentions), expansion still off;
- ``graph``: the same vault, expansion on;
- ``insights+graph``: the distill job has run as well (no model: digests in
  ``Insights/`` linking their sources).

Only memories count as retrieved evidence (an insight note in the top ten
takes a slot and counts nothing), so distillation cannot look better than
it is; the ``quoted`` row also credits an insight with the turns its snippet
holds whole (an embedded memory is shown by its text), which is what it
hands an agent. A digest (no model) has no words of its own: search shows
its sources in its place, so it seldom takes a slot at all. Reports
recall_any@5/@10 overall and for multi-hop questions (category 1). The
graph without a model is built from names only; a graph a model extracted
(``[jobs.knowledge_graph]`` with a model) is measured by running the same
bench with ``MEMVAULT_QA_BASE_URL`` etc. set, see ``locomo_qa.py``.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from locomo import (
    Conversation,
    Scores,
    arguments,
    ingest,
    load,
    questions_of,
    turns_of,
)

from memvault.index.embedders import LocalEmbedder
from memvault.jobs.catalog import make_engine

STAGES = ("off", "contacts", "graph", "insights", "insights+graph", "insights+graph, quoted")


def _ask(
    conversation: Conversation,
    questions: list[dict[str, Any]],
    scores: Scores,
    quoted: Scores | None = None,
) -> None:
    for q in questions:
        plain, credited = conversation.rankings(q["question"])
        scores.add(q["category"], q["evidence"], plain)
        if quoted is not None:
            quoted.add(q["category"], q["evidence"], credited)


def _run_job(conversation: Conversation, name: str) -> str:
    done = make_engine(conversation.runtime).run_now(name)
    if done.status != "ok":
        raise RuntimeError(f"the {name} job ended {done.status}: {done.error}")
    return done.output or ""


def run(files: Sequence[Path], *, limit: int | None = None, quiet: bool = False) -> dict[str, Any]:
    """The three stages' metrics, overall and for category 1."""
    embedder = LocalEmbedder()
    scores = {stage: Scores() for stage in STAGES}
    outputs: list[dict[str, str]] = []
    seconds = {"graph_job": 0.0, "distill_job": 0.0}
    for sample in load(files)[:limit]:
        turns = turns_of(sample)
        questions = questions_of(sample)
        with tempfile.TemporaryDirectory() as tmp:
            conversation = ingest(Path(tmp), sample, turns, embedder)
            runtime = conversation.runtime
            try:
                runtime.searcher.settings.graph_expansion = False
                _ask(conversation, questions, scores["off"])
                speakers = {sample["conversation"][k] for k in ("speaker_a", "speaker_b")}
                for name in sorted(speakers):
                    runtime.contacts.create(name)
                started = time.perf_counter()
                graph_out = _run_job(conversation, "knowledge_graph")
                seconds["graph_job"] += time.perf_counter() - started
                runtime.index.sync()
                runtime.index.embed_pending()
                _ask(conversation, questions, scores["contacts"])
                runtime.searcher.settings.graph_expansion = True
                _ask(conversation, questions, scores["graph"])
                started = time.perf_counter()
                distill_out = _run_job(conversation, "distill")
                seconds["distill_job"] += time.perf_counter() - started
                runtime.index.sync()
                runtime.index.embed_pending()
                runtime.searcher.settings.graph_expansion = False
                _ask(conversation, questions, scores["insights"])
                runtime.searcher.settings.graph_expansion = True
                _ask(
                    conversation,
                    questions,
                    scores["insights+graph"],
                    scores["insights+graph, quoted"],
                )
                outputs.append({"graph": graph_out, "distill": distill_out})
            finally:
                conversation.close()
        if not quiet:
            print(f"  {sample.get('sample_id', '?')}: {len(questions)} questions", file=sys.stderr)
    result: dict[str, Any] = {}
    for stage, s in scores.items():
        overall = s.metrics()
        multi_hop = s.metrics([r for r in s.rows if r[0] == 1])
        result[stage] = {
            "recall_any@5": overall["recall_any@5"],
            "recall_any@10": overall["recall_any@10"],
            "multi_hop_recall_any@5": multi_hop["recall_any@5"],
            "multi_hop_recall_any@10": multi_hop["recall_any@10"],
            "questions": len(s.rows),
            "multi_hop_questions": sum(1 for r in s.rows if r[0] == 1),
        }
    result["_meta"] = {
        "jobs": outputs,
        "seconds": {k: round(v, 1) for k, v in seconds.items()},
    }
    return result


def render(result: dict[str, Any]) -> str:
    """A Markdown table of the stages."""
    lines = [
        "| stage | recall_any@5 | recall_any@10 | multi-hop @5 | multi-hop @10 |",
        "|---|---|---|---|---|",
    ]
    for stage in STAGES:
        r = result[stage]
        lines.append(
            f"| {stage} | {r['recall_any@5']:.3f} | {r['recall_any@10']:.3f} |"
            f" {r['multi_hop_recall_any@5']:.3f} | {r['multi_hop_recall_any@10']:.3f} |"
        )
    off = result["off"]
    lines.append("")
    lines.append(
        f"{off['questions']} questions ({off['multi_hop_questions']} multi-hop);"
        f" job seconds: {result['_meta']['seconds']}"
    )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    args, files = arguments(__doc__, argv, limit=True)
    result = run(files, limit=args.limit)
    print(json.dumps(result, indent=2) if args.json else render(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
