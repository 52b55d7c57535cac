"""Tests of podstatus.patch: JSON merge patch (RFC 7386) and JSON patch (RFC 6902), the RFCs' own examples."""

from __future__ import annotations

import json
from typing import Any

import pytest

from podstatus.patch import (
    PatchError,
    apply_json_merge_patch,
    apply_json_patch,
)

# --------------------------------------------------------------------------- RFC 7386

RFC7386_APPENDIX = [
    ({"a": "b"}, {"a": "c"}, {"a": "c"}),
    ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
    ({"a": "b"}, {"a": None}, {}),
    ({"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
    ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
    ({"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
    ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
    ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
    (["a", "b"], ["c", "d"], ["c", "d"]),
    ({"a": "b"}, ["c"], ["c"]),
    ({"a": "foo"}, None, None),
    ({"a": "foo"}, "bar", "bar"),
    ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
    ([1, 2], {"a": "b", "c": None}, {"a": "b"}),
    ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
]


@pytest.mark.parametrize(("original", "patch", "expected"), RFC7386_APPENDIX)
def test_json_merge_patch_rfc7386_appendix(original: Any, patch: Any, expected: Any) -> None:
    before = json.dumps(original)
    assert apply_json_merge_patch(original, patch) == expected
    assert json.dumps(original) == before


def test_json_merge_patch_result_shares_nothing() -> None:
    original = {"keep": {"deep": [1]}, "change": {"x": 1}}
    out = apply_json_merge_patch(original, {"change": {"y": 2}})
    out["keep"]["deep"].append(2)
    assert original == {"keep": {"deep": [1]}, "change": {"x": 1}}


# --------------------------------------------------------------------------- RFC 6902

RFC6902_OK = [
    # A.1 .. A.10, A.14, A.16 of RFC 6902
    ({"foo": "bar"}, [{"op": "add", "path": "/baz", "value": "qux"}], {"baz": "qux", "foo": "bar"}),
    (
        {"foo": ["bar", "baz"]},
        [{"op": "add", "path": "/foo/1", "value": "qux"}],
        {"foo": ["bar", "qux", "baz"]},
    ),
    ({"baz": "qux", "foo": "bar"}, [{"op": "remove", "path": "/baz"}], {"foo": "bar"}),
    ({"foo": ["bar", "qux", "baz"]}, [{"op": "remove", "path": "/foo/1"}], {"foo": ["bar", "baz"]}),
    (
        {"baz": "qux", "foo": "bar"},
        [{"op": "replace", "path": "/baz", "value": "boo"}],
        {"baz": "boo", "foo": "bar"},
    ),
    (
        {"foo": {"bar": "baz", "waldo": "fred"}, "qux": {"corge": "grault"}},
        [{"op": "move", "from": "/foo/waldo", "path": "/qux/thud"}],
        {"foo": {"bar": "baz"}, "qux": {"corge": "grault", "thud": "fred"}},
    ),
    (
        {"foo": ["all", "grass", "cows", "eat"]},
        [{"op": "move", "from": "/foo/1", "path": "/foo/3"}],
        {"foo": ["all", "cows", "eat", "grass"]},
    ),
    (
        {"baz": "qux", "foo": ["a", 2, "c"]},
        [{"op": "test", "path": "/baz", "value": "qux"}, {"op": "test", "path": "/foo/1", "value": 2}],
        {"baz": "qux", "foo": ["a", 2, "c"]},
    ),
    (
        {"foo": "bar"},
        [{"op": "add", "path": "/child", "value": {"grandchild": {}}}],
        {"foo": "bar", "child": {"grandchild": {}}},
    ),
    (
        {"foo": ["bar"]},
        [{"op": "add", "path": "/foo/-", "value": ["abc", "def"]}],
        {"foo": ["bar", ["abc", "def"]]},
    ),
    ({"/": 9, "~1": 10}, [{"op": "test", "path": "/~01", "value": 10}], {"/": 9, "~1": 10}),
    ({"foo": "bar"}, [{"op": "add", "path": "/baz", "value": None}], {"foo": "bar", "baz": None}),
    # copy, root operations, escapes
    ({"a": {"b": [1]}}, [{"op": "copy", "from": "/a", "path": "/c"}], {"a": {"b": [1]}, "c": {"b": [1]}}),
    ({"a": 1}, [{"op": "replace", "path": "", "value": [1]}], [1]),
    ({"a/b": 1}, [{"op": "move", "from": "/a~1b", "path": "/c~0d"}], {"c~d": 1}),
    ({"a": 1}, [{"op": "test", "path": "/a", "value": 1.0}], {"a": 1}),
    (
        {"metadata": {"labels": {"app": "web"}}},
        [{"op": "add", "path": "/metadata/labels/app.kubernetes.io~1name", "value": "x"}],
        {"metadata": {"labels": {"app": "web", "app.kubernetes.io/name": "x"}}},
    ),
]


@pytest.mark.parametrize(("doc", "ops", "expected"), RFC6902_OK)
def test_json_patch_rfc6902(doc: Any, ops: list[Any], expected: Any) -> None:
    before = json.dumps(doc)
    assert apply_json_patch(doc, ops) == expected
    assert json.dumps(doc) == before


def test_json_patch_copy_is_independent() -> None:
    out = apply_json_patch({"a": {"b": 1}}, [{"op": "copy", "from": "/a", "path": "/c"}])
    out["c"]["b"] = 2
    assert out["a"] == {"b": 1}


RFC6902_ERRORS = [
    ({"foo": "bar"}, [{"op": "add", "path": "/baz/bat", "value": "qux"}], "does not exist"),  # A.12
    ({"baz": "qux"}, [{"op": "test", "path": "/baz", "value": "bar"}], "test failed"),  # A.9
    ({"foo": ["bar"]}, [{"op": "test", "path": "/foo/0", "value": 1}], "test failed"),
    ({"a": True}, [{"op": "test", "path": "/a", "value": 1}], "test failed"),
    ({"foo": "bar"}, [{"op": "remove", "path": "/nope"}], "does not exist"),
    ({"foo": "bar"}, [{"op": "replace", "path": "/nope", "value": 1}], "does not exist"),
    ({"foo": [1]}, [{"op": "add", "path": "/foo/5", "value": 1}], "out of range"),
    ({"foo": [1]}, [{"op": "remove", "path": "/foo/1"}], "out of range"),
    ({"foo": [1]}, [{"op": "add", "path": "/foo/01", "value": 1}], "invalid array index"),
    ({"foo": [1]}, [{"op": "add", "path": "/foo/-1", "value": 1}], "invalid array index"),
    ({"foo": 1}, [{"op": "frobnicate", "path": "/foo"}], "unknown operation"),
    ({"foo": 1}, [{"op": "add", "path": "/bar"}], "needs a 'value'"),
    ({"foo": 1}, [{"op": "add", "value": 1}], "needs a string 'path'"),
    ({"foo": 1}, [{"op": "move", "path": "/bar"}], "needs a string 'from'"),
    ({"foo": {"a": 1}}, [{"op": "move", "from": "/foo", "path": "/foo/a/b"}], "own child"),
    ({"foo": 1}, [{"op": "add", "path": "foo", "value": 1}], "must start with '/'"),
    ({"foo": 1}, [{"op": "add", "path": "/a~2", "value": 1}], "invalid escape"),
    ({"foo": 1}, ["add"], "not an object"),
    ({"foo": 1}, [{"op": "remove", "path": ""}], "whole document"),
]


@pytest.mark.parametrize(("doc", "ops", "message"), RFC6902_ERRORS)
def test_json_patch_errors(doc: Any, ops: list[Any], message: str) -> None:
    before = json.dumps(doc)
    with pytest.raises(PatchError, match=message):
        apply_json_patch(doc, ops)
    assert json.dumps(doc) == before


def test_json_patch_not_a_list() -> None:
    with pytest.raises(PatchError, match="list of operations"):
        apply_json_patch({}, {"op": "add"})  # type: ignore[arg-type]


def test_json_patch_is_atomic_on_failure() -> None:
    doc = {"a": 1}
    with pytest.raises(PatchError):
        apply_json_patch(
            doc, [{"op": "add", "path": "/b", "value": 2}, {"op": "test", "path": "/a", "value": 2}]
        )
    assert doc == {"a": 1}
