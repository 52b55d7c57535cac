"""Field sets in the FieldsV1 encoding and the schema-aware walks of server-side apply."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from podstatus.server.fieldmanager import fieldsets as fs
from podstatus.server.fieldmanager.apply import schema_for
from podstatus.server.fieldmanager.fieldsets import FieldSetError, Schema

POD = schema_for("Pod")


def test_item_elements_use_list_keys_defaults_and_set_values() -> None:
    ports = POD.list_type(("spec", "containers", "ports"))
    # The key of a port is containerPort and protocol; a missing protocol is its default, TCP.
    assert fs.item_element({"containerPort": 80}, ports, ()) == 'k:{"containerPort":80,"protocol":"TCP"}'
    conditions = POD.list_type(("status", "conditions"))
    assert fs.item_element({"type": "Ready", "status": "True"}, conditions, ()) == 'k:{"type":"Ready"}'
    finalizers = POD.list_type(("metadata", "finalizers"))
    assert fs.item_element("example.com/f", finalizers, ()) == 'v:"example.com/f"'
    # A key without a default must be there.
    keyed = Schema({("items",): ("map", ("type",))}).list_type(("items",))
    with pytest.raises(FieldSetError, match='omits key field "type"'):
        fs.item_element({"status": "True"}, keyed, ("items",))


def test_to_field_set_marks_leaves_items_and_empty_maps() -> None:
    config = {
        "metadata": {"name": "p", "labels": {"app": "web"}, "finalizers": ["a/b"]},
        "spec": {
            "securityContext": {},
            "containers": [{"name": "c", "image": "nginx", "args": ["x"], "ports": [{"containerPort": 80}]}],
            "volumes": [],
        },
    }
    assert fs.to_field_set(config, POD) == {
        "f:metadata": {"f:finalizers": {'v:"a/b"': {}}, "f:labels": {"f:app": {}}, "f:name": {}},
        "f:spec": {
            "f:containers": {
                'k:{"name":"c"}': {
                    ".": {},
                    "f:args": {},  # an atomic list is one leaf
                    "f:image": {},
                    "f:name": {},
                    "f:ports": {'k:{"containerPort":80,"protocol":"TCP"}': {".": {}, "f:containerPort": {}}},
                }
            },
            "f:securityContext": {},  # an empty struct is a member
        },  # an empty associative list is not
    }


def test_to_field_set_refuses_duplicate_keys() -> None:
    config = {"spec": {"containers": [{"name": "c"}, {"name": "c"}]}}
    with pytest.raises(FieldSetError, match="duplicate entries"):
        fs.to_field_set(config, POD)


def test_atomic_structs_are_leaves() -> None:
    # OwnerReference is an atomic struct: one leaf per item, nothing inside.
    config = {"metadata": {"ownerReferences": [{"uid": "u", "kind": "ReplicaSet", "name": "rs"}]}}
    assert fs.to_field_set(config, POD) == {"f:metadata": {"f:ownerReferences": {'k:{"uid":"u"}': {}}}}


def test_set_operations_follow_membership() -> None:
    a = fs.from_paths(("f:a",), ("f:b", "f:c"), ("f:b",))
    b = fs.from_paths(("f:b", "f:c"), ("f:d",))
    assert a == {"f:a": {}, "f:b": {".": {}, "f:c": {}}}
    assert fs.union(a, b) == {"f:a": {}, "f:b": {".": {}, "f:c": {}}, "f:d": {}}
    assert fs.subtract(a, b) == {"f:a": {}, "f:b": {}}  # f:b stays a member, its child goes
    assert fs.intersection(a, b) == {"f:b": {"f:c": {}}}
    assert fs.subtract(a, {}) is a and fs.union(a, {}) is a
    assert fs.exclude(a, fs.from_paths(("f:b",))) == {"f:a": {}}
    assert list(fs.paths(a)) == [("f:a",), ("f:b",), ("f:b", "f:c")]


def test_encoding_orders_fields_before_keys_and_dot_first() -> None:
    s = fs.from_paths(('k:{"name":"x"}',), ("f:z",), ("f:a",), ('v:"q"',))
    assert list(s) == ["f:a", "f:z", 'k:{"name":"x"}', 'v:"q"']
    nested = fs.from_paths(("f:x",), ("f:x", "f:b"), ("f:x", "f:a"))
    assert list(nested["f:x"]) == [".", "f:a", "f:b"]


def test_decode_checks_the_encoding() -> None:
    good = {"f:a": {".": {}, "f:b": {}}}
    assert fs.decode(good) is good
    for bad in ({"x:a": {}}, {"f:a": []}, {".": {"f:b": {}}}, []):
        with pytest.raises(FieldSetError):
            fs.decode(bad)


def test_render_path_as_the_real_server_prints_it() -> None:
    assert (
        fs.render_path(("f:spec", "f:containers", 'k:{"name":"a"}', "f:image"))
        == '.spec.containers[name="a"].image'
    )
    assert fs.render_path(("f:metadata", "f:finalizers", 'v:"x/y"')) == '.metadata.finalizers[="x/y"]'
    assert (
        fs.render_path(("f:ports", 'k:{"containerPort":80,"protocol":"TCP"}'))
        == '.ports[containerPort=80,protocol="TCP"]'
    )


def _cmp(lhs: dict[str, Any], rhs: dict[str, Any]) -> tuple[Any, Any, Any]:
    c = fs.compare(lhs, rhs, POD)
    return c.added, c.modified, c.removed


def test_compare_added_subtrees_carry_every_node() -> None:
    added, modified, removed = _cmp(
        {"metadata": {"name": "p"}}, {"metadata": {"name": "p", "labels": {"a": "1"}}}
    )
    # A map the old object lacked is added with its own node ("."), as on a create.
    assert added == {"f:metadata": {"f:labels": {".": {}, "f:a": {}}}}
    assert modified == {} and removed == {}


def test_compare_null_is_present_and_empty_maps_are_leaves() -> None:
    lhs = {"spec": {"containers": None, "securityContext": {}}}
    rhs = {"spec": {"containers": [{"name": "c", "resources": {}}], "securityContext": {}}}
    added, modified, _ = _cmp(lhs, rhs)
    # A null list counts as present: the list itself is not added, its items are.
    assert added == {
        "f:spec": {"f:containers": {'k:{"name":"c"}': {".": {}, "f:name": {}, "f:resources": {}}}}
    }
    assert modified == {}


def test_compare_list_items_by_key_and_atomic_lists_as_leaves() -> None:
    lhs = {"status": {"conditions": [{"type": "A", "status": "True"}, {"type": "B", "status": "True"}],
                      "containerStatuses": [{"name": "c", "ready": False}]}}  # fmt: skip
    rhs = {"status": {"conditions": [{"type": "B", "status": "False"}],
                      "containerStatuses": [{"name": "c", "ready": True}]}}  # fmt: skip
    added, modified, removed = _cmp(lhs, rhs)
    assert added == {}
    assert modified == {
        "f:status": {"f:conditions": {'k:{"type":"B"}': {"f:status": {}}}, "f:containerStatuses": {}}
    }
    assert removed == {
        "f:status": {"f:conditions": {'k:{"type":"A"}': {".": {}, "f:status": {}, "f:type": {}}}}
    }


def test_compare_skips_equal_objects() -> None:
    obj = {"spec": {"containers": [{"name": "c"}]}}
    c = fs.compare(obj, {"spec": {"containers": [{"name": "c"}]}}, POD)
    assert c.empty()


def test_merge_maps_lists_by_key_and_atomic_replaced() -> None:
    live = {
        "metadata": {"labels": {"a": "1", "b": "2"}},
        "spec": {
            "containers": [{"name": "x", "image": "i1", "args": ["1", "2"]}, {"name": "y", "image": "i2"}]
        },
    }
    config = {
        "metadata": {"labels": {"b": "3", "c": None}},
        "spec": {"containers": [{"name": "x", "args": ["9"]}]},
    }
    merged = fs.merge(live, config, POD)
    assert merged["metadata"]["labels"] == {"a": "1", "b": "3"}
    assert merged["spec"]["containers"] == [
        {"name": "x", "image": "i1", "args": ["9"]},
        {"name": "y", "image": "i2"},
    ]
    assert live["metadata"]["labels"] == {"a": "1", "b": "2"}  # inputs are never changed


def test_merge_orders_items_as_structured_merge_diff() -> None:
    schema = Schema({("items",): ("map", ("k",))})
    live = {"items": [{"k": "a"}, {"k": "b"}, {"k": "c"}]}

    def keys(config_keys: list[str]) -> list[str]:
        merged = fs.merge(live, {"items": [{"k": k} for k in config_keys]}, schema)
        return [i["k"] for i in merged["items"]]

    # Items the configuration names come in its order; the others keep their place.
    assert keys(["c", "a"]) == ["b", "c", "a"]
    assert keys(["d"]) == ["a", "b", "c", "d"]
    assert keys(["b", "d"]) == ["a", "b", "c", "d"]
    assert keys(["d", "b"]) == ["a", "d", "b", "c"]


def test_prune_removes_what_nobody_owns_any_more() -> None:
    obj = {
        "metadata": {"name": "p", "labels": {"a": "1", "b": "2"}},
        "spec": {"containers": [{"name": "x", "image": "i"}, {"name": "y", "image": "j", "tty": True}]},
    }
    gone = fs.from_paths(
        ("f:metadata", "f:labels", "f:a"),
        ("f:spec", "f:containers", 'k:{"name":"y"}'),
        ("f:spec", "f:containers", 'k:{"name":"y"}', "f:name"),
        ("f:spec", "f:containers", 'k:{"name":"y"}', "f:image"),
        ("f:spec", "f:containers", 'k:{"name":"x"}', "f:image"),
    )
    owned = fs.from_paths(
        ("f:metadata", "f:name"),
        ("f:metadata", "f:labels", "f:b"),
        ("f:spec", "f:containers", 'k:{"name":"x"}'),
        ("f:spec", "f:containers", 'k:{"name":"x"}', "f:name"),
    )
    pruned = fs.prune(obj, gone, owned, POD)
    assert pruned["metadata"] == {"name": "p", "labels": {"b": "2"}}
    # Container y goes whole (with fields nobody ever owned); x loses the image only.
    assert pruned["spec"]["containers"] == [{"name": "x"}]


def test_prune_keeps_key_fields_of_kept_items() -> None:
    obj = {"spec": {"containers": [{"name": "x", "image": "i"}]}}
    gone = fs.from_paths(("f:spec", "f:containers", 'k:{"name":"x"}', "f:name"))
    owned = fs.from_paths(("f:spec", "f:containers", 'k:{"name":"x"}', "f:image"))
    assert fs.prune(obj, gone, owned, POD) == obj


_ELEMENTS = st.sampled_from(["f:a", "f:b", 'k:{"name":"x"}', 'v:"y"', "i:0"])
_PATHS = st.frozensets(st.lists(_ELEMENTS, min_size=1, max_size=3).map(tuple), max_size=8)


@settings(max_examples=300, deadline=None)
@given(_PATHS, _PATHS)
def test_set_operations_agree_with_sets_of_paths(
    a: frozenset[tuple[str, ...]], b: frozenset[tuple[str, ...]]
) -> None:
    sa, sb = fs.from_paths(*a), fs.from_paths(*b)
    assert set(fs.paths(sa)) == a
    assert set(fs.paths(fs.union(sa, sb))) == a | b
    assert set(fs.paths(fs.subtract(sa, sb))) == a - b
    assert set(fs.paths(fs.intersection(sa, sb))) == a & b
    # Excluding b's members drops everything at or below them.
    assert set(fs.paths(fs.exclude(sa, sb))) == {p for p in a if not any(p[: len(q)] == q for q in b)}
    # Results are in the encoding's canonical form: what building them afresh gives.
    for result in (fs.union(sa, sb), fs.subtract(sa, sb), fs.intersection(sa, sb), fs.exclude(sa, sb)):
        assert json.dumps(result) == json.dumps(fs.from_paths(*fs.paths(result)))  # same keys, same order
        assert fs.decode(result) is result
    assert sa == fs.from_paths(*a)  # inputs never change
