"""The rules of pods as kube-apiserver v1.37.2 applies them: defaulting (SetDefaults_Pod and
the admission plugins that set fields), the v1 conversions of the status, and the validation of
a pod's spec, of its spec's updates and of its status's updates. Pure functions over wire dicts:
the pod strategy (:mod:`.pods`) calls them, the tables of tests/server/registry test them.
"""

from __future__ import annotations

from typing import Any

from ...qos import compute_pod_qos
from ...validation import TERMINAL_PHASES as TERMINAL
from ...validation import validate_pod_status_update
from ..storage.errors import FieldError, bad_request, go_json_type, unsupported
from ..storage.meta import DNS1123_LABEL, LABEL_MSG

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


def validate_pod_status(
    old: dict[str, Any], new: dict[str, Any], errors: list[FieldError], *, strict: bool = True
) -> None:
    """ValidatePodStatusUpdate of kube-apiserver v1.37.2 (and, ``strict``, podstatus's own
    rules), from pod status validation's one home, :mod:`podstatus.validation`."""
    errors.extend(validate_pod_status_update(old, new, strict=strict))


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
