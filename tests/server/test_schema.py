"""podstatus.server.fieldmanager.schema: known fields, Go's number conversions, Swagger definitions."""

from __future__ import annotations

from typing import Any

from podstatus.server.fieldmanager import schema


def test_prune_lists_and_removes_unknown_fields_in_document_order() -> None:
    pod: dict[str, Any] = {
        "metadata": {"name": "p", "x": 1},
        "spec": {"containers": [{"name": "c", "y": {}}], "z": None},
        "status": {"conditions": [{"type": "Ready", "status": "True", "w": 1}]},
    }
    found = schema.prune("v1/Pod", pod)
    assert found.unknown == ["metadata.x", "spec.containers[0].y", "spec.z", "status.conditions[0].w"]
    assert found.range_error is None
    assert pod == {
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c"}]},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    }


def test_maps_and_free_form_values_are_not_pruned() -> None:
    pod: dict[str, Any] = {
        "metadata": {"labels": {"anything": "goes"}, "managedFields": [{"fieldsV1": {"f:x": {}}}]},
        "spec": {
            "containers": [{"name": "c", "resources": {"limits": {"cpu": "1"}}}],
            "nodeSelector": {"a": "b"},
        },
    }
    assert schema.prune("v1/Pod", pod).unknown == []


def test_range_errors_name_the_go_struct_field() -> None:
    node = {"status": {"daemonEndpoints": {"kubeletEndpoint": {"Port": 2**31}}}}
    found = schema.prune("v1/Node", node)
    assert found.range_error == (
        "json: cannot unmarshal number 2147483648 into Go struct field "
        "DaemonEndpoint.status.daemonEndpoints.kubeletEndpoint.Port of type int32"
    )
    assert schema.prune("v1/Pod", {"spec": {"terminationGracePeriodSeconds": 2**63 - 1}}).range_error is None
    assert schema.prune("v1/Pod", {"spec": {"terminationGracePeriodSeconds": -(2**63) - 1}}).range_error
    assert schema.prune("v1/Pod", {"spec": {"priority": 1.5}}).range_error


def test_wrap_converts_as_go_does() -> None:
    obj: dict[str, Any] = {"status": {"containerStatuses": [{"restartCount": 2**40 + 5}, {"restartCount": 2**31},
                                                            {"restartCount": 2**70}]}}  # fmt: skip
    assert schema.prune("v1/Pod", obj, wrap=True).range_error is None
    assert [c["restartCount"] for c in obj["status"]["containerStatuses"]] == [5, -(2**31), -(2**31)]


def test_kinds_without_a_schema_are_left_alone() -> None:
    obj = {"spec": {"anything": 1}}
    assert not schema.known_kind("v1/Secret")
    assert schema.prune("v1/Secret", obj).unknown == [] and obj == {"spec": {"anything": 1}}
    for key in (
        "v1/Pod",
        "v1/Node",
        "v1/Namespace",
        "coordination.k8s.io/v1/Lease",
        "events.k8s.io/v1/Event",
    ):
        assert schema.known_kind(key)


def test_a_patch_is_only_looked_at() -> None:
    patch: dict[str, Any] = {
        "status": {
            "$setElementOrder/conditions": [{"type": "Ready"}],
            "conditions": [{"type": "Gone", "$patch": "delete"}, {"type": "Ready", "status": "True"}],
            "oldField": None,
            "newField": 1,
        }
    }
    found = schema.prune("v1/Pod", patch, patch=True)
    assert found.unknown == ["status.newField"]
    assert patch["status"]["newField"] == 1  # nothing removed
    restart = {"status": {"containerStatuses": [{"restartCount": 2**40}]}}
    assert schema.prune("v1/Pod", restart, patch=True).range_error
    assert restart["status"]["containerStatuses"][0]["restartCount"] == 2**40


def test_duplicate_fields_are_found_with_their_paths() -> None:
    raw = b'{"a": 1, "b": {"c": [{"d": 1, "d": 2}], "e": "x\\": 1"}, "a": 2}'
    assert schema.duplicate_fields(raw, {"a": 2, "b": {"c": [{"d": 2}], "e": 'x": 1'}}) == ["a", "b.c[0].d"]
    clean = b'{"a": "\\": \\":", "b": {"c": 1}}'
    assert schema.duplicate_fields(clean, {"a": '": ":', "b": {"c": 1}}) == []
