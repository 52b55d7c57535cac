"""Tests of podstatus.patch: strategic merge patch, diff and apply.

Expected strategic merge patches and results were checked against
k8s.io/apimachinery v0.37.2 (strategicpatch.CreateTwoWayMergePatch / StrategicMergePatch
with the core/v1 Pod schema), the library the kubelet and the API server use.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from podstatus.patch import (
    POD_MERGE_KEYS,
    PatchError,
    apply_strategic_merge_patch,
    diff_pod_status,
    encode_patch,
    has_changes,
)

UID = "u1"
META = {"metadata": {"uid": UID}}

READY_F = {"type": "Ready", "status": "False", "reason": "ContainersNotReady"}
READY_T = {"type": "Ready", "status": "True"}
INIT_T = {"type": "Initialized", "status": "True"}
SCHED_T = {"type": "PodScheduled", "status": "True"}


def _status_patch(status: dict[str, Any]) -> dict[str, Any]:
    return {**META, "status": status}


# --------------------------------------------------------------------------- diff table

DIFF_CASES: list[tuple[str, dict[str, Any], dict[str, Any], dict[str, Any]]] = [
    (
        "equal",
        {"phase": "Running", "conditions": [READY_T]},
        {"phase": "Running", "conditions": [READY_T]},
        META,
    ),
    ("both empty", {}, {}, META),
    (
        "scalar changed",
        {"phase": "Pending"},
        {"phase": "Running"},
        _status_patch({"phase": "Running"}),
    ),
    (
        "field added and field removed",
        {"phase": "Running", "message": "m"},
        {"phase": "Running", "reason": "Evicted"},
        _status_patch({"message": None, "reason": "Evicted"}),
    ),
    (
        "condition status changed, reason removed",
        {"conditions": [INIT_T, READY_F]},
        {"conditions": [INIT_T, READY_T]},
        _status_patch(
            {
                "$setElementOrder/conditions": [{"type": "Initialized"}, {"type": "Ready"}],
                "conditions": [{"type": "Ready", "status": "True", "reason": None}],
            }
        ),
    ),
    (
        "condition only status changed",
        {"conditions": [{"type": "Ready", "status": "False"}]},
        {"conditions": [{"type": "Ready", "status": "True"}]},
        _status_patch(
            {
                "$setElementOrder/conditions": [{"type": "Ready"}],
                "conditions": [{"type": "Ready", "status": "True"}],
            }
        ),
    ),
    (
        "condition added",
        {"conditions": [INIT_T]},
        {"conditions": [INIT_T, READY_T]},
        _status_patch(
            {
                "$setElementOrder/conditions": [{"type": "Initialized"}, {"type": "Ready"}],
                "conditions": [READY_T],
            }
        ),
    ),
    (
        "condition removed",
        {"conditions": [INIT_T, READY_T]},
        {"conditions": [INIT_T]},
        _status_patch(
            {
                "$setElementOrder/conditions": [{"type": "Initialized"}],
                "conditions": [{"type": "Ready", "$patch": "delete"}],
            }
        ),
    ),
    (
        "all conditions removed: no empty $setElementOrder",
        {"conditions": [READY_T]},
        {"conditions": []},
        _status_patch({"conditions": [{"type": "Ready", "$patch": "delete"}]}),
    ),
    (
        "changes in new order, then deletions sorted by key",
        {"conditions": [{"type": "Z"}, {"type": "B"}, {"type": "A", "status": "False"}, {"type": "Y"}]},
        {"conditions": [{"type": "C"}, {"type": "A", "status": "True"}]},
        _status_patch(
            {
                "$setElementOrder/conditions": [{"type": "C"}, {"type": "A"}],
                "conditions": [
                    {"type": "C"},
                    {"type": "A", "status": "True"},
                    {"type": "B", "$patch": "delete"},
                    {"type": "Y", "$patch": "delete"},
                    {"type": "Z", "$patch": "delete"},
                ],
            }
        ),
    ),
    (
        "order changed only",
        {"conditions": [INIT_T, READY_T]},
        {"conditions": [READY_T, INIT_T]},
        _status_patch({"$setElementOrder/conditions": [{"type": "Ready"}, {"type": "Initialized"}]}),
    ),
    (
        "conditions added to an empty list: sent whole, no order",
        {"conditions": []},
        {"conditions": [SCHED_T, READY_T]},
        _status_patch({"conditions": [SCHED_T, READY_T]}),
    ),
    (
        "conditions added where there were none",
        {"phase": "Pending"},
        {"phase": "Pending", "conditions": [SCHED_T]},
        _status_patch({"conditions": [SCHED_T]}),
    ),
    (
        "list removed",
        {"conditions": [SCHED_T], "podIPs": [{"ip": "10.0.0.1"}]},
        {},
        _status_patch({"conditions": None, "podIPs": None}),
    ),
    (
        "podIPs changed",
        {"podIP": "10.0.0.1", "podIPs": [{"ip": "10.0.0.1"}]},
        {"podIP": "10.0.0.2", "podIPs": [{"ip": "10.0.0.2"}, {"ip": "fd00::2"}]},
        _status_patch(
            {
                "podIP": "10.0.0.2",
                "$setElementOrder/podIPs": [{"ip": "10.0.0.2"}, {"ip": "fd00::2"}],
                "podIPs": [{"ip": "10.0.0.2"}, {"ip": "fd00::2"}, {"ip": "10.0.0.1", "$patch": "delete"}],
            }
        ),
    ),
    (
        "hostIPs merged by ip",
        {"hostIPs": [{"ip": "1.1.1.1"}, {"ip": "2.2.2.2"}]},
        {"hostIPs": [{"ip": "2.2.2.2"}]},
        _status_patch(
            {
                "$setElementOrder/hostIPs": [{"ip": "2.2.2.2"}],
                "hostIPs": [{"ip": "1.1.1.1", "$patch": "delete"}],
            }
        ),
    ),
    (
        "resourceClaimStatuses by name, with $retainKeys (merge,retainKeys strategy)",
        {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "a"}]},
        {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "b"}, {"name": "nic"}]},
        _status_patch(
            {
                "$setElementOrder/resourceClaimStatuses": [{"name": "gpu"}, {"name": "nic"}],
                "resourceClaimStatuses": [
                    {"name": "gpu", "resourceClaimName": "b", "$retainKeys": ["name", "resourceClaimName"]},
                    {"name": "nic"},
                ],
            }
        ),
    ),
    (
        "containerStatuses replaced whole",
        {
            "containerStatuses": [
                {"name": "a", "ready": False, "restartCount": 0},
                {"name": "b", "ready": True, "restartCount": 0},
            ]
        },
        {
            "containerStatuses": [
                {"name": "a", "ready": True, "restartCount": 0},
                {"name": "b", "ready": True, "restartCount": 0},
            ]
        },
        _status_patch(
            {
                "containerStatuses": [
                    {"name": "a", "ready": True, "restartCount": 0},
                    {"name": "b", "ready": True, "restartCount": 0},
                ]
            }
        ),
    ),
    (
        "init and ephemeral container statuses replaced whole",
        {"initContainerStatuses": [{"name": "i", "ready": False}], "ephemeralContainerStatuses": []},
        {
            "initContainerStatuses": [{"name": "i", "ready": True}],
            "ephemeralContainerStatuses": [{"name": "e"}],
        },
        _status_patch(
            {
                "initContainerStatuses": [{"name": "i", "ready": True}],
                "ephemeralContainerStatuses": [{"name": "e"}],
            }
        ),
    ),
    (
        "nested object diffed field by field",
        {
            "qosClass": "Burstable",
            "resources": {"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "1"}},
        },
        {"qosClass": "Burstable", "resources": {"limits": {"cpu": "2"}, "requests": {"cpu": "1"}}},
        _status_patch({"resources": {"limits": {"cpu": "2", "memory": None}}}),
    ),
    (
        "type change sends the new value",
        {"message": "x", "extra": {"a": 1}},
        {"message": {"k": "v"}, "extra": "s"},
        _status_patch({"message": {"k": "v"}, "extra": "s"}),
    ),
    (
        "booleans are not numbers; int and float differ as in apimachinery",
        {"x": 1, "y": 1, "z": 2.5},
        {"x": True, "y": 1.0, "z": 2.5},
        _status_patch({"x": True, "y": 1.0}),
    ),
]


@pytest.mark.parametrize(
    ("old", "new", "expected"), [c[1:] for c in DIFF_CASES], ids=[c[0] for c in DIFF_CASES]
)
def test_diff_pod_status(old: dict[str, Any], new: dict[str, Any], expected: dict[str, Any]) -> None:
    old_copy, new_copy = json.loads(json.dumps(old)), json.loads(json.dumps(new))
    patch = diff_pod_status(old, new, UID)
    assert patch == expected
    assert (old, new) == (old_copy, new_copy)  # inputs untouched
    # Applying the patch gives exactly the new status, and keeps the UID.
    applied = apply_strategic_merge_patch({"metadata": {"uid": UID}, "status": old}, patch)
    assert applied == {"metadata": {"uid": UID}, "status": new}
    assert has_changes(patch) == (expected != META)


def test_diff_list_order_of_changes_follows_new_list() -> None:
    old = {"conditions": [{"type": "A", "status": "False"}, {"type": "B", "status": "False"}]}
    new = {"conditions": [{"type": "B", "status": "True"}, {"type": "A", "status": "True"}]}
    assert diff_pod_status(old, new, UID)["status"]["conditions"] == [
        {"type": "B", "status": "True"},
        {"type": "A", "status": "True"},
    ]


def test_diff_rejects_merge_list_element_without_key() -> None:
    with pytest.raises(PatchError, match="merge key 'type'"):
        diff_pod_status({"conditions": [{"status": "True"}]}, {"conditions": [READY_T]}, UID)


def test_has_changes() -> None:
    assert not has_changes({"metadata": {"uid": UID}})
    assert not has_changes({})
    assert has_changes({"metadata": {"uid": UID}, "status": {"phase": "Running"}})
    assert has_changes({"metadata": {"uid": UID, "labels": {"a": "b"}}})


def test_encode_patch_is_compact_json() -> None:
    patch = diff_pod_status({"phase": "Pending"}, {"phase": "Running"}, UID)
    raw = encode_patch(patch)
    assert isinstance(raw, bytes)
    assert b" " not in raw
    assert json.loads(raw) == {"metadata": {"uid": UID}, "status": {"phase": "Running"}}


# --------------------------------------------------------------------------- property tests

_TEXT = st.sampled_from(["", "a", "b", "PodCompleted", "ContainersNotReady", "x y"])
_TIME = st.sampled_from(["2024-05-01T10:00:00Z", "2024-05-01T10:00:05Z"])
_COND_TYPES = ["PodScheduled", "Initialized", "ContainersReady", "Ready", "DisruptionTarget", "gate/1"]


@st.composite
def _condition(draw: st.DrawFn, ctype: str) -> dict[str, Any]:
    c: dict[str, Any] = {"type": ctype, "status": draw(st.sampled_from(["True", "False", "Unknown"]))}
    for field, values in (
        ("reason", _TEXT),
        ("message", _TEXT),
        ("lastTransitionTime", _TIME),
        ("lastProbeTime", _TIME),
        ("observedGeneration", st.integers(0, 3)),
    ):
        if draw(st.booleans()):
            c[field] = draw(values)
    return c


@st.composite
def _keyed_list(draw: st.DrawFn, pool: list[str], make: Any) -> list[dict[str, Any]]:
    keys = draw(st.lists(st.sampled_from(pool), unique=True, max_size=len(pool)))
    return [draw(make(k)) for k in keys]


_container_status = st.fixed_dictionaries(
    {
        "name": st.sampled_from(["app", "sidecar"]),
        "ready": st.booleans(),
        "restartCount": st.integers(0, 3),
    },
    optional={
        "started": st.booleans(),
        "state": st.one_of(
            st.fixed_dictionaries({"running": st.fixed_dictionaries({"startedAt": _TIME})}),
            st.fixed_dictionaries({"waiting": st.fixed_dictionaries({"reason": _TEXT})}),
        ),
    },
)

_resource_map = st.dictionaries(st.sampled_from(["cpu", "memory"]), st.sampled_from(["100m", "1", "1Gi"]))

_pod_status = st.fixed_dictionaries(
    {},
    optional={
        "phase": st.sampled_from(["Pending", "Running", "Succeeded", "Failed", "Unknown"]),
        "message": _TEXT,
        "reason": _TEXT,
        "hostIP": st.sampled_from(["192.168.0.1", "192.168.0.2"]),
        "podIP": st.sampled_from(["10.0.0.1", "10.0.0.2"]),
        "qosClass": st.sampled_from(["Guaranteed", "Burstable", "BestEffort"]),
        "startTime": _TIME,
        "observedGeneration": st.integers(0, 3),
        "conditions": _keyed_list(_COND_TYPES, _condition),
        "podIPs": _keyed_list(["10.0.0.1", "10.0.0.2", "fd00::1"], lambda ip: st.just({"ip": ip})),
        "hostIPs": _keyed_list(["192.168.0.1", "fd01::1"], lambda ip: st.just({"ip": ip})),
        "resourceClaimStatuses": _keyed_list(
            ["gpu", "nic"],
            lambda n: st.fixed_dictionaries({"name": st.just(n)}, optional={"resourceClaimName": _TEXT}),
        ),
        "containerStatuses": st.lists(_container_status, max_size=2),
        "initContainerStatuses": st.lists(_container_status, max_size=1),
        "resources": st.fixed_dictionaries({}, optional={"limits": _resource_map, "requests": _resource_map}),
        "allocatedResources": _resource_map,
    },
)


@st.composite
def _status_pair(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, Any]]:
    old = draw(_pod_status)
    if draw(st.booleans()):
        return old, draw(_pod_status)
    # A nearby status: some fields dropped, some replaced, conditions permuted/edited.
    new = json.loads(json.dumps(old))
    for key in draw(st.lists(st.sampled_from(sorted(old) or ["phase"]), unique=True)):
        new.pop(key, None)
    new.update(draw(_pod_status))
    if new.get("conditions"):
        new["conditions"] = draw(st.permutations(new["conditions"]))
        if draw(st.booleans()):
            new["conditions"][0] = {
                **new["conditions"][0],
                "status": draw(st.sampled_from(["True", "False"])),
            }
    return old, new


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_status_pair())
def test_diff_then_apply_gives_new_status(pair: tuple[dict[str, Any], dict[str, Any]]) -> None:
    old, new = pair
    patch = diff_pod_status(old, new, UID)
    assert patch["metadata"] == {"uid": UID}
    applied = apply_strategic_merge_patch({"metadata": {"uid": UID}, "status": old}, patch)
    assert applied["status"] == new
    assert applied["metadata"] == {"uid": UID}
    assert has_changes(patch) == (old != new)
    # The patch survives the wire.
    assert json.loads(encode_patch(patch)) == patch


@settings(max_examples=100, deadline=None)
@given(_pod_status)
def test_diff_of_equal_statuses_is_only_the_uid(status: dict[str, Any]) -> None:
    assert diff_pod_status(status, json.loads(json.dumps(status)), UID) == {"metadata": {"uid": UID}}


# --------------------------------------------------------------------------- strategic apply, whole pods


def _pod() -> dict[str, Any]:
    return {
        "metadata": {
            "name": "web",
            "uid": UID,
            "labels": {"app": "web", "tier": "front"},
            "finalizers": ["a.example/x", "b.example/y"],
            "ownerReferences": [{"uid": "rs1", "kind": "ReplicaSet", "name": "web-1"}],
        },
        "spec": {
            "containers": [
                {
                    "name": "app",
                    "image": "app:1",
                    "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
                    "ports": [{"containerPort": 8080}],
                },
                {"name": "sidecar", "image": "proxy:1"},
            ],
            "volumes": [{"name": "data", "emptyDir": {}}],
        },
        "status": {"phase": "Running", "conditions": [INIT_T, READY_T]},
    }


def test_apply_merges_containers_by_name() -> None:
    pod = _pod()
    before = json.loads(json.dumps(pod))
    out = apply_strategic_merge_patch(
        pod, {"spec": {"containers": [{"name": "sidecar", "image": "proxy:2"}]}}
    )
    assert out["spec"]["containers"] == [
        pod["spec"]["containers"][0],
        {"name": "sidecar", "image": "proxy:2"},
    ]
    assert pod == before  # never mutated
    out["spec"]["containers"][0]["image"] = "changed"
    assert pod == before  # and shares nothing with the result


def test_apply_nested_merge_list_env_by_name() -> None:
    patch = {"spec": {"containers": [{"name": "app", "env": [{"name": "B", "value": "3"}]}]}}
    out = apply_strategic_merge_patch(_pod(), patch)
    assert out["spec"]["containers"][0]["env"] == [{"name": "A", "value": "1"}, {"name": "B", "value": "3"}]


def test_apply_new_element_without_set_element_order_goes_first_like_kubernetes() -> None:
    # Without $setElementOrder the API server puts patch items first and slots
    # server-only items in by their original order (apimachinery's normalizeElementOrder).
    patch = {
        "spec": {"containers": [{"name": "debug", "image": "busybox"}]},
        "metadata": {"finalizers": ["c/z"]},
    }
    out = apply_strategic_merge_patch(_pod(), patch)
    assert [c["name"] for c in out["spec"]["containers"]] == ["debug", "app", "sidecar"]
    assert out["metadata"]["finalizers"] == ["c/z", "a.example/x", "b.example/y"]


def test_apply_set_element_order_appends_and_reorders() -> None:
    patch = {
        "spec": {
            "$setElementOrder/containers": [{"name": "sidecar"}, {"name": "app"}, {"name": "debug"}],
            "containers": [{"name": "debug", "image": "busybox"}],
        }
    }
    out = apply_strategic_merge_patch(_pod(), patch)
    assert [c["name"] for c in out["spec"]["containers"]] == ["sidecar", "app", "debug"]
    assert "$setElementOrder/containers" not in out["spec"]


def test_apply_set_element_order_keeps_server_only_items_in_place() -> None:
    original = {"status": {"conditions": [{"type": "A"}, {"type": "B"}, {"type": "C"}]}}
    patch = {"status": {"$setElementOrder/conditions": [{"type": "C"}, {"type": "A"}]}}
    out = apply_strategic_merge_patch(original, patch)
    # B is not named: it goes before the first named item that followed it in the
    # original (C), as apimachinery's mergeSortedSlice does.
    assert [c["type"] for c in out["status"]["conditions"]] == ["B", "C", "A"]


def test_apply_patch_delete_in_list() -> None:
    patch = {"spec": {"containers": [{"name": "sidecar", "$patch": "delete"}]}}
    out = apply_strategic_merge_patch(_pod(), patch)
    assert [c["name"] for c in out["spec"]["containers"]] == ["app"]
    # Deleting a missing element is a no-op.
    out2 = apply_strategic_merge_patch(
        _pod(), {"spec": {"containers": [{"name": "nope", "$patch": "delete"}]}}
    )
    assert out2["spec"]["containers"] == _pod()["spec"]["containers"]


def test_apply_patch_replace_in_list() -> None:
    patch = {"spec": {"containers": [{"$patch": "replace"}, {"name": "only", "image": "x"}]}}
    out = apply_strategic_merge_patch(_pod(), patch)
    assert out["spec"]["containers"] == [{"name": "only", "image": "x"}]


def test_apply_patch_directives_on_maps() -> None:
    out = apply_strategic_merge_patch(_pod(), {"metadata": {"labels": {"$patch": "replace", "new": "1"}}})
    assert out["metadata"]["labels"] == {"new": "1"}
    out = apply_strategic_merge_patch(_pod(), {"metadata": {"labels": {"$patch": "delete"}}})
    assert out["metadata"]["labels"] == {}  # Kubernetes leaves an empty map


def test_apply_null_deletes_fields() -> None:
    out = apply_strategic_merge_patch(_pod(), {"metadata": {"labels": {"tier": None, "missing": None}}})
    assert out["metadata"]["labels"] == {"app": "web"}
    out = apply_strategic_merge_patch(_pod(), {"status": {"conditions": None}})
    assert "conditions" not in out["status"]


def test_apply_new_values_drop_nulls_and_directives() -> None:
    patch = {"spec": {"nodeSelector": {"a": "1", "b": None}, "tolerations": [{"key": "k", "value": None}]}}
    out = apply_strategic_merge_patch(_pod(), patch)
    assert out["spec"]["nodeSelector"] == {"a": "1"}
    assert out["spec"]["tolerations"] == [{"key": "k"}]


def test_apply_retain_keys() -> None:
    original = {"spec": {"volumes": [{"name": "data", "emptyDir": {}}]}}
    patch = {
        "spec": {
            "volumes": [{"name": "data", "$retainKeys": ["name", "configMap"], "configMap": {"name": "cm"}}],
        }
    }
    out = apply_strategic_merge_patch(original, patch)
    assert out["spec"]["volumes"] == [{"name": "data", "configMap": {"name": "cm"}}]


def test_apply_retain_keys_must_cover_patch_fields() -> None:
    with pytest.raises(PatchError, match=r"\$retainKeys"):
        apply_strategic_merge_patch({"spec": {}}, {"spec": {"$retainKeys": ["a"], "b": 1}})


def test_apply_delete_from_primitive_list() -> None:
    patch = {"metadata": {"$deleteFromPrimitiveList/finalizers": ["a.example/x"]}}
    out = apply_strategic_merge_patch(_pod(), patch)
    assert out["metadata"]["finalizers"] == ["b.example/y"]


def test_apply_finalizers_set_merge() -> None:
    patch = {
        "metadata": {
            "$setElementOrder/finalizers": ["a.example/x", "b.example/y", "c/z"],
            "finalizers": ["a.example/x", "c/z"],
        }
    }
    out = apply_strategic_merge_patch(_pod(), patch)
    assert out["metadata"]["finalizers"] == ["a.example/x", "b.example/y", "c/z"]
    # Already present values are not duplicated.
    out = apply_strategic_merge_patch(_pod(), {"metadata": {"finalizers": ["b.example/y"]}})
    assert out["metadata"]["finalizers"] == ["a.example/x", "b.example/y"]


def test_apply_non_merge_list_is_replaced() -> None:
    original = {"spec": {"tolerations": [{"key": "a"}, {"key": "b"}]}}
    out = apply_strategic_merge_patch(original, {"spec": {"tolerations": [{"key": "c"}]}})
    assert out["spec"]["tolerations"] == [{"key": "c"}]


def test_apply_owner_references_merge_by_uid() -> None:
    patch = {"metadata": {"ownerReferences": [{"uid": "rs1", "controller": True}]}}
    out = apply_strategic_merge_patch(_pod(), patch)
    assert out["metadata"]["ownerReferences"] == [
        {"uid": "rs1", "kind": "ReplicaSet", "name": "web-1", "controller": True}
    ]


def test_apply_custom_merge_keys() -> None:
    original = {"items": [{"id": 1, "v": "a"}, {"id": 2, "v": "b"}]}
    patch = {"items": [{"id": 2, "v": "c"}]}
    assert apply_strategic_merge_patch(original, patch, merge_keys={("items",): "id"}) == {
        "items": [{"id": 1, "v": "a"}, {"id": 2, "v": "c"}]
    }
    assert apply_strategic_merge_patch(original, patch, merge_keys={}) == patch


def test_pod_merge_keys_cover_the_schema() -> None:
    for path, key in {
        ("metadata", "ownerReferences"): "uid",
        ("metadata", "finalizers"): "",
        ("spec", "containers", "ports"): "containerPort",
        ("spec", "initContainers", "volumeMounts"): "mountPath",
        ("spec", "ephemeralContainers", "volumeDevices"): "devicePath",
        ("spec", "hostAliases"): "ip",
        ("spec", "topologySpreadConstraints"): "topologyKey",
        ("spec", "schedulingGates"): "name",
        ("status", "conditions"): "type",
        ("status", "resourceClaimStatuses"): "name",
    }.items():
        assert POD_MERGE_KEYS[path] == key
    assert ("status", "containerStatuses") not in POD_MERGE_KEYS


@pytest.mark.parametrize(
    ("patch", "message"),
    [
        (["not", "an", "object"], "must be a JSON object"),
        ({"status": {"conditions": [{"status": "True"}]}}, "merge key 'type'"),
        ({"status": {"conditions": [{"status": "True", "$patch": "delete"}]}}, "merge key 'type'"),
        ({"status": {"conditions": [{"type": "Ready", "$patch": "bogus"}]}}, "unknown \\$patch directive"),
        ({"status": {"$patch": "bogus"}}, "unknown \\$patch directive"),
        ({"status": {"conditions": [{"type": "Ready", "$patch": "merge"}]}}, "not supported"),
        ({"status": {"$setElementOrder/conditions": "x"}}, "must be a list"),
        ({"status": {"$retainKeys": "phase"}}, "must be a list"),
        ({"status": {"$setElementOrder": []}}, "malformed directive"),
        (
            {
                "status": {
                    "$setElementOrder/conditions": [{"type": "Ready"}],
                    "conditions": [{"type": "Other", "status": "True"}],
                }
            },
            "does not match \\$setElementOrder",
        ),
        ({"status": {"conditions": ["Ready"]}}, "same type"),
    ],
)
def test_apply_malformed_patches_raise(patch: Any, message: str) -> None:
    original = {"status": {"phase": "Running", "conditions": [READY_T]}}
    with pytest.raises(PatchError, match=message):
        apply_strategic_merge_patch(original, patch)


def test_patch_error_is_a_value_error() -> None:
    assert issubclass(PatchError, ValueError)
