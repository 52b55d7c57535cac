"""The kubelet API's side-by-side CPU measurement (bench/scale/paired.py), run small on the
embedded server: both `podstatus node` processes (one with the API, one without) up, their pods
up, the windows read."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.scale import harness, paired  # noqa: E402


@pytest.mark.skipif(not harness.PodstatusContender.available(), reason="podstatus node is not in this tree")
def test_both_processes_run_side_by_side_and_are_measured_over_the_same_windows(tmp_path: Path) -> None:
    server = harness.EmbeddedServer(tmp_path / "server")
    try:
        result = paired.measure(server, 2, 10, 2, 1.0, tmp_path)
        # Every pod went to one of the four nodes of the two processes, and all came up.
        pods, _ = server.driver().list_pods(harness.NAMESPACE)
        nodes = {p.spec.node_name for p in pods}
    finally:
        server.stop()
    assert nodes == {"api-1", "api-2", "noapi-1", "noapi-2"}
    assert len(result.windows) == 2
    assert all(w.on >= 0 and w.off >= 0 for w in result.windows)
    assert result.peak_rss_mib["on"] > 10 and result.peak_rss_mib["off"] > 10
    text = paired.render(result)
    assert "2 nodes and 5 pods per process, 2 windows of 1 s" in text
    assert "median on / off:" in text


def test_the_ratio_is_per_window_and_the_median_is_of_the_windows() -> None:
    result = paired.Paired(1000, 10000, 30.0)
    result.windows = [
        paired.Window(9.9, 1.55, 1.52),
        paired.Window(12.3, 1.66, 1.68),
        paired.Window(7.6, 1.5, 1.5),
    ]
    result.peak_rss_mib = {"on": 127.0, "off": 100.0}
    assert result.median_ratio == pytest.approx(1.0)
    text = paired.render(result)
    assert "| 1 | 9.9 | 3.10 | 3.04 | 1.020 |" in text
    assert "median on / off: 1.000 (+0.0 %); peak RSS on 127 MiB, off 100 MiB" in text
