"""The lists of a strategic merge patch: the Pod's merge keys, the directives, list-element rules.

Shared by the diff (:mod:`.strategic_diff`) and the apply (:mod:`.strategic_apply`): both
must classify, compare and order list elements alike, or a patch we send would not mean
to the API server what it means to us.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .values import PatchError, json_equal, kind_of

Path = tuple[str, ...]
MergeKeys = Mapping[Path, str]


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

DIRECTIVE = "$patch"
RETAIN_KEYS = "$retainKeys"
SET_ORDER = "$setElementOrder"
DELETE_PRIMITIVES = "$deleteFromPrimitiveList"


# A field a map lacks: unlike null, it equals nothing (Go compares a missing key as no value).
MISSING = object()


def path_text(path: Path) -> str:
    return ".".join(path) or "<root>"


def go_eq(a: Any, b: Any) -> bool:
    # Go's interface ==: same dynamic type and value.
    return a is not MISSING and b is not MISSING and json_equal(a, b)


def index_of(items: list[Any], value: Any, merge_key: str, kind: str) -> int:
    if kind == "object":
        target = value.get(merge_key) if isinstance(value, dict) else None
        for n, item in enumerate(items):
            if go_eq(target, item.get(merge_key) if isinstance(item, dict) else None):
                return n
        return -1
    for n, item in enumerate(items):
        if go_eq(value, item):
            return n
    return -1


def find_by_key(items: list[Any], merge_key: str, value: Any) -> int:
    for n, item in enumerate(items):
        if isinstance(item, dict) and merge_key in item and go_eq(item[merge_key], value):
            return n
    return -1


def element_kind(*lists: list[Any], where: Path = ()) -> str:
    kind = ""
    for lst in lists:
        for v in lst:
            k = kind_of(v)
            if k in ("int", "float", "string", "bool", "null"):
                k = "scalar:" + k
            if not kind:
                if k == "array":
                    raise PatchError(f"{path_text(where)}: lists of lists cannot be merged")
                kind = k
            elif k != kind:
                raise PatchError(f"{path_text(where)}: list elements are not all of the same type")
    if not kind:
        raise PatchError(f"{path_text(where)}: no elements in any of the lists to merge")
    return "object" if kind == "object" else "scalar"


def dedupe_scalars(values: list[Any]) -> list[Any]:
    out: list[Any] = []
    for v in values:
        if not any(go_eq(v, o) for o in out):
            out.append(v)
    return out


def normalize_slice_order(items: list[Any], order: list[Any], merge_key: str, kind: str) -> list[Any]:
    deletes: list[Any] = []
    if kind == "object":
        for item in (*items, *order):
            if not isinstance(item, dict) or merge_key not in item:
                raise PatchError(f"list element {item!r} has no merge key {merge_key!r}")
        deletes = [it for it in items if it.get(DIRECTIVE) == "delete"]
        items = [it for it in items if it.get(DIRECTIVE) != "delete"]
    idx = [index_of(order, it, merge_key, kind) for it in items]
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
