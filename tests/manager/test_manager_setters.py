"""The setters (SPEC 4.2, 4.3) and the requests their changes lead to (STYLE 10)."""

from __future__ import annotations

from datetime import UTC, datetime

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
    types_of,
    waiting,
)

from podstatus import ContainerID, ContainerState, ContainerStateTerminated, InvalidObjectError, PodStatus

LATER = datetime(2024, 5, 1, 12, 5, 0, tzinfo=UTC)

NOT_LOCATED = ContainerState(
    terminated=ContainerStateTerminated(
        exit_code=137,
        reason="ContainerStatusUnknown",
        message="The container could not be located when the pod was terminated",
    )
)


# --- set_pod_status ----------------------------------------------------------------------


def test_new_status_is_a_get_then_a_patch(world: World, mode: str) -> None:
    pod = world.add(make_pod("a"))
    m = world.manager(mode)
    m.set_pod_status(pod, running_status(pod))
    assert m.get_status_version(pod.uid) == 1
    assert world.verbs() == []  # setters never talk to the server

    assert m.sync_batch() == 1
    # The fast path's first write starts from the pod manager's copy (it has a resourceVersion).
    assert world.verbs() == by_mode(mode, kubelet=["get", "patch"], fast=["patch"])
    if mode == "kubelet":
        assert world.client.requests[0] == ("get", "default", "a")
    _verb, ns, name, body = world.client.requests[-1]
    cached = m.get_pod_status(pod.uid)
    assert cached is not None
    # The server had only {"phase": "Pending"}: every field of the cached status is in the patch.
    expected_meta = by_mode(mode, kubelet={"uid": pod.uid}, fast={"uid": pod.uid, "resourceVersion": "1"})
    assert body == {"metadata": expected_meta, "status": cached.to_dict()}
    assert (ns, name) == ("default", "a")
    assert world.server_status(pod).to_dict() == cached.to_dict()


def test_cached_status_is_what_was_set_plus_the_managers_fields(world: World) -> None:
    pod = world.add(make_pod("a"))
    m = world.manager()
    status = running_status(pod)
    m.set_pod_status(pod, status)
    cached = m.get_pod_status(pod.uid)
    assert cached is not None
    assert cached.start_time == NOW
    assert all(c.last_transition_time == NOW for c in cached.conditions or ())
    assert cached.replace(start_time=None, conditions=status.conditions) == status


def test_status_handed_out_cannot_change_the_cache(world: World) -> None:
    pod = world.add(make_pod("a"))
    m = world.manager()
    m.set_pod_status(pod, running_status(pod))
    got = m.get_pod_status(pod.uid)
    assert got is not None
    with pytest.raises(AttributeError):
        got.phase = "Failed"  # type: ignore[misc]
    with pytest.raises((AttributeError, TypeError)):
        got.conditions[0].status = "False"  # type: ignore[index]
    assert m.get_pod_status(pod.uid).phase == "Running"  # type: ignore[union-attr]


def test_status_equal_to_the_servers_is_only_a_get(world: World, mode: str) -> None:
    pod = make_pod("a")
    status = running_status(pod)
    pod = world.add(pod.replace(status=status.replace(start_time=NOW)))
    m = world.manager(mode)
    m.set_pod_status(pod, status)
    assert m.sync_batch() == 1
    # The fast path compares with the pod manager's copy, which is the server's: nothing to ask.
    assert world.verbs() == by_mode(mode, kubelet=["get"], fast=[])
    assert m.pending_count() == 0
    # Synced: a later pass has nothing to do.
    world.clear()
    assert m.sync_batch() == 0
    assert world.verbs() == []


def test_unchanged_status_no_new_version_no_request(world: World, mode: str) -> None:
    pod = world.add(make_pod("a"))
    m = world.manager(mode)
    m.set_pod_status(pod, running_status(pod))
    m.sync_batch()
    world.clear()
    before = m.get_pod_status(pod.uid)

    world.clock.advance(30)  # later, but the same status: times must not make it "new"
    m.set_pod_status(pod, running_status(pod))
    assert m.get_status_version(pod.uid) == 1
    assert m.get_pod_status(pod.uid) is before
    assert m.sync_batch() == 0
    assert world.verbs() == []


def test_non_kubelet_condition_change_alone_is_not_a_new_version(world: World) -> None:
    pod = world.add(make_pod("a"))
    m = world.manager()
    m.set_pod_status(pod, running_status(pod, extra_conditions=[condition("example.com/gate", "False")]))
    m.set_pod_status(pod, running_status(pod, extra_conditions=[condition("example.com/gate", "True")]))
    assert m.get_status_version(pod.uid) == 1


def test_versions_rise_by_one_per_accepted_change(world: World, mode: str) -> None:
    pod = world.add(make_pod("a", containers=("app", "side")))
    m = world.manager(mode)
    assert m.get_status_version(pod.uid) == 0
    m.set_pod_status(pod, running_status(pod, ready=False))
    assert m.get_status_version(pod.uid) == 1
    m.set_pod_status(pod, running_status(pod, ready=False))
    assert m.get_status_version(pod.uid) == 1
    m.set_pod_status(pod, running_status(pod, ready={"app": True, "side": False}))
    assert m.get_status_version(pod.uid) == 2
    m.set_container_readiness(pod.uid, cid(pod, "side"), True)
    assert m.get_status_version(pod.uid) == 3
    m.set_container_readiness(pod.uid, cid(pod, "side"), True)  # unchanged
    assert m.get_status_version(pod.uid) == 3
    m.set_pod_status(pod, running_status(pod, ready=True, message="m"))
    assert m.get_status_version(pod.uid) == 4
    m.terminate_pod(pod)
    assert m.get_status_version(pod.uid) == 5
    # Three accepted changes since the first: one sync sends the newest.
    assert m.sync_batch() == 1
    assert world.verbs() == by_mode(mode, kubelet=["get", "patch"], fast=["patch"])
    assert world.server_status(pod).phase == "Failed"


def test_deleting_pod_identical_status_is_forced(world: World, mode: str) -> None:
    pod = world.add(make_pod("a", deletion_timestamp=NOW))
    m = world.manager(mode)
    m.set_pod_status(pod, running_status(pod))
    m.sync_batch()
    world.clear()
    m.set_pod_status(pod, running_status(pod))
    assert m.get_status_version(pod.uid) == 2
    m.set_pod_status(pod, running_status(pod))
    assert m.get_status_version(pod.uid) == 3
    assert m.sync_batch() == 1
    # Nothing differs from the server: kubelet mode reads and sends nothing; the fast path
    # knows the server's copy already.
    assert world.verbs() == by_mode(mode, kubelet=["get"], fast=[])
    assert m.pending_count() == 0


def test_invalid_status_refused_cache_unchanged(world: World) -> None:
    pod = world.add(make_pod("a"))
    m = world.manager()
    bad = running_status(pod).replace(conditions=(condition("Ready", "Maybe"),))
    with pytest.raises(InvalidObjectError):
        m.set_pod_status(pod, bad)
    assert m.get_pod_status(pod.uid) is None
    assert m.get_status_version(pod.uid) == 0


# --- set_container_readiness ------------------------------------------------------------------


def test_readiness_unknown_pod_has_no_effect(world: World) -> None:
    pod = world.add(make_pod("a"), to_pod_manager=False)
    m = world.manager()
    m.set_pod_status(pod, running_status(pod, ready=False))
    before = m.get_pod_status(pod.uid)
    m.set_container_readiness(pod.uid, cid(pod, "app"), True)
    assert m.get_pod_status(pod.uid) is before
    assert m.get_status_version(pod.uid) == 1


def test_readiness_not_cached_has_no_effect(world: World) -> None:
    pod = world.add(make_pod("a", status=running_status(make_pod("a"), ready=False)))
    m = world.manager()
    m.set_container_readiness(pod.uid, cid(pod, "app"), True)
    assert m.get_pod_status(pod.uid) is None
    assert m.get_status_version(pod.uid) == 0
    assert m.sync_batch(all=True) == 0


@pytest.mark.parametrize("container_id", ["containerd://nope", "docker://uid-a-app", "uid-a-app"])
def test_readiness_unknown_container_has_no_effect(world: World, container_id: str) -> None:
    pod = world.add(make_pod("a"))
    m = world.manager()
    m.set_pod_status(pod, running_status(pod, ready=False))
    before = m.get_pod_status(pod.uid)
    m.set_container_readiness(pod.uid, container_id, True)
    assert m.get_pod_status(pod.uid) is before


@pytest.mark.parametrize("ready", [True, False])
def test_readiness_unchanged_has_no_effect(world: World, ready: bool) -> None:
    pod = world.add(make_pod("a"))
    m = world.manager()
    m.set_pod_status(pod, running_status(pod, ready=ready))
    before = m.get_pod_status(pod.uid)
    m.set_container_readiness(pod.uid, cid(pod, "app"), ready)
    assert m.get_pod_status(pod.uid) is before
    assert m.get_status_version(pod.uid) == 1


@pytest.mark.parametrize("as_object", [False, True], ids=["string", "ContainerID"])
def test_readiness_regenerates_ready_and_containers_ready_in_place(world: World, as_object: bool) -> None:
    pod = world.add(make_pod("a", containers=("app", "side")))
    m = world.manager()
    m.set_pod_status(pod, running_status(pod, ready={"app": True, "side": False}))
    before = m.get_pod_status(pod.uid)
    assert get_cond(before, "Ready").status == "False"  # type: ignore[union-attr]
    world.clock.now = LATER

    container_id = cid(pod, "side")
    m.set_container_readiness(pod.uid, ContainerID.parse(container_id) if as_object else container_id, True)

    after = m.get_pod_status(pod.uid)
    assert after is not None
    assert m.get_status_version(pod.uid) == 2
    assert [cs.ready for cs in after.container_statuses or ()] == [True, True]
    assert types_of(after) == types_of(before)  # replaced where they stood
    for ctype in ("Ready", "ContainersReady"):
        c = get_cond(after, ctype)
        assert c is not None
        assert (c.status, c.reason, c.message) == ("True", None, None)
        assert c.last_transition_time == LATER
    # Other conditions keep their times.
    assert get_cond(after, "PodScheduled").last_transition_time == NOW  # type: ignore[union-attr]


def test_readiness_false_gives_the_unready_message(world: World) -> None:
    pod = world.add(make_pod("a", containers=("b-app", "a-app")))
    m = world.manager()
    m.set_pod_status(pod, running_status(pod, ready=True))
    m.set_container_readiness(pod.uid, cid(pod, "a-app"), False)
    after = m.get_pod_status(pod.uid)
    for ctype in ("Ready", "ContainersReady"):
        c = get_cond(after, ctype)
        assert c is not None
        assert (c.status, c.reason, c.message) == (
            "False",
            "ContainersNotReady",
            "containers with unready status: [a-app]",
        )


def test_readiness_appends_missing_conditions(world: World) -> None:
    pod = world.add(make_pod("a"))
    m = world.manager()
    status = running_status(pod, ready=False)
    status = status.replace(conditions=tuple(c for c in status.conditions or () if c.type == "PodScheduled"))
    m.set_pod_status(pod, status)
    m.set_container_readiness(pod.uid, cid(pod, "app"), True)
    after = m.get_pod_status(pod.uid)
    assert types_of(after) == ["PodScheduled", "Ready", "ContainersReady"]
    assert get_cond(after, "Ready").status == "True"  # type: ignore[union-attr]
    assert get_cond(after, "ContainersReady").status == "True"  # type: ignore[union-attr]


def test_readiness_respects_readiness_gates(world: World) -> None:
    pod = world.add(make_pod("a", readiness_gates=["example.com/gate"]))
    m = world.manager()
    m.set_pod_status(pod, running_status(pod, ready=False))
    m.set_container_readiness(pod.uid, cid(pod, "app"), True)
    after = m.get_pod_status(pod.uid)
    assert get_cond(after, "ContainersReady").status == "True"  # type: ignore[union-attr]
    ready = get_cond(after, "Ready")
    assert ready is not None
    assert (ready.status, ready.reason, ready.message) == (
        "False",
        "ReadinessGatesNotReady",
        'corresponding condition of pod readiness gate "example.com/gate" does not exist.',
    )


def test_readiness_of_a_sidecar_counts(world: World) -> None:
    pod = world.add(make_pod("a", init_containers=[sidecar("proxy")]))
    m = world.manager()
    status = running_status(pod, ready=True)
    init = tuple(cs.replace(ready=False) for cs in status.init_container_statuses or ())
    cr = condition(
        "ContainersReady", "False", "ContainersNotReady", "containers with unready status: [proxy]"
    )
    conditions = tuple(
        cr if c.type == "ContainersReady" else cr.replace(type="Ready") if c.type == "Ready" else c
        for c in status.conditions or ()
    )
    m.set_pod_status(pod, status.replace(init_container_statuses=init, conditions=conditions))
    m.set_container_readiness(pod.uid, cid(pod, "proxy"), True)
    after = m.get_pod_status(pod.uid)
    assert after is not None and after.init_container_statuses is not None
    assert after.init_container_statuses[0].ready is True
    assert get_cond(after, "ContainersReady").status == "True"  # type: ignore[union-attr]
    assert get_cond(after, "Ready").status == "True"  # type: ignore[union-attr]


def test_readiness_change_is_synced(world: World, mode: str) -> None:
    pod = world.add(make_pod("a"))
    m = world.manager(mode)
    m.set_pod_status(pod, running_status(pod, ready=True))
    m.sync_batch()
    world.clear()
    world.clock.now = LATER
    m.set_container_readiness(pod.uid, cid(pod, "app"), False)
    assert m.sync_batch() == 1
    # The fast path writes from the pod it knows is on the server: no GET.
    assert world.verbs() == by_mode(mode, kubelet=["get", "patch"], fast=["patch"])
    body = world.client.patches()[0]
    status_patch = body["status"]
    assert status_patch["$setElementOrder/conditions"] == [
        {"type": t}
        for t in ["PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled"]
    ]
    changed = {c["type"]: c for c in status_patch["conditions"]}
    assert set(changed) == {"Ready", "ContainersReady"}
    for c in changed.values():
        assert c["status"] == "False"
        assert c["reason"] == "ContainersNotReady"
        assert c["lastTransitionTime"] == "2024-05-01T12:05:00Z"
    assert [cs["ready"] for cs in status_patch["containerStatuses"]] == [False]
    assert set(status_patch) == {"$setElementOrder/conditions", "conditions", "containerStatuses"}
    assert world.server_status(pod).to_dict() == m.get_pod_status(pod.uid).to_dict()  # type: ignore[union-attr]


# --- set_container_startup -----------------------------------------------------------------------


def test_startup_guards(world: World) -> None:
    stranger = world.add(make_pod("stranger"), to_pod_manager=False)
    uncached = world.add(make_pod("uncached"))
    pod = world.add(make_pod("a"))
    m = world.manager()
    m.set_pod_status(stranger, running_status(stranger))
    m.set_pod_status(pod, running_status(pod))
    stranger_before, pod_before = m.get_pod_status(stranger.uid), m.get_pod_status(pod.uid)

    m.set_container_startup(stranger.uid, cid(stranger, "app"), False)  # unknown to the pod manager
    m.set_container_startup(uncached.uid, cid(uncached, "app"), False)  # not cached
    m.set_container_startup(pod.uid, "containerd://nope", False)  # unknown container
    m.set_container_startup(pod.uid, cid(pod, "app"), True)  # unchanged (started is True)

    assert m.get_pod_status(stranger.uid) is stranger_before
    assert m.get_pod_status(uncached.uid) is None
    assert m.get_pod_status(pod.uid) is pod_before
    assert m.get_status_version(pod.uid) == 1


@pytest.mark.parametrize("started", [True, False])
def test_startup_unset_differs_from_true_and_false(world: World, started: bool) -> None:
    pod = world.add(make_pod("a"))
    m = world.manager()
    status = running_status(pod)
    status = status.replace(
        container_statuses=tuple(cs.replace(started=None) for cs in status.container_statuses or ())
    )
    m.set_pod_status(pod, status)
    m.set_container_startup(pod.uid, ContainerID.parse(cid(pod, "app")), started)
    after = m.get_pod_status(pod.uid)
    assert after is not None and after.container_statuses is not None
    assert after.container_statuses[0].started is started
    assert m.get_status_version(pod.uid) == 2


def test_startup_regenerates_no_condition(world: World) -> None:
    pod = world.add(make_pod("a"))
    m = world.manager()
    # Ready is deliberately inconsistent with the container: startup must not "fix" it.
    status = running_status(pod, ready=True)
    status = status.replace(
        container_statuses=tuple(
            cs.replace(ready=False, started=False) for cs in status.container_statuses or ()
        )
    )
    m.set_pod_status(pod, status)
    before = m.get_pod_status(pod.uid)
    m.set_container_startup(pod.uid, cid(pod, "app"), True)
    after = m.get_pod_status(pod.uid)
    assert after is not None and before is not None
    assert after.conditions == before.conditions
    assert after.replace(container_statuses=before.container_statuses) == before


def test_startup_of_an_init_container(world: World) -> None:
    pod = world.add(make_pod("a", init_containers=[sidecar("proxy")]))
    m = world.manager()
    status = running_status(pod)
    init = tuple(cs.replace(started=False) for cs in status.init_container_statuses or ())
    m.set_pod_status(pod, status.replace(init_container_statuses=init))
    m.set_container_startup(pod.uid, cid(pod, "proxy"), True)
    after = m.get_pod_status(pod.uid)
    assert after is not None and after.init_container_statuses is not None
    assert after.init_container_statuses[0].started is True


# --- terminate_pod --------------------------------------------------------------------------------


def test_terminate_pod_from_the_cache(world: World, mode: str) -> None:
    pod = world.add(make_pod("a", containers=("app", "done")))
    m = world.manager(mode)
    status = running_status(pod)
    status = status.replace(
        container_statuses=(
            container_status(pod, "app"),
            container_status(pod, "done", terminated(0), ready=False),
        )
    )
    m.set_pod_status(pod, status)
    m.sync_batch()
    world.clear()

    m.terminate_pod(pod)
    after = m.get_pod_status(pod.uid)
    assert after is not None
    assert after.phase == "Failed"
    assert [cs.state for cs in after.container_statuses or ()] == [NOT_LOCATED, terminated(0)]
    assert m.get_status_version(pod.uid) == 2

    assert m.sync_batch() == 1
    assert world.verbs() == by_mode(mode, kubelet=["get", "patch"], fast=["patch"])
    server = world.server_status(pod)
    assert server.phase == "Failed"
    # SPEC 4.7: a terminal pod is never Ready on the server.
    for ctype in ("Ready", "ContainersReady"):
        c = get_cond(server, ctype)
        assert c is not None and (c.status, c.reason) == ("False", "PodFailed")


def test_terminate_pod_is_forced(world: World) -> None:
    pod = world.add(make_pod("a"))
    m = world.manager()
    m.set_pod_status(pod, running_status(pod))
    m.terminate_pod(pod)
    assert m.get_status_version(pod.uid) == 2
    m.terminate_pod(pod)  # the same status again: still a new version
    assert m.get_status_version(pod.uid) == 3


def test_terminate_pod_without_cache_starts_from_pod_status(world: World) -> None:
    pod = make_pod("a")
    pod = world.add(pod.replace(status=running_status(pod)))
    m = world.manager()
    m.terminate_pod(pod)
    after = m.get_pod_status(pod.uid)
    assert after is not None
    assert after.phase == "Failed"
    assert after.pod_ip == "10.0.0.1"
    assert [cs.state for cs in after.container_statuses or ()] == [NOT_LOCATED]


def test_terminate_static_pod_keeps_phase(world: World) -> None:
    pod = world.add(make_pod("s", annotations=STATIC_ANNOTATIONS), to_server=False)
    m = world.manager()
    m.set_pod_status(pod, running_status(pod))
    m.terminate_pod(pod)
    after = m.get_pod_status(pod.uid)
    assert after is not None
    assert after.phase == "Running"
    assert [cs.state for cs in after.container_statuses or ()] == [NOT_LOCATED]


def test_terminate_uninitialized_pod_leaves_regular_containers(world: World) -> None:
    pod = make_pod("a", init_containers=["init1", "init2"], restart_policy="Never")
    pod_status = PodStatus(
        phase="Pending",
        init_container_statuses=(
            container_status(pod, "init1", running(), ready=False),
            container_status(pod, "init2", waiting(), ready=False, started=False),
        ),
        container_statuses=(container_status(pod, "app", waiting(), ready=False, started=False),),
    )
    pod = world.add(pod.replace(status=pod_status))
    m = world.manager()
    m.terminate_pod(pod)
    after = m.get_pod_status(pod.uid)
    assert after is not None
    assert [cs.state for cs in after.init_container_statuses or ()] == [NOT_LOCATED, waiting()]
    assert [cs.state for cs in after.container_statuses or ()] == [waiting()]
    assert after.phase == "Failed"


# --- remove_orphaned_statuses ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "kind", ["list", "tuple", "set", "frozenset", "dict", "dict-keys", "generator", "iterator"]
)
def test_remove_orphaned_statuses_any_collection(world: World, kind: str) -> None:
    pods = [world.add(make_pod(n)) for n in ("a", "b", "c", "d")]
    m = world.manager()
    for p in pods:
        m.set_pod_status(p, running_status(p))
    keep = ["uid-a", "uid-c"]
    arg = {
        "list": lambda: list(keep),
        "tuple": lambda: tuple(keep),
        "set": lambda: set(keep),
        "frozenset": lambda: frozenset(keep),
        "dict": lambda: dict.fromkeys(keep, 1),
        "dict-keys": lambda: dict.fromkeys(keep, 1).keys(),
        "generator": lambda: (u for u in keep),
        "iterator": lambda: iter(keep),
    }[kind]()
    m.remove_orphaned_statuses(arg)
    assert [p.uid for p in pods if m.get_pod_status(p.uid) is not None] == keep
    assert m.get_status_version("uid-b") == 0
    assert m.sync_batch() == 2
    assert sorted(r[2] for r in world.client.requests if r[0] == "patch") == ["a", "c"]


def test_remove_orphaned_statuses_empty_drops_everything(world: World) -> None:
    pod = world.add(make_pod("a"))
    m = world.manager()
    m.set_pod_status(pod, running_status(pod))
    m.remove_orphaned_statuses([])
    assert m.get_pod_status(pod.uid) is None
    assert m.sync_batch(all=True) == 0
    assert world.verbs() == []


# --- static pods and their mirror pods -----------------------------------------------------------


def _static_and_mirror(world: World, *, mirror_status: PodStatus | None = None) -> tuple[object, object]:
    static = world.add(make_pod("s", uid="static-uid", annotations=STATIC_ANNOTATIONS), to_server=False)
    mirror = world.add(
        make_pod(
            "s",
            uid="mirror-uid",
            annotations=MIRROR_ANNOTATIONS,
            status=mirror_status or PodStatus(phase="Pending"),
        )
    )
    return static, mirror


def test_get_pod_status_translates_mirror_uid(world: World, mode: str) -> None:
    static, mirror = _static_and_mirror(world)
    m = world.manager(mode)
    m.set_pod_status(static, running_status(static))  # type: ignore[arg-type]
    by_static = m.get_pod_status("static-uid")
    assert by_static is not None
    assert m.get_pod_status("mirror-uid") is by_static
    assert m.get_status_version("mirror-uid") == 1

    assert m.sync_batch() == 1
    assert world.verbs() == by_mode(mode, kubelet=["get", "patch"], fast=["patch"])
    body = world.client.patches()[0]
    assert body["metadata"]["uid"] == "mirror-uid"
    assert world.server_status(mirror).to_dict() == by_static.to_dict()  # type: ignore[arg-type]


def test_static_pod_without_mirror_is_skipped_until_it_has_one(world: World, mode: str) -> None:
    static = world.add(make_pod("s", uid="static-uid", annotations=STATIC_ANNOTATIONS), to_server=False)
    m = world.manager(mode)
    m.set_pod_status(static, running_status(static))
    assert m.sync_batch() == 0
    assert m.sync_batch(all=True) == 0
    assert world.verbs() == []
    assert m.get_pod_status("static-uid") is not None

    world.add(make_pod("s", uid="mirror-uid", annotations=MIRROR_ANNOTATIONS))
    assert m.sync_batch() == 1
    assert world.verbs() == by_mode(mode, kubelet=["get", "patch"], fast=["patch"])
    assert world.client.patches()[0]["metadata"]["uid"] == "mirror-uid"


def test_plain_pod_old_status_is_its_own_beside_a_stale_mirror_pod(world: World) -> None:
    # SPEC 4.2 step 1: only a static pod takes its mirror pod's status as the old one. A pod that
    # is not static keeps its own, even while the pod manager still holds a mirror pod of its name
    # (upstream would take the mirror's: the allowed difference in docs/status-oracle.md).
    earlier = datetime(2020, 1, 1, 0, 0, 0, tzinfo=UTC)
    own = datetime(2020, 1, 1, 0, 0, 5, tzinfo=UTC)
    world.add(
        make_pod(
            "s",
            uid="mirror-uid",
            annotations=MIRROR_ANNOTATIONS,
            status=PodStatus(
                phase="Pending", conditions=(condition("PodScheduled").replace(last_transition_time=earlier),)
            ),
        ),
        to_server=False,
    )
    plain = world.add(
        make_pod(
            "s",
            uid="plain-uid",
            status=PodStatus(
                phase="Pending", conditions=(condition("PodScheduled").replace(last_transition_time=own),)
            ),
        )
    )
    assert world.pods.get_mirror_pod_by_pod(plain) is not None
    m = world.manager()
    m.terminate_pod(plain)
    got = m.get_pod_status("plain-uid")
    assert got is not None
    scheduled = get_cond(got, "PodScheduled")
    assert scheduled is not None and scheduled.last_transition_time == own


def test_static_pod_old_status_is_the_mirror_pods(world: World) -> None:
    # SPEC 4.2 step 1: no cached status -> the mirror pod's status (here terminal) is the old one.
    static, _ = _static_and_mirror(world, mirror_status=PodStatus(phase="Succeeded", reason="Done"))
    m = world.manager()
    m.set_pod_status(static, running_status(static))  # type: ignore[arg-type]
    got = m.get_pod_status("static-uid")
    assert got is not None
    assert (got.phase, got.reason) == ("Succeeded", "Done")
