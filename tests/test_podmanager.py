"""BasicPodManager: pods, mirror pods and UID translations (SPEC 2.4)."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from podstatus.podmanager import (
    CONFIG_MIRROR_ANNOTATION_KEY,
    CONFIG_SOURCE_ANNOTATION_KEY,
    BasicPodManager,
    is_mirror_pod,
    is_static_pod,
    pod_full_name,
)
from podstatus.protocols import PodManager
from podstatus.types import ObjectMeta, Pod, PodStatus


def make_pod(
    uid: str, name: str = "p", namespace: str = "ns", annotations: dict[str, str] | None = None
) -> Pod:
    return Pod(metadata=ObjectMeta(uid=uid, name=name, namespace=namespace, annotations=annotations))


def static_pod(uid: str, name: str = "p", namespace: str = "ns") -> Pod:
    return make_pod(uid, name, namespace, {CONFIG_SOURCE_ANNOTATION_KEY: "file"})


def mirror_pod(uid: str, name: str = "p", namespace: str = "ns") -> Pod:
    return make_pod(
        uid, name, namespace, {CONFIG_SOURCE_ANNOTATION_KEY: "file", CONFIG_MIRROR_ANNOTATION_KEY: "hash"}
    )


# --- predicates ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("annotations", "static", "mirror"),
    [
        (None, False, False),
        ({}, False, False),
        ({CONFIG_SOURCE_ANNOTATION_KEY: "api"}, False, False),
        ({CONFIG_SOURCE_ANNOTATION_KEY: "file"}, True, False),
        ({CONFIG_SOURCE_ANNOTATION_KEY: "http"}, True, False),
        ({CONFIG_SOURCE_ANNOTATION_KEY: ""}, True, False),
        ({CONFIG_MIRROR_ANNOTATION_KEY: "x"}, False, True),
        ({CONFIG_SOURCE_ANNOTATION_KEY: "file", CONFIG_MIRROR_ANNOTATION_KEY: ""}, True, True),
    ],
)
def test_predicates(annotations: dict[str, str] | None, static: bool, mirror: bool) -> None:
    pod = make_pod("u", annotations=annotations)
    assert is_static_pod(pod) is static
    assert is_mirror_pod(pod) is mirror


def test_annotation_keys() -> None:
    assert CONFIG_SOURCE_ANNOTATION_KEY == "kubernetes.io/config.source"
    assert CONFIG_MIRROR_ANNOTATION_KEY == "kubernetes.io/config.mirror"
    assert pod_full_name(make_pod("u", "n", "s")) == ("s", "n")


def test_implements_protocol() -> None:
    assert isinstance(BasicPodManager(), PodManager)


# --- basics -------------------------------------------------------------------------


def test_empty() -> None:
    pm = BasicPodManager()
    assert pm.get_pods() == []
    assert pm.get_mirror_pods() == []
    assert pm.get_pod_by_uid("x") is None
    assert pm.get_pod_by_name("ns", "p") is None
    assert pm.translate_pod_uid("x") == "x"
    assert pm.translate_pod_uid("") == ""
    assert pm.get_uid_translations() == ({}, {})


def test_add_get_update_remove() -> None:
    pm = BasicPodManager()
    a = make_pod("a", "pa")
    b = make_pod("b", "pb")
    pm.add_pod(a)
    pm.add_pod(b)
    assert sorted(p.uid for p in pm.get_pods()) == ["a", "b"]
    assert pm.get_pod_by_uid("a") is a
    assert pm.get_pod_by_name("ns", "pb") is b
    assert pm.get_pod_by_name("other", "pb") is None

    a2 = a.replace(status=PodStatus(phase="Running"))
    pm.update_pod(a2)
    assert pm.get_pod_by_uid("a") is a2
    assert pm.get_pod_by_name("ns", "pa") is a2
    assert len(pm.get_pods()) == 2

    pm.remove_pod(a)
    assert pm.get_pod_by_uid("a") is None
    assert pm.get_pod_by_name("ns", "pa") is None
    assert [p.uid for p in pm.get_pods()] == ["b"]
    pm.remove_pod(a)  # removing twice is harmless


def test_set_pods_replaces_everything() -> None:
    pm = BasicPodManager([make_pod("a", "pa"), mirror_pod("m", "pa")])
    assert pm.get_mirror_pods() != []
    pm.set_pods([static_pod("s", "ps"), mirror_pod("ms", "ps"), make_pod("c", "pc")])
    assert sorted(p.uid for p in pm.get_pods()) == ["c", "s"]
    assert [p.uid for p in pm.get_mirror_pods()] == ["ms"]
    assert pm.get_pod_by_uid("a") is None
    assert pm.translate_pod_uid("m") == "m"
    assert pm.translate_pod_uid("ms") == "s"


def test_recreated_pod_same_name_removing_old_keeps_new_by_name() -> None:
    pm = BasicPodManager()
    old, new = make_pod("old"), make_pod("new")
    pm.add_pod(old)
    pm.add_pod(new)
    pm.remove_pod(old)
    assert pm.get_pod_by_name("ns", "p") is new
    assert [p.uid for p in pm.get_pods()] == ["new"]


# --- mirror pods --------------------------------------------------------------------


@pytest.mark.parametrize("mirror_first", [False, True])
def test_static_and_mirror_are_matched_by_name(mirror_first: bool) -> None:
    pm = BasicPodManager()
    static, mirror = static_pod("s"), mirror_pod("m")
    pods = [mirror, static] if mirror_first else [static, mirror]
    for pod in pods:
        pm.add_pod(pod)
    assert [p.uid for p in pm.get_pods()] == ["s"]
    assert [p.uid for p in pm.get_mirror_pods()] == ["m"]
    assert pm.get_pod_by_uid("m") is None  # mirror pods are not "pods"
    assert pm.get_mirror_pod_by_pod(static) is mirror
    assert pm.get_pod_by_mirror_pod(mirror) is static
    assert pm.translate_pod_uid("m") == "s"
    assert pm.translate_pod_uid("s") == "s"
    assert pm.get_uid_translations() == ({"s": "m"}, {"m": "s"})


def test_static_without_mirror_maps_to_empty_string() -> None:
    pm = BasicPodManager(
        [static_pod("s1", "p1"), static_pod("s2", "p2"), mirror_pod("m2", "p2"), make_pod("r", "p3")]
    )
    pod_to_mirror, mirror_to_pod = pm.get_uid_translations()
    assert pod_to_mirror == {"s1": "", "s2": "m2"}
    assert mirror_to_pod == {"m2": "s2"}


def test_mirror_without_static_pod_is_not_translated() -> None:
    pm = BasicPodManager([mirror_pod("m")])
    assert pm.translate_pod_uid("m") == "m"
    assert pm.get_uid_translations() == ({}, {})
    assert pm.get_pod_by_mirror_pod(mirror_pod("m")) is None


def test_same_name_other_namespace_does_not_match() -> None:
    pm = BasicPodManager([static_pod("s", namespace="a"), mirror_pod("m", namespace="b")])
    assert pm.translate_pod_uid("m") == "m"
    assert pm.get_uid_translations() == ({"s": ""}, {})
    assert pm.get_mirror_pod_by_pod(static_pod("s", namespace="a")) is None


def test_non_static_pod_is_not_translated() -> None:
    pm = BasicPodManager([make_pod("r"), mirror_pod("m")])
    assert pm.translate_pod_uid("m") == "m"
    assert pm.get_uid_translations() == ({}, {})


def test_remove_mirror_pod() -> None:
    static, mirror = static_pod("s"), mirror_pod("m")
    pm = BasicPodManager([static, mirror])
    pm.remove_pod(mirror)
    assert pm.get_mirror_pods() == []
    assert pm.get_mirror_pod_by_pod(static) is None
    assert pm.translate_pod_uid("m") == "m"
    assert pm.get_uid_translations() == ({"s": ""}, {})


def test_remove_static_pod_keeps_the_mirror_translation_as_upstream() -> None:
    # Upstream's basicManager.RemovePod of a static pod leaves translationByUID alone: the
    # mirror still translates to it until the mirror pod itself is removed.
    static, mirror = static_pod("s"), mirror_pod("m")
    pm = BasicPodManager([static, mirror])
    pm.remove_pod(static)
    assert pm.translate_pod_uid("m") == "s"
    assert pm.get_uid_translations() == ({"s": "m"}, {"m": "s"})
    assert [p.uid for p in pm.get_mirror_pods()] == ["m"]
    assert pm.get_pods() == []
    pm.remove_pod(mirror)
    assert pm.get_uid_translations() == ({}, {})
    pm.add_pod(mirror)
    assert pm.get_uid_translations() == ({}, {})
    # The static pod coming back is matched to the mirror pod again.
    pm.add_pod(static)
    assert pm.get_uid_translations() == ({"s": "m"}, {"m": "s"})


def test_recreated_mirror_pod_supersedes_old_one() -> None:
    pm = BasicPodManager([static_pod("s"), mirror_pod("m1")])
    pm.add_pod(mirror_pod("m2"))
    assert pm.get_uid_translations() == ({"s": "m2"}, {"m2": "s"})
    assert pm.get_mirror_pod_by_pod(static_pod("s")) == mirror_pod("m2")
    pm.remove_pod(mirror_pod("m1"))
    assert pm.get_uid_translations() == ({"s": "m2"}, {"m2": "s"})
    assert [p.uid for p in pm.get_mirror_pods()] == ["m2"]


def test_recreated_static_pod_takes_over_mirror() -> None:
    pm = BasicPodManager([static_pod("s1"), mirror_pod("m")])
    pm.add_pod(static_pod("s2"))
    pm.remove_pod(static_pod("s1"))
    assert pm.translate_pod_uid("m") == "s2"
    assert pm.get_uid_translations() == ({"s2": "m"}, {"m": "s2"})


def test_translations_are_fresh_dicts() -> None:
    pm = BasicPodManager([static_pod("s"), mirror_pod("m")])
    pod_to_mirror, mirror_to_pod = pm.get_uid_translations()
    pod_to_mirror.clear()
    mirror_to_pod["x"] = "y"
    assert pm.get_uid_translations() == ({"s": "m"}, {"m": "s"})


def test_get_pods_is_a_copy() -> None:
    pm = BasicPodManager([make_pod("a")])
    pm.get_pods().clear()
    assert len(pm.get_pods()) == 1


def test_concurrent_use() -> None:
    pm = BasicPodManager()
    errors: list[BaseException] = []

    def worker(n: int) -> None:
        try:
            for i in range(200):
                name = f"p{n}-{i}"
                s, m = static_pod(f"s{n}-{i}", name), mirror_pod(f"m{n}-{i}", name)
                pm.add_pod(s)
                pm.add_pod(m)
                assert pm.translate_pod_uid(m.uid) == s.uid
                pm.get_uid_translations()
                if i % 2:
                    pm.remove_pod(s)
                    pm.remove_pod(m)
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    pod_to_mirror, mirror_to_pod = pm.get_uid_translations()
    assert len(pod_to_mirror) == len(mirror_to_pod) == 4 * 100
    assert all(mirror_to_pod[m] == s for s, m in pod_to_mirror.items())


def _wire_pod(**metadata: object) -> dict[str, Any]:
    """One pod as the API server sends it, its metadata extended by ``metadata``."""
    return {
        "metadata": {"name": "a", "namespace": "default", "uid": "u1", "resourceVersion": "7", **metadata},
        "spec": {"nodeName": "n1", "containers": [{"name": "app", "image": "nginx"}]},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
    }


def test_lean_pod_drops_managed_fields_and_shares_an_equal_spec() -> None:
    from podstatus.podmanager import lean_pod

    wire = _wire_pod(
        managedFields=[{"manager": "kubectl", "operation": "Update", "fieldsV1": {"f:spec": {}}}]
    )
    first = Pod.from_dict(wire)
    second = Pod.from_dict({**wire, "metadata": {**wire["metadata"], "resourceVersion": "8"}})
    assert first.spec == second.spec and first.spec is not second.spec
    lean = lean_pod(second, first)
    assert lean.metadata.managed_fields is None
    assert lean.spec is first.spec  # held once
    assert lean.metadata.resource_version == "8" and lean.status == second.status
    # Everything but managedFields is the same pod on the wire.
    expected = second.to_dict()
    del expected["metadata"]["managedFields"]
    assert lean.to_dict() == expected
    # A different spec is never taken: the pod keeps its own (equal on the wire).
    other = Pod.from_dict({**wire, "metadata": {**wire["metadata"], "uid": "u2"}})
    assert lean_pod(second, other).spec == second.spec
    changed = Pod.from_dict({**wire, "spec": {**wire["spec"], "nodeName": "n2"}})
    assert lean_pod(changed, first).spec == changed.spec != first.spec
    bare = lean_pod(first)
    assert lean_pod(bare) is bare  # nothing to drop: the same object


def test_lean_pod_shares_equal_metadata_parts_and_the_cached_status() -> None:
    from podstatus.podmanager import lean_pod

    wire = _wire_pod(
        creationTimestamp="2026-12-03T10:00:00Z",
        labels={"app": "web"},
        annotations={"note": "x"},
        ownerReferences=[{"apiVersion": "v1", "kind": "Job", "name": "j", "uid": "j1"}],
    )
    first = Pod.from_dict(wire)
    second = Pod.from_dict({**wire, "metadata": {**wire["metadata"], "resourceVersion": "8"}})
    cached = Pod.from_dict(wire).status
    lean = lean_pod(second, first, cached)
    assert lean.metadata.labels is first.metadata.labels
    assert lean.metadata.name is first.metadata.name and lean.metadata.uid is first.metadata.uid
    assert lean.metadata.creation_timestamp is first.metadata.creation_timestamp
    assert lean.metadata.annotations is first.metadata.annotations
    assert lean.metadata.owner_references is first.metadata.owner_references
    assert lean.metadata.resource_version == "8"
    assert lean.status is cached
    assert lean.to_dict() == second.to_dict()
    # A status that differs from the cached one is kept as the server sent it.
    pending = Pod.from_dict({**wire, "status": {"phase": "Pending"}})
    assert lean_pod(pending, first, cached).status is pending.status
    relabelled = Pod.from_dict({**wire, "metadata": {**wire["metadata"], "labels": {"app": "db"}}})
    assert lean_pod(relabelled, first).metadata.labels == {"app": "db"}


def test_pods_of_one_template_hold_its_parts_once() -> None:
    """Across pods (other UIDs, other nodes), equal containers, labels and owners are one copy."""
    from podstatus.podmanager import lean_pod, shared_parts

    def pod(i: int, node: str) -> Pod:
        wire = _wire_pod(
            labels={"app": "web", "pod-template-hash": "5d4f"},
            ownerReferences=[
                {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-5d4f", "uid": "rs1"}
            ],
        )
        wire["metadata"].update(name=f"web-{i}", uid=f"uid-{i}")
        wire["spec"] = {
            "nodeName": node,
            "restartPolicy": "Always",
            "containers": [{"name": "app", "image": "nginx:1.27", "resources": {"requests": {"cpu": "10m"}}}],
            "tolerations": [{"key": "virtual-kubelet.io/provider", "operator": "Exists"}],
        }
        return Pod.from_dict(wire)

    a, b, c = lean_pod(pod(1, "n1")), lean_pod(pod(2, "n1")), lean_pod(pod(3, "n2"))
    assert a.spec is b.spec  # the same template on the same node: one spec
    assert c.spec is not a.spec and c.spec.node_name == "n2"
    assert c.spec.containers is a.spec.containers and c.spec.tolerations is a.spec.tolerations
    assert a.metadata.labels is b.metadata.labels is c.metadata.labels
    assert a.metadata.owner_references is c.metadata.owner_references
    assert [p.metadata.uid for p in (a, b, c)] == ["uid-1", "uid-2", "uid-3"]
    for i, lean in ((1, a), (2, b), (3, c)):
        assert lean.to_dict() == pod(i, lean.spec.node_name or "").to_dict()  # the same pod on the wire
    assert len(shared_parts) > 0


def test_shared_parts_are_exact_and_bounded() -> None:
    from podstatus.podmanager import SharedParts

    parts = SharedParts(limit=3)
    one, true = {"x": 1}, {"x": True}
    assert parts.get("labels", one) is one
    assert parts.get("labels", true) is true  # equal in Python, not on the wire: not shared
    assert parts.get("labels", {"x": 1}) is one
    assert parts.get("annotations", {"x": 1}) is not one  # another field: its own table entry
    for i in range(5):
        parts.get("labels", {"n": i})
    assert len(parts) <= 3
    assert parts.get("labels", "word") == "word" and parts.get("labels", None) is None
