"""The pure helpers of the status manager (SPEC 4.2, 4.3 terminate_pod, 4.7), one test per rule.

Steps 3 and 5 of SPEC 4.2 have no pure helper: they are tested at the end of
this file through a manager that has no API client (no I/O at all).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from podstatus import BasicPodManager, new_manager
from podstatus.deletion import FakePodDeletionSafety
from podstatus.statusutil import (
    CONTAINER_NOT_LOCATED_MESSAGE,
    CONTAINER_STATUS_UNKNOWN,
    TRANSITION_TIME_CONDITIONS,
    has_pod_initialized,
    initialized_container_count,
    is_pod_status_by_kubelet_equal,
    merge_pod_status,
    normalize_status,
    terminated_status,
    update_last_transition_times,
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
from podstatus.validation import check_container_state_transition

T0 = datetime(2024, 5, 1, 10, 0, 0, tzinfo=UTC)
T1 = datetime(2024, 5, 1, 11, 0, 0, tzinfo=UTC)
NOW = datetime(2024, 5, 1, 12, 0, 0, tzinfo=UTC)

RUNNING = ContainerState(running=ContainerStateRunning(started_at=T0))
WAITING = ContainerState(waiting=ContainerStateWaiting(reason="ContainerCreating"))


def terminated(exit_code: int = 0, message: str | None = None) -> ContainerState:
    return ContainerState(
        terminated=ContainerStateTerminated(exit_code=exit_code, reason="Completed", message=message)
    )


def cs(
    name: str,
    state: ContainerState = RUNNING,
    *,
    last_state: ContainerState | None = None,
    ready: bool = False,
    started: bool | None = None,
) -> ContainerStatus:
    return ContainerStatus(
        name=name,
        state=state,
        last_state=last_state if last_state is not None else ContainerState(),
        ready=ready,
        started=started,
        image="busybox",
        image_id="docker.io/library/busybox@sha256:0",
        container_id=f"containerd://{name}",
    )


def cond(
    ctype: str, status: str = "True", *, reason: str | None = None, message: str | None = None, at: Any = T0
) -> PodCondition:
    return PodCondition(type=ctype, status=status, reason=reason, message=message, last_transition_time=at)


def spec(
    containers: tuple[str, ...] = ("c",),
    init: tuple[str, ...] = (),
    sidecars: tuple[str, ...] = (),
    ephemeral: tuple[str, ...] = (),
    restart_policy: str | None = None,
) -> PodSpec:
    init_containers = tuple(
        Container(name=n, restart_policy="Always" if n in sidecars else None) for n in init
    )
    return PodSpec(
        containers=tuple(Container(name=n) for n in containers),
        init_containers=init_containers or None,
        ephemeral_containers=tuple(Container(name=n) for n in ephemeral) or None,
        restart_policy=restart_policy,
    )


def pod_with(pod_spec: PodSpec, status: PodStatus, annotations: dict[str, str] | None = None) -> Pod:
    return Pod(
        metadata=ObjectMeta(name="p", namespace="ns", uid="uid-1", annotations=annotations),
        spec=pod_spec,
        status=status,
    )


# --- SPEC 4.2 step 2: illegal container transitions ----------------------------------------


def _regular(state: ContainerState) -> PodStatus:
    return PodStatus(phase="Running", container_statuses=(cs("c", state),))


def _init(state: ContainerState) -> PodStatus:
    return PodStatus(phase="Pending", init_container_statuses=(cs("i", state),))


@pytest.mark.parametrize(
    ("policy", "old_exit", "allowed"),
    [
        ("Never", 0, False),
        ("Never", 1, False),
        ("OnFailure", 0, False),
        ("OnFailure", 1, True),
        ("OnFailure", 137, True),
        ("Always", 0, True),
        ("Always", 1, True),
        (None, 0, True),  # unset means Always, as the API server defaults it
        (None, 1, True),
    ],
)
@pytest.mark.parametrize(
    "new_state", [RUNNING, WAITING, ContainerState()], ids=["running", "waiting", "empty"]
)
def test_terminated_container_may_not_restart_unless_policy_allows(
    policy: str | None, old_exit: int, allowed: bool, new_state: ContainerState
) -> None:
    problem = check_container_state_transition(
        _regular(terminated(old_exit)), _regular(new_state), spec(restart_policy=policy)
    )
    if allowed:
        assert problem is None
    else:
        assert problem is not None
        assert "c" in problem


@pytest.mark.parametrize("policy", ["Never", "OnFailure", "Always", None])
def test_terminated_to_terminated_is_always_legal(policy: str | None) -> None:
    # A terminated container that stays terminated (another exit code, a new finish time) is fine.
    assert (
        check_container_state_transition(
            _regular(terminated(0)), _regular(terminated(1)), spec(restart_policy=policy)
        )
        is None
    )


@pytest.mark.parametrize("policy", ["Never", "OnFailure"])
def test_running_container_may_do_anything(policy: str) -> None:
    assert (
        check_container_state_transition(_regular(RUNNING), _regular(WAITING), spec(restart_policy=policy))
        is None
    )


def test_transition_matched_by_name_not_position() -> None:
    old = PodStatus(container_statuses=(cs("a", terminated(0)), cs("b", RUNNING)))
    # "b" is running (fine); "a" stays terminated; order differs.
    ok = PodStatus(container_statuses=(cs("b", RUNNING), cs("a", terminated(0))))
    bad = PodStatus(container_statuses=(cs("b", terminated(0)), cs("a", RUNNING)))
    s = spec(containers=("a", "b"), restart_policy="Never")
    assert check_container_state_transition(old, ok, s) is None
    problem = check_container_state_transition(old, bad, s)
    assert problem is not None and "a" in problem


@pytest.mark.parametrize(
    ("policy", "old_exit", "allowed"),
    [
        ("Never", 0, False),
        ("Never", 1, False),
        ("OnFailure", 0, False),
        ("OnFailure", 1, True),
        ("Always", 0, True),
        (None, 0, True),
    ],
)
def test_init_container_transitions_follow_the_pod_policy(
    policy: str | None, old_exit: int, allowed: bool
) -> None:
    s = spec(init=("i",), restart_policy=policy)
    problem = check_container_state_transition(_init(terminated(old_exit)), _init(RUNNING), s)
    assert (problem is None) is allowed
    if not allowed:
        assert "i" in problem  # type: ignore[operator]


@pytest.mark.parametrize("policy", ["Never", "OnFailure"])
@pytest.mark.parametrize("old_exit", [0, 1])
def test_sidecar_may_always_restart(policy: str, old_exit: int) -> None:
    s = spec(init=("i",), sidecars=("i",), restart_policy=policy)
    assert check_container_state_transition(_init(terminated(old_exit)), _init(RUNNING), s) is None


def test_regular_init_container_next_to_a_sidecar_is_still_checked() -> None:
    s = spec(init=("side", "i"), sidecars=("side",), restart_policy="Never")
    old = PodStatus(init_container_statuses=(cs("side", terminated(0)), cs("i", terminated(0))))
    new = PodStatus(init_container_statuses=(cs("side", RUNNING), cs("i", RUNNING)))
    problem = check_container_state_transition(old, new, s)
    assert problem is not None and "i" in problem and "side" not in problem.replace("i ", "")


# --- SPEC 4.2 step 4: lastTransitionTime ---------------------------------------------------


def test_the_seven_condition_types() -> None:
    # SPEC 4.2 step 4's six, and v1.37's AllContainersRestarting (updateStatusInternal).
    assert set(TRANSITION_TIME_CONDITIONS) == {
        "ContainersReady",
        "Ready",
        "Initialized",
        "PodReadyToStartContainers",
        "PodScheduled",
        "DisruptionTarget",
        "AllContainersRestarting",
    }


@pytest.mark.parametrize("ctype", sorted(TRANSITION_TIME_CONDITIONS))
def test_transition_time_kept_when_status_unchanged(ctype: str) -> None:
    old = PodStatus(conditions=(cond(ctype, "True", at=T0),))
    new = PodStatus(conditions=(cond(ctype, "True", reason="Other", at=T1),))
    out = update_last_transition_times(old, new, NOW)
    assert out.conditions is not None
    assert out.conditions[0].last_transition_time == T0
    assert out.conditions[0].reason == "Other"  # only the time is touched


@pytest.mark.parametrize("ctype", sorted(TRANSITION_TIME_CONDITIONS))
def test_transition_time_now_when_status_changed(ctype: str) -> None:
    old = PodStatus(conditions=(cond(ctype, "True", at=T0),))
    new = PodStatus(conditions=(cond(ctype, "False", at=T1),))
    out = update_last_transition_times(old, new, NOW)
    assert out.conditions is not None
    assert out.conditions[0].last_transition_time == NOW


@pytest.mark.parametrize("ctype", sorted(TRANSITION_TIME_CONDITIONS))
def test_transition_time_now_when_condition_is_new(ctype: str) -> None:
    old = PodStatus(conditions=(cond("SomethingElse", "True", at=T0),))
    for given in (None, T1):
        new = PodStatus(conditions=(cond(ctype, "True", at=given),))
        out = update_last_transition_times(old, new, NOW)
        assert out.conditions is not None
        assert out.conditions[0].last_transition_time == NOW


def test_other_condition_types_untouched() -> None:
    old = PodStatus(conditions=(cond("example.com/gate", "True", at=T0),))
    new = PodStatus(
        conditions=(
            cond("example.com/gate", "False", at=T1),
            cond("example.com/new", "True", at=None),
            cond("Ready", "True", at=None),
        )
    )
    out = update_last_transition_times(old, new, NOW)
    assert out.conditions is not None
    assert [c.last_transition_time for c in out.conditions] == [T1, None, NOW]


def test_transition_times_keep_condition_order_and_count() -> None:
    old = PodStatus(conditions=(cond("Ready", "False", at=T0), cond("PodScheduled", "True", at=T0)))
    new = PodStatus(conditions=(cond("PodScheduled", "True", at=None), cond("Ready", "True", at=None)))
    out = update_last_transition_times(old, new, NOW)
    assert out.conditions is not None
    assert [(c.type, c.last_transition_time) for c in out.conditions] == [
        ("PodScheduled", T0),
        ("Ready", NOW),
    ]


# --- SPEC 4.2 step 6: normalisation -----------------------------------------------------------


def _frac(dt: datetime, micro: int = 654321) -> datetime:
    return dt.replace(microsecond=micro)


def test_every_timestamp_cut_to_whole_seconds() -> None:
    t = _frac(T0)
    full_state = ContainerState(
        terminated=ContainerStateTerminated(exit_code=1, started_at=t, finished_at=_frac(T1))
    )
    running = ContainerState(running=ContainerStateRunning(started_at=t))
    status = PodStatus(
        start_time=t,
        conditions=(PodCondition(type="Ready", status="True", last_probe_time=t, last_transition_time=t),),
        container_statuses=(cs("c", running, last_state=full_state),),
        init_container_statuses=(cs("i", full_state, last_state=full_state),),
        ephemeral_container_statuses=(cs("e", running, last_state=full_state),),
    )
    out = normalize_status(spec(init=("i",), ephemeral=("e",)), status)

    seen: list[datetime] = []

    def walk(value: Any) -> None:
        if isinstance(value, datetime):
            seen.append(value)
        elif isinstance(value, tuple):
            for v in value:
                walk(v)
        elif hasattr(value, "__struct_fields__"):
            for f in value.__struct_fields__:
                walk(getattr(value, f))

    walk(out)
    # start, 2 condition times, c: running + last(2), i: state(2) + last(2), e: running + last(2)
    assert len(seen) == 13
    assert all(dt.microsecond == 0 for dt in seen)
    assert out.start_time == T0
    assert out.init_container_statuses is not None
    assert out.init_container_statuses[0].last_state.terminated is not None
    assert out.init_container_statuses[0].last_state.terminated.finished_at == T1


def test_timestamps_become_utc() -> None:
    plus_two = timezone(timedelta(hours=2))
    out = normalize_status(spec(), PodStatus(start_time=datetime(2024, 5, 1, 12, 0, 0, 500, tzinfo=plus_two)))
    assert out.start_time == datetime(2024, 5, 1, 10, 0, 0, tzinfo=UTC)
    assert out.start_time is not None and out.start_time.utcoffset() == timedelta(0)


def _terminated_with(message: str) -> ContainerState:
    return ContainerState(terminated=ContainerStateTerminated(exit_code=1, message=message))


@pytest.mark.parametrize(
    ("n_regular", "init", "ephemeral", "limit"),
    [
        (1, (), (), 12288),
        (3, (), (), 4096),
        (1, ("i",), ("e",), 4096),  # regular + init + ephemeral all count
        (2, ("i1", "i2"), (), 3072),
    ],
)
def test_terminated_message_cut_to_share_of_12288_bytes(
    n_regular: int, init: tuple[str, ...], ephemeral: tuple[str, ...], limit: int
) -> None:
    names = tuple(f"c{i}" for i in range(n_regular))
    s = spec(containers=names, init=init, ephemeral=ephemeral)
    long = "x" * (limit + 10)
    exact = "y" * limit
    status = PodStatus(
        container_statuses=(
            cs(names[0], _terminated_with(long), last_state=_terminated_with(long)),
            *(cs(n, _terminated_with(exact)) for n in names[1:]),
        ),
        init_container_statuses=tuple(
            cs(n, _terminated_with(long), last_state=_terminated_with(long)) for n in init
        )
        or None,
    )
    out = normalize_status(s, status)
    assert out.container_statuses is not None
    first = out.container_statuses[0]
    assert first.state.terminated is not None and first.state.terminated.message == "x" * limit
    assert first.last_state.terminated is not None and first.last_state.terminated.message == "x" * limit
    for other in out.container_statuses[1:]:
        assert other.state.terminated is not None and other.state.terminated.message == exact
    for ics in out.init_container_statuses or ():
        assert ics.state.terminated is not None and ics.state.terminated.message == "x" * limit
        assert ics.last_state.terminated is not None and ics.last_state.terminated.message == "x" * limit


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        # 4095 ASCII bytes + a 3-byte character: the character would end at byte 4098 -> dropped whole.
        ("a" * 4095 + "€", "a" * 4095),
        ("a" * 4094 + "€", "a" * 4094),  # 4097 bytes: the euro sign does not fit
        ("a" * 4093 + "€", "a" * 4093 + "€"),  # 4096 bytes exactly: kept whole
        ("€" * 1366, "€" * 1365),  # 4098 bytes -> 1365 characters (4095 bytes)
        ("a" * 4092 + "😀" + "b", "a" * 4092 + "😀"),  # 4-byte character ends exactly at 4096
        ("a" * 4093 + "😀", "a" * 4093),  # 4-byte character would straddle the limit
        ("ü" * 2049, "ü" * 2048),  # 2-byte characters: 4098 bytes -> 4096
    ],
    ids=[
        "3byte-straddle",
        "3byte-straddle-2",
        "3byte-exact",
        "all-3byte",
        "4byte-exact",
        "4byte-straddle",
        "2byte",
    ],
)
def test_terminated_message_never_splits_a_utf8_character(message: str, expected: str) -> None:
    s = spec(containers=("a", "b", "c"))  # 12288 // 3 = 4096 bytes each
    status = PodStatus(
        container_statuses=(cs("a", _terminated_with(message), last_state=_terminated_with(message)),)
    )
    out = normalize_status(s, status)
    assert out.container_statuses is not None
    for state in (out.container_statuses[0].state, out.container_statuses[0].last_state):
        assert state.terminated is not None
        got = state.terminated.message
        assert got == expected
        assert len(got.encode()) <= 4096  # type: ignore[union-attr]


def test_running_and_waiting_messages_are_not_cut() -> None:
    long = "w" * 20000
    status = PodStatus(
        container_statuses=(cs("c", ContainerState(waiting=ContainerStateWaiting(reason="X", message=long))),)
    )
    out = normalize_status(spec(), status)
    assert out.container_statuses is not None
    assert out.container_statuses[0].state.waiting is not None
    assert out.container_statuses[0].state.waiting.message == long


def test_container_statuses_sorted_by_name_init_statuses_in_spec_order() -> None:
    s = spec(containers=("zeta", "alpha", "mid"), init=("z-init", "a-init", "m-init"))
    status = PodStatus(
        container_statuses=(cs("mid"), cs("zeta"), cs("alpha")),
        init_container_statuses=(cs("a-init"), cs("m-init"), cs("z-init")),
    )
    out = normalize_status(s, status)
    assert [c.name for c in out.container_statuses or ()] == ["alpha", "mid", "zeta"]
    assert [c.name for c in out.init_container_statuses or ()] == ["z-init", "a-init", "m-init"]


def test_normalize_is_idempotent_and_lists_become_tuples() -> None:
    s = spec(containers=("b", "a"))
    status = PodStatus(
        start_time=_frac(T0),
        conditions=[cond("Ready", at=_frac(T0))],  # type: ignore[arg-type]
        container_statuses=[cs("b"), cs("a")],  # type: ignore[arg-type]
    )
    once = normalize_status(s, status)
    assert isinstance(once.conditions, tuple) and isinstance(once.container_statuses, tuple)
    assert normalize_status(s, once) == once


# --- SPEC 4.2 step 7: equal as the kubelet sees it -------------------------------------------


def _base(*conditions: PodCondition) -> PodStatus:
    return PodStatus(
        phase="Running",
        start_time=T0,
        conditions=conditions,
        container_statuses=(cs("c", ready=True),),
    )


@pytest.mark.parametrize(
    "ctype",
    [
        "PodScheduled",
        "Ready",
        "Initialized",
        "ContainersReady",
        "PodReadyToStartContainers",
        "DisruptionTarget",
    ],
)
@pytest.mark.parametrize("field", ["status", "reason", "message"])
def test_kubelet_condition_difference_is_not_equal(ctype: str, field: str) -> None:
    old = _base(cond(ctype, "True", reason="R", message="M"))
    changes = {"status": "False"} if field == "status" else {field: "different"}
    new = _base(cond(ctype, "True", reason="R", message="M").replace(**changes))
    assert not is_pod_status_by_kubelet_equal(old, new)


def test_kubelet_condition_missing_from_old_is_not_equal() -> None:
    old = _base(cond("PodScheduled"))
    new = _base(cond("PodScheduled"), cond("Ready"))
    assert not is_pod_status_by_kubelet_equal(old, new)


def test_only_transition_times_differ_is_equal() -> None:
    old = _base(cond("Ready", at=T0), cond("PodScheduled", at=T0))
    new = _base(cond("Ready", at=T1), cond("PodScheduled", at=NOW))
    assert is_pod_status_by_kubelet_equal(old, new)


def test_non_kubelet_condition_difference_is_equal() -> None:
    # The old status's conditions are replaced by the new one's: non-owned ones never count.
    old = _base(cond("Ready"), cond("example.com/gate", "False", reason="No"))
    new = _base(cond("Ready"), cond("example.com/gate", "True"))
    assert is_pod_status_by_kubelet_equal(old, new)
    only_old = _base(cond("Ready"), cond("example.com/gate"))
    only_new = _base(cond("Ready"))
    assert is_pod_status_by_kubelet_equal(only_old, only_new)
    assert is_pod_status_by_kubelet_equal(only_new, only_old)


def test_condition_order_does_not_matter() -> None:
    old = _base(cond("Ready"), cond("PodScheduled"))
    new = _base(cond("PodScheduled"), cond("Ready"))
    assert is_pod_status_by_kubelet_equal(old, new)


def test_kubelet_condition_only_in_old_is_not_equal() -> None:
    # SPEC 4.2 step 7 (amended): the two must have the same set of kubelet-owned or -shared
    # condition types, as upstream's isPodStatusByKubeletEqual counts them.
    old = _base(cond("Ready"), cond("PodScheduled"))
    new = _base(cond("PodScheduled"))
    assert not is_pod_status_by_kubelet_equal(old, new)
    assert not is_pod_status_by_kubelet_equal(new, old)


@pytest.mark.parametrize(
    "change",
    [
        {"phase": "Pending"},
        {"message": "hello"},
        {"pod_ip": "10.0.0.1"},
        {"start_time": T1},
        {"container_statuses": (cs("c", ready=False),)},
        {"container_statuses": (cs("c", ready=True, started=True),)},
    ],
    ids=lambda c: next(iter(c)),
)
def test_other_field_difference_is_not_equal(change: dict[str, Any]) -> None:
    old = _base(cond("Ready"))
    new = old.replace(**change)
    assert not is_pod_status_by_kubelet_equal(old, new)
    assert not is_pod_status_by_kubelet_equal(new, old)


# --- SPEC 4.7: merging with the API status -----------------------------------------------------


def test_merge_takes_non_owned_from_api_then_owned_from_cache() -> None:
    api = PodStatus(
        phase="Running",
        conditions=(
            cond("Ready", "False", at=T0),
            cond("example.com/gate", "True", at=T0),
            cond("PodScheduled", "False", at=T0),
            cond("DisruptionTarget", "True", reason="EvictionByEvictionAPI", at=T0),
        ),
    )
    cached = PodStatus(
        phase="Running",
        conditions=(
            cond("example.com/local", "True", at=T1),  # not owned: the API's word counts
            cond("PodScheduled", "True", at=T1),
            cond("Ready", "True", at=T1),
            cond("DisruptionTarget", "False", at=T1),  # shared: only sent when going terminal
        ),
    )
    merged = merge_pod_status(api, cached, False, NOW)
    assert [(c.type, c.status, c.last_transition_time) for c in merged.conditions or ()] == [
        ("example.com/gate", "True", T0),
        ("DisruptionTarget", "True", T0),
        ("PodScheduled", "True", T1),
        ("Ready", "True", T1),
    ]
    assert merged.phase == "Running"


def test_merge_keeps_everything_else_from_the_cache_but_resource_claims_from_api() -> None:
    api = PodStatus(phase="Pending", pod_ip="10.0.0.9", resource_claim_statuses=[{"name": "gpu"}])
    cached = PodStatus(phase="Running", pod_ip="10.0.0.1", message="m", container_statuses=(cs("c"),))
    merged = merge_pod_status(api, cached, False, NOW)
    assert merged.pod_ip == "10.0.0.1"
    assert merged.message == "m"
    assert merged.container_statuses == cached.container_statuses
    assert merged.resource_claim_statuses == [{"name": "gpu"}]
    assert merged.conditions is None


def test_disruption_target_appended_when_moving_to_terminal_and_not_delayed() -> None:
    api = PodStatus(phase="Running", conditions=(cond("example.com/gate", at=T0),))
    cached = PodStatus(
        phase="Failed",
        reason="Evicted",
        conditions=(cond("DisruptionTarget", "True", reason="TerminationByKubelet", at=T1),),
    )
    merged = merge_pod_status(api, cached, False, NOW)
    assert merged.phase == "Failed" and merged.reason == "Evicted"
    dt = [c for c in merged.conditions or () if c.type == "DisruptionTarget"]
    assert len(dt) == 1
    assert dt[0].status == "True" and dt[0].reason == "TerminationByKubelet"
    assert dt[0].last_transition_time == NOW  # set afresh: the cached time is stale
    assert [c.type for c in merged.conditions or ()] == ["example.com/gate", "DisruptionTarget"]


def test_disruption_target_replaced_in_place_when_moving_to_terminal() -> None:
    api = PodStatus(
        phase="Running",
        conditions=(cond("DisruptionTarget", "False", at=T0), cond("example.com/gate", at=T0)),
    )
    cached = PodStatus(phase="Failed", conditions=(cond("DisruptionTarget", "True", reason="X", at=T1),))
    merged = merge_pod_status(api, cached, False, NOW)
    assert [(c.type, c.status, c.last_transition_time) for c in merged.conditions or ()] == [
        ("DisruptionTarget", "True", NOW),
        ("example.com/gate", "True", T0),
    ]


@pytest.mark.parametrize(
    ("api_phase", "cached_phase", "running"),
    [
        ("Running", "Running", False),  # not moving to terminal
        ("Failed", "Failed", False),  # already terminal on the server
        ("Running", "Failed", True),  # move delayed
    ],
)
def test_disruption_target_held_back_otherwise(api_phase: str, cached_phase: str, running: bool) -> None:
    api = PodStatus(phase=api_phase)
    cached = PodStatus(phase=cached_phase, conditions=(cond("DisruptionTarget", "True", at=T1),))
    merged = merge_pod_status(api, cached, running, NOW)
    assert [c.type for c in merged.conditions or ()] == []


def test_terminal_phase_delayed_while_containers_could_run() -> None:
    api = PodStatus(phase="Running", reason="api-reason", message="api-message", conditions=(cond("Ready"),))
    cached = PodStatus(
        phase="Succeeded",
        reason="done",
        message="all done",
        conditions=(cond("Ready", "True", at=T1), cond("ContainersReady", "True", at=T1)),
        pod_ip="10.0.0.1",
    )
    merged = merge_pod_status(api, cached, True, NOW)
    assert (merged.phase, merged.reason, merged.message) == ("Running", "api-reason", "api-message")
    assert merged.pod_ip == "10.0.0.1"  # the rest is the cache's
    # The merged phase is not terminal: Ready stays as the cache has it.
    assert [(c.type, c.status) for c in merged.conditions or ()] == [
        ("Ready", "True"),
        ("ContainersReady", "True"),
    ]

    not_delayed = merge_pod_status(api, cached, False, NOW)
    assert (not_delayed.phase, not_delayed.reason, not_delayed.message) == ("Succeeded", "done", "all done")


def test_terminal_phase_on_server_is_not_delayed() -> None:
    api = PodStatus(phase="Failed", reason="r")
    cached = PodStatus(phase="Failed", reason="r2")
    merged = merge_pod_status(api, cached, True, NOW)
    assert merged.phase == "Failed" and merged.reason == "r2"


@pytest.mark.parametrize(("phase", "reason"), [("Failed", "PodFailed"), ("Succeeded", "PodCompleted")])
def test_terminal_merged_phase_forces_ready_false_in_place(phase: str, reason: str) -> None:
    cached = PodStatus(
        phase=phase,
        conditions=(
            cond("PodScheduled", at=T0),
            cond("Ready", "True", at=T0),
            cond("Initialized", at=T0),
            cond("ContainersReady", "True", at=T0),
        ),
    )
    merged = merge_pod_status(PodStatus(phase="Running"), cached, False, NOW)
    conditions = merged.conditions or ()
    assert [c.type for c in conditions] == ["PodScheduled", "Ready", "Initialized", "ContainersReady"]
    by_type = {c.type: c for c in conditions}
    for ctype in ("Ready", "ContainersReady"):
        assert by_type[ctype].status == "False"
        assert by_type[ctype].reason == reason
        assert by_type[ctype].last_transition_time == NOW
    assert by_type["Initialized"].status == "True"


def test_terminal_merged_phase_appends_missing_ready_condition() -> None:
    cached = PodStatus(phase="Failed", conditions=(cond("Ready", "True", at=T0),))
    merged = merge_pod_status(PodStatus(phase="Failed"), cached, False, NOW)
    assert [(c.type, c.status, c.reason) for c in merged.conditions or ()] == [
        ("Ready", "False", "PodFailed"),
        ("ContainersReady", "False", "PodFailed"),
    ]
    cached = PodStatus(phase="Succeeded", conditions=(cond("ContainersReady", "True", at=T0),))
    merged = merge_pod_status(PodStatus(phase="Running"), cached, False, NOW)
    assert [(c.type, c.status, c.reason) for c in merged.conditions or ()] == [
        ("ContainersReady", "False", "PodCompleted"),
        ("Ready", "False", "PodCompleted"),
    ]


def test_terminal_merged_phase_leaves_false_ready_alone() -> None:
    conditions = (
        cond("Ready", "False", reason="X", at=T0),
        cond("ContainersReady", "False", reason="Y", at=T0),
    )
    cached = PodStatus(phase="Failed", conditions=conditions)
    merged = merge_pod_status(PodStatus(phase="Running"), cached, False, NOW)
    assert merged.conditions == conditions


# --- SPEC 4.3 terminate_pod helpers ---------------------------------------------------------------


def test_has_pod_initialized_without_init_containers() -> None:
    assert has_pod_initialized(pod_with(spec(), PodStatus()))


@pytest.mark.parametrize(
    ("regular", "expected"),
    [
        (cs("c", WAITING), False),
        (cs("c", RUNNING), True),
        (cs("c", terminated(1)), True),
        (cs("c", WAITING, last_state=terminated(1)), True),
    ],
    ids=["waiting", "running", "terminated", "waiting-after-terminated"],
)
def test_has_pod_initialized_by_regular_container(regular: ContainerStatus, expected: bool) -> None:
    status = PodStatus(init_container_statuses=(cs("i", WAITING),), container_statuses=(regular,))
    assert has_pod_initialized(pod_with(spec(init=("i",)), status)) is expected


@pytest.mark.parametrize(
    ("last_init", "expected"),
    [
        (cs("i2", terminated(0)), True),
        (cs("i2", WAITING, last_state=terminated(0)), True),
        (cs("i2", RUNNING, last_state=terminated(0)), True),
        (cs("i2", terminated(1)), False),
        (cs("i2", WAITING, last_state=terminated(1)), False),
        (cs("i2", RUNNING), False),
        (cs("i2", WAITING), False),
    ],
    ids=["exit0", "last-exit0", "running-after-exit0", "exit1", "last-exit1", "running", "waiting"],
)
def test_has_pod_initialized_by_last_regular_init_container(
    last_init: ContainerStatus, expected: bool
) -> None:
    status = PodStatus(
        init_container_statuses=(cs("i1", terminated(0)), last_init),
        container_statuses=(cs("c", WAITING),),
    )
    assert has_pod_initialized(pod_with(spec(init=("i1", "i2")), status)) is expected


def test_has_pod_initialized_only_the_last_init_status_counts() -> None:
    # The first init container finished, but the last one has not: no evidence.
    status = PodStatus(init_container_statuses=(cs("i1", terminated(0)), cs("i2", WAITING)))
    assert not has_pod_initialized(pod_with(spec(init=("i1", "i2")), status))
    # Statuses only for the first init container so far: that one is the last status.
    status = PodStatus(init_container_statuses=(cs("i1", terminated(0)),))
    assert has_pod_initialized(pod_with(spec(init=("i1", "i2")), status))


@pytest.mark.parametrize(
    ("last_init", "expected"),
    [
        (cs("side", RUNNING, started=True), True),
        (cs("side", RUNNING, started=False), False),
        (cs("side", RUNNING, started=None), False),
        (cs("side", terminated(0)), False),  # a sidecar that exited 0 is not evidence
        (cs("side", WAITING, started=True), False),
    ],
    ids=["running-started", "running-not-started", "running-started-unset", "exit0", "waiting"],
)
def test_has_pod_initialized_by_last_sidecar(last_init: ContainerStatus, expected: bool) -> None:
    status = PodStatus(init_container_statuses=(cs("i", terminated(0)), last_init))
    assert has_pod_initialized(pod_with(spec(init=("i", "side"), sidecars=("side",)), status)) is expected


def test_has_pod_initialized_without_any_status() -> None:
    assert not has_pod_initialized(pod_with(spec(init=("i",)), PodStatus()))


@pytest.mark.parametrize(
    ("states", "expected"),
    [
        ([], 0),
        ([WAITING], 1),  # the first always counts
        ([WAITING, WAITING, WAITING], 1),
        ([terminated(0), WAITING, WAITING], 1),
        ([terminated(0), RUNNING, WAITING], 2),
        ([terminated(0), terminated(0), terminated(1)], 3),
        ([WAITING, RUNNING], 2),
        ([terminated(0), terminated(0), WAITING], 2),
    ],
)
def test_initialized_container_count(states: list[ContainerState], expected: int) -> None:
    statuses = [cs(f"i{n}", s) for n, s in enumerate(states)]
    assert initialized_container_count(statuses) == expected


def test_initialized_container_count_waiting_after_a_previous_run_counts() -> None:
    statuses = [cs("i0", terminated(0)), cs("i1", WAITING, last_state=terminated(1)), cs("i2", WAITING)]
    assert initialized_container_count(statuses) == 2


NOT_LOCATED = ContainerStateTerminated(
    exit_code=137,
    reason="ContainerStatusUnknown",
    message="The container could not be located when the pod was terminated",
)


def test_terminated_status_constants() -> None:
    assert CONTAINER_STATUS_UNKNOWN == "ContainerStatusUnknown"
    assert CONTAINER_NOT_LOCATED_MESSAGE == "The container could not be located when the pod was terminated"


def test_terminated_status_marks_regular_containers_unknown() -> None:
    done = terminated(0)
    base = PodStatus(
        phase="Running",
        container_statuses=(cs("a", RUNNING), cs("b", done), cs("c", WAITING)),
    )
    pod = pod_with(spec(containers=("a", "b", "c")), base)
    out = terminated_status(pod, base, is_static=False)
    states = [s.state for s in out.container_statuses or ()]
    assert states[0] == ContainerState(terminated=NOT_LOCATED)
    assert states[1] == done  # already terminated: kept as it is
    assert states[2] == ContainerState(terminated=NOT_LOCATED)
    assert out.phase == "Failed"
    # Only the state changes: last state, readiness, IDs are kept.
    assert [s.container_id for s in out.container_statuses or ()] == [
        "containerd://a",
        "containerd://b",
        "containerd://c",
    ]


def test_terminated_status_leaves_regular_containers_when_not_initialized() -> None:
    base = PodStatus(
        phase="Pending",
        init_container_statuses=(cs("i1", terminated(0)), cs("i2", RUNNING), cs("i3", WAITING)),
        container_statuses=(cs("c", WAITING),),
    )
    pod = pod_with(spec(init=("i1", "i2", "i3")), base)
    out = terminated_status(pod, base, is_static=False)
    assert out.container_statuses == base.container_statuses
    init = out.init_container_statuses or ()
    assert init[0].state == terminated(0)
    assert init[1].state == ContainerState(terminated=NOT_LOCATED)
    assert init[2].state == WAITING  # trailing, never started: left alone
    assert out.phase == "Failed"


def test_terminated_status_first_init_status_always_counts() -> None:
    base = PodStatus(phase="Pending", init_container_statuses=(cs("i1", WAITING), cs("i2", WAITING)))
    pod = pod_with(spec(init=("i1", "i2")), base)
    out = terminated_status(pod, base, is_static=False)
    init = out.init_container_statuses or ()
    assert init[0].state == ContainerState(terminated=NOT_LOCATED)
    assert init[1].state == WAITING


def test_terminated_status_judges_initialized_on_the_pod_object_not_the_base() -> None:
    # The cached status (base) shows a running container, but pod.status does not: not initialized.
    pod = pod_with(spec(init=("i",)), PodStatus(init_container_statuses=(cs("i", RUNNING),)))
    base = PodStatus(
        phase="Running",
        init_container_statuses=(cs("i", terminated(0)),),
        container_statuses=(cs("c", RUNNING),),
    )
    out = terminated_status(pod, base, is_static=False)
    assert out.container_statuses == base.container_statuses
    # And the other way round.
    pod = pod_with(spec(init=("i",)), PodStatus(init_container_statuses=(cs("i", terminated(0)),)))
    out = terminated_status(pod, base, is_static=False)
    assert out.container_statuses is not None
    assert out.container_statuses[0].state == ContainerState(terminated=NOT_LOCATED)


@pytest.mark.parametrize(
    ("phase", "is_static", "expected"),
    [
        ("Running", False, "Failed"),
        ("Pending", False, "Failed"),
        (None, False, "Failed"),
        ("Unknown", False, "Failed"),
        ("Succeeded", False, "Succeeded"),
        ("Failed", False, "Failed"),
        ("Running", True, "Running"),  # static pods keep their phase
        ("Pending", True, "Pending"),
    ],
)
def test_terminated_status_phase(phase: str | None, is_static: bool, expected: str) -> None:
    base = PodStatus(phase=phase, container_statuses=(cs("c", RUNNING),))
    out = terminated_status(pod_with(spec(), base), base, is_static=is_static)
    assert out.phase == expected
    assert out.container_statuses is not None
    assert out.container_statuses[0].state.terminated == NOT_LOCATED


# --- SPEC 4.2 steps 3 and 5 (no pure helper: through a manager without an API client) --------------


def _manager_and_pod(**pod_status: Any) -> tuple[Any, Pod]:
    pods = BasicPodManager()
    pod = pod_with(spec(), PodStatus(**pod_status))
    pods.add_pod(pod)
    manager = new_manager(None, pods, FakePodDeletionSafety(), clock=lambda: NOW)
    return manager, pod


def test_step3_terminal_phase_never_goes_back() -> None:
    manager, pod = _manager_and_pod()
    manager.set_pod_status(
        pod, PodStatus(phase="Failed", reason="Evicted", message="gone", pod_ip="10.0.0.1")
    )
    manager.set_pod_status(
        pod,
        PodStatus(phase="Running", reason="r", message="m", pod_ip="10.0.0.2", container_statuses=(cs("c"),)),
    )
    got = manager.get_pod_status(pod.uid)
    assert (got.phase, got.reason, got.message) == ("Failed", "Evicted", "gone")
    assert got.pod_ip == "10.0.0.2"  # the rest of the new status is accepted
    assert got.container_statuses == (cs("c"),)
    assert manager.get_status_version(pod.uid) == 2


def test_step3_terminal_phase_of_the_pod_object_counts_when_not_cached() -> None:
    manager, pod = _manager_and_pod(phase="Succeeded", reason="Done")
    manager.set_pod_status(pod, PodStatus(phase="Running"))
    got = manager.get_pod_status(pod.uid)
    assert (got.phase, got.reason) == ("Succeeded", "Done")


def test_step3_terminal_to_other_terminal_is_accepted() -> None:
    manager, pod = _manager_and_pod()
    manager.set_pod_status(pod, PodStatus(phase="Failed"))
    manager.set_pod_status(pod, PodStatus(phase="Succeeded"))
    assert manager.get_pod_status(pod.uid).phase == "Succeeded"


def test_step5_start_time_old_then_new_then_now() -> None:
    manager, pod = _manager_and_pod()
    manager.set_pod_status(pod, PodStatus(phase="Pending"))
    assert manager.get_pod_status(pod.uid).start_time == NOW  # neither set: now
    manager.set_pod_status(pod, PodStatus(phase="Running", start_time=T0))
    assert manager.get_pod_status(pod.uid).start_time == NOW  # the old one wins

    manager, pod = _manager_and_pod()
    manager.set_pod_status(pod, PodStatus(phase="Running", start_time=_frac(T1)))
    assert manager.get_pod_status(pod.uid).start_time == T1  # the new one, normalised

    manager, pod = _manager_and_pod(start_time=T0)
    manager.set_pod_status(pod, PodStatus(phase="Running", start_time=T1))
    assert manager.get_pod_status(pod.uid).start_time == T0  # old = the pod object's status


def test_step6_times_from_the_clock_are_whole_seconds_too() -> None:
    # Step 6 comes after steps 4 and 5: times the manager sets from "now" are cut as well.
    pods = BasicPodManager()
    pod = pod_with(spec(), PodStatus())
    pods.add_pod(pod)
    manager = new_manager(None, pods, FakePodDeletionSafety(), clock=lambda: _frac(NOW))
    manager.set_pod_status(pod, PodStatus(phase="Running", conditions=(cond("Ready", at=None),)))
    got = manager.get_pod_status(pod.uid)
    assert got.start_time == NOW
    assert got.conditions[0].last_transition_time == NOW


def test_merge_keeps_status_fields_this_library_does_not_know() -> None:
    from podstatus.statusutil import merge_pod_status

    api = PodStatus.from_dict({"phase": "Running", "futureField": {"a": 1}, "otherFuture": 2})
    cached = PodStatus(phase="Running")
    merged = merge_pod_status(api, cached, False, datetime(2026, 1, 1, tzinfo=UTC))
    assert merged.to_dict() == {"phase": "Running", "futureField": {"a": 1}, "otherFuture": 2}
    mine = PodStatus.from_dict({"phase": "Running", "otherFuture": 3})
    merged = merge_pod_status(api, mine, False, datetime(2026, 1, 1, tzinfo=UTC))
    assert merged.to_dict() == {"phase": "Running", "futureField": {"a": 1}, "otherFuture": 3}
