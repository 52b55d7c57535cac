"""Pod conditions the kubelet owns, derived from a pod's spec and container statuses.

Pure functions and constants, no I/O: this mirrors the kubelet's
``pkg/kubelet/status/generate.go`` (SPEC section 3), so the rules can be tested
and trusted without a server. Generated conditions carry no times
(``last_probe_time`` and ``last_transition_time`` are ``None``); the manager
sets transition times when it accepts a status.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from .types import Container, ContainerStatus, Pod, PodCondition, PodSpec

__all__ = [
    "CONTAINERS_NOT_INITIALIZED",
    "CONTAINERS_NOT_READY",
    "CONTAINERS_READY",
    "DISRUPTION_TARGET",
    "KUBELET_OWNED_CONDITIONS",
    "KUBELET_SHARED_CONDITIONS",
    "PHASE_FAILED",
    "PHASE_PENDING",
    "PHASE_RUNNING",
    "PHASE_SUCCEEDED",
    "PHASE_UNKNOWN",
    "POD_COMPLETED",
    "POD_FAILED",
    "POD_INITIALIZED",
    "POD_READY",
    "POD_READY_TO_START_CONTAINERS",
    "POD_SCHEDULED",
    "READINESS_GATES_NOT_READY",
    "TERMINAL_PHASES",
    "UNKNOWN_CONTAINER_STATUSES",
    "generate_containers_ready_condition",
    "generate_pod_initialized_condition",
    "generate_pod_ready_condition",
    "get_condition",
    "is_kubelet_owned",
    "is_kubelet_shared",
    "is_restartable_init_container",
    "is_terminal_phase",
    "need_to_reconcile_pod_readiness",
]

# --- reasons (SPEC 2.2) -------------------------------------------------------------

UNKNOWN_CONTAINER_STATUSES = "UnknownContainerStatuses"
POD_COMPLETED = "PodCompleted"
POD_FAILED = "PodFailed"
CONTAINERS_NOT_READY = "ContainersNotReady"
CONTAINERS_NOT_INITIALIZED = "ContainersNotInitialized"
READINESS_GATES_NOT_READY = "ReadinessGatesNotReady"

# --- condition types ----------------------------------------------------------------

POD_READY = "Ready"
CONTAINERS_READY = "ContainersReady"
POD_INITIALIZED = "Initialized"
POD_READY_TO_START_CONTAINERS = "PodReadyToStartContainers"
POD_SCHEDULED = "PodScheduled"
DISRUPTION_TARGET = "DisruptionTarget"

KUBELET_OWNED_CONDITIONS: frozenset[str] = frozenset(
    {POD_SCHEDULED, POD_READY, POD_INITIALIZED, CONTAINERS_READY, POD_READY_TO_START_CONTAINERS}
)
# Other components (the eviction API, the taint manager...) may set these too.
KUBELET_SHARED_CONDITIONS: frozenset[str] = frozenset({DISRUPTION_TARGET})

# --- phases -------------------------------------------------------------------------

PHASE_PENDING = "Pending"
PHASE_RUNNING = "Running"
PHASE_SUCCEEDED = "Succeeded"
PHASE_FAILED = "Failed"
PHASE_UNKNOWN = "Unknown"
TERMINAL_PHASES: frozenset[str] = frozenset({PHASE_SUCCEEDED, PHASE_FAILED})

_TRUE = "True"
_FALSE = "False"
_RESTART_ALWAYS = "Always"


def is_kubelet_owned(condition_type: str) -> bool:
    """True for the condition types only the kubelet sets."""
    return condition_type in KUBELET_OWNED_CONDITIONS


def is_kubelet_shared(condition_type: str) -> bool:
    """True for the condition types the kubelet sets alongside other components."""
    return condition_type in KUBELET_SHARED_CONDITIONS


def is_terminal_phase(phase: str | None) -> bool:
    """``Succeeded`` or ``Failed``: a pod never leaves these."""
    return phase in TERMINAL_PHASES


def is_restartable_init_container(container: Container) -> bool:
    """An init container whose own restart policy is ``Always`` (a sidecar)."""
    return container.restart_policy == _RESTART_ALWAYS


def get_condition(conditions: Iterable[PodCondition] | None, condition_type: str) -> PodCondition | None:
    """The first condition of that type, or None."""
    if conditions:
        for condition in conditions:
            if condition.type == condition_type:
                return condition
    return None


def _statuses_by_name(statuses: Iterable[ContainerStatus] | None) -> dict[str, ContainerStatus]:
    # The first status of a name wins, as podutil.GetContainerStatus returns the first match.
    by_name: dict[str, ContainerStatus] = {}
    for status in statuses or ():
        by_name.setdefault(status.name, status)
    return by_name


def _names(names: Sequence[str]) -> str:
    # Go's %s of a []string: "[a b c]".
    return "[" + " ".join(names) + "]"


def _condition(
    condition_type: str, status: str, reason: str | None = None, message: str | None = None
) -> PodCondition:
    return PodCondition(
        type=condition_type,
        status=status,
        reason=reason,
        message=message,
        last_probe_time=None,
        last_transition_time=None,
    )


# --- ContainersReady ----------------------------------------------------------------


def generate_containers_ready_condition(
    spec: PodSpec, container_statuses: Sequence[ContainerStatus] | None, pod_phase: str | None
) -> PodCondition:
    """The ``ContainersReady`` condition (SPEC 3, ContainersReady)."""
    if container_statuses is None:
        return _condition(CONTAINERS_READY, _FALSE, UNKNOWN_CONTAINER_STATUSES)

    by_name = _statuses_by_name(container_statuses)
    unknown: list[str] = []
    unready: list[str] = []
    # Sidecars count towards readiness like regular containers; other init containers do not.
    sidecars = [c for c in spec.init_containers or () if is_restartable_init_container(c)]
    for container in (*sidecars, *spec.containers):
        status = by_name.get(container.name)
        if status is None:
            unknown.append(container.name)
        elif not status.ready:
            unready.append(container.name)

    if pod_phase == PHASE_SUCCEEDED and not unknown:
        return _condition(CONTAINERS_READY, _FALSE, POD_COMPLETED)
    # Containers of a failed pod may still be shutting down and report ready; the pod is not.
    if pod_phase == PHASE_FAILED:
        return _condition(CONTAINERS_READY, _FALSE, POD_FAILED)

    messages: list[str] = []
    if unknown:
        messages.append(f"containers with unknown status: {_names(unknown)}")
    if unready:
        messages.append(f"containers with unready status: {_names(unready)}")
    if messages:
        return _condition(CONTAINERS_READY, _FALSE, CONTAINERS_NOT_READY, ", ".join(messages))
    return _condition(CONTAINERS_READY, _TRUE)


# --- Ready --------------------------------------------------------------------------


def generate_pod_ready_condition(
    spec: PodSpec,
    conditions: Sequence[PodCondition] | None,
    container_statuses: Sequence[ContainerStatus] | None,
    pod_phase: str | None,
) -> PodCondition:
    """The ``Ready`` condition: ContainersReady plus every readiness gate (SPEC 3, Ready)."""
    containers_ready = generate_containers_ready_condition(spec, container_statuses, pod_phase)
    if containers_ready.status != _TRUE:
        return _condition(
            POD_READY, containers_ready.status, containers_ready.reason, containers_ready.message
        )

    messages: list[str] = []
    for gate in spec.readiness_gates or ():
        gate_type = gate.condition_type
        condition = get_condition(conditions, gate_type)
        if condition is None:
            messages.append(f'corresponding condition of pod readiness gate "{gate_type}" does not exist.')
        elif condition.status != _TRUE:
            messages.append(
                f'the status of pod readiness gate "{gate_type}" is not "True", but {condition.status}'
            )
    if messages:
        return _condition(POD_READY, _FALSE, READINESS_GATES_NOT_READY, ", ".join(messages))
    return _condition(POD_READY, _TRUE)


# --- Initialized --------------------------------------------------------------------


def _is_init_container_initialized(container: Container, status: ContainerStatus) -> bool:
    if is_restartable_init_container(container):
        # A sidecar never exits; it counts once its startup probe (if any) has passed.
        return status.started is True
    return status.ready


def _has_any_regular_container_started(spec: PodSpec, statuses: Sequence[ContainerStatus] | None) -> bool:
    if not statuses:
        return False
    names = {c.name for c in spec.containers}
    for status in statuses:
        if status.name in names and (status.state.running is not None or status.state.terminated is not None):
            return True
    return False


def generate_pod_initialized_condition(
    spec: PodSpec, container_statuses: Sequence[ContainerStatus] | None, pod_phase: str | None
) -> PodCondition:
    """The ``Initialized`` condition (SPEC 3, Initialized).

    ``container_statuses`` holds the init container statuses (and may hold the
    regular ones too: those show whether a regular container has started).
    """
    init_containers = spec.init_containers or ()
    if container_statuses is None and init_containers:
        return _condition(POD_INITIALIZED, _FALSE, UNKNOWN_CONTAINER_STATUSES)

    by_name = _statuses_by_name(container_statuses)
    unknown: list[str] = []
    incomplete: list[str] = []
    for container in init_containers:
        status = by_name.get(container.name)
        if status is None:
            unknown.append(container.name)
        elif not _is_init_container_initialized(container, status):
            incomplete.append(container.name)

    if pod_phase == PHASE_SUCCEEDED and not unknown:
        return _condition(POD_INITIALIZED, _TRUE, POD_COMPLETED)
    # A regular container has run, so the pod initialized before; sidecars may be restarting.
    if _has_any_regular_container_started(spec, container_statuses):
        return _condition(POD_INITIALIZED, _TRUE)

    messages: list[str] = []
    if unknown:
        messages.append(f"containers with unknown status: {_names(unknown)}")
    if incomplete:
        messages.append(f"containers with incomplete status: {_names(incomplete)}")
    if messages:
        return _condition(POD_INITIALIZED, _FALSE, CONTAINERS_NOT_INITIALIZED, ", ".join(messages))
    return _condition(POD_INITIALIZED, _TRUE)


# --- readiness gates ----------------------------------------------------------------


def need_to_reconcile_pod_readiness(pod: Pod) -> bool:
    """True when the pod's ``Ready`` condition no longer matches its readiness gates.

    Only a pod with readiness gates and an existing ``Ready`` condition needs
    it: a gate's condition is set by another component, so the kubelet must
    re-derive ``Ready`` when that condition changes.
    """
    if not pod.spec.readiness_gates:
        return False
    status = pod.status
    current = get_condition(status.conditions, POD_READY)
    if current is None:
        return False
    wanted = generate_pod_ready_condition(
        pod.spec, status.conditions, status.container_statuses, status.phase
    )
    # Go compares strings: an unset message equals "".
    return current.status != wanted.status or (current.message or "") != (wanted.message or "")
