"""In-place pod resize on a podstatus node: what the kubelet v1.37 decides, as pure functions.

The kubelet's allocation manager (pkg/kubelet/allocation) compares a pod's spec resources
with what it allocated. A change is admitted again as a ``resize`` operation:

- infeasible when the node can never run it as asked (``podResizesAdmitHandler``: with the
  static CPU manager policy a Guaranteed pod's cpu cannot change);
- otherwise the ``noderesources`` fit of the pod's new requests against the node's
  allocatable less what the *other* pods were allocated. A pod that does not fit is deferred,
  also when it asks for more than the whole node: since v1.35 the kubelet no longer calls
  that infeasible (``allocation_manager_test.go``: "Request CPU increase beyond node
  capacity - expect Deferred"), the reason it gives (``OutOfcpu``) becomes ``Deferred``
  in the status manager;
- accepted otherwise: the allocation becomes the new resources.

Messages and event texts are the kubelet's (``lifecycle/predicate.go``, ``events/resize.go``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from ..qos import GUARANTEED, compute_pod_qos, parse_quantity

__all__ = [
    "ACCEPTED",
    "DEFERRED",
    "INFEASIBLE",
    "Allocation",
    "ResizeDecision",
    "allocation_of",
    "allocation_of_pod",
    "decide",
    "pod_requests",
    "resize_message",
    "same_allocation",
]

ACCEPTED = "Accepted"
DEFERRED = "Deferred"
INFEASIBLE = "Infeasible"
CPU_MANAGER_STATIC = "static"

# container name -> its resources (``requests``/``limits``), as the kubelet checkpoints them.
Allocation = dict[str, dict[str, Any]]

# The order noderesources.fitsRequest checks them in (pods first, then these).
_FIT_ORDER = ("cpu", "memory", "ephemeral-storage")
_OUT_OF = {"cpu": "OutOfcpu", "memory": "OutOfmemory", "ephemeral-storage": "OutOfephemeral-storage"}


@dataclass(frozen=True)
class ResizeDecision:
    """``outcome``: ACCEPTED, DEFERRED or INFEASIBLE; ``reason``/``message`` as the admit handler gives them."""

    outcome: str
    reason: str = ""
    message: str = ""


def _containers(spec: Mapping[str, Any], key: str) -> list[Mapping[str, Any]]:
    items = spec.get(key)
    return [c for c in items if isinstance(c, Mapping)] if isinstance(items, list) else []


def _resources(c: Mapping[str, Any]) -> dict[str, Any]:
    res = c.get("resources")
    out: dict[str, Any] = {}
    if isinstance(res, Mapping):
        for key in ("limits", "requests"):
            value = res.get(key)
            if isinstance(value, Mapping) and value:
                out[key] = dict(value)
    return out


def allocation_of(spec: Mapping[str, Any]) -> Allocation:
    """The resources of every init and regular container of a pod spec (wire form)."""
    return {
        str(c.get("name")): _resources(c)
        for c in [*_containers(spec, "initContainers"), *_containers(spec, "containers")]
    }


def allocation_of_pod(pod: Any) -> Allocation:
    """:func:`allocation_of` from a typed :class:`~podstatus.types.Pod` (no conversion of its spec)."""
    spec = pod.spec
    return {
        c.name: _resources({"resources": c.resources})
        for c in (*(spec.init_containers or ()), *(spec.containers or ()))
    }


def _semantic(resources: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for key, values in resources.items():
        if not isinstance(values, Mapping):
            continue
        parsed: dict[str, Any] = {}
        for name, value in values.items():
            try:
                parsed[name] = parse_quantity(value)
            except ValueError:
                parsed[name] = value
        if parsed:
            out[key] = parsed
    return out


def same_resources(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> bool:
    """Equal as apiequality.Semantic compares them (``1`` is ``1000m``)."""
    return _semantic(a or {}) == _semantic(b or {})


def same_allocation(a: Allocation, b: Allocation) -> bool:
    return a.keys() == b.keys() and all(same_resources(a[name], b[name]) for name in a)


def _add(into: dict[str, Decimal], values: Any) -> None:
    if not isinstance(values, Mapping):
        return
    for name, value in values.items():
        try:
            into[name] = into.get(name, Decimal(0)) + parse_quantity(value)
        except ValueError:
            continue


def _max(into: dict[str, Decimal], other: Mapping[str, Decimal]) -> None:
    for name, value in other.items():
        if value > into.get(name, Decimal(0)):
            into[name] = value


def pod_requests(spec: Mapping[str, Any], allocation: Allocation | None = None) -> dict[str, Decimal]:
    """resourcehelper.PodRequests: containers summed, init containers at their peak, plus overhead.

    ``allocation`` (container name -> resources) replaces the spec's container resources:
    the requests of a pod as the kubelet allocated it.
    """

    def requests(c: Mapping[str, Any]) -> Any:
        if allocation is not None and c.get("name") in allocation:
            return allocation[str(c.get("name"))].get("requests")
        return _resources(c).get("requests")

    total: dict[str, Decimal] = {}
    for c in _containers(spec, "containers"):
        _add(total, requests(c))
    sidecars: dict[str, Decimal] = {}
    peak: dict[str, Decimal] = {}
    for c in _containers(spec, "initContainers"):
        if c.get("restartPolicy") == "Always":
            # A sidecar runs beside everything after it: it counts in the sum and in later peaks.
            _add(total, requests(c))
            _add(sidecars, requests(c))
            _max(peak, sidecars)
        else:
            step = dict(sidecars)
            _add(step, requests(c))
            _max(peak, step)
    _max(total, peak)
    pod_level = spec.get("resources")
    if isinstance(pod_level, Mapping) and isinstance(pod_level.get("requests"), Mapping):
        # Pod-level requests, where given, are the pod's (PodLevelResources).
        for name in ("cpu", "memory"):
            if name in pod_level["requests"]:
                total[name] = parse_quantity(pod_level["requests"][name])
    _add(total, spec.get("overhead"))
    return total


def _scaled(name: str, value: Decimal) -> int:
    """The integers the kubelet prints: millicores for cpu, whole units (bytes) otherwise, rounded up."""
    return math.ceil(value * 1000) if name == "cpu" else math.ceil(value)


def _node_amount(allocatable: Mapping[str, Any], name: str) -> Decimal:
    try:
        return parse_quantity(allocatable.get(name, 0))
    except ValueError:
        return Decimal(0)


def _guaranteed_cpu_changes(spec: Mapping[str, Any], allocated: Allocation) -> bool:
    for c in [*_containers(spec, "initContainers"), *_containers(spec, "containers")]:
        want = _semantic(_resources(c)).get("requests", {}).get("cpu")
        have = _semantic(allocated.get(str(c.get("name")), {})).get("requests", {}).get("cpu")
        if want != have:
            return True
    return False


def decide(
    spec: Mapping[str, Any],
    allocated: Allocation,
    others: Iterable[Mapping[str, Decimal]],
    allocatable: Mapping[str, Any],
    *,
    qos_class: str | None = None,
    cpu_manager_policy: str = "none",
) -> ResizeDecision:
    """Accept, defer or refuse the resize of a pod whose spec is ``spec`` (wire form).

    ``allocated``: what the kubelet allocated it; ``others``: the requests of the other pods
    the node has allocated (:func:`pod_requests` of each); ``allocatable``: the node's.
    """
    qos = qos_class or compute_pod_qos(spec)
    if (
        qos == GUARANTEED
        and cpu_manager_policy == CPU_MANAGER_STATIC
        and _guaranteed_cpu_changes(spec, allocated)
    ):
        return ResizeDecision(
            INFEASIBLE,
            INFEASIBLE,
            f'Resize is infeasible for Guaranteed Pods alongside CPU Manager policy "{CPU_MANAGER_STATIC}"',
        )
    wanted = pod_requests(spec)
    used: dict[str, Decimal] = {}
    count = 0
    for requests in others:
        count += 1
        for name, value in requests.items():
            used[name] = used.get(name, Decimal(0)) + value
    if "pods" in allocatable and count + 1 > _node_amount(allocatable, "pods"):
        capacity = int(_node_amount(allocatable, "pods"))
        return ResizeDecision(
            DEFERRED,
            "OutOfpods",
            f"Node didn't have enough resource: pods, requested: 1, used: {count}, capacity: {capacity}",
        )
    for name in _FIT_ORDER:
        want = wanted.get(name, Decimal(0))
        if want <= 0 or name not in allocatable:
            continue
        free = _node_amount(allocatable, name) - used.get(name, Decimal(0))
        if want > free:
            return ResizeDecision(
                DEFERRED,
                _OUT_OF[name],
                f"Node didn't have enough resource: {name}, requested: {_scaled(name, want)}, "
                f"used: {_scaled(name, used.get(name, Decimal(0)))}, "
                f"capacity: {_scaled(name, _node_amount(allocatable, name))}",
            )
    return ResizeDecision(ACCEPTED)


def resize_message(prefix: str, spec: Mapping[str, Any], generation: int, error: str = "") -> str:
    """events.podResizeMessage: ``prefix: {"containers":[...],"generation":N[,"error":...]}``."""

    def summary(key: str) -> list[dict[str, Any]]:
        return [{"name": c.get("name"), "resources": _resources(c)} for c in _containers(spec, key)]

    body: dict[str, Any] = {}
    if summary("initContainers"):
        body["initContainers"] = summary("initContainers")
    if summary("containers"):
        body["containers"] = summary("containers")
    body["generation"] = generation
    if error:
        body["error"] = error
    return f"{prefix}: {json.dumps(body, separators=(',', ':'))}"
