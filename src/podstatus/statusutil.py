"""Pure helpers of the status manager: validation, normalisation, comparison, merge.

Nothing here does I/O or holds state, so every rule of SPEC section 4 that is
about *data* can be tested without a manager or a server. All functions take
and return immutable values; a function that changes nothing returns its
input, so the common case (an already normal status) allocates nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import msgspec

from .conditions import (
    ALL_CONTAINERS_RESTARTING,
    CONTAINERS_READY,
    DISRUPTION_TARGET,
    KUBELET_OWNED_CONDITIONS,
    KUBELET_SHARED_CONDITIONS,
    POD_COMPLETED,
    POD_FAILED,
    POD_INITIALIZED,
    POD_READY,
    POD_READY_TO_START_CONTAINERS,
    POD_SCHEDULED,
    get_condition,
    is_kubelet_owned,
    is_restartable_init_container,
    is_terminal_phase,
)
from .sharing import numbers_exact
from .types import (
    Container,
    ContainerState,
    ContainerStateTerminated,
    ContainerStatus,
    Extra,
    Pod,
    PodCondition,
    PodSpec,
    PodStatus,
)

# The kubelet's kubecontainer.MaxPodTerminationMessageLogLength.
MAX_POD_TERMINATION_MESSAGE_LOG_LENGTH = 1024 * 12

# Conditions whose lastTransitionTime the manager owns (SPEC 4.2 step 4; v1.37 adds
# AllContainersRestarting).
TRANSITION_TIME_CONDITIONS = (
    CONTAINERS_READY,
    POD_READY,
    POD_INITIALIZED,
    POD_READY_TO_START_CONTAINERS,
    POD_SCHEDULED,
    DISRUPTION_TARGET,
    ALL_CONTAINERS_RESTARTING,
)

CONTAINER_STATUS_UNKNOWN = "ContainerStatusUnknown"
CONTAINER_NOT_LOCATED_MESSAGE = "The container could not be located when the pod was terminated"


def now_seconds() -> datetime:
    """Now, in UTC, cut to whole seconds (what the API server keeps)."""
    return datetime.now(UTC).replace(microsecond=0)


# --- normalisation ------------------------------------------------------------------


def normalize_time(t: datetime | None) -> datetime | None:
    if t is None:
        return None
    if t.tzinfo is not UTC:
        t = t.replace(tzinfo=UTC) if t.tzinfo is None else t.astimezone(UTC)
    if t.microsecond:
        t = t.replace(microsecond=0)
    return t


def truncate_utf8(text: str, max_bytes: int) -> str:
    """``text`` cut to at most ``max_bytes`` bytes of UTF-8, never splitting a character."""
    if len(text) * 4 <= max_bytes:
        return text  # cannot be too long: skip the encode
    raw = text.encode("utf-8")
    if len(raw) <= max_bytes:
        return text
    return raw[:max_bytes].decode("utf-8", errors="ignore")


def _norm_state(state: ContainerState | None, max_message: int) -> ContainerState:
    if state is None:
        return ContainerState()
    changes: dict[str, Any] = {}
    running = state.running
    if running is not None:
        started = normalize_time(running.started_at)
        if started is not running.started_at:
            changes["running"] = running.replace(started_at=started)
    term = state.terminated
    if term is not None:
        started = normalize_time(term.started_at)
        finished = normalize_time(term.finished_at)
        message = term.message
        if message is not None:
            message = truncate_utf8(message, max_message)
        if started is not term.started_at or finished is not term.finished_at or message is not term.message:
            changes["terminated"] = term.replace(started_at=started, finished_at=finished, message=message)
    return state.replace(**changes) if changes else state


def _norm_container_statuses(
    statuses: Sequence[ContainerStatus] | None, max_message: int, known: Sequence[ContainerStatus] | None
) -> tuple[ContainerStatus, ...] | None:
    if statuses is None:
        return None
    if statuses is known:
        return statuses  # type: ignore[return-value]
    out: list[ContainerStatus] = []
    changed = type(statuses) is not tuple
    for i, cs in enumerate(statuses):
        if known is not None and i < len(known) and cs is known[i]:
            out.append(cs)  # normal already
            continue
        state = _norm_state(cs.state, max_message)
        last = _norm_state(cs.last_state, max_message)
        if state is not cs.state or last is not cs.last_state:
            cs = cs.replace(state=state, last_state=last)
            changed = True
        out.append(cs)
    return tuple(out) if changed else statuses  # type: ignore[return-value]


def _sorted_by_name(statuses: tuple[ContainerStatus, ...]) -> tuple[ContainerStatus, ...]:
    names = [cs.name for cs in statuses]
    if names == sorted(names):
        return statuses
    return tuple(sorted(statuses, key=lambda cs: cs.name))


def _sorted_by_spec(
    statuses: tuple[ContainerStatus, ...], containers: Sequence[Container] | None
) -> tuple[ContainerStatus, ...]:
    order = {c.name: i for i, c in enumerate(containers or ())}
    missing = len(order)
    keys = [order.get(cs.name, missing) for cs in statuses]
    if keys == sorted(keys):
        return statuses
    # A stable sort keeps statuses of containers the spec does not name in their order, last.
    return tuple(cs for _, cs in sorted(zip(keys, statuses), key=lambda kv: kv[0]))


def container_count(spec: PodSpec) -> int:
    return len(spec.containers or ()) + len(spec.init_containers or ()) + len(spec.ephemeral_containers or ())


def normalize_status(spec: PodSpec, status: PodStatus, known: PodStatus | None = None) -> PodStatus:
    """SPEC 4.2 step 6: whole-second timestamps, bounded messages, sorted container statuses.

    Also makes every list a tuple and every timestamp UTC, so a status built by
    hand compares equal to the same status decoded from the wire. ``known`` is
    a status normalised before for the same spec: parts that are the very same
    objects are taken as they are.
    """
    if status is known:
        return status
    per_status = MAX_POD_TERMINATION_MESSAGE_LOG_LENGTH
    n = container_count(spec)
    if n > 0:
        per_status //= n
    changes: dict[str, Any] = {}
    start = normalize_time(status.start_time)
    if start is not status.start_time:
        changes["start_time"] = start
    conditions = status.conditions
    known_conditions = known.conditions if known is not None else None
    if conditions is not None and conditions is not known_conditions:
        new_conditions = []
        changed = type(conditions) is not tuple
        for i, c in enumerate(conditions):
            if known_conditions is not None and i < len(known_conditions) and c is known_conditions[i]:
                new_conditions.append(c)
                continue
            probe = normalize_time(c.last_probe_time)
            trans = normalize_time(c.last_transition_time)
            if probe is not c.last_probe_time or trans is not c.last_transition_time:
                c = c.replace(last_probe_time=probe, last_transition_time=trans)
                changed = True
            new_conditions.append(c)
        if changed:
            changes["conditions"] = tuple(new_conditions)
    known_regular = known.container_statuses if known is not None else None
    regular = _norm_container_statuses(status.container_statuses, per_status, known_regular)
    if regular is not None and regular is not known_regular:
        regular = _sorted_by_name(regular)
    if regular is not status.container_statuses:
        changes["container_statuses"] = regular
    known_init = known.init_container_statuses if known is not None else None
    init = _norm_container_statuses(status.init_container_statuses, per_status, known_init)
    if init is not None and init is not known_init:
        init = _sorted_by_spec(init, spec.init_containers)
    if init is not status.init_container_statuses:
        changes["init_container_statuses"] = init
    known_ephemeral = known.ephemeral_container_statuses if known is not None else None
    ephemeral = _norm_container_statuses(status.ephemeral_container_statuses, per_status, known_ephemeral)
    if ephemeral is not None and ephemeral is not known_ephemeral:
        # Sorted by name, as upstream's normalizeStatus does.
        ephemeral = _sorted_by_name(ephemeral)
    if ephemeral is not status.ephemeral_container_statuses:
        changes["ephemeral_container_statuses"] = ephemeral
    for attr in ("pod_ips", "host_ips"):
        value = getattr(status, attr)
        if value is not None and type(value) is not tuple:
            changes[attr] = tuple(value)
    return status.replace(**changes) if changes else status


def _bound_state(state: Any, max_bytes: int) -> Any:
    if type(state) is not ContainerState:
        return state  # validation judges it
    waiting, term = state.waiting, state.terminated
    changes: dict[str, Any] = {}
    if waiting is not None and type(waiting.message) is str:
        cut = truncate_utf8(waiting.message, max_bytes)
        if cut is not waiting.message:
            changes["waiting"] = waiting.replace(message=cut)
    if term is not None and type(term.message) is str:
        cut = truncate_utf8(term.message, max_bytes)
        if cut is not term.message:
            changes["terminated"] = term.replace(message=cut)
    return state.replace(**changes) if changes else state


def _bound_container_statuses(statuses: Any, max_bytes: int) -> Any:
    if type(statuses) is not tuple and type(statuses) is not list:
        return statuses
    out = []
    changed = False
    for cs in statuses:
        if type(cs) is ContainerStatus:
            state = _bound_state(cs.state, max_bytes)
            last = _bound_state(cs.last_state, max_bytes)
            if state is not cs.state or last is not cs.last_state:
                cs = cs.replace(state=state, last_state=last)
                changed = True
        out.append(cs)
    return tuple(out) if changed else statuses


def bound_messages(spec: PodSpec, status: PodStatus) -> PodStatus:
    """Every free-text message of ``status`` cut short enough for the API server to take.

    The kubelet cuts only terminated messages (SPEC 4.2 step 6: 12288 bytes over the
    number of containers), because the others are its own short strings (upstream
    v1.37.2 leaves waiting messages and ``status.message`` as they are). A provider's
    are anything: a 10 MB one made the PATCH bigger than the API server takes (413),
    retried for ever. So waiting messages get the terminated messages' bound, and the
    pod's and its conditions' messages 12288 bytes each; never splitting a UTF-8
    character. A status with nothing too long is returned as it is.
    """
    per_status = MAX_POD_TERMINATION_MESSAGE_LOG_LENGTH
    n = container_count(spec)
    if n > 0:
        per_status //= n
    changes: dict[str, Any] = {}
    for attr in ("container_statuses", "init_container_statuses", "ephemeral_container_statuses"):
        value = getattr(status, attr)
        if value is not None:
            bounded = _bound_container_statuses(value, per_status)
            if bounded is not value:
                changes[attr] = bounded
    if type(status.message) is str:
        cut = truncate_utf8(status.message, MAX_POD_TERMINATION_MESSAGE_LOG_LENGTH)
        if cut is not status.message:
            changes["message"] = cut
    conditions = status.conditions
    if type(conditions) is tuple or type(conditions) is list:
        new_conditions = []
        for c in conditions:
            if type(c) is PodCondition and type(c.message) is str:
                cut = truncate_utf8(c.message, MAX_POD_TERMINATION_MESSAGE_LOG_LENGTH)
                if cut is not c.message:
                    c = c.replace(message=cut)
            new_conditions.append(c)
        if any(a is not b for a, b in zip(new_conditions, conditions)):
            changes["conditions"] = tuple(new_conditions)
    return status.replace(**changes) if changes else status


# --- comparison --------------------------------------------------------------------


_KUBELET_CONDITION_TYPES = KUBELET_OWNED_CONDITIONS | KUBELET_SHARED_CONDITIONS


def _kubelet_conditions(conditions: Sequence[PodCondition] | None) -> dict[str, PodCondition]:
    # Upstream fills a map by type: the last condition of a type stands for it.
    return {c.type: c for c in conditions or () if c.type in _KUBELET_CONDITION_TYPES}


def is_pod_status_by_kubelet_equal(old: PodStatus, new: PodStatus) -> bool:
    """SPEC 4.2 step 7: equal as the kubelet sees it (upstream's isPodStatusByKubeletEqual).

    Both statuses have the same kubelet-owned or -shared condition types, and
    each of ``new``'s has a twin in ``old`` with the same status, reason and
    message; with ``old``'s conditions and resource claim statuses (which the
    kubelet does not own) replaced by ``new``'s, the statuses are equal (so
    transition times and conditions owned by others never cause a write on
    their own).
    """
    same_conditions = old.conditions == new.conditions
    if not same_conditions:
        mine, theirs = _kubelet_conditions(new.conditions), _kubelet_conditions(old.conditions)
        if len(mine) != len(theirs):
            return False
        for ctype, c in mine.items():
            oc = theirs.get(ctype)
            # Go compares strings: unset and "" are the same.
            if (
                oc is None
                or oc.status != c.status
                or (oc.message or "") != (c.message or "")
                or (oc.reason or "") != (c.reason or "")
            ):
                return False
    if (
        old.resource_claim_statuses is not new.resource_claim_statuses
        or old.extended_resource_claim_status is not new.extended_resource_claim_status
        or old.node_allocatable_resource_claim_statuses is not new.node_allocatable_resource_claim_statuses
    ):
        old = old.replace(
            resource_claim_statuses=new.resource_claim_statuses,
            extended_resource_claim_status=new.extended_resource_claim_status,
            node_allocatable_resource_claim_statuses=new.node_allocatable_resource_claim_statuses,
        )
    if same_conditions:
        # Same conditions: one C-level compare settles the rest.
        return old == new
    return old.replace(conditions=new.conditions) == new


# --- transitions ----------------------------------------------------------------------


def update_last_transition_times(old: PodStatus, new: PodStatus, now: datetime) -> PodStatus:
    """SPEC 4.2 step 4: keep a condition's transition time while its status stays the same."""
    conditions = new.conditions
    if not conditions:
        return new
    old_by_type: dict[str, PodCondition] = {}
    for first in old.conditions or ():
        old_by_type.setdefault(first.type, first)  # the first of a type, as get_condition
    out: list[PodCondition] = []
    changed = False
    same = True  # every condition is the old one
    for c in conditions:
        oc = old_by_type.get(c.type)
        if c.type in TRANSITION_TIME_CONDITIONS:
            # A time taken over from the old status is normalised like the rest (the old status
            # may be a pod object's, with sub-second times), as upstream normalises after copying.
            if oc is not None and oc.status == c.status:
                when = oc.last_transition_time
                if when is not None and (when.microsecond or when.tzinfo is not UTC):
                    when = normalize_time(when)
            else:
                when = now
            if when != c.last_transition_time:
                c = c.replace(last_transition_time=when)
                changed = True
        if oc is not None and c is not oc and c == oc and numbers_exact(c):
            c = oc  # an equal value: keep the one held (fewer objects, identity shortcuts later)
            changed = True
        same = same and c is oc
        out.append(c)
    if not changed:
        return new
    kept = old.conditions
    if same and kept is not None and len(kept) == len(out) and all(a is b for a, b in zip(out, kept)):
        return new.replace(conditions=kept)
    return new.replace(conditions=tuple(out))


# --- terminate_pod -----------------------------------------------------------------------


def has_pod_initialized(pod: Pod) -> bool:
    """Whether the pod has evidence of having started its regular containers (judged on ``pod.status``)."""
    spec = pod.spec
    if not spec.init_containers:
        return True
    status = pod.status
    for cs in status.container_statuses or ():
        if (cs.last_state is not None and cs.last_state.terminated is not None) or (
            cs.state is None or cs.state.waiting is None
        ):
            return True
    init_statuses = status.init_container_statuses or ()
    if init_statuses:
        last_index = len(init_statuses) - 1
        if last_index >= len(spec.init_containers):
            return False
        container = spec.init_containers[last_index]
        cs = init_statuses[last_index]
        if container.name != cs.name:
            return False  # spec and status disagree: no evidence
        if is_restartable_init_container(container):
            return bool(cs.state is not None and cs.state.running is not None and cs.started)
        for state in (cs.last_state, cs.state):
            if state is not None and state.terminated is not None and state.terminated.exit_code == 0:
                return True
    return False


def initialized_container_count(statuses: Sequence[ContainerStatus]) -> int:
    """How many leading statuses have tried to start: all but a trailing run of never-started waiters.

    The first status always counts.
    """
    for i in range(len(statuses) - 1, -1, -1):
        cs = statuses[i]
        waiting = cs.state is None or cs.state.waiting is not None
        terminated_before = cs.last_state is not None and cs.last_state.terminated is not None
        if not waiting or terminated_before:
            return i + 1
    return 1 if statuses else 0


_NOT_LOCATED = ContainerState(
    terminated=ContainerStateTerminated(
        reason=CONTAINER_STATUS_UNKNOWN, message=CONTAINER_NOT_LOCATED_MESSAGE, exit_code=137
    )
)


def _terminate_statuses(
    statuses: Sequence[ContainerStatus] | None, count: int
) -> tuple[ContainerStatus, ...] | None:
    if statuses is None:
        return None
    out = list(statuses)
    for i in range(min(count, len(out))):
        cs = out[i]
        if cs.state is not None and cs.state.terminated is not None:
            continue
        out[i] = cs.replace(state=_NOT_LOCATED)
    return tuple(out)


def terminated_status(pod: Pod, base: PodStatus, *, is_static: bool) -> PodStatus:
    """SPEC 4.3 terminate_pod: the status of a pod whose containers can no longer be found."""
    changes: dict[str, Any] = {}
    if has_pod_initialized(pod) and base.container_statuses is not None:
        changes["container_statuses"] = _terminate_statuses(
            base.container_statuses, len(base.container_statuses)
        )
    init = base.init_container_statuses
    if init:
        changes["init_container_statuses"] = _terminate_statuses(init, initialized_container_count(init))
    if not is_static and not is_terminal_phase(base.phase):
        changes["phase"] = "Failed"
    return base.replace(**changes) if changes else base


# --- merge with the API status ----------------------------------------------------------


def replace_or_append_condition(
    conditions: Sequence[PodCondition], condition: PodCondition
) -> tuple[PodCondition, ...]:
    out = list(conditions)
    for i, c in enumerate(out):
        if c.type == condition.type:
            out[i] = condition
            return tuple(out)
    out.append(condition)
    return tuple(out)


def _terminal_ready_condition(
    condition_type: str, phase: str, old: PodStatus, now: datetime, generation: int | None
) -> PodCondition:
    reason = POD_FAILED if phase == "Failed" else POD_COMPLETED
    previous = get_condition(old.conditions, condition_type)
    when = previous.last_transition_time if previous is not None and previous.status == "False" else now
    return PodCondition(
        type=condition_type,
        status="False",
        observed_generation=generation,
        reason=reason,
        last_transition_time=when,
    )


def merge_pod_status(
    api_status: PodStatus,
    cached: PodStatus,
    could_have_running_containers: bool,
    now: datetime,
    *,
    generation: int | None = None,
) -> PodStatus:
    """SPEC 4.7: the status to write, given the API server's and the cached one.

    ``generation`` is the pod's ``metadata.generation``: the observedGeneration
    of a Ready or ContainersReady condition forced to False in a terminal phase.
    """
    conditions: list[PodCondition] = [c for c in api_status.conditions or () if not is_kubelet_owned(c.type)]
    transitioning_to_terminal = not is_terminal_phase(api_status.phase) and is_terminal_phase(cached.phase)
    take_shared = transitioning_to_terminal and not could_have_running_containers
    for c in cached.conditions or ():
        if is_kubelet_owned(c.type):
            conditions.append(c)
        elif take_shared and c.type == DISRUPTION_TARGET:
            # Taken where it stands among the cached conditions (upstream's single walk); its
            # sending was held back until the containers stopped, so its time is the API
            # condition's when the status did not change, else now (updateLastTransitionTime).
            api_c = get_condition(api_status.conditions, c.type)
            when = api_c.last_transition_time if api_c is not None and api_c.status == c.status else now
            replaced = False
            for i, kept in enumerate(conditions):
                if kept.type == c.type:
                    conditions[i] = c.replace(last_transition_time=when)
                    replaced = True
                    break
            if not replaced:
                conditions.append(c.replace(last_transition_time=when))
    merged_tuple = tuple(conditions)
    changes: dict[str, Any] = {"conditions": merged_tuple or None}
    # Not the kubelet's to write: keep what the server has.
    changes["resource_claim_statuses"] = api_status.resource_claim_statuses
    changes["extended_resource_claim_status"] = api_status.extended_resource_claim_status
    changes["node_allocatable_resource_claim_statuses"] = api_status.node_allocatable_resource_claim_statuses
    # Status fields this library does not know (a newer API) are the server's too: never null them out.
    if api_status.extra is not None:
        if cached.extra is None:
            changes["extra"] = api_status.extra
        else:
            merged_extra = {**api_status.extra.as_dict(), **cached.extra.as_dict()}
            changes["extra"] = Extra(msgspec.json.encode(merged_extra))
    phase, reason, message = cached.phase, cached.reason, cached.message
    if transitioning_to_terminal and could_have_running_containers:
        phase, reason, message = api_status.phase, api_status.reason, api_status.message
        changes.update(phase=phase, reason=reason, message=message)
    merged = cached.replace(**changes)
    if is_terminal_phase(phase):
        ready = get_condition(merged.conditions, POD_READY)
        containers_ready = get_condition(merged.conditions, CONTAINERS_READY)
        if (ready is not None and ready.status == "True") or (
            containers_ready is not None and containers_ready.status == "True"
        ):
            assert phase is not None
            new_conditions = merged.conditions or ()
            new_conditions = replace_or_append_condition(
                new_conditions, _terminal_ready_condition(CONTAINERS_READY, phase, merged, now, generation)
            )
            new_conditions = replace_or_append_condition(
                new_conditions, _terminal_ready_condition(POD_READY, phase, merged, now, generation)
            )
            merged = merged.replace(conditions=new_conditions)
    return merged


def find_container_status(status: PodStatus, container_id: str) -> tuple[str, int] | None:
    """Where a container ID's status is: (``"container_statuses"`` or ``"init_container_statuses"``, index)."""
    for attr in ("container_statuses", "init_container_statuses"):
        for i, cs in enumerate(getattr(status, attr) or ()):
            if cs.container_id == container_id:
                return attr, i
    return None


def with_container_status(status: PodStatus, where: tuple[str, int], cs: ContainerStatus) -> PodStatus:
    attr, index = where
    statuses = list(getattr(status, attr))
    statuses[index] = cs
    return status.replace(**{attr: tuple(statuses)})
