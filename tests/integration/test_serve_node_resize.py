"""``podstatus serve`` + ``podstatus node``, as a user runs them, and in-place resize with kubectl.

A pod on the node reports ``observedGeneration``; ``kubectl patch pod --subresource resize`` is
acted on by the node: a resize that fits completes, one that does not is Deferred, a Guaranteed
pod's cpu under ``--cpu-manager-policy static`` is Infeasible. Each is read back with
``kubectl get pod -o yaml``, as a user would.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import nodecli
import pytest
import yaml
from nodecli import SRC, free_port, kubectl, kubectl_try, node_ready

# A simulated node of 2 cpu whose containers start at once and take 0.3 s to apply a resize.
PROVIDER = """
from podstatus.node import NodeDescription
from podstatus.node import SimulatedProvider, Timings


class SmallNode(SimulatedProvider):
    def __init__(self, node_name):
        quick = (0.02, 0.02)
        super().__init__(
            timings=Timings(image_pull=quick, init_run=quick, startup=quick, readiness=quick, resize=(0.3, 0.3)),
            description=NodeDescription(capacity={"cpu": "2", "memory": "4Gi", "pods": "110"}),
        )
"""


def wait_for(cond: Callable[[], Any], what: str = "condition") -> Any:
    # Two processes and kubectl round trips: a longer wait than nodecli's default.
    return nodecli.wait_for(cond, timeout=30.0, what=what)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[dict[str, str]]:
    """``podstatus serve`` and one ``podstatus node`` (vn-1) as subprocesses; kubectl's environment."""
    (tmp_path / "respod.py").write_text(PROVIDER)
    home = tmp_path / "home"
    home.mkdir()
    kubeconfig = home / "config"
    env = dict(os.environ)
    env.update(
        {
            "KUBECONFIG": str(kubeconfig),
            "HOME": str(home),
            "PYTHONPATH": str(SRC) + os.pathsep + str(tmp_path) + os.pathsep + env.get("PYTHONPATH", ""),
        }
    )
    port = free_port()
    procs: list[subprocess.Popen[str]] = []
    serve = subprocess.Popen(
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
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    procs.append(serve)
    try:
        wait_for(lambda: kubeconfig.exists() and kubectl_try(env, "get", "ns") is not None, what="serve up")
        node = subprocess.Popen(
            [sys.executable, "-m", "podstatus.cli", "node", "--name", "vn-1", "--provider", "respod:SmallNode",
             "--cpu-manager-policy", "static", "--kubelet-port", "0"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )  # fmt: skip
        procs.append(node)
        wait_for(lambda: node_ready(env, "vn-1"), what="vn-1 Ready")
        yield env
    finally:
        for proc in reversed(procs):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
            try:
                proc.communicate(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate(timeout=10)


def pod_yaml(env: dict[str, str], name: str) -> dict[str, Any]:
    out = kubectl(env, "get", "pod", name, "-o", "yaml")
    assert out is not None
    return yaml.safe_load(out)


def create(env: dict[str, str], name: str, cpu: str, *, guaranteed: bool = False) -> None:
    resources: dict[str, Any] = {"requests": {"cpu": cpu, "memory": "64Mi"}}
    if guaranteed:
        resources["limits"] = {"cpu": cpu, "memory": "64Mi"}
    manifest = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "nodeName": "vn-1",
            "containers": [{"name": "app", "image": "nginx:1.27", "resources": resources}],
        },
    }
    kubectl(env, "apply", "-f", "-", input=json.dumps(manifest))


def resize(env: dict[str, str], name: str, cpu: str, *, guaranteed: bool = False) -> None:
    res: dict[str, Any] = {"requests": {"cpu": cpu}}
    if guaranteed:
        res["limits"] = {"cpu": cpu}
    patch = {"spec": {"containers": [{"name": "app", "resources": res}]}}
    kubectl(env, "patch", "pod", name, "--subresource", "resize", "--patch", json.dumps(patch))


def cond(pod: dict[str, Any], ctype: str) -> dict[str, Any] | None:
    return next((c for c in pod["status"].get("conditions") or () if c["type"] == ctype), None)


def ready(env: dict[str, str], name: str) -> bool:
    pod = pod_yaml(env, name)
    return (cond(pod, "Ready") or {}).get("status") == "True"


def test_observed_generation_and_three_resizes(cluster: dict[str, str]) -> None:
    env = cluster
    create(env, "grow", "500m")
    create(env, "wait", "500m")
    create(env, "pinned", "500m", guaranteed=True)
    for name in ("grow", "wait", "pinned"):
        wait_for(lambda n=name: ready(env, n), what=f"{name} Ready")  # type: ignore[misc]
    pod = pod_yaml(env, "grow")
    assert pod["metadata"]["generation"] == 1
    assert pod["status"]["observedGeneration"] == 1
    assert all(c.get("observedGeneration") == 1 for c in pod["status"]["conditions"]), pod["status"][
        "conditions"
    ]

    # 1.5 cpu of 2 are taken: 500m -> 1 fits (1.5 + 0.5 = 2) and completes.
    resize(env, "grow", "1")

    def completed() -> dict[str, Any] | None:
        p = pod_yaml(env, "grow")
        cs = p["status"]["containerStatuses"][0]
        done = (
            p["status"].get("observedGeneration") == 2
            and cond(p, "PodResizeInProgress") is None
            and cs.get("resources", {}).get("requests", {}).get("cpu") == "1"
        )
        return p if done else None

    pod = wait_for(completed, what="grow resized")
    app = pod["status"]["containerStatuses"][0]
    assert app["allocatedResources"] == {"cpu": "1", "memory": "64Mi"}
    assert app["resources"] == {"requests": {"cpu": "1", "memory": "64Mi"}}
    assert cond(pod, "PodResizePending") is None

    # Now 2 of 2 cpu are taken: 500m -> 800m is Deferred.
    resize(env, "wait", "800m")
    pending = wait_for(lambda: cond(pod_yaml(env, "wait"), "PodResizePending"), what="wait deferred")
    assert pending["status"] == "True" and pending["reason"] == "Deferred"
    assert (
        pending["message"]
        == "Node didn't have enough resource: cpu, requested: 800, used: 1500, capacity: 2000"
    )
    assert pending["observedGeneration"] == 2
    waiting = pod_yaml(env, "wait")["status"]["containerStatuses"][0]
    assert waiting["allocatedResources"]["cpu"] == "500m"
    assert waiting["resources"]["requests"]["cpu"] == "500m"

    # A Guaranteed pod's cpu under the static CPU manager policy: Infeasible.
    resize(env, "pinned", "1", guaranteed=True)
    infeasible = wait_for(lambda: cond(pod_yaml(env, "pinned"), "PodResizePending"), what="pinned infeasible")
    assert (infeasible["status"], infeasible["reason"], infeasible["message"]) == (
        "True",
        "Infeasible",
        'Resize is infeasible for Guaranteed Pods alongside CPU Manager policy "static"',
    )
    assert pod_yaml(env, "pinned")["status"]["containerStatuses"][0]["allocatedResources"]["cpu"] == "500m"

    # The pinned pod goes: its 500m lets the deferred resize in.
    kubectl(env, "delete", "pod", "pinned", "--wait=true", "--timeout=30s")

    def applied() -> bool:
        p = pod_yaml(env, "wait")
        cs = p["status"]["containerStatuses"][0]
        return (
            cond(p, "PodResizePending") is None
            and cs.get("resources", {}).get("requests", {}).get("cpu") == "800m"
        )

    wait_for(applied, what="the deferred resize applied")
    described = kubectl(env, "describe", "pod", "wait") or ""
    for reason in ("ResizeDeferred", "ResizeStarted", "ResizeCompleted"):
        assert reason in described, described
