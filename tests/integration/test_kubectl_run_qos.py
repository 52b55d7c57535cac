"""Pods made with ``kubectl run`` on a ``podstatus simulate`` node reach Running and Ready.

The API server sets ``status.qosClass`` from the pod when it is created and refuses
any change ("field is immutable"). A simulated node that reported another class
(Burstable for every pod) had each status write of a BestEffort or Guaranteed pod
refused, so ``kubectl run nginx --image=nginx`` stayed Pending forever. Here both
kubectl versions create BestEffort, Burstable and Guaranteed pods (limits only: the
server copies them into requests) on the node of a running ``podstatus simulate``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from testkit import kubectl_path, old_kubectl_path

SRC = Path(__file__).resolve().parents[2] / "src"
NODE = "podstatus-node-1"

LIMITS_ONLY_YAML = """\
apiVersion: v1
kind: Pod
metadata:
  name: {name}
spec:
  nodeName: {node}
  containers:
  - name: app
    image: nginx
    resources:
      limits: {{cpu: 250m, memory: 64Mi}}
"""


@pytest.fixture(scope="module")
def simulate(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A running ``podstatus simulate`` (embedded server), and an environment for kubectl."""
    home = tmp_path_factory.mktemp("kubectl-run-home")
    kubeconfig = home / "config"
    env = {**os.environ, "PYTHONPATH": str(SRC) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    # Long enough that its own deletions (at a third of --duration) come after these tests.
    proc = subprocess.Popen(
        [sys.executable, "-m", "podstatus.cli", "simulate", "--pods", "2", "--duration", "150",
         "--no-progress", "--node", NODE, "--write-kubeconfig", str(kubeconfig)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    kube_env = {**os.environ, "KUBECONFIG": str(kubeconfig), "HOME": str(home)}
    try:
        deadline = time.monotonic() + 30
        while True:
            assert proc.poll() is None, proc.communicate()
            if kubeconfig.exists():
                got = subprocess.run(
                    [kubectl_path(), "get", "node", NODE, "-o", "name"],
                    env=kube_env, capture_output=True, text=True, timeout=30,
                )  # fmt: skip
                if got.returncode == 0:
                    break
            assert time.monotonic() < deadline, "simulate did not register its node"
            time.sleep(0.2)
        state: dict[str, Any] = {"env": kube_env, "proc": proc}
        yield state
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
        try:
            _, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
    # The bug's signature: every status write refused because the class differed.
    assert "field is immutable" not in err, err[-3000:]


def _kubectl(
    binary: str, env: dict[str, str], *args: str, input: str | None = None
) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([binary, *args], env=env, input=input, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, f"{binary} {args}: {proc.stderr}"
    return proc


def _on_node(container: str, resources: dict[str, Any] | None = None) -> str:
    spec: dict[str, Any] = {"nodeName": NODE}
    if resources is not None:
        spec["containers"] = [{"name": container, "resources": resources}]
    return json.dumps({"spec": spec})


CASES = {
    # kubectl run nginx --image=nginx: no resources at all.
    "besteffort": (None, "BestEffort"),
    "burstable": ({"requests": {"cpu": "100m"}}, "Burstable"),
    # Limits only: the server copies them into requests, so requests == limits.
    "guaranteed": ({"limits": {"cpu": "500m", "memory": "128Mi"}}, "Guaranteed"),
}


@pytest.mark.parametrize("version", ["1.37", "1.32"])
@pytest.mark.parametrize("case", list(CASES))
def test_kubectl_run_pods_become_ready_with_the_servers_class(
    simulate: dict[str, Any], version: str, case: str
) -> None:
    binary = kubectl_path() if version == "1.37" else old_kubectl_path()
    env = simulate["env"]
    name = f"{case}-{version.replace('.', '')}"
    resources, expected = CASES[case]
    # Strategic merge: the override's container joins kubectl's own (same name) instead of replacing it.
    _kubectl(binary, env, "run", name, "--image=nginx", "--restart=Never", "--override-type=strategic",
             "--overrides", _on_node(name, resources))  # fmt: skip
    _wait_ready_with_class(binary, env, name, expected)


def test_a_manifest_with_limits_only_is_guaranteed(simulate: dict[str, Any]) -> None:
    env = simulate["env"]
    manifest = LIMITS_ONLY_YAML.format(name="limits-only", node=NODE)
    _kubectl(kubectl_path(), env, "apply", "-f", "-", input=manifest)
    pod = _wait_ready_with_class(kubectl_path(), env, "limits-only", "Guaranteed")
    # The server defaulted the requests from the limits (as kube-apiserver does).
    resources = pod["spec"]["containers"][0]["resources"]
    assert resources["requests"] == resources["limits"] == {"cpu": "250m", "memory": "64Mi"}


def _wait_ready_with_class(binary: str, env: dict[str, str], name: str, expected: str) -> dict[str, Any]:
    _kubectl(binary, env, "wait", "--for=condition=Ready", f"pod/{name}", "--timeout=40s")
    pod: dict[str, Any] = json.loads(_kubectl(binary, env, "get", "pod", name, "-o", "json").stdout)
    status = pod["status"]
    assert status["phase"] == "Running"
    assert status["qosClass"] == expected
    conditions = {c["type"]: c["status"] for c in status["conditions"]}
    assert conditions["Ready"] == conditions["ContainersReady"] == conditions["Initialized"] == "True"
    return pod
