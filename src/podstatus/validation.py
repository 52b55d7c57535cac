"""Pod status validation, in one home: what a status may hold and how it may change.

Pure functions, layered just above :mod:`podstatus.types` (no server, no
manager): the status manager refuses a status before caching it
(:func:`validate_status`, :func:`check_container_state_transition`), the
embedded API server refuses a ``pods/status`` update
(:func:`validate_pod_status_update`, kube-apiserver v1.37.2's
ValidatePodStatusUpdate plus podstatus's own strict rules), and the fake
client and the node agent apply the same rules rather than copies of them.

Two shapes, because two callers hold two shapes: typed statuses (the
manager, the agent) raise :class:`~podstatus.errors.InvalidObjectError` or
answer a reason; wire dicts (the API server, the fake client) answer a list of
:class:`FieldError`, the real server's ``field.Error``.
"""

from __future__ import annotations

import functools
import ipaddress
import json
import re
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from .conditions import (
    all_containers_could_restart,
    container_should_restart,
    is_restartable_init_container,
)
from .errors import InvalidObjectError
from .types import (
    ContainerState,
    ContainerStateTerminated,
    ContainerStatus,
    HostIP,
    PodCondition,
    PodIP,
    PodSpec,
    PodStatus,
)

__all__ = [
    "POD_PHASES",
    "TERMINAL_PHASES",
    "VALID_CONDITION_STATUSES",
    "FieldError",
    "check_container_state_transition",
    "effective_restart_policy",
    "qualified_name_errors",
    "reported_status_problem",
    "terminal_phase_errors",
    "validate_pod_status_update",
    "validate_status",
]

# The API's int32 fields: a larger number is refused by the server (400), so refuse it here.
_INT32_MAX = 2**31 - 1

VALID_CONDITION_STATUSES = frozenset({"True", "False", "Unknown"})
# In the order the server lists them in an "Unsupported value" error.
_CONDITION_STATUSES = ("False", "True", "Unknown")
TERMINAL_PHASES = ("Succeeded", "Failed")
# core/v1 PodPhase: what a status reported for a pod may say.
POD_PHASES = ("Pending", "Running", "Succeeded", "Failed", "Unknown")

_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
    "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
    "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)


# --- field errors (the server's field.Error) -----------------------------------------------


def _go_value(value: Any) -> str:
    if isinstance(value, str):
        return json.dumps(value)
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | dict):
        # Go's field.Error prints composite values as JSON.
        return json.dumps(value, separators=(",", ":"))
    return str(value)


class FieldError:
    """One ``field.Error`` of the real server's validation."""

    __slots__ = ("detail", "field", "type", "value")

    _REASONS = {
        "Required value": "FieldValueRequired",
        "Invalid value": "FieldValueInvalid",
        "Duplicate value": "FieldValueDuplicate",
        "Unsupported value": "FieldValueNotSupported",
        "Forbidden": "FieldValueForbidden",
        "Too long": "FieldValueTooLong",
    }

    def __init__(self, field: str, type: str, value: Any = None, detail: str = "") -> None:
        self.field = field
        self.type = type
        self.value = value
        self.detail = detail

    def body(self) -> str:
        if self.type in ("Required value", "Forbidden", "Too long"):
            return f"{self.type}: {self.detail}" if self.detail else self.type
        if self.type == "Duplicate value":
            return f"{self.type}: {_go_value(self.value)}"
        text = f"{self.type}: {_go_value(self.value)}"
        return f"{text}: {self.detail}" if self.detail else text

    def __str__(self) -> str:
        return f"{self.field}: {self.body()}"

    def cause(self) -> dict[str, str]:
        return {
            "reason": self._REASONS.get(self.type, "FieldValueInvalid"),
            "message": self.body(),
            "field": self.field,
        }


def _unsupported(field: str, value: Any, supported: tuple[str, ...]) -> FieldError:
    values = ", ".join(json.dumps(s) for s in supported)
    return FieldError(field, "Unsupported value", value, f"supported values: {values}")


# --- typed statuses: what the manager accepts (SPEC 4.2 step 1) ------------------------------


def _bad(path: str, message: str) -> InvalidObjectError:
    return InvalidObjectError(f"invalid PodStatus at {path}: {message}", path=path)


def _check_opt(value: Any, kinds: type | tuple[type, ...], path: str) -> None:
    if value is not None and not isinstance(value, kinds):
        raise _bad(path, f"expected {_kind_name(kinds)}, got {type(value).__name__}")


def _kind_name(kinds: type | tuple[type, ...]) -> str:
    if isinstance(kinds, tuple):
        return " or ".join(k.__name__ for k in kinds)
    return kinds.__name__


def _check_time(value: Any, path: str) -> None:
    if value is not None and not isinstance(value, datetime):
        raise _bad(path, f"expected a datetime, got {type(value).__name__}")


def _state_names(state: ContainerState) -> list[str]:
    return [
        name
        for name, value in (
            ("waiting", state.waiting),
            ("running", state.running),
            ("terminated", state.terminated),
        )
        if value is not None
    ]


def _check_state(state: Any, path: str) -> None:
    if state is None:
        return
    if not isinstance(state, ContainerState):
        raise _bad(path, f"expected ContainerState, got {type(state).__name__}")
    names = _state_names(state)
    if len(names) > 1:
        # core/v1 ContainerState: "Only one of its members may be specified."
        raise _bad(path, f"Forbidden: may not specify more than 1 container state (got {', '.join(names)})")
    if state.running is not None:
        _check_time(state.running.started_at, f"{path}.running.startedAt")
    term = state.terminated
    if term is not None:
        if not isinstance(term, ContainerStateTerminated):
            raise _bad(f"{path}.terminated", "expected ContainerStateTerminated")
        if type(term.exit_code) is not int or not -_INT32_MAX - 1 <= term.exit_code <= _INT32_MAX:
            raise _bad(f"{path}.terminated.exitCode", f"expected a 32-bit int, got {term.exit_code!r:.40}")
        _check_opt(term.message, str, f"{path}.terminated.message")
        _check_opt(term.reason, str, f"{path}.terminated.reason")
        _check_time(term.started_at, f"{path}.terminated.startedAt")
        _check_time(term.finished_at, f"{path}.terminated.finishedAt")


def _check_container_statuses(statuses: Any, field: str, known: Sequence[ContainerStatus] | None) -> None:
    if statuses is None or statuses is known:
        return
    if not isinstance(statuses, tuple | list):
        raise _bad(field, f"expected a list, got {type(statuses).__name__}")
    names: set[str] = set()
    for i, cs in enumerate(statuses):
        path = f"{field}[{i}]"
        if not isinstance(cs, ContainerStatus):
            raise _bad(path, f"expected ContainerStatus, got {type(cs).__name__}")
        if not isinstance(cs.name, str) or not cs.name:
            raise _bad(f"{path}.name", "Required value: a container status needs a name")
        if cs.name in names:
            raise _bad(f"{path}.name", f'Duplicate value: "{cs.name}"')
        names.add(cs.name)
        if known is not None and i < len(known) and cs is known[i]:
            continue  # the very object already accepted: checked then
        if type(cs.ready) is not bool:
            raise _bad(f"{path}.ready", f"expected bool, got {type(cs.ready).__name__}")
        if type(cs.restart_count) is not int or not 0 <= cs.restart_count <= _INT32_MAX:
            raise _bad(f"{path}.restartCount", "expected a non-negative 32-bit int")
        _check_opt(cs.started, bool, f"{path}.started")
        _check_opt(cs.container_id, str, f"{path}.containerID")
        _check_opt(cs.image, str, f"{path}.image")
        _check_state(cs.state, f"{path}.state")
        _check_state(cs.last_state, f"{path}.lastState")


def validate_status(status: Any, known: PodStatus | None = None) -> None:
    """Refuse a status the API server would refuse (wrong types, bad enum values, duplicates).

    The wire types do not validate on construction (that is what keeps them
    cheap), so the setters call this before anything is cached. ``known`` is a
    status accepted before (the cached one): parts of ``status`` that are the
    very same objects (a status built with ``replace`` shares them) are not
    checked again.
    """
    if _looks_valid(status, known):
        return
    try:
        _validate_status(status, known)
    except InvalidObjectError:
        raise
    except (TypeError, AttributeError, ValueError) as err:
        # A shape the precise checks did not foresee: still bad input, never a crash.
        raise InvalidObjectError(f"invalid PodStatus: {type(err).__name__}: {err}", path="status") from None


# --- the quick check: exact types, no paths built; False sends the status to the precise check


def _is_opt_str(value: Any) -> bool:
    return value is None or type(value) is str


def _state_ok(state: Any) -> bool:
    if state is None:
        return True
    if type(state) is not ContainerState:
        return False
    running = state.running
    if (state.waiting is not None) + (running is not None) + (state.terminated is not None) > 1:
        return False
    if running is not None:
        t = running.started_at
        if t is not None and type(t) is not datetime:
            return False
    term = state.terminated
    if term is None:
        return True
    if type(term) is not ContainerStateTerminated:
        return False
    code = term.exit_code
    if type(code) is not int or not -_INT32_MAX - 1 <= code <= _INT32_MAX:
        return False
    t1, t2 = term.started_at, term.finished_at
    return (
        _is_opt_str(term.message)
        and _is_opt_str(term.reason)
        and (t1 is None or type(t1) is datetime)
        and (t2 is None or type(t2) is datetime)
    )


def _container_statuses_ok(statuses: Any, known: Any) -> bool:
    if statuses is None or statuses is known:
        return True
    if type(statuses) is not tuple and type(statuses) is not list:
        return False
    names = set()
    n_known = len(known) if known is not None else 0
    for i, cs in enumerate(statuses):
        if type(cs) is not ContainerStatus:
            return False
        name = cs.name
        if type(name) is not str or not name or name in names:
            return False
        names.add(name)
        if i < n_known and cs is known[i]:
            continue
        count = cs.restart_count
        started = cs.started
        if (
            type(cs.ready) is not bool
            or type(count) is not int
            or not 0 <= count <= _INT32_MAX
            or (started is not None and type(started) is not bool)
            or not _is_opt_str(cs.container_id)
            or not _is_opt_str(cs.image)
            or not _state_ok(cs.state)
            or not _state_ok(cs.last_state)
        ):
            return False
    return len(names) == len(statuses)


def _looks_valid(status: Any, known: PodStatus | None) -> bool:
    """True only if :func:`_validate_status` would pass; a cheap pass over the same rules.

    It checks exact types (``type(x) is str``) where the precise check allows subclasses,
    so anything unusual takes the precise (slower) path, which decides.
    """
    if type(status) is not PodStatus:
        return False
    if status is known:
        return True
    start = status.start_time
    generation = status.observed_generation
    if not (
        (generation is None or type(generation) is int)
        and _is_opt_str(status.phase)
        and _is_opt_str(status.message)
        and _is_opt_str(status.reason)
        and _is_opt_str(status.pod_ip)
        and _is_opt_str(status.host_ip)
        and (start is None or type(start) is datetime)
    ):
        return False
    conditions = status.conditions
    known_conditions = known.conditions if known is not None else None
    if conditions is not None and conditions is not known_conditions:
        if type(conditions) is not tuple and type(conditions) is not list:
            return False
        n_known = len(known_conditions) if known_conditions is not None else 0
        for i, c in enumerate(conditions):
            if i < n_known and c is known_conditions[i]:  # type: ignore[index]
                continue
            if type(c) is not PodCondition:
                return False
            ctype, cstatus, t1, t2 = c.type, c.status, c.last_transition_time, c.last_probe_time
            cgen = c.observed_generation
            if (
                (cgen is not None and type(cgen) is not int)
                or type(ctype) is not str
                or not ctype
                or type(cstatus) is not str
                or cstatus not in VALID_CONDITION_STATUSES
                or not _is_opt_str(c.reason)
                or not _is_opt_str(c.message)
                or (t1 is not None and type(t1) is not datetime)
                or (t2 is not None and type(t2) is not datetime)
            ):
                return False
    for ips, cls in ((status.pod_ips, PodIP), (status.host_ips, HostIP)):
        if ips is not None:
            if type(ips) is not tuple and type(ips) is not list:
                return False
            for ip in ips:
                if type(ip) is not cls or type(ip.ip) is not str:
                    return False
    if known is None:
        return (
            _container_statuses_ok(status.container_statuses, None)
            and _container_statuses_ok(status.init_container_statuses, None)
            and _container_statuses_ok(status.ephemeral_container_statuses, None)
        )
    return (
        _container_statuses_ok(status.container_statuses, known.container_statuses)
        and _container_statuses_ok(status.init_container_statuses, known.init_container_statuses)
        and _container_statuses_ok(status.ephemeral_container_statuses, known.ephemeral_container_statuses)
    )


def _validate_status(status: Any, known: PodStatus | None) -> None:
    if not isinstance(status, PodStatus):
        raise InvalidObjectError(f"expected a PodStatus, got {type(status).__name__}", path="status")
    if status is known:
        return
    if status.observed_generation is not None and (
        not isinstance(status.observed_generation, int) or isinstance(status.observed_generation, bool)
    ):
        raise _bad(
            "status.observedGeneration", f"expected an int, got {type(status.observed_generation).__name__}"
        )
    _check_opt(status.phase, str, "status.phase")
    _check_opt(status.message, str, "status.message")
    _check_opt(status.reason, str, "status.reason")
    _check_opt(status.pod_ip, str, "status.podIP")
    _check_opt(status.host_ip, str, "status.hostIP")
    _check_time(status.start_time, "status.startTime")
    conditions = status.conditions
    known_conditions = known.conditions if known is not None else None
    if conditions is not None and conditions is not known_conditions:
        if not isinstance(conditions, tuple | list):
            raise _bad("status.conditions", f"expected a list, got {type(conditions).__name__}")
        for i, c in enumerate(conditions):
            if known_conditions is not None and i < len(known_conditions) and c is known_conditions[i]:
                continue
            path = f"status.conditions[{i}]"
            if not isinstance(c, PodCondition):
                raise _bad(path, f"expected PodCondition, got {type(c).__name__}")
            if not isinstance(c.type, str) or not c.type:
                raise _bad(f"{path}.type", "Required value")
            if not isinstance(c.status, str) or c.status not in VALID_CONDITION_STATUSES:
                raise _bad(
                    f"{path}.status",
                    f'Unsupported value: {c.status!r}: supported values: "False", "True", "Unknown"',
                )
            _check_opt(c.reason, str, f"{path}.reason")
            _check_opt(c.message, str, f"{path}.message")
            if c.observed_generation is not None and (
                not isinstance(c.observed_generation, int) or isinstance(c.observed_generation, bool)
            ):
                raise _bad(f"{path}.observedGeneration", "expected an int")
            _check_time(c.last_transition_time, f"{path}.lastTransitionTime")
            _check_time(c.last_probe_time, f"{path}.lastProbeTime")
    for attr, cls in (("pod_ips", PodIP), ("host_ips", HostIP)):
        ips = getattr(status, attr)
        if ips is not None:
            if not isinstance(ips, tuple | list):
                raise _bad(f"status.{attr}", f"expected a list, got {type(ips).__name__}")
            for i, ip in enumerate(ips):
                if not isinstance(ip, cls) or not isinstance(ip.ip, str):
                    raise _bad(f"status.{attr}[{i}]", f"expected {cls.__name__} with an ip")
    _check_container_statuses(
        status.container_statuses, "status.containerStatuses", known.container_statuses if known else None
    )
    _check_container_statuses(
        status.init_container_statuses,
        "status.initContainerStatuses",
        known.init_container_statuses if known else None,
    )
    _check_container_statuses(
        status.ephemeral_container_statuses,
        "status.ephemeralContainerStatuses",
        known.ephemeral_container_statuses if known else None,
    )


def reported_status_problem(status: Any) -> str | None:
    """Why a status a node's provider reported cannot be completed, or None.

    Before conditions are generated for it: it must be a PodStatus with one of
    the pod phases (an empty phase is not one). :func:`validate_status` judges
    the rest once the status is complete.
    """
    if not isinstance(status, PodStatus):
        return f"expected a PodStatus, got {type(status).__name__}"
    if status.phase not in POD_PHASES:
        return f"phase {status.phase!r} is not one of {', '.join(POD_PHASES)}"
    return None


# --- typed transitions (SPEC 4.2 step 2) ---------------------------------------------------------


def effective_restart_policy(spec: PodSpec) -> str:
    # The API server defaults an unset restartPolicy to Always.
    return spec.restart_policy or "Always"


def check_container_state_transition(old: PodStatus, new: PodStatus, spec: PodSpec) -> str | None:
    """SPEC 4.2 step 2: the reason a change is illegal, or None when it is allowed."""
    policy = effective_restart_policy(spec)
    if policy == "Always":
        return None
    # v1.37 (RestartAllContainersOnContainerExits): a pod that can restart in place may restart all.
    if all_containers_could_restart(spec):
        return None
    regular = {c.name: c for c in spec.containers or ()}
    for old_cs in old.container_statuses or ():
        term = old_cs.state.terminated if old_cs.state is not None else None
        if term is None:
            continue
        if term.exit_code != 0 and policy == "OnFailure":
            continue
        # v1.37 (ContainerRestartRules): the container's own policy or rules may restart it.
        container = regular.get(old_cs.name)
        if container is not None and container_should_restart(container, spec, term.exit_code):
            continue
        for new_cs in new.container_statuses or ():
            if new_cs.name == old_cs.name and (new_cs.state is None or new_cs.state.terminated is None):
                return (
                    f"terminated container {new_cs.name} attempted illegal transition to non-terminated state"
                )
    init_specs = {c.name: c for c in spec.init_containers or ()}
    for old_cs in old.init_container_statuses or ():
        container = init_specs.get(old_cs.name)
        if container is not None and is_restartable_init_container(container):
            continue  # a sidecar may always restart
        term = old_cs.state.terminated if old_cs.state is not None else None
        if term is None:
            continue
        if term.exit_code != 0 and policy == "OnFailure":
            continue
        if container is not None and container_should_restart(container, spec, term.exit_code):
            continue
        for new_cs in new.init_container_statuses or ():
            if new_cs.name == old_cs.name and (new_cs.state is None or new_cs.state.terminated is None):
                return (
                    f"terminated init container {new_cs.name} attempted illegal transition "
                    "to non-terminated state"
                )
    return None


# --- wire statuses: a pods/status update (kube-apiserver v1.37.2) ------------------------------------


def terminal_phase_errors(old_status: dict[str, Any], status: dict[str, Any]) -> list[FieldError]:
    """A terminal phase never moves back to a non-terminal one (podstatus's strict rule)."""
    if old_status.get("phase") in TERMINAL_PHASES and status.get("phase") not in TERMINAL_PHASES:
        return [FieldError("status.phase", "Forbidden", detail="cannot transition from a terminal phase")]
    return []


_IP_MSG = "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"
_IP_FAMILY_MSG = "may specify no more than one IP for each IP family"


def _ip_version(value: Any) -> int:
    """4 or 6 for a valid IP address, 0 otherwise (Go's net.ParseIP: no zones)."""
    if not isinstance(value, str) or not value or "%" in value:
        return 0
    return _ip_text_version(value)


@functools.lru_cache(maxsize=4096)
def _ip_text_version(value: str) -> int:
    # Cached: a node reports the same few addresses in every status write (ipaddress is slow).
    try:
        return ipaddress.ip_address(value).version
    except ValueError:
        return 0


def _check_ips(status: dict[str, Any], key: str, errors: list[FieldError]) -> None:
    """validatePodIPs / validateHostIPs of kube-apiserver v1.37.2."""
    items = status.get(key)
    if not items or not isinstance(items, list):
        return
    ips = [item.get("ip") if isinstance(item, dict) else None for item in items]
    if key == "hostIPs" and ips[0] != (status.get("hostIP") or ""):
        errors.append(
            FieldError("status.hostIPs[0].ip", "Invalid value", ips[0], "must be equal to `hostIP`")
        )
    versions = []
    for i, ip in enumerate(ips):
        version = _ip_version(ip)
        if not version:
            errors.append(FieldError(f"status.{key}[{i}]", "Invalid value", ip or "", _IP_MSG))
        versions.append(version)
    if len(ips) > 1 and (len(ips) > 2 or 4 not in versions or 6 not in versions):
        listed = [{"IP": ip or ""} for ip in ips]
        errors.append(FieldError(f"status.{key}", "Invalid value", listed, _IP_FAMILY_MSG))


# Kubernetes qualified names (condition types, label and annotation keys).
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_QUALIFIED_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_QUALIFIED_MSG = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    f"alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation "
    f"is '{_QUALIFIED_FMT}')"
)


@functools.lru_cache(maxsize=4096)
def qualified_name_errors(value: str) -> tuple[str, ...]:
    """IsQualifiedName of k8s.io/apimachinery (the messages of kube-apiserver v1.37.2); cached,
    as the same condition types come in every status write."""
    return tuple(_qualified_name_errors(value))


def _qualified_name_errors(value: str) -> list[str]:
    errs: list[str] = []
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            if len(prefix.encode()) > 253:
                errs.append("prefix part must be no more than 253 bytes")
            if not _DNS1123_SUBDOMAIN.match(prefix):
                errs.append("prefix part " + _SUBDOMAIN_MSG)
    else:
        return [
            "a valid label key " + _QUALIFIED_MSG
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]  # fmt: skip
    if not name:
        errs.append("name part must be non-empty")
    elif len(name.encode()) > 63:
        errs.append("name part must be no more than 63 bytes")
    if not _QUALIFIED_NAME.match(name):
        errs.append("name part " + _QUALIFIED_MSG)
    return errs


def _terminated_exit(statuses: Any) -> dict[str, int | None]:
    """name -> exit code of containers whose state is terminated."""
    out: dict[str, int | None] = {}
    for cs in statuses or ():
        if isinstance(cs, dict):
            term = (cs.get("state") or {}).get("terminated")
            if isinstance(term, dict):
                out[str(cs.get("name"))] = term.get("exitCode")
    return out


_SYSTEM_CONDITIONS = frozenset({"PodScheduled", "Ready", "Initialized"})
_NON_NEGATIVE = "must be a non-negative integer"


def validate_pod_status_update(
    old: dict[str, Any], new: dict[str, Any], *, strict: bool = True
) -> list[FieldError]:
    """ValidatePodStatusUpdate of kube-apiserver v1.37.2; ``strict`` adds podstatus's own checks
    (a terminal phase never moves back, condition statuses are True/False/Unknown, restart
    counts are never negative).

    ``old`` and ``new`` are the pods in their wire form; the errors come back in the order
    the real server reports them (none: the update is valid)."""
    errors: list[FieldError] = []
    old_status = old.get("status") or {}
    status = new.get("status") or {}
    if not isinstance(status, dict):
        return errors
    conditions = status.get("conditions") or ()
    if strict:
        errors.extend(terminal_phase_errors(old_status, status))
        for i, cond in enumerate(conditions):
            value = cond.get("status") if isinstance(cond, dict) else None
            if value not in _CONDITION_STATUSES:
                errors.append(_unsupported(f"status.conditions[{i}].status", value, _CONDITION_STATUSES))
    for i, cond in enumerate(conditions):
        generation = cond.get("observedGeneration") if isinstance(cond, dict) else None
        if isinstance(generation, int) and generation < 0:
            errors.append(FieldError(f"status.conditions[{i}].observedGeneration", "Invalid value",
                                     generation, _NON_NEGATIVE))  # fmt: skip
        kind = cond.get("type") if isinstance(cond, dict) else None
        if kind in _SYSTEM_CONDITIONS:
            continue
        kind = kind if isinstance(kind, str) else ""
        for msg in qualified_name_errors(kind):
            errors.append(FieldError(f"status.conditions[{i}].Type", "Invalid value", kind, msg))
    generation = status.get("observedGeneration")
    if isinstance(generation, int) and generation < 0:
        errors.append(FieldError("status.observedGeneration", "Invalid value", generation, _NON_NEGATIVE))
    qos, old_qos = status.get("qosClass") or "", old_status.get("qosClass") or ""
    if qos != old_qos:
        errors.append(FieldError("status.qosClass", "Invalid value", qos, "field is immutable"))
    _check_state_transitions(old, status, errors)
    _check_ips(status, "podIPs", errors)
    _check_ips(status, "hostIPs", errors)
    if strict:
        # The API documents restart counts as never negative; kube-apiserver v1.37.2 does not check.
        for key in ("containerStatuses", "initContainerStatuses", "ephemeralContainerStatuses"):
            for i, cs in enumerate(status.get(key) or ()):
                count = cs.get("restartCount") if isinstance(cs, dict) else None
                if isinstance(count, int) and count < 0:
                    errors.append(FieldError(f"status.{key}[{i}].restartCount", "Invalid value", count,
                                             "must be greater than or equal to 0"))  # fmt: skip
    return errors


def _check_state_transitions(old: dict[str, Any], status: dict[str, Any], errors: list[FieldError]) -> None:
    """A container that may not restart may not leave the terminated state (ValidateContainerStateTransition)."""
    old_status = old.get("status") or {}
    policy = (old.get("spec") or {}).get("restartPolicy") or "Always"
    if policy == "Always":
        return
    for key in ("containerStatuses", "initContainerStatuses"):
        before = _terminated_exit(old_status.get(key))
        if not before:
            continue
        sidecars: set[str] = set()
        if key == "initContainerStatuses":
            for c in (old.get("spec") or {}).get("initContainers") or ():
                if isinstance(c, dict) and c.get("restartPolicy") == "Always":
                    sidecars.add(str(c.get("name")))
        for i, cs in enumerate(status.get(key) or ()):
            if not isinstance(cs, dict):
                continue
            name = str(cs.get("name"))
            if name not in before or name in sidecars:
                continue
            if policy == "OnFailure" and before[name] != 0:
                continue
            if not isinstance((cs.get("state") or {}).get("terminated"), dict):
                errors.append(
                    FieldError(
                        f"status.{key}[{i}].state",
                        "Forbidden",
                        detail="may not be transitioned to non-terminated state",
                    )
                )
