"""The ``podstatus`` command as a user runs it: serve, simulate (the main job), metrics."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from podstatus.cli import main
from podstatus.manager import SyncRecord
from podstatus.metrics import Metrics
from testkit import kubectl_path

SRC = Path(__file__).resolve().parents[2] / "src"


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(SRC) + os.pathsep + env.get("PYTHONPATH", "")
    env["COLUMNS"] = "140"
    return env


def _kubectl() -> str:
    return kubectl_path()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _invariant_rows(text: str) -> list[tuple[str, int, int]]:
    rows = []
    for line in text.splitlines():
        m = re.search(r"│\s*(no [^│]+?)\s*│\s*(\d+)\s*│\s*(\d+)\s*│", line)
        if m:
            rows.append((m.group(1), int(m.group(2)), int(m.group(3))))
    return rows


def test_simulate_runs_the_main_job_and_reports(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "sim.kubeconfig"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "podstatus.cli",
            "simulate",
            "--pods",
            "24",
            "--duration",
            "40",
            "--no-progress",
            "--write-kubeconfig",
            str(kubeconfig),
        ],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "Pods by phase" in out and "Requests by verb" in out and "Status propagation latency" in out
    for q in ("p50", "p95", "p99"):
        assert re.search(rf"│ {q}\s+│\s+[\d.]+ ms", out), f"{q} latency printed"
    rows = _invariant_rows(out)
    assert len(rows) == 4
    for name, checked, violations in rows:
        assert violations == 0, name
        assert checked > 0, f"{name} was actually checked"
    assert re.search(r"│ patch\s+│\s+\d+", out)
    assert kubeconfig.exists()


def test_simulate_kubelet_mode_sends_a_get_before_every_patch() -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "podstatus.cli",
            "simulate",
            "--pods",
            "12",
            "--duration",
            "40",
            "--no-progress",
            "--kubelet-mode",
            "--in-process",
            "--delete-fraction",
            "0.2",
        ],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    gets = int(re.search(r"│ get\s+│\s+(\d+)", proc.stdout).group(1))  # type: ignore[union-attr]
    patches = int(re.search(r"│ patch\s+│\s+(\d+)", proc.stdout).group(1))  # type: ignore[union-attr]
    # The kubelet reads before it writes: at least one GET per status PATCH the node sent.
    assert gets >= patches * 0.8


def test_serve_writes_a_kubeconfig_kubectl_can_use(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "serve.kubeconfig"
    port = _free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "podstatus.cli",
            "serve",
            "--port",
            str(port),
            "--kubeconfig",
            str(kubeconfig),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=_env(),
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        assert f"https://127.0.0.1:{port}" in first  # token and TLS by default
        deadline = time.monotonic() + 20
        while not kubeconfig.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        manifest = tmp_path / "pod.json"
        manifest.write_text(
            json.dumps(
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {"name": "hello", "namespace": "default"},
                    "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "busybox"}]},
                }
            )
        )
        kubectl = [_kubectl(), "--kubeconfig", str(kubeconfig)]
        subprocess.run([*kubectl, "apply", "-f", str(manifest)], check=True, capture_output=True, timeout=60)
        got = subprocess.run(
            [*kubectl, "get", "pods", "-o", "wide"], check=True, capture_output=True, text=True, timeout=60
        )
        assert re.search(r"hello\s+0/1\s+Pending", got.stdout), got.stdout
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=20)
        if proc.stdout is not None:
            proc.stdout.close()
    assert proc.returncode == 0


def test_bad_arguments_give_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: Pod\nmetadata: {name: x}\nspec: {}\n")
    assert main(["simulate", "-f", str(bad), "--no-progress"]) == 2
    assert "spec.containers" in capsys.readouterr().err
    assert main(["simulate", "--faults", "error=lots", "--no-progress"]) == 2


def test_metrics_record_syncs_and_requests() -> None:
    metrics = Metrics()
    metrics.count_request("patch")
    metrics.count_request("patch")
    metrics.observe_sync(
        SyncRecord(
            pod_uid="u",
            namespace="ns",
            name="n",
            version=3,
            changed_at=10.0,
            synced_at=10.25,
            patched=True,
            deleted=False,
            requests=1,
        )
    )
    port = _free_port()
    metrics.serve(port)
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    assert 'podstatus_api_requests_total{verb="patch"} 2.0' in text
    assert "podstatus_pod_status_sync_duration_seconds_count 1.0" in text
    assert 'podstatus_pod_status_sync_duration_seconds_bucket{le="0.25"} 1.0' in text
    assert 'podstatus_pod_status_sync_duration_seconds_bucket{le="0.1"} 0.0' in text
