"""``remember`` into one category file as it grows: the cost must not grow with the file.

For each size N, ``Memory/Facts.md`` starts with N memories (indexed and
embedded), then ``remember`` stores new facts into that same file, in
process, with the real index (SQLite, FTS5, sqlite-vec) and a 384-d hashing
embedder; the pending vectors are embedded after each batch as the daemon's
backfill would. Reported per size: p50 / p95 / max of ``remember``, and of a
bullet typed by hand and picked up by the index (what the watcher runs).
Target: remember p95 <= 30 ms at 10,000 (DESIGN.md says <= 20 ms).

    python bench/remember.py [--sizes 10 1000 10000] [--writes 300] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from scale import HashingEmbedder, latency, machine, machine_line

from memvault.clock import Clock
from memvault.config import Settings
from memvault.runtime import Runtime
from memvault.vault.layout import init_vault
from memvault.vault.store import Vault

UTC = ZoneInfo("UTC")
SIZES = (10, 1000, 10000)


def _seed(root: Path, size: int) -> None:
    """A vault whose Facts file holds ``size`` memories, written as a person's file would be."""
    init_vault(Vault(root))
    lines = ["---", "category: fact", "tags: [memory]", "---", "# Facts", ""]
    lines += [
        f"- Seed fact {i} about the orchard and its {i * 7} trees [importance:: 0.5]"
        f" [created:: 2026-01-01 10:00:00] [source:: cli] ^m-{i:08x}"
        for i in range(size)
    ]
    (root / "Memory/Facts.md").write_text("\n".join(lines) + "\n", encoding="utf-8")


def measure(size: int, writes: int) -> dict[str, Any]:
    """Timings of ``writes`` remembers (and hand-typed bullets) into a ``size``-bullet file."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "vault"
        _seed(root, size)
        runtime = Runtime.open(Settings(vault=root), clock=Clock(UTC), embedder=HashingEmbedder())
        runtime.index.sync()
        runtime.index.embed_pending(batch=512)
        remember: list[float] = []
        for n in range(writes):
            started = time.perf_counter()
            runtime.memories.remember(f"New fact {n} about pears and plums", category="fact")
            remember.append(time.perf_counter() - started)
            if n % 50 == 49:
                runtime.index.embed_pending()
        typed: list[float] = []
        facts = root / "Memory/Facts.md"
        for n in range(min(writes, 100)):
            with open(facts, "a", encoding="utf-8") as handle:
                handle.write(f"- Typed by hand, fact {n} about quinces\n")
            started = time.perf_counter()
            runtime.index.sync_paths(["Memory/Facts.md"])
            typed.append(time.perf_counter() - started)
        memories = len(runtime.memories.read_file("Memory/Facts.md"))
        runtime.close()
    return {
        "size": size,
        "memories_after": memories,
        "remember": latency(remember),
        "typed_by_hand": latency(typed),
    }


def run(sizes: Sequence[int] = SIZES, writes: int = 300) -> dict[str, Any]:
    """Every size's figures and the machine they ran on."""
    return {"machine": machine(), "sizes": [measure(size, writes) for size in sizes]}


def render(result: dict[str, Any]) -> str:
    """A Markdown table of the figures."""
    lines = [
        "| memories in the file | remember p50 / p95 / max | a hand-typed bullet indexed"
        " p50 / p95 / max |",
        "|---:|---:|---:|",
    ]
    for row in result["sizes"]:
        r, t = row["remember"], row["typed_by_hand"]
        lines.append(
            f"| {row['size']:,} | {r['p50_ms']} / {r['p95_ms']} / {r['max_ms']} ms"
            f" | {t['p50_ms']} / {t['p95_ms']} / {t['max_ms']} ms |"
        )
    lines += ["", machine_line(result["machine"])]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sizes", nargs="+", type=int, default=list(SIZES))
    parser.add_argument("--writes", type=int, default=300)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    result = run(args.sizes, args.writes)
    print(json.dumps(result) if args.json else render(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
