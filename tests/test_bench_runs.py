"""The benchmarks stay runnable: the cheap ones run at a tiny size, as `make bench` would run them.

Figures are not checked here (speed is measured in bench/, not asserted in tests); only that
each script runs to the end over the current code and reports what it measured.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from waiting import WAIT

pytestmark = pytest.mark.slow  # whole benchmark processes, the real OpenClaw among them

BENCH = Path(__file__).resolve().parent.parent / "bench"


@pytest.mark.parametrize(
    ("script", "args", "key"),
    [
        ("remember.py", ["--sizes", "10", "--writes", "5"], "sizes"),
        ("console.py", ["--memories", "200", "--requests", "3"], "pages"),
        ("scale.py", ["--sizes", "200", "--queries", "5", "--no-model"], "sizes"),
        ("channels.py", ["--size", "100", "--runs", "2"], "one_call_reply"),
        ("multilingual_keywords.py", ["--embedder", "none"], "results"),
        # Both storage backends (a PostgreSQL started for the run).
        ("pg_compare.py", ["--speed-only", "--sizes", "200"], "postgres"),
    ],
)
def test_a_benchmark_runs_on_a_small_vault(script: str, args: list[str], key: str) -> None:
    result = run_benchmark(script, args)
    if key == "sizes":
        assert result[key] and all(entry["size"] for entry in result[key])
    elif key == "pages":
        assert {"today", "memory", "approvals"} <= set(result[key])
        assert all(page["p95_ms"] > 0 for page in result[key].values())
    elif key == "results":
        languages = result[key]["sqlite"]["none"]["languages"]
        assert len(languages) == 8 and all(m["n"] == 40 for m in languages.values())
    elif key == "postgres":
        for backend in ("sqlite", "postgres"):
            [figures] = result[backend]["scale"]
            assert figures["chunks"] > 0 and figures["search"]["hybrid"]["p50_ms"] > 0
    else:
        assert result[key]["p50_ms"] > 0


def run_benchmark(script: str, args: list[str]) -> Any:
    """Run ``bench/SCRIPT ARGS --json`` to the end; what it reported."""
    done = subprocess.run(
        [sys.executable, script, *args, "--json"],
        cwd=BENCH,
        capture_output=True,
        text=True,
        timeout=5 * WAIT,  # a hang guard: the longest run takes about a minute on a loaded machine
        check=False,
    )
    assert done.returncode == 0, f"{script}: {done.stderr[-2000:]}"
    return json.loads(done.stdout)
