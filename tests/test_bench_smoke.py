"""A tiny run of every benchmark, so `make bench` cannot rot; the real figures come from `make bench`."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.run import NAMES, rows, run_benchmark  # noqa: E402


@pytest.mark.parametrize("name", NAMES)
def test_benchmark_runs_small(name: str) -> None:
    result = run_benchmark(name, quick=True)
    assert result["seconds"] >= 0
    table = rows({name: result})
    assert table, f"{name} produced no row"
    for row in table:
        assert len(row) == 6 and row[0]


def test_quick_end_to_end_sends_about_one_request_per_change_on_the_fast_path() -> None:
    result = run_benchmark("e2e", quick=True)
    fast = result["fast"] if "fast" in result else result["modes"]["fast"]
    assert fast["violations"] == 0
    assert fast["requests_per_change"] <= 1.05
