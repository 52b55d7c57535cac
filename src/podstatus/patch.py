"""Patches over plain JSON dicts: strategic merge (diff and apply), JSON merge, JSON patch.

Everything here is pure: no I/O and no dependency on other podstatus modules, so the
rules can be tested, and trusted, without a server. Inputs are never mutated.

The strategic merge patch code follows ``k8s.io/apimachinery/pkg/util/strategicpatch``
(v0.37) closely, including its less obvious choices, because patches we send must mean
to a real API server exactly what they mean to us, and the embedded API server must
answer like a real one:

- Without ``$setElementOrder``, merged lists are ordered "patch items first": items
  named by the patch keep the patch's order and server-only items are slotted in before
  the first patch item they preceded in the original. So a new element (or finalizer)
  sent alone ends up at the *front* of the list, as it does on a real server.
- ``{"$patch": "delete"}`` on a map leaves an empty map, not a missing field.
- A value for a field the original lacks is taken as is, minus nulls and minus any map
  carrying a ``$patch`` directive (``removeDirectives``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any

try:  # msgspec is a project dependency; the fallback only keeps this module importable alone.
    import msgspec as _msgspec
except ImportError:  # pragma: no cover
    _msgspec = None  # type: ignore[assignment]

__all__ = [
    "POD_MERGE_KEYS",
    "POD_RETAIN_KEYS_LISTS",
    "PatchError",
    "apply_json_merge_patch",
    "apply_json_patch",
    "apply_strategic_merge_patch",
    "diff_pod_status",
    "encode_patch",
    "has_changes",
]

JSON = Any
Path = tuple[str, ...]
MergeKeys = Mapping[Path, str]


class PatchError(ValueError):
    """A patch is malformed or cannot be applied; the API server maps it to 400/422."""


# Lists of core/v1 Pod with patchStrategy=merge, keyed by field path (list items are not
# path components). Generated from the struct tags of k8s.io/api v0.37.2. An empty merge
# key marks a list of primitives merged as a set (metadata.finalizers).
POD_MERGE_KEYS: Mapping[Path, str] = {
    ("metadata", "finalizers"): "",
    ("metadata", "ownerReferences"): "uid",
    ("spec", "containers"): "name",
    ("spec", "containers", "env"): "name",
    ("spec", "containers", "ports"): "containerPort",
    ("spec", "containers", "volumeDevices"): "devicePath",
    ("spec", "containers", "volumeMounts"): "mountPath",
    ("spec", "ephemeralContainers"): "name",
    ("spec", "ephemeralContainers", "env"): "name",
    ("spec", "ephemeralContainers", "ports"): "containerPort",
    ("spec", "ephemeralContainers", "volumeDevices"): "devicePath",
    ("spec", "ephemeralContainers", "volumeMounts"): "mountPath",
    ("spec", "evictionResponders"): "name",
    ("spec", "hostAliases"): "ip",
    ("spec", "imagePullSecrets"): "name",
    ("spec", "initContainers"): "name",
    ("spec", "initContainers", "env"): "name",
    ("spec", "initContainers", "ports"): "containerPort",
    ("spec", "initContainers", "volumeDevices"): "devicePath",
    ("spec", "initContainers", "volumeMounts"): "mountPath",
    ("spec", "resourceClaims"): "name",
    ("spec", "schedulingGates"): "name",
    ("spec", "topologySpreadConstraints"): "topologyKey",
    ("spec", "volumes"): "name",
    ("spec", "volumes", "ephemeral", "volumeClaimTemplate", "metadata", "finalizers"): "",
    ("spec", "volumes", "ephemeral", "volumeClaimTemplate", "metadata", "ownerReferences"): "uid",
    ("status", "conditions"): "type",
    ("status", "containerStatuses", "allocatedResourcesStatus"): "name",
    ("status", "containerStatuses", "volumeMounts"): "mountPath",
    ("status", "ephemeralContainerStatuses", "allocatedResourcesStatus"): "name",
    ("status", "ephemeralContainerStatuses", "volumeMounts"): "mountPath",
    ("status", "hostIPs"): "ip",
    ("status", "initContainerStatuses", "allocatedResourcesStatus"): "name",
    ("status", "initContainerStatuses", "volumeMounts"): "mountPath",
    ("status", "nodeAllocatableResourceClaimStatuses"): "resourceClaimName",
    ("status", "nodeAllocatableResourceClaimStatuses", "mapping"): "name",
    ("status", "nodeAllocatableResourceClaimStatuses", "overhead"): "name",
    ("status", "podIPs"): "ip",
    ("status", "resourceClaimStatuses"): "name",
    ("status", "volumeHealth", "healthConditions"): "status",
}

# Lists whose strategy is "merge,retainKeys": a diff of their elements carries $retainKeys.
POD_RETAIN_KEYS_LISTS: frozenset[Path] = frozenset(
    {("spec", "volumes"), ("spec", "resourceClaims"), ("status", "resourceClaimStatuses")}
)

_DIRECTIVE = "$patch"
_RETAIN_KEYS = "$retainKeys"
_SET_ORDER = "$setElementOrder"
_DELETE_PRIMITIVES = "$deleteFromPrimitiveList"


# --------------------------------------------------------------------------- JSON helpers


def _clone(v: JSON) -> JSON:
    # Much faster than copy.deepcopy for JSON trees, which is all we ever hold.
    if isinstance(v, dict):
        return {k: _clone(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_clone(x) for x in v]
    return v


def _kind(v: JSON, *, go: bool = True) -> str:
    # apimachinery decodes JSON into nil/bool/int64/float64/string/map/slice (integral
    # literals become int64, others float64) and compares with reflect; Python's bool is
    # an int, so classify explicitly. go=False gives plain JSON kinds (1 == 1.0).
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, int):
        return "int" if go else "number"
    if isinstance(v, float):
        return "float" if go else "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, dict):
        return "object"
    if isinstance(v, list):
        return "array"
    return type(v).__name__


def _json_equal(a: JSON, b: JSON, *, go: bool = True) -> bool:
    """Deep equality: Go's reflect.DeepEqual on decoded JSON (True != 1, and 1 != 1.0
    unless ``go`` is false, which gives RFC 6902's numeric equality)."""
    ka = _kind(a, go=go)
    if ka != _kind(b, go=go):
        return False
    if ka == "object":
        return a.keys() == b.keys() and all(_json_equal(a[k], b[k], go=go) for k in a)
    if ka == "array":
        return len(a) == len(b) and all(_json_equal(x, y, go=go) for x, y in zip(a, b))
    return bool(a == b)


def _go_string(v: JSON) -> str:
    """``fmt.Sprintf("%v", v)`` for decoded JSON scalars: the diff sorts merge keys by it."""
    if isinstance(v, str):
        return v
    if v is None:
        return "<nil>"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)  # decoded as int64
    if isinstance(v, float):
        return _go_float(v)
    return json.dumps(v, sort_keys=True)


def _go_float(f: float) -> str:
    # %v of a float64 is strconv's shortest 'g' with exponent threshold 6 (1e+06, 123456).
    if f == 0:
        return "0"
    sign, digits, exp = Decimal(repr(f)).normalize().as_tuple()
    if not isinstance(exp, int):  # inf/nan: not JSON, any stable string will do
        return repr(f)
    ds = "".join(map(str, digits))
    e10 = len(ds) + exp - 1
    neg = "-" if sign else ""
    if e10 < -4 or e10 >= 6:
        mant = ds[0] + ("." + ds[1:] if len(ds) > 1 else "")
        return f"{neg}{mant}e{'-' if e10 < 0 else '+'}{abs(e10):02d}"
    return neg + format(Decimal(repr(abs(f))).normalize(), "f")


# --------------------------------------------------------------------------- diff


def diff_pod_status(old_status: dict[str, Any], new_status: dict[str, Any], uid: str) -> dict[str, Any]:
    """Two-way strategic merge patch from ``{"status": old}`` to ``{"status": new}``.

    The result always holds ``{"metadata": {"uid": uid}}`` (a precondition: the server
    refuses the patch for a pod with another UID); it holds ``"status"`` only when
    something differs. Matches ``strategicpatch.CreateTwoWayMergePatch`` for core/v1 Pod.
    """
    patch: dict[str, Any] = {"metadata": {"uid": uid}}
    status = _diff_maps(old_status, new_status, ("status",), POD_MERGE_KEYS, retain_keys=False)
    if status:
        patch["status"] = status
    return patch


def has_changes(patch: Mapping[str, Any]) -> bool:
    """True when the patch holds more than the UID precondition."""
    for key, value in patch.items():
        if key != "metadata":
            return True
        if not isinstance(value, dict) or set(value) - {"uid"}:
            return True
    return False


def _diff_maps(
    original: dict[str, Any],
    modified: dict[str, Any],
    path: Path,
    merge_keys: MergeKeys,
    *,
    retain_keys: bool,
) -> dict[str, Any]:
    patch: dict[str, Any] = {}
    for key, mod in modified.items():
        if key not in original:
            patch[key] = _clone(mod)
            continue
        orig = original[key]
        if key == _DIRECTIVE:
            if orig != mod:
                patch[key] = mod
            continue
        kind = _kind(orig)
        if kind != _kind(mod):
            patch[key] = _clone(mod)
        elif kind == "object":
            sub = _diff_maps(orig, mod, (*path, key), merge_keys, retain_keys=False)
            if sub:
                patch[key] = sub
        elif kind == "array":
            _diff_slices(key, orig, mod, (*path, key), merge_keys, patch)
        elif not _json_equal(orig, mod):
            patch[key] = mod
    for key in original:
        if key not in modified:
            patch[key] = None  # null deletes the field on apply
    if retain_keys:
        keep = sorted(k for k, v in modified.items() if v is not None)
        extra = any(v is not None and k not in modified for k, v in original.items())
        if keep and (patch or extra):
            patch[_RETAIN_KEYS] = keep
    return patch


def _diff_slices(
    key: str,
    original: list[Any],
    modified: list[Any],
    path: Path,
    merge_keys: MergeKeys,
    patch: dict[str, Any],
) -> None:
    merge_key = merge_keys.get(path)
    if merge_key is None:
        # Atomic list (containerStatuses, ...): sent whole whenever it differs.
        if not _json_equal(original, modified):
            patch[key] = _clone(modified)
        return
    if not original:
        if modified:
            patch[key] = _clone(modified)  # no $setElementOrder: order is the patch's own
        return
    kind = _element_kind(original, modified)
    if kind == "object":
        adds, order = _diff_lists_of_maps(original, modified, path, merge_keys, merge_key)
        deletes: list[Any] = []
    else:
        adds, deletes, order = _diff_lists_of_scalars(original, modified)
    if adds:
        patch[key] = adds
    if deletes:
        patch[f"{_DELETE_PRIMITIVES}/{key}"] = deletes
    if order:
        patch[f"{_SET_ORDER}/{key}"] = order


def _diff_lists_of_maps(
    original: list[Any], modified: list[Any], path: Path, merge_keys: MergeKeys, merge_key: str
) -> tuple[list[Any], list[Any]]:
    for i, item in enumerate((*original, *modified)):
        if not isinstance(item, dict) or merge_key not in item:
            raise PatchError(f"{'.'.join(path)}: element {i} has no merge key {merge_key!r}")
    retain = path in POD_RETAIN_KEYS_LISTS
    # Walk both lists sorted by the merge key's %v string, as the Go code does; this also
    # fixes the order of the delete directives (sorted by key, after the changes).
    osorted = sorted(original, key=lambda m: _go_string(m[merge_key]))
    msorted = sorted(modified, key=lambda m: _go_string(m[merge_key]))
    changes: list[Any] = []
    deletes: list[Any] = []
    oi = mi = 0
    while oi < len(osorted) or mi < len(msorted):
        os_ = _go_string(osorted[oi][merge_key]) if oi < len(osorted) else None
        ms_ = _go_string(msorted[mi][merge_key]) if mi < len(msorted) else None
        if os_ is not None and ms_ is not None and os_ == ms_:
            sub = _diff_maps(osorted[oi], msorted[mi], path, merge_keys, retain_keys=retain)
            if sub:
                sub[merge_key] = msorted[mi][merge_key]
                changes.append(sub)
            oi += 1
            mi += 1
        elif os_ is None or (ms_ is not None and os_ > ms_):
            changes.append(_clone(msorted[mi]))
            mi += 1
        else:
            deletes.append({merge_key: osorted[oi][merge_key], _DIRECTIVE: "delete"})
            oi += 1
    changes = _normalize_slice_order(changes, modified, merge_key, "object")
    order_same = len(original) == len(modified) and all(
        _go_eq(o[merge_key], m[merge_key]) for o, m in zip(original, modified)
    )
    changes += deletes
    order: list[Any] = []
    if changes or not order_same:
        order = [{merge_key: m[merge_key]} for m in modified]
    return changes, order


def _diff_lists_of_scalars(
    original: list[Any], modified: list[Any]
) -> tuple[list[Any], list[Any], list[Any]]:
    osorted = sorted(original, key=_go_string)
    msorted = sorted(modified, key=_go_string)
    adds: list[Any] = []
    deletes: list[Any] = []
    oi = mi = 0
    while oi < len(osorted) or mi < len(msorted):
        os_ = _go_string(osorted[oi]) if oi < len(osorted) else None
        ms_ = _go_string(msorted[mi]) if mi < len(msorted) else None
        if os_ is not None and ms_ is not None and os_ == ms_:
            oi += 1
            mi += 1
        elif os_ is None or (ms_ is not None and os_ > ms_):
            adds.append(msorted[mi])
            mi += 1
        else:
            deletes.append(osorted[oi])
            oi += 1
    adds = _normalize_slice_order(adds, modified, "", "scalar")
    deletes = _dedupe_scalars(deletes)
    # Go compares the *sorted* original here (it sorts in place), so a pure reorder of a
    # primitive list yields no $setElementOrder; mirror it so patches match byte for byte.
    order = list(modified) if deletes or not _json_equal(osorted, modified) else []
    return adds, deletes, order


# --------------------------------------------------------------------------- apply


def apply_strategic_merge_patch(
    original: dict[str, Any], patch: dict[str, Any], *, merge_keys: MergeKeys = POD_MERGE_KEYS
) -> dict[str, Any]:
    """Apply a strategic merge patch the way the API server does; returns a new dict.

    ``merge_keys`` maps field paths (list items not included) to the merge key of that
    list; listed paths merge, all other lists are replaced. Raises :class:`PatchError`
    for malformed patches.
    """
    if not isinstance(patch, dict):
        raise PatchError(f"a strategic merge patch must be a JSON object, not {_kind(patch)}")
    if not isinstance(original, dict):
        raise PatchError(f"the patched document must be a JSON object, not {_kind(original)}")
    return _merge_map(_clone(original), _clone(patch), (), merge_keys)


def _merge_map(original: dict[str, Any], patch: dict[str, Any], path: Path, mk: MergeKeys) -> dict[str, Any]:
    # Both arguments are private copies: mutating them is fine and saves copying again.
    if _DIRECTIVE in patch:
        directive = patch.pop(_DIRECTIVE)
        if directive == "replace":
            return _clean_new_value(patch)
        if directive == "delete":
            return {}
        raise PatchError(f"{_where(path)}: unknown $patch directive {directive!r}")
    _apply_retain_keys(original, patch, path)
    _apply_set_element_order(original, patch, path, mk)
    # Go walks the patch in random map order; take parallel deletion lists last (as they
    # are when $setElementOrder merged the list first) so the result is deterministic.
    items = sorted(patch.items(), key=lambda kv: kv[0].startswith(_DELETE_PRIMITIVES))
    for key, pv in items:
        delete_list = False
        if key.startswith(_DELETE_PRIMITIVES):
            key = _directive_field(key, _DELETE_PRIMITIVES, path)
            delete_list = True
        if pv is None:
            original.pop(key, None)
            continue
        if key not in original or _kind(original[key]) != _kind(pv):
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
    if _RETAIN_KEYS not in patch:
        return
    keep = patch.pop(_RETAIN_KEYS)
    if not isinstance(keep, list):
        raise PatchError(f"{_where(path)}: $retainKeys must be a list of field names")
    allowed = {k for k in keep if isinstance(k, str)}
    for key, value in patch.items():
        if value is None or key.startswith((_DELETE_PRIMITIVES, _SET_ORDER)):
            continue
        if key not in allowed:
            raise PatchError(f"{_where(path)}: field {key!r} is in the patch but not in $retainKeys")
    for key in list(original):
        if key not in allowed:
            del original[key]


def _apply_set_element_order(
    original: dict[str, Any], patch: dict[str, Any], path: Path, mk: MergeKeys
) -> None:
    for directive_key in [k for k in patch if k.startswith(_SET_ORDER)]:
        order = patch.pop(directive_key)
        if not isinstance(order, list):
            raise PatchError(f"{_where(path)}: {directive_key} must be a list")
        field = _directive_field(directive_key, _SET_ORDER, path)
        sub = (*path, field)
        merge_key = mk.get(sub, "")
        orig_list = original.get(field)
        patch_list = patch.get(field)
        if field in original and not isinstance(orig_list, list):
            raise PatchError(f"{_where(sub)}: $setElementOrder given for a field that is not a list")
        if field in patch and not isinstance(patch_list, list):
            raise PatchError(f"{_where(sub)}: $setElementOrder given but the patch value is not a list")
        _validate_against_order(patch_list or [], order, merge_key, sub)
        if orig_list is not None and patch_list is not None:
            merged = _merge_slice_handler(orig_list, patch_list, sub, mk, False)
        elif patch_list is not None:
            merged = _clean_new_value(patch_list)
        elif orig_list is not None:
            merged = orig_list
        else:
            continue
        kind = _element_kind(orig_list or [], patch_list or [], where=sub)
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
        if isinstance(items[pi], dict) and _DIRECTIVE in items[pi]:
            pi += 1
            continue
        if _merge_key_equal(items[pi], order[oi], merge_key, path):
            pi += 1
        oi += 1
    if pi < len(items):
        raise PatchError(f"{_where(path)}: the order of the patch list does not match $setElementOrder")


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
    kind = _element_kind(original, patch, where=path)
    if kind != "object":
        if delete_list:
            return [v for v in original if not any(_go_eq(v, d) for d in patch)]
        merged = _dedupe_scalars(original + patch)
        ordering = patch
    else:
        if not merge_key:
            raise PatchError(f"{_where(path)}: cannot merge a list of objects without a merge key")
        original, ordering = _merge_special_elements(original, patch, merge_key, path)
        merged = original[:]
        for item in ordering:
            if merge_key not in item:
                raise PatchError(f"{_where(path)}: list element {item!r} has no merge key {merge_key!r}")
            idx = _find_by_key(merged, merge_key, item[merge_key])
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
        if _DIRECTIVE not in item:
            rest.append(item)
            continue
        directive = item[_DIRECTIVE]
        if directive == "delete":
            if merge_key not in item:
                raise PatchError(
                    f"{_where(path)}: $patch: delete element {item!r} has no merge key {merge_key!r}"
                )
            original = [o for o in original if not _go_eq(o.get(merge_key, _MISSING), item[merge_key])]
        elif directive == "replace":
            replace = True  # keep scanning: other directives are still validated
        elif directive == "merge":
            raise PatchError(f"{_where(path)}: $patch: merge is not supported in lists")
        else:
            raise PatchError(f"{_where(path)}: unknown $patch directive {directive!r}")
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
                raise PatchError(f"{_where(path)}: list element {item!r} has no merge key {merge_key!r}")
            found = _find_by_key(by, merge_key, item[merge_key]) >= 0
        else:
            found = any(_go_eq(item, b) for b in by)
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
    patch = _normalize_slice_order(patch, patch_order, merge_key, kind)
    server_only = _normalize_slice_order(server_only, server_order, merge_key, kind)

    def index(item: Any) -> int:
        return _index(server_order, item, merge_key, kind)

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


def _normalize_slice_order(items: list[Any], order: list[Any], merge_key: str, kind: str) -> list[Any]:
    deletes: list[Any] = []
    if kind == "object":
        for item in (*items, *order):
            if not isinstance(item, dict) or merge_key not in item:
                raise PatchError(f"list element {item!r} has no merge key {merge_key!r}")
        deletes = [it for it in items if it.get(_DIRECTIVE) == "delete"]
        items = [it for it in items if it.get(_DIRECTIVE) != "delete"]
    idx = [_index(order, it, merge_key, kind) for it in items]
    if all(i >= 0 for i in idx):
        ranked = sorted(zip(idx, range(len(items))), key=lambda p: p)
        return [items[n] for _, n in ranked] + deletes
    # Some item is not in `order`: Go's comparator is then not a strict order, so copy
    # sort.SliceStable's insertion sort (exact for lists of up to 20 items) step by step.
    out = list(zip(idx, items))
    for a in range(1, len(out)):
        b = a
        while b > 0 and (out[b][0] < 0 or out[b - 1][0] < 0 or out[b][0] < out[b - 1][0]):
            out[b], out[b - 1] = out[b - 1], out[b]
            b -= 1
    return [it for _, it in out] + deletes


# --------------------------------------------------------------------------- apply helpers

_MISSING = object()


def _where(path: Path) -> str:
    return ".".join(path) or "<root>"


def _directive_field(key: str, prefix: str, path: Path) -> str:
    head, sep, field = key.partition("/")
    if head != prefix or not sep:
        raise PatchError(f"{_where(path)}: malformed directive key {key!r}, expected {prefix}/<field>")
    return field


def _is_delete(item: Any, path: Path) -> bool:
    if not isinstance(item, dict):
        raise PatchError(f"{_where(path)}: list element {item!r} is not an object")
    return bool(item.get(_DIRECTIVE) == "delete")


def _merge_key_equal(a: Any, b: Any, merge_key: str, path: Path) -> bool:
    if not merge_key:
        return _go_eq(a, b)
    for item in (a, b):
        if not isinstance(item, dict) or merge_key not in item:
            raise PatchError(f"{_where(path)}: list element {item!r} has no merge key {merge_key!r}")
    return _go_eq(a[merge_key], b[merge_key])


def _go_eq(a: Any, b: Any) -> bool:
    # Go's interface ==: same dynamic type and value.
    return a is not _MISSING and b is not _MISSING and _json_equal(a, b)


def _index(items: list[Any], value: Any, merge_key: str, kind: str) -> int:
    if kind == "object":
        target = value.get(merge_key) if isinstance(value, dict) else None
        for n, item in enumerate(items):
            if _go_eq(target, item.get(merge_key) if isinstance(item, dict) else None):
                return n
        return -1
    for n, item in enumerate(items):
        if _go_eq(value, item):
            return n
    return -1


def _find_by_key(items: list[Any], merge_key: str, value: Any) -> int:
    for n, item in enumerate(items):
        if isinstance(item, dict) and merge_key in item and _go_eq(item[merge_key], value):
            return n
    return -1


def _element_kind(*lists: list[Any], where: Path = ()) -> str:
    kind = ""
    for lst in lists:
        for v in lst:
            k = _kind(v)
            if k in ("int", "float", "string", "bool", "null"):
                k = "scalar:" + k
            if not kind:
                if k == "array":
                    raise PatchError(f"{_where(where)}: lists of lists cannot be merged")
                kind = k
            elif k != kind:
                raise PatchError(f"{_where(where)}: list elements are not all of the same type")
    if not kind:
        raise PatchError(f"{_where(where)}: no elements in any of the lists to merge")
    return "object" if kind == "object" else "scalar"


def _dedupe_scalars(values: list[Any]) -> list[Any]:
    out: list[Any] = []
    for v in values:
        if not any(_go_eq(v, o) for o in out):
            out.append(v)
    return out


def _set_clean(target: dict[str, Any], key: str, value: Any) -> None:
    cleaned = _clean_new_value(value)
    if cleaned is _MISSING:
        target.pop(key, None)
    else:
        target[key] = cleaned


def _clean_new_value(value: Any) -> Any:
    """A patch value taken as is: nulls and directives dropped (``removeDirectives``).

    Returns ``_MISSING`` when the value itself is a directive map. Directive keys that Go
    would leave behind (and the typed decoding then drops) are dropped here.
    """
    if isinstance(value, dict):
        if _DIRECTIVE in value:
            return _MISSING
        out: dict[str, Any] = {}
        for k, v in value.items():
            if v is None or k == _RETAIN_KEYS or k.startswith((_SET_ORDER, _DELETE_PRIMITIVES)):
                continue
            cv = _clean_new_value(v)
            if cv is not _MISSING:
                out[k] = cv
        return out
    if isinstance(value, list):
        return [cv for cv in (_clean_new_value(v) for v in value) if cv is not _MISSING]
    return value


# --------------------------------------------------------------------------- encoding

_encode: Callable[[Any], bytes]
if _msgspec is not None:
    _encode = _msgspec.json.encode
else:  # pragma: no cover

    def _encode(obj: Any) -> bytes:
        return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


def encode_patch(patch: dict[str, Any]) -> bytes:
    """Compact JSON bytes of a patch (request body)."""
    return _encode(patch)


# --------------------------------------------------------------------------- RFC 7386


def apply_json_merge_patch(original: Any, patch: Any) -> Any:
    """Apply an RFC 7386 JSON merge patch; returns a new value, inputs untouched."""
    if not isinstance(patch, dict):
        return _clone(patch)
    target = dict(original) if isinstance(original, dict) else {}
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        else:
            target[key] = apply_json_merge_patch(target.get(key), value)
    # Untouched members were shared by the shallow copy above: clone the result once.
    return {k: (v if k in patch else _clone(v)) for k, v in target.items()}


# --------------------------------------------------------------------------- RFC 6902


def apply_json_patch(original: Any, operations: list[Any]) -> Any:
    """Apply an RFC 6902 JSON patch; returns a new value, inputs untouched."""
    if not isinstance(operations, list):
        raise PatchError("a JSON patch must be a list of operations")
    doc = _clone(original)
    for n, op in enumerate(operations):
        if not isinstance(op, dict):
            raise PatchError(f"operation {n} is not an object")
        name = op.get("op")
        path = _require_str(op, "path", n)
        try:
            if name == "add":
                doc = _jp_add(doc, path, _clone(_require_value(op, n)))
            elif name == "remove":
                doc, _ = _jp_remove(doc, path)
            elif name == "replace":
                value = _clone(_require_value(op, n))
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
                doc = _jp_add(doc, path, _clone(_jp_get(doc, src)))
            elif name == "test":
                if not _json_equal(_jp_get(doc, path), _require_value(op, n), go=False):
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
