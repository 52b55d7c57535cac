"""Pod status validation in its one home (podstatus.validation): the wire rules of a pods/status
update as a table without HTTP, the embedded API server and the fake client answering by them,
and the typed checks of what the manager accepts."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from podstatus.clients.fake import FakeKubeClient
from podstatus.errors import InvalidObjectError, UnprocessableEntityError
from podstatus.server.storage.store import Store
from podstatus.types import (
    Container,
    ContainerState,
    ContainerStateRunning,
    ContainerStateTerminated,
    ContainerStateWaiting,
    ContainerStatus,
    PodCondition,
    PodSpec,
    PodStatus,
)
from podstatus.validation import (
    POD_PHASES,
    FieldError,
    check_container_state_transition,
    qualified_name_errors,
    reported_status_problem,
    terminal_phase_errors,
    validate_pod_status_update,
    validate_status,
)

TERMINATED = {
    "name": "c",
    "ready": False,
    "restartCount": 0,
    "image": "img:1",
    "imageID": "",
    "state": {"terminated": {"exitCode": 0}},
}


def pod(restart_policy: str = "Never", **status: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "p", "namespace": "default"},
        "spec": {"containers": [{"name": "c", "image": "img:1"}], "restartPolicy": restart_policy},
        "status": status,
    }


# (case, old status, new status, restart policy, strict, the errors as the server prints them)
CASES: list[tuple[str, dict[str, Any], dict[str, Any], str, bool, list[str]]] = [
    ("unchanged", {"phase": "Running"}, {"phase": "Running"}, "Never", True, []),
    (
        "terminal phase moves back",
        {"phase": "Succeeded"},
        {"phase": "Running"},
        "Never",
        True,
        ["status.phase: Forbidden: cannot transition from a terminal phase"],
    ),
    ("terminal phase moves back, not strict", {"phase": "Failed"}, {"phase": "Running"}, "Never", False, []),
    (
        "condition status",
        {},
        {"conditions": [{"type": "Ready", "status": "Maybe"}]},
        "Never",
        True,
        [
            'status.conditions[0].status: Unsupported value: "Maybe": supported values: "False", "True", "Unknown"'
        ],
    ),
    (
        "condition type",
        {},
        {"conditions": [{"type": "not valid!", "status": "True"}]},
        "Always",
        False,
        [
            'status.conditions[0].Type: Invalid value: "not valid!": name part must consist of alphanumeric '
            "characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. "
            "'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
            "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
        ],
    ),
    (
        "negative observedGeneration",
        {},
        {"observedGeneration": -1},
        "Always",
        True,
        ["status.observedGeneration: Invalid value: -1: must be a non-negative integer"],
    ),
    (
        "qosClass immutable",
        {"qosClass": "BestEffort"},
        {"qosClass": "Guaranteed"},
        "Always",
        True,
        ['status.qosClass: Invalid value: "Guaranteed": field is immutable'],
    ),
    (
        "terminated container restarts under Never",
        {"containerStatuses": [TERMINATED]},
        {"containerStatuses": [{**TERMINATED, "state": {"running": {}}}]},
        "Never",
        True,
        ["status.containerStatuses[0].state: Forbidden: may not be transitioned to non-terminated state"],
    ),
    (
        "terminated container restarts under Always",
        {"containerStatuses": [TERMINATED]},
        {"containerStatuses": [{**TERMINATED, "state": {"running": {}}}]},
        "Always",
        True,
        [],
    ),
    (
        "pod IP",
        {},
        {"podIPs": [{"ip": "nope"}]},
        "Always",
        True,
        [
            'status.podIPs[0]: Invalid value: "nope": must be a valid IP address, '
            "(e.g. 10.9.8.7 or 2001:db8::ffff)"
        ],
    ),
    (
        "negative restart count",
        {},
        {"containerStatuses": [{**TERMINATED, "restartCount": -1}]},
        "Always",
        True,
        ["status.containerStatuses[0].restartCount: Invalid value: -1: must be greater than or equal to 0"],
    ),
]


@pytest.mark.parametrize(
    ("old", "new", "policy", "strict", "want"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_status_update_rules(
    old: dict[str, Any], new: dict[str, Any], policy: str, strict: bool, want: list[str]
) -> None:
    errors = validate_pod_status_update(pod(policy, **old), pod(policy, **new), strict=strict)
    assert [str(e) for e in errors] == want
    assert all(isinstance(e, FieldError) for e in errors)


@pytest.mark.parametrize(
    ("old", "new", "policy", "strict", "want"),
    [c[1:] for c in CASES if c[5] and c[0] != "qosClass immutable"],
    ids=[c[0] for c in CASES if c[5] and c[0] != "qosClass immutable"],
)
def test_the_embedded_server_refuses_by_the_same_rules(
    old: dict[str, Any], new: dict[str, Any], policy: str, strict: bool, want: list[str]
) -> None:
    store = Store(strict_status=strict)
    created = copy.deepcopy(pod(policy))
    del created["status"]
    store.create("pods", "default", created)
    if old:
        store.patch("pods", "default", "p", {"status": old}, subresource="status")
    with pytest.raises(UnprocessableEntityError) as info:
        store.patch("pods", "default", "p", {"status": new}, subresource="status")
    assert info.value.message == f'Pod "p" is invalid: {want[0]}'


def test_terminal_phase_rule_alone() -> None:
    assert terminal_phase_errors({"phase": "Succeeded"}, {"phase": "Succeeded"}) == []
    assert terminal_phase_errors({"phase": "Failed"}, {"phase": "Succeeded"}) == []
    assert terminal_phase_errors({"phase": "Running"}, {"phase": "Pending"}) == []
    (error,) = terminal_phase_errors({"phase": "Failed"}, {})
    assert str(error) == "status.phase: Forbidden: cannot transition from a terminal phase"
    assert error.cause() == {
        "reason": "FieldValueForbidden",
        "message": "Forbidden: cannot transition from a terminal phase",
        "field": "status.phase",
    }


def test_the_fake_client_refuses_by_the_same_rule() -> None:
    client = FakeKubeClient([pod("Never", phase="Succeeded")])
    with pytest.raises(UnprocessableEntityError) as info:
        client.patch_pod_status("default", "p", b'{"status":{"phase":"Running"}}')
    (error,) = terminal_phase_errors({"phase": "Succeeded"}, {"phase": "Running"})
    assert info.value.message == f'Pod "p" is invalid: {error}'
    stored = client.pod("default", "p")
    assert stored is not None and stored.status.phase == "Succeeded"


def test_qualified_names() -> None:
    assert qualified_name_errors("example.com/Ready") == ()
    assert qualified_name_errors("Ready") == ()
    assert qualified_name_errors("/x") == ("prefix part must be non-empty",)
    assert qualified_name_errors("a/b/c")[0].startswith("a valid label key must consist")
    assert qualified_name_errors("x" * 64) == ("name part must be no more than 63 bytes",)


def test_field_error_bodies() -> None:
    assert FieldError("spec", "Required value").body() == "Required value"
    assert FieldError("f", "Duplicate value", "x").body() == 'Duplicate value: "x"'
    assert FieldError("f", "Invalid value", [1, 2], "bad").body() == "Invalid value: [1,2]: bad"
    assert FieldError("f", "Forbidden", detail="no").cause()["reason"] == "FieldValueForbidden"


# --- typed statuses ---------------------------------------------------------------------------------

# The status builders of the statusutil tests, shared rather than copied.
from test_statusutil import RUNNING, T0, cond, cs, terminated  # noqa: E402

# --- validate_status: what the manager accepts (moved from test_statusutil.py) --------------------------------------------------------------------------------


def _good() -> PodStatus:
    return PodStatus(
        phase="Running",
        start_time=T0,
        conditions=(cond("PodScheduled"), cond("Ready")),
        container_statuses=(cs("a"), cs("b")),
        init_container_statuses=(cs("i", terminated(0)),),
    )


def test_validate_accepts_a_good_status() -> None:
    validate_status(_good())
    validate_status(PodStatus())


@pytest.mark.parametrize(
    ("change", "path"),
    [
        ({"phase": 5}, "status.phase"),
        ({"message": ["x"]}, "status.message"),
        ({"start_time": "2024-01-01T00:00:00Z"}, "status.startTime"),
        ({"conditions": (cond("PodScheduled"), cond("Ready", "Maybe"))}, "status.conditions[1].status"),
        ({"conditions": (cond("Ready", reason=3),)}, "status.conditions[0].reason"),  # type: ignore[arg-type]
        ({"conditions": (cond("Ready", at="yesterday"),)}, "status.conditions[0].lastTransitionTime"),
        ({"conditions": (cond(""),)}, "status.conditions[0].type"),
        ({"conditions": ("Ready",)}, "status.conditions[0]"),
        ({"container_statuses": (cs("a"), cs("a"))}, "status.containerStatuses[1].name"),
        ({"container_statuses": (cs("a").replace(ready="yes"),)}, "status.containerStatuses[0].ready"),
        (
            {"container_statuses": (cs("a").replace(restart_count=-1),)},
            "status.containerStatuses[0].restartCount",
        ),
        (
            {"container_statuses": (cs("a").replace(restart_count="1"),)},
            "status.containerStatuses[0].restartCount",
        ),
        ({"container_statuses": (cs("a").replace(started="no"),)}, "status.containerStatuses[0].started"),
        ({"container_statuses": (cs("a").replace(name=""),)}, "status.containerStatuses[0].name"),
        (
            {
                "container_statuses": (
                    cs("a"),
                    cs("b", ContainerState(terminated=ContainerStateTerminated(exit_code="1"))),
                ),
            },  # type: ignore[arg-type]
            "status.containerStatuses[1].state.terminated.exitCode",
        ),
        (
            {
                "container_statuses": (
                    cs("a", last_state=ContainerState(running=ContainerStateRunning(started_at="now"))),
                )
            },  # type: ignore[arg-type]
            "status.containerStatuses[0].lastState.running.startedAt",
        ),
        ({"init_container_statuses": (cs("i"), cs("i"))}, "status.initContainerStatuses[1].name"),
        (
            {"ephemeral_container_statuses": (cs("e").replace(ready=1),)},
            "status.ephemeralContainerStatuses[0].ready",
        ),
        ({"container_statuses": {"a": cs("a")}}, "status.containerStatuses"),
    ],
)
def test_validate_names_the_field(change: dict[str, Any], path: str) -> None:
    bad = _good().replace(**change)
    with pytest.raises(InvalidObjectError) as info:
        validate_status(bad)
    assert info.value.path == path
    assert path in str(info.value)
    assert isinstance(info.value, ValueError)


def test_validate_refuses_what_is_not_a_status() -> None:
    with pytest.raises(InvalidObjectError):
        validate_status({"phase": "Running"})


@pytest.mark.parametrize(
    ("field", "value"),
    [("restart_count", 2**31), ("restart_count", -1), ("restart_count", 2**70)],
)
def test_validate_refuses_numbers_the_api_server_refuses(field: str, value: int) -> None:
    status = PodStatus(container_statuses=(ContainerStatus(name="a", **{field: value}),))
    with pytest.raises(InvalidObjectError) as info:
        validate_status(status)
    assert info.value.path == "status.containerStatuses[0].restartCount"


def test_validate_skips_only_parts_that_are_the_known_objects() -> None:
    good = ContainerStatus(name="a", ready=True)
    known = PodStatus(container_statuses=(good,), conditions=(PodCondition(type="Ready", status="True"),))
    validate_status(known)
    # A new element next to a known one is checked...
    with pytest.raises(InvalidObjectError) as info:
        validate_status(
            known.replace(container_statuses=(good, ContainerStatus(name="b", ready="yes"))), known
        )  # type: ignore[arg-type]
    assert info.value.path == "status.containerStatuses[1].ready"
    # ...and so is a known element repeated under its own name.
    with pytest.raises(InvalidObjectError, match="Duplicate"):
        validate_status(known.replace(container_statuses=(good, good)), known)
    with pytest.raises(InvalidObjectError) as info:
        validate_status(
            known.replace(conditions=(*known.conditions, PodCondition(type="X", status="Maybe"))), known
        )
    assert info.value.path == "status.conditions[1].status"


def test_a_reported_status_must_be_a_status_with_a_pod_phase() -> None:
    assert [reported_status_problem(PodStatus(phase=p)) for p in POD_PHASES] == [None] * 5
    assert reported_status_problem({"phase": "Running"}) == "expected a PodStatus, got dict"
    assert reported_status_problem(PodStatus()) == (
        "phase None is not one of Pending, Running, Succeeded, Failed, Unknown"
    )
    assert reported_status_problem(PodStatus(phase="Starting")) == (
        "phase 'Starting' is not one of Pending, Running, Succeeded, Failed, Unknown"
    )


# --- SPEC 4.2 step 2: container state transitions (moved from test_statusutil*.py) ------------

WAITING = ContainerState(waiting=ContainerStateWaiting(reason="ContainerCreating"))


def spec(
    containers: tuple[str, ...] = ("c",),
    init: tuple[str, ...] = (),
    sidecars: tuple[str, ...] = (),
    restart_policy: str | None = None,
) -> PodSpec:
    init_containers = tuple(
        Container(name=n, restart_policy="Always" if n in sidecars else None) for n in init
    )
    return PodSpec(
        containers=tuple(Container(name=n) for n in containers),
        init_containers=init_containers or None,
        restart_policy=restart_policy,
    )


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
