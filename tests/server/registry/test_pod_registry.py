"""The pods registry (server/registry/pods.py, podrules.py) as tables, without HTTP.

Each row is an object (or an old object and a write) and what kube-apiserver v1.37.2 answers:
the stored result, or the 422's causes. Rows run through a real in-process Store, so the
strategy is tested where the generic store calls it; grace periods are a pure table.
"""

from __future__ import annotations

from typing import Any

import pytest

from podstatus.errors import BadRequestError, ConflictError, UnprocessableEntityError
from podstatus.server.registry import podrules
from podstatus.server.registry.pods import PODS, PodStrategy, bind, evict, eviction_options
from podstatus.server.storage.errors import FieldError
from podstatus.server.storage.store import Store


def _pod(**spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "img:1"}], "nodeName": "n1", **spec},
    }


def _causes(err: UnprocessableEntityError) -> list[tuple[str, str]]:
    status = err.status or {}
    return [(c["field"], c["reason"]) for c in status["details"]["causes"]]


# --- create: defaulting -----------------------------------------------------------------

CREATED = [
    # (spec overrides, path into the stored pod, expected value)
    ({}, ("status", "phase"), "Pending"),
    ({}, ("status", "qosClass"), "BestEffort"),
    ({}, ("metadata", "generation"), 1),
    ({}, ("spec", "restartPolicy"), "Always"),
    ({}, ("spec", "terminationGracePeriodSeconds"), 30),
    ({}, ("spec", "containers", 0, "imagePullPolicy"), "IfNotPresent"),
    ({"containers": [{"name": "c", "image": "img"}]}, ("spec", "containers", 0, "imagePullPolicy"), "Always"),
    (
        {"containers": [{"name": "c", "image": "img:latest"}]},
        ("spec", "containers", 0, "imagePullPolicy"),
        "Always",
    ),
    (
        {
            "containers": [
                {"name": "c", "image": "i:1", "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}
            ]
        },
        ("spec", "containers", 0, "resources", "requests"),
        {"cpu": "1", "memory": "1Gi"},
    ),
    (
        {
            "containers": [
                {"name": "c", "image": "i:1", "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}
            ]
        },
        ("status", "qosClass"),
        "Guaranteed",
    ),
    (
        {"containers": [{"name": "c", "image": "i:1", "resources": {"requests": {"cpu": "1"}}}]},
        ("status", "qosClass"),
        "Burstable",
    ),
    (
        {"containers": [{"name": "c", "image": "i:1", "ports": [{"containerPort": 80}]}]},
        ("spec", "containers", 0, "ports", 0, "protocol"),
        "TCP",
    ),
    (
        {},
        ("spec", "tolerations"),
        [
            {
                "key": "node.kubernetes.io/not-ready",
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": 300,
            },
            {
                "key": "node.kubernetes.io/unreachable",
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": 300,
            },
        ],
    ),
    ({"tolerations": [{"operator": "Exists"}]}, ("spec", "tolerations"), [{"operator": "Exists"}]),
]


@pytest.mark.parametrize(("spec", "path", "expected"), CREATED)
def test_create_defaults(spec: dict[str, Any], path: tuple[Any, ...], expected: Any) -> None:
    stored: Any = Store().create("pods", "default", _pod(**spec)).obj
    for key in path:
        stored = stored[key]
    assert stored == expected


def test_create_drops_the_given_status() -> None:
    body = _pod()
    body["status"] = {"phase": "Running", "podIP": "10.0.0.1"}
    assert Store().create("pods", "default", body).obj["status"] == {
        "phase": "Pending",
        "qosClass": "BestEffort",
    }


# --- create: validation -----------------------------------------------------------------

REFUSED = [
    ({"containers": []}, [("spec.containers", "FieldValueRequired")]),
    ({"containers": [{"name": "C_1", "image": "i"}]}, [("spec.containers[0].name", "FieldValueInvalid")]),
    ({"containers": [{"name": "c"}]}, [("spec.containers[0].image", "FieldValueRequired")]),
    (
        {"containers": [{"name": "c", "image": "i"}, {"name": "c", "image": "i"}]},
        [("spec.containers[1].name", "FieldValueDuplicate")],
    ),
    ({"restartPolicy": "Sometimes"}, [("spec.restartPolicy", "FieldValueNotSupported")]),
    (
        {"containers": [{"name": "c", "image": "i", "ports": [{"containerPort": 70000}]}]},
        [("spec.containers[0].ports[0].containerPort", "FieldValueInvalid")],
    ),
    (
        {"readinessGates": [{"conditionType": ""}]},
        [("spec.readinessGates[0].conditionType", "FieldValueRequired")],
    ),
]


@pytest.mark.parametrize(("spec", "causes"), REFUSED)
def test_create_is_invalid(spec: dict[str, Any], causes: list[tuple[str, str]]) -> None:
    with pytest.raises(UnprocessableEntityError) as err:
        Store().create("pods", "default", _pod(**spec))
    assert _causes(err.value) == causes


def test_create_with_untyped_resources_is_a_bad_request() -> None:
    with pytest.raises(BadRequestError, match="cannot unmarshal string into Go struct field Container"):
        Store().create("pods", "default", _pod(containers=[{"name": "c", "image": "i", "resources": "x"}]))


# --- update of the main resource --------------------------------------------------------

UPDATES = [
    # (JSON merge patch, expected causes or None, expected generation)
    ({"spec": {"containers": [{"name": "c", "image": "img:2"}]}}, None, 2),
    ({"spec": {"activeDeadlineSeconds": 5}}, None, 2),
    ({"metadata": {"labels": {"a": "b"}}}, None, 1),
    (
        {"spec": {"containers": [{"name": "c", "image": "i"}, {"name": "d", "image": "i"}]}},
        [("spec.containers", "FieldValueForbidden")],
        1,
    ),
    ({"spec": {"restartPolicy": "Never"}}, [("spec", "FieldValueForbidden")], 1),
    ({"metadata": {"labels": {"bad key!": "x"}}}, [("metadata.labels", "FieldValueInvalid")], 1),
]


@pytest.mark.parametrize(("patch", "causes", "generation"), UPDATES)
def test_update(patch: dict[str, Any], causes: list[tuple[str, str]] | None, generation: int) -> None:
    store = Store()
    store.create("pods", "default", _pod())
    if causes is None:
        store.patch("pods", "default", "p", patch, "merge")
    else:
        with pytest.raises(UnprocessableEntityError) as err:
            store.patch("pods", "default", "p", patch, "merge")
        assert _causes(err.value) == causes
    assert store.get("pods", "default", "p").obj["metadata"]["generation"] == generation


def test_update_that_changes_nothing_keeps_the_version() -> None:
    store = Store()
    created = store.create("pods", "default", _pod())
    same = store.patch(
        "pods", "default", "p", {"spec": {"containers": [{"name": "c", "image": "img:1"}]}}, "merge"
    )
    assert same.rv == created.rv


# --- pods/status ------------------------------------------------------------------------

RUNNING = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}

STATUS_WRITES = [
    # (old status patch, new status patch, strict, expected causes or the expected stored status subset)
    ({}, {"phase": "Running"}, True, {"phase": "Running", "qosClass": "BestEffort"}),
    ({}, {"podIP": "10.0.0.7"}, True, {"podIP": "10.0.0.7", "podIPs": [{"ip": "10.0.0.7"}]}),
    ({}, {"podIPs": [{"ip": "10.0.0.8"}]}, True, {"podIP": "10.0.0.8"}),
    ({"phase": "Succeeded"}, {"phase": "Running"}, True, [("status.phase", "FieldValueForbidden")]),
    ({"phase": "Succeeded"}, {"phase": "Running"}, False, {"phase": "Running"}),
    (
        {},
        {"conditions": [{"type": "Ready", "status": "Maybe"}]},
        True,
        [("status.conditions[0].status", "FieldValueNotSupported")],
    ),
    (
        {},
        {"conditions": [{"type": "Ready", "status": "Maybe"}]},
        False,
        {
            "conditions": [
                {"type": "Ready", "status": "Maybe", "lastProbeTime": None, "lastTransitionTime": None}
            ]
        },
    ),
    (
        {},
        {"conditions": [{"type": "bad type!", "status": "True"}]},
        True,
        [("status.conditions[0].Type", "FieldValueInvalid")],
    ),
    ({}, {"qosClass": "Guaranteed"}, True, [("status.qosClass", "FieldValueInvalid")]),
    ({}, {"podIPs": [{"ip": "nope"}]}, True, [("status.podIPs[0]", "FieldValueInvalid")]),
    (
        {},
        {"podIPs": [{"ip": "10.0.0.1"}, {"ip": "10.0.0.2"}]},
        True,
        [("status.podIPs", "FieldValueInvalid")],
    ),
    (
        {},
        {"hostIP": "10.0.0.1", "hostIPs": [{"ip": "10.0.0.2"}]},
        True,
        [("status.hostIPs[0].ip", "FieldValueInvalid")],
    ),
    (
        {},
        {"containerStatuses": [{"name": "c", "restartCount": -1}]},
        True,
        [("status.containerStatuses[0].restartCount", "FieldValueInvalid")],
    ),
    ({}, {"observedGeneration": -1}, True, [("status.observedGeneration", "FieldValueInvalid")]),
]


@pytest.mark.parametrize(("old", "new", "strict", "expected"), STATUS_WRITES)
def test_status_write(old: dict[str, Any], new: dict[str, Any], strict: bool, expected: Any) -> None:
    store = Store(strict_status=strict)
    store.create("pods", "default", _pod())
    if old:
        store.patch("pods", "default", "p", {"status": old}, "merge", subresource="status")
    if isinstance(expected, list):
        with pytest.raises(UnprocessableEntityError) as err:
            store.patch("pods", "default", "p", {"status": new}, "merge", subresource="status")
        assert _causes(err.value) == expected
        return
    status = store.patch("pods", "default", "p", {"status": new}, "merge", subresource="status").obj["status"]
    assert {k: status.get(k) for k in expected} == expected


def test_status_write_keeps_the_spec_and_owner_references() -> None:
    store = Store()
    store.create("pods", "default", _pod())
    patch = {
        "metadata": {"ownerReferences": [{"apiVersion": "v1", "kind": "X", "name": "x", "uid": "u"}]},
        "spec": {"nodeName": "elsewhere"},
        "status": {"phase": "Running"},
    }
    obj = store.patch("pods", "default", "p", patch, "merge", subresource="status").obj
    assert obj["spec"]["nodeName"] == "n1"
    assert "ownerReferences" not in obj["metadata"]
    assert obj["status"]["phase"] == "Running"


def test_terminated_container_of_a_never_restarting_pod_stays_terminated() -> None:
    store = Store()
    store.create("pods", "default", _pod(restartPolicy="Never"))
    done = {"containerStatuses": [{"name": "c", "state": {"terminated": {"exitCode": 0}}}]}
    store.patch("pods", "default", "p", {"status": done}, "merge", subresource="status")
    again = {"containerStatuses": [{"name": "c", "state": {"running": {}}}]}
    with pytest.raises(UnprocessableEntityError) as err:
        store.patch("pods", "default", "p", {"status": again}, "merge", subresource="status")
    assert _causes(err.value) == [("status.containerStatuses[0].state", "FieldValueForbidden")]


# --- graceful deletion, binding ---------------------------------------------------------

GRACE = [
    # (spec, phase, requested) -> period
    ({"nodeName": "n1"}, "Running", None, 30),
    ({"nodeName": "n1", "terminationGracePeriodSeconds": 5}, "Running", None, 5),
    ({"nodeName": "n1"}, "Running", 7, 7),
    ({"nodeName": "n1"}, "Running", -3, 1),
    ({}, "Pending", None, 0),
    ({"nodeName": "n1"}, "Succeeded", None, 0),
    ({"nodeName": "n1"}, "Failed", 10, 0),
]


@pytest.mark.parametrize(("spec", "phase", "requested", "period"), GRACE)
def test_grace_period(spec: dict[str, Any], phase: str, requested: int | None, period: int) -> None:
    obj = {"spec": spec, "status": {"phase": phase}}
    assert PodStrategy().grace_period(obj, requested) == period


def test_bind_sets_the_node_once() -> None:
    store = Store()
    body = _pod()
    del body["spec"]["nodeName"]
    store.create("pods", "default", body)
    assert bind(store, "default", "p", "n9").obj["spec"]["nodeName"] == "n9"
    with pytest.raises(ConflictError, match='pod p is already assigned to node "n9"'):
        bind(store, "default", "p", "n8")


# --- the pure rules -----------------------------------------------------------------------


def test_spec_update_rules_as_a_table() -> None:
    base = {"containers": [{"name": "c", "image": "a"}], "restartPolicy": "Always"}
    rows = [
        (dict(base, containers=[{"name": "c", "image": "b"}]), [], 2),
        (dict(base, restartPolicy="Never"), [("spec", "Forbidden")], 1),
        (dict(base, containers=[]), [("spec.containers", "Forbidden")], 1),
        (base, [], 1),
    ]
    for spec, causes, generation in rows:
        meta: dict[str, Any] = {"generation": 1}
        errors: list[FieldError] = []
        podrules.check_spec_update(spec, base, meta, errors)
        assert [(e.field, e.type) for e in errors] == causes, spec
        assert meta["generation"] == generation, spec


def test_pods_are_registered_with_their_strategy() -> None:
    assert PODS.key == "pods" and isinstance(PODS.strategy, PodStrategy)
    assert PODS.strategy.subresources == ("resize",) and PODS.strategy.graceful


# --- eviction -------------------------------------------------------------------------------

EVICTIONS = [
    # (Eviction body, expected message of the 400, or None: valid, with these DeleteOptions)
    ({}, None),
    ({"kind": "Eviction", "apiVersion": "policy/v1", "metadata": {"name": "p"}}, None),
    ({"apiVersion": "policy/v1beta1", "deleteOptions": {"gracePeriodSeconds": 3}}, None),
    ({"kind": "Binding"}, "invalid Eviction: kind 'Binding'"),
    ({"apiVersion": "v1"}, "invalid Eviction: kind None apiVersion 'v1'"),
    ({"metadata": "x"}, "invalid Eviction: metadata must be an object"),
    ({"metadata": {"name": "q"}}, "name in URL does not match name in Eviction object"),
    ({"metadata": {"namespace": "other"}}, "namespace in URL does not match namespace in Eviction object"),
    ({"deleteOptions": 5}, "invalid Eviction: deleteOptions must be an object"),
    ({"deleteOptions": {"dryRun": ["All"]}}, "dryRun is not supported by this server"),
]


@pytest.mark.parametrize(("body", "refused"), EVICTIONS)
def test_eviction_body(body: dict[str, Any], refused: str | None) -> None:
    if refused is None:
        assert eviction_options(body, "default", "p") == body.get("deleteOptions")
        return
    with pytest.raises(BadRequestError) as err:
        eviction_options(body, "default", "p")
    assert str(err.value).startswith(refused)


def test_evict_marks_the_disruption_target_then_deletes_gracefully() -> None:
    store = Store(clock=lambda: 1_700_000_000.0)
    store.create("pods", "default", _pod())
    with store.watch("pods", "default", resource_version=str(store.resource_version)) as watch:
        evict(store, "default", "p", grace_period_seconds=5)
        first, second = watch.next(timeout=5), watch.next(timeout=5)
    assert first is not None and second is not None
    conditions = first.obj["status"]["conditions"]
    assert {
        "type": "DisruptionTarget",
        "status": "True",
        "reason": "EvictionByEvictionAPI",
    }.items() <= conditions[0].items()
    assert conditions[0]["lastTransitionTime"] == "2023-11-14T22:13:20Z"
    meta = second.obj["metadata"]
    assert meta["deletionGracePeriodSeconds"] == 5 and meta["deletionTimestamp"] == "2023-11-14T22:13:25Z"


def test_evict_preconditions() -> None:
    store = Store()
    created = store.create("pods", "default", _pod())
    with pytest.raises(ConflictError, match=r"the UID in the precondition \(nope\) does not match"):
        evict(store, "default", "p", uid="nope")
    with pytest.raises(
        ConflictError, match=r"the ResourceVersion in the precondition \(1234\) does not match"
    ):
        evict(store, "default", "p", resource_version="1234")
    evict(store, "default", "p", uid=created.uid, resource_version=str(created.rv), grace_period_seconds=0)
    assert store.list("pods", "default")[0] == []
