"""A pod's QoS class, by the kubelet's rule (``k8s.io/kubernetes/pkg/apis/core/v1/helper/qos``).

The API server sets ``status.qosClass`` when a pod is created and refuses any
later change ("field is immutable"), so a node agent must report the class the
pod already has; :func:`pod_qos_class` does that, and computes it from the spec
only for a pod that has none yet. Pure functions over the wire form (dicts).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

__all__ = [
    "BEST_EFFORT",
    "BURSTABLE",
    "GUARANTEED",
    "compute_pod_qos",
    "parse_quantity",
    "pod_qos_class",
]

GUARANTEED = "Guaranteed"
BURSTABLE = "Burstable"
BEST_EFFORT = "BestEffort"

# Only these resources decide the class (isSupportedQoSComputeResource).
_QOS_RESOURCES = ("cpu", "memory")

_SUFFIXES: Mapping[str, Decimal] = {
    "": Decimal(1),
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
    "Ki": Decimal(2**10),
    "Mi": Decimal(2**20),
    "Gi": Decimal(2**30),
    "Ti": Decimal(2**40),
    "Pi": Decimal(2**50),
    "Ei": Decimal(2**60),
}
_QUANTITY = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+))(?:([eE][+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?)$")


def parse_quantity(value: Any) -> Decimal:
    """A resource quantity (``"100m"``, ``"1Gi"``, ``"1e3"``, ``2``) as an exact Decimal.

    Raises ``ValueError`` for text that is not a Kubernetes quantity.
    """
    if isinstance(value, bool):
        raise ValueError(f"quantities must match the regular expression of resource.Quantity: {value!r}")
    if isinstance(value, int | float):
        return Decimal(str(value))
    if not isinstance(value, str):
        raise ValueError(f"quantities must match the regular expression of resource.Quantity: {value!r}")
    match = _QUANTITY.match(value.strip())
    if match is None:
        raise ValueError(f"quantities must match the regular expression of resource.Quantity: {value!r}")
    number, exponent, suffix = match.groups()
    try:
        if exponent:
            return Decimal(number + exponent)
        return Decimal(number) * _SUFFIXES[suffix or ""]
    except InvalidOperation as err:  # pragma: no cover - the pattern admits only valid numbers
        raise ValueError(f"invalid quantity {value!r}") from err


def _add_positive(into: dict[str, Decimal], resources: Any) -> set[str]:
    """Add the positive cpu/memory quantities of ``resources`` to ``into``; the names found."""
    found: set[str] = set()
    if not isinstance(resources, Mapping):
        return found
    for name in _QOS_RESOURCES:
        if name not in resources:
            continue
        try:
            quantity = parse_quantity(resources[name])
        except ValueError:
            continue
        if quantity > 0:
            found.add(name)
            into[name] = into.get(name, Decimal(0)) + quantity
    return found


def compute_pod_qos(spec: Mapping[str, Any]) -> str:
    """The QoS class of a pod spec in the wire form (ComputePodQOS).

    Pod-level ``spec.resources``, when set, decide alone; otherwise every
    regular and init container counts (ephemeral containers have no
    resources). The spec is expected as the API server stores it, with
    requests defaulted from limits.
    """
    requests: dict[str, Decimal] = {}
    limits: dict[str, Decimal] = {}
    guaranteed = True
    pod_level = spec.get("resources")
    if isinstance(pod_level, Mapping) and pod_level:
        holders: list[Any] = [pod_level]
    else:
        holders = [
            c.get("resources") if isinstance(c, Mapping) else None
            for c in [*(spec.get("containers") or ()), *(spec.get("initContainers") or ())]
        ]
    for resources in holders:
        if not isinstance(resources, Mapping):
            resources = {}
        _add_positive(requests, resources.get("requests"))
        if pod_level is not None and resources is pod_level and not resources.get("limits"):
            continue  # pod-level: limits are checked only when given
        if _add_positive(limits, resources.get("limits")) != set(_QOS_RESOURCES):
            guaranteed = False
    if not requests and not limits:
        return BEST_EFFORT
    matching = all(limits.get(name) == quantity for name, quantity in requests.items())
    return GUARANTEED if guaranteed and matching and len(requests) == len(limits) else BURSTABLE


def pod_qos_class(pod: Mapping[str, Any]) -> str:
    """The class a node agent reports: the one the pod has (immutable), else computed from its spec."""
    status = pod.get("status")
    if isinstance(status, Mapping):
        existing = status.get("qosClass")
        if isinstance(existing, str) and existing:
            return existing
    spec = pod.get("spec")
    return compute_pod_qos(spec if isinstance(spec, Mapping) else {})
