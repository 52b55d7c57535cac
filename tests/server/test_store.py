"""The embedded API server's store: semantics of the real registry, without HTTP."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from podstatus.errors import (
    BadRequestError,
    ConflictError,
    GoneError,
    NotFoundError,
    UnprocessableEntityError,
    UnsupportedMediaTypeError,
)
from podstatus.server.registry.pods import bind
from podstatus.server.storage.store import Store


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


def pod(
    name: str = "p", *, node: str | None = "n1", labels: dict[str, str] | None = None, **spec: Any
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "metadata": {"name": name, "labels": labels or {"app": "web"}},
        "spec": {"containers": [{"name": "c", "image": "img:1"}], **spec},
    }
    if node:
        body["spec"]["nodeName"] = node
    return body


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def store(clock: Clock) -> Store:
    store = Store(clock=clock, history_size=50)
    for ns in ("a", "b", "other", "ns"):
        store.ensure_namespace(ns)
    return store


def test_create_sets_metadata_defaults_and_pending_status(store: Store) -> None:
    body = pod()
    body["status"] = {"phase": "Running"}
    s = store.create("pods", "default", body)
    meta = s.obj["metadata"]
    assert meta["namespace"] == "default"
    assert meta["resourceVersion"] == "1" and s.rv == 1
    assert len(meta["uid"]) == 36
    assert meta["creationTimestamp"] == "2023-11-14T22:13:20Z"
    assert s.obj["status"] == {"phase": "Pending", "qosClass": "BestEffort"}
    assert s.obj["spec"]["restartPolicy"] == "Always"
    assert s.obj["spec"]["containers"][0]["imagePullPolicy"] == "IfNotPresent"
    assert s.pod is not None and s.pod.uid == meta["uid"]
    assert msgspec.json.decode(s.raw) == s.obj
    assert body["metadata"].get("uid") is None  # the caller's dict is not touched


def test_generate_name(store: Store) -> None:
    body = pod()
    body["metadata"] = {"generateName": "job-"}
    a = store.create("pods", "default", body)
    b = store.create("pods", "default", body)
    assert a.name.startswith("job-") and len(a.name) == 9
    assert a.name != b.name


def test_already_exists(store: Store) -> None:
    store.create("pods", "default", pod())
    with pytest.raises(ConflictError) as info:
        store.create("pods", "default", pod())
    assert info.value.reason == "AlreadyExists"
    assert info.value.message == 'pods "p" already exists'
    assert info.value.status is not None
    assert info.value.status["details"] == {"name": "p", "kind": "pods"}


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (
            lambda b: b["metadata"].pop("name"),
            "metadata.name: Required value: name or generateName is required",
        ),
        (lambda b: b["spec"].pop("containers"), "spec.containers: Required value"),
        (
            lambda b: b["spec"]["containers"].append({"name": "c", "image": "x"}),
            'spec.containers[1].name: Duplicate value: "c"',
        ),
        (lambda b: b["metadata"].update(name="Bad_Name"), 'metadata.name: Invalid value: "Bad_Name"'),
        (lambda b: b["spec"]["containers"][0].pop("image"), "spec.containers[0].image: Required value"),
    ],
)
def test_create_validation(store: Store, mutate: Any, message: str) -> None:
    body = pod()
    mutate(body)
    with pytest.raises(UnprocessableEntityError) as info:
        store.create("pods", "default", body)
    assert message in info.value.message
    assert info.value.status is not None
    causes = info.value.status["details"]["causes"]
    assert causes and all({"reason", "message", "field"} <= set(c) for c in causes)


def test_create_bad_types_and_json(store: Store) -> None:
    body = pod()
    body["spec"]["containers"][0]["name"] = 5
    with pytest.raises(BadRequestError):
        store.create("pods", "default", body)
    body = pod()
    body["spec"]["terminationGracePeriodSeconds"] = "soon"
    with pytest.raises(BadRequestError, match="terminationGracePeriodSeconds"):
        store.create("pods", "default", body)
    with pytest.raises(BadRequestError):
        store.create("pods", "default", b"{not json")
    with pytest.raises(BadRequestError, match="namespace"):
        store.create("pods", "default", {**pod(), "metadata": {"name": "x", "namespace": "other"}})


def test_get_not_found(store: Store) -> None:
    with pytest.raises(NotFoundError) as info:
        store.get("pods", "default", "nope")
    assert info.value.message == 'pods "nope" not found'
    assert info.value.status is not None and info.value.status["details"] == {"name": "nope", "kind": "pods"}


def test_list_with_selectors_and_namespaces(store: Store) -> None:
    store.create("pods", "a", pod("p1", labels={"app": "web"}))
    store.create("pods", "a", pod("p2", node="n2", labels={"app": "db"}))
    store.create("pods", "b", pod("p3", node=None, labels={"app": "web"}))
    names = lambda items: [s.name for s in items]  # noqa: E731
    assert names(store.list("pods")[0]) == ["p1", "p2", "p3"]
    assert names(store.list("pods", "a")[0]) == ["p1", "p2"]
    assert names(store.list("pods", label_selector="app=web")[0]) == ["p1", "p3"]
    assert names(store.list("pods", field_selector="spec.nodeName=n2")[0]) == ["p2"]
    assert names(store.list("pods", field_selector="metadata.namespace=b")[0]) == ["p3"]
    assert names(store.list("pods", field_selector="status.phase=Pending,metadata.name!=p1")[0]) == [
        "p2",
        "p3",
    ]
    assert store.list("pods")[1] == 3
    namespaces = names(store.list("namespaces")[0])
    assert {"default", "kube-system", "a", "b"} <= set(namespaces)
    with pytest.raises(BadRequestError):
        store.list("pods", field_selector="spec.bogus=1")


def test_update_conflict_and_status_ignored(store: Store) -> None:
    s = store.create("pods", "default", pod())
    body = msgspec.json.decode(s.raw)
    body["metadata"]["labels"]["x"] = "y"
    body["status"] = {"phase": "Failed"}
    s2 = store.update("pods", "default", "p", body)
    assert s2.obj["metadata"]["labels"]["x"] == "y"
    assert s2.obj["status"]["phase"] == "Pending"  # a write to the main resource ignores status
    with pytest.raises(ConflictError, match="the object has been modified"):
        store.update("pods", "default", "p", body)  # stale resourceVersion
    body["spec"]["containers"][0]["name"] = "renamed"
    body["metadata"]["resourceVersion"] = s2.obj["metadata"]["resourceVersion"]
    with pytest.raises(UnprocessableEntityError, match="spec: Forbidden: pod updates may not change"):
        store.update("pods", "default", "p", body)


def test_noop_write_keeps_resource_version(store: Store) -> None:
    s = store.create("pods", "default", pod())
    again = store.patch("pods", "default", "p", b'{"metadata":{"labels":{"app":"web"}}}')
    assert again is s and store.resource_version == 1


def test_status_patches(store: Store) -> None:
    s = store.create("pods", "default", pod())
    uid = s.uid
    patch = {
        "metadata": {"uid": uid},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
    }
    s2 = store.patch("pods", "default", "p", msgspec.json.encode(patch), subresource="status")
    assert s2.obj["status"]["phase"] == "Running"
    assert s2.obj["status"]["qosClass"] == "BestEffort"
    # status writes change the status, labels and annotations (as kube-apiserver), not the spec
    s3 = store.patch("pods", "default", "p", {"metadata": {"labels": {"z": "1"}}, "spec": {"activeDeadlineSeconds": 5},
                     "status": {"message": "m"}}, "merge", subresource="status")  # fmt: skip
    assert s3.obj["metadata"]["labels"]["z"] == "1" and s3.obj["status"]["message"] == "m"
    assert "activeDeadlineSeconds" not in s3.obj["spec"]
    s4 = store.patch("pods", "default", "p", [{"op": "add", "path": "/status/reason", "value": "R"}], "json",
                     subresource="status")  # fmt: skip
    assert s4.obj["status"]["reason"] == "R" and s4.pod is not None and s4.pod.status.reason == "R"
    # conditions merge by type
    s5 = store.patch("pods", "default", "p", {"status": {"conditions": [{"type": "X", "status": "False"}]}},
                     subresource="status")  # fmt: skip
    assert [c["type"] for c in s5.obj["status"]["conditions"]] == ["X", "Ready"]


def test_patch_preconditions(store: Store) -> None:
    s = store.create("pods", "default", pod())
    # A patch's metadata.uid is an immutable field (422); a PUT's is a storage precondition (409).
    with pytest.raises(UnprocessableEntityError) as info:
        store.patch(
            "pods", "default", "p", {"metadata": {"uid": "other"}, "status": {}}, subresource="status"
        )
    assert (
        info.value.message == 'Pod "p" is invalid: metadata.uid: Invalid value: "other": field is immutable'
    )
    with pytest.raises(ConflictError) as conflict:
        store.update("pods", "default", "p", {**s.obj, "metadata": {**s.obj["metadata"], "uid": "other"}})
    assert conflict.value.message == (
        'Operation cannot be fulfilled on pods "p": StorageError: invalid object, Code: 4, '
        "Key: /registry/pods/default/p, ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: "
        f"UID in precondition: other, UID in object meta: {s.uid}"
    )
    store.patch("pods", "default", "p", {"metadata": {"labels": {"a": "b"}}})
    with pytest.raises(ConflictError) as info:
        store.patch("pods", "default", "p", {"metadata": {"resourceVersion": "1"}, "status": {"message": "x"}},
                    subresource="status")  # fmt: skip
    assert info.value.message == (
        'Operation cannot be fulfilled on pods "p": the object has been modified; please apply your '
        "changes to the latest version and try again"
    )
    assert info.value.status is not None and info.value.status["details"] == {"name": "p", "kind": "pods"}


def test_patch_errors(store: Store) -> None:
    store.create("pods", "default", pod())
    with pytest.raises(UnsupportedMediaTypeError):
        store.patch("pods", "default", "p", b"{}", "application/cbor-seq")
    with pytest.raises(UnprocessableEntityError, match="fieldManager: Required value"):
        store.patch("pods", "default", "p", b"{}", "application/apply-patch+yaml")
    with pytest.raises(BadRequestError):
        store.patch("pods", "default", "p", b"{oops")
    with pytest.raises(UnprocessableEntityError):
        store.patch("pods", "default", "p", [{"op": "remove", "path": "/nope"}], "json")
    with pytest.raises(UnprocessableEntityError, match="restartCount"):
        store.patch("pods", "default", "p", {"status": {"containerStatuses": [{"name": "c", "restartCount": "x"}]}},
                    subresource="status")  # fmt: skip
    with pytest.raises(NotFoundError):
        store.patch("pods", "default", "missing", b"{}")


def test_status_validation(store: Store) -> None:
    store.create("pods", "default", pod(restartPolicy="Never"))
    with pytest.raises(UnprocessableEntityError) as info:
        store.patch("pods", "default", "p", {"status": {"conditions": [{"type": "Ready", "status": "Maybe"}]}},
                    subresource="status")  # fmt: skip
    assert info.value.message == (
        'Pod "p" is invalid: status.conditions[0].status: Unsupported value: "Maybe": '
        'supported values: "False", "True", "Unknown"'
    )
    with pytest.raises(UnprocessableEntityError, match="must be a valid IP"):
        store.patch("pods", "default", "p", {"status": {"podIPs": [{"ip": "nope"}]}}, subresource="status")
    terminated = {"name": "c", "ready": False, "restartCount": 0, "image": "img:1", "imageID": "",
                  "state": {"terminated": {"exitCode": 0}}}  # fmt: skip
    store.patch("pods", "default", "p", {"status": {"phase": "Succeeded", "containerStatuses": [terminated]}},
                subresource="status")  # fmt: skip
    with pytest.raises(
        UnprocessableEntityError, match=r"status\.phase: Forbidden: cannot transition from a terminal"
    ):
        store.patch("pods", "default", "p", {"status": {"phase": "Running"}}, subresource="status")
    running = {**terminated, "state": {"running": {}}}
    with pytest.raises(UnprocessableEntityError, match="may not be transitioned to non-terminated state"):
        store.patch(
            "pods", "default", "p", {"status": {"containerStatuses": [running]}}, subresource="status"
        )


def test_delete_unbound_pod_goes_at_once(store: Store) -> None:
    s = store.create("pods", "default", pod(node=None))
    last, gone = store.delete("pods", "default", "p")
    # Written with deletionTimestamp and grace 0 (rv 2), then removed (rv 3): the answer is that version.
    assert gone and last.uid == s.uid and last.rv == 3
    assert (
        last.obj["metadata"]["deletionGracePeriodSeconds"] == 0 and last.obj["metadata"]["deletionTimestamp"]
    )
    with pytest.raises(NotFoundError):
        store.get("pods", "default", "p")


def test_graceful_delete_of_bound_pod(store: Store, clock: Clock) -> None:
    store.create("pods", "default", pod(terminationGracePeriodSeconds=10))
    s, gone = store.delete("pods", "default", "p")
    assert not gone
    assert s.obj["metadata"]["deletionGracePeriodSeconds"] == 10
    assert s.obj["metadata"]["deletionTimestamp"] == "2023-11-14T22:13:30Z"
    assert s.pod is not None and s.pod.metadata.deletion_timestamp is not None
    again, gone = store.delete("pods", "default", "p")  # a second delete changes nothing
    assert again is s and not gone
    clock.now += 11
    with pytest.raises(NotFoundError):
        store.get("pods", "default", "p")  # reaped lazily


def test_graceful_delete_then_grace_zero(store: Store) -> None:
    store.create("pods", "default", pod())
    store.delete("pods", "default", "p", grace_period_seconds=30)
    _, gone = store.delete("pods", "default", "p", grace_period_seconds=0)
    assert gone


def test_delete_preconditions(store: Store) -> None:
    s = store.create("pods", "default", pod())
    with pytest.raises(ConflictError) as info:
        store.delete("pods", "default", "p", grace_period_seconds=0, uid="x")
    assert info.value.message == (
        f'Operation cannot be fulfilled on Pod "p": the UID in the precondition (x) does not match the UID '
        f"in record ({s.uid}). The object might have been deleted and then recreated"
    )
    assert info.value.status is not None and info.value.status["details"] == {"name": "p", "kind": "Pod"}
    with pytest.raises(ConflictError) as info:
        store.delete("pods", "default", "p", grace_period_seconds=0, resource_version="99")
    assert info.value.message == (
        'Operation cannot be fulfilled on Pod "p": the ResourceVersion in the precondition (99) does not '
        "match the ResourceVersion in record (1). The object might have been modified"
    )
    _, gone = store.delete("pods", "default", "p", grace_period_seconds=0, uid=s.uid, resource_version="1")
    assert gone


def test_terminal_pod_deleted_at_once(store: Store) -> None:
    store.create("pods", "default", pod())
    store.patch("pods", "default", "p", {"status": {"phase": "Failed"}}, subresource="status")
    assert store.delete("pods", "default", "p")[1]


def test_finalizers_hold_deletion(store: Store) -> None:
    body = pod(node=None)
    body["metadata"]["finalizers"] = ["example.com/hold"]
    store.create("pods", "default", body)
    s, gone = store.delete("pods", "default", "p")
    assert not gone and s.obj["metadata"]["deletionTimestamp"]
    store.patch("pods", "default", "p", [{"op": "remove", "path": "/metadata/finalizers"}], "json")
    with pytest.raises(NotFoundError):
        store.get("pods", "default", "p")


def test_binding(store: Store) -> None:
    store.create("pods", "default", pod(node=None))
    assert bind(store, "default", "p", "n9").obj["spec"]["nodeName"] == "n9"
    with pytest.raises(ConflictError):
        bind(store, "default", "p", "n8")


def test_watch_initial_then_changes(store: Store) -> None:
    store.create("pods", "default", pod("a"))
    w = store.watch("pods", "default")
    e = w.next(0)
    assert e is not None and (e.type, e.stored.name) == ("ADDED", "a")
    assert w.next(0) is None
    store.create("pods", "default", pod("b"))
    store.create("pods", "other", pod("c"))
    store.patch("pods", "default", "b", {"status": {"phase": "Running"}}, subresource="status")
    store.delete("pods", "default", "b", grace_period_seconds=0)
    seen = []
    while (e := w.next(0.05)) is not None:
        seen.append((e.type, e.stored.name, e.rv))
    # A delete with grace 0 writes deletionTimestamp first (MODIFIED), then removes the pod.
    assert seen == [("ADDED", "b", 2), ("MODIFIED", "b", 4), ("MODIFIED", "b", 5), ("DELETED", "b", 6)]
    w.close()
    assert w.next(0) is None


def test_watch_from_resource_version_and_expired(store: Store) -> None:
    for i in range(5):
        store.create("pods", "default", pod(f"p{i}"))
    w = store.watch("pods", resource_version="3")
    got = [w.next(0), w.next(0), w.next(0)]
    assert [e.stored.name for e in got if e] == ["p3", "p4"]
    for i in range(60):
        store.create("pods", "default", pod(f"q{i}"))
    with pytest.raises(GoneError) as info:
        store.watch("pods", resource_version="2")
    assert info.value.reason == "Expired"
    with pytest.raises(GoneError):
        w.next(0)  # this watch fell behind the history


def _lease(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"holderIdentity": name, "leaseDurationSeconds": 40}}


def test_each_resource_keeps_its_own_history() -> None:
    """As kube-apiserver's watch cache: other resources' changes do not push a pod watch out."""
    store = Store(history_size=3)
    store.create("pods", "default", pod("a"))
    rv = store.resource_version
    w = store.watch("pods", resource_version=str(rv))
    for i in range(50):
        store.create("leases.coordination.k8s.io", "kube-node-lease", _lease(f"n{i}"))
    assert w.next(0) is None
    # The watch's version moved past the leases' (what its bookmarks report).
    assert w.resource_version == store.resource_version
    store.patch("pods", "default", "a", {"metadata": {"labels": {"x": "1"}}})
    e = w.next(0)
    assert e is not None and e.type == "MODIFIED" and e.rv == store.resource_version
    # From before the 50 leases: a pod watch and an exact pod list still work; a lease watch does not.
    again = store.watch("pods", resource_version=str(rv))
    first = again.next(0)
    assert first is not None and first.stored.name == "a" and first.type == "MODIFIED"
    assert [s.name for s in store.list_page("pods", "default", exact_resource_version=rv).items] == ["a"]
    with pytest.raises(GoneError):
        store.watch("leases.coordination.k8s.io", resource_version=str(rv))


def test_history_keeps_recent_changes_up_to_a_bound() -> None:
    """``history_seconds``: every change younger than that stays, beyond ``history_size``, up to ``max_history``."""
    store = Store(history_size=2, history_seconds=60.0, max_history=8)
    for i in range(6):
        store.create("pods", "default", pod(f"p{i}"))
    w = store.watch("pods", resource_version="1")
    assert [w.next(0).stored.name for _ in range(5)] == ["p1", "p2", "p3", "p4", "p5"]  # type: ignore[union-attr]
    for i in range(6):
        store.create("pods", "default", pod(f"q{i}"))
    with pytest.raises(GoneError):
        store.watch("pods", resource_version="1")  # 12 changes, 8 kept
    assert store.watch("pods", resource_version="4").next(0) is not None
    with pytest.raises(ValueError):
        Store(history_size=10, max_history=5)


def test_watch_selector_transitions(store: Store) -> None:
    store.create("pods", "default", pod("a", labels={"app": "web"}))
    w = store.watch("pods", label_selector="app=web", resource_version=str(store.resource_version))
    store.patch("pods", "default", "a", {"metadata": {"labels": {"app": "db"}}})
    e = w.next(0)
    assert e is not None and e.type == "DELETED" and e.rv == 2
    assert msgspec.json.decode(e.stored.raw)["metadata"]["resourceVersion"] == "2"
    store.patch("pods", "default", "a", {"metadata": {"labels": {"app": "web"}}})
    e = w.next(0)
    assert e is not None and e.type == "ADDED"


def test_watch_wakes_on_write(store: Store) -> None:
    import threading

    w = store.watch("pods", resource_version="0")
    timer = threading.Timer(0.05, lambda: store.create("pods", "default", pod("late")))
    timer.start()
    e = w.next(5)
    timer.join()
    assert e is not None and e.stored.name == "late"


def test_nodes(store: Store) -> None:
    node = {"metadata": {"name": "n1", "labels": {"node-role.kubernetes.io/worker": ""}},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]}}  # fmt: skip
    s = store.create("nodes", None, node)
    assert "namespace" not in s.obj["metadata"] and s.obj["status"]["conditions"][0]["status"] == "True"
    s2 = store.patch("nodes", None, "n1", {"status": {"conditions": [{"type": "Ready", "status": "False"}]}},
                     subresource="status")  # fmt: skip
    # Unset condition times are printed null, as kube-apiserver prints them.
    assert s2.obj["status"]["conditions"] == [
        {"lastHeartbeatTime": None, "lastTransitionTime": None, "type": "Ready", "status": "False"}
    ]
    assert [x.name for x in store.list("nodes", label_selector="node-role.kubernetes.io/worker")[0]] == ["n1"]
    assert store.delete("nodes", None, "n1")[1]
