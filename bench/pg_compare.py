"""SQLite against PostgreSQL + pgvector: the same benchmarks on both storage backends.

    python bench/pg_compare.py [--quick] [--sizes 10000 100000] [--json]

Quality: LoCoMo evidence retrieval (the development split) and known-item search on
real notes, each run once per backend with the same embedder, queries and vaults; the
bar is PostgreSQL within 0.02 of SQLite on every figure. Speed: the scale benchmark's
vaults (half notes, half memories) at each size, built, synced and searched on each
backend in turn (p50 / p95 of 200 queries). PostgreSQL runs on this machine (the
tests' own, built by ``make install``), on loopback, with fsync off as in the tests: a
server elsewhere adds its network's round trips.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

import backends
import knownitem
import locomo
import scale

BAR = 0.02


def run(
    *, quick: bool, sizes: Sequence[int], quality: bool = True, quiet: bool = False
) -> dict[str, Any]:
    """Every figure on both backends: ``{"sqlite": {...}, "postgres": {...}}``."""
    out: dict[str, Any] = {"machine": scale.machine(), "sizes": list(sizes)}
    for name in backends.BACKENDS:
        with backends.backend(name):
            recall: dict[str, Any] = {"memvault": {}}
            pooled: dict[str, Any] = {}
            if quality:
                if not quiet:
                    print(f"[{name}] LoCoMo...", file=sys.stderr)
                recall = locomo.run([locomo.DEFAULT_FILE], quiet=True)
                if not quiet:
                    print(f"[{name}] known-item...", file=sys.stderr)
                known = knownitem.run(quick=quick, quiet=True)
                pooled = knownitem.summarize(
                    [row for m in known["corpora"].values() for row in m["rows"]],
                    knownitem.MODES,
                )
            timing = []
            for size in sizes:
                if not quiet:
                    print(f"[{name}] scale at {size:,}...", file=sys.stderr)
                timing.append(scale.measure(size, 200))
            out[name] = {
                "locomo": {k: v for k, v in recall["memvault"].items()},
                "knownitem": pooled,
                "scale": timing,
            }
    return out


def _quality_rows(result: dict[str, Any]) -> list[tuple[str, float, float]]:
    rows = []
    for metric in ("recall_any@5", "recall_any@10"):
        rows.append(
            (
                f"LoCoMo {metric}",
                result["sqlite"]["locomo"][metric],
                result["postgres"]["locomo"][metric],
            )
        )
    for kind, by_mode in result["sqlite"]["knownitem"].items():
        if kind == "absent":
            continue
        for mode in ("hybrid", "keyword"):
            for figure in ("top1", "mrr"):
                if mode not in by_mode or figure not in by_mode[mode]:
                    continue
                rows.append(
                    (
                        f"known-item {kind} {mode} {figure}",
                        by_mode[mode][figure],
                        result["postgres"]["knownitem"][kind][mode][figure],
                    )
                )
    return rows


def render(result: dict[str, Any]) -> str:
    """Quality side by side (with the bar), then speed side by side."""
    lines = [f"Machine: {result['machine']}. PostgreSQL: local server on loopback.", ""]
    if result["sqlite"]["locomo"]:  # quality was measured (not --speed-only)
        lines += ["| figure | SQLite | PostgreSQL | difference |", "|---|---:|---:|---:|"]
        worst = 0.0  # the most PostgreSQL falls short of SQLite
        for name, lite, pg in _quality_rows(result):
            worst = max(worst, lite - pg)
            lines.append(f"| {name} | {lite:.3f} | {pg:.3f} | {pg - lite:+.3f} |")
        verdict = "within" if worst <= BAR else "NOT within"
        lines += [
            "",
            f"PostgreSQL is {verdict} {BAR} of SQLite on every figure (worst {-worst:+.3f}).",
            "",
        ]
    lines += [
        "| chunks | backend | hybrid p50 / p95 | keyword p50 / p95 | memories only p50 / p95 |"
        " hybrid after a note edit p50 / p95 | rebuild notes/s | remember p50 |",
        "|---:|---|---|---|---|---|---:|---:|",
    ]
    for i, _ in enumerate(result["sizes"]):
        for name in backends.BACKENDS:
            figures = result[name]["scale"][i]
            search = figures["search"]
            lines.append(
                f"| {figures['chunks']:,} | {name} | {scale.shown(search['hybrid'])} | "
                f"{scale.shown(search['keyword'])} | {scale.shown(search['memories_only'])} | "
                f"{scale.shown(figures['search_after_edit'])} | "
                f"{figures['ingest_notes_per_s']} | {figures['remember']['p50_ms']} ms |"
            )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer known-item queries")
    parser.add_argument("--sizes", nargs="+", type=int, default=[10000, 100000])
    parser.add_argument("--speed-only", action="store_true", help="no LoCoMo or known-item")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    result = run(quick=args.quick, sizes=args.sizes, quality=not args.speed_only, quiet=args.json)
    if args.json:
        print(json.dumps({k: v for k, v in result.items()}, default=str))
    else:
        print(render(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
