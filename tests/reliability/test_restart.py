"""Restart: a fresh manager over pods that already have status on the server regresses none of them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import msgspec
import pytest
from relkit import report

from podstatus import (
    BasicPodManager,
    ContainerState,
    ContainerStateRunning,
    ContainerStateTerminated,
    ContainerStatus,
    Pod,
    PodCondition,
    PodStatus,
    new_manager,
)
from podstatus.clients.http import HttpKubeClient
from podstatus.deletion import FakePodDeletionSafety
from podstatus.server.faults import FaultPlan
from podstatus.server.http import EmbeddedApiServer

MODES: dict[str, dict[str, Any]] = {"kubelet": {}, "fast": {"fast_path": True}}
NS = "restart"
GATE = "example.com/gate"


def _status(kind: str) -> PodStatus:
    if kind == "ready":
        state, ready, phase = ContainerState(running=ContainerStateRunning()), True, "Running"
    elif kind == "unready":
        state, ready, phase = ContainerState(running=ContainerStateRunning()), False, "Running"
    elif kind == "succeeded":
        state, ready, phase = (
            ContainerState(terminated=ContainerStateTerminated(exit_code=0)),
            False,
            "Succeeded",
        )
    else:
        state, ready, phase = (
            ContainerState(terminated=ContainerStateTerminated(exit_code=1)),
            False,
            "Failed",
        )
    text = "True" if ready else "False"
    reason = {"succeeded": "PodCompleted", "failed": "PodFailed"}.get(kind)
    return PodStatus(
        phase=phase,
        container_statuses=(
            ContainerStatus(
                name="c", image="busybox", ready=ready, state=state, container_id="containerd://c1"
            ),
        ),
        conditions=(
            PodCondition(type="PodScheduled", status="True"),
            PodCondition(type="Initialized", status="True"),
            PodCondition(type="ContainersReady", status=text, reason=reason),
            PodCondition(type="Ready", status=text, reason=reason),
        ),
    )


KINDS = ["ready", "unready", "succeeded", "failed"]


@pytest.fixture
def server() -> Iterator[EmbeddedApiServer]:
    with EmbeddedApiServer() as srv:
        srv.store.ensure_namespace(NS)
        yield srv


def _first_life(server: EmbeddedApiServer, mode: str) -> list[Pod]:
    """A first manager writes every pod's status, then goes away."""
    pods: list[Pod] = []
    pm = BasicPodManager()
    for i, kind in enumerate(KINDS * 2):
        body = {
            "metadata": {"name": f"{kind}-{i}", "namespace": NS},
            "spec": {
                "nodeName": "n1",
                "restartPolicy": "Always" if kind in ("ready", "unready") else "Never",
                "containers": [{"name": "c", "image": "busybox"}],
                "readinessGates": [{"conditionType": GATE}] if i % 2 else None,
            },
        }
        stored = server.store.create("pods", NS, body)
        assert stored.pod is not None
        pods.append(stored.pod)
        pm.add_pod(stored.pod)
    client = HttpKubeClient(server.url, timeout=5.0)
    first = new_manager(client, pm, FakePodDeletionSafety(), **MODES[mode])
    for pod in pods:
        first.set_pod_status(pod, _status(pod.name.split("-")[0]))
    while first.pending_count():
        first.sync_batch()
    client.close()
    return [p for p in (server.store.get("pods", NS, p.name).pod for p in pods) if p is not None]


def _snapshot(server: EmbeddedApiServer) -> dict[str, dict[str, Any]]:
    items, _ = server.store.list("pods", NS)
    return {s.name: msgspec.json.decode(msgspec.json.encode(s.obj)) for s in items}


def _ready(obj: dict[str, Any]) -> str | None:
    for c in obj["status"].get("conditions") or ():
        if c["type"] == "Ready":
            return str(c["status"])
    return None


@pytest.mark.timeout(60)
@pytest.mark.parametrize("mode", list(MODES))
def test_fresh_manager_reconciles_without_regressing(server: EmbeddedApiServer, mode: str) -> None:
    listed = _first_life(server, mode)
    # Another writer moves on while the node is down: readiness gates become True.
    for pod in listed:
        if pod.spec.readiness_gates:
            patch = {"status": {"conditions": [{"type": GATE, "status": "True"}]}}
            server.store.patch("pods", NS, pod.name, msgspec.json.encode(patch), subresource="status")
    before = _snapshot(server)
    assert {n: o["status"]["phase"] for n, o in before.items() if n.startswith("succeeded")} == {
        "succeeded-2": "Succeeded",
        "succeeded-6": "Succeeded",
    }

    # The node comes back: the pod manager has the pods as listed before the gates moved (stale),
    # the cache is empty, and the faults are on.
    pm = BasicPodManager()
    for pod in listed:
        pm.add_pod(pod)
    plan = FaultPlan.parse("error=0.2,conflict=0.3,reset=0.05,seed=3").install(server)
    client = HttpKubeClient(server.url, timeout=2.0)
    manager = new_manager(client, pm, FakePodDeletionSafety(), **MODES[mode])
    writes_before = server.counter.get("patch")
    for _ in range(5):
        manager.sync_batch(all=True)
    assert _snapshot(server) == before, "a manager with nothing cached changed a pod"
    assert server.counter.get("patch") == writes_before

    # A stale agent reports every pod again from what it remembers (the first status it ever
    # saw: Running, not ready): nothing terminal comes back, no container restarts illegally,
    # and the gate conditions set by the other writer stay.
    for pod in listed:
        stale = _status("unready")
        manager.set_pod_status(pod, stale)
    for _ in range(20):
        manager.sync_batch(all=True)
        if not manager.pending_count():
            break
    plan.stop()
    while manager.pending_count():
        manager.sync_batch(all=True)
    after = _snapshot(server)
    regressions = []
    for name, old in before.items():
        new = after[name]
        if (
            old["status"]["phase"] in ("Succeeded", "Failed")
            and new["status"]["phase"] != old["status"]["phase"]
        ):
            regressions.append(f"{name}: phase {old['status']['phase']} -> {new['status']['phase']}")
        gate_old = [c for c in old["status"].get("conditions") or () if c["type"] == GATE]
        gate_new = [c for c in new["status"].get("conditions") or () if c["type"] == GATE]
        if gate_old != gate_new:
            regressions.append(f"{name}: gate {gate_old} -> {gate_new}")
        if old["status"]["phase"] in ("Succeeded", "Failed"):
            cs = new["status"]["containerStatuses"][0]["state"]
            if "terminated" not in cs:
                regressions.append(f"{name}: container left terminated: {cs}")
    assert not regressions, regressions
    # The non-terminal pods took the new status (it was a new status: Ready may go False now).
    assert all(after[n]["status"]["phase"] == "Running" for n in after if n.startswith(("ready", "unready")))
    client.close()
    report(
        f"restart[{mode}] pods={len(before)}, faults injected={plan.total}, "
        f"patches after the restart={server.counter.get('patch') - writes_before}, regressions=0"
    )


@pytest.mark.timeout(60)
@pytest.mark.parametrize("mode", list(MODES))
def test_fresh_manager_with_the_same_status_writes_nothing(server: EmbeddedApiServer, mode: str) -> None:
    """Re-reporting what is on the server (a restarted agent that re-derived it) flips nothing."""
    listed = _first_life(server, mode)
    before = _snapshot(server)
    pm = BasicPodManager()
    for pod in listed:
        pm.add_pod(pod)
    manager = new_manager(HttpKubeClient(server.url, timeout=2.0), pm, FakePodDeletionSafety(), **MODES[mode])
    for pod in listed:
        manager.set_pod_status(pod, _status(pod.name.split("-")[0]))
    for _ in range(3):
        manager.sync_batch(all=True)
    after = _snapshot(server)
    for name in before:
        assert after[name]["status"]["phase"] == before[name]["status"]["phase"], name
        assert _ready(after[name]) == _ready(before[name]), name
        assert after[name]["metadata"]["resourceVersion"] == before[name]["metadata"]["resourceVersion"], name
