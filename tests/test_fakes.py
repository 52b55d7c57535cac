"""The fake status manager (podstatus.fakes): it records calls and answers from what was set,
and where it keeps state it keeps what the real Manager keeps."""

from __future__ import annotations

from typing import Any

import pytest

from podstatus import BasicPodManager, new_manager
from podstatus.conditions import (
    POD_REASON_DEFERRED,
    POD_REASON_INFEASIBLE,
    POD_RESIZE_IN_PROGRESS,
    POD_RESIZE_PENDING,
)
from podstatus.deletion import FakePodDeletionSafety
from podstatus.fakes import FakeStatusManager
from podstatus.protocols import StatusManager
from podstatus.types import (
    Container,
    ContainerState,
    ContainerStateRunning,
    ContainerStateTerminated,
    ContainerStatus,
    ObjectMeta,
    Pod,
    PodCondition,
    PodSpec,
    PodStatus,
)

RUNNING = ContainerState(running=ContainerStateRunning())


def make_pod(uid: str = "u1", name: str = "p1", conditions: tuple[PodCondition, ...] = ()) -> Pod:
    return Pod(
        metadata=ObjectMeta(uid=uid, name=name, namespace="ns"),
        spec=PodSpec(containers=(Container(name="c", image="i:1"),), restart_policy="Always"),
        status=PodStatus(phase="Pending", conditions=conditions or None),
    )


def running(cid: str = "containerd://abc") -> PodStatus:
    return PodStatus(
        phase="Running",
        container_statuses=(
            ContainerStatus(name="c", ready=False, restart_count=0, state=RUNNING, container_id=cid),
        ),
    )


def test_is_a_status_manager() -> None:
    assert isinstance(FakeStatusManager(), StatusManager)


def test_records_calls_in_order_and_answers_from_what_was_set() -> None:
    fake = FakeStatusManager()
    pod = make_pod()
    assert fake.get_pod_status(pod.uid) is None
    fake.start()
    fake.set_pod_status(pod, running())
    assert fake.get_pod_status(pod.uid) == running()
    fake.stop(timeout=1.0)
    assert fake.methods() == ["get_pod_status", "start", "set_pod_status", "get_pod_status", "stop"]
    assert fake.calls_of("set_pod_status") == [(pod, running())]
    assert fake.calls_of("stop") == [(1.0,)]
    assert fake.started is False
    fake.clear_calls()
    assert fake.calls == []


def test_pending_until_synced() -> None:
    fake = FakeStatusManager()
    a, b = make_pod("a", "pa"), make_pod("b", "pb")
    fake.set_pod_status(a, running())
    fake.set_pod_status(b, running())
    fake.set_pod_status(b, running())  # the same status again is no change
    assert fake.pending_count() == 2
    assert fake.sync_batch() == 2
    assert fake.pending_count() == 0
    assert fake.sync_batch() == 0
    assert fake.sync_batch(all=True) == 2


def test_container_readiness_and_startup_change_the_kept_status() -> None:
    fake = FakeStatusManager()
    pod = make_pod()
    fake.set_container_readiness(pod.uid, "containerd://abc", True)  # nothing kept yet: no effect
    assert fake.get_pod_status(pod.uid) is None
    fake.set_pod_status(pod, running())
    fake.set_container_readiness(pod.uid, "containerd://abc", True)
    fake.set_container_startup(pod.uid, "containerd://abc", True)
    fake.set_container_readiness(pod.uid, "containerd://other", False)  # unknown container: no effect
    status = fake.get_pod_status(pod.uid)
    assert status is not None and status.container_statuses is not None
    assert status.container_statuses[0].ready is True
    assert status.container_statuses[0].started is True


def test_remove_orphaned_statuses_forgets_the_others() -> None:
    fake = FakeStatusManager()
    a, b = make_pod("a", "pa"), make_pod("b", "pb")
    fake.set_pod_status(a, running())
    fake.set_pod_status(b, running())
    fake.set_pod_resize_pending_condition("b", POD_REASON_DEFERRED)
    fake.remove_orphaned_statuses(["a"])
    assert fake.get_pod_status("a") is not None
    assert fake.get_pod_status("b") is None
    assert fake.get_pod_resize_conditions("b") == []
    assert fake.calls_of("remove_orphaned_statuses") == [(frozenset({"a"}),)]


def _script(manager: Any) -> dict[str, Any]:
    """The same calls on a fake and on the real manager; what each then answers."""
    pod = make_pod()
    manager.set_pod_status(pod, running())
    out: dict[str, Any] = {}
    out["pending_new"] = manager.set_pod_resize_pending_condition(pod.uid, "NodeCapacity", "no room", 2)
    out["pending_same"] = manager.set_pod_resize_pending_condition(pod.uid, "Other", "no room", 2)
    out["deferred"] = manager.is_pod_resize_deferred(pod.uid)
    out["pending_infeasible"] = manager.set_pod_resize_pending_condition(pod.uid, POD_REASON_INFEASIBLE)
    out["infeasible"] = manager.is_pod_resize_infeasible(pod.uid)
    out["in_progress_new"] = manager.set_pod_resize_in_progress_condition(pod.uid, "", "", 3)
    out["in_progress_kept_generation"] = manager.set_pod_resize_in_progress_condition(pod.uid, "R", "m", 7)
    out["types"] = [c.type for c in manager.get_pod_resize_conditions(pod.uid)]
    out["reasons"] = [c.reason for c in manager.get_pod_resize_conditions(pod.uid)]
    manager.clear_pod_resize_pending_condition(pod.uid, "done")
    out["cleared"] = manager.clear_pod_resize_in_progress_condition(pod.uid)
    out["cleared_again"] = manager.clear_pod_resize_in_progress_condition(pod.uid)
    out["after_clear"] = manager.get_pod_resize_conditions(pod.uid)
    backfilled = make_pod(
        "u2",
        "p2",
        conditions=(PodCondition(type=POD_RESIZE_PENDING, status="True", reason=POD_REASON_INFEASIBLE),),
    )
    manager.backfill_pod_resize_conditions([backfilled])
    out["backfilled_infeasible"] = manager.is_pod_resize_infeasible("u2")
    manager.terminate_pod(pod)
    status = manager.get_pod_status(pod.uid)
    out["terminated_phase"] = status.phase
    cs = status.container_statuses[0]
    out["terminated_container"] = (cs.state.terminated is not None, cs.state.terminated.reason)
    return out


def test_answers_as_the_real_manager_does() -> None:
    fake = FakeStatusManager()
    pods = BasicPodManager([make_pod()])
    real = new_manager(None, pods, FakePodDeletionSafety())
    got = _script(fake)
    assert got == _script(real)
    assert got["types"] == [POD_RESIZE_PENDING, POD_RESIZE_IN_PROGRESS]
    assert got["reasons"] == [POD_REASON_INFEASIBLE, "R"]
    assert got["in_progress_kept_generation"] == (3, True)
    assert got["cleared"] == (3, True) and got["cleared_again"] == (0, False)
    assert got["terminated_phase"] == "Failed"
    assert got["terminated_container"] == (True, "ContainerStatusUnknown")


def _accepting(manager: Any) -> tuple[list[tuple[str | None, bool, bool]], str]:
    """A pod that may not restart its containers, given statuses through accept_pod_status (per
    step: the phase now held, whether it changed, whether it was refused), then set_pod_status
    (the phase then held)."""
    pod = make_pod().replace(spec=make_pod().spec.replace(restart_policy="Never"))
    done = PodStatus(
        phase="Succeeded",
        container_statuses=(
            ContainerStatus(
                name="c",
                ready=False,
                restart_count=0,
                state=ContainerState(terminated=ContainerStateTerminated(exit_code=0, reason="Completed")),
                container_id="containerd://abc",
            ),
        ),
    )
    out = []
    for status in (running(), running(), done, running()):
        accepted = manager.accept_pod_status(pod, status)
        held = accepted.status.phase if accepted.status is not None else None
        out.append((held, accepted.changed, accepted.refused is not None))
    manager.set_pod_status(pod, running())  # refused by the setter too
    return out, manager.get_pod_status(pod.uid).phase


def test_accept_pod_status_answers_as_the_real_manager_does() -> None:
    fake = FakeStatusManager()
    pod = make_pod()
    real = new_manager(None, BasicPodManager([pod]), FakePodDeletionSafety())
    got = _accepting(fake)
    assert got == _accepting(real)
    assert got == (
        [
            ("Running", True, False),
            ("Running", False, False),
            ("Succeeded", True, False),
            ("Succeeded", False, True),
        ],
        "Succeeded",
    )
    assert [args[1].phase for args in fake.calls_of("accept_pod_status")] == [
        "Running",
        "Running",
        "Succeeded",
        "Running",
    ]


def test_a_refusal_says_what_the_real_manager_says() -> None:
    pod = make_pod().replace(spec=make_pod().spec.replace(restart_policy="Never"))
    done = running().replace(
        phase="Failed",
        container_statuses=(
            running()
            .container_statuses[0]  # type: ignore[index]
            .replace(state=ContainerState(terminated=ContainerStateTerminated(exit_code=1, reason="Error"))),
        ),
    )
    answers = []
    for manager in (FakeStatusManager(), new_manager(None, BasicPodManager([pod]), FakePodDeletionSafety())):
        manager.accept_pod_status(pod, done)
        answers.append(manager.accept_pod_status(pod, running()))
    fake_answer, real_answer = answers
    assert fake_answer.refused is not None and fake_answer.refused == real_answer.refused
    assert not fake_answer.changed and not real_answer.changed


@pytest.mark.parametrize("reason", ["", "Whatever", POD_REASON_DEFERRED])
def test_any_pending_reason_but_infeasible_is_deferred(reason: str) -> None:
    fake = FakeStatusManager()
    fake.set_pod_resize_pending_condition("u", reason)
    assert fake.is_pod_resize_deferred("u")
    assert not fake.is_pod_resize_infeasible("u")
    assert fake.calls_of("set_pod_resize_pending_condition") == [("u", POD_REASON_DEFERRED, "", 0)]
