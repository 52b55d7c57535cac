"""Field sets in the ``FieldsV1`` encoding, and the schema-aware walks server-side apply needs.

A field set names fields of an object, as ``metadata.managedFields[].fieldsV1`` does:
a trie whose keys are path elements —

- ``f:<name>``   a field of a struct or a key of a map,
- ``k:<json>``   an item of an associative list, by its key fields (``k:{"type":"Ready"}``),
- ``v:<json>``   an item of a set (``v:"example.com/finalizer"``),
- ``i:<n>``      an item of a list by position (not made by this server, understood when read),

and ``"."`` marks that the node itself belongs to the set (only written when the node
also has children; a member without children is ``{}``). Everything here works on that
trie, as plain dicts, so decoding and encoding ``managedFields`` costs almost nothing.
Internally a member is marked with ``"."`` even without children: ``{"f:a": {".": {}}}``.

The walks follow sigs.k8s.io/structured-merge-diff (the library kube-apiserver uses),
rule by rule: which nodes are members of an object's set (``to_field_set``), what a
comparison reports as added, modified and removed (``compare``), how an applied
configuration merges into the live object (``merge``), and which fields an applier
gave up are removed (``prune``). The schema is reduced to what these rules need: which
lists are associative (and their keys), which are sets, which lists and structs are
atomic (:mod:`podstatus.server.fieldmanager.fieldschema`). Everything not described is a granular
struct or map, and a list not described is atomic.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import msgspec

__all__ = [
    "Comparison",
    "FieldSetError",
    "Schema",
    "compare",
    "decode",
    "encode",
    "exclude",
    "finish",
    "from_paths",
    "insert",
    "intersection",
    "is_empty",
    "item_element",
    "merge",
    "paths",
    "prune",
    "render_path",
    "subtract",
    "to_field_set",
    "union",
]

Node = dict[str, Any]
SPath = tuple[str, ...]
_MEMBER = "."
_MISSING: Any = object()


class FieldSetError(ValueError):
    """An object does not fit the schema (a list item without its key, a duplicate key...)."""


# --- the schema ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ListType:
    kind: str  # "map" (associative), "set" or "atomic"
    keys: tuple[str, ...] = ()
    defaults: Mapping[str, Any] = field(default_factory=dict)


_ATOMIC_LIST = ListType("atomic")


class Schema:
    """The list and map types of one kind, by field path (list items are transparent in paths).

    ``lists`` maps a path to ``("map", keys[, key defaults])`` or ``"set"``; ``atomic`` holds
    paths of atomic structs and maps, and of associative lists whose items are atomic.
    """

    __slots__ = ("_atomic", "_lists")

    def __init__(
        self, lists: Mapping[SPath, Any], atomic: frozenset[SPath] | set[SPath] = frozenset()
    ) -> None:
        parsed: dict[SPath, ListType] = {}
        for path, desc in lists.items():
            if desc == "set" or desc == ("set",):
                parsed[path] = ListType("set")
            elif desc == "atomic":
                parsed[path] = _ATOMIC_LIST
            else:
                defaults = dict(desc[2]) if len(desc) > 2 else {}
                parsed[path] = ListType("map", tuple(desc[1]), defaults)
        self._lists = parsed
        self._atomic = frozenset(atomic)

    @classmethod
    def from_merge_keys(cls, merge_keys: Mapping[SPath, str]) -> Schema:
        """A schema from strategic-merge keys: a list with a key is associative, "" a set."""
        return cls({p: ("set" if not k else ("map", (k,))) for p, k in merge_keys.items()})

    def list_type(self, spath: SPath) -> ListType:
        return self._lists.get(spath, _ATOMIC_LIST)

    def atomic(self, spath: SPath) -> bool:
        return spath in self._atomic


def _json(value: Any) -> str:
    # Go's encoding: no spaces; non-ASCII kept as is.
    return msgspec.json.encode(value).decode()


def item_element(item: Any, lt: ListType, spath: SPath) -> str:
    """The path element of a list item (``k:`` for associative lists, ``v:`` for sets)."""
    if lt.kind == "set":
        if isinstance(item, dict | list):
            raise FieldSetError(f"{_dotted(spath)}: a set may only hold scalars")
        return "v:" + _json(item)
    if not isinstance(item, dict):
        raise FieldSetError(f"{_dotted(spath)}: an associative list may only hold objects")
    key: dict[str, Any] = {}
    for name in sorted(lt.keys):
        value = item.get(name, _MISSING)
        if value is _MISSING or value is None:
            if name not in lt.defaults:
                raise FieldSetError(
                    f"{_dotted(spath)}: associative list with keys has an element that omits key field "
                    f'"{name}" (and doesn\'t have default value)'
                )
            value = lt.defaults[name]
        key[name] = value
    return "k:" + _json(key)


def _dotted(spath: SPath) -> str:
    return "." + ".".join(spath)


# --- sets as tries -----------------------------------------------------------------------
#
# A set is its ``fieldsV1`` value itself: a child node ``{}`` is a member without children,
# a child node with ``"."`` a member with children, any other child node only leads to
# members. (The root is never a member: ``{}`` there is the empty set.) Results are built
# in the real server's order (``"."`` first, then the elements sorted) and share unchanged
# subtrees with their inputs, so sets must never be changed once built. Walks that build a
# set mark members on a scratch trie (``{".": {}}`` for every member) and finish it once.


def _is_member(node: Node) -> bool:
    return not node or _MEMBER in node


def _make(member: bool, children: dict[str, Node]) -> Node | None:
    if not children:
        return {} if member else None
    out: Node = {_MEMBER: {}} if member else {}
    if len(children) == 1:
        out.update(children)
        return out
    for key in sorted(children, key=_element_order):
        out[key] = children[key]
    return out


def _root(children: dict[str, Node]) -> Node:
    return _make(False, children) or {}


def decode(fields_v1: Any) -> Node:
    """Check a ``fieldsV1`` value (raises FieldSetError when it is not one) and return it as a set."""
    if not isinstance(fields_v1, dict):
        raise FieldSetError("fieldsV1 must be an object")
    for key, child in fields_v1.items():
        if key == _MEMBER:
            if child != {}:
                raise FieldSetError('"." must map to an empty object')
            continue
        if not isinstance(key, str) or key[:2] not in ("f:", "k:", "v:", "i:"):
            raise FieldSetError(f"unknown path element {key!r}")
        decode(child)
    return fields_v1


def encode(node: Node) -> dict[str, Any]:
    """The ``fieldsV1`` value of a set (sets are kept in that form)."""
    return node


_KIND_RANK = {"f": 0, "k": 1, "v": 2, "i": 3}


def _element_order(element: str) -> tuple[int, str]:
    # Field names sort before keyed items, then values, then indices (PathElement.Less).
    return (_KIND_RANK.get(element[0], 4), element)


def is_empty(node: Node) -> bool:
    return not node


def insert(scratch: Node, path: tuple[str, ...]) -> None:
    """Mark ``path`` a member of a scratch trie (finish it with :func:`finish`)."""
    node = scratch
    for element in path:
        child = node.get(element)
        if child is None:
            child = node[element] = {}
        node = child
    node[_MEMBER] = {}


def finish(scratch: Node) -> Node:
    """The set a scratch trie marks."""
    return _root({k: _finish(v) for k, v in scratch.items() if k != _MEMBER})


def _finish(node: Node) -> Node:
    children = {k: _finish(v) for k, v in node.items() if k != _MEMBER}
    made = _make(_MEMBER in node, children)
    return made if made is not None else {}


def from_paths(*paths: tuple[str, ...]) -> Node:
    scratch: Node = {}
    for path in paths:
        insert(scratch, path)
    return finish(scratch)


def union(a: Node, b: Node) -> Node:
    """Members of either; ``a`` itself when ``b`` adds nothing to it."""
    if not b or a is b:
        return a
    if not a:
        return b
    children = _union_children(a, b)
    return _root(children) if children is not None else a


def _union_children(a: Node, b: Node) -> dict[str, Node] | None:
    """The children of a | b, or None when ``b`` adds nothing below ``a``."""
    children: dict[str, Node] | None = None
    for key, child in b.items():
        if key == _MEMBER:
            continue
        mine = a.get(key)
        merged = child if mine is None else _union(mine, child)
        if merged is not mine:
            if children is None:
                children = {k: v for k, v in a.items() if k != _MEMBER}
            children[key] = merged
    return children


def _union(a: Node, b: Node) -> Node:
    if a is b:
        return a
    member = _is_member(a)
    children = _union_children(a, b)
    if children is None:
        if member or not _is_member(b):
            return a  # b adds nothing
        children = {k: v for k, v in a.items() if k != _MEMBER}
    made = _make(member or _is_member(b), children)
    return made if made is not None else {}


def subtract(a: Node, b: Node) -> Node:
    """Members of ``a`` that are not members of ``b``."""
    if not a or not b:
        return a
    children = _subtract_children(a, b)
    return _root(children) if children is not None else a


def _subtract_children(a: Node, b: Node) -> dict[str, Node] | None:
    """The children of a - b, or None when nothing of ``a`` is taken away."""
    children: dict[str, Node] = {}
    changed = False
    for key, child in a.items():
        if key == _MEMBER:
            continue
        other = b.get(key)
        if other is None:
            children[key] = child
            continue
        rest = _subtract(child, other)
        if rest is not child:
            changed = True
        if rest is not None:
            children[key] = rest
    return children if changed else None


def _subtract(a: Node, b: Node) -> Node | None:
    member = _is_member(a) and not _is_member(b)
    children = _subtract_children(a, b)
    if children is None:
        if member == _is_member(a):
            return a
        children = {k: v for k, v in a.items() if k != _MEMBER}
    return _make(member, children)


def intersection(a: Node, b: Node) -> Node:
    if not a or not b:
        return {}
    return _root(_intersect_children(a, b))


def _intersect_children(a: Node, b: Node) -> dict[str, Node]:
    children: dict[str, Node] = {}
    small, big = (a, b) if len(a) <= len(b) else (b, a)
    for key, child in small.items():
        if key == _MEMBER:
            continue
        other = big.get(key)
        if other is None:
            continue
        both = _make(_is_member(child) and _is_member(other), _intersect_children(child, other))
        if both is not None:
            children[key] = both
    return children


def exclude(node: Node, prefixes: Node) -> Node:
    """``node`` without everything at or below the members of ``prefixes`` (a reset-fields filter)."""
    if not node or not prefixes:
        return node
    children = _exclude_children(node, prefixes)
    return _root(children) if children is not None else node


def _exclude_children(node: Node, prefixes: Node) -> dict[str, Node] | None:
    children: dict[str, Node] = {}
    changed = False
    for key, child in node.items():
        if key == _MEMBER:
            continue
        pre = prefixes.get(key)
        if pre is None:
            children[key] = child
            continue
        changed = True
        if _is_member(pre):
            continue
        rest = _exclude_children(child, pre)
        made = _make(
            _is_member(child), rest if rest is not None else {k: v for k, v in child.items() if k != _MEMBER}
        )
        if made is not None:
            children[key] = made
    return children if changed else None


def paths(node: Node, prefix: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """The members, as element tuples, in the set's order."""
    if prefix and _is_member(node):
        yield prefix
    for key in sorted((k for k in node if k != _MEMBER), key=_element_order):
        yield from paths(node[key], (*prefix, key))


def render_path(path: tuple[str, ...]) -> str:
    """A path as structured-merge-diff prints it: ``.spec.containers[name="a"].image``."""
    out: list[str] = []
    for element in path:
        kind, text = element[0], element[2:]
        if kind == "f":
            out.append("." + text)
        elif kind == "k":
            key = json.loads(text)
            out.append("[" + ",".join(f"{k}={_json(v)}" for k, v in key.items()) + "]")
        elif kind == "v":
            out.append("[=" + text + "]")
        else:
            out.append("[" + text + "]")
    return "".join(out)


# --- the walks -------------------------------------------------------------------------------


def to_field_set(obj: Mapping[str, Any], schema: Schema) -> Node:
    """The fields an applied configuration sets (structured-merge-diff's ToFieldSet)."""
    scratch: Node = {}
    _set_of_map(obj, (), schema, scratch)
    return finish(scratch)


def _set_of_map(value: Mapping[str, Any], spath: SPath, schema: Schema, node: Node) -> None:
    for key, child in value.items():
        cpath = (*spath, key)
        element = "f:" + key
        if isinstance(child, dict):
            if not child or schema.atomic(cpath):
                node.setdefault(element, {})[_MEMBER] = {}
            else:
                _set_of_map(child, cpath, schema, node.setdefault(element, {}))
        elif isinstance(child, list):
            lt = schema.list_type(cpath)
            if lt.kind == "atomic":
                node.setdefault(element, {})[_MEMBER] = {}
            elif child:
                _set_of_list(child, cpath, lt, schema, node.setdefault(element, {}))
        else:
            node.setdefault(element, {})[_MEMBER] = {}


def _set_of_list(items: list[Any], spath: SPath, lt: ListType, schema: Schema, node: Node) -> None:
    seen: set[str] = set()
    for item in items:
        element = item_element(item, lt, spath)
        if element in seen:
            raise FieldSetError(f"{_dotted(spath)}: duplicate entries for key {render_path((element,))}")
        seen.add(element)
        child = node.setdefault(element, {})
        child[_MEMBER] = {}
        if isinstance(item, dict) and item and not schema.atomic(spath):
            _set_of_map(item, spath, schema, child)


@dataclass(slots=True)
class Comparison:
    """What changed from one object to another, as three field sets."""

    added: Node = field(default_factory=dict)
    modified: Node = field(default_factory=dict)
    removed: Node = field(default_factory=dict)

    def changed(self) -> Node:
        return union(self.modified, self.added)

    def exclude(self, prefixes: Node) -> Comparison:
        return Comparison(exclude(self.added, prefixes), exclude(self.modified, prefixes),
                          exclude(self.removed, prefixes))  # fmt: skip

    def empty(self) -> bool:
        return not (self.added or self.modified or self.removed)


def compare(lhs: Mapping[str, Any], rhs: Mapping[str, Any], schema: Schema) -> Comparison:
    """structured-merge-diff's Compare of two objects of one kind.

    A node only one side has is added (removed) with everything below it; a leaf (a
    scalar, an atomic list or struct, or a map or list empty on both sides) that differs
    is modified. Equal subtrees are skipped without a walk.
    """
    out = Comparison()
    _compare_maps(lhs, rhs, (), (), schema, out)
    return Comparison(finish(out.added), finish(out.modified), finish(out.removed))


def _mark(node: Node, path: tuple[str, ...]) -> None:
    insert(node, path)


def _compare(lv: Any, rv: Any, spath: SPath, path: tuple[str, ...], schema: Schema, out: Comparison) -> None:
    if lv is not _MISSING and rv is not _MISSING and type(lv) is type(rv) and lv == rv:
        return
    probe = rv if rv is not _MISSING and rv is not None else lv
    if isinstance(probe, dict) and not schema.atomic(spath):
        ld = lv if isinstance(lv, dict) else None
        rd = rv if isinstance(rv, dict) else None
        mismatch = (lv not in (None, _MISSING) and ld is None) or (rv not in (None, _MISSING) and rd is None)
        if not mismatch and (ld or rd):
            _compare_maps(ld or {}, rd or {}, spath, path, schema, out)
            _ends(lv, rv, path, out)
            return
    elif isinstance(probe, list):
        lt = schema.list_type(spath)
        ll = lv if isinstance(lv, list) else None
        rl = rv if isinstance(rv, list) else None
        mismatch = (lv not in (None, _MISSING) and ll is None) or (rv not in (None, _MISSING) and rl is None)
        if lt.kind != "atomic" and not mismatch and (ll or rl):
            _compare_lists(ll or [], rl or [], spath, path, lt, schema, out)
            _ends(lv, rv, path, out)
            return
    # A leaf.
    if lv is _MISSING:
        _mark(out.added, path)
    elif rv is _MISSING:
        _mark(out.removed, path)
    else:
        _mark(out.modified, path)


def _ends(lv: Any, rv: Any, path: tuple[str, ...], out: Comparison) -> None:
    if lv is _MISSING:
        _mark(out.added, path)
    elif rv is _MISSING:
        _mark(out.removed, path)


def _compare_maps(
    lhs: Mapping[str, Any], rhs: Mapping[str, Any], spath: SPath, path: tuple[str, ...], schema: Schema,
    out: Comparison,
) -> None:  # fmt: skip
    for key, lv in lhs.items():
        rv = rhs.get(key, _MISSING)
        if lv is rv or (type(lv) is type(rv) and lv == rv):
            continue  # equal: nothing to walk (the common case, checked without a call)
        _compare(lv, rv, (*spath, key), (*path, "f:" + key), schema, out)
    for key, rv in rhs.items():
        if key not in lhs:
            _compare(_MISSING, rv, (*spath, key), (*path, "f:" + key), schema, out)


def _index(items: list[Any], spath: SPath, lt: ListType) -> dict[str, Any]:
    # The first of duplicated items wins (the live object may hold duplicates).
    out: dict[str, Any] = {}
    for item in items:
        try:
            element = item_element(item, lt, spath)
        except FieldSetError:
            continue
        out.setdefault(element, item)
    return out


def _compare_lists(
    lhs: list[Any], rhs: list[Any], spath: SPath, path: tuple[str, ...], lt: ListType, schema: Schema,
    out: Comparison,
) -> None:  # fmt: skip
    left = _index(lhs, spath, lt)
    right = _index(rhs, spath, lt)
    atomic_items = schema.atomic(spath) or lt.kind == "set"
    for element in [*left, *(e for e in right if e not in left)]:
        lv, rv = left.get(element, _MISSING), right.get(element, _MISSING)
        ipath = (*path, element)
        if atomic_items:
            if lv is _MISSING:
                _mark(out.added, ipath)
            elif rv is _MISSING:
                _mark(out.removed, ipath)
            elif lv != rv:
                _mark(out.modified, ipath)
            continue
        if lv is not _MISSING and rv is not _MISSING and lv == rv:
            continue
        if isinstance(lv if lv is not _MISSING else rv, dict):
            _compare_maps(lv if isinstance(lv, dict) else {}, rv if isinstance(rv, dict) else {}, spath, ipath,
                          schema, out)  # fmt: skip
        _ends(lv, rv, ipath, out)


def merge(live: Mapping[str, Any], config: Mapping[str, Any], schema: Schema) -> dict[str, Any]:
    """The live object with an applied configuration merged in (structured-merge-diff's Merge).

    Maps merge key by key, associative lists and sets item by item (in the order
    structured-merge-diff gives them), everything else (scalars, atomic lists and
    structs) is replaced. A null in the configuration removes the field.
    """
    return _merge_maps(live, config, (), schema)


def _merge_maps(
    live: Mapping[str, Any], config: Mapping[str, Any], spath: SPath, schema: Schema
) -> dict[str, Any]:
    out = dict(live)
    for key, value in config.items():
        if value is None:
            out.pop(key, None)
            continue
        out[key] = _merge_value(live.get(key, _MISSING), value, (*spath, key), schema)
    return out


def _merge_value(live: Any, value: Any, spath: SPath, schema: Schema) -> Any:
    if isinstance(value, dict) and isinstance(live, dict) and not schema.atomic(spath):
        return _merge_maps(live, value, spath, schema)
    if isinstance(value, list) and isinstance(live, list):
        lt = schema.list_type(spath)
        if lt.kind != "atomic":
            return _merge_lists(live, value, spath, lt, schema)
    return _plain(value)


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _merge_lists(live: list[Any], config: list[Any], spath: SPath, lt: ListType, schema: Schema) -> list[Any]:
    lhs = [(item_element(i, lt, spath) if _keyable(i, lt) else None, i) for i in live]
    rhs = [(item_element(i, lt, spath), i) for i in config]
    left = {e: i for e, i in reversed(lhs) if e is not None}
    right = {e: i for e, i in reversed(rhs)}
    # Items both sides have come in the configuration's order; the live object's other
    # items stay where they were relative to them.
    shared = [e for e, _ in rhs if e in left]
    shared.reverse()
    following = shared.pop() if shared else None
    merged: set[str] = set()
    out: list[Any] = []
    i = j = 0

    def take(element: str) -> None:
        merged.add(element)
        if element in left and lt.kind == "map" and not schema.atomic(spath):
            out.append(_merge_value(left[element], right[element], spath, schema))
        else:
            out.append(_plain(right[element]))

    while i < len(lhs) or j < len(rhs):
        if i < len(lhs) and j < len(rhs):
            element = lhs[i][0]
            if element is not None and element == rhs[j][0]:
                if element not in merged:
                    take(element)
                i += 1
                j += 1
                following = shared.pop() if shared else None
                continue
            if element in right and following is not None and following != element:
                i += 1
                continue
        if i < len(lhs):
            element, item = lhs[i]
            if element is None or element not in right:
                out.append(item)
                i += 1
                continue
            if element in merged:
                i += 1
                continue
        if j < len(rhs):
            element = rhs[j][0]
            if element not in merged:
                take(element)
            j += 1
            if following is not None and following == element:
                following = shared.pop() if shared else None
    return out


def _keyable(item: Any, lt: ListType) -> bool:
    try:
        item_element(item, lt, ())
    except FieldSetError:
        return False
    return True


def prune(obj: dict[str, Any], gone: Node, owned: Node, schema: Schema) -> dict[str, Any]:
    """``obj`` without the fields of ``gone`` (what an applier set last time) that nobody owns now.

    A named field an applier's last set led through (``.spec`` for ``.spec.x``) counts as
    set too, so a struct left empty goes; a node that leads to an owned field stays, and
    the key fields of a list item that stays are kept.
    """
    return _prune_map(obj, gone, owned, (), schema, ())


def _prune_map(
    obj: dict[str, Any], gone: Node, owned: Node, spath: SPath, schema: Schema, keep: tuple[str, ...]
) -> dict[str, Any]:
    out = dict(obj)
    for element, child in gone.items():
        if not element.startswith("f:"):
            continue
        name = element[2:]
        if name not in out or name in keep:
            continue
        owned_child = owned.get(element)
        if owned_child is None:
            del out[name]  # a named field: member or on the way to one, nobody owns anything below
            continue
        value = out[name]
        cpath = (*spath, name)
        if isinstance(value, dict) and not schema.atomic(cpath):
            out[name] = _prune_map(value, child, owned_child, cpath, schema, ())
        elif isinstance(value, list):
            lt = schema.list_type(cpath)
            if lt.kind != "atomic":
                out[name] = _prune_list(value, child, owned_child, cpath, lt, schema)
    return out


def _prune_list(
    items: list[Any], gone: Node, owned: Node, spath: SPath, lt: ListType, schema: Schema
) -> list[Any]:
    out: list[Any] = []
    for item in items:
        try:
            element = item_element(item, lt, spath)
        except FieldSetError:
            out.append(item)
            continue
        child = gone.get(element)
        if child is None:
            out.append(item)
            continue
        owned_child = owned.get(element)
        if owned_child is None:
            if _is_member(child):
                continue  # the item itself was set and nobody owns anything in it
            out.append(item)
            continue
        if isinstance(item, dict) and not schema.atomic(spath):
            item = _prune_map(item, child, owned_child, spath, schema, lt.keys)
        out.append(item)
    return out
