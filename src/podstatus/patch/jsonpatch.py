"""JSON merge patch (RFC 7386) and JSON patch (RFC 6902), as the API server applies them."""

from __future__ import annotations

from typing import Any

from .values import PatchError, clone, json_equal


def apply_json_merge_patch(original: Any, patch: Any) -> Any:
    """Apply an RFC 7386 JSON merge patch; returns a new value, inputs untouched."""
    if not isinstance(patch, dict):
        return clone(patch)
    target = dict(original) if isinstance(original, dict) else {}
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        else:
            target[key] = apply_json_merge_patch(target.get(key), value)
    # Untouched members were shared by the shallow copy above: clone the result once.
    return {k: (v if k in patch else clone(v)) for k, v in target.items()}


def apply_json_patch(original: Any, operations: list[Any]) -> Any:
    """Apply an RFC 6902 JSON patch; returns a new value, inputs untouched."""
    if not isinstance(operations, list):
        raise PatchError("a JSON patch must be a list of operations")
    doc = clone(original)
    for n, op in enumerate(operations):
        if not isinstance(op, dict):
            raise PatchError(f"operation {n} is not an object")
        name = op.get("op")
        path = _require_str(op, "path", n)
        try:
            if name == "add":
                doc = _jp_add(doc, path, clone(_require_value(op, n)))
            elif name == "remove":
                doc, _ = _jp_remove(doc, path)
            elif name == "replace":
                value = clone(_require_value(op, n))
                _jp_get(doc, path)  # the target must exist
                doc, _ = _jp_remove(doc, path, allow_root=True)
                doc = _jp_add(doc, path, value)
            elif name == "move":
                src = _require_str(op, "from", n)
                if src != path:
                    if path.startswith(src + "/"):
                        raise PatchError(f"cannot move {src!r} into its own child {path!r}")
                    doc, value = _jp_remove(doc, src)
                    doc = _jp_add(doc, path, value)
                else:
                    _jp_get(doc, src)
            elif name == "copy":
                src = _require_str(op, "from", n)
                doc = _jp_add(doc, path, clone(_jp_get(doc, src)))
            elif name == "test":
                if not json_equal(_jp_get(doc, path), _require_value(op, n), go=False):
                    raise PatchError(f"test failed: value at {path!r} differs")
            else:
                raise PatchError(f"unknown operation {name!r}")
        except PatchError as exc:
            raise PatchError(f"operation {n} ({name}): {exc}") from None
    return doc


def _require_str(op: dict[str, Any], field: str, n: int) -> str:
    value = op.get(field)
    if not isinstance(value, str):
        raise PatchError(f"operation {n} needs a string {field!r}")
    return value


def _require_value(op: dict[str, Any], n: int) -> Any:
    if "value" not in op:
        raise PatchError(f"operation {n} ({op.get('op')}) needs a 'value'")
    return op["value"]


def _jp_tokens(pointer: str) -> list[str]:
    if pointer == "":
        return []
    if not pointer.startswith("/"):
        raise PatchError(f"invalid JSON pointer {pointer!r}: must start with '/'")
    tokens = pointer[1:].split("/")
    for t in tokens:
        rest = t.replace("~0", "").replace("~1", "")
        if "~" in rest:
            raise PatchError(f"invalid escape in JSON pointer {pointer!r}")
    return [t.replace("~1", "/").replace("~0", "~") for t in tokens]


def _jp_index(token: str, size: int, pointer: str, *, for_add: bool) -> int:
    if for_add and token == "-":
        return size
    if not token.isdigit() or (len(token) > 1 and token[0] == "0") or not token.isascii():
        raise PatchError(f"invalid array index {token!r} in {pointer!r}")
    idx = int(token)
    if idx > size or (idx == size and not for_add):
        raise PatchError(f"array index {idx} out of range in {pointer!r}")
    return idx


def _jp_parent(doc: Any, pointer: str) -> tuple[Any, str]:
    tokens = _jp_tokens(pointer)
    node = doc
    for t in tokens[:-1]:
        node = _jp_step(node, t, pointer)
    return node, tokens[-1]


def _jp_step(node: Any, token: str, pointer: str) -> Any:
    if isinstance(node, dict):
        if token not in node:
            raise PatchError(f"path {pointer!r} does not exist")
        return node[token]
    if isinstance(node, list):
        return node[_jp_index(token, len(node), pointer, for_add=False)]
    raise PatchError(f"path {pointer!r} does not exist")


def _jp_get(doc: Any, pointer: str) -> Any:
    node = doc
    for t in _jp_tokens(pointer):
        node = _jp_step(node, t, pointer)
    return node


def _jp_add(doc: Any, pointer: str, value: Any) -> Any:
    if pointer == "":
        return value
    parent, last = _jp_parent(doc, pointer)
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        parent.insert(_jp_index(last, len(parent), pointer, for_add=True), value)
    else:
        raise PatchError(f"path {pointer!r} does not exist")
    return doc


def _jp_remove(doc: Any, pointer: str, *, allow_root: bool = False) -> tuple[Any, Any]:
    if pointer == "":
        if allow_root:
            return None, doc
        raise PatchError("cannot remove the whole document")
    parent, last = _jp_parent(doc, pointer)
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchError(f"path {pointer!r} does not exist")
        return doc, parent.pop(last)
    if isinstance(parent, list):
        return doc, parent.pop(_jp_index(last, len(parent), pointer, for_add=False))
    raise PatchError(f"path {pointer!r} does not exist")
