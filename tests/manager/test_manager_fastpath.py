"""The opt-in options of SPEC 6: skip_get, prioritize, backoff, workers."""

from __future__ import annotations

import threading
import time
from collections import Counter

import pytest
from mgrkit import NOW, World, by_mode, cid, drain, make_pod, running_status, wait_for

from podstatus import ConflictError, InternalServerError, Pod, PodStatus, new_manager

# --- skip_get: write from the last pod known to be on the server ------------------------------


def test_every_patch_carries_the_servers_resource_version(world: World) -> None:
    pod = world.add(make_pod("a", containers=("app", "side")))
    m = world.manager("fast")
    seen: list[str] = []
    for ready in ({"app": False, "side": False}, {"app": True, "side": False}, {"app": True, "side": True}):
        seen.append(world.server(pod).metadata.resource_version or "")
        m.set_pod_status(pod, running_status(pod, ready=ready))
        assert m.sync_batch() == 1
    assert world.verbs() == ["patch", "patch", "patch"]
    assert [body["metadata"]["resourceVersion"] for body in world.client.patches()] == seen
    assert len(set(seen)) == 3  # each write moved the server on
    assert all(body["metadata"]["uid"] == pod.uid for body in world.client.patches())


def test_kubelet_mode_sends_no_resource_version(world: World) -> None:
    pod = world.add(make_pod("a"))
    m = world.manager()
    m.set_pod_status(pod, running_status(pod))
    m.sync_batch()
    assert world.client.patches()[0]["metadata"] == {"uid": pod.uid}


def test_first_write_reads_when_the_pod_manager_copy_has_no_resource_version(world: World) -> None:
    pod = world.add(make_pod("a"), to_pod_manager=False)
    world.pods.add_pod(make_pod("a"))
    m = world.manager("fast")
    m.set_pod_status(pod, running_status(pod))
    m.sync_batch()
    assert world.verbs() == ["get", "patch"]
    m.set_pod_status(pod, running_status(pod, ready=False))
    m.sync_batch()
    assert world.verbs() == ["get", "patch", "patch"]


def test_conflict_reads_again_then_patches(world: World) -> None:
    pod = world.add(make_pod("a"))
    m = world.manager("fast")
    m.set_pod_status(pod, running_status(pod))
    m.sync_batch()
    stale = world.server(pod).metadata.resource_version
    # Another writer changes the pod; our copy and the pod manager's are now stale.
    other = world.server(pod)
    world.client.put_pod(other.replace(metadata=other.metadata.replace(labels={"touched": "yes"})))
    fresh = world.server(pod).metadata.resource_version
    assert fresh != stale
    world.clear()

    m.set_pod_status(pod, running_status(pod, ready=False))
    assert m.sync_batch() == 1
    assert world.verbs() == ["patch", "get", "patch"]
    first, second = world.client.patches()
    assert first["metadata"]["resourceVersion"] == stale
    assert second["metadata"]["resourceVersion"] == fresh
    assert first["status"] == second["status"]
    assert world.server(pod).metadata.labels == {"touched": "yes"}
    assert world.server_status(pod).to_dict() == m.get_pod_status(pod.uid).to_dict()  # type: ignore[union-attr]
    assert m.pending_count() == 0


def test_a_newer_pod_manager_copy_is_the_base(world: World) -> None:
    pod = world.add(make_pod("a"))
    m = world.manager("fast")
    m.set_pod_status(pod, running_status(pod))
    m.sync_batch()
    other = world.server(pod)
    world.client.put_pod(other.replace(metadata=other.metadata.replace(labels={"touched": "yes"})))
    fresh = world.refresh(pod)  # the watch saw the newer version
    world.clear()
    m.set_pod_status(pod, running_status(pod, ready=False))
    m.sync_batch()
    # Written from the pod manager's copy, not read again; its resourceVersion is the precondition.
    assert world.verbs() == ["patch"]
    assert world.client.patches()[0]["metadata"] == {
        "uid": pod.uid,
        "resourceVersion": fresh.metadata.resource_version,
    }
    assert world.server(pod).metadata.labels == {"touched": "yes"}
    assert world.server_status(pod).to_dict() == m.get_pod_status(pod.uid).to_dict()  # type: ignore[union-attr]


def test_deletion_seen_by_the_watch_is_patch_and_delete_without_get(world: World) -> None:
    pod = world.add(make_pod("a"))
    m = world.manager("fast")
    m.set_pod_status(pod, running_status(pod))
    m.sync_batch()
    # The API server marks the pod for deletion; the watch delivers it to the pod manager.
    on_server = world.server(pod)
    world.client.put_pod(
        on_server.replace(
            metadata=on_server.metadata.replace(deletion_timestamp=NOW, deletion_grace_period_seconds=30)
        )
    )
    deleting = world.refresh(pod)
    world.clear()
    m.terminate_pod(deleting)
    assert m.sync_batch() == 1
    assert world.verbs() == ["patch", "delete"]
    assert world.client.patches()[0]["metadata"]["resourceVersion"] == deleting.metadata.resource_version
    assert world.client.requests[-1] == ("delete", "default", "a", 0, pod.uid)
    assert world.client.pod("default", "a") is None
    assert m.get_pod_status(pod.uid) is None


def test_a_stale_pod_manager_copy_conflicts_then_reads(world: World) -> None:
    pod = world.add(make_pod("a"))
    m = world.manager("fast")
    m.set_pod_status(pod, running_status(pod))
    m.sync_batch()
    other = world.server(pod)
    world.client.put_pod(other.replace(metadata=other.metadata.replace(labels={"touched": "1"})))
    seen = world.refresh(pod)  # the watch saw this version ...
    other = world.server(pod)
    world.client.put_pod(other.replace(metadata=other.metadata.replace(labels={"touched": "2"})))
    fresh = world.server(pod)  # ... but not this one yet
    world.clear()
    m.set_pod_status(pod, running_status(pod, ready=False))
    assert m.sync_batch() == 1
    assert world.verbs() == ["patch", "get", "patch"]
    first, second = world.client.patches()
    assert first["metadata"]["resourceVersion"] == seen.metadata.resource_version
    assert second["metadata"]["resourceVersion"] == fresh.metadata.resource_version
    assert world.server(pod).metadata.labels == {"touched": "2"}
    assert m.pending_count() == 0


def test_recreated_behind_a_newer_pod_manager_copy_is_never_written(world: World) -> None:
    pod = world.add(make_pod("a"))
    m = world.manager("fast")
    m.set_pod_status(pod, running_status(pod))
    m.sync_batch()
    other = world.server(pod)
    world.client.put_pod(other.replace(metadata=other.metadata.replace(labels={"touched": "yes"})))
    world.refresh(pod)
    # Then deleted and recreated; the watch has not delivered that yet.
    world.client.remove(pod.namespace, pod.name)
    new_pod = world.client.add_pod(make_pod("a", uid="uid-a-2", status=PodStatus(phase="Pending")))
    world.clear()
    m.set_pod_status(pod, running_status(pod, ready=False))
    m.sync_batch()
    # The UID precondition refuses the write; the GET sees the new UID and drops the status.
    assert world.verbs() == ["patch", "get"]
    assert all(body["metadata"]["uid"] == pod.uid for body in world.client.patches())
    assert m.get_pod_status(pod.uid) is None
    now = world.server(new_pod)
    assert now.uid == "uid-a-2"
    assert now.metadata.resource_version == new_pod.metadata.resource_version


def test_unordered_resource_versions_read_first(world: World) -> None:
    pod = world.add(make_pod("a"))
    m = world.manager("fast")
    m.set_pod_status(pod, running_status(pod))
    m.sync_batch()
    # A pod manager copy whose resourceVersion cannot be compared with ours: ask the server.
    known = world.server(pod)
    world.pods.update_pod(known.replace(metadata=known.metadata.replace(resource_version="opaque")))
    world.clear()
    m.set_pod_status(pod, running_status(pod, ready=False))
    m.sync_batch()
    assert world.verbs() == ["get", "patch"]


def test_two_conflicts_give_up_until_the_next_pass(world: World) -> None:
    pod = world.add(make_pod("a"))
    m = world.manager("fast")
    m.set_pod_status(pod, running_status(pod))
    world.client.fail_next("patch", ConflictError("modified"), times=2)
    m.sync_batch()
    assert world.verbs() == ["patch", "get", "patch"]
    assert m.pending_count() == 1
    world.clear()
    m.sync_batch(all=True)
    assert world.verbs()[-1] == "patch"
    assert m.pending_count() == 0


# --- prioritize -----------------------------------------------------------------------------------


def _patched_names(world: World) -> list[str]:
    return [r[2] for r in world.client.requests if r[0] == "patch"]


@pytest.mark.parametrize("prioritize", [True, False])
def test_readiness_and_terminal_transitions_go_first(world: World, prioritize: bool) -> None:
    pods = [world.add(make_pod(n)) for n in ("a", "b", "c", "d", "e")]
    m = world.manager("fast", workers=1, prioritize=prioritize)
    for p in pods:
        m.set_pod_status(p, running_status(p))
    m.sync_batch()
    world.clear()
    a, b, c, d, e = pods
    m.set_pod_status(a, running_status(a, message="cosmetic"))
    m.set_pod_status(b, running_status(b, pod_ip="10.0.0.2"))
    m.set_container_readiness(c.uid, cid(c, "app"), False)  # readiness flipped
    m.set_pod_status(d, running_status(d, message="cosmetic"))
    m.set_pod_status(e, running_status(e, phase="Succeeded", ready=False))  # finished
    assert m.sync_batch() == 5
    order = _patched_names(world)
    assert sorted(order) == ["a", "b", "c", "d", "e"]
    if prioritize:
        assert sorted(order[:2]) == ["c", "e"]
        assert order[2:] == ["a", "b", "d"]
    else:
        assert order == ["a", "b", "c", "d", "e"]


def test_priority_is_cleared_once_synced(world: World) -> None:
    pods = [world.add(make_pod(n)) for n in ("a", "b")]
    m = world.manager("fast", workers=1)
    for p in pods:
        m.set_pod_status(p, running_status(p))
    m.sync_batch()
    a, b = pods
    m.set_container_readiness(b.uid, cid(b, "app"), False)
    m.sync_batch()
    world.clear()
    # b's readiness flip is on the server: a cosmetic change of b no longer jumps the queue.
    m.set_pod_status(a, running_status(a, message="x"))
    m.set_pod_status(b, running_status(b, ready=False, message="y"))
    m.sync_batch()
    assert _patched_names(world) == ["a", "b"]


# --- backoff ---------------------------------------------------------------------------------------


def test_failing_pod_is_not_retried_on_every_pass(world: World, mode: str) -> None:
    pod = world.add(make_pod("a"))
    ok = world.add(make_pod("b"))
    m = world.manager(mode)
    m.set_pod_status(pod, running_status(pod))

    def fail_a(verb: str, namespace: str, name: str) -> None:
        if name == "a":
            raise InternalServerError("boom")

    world.client.before_request(fail_a)
    for _ in range(5):
        m.sync_batch(all=False)
    requests_for_a = [r for r in world.client.requests if r[2] == "a"]
    # kubelet: one GET per pass; backoff: one try, then it waits its turn.
    assert len(requests_for_a) == by_mode(mode, kubelet=5, fast=1)
    assert m.get_pod_status(pod.uid) is not None

    # Other pods are not held up by the failing one.
    world.clear()
    m.set_pod_status(ok, running_status(ok))
    m.sync_batch()
    assert [r[2] for r in world.client.requests if r[0] == "patch"] == ["b"]

    # A full pass still tries it (backoff only skips ordinary passes).
    world.clear()
    m.sync_batch(all=True)
    assert [r[2] for r in world.client.requests].count("a") == 1


def test_backoff_expires(world: World) -> None:
    pod = world.add(make_pod("a"))
    m = world.manager("fast", backoff_base=0.02)
    m.set_pod_status(pod, running_status(pod))
    world.client.fail_next("patch", InternalServerError("boom"))
    m.sync_batch()
    assert m.pending_count() == 1
    time.sleep(0.05)
    world.clear()
    assert m.sync_batch() == 1
    assert world.verbs() == ["patch"]
    assert m.pending_count() == 0


def test_gone_pod_not_asked_again_until_its_status_changes(world: World) -> None:
    pod = world.add(make_pod("a"))
    world.client.remove("default", "a")
    m = world.manager("fast")
    m.set_pod_status(pod, running_status(pod))
    m.sync_batch()
    assert world.verbs() == ["patch"]
    for _ in range(3):
        assert m.sync_batch() == 0
    assert m.sync_batch(all=True) == 0
    assert world.verbs() == ["patch"]
    m.set_pod_status(pod, running_status(pod, ready=False))
    assert m.sync_batch() == 1
    assert len(world.verbs()) == 2
    # It came back: the next change reaches it.
    world.client.add_pod(make_pod("a"))
    m.set_pod_status(pod, running_status(pod, ready=True))
    assert m.sync_batch() == 1
    assert world.server_status(pod).to_dict() == m.get_pod_status(pod.uid).to_dict()  # type: ignore[union-attr]


# --- workers ---------------------------------------------------------------------------------------


def test_many_workers_get_every_pod_to_the_server(world: World) -> None:
    pods = [world.add(make_pod(f"p{i:02d}")) for i in range(40)]
    m = world.manager("fast", workers=4, sync_period=60)
    m.start()
    for p in pods:
        m.set_pod_status(p, running_status(p))

    def all_there() -> bool:
        return all(world.server_status(p).phase == "Running" for p in pods)

    assert wait_for(all_there, timeout=10)
    m.stop(timeout=5)
    for p in pods:
        assert world.server_status(p).to_dict() == m.get_pod_status(p.uid).to_dict()  # type: ignore[union-attr]
    assert Counter(world.verbs())["patch"] == 40


class InFlight:
    """A before_request hook that tracks concurrent requests per pod and widens the window."""

    def __init__(self, hold: float = 0.002) -> None:
        self.lock = threading.Lock()
        self.current: Counter[str] = Counter()
        self.max: Counter[str] = Counter()
        self.hold = hold
        self.total = 0

    def __call__(self, verb: str, namespace: str, name: str) -> None:
        with self.lock:
            self.current[name] += 1
            self.max[name] = max(self.max[name], self.current[name])
            self.total += 1
        time.sleep(self.hold)
        with self.lock:
            self.current[name] -= 1


def test_never_two_syncs_of_one_pod_at_once(world: World) -> None:
    pods = [world.add(make_pod(f"p{i}")) for i in range(4)]
    m = world.manager("fast", workers=4, sync_period=0.05)
    hook = InFlight()
    world.client.before_request(hook)
    m.start()
    deadline = time.monotonic() + 1.0
    n = 0
    while time.monotonic() < deadline:
        for p in pods:
            m.set_pod_status(p, running_status(p, pod_ip=f"10.0.{n % 250}.1"))
        n += 1
        time.sleep(0.001)
    m.stop(timeout=5)
    drain(m)
    assert hook.total > 20, "the test did not exercise the workers"
    assert max(hook.max.values()) == 1, dict(hook.max)
    for p in pods:
        assert world.server_status(p).to_dict() == m.get_pod_status(p.uid).to_dict()  # type: ignore[union-attr]


class PlainClient:
    """Only the three methods of SPEC 2.4 (no ``resource_version``), served by the world's fake."""

    def __init__(self, world: World) -> None:
        self._client = world.client

    def get_pod(self, namespace: str, name: str) -> Pod:
        return self._client.get_pod(namespace, name)

    def patch_pod_status(self, namespace: str, name: str, patch: bytes) -> Pod:
        return self._client.patch_pod_status(namespace, name, patch)

    def delete_pod(
        self, namespace: str, name: str, *, grace_period_seconds: int | None, uid: str | None
    ) -> None:
        self._client.delete_pod(namespace, name, grace_period_seconds=grace_period_seconds, uid=uid)


def test_skip_get_refuses_a_client_that_cannot_send_a_resource_version(world: World) -> None:
    with pytest.raises(TypeError, match="resource_version"):
        new_manager(PlainClient(world), world.pods, world.safety, skip_get=True)
    with pytest.raises(TypeError, match="resource_version"):
        new_manager(PlainClient(world), world.pods, world.safety, fast_path=True)


def test_a_plain_client_syncs_the_kubelets_way(world: World) -> None:
    pod = world.add(make_pod("a"))
    m = new_manager(PlainClient(world), world.pods, world.safety)
    m.set_pod_status(pod, running_status(pod))
    assert m.sync_batch() == 1
    assert world.verbs() == ["get", "patch"]
    assert world.client.patches()[0]["metadata"] == {"uid": pod.uid}
