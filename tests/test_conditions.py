"""Table tests of condition generation (SPEC section 3, kubelet generate.go)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from podstatus.conditions import (
    CONTAINERS_NOT_INITIALIZED,
    CONTAINERS_NOT_READY,
    CONTAINERS_READY,
    DISRUPTION_TARGET,
    KUBELET_OWNED_CONDITIONS,
    POD_COMPLETED,
    POD_FAILED,
    POD_INITIALIZED,
    POD_READY,
    POD_READY_TO_START_CONTAINERS,
    POD_SCHEDULED,
    READINESS_GATES_NOT_READY,
    UNKNOWN_CONTAINER_STATUSES,
    generate_containers_ready_condition,
    generate_pod_initialized_condition,
    generate_pod_ready_condition,
    get_condition,
    is_kubelet_owned,
    is_kubelet_shared,
    is_restartable_init_container,
    is_terminal_phase,
    need_to_reconcile_pod_readiness,
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
    PodReadinessGate,
    PodSpec,
    PodStatus,
)

RUNNING = ContainerState(running=ContainerStateRunning())
TERMINATED = ContainerState(terminated=ContainerStateTerminated(exit_code=0))
WAITING = ContainerState(waiting=ContainerStateWaiting(reason="ContainerCreating"))


def spec(
    containers: Sequence[str] = (),
    init: Sequence[str] = (),
    sidecars: Sequence[str] = (),
    gates: Sequence[str] = (),
) -> PodSpec:
    """Init containers are listed first, then sidecars (restartable init containers)."""
    init_containers = tuple(Container(name=n) for n in init) + tuple(
        Container(name=n, restart_policy="Always") for n in sidecars
    )
    return PodSpec(
        containers=tuple(Container(name=n) for n in containers),
        init_containers=init_containers or None,
        readiness_gates=tuple(PodReadinessGate(condition_type=g) for g in gates) or None,
    )


def cs(
    name: str, ready: bool = False, started: bool | None = None, state: ContainerState | None = None
) -> ContainerStatus:
    return ContainerStatus(name=name, ready=ready, started=started, state=state or WAITING)


def cond(type_: str, status: str, reason: str | None = None, message: str | None = None) -> PodCondition:
    return PodCondition(type=type_, status=status, reason=reason, message=message)


def triple(c: PodCondition) -> tuple[str, str, str | None, str | None]:
    return (c.type, c.status, c.reason, c.message)


# --- ContainersReady ----------------------------------------------------------------

CONTAINERS_READY_CASES = [
    pytest.param(
        spec(["a"]), None, "Running", ("False", UNKNOWN_CONTAINER_STATUSES, None), id="none-statuses"
    ),
    pytest.param(
        spec(["a"]), None, "Succeeded", ("False", UNKNOWN_CONTAINER_STATUSES, None), id="none-beats-succeeded"
    ),
    pytest.param(
        spec(["a", "b"]), [cs("a", True), cs("b", True)], "Running", ("True", None, None), id="all-ready"
    ),
    pytest.param(spec([]), [], "Running", ("True", None, None), id="no-containers"),
    pytest.param(
        spec(["a", "b"]),
        [cs("a", True)],
        "Running",
        ("False", CONTAINERS_NOT_READY, "containers with unknown status: [b]"),
        id="unknown",
    ),
    pytest.param(
        spec(["a", "b", "c"]),
        [cs("a", False), cs("b", True), cs("c", False)],
        "Running",
        ("False", CONTAINERS_NOT_READY, "containers with unready status: [a c]"),
        id="unready",
    ),
    pytest.param(
        spec(["a", "b", "c", "d"]),
        [cs("b", False), cs("d", False)],
        "Pending",
        (
            "False",
            CONTAINERS_NOT_READY,
            "containers with unknown status: [a c], containers with unready status: [b d]",
        ),
        id="unknown-and-unready",
    ),
    pytest.param(
        spec(["b", "a"]),
        [cs("a"), cs("b")],
        "Running",
        ("False", CONTAINERS_NOT_READY, "containers with unready status: [b a]"),
        id="spec-order-not-status-order",
    ),
    pytest.param(
        spec(["a"]), [cs("a", False)], "Succeeded", ("False", POD_COMPLETED, None), id="succeeded-all-known"
    ),
    pytest.param(
        spec(["a", "b"]),
        [cs("a", True)],
        "Succeeded",
        ("False", CONTAINERS_NOT_READY, "containers with unknown status: [b]"),
        id="succeeded-with-unknown",
    ),
    pytest.param(spec(["a"]), [cs("a", True)], "Failed", ("False", POD_FAILED, None), id="failed-ready"),
    pytest.param(spec(["a", "b"]), [], "Failed", ("False", POD_FAILED, None), id="failed-unknown"),
    pytest.param(
        spec(["a"], sidecars=["s"]),
        [cs("s", False, started=True, state=RUNNING), cs("a", True)],
        "Running",
        ("False", CONTAINERS_NOT_READY, "containers with unready status: [s]"),
        id="sidecar-unready",
    ),
    pytest.param(
        spec(["a"], sidecars=["s"]),
        [cs("a", True)],
        "Running",
        ("False", CONTAINERS_NOT_READY, "containers with unknown status: [s]"),
        id="sidecar-unknown",
    ),
    pytest.param(
        spec(["a"], init=["i"], sidecars=["s"]),
        [cs("i", False, state=TERMINATED), cs("s", True), cs("a", True)],
        "Running",
        ("True", None, None),
        id="regular-init-not-counted",
    ),
    pytest.param(
        spec(["a", "b"], sidecars=["s1", "s2"]),
        [cs("a"), cs("s2")],
        "Running",
        (
            "False",
            CONTAINERS_NOT_READY,
            "containers with unknown status: [s1 b], containers with unready status: [s2 a]",
        ),
        id="sidecars-walked-first",
    ),
]


@pytest.mark.parametrize(("pod_spec", "statuses", "phase", "want"), CONTAINERS_READY_CASES)
def test_containers_ready(
    pod_spec: PodSpec,
    statuses: list[ContainerStatus] | None,
    phase: str,
    want: tuple[str, str | None, str | None],
) -> None:
    got = generate_containers_ready_condition(pod_spec, statuses, phase)
    assert triple(got) == (CONTAINERS_READY, *want)
    assert got.last_probe_time is None
    assert got.last_transition_time is None


def test_containers_ready_accepts_tuples_and_first_status_of_a_name_wins() -> None:
    got = generate_containers_ready_condition(spec(["a"]), (cs("a", True), cs("a", False)), "Running")
    assert got.status == "True"


# --- Ready --------------------------------------------------------------------------

READY_CASES = [
    pytest.param(spec(["a"]), None, None, "Running", ("False", UNKNOWN_CONTAINER_STATUSES, None), id="none"),
    pytest.param(
        spec(["a", "b"]),
        None,
        [cs("b", False)],
        "Running",
        (
            "False",
            CONTAINERS_NOT_READY,
            "containers with unknown status: [a], containers with unready status: [b]",
        ),
        id="copies-containers-ready",
    ),
    pytest.param(
        spec(["a"], gates=["g"]),
        [cond("g", "True")],
        [cs("a", True)],
        "Succeeded",
        ("False", POD_COMPLETED, None),
        id="succeeded",
    ),
    pytest.param(spec(["a"]), None, [cs("a", True)], "Failed", ("False", POD_FAILED, None), id="failed"),
    pytest.param(spec(["a"]), None, [cs("a", True)], "Running", ("True", None, None), id="ready-no-gates"),
    pytest.param(
        spec(["a"], gates=["g1"]),
        [],
        [cs("a", True)],
        "Running",
        (
            "False",
            READINESS_GATES_NOT_READY,
            'corresponding condition of pod readiness gate "g1" does not exist.',
        ),
        id="gate-missing",
    ),
    pytest.param(
        spec(["a"], gates=["g1"]),
        None,
        [cs("a", True)],
        "Running",
        (
            "False",
            READINESS_GATES_NOT_READY,
            'corresponding condition of pod readiness gate "g1" does not exist.',
        ),
        id="gate-missing-none-conditions",
    ),
    pytest.param(
        spec(["a"], gates=["g1"]),
        [cond("g1", "False")],
        [cs("a", True)],
        "Running",
        (
            "False",
            READINESS_GATES_NOT_READY,
            'the status of pod readiness gate "g1" is not "True", but False',
        ),
        id="gate-false",
    ),
    pytest.param(
        spec(["a"], gates=["g1"]),
        [cond("g1", "Unknown")],
        [cs("a", True)],
        "Running",
        (
            "False",
            READINESS_GATES_NOT_READY,
            'the status of pod readiness gate "g1" is not "True", but Unknown',
        ),
        id="gate-unknown",
    ),
    pytest.param(
        spec(["a"], gates=["g1", "g2", "g3"]),
        [cond("g3", "False"), cond("g2", "True")],
        [cs("a", True)],
        "Running",
        (
            "False",
            READINESS_GATES_NOT_READY,
            'corresponding condition of pod readiness gate "g1" does not exist., '
            'the status of pod readiness gate "g3" is not "True", but False',
        ),
        id="gates-joined",
    ),
    pytest.param(
        spec(["a"], gates=["g1", "g2"]),
        [cond("g1", "True"), cond("g2", "True")],
        [cs("a", True)],
        "Running",
        ("True", None, None),
        id="gates-true",
    ),
]


@pytest.mark.parametrize(("pod_spec", "conditions", "statuses", "phase", "want"), READY_CASES)
def test_ready(
    pod_spec: PodSpec,
    conditions: list[PodCondition] | None,
    statuses: list[ContainerStatus] | None,
    phase: str,
    want: tuple[str, str | None, str | None],
) -> None:
    got = generate_pod_ready_condition(pod_spec, conditions, statuses, phase)
    assert triple(got) == (POD_READY, *want)
    assert got.last_probe_time is None
    assert got.last_transition_time is None


# --- Initialized --------------------------------------------------------------------

INITIALIZED_CASES = [
    pytest.param(
        spec(["a"], init=["i"]), None, "Pending", ("False", UNKNOWN_CONTAINER_STATUSES, None), id="none"
    ),
    pytest.param(spec(["a"]), None, "Pending", ("True", None, None), id="none-without-init"),
    pytest.param(spec(["a"]), [], "Pending", ("True", None, None), id="no-init"),
    pytest.param(
        spec(["a"], init=["i1", "i2"]),
        [cs("i1", True, state=TERMINATED), cs("i2", True, state=TERMINATED)],
        "Pending",
        ("True", None, None),
        id="all-done",
    ),
    pytest.param(
        spec(["a"], init=["i1", "i2"]),
        [cs("i1", True, state=TERMINATED)],
        "Pending",
        ("False", CONTAINERS_NOT_INITIALIZED, "containers with unknown status: [i2]"),
        id="unknown",
    ),
    pytest.param(
        spec(["a"], init=["i1", "i2", "i3"]),
        [cs("i1", False), cs("i2", True), cs("i3", False)],
        "Pending",
        ("False", CONTAINERS_NOT_INITIALIZED, "containers with incomplete status: [i1 i3]"),
        id="incomplete",
    ),
    pytest.param(
        spec(["a"], init=["i1", "i2", "i3"]),
        [cs("i2", False)],
        "Pending",
        (
            "False",
            CONTAINERS_NOT_INITIALIZED,
            "containers with unknown status: [i1 i3], containers with incomplete status: [i2]",
        ),
        id="unknown-and-incomplete",
    ),
    pytest.param(
        spec(["a"], init=["i1"]),
        [cs("i1", False, state=TERMINATED)],
        "Succeeded",
        ("True", POD_COMPLETED, None),
        id="succeeded",
    ),
    pytest.param(
        spec(["a"], init=["i1", "i2"]),
        [cs("i1", True)],
        "Succeeded",
        ("False", CONTAINERS_NOT_INITIALIZED, "containers with unknown status: [i2]"),
        id="succeeded-with-unknown",
    ),
    pytest.param(
        spec(["a"], init=["i1"]),
        [cs("i1", False)],
        "Failed",
        ("False", CONTAINERS_NOT_INITIALIZED, "containers with incomplete status: [i1]"),
        id="failed-is-not-special",
    ),
    pytest.param(
        spec(["a"], sidecars=["s"]),
        [cs("s", True, started=None, state=RUNNING)],
        "Pending",
        ("False", CONTAINERS_NOT_INITIALIZED, "containers with incomplete status: [s]"),
        id="sidecar-started-unset",
    ),
    pytest.param(
        spec(["a"], sidecars=["s"]),
        [cs("s", True, started=False, state=RUNNING)],
        "Pending",
        ("False", CONTAINERS_NOT_INITIALIZED, "containers with incomplete status: [s]"),
        id="sidecar-not-started",
    ),
    pytest.param(
        spec(["a"], sidecars=["s"]),
        [cs("s", False, started=True, state=RUNNING)],
        "Pending",
        ("True", None, None),
        id="sidecar-started-not-ready",
    ),
    pytest.param(
        spec(["a"], init=["i"]),
        [cs("i", False, started=True, state=RUNNING)],
        "Pending",
        ("False", CONTAINERS_NOT_INITIALIZED, "containers with incomplete status: [i]"),
        id="regular-init-needs-ready-not-started",
    ),
    pytest.param(
        spec(["a"], init=["i"]),
        [cs("i", False), cs("a", state=RUNNING)],
        "Running",
        ("True", None, None),
        id="regular-running-despite-incomplete-init",
    ),
    pytest.param(
        spec(["a"], init=["i"], sidecars=["s"]),
        [cs("i", True, state=TERMINATED), cs("s", False, started=False), cs("a", state=TERMINATED)],
        "Running",
        ("True", None, None),
        id="regular-terminated-sidecar-restarting",
    ),
    pytest.param(
        spec(["a"], init=["i"]),
        [cs("i", False), cs("a", state=WAITING)],
        "Pending",
        ("False", CONTAINERS_NOT_INITIALIZED, "containers with incomplete status: [i]"),
        id="regular-waiting-does-not-count",
    ),
    pytest.param(
        spec(["a"], init=["i"]),
        [cs("i", False), cs("other", state=RUNNING)],
        "Pending",
        ("False", CONTAINERS_NOT_INITIALIZED, "containers with incomplete status: [i]"),
        id="running-status-not-in-spec-does-not-count",
    ),
]


@pytest.mark.parametrize(("pod_spec", "statuses", "phase", "want"), INITIALIZED_CASES)
def test_initialized(
    pod_spec: PodSpec,
    statuses: list[ContainerStatus] | None,
    phase: str,
    want: tuple[str, str | None, str | None],
) -> None:
    got = generate_pod_initialized_condition(pod_spec, statuses, phase)
    assert triple(got) == (POD_INITIALIZED, *want)
    assert got.last_probe_time is None
    assert got.last_transition_time is None


# --- need_to_reconcile_pod_readiness ------------------------------------------------


def gated_pod(
    conditions: list[PodCondition] | None, ready: bool = True, gates: Sequence[str] = ("g",)
) -> Pod:
    return Pod(
        metadata=ObjectMeta(name="p", namespace="ns", uid="u"),
        spec=spec(["a"], gates=gates),
        status=PodStatus(
            phase="Running",
            conditions=tuple(conditions) if conditions is not None else None,
            container_statuses=(cs("a", ready, state=RUNNING),),
        ),
    )


GATE_FALSE_MESSAGE = 'the status of pod readiness gate "g" is not "True", but False'

RECONCILE_CASES = [
    pytest.param(gated_pod([cond(POD_READY, "False")], gates=()), False, id="no-gates"),
    pytest.param(gated_pod([cond("g", "True")]), False, id="ready-absent"),
    pytest.param(gated_pod(None), False, id="no-conditions"),
    pytest.param(gated_pod([cond("g", "True"), cond(POD_READY, "False")]), True, id="status-differs"),
    pytest.param(
        gated_pod([cond("g", "False"), cond(POD_READY, "False", READINESS_GATES_NOT_READY, "stale message")]),
        True,
        id="message-differs",
    ),
    pytest.param(
        gated_pod(
            [cond("g", "False"), cond(POD_READY, "False", READINESS_GATES_NOT_READY, GATE_FALSE_MESSAGE)]
        ),
        False,
        id="equal-false",
    ),
    pytest.param(gated_pod([cond("g", "True"), cond(POD_READY, "True")]), False, id="equal-true"),
    pytest.param(
        gated_pod([cond("g", "True"), cond(POD_READY, "True", message="")]),
        False,
        id="empty-message-equals-unset",
    ),
    pytest.param(
        gated_pod([cond("g", "False"), cond(POD_READY, "False", "OtherReason", GATE_FALSE_MESSAGE)]),
        False,
        id="reason-ignored",
    ),
    pytest.param(
        gated_pod(
            [
                cond("g", "True"),
                cond(POD_READY, "False", CONTAINERS_NOT_READY, "containers with unready status: [a]"),
            ],
            ready=False,
        ),
        False,
        id="containers-unready-equal",
    ),
]


@pytest.mark.parametrize(("pod", "want"), RECONCILE_CASES)
def test_need_to_reconcile_pod_readiness(pod: Pod, want: bool) -> None:
    assert need_to_reconcile_pod_readiness(pod) is want


def test_reconcile_uses_container_statuses_none_as_unknown() -> None:
    pod = gated_pod([cond("g", "True"), cond(POD_READY, "True")])
    pod = pod.replace(status=pod.status.replace(container_statuses=None))
    assert need_to_reconcile_pod_readiness(pod) is True


# --- helpers ------------------------------------------------------------------------


def test_kubelet_owned_and_shared() -> None:
    assert {
        POD_SCHEDULED,
        POD_READY,
        POD_INITIALIZED,
        CONTAINERS_READY,
        POD_READY_TO_START_CONTAINERS,
        # v1.37.2's default gates: the resize conditions and AllContainersRestarting too.
        "PodResizePending",
        "PodResizeInProgress",
        "AllContainersRestarting",
    } == set(KUBELET_OWNED_CONDITIONS)
    for t in KUBELET_OWNED_CONDITIONS:
        assert is_kubelet_owned(t)
        assert not is_kubelet_shared(t)
    assert is_kubelet_shared(DISRUPTION_TARGET)
    assert not is_kubelet_owned(DISRUPTION_TARGET)
    assert not is_kubelet_owned("my.gate/ready")
    assert not is_kubelet_shared("my.gate/ready")


def test_constant_values() -> None:
    assert UNKNOWN_CONTAINER_STATUSES == "UnknownContainerStatuses"
    assert POD_COMPLETED == "PodCompleted"
    assert POD_FAILED == "PodFailed"
    assert CONTAINERS_NOT_READY == "ContainersNotReady"
    assert CONTAINERS_NOT_INITIALIZED == "ContainersNotInitialized"
    assert READINESS_GATES_NOT_READY == "ReadinessGatesNotReady"
    assert (POD_READY, CONTAINERS_READY, POD_INITIALIZED) == ("Ready", "ContainersReady", "Initialized")
    assert (POD_READY_TO_START_CONTAINERS, POD_SCHEDULED, DISRUPTION_TARGET) == (
        "PodReadyToStartContainers",
        "PodScheduled",
        "DisruptionTarget",
    )


@pytest.mark.parametrize(
    ("phase", "want"),
    [
        ("Succeeded", True),
        ("Failed", True),
        ("Running", False),
        ("Pending", False),
        ("Unknown", False),
        ("", False),
        (None, False),
    ],
)
def test_is_terminal_phase(phase: str | None, want: bool) -> None:
    assert is_terminal_phase(phase) is want


@pytest.mark.parametrize(
    ("policy", "want"), [("Always", True), (None, False), ("Never", False), ("OnFailure", False)]
)
def test_is_restartable_init_container(policy: str | None, want: bool) -> None:
    assert is_restartable_init_container(Container(name="c", restart_policy=policy)) is want


def test_get_condition() -> None:
    a, b, a2 = cond("A", "True"), cond("B", "False"), cond("A", "False")
    assert get_condition([a, b, a2], "A") is a
    assert get_condition([a, b], "C") is None
    assert get_condition(None, "A") is None


def test_generated_condition_wire_form() -> None:
    got = generate_containers_ready_condition(spec(["a"]), [cs("a", True)], "Running")
    assert got.to_dict() == {
        "type": "ContainersReady",
        "status": "True",
        "lastProbeTime": None,
        "lastTransitionTime": None,
    }
