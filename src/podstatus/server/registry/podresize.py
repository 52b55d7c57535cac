"""The ``pods/resize`` subresource, as kube-apiserver v1.37 serves it.

``podResizeStrategy`` (pkg/registry/core/pod/strategy.go) keeps everything of the stored pod
but the containers' (and init containers') ``resources`` and ``resizePolicy`` and the pod-level
``spec.resources``; ``ValidatePodResize`` (pkg/apis/core/validation) then allows only cpu and
memory to change. The generation goes up when the spec changed. Pure functions over the wire
form; errors come back as ``(field, type, value, detail)`` for the store to render.
"""

from __future__ import annotations

import copy
from decimal import Decimal
from typing import Any

from ...qos import compute_pod_qos, parse_quantity
from ...resources import canonical_quantity, node_amount, pod_requests, scaled

__all__ = ["MIRROR_ANNOTATION", "admission_error", "prepare", "validate"]

MIRROR_ANNOTATION = "kubernetes.io/config.mirror"

# ResetObjectMetaForStatus: a resize cannot change these either.
_RESET_META = ("deletionTimestamp", "generation", "labels", "annotations", "finalizers", "ownerReferences")
_CPU_MEMORY = ("cpu", "memory")
# helper.IsOvercommitAllowed: only these (and hugepages, below) need request == limit.
_NO_OVERCOMMIT_PREFIXES = ("hugepages-",)

Error = tuple[str, str, Any, str]
# field.NewPath(""): the pod as a whole, which Go prints as "[]".
_ROOT = "[]"


def _sections(spec: dict[str, Any]) -> tuple[list[Any], list[Any]]:
    containers = spec.get("containers")
    init = spec.get("initContainers")
    return (
        containers if isinstance(containers, list) else [],
        init if isinstance(init, list) else [],
    )


def _names(items: list[Any]) -> list[Any]:
    return [c.get("name") if isinstance(c, dict) else None for c in items]


def _merge_containers(new: list[Any], old: list[Any]) -> list[Any] | None:
    """dropNonResizeUpdatesForContainers: the old containers with the new resources and policy.

    None when a container was renamed or moved (validation then reports it on the request as given).
    """
    merged = []
    for n, o in zip(new, old, strict=True):
        if not isinstance(n, dict) or not isinstance(o, dict) or n.get("name") != o.get("name"):
            return None
        c = dict(o)
        for key in ("resources", "resizePolicy"):
            if key in n:
                c[key] = n[key]
            else:
                c.pop(key, None)
        if isinstance(c.get("resources"), dict):
            c["resources"] = _canonical(c["resources"])
        merged.append(c)
    return merged


def _canonical(resources: dict[str, Any]) -> dict[str, Any]:
    """Requests and limits as kube-apiserver stores quantities (``0.3`` is ``300m``)."""
    out = dict(resources)
    for key in ("requests", "limits"):
        values = out.get(key)
        if isinstance(values, dict):
            out[key] = {name: canonical_quantity(v) for name, v in values.items()}
    return out


def prepare(cur: dict[str, Any], new: dict[str, Any], meta: dict[str, Any]) -> dict[str, Any]:
    """The object a resize stores (before validation): PrepareForUpdate of the resize strategy.

    ``meta`` is the request's metadata with the server's fields already restored; ``new`` has
    been defaulted as the decoder does.
    """
    cur_meta = cur.get("metadata") or {}
    for key in _RESET_META:
        if key in cur_meta:
            meta[key] = cur_meta[key]
        else:
            meta.pop(key, None)
    old_spec = cur.get("spec") or {}
    given = new.get("spec")
    new_spec = given if isinstance(given, dict) else {}
    containers, init = _sections(new_spec)
    old_containers, old_init = _sections(old_spec)
    spec: dict[str, Any]
    if len(containers) != len(old_containers) or len(init) != len(old_init):
        spec = new_spec  # validation refuses it, on the request's own containers
    else:
        merged = _merge_containers(containers, old_containers)
        merged_init = _merge_containers(init, old_init)
        if merged is None or merged_init is None:
            spec = new_spec
        else:
            spec = dict(old_spec)
            # InPlacePodLevelResourcesVerticalScaling (on in v1.37): pod-level resources come from the request.
            if "resources" in new_spec:
                spec["resources"] = new_spec["resources"]
            elif "resources" in old_spec:
                # PodLevelResourcesFixDefaulting: a client unaware of them keeps the old ones.
                spec["resources"] = old_spec["resources"]
            spec["containers"] = merged
            if "initContainers" in old_spec or merged_init:
                spec["initContainers"] = merged_init
    obj = dict(cur)
    obj["metadata"] = meta
    obj["spec"] = spec
    if "status" in cur:
        obj["status"] = cur["status"]
    # updatePodGeneration: a changed spec (semantically: 1000m is 1) is a new generation.
    if _semantic(spec) != _semantic(old_spec) and "generation" in meta:
        meta["generation"] = int(meta["generation"]) + 1
    return obj


def _quantity(value: Any) -> Any:
    try:
        return parse_quantity(value)
    except ValueError:
        return value


def _semantic(value: Any, key: str = "") -> Any:
    """``value`` with every resource quantity as a number: apiequality.Semantic compares them so."""
    if isinstance(value, dict):
        if key in ("requests", "limits"):
            return {k: _quantity(v) for k, v in value.items()}
        return {k: _semantic(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [_semantic(v) for v in value]
    return value


def _resources(c: Any) -> dict[str, Any]:
    res = c.get("resources") if isinstance(c, dict) else None
    return res if isinstance(res, dict) else {}


def _list(res: dict[str, Any], key: str) -> dict[str, Any]:
    value = res.get(key)
    return value if isinstance(value, dict) else {}


def _removed(new: dict[str, Any], old: dict[str, Any]) -> bool:
    return len(old) > len(new) or any(name not in new for name in old)


def _drop_cpu_memory(values: Any, old: dict[str, Any]) -> dict[str, Any] | None:
    """dropCPUMemoryUpdates: cpu and memory as they were, the rest as given."""
    if not isinstance(values, dict) or not values:
        if not old:
            return None
        values = {}
    out = {k: v for k, v in values.items() if k not in _CPU_MEMORY}
    for name in _CPU_MEMORY:
        if name in old:
            out[name] = old[name]
    return out


def _without_cpu_memory(c: Any, old: Any) -> Any:
    """dropCPUMemoryResourcesFromContainer, on a copy."""
    if not isinstance(c, dict) or not isinstance(old, dict):
        return c
    out = dict(c)
    res, old_res = _resources(c), _resources(old)
    masked: dict[str, Any] = {}
    limits = _drop_cpu_memory(res.get("limits"), _list(old_res, "limits"))
    requests = _drop_cpu_memory(res.get("requests"), _list(old_res, "requests"))
    if limits:
        masked["limits"] = limits
    if requests:
        masked["requests"] = requests
    if res.get("claims"):
        masked["claims"] = res["claims"]
    out["resources"] = masked
    return out


def _container_view(c: Any) -> Any:
    """A container as Go's struct compares: an empty resources block is the zero value."""
    if not isinstance(c, dict):
        return c
    out = {k: v for k, v in c.items() if k != "resources"}
    res = {k: v for k, v in _resources(c).items() if v}
    out["resources"] = _semantic(res)
    return out


def _requirement_errors(c: Any, path: str) -> list[Error]:
    """The request <= limit part of ValidateResourceRequirements."""
    errors: list[Error] = []
    res = _resources(c)
    requests, limits = _list(res, "requests"), _list(res, "limits")
    req_path = f"{path}.resources.requests"
    for name in sorted(requests):
        if name not in limits:
            continue
        try:
            quantity, limit = parse_quantity(requests[name]), parse_quantity(limits[name])
        except ValueError:
            continue  # the decoder refuses what is no quantity
        if name.startswith(_NO_OVERCOMMIT_PREFIXES) and quantity != limit:
            errors.append(
                (
                    req_path,
                    "Invalid value",
                    requests[name],
                    f"must be equal to {name} limit of {limits[name]}",
                )
            )
        elif quantity > limit:
            errors.append((
                req_path, "Invalid value", requests[name],
                f"must be less than or equal to {name} limit of {limits[name]}",
            ))  # fmt: skip
    return errors


def _restartable(c: Any) -> bool:
    return isinstance(c, dict) and c.get("restartPolicy") == "Always"


def _resize_supported(cur: dict[str, Any]) -> bool:
    """isPodResizeRequestSupported: the first running container tells whether its node reports resources."""
    status = cur.get("status") or {}
    for cs in status.get("containerStatuses") or ():
        if isinstance(cs, dict) and isinstance(cs.get("state"), dict) and "running" in cs["state"]:
            return cs.get("resources") is not None
    return True


def _pod_level_set(spec: dict[str, Any]) -> bool:
    res = spec.get("resources")
    return isinstance(res, dict) and bool(_list(res, "requests") or _list(res, "limits"))


def validate(cur: dict[str, Any], obj: dict[str, Any]) -> list[Error]:
    """ValidatePodResize, for what podstatus models (cpu, memory, pod-level resources)."""
    old_spec = cur.get("spec") or {}
    spec = obj.get("spec") or {}
    containers, init = _sections(spec)
    old_containers, old_init = _sections(old_spec)
    errors: list[Error] = []
    # validatePodMetadataAndSpec: the resize result is a valid pod (the resources part of it).
    for section, items in (("initContainers", init), ("containers", containers)):
        for i, c in enumerate(items):
            errors.extend(_requirement_errors(c, f"spec.{section}[{i}]"))
    annotations = (cur.get("metadata") or {}).get("annotations") or {}
    if MIRROR_ANNOTATION in annotations:
        return [(_ROOT, "Forbidden", None, "static pods cannot be resized")]
    os_name = (old_spec.get("os") or {}).get("name") if isinstance(old_spec.get("os"), dict) else None
    if os_name == "windows":
        return [(_ROOT, "Forbidden", None, "windows pods cannot be resized")]
    old_qos = (cur.get("status") or {}).get("qosClass") or compute_pod_qos(old_spec)
    if old_qos != compute_pod_qos(spec):
        errors.append(
            ("spec", "Invalid value", old_qos, "Pod QOS Class may not change as a result of resizing")
        )
    if not _resize_supported(cur):
        errors.append(("spec", "Forbidden", None, "Pod running on node without support for resize"))
    if _pod_level_set(old_spec) or _pod_level_set(spec):
        errors.extend(_pod_level_errors(spec, old_spec))
    order: list[Error] = []
    if len(containers) != len(old_containers):
        order.append(
            ("spec.containers", "Forbidden", None, "containers may not be added or removed on resize")
        )
    else:
        for i, (new_name, old_name) in enumerate(
            zip(_names(containers), _names(old_containers), strict=True)
        ):
            if new_name != old_name:
                order.append((f"spec.containers[{i}].name", "Forbidden", None,
                              "containers may not be renamed or reordered on resize"))  # fmt: skip
    if len(init) != len(old_init):
        order.append(
            ("spec.initContainers", "Forbidden", None, "initContainers may not be added or removed on resize")
        )
    else:
        for i, (new_name, old_name) in enumerate(zip(_names(init), _names(old_init), strict=True)):
            if new_name != old_name:
                order.append((f"spec.initContainers[{i}].name", "Forbidden", None,
                              "initContainers may not be renamed or reordered on resize"))  # fmt: skip
    if order:
        return errors + order
    # InPlacePodVerticalScalingInitContainers is GA in v1.37: every init container may be resized.
    for section, items, olds in (
        ("initContainers", init, old_init),
        ("containers", containers, old_containers),
    ):
        for i, (c, old) in enumerate(zip(items, olds, strict=True)):
            res, old_res = _resources(c), _resources(old)
            path = f"spec.{section}[{i}].resources"
            if _removed(_list(res, "requests"), _list(old_res, "requests")):
                errors.append((f"{path}.requests", "Forbidden", None, "resource requests cannot be removed"))
            if _removed(_list(res, "limits"), _list(old_res, "limits")):
                errors.append((f"{path}.limits", "Forbidden", None, "resource limits cannot be removed"))
    for c, old in zip(containers, old_containers, strict=True):
        if _container_view(_without_cpu_memory(c, old)) != _container_view(old):
            errors.append(("spec", "Forbidden", None, "only cpu and memory resources are mutable"))
    for i, (c, old) in enumerate(zip(init, old_init, strict=True)):
        modified = _container_view(c) != _container_view(old)
        if _container_view(_without_cpu_memory(c, old)) != _container_view(old):
            errors.append((f"spec.initContainers[{i}]", "Forbidden", None,
                           "only cpu and memory resources for init or sidecar containers are mutable"))  # fmt: skip
        if modified and not _restartable(c):
            for policy in (c.get("resizePolicy") if isinstance(c, dict) else None) or ():
                if isinstance(policy, dict) and policy.get("restartPolicy") == "RestartContainer":
                    errors.append((f"spec.initContainers[{i}]", "Forbidden", None,
                                   "non-sidecar init containers with a resize policy of RestartContainer "
                                   "cannot be resized"))  # fmt: skip
    return errors


def _pod_level_errors(spec: dict[str, Any], old_spec: dict[str, Any]) -> list[Error]:
    """validatePodLevelResourcesResize (InPlacePodLevelResourcesVerticalScaling is on in v1.37)."""
    old = old_spec.get("resources")
    new = spec.get("resources")
    if isinstance(old, dict) and not isinstance(new, dict):
        return [("spec.resources", "Forbidden", None, "pod-level resources cannot be removed")]
    errors: list[Error] = []
    old = old if isinstance(old, dict) else {}
    new = new if isinstance(new, dict) else {}
    if old:
        if _removed(_list(new, "requests"), _list(old, "requests")):
            errors.append(
                (
                    "spec.resources.requests",
                    "Forbidden",
                    None,
                    "pod-level resource requests cannot be removed",
                )
            )
        if _removed(_list(new, "limits"), _list(old, "limits")):
            errors.append(
                ("spec.resources.limits", "Forbidden", None, "pod-level resource limits cannot be removed")
            )
    masked = copy.deepcopy(new)
    for key in ("requests", "limits"):
        dropped = _drop_cpu_memory(new.get(key), _list(old, key))
        if dropped:
            masked[key] = dropped
        else:
            masked.pop(key, None)
    if _semantic({k: v for k, v in masked.items() if v}) != _semantic({k: v for k, v in old.items() if v}):
        errors.append(("spec", "Forbidden", None, "only cpu and memory resources are mutable at pod-level"))
    return errors


# What a resize needs the node to declare (nodedeclaredfeatures, component-helpers v0.37).
_INIT_FEATURE = "InPlacePodVerticalScalingInitContainers"
_POD_LEVEL_FEATURE = "InPlacePodLevelResourcesVerticalScaling"


def _required_features(cur: dict[str, Any], obj: dict[str, Any]) -> list[str]:
    """InferForUpdate of the resize features: a non-sidecar init container's or the pod-level resources changed."""
    old_spec, spec = cur.get("spec") or {}, obj.get("spec") or {}
    needed = []
    old_res, new_res = old_spec.get("resources"), spec.get("resources")
    if (old_res is not None or new_res is not None) and _semantic(old_res) != _semantic(new_res):
        needed.append(_POD_LEVEL_FEATURE)
    old_init, init = _sections(old_spec)[1], _sections(spec)[1]
    for c, new in zip(old_init, init, strict=False):
        if not _restartable(c) and _resources(c) != _resources(new):
            needed.append(_INIT_FEATURE)
            break
    return sorted(needed)


def admission_error(
    cur: dict[str, Any], obj: dict[str, Any], node: dict[str, Any] | None
) -> tuple[str, str] | None:
    """kube-apiserver's validating admission of a resize that changed the generation of a bound pod:
    NodeDeclaredFeatureValidator, then PodResizeValidator (linux node, requests within allocatable).

    ``(message, cause)`` of the 403 (``cause`` "" when the Status has none), or None.
    """
    spec = obj.get("spec") or {}
    node_name = spec.get("nodeName")
    if not node_name or (cur.get("metadata") or {}).get("generation") == (obj.get("metadata") or {}).get(
        "generation"
    ):
        return None
    if node is None:
        return f'node "{node_name}" not found', ""
    needed = _required_features(cur, obj)
    declared = set((node.get("status") or {}).get("declaredFeatures") or ())
    missing = [f for f in needed if f not in declared]
    if missing:
        return (
            f'pod update requires features {", ".join(missing)} which are not available on node "{node_name}"',
            "",
        )
    os_name = ((node.get("metadata") or {}).get("labels") or {}).get("kubernetes.io/os")
    if os_name is not None and os_name != "linux":
        return (
            f'pod resize is only supported on linux nodes, node "{node_name}" is "{os_name}"',
            "UnsupportedPlatform",
        )
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    requests = pod_requests(spec)
    short = []
    for name in ("cpu", "memory"):
        want = requests.get(name, Decimal(0))
        have = node_amount(allocatable, name)
        if want > have:
            short.append(f"{name}, requested: {scaled(name, want)}, allocatable: {scaled(name, have)}")
    if short:
        return f"node didn't have enough allocatable resources: {'; '.join(short)}", "NodeCapacity"
    return None
