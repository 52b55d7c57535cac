"""node/completion.py: a provider's report made a pod status, without a server or a manager."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from podstatus.node.completion import (
    UnusableStatus,
    complete_containers,
    complete_status,
    initial_allocation,
)
from podstatus.types import (
    ContainerState,
    ContainerStateRunning,
    ContainerStatus,
    Pod,
    PodCondition,
    PodStatus,
)

STARTED = datetime(2026, 1, 1, tzinfo=UTC)


def pod(**spec: object) -> Pod:
    return Pod.from_dict(
        {
            "metadata": {"name": "web", "namespace": "default", "uid": "u-1", "generation": 2},
            "spec": {
                "nodeName": "vn-1",
                "initContainers": [{"name": "setup", "image": "busybox"}],
                "containers": [
                    {"name": "app", "image": "nginx", "resources": {"requests": {"cpu": "100m"}}},
                    {"name": "log", "image": "fluentd"},
                ],
                **spec,
            },
        }
    )


def app(restarts: int = 0, ready: bool = True) -> ContainerStatus:
    return ContainerStatus(
        name="app",
        image="",
        ready=ready,
        restart_count=restarts,
        state=ContainerState(running=ContainerStateRunning(started_at=STARTED)),
    )


def test_every_container_of_the_spec_gets_a_status() -> None:
    p = pod()
    inits, mains = complete_containers(
        p, PodStatus(phase="Pending", container_statuses=(app(),)), p.status, None, None
    )
    assert inits is not None and mains is not None
    assert [(c.name, c.state.waiting.reason if c.state.waiting else "running") for c in inits] == [
        ("setup", "PodInitializing")
    ]
    assert [(c.name, c.state.waiting.reason if c.state.waiting else "running") for c in mains] == [
        ("app", "running"),
        ("log", "ContainerCreating"),
    ]
    assert mains[0].image == "nginx"  # the spec's image when the provider gave none


def test_restart_counts_never_go_down() -> None:
    p = pod()
    base = PodStatus(phase="Running", container_statuses=(app(restarts=3),))
    _, mains = complete_containers(
        p, PodStatus(phase="Running", container_statuses=(app(restarts=0),)), base, None, None
    )
    assert mains is not None and mains[0].restart_count == 3


def test_the_allocation_goes_on_reported_containers() -> None:
    p = pod()
    allocation = initial_allocation(p)
    _, mains = complete_containers(
        p, PodStatus(phase="Running", container_statuses=(app(),)), p.status, allocation, None
    )
    assert mains is not None
    assert mains[0].allocated_resources == {"cpu": "100m"} and mains[0].resources == {
        "requests": {"cpu": "100m"}
    }
    assert mains[1].allocated_resources is None  # not reported: nothing said of it


@pytest.mark.parametrize(
    ("report", "why"),
    [
        ("Running", "expected a PodStatus, got str"),
        (PodStatus(phase=""), "phase '' is not one of"),
        (PodStatus(phase="Running", container_statuses=app()), "container statuses must be a list"),  # type: ignore[arg-type]
        (PodStatus(phase="Running", container_statuses=("app",)), "expected a ContainerStatus, got str"),  # type: ignore[arg-type]
        (PodStatus(phase="Running", container_statuses=(app().replace(name="db"),)), "does not have: db"),
    ],
)
def test_an_unusable_report_says_why(report: object, why: str) -> None:
    p = pod()
    with pytest.raises(UnusableStatus, match=why):
        complete_containers(p, report, p.status, None, None)


def test_the_whole_status_with_the_kubelets_conditions() -> None:
    p = pod()
    report = PodStatus(phase="Pending", pod_ip="10.0.0.5", container_statuses=(app(),))
    base = PodStatus(phase="Running")
    inits, mains = complete_containers(p, report, base, None, None)
    resize = [PodCondition(type="PodResizePending", status="True", reason="Deferred")]
    status = complete_status(p, report, base, inits, mains, resize_conditions=resize, host_ip="10.1.2.3")
    assert status.phase == "Running"  # a running pod is not made Pending by waiting containers
    types = [c.type for c in status.conditions]
    assert types == [
        "PodResizePending",
        "PodScheduled",
        "PodReadyToStartContainers",
        "Initialized",
        "ContainersReady",
        "Ready",
    ]
    scheduled = status.conditions[1]
    assert scheduled.status == "True" and scheduled.observed_generation == 2
    assert [ip.ip for ip in status.pod_ips] == ["10.0.0.5"]
    assert status.host_ip == "10.1.2.3" and [h.ip for h in status.host_ips] == ["10.1.2.3"]
    assert status.qos_class == "Burstable" and status.start_time is None
