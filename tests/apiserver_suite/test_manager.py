"""The status manager's full lifecycle against a genuine kube-apiserver.

Every test runs in both modes: ``kubelet`` (no options: GET before every PATCH) and
``fast`` (``fast_path=True``: PATCH from the last known pod with a resourceVersion
precondition). The manager is never started: each test calls ``sync_batch``
synchronously, so the requests come in a known order.

The node agent's part is played by the test: it builds statuses the way the kubelet
does (conditions from ``podstatus.generate_*``, ``qosClass`` from the pod), feeds the
pod manager, and regenerates ``Ready`` from the conditions it reads back from the
server (readiness gates are set by other components).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from apisuite_kit import IMAGE, NS, pod_manifest, unique

from podstatus import (
    BasicPodManager,
    ContainerStatus,
    Manager,
    NotFoundError,
    Pod,
    PodCondition,
    PodStatus,
    generate_containers_ready_condition,
    generate_pod_initialized_condition,
    generate_pod_ready_condition,
    new_manager,
)
from podstatus.clients.http import HttpKubeClient
from podstatus.deletion import FakePodDeletionSafety

pytestmark = pytest.mark.apiserver

MODES: dict[str, dict[str, Any]] = {"kubelet": {}, "fast": {"fast_path": True}}
GATE = "example.com/load-balancer-ready"
IMAGE_ID = "registry.k8s.io/pause@sha256:ee6521f290b2168b6e0935a181d4cff9be1ac3f505666ef0e3c98fae8199917a"
STARTED = "2026-01-01T10:00:00Z"


class RecordingClient(HttpKubeClient):
    """HttpKubeClient that also records the pod calls the manager makes (method, name, kwargs)."""

    calls: list[tuple[str, str, dict[str, Any]]]

    def _record(self, method: str, name: str, **kwargs: Any) -> None:
        if not hasattr(self, "calls"):
            self.calls = []
        self.calls.append((method, name, kwargs))

    def get_pod(self, namespace: str, name: str) -> Pod:
        self._record("get", name)
        return super().get_pod(namespace, name)

    def patch_pod_status(self, namespace: str, name: str, patch: bytes, **kwargs: Any) -> Pod:
        self._record("patch", name, patch=json.loads(patch), **kwargs)
        return super().patch_pod_status(namespace, name, patch, **kwargs)

    def delete_pod(self, namespace: str, name: str, **kwargs: Any) -> None:
        self._record("delete", name, **kwargs)
        super().delete_pod(namespace, name, **kwargs)

    def verbs(self, name: str) -> list[str]:
        return [m for m, n, _ in getattr(self, "calls", []) if n == name]


@dataclass
class Node:
    """The node side of a test: manager, its client, pod manager and deletion safety."""

    manager: Manager
    client: RecordingClient
    pods: BasicPodManager
    safety: FakePodDeletionSafety


@pytest.fixture(params=list(MODES))
def node(request: pytest.FixtureRequest, real_apiserver: str) -> Iterator[Node]:
    client = RecordingClient.from_kubeconfig(real_apiserver)
    assert isinstance(client, RecordingClient)
    pods = BasicPodManager()
    safety = FakePodDeletionSafety()
    manager = new_manager(client, pods, safety, **MODES[request.param])
    yield Node(manager, client, pods, safety)
    manager.stop(timeout=2)
    client.close()


# -- the node agent's side ---------------------------------------------------------------


def cid(pod: Pod, container: str) -> str:
    return f"containerd://{pod.uid.replace('-', '')}{container.encode().hex()}"[:77]


def running(pod: Pod, name: str, *, ready: bool = False, started: bool = True) -> dict[str, Any]:
    return {
        "name": name,
        "ready": ready,
        "started": started,
        "restartCount": 0,
        "image": IMAGE,
        "imageID": IMAGE_ID,
        "containerID": cid(pod, name),
        "state": {"running": {"startedAt": STARTED}},
    }


def agent_status(
    pod: Pod,
    containers: list[dict[str, Any]],
    *,
    phase: str = "Running",
    server_conditions: tuple[PodCondition, ...] | None = None,
) -> PodStatus:
    """A status as the kubelet generates it; ``Ready`` from the conditions on the server (gates)."""
    statuses = [ContainerStatus.from_dict(c) for c in containers]
    # v1.37's generators take the pod: its generation becomes each condition's observedGeneration
    # (kube-apiserver keeps a condition's observedGeneration that a patch leaves out).
    conditions = [
        PodCondition(type="PodReadyToStartContainers", status="True"),
        generate_pod_initialized_condition(pod.spec, statuses, phase, pod=pod, old_status=pod.status),
        generate_pod_ready_condition(
            pod.spec, list(server_conditions or ()), statuses, phase, pod=pod, old_status=pod.status
        ),
        generate_containers_ready_condition(pod.spec, statuses, phase, pod=pod, old_status=pod.status),
        PodCondition(type="PodScheduled", status="True"),
    ]
    return PodStatus.from_dict(
        {
            "phase": phase,
            "conditions": [c.to_dict() for c in conditions],
            "hostIP": "192.168.10.1",
            "hostIPs": [{"ip": "192.168.10.1"}],
            "podIP": "10.244.0.7",
            "podIPs": [{"ip": "10.244.0.7"}],
            "startTime": STARTED,
            "containerStatuses": containers,
            "qosClass": "BestEffort",
        }
    )


def _clean(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None}


def conditions_of(status: PodStatus) -> dict[str, dict[str, Any]]:
    return {c.type: _clean(c.to_dict()) for c in status.conditions or ()}


def condition(status: PodStatus, type_: str) -> PodCondition:
    for c in status.conditions or ():
        if c.type == type_:
            return c
    raise AssertionError(f"no {type_} condition in {[c.type for c in status.conditions or ()]}")


def assert_server_has(server: Pod, cached: PodStatus, *, other_conditions: tuple[str, ...] = ()) -> None:
    """The server's status holds exactly the manager's for the fields the node sets."""
    got, want = server.status, cached
    assert got.phase == want.phase
    assert got.reason == want.reason and got.message == want.message
    # Conditions: the kubelet's are exactly the manager's (type, status, reason, message, time);
    # other components' conditions are kept as they were.
    server_conditions, cached_conditions = conditions_of(got), conditions_of(want)
    for type_ in other_conditions:
        server_conditions.pop(type_)
        cached_conditions.pop(type_, None)
    assert server_conditions == cached_conditions
    assert [c.to_dict() for c in got.container_statuses or ()] == [
        c.to_dict() for c in want.container_statuses or ()
    ]
    assert got.start_time == want.start_time
    assert got.pod_ip == want.pod_ip and got.host_ip == want.host_ip


def create(client: HttpKubeClient, node: Node, **kw: Any) -> Pod:
    pod = client.create_pod(pod_manifest(unique("mgr"), **kw))
    node.pods.add_pod(pod)
    return pod


# -- tests -------------------------------------------------------------------------------


def test_lifecycle(node: Node, other_client: HttpKubeClient) -> None:
    m, client = node.manager, node.client
    pod = create(other_client, node, containers=("app", "proxy"), readiness_gates=(GATE,))

    # 1. A new status reaches the server, exactly.
    status = agent_status(pod, [running(pod, "app"), running(pod, "proxy")])
    m.set_pod_status(pod, status)
    assert m.sync_batch() == 1
    server = client.get_pod(NS, pod.name)
    cached = m.get_pod_status(pod.uid)
    assert cached is not None
    assert_server_has(server, cached)
    assert condition(server.status, "Ready").reason == "ContainersNotReady"

    # 2. Container readiness changes: ContainersReady becomes True, Ready waits for the gate.
    m.set_container_readiness(pod.uid, cid(pod, "app"), True)
    m.set_container_readiness(pod.uid, cid(pod, "proxy"), True)
    m.sync_batch()
    server = client.get_pod(NS, pod.name)
    cached = m.get_pod_status(pod.uid)
    assert cached is not None
    assert_server_has(server, cached)
    assert condition(server.status, "ContainersReady").status == "True"
    ready = condition(server.status, "Ready")
    assert (ready.status, ready.reason) == ("False", "ReadinessGatesNotReady")
    assert ready.message == f'corresponding condition of pod readiness gate "{GATE}" does not exist.'

    # 3. Another component sets the gate False: the manager's writes keep it.
    other_client.patch_pod_status(
        NS, pod.name, json.dumps({"status": {"conditions": [{"type": GATE, "status": "False"}]}}).encode()
    )
    containers = [running(pod, "app", ready=True), running(pod, "proxy", ready=True)]
    server = client.get_pod(NS, pod.name)
    m.set_pod_status(pod, agent_status(pod, containers, server_conditions=server.status.conditions))
    m.sync_batch()
    server = client.get_pod(NS, pod.name)
    assert condition(server.status, GATE).status == "False"
    ready = condition(server.status, "Ready")
    assert (ready.status, ready.reason) == ("False", "ReadinessGatesNotReady")
    assert ready.message == f'the status of pod readiness gate "{GATE}" is not "True", but False'
    cached = m.get_pod_status(pod.uid)
    assert cached is not None
    assert_server_has(server, cached, other_conditions=(GATE,))

    # 4. The gate turns True: Ready becomes True only now, and the gate is still there.
    other_client.patch_pod_status(
        NS, pod.name, json.dumps({"status": {"conditions": [{"type": GATE, "status": "True"}]}}).encode()
    )
    server = client.get_pod(NS, pod.name)
    m.set_pod_status(pod, agent_status(pod, containers, server_conditions=server.status.conditions))
    m.sync_batch()
    server = client.get_pod(NS, pod.name)
    assert condition(server.status, GATE).status == "True"
    assert condition(server.status, "Ready").status == "True"
    cached = m.get_pod_status(pod.uid)
    assert cached is not None
    assert_server_has(server, cached, other_conditions=(GATE,))

    # 5. Another client deletes the running pod with grace 30: it stays, with a deletionTimestamp.
    #    (The real server deletes a pod in a terminal phase at once, whatever the grace period:
    #    the deletion request has to come while the pod runs, as it does in a cluster.)
    other_client.delete_pod(NS, pod.name, grace_period_seconds=30)
    server = client.get_pod(NS, pod.name)
    assert server.metadata.deletion_timestamp is not None
    assert server.metadata.deletion_grace_period_seconds == 30
    node.pods.update_pod(server)

    # 6. The node stops the containers: terminate_pod -> Failed on the server; its resources are
    #    not reclaimed yet, so no delete.
    node.safety.set_reclaimed(pod.uid, False)
    m.terminate_pod(server)
    m.sync_batch()
    server = client.get_pod(NS, pod.name)
    assert server.status.phase == "Failed"
    for cs in server.status.container_statuses or ():
        assert cs.state.terminated is not None, cs.to_dict()
        assert (cs.state.terminated.reason, cs.state.terminated.exit_code) == ("ContainerStatusUnknown", 137)
    assert condition(server.status, GATE).status == "True"
    # The cache keeps what terminate_pod made; the merge (SPEC 4.7) never lets a terminal
    # pod be Ready on the server: Ready and ContainersReady go False with reason PodFailed.
    for type_ in ("Ready", "ContainersReady"):
        c = condition(server.status, type_)
        assert (c.status, c.reason) == ("False", "PodFailed")
    cached = m.get_pod_status(pod.uid)
    assert cached is not None
    assert_server_has(server, cached, other_conditions=(GATE, "Ready", "ContainersReady"))
    assert "delete" not in client.verbs(pod.name)
    assert server.metadata.deletion_timestamp is not None

    # 7. Resources reclaimed: the next full pass deletes with grace 0 and the UID precondition.
    node.pods.update_pod(server)
    node.safety.set_reclaimed(pod.uid, True)
    m.sync_batch(all=True)
    deletes = [kw for method, name, kw in client.calls if method == "delete" and name == pod.name]
    assert deletes == [{"grace_period_seconds": 0, "uid": pod.uid}]
    with pytest.raises(NotFoundError):
        client.get_pod(NS, pod.name)
    assert m.get_pod_status(pod.uid) is None


def test_deleted_and_recreated_pod_is_never_written(node: Node, other_client: HttpKubeClient) -> None:
    m, client = node.manager, node.client
    old = create(other_client, node, containers=("app",))
    m.set_pod_status(old, agent_status(old, [running(old, "app")]))
    m.sync_batch()
    assert client.get_pod(NS, old.name).status.phase == "Running"

    # Deleted and recreated under the same name by someone else: a new UID.
    other_client.delete_pod(NS, old.name, grace_period_seconds=0, uid=old.uid)
    new = other_client.create_pod(pod_manifest(old.name, containers=("app",)))
    assert new.uid != old.uid
    before = other_client.get_pod(NS, new.name)

    # The node still has a change for the old pod.
    m.set_container_readiness(old.uid, cid(old, "app"), True)
    first = len(client.calls)
    m.sync_batch(all=True)
    # kubelet mode reads first and sees the new UID; the fast path writes from its last copy
    # of the old pod: the resourceVersion precondition refuses it (409), then it reads.
    expected = ["get"] if node.manager.options.skip_get is False else ["patch", "get"]
    assert [method for method, _, _ in client.calls[first:]] == expected
    after = other_client.get_pod(NS, new.name)
    assert after.uid == new.uid
    assert after.metadata.resource_version == before.metadata.resource_version, "the new pod was written to"
    assert after.status.to_dict() == before.status.to_dict()
    assert (
        after.status.phase == "Pending"
        and not after.status.conditions
        and not after.status.container_statuses
    )
    assert m.get_pod_status(old.uid) is None, "the manager kept the status of the deleted pod"
    # Every patch sent for the name carried the old UID (and was refused after the recreation).
    patches = [kw for method, name, kw in client.calls if method == "patch" and name == old.name]
    assert all(p["patch"]["metadata"]["uid"] == old.uid for p in patches)


def test_fast_path_requests_and_conflict(real_apiserver: str, other_client: HttpKubeClient) -> None:
    client = RecordingClient.from_kubeconfig(real_apiserver)
    pods = BasicPodManager()
    m = new_manager(client, pods, FakePodDeletionSafety(), fast_path=True)
    try:
        pod = client.create_pod(pod_manifest(unique("fast"), containers=("app",)))
        pods.add_pod(pod)

        # First write: from the pod manager's copy (as a watch would give it), no GET.
        before = client.requests.snapshot()
        m.set_pod_status(pod, agent_status(pod, [running(pod, "app")]))
        m.sync_batch()
        after = client.requests.snapshot()
        assert _delta(before, after) == {"patch": 1}

        # A second change: one PATCH (resourceVersion precondition), no GET.
        before = after
        m.set_container_readiness(pod.uid, cid(pod, "app"), True)
        m.sync_batch()
        after = client.requests.snapshot()
        assert _delta(before, after) == {"patch": 1}
        last = [kw for method, _, kw in client.calls if method == "patch"][-1]
        assert last["resource_version"] and last["patch"]["metadata"]["uid"] == pod.uid

        # Another client writes meanwhile: PATCH -> 409 Conflict -> GET -> PATCH.
        other_client.patch_pod_status(
            NS, pod.name, json.dumps({"status": {"conditions": [{"type": GATE, "status": "True"}]}}).encode()
        )
        before = after
        m.set_container_readiness(pod.uid, cid(pod, "app"), False)
        m.sync_batch()
        after = client.requests.snapshot()
        assert _delta(before, after) == {"patch": 2, "get": 1}
        assert client.verbs(pod.name)[-3:] == ["patch", "get", "patch"]

        server = client.get_pod(NS, pod.name)
        cached = m.get_pod_status(pod.uid)
        assert cached is not None
        assert condition(server.status, "Ready").status == "False"
        assert condition(server.status, GATE).status == "True"
        assert_server_has(server, cached, other_conditions=(GATE,))
        assert m.pending_count() == 0
    finally:
        m.stop(timeout=2)
        client.close()


def test_kubelet_mode_gets_before_every_patch(real_apiserver: str, other_client: HttpKubeClient) -> None:
    client = RecordingClient.from_kubeconfig(real_apiserver)
    pods = BasicPodManager()
    m = new_manager(client, pods, FakePodDeletionSafety())
    try:
        pod = client.create_pod(pod_manifest(unique("kmode"), containers=("app",)))
        pods.add_pod(pod)
        m.set_pod_status(pod, agent_status(pod, [running(pod, "app")]))
        m.sync_batch()
        m.set_container_readiness(pod.uid, cid(pod, "app"), True)
        m.sync_batch()
        assert client.verbs(pod.name) == ["get", "patch", "get", "patch"]
        # The agent's watch brings the pod as it is on the server; nothing new: a full pass
        # reads and sends nothing. (With a stale pod in the pod manager it would GET to reconcile.)
        pods.update_pod(other_client.get_pod(NS, pod.name))
        m.sync_batch(all=True)
        assert client.verbs(pod.name) == ["get", "patch", "get", "patch"]
    finally:
        m.stop(timeout=2)
        client.close()


def test_status_without_qos_class(node: Node, other_client: HttpKubeClient) -> None:
    """A node agent that does not set qosClass (the server set it at creation).

    The real server's qosClass is immutable: a patch that removes it (``"qosClass": null``)
    is refused with 422. The manager must not send one, or the pod never gets a status.
    """
    m, client = node.manager, node.client
    pod = create(other_client, node, containers=("app",))
    status = agent_status(pod, [running(pod, "app")]).replace(qos_class=None)
    m.set_pod_status(pod, status)
    m.sync_batch()
    server = client.get_pod(NS, pod.name)
    assert server.status.qos_class == "BestEffort"
    assert server.status.phase == "Running", [
        kw.get("patch") for meth, n, kw in client.calls if meth == "patch"
    ]


def _delta(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    return {k: after.get(k, 0) - before.get(k, 0) for k in after if after.get(k, 0) != before.get(k, 0)}
