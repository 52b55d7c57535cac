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
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from ..qos import GUARANTEED, compute_pod_qos
from ..resources import (
    Allocation,
    allocation_of,
    allocation_of_pod,
    containers_of,
    node_amount,
    pod_requests,
    resources_of,
    same_allocation,
    same_resources,
    scaled,
    semantic_resources,
)

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
    "same_resources",
]

ACCEPTED = "Accepted"
DEFERRED = "Deferred"
INFEASIBLE = "Infeasible"
CPU_MANAGER_STATIC = "static"


# The order noderesources.fitsRequest checks them in (pods first, then these).
_FIT_ORDER = ("cpu", "memory", "ephemeral-storage")
_OUT_OF = {"cpu": "OutOfcpu", "memory": "OutOfmemory", "ephemeral-storage": "OutOfephemeral-storage"}


@dataclass(frozen=True)
class ResizeDecision:
    """``outcome``: ACCEPTED, DEFERRED or INFEASIBLE; ``reason``/``message`` as the admit handler gives them."""

    outcome: str
    reason: str = ""
    message: str = ""


def _guaranteed_cpu_changes(spec: Mapping[str, Any], allocated: Allocation) -> bool:
    for c in [*containers_of(spec, "initContainers"), *containers_of(spec, "containers")]:
        want = semantic_resources(resources_of(c)).get("requests", {}).get("cpu")
        have = semantic_resources(allocated.get(str(c.get("name")), {})).get("requests", {}).get("cpu")
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
    if "pods" in allocatable and count + 1 > node_amount(allocatable, "pods"):
        capacity = int(node_amount(allocatable, "pods"))
        return ResizeDecision(
            DEFERRED,
            "OutOfpods",
            f"Node didn't have enough resource: pods, requested: 1, used: {count}, capacity: {capacity}",
        )
    for name in _FIT_ORDER:
        want = wanted.get(name, Decimal(0))
        if want <= 0 or name not in allocatable:
            continue
        free = node_amount(allocatable, name) - used.get(name, Decimal(0))
        if want > free:
            return ResizeDecision(
                DEFERRED,
                _OUT_OF[name],
                f"Node didn't have enough resource: {name}, requested: {scaled(name, want)}, "
                f"used: {scaled(name, used.get(name, Decimal(0)))}, "
                f"capacity: {scaled(name, node_amount(allocatable, name))}",
            )
    return ResizeDecision(ACCEPTED)


def resize_message(prefix: str, spec: Mapping[str, Any], generation: int, error: str = "") -> str:
    """events.podResizeMessage: ``prefix: {"containers":[...],"generation":N[,"error":...]}``."""

    def summary(key: str) -> list[dict[str, Any]]:
        return [{"name": c.get("name"), "resources": resources_of(c)} for c in containers_of(spec, key)]

    body: dict[str, Any] = {}
    if summary("initContainers"):
        body["initContainers"] = summary("initContainers")
    if summary("containers"):
        body["containers"] = summary("containers")
    body["generation"] = generation
    if error:
        body["error"] = error
    return f"{prefix}: {json.dumps(body, separators=(',', ':'))}"
