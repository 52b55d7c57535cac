"""managedFields and server-side apply in the embedded server's store (podstatus.server.fieldmanager.apply)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from podstatus.errors import ApiError, BadRequestError, ConflictError, NotFoundError, UnprocessableEntityError
from podstatus.server.fieldmanager import apply as A
from podstatus.server.fieldmanager import options as O
from podstatus.server.storage.objects import WriteOptions
from podstatus.server.storage.store import Store

CONFIG = """\
apiVersion: v1
kind: Pod
metadata:
  name: p
  labels: {app: web}
spec:
  containers:
  - name: a
    image: nginx:1
"""


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def store(clock: Clock) -> Store:
    return Store(clock=clock)


def managers(obj: dict[str, Any]) -> dict[tuple[str, str, str], dict[str, Any]]:
    """(manager, operation, subresource) -> entry."""
    out = {}
    for e in obj["metadata"].get("managedFields") or []:
        out[(e["manager"], e["operation"], e.get("subresource", ""))] = e
    return out


def pod(name: str = "p", **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"run": name}},
        "spec": {"containers": [{"name": "c", "image": "nginx"}], **spec},
    }


def test_create_records_the_creator_with_defaults_but_not_admission(store: Store) -> None:
    obj = store.create("pods", "default", pod(), field_manager="kubectl-create").obj
    (entry,) = obj["metadata"]["managedFields"]
    assert (entry["manager"], entry["operation"], entry["apiVersion"], entry["fieldsType"]) == (
        "kubectl-create", "Update", "v1", "FieldsV1",
    )  # fmt: skip
    assert entry["time"] == "2027-01-15T08:00:00Z" and "subresource" not in entry
    spec = entry["fieldsV1"]["f:spec"]
    # Defaults are the creator's (the real server defaults before the field manager runs) ...
    assert {"f:dnsPolicy", "f:restartPolicy", "f:enableServiceLinks", "f:securityContext"} <= set(spec)
    assert set(spec["f:containers"]['k:{"name":"c"}']) >= {".", "f:imagePullPolicy", "f:resources"}
    # ... what admission plugins add (tolerations, priority) and the status are nobody's.
    assert not {"f:tolerations", "f:priority", "f:preemptionPolicy"} & set(spec)
    assert "f:status" not in entry["fieldsV1"]
    assert entry["fieldsV1"]["f:metadata"] == {"f:labels": {".": {}, "f:run": {}}}
    # Without a field manager (direct store use) nothing is tracked.
    assert "managedFields" not in store.create("pods", "default", pod("q")).metadata


def test_status_writer_gets_an_entry_per_subresource(store: Store) -> None:
    store.create("pods", "default", pod(), field_manager="creator")
    patch = {"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}
    obj = store.patch("pods", "default", "p", patch, subresource="status", field_manager="kubelet").obj
    entry = managers(obj)[("kubelet", "Update", "status")]
    assert entry["subresource"] == "status"
    assert entry["fieldsV1"] == {"f:status": {
        "f:conditions": {".": {}, 'k:{"type":"Ready"}': {
            ".": {}, "f:lastProbeTime": {}, "f:lastTransitionTime": {}, "f:status": {}, "f:type": {},
        }},
        "f:phase": {},
    }}  # fmt: skip
    # The order of entries is the real server's: by operation, then time, then manager.
    assert [e["manager"] for e in obj["metadata"]["managedFields"]] == ["creator", "kubelet"]


def test_an_update_takes_changed_fields_from_other_managers(store: Store, clock: Clock) -> None:
    store.create("pods", "default", pod(), field_manager="creator")
    clock.now += 10
    obj = store.patch("pods", "default", "p", {"metadata": {"labels": {"run": "x"}}}, "merge",
                      field_manager="labeller").obj  # fmt: skip
    m = managers(obj)
    assert m[("labeller", "Update", "")]["fieldsV1"] == {"f:metadata": {"f:labels": {"f:run": {}}}}
    assert m[("labeller", "Update", "")]["time"] == "2027-01-15T08:00:10Z"
    creator = m[("creator", "Update", "")]["fieldsV1"]
    assert creator["f:metadata"] == {"f:labels": {}}  # the map stays the creator's, the label moved
    assert creator.get("f:spec")


def test_removed_fields_leave_every_set(store: Store) -> None:
    store.create("pods", "default", pod(), field_manager="creator")
    obj = store.patch("pods", "default", "p", {"metadata": {"labels": None}}, "merge", field_manager="x").obj
    m = managers(obj)
    assert "f:metadata" not in m[("creator", "Update", "")]["fieldsV1"]
    assert ("x", "Update", "") not in m  # removing something gives nothing to own


def test_unchanged_write_keeps_time_and_object(store: Store, clock: Clock) -> None:
    first = store.create("pods", "default", pod(), field_manager="creator")
    clock.now += 60
    again = store.patch(
        "pods", "default", "p", {"metadata": {"labels": {"run": "p"}}}, "merge", field_manager="creator"
    )
    assert again is first  # nothing changed: no new version


def test_managed_fields_reset_by_a_write_and_untracked_until_applied(store: Store) -> None:
    store.create("pods", "default", pod(), field_manager="creator")
    obj = store.patch("pods", "default", "p", [{"op": "replace", "path": "/metadata/managedFields", "value": [{}]}],
                      "json", field_manager="resetter").obj  # fmt: skip
    assert "managedFields" not in obj["metadata"]
    obj = store.patch(
        "pods", "default", "p", {"metadata": {"labels": {"x": "y"}}}, "merge", field_manager="later"
    ).obj
    assert "managedFields" not in obj["metadata"]  # an object without managed fields stays untracked
    # The first apply then sees every existing field as owned by "before-first-apply".
    config = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"run": "other"}},
              "spec": {"containers": [{"name": "c", "image": "nginx:2"}]}}  # fmt: skip
    with pytest.raises(ConflictError) as info:
        store.apply("pods", "default", "p", json.dumps(config), field_manager="ssa")
    assert info.value.message == (
        'Apply failed with 2 conflicts: conflicts with "before-first-apply" using v1:\n'
        '- .metadata.labels.run\n- .spec.containers[name="c"].image'
    )
    stored, _ = store.apply("pods", "default", "p", json.dumps(config), field_manager="ssa", force=True)
    assert set(managers(stored.obj)) == {("ssa", "Apply", ""), ("before-first-apply", "Update", "")}


def test_a_put_may_replace_managed_fields(store: Store) -> None:
    created = store.create("pods", "default", pod(), field_manager="creator").obj
    body = json.loads(json.dumps(created))
    entry = body["metadata"]["managedFields"][0]
    body["metadata"]["managedFields"] = [dict(entry, manager="renamed")]
    obj = store.update("pods", "default", "p", body, field_manager="putter").obj
    assert [e["manager"] for e in obj["metadata"]["managedFields"]] == ["renamed"]
    # On the status subresource the request's managedFields are ignored.
    body = json.loads(json.dumps(obj))
    body["metadata"]["managedFields"] = []
    obj = store.update("pods", "default", "p", body, subresource="status", field_manager="s").obj
    assert [e["manager"] for e in obj["metadata"]["managedFields"]] == ["renamed"]


def test_at_most_ten_update_managers(store: Store, clock: Clock) -> None:
    store.create("pods", "default", pod(), field_manager="m0")
    for i in range(1, 13):
        clock.now += 1
        store.patch(
            "pods", "default", "p", {"metadata": {"labels": {f"l{i}": "v"}}}, "merge", field_manager=f"m{i}"
        )
    obj = store.get("pods", "default", "p").obj
    names = [e["manager"] for e in obj["metadata"]["managedFields"]]
    assert len(names) == 10 and "ancient-changes" in names and "m12" in names
    assert "m0" not in names and "m1" not in names and "m2" not in names  # the oldest merged


def test_apply_creates_then_owns_exactly_its_configuration(store: Store) -> None:
    stored, created = store.apply("pods", "default", "p", CONFIG, field_manager="ssa")
    assert created and stored.pod is not None
    (entry,) = stored.obj["metadata"]["managedFields"]
    assert (entry["manager"], entry["operation"]) == ("ssa", "Apply")
    assert entry["fieldsV1"] == {
        "f:metadata": {"f:labels": {"f:app": {}}},
        "f:spec": {"f:containers": {'k:{"name":"a"}': {".": {}, "f:image": {}, "f:name": {}}}},
    }
    # Defaults are applied, but owned by nobody.
    assert stored.obj["spec"]["containers"][0]["imagePullPolicy"] == "IfNotPresent"
    again, created = store.apply("pods", "default", "p", CONFIG, field_manager="ssa")
    assert not created and again is stored  # the same configuration changes nothing


def test_apply_json_body_too(store: Store) -> None:
    body = json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                       "spec": {"containers": [{"name": "a", "image": "x"}]}})  # fmt: skip
    stored, created = store.apply("pods", "default", "p", body.encode(), field_manager="j")
    assert created and stored.obj["spec"]["containers"][0]["image"] == "x"


def test_apply_conflicts_with_other_owners_unless_forced(store: Store) -> None:
    store.create("pods", "default", {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "a", "image": "old"}]}},
                 field_manager="kubectl-client-side-apply")  # fmt: skip
    with pytest.raises(ConflictError) as info:
        store.apply("pods", "default", "p", CONFIG, field_manager="ssa")
    err = info.value
    assert err.code == 409 and err.reason == "Conflict"
    assert err.message == (
        'Apply failed with 1 conflict: conflict with "kubectl-client-side-apply" using v1: '
        '.spec.containers[name="a"].image'
    )
    assert err.status is not None and err.status["details"]["causes"] == [{
        "reason": "FieldManagerConflict",
        "message": 'conflict with "kubectl-client-side-apply" using v1',
        "field": '.spec.containers[name="a"].image',
    }]  # fmt: skip
    stored, _ = store.apply("pods", "default", "p", CONFIG, field_manager="ssa", force=True)
    m = managers(stored.obj)
    assert stored.obj["spec"]["containers"][0]["image"] == "nginx:1"
    assert "f:image" in m[("ssa", "Apply", "")]["fieldsV1"]["f:spec"]["f:containers"]['k:{"name":"a"}']
    old = m[("kubectl-client-side-apply", "Update", "")]["fieldsV1"]["f:spec"]["f:containers"][
        'k:{"name":"a"}'
    ]
    assert "f:image" not in old


def test_same_value_is_shared_not_a_conflict(store: Store) -> None:
    store.apply("pods", "default", "p", CONFIG, field_manager="one")
    stored, _ = store.apply("pods", "default", "p", CONFIG, field_manager="two")
    m = managers(stored.obj)
    assert m[("one", "Apply", "")]["fieldsV1"] == m[("two", "Apply", "")]["fieldsV1"]
    # When one stops applying a shared field, the other keeps it alive.
    stored, _ = store.apply(
        "pods", "default", "p", CONFIG.replace("  labels: {app: web}\n", ""), field_manager="one"
    )
    assert stored.obj["metadata"]["labels"] == {"app": "web"}


def test_multiple_conflicts_are_grouped_by_manager(store: Store) -> None:
    store.apply("pods", "default", "p", CONFIG, field_manager="one")
    changed = CONFIG.replace("app: web", "app: db").replace("nginx:1", "nginx:2")
    with pytest.raises(ConflictError) as info:
        store.apply("pods", "default", "p", changed, field_manager="two")
    assert info.value.message == (
        'Apply failed with 2 conflicts: conflicts with "one":\n'
        '- .metadata.labels.app\n- .spec.containers[name="a"].image'
    )


def test_fields_no_longer_applied_are_removed(store: Store) -> None:
    more = CONFIG.replace(
        "labels: {app: web}", "labels: {app: web, tier: x}\n  finalizers: [example.com/a, example.com/b]"
    )
    store.apply("pods", "default", "p", more, field_manager="ssa")
    stored, _ = store.apply("pods", "default", "p", CONFIG.replace("name: p", "name: p\n  finalizers: [example.com/b]"),
                            field_manager="ssa")  # fmt: skip
    assert stored.obj["metadata"]["labels"] == {"app": "web"}
    assert stored.obj["metadata"]["finalizers"] == ["example.com/b"]
    assert managers(stored.obj)[("ssa", "Apply", "")]["fieldsV1"]["f:metadata"] == {
        "f:finalizers": {'v:"example.com/b"': {}}, "f:labels": {"f:app": {}},
    }  # fmt: skip


def test_fields_another_manager_set_survive_the_appliers_removal(store: Store) -> None:
    store.apply("pods", "default", "p", CONFIG.replace("labels: {app: web}", "labels: {app: web, tier: x}"),
                field_manager="ssa")  # fmt: skip
    store.patch(
        "pods", "default", "p", {"metadata": {"labels": {"tier": "y"}}}, "merge", field_manager="editor"
    )
    stored, _ = store.apply("pods", "default", "p", CONFIG, field_manager="ssa")
    assert stored.obj["metadata"]["labels"] == {"app": "web", "tier": "y"}


def test_apply_to_status_owns_status_only(store: Store) -> None:
    store.apply("pods", "default", "p", CONFIG, field_manager="ssa")
    status = """
apiVersion: v1
kind: Pod
metadata: {name: p}
spec: {containers: [{name: a, image: ignored}]}
status:
  conditions: [{type: example.com/ready, status: "True"}]
"""
    stored, _ = store.apply("pods", "default", "p", status, field_manager="gate", subresource="status")
    entry = managers(stored.obj)[("gate", "Apply", "status")]
    assert entry["fieldsV1"] == {"f:status": {"f:conditions": {'k:{"type":"example.com/ready"}': {
        ".": {}, "f:status": {}, "f:type": {},
    }}}}  # fmt: skip
    assert stored.obj["spec"]["containers"][0]["image"] == "nginx:1"  # the status strategy keeps the spec


def test_apply_dry_run_stores_nothing(store: Store) -> None:
    store.apply("pods", "default", "p", CONFIG, field_manager="ssa")
    before = store.get("pods", "default", "p")
    dry, _ = store.apply("pods", "default", "p", CONFIG.replace("nginx:1", "nginx:2"), field_manager="ssa",
                         options=WriteOptions(dry_run=True))  # fmt: skip
    assert dry.obj["spec"]["containers"][0]["image"] == "nginx:2"
    assert store.get("pods", "default", "p") is before and store.resource_version == before.rv
    created, was_created = store.apply("pods", "default", "new", CONFIG.replace("name: p", "name: new"),
                                       field_manager="ssa", options=WriteOptions(dry_run=True))  # fmt: skip
    assert was_created and "resourceVersion" not in created.metadata and created.metadata["uid"]
    with pytest.raises(NotFoundError):
        store.get("pods", "default", "new")


def test_apply_requests_are_checked(store: Store) -> None:
    with pytest.raises(UnprocessableEntityError) as info:
        store.apply("pods", "default", "p", CONFIG, field_manager=None)
    assert info.value.message == (
        'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required for apply patch'
    )
    with pytest.raises(BadRequestError, match=r"invalid object type: /v1, Kind=Node"):
        store.apply("pods", "default", "p", "apiVersion: v1\nkind: Node\n", field_manager="x")
    with pytest.raises(BadRequestError, match=r"metadata\.managedFields must be nil"):
        store.apply("pods", "default", "p", CONFIG.replace("metadata:", "metadata:\n  managedFields: []"),
                    field_manager="x")  # fmt: skip
    with pytest.raises(
        BadRequestError, match=r"the name of the object \(p\) does not match the name on the URL \(q\)"
    ):
        store.apply("pods", "default", "q", CONFIG, field_manager="x")
    with pytest.raises(BadRequestError, match="error encoding patch: yaml: line 1"):
        store.apply("pods", "default", "p", "[1, 2", field_manager="x")
    with pytest.raises(NotFoundError, match='namespaces "nowhere" not found'):
        store.apply("pods", "nowhere", "p", CONFIG, field_manager="x")
    with pytest.raises(NotFoundError, match='pods "p" not found'):
        store.apply("pods", "default", "p", CONFIG, field_manager="x", subresource="status")


def test_kubectl_moves_from_client_side_apply_without_conflicts(store: Store) -> None:
    # kubectl apply (client-side) records the configuration in an annotation ...
    last = json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
                       "spec": {"containers": [{"name": "a", "image": "nginx:0"}]}})  # fmt: skip
    body = {"metadata": {"name": "p", "annotations": {A.LAST_APPLIED: last}},
            "spec": {"containers": [{"name": "a", "image": "nginx:0"}]}}  # fmt: skip
    store.create("pods", "default", body, field_manager="kubectl-client-side-apply")
    # ... so "kubectl apply --server-side" (manager "kubectl") may take over what it names.
    stored, _ = store.apply("pods", "default", "p", CONFIG, field_manager="kubectl")
    assert stored.obj["spec"]["containers"][0]["image"] == "nginx:1"
    annotation = json.loads(stored.obj["metadata"]["annotations"][A.LAST_APPLIED])
    assert annotation["spec"]["containers"][0]["image"] == "nginx:1"  # and the annotation follows
    # Another manager gets the conflict.
    with pytest.raises(ConflictError):
        store.apply("pods", "default", "p", CONFIG.replace("nginx:1", "nginx:2"), field_manager="other")


def test_nodes_are_tracked_and_applied_too(store: Store) -> None:
    node = "apiVersion: v1\nkind: Node\nmetadata: {name: n1, labels: {zone: a}}\nspec: {podCIDRs: [10.0.0.0/24]}\n"
    stored, created = store.apply("nodes", None, "n1", node, field_manager="ssa")
    assert created
    assert managers(stored.obj)[("ssa", "Apply", "")]["fieldsV1"] == {
        "f:metadata": {"f:labels": {"f:zone": {}}},
        "f:spec": {"f:podCIDRs": {'v:"10.0.0.0/24"': {}}},
    }
    patch = {"status": {"conditions": [{"type": "Ready", "status": "True"}]}}
    stored = store.patch("nodes", None, "n1", patch, subresource="status", field_manager="kubelet")
    assert ("kubelet", "Update", "status") in managers(stored.obj)


def test_managed_fields_can_be_turned_off(clock: Clock) -> None:
    store = Store(clock=clock, managed_fields=False)
    obj = store.create("pods", "default", pod(), field_manager="creator").obj
    assert "managedFields" not in obj["metadata"]
    stored, _ = store.apply("pods", "default", "q", CONFIG.replace("name: p", "name: q"), field_manager="ssa")
    assert managers(stored.obj)[("ssa", "Apply", "")]


def test_manager_from_user_agent_and_field_manager_checks() -> None:
    assert O.manager_or_user_agent("mine", "kubectl/v1.37") == "mine"
    assert O.manager_or_user_agent(None, "kubectl/v1.37.2 (linux/amd64) kubernetes/abc") == "kubectl"
    assert O.manager_or_user_agent("", "podstatus/0.1") == "podstatus"
    assert O.manager_or_user_agent(None, "a\x07b/1") == "ab"  # unprintable characters dropped
    assert O.manager_or_user_agent(None, "x" * 200) == "x" * 128
    O.validate_field_manager("POST", "m" * 128, apply=False, force=None)
    with pytest.raises(UnprocessableEntityError) as info:
        O.validate_field_manager("POST", "m" * 129, apply=False, force=None)
    assert info.value.message == (
        'CreateOptions.meta.k8s.io "" is invalid: fieldManager: Too long: may not be more than 128 bytes'
    )
    with pytest.raises(
        UnprocessableEntityError, match="force: Forbidden: may not be specified for non-apply patch"
    ):
        O.validate_field_manager("PATCH", None, apply=False, force="true")


def test_leases_apply_in_their_group_and_converted_events_refuse(store: Store) -> None:
    lease = (
        "apiVersion: coordination.k8s.io/v1\nkind: Lease\nmetadata: {name: n1, namespace: kube-node-lease}\n"
        "spec: {holderIdentity: n1, leaseDurationSeconds: 40}\n"
    )
    stored, created = store.apply(
        "leases.coordination.k8s.io", "kube-node-lease", "n1", lease, field_manager="kubelet"
    )
    (entry,) = stored.obj["metadata"]["managedFields"]
    assert created and entry["apiVersion"] == "coordination.k8s.io/v1" and entry["operation"] == "Apply"
    # A core/v1 configuration is the wrong type for a Lease.
    with pytest.raises(BadRequestError, match=r"invalid object type: /v1, Kind=Lease"):
        store.apply("leases.coordination.k8s.io", "kube-node-lease", "n1", lease.replace("coordination.k8s.io/", ""),
                    field_manager="kubelet")  # fmt: skip
    # events.k8s.io Events are stored as core Events: apply there is refused (415), not half done.
    with pytest.raises(ApiError) as info:
        store.apply("events.events.k8s.io", "default", "e", "apiVersion: events.k8s.io/v1\nkind: Event\n",
                    field_manager="x")  # fmt: skip
    assert info.value.code == 415


def test_undeclared_fields_are_a_500_whatever_the_validation(store: Store) -> None:
    config = json.loads(json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "bogus": 1},
                                    "spec": {"containers": [{"name": "c", "image": "i", "nope": True}]}}))  # fmt: skip
    for validation in ("Strict", "Warn", "Ignore"):
        with pytest.raises(ApiError) as info:
            store.apply("pods", "default", "p", json.dumps(config), field_manager="x",
                        options=WriteOptions(field_validation=validation))  # fmt: skip
        assert info.value.code == 500 and info.value.status is not None and "reason" not in info.value.status
        assert info.value.message == (
            "failed to create typed patch object (/p; /v1, Kind=Pod): errors:\n"
            "  .metadata.bogus: field not declared in schema\n"
            '  .spec.containers[name="c"].nope: field not declared in schema'
        )
