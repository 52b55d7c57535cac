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


def test_benchmarks_page_carries_the_scale_ratios(tmp_path: Path) -> None:
    import json

    from bench.run import scale_summary

    def run(contender: str, ready: float, cpu: float, rss: int, patches: int, server: str = "") -> dict:
        return {
            "contender": contender,
            "nodes": 10,
            "pods": 100,
            "scheduled": False,
            "server": server,
            "completed": True,
            "ready_s": ready,
            "cpu_s": cpu,
            "peak_rss": rss,
            "requests": {"patch": patches, "delete": 100},
            "requests_by_resource": {"patch pods/status": patches, "delete pods": 100, "update leases": 40},
            "create_rate": 250.0,
            "heartbeat_samples": 8,
            "not_ready_samples": 0,
            "stale_lease_samples": 1,
        }

    page = tmp_path / "scale.json"
    page.write_text(
        json.dumps(
            {
                "results": [
                    run("kwok", 2.0, 1.0, 100 * 2**20, 100),
                    run("podstatus", 1.0, 1.5, 50 * 2**20, 50),
                    run("podstatus", 3.0, 4.0, 300 * 2**20, 300, server="podstatus serve"),
                ]
            }
        )
    )
    lines = scale_summary(page)
    rows = [line for line in lines if line.startswith("| 10 × 100")]
    assert rows[0] == "| 10 × 100 | 1.0 / 2.0 | 0.50× | 1.50× | 0.50× | 0.75× | 0.75× | 250 | 1 of 80 |"
    assert rows[1] == "| 10 × 100 on podstatus serve | 3.0 | — | 4 s | 300 MiB | 400 | 4.00 | 250 | 1 of 80 |"
    assert scale_summary(tmp_path / "absent.json") == []
    # With the start-up CPU recorded, the CPU ratio says what the pods cost apart from it.
    data = json.loads(page.read_text())
    data["results"][0]["start_cpu_s"], data["results"][1]["start_cpu_s"] = 0.5, 1.0
    page.write_text(json.dumps(data))
    row = next(line for line in scale_summary(page) if line.startswith("| 10 × 100 |"))
    assert "| 1.50× (after start-up 1.00×) |" in row
    # A run that got every pod up but did not finish its delete phase keeps its up time, marked.
    data["results"][1]["completed"] = False
    page.write_text(json.dumps(data))
    row = next(line for line in scale_summary(page) if line.startswith("| 10 × 100 (delete"))
    assert row.startswith("| 10 × 100 (delete phase not finished) | 1.0 / 2.0 | 0.50× |"), row
    data["results"][1]["ready_s"] = None
    page.write_text(json.dumps(data))
    row = next(line for line in scale_summary(page) if line.startswith("| 10 × 100 |"))
    assert row.startswith("| 10 × 100 | not all up / 2.0 |"), row
    # KWOK not all up: no ratios are made from its partial figures.
    data["results"][1]["ready_s"], data["results"][1]["completed"] = 1.0, True
    data["results"][0]["ready_s"], data["results"][0]["completed"] = None, False
    page.write_text(json.dumps(data))
    row = next(line for line in scale_summary(page) if line.startswith("| 10 × 100 |"))
    assert row == "| 10 × 100 | 1.0 / not all up | — | — | — | — | — | 250 | 1 of 80 |", row
