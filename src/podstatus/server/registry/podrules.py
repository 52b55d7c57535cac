"""The rules of pods as kube-apiserver v1.37.2 applies them: defaulting (SetDefaults_Pod and
the admission plugins that set fields), the v1 conversions of the status, and the validation of
a pod's spec, of its spec's updates and of its status's updates. Pure functions over wire dicts:
the pod strategy (:mod:`.pods`) calls them, the tables of tests/server/registry test them.
"""

from __future__ import annotations

import functools
import ipaddress
from typing import Any

from ...qos import compute_pod_qos
from ..storage.errors import FieldError, bad_request, go_json_type, unsupported
from ..storage.meta import DNS1123_LABEL, LABEL_MSG, qualified_name_errors

__all__ = [
    "ADMITTED_SPEC",
    "TERMINAL",
    "check_spec_update",
    "convert_pod_ips",
    "default_conditions",
    "default_pod_spec",
    "default_tolerations",
    "qos_class",
    "validate_pod_spec",
    "validate_pod_status",
]

_CONDITION_STATUSES = ("False", "True", "Unknown")
TERMINAL = ("Succeeded", "Failed")


def _image_pull_policy(image: str) -> str:
    # The real defaulting: no tag or ``:latest`` pulls always.
    last = image.rsplit("/", 1)[-1]
    if "@" in last:
        return "IfNotPresent"
    tag = last.partition(":")[2]
    return "Always" if tag in ("", "latest") else "IfNotPresent"


def _default_containers(containers: Any) -> None:
    if not isinstance(containers, list):
        return
    for c in containers:
        if not isinstance(c, dict):
            continue
        c.setdefault("terminationMessagePath", "/dev/termination-log")
        c.setdefault("terminationMessagePolicy", "File")
        if isinstance(c.get("image"), str):
            c.setdefault("imagePullPolicy", _image_pull_policy(c["image"]))
        resources = c.setdefault("resources", {})
        # SetDefaults_Pod: a resource with a limit and no request is requested at its limit.
        if isinstance(resources, dict) and isinstance(resources.get("limits"), dict) and resources["limits"]:
            requests = resources.setdefault("requests", {})
            if isinstance(requests, dict):
                for name, value in resources["limits"].items():
                    requests.setdefault(name, value)
        ports = c.get("ports")
        for port in ports if isinstance(ports, list) else ():
            if isinstance(port, dict):
                port.setdefault("protocol", "TCP")


def default_pod_spec(spec: dict[str, Any]) -> None:
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("securityContext", {})
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("enableServiceLinks", True)
    spec.setdefault("priority", 0)
    spec.setdefault("preemptionPolicy", "PreemptLowerPriority")
    _default_containers(spec.get("containers"))
    _default_containers(spec.get("initContainers"))


_NOT_READY = "node.kubernetes.io/not-ready"
_UNREACHABLE = "node.kubernetes.io/unreachable"


def default_tolerations(spec: dict[str, Any]) -> None:
    """The DefaultTolerationSeconds admission plugin: tolerate not-ready and unreachable nodes for 300 s."""
    given = spec.get("tolerations")
    if given is not None and not isinstance(given, list):
        return
    items = given or []
    not_ready = unreachable = False
    for t in items:
        if not isinstance(t, dict) or (t.get("effect") or "") not in ("", "NoExecute"):
            continue
        key = t.get("key") or ""
        not_ready = not_ready or key in ("", _NOT_READY)
        unreachable = unreachable or key in ("", _UNREACHABLE)
    if not_ready and unreachable:
        return
    added = [
        {"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
        for key, present in ((_NOT_READY, not_ready), (_UNREACHABLE, unreachable))
        if not present
    ]
    spec["tolerations"] = [*items, *added]


def convert_pod_ips(status: dict[str, Any]) -> None:
    """The v1 <-> internal conversion of ``podIP``/``podIPs``: ``podIP`` wins when both are given
    and differ, and ``podIP`` is always printed as ``podIPs[0]``."""
    pod_ip = status.get("podIP")
    ips = status.get("podIPs")
    first = ips[0] if isinstance(ips, list) and ips else None
    first_ip = first.get("ip") if isinstance(first, dict) else None
    if pod_ip and isinstance(pod_ip, str):
        no_ips = ips is None or ips == []
        if no_ips or (first is not None and first_ip != pod_ip):
            status["podIPs"] = [{"ip": pod_ip}]
    elif isinstance(first_ip, str) and first_ip:
        status["podIP"] = first_ip


def default_conditions(status: dict[str, Any]) -> None:
    """A condition without ``type`` or ``status`` has them empty (Go's zero values), as on the real server."""
    conditions = status.get("conditions")
    if not isinstance(conditions, list):
        return
    if any(isinstance(c, dict) and ("type" not in c or "status" not in c) for c in conditions):
        # A new list: the given one may be shared with a stored object.
        status["conditions"] = [
            {"type": "", "status": "", **c} if isinstance(c, dict) else c for c in conditions
        ]


def qos_class(spec: dict[str, Any]) -> str:
    for c in [*(spec.get("initContainers") or ()), *(spec.get("containers") or ())]:
        res = c.get("resources") or {} if isinstance(c, dict) else {}
        if not isinstance(res, dict):
            # Typed ``Any`` in podstatus.types; the real server's decoder refuses it (400).
            raise bad_request(
                'Pod in version "v1" cannot be handled as a Pod: json: cannot unmarshal '
                f"{go_json_type(res)} into Go struct field Container.spec.containers.resources "
                "of type v1.ResourceRequirements"
            )
    return compute_pod_qos(spec)


def validate_pod_spec(spec: Any, errors: list[FieldError]) -> None:
    if not isinstance(spec, dict):
        errors.append(FieldError("spec", "Required value"))
        return
    seen: set[str] = set()
    for section in ("initContainers", "containers"):
        containers = spec.get(section) or []
        if section == "containers" and not containers:
            errors.append(FieldError("spec.containers", "Required value"))
        for i, c in enumerate(containers):
            path = f"spec.{section}[{i}]"
            name = c.get("name") if isinstance(c, dict) else None
            if not name:
                errors.append(FieldError(f"{path}.name", "Required value"))
            elif not DNS1123_LABEL.match(name) or len(name) > 63:
                errors.append(FieldError(f"{path}.name", "Invalid value", name, LABEL_MSG))
            elif name in seen:
                errors.append(FieldError(f"{path}.name", "Duplicate value", name))
            else:
                seen.add(name)
            if isinstance(c, dict) and not c.get("image"):
                errors.append(FieldError(f"{path}.image", "Required value"))
            if isinstance(c, dict):
                _check_ports(c.get("ports"), f"{path}.ports", errors)
    policy = spec.get("restartPolicy")
    if policy not in ("Always", "OnFailure", "Never"):
        errors.append(unsupported("spec.restartPolicy", policy, ("Always", "Never", "OnFailure")))
    for i, gate in enumerate(spec.get("readinessGates") or ()):
        if not isinstance(gate, dict) or not gate.get("conditionType"):
            errors.append(FieldError(f"spec.readinessGates[{i}].conditionType", "Required value"))


_PORT_RANGE_MSG = "must be between 1 and 65535, inclusive"


def _check_ports(ports: Any, path: str, errors: list[FieldError]) -> None:
    """The port-number part of validateContainerPorts (the decoder already kept them in int32)."""
    for i, port in enumerate(ports if isinstance(ports, list) else ()):
        if not isinstance(port, dict):
            continue
        number = port.get("containerPort")
        if not number:
            errors.append(FieldError(f"{path}[{i}].containerPort", "Required value"))
        elif isinstance(number, int) and not 1 <= number <= 65535:
            errors.append(FieldError(f"{path}[{i}].containerPort", "Invalid value", number, _PORT_RANGE_MSG))
        host = port.get("hostPort")
        if isinstance(host, int) and host and not 1 <= host <= 65535:
            errors.append(FieldError(f"{path}[{i}].hostPort", "Invalid value", host, _PORT_RANGE_MSG))


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


def validate_pod_status(
    old: dict[str, Any], new: dict[str, Any], errors: list[FieldError], *, strict: bool = True
) -> None:
    """ValidatePodStatusUpdate of kube-apiserver v1.37.2; ``strict`` adds podstatus's own checks
    (a terminal phase never moves back, condition statuses are True/False/Unknown, restart
    counts are never negative)."""
    old_status = old.get("status") or {}
    status = new.get("status") or {}
    if not isinstance(status, dict):
        return
    conditions = status.get("conditions") or ()
    if strict:
        if old_status.get("phase") in TERMINAL and status.get("phase") not in TERMINAL:
            errors.append(
                FieldError("status.phase", "Forbidden", detail="cannot transition from a terminal phase")
            )
        for i, cond in enumerate(conditions):
            value = cond.get("status") if isinstance(cond, dict) else None
            if value not in _CONDITION_STATUSES:
                errors.append(unsupported(f"status.conditions[{i}].status", value, _CONDITION_STATUSES))
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


_MUTABLE_SPEC = ("activeDeadlineSeconds", "tolerations", "terminationGracePeriodSeconds", "schedulingGates")
_SPEC_FORBIDDEN = (
    "pod updates may not change fields other than `spec.containers[*].image`,"
    "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` "
    "(only additions to existing tolerations),`spec.terminationGracePeriodSeconds` "
    "(allow it to be set to 1 if it was previously negative)"
)


def _resized_containers(spec: dict[str, Any], old: dict[str, Any]) -> str:
    """The first of containers/initContainers whose number of items changed ("" if none)."""
    for key in ("containers", "initContainers"):
        if len(spec.get(key) or ()) != len(old.get(key) or ()):
            return key
    return ""


def _spec_fingerprint(spec: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in spec.items() if k not in _MUTABLE_SPEC}
    for key in ("containers", "initContainers"):
        if isinstance(out.get(key), list):
            out[key] = [
                {k: v for k, v in c.items() if k != "image"} if isinstance(c, dict) else c for c in out[key]
            ]
    return out


# Set by admission plugins (DefaultTolerationSeconds, Priority), after the field manager ran.
ADMITTED_SPEC = ("tolerations", "priority", "preemptionPolicy")


def check_spec_update(spec: dict[str, Any], old_spec: dict[str, Any], meta: dict[str, Any],
                      errors: list[FieldError]) -> None:  # fmt: skip
    """ValidatePodUpdate's rules for the spec (already defaulted); a valid change bumps
    ``metadata.generation``."""
    if spec == old_spec:
        return
    resized = _resized_containers(spec, old_spec)
    if resized:
        # ValidateContainerUpdates: the count is checked first, and alone.
        errors.append(
            FieldError(f"spec.{resized}", "Forbidden", detail="pod updates may not add or remove containers")
        )
    elif _spec_fingerprint(spec) != _spec_fingerprint(old_spec):
        errors.append(FieldError("spec", "Forbidden", detail=_SPEC_FORBIDDEN))
    elif "generation" in meta:
        meta["generation"] = int(meta["generation"]) + 1
