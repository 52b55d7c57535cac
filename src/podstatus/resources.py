"""Resource arithmetic of pods in the wire form, shared by the embedded server and the node.

``resourcehelper.PodRequests`` (a pod's requests: containers summed, init containers at
their peak, sidecars always, overhead, pod-level requests where given), allocations
(container name -> its ``requests``/``limits``) and their comparison as
``apiequality.Semantic`` does (``1`` is ``1000m``). Pure functions.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from .qos import parse_quantity

__all__ = [
    "Allocation",
    "allocation_of",
    "allocation_of_pod",
    "canonical_quantity",
    "containers_of",
    "node_amount",
    "pod_requests",
    "resources_of",
    "same_allocation",
    "same_resources",
    "scaled",
    "semantic_resources",
]

# container name -> its resources (``requests``/``limits``), as the kubelet checkpoints them.
Allocation = dict[str, dict[str, Any]]


def containers_of(spec: Mapping[str, Any], key: str) -> list[Mapping[str, Any]]:
    items = spec.get(key)
    return [c for c in items if isinstance(c, Mapping)] if isinstance(items, list) else []


def resources_of(c: Mapping[str, Any]) -> dict[str, Any]:
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
        str(c.get("name")): resources_of(c)
        for c in [*containers_of(spec, "initContainers"), *containers_of(spec, "containers")]
    }


def allocation_of_pod(pod: Any) -> Allocation:
    """:func:`allocation_of` from a typed :class:`~podstatus.types.Pod` (no conversion of its spec)."""
    spec = pod.spec
    return {
        c.name: resources_of({"resources": c.resources})
        for c in (*(spec.init_containers or ()), *(spec.containers or ()))
    }


def semantic_resources(resources: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
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
    return semantic_resources(a or {}) == semantic_resources(b or {})


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
        return resources_of(c).get("requests")

    total: dict[str, Decimal] = {}
    for c in containers_of(spec, "containers"):
        _add(total, requests(c))
    sidecars: dict[str, Decimal] = {}
    peak: dict[str, Decimal] = {}
    for c in containers_of(spec, "initContainers"):
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


def scaled(name: str, value: Decimal) -> int:
    """The integers the kubelet prints: millicores for cpu, whole units (bytes) otherwise, rounded up."""
    return math.ceil(value * 1000) if name == "cpu" else math.ceil(value)


def node_amount(allocatable: Mapping[str, Any], name: str) -> Decimal:
    try:
        return parse_quantity(allocatable.get(name, 0))
    except ValueError:
        return Decimal(0)


_DECIMAL_SUFFIXES = {-9: "n", -6: "u", -3: "m", 0: "", 3: "k", 6: "M", 9: "G", 12: "T", 15: "P", 18: "E"}
_BINARY_SUFFIXES = ("", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei")
_NANO = Decimal("1e-9")
_EXPONENT = re.compile(r"[eE][+-]?\d+$")  # 1e3 (an exponent), not 1E (exa)


def canonical_quantity(value: Any) -> Any:
    """A quantity as kube-apiserver stores it (resource.Quantity's canonical form): ``0.3`` is ``300m``,
    ``1000m`` is ``1``, ``1024Mi`` is ``1Gi``; precision below nano rounds up. What is no quantity
    is returned as it is (validation reports it)."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        return value
    text = str(value).strip()
    try:
        amount = parse_quantity(text)
    except ValueError:
        return value
    binary = text.endswith(_BINARY_SUFFIXES[1:])
    exponent_form = not binary and _EXPONENT.search(text) is not None
    if amount != amount.quantize(_NANO, rounding="ROUND_CEILING"):
        amount = amount.quantize(_NANO, rounding="ROUND_CEILING")
    if amount == 0:
        return "0"
    if binary and abs(amount) >= 1024 and amount == amount.to_integral_value():
        number, power = int(amount), 0
        while power < len(_BINARY_SUFFIXES) - 1 and number % 1024 == 0:
            number //= 1024
            power += 1
        return f"{number}{_BINARY_SUFFIXES[power]}"
    # Decimal: the largest power of 1000 that leaves a whole mantissa.
    for exp in range(18, -12, -3):
        mantissa = amount / (Decimal(10) ** exp)
        if mantissa == mantissa.to_integral_value():
            if exponent_form:
                return f"{int(mantissa)}e{exp}" if exp else str(int(mantissa))
            return f"{int(mantissa)}{_DECIMAL_SUFFIXES[exp]}"
    return value  # pragma: no cover - nano precision always leaves a whole mantissa
