"""The two-way strategic merge patch from a pod's status to another (SPEC 4.8).

Matches ``strategicpatch.CreateTwoWayMergePatch`` of k8s.io/apimachinery v0.37 for core/v1
Pod, byte for byte: the manager sends these patches to real API servers.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .lists import (
    DELETE_PRIMITIVES,
    DIRECTIVE,
    POD_MERGE_KEYS,
    POD_RETAIN_KEYS_LISTS,
    RETAIN_KEYS,
    SET_ORDER,
    MergeKeys,
    Path,
    dedupe_scalars,
    element_kind,
    go_eq,
    normalize_slice_order,
)
from .values import PatchError, clone, go_string, json_equal, kind_of


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
            patch[key] = clone(mod)
            continue
        orig = original[key]
        if key == DIRECTIVE:
            if orig != mod:
                patch[key] = mod
            continue
        kind = kind_of(orig)
        if kind != kind_of(mod):
            patch[key] = clone(mod)
        elif kind == "object":
            sub = _diff_maps(orig, mod, (*path, key), merge_keys, retain_keys=False)
            if sub:
                patch[key] = sub
        elif kind == "array":
            _diff_slices(key, orig, mod, (*path, key), merge_keys, patch)
        elif not json_equal(orig, mod):
            patch[key] = mod
    for key in original:
        if key not in modified:
            patch[key] = None  # null deletes the field on apply
    if retain_keys:
        keep = sorted(k for k, v in modified.items() if v is not None)
        extra = any(v is not None and k not in modified for k, v in original.items())
        if keep and (patch or extra):
            patch[RETAIN_KEYS] = keep
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
        if not json_equal(original, modified):
            patch[key] = clone(modified)
        return
    if not original:
        if modified:
            patch[key] = clone(modified)  # no $setElementOrder: order is the patch's own
        return
    kind = element_kind(original, modified)
    if kind == "object":
        adds, order = _diff_lists_of_maps(original, modified, path, merge_keys, merge_key)
        deletes: list[Any] = []
    else:
        adds, deletes, order = _diff_lists_of_scalars(original, modified)
    if adds:
        patch[key] = adds
    if deletes:
        patch[f"{DELETE_PRIMITIVES}/{key}"] = deletes
    if order:
        patch[f"{SET_ORDER}/{key}"] = order


def _diff_lists_of_maps(
    original: list[Any], modified: list[Any], path: Path, merge_keys: MergeKeys, merge_key: str
) -> tuple[list[Any], list[Any]]:
    for i, item in enumerate((*original, *modified)):
        if not isinstance(item, dict) or merge_key not in item:
            raise PatchError(f"{'.'.join(path)}: element {i} has no merge key {merge_key!r}")
    retain = path in POD_RETAIN_KEYS_LISTS
    # Walk both lists sorted by the merge key's %v string, as the Go code does; this also
    # fixes the order of the delete directives (sorted by key, after the changes).
    osorted = sorted(original, key=lambda m: go_string(m[merge_key]))
    msorted = sorted(modified, key=lambda m: go_string(m[merge_key]))
    changes: list[Any] = []
    deletes: list[Any] = []
    oi = mi = 0
    while oi < len(osorted) or mi < len(msorted):
        os_ = go_string(osorted[oi][merge_key]) if oi < len(osorted) else None
        ms_ = go_string(msorted[mi][merge_key]) if mi < len(msorted) else None
        if os_ is not None and ms_ is not None and os_ == ms_:
            sub = _diff_maps(osorted[oi], msorted[mi], path, merge_keys, retain_keys=retain)
            if sub:
                sub[merge_key] = msorted[mi][merge_key]
                changes.append(sub)
            oi += 1
            mi += 1
        elif os_ is None or (ms_ is not None and os_ > ms_):
            changes.append(clone(msorted[mi]))
            mi += 1
        else:
            deletes.append({merge_key: osorted[oi][merge_key], DIRECTIVE: "delete"})
            oi += 1
    changes = normalize_slice_order(changes, modified, merge_key, "object")
    order_same = len(original) == len(modified) and all(
        go_eq(o[merge_key], m[merge_key]) for o, m in zip(original, modified)
    )
    changes += deletes
    order: list[Any] = []
    if changes or not order_same:
        order = [{merge_key: m[merge_key]} for m in modified]
    return changes, order


def _diff_lists_of_scalars(
    original: list[Any], modified: list[Any]
) -> tuple[list[Any], list[Any], list[Any]]:
    osorted = sorted(original, key=go_string)
    msorted = sorted(modified, key=go_string)
    adds: list[Any] = []
    deletes: list[Any] = []
    oi = mi = 0
    while oi < len(osorted) or mi < len(msorted):
        os_ = go_string(osorted[oi]) if oi < len(osorted) else None
        ms_ = go_string(msorted[mi]) if mi < len(msorted) else None
        if os_ is not None and ms_ is not None and os_ == ms_:
            oi += 1
            mi += 1
        elif os_ is None or (ms_ is not None and os_ > ms_):
            adds.append(msorted[mi])
            mi += 1
        else:
            deletes.append(osorted[oi])
            oi += 1
    adds = normalize_slice_order(adds, modified, "", "scalar")
    deletes = dedupe_scalars(deletes)
    # Go compares the *sorted* original here (it sorts in place), so a pure reorder of a
    # primitive list yields no $setElementOrder; mirror it so patches match byte for byte.
    order = list(modified) if deletes or not json_equal(osorted, modified) else []
    return adds, deletes, order
