"""The OpenClaw benchmark stays runnable: the real gateway searching through memvault.

A module of its own (a cold gateway start of 10-50 s, the longest benchmark run), so the
suite's workers run it beside ``test_bench_runs.py`` instead of after it.
"""

from __future__ import annotations

import pytest

from test_bench_runs import run_benchmark

pytestmark = pytest.mark.slow


def test_the_openclaw_benchmark_runs_on_a_small_vault() -> None:
    result = run_benchmark("openclaw.py", ["--size", "100", "--runs", "2"])
    assert result["gateway_search"]["p50_ms"] > 0
