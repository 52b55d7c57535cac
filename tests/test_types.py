"""The wire types: Kubernetes JSON in and out, nothing lost, bad input named, values immutable."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import podstatus
from podstatus import (
    Container,
    ContainerID,
    ContainerState,
    ContainerStateRunning,
    ContainerStateTerminated,
    ContainerStateWaiting,
    ContainerStatus,
    HostIP,
    InvalidObjectError,
    ObjectMeta,
    Pod,
    PodCondition,
    PodIP,
    PodReadinessGate,
    PodSpec,
    PodStatus,
)

ALL_TYPES = [
    Pod,
    ObjectMeta,
    PodSpec,
    Container,
    PodReadinessGate,
    PodStatus,
    PodCondition,
    ContainerStatus,
    ContainerState,
    ContainerStateWaiting,
    ContainerStateRunning,
    ContainerStateTerminated,
    PodIP,
    HostIP,
]


# --- round trips -----------------------------------------------------------------


def test_a_pod_from_a_real_server_comes_back_unchanged(pod_running_dict: dict[str, Any]) -> None:
    original = copy.deepcopy(pod_running_dict)
    pod = Pod.from_dict(pod_running_dict)
    assert pod.to_dict() == original
    # JSON text in, JSON text out: the same document.
    assert json.loads(Pod.from_json(json.dumps(original)).to_json()) == original
    # from_dict did not change its input.
    assert pod_running_dict == original


def test_fields_are_snake_case_and_typed(pod_running_dict: dict[str, Any]) -> None:
    pod = Pod.from_dict(pod_running_dict)
    assert pod.metadata.name == "checkout-7f9c6d5b8-x2kqz"
    assert pod.uid == "9b2e4f10-6c1d-4a8e-b7f3-0d5c2a9e8f64"
    assert pod.spec.readiness_gates == (
        PodReadinessGate(condition_type="target-health.elbv2.k8s.aws/checkout"),
    )
    app = pod.status.container_statuses[0]
    assert app.name == "app" and app.restart_count == 1 and app.ready is True
    assert app.image_id.startswith("registry.example.com/shop/checkout@sha256:")
    assert app.last_state.terminated is not None and app.last_state.terminated.exit_code == 137
    assert app.state.running is not None
    assert app.state.running.started_at == datetime(2026, 11, 30, 8, 1, 12, tzinfo=UTC)
    ready = next(c for c in pod.status.conditions if c.type == "Ready")
    assert ready.last_transition_time == datetime(2026, 11, 30, 8, 1, 20, tzinfo=UTC)
    assert ready.last_probe_time is None
    assert pod.status.pod_ips == (PodIP(ip="10.244.17.42"), PodIP(ip="fd00:10:244:17::2a"))
    assert pod.status.host_ips == (HostIP(ip="10.20.3.17"),)
    assert pod.status.start_time is not None and pod.status.start_time.tzinfo is UTC


def test_timestamps_with_offsets_are_kept_as_aware_datetimes() -> None:
    c = PodCondition.from_dict(
        {"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T10:00:00+02:00"}
    )
    assert c.last_transition_time is not None
    assert c.last_transition_time.utcoffset() is not None
    assert c.last_transition_time.astimezone(UTC) == datetime(2026, 1, 1, 8, tzinfo=UTC)


def test_unknown_fields_survive_at_every_level(pod_running_dict: dict[str, Any]) -> None:
    d = pod_running_dict
    d["futureTopLevel"] = {"a": [1, 2, {"b": None}]}
    d["metadata"]["futureMeta"] = "x"
    d["spec"]["futureSpec"] = True
    d["spec"]["containers"][1]["futureContainerField"] = {"deep": {"er": [1.5]}}
    d["status"]["futureStatus"] = [{"k": "v"}]
    d["status"]["conditions"][2]["futureConditionField"] = 7
    d["status"]["containerStatuses"][3]["futureStatusField"] = "y"
    d["status"]["containerStatuses"][0]["state"]["running"]["futureRunning"] = 1
    d["status"]["initContainerStatuses"][0]["state"]["terminated"]["futureTerminated"] = "z"
    d["status"]["podIPs"][1]["futureIP"] = "v6"
    expected = copy.deepcopy(d)
    pod = Pod.from_dict(d)
    assert pod.to_dict() == expected
    assert pod.status.extra is not None and pod.status.extra.as_dict() == {"futureStatus": [{"k": "v"}]}
    assert pod.status.conditions[2].extra is not None
    assert pod.status.conditions[0].extra is None


def test_changed_copies_keep_unknown_fields() -> None:
    cs = ContainerStatus.from_dict(
        {"name": "a", "image": "i", "imageID": "", "ready": False, "restartCount": 0, "newField": 1}
    )
    changed = cs.replace(ready=True)
    assert changed.to_dict()["newField"] == 1 and changed.to_dict()["ready"] is True


def test_required_fields_are_always_printed_and_optional_ones_only_when_set() -> None:
    assert ContainerStatus(name="a").to_dict() == {
        "name": "a",
        "state": {},
        "lastState": {},
        "ready": False,
        "restartCount": 0,
        "image": "",
        "imageID": "",
    }
    assert PodCondition(type="Ready", status="False").to_dict() == {
        "type": "Ready",
        "status": "False",
        "lastProbeTime": None,
        "lastTransitionTime": None,
    }
    assert ContainerStateTerminated().to_dict() == {"exitCode": 0, "startedAt": None, "finishedAt": None}
    assert ContainerStateRunning().to_dict() == {"startedAt": None}
    assert PodStatus().to_dict() == {}
    assert PodStatus(phase="Running", pod_ip="10.0.0.1").to_dict() == {
        "phase": "Running",
        "podIP": "10.0.0.1",
    }
    assert Pod().to_dict() == {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"creationTimestamp": None},
        "spec": {},
        "status": {},
    }


def test_timestamps_are_printed_in_rfc3339_utc() -> None:
    t = datetime(2026, 3, 4, 5, 6, 7, tzinfo=UTC)
    assert PodStatus(start_time=t).to_dict() == {"startTime": "2026-03-04T05:06:07Z"}


@st.composite
def _json_values(draw: st.DrawFn) -> Any:
    return draw(
        st.recursive(
            st.none() | st.booleans() | st.integers(-(2**40), 2**40) | st.text(max_size=8),
            lambda inner: (
                st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
            ),
            max_leaves=8,
        )
    )


_extra_keys = st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=3, max_size=10).map(lambda s: "x" + s)


@settings(max_examples=150, deadline=None)
@given(
    status_extra=st.dictionaries(_extra_keys, _json_values(), max_size=3),
    container_extra=st.dictionaries(_extra_keys, _json_values(), max_size=3),
    phase=st.sampled_from(["Pending", "Running", "Succeeded", "Failed", "Unknown"]),
    ready=st.booleans(),
    restarts=st.integers(0, 1000),
    message=st.text(max_size=40),
)
def test_round_trip_property(
    status_extra: dict[str, Any],
    container_extra: dict[str, Any],
    phase: str,
    ready: bool,
    restarts: int,
    message: str,
) -> None:
    container: dict[str, Any] = {
        "name": "c",
        "image": "img",
        "imageID": "",
        "ready": ready,
        "restartCount": restarts,
        "state": {"waiting": {"reason": "CrashLoopBackOff", "message": message}},
        "lastState": {},
    }
    container.update(container_extra)
    status: dict[str, Any] = {"phase": phase, "containerStatuses": [container], "message": message}
    status.update(status_extra)
    expected = copy.deepcopy(status)
    assert PodStatus.from_dict(status).to_dict() == expected
    assert PodStatus.from_json(msgspec.json.encode(status)).to_dict() == expected


# --- bad input ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "path"),
    [
        (
            {
                "status": {
                    "conditions": [
                        {"type": "a", "status": "True"},
                        {"type": "b", "status": "True"},
                        {"type": "c", "status": 1},
                    ]
                }
            },
            "status.conditions[2].status",
        ),
        ({"status": {"startTime": "yesterday"}}, "status.startTime"),
        ({"status": {"containerStatuses": {"name": "a"}}}, "status.containerStatuses"),
        ({"status": {"containerStatuses": [{"ready": True}]}}, "status.containerStatuses[0]"),
        ({"metadata": {"labels": {"a": 1}}}, "metadata.labels[...]"),
        ({"spec": {"containers": [{"name": "a", "image": ["x"]}]}}, "spec.containers[0].image"),
        ({"status": {"podIPs": ["10.0.0.1"]}}, "status.podIPs[0]"),
        ({"metadata": []}, "metadata"),
    ],
)
def test_bad_input_names_the_field(data: dict[str, Any], path: str) -> None:
    with pytest.raises(InvalidObjectError) as info:
        Pod.from_dict(data)
    assert info.value.path == path
    assert path in str(info.value)
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize("cls", ALL_TYPES)
def test_every_type_refuses_a_non_object(cls: type[Any]) -> None:
    with pytest.raises(InvalidObjectError):
        cls.from_dict(["not", "an", "object"])


def test_malformed_json_is_invalid_object() -> None:
    with pytest.raises(InvalidObjectError, match="malformed JSON"):
        Pod.from_json(b'{"metadata": ')


# --- immutability ---------------------------------------------------------------------------


def test_values_cannot_be_changed_in_place(pod_running_dict: dict[str, Any]) -> None:
    pod = Pod.from_dict(pod_running_dict)
    with pytest.raises(AttributeError):
        pod.status.phase = "Failed"  # type: ignore[misc]
    with pytest.raises(AttributeError):
        pod.status.container_statuses[0].ready = False  # type: ignore[misc]
    assert isinstance(pod.status.conditions, tuple)
    with pytest.raises(AttributeError):
        pod.status.conditions.append(PodCondition(type="X", status="True"))  # type: ignore[attr-defined]


def test_to_dict_returns_fresh_containers(pod_running_dict: dict[str, Any]) -> None:
    pod = Pod.from_dict(pod_running_dict)
    first = pod.to_dict()
    first["status"]["containerStatuses"][0]["resources"]["limits"]["memory"] = "1Ti"
    first["spec"]["containers"].clear()
    assert pod.to_dict() == pod_running_dict


def test_equality_is_by_value(pod_running_dict: dict[str, Any]) -> None:
    a = Pod.from_dict(pod_running_dict)
    b = Pod.from_dict(copy.deepcopy(pod_running_dict))
    assert a == b
    assert a.status.replace(phase="Failed") != b.status


def test_every_spec_type_is_exported() -> None:
    for cls in ALL_TYPES:
        assert getattr(podstatus, cls.__name__) is cls


# --- container IDs --------------------------------------------------------------------------


def test_container_id_parses_and_prints() -> None:
    cid = ContainerID.parse("containerd://0a1b")
    assert cid == ContainerID("containerd", "0a1b")
    assert str(cid) == "containerd://0a1b"
    with pytest.raises(ValueError):
        ContainerID.parse("no-separator")


def test_waiting_state_round_trip() -> None:
    d = {"waiting": {"reason": "ImagePullBackOff", "message": "back-off pulling image"}}
    assert ContainerState.from_dict(d).to_dict() == d
    assert ContainerState.from_dict(d).waiting == ContainerStateWaiting(
        reason="ImagePullBackOff", message="back-off pulling image"
    )
