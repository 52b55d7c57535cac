"""The manager methods of v1.37's status package (status_manager.go), as tables.

observedGeneration, SetPodStatus's answer, AddPodUpdateNotifier, SetPodVolumeHealth
and the resize conditions, against the recording fake client; what reaches a server
is checked against the embedded API server in test_manager_v137_server.py.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

import pytest
from mgrkit import (
    NOW,
    Clock,
    World,
    cid,
    condition,
    container_status,
    get_cond,
    make_pod,
    running_status,
    terminated,
    types_of,
)

from podstatus import (
    POD_REASON_DEFERRED,
    POD_REASON_INFEASIBLE,
    InvalidObjectError,
    Pod,
    PodStatus,
    SetPodStatusResult,
)
from podstatus.manager import accept
from podstatus.validation import check_container_state_transition


def with_generation(pod: Pod, generation: int | None) -> Pod:
    return pod.replace(metadata=pod.metadata.replace(generation=generation))


# --- observedGeneration ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("generations", "want"),
    [
        ([None], None),
        ([1], 1),
        ([1, 2], 2),
        ([3, 2], 3),  # never goes back (updateStatusInternal keeps the larger)
        ([2, None], 2),
    ],
)
def test_set_pod_status_reports_the_pod_generation(
    world: World, mode: str, generations: list[int | None], want: int | None
) -> None:
    pod = world.add(make_pod("g"))
    m = world.manager(mode)
    for i, generation in enumerate(generations):
        p = with_generation(pod, generation)
        m.set_pod_status(p, running_status(p, ready=i % 2 == 0))
    cached = m.get_pod_status(pod.uid)
    assert cached is not None and cached.observed_generation == want
    m.sync_batch()
    assert world.server_status(pod).observed_generation == want


def test_set_pod_status_overrides_an_observed_generation_given(world: World) -> None:
    pod = with_generation(world.add(make_pod("g")), 5)
    m = world.manager()
    m.set_pod_status(pod, running_status(pod).replace(observed_generation=99))
    assert m.get_pod_status(pod.uid).observed_generation == 5  # type: ignore[union-attr]


def test_a_new_generation_alone_is_a_change(world: World) -> None:
    pod = world.add(make_pod("g"))
    m = world.manager()
    assert m.set_pod_status_result(with_generation(pod, 1), running_status(pod)).changed
    assert not m.set_pod_status_result(with_generation(pod, 1), running_status(pod)).changed
    assert m.set_pod_status_result(with_generation(pod, 2), running_status(pod)).changed
    assert m.get_status_version(pod.uid) == 2


def test_set_container_readiness_gives_conditions_the_generation(world: World, mode: str) -> None:
    pod = with_generation(world.add(make_pod("r", containers=("a", "b"))), 4)
    world.pods.update_pod(pod)
    m = world.manager(mode)
    m.set_pod_status(pod, running_status(pod, ready=False))
    m.set_container_readiness(pod.uid, cid(pod, "a"), True)
    status = m.get_pod_status(pod.uid)
    for ctype in ("Ready", "ContainersReady"):
        c = get_cond(status, ctype)
        assert c is not None and c.observed_generation == 4, ctype
    # Conditions it did not regenerate are left as they were.
    assert get_cond(status, "PodScheduled").observed_generation is None  # type: ignore[union-attr]


# --- SetPodStatus's answer ---------------------------------------------------------------------


def test_set_pod_status_result_table(world: World) -> None:
    pod = world.add(make_pod("s", restart_policy="Never"))
    m = world.manager()
    done = PodStatus(phase="Succeeded", container_statuses=(container_status(pod, "app", terminated(0)),))
    again = running_status(pod)  # a terminated container running again: refused
    steps: list[tuple[PodStatus, bool, str | None]] = [
        (running_status(pod, ready=False), True, "Running"),
        (running_status(pod, ready=False), False, "Running"),
        (done, True, "Succeeded"),
        (again, False, "Succeeded"),
    ]
    for status, changed, phase in steps:
        result = m.set_pod_status_result(pod, status)
        assert isinstance(result, SetPodStatusResult)
        cached, was_changed = result
        assert was_changed is changed
        assert cached == m.get_pod_status(pod.uid)
        assert cached is not None and cached.phase == phase


def test_set_pod_status_result_when_nothing_is_cached(world: World) -> None:
    # Refused before anything was cached: no status (upstream answers an empty one).
    pod = world.add(
        make_pod(
            "n",
            restart_policy="Never",
            status=PodStatus(phase="Running", container_statuses=()),
        )
    )
    old = PodStatus(phase="Failed")
    pod = pod.replace(status=old.replace(container_statuses=(container_status(pod, "app", terminated(1)),)))
    assert world.manager().set_pod_status_result(pod, running_status(pod)) == (None, False)


def test_accept_pod_status_says_why_it_refused_checking_once(
    world: World, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    checks: list[str | None] = []

    def counted(*args: Any) -> str | None:
        checks.append(check_container_state_transition(*args))
        return checks[-1]

    monkeypatch.setattr(accept, "check_container_state_transition", counted)
    pod = world.add(make_pod("s", restart_policy="Never"))
    m = world.manager()
    done = PodStatus(phase="Succeeded", container_statuses=(container_status(pod, "app", terminated(0)),))
    first = m.accept_pod_status(pod, done)
    assert first.changed and first.refused is None and first.status == m.get_pod_status(pod.uid)
    assert checks == [None]
    refused = m.accept_pod_status(pod, running_status(pod))  # a terminated container running again
    assert len(checks) == 2 and refused.refused == checks[1] and refused.refused is not None
    assert "app" in refused.refused
    assert refused == (first.status, False, checks[1])
    assert f"Status update on pod aborted: {refused.refused}" in caplog.text
    # The public setters keep their answers: None, and upstream's (status, changed).
    assert m.set_pod_status(pod, running_status(pod)) is None
    assert m.set_pod_status_result(pod, running_status(pod)) == (first.status, False)
    assert len(checks) == 4 and m.get_pod_status(pod.uid) == first.status


# --- AddPodUpdateNotifier -------------------------------------------------------------------------


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def on_pod_updated(self, pod: Pod, status: PodStatus, is_added: bool) -> None:
        assert pod.status == status  # the pod carries the status it is told about
        self.calls.append(("updated", pod.uid, status.phase, is_added))

    def on_pod_removed(self, pod: Pod) -> None:
        self.calls.append(("removed", pod.uid, pod.status.phase))


def test_notifiers_are_told_of_every_accepted_status(world: World) -> None:
    pod = world.add(make_pod("n"))
    deleting = world.add(make_pod("d", deletion_timestamp=NOW))
    m = world.manager()
    first, second = Recorder(), Recorder()
    m.add_pod_update_notifier(first)
    m.add_pod_update_notifier(second)
    m.set_pod_status(pod, running_status(pod, ready=False))  # new: added
    m.set_pod_status(pod, running_status(pod, ready=False))  # unchanged: nothing
    m.set_container_readiness(pod.uid, cid(pod, "app"), True)  # changed: updated
    m.set_container_startup(pod.uid, cid(pod, "app"), False)
    m.set_pod_status(deleting, running_status(deleting))  # new but being deleted: not "added"
    m.terminate_pod(pod)  # finished: removed
    want = [
        ("updated", pod.uid, "Running", True),
        ("updated", pod.uid, "Running", False),
        ("updated", pod.uid, "Running", False),
        ("updated", deleting.uid, "Running", False),
        ("removed", pod.uid, "Failed"),
    ]
    assert first.calls == want
    assert second.calls == want


def test_a_failing_notifier_does_not_stop_the_others(world: World, caplog: pytest.LogCaptureFixture) -> None:
    class Broken:
        def on_pod_updated(self, pod: Pod, status: PodStatus, is_added: bool) -> None:
            raise RuntimeError("boom")

        def on_pod_removed(self, pod: Pod) -> None:
            raise RuntimeError("boom")

    pod = world.add(make_pod("n"))
    m = world.manager()
    good = Recorder()
    m.add_pod_update_notifier(Broken())
    m.add_pod_update_notifier(good)
    with caplog.at_level(logging.ERROR, logger="podstatus.manager"):
        m.set_pod_status(pod, running_status(pod))
    assert good.calls == [("updated", pod.uid, "Running", True)]
    assert m.get_pod_status(pod.uid) is not None
    assert "notifier failed" in caplog.text


def test_a_notifier_may_call_the_manager(world: World) -> None:
    # Told after the lock is released: reading the manager from a notifier does not deadlock.
    pod = world.add(make_pod("n"))
    m = world.manager()
    seen: list[PodStatus | None] = []

    class Reader:
        def on_pod_updated(self, pod: Pod, status: PodStatus, is_added: bool) -> None:
            seen.append(m.get_pod_status(pod.uid))

        def on_pod_removed(self, pod: Pod) -> None:
            pass

    m.add_pod_update_notifier(Reader())
    m.set_pod_status(pod, running_status(pod))
    assert seen == [m.get_pod_status(pod.uid)]


# --- SetPodVolumeHealth ----------------------------------------------------------------------------

DEGRADED = {"status": "Degraded", "reason": "SlowIO", "message": "latency 900ms"}
LOST = {"status": "DataLoss", "reason": "Corrupt"}


@pytest.mark.parametrize(
    ("steps", "want_changes", "want_entries"),
    [
        ([("data", [DEGRADED])], [True], {"data": [DEGRADED]}),
        # The same (status, reason) with another message is no change.
        (
            [("data", [DEGRADED]), ("data", [{**DEGRADED, "message": "latency 950ms"}])],
            [True, False],
            {"data": [DEGRADED]},
        ),
        ([("data", [DEGRADED]), ("data", [LOST, DEGRADED])], [True, True], {"data": [LOST, DEGRADED]}),
        # Empty means healthy: the entry stays, with no conditions.
        ([("data", [DEGRADED]), ("data", [])], [True, True], {"data": []}),
        ([("data", [])], [False], {}),
        ([("data", [DEGRADED]), ("logs", [LOST])], [True, True], {"data": [DEGRADED], "logs": [LOST]}),
    ],
)
def test_set_pod_volume_health(
    world: World,
    steps: list[tuple[str, list[dict[str, str]]]],
    want_changes: list[bool],
    want_entries: dict[str, list[dict[str, str]]],
) -> None:
    pod = world.add(make_pod("v"))
    m = world.manager()
    m.set_pod_status(pod, running_status(pod))
    changes = [m.set_pod_volume_health(pod.uid, name, conds) for name, conds in steps]
    assert changes == want_changes
    status = m.get_pod_status(pod.uid)
    assert status is not None
    got = {v["name"]: list(v.get("healthConditions") or ()) for v in status.volume_health or ()}
    assert got == want_entries
    for v in status.volume_health or ():
        assert v["lastTransitionTime"] == "2024-05-01T12:00:00Z"
    # A later status without volume health keeps it (updateStatusInternal).
    m.set_pod_status(pod, running_status(pod, ready=False))
    assert m.get_pod_status(pod.uid).volume_health == status.volume_health  # type: ignore[union-attr]
    m.sync_batch()
    server = world.server_status(pod).to_dict().get("volumeHealth") or []
    assert {v["name"]: v.get("healthConditions", []) for v in server} == want_entries


def test_set_pod_volume_health_needs_a_known_cached_pod(world: World) -> None:
    pod = world.add(make_pod("v"))
    unknown = make_pod("ghost")
    m = world.manager()
    assert not m.set_pod_volume_health(pod.uid, "data", [DEGRADED])  # not cached yet
    assert not m.set_pod_volume_health(unknown.uid, "data", [DEGRADED])  # not in the pod manager
    assert m.get_pod_status(pod.uid) is None


@pytest.mark.parametrize(
    ("conditions", "path"),
    [
        ("Degraded", "healthConditions"),
        ([{"reason": "R"}], "healthConditions[0].status"),
        ([DEGRADED, {"status": "Degraded"}], "healthConditions[1].reason"),
        ([{"status": "Degraded", "reason": "R", "message": 3}], "healthConditions[0].message"),
    ],
)
def test_set_pod_volume_health_refuses_bad_input(world: World, conditions: Any, path: str) -> None:
    pod = world.add(make_pod("v"))
    m = world.manager()
    m.set_pod_status(pod, running_status(pod))
    before = m.get_pod_status(pod.uid)
    with pytest.raises(InvalidObjectError) as err:
        m.set_pod_volume_health(pod.uid, "data", conditions)
    assert err.value.path == path
    assert m.get_pod_status(pod.uid) is before


# --- resize conditions --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("calls", "want_returns", "want_reason", "deferred", "infeasible"),
    [
        ([("Deferred", "", 1)], [True], POD_REASON_DEFERRED, True, False),
        ([("Infeasible", "too big", 1)], [True], POD_REASON_INFEASIBLE, False, True),
        # Any other reason is Deferred.
        ([("OutOfcpu", "", 1)], [True], POD_REASON_DEFERRED, True, False),
        # The same reason and generation: no change (a new message alone is none either).
        ([("Deferred", "a", 1), ("Deferred", "b", 1)], [True, False], POD_REASON_DEFERRED, True, False),
        ([("Deferred", "", 1), ("Deferred", "", 2)], [True, True], POD_REASON_DEFERRED, True, False),
        ([("Deferred", "", 1), ("Infeasible", "", 1)], [True, True], POD_REASON_INFEASIBLE, False, True),
    ],
)
def test_set_pod_resize_pending_condition(
    world: World,
    clock: Clock,
    calls: list[tuple[str, str, int]],
    want_returns: list[bool],
    want_reason: str,
    deferred: bool,
    infeasible: bool,
) -> None:
    m = world.manager()
    returns = []
    for reason, message, generation in calls:
        returns.append(m.set_pod_resize_pending_condition("u1", reason, message, generation))
        clock.advance(5)
    assert returns == want_returns
    (c,) = m.get_pod_resize_conditions("u1")
    assert (c.type, c.status, c.reason) == ("PodResizePending", "True", want_reason)
    assert c.observed_generation == calls[-1][2]
    assert c.message == (calls[-1][1] or None)
    assert c.last_probe_time == NOW + _s(5 * (len(calls) - 1))  # probed at the last call
    # The transition time moves only with the reason: the start of the last run of that reason.
    reasons = [POD_REASON_INFEASIBLE if r == "Infeasible" else POD_REASON_DEFERRED for r, _, _ in calls]
    start = len(reasons) - 1
    while start > 0 and reasons[start - 1] == reasons[-1]:
        start -= 1
    assert c.last_transition_time == NOW + _s(5 * start)
    assert m.is_pod_resize_deferred("u1") is deferred
    assert m.is_pod_resize_infeasible("u1") is infeasible


def _s(seconds: int) -> timedelta:
    return timedelta(seconds=seconds)


@pytest.mark.parametrize(
    ("calls", "want"),
    [
        # (reason, message, generation) -> (generation returned, changed)
        ([("", "", 3)], [(3, True)]),
        # An existing condition keeps its generation...
        ([("", "", 3), ("", "", 4)], [(3, True), (3, False)]),
        # ...and its reason and message when both are empty.
        ([("Error", "oom", 3), ("", "", 4)], [(3, True), (3, False)]),
        ([("Error", "oom", 3), ("Error", "oom again", 4)], [(3, True), (3, True)]),
        ([("", "", 3), ("Error", "", 4)], [(3, True), (3, True)]),
    ],
)
def test_set_pod_resize_in_progress_condition(
    world: World, calls: list[tuple[str, str, int]], want: list[tuple[int, bool]]
) -> None:
    m = world.manager()
    assert [m.set_pod_resize_in_progress_condition("u1", *call) for call in calls] == want
    (c,) = m.get_pod_resize_conditions("u1")
    assert (c.type, c.observed_generation) == ("PodResizeInProgress", want[0][0])
    assert not m.is_pod_resize_deferred("u1") and not m.is_pod_resize_infeasible("u1")


def test_clear_resize_conditions(world: World) -> None:
    m = world.manager()
    assert m.clear_pod_resize_in_progress_condition("u1") == (0, False)
    m.clear_pod_resize_pending_condition("u1")  # nothing to clear: no error
    m.set_pod_resize_in_progress_condition("u1", "", "", 7)
    m.set_pod_resize_pending_condition("u1", "Deferred", "", 8)
    assert types_of(PodStatus(conditions=tuple(m.get_pod_resize_conditions("u1")))) == [
        "PodResizePending",
        "PodResizeInProgress",
    ]
    m.clear_pod_resize_pending_condition("u1", "resized")
    assert not m.is_pod_resize_deferred("u1")
    assert [c.type for c in m.get_pod_resize_conditions("u1")] == ["PodResizeInProgress"]
    assert m.clear_pod_resize_in_progress_condition("u1") == (7, True)
    assert m.get_pod_resize_conditions("u1") == []
    # A new in-progress condition takes the generation given once the old one is cleared.
    assert m.set_pod_resize_in_progress_condition("u1", "", "", 9) == (9, True)


def test_backfill_pod_resize_conditions(world: World) -> None:
    m = world.manager()
    pending = condition("PodResizePending", reason="Infeasible", message="Node didn't have enough capacity")
    pods = [
        make_pod(
            "a", status=PodStatus(conditions=(pending.replace(observed_generation=2), condition("Ready")))
        ),
        make_pod(
            "b",
            status=PodStatus(conditions=(condition("PodResizeInProgress").replace(observed_generation=5),)),
        ),
        make_pod("c", status=PodStatus(conditions=(condition("Ready"),))),
    ]
    m.backfill_pod_resize_conditions(pods)
    (a,) = m.get_pod_resize_conditions("uid-a")
    assert (a.type, a.reason, a.message, a.observed_generation) == (
        "PodResizePending",
        "Infeasible",
        "Node didn't have enough capacity",
        2,
    )
    assert a.last_transition_time == NOW and a.last_probe_time == NOW
    assert m.is_pod_resize_infeasible("uid-a")
    (b,) = m.get_pod_resize_conditions("uid-b")
    assert (b.type, b.observed_generation) == ("PodResizeInProgress", 5)
    assert m.get_pod_resize_conditions("uid-c") == []


def test_resize_conditions_go_with_the_pod(world: World, mode: str) -> None:
    pod = world.add(make_pod("a"))
    m = world.manager(mode)
    m.set_pod_status(pod, running_status(pod))
    m.set_pod_resize_pending_condition(pod.uid, "Deferred", "", 1)
    m.remove_orphaned_statuses([])
    assert m.get_pod_resize_conditions(pod.uid) == []


def test_resize_conditions_are_kept_through_merges(world: World, mode: str) -> None:
    # Owned by the kubelet (v1.37): the cached ones are written, the server's others dropped.
    pod = world.add(make_pod("a"))
    m = world.manager(mode)
    m.set_pod_resize_pending_condition(pod.uid, "Infeasible", "too big", 2)
    status = running_status(pod)
    m.set_pod_status(
        pod, status.replace(conditions=(*(status.conditions or ()), *m.get_pod_resize_conditions(pod.uid)))
    )
    m.sync_batch()
    got = get_cond(world.server_status(pod), "PodResizePending")
    assert got is not None and (got.reason, got.message, got.observed_generation) == (
        "Infeasible",
        "too big",
        2,
    )
    m.clear_pod_resize_pending_condition(pod.uid)
    m.set_pod_status(pod, status)
    m.sync_batch()
    assert get_cond(world.server_status(pod), "PodResizePending") is None


def test_volume_health_handed_out_cannot_be_changed(world: World) -> None:
    # SPEC 2.1: what the manager built for a volume is read-only in the status it hands out.
    pod = world.add(make_pod("v"))
    m = world.manager()
    m.set_pod_status(pod, running_status(pod))
    given = [dict(DEGRADED)]
    m.set_pod_volume_health(pod.uid, "data", given)
    given[0]["reason"] = "Changed"  # the caller's list is not the cached one
    health = m.get_pod_status(pod.uid).volume_health  # type: ignore[union-attr]
    with pytest.raises(TypeError):
        health.append({"name": "x"})
    with pytest.raises(TypeError):
        health[0]["healthConditions"][0]["reason"] = "Changed"
    assert health[0]["healthConditions"][0]["reason"] == "SlowIO"


@pytest.mark.parametrize(
    ("on_server", "want"),
    [
        (None, "sync"),  # new on the server: the time of the sync
        ("True", "server"),  # the eviction API set it already: its time stays
        ("False", "sync"),  # it changed: the time of the sync
    ],
)
def test_disruption_target_time_after_the_delayed_terminal_sync(
    world: World, clock: Clock, mode: str, on_server: str | None, want: str
) -> None:
    server_time = NOW - timedelta(hours=1)
    extra = (
        (
            condition("DisruptionTarget", on_server, "EvictionByEvictionAPI").replace(
                last_transition_time=server_time
            ),
        )
        if on_server
        else ()
    )
    pod = world.add(make_pod("d", status=PodStatus(phase="Running", conditions=extra or None)))
    m = world.manager(mode)
    world.safety.could_have_running_containers = True
    failed = running_status(
        pod, phase="Failed", extra_conditions=(condition("DisruptionTarget", "True", "TerminationByKubelet"),)
    )
    m.set_pod_status(pod, failed)
    m.sync_batch()  # containers may still run: the terminal phase and the condition wait
    clock.advance(30)
    world.safety.could_have_running_containers = False
    m.sync_batch(all=True)
    sent = get_cond(world.server_status(pod), "DisruptionTarget")
    assert sent is not None and sent.reason == "TerminationByKubelet"
    expected = server_time if want == "server" else clock.now
    assert sent.last_transition_time == expected
    # The cache holds the time the server got, as upstream's shared condition list does.
    assert get_cond(m.get_pod_status(pod.uid), "DisruptionTarget").last_transition_time == expected  # type: ignore[union-attr]
    assert world.server_status(pod).phase == "Failed"


@pytest.mark.parametrize(
    ("bad", "path"),
    [
        (lambda p, s: (with_generation(p, "3"), s), "status.observedGeneration"),  # type: ignore[arg-type]
        (
            lambda p, s: (p, s.replace(conditions=(condition("Ready").replace(observed_generation="2"),))),
            "status.conditions[0].observedGeneration",
        ),
    ],
)
def test_a_generation_that_is_not_a_number_is_refused(world: World, bad: Any, path: str) -> None:
    pod = world.add(make_pod("g"))
    m = world.manager()
    m.set_pod_status(pod, running_status(pod))
    before = m.get_pod_status(pod.uid)
    bad_pod, bad_status = bad(pod, running_status(pod, ready=False))
    with pytest.raises(InvalidObjectError) as err:
        m.set_pod_status(bad_pod, bad_status)
    assert err.value.path == path
    assert m.get_pod_status(pod.uid) is before
