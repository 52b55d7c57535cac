"""Pod deletion safety providers."""

from __future__ import annotations

import pytest

from podstatus.deletion import FakePodDeletionSafety, StatusBasedDeletionSafety
from podstatus.protocols import PodDeletionSafety
from podstatus.types import (
    ContainerState,
    ContainerStateRunning,
    ContainerStateTerminated,
    ContainerStateWaiting,
    ContainerStatus,
    ObjectMeta,
    Pod,
    PodStatus,
)

RUNNING = ContainerState(running=ContainerStateRunning())
TERMINATED = ContainerState(terminated=ContainerStateTerminated(exit_code=137))
WAITING = ContainerState(waiting=ContainerStateWaiting(reason="CrashLoopBackOff"))
EMPTY = ContainerState()


def cs(name: str, state: ContainerState, container_id: str | None = None) -> ContainerStatus:
    return ContainerStatus(name=name, state=state, container_id=container_id)


def pod(uid: str = "u", status: PodStatus | None = None) -> Pod:
    return Pod(metadata=ObjectMeta(uid=uid, name="p", namespace="ns"), status=status or PodStatus())


# --- the fake -----------------------------------------------------------------------


def test_fake_defaults_and_protocol() -> None:
    fake = FakePodDeletionSafety()
    assert isinstance(fake, PodDeletionSafety)
    assert fake.pod_resources_are_reclaimed(pod("a"), PodStatus()) is True
    assert fake.pod_could_have_running_containers(pod("a")) is False
    assert fake.calls == [("pod_resources_are_reclaimed", "a"), ("pod_could_have_running_containers", "a")]


def test_fake_configurable() -> None:
    fake = FakePodDeletionSafety(reclaimed=False, could_have_running_containers=True)
    assert fake.pod_resources_are_reclaimed(pod("a"), PodStatus()) is False
    assert fake.pod_could_have_running_containers(pod("a")) is True
    fake.reclaimed = True
    fake.could_have_running_containers = False
    assert fake.pod_resources_are_reclaimed(pod("a"), PodStatus()) is True
    assert fake.pod_could_have_running_containers(pod("a")) is False


def test_fake_per_uid_overrides() -> None:
    fake = FakePodDeletionSafety()
    fake.set_reclaimed("b", False)
    fake.set_could_have_running_containers("b", True)
    assert fake.pod_resources_are_reclaimed(pod("a"), PodStatus()) is True
    assert fake.pod_resources_are_reclaimed(pod("b"), PodStatus()) is False
    assert fake.pod_could_have_running_containers(pod("a")) is False
    assert fake.pod_could_have_running_containers(pod("b")) is True
    fake.set_reclaimed("b", None)
    fake.set_could_have_running_containers("b", None)
    assert fake.pod_resources_are_reclaimed(pod("b"), PodStatus()) is True
    assert fake.pod_could_have_running_containers(pod("b")) is False


def test_fake_calls_for_and_reset() -> None:
    fake = FakePodDeletionSafety()
    fake.pod_could_have_running_containers(pod("a"))
    fake.pod_resources_are_reclaimed(pod("b"), PodStatus())
    fake.pod_resources_are_reclaimed(pod("a"), PodStatus())
    assert fake.calls_for("a") == ["pod_could_have_running_containers", "pod_resources_are_reclaimed"]
    assert fake.calls_for("c") == []
    fake.reset_calls()
    assert fake.calls == []


# --- status based -------------------------------------------------------------------


def test_status_based_is_a_provider() -> None:
    assert isinstance(StatusBasedDeletionSafety(), PodDeletionSafety)


@pytest.mark.parametrize(
    ("status", "running"),
    [
        pytest.param(PodStatus(), False, id="no-statuses"),
        pytest.param(
            PodStatus(container_statuses=(cs("a", TERMINATED), cs("b", WAITING))), False, id="none-running"
        ),
        pytest.param(
            PodStatus(container_statuses=(cs("a", TERMINATED), cs("b", RUNNING))), True, id="regular"
        ),
        pytest.param(PodStatus(init_container_statuses=(cs("i", RUNNING),)), True, id="init"),
        pytest.param(PodStatus(ephemeral_container_statuses=(cs("e", RUNNING),)), True, id="ephemeral"),
    ],
)
def test_could_have_running_containers_from_pod_status(status: PodStatus, running: bool) -> None:
    assert StatusBasedDeletionSafety().pod_could_have_running_containers(pod(status=status)) is running


@pytest.mark.parametrize(
    ("status", "reclaimed"),
    [
        pytest.param(PodStatus(), True, id="no-statuses"),
        pytest.param(
            PodStatus(container_statuses=(cs("a", TERMINATED, "containerd://1"),)), True, id="terminated"
        ),
        pytest.param(PodStatus(container_statuses=(cs("a", WAITING),)), True, id="waiting-never-started"),
        pytest.param(PodStatus(container_statuses=(cs("a", EMPTY),)), True, id="empty-state"),
        pytest.param(
            PodStatus(container_statuses=(cs("a", WAITING, "containerd://1"),)),
            False,
            id="waiting-with-container-id",
        ),
        pytest.param(
            PodStatus(container_statuses=(cs("a", RUNNING, "containerd://1"),)), False, id="running"
        ),
        pytest.param(
            PodStatus(
                init_container_statuses=(cs("i", TERMINATED),),
                container_statuses=(cs("a", TERMINATED),),
                ephemeral_container_statuses=(cs("e", RUNNING),),
            ),
            False,
            id="ephemeral-running",
        ),
        pytest.param(
            PodStatus(init_container_statuses=(cs("i", RUNNING),), container_statuses=(cs("a", TERMINATED),)),
            False,
            id="init-running",
        ),
    ],
)
def test_resources_reclaimed_judges_the_given_status(status: PodStatus, reclaimed: bool) -> None:
    # pod.status says nothing runs: only the status handed in decides.
    assert StatusBasedDeletionSafety().pod_resources_are_reclaimed(pod(), status) is reclaimed


def test_status_provider_is_preferred_over_pod_status() -> None:
    cached = {"u": PodStatus(container_statuses=(cs("a", RUNNING),))}
    asked: list[str] = []

    def provider(uid: str) -> PodStatus | None:
        asked.append(uid)
        return cached.get(uid)

    safety = StatusBasedDeletionSafety(status_provider=provider)
    api_pod = pod("u", PodStatus(container_statuses=(cs("a", TERMINATED),)))
    assert safety.pod_could_have_running_containers(api_pod) is True
    # Running in the provider's status blocks reclaiming even if the judged status is done.
    assert safety.pod_resources_are_reclaimed(api_pod, api_pod.status) is False
    assert asked == ["u", "u"]

    cached["u"] = PodStatus(container_statuses=(cs("a", TERMINATED),))
    assert safety.pod_could_have_running_containers(api_pod) is False
    assert safety.pod_resources_are_reclaimed(api_pod, api_pod.status) is True


def test_status_provider_falls_back_to_pod_status() -> None:
    safety = StatusBasedDeletionSafety(status_provider=lambda uid: None)
    running = pod("u", PodStatus(container_statuses=(cs("a", RUNNING),)))
    assert safety.pod_could_have_running_containers(running) is True
    assert safety.pod_resources_are_reclaimed(running, PodStatus()) is False
