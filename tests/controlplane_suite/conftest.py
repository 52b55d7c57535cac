"""Fixtures of the control-plane suite (``make test-apiserver``).

``control_plane`` (session) runs ``tests/apiserver/start --control-plane``: etcd,
kube-apiserver (``--authorization-mode=Node,RBAC``, an audit log of every request the
agent's ServiceAccount makes), kube-controller-manager (default controllers, the node
monitor grace period shortened to 30 s) and kube-scheduler, all v1.37.2 on loopback.

``agent_kubeconfig`` applies deploy/ the way a user would (server-side dry run of every
manifest, then the Namespace, ServiceAccount and RBAC for real), asks the TokenRequest
API for a token of that ServiceAccount (``kubectl create token``) and writes a kubeconfig
with it: every ``podstatus node`` of the suite runs with exactly deploy/'s permissions.

``agents`` (session) starts two agents, one per virtual node: ``cp-stable`` is never
touched and is watched for the whole session (``stable_watch``); ``cp-flaky`` is paused
and killed by the failure cases.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cpkit import (
    AGENT_NAMESPACE,
    AGENT_SA,
    AGENT_USER,
    DEPLOY,
    FLAKY_NODE,
    KUBELET_CLIENT_CA,
    NODE_MONITOR_GRACE,
    NODE_MONITOR_PERIOD,
    STABLE_NODE,
    Agent,
    Agents,
    Cluster,
    NodeWatcher,
    bin_path,
    condition_status,
    is_condition_taint,
    kubectl,
    unique,
    wait_until,
)

from apiserver_fixture import build_before_tests, running

HERE = Path(__file__).resolve().parent
BUILD_TIMEOUT = 2400.0  # the first build of the four-component binary on 2 cores
START_TIMEOUT = 300.0

_build_error: list[str] = []


def pytest_collection_finish(session: pytest.Session) -> None:
    """Build the binary (cached; a no-op when the real-apiserver suite built it) before any test runs."""
    build_before_tests(session, HERE, "controlplane-suite", _build_error, timeout=BUILD_TIMEOUT)


def _audit_policy(path: Path) -> None:
    # Every request of the agent's ServiceAccount, at Metadata level (user, verb, resource,
    # response code); nothing else, so the log stays small.
    path.write_text(
        "apiVersion: audit.k8s.io/v1\n"
        "kind: Policy\n"
        "omitStages: [RequestReceived]\n"
        "rules:\n"
        f'  - level: Metadata\n    users: ["{AGENT_USER}"]\n'
        "  - level: None\n",
        encoding="utf-8",
    )


class ControlPlane:
    def __init__(self, info: dict[str, str], audit_log: Path) -> None:
        self.info = info
        self.kubeconfig = info["KUBECONFIG"]
        self.workdir = Path(info["WORKDIR"])
        self.audit_log = audit_log


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    if _build_error:
        pytest.fail(_build_error[0], pytrace=False)
    base = tmp_path_factory.mktemp("control-plane")
    policy = base / "audit-policy.yaml"
    _audit_policy(policy)
    audit_log = base / "audit.log"
    cmd = [
        "--control-plane",
        "--kubeconfig",
        str(base / "admin.kubeconfig"),
        "--workdir",
        str(base / "work"),
        f"--node-monitor-grace-period={NODE_MONITOR_GRACE}s",
        f"--node-monitor-period={NODE_MONITOR_PERIOD}s",
        "--",
        f"--audit-policy-file={policy}",
        f"--audit-log-path={audit_log}",
        "--audit-log-mode=blocking",
    ]
    with running(cmd, what="the control plane", start_timeout=START_TIMEOUT, stop_timeout=90) as info:
        KUBELET_CLIENT_CA[:] = [Path(info["WORKDIR"], "pki", "ca.crt")]
        yield ControlPlane(info, audit_log)


@pytest.fixture(scope="session")
def cluster(control_plane: ControlPlane) -> Iterator[Cluster]:
    c = Cluster(control_plane.kubeconfig)
    yield c
    c.close()


@pytest.fixture(scope="session")
def deploy_applied(control_plane: ControlPlane) -> str:
    """deploy/ checked by the server (dry run), then its identity objects created; answers the dry-run output."""
    kc = control_plane.kubeconfig
    # The namespace first, for real: a server-side dry run of namespaced objects needs it to exist.
    kubectl(kc, "apply", "-f", str(DEPLOY / "namespace.yaml"))
    dry = kubectl(kc, "apply", "--dry-run=server", "-f", str(DEPLOY))
    for name in ("serviceaccount.yaml", "rbac.yaml"):
        kubectl(kc, "apply", "-f", str(DEPLOY / name))
    return dry


@pytest.fixture(scope="session")
def agent_kubeconfig(
    control_plane: ControlPlane, deploy_applied: str, tmp_path_factory: pytest.TempPathFactory
) -> str:
    """A kubeconfig whose user is deploy/'s ServiceAccount, with a token from the TokenRequest API."""
    kc = control_plane.kubeconfig
    token = kubectl(kc, "create", "token", AGENT_SA, "-n", AGENT_NAMESPACE, "--duration=2h").strip()
    assert token.count(".") == 2, f"not a JWT: {token[:40]}..."
    path = tmp_path_factory.mktemp("agent") / "agent.kubeconfig"
    ca = Path(control_plane.workdir, "pki", "ca.crt")
    server = control_plane.info["APISERVER_URL"]
    for args in (
        (
            "config",
            "set-cluster",
            "cp",
            f"--server={server}",
            f"--certificate-authority={ca}",
            "--embed-certs",
        ),
        ("config", "set-credentials", AGENT_SA, f"--token={token}"),
        ("config", "set-context", "cp", "--cluster=cp", f"--user={AGENT_SA}"),
        ("config", "use-context", "cp"),
    ):
        subprocess.run(
            [bin_path("kubectl"), "--kubeconfig", str(path), *args],
            check=True,
            capture_output=True,
            timeout=60,
        )
    path.chmod(0o600)
    return str(path)


def _node_ready(cluster: Cluster, name: str) -> bool:
    """Ready, and the controller has lifted the not-ready taint a new node starts with."""
    node = cluster.node(name)
    taints = (node.get("spec") or {}).get("taints") or []
    return condition_status(node, "Ready") == "True" and not any(is_condition_taint(t) for t in taints)


@pytest.fixture(scope="session")
def agents(
    cluster: Cluster, agent_kubeconfig: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Agents]:
    logs = tmp_path_factory.mktemp("agent-logs")
    pair = Agents(
        Agent(STABLE_NODE, agent_kubeconfig, logs / f"{STABLE_NODE}.log"),
        Agent(FLAKY_NODE, agent_kubeconfig, logs / f"{FLAKY_NODE}.log"),
    )
    for agent in pair.all():
        agent.start()
    try:
        for agent in pair.all():
            wait_until(
                lambda a=agent: (a.alive() or _raise_dead(a)) and _node_ready(cluster, a.name),
                timeout=90,
                what=f"node {agent.name} Ready",
                state=lambda a=agent: {
                    "node": _safe(lambda: cluster.node(a.name)),
                    "log": a.log_text()[-3000:],
                },
            )
        yield pair
    finally:
        for agent in pair.all():
            agent.stop()
        sys.stderr.write(f"\n[controlplane-suite] agent logs in {logs}\n")


def _raise_dead(agent: Agent) -> bool:
    raise AssertionError(f"podstatus node --name {agent.name} exited:\n{agent.log_text()[-3000:]}")


def _safe(fn: Any) -> Any:
    try:
        return fn()
    except Exception as err:
        return f"<{err}>"


@pytest.fixture(scope="session")
def stable_watch(cluster: Cluster, agents: Agents) -> Iterator[NodeWatcher]:
    """The stable node's health, sampled every 2 s from the agents' start to the last test."""
    watcher = NodeWatcher(cluster, STABLE_NODE)
    watcher.start()
    yield watcher
    watcher.stop()


@pytest.fixture
def ns(cluster: Cluster, stable_watch: NodeWatcher) -> Iterator[str]:
    """A fresh namespace per test (its default ServiceAccount exists); deleted afterwards."""
    name = unique("cp")
    cluster.create_namespace(name)
    yield name
    try:
        cluster.core.delete_namespace(name)
    except Exception as err:  # cleanup only
        sys.stderr.write(f"deleting namespace {name}: {err}\n")
