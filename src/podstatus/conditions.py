"""Pod conditions the kubelet owns, derived from a pod's spec and container statuses.

Pure functions and constants, no I/O: this mirrors the kubelet's
``pkg/kubelet/status/generate.go`` (SPEC section 3), so the rules can be tested
and trusted without a server. Generated conditions carry no times
(``last_probe_time`` and ``last_transition_time`` are ``None``); the manager
sets transition times when it accepts a status.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .types import Container, ContainerStatus, Pod, PodCondition, PodSpec, PodStatus

__all__ = [
    "ALL_CONTAINERS_RESTARTING",
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
    "POD_REASON_DEFERRED",
    "POD_REASON_ERROR",
    "POD_REASON_INFEASIBLE",
    "POD_RESIZE_IN_PROGRESS",
    "POD_RESIZE_PENDING",
    "POD_SANDBOX_NOT_READY",
    "POD_SCHEDULED",
    "READINESS_GATES_NOT_READY",
    "RESTART_ALL_CONTAINERS_STARTED",
    "TERMINAL_PHASES",
    "UNKNOWN_CONTAINER_STATUSES",
    "RuntimeContainerStatus",
    "SandboxStatus",
    "all_containers_could_restart",
    "calculate_pod_condition_observed_generation",
    "calculate_pod_status_observed_generation",
    "container_should_restart",
    "find_matching_container_restart_rule",
    "generate_all_containers_restarting_condition",
    "generate_containers_ready_condition",
    "generate_pod_initialized_condition",
    "generate_pod_ready_condition",
    "generate_pod_ready_to_start_containers_condition",
    "get_condition",
    "is_kubelet_owned",
    "is_kubelet_shared",
    "is_restartable_init_container",
    "is_terminal_phase",
    "need_to_reconcile_pod_readiness",
    "pod_sandbox_changed",
]

# --- reasons (SPEC 2.2) -------------------------------------------------------------

UNKNOWN_CONTAINER_STATUSES = "UnknownContainerStatuses"
POD_COMPLETED = "PodCompleted"
POD_FAILED = "PodFailed"
CONTAINERS_NOT_READY = "ContainersNotReady"
CONTAINERS_NOT_INITIALIZED = "ContainersNotInitialized"
READINESS_GATES_NOT_READY = "ReadinessGatesNotReady"
# v1.37: a container exited and a restart rule restarts all the pod's containers.
RESTART_ALL_CONTAINERS_STARTED = "RestartAllContainersStarted"
# kubetypes.PodSandboxNotReadyReason: PodReadyToStartContainers is False.
POD_SANDBOX_NOT_READY = "PodSandboxNotReady"
# Reasons of the resize conditions (core/v1).
POD_REASON_DEFERRED = "Deferred"
POD_REASON_INFEASIBLE = "Infeasible"
POD_REASON_ERROR = "Error"

# --- condition types ----------------------------------------------------------------

POD_READY = "Ready"
CONTAINERS_READY = "ContainersReady"
POD_INITIALIZED = "Initialized"
POD_READY_TO_START_CONTAINERS = "PodReadyToStartContainers"
POD_SCHEDULED = "PodScheduled"
DISRUPTION_TARGET = "DisruptionTarget"
POD_RESIZE_PENDING = "PodResizePending"
POD_RESIZE_IN_PROGRESS = "PodResizeInProgress"
ALL_CONTAINERS_RESTARTING = "AllContainersRestarting"

# v1.37.2 with its default feature gates (kubetypes.PodConditionByKubelet): the two resize
# conditions and AllContainersRestarting are the kubelet's too, so a merge takes them from the
# cache (which is how the manager's resize conditions reach the server) and drops others' copies.
KUBELET_OWNED_CONDITIONS: frozenset[str] = frozenset(
    {
        POD_SCHEDULED,
        POD_READY,
        POD_INITIALIZED,
        CONTAINERS_READY,
        POD_READY_TO_START_CONTAINERS,
        POD_RESIZE_PENDING,
        POD_RESIZE_IN_PROGRESS,
        ALL_CONTAINERS_RESTARTING,
    }
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
    condition_type: str,
    status: str,
    reason: str | None = None,
    message: str | None = None,
    observed_generation: int | None = None,
) -> PodCondition:
    return PodCondition(
        type=condition_type,
        status=status,
        observed_generation=observed_generation,
        reason=reason,
        message=message,
        last_probe_time=None,
        last_transition_time=None,
    )


# --- observedGeneration (KEP-5067) --------------------------------------------------


def _generation_of(pod: Pod | None) -> int | None:
    # Go's int64 0 is "unset" (omitempty): None here, so both print the same.
    generation = pod.metadata.generation if pod is not None else None
    return generation or None


def calculate_pod_status_observed_generation(pod: Pod) -> int | None:
    """``status.observedGeneration`` the kubelet writes: the pod's ``metadata.generation``.

    podutil.CalculatePodStatusObservedGeneration with PodObservedGenerationTracking
    on (GA and locked in v1.37). None when the pod has no generation (Go's 0).
    """
    return _generation_of(pod)


def calculate_pod_condition_observed_generation(
    old_status: PodStatus | None, generation: int | None, condition_type: str
) -> int | None:
    """A kubelet-owned condition's ``observedGeneration``: ``generation``, or None without an old status.

    podutil.CalculatePodConditionObservedGeneration with the feature gate on: the
    old status only has to exist (upstream's generators are always handed one).
    ``condition_type`` is kept for the upstream signature; with the gate on it
    does not matter.
    """
    del condition_type
    if old_status is None:
        return None
    return generation or None


def _observed(pod: Pod | None, old_status: PodStatus | None, condition_type: str) -> int | None:
    if pod is None:
        return None
    return calculate_pod_condition_observed_generation(old_status, _generation_of(pod), condition_type)


# --- ContainersReady ----------------------------------------------------------------


def generate_containers_ready_condition(
    spec: PodSpec,
    container_statuses: Sequence[ContainerStatus] | None,
    pod_phase: str | None,
    *,
    pod: Pod | None = None,
    old_status: PodStatus | None = None,
) -> PodCondition:
    """The ``ContainersReady`` condition (SPEC 3, ContainersReady).

    ``pod`` and ``old_status`` (keyword-only, v1.37's generator arguments) give
    the condition its ``observedGeneration``: the pod's generation when both
    are given, unset otherwise.
    """
    generation = _observed(pod, old_status, CONTAINERS_READY)
    if container_statuses is None:
        return _condition(CONTAINERS_READY, _FALSE, UNKNOWN_CONTAINER_STATUSES, None, generation)

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
        return _condition(CONTAINERS_READY, _FALSE, POD_COMPLETED, None, generation)
    # Containers of a failed pod may still be shutting down and report ready; the pod is not.
    if pod_phase == PHASE_FAILED:
        return _condition(CONTAINERS_READY, _FALSE, POD_FAILED, None, generation)

    messages: list[str] = []
    if unknown:
        messages.append(f"containers with unknown status: {_names(unknown)}")
    if unready:
        messages.append(f"containers with unready status: {_names(unready)}")
    if messages:
        return _condition(CONTAINERS_READY, _FALSE, CONTAINERS_NOT_READY, ", ".join(messages), generation)
    return _condition(CONTAINERS_READY, _TRUE, None, None, generation)


# --- Ready --------------------------------------------------------------------------


def generate_pod_ready_condition(
    spec: PodSpec,
    conditions: Sequence[PodCondition] | None,
    container_statuses: Sequence[ContainerStatus] | None,
    pod_phase: str | None,
    *,
    pod: Pod | None = None,
    old_status: PodStatus | None = None,
) -> PodCondition:
    """The ``Ready`` condition: ContainersReady plus every readiness gate (SPEC 3, Ready)."""
    generation = _observed(pod, old_status, POD_READY)
    containers_ready = generate_containers_ready_condition(spec, container_statuses, pod_phase)
    if containers_ready.status != _TRUE:
        return _condition(
            POD_READY, containers_ready.status, containers_ready.reason, containers_ready.message, generation
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
        return _condition(POD_READY, _FALSE, READINESS_GATES_NOT_READY, ", ".join(messages), generation)
    return _condition(POD_READY, _TRUE, None, None, generation)


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
    spec: PodSpec,
    container_statuses: Sequence[ContainerStatus] | None,
    pod_phase: str | None,
    *,
    pod: Pod | None = None,
    old_status: PodStatus | None = None,
) -> PodCondition:
    """The ``Initialized`` condition (SPEC 3, Initialized).

    ``container_statuses`` holds the init container statuses (and may hold the
    regular ones too: those show whether a regular container has started).
    Given ``old_status`` (v1.37, RestartAllContainersOnContainerExits on by
    default), a pod whose old status says ``Initialized`` is ``True`` stays
    initialized while its init containers are restarted in place.
    """
    generation = _observed(pod, old_status, POD_INITIALIZED)
    init_containers = spec.init_containers or ()
    if container_statuses is None and init_containers:
        return _condition(POD_INITIALIZED, _FALSE, UNKNOWN_CONTAINER_STATUSES, None, generation)

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
        return _condition(POD_INITIALIZED, _TRUE, POD_COMPLETED, None, generation)
    # A regular container has run, so the pod initialized before; sidecars may be restarting.
    if _has_any_regular_container_started(spec, container_statuses):
        return _condition(POD_INITIALIZED, _TRUE, None, None, generation)

    messages: list[str] = []
    if unknown:
        messages.append(f"containers with unknown status: {_names(unknown)}")
    if incomplete:
        messages.append(f"containers with incomplete status: {_names(incomplete)}")
    if messages:
        # Init containers restarted in place (all containers restarting) report waiting again; a
        # pod once initialized stays so. Upstream walks every condition: any Initialized=True counts.
        if old_status is not None and any(
            c.type == POD_INITIALIZED and c.status == _TRUE for c in old_status.conditions or ()
        ):
            return _condition(POD_INITIALIZED, _TRUE, None, None, generation)
        return _condition(
            POD_INITIALIZED, _FALSE, CONTAINERS_NOT_INITIALIZED, ", ".join(messages), generation
        )
    return _condition(POD_INITIALIZED, _TRUE, None, None, generation)


# --- PodReadyToStartContainers --------------------------------------------------------

# kubetypes.PodSandboxNotReadyMsg*: the message says why a new sandbox is needed.
SANDBOX_MSG_NO_POD_SANDBOX = "no pod sandbox exists"
SANDBOX_MSG_MULTIPLE_SANDBOXES = "multiple pod sandboxes are ready and need to be reconciled"
SANDBOX_MSG_SANDBOX_NOT_READY = "pod sandbox is not ready"
SANDBOX_MSG_NETWORK_NAMESPACE_MODE = "network namespace mode changed and sandbox needs to be recreated"
SANDBOX_MSG_NO_IP_ADDRESS = "pod sandbox has no IP address"


@dataclass(frozen=True)
class SandboxStatus:
    """What a runtime reports of one pod sandbox (the CRI's PodSandboxStatus, the parts that matter).

    ``host_network``: the sandbox's network namespace is the node's. ``ip``:
    the sandbox's IP; None when the runtime reports no network status.
    """

    ready: bool
    host_network: bool = False
    ip: str | None = None


def pod_sandbox_changed(pod: Pod, sandboxes: Sequence[SandboxStatus]) -> tuple[bool, str]:
    """Whether the pod needs a new sandbox, and why (runtimeutil.PodSandboxChanged).

    ``sandboxes`` is newest first, as the runtime lists them.
    """
    if not sandboxes:
        return True, SANDBOX_MSG_NO_POD_SANDBOX
    if sum(1 for s in sandboxes if s.ready) > 1:
        return True, SANDBOX_MSG_MULTIPLE_SANDBOXES
    latest = sandboxes[0]
    if not latest.ready:
        return True, SANDBOX_MSG_SANDBOX_NOT_READY
    host_network = bool(pod.spec.host_network)
    if latest.host_network != host_network:
        return True, SANDBOX_MSG_NETWORK_NAMESPACE_MODE
    if not host_network and latest.ip is not None and latest.ip == "":
        return True, SANDBOX_MSG_NO_IP_ADDRESS
    return False, ""


def generate_pod_ready_to_start_containers_condition(
    pod: Pod, old_status: PodStatus | None, sandboxes: Sequence[SandboxStatus]
) -> PodCondition:
    """``PodReadyToStartContainers``: True once the pod has a ready sandbox with its network.

    GeneratePodReadyToStartContainersCondition: False with reason
    ``PodSandboxNotReady`` and the reason a new sandbox is needed as message.
    """
    generation = _observed(pod, old_status, POD_READY_TO_START_CONTAINERS)
    needed, message = pod_sandbox_changed(pod, sandboxes)
    if not needed:
        return _condition(POD_READY_TO_START_CONTAINERS, _TRUE, None, None, generation)
    return _condition(POD_READY_TO_START_CONTAINERS, _FALSE, POD_SANDBOX_NOT_READY, message, generation)


# --- AllContainersRestarting ----------------------------------------------------------

_RESTART_ALL_CONTAINERS = "RestartAllContainers"
_EXITED_RESTARTING_MESSAGE = "container exited with restart policy rule"


@dataclass(frozen=True)
class RuntimeContainerStatus:
    """What a runtime reports of one container of the pod: its name, whether it exited, its exit code."""

    name: str
    exited: bool = False
    exit_code: int = 0


def _get(obj: Any, key: str) -> Any:
    return obj.get(key) if isinstance(obj, Mapping) else None


def find_matching_container_restart_rule(container: Container, exit_code: int) -> Mapping[str, Any] | None:
    """The first of the container's ``restartPolicyRules`` whose exit codes match (podutil), or None."""
    for rule in container.restart_policy_rules or ():
        codes = _get(rule, "exitCodes")
        if codes is None:
            continue
        matched = exit_code in (_get(codes, "values") or ())
        operator = _get(codes, "operator")
        if (operator == "In" and matched) or (operator == "NotIn" and not matched):
            return rule
    return None


def all_containers_could_restart(spec: PodSpec) -> bool:
    """True when a container of the pod has a rule with the action ``RestartAllContainers``."""
    for container in (*(spec.init_containers or ()), *spec.containers):
        for rule in container.restart_policy_rules or ():
            if _get(rule, "action") == _RESTART_ALL_CONTAINERS:
                return True
    return False


def container_should_restart(container: Container, spec: PodSpec, exit_code: int) -> bool:
    """Whether a container that exited with ``exit_code`` is restarted (podutil.ContainerShouldRestart).

    Its restart rules first, then its own restart policy, then the pod's (unset: Always).
    """
    if container.restart_policy is not None:
        rule = find_matching_container_restart_rule(container, exit_code)
        if rule is not None and _get(rule, "action") in ("Restart", _RESTART_ALL_CONTAINERS):
            return True
        if container.restart_policy == _RESTART_ALWAYS:
            return True
        if container.restart_policy == "OnFailure":
            return exit_code != 0
        if container.restart_policy == "Never":
            return False
    if spec.restart_policy == "OnFailure":
        return exit_code != 0
    return spec.restart_policy != "Never"


def _restarts_all(container: Container, exit_code: int) -> bool:
    rule = find_matching_container_restart_rule(container, exit_code)
    return rule is not None and _get(rule, "action") == _RESTART_ALL_CONTAINERS


def _should_all_containers_restart(
    pod: Pod, runtime: Sequence[RuntimeContainerStatus] | None, old_status: PodStatus | None
) -> bool:
    # kubecontainer.ShouldAllContainersRestart.
    if old_status is not None and any(
        c.type == ALL_CONTAINERS_RESTARTING and c.status == _TRUE for c in old_status.conditions or ()
    ):
        return True
    api: dict[str, ContainerStatus] = {}
    if old_status is not None:
        for known in (*(old_status.init_container_statuses or ()), *(old_status.container_statuses or ())):
            api[known.name] = known  # a later status of a name wins, as upstream's map
    running = {s.name: s for s in reversed(runtime or ())}  # the first of a name wins
    for container in (*(pod.spec.init_containers or ()), *pod.spec.containers):
        if runtime is not None:
            rs = running.get(container.name)
            if rs is not None and rs.exited and _restarts_all(container, rs.exit_code):
                return True
        api_status = api.get(container.name)
        terminated = api_status.state.terminated if api_status is not None else None
        if terminated is not None and _restarts_all(container, terminated.exit_code):
            return True
    return False


def generate_all_containers_restarting_condition(
    pod: Pod,
    runtime: Sequence[RuntimeContainerStatus] | None,
    old_status: PodStatus | None,
    pod_phase: str | None,
) -> PodCondition:
    """``AllContainersRestarting`` (GenerateAllContainersRestartingCondition).

    True, reason ``RestartAllContainersStarted``, while a container's exit has
    triggered a ``RestartAllContainers`` rule and the runtime still lists
    containers of the pod; False once they are all cleaned up, and in a
    terminal phase (reason ``PodCompleted`` or ``PodFailed``). The kubelet adds
    it only to pods with such a rule (:func:`all_containers_could_restart`).
    It carries no ``observedGeneration``, as upstream's.
    """
    if pod_phase == PHASE_SUCCEEDED:
        return _condition(ALL_CONTAINERS_RESTARTING, _FALSE, POD_COMPLETED)
    if pod_phase == PHASE_FAILED:
        return _condition(ALL_CONTAINERS_RESTARTING, _FALSE, POD_FAILED)
    if not _should_all_containers_restart(pod, runtime, old_status):
        return _condition(ALL_CONTAINERS_RESTARTING, _FALSE)
    listed = {s.name for s in runtime or ()}
    if not any(c.name in listed for c in (*(pod.spec.init_containers or ()), *pod.spec.containers)):
        # Every container is gone from the runtime: the restart has cleaned up.
        return _condition(ALL_CONTAINERS_RESTARTING, _FALSE)
    return _condition(
        ALL_CONTAINERS_RESTARTING, _TRUE, RESTART_ALL_CONTAINERS_STARTED, _EXITED_RESTARTING_MESSAGE
    )


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
