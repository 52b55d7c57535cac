"""``podstatus simulate --kubeconfig`` against a genuine kube-apiserver, with its invariant checks.

Each run gets its own namespace (the built-in mix names pods ``web-00001``...), and its
own node name, so the two runs cannot see each other's pods.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from apisuite_kit import RawApi

pytestmark = pytest.mark.apiserver

REPO = Path(__file__).resolve().parents[2]


def run_simulate(kubeconfig: str, *args: str, timeout: float = 240) -> tuple[int, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO / "src"), env.get("PYTHONPATH")) if p)
    env["COLUMNS"] = "100"  # one table under the other: easy to parse
    env.pop("FORCE_COLOR", None)
    env["NO_COLOR"] = "1"
    cmd = [
        sys.executable,
        "-m",
        "podstatus.cli",
        "simulate",
        "--kubeconfig",
        kubeconfig,
        "--no-progress",
        *args,
    ]
    proc = subprocess.run(
        cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=REPO, check=False
    )
    return proc.returncode, proc.stdout + proc.stderr


def parse_invariants(output: str) -> dict[str, tuple[int, int]]:
    """invariant -> (checked, violations), from the summary's Invariants table."""
    rows: dict[str, tuple[int, int]] = {}
    in_table = False
    for line in output.splitlines():
        if line.strip() == "Invariants":
            in_table = True
            continue
        if not in_table:
            continue
        m = re.match(r"^\s*│\s*(.+?)\s*│\s*(\d+)\s*│\s*(\d+)\s*│\s*$", line)
        if m:
            rows[m.group(1)] = (int(m.group(2)), int(m.group(3)))
        elif line.strip().startswith("└"):
            break
    return rows


def parse_table(output: str, title: str) -> dict[str, str]:
    rows: dict[str, str] = {}
    in_table = False
    for line in output.splitlines():
        if line.strip().startswith(title):
            in_table = True
            continue
        if not in_table:
            continue
        m = re.match(r"^\s*│\s*(.+?)\s*│\s*(.+?)\s*│\s*$", line)
        if m:
            rows[m.group(1)] = m.group(2)
        elif line.strip().startswith("└"):
            break
    return rows


EXPECTED_INVARIANTS = {
    "no write to a pod with another UID",
    "no terminal phase undone on the server",
    "no illegal container transition on the server",
    "no delete before the pod is terminal on the server",
}


@pytest.mark.parametrize(
    ("mode", "args"),
    [
        ("fast", ("--pods", "40", "--duration", "60")),
        ("kubelet", ("--pods", "20", "--duration", "60", "--kubelet-mode")),
    ],
)
def test_simulate_against_real_apiserver(real_apiserver: str, mode: str, args: tuple[str, ...]) -> None:
    namespace = f"sim-{mode}-{uuid.uuid4().hex[:6]}"
    raw = RawApi.from_kubeconfig(real_apiserver)
    try:
        raw.ensure_namespace(namespace)
    finally:
        raw.close()
    code, output = run_simulate(
        real_apiserver, *args, "--namespace", namespace, "--node", f"podstatus-{namespace}"
    )
    print(output)
    assert code == 0, f"podstatus simulate exited with {code}:\n{output}"
    assert "An invariant was broken" not in output
    invariants = parse_invariants(output)
    assert set(invariants) == EXPECTED_INVARIANTS, output
    for name, (checked, violations) in invariants.items():
        assert violations == 0, f"{name}: {violations} violations\n{output}"
        assert checked > 0, f"{name}: never checked\n{output}"
    # Every pod was created on the real server (no AlreadyExists, no validation error).
    assert "could not create pod" not in output, output
    phases = parse_table(output, "Pods by phase")
    pods = int(args[args.index("--pods") + 1])
    assert int(phases["created"]) == pods, phases
    requests = parse_table(output, "Requests by verb")
    assert int(requests["patch"]) > 0 and int(requests["delete"]) > 0, requests
    per_change = float(requests["node get+patch per synced change"])
    if mode == "kubelet":
        assert per_change >= 1.8, requests  # a GET before every PATCH
    else:
        assert per_change < 1.5, requests  # PATCH from the last known pod; GET only on conflicts


def test_simulate_leaves_the_cluster_as_found_and_runs_twice(real_apiserver: str) -> None:
    """The README's command, twice, on kube-apiserver: no 409, nothing of the run left behind."""
    namespace = f"sim-twice-{uuid.uuid4().hex[:6]}"
    node = f"podstatus-{namespace}"
    raw = RawApi.from_kubeconfig(real_apiserver)
    try:
        raw.ensure_namespace(namespace)
        for run in (1, 2):
            code, output = run_simulate(
                real_apiserver, "--pods", "8", "--duration", "40", "--namespace", namespace, "--node", node
            )
            assert code == 0, f"run {run} exited with {code}:\n{output}"
            assert int(parse_table(output, "Pods by phase")["never created"]) == 0, output
            assert re.search(r"Cleaned up: deleted the \d+ pods and 1 Node\(s\)", output), output
            left = raw.request(
                "GET", f"/api/v1/namespaces/{namespace}/pods", query="labelSelector=podstatus.io/simulation"
            )
            assert left.code == 200 and left.body["items"] == [], left.body
            assert raw.request("GET", f"/api/v1/nodes/{node}").code == 404
    finally:
        raw.close()
