"""bench/graph.py end to end on a tiny LoCoMo-format conversation: every stage runs its
jobs on a real vault and reports the metrics (a smoke test of the bench, not its figures)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from test_bench_qa import BENCH, locomo_file
from waiting import WAIT


def test_the_graph_bench_runs_every_stage(tmp_path: Path) -> None:
    sample = locomo_file(tmp_path)
    done = subprocess.run(
        [sys.executable, "graph.py", str(sample)],
        cwd=BENCH,
        capture_output=True,
        text=True,
        timeout=2.5 * WAIT,  # a hang guard: a few seconds on a quiet machine
    )
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [line for line in done.stdout.splitlines() if line.startswith("| ")][1:]
    assert [row.split("|")[1].strip() for row in rows] == [
        "off",
        "contacts",
        "graph",
        "insights",
        "insights+graph",
        "insights+graph, quoted",
    ]
    for row in rows:
        figures = [float(cell) for cell in row.split("|")[2:6]]
        assert all(0.0 <= f <= 1.0 for f in figures)
    assert "3 questions (0 multi-hop)" in done.stdout
