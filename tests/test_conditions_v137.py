"""Table tests of the v1.37 condition generation (generate.go, podutil): observedGeneration,
PodReadyToStartContainers, AllContainersRestarting, and the Initialized rule for pods restarted in place.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

import podstatus
from podstatus import (
    POD_SANDBOX_NOT_READY,
    RESTART_ALL_CONTAINERS_STARTED,
    RuntimeContainerStatus,
    SandboxStatus,
    all_containers_could_restart,
    calculate_pod_condition_observed_generation,
    calculate_pod_status_observed_generation,
    generate_all_containers_restarting_condition,
    generate_containers_ready_condition,
    generate_pod_initialized_condition,
    generate_pod_ready_condition,
    generate_pod_ready_to_start_containers_condition,
    pod_sandbox_changed,
)
from podstatus.types import (
    Container,
    ContainerState,
    ContainerStateRunning,
    ContainerStateTerminated,
    ContainerStateWaiting,
    ContainerStatus,
    ObjectMeta,
    Pod,
    PodCondition,
    PodSpec,
    PodStatus,
)

RUNNING = ContainerState(running=ContainerStateRunning())
WAITING = ContainerState(waiting=ContainerStateWaiting(reason="PodInitializing"))


def exited(code: int) -> ContainerState:
    return ContainerState(terminated=ContainerStateTerminated(exit_code=code))


def pod(
    generation: int | None = 3,
    *,
    containers: Sequence[Container] = (Container(name="app"),),
    init: Sequence[Container] = (),
    host_network: bool | None = None,
) -> Pod:
    return Pod(
        metadata=ObjectMeta(name="p", namespace="ns", uid="u1", generation=generation),
        spec=PodSpec(
            containers=tuple(containers), init_containers=tuple(init) or None, host_network=host_network
        ),
    )


def cs(name: str, *, ready: bool = True, state: ContainerState = RUNNING) -> ContainerStatus:
    return ContainerStatus(name=name, ready=ready, state=state)


OLD = PodStatus(phase="Running")

# --- observedGeneration -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("generation", "want"),
    [(None, None), (0, None), (1, 1), (7, 7)],
)
def test_pod_status_observed_generation_is_the_pod_generation(
    generation: int | None, want: int | None
) -> None:
    assert calculate_pod_status_observed_generation(pod(generation)) == want


@pytest.mark.parametrize(
    ("old", "generation", "want"),
    [
        (None, 4, None),  # no old status: upstream gives 0
        (OLD, 4, 4),
        (OLD, 0, None),
        (OLD, None, None),
        (PodStatus(conditions=(PodCondition(type="Ready", status="True", observed_generation=2),)), 5, 5),
    ],
)
def test_condition_observed_generation(
    old: PodStatus | None, generation: int | None, want: int | None
) -> None:
    assert calculate_pod_condition_observed_generation(old, generation, "Ready") == want


GENERATORS: list[tuple[str, Any]] = [
    (
        "ContainersReady",
        lambda p, **kw: generate_containers_ready_condition(p.spec, [cs("app")], "Running", **kw),
    ),
    ("Ready", lambda p, **kw: generate_pod_ready_condition(p.spec, [], [cs("app")], "Running", **kw)),
    ("Initialized", lambda p, **kw: generate_pod_initialized_condition(p.spec, [cs("app")], "Running", **kw)),
    # Every return path of ContainersReady carries it: the unknown, completed and failed ones too.
    ("ContainersReady", lambda p, **kw: generate_containers_ready_condition(p.spec, None, "Running", **kw)),
    (
        "ContainersReady",
        lambda p, **kw: generate_containers_ready_condition(p.spec, [cs("app")], "Failed", **kw),
    ),
    ("Ready", lambda p, **kw: generate_pod_ready_condition(p.spec, [], [], "Succeeded", **kw)),
    ("Initialized", lambda p, **kw: generate_pod_initialized_condition(p.spec, [], "Succeeded", **kw)),
]


@pytest.mark.parametrize(("ctype", "generate"), GENERATORS)
@pytest.mark.parametrize(
    ("kwargs", "want"),
    [
        ({}, None),  # SPEC 2.2's call: no observedGeneration
        ({"pod": None, "old_status": OLD}, None),
        ({"old_status": OLD}, None),
        ({"pod": "p"}, None),  # no old status: upstream's nil old status gives 0
        ({"pod": "p", "old_status": OLD}, 3),
    ],
)
def test_generators_take_pod_and_old_status(
    ctype: str, generate: Any, kwargs: dict[str, Any], want: int | None
) -> None:
    p = pod(3)
    kw = {k: (p if v == "p" else v) for k, v in kwargs.items()}
    c = generate(p, **kw)
    assert c.type == ctype
    assert c.observed_generation == want
    assert (c.to_dict().get("observedGeneration")) == want


def test_generators_take_pod_and_old_status_by_keyword_only() -> None:
    p = pod()
    with pytest.raises(TypeError):
        generate_containers_ready_condition(p.spec, [], "Running", p, OLD)  # type: ignore[call-arg]


# --- Initialized of a pod restarted in place ------------------------------------------------


@pytest.mark.parametrize(
    ("old", "want_status", "want_reason"),
    [
        (None, "False", "ContainersNotInitialized"),
        (
            PodStatus(conditions=(PodCondition(type="Initialized", status="False"),)),
            "False",
            "ContainersNotInitialized",
        ),
        (PodStatus(conditions=(PodCondition(type="Initialized", status="True"),)), "True", None),
        (
            PodStatus(conditions=(PodCondition(type="Ready", status="True"),)),
            "False",
            "ContainersNotInitialized",
        ),
    ],
)
def test_initialized_is_kept_when_init_containers_wait_again(
    old: PodStatus | None, want_status: str, want_reason: str | None
) -> None:
    p = pod(init=(Container(name="setup"),))
    statuses = [cs("setup", ready=False, state=WAITING), cs("app", ready=False, state=WAITING)]
    c = generate_pod_initialized_condition(p.spec, statuses, "Pending", pod=p, old_status=old)
    assert (c.status, c.reason) == (want_status, want_reason)


# --- PodReadyToStartContainers ---------------------------------------------------------------

READY = SandboxStatus(ready=True, ip="10.0.0.5")


@pytest.mark.parametrize(
    ("host_network", "sandboxes", "needed", "message"),
    [
        (None, [], True, "no pod sandbox exists"),
        (
            None,
            [READY, SandboxStatus(ready=True, ip="10.0.0.4")],
            True,
            "multiple pod sandboxes are ready and need to be reconciled",
        ),
        (None, [SandboxStatus(ready=False, ip="10.0.0.5"), READY], True, "pod sandbox is not ready"),
        (
            None,
            [SandboxStatus(ready=True, host_network=True, ip="")],
            True,
            "network namespace mode changed and sandbox needs to be recreated",
        ),
        (True, [READY], True, "network namespace mode changed and sandbox needs to be recreated"),
        (None, [SandboxStatus(ready=True, ip="")], True, "pod sandbox has no IP address"),
        (None, [SandboxStatus(ready=True, ip=None)], False, ""),  # no network status reported
        (True, [SandboxStatus(ready=True, host_network=True, ip="")], False, ""),  # host network needs no IP
        (None, [READY], False, ""),
        (None, [READY, SandboxStatus(ready=False)], False, ""),
    ],
)
def test_pod_ready_to_start_containers(
    host_network: bool | None, sandboxes: list[SandboxStatus], needed: bool, message: str
) -> None:
    p = pod(5, host_network=host_network)
    assert pod_sandbox_changed(p, sandboxes) == (needed, message)
    c = generate_pod_ready_to_start_containers_condition(p, OLD, sandboxes)
    assert c.type == "PodReadyToStartContainers"
    assert c.observed_generation == 5
    if needed:
        assert (c.status, c.reason, c.message) == ("False", POD_SANDBOX_NOT_READY, message)
    else:
        assert (c.status, c.reason, c.message) == ("True", None, None)


# --- AllContainersRestarting ---------------------------------------------------------------------

RULES = (
    {"action": "RestartAllContainers", "exitCodes": {"operator": "In", "values": [42]}},
    {"action": "Restart", "exitCodes": {"operator": "NotIn", "values": [0, 42]}},
)
APP = Container(name="app", restart_policy="Never", restart_policy_rules=RULES)
SIDE = Container(name="side")


@pytest.mark.parametrize(
    ("runtime", "old", "phase", "want"),
    [
        # Terminal phases first, whatever else is true.
        (
            [RuntimeContainerStatus("app", exited=True, exit_code=42)],
            None,
            "Succeeded",
            ("False", "PodCompleted", None),
        ),
        (
            [RuntimeContainerStatus("app", exited=True, exit_code=42)],
            None,
            "Failed",
            ("False", "PodFailed", None),
        ),
        # An exit the rule matches, containers still listed: restarting.
        (
            [RuntimeContainerStatus("app", exited=True, exit_code=42), RuntimeContainerStatus("side")],
            None,
            "Running",
            ("True", RESTART_ALL_CONTAINERS_STARTED, "container exited with restart policy rule"),
        ),
        # An exit no RestartAllContainers rule matches.
        ([RuntimeContainerStatus("app", exited=True, exit_code=1)], None, "Running", ("False", None, None)),
        ([RuntimeContainerStatus("app", exited=False, exit_code=42)], None, "Running", ("False", None, None)),
        # The API status says the container exited with 42.
        (
            [RuntimeContainerStatus("side")],
            PodStatus(container_statuses=(cs("app", state=exited(42)),)),
            "Running",
            ("True", RESTART_ALL_CONTAINERS_STARTED, "container exited with restart policy rule"),
        ),
        # Already restarting (old condition True) and the runtime has cleaned every container up.
        (
            [],
            PodStatus(conditions=(PodCondition(type="AllContainersRestarting", status="True"),)),
            "Running",
            ("False", None, None),
        ),
        (
            [RuntimeContainerStatus("side")],
            PodStatus(conditions=(PodCondition(type="AllContainersRestarting", status="True"),)),
            "Pending",
            ("True", RESTART_ALL_CONTAINERS_STARTED, "container exited with restart policy rule"),
        ),
        # No runtime status at all: nothing listed, so cleaned up.
        (
            None,
            PodStatus(container_statuses=(cs("app", state=exited(42)),)),
            "Running",
            ("False", None, None),
        ),
    ],
)
def test_all_containers_restarting(
    runtime: list[RuntimeContainerStatus] | None,
    old: PodStatus | None,
    phase: str,
    want: tuple[str, str | None, str | None],
) -> None:
    p = pod(2, containers=(APP, SIDE))
    c = generate_all_containers_restarting_condition(p, runtime, old, phase)
    assert c.type == "AllContainersRestarting"
    assert (c.status, c.reason, c.message) == want
    assert c.observed_generation is None  # upstream sets none on this one


@pytest.mark.parametrize(
    ("containers", "init", "want"),
    [
        ((APP,), (), True),
        ((SIDE,), (), False),
        ((SIDE,), (Container(name="i", restart_policy="Never", restart_policy_rules=RULES),), True),
        ((Container(name="r", restart_policy_rules=({"action": "Restart"},)),), (), False),
    ],
)
def test_all_containers_could_restart(
    containers: tuple[Container, ...], init: tuple[Container, ...], want: bool
) -> None:
    assert all_containers_could_restart(pod(containers=containers, init=init).spec) is want


def test_new_names_are_exported() -> None:
    for name in (
        "RESTART_ALL_CONTAINERS_STARTED",
        "POD_RESIZE_PENDING",
        "POD_RESIZE_IN_PROGRESS",
        "POD_REASON_DEFERRED",
        "POD_REASON_INFEASIBLE",
        "generate_pod_ready_to_start_containers_condition",
        "generate_all_containers_restarting_condition",
        "SetPodStatusResult",
        "PodUpdateNotifier",
    ):
        assert name in podstatus.__all__
    assert podstatus.RESTART_ALL_CONTAINERS_STARTED == "RestartAllContainersStarted"
    assert (podstatus.POD_REASON_DEFERRED, podstatus.POD_REASON_INFEASIBLE) == ("Deferred", "Infeasible")
