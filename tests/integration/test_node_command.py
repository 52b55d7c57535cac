"""``podstatus node`` as a user runs it: a subprocess against the embedded API server over HTTP, with kubectl."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from nodecli import SRC, free_port, kubectl, kubectl_try, node_ready, wait_for

from podstatus.server import EmbeddedApiServer

PROVIDER = '''
from podstatus.node import NodeDescription
from podstatus.types import ContainerState, ContainerStateRunning, ContainerStatus, PodStatus


class AlwaysRunning:
    """Every pod runs at once; a test provider loaded with --provider module:Class."""

    def __init__(self, node_name):
        self.node_name = node_name
        self.pods = {}

    def create_pod(self, pod):
        self.pods[pod.uid] = pod

    def update_pod(self, pod):
        pass

    def delete_pod(self, pod, grace_period_seconds):
        self.pods.pop(pod.uid, None)

    def get_pod_status(self, pod):
        if pod.uid not in self.pods:
            return None
        return PodStatus(phase="Running", pod_ip="10.9.0.1", container_statuses=tuple(
            ContainerStatus(name=c.name, image=c.image or "", ready=True, started=True,
                            container_id="containerd://" + pod.uid.replace("-", "")[:12],
                            state=ContainerState(running=ContainerStateRunning()))
            for c in pod.spec.containers))

    def get_pods(self):
        return list(self.pods.values())

    def ping(self):
        pass

    def node_description(self):
        return NodeDescription(labels={"provider": "always-running", "node": self.node_name})
'''


@pytest.fixture
def server() -> Iterator[EmbeddedApiServer]:
    with EmbeddedApiServer() as srv:
        yield srv


@pytest.fixture
def env(server: EmbeddedApiServer, tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir()
    config = server.write_kubeconfig(str(home / "config"))
    out = dict(os.environ)
    out.update(
        {
            "KUBECONFIG": str(config),
            "HOME": str(home),
            "PYTHONPATH": str(SRC) + os.pathsep + str(tmp_path) + os.pathsep + out.get("PYTHONPATH", ""),
        }
    )
    return out


class NodeProcess:
    def __init__(self, env: dict[str, str], *args: str) -> None:
        # No --kubeconfig: the command follows $KUBECONFIG as kubectl does.
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "podstatus.cli", "node", *args, "--kubelet-port", "0"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30) -> tuple[int, str, str]:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        out, err = self.proc.communicate(timeout=timeout)
        return self.proc.returncode, out, err


@pytest.fixture
def nodes(env: dict[str, str]) -> Iterator[Callable[..., NodeProcess]]:
    started: list[NodeProcess] = []

    def start(*args: str) -> NodeProcess:
        p = NodeProcess(env, *args)
        started.append(p)
        return p

    yield start
    for p in started:
        if p.proc.poll() is None:
            p.proc.kill()
            p.proc.communicate(timeout=10)


def test_virtual_node_runs_pods_created_with_kubectl(
    env: dict[str, str], nodes: Callable[..., NodeProcess]
) -> None:
    port = free_port()
    node = nodes("--name", "vn-1", "--metrics-port", str(port), "--bind-address", "127.0.0.1")
    wait_for(lambda: node_ready(env, "vn-1"), what="kubectl get nodes: vn-1 Ready")
    spec = json.loads(kubectl(env, "get", "node", "vn-1", "-o", "json"))["spec"]
    assert spec["taints"] == [{"key": "podstatus.io/virtual-node", "effect": "NoSchedule"}]
    leases = kubectl(env, "get", "lease", "-n", "kube-node-lease", "-o", "json")
    (lease,) = json.loads(leases)["items"]
    assert lease["spec"]["holderIdentity"] == "vn-1"
    kubectl(env, "run", "web", "--image", "nginx:1.27", '--overrides={"spec":{"nodeName":"vn-1"}}')
    wait_for(
        lambda: "Running" in (kubectl_try(env, "get", "pod", "web", "--no-headers") or ""),
        what="web Running",
    )
    wait_for(lambda: "Started container" in kubectl(env, "describe", "pod", "web"), what="events")
    described = kubectl(env, "describe", "pod", "web")
    for reason in ("Pulling", "Pulled", "Created", "Started"):
        assert reason in described, described
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=10) as health:
        assert health.status == 200
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
        metrics = answer.read().decode()
    assert 'podstatus_api_requests_total{verb="patch"}' in metrics
    kubectl(env, "delete", "pod", "web", "--wait=true", "--timeout=30s")
    code, out, err = node.stop()
    assert code == 0, err
    assert "stopped" in out


def test_sigterm_with_cordon_marks_the_node_unschedulable(
    env: dict[str, str], nodes: Callable[..., NodeProcess]
) -> None:
    node = nodes("--name", "vn-7", "--on-stop", "cordon", "--log-format", "json")
    wait_for(lambda: node_ready(env, "vn-7"))
    code, _, err = node.stop()
    assert code == 0, err
    spec = json.loads(kubectl(env, "get", "node", "vn-7", "-o", "json"))["spec"]
    assert spec.get("unschedulable") is True
    lines = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
    assert any(line["msg"].startswith("node cordoned") and line.get("node") == "vn-7" for line in lines)


def test_a_second_agent_for_the_same_node_refuses_to_start(
    env: dict[str, str], nodes: Callable[..., NodeProcess]
) -> None:
    nodes("--name", "vn-1")
    wait_for(lambda: node_ready(env, "vn-1"))
    second = nodes("--name", "vn-1")
    code = second.proc.wait(30)
    err = second.proc.communicate()[1]
    assert code == 3, err
    assert "held by" in err and "--take-over" in err
    third = nodes("--name", "vn-1", "--take-over")
    time.sleep(3)
    assert third.proc.poll() is None  # running
    code, _, err = third.stop()
    assert code == 0, err


def test_many_nodes_and_a_user_provider(
    env: dict[str, str], nodes: Callable[..., NodeProcess], tmp_path: Path
) -> None:
    (tmp_path / "myprovider.py").write_text(PROVIDER)
    node = nodes("--name", "edge", "--nodes", "3", "--provider", "myprovider:AlwaysRunning")
    for name in ("edge-1", "edge-2", "edge-3"):
        wait_for(lambda name=name: node_ready(env, name), what=f"{name} Ready")
    labels = json.loads(kubectl(env, "get", "node", "edge-2", "-o", "json"))["metadata"]["labels"]
    assert labels["provider"] == "always-running" and labels["node"] == "edge-2"
    for name in ("edge-1", "edge-3"):
        kubectl(
            env, "run", f"p-{name}", "--image", "busybox", f'--overrides={{"spec":{{"nodeName":"{name}"}}}}'
        )
    for name in ("edge-1", "edge-3"):
        wait_for(
            lambda name=name: (
                "Running" in (kubectl_try(env, "get", "pod", f"p-{name}", "--no-headers") or "")
            ),
            what=f"p-{name} Running",
        )
    code, _, err = node.stop(signal.SIGINT)
    assert code == 0, err
