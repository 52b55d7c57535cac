"""Repeated scale runs on one page (bench/scale/runs.py): the median run's row, every run in the notes."""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.scale import harness, runs  # noqa: E402


def _run(api: bool, rest: float, load: float, renewals: int = 9000) -> harness.RunResult:
    return harness.RunResult(
        "podstatus", 1000, 10000, completed=True, kubelet_api=api, load=load,
        nodes_up_s=2.0, ready_s=25.0, gone_s=35.0, cpu_s=30.0, hold_s=30.0, hold_cpu_s=rest / 2,
        wall_s=90.0, requests={"update": renewals, "patch": 19000},
        requests_by_resource={"update leases": renewals, "patch pods/status": 19000},
    )  # fmt: skip


def test_the_median_run_is_the_row_and_every_run_is_in_the_notes() -> None:
    on = [_run(True, 4.4, 0.4), _run(True, 3.8, 3.0), _run(True, 4.0, 1.0)]
    off = [_run(False, 3.8, 3.2), _run(False, 3.9, 0.5)]
    rows, notes = runs.combine([on[0], off[0], on[1], off[1], on[2]])
    assert rows == [on[2], off[1]]  # 4.0 is the median of on; of two, the upper one
    text = dict(notes)
    mine = text["1000 × 10000 podstatus"]
    assert "3 runs; CPU at rest (s/min) 4.40, 3.80, 4.00 (median 4.00)" in mine
    assert "API requests without Lease renewals 19000, 19000, 19000" in mine
    assert "load at start 0.4, 3.0, 1.0" in mine
    assert "requests at rest" not in mine  # none of these runs had an audit log window
    on[0].hold_requests = {"update leases": 3000}
    _, notes = runs.combine([on[0], on[1]])
    assert "requests at rest per min 6000, —" in dict(notes)["1000 × 10000 podstatus"]
    ratio = text["1000 × 10000 kubelet API on / off"]
    assert ratio.startswith("median CPU at rest 4.00 against 3.85 s/min: +4 % with the kubelet API")


def test_pages_of_several_runs_make_one_page(tmp_path: Path) -> None:
    invocation = {"command": "c", "started": "2026-12-05 15:00 UTC", "commit": "abc", "machine": "m"}
    pages = []
    for i, result in enumerate([_run(True, 4.0, 1.0), _run(False, 3.9, 1.0)]):
        page = tmp_path / f"run-{i}.md"
        harness.save(page, [result], [("label", f"note of run {i}")], invocation, add=False)
        pages.append(page)
    out = tmp_path / "scale.md"
    assert runs.main([*map(str, pages), "--write", str(out)]) == 0
    data = json.loads(out.with_suffix(".json").read_text(encoding="utf-8"))
    assert [r["kubelet_api"] for r in data["results"]] == [True, False]
    assert [i["command"] for i in data["invocations"]][:2] == ["c", "c"]  # each run's, then the merge
    assert data["invocations"][2]["command"].startswith("python -m bench.scale.runs ")
    text = out.read_text(encoding="utf-8")
    assert "**kubelet API on / off**" in text
    assert "- label: note of run 0" in text and "- label: note of run 1" in text
    assert "median CPU at rest 4.00 against 3.90 s/min: +3 % with the kubelet API" in text
