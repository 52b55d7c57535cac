"""The pure helpers where v1.37's status package differs from what podstatus did (issue 21's
"smaller differences"): each table row is a case the old helpers got wrong.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from podstatus.statusutil import (
    is_pod_status_by_kubelet_equal,
    merge_pod_status,
    normalize_status,
    update_last_transition_times,
)
from podstatus.types import (
    Container,
    ContainerState,
    ContainerStateRunning,
    ContainerStateTerminated,
    ContainerStatus,
    PodCondition,
    PodSpec,
    PodStatus,
)
from podstatus.validation import check_container_state_transition

T0 = datetime(2024, 5, 1, 10, 0, 0, tzinfo=UTC)
T1 = datetime(2024, 5, 1, 11, 0, 0, tzinfo=UTC)
NOW = datetime(2024, 5, 1, 12, 0, 0, tzinfo=UTC)
SUB = datetime(2024, 5, 1, 9, 30, 15, 734_000, tzinfo=UTC)


def cond(ctype: str, status: str = "True", at: datetime | None = T1, **kw: object) -> PodCondition:
    return PodCondition(type=ctype, status=status, last_transition_time=at, **kw)  # type: ignore[arg-type]


def types(status: PodStatus) -> list[str]:
    return [c.type for c in status.conditions or ()]


# --- mergePodStatus: DisruptionTarget keeps its place and the API's time -----------------------


@pytest.mark.parametrize(
    ("api", "cached", "want"),
    [
        # Not on the server: taken where it stands among the cached conditions.
        (
            ["example.com/gate"],
            ["PodScheduled", "DisruptionTarget", "Ready"],
            ["example.com/gate", "PodScheduled", "DisruptionTarget", "Ready"],
        ),
        (
            [],
            ["DisruptionTarget", "Initialized", "Ready"],
            ["DisruptionTarget", "Initialized", "Ready"],
        ),
        # On the server: replaced where the server has it.
        (
            ["DisruptionTarget", "example.com/gate"],
            ["Ready", "DisruptionTarget"],
            ["DisruptionTarget", "example.com/gate", "Ready"],
        ),
    ],
)
def test_merge_puts_disruption_target_where_upstream_does(
    api: list[str], cached: list[str], want: list[str]
) -> None:
    api_status = PodStatus(phase="Running", conditions=tuple(cond(t) for t in api) or None)
    cached_status = PodStatus(phase="Failed", conditions=tuple(cond(t, "False") for t in cached))
    merged = merge_pod_status(api_status, cached_status, False, NOW)
    assert types(merged) == want


@pytest.mark.parametrize(
    ("api_condition", "want_time"),
    [
        (None, NOW),  # new on the server: now
        (cond("DisruptionTarget", "True", at=T0), T0),  # same status: the server's time (SPEC 4.7)
        (cond("DisruptionTarget", "False", at=T0), NOW),  # status changed: now
    ],
)
def test_merge_disruption_target_transition_time(
    api_condition: PodCondition | None, want_time: datetime
) -> None:
    api_status = PodStatus(phase="Running", conditions=(api_condition,) if api_condition else None)
    cached = PodStatus(
        phase="Failed", conditions=(cond("DisruptionTarget", "True", at=T1, reason="Preempted"),)
    )
    merged = merge_pod_status(api_status, cached, False, NOW)
    (dt,) = [c for c in merged.conditions or () if c.type == "DisruptionTarget"]
    assert dt.last_transition_time == want_time
    assert dt.reason == "Preempted"


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("resource_claim_statuses", [{"name": "gpu", "resourceClaimName": "gpu-abc"}]),
        ("extended_resource_claim_status", {"resourceClaimName": "ext", "requestMappings": []}),
        ("node_allocatable_resource_claim_statuses", [{"resourceClaimName": "nac"}]),
    ],
)
def test_merge_takes_every_claim_field_from_the_server(field: str, value: object) -> None:
    api_status = PodStatus(phase="Running", **{field: value})  # type: ignore[arg-type]
    cached = PodStatus(phase="Running", **{field: [{"name": "stale"}]})  # type: ignore[arg-type]
    assert getattr(merge_pod_status(api_status, cached, False, NOW), field) == value
    assert getattr(merge_pod_status(PodStatus(phase="Running"), cached, False, NOW), field) is None


def test_merge_gives_forced_ready_conditions_the_pod_generation() -> None:
    cached = PodStatus(phase="Succeeded", conditions=(cond("Ready"), cond("ContainersReady")))
    merged = merge_pod_status(PodStatus(phase="Running"), cached, False, NOW, generation=4)
    assert [(c.type, c.status, c.reason, c.observed_generation) for c in merged.conditions or ()] == [
        ("Ready", "False", "PodCompleted", 4),
        ("ContainersReady", "False", "PodCompleted", 4),
    ]


# --- isPodStatusByKubeletEqual -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("old", "new", "equal"),
    [
        # The number of owned or shared condition types differs: not equal (SPEC 4.2.7 amended).
        ([cond("Ready"), cond("PodScheduled")], [cond("PodScheduled")], False),
        ([cond("PodScheduled")], [cond("PodScheduled"), cond("DisruptionTarget")], False),
        ([cond("PodScheduled"), cond("DisruptionTarget")], [cond("PodScheduled")], False),
        ([cond("PodScheduled"), cond("PodResizePending")], [cond("PodScheduled")], False),
        # Conditions owned by others never count.
        ([cond("PodScheduled"), cond("example.com/x")], [cond("PodScheduled")], True),
        # Unset and empty strings are the same to Go.
        ([cond("Ready", message="")], [cond("Ready", message=None)], True),
    ],
)
def test_equal_counts_the_kubelet_conditions(
    old: list[PodCondition], new: list[PodCondition], equal: bool
) -> None:
    assert (
        is_pod_status_by_kubelet_equal(PodStatus(conditions=tuple(old)), PodStatus(conditions=tuple(new)))
        is equal
    )


@pytest.mark.parametrize(
    "field",
    ["resource_claim_statuses", "extended_resource_claim_status", "node_allocatable_resource_claim_statuses"],
)
@pytest.mark.parametrize("same_conditions", [True, False])
def test_equal_takes_the_claims_from_the_other_side(field: str, same_conditions: bool) -> None:
    api = PodStatus(phase="Running", conditions=(cond("Ready"),), **{field: [{"name": "gpu"}]})  # type: ignore[arg-type]
    cached = PodStatus(phase="Running", conditions=(cond("Ready", at=T1 if same_conditions else T0),))
    assert is_pod_status_by_kubelet_equal(api, cached)
    assert not is_pod_status_by_kubelet_equal(api.replace(phase="Pending"), cached)


# --- normalizeStatus -----------------------------------------------------------------------------


def test_ephemeral_container_statuses_are_sorted_by_name() -> None:
    spec = PodSpec(containers=(Container(name="app"),))
    running = ContainerState(running=ContainerStateRunning(started_at=T0))
    status = PodStatus(
        ephemeral_container_statuses=tuple(
            ContainerStatus(name=n, state=running) for n in ("debugger-z", "debugger-a", "debugger-m")
        )
    )
    out = normalize_status(spec, status)
    assert [c.name for c in out.ephemeral_container_statuses or ()] == [
        "debugger-a",
        "debugger-m",
        "debugger-z",
    ]


@pytest.mark.parametrize("ctype", ["Ready", "PodScheduled", "DisruptionTarget", "AllContainersRestarting"])
def test_transition_time_taken_from_the_old_status_is_normalised(ctype: str) -> None:
    old = PodStatus(conditions=(cond(ctype, at=SUB),))
    new = PodStatus(conditions=(cond(ctype, at=None),))
    out = update_last_transition_times(old, new, NOW)
    (c,) = out.conditions or ()
    assert c.last_transition_time == SUB.replace(microsecond=0)


# --- checkContainerStateTransition with v1.37's restart rules ---------------------------------

RESTART_ON_42 = ({"action": "Restart", "exitCodes": {"operator": "In", "values": [42]}},)
RESTART_ALL_ON_7 = ({"action": "RestartAllContainers", "exitCodes": {"operator": "In", "values": [7]}},)


@pytest.mark.parametrize(
    ("pod_policy", "container", "exit_code", "allowed"),
    [
        ("Never", Container(name="app"), 1, False),
        (
            "Never",
            Container(name="app", restart_policy="Never", restart_policy_rules=RESTART_ON_42),
            42,
            True,
        ),
        (
            "Never",
            Container(name="app", restart_policy="Never", restart_policy_rules=RESTART_ON_42),
            1,
            False,
        ),
        ("Never", Container(name="app", restart_policy="OnFailure"), 1, True),
        ("Never", Container(name="app", restart_policy="OnFailure"), 0, False),
        ("Never", Container(name="app", restart_policy="Always"), 0, True),
        ("OnFailure", Container(name="app", restart_policy="Never"), 0, False),
        # A rule restarting all containers lets every container of the pod leave terminated.
        (
            "Never",
            Container(name="app", restart_policy="Never", restart_policy_rules=RESTART_ALL_ON_7),
            3,
            True,
        ),
    ],
)
def test_container_restart_rules_allow_leaving_terminated(
    pod_policy: str, container: Container, exit_code: int, allowed: bool
) -> None:
    spec = PodSpec(restart_policy=pod_policy, containers=(container,))
    old = PodStatus(
        container_statuses=(
            ContainerStatus(
                name="app", state=ContainerState(terminated=ContainerStateTerminated(exit_code=exit_code))
            ),
        )
    )
    new = PodStatus(
        container_statuses=(
            ContainerStatus(name="app", state=ContainerState(running=ContainerStateRunning())),
        )
    )
    assert (check_container_state_transition(old, new, spec) is None) is allowed
    # The same rules for an init container.
    init_spec = PodSpec(
        restart_policy=pod_policy, containers=(Container(name="main"),), init_containers=(container,)
    )
    init_old = PodStatus(init_container_statuses=old.container_statuses)
    init_new = PodStatus(init_container_statuses=new.container_statuses)
    assert (check_container_state_transition(init_old, init_new, init_spec) is None) is allowed
