"""sync_batch (SPEC 4.4), syncing one pod (4.5), the deletion handshake (4.6), faults (7).

Each test asserts the exact requests the fake API server saw (STYLE 10).
"""

from __future__ import annotations

from typing import Any

import pytest
from mgrkit import (
    MIRROR_ANNOTATIONS,
    NOW,
    STATIC_ANNOTATIONS,
    World,
    by_mode,
    cid,
    condition,
    container_status,
    get_cond,
    make_pod,
    running,
    running_status,
    sidecar,
    terminated,
)

from podstatus import (
    ApiError,
    ConflictError,
    ConnectionFailedError,
    InternalServerError,
    InvalidObjectError,
    NotFoundError,
    PodStatus,
    RequestTimeoutError,
    ServiceUnavailableError,
    TooManyRequestsError,
    new_manager,
)
from podstatus.manager import sync as manager_sync


def _synced(world: World, mode: str, *names: str, **options: Any) -> tuple[Any, list[Any]]:
    """A manager with one synced running status per pod; requests cleared."""
    pods = [world.add(make_pod(n)) for n in names]
    m = world.manager(mode, **options)
    for p in pods:
        m.set_pod_status(p, running_status(p))
    assert m.sync_batch() == len(pods)
    assert m.pending_count() == 0
    world.clear()
    return m, pods


def _patch_uids(world: World) -> list[str]:
    return [body["metadata"]["uid"] for body in world.client.patches()]


# --- sync_batch ---------------------------------------------------------------------------


def test_sync_batch_without_all_syncs_only_newer_versions(world: World, mode: str) -> None:
    m, (_, b, _) = _synced(world, mode, "a", "b", "c")
    assert m.sync_batch() == 0
    assert world.verbs() == []
    m.set_pod_status(b, running_status(b, ready=False))
    assert m.sync_batch() == 1
    assert world.verbs() == by_mode(mode, kubelet=["get", "patch"], fast=["patch"])
    assert [r[2] for r in world.client.requests] == ["b"] * len(world.client.requests)
    assert world.server_status(b).to_dict() == m.get_pod_status(b.uid).to_dict()


def test_sync_batch_all_leaves_agreeing_pods_alone(world: World, mode: str) -> None:
    m, pods = _synced(world, mode, "a", "b")
    for p in pods:
        world.refresh(p)  # the pod manager sees what the server has
    assert m.sync_batch(all=True) == 0
    assert world.verbs() == []


def test_sync_batch_all_reconciles_a_status_changed_behind_our_back(world: World, mode: str) -> None:
    m, (a,) = _synced(world, mode, "a")
    # Someone else flips Ready on the server; the node agent's watch feeds the pod manager.
    other = world.server(a)
    tampered = other.status.replace(
        conditions=tuple(
            c.replace(status="False") if c.type == "Ready" else c for c in other.status.conditions or ()
        )
    )
    world.client.put_pod(other.replace(status=tampered))
    world.refresh(a)
    world.clear()

    assert m.sync_batch(all=False) == 0
    assert world.verbs() == []
    assert m.sync_batch(all=True) == 1
    # A reconcile never trusts a remembered copy: it reads first.
    assert world.verbs() == ["get", "patch"]
    assert get_cond(world.server_status(a), "Ready").status == "True"  # type: ignore[union-attr]
    assert world.server_status(a).to_dict() == m.get_pod_status(a.uid).to_dict()  # type: ignore[union-attr]


def _count_compares(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count the sync passes' kubelet-equality compares from now on."""
    real = manager_sync.is_pod_status_by_kubelet_equal
    calls: list[int] = []

    def counting(old: PodStatus, new: PodStatus) -> bool:
        calls.append(1)
        return real(old, new)

    monkeypatch.setattr(manager_sync, "is_pod_status_by_kubelet_equal", counting)
    return calls


def test_sync_batch_all_trusts_the_resource_version_a_sync_left(
    world: World, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The sync found the server's copy consistent with the cached status. The pod manager's copy at
    # that resourceVersion (another object, as a watch delivers it) holds the same status: no compare.
    m, pods = _synced(world, mode, "a", "b")
    for p in pods:
        world.refresh(p)
    calls = _count_compares(monkeypatch)
    assert m.sync_batch(all=True) == 0
    assert world.verbs() == []
    assert calls == []


def test_sync_batch_all_compares_a_copy_at_another_resource_version(
    world: World, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    m, (a,) = _synced(world, mode, "a")
    before = world.server(a).metadata.resource_version
    world.client.put_pod(world.server(a))  # same status, new resourceVersion (as a label change gives)
    assert world.refresh(a).metadata.resource_version != before
    calls = _count_compares(monkeypatch)
    assert m.sync_batch(all=True) == 0
    assert len(calls) == 1
    # Found consistent: a later pass, even with another copy at that resourceVersion, trusts it.
    world.refresh(a)
    assert m.sync_batch(all=True) == 0
    assert len(calls) == 1
    # A new cached status is compared (and synced) again.
    m.set_pod_status(a, running_status(a, ready=False))
    assert m.sync_batch(all=True) == 1
    assert world.server_status(a).to_dict() == m.get_pod_status(a.uid).to_dict()  # type: ignore[union-attr]


def test_sync_batch_all_trusts_nothing_a_delayed_terminal_sync_left(world: World, mode: str) -> None:
    # The move to a terminal phase was delayed: the server's copy differs from the cache, so the
    # resourceVersion of that sync vouches for nothing, and every full pass reconciles again.
    pod = world.add(make_pod("a", restart_policy="Never"))
    world.safety.set_could_have_running_containers(pod.uid, True)
    m = world.manager(mode)
    m.set_pod_status(pod, running_status(pod, phase="Succeeded", ready=False))
    assert m.sync_batch() == 1
    assert world.server_status(pod).phase != "Succeeded"
    world.refresh(pod)
    world.clear()
    assert m.sync_batch(all=True) == 1
    assert world.server_status(pod).phase != "Succeeded"
    world.safety.set_could_have_running_containers(pod.uid, None)
    world.refresh(pod)
    assert m.sync_batch(all=True) == 1
    assert world.server_status(pod).phase == "Succeeded"
    world.refresh(pod)
    world.clear()
    assert m.sync_batch(all=True) == 0
    assert world.verbs() == []


def test_failed_reconcile_is_retried_by_the_next_pass(world: World, mode: str) -> None:
    # backoff_base=0: this test is about the forgotten API version, not about backoff.
    m, (a,) = _synced(world, mode, "a", **by_mode(mode, kubelet={}, fast={"backoff_base": 0.0}))
    other = world.server(a)
    world.client.put_pod(other.replace(status=other.status.replace(pod_ip="10.9.9.9")))
    world.refresh(a)
    world.clear()

    world.client.fail_next("get", InternalServerError("etcd is sad"))
    assert m.sync_batch(all=True) == 1
    assert world.verbs() == ["get"]
    assert world.server_status(a).pod_ip == "10.9.9.9"
    assert m.pending_count() == 1  # the API version was forgotten

    world.clear()
    assert m.sync_batch(all=False) == 1
    # The fast path writes from the pod manager's copy (newer than its last write) instead of reading.
    assert world.verbs() == by_mode(mode, kubelet=["get", "patch"], fast=["patch"])
    assert world.server_status(a).pod_ip == "10.0.0.1"


def test_sync_batch_all_forgets_api_versions_of_unknown_uids(world: World, mode: str) -> None:
    m, (a,) = _synced(world, mode, "a")
    m.remove_orphaned_statuses([])
    m.sync_batch(all=True)  # forgets uid-a's API version: neither cached nor a mirror UID
    world.clear()
    # The same UID comes back with version 1: it must be synced, not taken as already on the server.
    m.set_pod_status(a, running_status(a, ready=False))
    assert m.get_status_version(a.uid) == 1
    assert m.sync_batch(all=False) == 1
    assert "patch" in world.verbs()
    assert get_cond(world.server_status(a), "Ready").status == "False"  # type: ignore[union-attr]


def test_sync_batch_all_keeps_api_versions_of_mirror_uids(world: World, mode: str) -> None:
    static = world.add(make_pod("s", uid="static-uid", annotations=STATIC_ANNOTATIONS), to_server=False)
    mirror = world.add(make_pod("s", uid="mirror-uid", annotations=MIRROR_ANNOTATIONS))
    m = world.manager(mode)
    m.set_pod_status(static, running_status(static))
    assert m.sync_batch() == 1
    world.refresh(mirror)  # the pod manager's mirror pod agrees with the cache
    world.clear()
    # "mirror-uid" is not a cached UID but a known mirror UID: its API version stays, nothing to do.
    assert m.sync_batch(all=True) == 0
    assert m.sync_batch(all=False) == 0
    assert world.verbs() == []


def test_sync_batch_returns_zero_without_a_client(world: World) -> None:
    pod = world.add(make_pod("a"))
    m = new_manager(None, world.pods, world.safety, clock=world.clock)
    m.set_pod_status(pod, running_status(pod))
    assert m.sync_batch() == 0
    assert m.sync_batch(all=True) == 0
    assert m.get_pod_status(pod.uid) is not None


# --- syncing one pod ------------------------------------------------------------------------


def test_pod_not_found_sends_nothing_and_keeps_the_status(world: World, mode: str) -> None:
    pod = world.add(make_pod("a"))
    world.client.remove("default", "a")
    m = world.manager(mode)
    m.set_pod_status(pod, running_status(pod))
    assert m.sync_batch() == 1
    # The fast path writes from the pod manager's copy; the server answers 404.
    assert world.verbs() == by_mode(mode, kubelet=["get"], fast=["patch"])
    assert m.get_pod_status(pod.uid) is not None
    assert world.client.pods() == []


def test_pod_not_found_is_asked_again_only_as_the_mode_says(world: World, mode: str) -> None:
    pod = world.add(make_pod("a"))
    world.client.remove("default", "a")
    m = world.manager(mode)
    m.set_pod_status(pod, running_status(pod))
    m.sync_batch()
    world.clear()
    for _ in range(3):
        m.sync_batch()
    m.sync_batch(all=True)
    # The kubelet asks on every pass; with backoff a pod that is gone is not asked again...
    assert world.verbs() == by_mode(mode, kubelet=["get"] * 4, fast=[])
    world.clear()
    # ...until its status changes.
    m.set_pod_status(pod, running_status(pod, ready=False))
    assert m.sync_batch() == 1
    assert len(world.verbs()) == 1


ERRORS = [
    InternalServerError("boom"),
    ServiceUnavailableError("unavailable"),
    TooManyRequestsError("slow down"),
    ConnectionFailedError("connection refused"),
    RequestTimeoutError("timed out"),
    ApiError("odd", code=418),
]


@pytest.mark.parametrize("error", ERRORS, ids=lambda e: type(e).__name__ + str(e.code))
@pytest.mark.parametrize("verb", ["get", "patch"])
def test_api_error_then_retry(world: World, mode: str, verb: str, error: ApiError) -> None:
    pod = make_pod("a")
    if verb == "get":
        # Make the fast path read too: the pod manager's copy has no resourceVersion.
        world.add(pod, to_pod_manager=False)
        world.pods.add_pod(pod)
    else:
        pod = world.add(pod)
    m = world.manager(mode)
    status = running_status(pod)
    m.set_pod_status(pod, status)
    cached = m.get_pod_status(pod.uid)
    world.client.fail_next(verb, error)

    assert m.sync_batch() == 1
    first = world.verbs()
    assert first[-1] == verb
    assert world.server_status(pod).phase == "Pending"
    assert m.get_pod_status(pod.uid) is cached  # nothing cached is lost
    assert m.pending_count() == 1

    world.clear()
    if mode == "fast":
        # Backoff: the failed pod waits out its delay in ordinary passes...
        assert m.sync_batch(all=False) == 0
        assert world.verbs() == []
        # ...and is retried by the full pass.
        assert m.sync_batch(all=True) == 1
    else:
        assert m.sync_batch(all=False) == 1
    assert world.verbs()[-1] == "patch"
    assert m.pending_count() == 0
    assert world.server_status(pod).to_dict() == cached.to_dict()  # type: ignore[union-attr]


def test_conflict_on_patch_is_retried_in_kubelet_mode(world: World) -> None:
    pod = world.add(make_pod("a"))
    m = world.manager()
    m.set_pod_status(pod, running_status(pod))
    world.client.fail_next("patch", ConflictError("the object has been modified"))
    m.sync_batch()
    assert world.verbs() == ["get", "patch"]
    world.clear()
    m.sync_batch()
    assert world.verbs() == ["get", "patch"]
    assert world.server_status(pod).phase == "Running"


def test_invalid_pod_from_server_is_logged_and_retried(world: World) -> None:
    pod = world.add(make_pod("a"))
    m = world.manager()
    m.set_pod_status(pod, running_status(pod))
    world.client.fail_next("get", InvalidObjectError("bad pod", path="status.phase"))
    m.sync_batch()
    assert world.verbs() == ["get"]
    world.clear()
    m.sync_batch()
    assert world.verbs() == ["get", "patch"]


def _recreate(world: World, pod: Any, new_uid: str) -> Any:
    world.client.remove(pod.namespace, pod.name)
    fresh = make_pod(pod.name, uid=new_uid, status=PodStatus(phase="Pending", message="the new pod"))
    return world.client.add_pod(fresh)


def _assert_new_pod_untouched(world: World, new_pod: Any) -> None:
    now = world.client.pod(new_pod.namespace, new_pod.name)
    assert now is not None
    assert now.uid == new_pod.uid
    assert now.status == new_pod.status
    assert now.metadata.resource_version == new_pod.metadata.resource_version


def test_recreated_pod_drops_the_status_and_is_never_written(world: World, mode: str) -> None:
    pod = world.add(make_pod("a"))
    m = world.manager(mode)
    m.set_pod_status(pod, running_status(pod))
    new_pod = _recreate(world, pod, "uid-a-2")
    # The watch delivers the new pod; the old one is gone from the pod manager.
    world.pods.remove_pod(pod)
    world.pods.add_pod(new_pod)

    assert m.sync_batch() == 1
    assert world.verbs() == ["get"]
    assert m.get_pod_status(pod.uid) is None
    assert m.get_pod_status(new_pod.uid) is None
    _assert_new_pod_untouched(world, new_pod)
    assert m.sync_batch(all=True) == 0


def test_recreated_pod_unknown_to_the_pod_manager(world: World, mode: str) -> None:
    # The watch has not caught up: the pod manager still has the old pod.
    pod = world.add(make_pod("a"))
    m = world.manager(mode)
    m.set_pod_status(pod, running_status(pod))
    new_pod = _recreate(world, pod, "uid-a-2")

    m.sync_batch()
    # The fast path tries its copy: the UID precondition makes the server refuse, then it reads.
    assert world.verbs() == by_mode(mode, kubelet=["get"], fast=["patch", "get"])
    assert set(_patch_uids(world)) <= {pod.uid}
    assert m.get_pod_status(pod.uid) is None
    _assert_new_pod_untouched(world, new_pod)


def test_recreated_between_get_and_patch(world: World, mode: str) -> None:
    pod = world.add(make_pod("a"), to_pod_manager=False)
    world.pods.add_pod(make_pod("a"))  # no resourceVersion: the fast path reads first too
    m = world.manager(mode)
    m.set_pod_status(pod, running_status(pod))
    state: dict[str, Any] = {}

    def recreate_before_patch(verb: str, namespace: str, name: str) -> None:
        if verb == "patch" and "new" not in state:
            state["new"] = _recreate(world, pod, "uid-a-2")

    world.client.before_request(recreate_before_patch)
    m.sync_batch()
    assert world.verbs() == ["get", "patch"]
    _assert_new_pod_untouched(world, state["new"])
    assert m.get_pod_status(pod.uid) is not None  # the patch failed (conflict): retried later

    world.clear()
    m.sync_batch(all=True)
    assert world.verbs() == ["get"]  # the new UID is seen: the status is dropped, nothing sent
    assert m.get_pod_status(pod.uid) is None
    _assert_new_pod_untouched(world, state["new"])
    assert set(_patch_uids(world)) <= {pod.uid}


def test_recreated_after_a_synced_write_fast_path(world: World) -> None:
    # The fast path holds the server's copy after a write; the pod is then recreated.
    pod = world.add(make_pod("a"))
    m = world.manager("fast")
    m.set_pod_status(pod, running_status(pod))
    m.sync_batch()
    new_pod = _recreate(world, pod, "uid-a-2")
    world.clear()
    m.set_pod_status(pod, running_status(pod, ready=False))
    m.sync_batch()
    assert world.verbs() == ["patch", "get"]
    assert _patch_uids(world) == [pod.uid]
    assert m.get_pod_status(pod.uid) is None
    _assert_new_pod_untouched(world, new_pod)


# --- the deletion handshake (SPEC 4.6) ------------------------------------------------------------


def _deleting(world: World, name: str = "a", **kw: Any) -> Any:
    return world.add(make_pod(name, deletion_timestamp=NOW, **kw))


def test_deletion_handshake(world: World, mode: str) -> None:
    pod = _deleting(world)
    m = world.manager(mode)
    m.set_pod_status(pod, running_status(pod, phase="Succeeded", ready=False))
    assert m.sync_batch() == 1
    assert world.verbs() == by_mode(mode, kubelet=["get", "patch", "delete"], fast=["patch", "delete"])
    assert world.client.requests[-1] == ("delete", "default", "a", 0, pod.uid)
    assert world.client.pod("default", "a") is None
    assert m.get_pod_status(pod.uid) is None
    assert ("pod_resources_are_reclaimed", pod.uid) in world.safety.calls


def test_no_delete_without_deletion_timestamp(world: World, mode: str) -> None:
    pod = world.add(make_pod("a"))
    m = world.manager(mode)
    m.set_pod_status(pod, running_status(pod, phase="Succeeded", ready=False))
    m.sync_batch()
    m.sync_batch(all=True)
    assert "delete" not in world.verbs()
    assert world.server_status(pod).phase == "Succeeded"
    assert m.get_pod_status(pod.uid) is not None


def test_no_delete_of_a_mirror_pod(world: World, mode: str) -> None:
    static = world.add(make_pod("s", uid="static-uid", annotations=STATIC_ANNOTATIONS), to_server=False)
    world.add(make_pod("s", uid="mirror-uid", annotations=MIRROR_ANNOTATIONS, deletion_timestamp=NOW))
    m = world.manager(mode)
    m.set_pod_status(static, running_status(static, phase="Succeeded", ready=False))
    assert m.sync_batch() == 1
    m.sync_batch(all=True)
    assert "delete" not in world.verbs()
    assert world.client.pod("default", "s") is not None
    assert m.get_pod_status("static-uid") is not None


def test_no_delete_while_the_server_phase_is_not_terminal(world: World, mode: str) -> None:
    pod = _deleting(world)
    world.safety.set_could_have_running_containers(pod.uid, True)
    m = world.manager(mode)
    m.set_pod_status(pod, running_status(pod, phase="Succeeded", ready=False))
    assert m.sync_batch() == 1
    assert world.server_status(pod).phase == "Pending"  # the move to terminal is delayed
    assert "delete" not in world.verbs()
    assert m.get_pod_status(pod.uid) is not None

    # Containers stopped: the next full pass writes the phase and deletes.
    world.safety.set_could_have_running_containers(pod.uid, None)
    world.refresh(pod)
    world.clear()
    assert m.sync_batch(all=True) == 1
    assert world.verbs()[-2:] == ["patch", "delete"]
    assert m.get_pod_status(pod.uid) is None


def test_no_delete_while_the_cached_phase_is_not_terminal(world: World, mode: str) -> None:
    pod = _deleting(world)
    m = world.manager(mode)
    m.set_pod_status(pod, running_status(pod))
    m.sync_batch()
    assert "delete" not in world.verbs()
    assert world.client.pod("default", "a") is not None


def test_no_delete_until_resources_are_reclaimed(world: World, mode: str) -> None:
    pod = _deleting(world)
    world.safety.set_reclaimed(pod.uid, False)
    m = world.manager(mode)
    m.set_pod_status(pod, running_status(pod, phase="Failed", ready=False))
    assert m.sync_batch() == 1
    assert "delete" not in world.verbs()
    assert m.get_pod_status(pod.uid) is not None

    world.safety.set_reclaimed(pod.uid, None)
    world.refresh(pod)  # the pod manager sees the terminal phase on the server
    world.clear()
    assert m.sync_batch(all=False) == 0  # nothing newer to send
    assert world.verbs() == []
    assert m.sync_batch(all=True) == 1  # but it can be deleted now
    assert world.verbs() == by_mode(mode, kubelet=["get", "delete"], fast=["delete"])
    assert world.client.requests[-1] == ("delete", "default", "a", 0, pod.uid)
    assert m.get_pod_status(pod.uid) is None


def test_delete_not_found_drops_the_status(world: World, mode: str) -> None:
    pod = _deleting(world)
    m = world.manager(mode)
    m.set_pod_status(pod, running_status(pod, phase="Succeeded", ready=False))
    world.client.fail_next("delete", NotFoundError('pods "a" not found'))
    m.sync_batch()
    assert world.verbs()[-1] == "delete"
    assert m.get_pod_status(pod.uid) is None


def test_delete_error_keeps_the_status_and_is_retried(world: World, mode: str) -> None:
    pod = _deleting(world)
    m = world.manager(mode)
    m.set_pod_status(pod, running_status(pod, phase="Succeeded", ready=False))
    world.client.fail_next("delete", InternalServerError("boom"))
    m.sync_batch()
    assert world.verbs()[-1] == "delete"
    assert m.get_pod_status(pod.uid) is not None
    assert world.client.pod("default", "a") is not None

    world.refresh(pod)
    world.clear()
    assert m.sync_batch(all=True) == 1
    assert world.verbs()[-1] == "delete"
    assert world.client.pod("default", "a") is None
    assert m.get_pod_status(pod.uid) is None


def test_delete_never_removes_a_recreated_pod(world: World, mode: str) -> None:
    pod = _deleting(world)
    m = world.manager(mode)
    m.set_pod_status(pod, running_status(pod, phase="Succeeded", ready=False))
    state: dict[str, Any] = {}

    def recreate_before_delete(verb: str, namespace: str, name: str) -> None:
        if verb == "delete" and "new" not in state:
            state["new"] = _recreate(world, pod, "uid-a-2")

    world.client.before_request(recreate_before_delete)
    m.sync_batch()
    assert world.client.requests[-1] == ("delete", "default", "a", 0, pod.uid)
    _assert_new_pod_untouched(world, state["new"])
    assert m.get_pod_status(pod.uid) is not None  # refused (UID precondition): not dropped yet

    # The watch delivers the new pod: the old status is not retried against it.
    world.pods.remove_pod(pod)
    world.pods.add_pod(state["new"])
    world.clear()
    m.sync_batch(all=True)
    assert "delete" not in world.verbs() and "patch" not in world.verbs()
    _assert_new_pod_untouched(world, state["new"])


# --- SPEC 7: a terminal phase never goes back; illegal transitions; invalid objects -------------


def test_terminal_phase_never_goes_back_on_the_server(world: World, mode: str) -> None:
    pod = world.add(make_pod("a"))
    m = world.manager(mode)
    m.set_pod_status(
        pod, running_status(pod, phase="Failed", ready=False).replace(reason="Evicted", message="bye")
    )
    m.sync_batch()
    m.set_pod_status(
        pod, running_status(pod, phase="Running", pod_ip="10.0.0.7").replace(reason="r", message="m")
    )
    got = m.get_pod_status(pod.uid)
    assert got is not None
    assert (got.phase, got.reason, got.message, got.pod_ip) == ("Failed", "Evicted", "bye", "10.0.0.7")
    assert m.get_status_version(pod.uid) == 2
    m.sync_batch()
    server = world.server_status(pod)
    assert (server.phase, server.reason, server.pod_ip) == ("Failed", "Evicted", "10.0.0.7")
    assert get_cond(server, "Ready").status == "False"  # type: ignore[union-attr]


def test_readiness_change_keeps_a_terminal_pod_unready_on_the_server(world: World, mode: str) -> None:
    pod = world.add(make_pod("a"))
    m = world.manager(mode)
    m.set_pod_status(pod, running_status(pod, phase="Succeeded", ready=False))
    m.sync_batch()
    m.set_container_readiness(pod.uid, cid(pod, "app"), True)
    m.sync_batch()
    server = world.server_status(pod)
    for ctype in ("Ready", "ContainersReady"):
        c = get_cond(server, ctype)
        assert c is not None and (c.status, c.reason) == ("False", "PodCompleted")


def test_non_kubelet_conditions_on_the_server_survive(world: World, mode: str) -> None:
    pod = make_pod("a", readiness_gates=["example.com/gate"])
    gate = condition("example.com/gate", "True")
    pod = world.add(
        pod.replace(status=PodStatus(phase="Pending", conditions=(gate.replace(last_transition_time=NOW),)))
    )
    m = world.manager(mode)
    # The cached status does not carry the gate: the server's is kept, the kubelet's are added.
    m.set_pod_status(pod, running_status(pod))
    m.sync_batch()
    server = world.server_status(pod)
    assert [c.type for c in server.conditions or ()] == [
        "example.com/gate",
        "PodReadyToStartContainers",
        "Initialized",
        "Ready",
        "ContainersReady",
        "PodScheduled",
    ]


def test_pending_count_of_a_synced_static_pod_is_zero(world: World, mode: str) -> None:
    # pending_count() (used by drain loops and the simulator) must look the API version up
    # under the mirror pod's UID, where the sync records it.
    static = world.add(make_pod("s", uid="static-uid", annotations=STATIC_ANNOTATIONS), to_server=False)
    world.add(make_pod("s", uid="mirror-uid", annotations=MIRROR_ANNOTATIONS))
    m = world.manager(mode)
    m.set_pod_status(static, running_status(static))
    assert m.pending_count() == 1
    assert m.sync_batch() == 1
    assert m.sync_batch() == 0  # the sync loop itself knows it is on the server
    assert m.pending_count() == 0


# --- SPEC 7: illegal transitions and invalid objects leave the cache as it was ------------------

TRANSITIONS = [
    # (restart policy, init containers, which container, old exit code, accepted)
    ("Never", (), "app", 0, False),
    ("Never", (), "app", 1, False),
    ("OnFailure", (), "app", 0, False),
    ("OnFailure", (), "app", 1, True),
    ("Always", (), "app", 0, True),
    (None, (), "app", 0, True),
    ("Never", ("init",), "init", 0, False),
    ("OnFailure", ("init",), "init", 0, False),
    ("OnFailure", ("init",), "init", 2, True),
    ("Never", ("sidecar",), "sidecar", 0, True),
]


@pytest.mark.parametrize(("policy", "init", "target", "exit_code", "accepted"), TRANSITIONS)
def test_illegal_container_transition_refused(
    world: World,
    mode: str,
    policy: str | None,
    init: tuple[str, ...],
    target: str,
    exit_code: int,
    accepted: bool,
) -> None:
    init_containers = [sidecar(n) if n == "sidecar" else n for n in init]
    pod = world.add(make_pod("a", init_containers=init_containers, restart_policy=policy))
    m = world.manager(mode)

    def status_with(state: Any) -> PodStatus:
        base = running_status(pod)
        regular = (container_status(pod, "app", state if target == "app" else running(), ready=False),)
        inits = tuple(
            container_status(pod, n, state if target == n else terminated(0), ready=False) for n in init
        )
        return base.replace(container_statuses=regular, init_container_statuses=inits or None)

    m.set_pod_status(pod, status_with(terminated(exit_code, reason="Error" if exit_code else "Completed")))
    m.sync_batch()
    world.clear()
    before = m.get_pod_status(pod.uid)

    m.set_pod_status(pod, status_with(running()))
    if accepted:
        assert m.get_status_version(pod.uid) == 2
        assert m.get_pod_status(pod.uid) is not before
        assert m.sync_batch() == 1
        assert "patch" in world.verbs()
    else:
        assert m.get_pod_status(pod.uid) is before
        assert m.get_status_version(pod.uid) == 1
        assert m.sync_batch() == 0
        assert world.verbs() == []


def _malformed(pod: Any) -> dict[str, PodStatus]:
    good = running_status(pod)
    cs = good.container_statuses[0]  # type: ignore[index]
    return {
        "ready-not-bool": good.replace(container_statuses=(cs.replace(ready="yes"),)),
        "restart-count-str": good.replace(container_statuses=(cs.replace(restart_count="3"),)),
        "phase-int": good.replace(phase=3),
        "start-time-str": good.replace(start_time="2024-05-01T12:00:00Z"),
        "duplicate-names": good.replace(container_statuses=(cs, cs)),
        "condition-maybe": good.replace(conditions=(condition("Ready", "Maybe"),)),
    }


@pytest.mark.parametrize(
    ("case", "path"),
    [
        ("ready-not-bool", "status.containerStatuses[0].ready"),
        ("restart-count-str", "status.containerStatuses[0].restartCount"),
        ("phase-int", "status.phase"),
        ("start-time-str", "status.startTime"),
        ("duplicate-names", "status.containerStatuses[1].name"),
        ("condition-maybe", "status.conditions[0].status"),
    ],
)
def test_malformed_status_raises_and_leaves_the_cache(world: World, mode: str, case: str, path: str) -> None:
    pod = world.add(make_pod("a"))
    other = world.add(make_pod("b"))
    m = world.manager(mode)
    m.set_pod_status(pod, running_status(pod))
    m.sync_batch()
    world.clear()
    before = m.get_pod_status(pod.uid)

    with pytest.raises(InvalidObjectError) as info:
        m.set_pod_status(pod, _malformed(pod)[case])
    assert path in str(info.value)
    assert m.get_pod_status(pod.uid) is before
    assert m.get_status_version(pod.uid) == 1

    with pytest.raises(InvalidObjectError):
        m.set_pod_status(other, _malformed(other)[case])
    assert m.get_pod_status(other.uid) is None

    assert m.sync_batch() == 0
    assert world.verbs() == []
