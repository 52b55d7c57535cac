"""The node's resize decision (podstatus.node.resize), table-driven like the kubelet's allocation tests.

The node and the numbers are those of TestHandlePodResourcesResize (pkg/kubelet/allocation,
v1.37.2): 4 cpu and 4Gi allocatable, the other pods holding 2 cpu and 2Gi; the messages are
the ones that test expects.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from podstatus.node.resize import (
    ACCEPTED,
    DEFERRED,
    INFEASIBLE,
    allocation_of,
    decide,
    pod_requests,
    resize_message,
    same_allocation,
)

NODE = {"cpu": "4", "memory": "4Gi", "pods": "110"}
OTHERS = [{"cpu": Decimal("1"), "memory": Decimal(2**30)}, {"cpu": Decimal("1"), "memory": Decimal(2**30)}]


def spec(cpu: str, memory: str, *, limits: bool = False, name: str = "c1") -> dict[str, Any]:
    res: dict[str, Any] = {"requests": {"cpu": cpu, "memory": memory}}
    if limits:
        res["limits"] = {"cpu": cpu, "memory": memory}
    return {"containers": [{"name": name, "image": "i", "resources": res}]}


ALLOCATED = allocation_of(spec("1", "1000Mi"))

CASES = [
    ("no change", spec("1", "1000Mi"), ACCEPTED, "", ""),
    ("cpu and memory down", spec("500m", "500Mi"), ACCEPTED, "", ""),
    ("cpu down, memory up", spec("500m", "1500Mi"), ACCEPTED, "", ""),
    ("cpu up within the free part", spec("2", "1000Mi"), ACCEPTED, "", ""),
    (
        "cpu and memory up beyond what is free: cpu is checked first",
        spec("2500m", "2500Mi"),
        DEFERRED,
        "OutOfcpu",
        "Node didn't have enough resource: cpu, requested: 2500, used: 2000, capacity: 4000",
    ),
    (
        "memory up beyond the node's capacity: deferred, not infeasible, in v1.37",
        spec("1", "4500Mi"),
        DEFERRED,
        "OutOfmemory",
        "Node didn't have enough resource: memory, requested: 4718592000, used: 2147483648, capacity: 4294967296",
    ),
    (
        "cpu up beyond the node's capacity",
        spec("5", "1000Mi"),
        DEFERRED,
        "OutOfcpu",
        "Node didn't have enough resource: cpu, requested: 5000, used: 2000, capacity: 4000",
    ),
]


@pytest.mark.parametrize(
    ("name", "desired", "outcome", "reason", "message"), CASES, ids=[c[0] for c in CASES]
)
def test_decide(name: str, desired: dict[str, Any], outcome: str, reason: str, message: str) -> None:
    decision = decide(desired, ALLOCATED, OTHERS, NODE)
    assert (decision.outcome, decision.reason, decision.message) == (outcome, reason, message)


def test_static_cpu_manager_makes_a_guaranteed_cpu_resize_infeasible() -> None:
    allocated = allocation_of(spec("1", "1Gi", limits=True))
    cpu_change = spec("2", "1Gi", limits=True)
    decision = decide(cpu_change, allocated, [], NODE, cpu_manager_policy="static")
    assert (decision.outcome, decision.reason, decision.message) == (
        INFEASIBLE,
        INFEASIBLE,
        'Resize is infeasible for Guaranteed Pods alongside CPU Manager policy "static"',
    )
    # Memory alone may change; without the static policy cpu may too.
    assert (
        decide(spec("1", "2Gi", limits=True), allocated, [], NODE, cpu_manager_policy="static").outcome
        == ACCEPTED
    )
    assert decide(cpu_change, allocated, [], NODE).outcome == ACCEPTED
    # A Burstable pod is not bound to exclusive cpus.
    assert decide(
        spec("2", "1Gi"), allocation_of(spec("1", "1Gi")), [], NODE, cpu_manager_policy="static"
    ).outcome == (ACCEPTED)


def test_full_node_defers_on_pod_count() -> None:
    decision = decide(spec("1", "1Gi"), ALLOCATED, OTHERS, {**NODE, "pods": "2"})
    assert (decision.reason, decision.message) == (
        "OutOfpods",
        "Node didn't have enough resource: pods, requested: 1, used: 2, capacity: 2",
    )


def test_pod_requests_counts_init_containers_at_their_peak_and_sidecars_always() -> None:
    pod = {
        "initContainers": [
            {"name": "side", "restartPolicy": "Always", "resources": {"requests": {"cpu": "100m"}}},
            {"name": "init", "resources": {"requests": {"cpu": "3", "memory": "1Gi"}}},
        ],
        "containers": [{"name": "a", "resources": {"requests": {"cpu": "1", "memory": "2Gi"}}}],
        "overhead": {"cpu": "10m"},
    }
    # Containers 1 + sidecar 0.1 = 1.1; the init step 3 + sidecar 0.1 = 3.1 is the peak.
    assert pod_requests(pod) == {"cpu": Decimal("3.110"), "memory": Decimal(2 * 2**30)}
    # With an allocation, the allocated requests count, not the spec's.
    allocation = {"a": {"requests": {"cpu": "500m"}}, "init": {}, "side": {}}
    assert pod_requests(pod, allocation)["cpu"] == Decimal("0.510")


def test_same_allocation_compares_quantities_semantically() -> None:
    assert same_allocation(allocation_of(spec("1", "1Gi")), allocation_of(spec("1000m", "1073741824")))
    assert not same_allocation(allocation_of(spec("1", "1Gi")), allocation_of(spec("1", "2Gi")))


def test_resize_message_is_the_kubelets_event_text() -> None:
    # events/resize_test.go's shape: containers with their resources, the generation, the error.
    text = resize_message(
        "Pod resize OutOfcpu",
        spec("5", "4500Mi"),
        2,
        "Node didn't have enough resource: cpu, requested: 5000, used: 0, capacity: 4000",
    )
    assert text == (
        'Pod resize OutOfcpu: {"containers":[{"name":"c1","resources":{"requests":{"cpu":"5","memory":"4500Mi"}}}],'
        '"generation":2,"error":"Node didn\'t have enough resource: cpu, requested: 5000, used: 0, capacity: 4000"}'
    )
    assert resize_message("Pod resize started", spec("1", "1Gi"), 1) == (
        'Pod resize started: {"containers":[{"name":"c1","resources":{"requests":{"cpu":"1","memory":"1Gi"}}}],'
        '"generation":1}'
    )
