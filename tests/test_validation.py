"""Pod status validation in its one home (podstatus.validation): the wire rules of a pods/status
update as a table without HTTP, the embedded API server and the fake client answering by them,
and the typed checks of what the manager accepts."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

import pytest

from podstatus.clients.fake import FakeKubeClient
from podstatus.errors import InvalidObjectError, UnprocessableEntityError
from podstatus.server.storage.store import Store
from podstatus.types import (
    ContainerState,
    ContainerStateRunning,
    ContainerStateTerminated,
    ContainerStatus,
    PodCondition,
    PodStatus,
)
from podstatus.validation import (
    POD_PHASES,
    FieldError,
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

T0 = datetime(2024, 5, 1, 10, 0, 0, tzinfo=UTC)
RUNNING = ContainerState(running=ContainerStateRunning(started_at=T0))


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
