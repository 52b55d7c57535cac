"""v1.37 behaviour of the manager seen from a server: the embedded API server on loopback,
reached over HTTP by the library's client, with the kubelet's options (no fast path).

Each case of issue 21 that made podstatus send requests forever (or wait for a full
resync) is checked by the requests the client counted.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from podstatus import BasicPodManager, Pod, PodCondition, PodStatus, new_manager
from podstatus.clients.http import HttpKubeClient
from podstatus.deletion import FakePodDeletionSafety
from podstatus.requestcount import RequestCounter
from podstatus.server import EmbeddedApiServer

NS = "v137"
_names = itertools.count()


@pytest.fixture(scope="module")
def server() -> Iterator[EmbeddedApiServer]:
    srv = EmbeddedApiServer("127.0.0.1", 0)
    srv.start()
    srv.store.ensure_namespace(NS)
    yield srv
    srv.stop()


class Node:
    """A manager, its pod manager and a counting client, as a node agent holds them."""

    def __init__(self, server: EmbeddedApiServer) -> None:
        self.requests = RequestCounter()
        self.client = HttpKubeClient(server.url, timeout=(2.0, 10.0), requests=self.requests)
        # A second client for the other writers of the world (controllers, kubectl).
        self.other = HttpKubeClient(server.url, timeout=(2.0, 10.0))
        self.pods = BasicPodManager()
        self.manager = new_manager(self.client, self.pods, FakePodDeletionSafety())

    def counts(self) -> dict[str, int]:
        return {verb: self.requests.get(verb) for verb in ("get", "patch")}

    def create(self, extra_spec: dict[str, Any] | None = None, **meta: Any) -> Pod:
        body = {
            "metadata": {"name": f"p-{next(_names)}", "namespace": NS, **meta},
            "spec": {
                "nodeName": "node-1",
                "containers": [{"name": "app", "image": "busybox"}],
                **(extra_spec or {}),
            },
        }
        pod = self.other.create_pod(Pod.from_dict(body))
        self.pods.add_pod(pod)
        return pod

    def watch(self, pod: Pod) -> Pod:
        """Feed the pod manager the server's copy (what the agent's watch does)."""
        fresh = self.other.get_pod(pod.namespace, pod.name)
        self.pods.update_pod(fresh)
        return fresh

    def close(self) -> None:
        self.client.close()
        self.other.close()


@pytest.fixture
def node(server: EmbeddedApiServer) -> Iterator[Node]:
    n = Node(server)
    yield n
    n.close()


def running(pod: Pod) -> PodStatus:
    return PodStatus.from_dict(
        {
            "phase": "Running",
            "conditions": [
                {"type": "Initialized", "status": "True"},
                {"type": "Ready", "status": "True"},
                {"type": "ContainersReady", "status": "True"},
                {"type": "PodScheduled", "status": "True"},
            ],
            # What the kubelet always writes (the server fills them in otherwise).
            "podIP": "10.0.0.9",
            "podIPs": [{"ip": "10.0.0.9"}],
            "qosClass": "BestEffort",
            "containerStatuses": [
                {
                    "name": "app",
                    "ready": True,
                    "restartCount": 0,
                    "image": "busybox",
                    "imageID": "docker.io/library/busybox@sha256:1",
                    "containerID": f"containerd://{pod.uid}",
                    "started": True,
                    "state": {"running": {"startedAt": "2024-05-01T10:00:00Z"}},
                }
            ],
        }
    )


def settle(node: Node, pod: Pod) -> dict[str, int]:
    """Two full resyncs after the pod manager saw the server's copy: the requests they sent."""
    node.watch(pod)
    before = node.counts()
    node.manager.sync_batch(all=True)
    node.watch(pod)
    node.manager.sync_batch(all=True)
    after = node.counts()
    return {verb: after[verb] - before[verb] for verb in after}


def test_sub_second_times_of_a_pod_object_are_cut_once(node: Node) -> None:
    # The pod object the agent hands over carries sub-second times (built locally, never
    # read back): the times taken over from it are normalised, so the first write is the last.
    pod = node.create()
    sub = datetime(2024, 5, 1, 9, 30, 15, 734_000, tzinfo=UTC)
    local = pod.replace(
        status=PodStatus(
            phase="Pending",
            start_time=sub,
            conditions=(PodCondition(type="PodScheduled", status="True", last_transition_time=sub),),
        )
    )
    node.manager.set_pod_status(local, running(pod))
    cached = node.manager.get_pod_status(pod.uid)
    assert cached is not None and cached.start_time == sub.replace(microsecond=0)
    assert node.manager.sync_batch() == 1
    assert node.counts() == {"get": 1, "patch": 1}
    on_server = node.watch(pod).status
    assert on_server.start_time == sub.replace(microsecond=0)
    assert settle(node, pod) == {"get": 0, "patch": 0}


@pytest.mark.parametrize(
    ("claims_patch", "spec"),
    [
        (
            {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "gpu-claim"}]},
            {"resourceClaims": [{"name": "gpu", "resourceClaimName": "gpu-claim"}]},
        ),
    ],
)
def test_claims_written_by_others_do_not_cause_reads_forever(
    node: Node, claims_patch: dict[str, Any], spec: dict[str, Any]
) -> None:
    pod = node.create(spec)
    # The scheduler's side writes the claim statuses; the kubelet never has them.
    node.other.patch_pod_status(NS, pod.name, json.dumps({"status": claims_patch}).encode())
    node.manager.set_pod_status(node.watch(pod), running(pod))
    node.manager.sync_batch()
    assert node.watch(pod).status.resource_claim_statuses == claims_patch["resourceClaimStatuses"]
    assert settle(node, pod) == {"get": 0, "patch": 0}


def test_a_recreated_mirror_pod_is_synced_by_the_next_pass(node: Node) -> None:
    # A static pod's status goes to its mirror pod; when the mirror is recreated (new UID) and
    # the pod manager learns it, the next pass (not only the full resync) writes to it.
    static = Pod.from_dict(
        {
            "metadata": {
                "name": "static-web",
                "namespace": NS,
                "uid": "static-uid",
                "annotations": {"kubernetes.io/config.source": "file"},
            },
            "spec": {"nodeName": "node-1", "containers": [{"name": "app", "image": "busybox"}]},
        }
    )
    mirror_meta = {"annotations": {"kubernetes.io/config.source": "file", "kubernetes.io/config.mirror": "h"}}
    node.pods.add_pod(static)
    first = node.other.create_pod(
        Pod.from_dict(
            {
                "metadata": {"name": "static-web", "namespace": NS, **mirror_meta},
                "spec": static.spec.to_dict(),
            }
        )
    )
    node.pods.add_pod(first)
    node.manager.set_pod_status(static, running(static))
    assert node.manager.sync_batch() == 1
    # The mirror pod is deleted and made again, as the kubelet does when someone deletes it.
    node.other.delete_pod(NS, "static-web", grace_period_seconds=0)
    node.pods.remove_pod(first)
    second = node.other.create_pod(
        Pod.from_dict(
            {
                "metadata": {"name": "static-web", "namespace": NS, **mirror_meta},
                "spec": static.spec.to_dict(),
            }
        )
    )
    assert second.uid != first.uid
    node.pods.add_pod(second)
    before = node.counts()
    assert node.manager.sync_batch(all=False) == 1
    assert node.counts()["patch"] == before["patch"] + 1
    assert node.other.get_pod(NS, "static-web").status.phase == "Running"


def test_observed_generation_follows_the_pod(node: Node) -> None:
    pod = node.create()
    assert pod.metadata.generation == 1
    node.manager.set_pod_status(pod, running(pod))
    node.manager.sync_batch()
    assert node.watch(pod).status.observed_generation == 1
    # A spec change (here the deadline) bumps the generation; the next status reports it.
    node.other.patch_pod(NS, pod.name, b'{"spec": {"activeDeadlineSeconds": 600}}')
    newer = node.watch(pod)
    assert newer.metadata.generation == 2
    node.manager.set_pod_status(newer, running(newer))
    node.manager.sync_batch()
    assert node.watch(pod).status.observed_generation == 2
    assert settle(node, pod) == {"get": 0, "patch": 0}


def test_allocated_resources_and_resources_of_containers_reach_the_server(node: Node) -> None:
    # What the kubelet writes for an in-place resize: per container, what it allocated and applied.
    pod = node.create(
        {"containers": [{"name": "app", "image": "busybox", "resources": {"requests": {"cpu": "200m"}}}]}
    )
    status = running(pod)
    resized = status.to_dict()
    resized["containerStatuses"][0]["allocatedResources"] = {"cpu": "200m"}
    resized["containerStatuses"][0]["resources"] = {"requests": {"cpu": "200m"}}
    resized["qosClass"] = "Burstable"
    node.manager.set_pod_status(node.watch(pod), PodStatus.from_dict(resized))
    node.manager.sync_batch()
    got = node.watch(pod).status.to_dict()["containerStatuses"][0]
    assert got["allocatedResources"] == {"cpu": "200m"}
    assert got["resources"] == {"requests": {"cpu": "200m"}}
    cached = node.manager.get_pod_status(pod.uid)
    assert cached is not None and cached.container_statuses is not None
    assert cached.container_statuses[0].allocated_resources == {"cpu": "200m"}
    assert settle(node, pod) == {"get": 0, "patch": 0}
