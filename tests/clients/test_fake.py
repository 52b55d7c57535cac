"""The fake kube client itself: storage, patching, preconditions, fault injection, recording."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime
from typing import Any

import pytest

from podstatus.clients.fake import FakeKubeClient, FakeNodeClient
from podstatus.errors import (
    BadRequestError,
    ConflictError,
    NotFoundError,
    ServiceUnavailableError,
    UnprocessableEntityError,
)
from podstatus.patch import diff_pod_status, encode_patch
from podstatus.protocols import KubeClient, NodeClient, VersionedKubeClient
from podstatus.requestcount import VERBS, RequestCounter
from podstatus.types import ObjectMeta, Pod, PodSpec, PodStatus

NOW = datetime(2024, 5, 1, 12, 0, 0, tzinfo=UTC)


def make_pod(name: str = "p", uid: str = "uid-1", namespace: str = "ns", **status: Any) -> Pod:
    return Pod(
        metadata=ObjectMeta(name=name, namespace=namespace, uid=uid),
        spec=PodSpec(node_name="node"),
        status=PodStatus.from_dict(status) if status else PodStatus(),
    )


def client(*pods: Pod) -> FakeKubeClient:
    return FakeKubeClient(pods, clock=lambda: NOW)


def status_patch(uid: str, status: dict[str, Any], **meta: str) -> bytes:
    return encode_patch({"metadata": {"uid": uid, **meta}, "status": status})


# --- protocol and storage -----------------------------------------------------------


def test_implements_protocols() -> None:
    c = client()
    assert isinstance(c, KubeClient)
    assert isinstance(c, VersionedKubeClient)


def test_add_get_put_remove() -> None:
    c = client()
    added = c.add_pod(make_pod())
    assert added.uid == "uid-1"
    assert added.metadata.resource_version == "1"
    assert added.metadata.creation_timestamp == NOW
    assert c.get_pod("ns", "p") == added
    assert c.pod("ns", "p") == added
    assert c.pod("ns", "other") is None

    with pytest.raises(ConflictError) as err:
        c.add_pod(make_pod(uid="uid-2"))
    assert err.value.reason == "AlreadyExists"

    replaced = c.put_pod(make_pod(uid="uid-2", phase="Running"))
    assert replaced.uid == "uid-2"
    assert replaced.status.phase == "Running"
    assert replaced.metadata.resource_version == "2"
    assert c.resource_version == "2"

    assert c.remove("ns", "p") is True
    assert c.remove("ns", "p") is False
    assert c.pod("ns", "p") is None
    # Setting up is not a request.
    assert c.requests == [("get", "ns", "p")]


def test_add_generates_uid_and_accepts_dicts() -> None:
    c = client()
    pod = c.add_pod({"metadata": {"name": "d", "namespace": "ns"}, "status": {"phase": "Pending"}})
    assert pod.uid
    assert pod.status.phase == "Pending"
    other = c.add_pod({"metadata": {"name": "e", "namespace": "ns"}})
    assert other.uid != pod.uid


def test_put_keeps_stored_uid_when_pod_has_none() -> None:
    c = client(make_pod(uid="keep"))
    pod = c.put_pod(Pod(metadata=ObjectMeta(name="p", namespace="ns")))
    assert pod.uid == "keep"


def test_unknown_fields_are_kept() -> None:
    c = client()
    c.add_pod({"metadata": {"name": "x", "namespace": "ns", "uid": "u"}, "status": {"futureField": {"a": 1}}})
    assert c.get_pod("ns", "x").to_dict()["status"]["futureField"] == {"a": 1}


def test_get_missing_raises_not_found() -> None:
    c = client()
    with pytest.raises(NotFoundError, match='pods "p" not found'):
        c.get_pod("ns", "p")
    assert c.verbs() == ["get"]


def test_list_pods() -> None:
    c = client(make_pod("a", "1"), make_pod("b", "2", namespace="other"))
    assert sorted(p.name for p in c.list_pods()) == ["a", "b"]
    assert [p.name for p in c.list_pods("other")] == ["b"]
    assert c.requests == [("list", ""), ("list", "other")]
    assert sorted(p.name for p in c.pods()) == ["a", "b"]


def test_returned_pods_are_independent_of_the_store() -> None:
    c = client(make_pod())
    d = c.get_pod("ns", "p").to_dict()
    d["status"]["phase"] = "Failed"
    assert c.get_pod("ns", "p").status.phase is None


# --- patch --------------------------------------------------------------------------


def test_patch_applies_strategic_merge_to_status() -> None:
    old: dict[str, Any] = {
        "phase": "Pending",
        "conditions": [
            {"type": "PodScheduled", "status": "True", "lastProbeTime": None, "lastTransitionTime": None},
            {"type": "my/gate", "status": "True", "lastProbeTime": None, "lastTransitionTime": None},
        ],
    }
    c = client(make_pod(**old))
    new = {
        "phase": "Running",
        "conditions": [
            {"type": "PodScheduled", "status": "True", "lastProbeTime": None, "lastTransitionTime": None},
            {
                "type": "Ready",
                "status": "False",
                "reason": "ContainersNotReady",
                "lastProbeTime": None,
                "lastTransitionTime": None,
            },
        ],
    }
    stored = c.get_pod("ns", "p").to_dict()["status"]
    patch = diff_pod_status(stored, new, "uid-1")
    result = c.patch_pod_status("ns", "p", encode_patch(patch))
    assert result.to_dict()["status"] == new
    assert c.get_pod("ns", "p") == result
    assert result.metadata.resource_version == "2"
    assert c.requests[1] == ("patch", "ns", "p", patch)
    assert c.patches() == [patch]


def test_patch_ignores_everything_but_status() -> None:
    c = client(make_pod())
    body = {
        "metadata": {"uid": "uid-1", "labels": {"x": "y"}},
        "spec": {"nodeName": "elsewhere"},
        "status": {"phase": "Running"},
    }
    pod = c.patch_pod_status("ns", "p", json.dumps(body).encode())
    assert pod.status.phase == "Running"
    assert pod.metadata.labels is None
    assert pod.spec.node_name == "node"


def test_patch_accepts_str_and_dict_and_records_a_copy() -> None:
    c = client(make_pod())
    body: dict[str, Any] = {"metadata": {"uid": "uid-1"}, "status": {"phase": "Running"}}
    c.patch_pod_status("ns", "p", body)
    body["status"]["phase"] = "changed after the call"
    assert c.patches()[0]["status"]["phase"] == "Running"
    c.patch_pod_status("ns", "p", '{"status": {"message": "hi"}}')
    assert c.get_pod("ns", "p").status.message == "hi"


def test_patch_that_changes_nothing_keeps_resource_version() -> None:
    c = client(make_pod(phase="Running"))
    pod = c.patch_pod_status("ns", "p", status_patch("uid-1", {"phase": "Running"}))
    assert pod.metadata.resource_version == "1"
    pod = c.patch_pod_status("ns", "p", encode_patch({"metadata": {"uid": "uid-1"}}))
    assert pod.metadata.resource_version == "1"
    assert c.verbs() == ["patch", "patch"]


def test_patch_missing_pod() -> None:
    c = client()
    with pytest.raises(NotFoundError):
        c.patch_pod_status("ns", "p", status_patch("uid-1", {"phase": "Running"}))


def test_patch_uid_precondition() -> None:
    c = client(make_pod(uid="new-uid", phase="Pending"))
    with pytest.raises(ConflictError, match="UID in precondition: old-uid, UID in object meta: new-uid"):
        c.patch_pod_status("ns", "p", status_patch("old-uid", {"phase": "Running"}))
    assert c.get_pod("ns", "p").status.phase == "Pending"


def test_patch_resource_version_precondition_in_body() -> None:
    c = client(make_pod())
    with pytest.raises(ConflictError, match="the object has been modified"):
        c.patch_pod_status("ns", "p", status_patch("uid-1", {"phase": "Running"}, resourceVersion="0"))
    pod = c.patch_pod_status("ns", "p", status_patch("uid-1", {"phase": "Running"}, resourceVersion="1"))
    assert pod.status.phase == "Running"


def test_patch_resource_version_keyword() -> None:
    c = client(make_pod())
    pod = c.patch_pod_status("ns", "p", status_patch("uid-1", {"phase": "Running"}), resource_version="1")
    assert pod.metadata.resource_version == "2"
    # The precondition is sent in the patch, and recorded so.
    assert c.patches()[0]["metadata"] == {"uid": "uid-1", "resourceVersion": "1"}
    with pytest.raises(ConflictError):
        c.patch_pod_status("ns", "p", status_patch("uid-1", {"message": "m"}), resource_version="1")
    assert c.get_pod("ns", "p").status.message is None


def test_patch_bad_bodies() -> None:
    c = client(make_pod())
    with pytest.raises(BadRequestError):
        c.patch_pod_status("ns", "p", b"{not json")
    with pytest.raises(BadRequestError):
        c.patch_pod_status("ns", "p", b"[]")
    with pytest.raises(BadRequestError):
        c.patch_pod_status("ns", "p", encode_patch({"status": {"$patch": "bogus"}}))
    assert c.requests[0] == ("patch", "ns", "p", b"{not json")
    assert c.verbs() == ["patch"] * 3


def test_patch_producing_an_invalid_pod_is_rejected() -> None:
    c = client(make_pod())
    with pytest.raises(UnprocessableEntityError, match="status"):
        c.patch_pod_status("ns", "p", encode_patch({"status": {"phase": 3}}))
    assert c.get_pod("ns", "p").status.phase is None


@pytest.mark.parametrize(
    ("old", "new", "allowed"),
    [
        ("Succeeded", "Running", False),
        ("Failed", "Pending", False),
        ("Failed", None, False),
        ("Running", "Failed", True),
        ("Pending", "Running", True),
    ],
)
def test_patch_refuses_leaving_a_terminal_phase(old: str, new: str | None, allowed: bool) -> None:
    c = client(make_pod(phase=old))
    patch = encode_patch({"status": {"phase": new}})
    if allowed:
        assert c.patch_pod_status("ns", "p", patch).status.phase == new
    else:
        with pytest.raises(UnprocessableEntityError, match="terminal phase"):
            c.patch_pod_status("ns", "p", patch)
        assert c.get_pod("ns", "p").status.phase == old


# --- delete -------------------------------------------------------------------------


def test_delete_grace_zero_removes() -> None:
    c = client(make_pod())
    c.delete_pod("ns", "p", grace_period_seconds=0, uid="uid-1")
    assert c.pod("ns", "p") is None
    assert c.requests == [("delete", "ns", "p", 0, "uid-1")]
    with pytest.raises(NotFoundError):
        c.delete_pod("ns", "p", grace_period_seconds=0, uid="uid-1")


def test_delete_uid_precondition() -> None:
    c = client(make_pod(uid="new"))
    with pytest.raises(ConflictError, match="UID in precondition: old, UID in object meta: new"):
        c.delete_pod("ns", "p", grace_period_seconds=0, uid="old")
    assert c.pod("ns", "p") is not None
    c.delete_pod("ns", "p", grace_period_seconds=0, uid=None)
    assert c.pod("ns", "p") is None


def test_delete_with_grace_sets_deletion_timestamp() -> None:
    c = client(make_pod())
    c.delete_pod("ns", "p", grace_period_seconds=30, uid="uid-1")
    pod = c.get_pod("ns", "p")
    assert pod.metadata.deletion_timestamp == datetime(2024, 5, 1, 12, 0, 30, tzinfo=UTC)
    assert pod.metadata.deletion_grace_period_seconds == 30
    assert pod.metadata.resource_version == "2"
    # A longer grace period does not extend it; a shorter one shortens it.
    c.delete_pod("ns", "p", grace_period_seconds=60, uid="uid-1")
    assert c.get_pod("ns", "p").metadata.deletion_grace_period_seconds == 30
    c.delete_pod("ns", "p", grace_period_seconds=10, uid="uid-1")
    assert c.get_pod("ns", "p").metadata.deletion_grace_period_seconds == 10
    c.delete_pod("ns", "p", grace_period_seconds=0, uid="uid-1")
    assert c.pod("ns", "p") is None


def test_delete_default_grace_from_spec() -> None:
    pod = make_pod().replace(spec=PodSpec(termination_grace_period_seconds=5))
    c = client(pod)
    c.delete_pod("ns", "p", grace_period_seconds=None, uid=None)
    assert c.get_pod("ns", "p").metadata.deletion_grace_period_seconds == 5


def test_delete_with_finalizers_only_marks() -> None:
    pod = make_pod().replace(metadata=ObjectMeta(name="p", namespace="ns", uid="u", finalizers=("f",)))
    c = client(pod)
    c.delete_pod("ns", "p", grace_period_seconds=0, uid="u")
    stored = c.get_pod("ns", "p")
    assert stored.metadata.deletion_timestamp == NOW
    assert stored.metadata.deletion_grace_period_seconds == 0


# --- recording, counting, fault injection ------------------------------------------------


def test_recording_and_verbs() -> None:
    c = client(make_pod())
    c.get_pod("ns", "p")
    c.patch_pod_status("ns", "p", status_patch("uid-1", {"phase": "Running"}))
    c.delete_pod("ns", "p", grace_period_seconds=0, uid="uid-1")
    assert c.verbs() == ["get", "patch", "delete"]
    assert c.requests[0] == ("get", "ns", "p")
    assert c.requests[2] == ("delete", "ns", "p", 0, "uid-1")
    assert c.counter.snapshot() == {**dict.fromkeys(VERBS, 0), "get": 1, "patch": 1, "delete": 1}
    c.clear_requests()
    assert c.requests == []
    assert c.counter.total() == 3


def test_shared_counter() -> None:
    counter = RequestCounter()
    c = FakeKubeClient([make_pod()], counter=counter)
    c.get_pod("ns", "p")
    assert counter.get("get") == 1


def test_fail_next() -> None:
    c = client(make_pod())
    boom = ServiceUnavailableError("try later")
    c.fail_next("get", boom, times=2)
    for _ in range(2):
        with pytest.raises(ServiceUnavailableError):
            c.get_pod("ns", "p")
    assert c.get_pod("ns", "p").name == "p"
    # Failed requests were sent, so they are recorded and counted.
    assert c.verbs() == ["get", "get", "get"]
    assert c.counter.get("get") == 3


def test_fail_next_only_that_verb_and_in_order() -> None:
    c = client(make_pod())
    c.fail_next("patch", ConflictError("first"))
    c.fail_next("patch", NotFoundError("second"))
    c.get_pod("ns", "p")
    with pytest.raises(ConflictError, match="first"):
        c.patch_pod_status("ns", "p", status_patch("uid-1", {"phase": "Running"}))
    with pytest.raises(NotFoundError, match="second"):
        c.patch_pod_status("ns", "p", status_patch("uid-1", {"phase": "Running"}))
    assert c.get_pod("ns", "p").status.phase is None  # nothing was applied
    assert (
        c.patch_pod_status("ns", "p", status_patch("uid-1", {"phase": "Running"})).status.phase == "Running"
    )


def test_fail_next_rejects_zero_times() -> None:
    with pytest.raises(ValueError):
        client().fail_next("get", ConflictError("x"), times=0)


def test_clear_failures() -> None:
    c = client(make_pod())
    c.fail_next("get", ConflictError("x"))
    c.clear_failures()
    c.get_pod("ns", "p")


def test_before_request_recreate_between_get_and_patch() -> None:
    c = client(make_pod(uid="old"))

    def recreate(verb: str, namespace: str, name: str) -> None:
        if verb == "patch":
            c.remove(namespace, name)
            c.add_pod(make_pod(uid="new"))

    c.before_request(recreate)
    fetched = c.get_pod("ns", "p")
    with pytest.raises(ConflictError):
        c.patch_pod_status("ns", "p", status_patch(fetched.uid, {"phase": "Running"}))
    assert c.get_pod("ns", "p").uid == "new"
    assert c.get_pod("ns", "p").status.phase is None


def test_hook_sees_verb_namespace_name_and_can_fail_requests() -> None:
    c = client(make_pod())
    seen: list[tuple[str, str, str]] = []

    def hook(verb: str, namespace: str, name: str) -> None:
        seen.append((verb, namespace, name))
        if verb == "delete":
            raise ServiceUnavailableError("no")

    c.before_request(hook)
    c.get_pod("ns", "p")
    c.list_pods()
    with pytest.raises(ServiceUnavailableError):
        c.delete_pod("ns", "p", grace_period_seconds=0, uid="uid-1")
    assert seen == [("get", "ns", "p"), ("list", "", ""), ("delete", "ns", "p")]
    assert c.pod("ns", "p") is not None
    c.clear_hooks()
    c.delete_pod("ns", "p", grace_period_seconds=0, uid="uid-1")
    assert len(seen) == 3


def test_hook_requests_do_not_reenter_hooks() -> None:
    c = client(make_pod())
    calls: list[str] = []

    def hook(verb: str, namespace: str, name: str) -> None:
        calls.append(verb)
        c.get_pod(namespace, name)

    c.before_request(hook)
    c.get_pod("ns", "p")
    assert calls == ["get"]
    assert c.verbs() == ["get", "get"]


def test_concurrent_patches_all_apply() -> None:
    c = client(*(make_pod(f"p{i}", f"u{i}") for i in range(4)))

    def worker(i: int) -> None:
        for n in range(50):
            c.patch_pod_status("ns", f"p{i}", status_patch(f"u{i}", {"message": str(n)}))

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert c.counter.get("patch") == 200
    assert len(c.requests) == 200
    assert c.resource_version == str(4 + 200)
    assert all(p.status.message == "49" for p in c.pods())


# --- RequestCounter -----------------------------------------------------------------


def test_request_counter() -> None:
    seen: list[str] = []
    counter = RequestCounter(seen.append)
    assert counter.snapshot() == dict.fromkeys(VERBS, 0)
    counter.inc("get")
    counter.inc("patch", 2)
    counter.inc("custom")
    assert counter.get("patch") == 2
    assert counter.get("nothing") == 0
    assert counter.total() == 4
    assert counter.snapshot()["custom"] == 1
    assert seen == ["get", "patch", "patch", "custom"]
    snap = counter.snapshot()
    snap["get"] = 100
    assert counter.get("get") == 1
    counter.reset()
    assert counter.total() == 0


def test_request_counter_callbacks_never_fail_requests(caplog: pytest.LogCaptureFixture) -> None:
    counter = RequestCounter()
    later: list[str] = []

    def broken(verb: str) -> None:
        raise RuntimeError("metrics down")

    counter.add_callback(broken)
    counter.add_callback(later.append)
    counter.inc("get")
    assert counter.get("get") == 1
    assert later == ["get"]
    assert "callback failed" in caplog.text


def test_request_counter_threads() -> None:
    counter = RequestCounter()

    def worker() -> None:
        for _ in range(1000):
            counter.inc("get")

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert counter.get("get") == 8000


# --- FakeNodeClient -------------------------------------------------------------------


def node_fake() -> FakeNodeClient:
    fake = FakeNodeClient()
    fake.store.create("nodes", None, {"metadata": {"name": "n1"}})
    return fake


def test_node_fake_implements_the_node_protocol() -> None:
    fake = node_fake()
    assert isinstance(fake, NodeClient)
    assert isinstance(fake, VersionedKubeClient)


def test_node_fake_records_each_request_with_its_resource_and_body() -> None:
    fake = node_fake()
    lease = fake.create_lease(
        "kube-node-lease", {"metadata": {"name": "n1"}, "spec": {"holderIdentity": "n1"}}
    )
    fake.update_lease("kube-node-lease", "n1", lease)
    fake.patch_node_status("n1", b'{"status": {"conditions": [{"type": "Ready", "status": "True"}]}}')
    fake.patch_node("n1", b'{"spec": {"unschedulable": true}}')
    fake.create_event(
        "default",
        {
            "metadata": {"name": "n1.1"},
            "involvedObject": {"kind": "Node", "name": "n1"},
            "reason": "Starting",
        },
    )
    fake.patch_event("default", "n1.1", b'{"count": 2}')
    fake.get_node("n1")
    assert fake.calls() == [
        ("create", "leases"),
        ("update", "leases"),
        ("patch", "nodes/status"),
        ("patch", "nodes"),
        ("create", "events"),
        ("patch", "events"),
        ("get", "nodes"),
    ]
    assert fake.bodies("patch", "events") == [{"count": 2}]
    assert fake.requests[0][2:4] == ("kube-node-lease", "n1")
    assert fake.counter.snapshot()["patch"] == 3
    # Served for real: the store has what was written.
    assert fake.store.get("nodes", None, "n1").obj["spec"]["unschedulable"] is True
    assert fake.store.get("events", "default", "n1.1").obj["count"] == 2


def test_node_fake_serves_with_the_servers_rules() -> None:
    fake = node_fake()
    lease = fake.create_lease("kube-node-lease", {"metadata": {"name": "n1"}, "spec": {}})
    fake.update_lease("kube-node-lease", "n1", {**lease, "spec": {"holderIdentity": "n1"}})
    with pytest.raises(ConflictError):
        fake.update_lease("kube-node-lease", "n1", {**lease, "spec": {"holderIdentity": "other"}})
    with pytest.raises(UnprocessableEntityError):
        fake.patch_node("n1", b'{"spec": {"taints": [{"key": "k", "effect": "Never"}]}}')
    with pytest.raises(NotFoundError):
        fake.get_lease("kube-node-lease", "missing")
    # Failed requests are recorded too.
    assert fake.calls()[-2:] == [("patch", "nodes"), ("get", "leases")]


def test_node_fake_pods_watch_and_lists() -> None:
    fake = node_fake()
    created = fake.create_pod(
        {"metadata": {"name": "p"}, "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "i"}]}}
    )
    pods, rv = fake.list_pods("default", field_selector="spec.nodeName=n1")
    assert [p.name for p in pods] == ["p"] and rv
    events = fake.watch_pods("default", resource_version="0", timeout_seconds=1)
    kind, pod = next(iter(events))
    assert (kind, pod.uid) == ("ADDED", created.uid)
    patched = fake.patch_pod_status("default", "p", b'{"status": {"phase": "Running"}}', resource_version=rv)
    assert patched.status.phase == "Running"
    fake.delete_pod("default", "p", grace_period_seconds=0, uid=created.uid)
    nodes, _ = fake.list_nodes()
    assert [n["metadata"]["name"] for n in nodes] == ["n1"]
    assert fake.verbs() == ["create", "list", "watch", "patch", "delete", "list"]
    assert fake.bodies("delete", "pods") == [{"gracePeriodSeconds": 0, "uid": created.uid}]


def test_node_fake_fault_injection_and_hooks() -> None:
    fake = node_fake()
    seen: list[tuple[str, str, str]] = []
    fake.before_request(lambda verb, ns, name: seen.append((verb, ns, name)))
    fake.fail_next("update", ServiceUnavailableError("down"))
    lease = fake.create_lease("kube-node-lease", {"metadata": {"name": "n1"}, "spec": {}})
    with pytest.raises(ServiceUnavailableError):
        fake.update_lease("kube-node-lease", "n1", lease)
    # The failure was injected before serving: the lease is unchanged and the next update works.
    fake.update_lease("kube-node-lease", "n1", {**lease, "spec": {"holderIdentity": "n1"}})
    update = ("update", "kube-node-lease", "n1")
    assert seen == [("create", "kube-node-lease", "n1"), update, update]
