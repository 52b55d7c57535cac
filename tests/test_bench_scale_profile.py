"""The scale profile's reading of py-spy's raw output (bench/scale/profile.py)."""

from __future__ import annotations

from pathlib import Path

from bench.scale.harness import RunResult
from bench.scale.profile import read_raw, report

RAW = """\
_bootstrap (threading.py:995);_run (podstatus/syncpool.py:80);_sync_pod (podstatus/manager.py:900);request (podstatus/clients/transport.py:211);sendall (ssl.py:1240) 30
_bootstrap (threading.py:995);_run (podstatus/syncpool.py:80);_sync_pod (podstatus/manager.py:900) 10
_bootstrap (threading.py:995);_run (podstatus/node/agent.py:1213);from_json (podstatus/types.py:262) 5
<module> (podstatus/cli.py:533);_find_and_load (<frozen importlib._bootstrap>:1176);<module> (yaml/__init__.py:1) 4
_bootstrap (threading.py:995);run (threading.py:975) 1
not a sample line
"""


def test_samples_are_charged_to_the_innermost_podstatus_frame(tmp_path: Path) -> None:
    path = tmp_path / "raw.txt"
    path.write_text(RAW)
    profile = read_raw(path)
    assert profile.samples == 50
    assert profile.by_owner["clients.transport.request"] == 30  # ssl below it counts for it
    assert profile.by_owner["manager._sync_pod"] == 10
    assert profile.by_owner["types.from_json"] == 5
    assert profile.by_module["clients.transport"] == 30
    assert profile.by_module["(start-up: imports)"] == 4
    assert profile.by_module["(outside podstatus: the interpreter's own threads)"] == 1
    # Inclusive: every podstatus function on the stack, once per sample.
    assert profile.inclusive["syncpool._run"] == 40
    assert profile.inclusive["manager._sync_pod"] == 40
    assert profile.by_leaf["sendall (ssl.py)"] == 30
    assert sum(profile.by_module.values()) == profile.samples


def test_report_names_the_run_and_the_shares(tmp_path: Path) -> None:
    path = tmp_path / "raw.txt"
    path.write_text(RAW)
    result = RunResult("podstatus", 2, 10, cpu_s=0.5)
    text = report(
        read_raw(path), result, {"command": "cmd", "commit": "abc", "started": "now", "machine": "m"}
    )
    assert "`cmd` on commit abc" in text
    assert "| clients.transport | 30 | 60.0 % |" in text
    assert "`manager._sync_pod` | 40 | 80.0 % |" in text  # inclusive table


def test_an_at_rest_report_compares_with_the_holds_cpu(tmp_path: Path) -> None:
    path = tmp_path / "raw.txt"
    path.write_text(RAW)
    result = RunResult("podstatus", 2, 10, cpu_s=30.0, hold_s=30.0, hold_cpu_s=1.5)
    invocation = {"command": "cmd", "commit": "abc", "started": "now", "machine": "m"}
    text = report(read_raw(path), result, invocation, at_rest=True)
    assert "Sampled over the hold (every pod up, nothing changing)" in text
    assert "against 1.5 CPU-seconds of the process" in text
    whole = report(read_raw(path), result, invocation)
    assert "Sampled over the whole run" in whole and "against 30.0 CPU-seconds" in whole
