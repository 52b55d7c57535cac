"""Store semantics of the node agent's resources: Leases, Events (two API groups), Node rules."""

from __future__ import annotations

import re
from typing import Any

import msgspec
import pytest

from podstatus.errors import BadRequestError, ConflictError, NotFoundError, UnprocessableEntityError
from podstatus.server import Store
from podstatus.server.registry.events import core_event_to_v1, v1_event_to_core

LEASES = "leases.coordination.k8s.io"
EVENTS_V1 = "events.events.k8s.io"
MICRO = "2026-01-02T03:04:05.123456Z"


@pytest.fixture
def store() -> Store:
    return Store()


def lease(name: str = "n1", **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"holderIdentity": name, "leaseDurationSeconds": 40, **spec}}


def core_event(name: str = "p.1", ns: str = "default", **extra: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": ns},
        "involvedObject": {"kind": "Pod", "name": "p", "namespace": ns, "uid": "u1", "apiVersion": "v1"},
        "reason": "Started",
        "message": "Started container app",
        "source": {"component": "kubelet", "host": "n1"},
        "firstTimestamp": "2026-01-02T03:04:05Z",
        "lastTimestamp": "2026-01-02T03:04:05Z",
        "count": 1,
        "type": "Normal",
        **extra,
    }


def v1_event(name: str = "p.2", ns: str = "default", **extra: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": ns},
        "eventTime": MICRO,
        "reportingController": "kubelet",
        "reportingInstance": "n1",
        "action": "Pull",
        "reason": "Pulled",
        "regarding": {"kind": "Pod", "name": "p", "namespace": ns, "uid": "u1"},
        "note": "pulled image",
        "type": "Normal",
        **extra,
    }


def messages(err: pytest.ExceptionInfo[UnprocessableEntityError]) -> list[str]:
    status = err.value.status or {}
    return [f"{c['field']}: {c['message']}" for c in status["details"]["causes"]]


# --- Leases ---------------------------------------------------------------------------


def test_lease_create_get_list_and_kind(store: Store) -> None:
    created = store.create(LEASES, "kube-node-lease", lease(renewTime=MICRO))
    assert created.obj["apiVersion"] == "coordination.k8s.io/v1"
    assert created.obj["kind"] == "Lease"
    assert created.obj["spec"] == {"holderIdentity": "n1", "leaseDurationSeconds": 40, "renewTime": MICRO}
    assert "status" not in created.obj
    assert store.get(LEASES, "kube-node-lease", "n1").obj == created.obj
    items, _ = store.list(LEASES, "kube-node-lease")
    assert [s.name for s in items] == ["n1"]
    with pytest.raises(NotFoundError, match=re.escape('leases.coordination.k8s.io "x" not found')):
        store.get(LEASES, "kube-node-lease", "x")


def test_lease_update_with_stale_resource_version_is_a_conflict(store: Store) -> None:
    first = store.create(LEASES, "kube-node-lease", lease())
    body = msgspec.json.decode(first.raw)
    body["spec"]["renewTime"] = MICRO
    renewed = store.update(LEASES, "kube-node-lease", "n1", body)
    assert renewed.obj["spec"]["renewTime"] == MICRO
    assert int(renewed.metadata["resourceVersion"]) > int(first.metadata["resourceVersion"])
    # The same body again carries the old resourceVersion: a precondition that fails now.
    with pytest.raises(ConflictError) as err:
        store.update(LEASES, "kube-node-lease", "n1", body)
    assert err.value.message == (
        'Operation cannot be fulfilled on leases.coordination.k8s.io "n1": the object has been modified; '
        "please apply your changes to the latest version and try again"
    )
    assert err.value.reason == "Conflict"


def test_lease_micro_time_is_parsed_and_printed_in_utc(store: Store) -> None:
    created = store.create(LEASES, "kube-node-lease", lease(acquireTime="2026-01-02T04:04:05.000001+01:00"))
    assert created.obj["spec"]["acquireTime"] == "2026-01-02T03:04:05.000001Z"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (
            "2026-01-02T03:04:05Z",
            'parsing time "2026-01-02T03:04:05Z" as "2006-01-02T15:04:05.000000Z07:00": '
            'cannot parse "Z" as ".000000"',
        ),
        (
            "2026-01-02T03:04:05.123Z",
            'parsing time "2026-01-02T03:04:05.123Z" as "2006-01-02T15:04:05.000000Z07:00": '
            'cannot parse ".123Z" as ".000000"',
        ),
        (
            "yesterday",
            'parsing time "yesterday" as "2006-01-02T15:04:05.000000Z07:00": cannot parse "yesterday" as "2006"',
        ),
    ],
)
def test_lease_malformed_micro_time_is_a_bad_request(store: Store, value: str, message: str) -> None:
    with pytest.raises(BadRequestError) as err:
        store.create(LEASES, "kube-node-lease", lease(renewTime=value))
    assert err.value.message == f'Lease in version "v1" cannot be handled as a Lease: {message}'


def test_lease_validation(store: Store) -> None:
    with pytest.raises(UnprocessableEntityError) as err:
        store.create(LEASES, "kube-node-lease", lease(leaseDurationSeconds=0, leaseTransitions=-1))
    assert messages(err) == [
        "spec.leaseDurationSeconds: Invalid value: 0: must be greater than 0",
        "spec.leaseTransitions: Invalid value: -1: must be greater than or equal to 0",
    ]
    assert err.value.message.startswith(
        'Lease.coordination.k8s.io "n1" is invalid: [spec.leaseDurationSeconds'
    )
    details = (err.value.status or {})["details"]
    assert (details["group"], details["kind"], details["name"]) == ("coordination.k8s.io", "Lease", "n1")
    store.create(LEASES, "kube-node-lease", lease())
    with pytest.raises(UnprocessableEntityError):
        store.patch(LEASES, "kube-node-lease", "n1", {"spec": {"leaseDurationSeconds": -5}})


def test_lease_wrong_type_is_a_bad_request(store: Store) -> None:
    with pytest.raises(BadRequestError, match="cannot unmarshal string into Go struct field LeaseSpec"):
        store.create(LEASES, "kube-node-lease", lease(leaseDurationSeconds="40"))


def test_lease_has_no_status_subresource(store: Store) -> None:
    store.create(LEASES, "kube-node-lease", lease())
    with pytest.raises(NotFoundError):
        store.patch(LEASES, "kube-node-lease", "n1", {"spec": {}}, subresource="status")


# --- Events ---------------------------------------------------------------------------


def test_core_event_is_stored_in_canonical_form(store: Store) -> None:
    created = store.create("events", "default", core_event(extra_field="dropped"))
    obj = created.obj
    assert obj["apiVersion"] == "v1"
    assert "extra_field" not in obj
    assert obj["eventTime"] is None
    assert obj["reportingComponent"] == "" and obj["reportingInstance"] == ""
    assert obj["involvedObject"]["uid"] == "u1"


def test_one_storage_two_groups(store: Store) -> None:
    store.create("events", "default", core_event())
    store.create(EVENTS_V1, "default", v1_event())
    core, _ = store.list("events", "default")
    v1, _ = store.list(EVENTS_V1, "default")
    assert [s.name for s in core] == [s.name for s in v1] == ["p.1", "p.2"]
    # The core event seen through events.k8s.io.
    first = v1[0].obj
    assert first["apiVersion"] == "events.k8s.io/v1"
    assert first["note"] == "Started container app"
    assert first["regarding"]["name"] == "p"
    assert first["deprecatedSource"] == {"component": "kubelet", "host": "n1"}
    assert first["deprecatedCount"] == 1
    assert first["deprecatedFirstTimestamp"] == "2026-01-02T03:04:05Z"
    assert "message" not in first and "involvedObject" not in first
    # The events.k8s.io event seen through core/v1.
    second = core[1].obj
    assert second["message"] == "pulled image"
    assert second["involvedObject"]["kind"] == "Pod"
    assert second["reportingComponent"] == "kubelet"
    assert second["reportingInstance"] == "n1"
    assert second["eventTime"] == MICRO
    assert second["source"] == {} and second["firstTimestamp"] is None
    # get and the raw bytes agree with the converted dict
    got = store.get(EVENTS_V1, "default", "p.1")
    assert msgspec.json.decode(got.raw) == got.obj == first


def test_conversion_round_trip() -> None:
    stored = {
        "kind": "Event",
        "apiVersion": "v1",
        "metadata": {"name": "e"},
        "involvedObject": {"kind": "Node", "name": "n1"},
        "reason": "NodeReady",
        "message": "ready",
        "source": {"component": "kubelet", "host": "n1"},
        "firstTimestamp": "2026-01-02T03:04:05Z",
        "lastTimestamp": "2026-01-02T03:04:06Z",
        "count": 2,
        "type": "Normal",
        "eventTime": None,
        "reportingComponent": "kubelet",
        "reportingInstance": "n1",
    }
    back = v1_event_to_core(core_event_to_v1(stored))
    assert {k: v for k, v in back.items() if v not in (None, {}, "")} == {
        k: v for k, v in stored.items() if v not in (None, {}, "")
    }


def test_event_field_selectors_of_both_groups(store: Store) -> None:
    store.create("events", "default", core_event())
    other = core_event("q.1")
    other["involvedObject"] = {"kind": "Pod", "name": "q", "namespace": "default", "uid": "u2"}
    other["type"] = "Warning"
    store.create("events", "default", other)
    sel = (
        "involvedObject.name=p,involvedObject.namespace=default,involvedObject.uid=u1,involvedObject.kind=Pod"
    )
    assert [s.name for s in store.list("events", "default", field_selector=sel)[0]] == ["p.1"]
    assert [s.name for s in store.list("events", field_selector="type=Warning")[0]] == ["q.1"]
    assert [s.name for s in store.list("events", field_selector="reason=Started,source=kubelet")[0]] == [
        "p.1",
        "q.1",
    ]
    assert [s.name for s in store.list(EVENTS_V1, field_selector="regarding.name=q")[0]] == ["q.1"]
    assert [s.name for s in store.list(EVENTS_V1, field_selector="reportingController=")[0]] == ["p.1", "q.1"]
    with pytest.raises(BadRequestError, match=re.escape("field label not supported: regarding.name")):
        store.list("events", field_selector="regarding.name=q")


def test_core_event_namespace_must_match(store: Store) -> None:
    body = core_event(ns="default")
    body["involvedObject"]["namespace"] = "other"
    with pytest.raises(UnprocessableEntityError) as err:
        store.create("events", "default", body)
    assert messages(err) == [
        'involvedObject.namespace: Invalid value: "other": does not match event.namespace'
    ]
    # An event about a cluster-scoped object lives in "default".
    node_event = core_event("n1.1")
    node_event["involvedObject"] = {"kind": "Node", "name": "n1"}
    store.create("events", "default", node_event)
    with pytest.raises(UnprocessableEntityError):
        store.create("events", "kube-system", {**node_event, "metadata": {"name": "n1.2"}})


def test_events_v1_strict_validation(store: Store) -> None:
    body = v1_event()
    for key in ("reportingController", "reportingInstance", "action", "reason", "eventTime"):
        del body[key]
    body["type"] = "Bad"
    body["deprecatedCount"] = 3
    with pytest.raises(UnprocessableEntityError) as err:
        store.create(EVENTS_V1, "default", body)
    assert messages(err) == [
        "eventTime: Required value",
        'type: Invalid value: "": has invalid value: Bad',
        'count: Invalid value: "": needs to be unset',
    ]


def test_events_v1_reporting_rules(store: Store) -> None:
    body = v1_event(reportingController="not a name", reportingInstance="x" * 129)
    with pytest.raises(UnprocessableEntityError) as err:
        store.create(EVENTS_V1, "default", body)
    got = messages(err)
    assert got[0].startswith('reportingController: Invalid value: "not a name": name part must consist of')
    assert got[-1] == 'reportingInstance: Invalid value: "": can have at most 128 characters'
    # The same rules apply to a core/v1 event that has an eventTime.
    core = v1_event_to_core(v1_event(name="p.3"))
    core["reportingComponent"] = ""
    with pytest.raises(UnprocessableEntityError) as err:
        store.create("events", "default", core)
    assert "reportingController: Required value" in messages(err)


def test_event_patch_count_and_immutability(store: Store) -> None:
    store.create("events", "default", core_event())
    patched = store.patch("events", "default", "p.1", {"count": 2, "lastTimestamp": "2026-01-02T03:05:05Z"})
    assert patched.obj["count"] == 2
    assert patched.obj["lastTimestamp"] == "2026-01-02T03:05:05Z"
    # Through events.k8s.io the same event can only change its series.
    store.create(EVENTS_V1, "default", v1_event())
    series = {"series": {"count": 2, "lastObservedTime": MICRO}}
    updated = store.patch(EVENTS_V1, "default", "p.2", series)
    assert updated.obj["series"] == {"count": 2, "lastObservedTime": MICRO}
    assert store.get("events", "default", "p.2").obj["series"] == {"count": 2, "lastObservedTime": MICRO}
    with pytest.raises(UnprocessableEntityError) as err:
        store.patch(EVENTS_V1, "default", "p.2", {"note": "changed"})
    assert messages(err) == ['message: Invalid value: "changed": field is immutable']
    with pytest.raises(UnprocessableEntityError) as err:
        store.patch(EVENTS_V1, "default", "p.2", {"series": {"count": 1, "lastObservedTime": MICRO}})
    assert messages(err) == ['series.count: Invalid value: "": should be at least 2']


def test_event_watch_sees_both_forms(store: Store) -> None:
    core_watch = store.watch("events", "default")
    v1_watch = store.watch(EVENTS_V1, "default")
    store.create("events", "default", core_event())
    a = core_watch.next(timeout=1)
    b = v1_watch.next(timeout=1)
    assert a is not None and b is not None
    assert a.type == b.type == "ADDED"
    assert a.obj["message"] == b.obj["note"] == "Started container app"
    assert msgspec.json.decode(b.stored.raw)["apiVersion"] == "events.k8s.io/v1"


def test_event_delete_returns_wire_form(store: Store) -> None:
    store.create("events", "default", core_event())
    gone, done = store.delete(EVENTS_V1, "default", "p.1")
    assert done and gone.obj["apiVersion"] == "events.k8s.io/v1"
    with pytest.raises(NotFoundError, match=re.escape('events "p.1" not found')):
        store.get("events", "default", "p.1")


# --- Nodes ----------------------------------------------------------------------------


def node(name: str = "n1", **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": spec}


def test_taint_validation(store: Store) -> None:
    taints = [
        {"key": "a", "effect": "NoSchedule"},
        {"key": "a", "effect": "NoSchedule"},
        {"key": "b", "effect": "Sometimes"},
        {"key": "c"},
        {"key": "bad key", "value": "v", "effect": "NoExecute"},
    ]
    with pytest.raises(UnprocessableEntityError) as err:
        store.create("nodes", None, node(taints=taints))
    got = messages(err)
    assert got[0] == (
        'metadata.taints[1]: Duplicate value: {"Key":"a","Value":"","Effect":"NoSchedule","TimeAdded":null}: '
        "taints must be unique by key and effect pair"
    )
    assert got[1] == (
        'metadata.taints[2].effect: Unsupported value: "Sometimes": supported values: '
        '"NoSchedule", "PreferNoSchedule", "NoExecute"'
    )
    assert got[2] == "metadata.taints[3].effect: Required value"
    assert got[3].startswith('metadata.taints[4].key: Invalid value: "bad key": name part must consist of')


def test_node_spec_patch_keeps_status_and_status_patch_keeps_spec(store: Store) -> None:
    status = {"conditions": [{"type": "Ready", "status": "True"}]}
    store.create("nodes", None, {**node(), "status": status})
    store.patch("nodes", None, "n1", {"status": {"conditions": []}})  # ignored (not the status subresource)
    cordoned = store.patch("nodes", None, "n1", {"spec": {"unschedulable": True}})
    assert cordoned.obj["spec"]["unschedulable"] is True
    assert cordoned.obj["status"]["conditions"] == [
        {"lastHeartbeatTime": None, "lastTransitionTime": None, "type": "Ready", "status": "True"}
    ]
    # Printed as kube-apiserver prints a Node: every nodeInfo field, the kubelet endpoint.
    assert cordoned.obj["status"]["nodeInfo"]["kubeletVersion"] == ""
    assert cordoned.obj["status"]["daemonEndpoints"] == {"kubeletEndpoint": {"Port": 0}}
    tainted = store.patch("nodes", None, "n1", {"spec": {"taints": [{"key": "k", "effect": "NoSchedule"}]}})
    assert tainted.obj["spec"]["taints"] == [{"key": "k", "effect": "NoSchedule"}]
    with pytest.raises(UnprocessableEntityError):
        store.patch("nodes", None, "n1", {"spec": {"taints": [{"key": "k", "effect": "Nope"}]}})
    beat = store.patch(
        "nodes",
        None,
        "n1",
        {
            "spec": {"unschedulable": False},
            "status": {
                "conditions": [{"type": "MemoryPressure", "status": "False"}],
                "capacity": {"cpu": "4"},
                "nodeInfo": {"kubeletVersion": "v1.37.0"},
                "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            },
        },
        subresource="status",
    )
    # conditions merge by type; the spec stays (status subresource).
    assert sorted(c["type"] for c in beat.obj["status"]["conditions"]) == ["MemoryPressure", "Ready"]
    assert beat.obj["spec"]["unschedulable"] is True
    assert beat.obj["status"]["capacity"] == {"cpu": "4"}


def test_node_provider_id_is_set_once(store: Store) -> None:
    store.create("nodes", None, node())
    store.patch("nodes", None, "n1", {"spec": {"providerID": "sim://n1"}})
    with pytest.raises(UnprocessableEntityError, match="may not change providerID"):
        store.patch("nodes", None, "n1", {"spec": {"providerID": "sim://other"}})


def test_lease_fields_of_a_disabled_feature_are_dropped(store: Store) -> None:
    # CoordinatedLeaderElection is off by default in kube-apiserver v1.37.
    created = store.create(
        LEASES, "kube-node-lease", lease(strategy="OldestEmulationVersion", preferredHolder="m")
    )
    assert "strategy" not in created.obj["spec"] and "preferredHolder" not in created.obj["spec"]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"spec": 1}, "json: cannot unmarshal number into Go struct field Node.spec of type v1.NodeSpec"),
        ({"spec": {"unschedulable": "yes"}}, "Go struct field NodeSpec.spec.unschedulable of type bool"),
        ({"spec": {"taints": {}}}, "Go struct field NodeSpec.spec.taints of type []v1.Taint"),
        (
            {"status": {"conditions": [1]}},
            "Go struct field NodeStatus.status.conditions of type v1.NodeCondition",
        ),
        ({"status": {"nodeInfo": {"kubeletVersion": 1}}}, "NodeSystemInfo.status.nodeInfo.kubeletVersion"),
    ],
)
def test_node_wrong_types_are_bad_requests(store: Store, body: dict[str, Any], message: str) -> None:
    # Stored, they would break every later read of the node list (printing, clients).
    with pytest.raises(BadRequestError, match=re.escape(message)):
        store.create("nodes", None, {"metadata": {"name": "n1"}, **body})
    store.create("nodes", None, node())
    with pytest.raises(BadRequestError):
        store.patch("nodes", None, "n1", body, subresource="status" if "status" in body else None)


def test_events_expire_an_hour_after_their_last_write() -> None:
    now = [1_700_000_000.0]
    store = Store(clock=lambda: now[0])
    store.create("events", "default", core_event())
    store.create(LEASES, "kube-node-lease", lease())
    watch = store.watch("events", "default", resource_version=str(store.resource_version))
    now[0] += 3599
    store.patch("events", "default", "p.1", {"count": 2})  # a repeat: the hour starts again
    now[0] += 3599
    assert store.get("events", "default", "p.1").obj["count"] == 2
    now[0] += 2
    with pytest.raises(NotFoundError):
        store.get(EVENTS_V1, "default", "p.1")
    # Watchers see it go, as when etcd drops the key; Leases have no TTL.
    seen = [watch.next(timeout=1), watch.next(timeout=1)]
    assert [e.type for e in seen if e is not None] == ["MODIFIED", "DELETED"]
    assert store.get(LEASES, "kube-node-lease", "n1")
