"""A provider's report made a pod status, as the kubelet's ``generateAPIPodStatus`` makes one.

Pure: the pod, what the provider reported, the status the agent last set (``base``) and the
allocation in; the completed status out. The pod controller does the I/O (reading the cached
status once, handing the result to the status manager).

Two steps, because the controller acts between them: :func:`complete_containers` (every
container of the spec gets a status, with its resources), then :func:`complete_status` (phase,
the kubelet's conditions with the manager's resize conditions, addresses, QoS class).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from ..conditions import (
    POD_READY_TO_START_CONTAINERS,
    POD_SCHEDULED,
    calculate_pod_condition_observed_generation,
    generate_containers_ready_condition,
    generate_pod_initialized_condition,
    generate_pod_ready_condition,
    is_kubelet_owned,
    is_terminal_phase,
)
from ..qos import compute_pod_qos
from ..types import (
    ContainerState,
    ContainerStateWaiting,
    ContainerStatus,
    HostIP,
    Pod,
    PodCondition,
    PodIP,
    PodStatus,
)
from ..validation import reported_status_problem
from .resize import Allocation, allocation_of_pod

__all__ = [
    "UnusableStatus",
    "complete_containers",
    "complete_status",
    "initial_allocation",
    "non_kubelet_conditions",
]


class UnusableStatus(ValueError):
    """The provider reported something that cannot be a pod's status."""


def non_kubelet_conditions(pod: Pod) -> tuple[tuple[str, str], ...]:
    return tuple((c.type, c.status) for c in pod.status.conditions or () if not is_kubelet_owned(c.type))


def _waiting(c: Any, reason: str) -> ContainerStatus:
    return ContainerStatus(
        name=c.name,
        image=c.image or "",
        ready=False,
        restart_count=0,
        state=ContainerState(waiting=ContainerStateWaiting(reason=reason)),
    )


def initial_allocation(pod: Pod) -> Allocation:
    """What a pod was allocated when the agent first sees it: its spec, or (a pod running before a
    restart of the agent) the resources its container statuses report, as the kubelet's checkpoint."""
    allocation = allocation_of_pod(pod)
    for cs in (*(pod.status.init_container_statuses or ()), *(pod.status.container_statuses or ())):
        if cs.name in allocation and isinstance(cs.resources, dict):
            allocation[cs.name] = {
                k: dict(v) for k, v in cs.resources.items() if k in ("limits", "requests") and v
            }
    return allocation


def _with_resources(
    statuses: tuple[ContainerStatus, ...] | None,
    reported: Any,
    allocated: Allocation | None,
    actuated: Allocation | None,
) -> tuple[ContainerStatus, ...] | None:
    """convertContainerStatusResources: ``allocatedResources`` (the allocated requests) and
    ``resources`` (what runs: the provider's word, else what it was given) on each container
    the provider reported; a container that does not run shows its allocation."""
    if statuses is None or allocated is None:
        return statuses
    names = {cs.name for cs in reported or () if isinstance(cs, ContainerStatus)}
    out = []
    for cs in statuses:
        alloc = allocated.get(cs.name)
        if cs.name in names and alloc is not None:
            resources = cs.resources
            if cs.state.running is None or not isinstance(resources, dict):
                applied = (
                    actuated.get(cs.name) if actuated is not None and cs.state.running is not None else None
                )
                resources = applied if applied is not None else alloc
            requests = alloc.get("requests")
            if cs.allocated_resources is not requests or cs.resources is not resources:
                cs = cs.replace(allocated_resources=requests, resources=resources)
        out.append(cs)
    return tuple(out)


def _containers(
    reported: Any, spec: Iterable[Any], base: PodStatus, init: bool
) -> tuple[ContainerStatus, ...] | None:
    spec = tuple(spec)
    if not spec:
        return None
    if reported is not None and not isinstance(reported, tuple | list):
        raise UnusableStatus(f"container statuses must be a list, got {type(reported).__name__}")
    by_name: dict[str, ContainerStatus] = {}
    for cs in reported or ():
        if not isinstance(cs, ContainerStatus):
            raise UnusableStatus(f"expected a ContainerStatus, got {type(cs).__name__}")
        by_name.setdefault(cs.name, cs)
    names = {c.name for c in spec}
    unknown = sorted(set(by_name) - names)
    if unknown:
        raise UnusableStatus(f"statuses for containers the pod does not have: {', '.join(unknown)}")
    previous = {
        cs.name: cs for cs in (base.init_container_statuses if init else base.container_statuses) or ()
    }
    out = []
    for c in spec:
        cs = by_name.get(c.name) or _waiting(c, "PodInitializing" if init else "ContainerCreating")
        before = previous.get(c.name)
        if (
            before is not None
            and isinstance(cs.restart_count, int)
            and cs.restart_count < before.restart_count
        ):
            cs = cs.replace(restart_count=before.restart_count)  # counts survive a restart of the agent
        if not cs.image:
            cs = cs.replace(image=c.image or "")
        out.append(cs)
    return tuple(out)


def complete_containers(
    pod: Pod,
    status: Any,
    base: PodStatus,
    allocated: Allocation | None,
    actuated: Allocation | None,
) -> tuple[tuple[ContainerStatus, ...] | None, tuple[ContainerStatus, ...] | None]:
    """(init container statuses, container statuses): one per container of the spec.

    Raises :class:`UnusableStatus` for a report that is no pod status (a wrong type, a phase
    that does not exist, statuses of containers the pod does not have).
    """
    problem = reported_status_problem(status)
    if problem is not None:
        raise UnusableStatus(problem)
    inits = _containers(status.init_container_statuses, pod.spec.init_containers or (), base, True)
    mains = _containers(status.container_statuses, pod.spec.containers, base, False)
    inits = _with_resources(inits, status.init_container_statuses, allocated, actuated)
    mains = _with_resources(mains, status.container_statuses, allocated, actuated)
    return inits, mains


def complete_status(
    pod: Pod,
    status: PodStatus,
    base: PodStatus,
    inits: tuple[ContainerStatus, ...] | None,
    mains: tuple[ContainerStatus, ...] | None,
    *,
    resize_conditions: Sequence[PodCondition],
    host_ip: str | None,
) -> PodStatus:
    """The whole status: phase, the kubelet's conditions (after the pod's own and the
    provider's), ``resize_conditions`` from the manager, pod and host IPs, QoS class."""
    phase = status.phase
    if phase == "Pending" and base.phase == "Running":
        # Containers waiting again (restarts, a resumed pod) do not make a running pod Pending.
        phase = "Running"
    every = [*(inits or ()), *(mains or ())]
    conditions: list[PodCondition] = [c for c in pod.status.conditions or () if not is_kubelet_owned(c.type)]
    known = {c.type for c in conditions}
    conditions += [
        c
        for c in status.conditions or ()
        if isinstance(c, PodCondition) and not is_kubelet_owned(c.type) and c.type not in known
    ]
    # The kubelet's conditions carry the pod generation they were made for (KEP-5067).
    generation = calculate_pod_condition_observed_generation(base, pod.metadata.generation, POD_SCHEDULED)
    # The manager's resize conditions go out with every status, as the kubelet adds them.
    conditions += resize_conditions
    started = bool(status.pod_ip) or any(cs.state.waiting is None for cs in every)
    conditions.append(PodCondition(type=POD_SCHEDULED, status="True", observed_generation=generation))
    conditions.append(
        PodCondition(
            type=POD_READY_TO_START_CONTAINERS,
            status="True" if started and not is_terminal_phase(phase) else "False",
            observed_generation=generation,
        )
    )
    conditions.append(generate_pod_initialized_condition(pod.spec, every, phase, pod=pod, old_status=base))
    conditions.append(generate_containers_ready_condition(pod.spec, every, phase, pod=pod, old_status=base))
    conditions.append(
        generate_pod_ready_condition(pod.spec, conditions, every, phase, pod=pod, old_status=base)
    )
    # The API server keeps podIP and podIPs in step: so do we, or every resync would differ.
    pod_ip, pod_ips = status.pod_ip, status.pod_ips
    if pod_ip and not pod_ips:
        pod_ips = (PodIP(ip=pod_ip),)
    elif pod_ips and not pod_ip:
        pod_ip = pod_ips[0].ip
    return status.replace(
        phase=phase,
        pod_ip=pod_ip,
        pod_ips=pod_ips,
        conditions=tuple(conditions),
        host_ip=host_ip,
        host_ips=(HostIP(ip=host_ip),) if host_ip else None,
        init_container_statuses=inits,
        container_statuses=mains,
        qos_class=pod.status.qos_class or compute_pod_qos(pod.spec.to_dict()),
        start_time=None,
    )
