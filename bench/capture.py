"""LoCoMo through "every chat becomes memory": each conversation told to memvault as a chat.

Each LoCoMo conversation is one chat: every turn is logged in one session, as a
channel's message would be (``Sessions.log``, at the session's date, the first
speaker as the owner, the second as a contact), and the capture keeps it as a
conversation turn (``privacy/capture.py``): ``<speaker>: <text>``, the chat's key
as its source, so the turns of one sitting are neighbours. Questions of categories
1-4 with evidence are asked of memvault's default search; a hit is a turn whose
dia_id is in the evidence (the protocol of bench/locomo.py, whose per-turn
``remember`` form, one source per LoCoMo session, is the reference).

Metric: evidence recall_any@k and recall_all@k (k = 5, 10) over the questions,
per conversation and over all; the unit is one turn.

    python bench/capture.py [FILE ...] [--json]
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import backends
import locomo

from memvault.clock import Clock
from memvault.config import Settings
from memvault.index.embedders import LocalEmbedder
from memvault.runtime import Runtime

CHAT = "telegram:4242"


def _told(
    root: Path, sample: dict[str, Any], embedder: LocalEmbedder
) -> tuple[Runtime, dict[str, str]]:
    """A memvault told the conversation as a chat; memory id -> dia_id."""
    settings = Settings(vault=root / "vault", timezone="UTC", storage=backends.storage())
    runtime = Runtime.open(settings, clock=Clock(locomo.UTC), embedder=embedder, create=True)
    turns = locomo.turns_of(sample)
    first = turns[0]["text"].split(": ", 1)[0] if turns else ""
    dia_of: dict[str, str] = {}
    for turn in turns:
        speaker, text = turn["text"].split(": ", 1)
        owner = speaker == first
        runtime.sessions.log(
            CHAT,
            text,
            channel="telegram",
            sender=speaker,
            sent_at=turn["created"],
            metadata={"owner": owner, "audience": None if owner else "contact:telegram:7"},
        )
        said = runtime.memories.list(category="conversation")
        for memory in said[len(dia_of) :]:
            dia_of[memory.id] = turn["id"]
    runtime.index.sync()
    runtime.index.embed_pending()
    return runtime, dia_of


def run(files: Sequence[Path], *, quiet: bool = False) -> dict[str, Any]:
    """Recall of the captured form, per conversation and over all."""
    embedder = LocalEmbedder()
    overall = locomo.Scores()
    per: dict[str, dict[str, float]] = {}
    started = time.perf_counter()
    for sample in locomo.load(files):
        scores = locomo.Scores()
        with tempfile.TemporaryDirectory() as tmp:
            runtime, dia_of = _told(Path(tmp), sample, embedder)
            try:
                for q in locomo.questions_of(sample):
                    hits = runtime.searcher.search(q["question"], limit=10)
                    ranked = [dia_of.get(h.id or "", "") for h in hits]
                    scores.add(q["category"], q["evidence"], ranked)
                    overall.add(q["category"], q["evidence"], ranked)
            finally:
                runtime.close()
        name = str(sample.get("sample_id", "?"))
        per[name] = scores.metrics()
        if not quiet:
            print(f"  {name}: {per[name]['recall_any@10']:.3f}", file=sys.stderr)
    return {
        "captured": overall.metrics(),
        "_per_conversation": per,
        "_seconds": round(time.perf_counter() - started, 1),
    }


def render(result: dict[str, Any], reference: dict[str, Any] | None = None) -> str:
    """A Markdown table: the captured form, the per-turn form, and each conversation."""
    columns = [f"{m}@{k}" for m in ("recall_any", "recall_all") for k in locomo.KS]
    lines = ["| form | " + " | ".join(columns) + " |", "|---" * (len(columns) + 1) + "|"]
    rows = [("captured chat (sessions.log)", result["captured"])]
    if reference is not None:
        rows.append(("per-turn remember (bench/locomo.py)", reference["memvault"]))
    rows += [(f"captured, {name}", m) for name, m in result["_per_conversation"].items()]
    for name, metrics in rows:
        lines.append(f"| {name} | " + " | ".join(f"{metrics[c]:.3f}" for c in columns) + " |")
    lines.append("")
    lines.append(f"{result['_seconds']} s")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    args, files = locomo.arguments(__doc__, argv)
    result = run(files, quiet=args.json)
    if args.json:
        print(json.dumps(result))
    else:
        print(render(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
