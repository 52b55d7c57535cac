"""Pod status validation in its one home (podstatus.validation): the wire rules of a pods/status
update as a table without HTTP, and the embedded API server and the fake client answering by them."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from podstatus.clients.fake import FakeKubeClient
from podstatus.errors import UnprocessableEntityError
from podstatus.server.store import Store
from podstatus.validation import (
    FieldError,
    qualified_name_errors,
    terminal_phase_errors,
    validate_pod_status_update,
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
