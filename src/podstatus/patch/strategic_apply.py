"""Applying a strategic merge patch as the API server does (``strategicpatch.StrategicMergePatch``)."""

from __future__ import annotations

from typing import Any

from .lists import (
    DELETE_PRIMITIVES,
    DIRECTIVE,
    MISSING,
    POD_MERGE_KEYS,
    RETAIN_KEYS,
    SET_ORDER,
    MergeKeys,
    Path,
    dedupe_scalars,
    element_kind,
    find_by_key,
    go_eq,
    index_of,
    normalize_slice_order,
    path_text,
)
from .values import PatchError, clone, kind_of


def apply_strategic_merge_patch(
    original: dict[str, Any], patch: dict[str, Any], *, merge_keys: MergeKeys = POD_MERGE_KEYS
) -> dict[str, Any]:
    """Apply a strategic merge patch the way the API server does; returns a new dict.

    ``merge_keys`` maps field paths (list items not included) to the merge key of that
    list; listed paths merge, all other lists are replaced. Raises :class:`PatchError`
    for malformed patches.
    """
    if not isinstance(patch, dict):
        raise PatchError(f"a strategic merge patch must be a JSON object, not {kind_of(patch)}")
    if not isinstance(original, dict):
        raise PatchError(f"the patched document must be a JSON object, not {kind_of(original)}")
    return _merge_map(clone(original), clone(patch), (), merge_keys)


def _merge_map(original: dict[str, Any], patch: dict[str, Any], path: Path, mk: MergeKeys) -> dict[str, Any]:
    # Both arguments are private copies: mutating them is fine and saves copying again.
    if DIRECTIVE in patch:
        directive = patch.pop(DIRECTIVE)
        if directive == "replace":
            return _clean_new_value(patch)
        if directive == "delete":
            return {}
        raise PatchError(f"{path_text(path)}: unknown $patch directive {directive!r}")
    _apply_retain_keys(original, patch, path)
    _apply_set_element_order(original, patch, path, mk)
    # Go walks the patch in random map order; take parallel deletion lists last (as they
    # are when $setElementOrder merged the list first) so the result is deterministic.
    items = sorted(patch.items(), key=lambda kv: kv[0].startswith(DELETE_PRIMITIVES))
    for key, pv in items:
        delete_list = False
        if key.startswith(DELETE_PRIMITIVES):
            key = _directive_field(key, DELETE_PRIMITIVES, path)
            delete_list = True
        if pv is None:
            original.pop(key, None)
            continue
        if key not in original or kind_of(original[key]) != kind_of(pv):
            if not delete_list:
                _set_clean(original, key, pv)
            continue
        sub = (*path, key)
        if isinstance(pv, dict):
            original[key] = _merge_map(original[key], pv, sub, mk)
        elif isinstance(pv, list):
            original[key] = _merge_slice_handler(original[key], pv, sub, mk, delete_list)
        else:
            original[key] = pv
    return original


def _apply_retain_keys(original: dict[str, Any], patch: dict[str, Any], path: Path) -> None:
    if RETAIN_KEYS not in patch:
        return
    keep = patch.pop(RETAIN_KEYS)
    if not isinstance(keep, list):
        raise PatchError(f"{path_text(path)}: $retainKeys must be a list of field names")
    allowed = {k for k in keep if isinstance(k, str)}
    for key, value in patch.items():
        if value is None or key.startswith((DELETE_PRIMITIVES, SET_ORDER)):
            continue
        if key not in allowed:
            raise PatchError(f"{path_text(path)}: field {key!r} is in the patch but not in $retainKeys")
    for key in list(original):
        if key not in allowed:
            del original[key]


def _apply_set_element_order(
    original: dict[str, Any], patch: dict[str, Any], path: Path, mk: MergeKeys
) -> None:
    for directive_key in [k for k in patch if k.startswith(SET_ORDER)]:
        order = patch.pop(directive_key)
        if not isinstance(order, list):
            raise PatchError(f"{path_text(path)}: {directive_key} must be a list")
        field = _directive_field(directive_key, SET_ORDER, path)
        sub = (*path, field)
        merge_key = mk.get(sub, "")
        orig_list = original.get(field)
        patch_list = patch.get(field)
        if field in original and not isinstance(orig_list, list):
            raise PatchError(f"{path_text(sub)}: $setElementOrder given for a field that is not a list")
        if field in patch and not isinstance(patch_list, list):
            raise PatchError(f"{path_text(sub)}: $setElementOrder given but the patch value is not a list")
        _validate_against_order(patch_list or [], order, merge_key, sub)
        if orig_list is not None and patch_list is not None:
            merged = _merge_slice_handler(orig_list, patch_list, sub, mk, False)
        elif patch_list is not None:
            merged = _clean_new_value(patch_list)
        elif orig_list is not None:
            merged = orig_list
        else:
            continue
        kind = element_kind(orig_list or [], patch_list or [], where=sub)
        in_order, server_only = _partition(merged, order, merge_key, kind, sub)
        original[field] = _normalize_element_order(
            in_order, server_only, order, orig_list or [], merge_key, kind
        )
        patch.pop(field, None)


def _validate_against_order(patch_list: list[Any], order: list[Any], merge_key: str, path: Path) -> None:
    # Every non-directive patch item must appear in $setElementOrder, in the same order.
    if not patch_list or not order:
        return
    items = [p for p in patch_list if not (merge_key and _is_delete(p, path))]
    pi = oi = 0
    while pi < len(items) and oi < len(order):
        if isinstance(items[pi], dict) and DIRECTIVE in items[pi]:
            pi += 1
            continue
        if _merge_key_equal(items[pi], order[oi], merge_key, path):
            pi += 1
        oi += 1
    if pi < len(items):
        raise PatchError(f"{path_text(path)}: the order of the patch list does not match $setElementOrder")


def _merge_slice_handler(
    original: list[Any], patch: list[Any], path: Path, mk: MergeKeys, delete_list: bool
) -> list[Any]:
    if path in mk or delete_list:
        return _merge_slice(original, patch, path, mk, mk.get(path, ""), delete_list)
    return _clean_new_value(patch)


def _merge_slice(
    original: list[Any], patch: list[Any], path: Path, mk: MergeKeys, merge_key: str, delete_list: bool
) -> list[Any]:
    if not original and not patch:
        return original
    kind = element_kind(original, patch, where=path)
    if kind != "object":
        if delete_list:
            return [v for v in original if not any(go_eq(v, d) for d in patch)]
        merged = dedupe_scalars(original + patch)
        ordering = patch
    else:
        if not merge_key:
            raise PatchError(f"{path_text(path)}: cannot merge a list of objects without a merge key")
        original, ordering = _merge_special_elements(original, patch, merge_key, path)
        merged = original[:]
        for item in ordering:
            if merge_key not in item:
                raise PatchError(f"{path_text(path)}: list element {item!r} has no merge key {merge_key!r}")
            idx = find_by_key(merged, merge_key, item[merge_key])
            if idx >= 0:
                merged[idx] = _merge_map(merged[idx], item, path, mk)
            else:
                merged.append(_clean_new_value(item))
    in_patch, server_only = _partition(merged, ordering, merge_key, kind, path)
    return _normalize_element_order(in_patch, server_only, ordering, original, merge_key, kind)


def _merge_special_elements(
    original: list[Any], patch: list[Any], merge_key: str, path: Path
) -> tuple[list[Any], list[Any]]:
    """Apply ``$patch`` elements; return (original after deletions, remaining patch items)."""
    rest: list[Any] = []
    replace = False
    for item in patch:
        if DIRECTIVE not in item:
            rest.append(item)
            continue
        directive = item[DIRECTIVE]
        if directive == "delete":
            if merge_key not in item:
                raise PatchError(
                    f"{path_text(path)}: $patch: delete element {item!r} has no merge key {merge_key!r}"
                )
            original = [o for o in original if not go_eq(o.get(merge_key, MISSING), item[merge_key])]
        elif directive == "replace":
            replace = True  # keep scanning: other directives are still validated
        elif directive == "merge":
            raise PatchError(f"{path_text(path)}: $patch: merge is not supported in lists")
        else:
            raise PatchError(f"{path_text(path)}: unknown $patch directive {directive!r}")
    if replace:
        return [_clean_new_value(r) for r in rest], []
    return original, rest


def _partition(
    items: list[Any], by: list[Any], merge_key: str, kind: str, path: Path
) -> tuple[list[Any], list[Any]]:
    named: list[Any] = []
    others: list[Any] = []
    for item in items:
        if kind == "object":
            if not isinstance(item, dict) or merge_key not in item:
                raise PatchError(f"{path_text(path)}: list element {item!r} has no merge key {merge_key!r}")
            found = find_by_key(by, merge_key, item[merge_key]) >= 0
        else:
            found = any(go_eq(item, b) for b in by)
        (named if found else others).append(item)
    return named, others


def _normalize_element_order(
    patch: list[Any],
    server_only: list[Any],
    patch_order: list[Any],
    server_order: list[Any],
    merge_key: str,
    kind: str,
) -> list[Any]:
    """Patch items in patch order, server-only items slotted in per their original order."""
    patch = normalize_slice_order(patch, patch_order, merge_key, kind)
    server_only = normalize_slice_order(server_only, server_order, merge_key, kind)

    def index(item: Any) -> int:
        return index_of(server_order, item, merge_key, kind)

    out: list[Any] = []
    i = j = 0
    while i < len(server_only) or j < len(patch):
        if j >= len(patch):
            out.append(server_only[i])
            i += 1
        elif i >= len(server_only):
            out.append(patch[j])
            j += 1
        else:
            li, ri = index(server_only[i]), index(patch[j])
            if li >= 0 and ri >= 0 and li < ri:
                out.append(server_only[i])
                i += 1
            else:
                out.append(patch[j])
                j += 1
    return out


def _directive_field(key: str, prefix: str, path: Path) -> str:
    head, sep, field = key.partition("/")
    if head != prefix or not sep:
        raise PatchError(f"{path_text(path)}: malformed directive key {key!r}, expected {prefix}/<field>")
    return field


def _is_delete(item: Any, path: Path) -> bool:
    if not isinstance(item, dict):
        raise PatchError(f"{path_text(path)}: list element {item!r} is not an object")
    return bool(item.get(DIRECTIVE) == "delete")


def _merge_key_equal(a: Any, b: Any, merge_key: str, path: Path) -> bool:
    if not merge_key:
        return go_eq(a, b)
    for item in (a, b):
        if not isinstance(item, dict) or merge_key not in item:
            raise PatchError(f"{path_text(path)}: list element {item!r} has no merge key {merge_key!r}")
    return go_eq(a[merge_key], b[merge_key])


def _set_clean(target: dict[str, Any], key: str, value: Any) -> None:
    cleaned = _clean_new_value(value)
    if cleaned is MISSING:
        target.pop(key, None)
    else:
        target[key] = cleaned


def _clean_new_value(value: Any) -> Any:
    """A patch value taken as is: nulls and directives dropped (``removeDirectives``).

    Returns ``MISSING`` when the value itself is a directive map. Directive keys that Go
    would leave behind (and the typed decoding then drops) are dropped here.
    """
    if isinstance(value, dict):
        if DIRECTIVE in value:
            return MISSING
        out: dict[str, Any] = {}
        for k, v in value.items():
            if v is None or k == RETAIN_KEYS or k.startswith((SET_ORDER, DELETE_PRIMITIVES)):
                continue
            cv = _clean_new_value(v)
            if cv is not MISSING:
                out[k] = cv
        return out
    if isinstance(value, list):
        return [cv for cv in (_clean_new_value(v) for v in value) if cv is not MISSING]
    return value
