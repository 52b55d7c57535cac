"""The namespaces registry (server/registry/namespaces.py) as tables, without HTTP."""

from __future__ import annotations

from typing import Any

import pytest

from podstatus.errors import ConflictError, MethodNotAllowedError, NotFoundError, UnprocessableEntityError
from podstatus.server.registry.namespaces import DEFAULT_NAMESPACES, NAMESPACES, NamespaceStrategy
from podstatus.server.storage.store import Store


def _causes(err: UnprocessableEntityError) -> list[tuple[str, str]]:
    status = err.status or {}
    return [(c["field"], c["reason"]) for c in status["details"]["causes"]]


def test_a_new_store_has_the_default_namespaces_without_events() -> None:
    store = Store()
    items, rv = store.list("namespaces")
    assert [s.name for s in items] == sorted(DEFAULT_NAMESPACES)
    assert rv == 0
    for item in items:
        obj = item.obj
        assert obj["status"] == {"phase": "Active"}
        assert obj["spec"] == {"finalizers": ["kubernetes"]}
        assert obj["metadata"]["labels"] == {"kubernetes.io/metadata.name": item.name}


CREATES = [
    # (metadata, expected causes or None)
    ({"name": "team-a"}, None),
    ({"name": "Team_A"}, [("metadata.name", "FieldValueInvalid")]),
    ({"name": "a" * 64}, [("metadata.name", "FieldValueInvalid")]),
    ({"name": "a.b"}, [("metadata.name", "FieldValueInvalid")]),
    ({}, [("metadata.name", "FieldValueRequired")]),
    ({"name": "ok", "labels": {"bad key!": "v"}}, [("metadata.labels", "FieldValueInvalid")]),
]


@pytest.mark.parametrize(("meta", "causes"), CREATES)
def test_create(meta: dict[str, Any], causes: list[tuple[str, str]] | None) -> None:
    store = Store()
    body = {"metadata": meta, "spec": {"finalizers": ["custom"]}}
    if causes is not None:
        with pytest.raises(UnprocessableEntityError) as err:
            store.create("namespaces", None, body)
        assert _causes(err.value) == causes
        return
    obj = store.create("namespaces", None, body).obj
    assert obj["spec"] == {"finalizers": ["custom"]}
    assert obj["status"] == {"phase": "Active"}
    assert obj["metadata"]["labels"] == {"kubernetes.io/metadata.name": meta["name"]}
    assert "managedFields" not in obj["metadata"]


def test_generated_name_is_a_label() -> None:
    store = Store()
    obj = store.create("namespaces", None, {"metadata": {"generateName": "x" * 70}}).obj
    assert len(obj["metadata"]["name"]) == 63 and obj["metadata"]["name"].startswith("x" * 58)


def test_create_twice_is_already_exists_and_pods_need_their_namespace() -> None:
    store = Store()
    store.create("namespaces", None, {"metadata": {"name": "team-a"}})
    with pytest.raises(ConflictError, match='namespaces "team-a" already exists'):
        store.create("namespaces", None, {"metadata": {"name": "team-a"}})
    pod = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}
    store.create("pods", "team-a", pod)
    with pytest.raises(NotFoundError, match='namespaces "team-b" not found'):
        store.create("pods", "team-b", pod)


def test_update_keeps_the_name_label() -> None:
    store = Store()
    store.create("namespaces", None, {"metadata": {"name": "team-a"}})
    patch = {"metadata": {"labels": {"kubernetes.io/metadata.name": "other", "tier": "x"}}}
    labels = store.patch("namespaces", None, "team-a", patch, "merge").obj["metadata"]["labels"]
    assert labels == {"kubernetes.io/metadata.name": "team-a", "tier": "x"}


def test_delete_is_not_served() -> None:
    with pytest.raises(MethodNotAllowedError, match="namespaces cannot be deleted from this server"):
        Store().delete("namespaces", None, "default")


def test_apply_only_creates() -> None:
    store = Store()
    config = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}}
    with pytest.raises(ConflictError, match="already exists"):
        store.apply("namespaces", None, "default", config, field_manager="m")
    with pytest.raises(NotFoundError):
        store.apply(
            "namespaces", None, "new-one", dict(config, metadata={"name": "new-one"}), field_manager="m"
        )


def test_ensure_namespace_is_part_of_the_world() -> None:
    store = Store()
    made = store.ensure_namespace("sim")
    assert made.rv == 0 and store.resource_version == 0
    assert store.ensure_namespace("sim").uid == made.uid


def test_registered_strategy() -> None:
    strategy = NAMESPACES.strategy
    assert isinstance(strategy, NamespaceStrategy)
    assert strategy.holds_namespaces and not strategy.deletable and not NAMESPACES.namespaced
