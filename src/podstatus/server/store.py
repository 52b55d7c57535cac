"""The embedded API server's in-memory object store: pods, nodes, namespaces, Leases and Events.

It does what the real API server's registry does for these resources: defaulting,
validation, resourceVersion concurrency, UID preconditions, graceful deletion and
a watchable event history. Errors are the :mod:`podstatus.errors` classes, each
carrying the ``Status`` body the real server would send, so the HTTP front end and
the in-process client share one vocabulary.

Objects are kept as wire dicts plus their encoded JSON (and, for pods, the decoded
:class:`~podstatus.types.Pod`). A stored dict is never changed after it is stored:
every write builds a new dict, so readers get it without copying and must treat
it as read-only. Writes are serialised by one lock; every write bumps one global
resourceVersion and appends one event to a ring buffer that watchers read at their
own pace (fan-out costs nothing per watcher on the write path).
"""

from __future__ import annotations

import base64
import bisect
import builtins
import contextlib
import functools
import heapq
import ipaddress
import json
import logging
import random
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import msgspec

from ..errors import (
    ApiError,
    BadRequestError,
    ConflictError,
    ForbiddenError,
    GoneError,
    MethodNotAllowedError,
    NotFoundError,
    UnprocessableEntityError,
    UnsupportedMediaTypeError,
    status_body,
)
from ..patch import (
    POD_MERGE_KEYS,
    PatchError,
    apply_json_merge_patch,
    apply_json_patch,
    apply_strategic_merge_patch,
)
from ..qos import compute_pod_qos
from ..types import InvalidObjectError, Pod
from . import apply as _apply
from . import resize as _resize
from . import schema
from .selectors import SELECTED_FIELDS, FieldSelector, LabelSelector, SelectorError

__all__ = [
    "JSON_MERGE_PATCH",
    "JSON_PATCH",
    "RESOURCES",
    "STRATEGIC_MERGE_PATCH",
    "Event",
    "ListPage",
    "ResourceInfo",
    "Store",
    "Stored",
    "Watch",
    "WriteOptions",
]

log = logging.getLogger(__name__)

_encode = msgspec.json.encode
_decode = msgspec.json.decode

STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
JSON_MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"
_PATCH_TYPES = {
    STRATEGIC_MERGE_PATCH: STRATEGIC_MERGE_PATCH,
    "strategic": STRATEGIC_MERGE_PATCH,
    JSON_MERGE_PATCH: JSON_MERGE_PATCH,
    "merge": JSON_MERGE_PATCH,
    JSON_PATCH: JSON_PATCH,
    "json": JSON_PATCH,
}

_NODE_MERGE_KEYS: Mapping[tuple[str, ...], str] = {
    ("metadata", "finalizers"): "",
    ("metadata", "ownerReferences"): "uid",
    ("spec", "podCIDRs"): "",
    ("status", "conditions"): "type",
    ("status", "addresses"): "type",
    ("status", "volumesAttached"): "name",
}


class ResourceInfo:
    """Static facts about a served resource.

    ``key`` names it in :data:`RESOURCES` and in :class:`Store` calls: the resource
    for the core group (``pods``), ``resource.group`` otherwise
    (``leases.coordination.k8s.io``), as kube-apiserver names it in its messages.
    ``storage`` is the key of the objects it serves: two resources may share one
    storage (``events`` and ``events.events.k8s.io``), the ``strategy`` of each
    converting between its wire form and the stored one.
    """

    __slots__ = (
        "api_version", "group", "has_status", "key", "kind", "kind_group", "list_kind", "merge_keys", "name",
        "namespaced", "singular", "storage", "strategy", "version",
    )  # fmt: skip

    def __init__(
        self,
        name: str,
        kind: str,
        *,
        namespaced: bool,
        merge_keys: Mapping[tuple[str, ...], str],
        group: str = "",
        version: str = "v1",
        storage: str | None = None,
        has_status: bool = True,
        strategy: Strategy | None = None,
    ) -> None:
        self.name = name
        self.kind = kind
        self.list_kind = kind + "List"
        self.singular = kind.lower()
        self.namespaced = namespaced
        self.merge_keys = merge_keys
        self.group = group
        self.version = version
        self.api_version = f"{group}/{version}" if group else version
        self.key = f"{name}.{group}" if group else name
        self.storage = storage or self.key
        self.has_status = has_status
        self.strategy = strategy
        # The group of the kind validation errors name: the storage's (events.k8s.io's are core Events).
        self.kind_group = group if storage is None else ""

    def view(self, stored: Stored) -> Stored:
        """``stored`` in this resource's wire form (the same object unless the strategy converts)."""
        strategy = self.strategy
        if strategy is None or not strategy.converts:
            return stored
        obj = strategy.from_storage(stored.obj)
        return Stored(obj, _encode(obj), None, stored.rv)


class Strategy:
    """What a resource adds to the store's generic handling (kube-apiserver's REST strategy).

    The base class does nothing; :mod:`podstatus.server.kinds` defines the
    strategies of nodes, leases and events. Hooks work on private copies and
    append to ``errors`` (answered with 422 Invalid); a malformed body raises
    :class:`BadRequestError` (400) itself.
    """

    # True when the wire form differs from the stored one (from_storage/to_storage convert).
    converts = False
    # Seconds an object lives after its last write (None: for ever).
    ttl: float | None = None

    def to_storage(self, obj: dict[str, Any]) -> dict[str, Any]:
        """A request body (already checked to be this kind) in the stored form."""
        return obj

    def from_storage(self, obj: dict[str, Any]) -> dict[str, Any]:
        """A stored object in this resource's wire form (a new dict)."""
        return obj

    def prepare_create(self, obj: dict[str, Any], errors: builtins.list[FieldError]) -> None:
        """Default and validate a new object (stored form)."""
        obj.setdefault("spec", {})
        obj.setdefault("status", {})

    def prepare_update(
        self,
        old: dict[str, Any],
        obj: dict[str, Any],
        subresource: str | None,
        errors: builtins.list[FieldError],
    ) -> None:
        """Default and validate a replacement (stored form; server-owned metadata already kept)."""


RESOURCES: dict[str, ResourceInfo] = {
    "pods": ResourceInfo("pods", "Pod", namespaced=True, merge_keys=POD_MERGE_KEYS),
    "nodes": ResourceInfo("nodes", "Node", namespaced=False, merge_keys=_NODE_MERGE_KEYS),
    "namespaces": ResourceInfo("namespaces", "Namespace", namespaced=False, merge_keys={}, has_status=False),
}


def register(info: ResourceInfo) -> ResourceInfo:
    """Serve one more resource (or replace one: nodes get their strategy this way)."""
    RESOURCES[info.key] = info
    return info


_DEFAULT_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


class _Head(msgspec.Struct):
    """The metadata of an object's JSON, decoded without the rest."""

    metadata: dict[str, Any] = {}


def _selection(obj: dict[str, Any], meta: dict[str, Any]) -> dict[str, Any]:
    """What label and field selectors read of ``obj`` (selectors.SELECTED_FIELDS), in its shape."""
    view: dict[str, Any] = {"metadata": {k: meta[k] for k in ("name", "namespace", "labels") if k in meta}}
    for key, below in SELECTED_FIELDS.get(obj.get("kind") or "", {}).items():
        value = obj.get(key)
        if below is None:
            if value is not None:
                view[key] = value
        elif isinstance(value, dict):
            picked = {k: value[k] for k in below if k in value}
            if picked:
                view[key] = picked
    return view


class Stored:
    """One stored object version: its JSON (``raw``) and resourceVersion, decoded when asked.

    Only the JSON is kept (bytes: small, and nothing for the garbage collector to walk), with
    the name, namespace and UID and what selectors read (``sel``). ``obj`` decodes a fresh wire
    dict on each access (the caller may change it: bind it once where it is read often);
    ``metadata`` decodes the metadata alone; ``pod`` the decoded :class:`Pod` (None for
    other kinds). At 100,000 pods this is what keeps the embedded server within memory: a
    decoded pod (dict and Pod) held ten times the bytes of its JSON, and the collector walked it all.
    """

    __slots__ = ("is_pod", "name", "namespace", "raw", "rv", "sel", "uid")

    def __init__(self, obj: dict[str, Any], raw: bytes, pod: Pod | bool | None, rv: int) -> None:
        """``obj`` is what ``raw`` encodes (not kept); ``pod`` its decoded Pod, or True, for a pod."""
        meta = obj.get("metadata")
        if not isinstance(meta, dict):
            meta = {}
        self.raw = raw
        self.rv = rv
        self.is_pod = pod is not None and pod is not False
        self.name = str(meta.get("name", ""))
        self.namespace = str(meta.get("namespace") or "")
        self.uid = str(meta.get("uid", ""))
        self.sel = _selection(obj, meta)

    @property
    def obj(self) -> dict[str, Any]:
        """The object's wire dict, freshly decoded."""
        obj: dict[str, Any] = _decode(self.raw)
        return obj

    @property
    def metadata(self) -> dict[str, Any]:
        """The object's metadata, freshly decoded."""
        return _decode(self.raw, type=_Head).metadata

    @property
    def pod(self) -> Pod | None:
        """The decoded pod (a fresh :class:`Pod`), None for other kinds."""
        return Pod.from_json(self.raw) if self.is_pod else None

    def __repr__(self) -> str:
        return f"Stored({'Pod' if self.is_pod else 'object'} {self.name!r} rv={self.rv})"


class Event:
    """One change: ``ADDED``, ``MODIFIED``, ``DELETED`` (or ``BOOKMARK`` made by watchers)."""

    __slots__ = ("namespace", "old", "resource", "rv", "stored", "type")

    def __init__(
        self, type: str, resource: str, namespace: str, stored: Stored, old: Stored | None, rv: int
    ) -> None:
        self.type = type
        self.resource = resource
        self.namespace = namespace
        self.stored = stored
        self.old = old
        self.rv = rv

    @property
    def obj(self) -> dict[str, Any]:
        return self.stored.obj

    def __repr__(self) -> str:
        return f"Event({self.type} {self.resource} {self.namespace}/{self.stored.name} rv={self.rv})"


FIELD_VALIDATION = ("Strict", "Warn", "Ignore")


@dataclass(slots=True)
class WriteOptions:
    """How one write is done (the query parameters of a create, update, patch or delete).

    ``field_validation``: what to do with fields the kind does not know (they are never
    stored): ``Strict`` refuses the write, ``Warn`` adds one warning per field to
    ``warnings``, ``Ignore`` drops them silently. ``dry_run``: validate and answer as if
    the write happened, but store nothing (no new resourceVersion, no watch event).
    """

    field_validation: str = "Warn"
    dry_run: bool = False
    warnings: list[str] = field(default_factory=list)


# --- errors as the real server words them ---------------------------------------------


def _details(resource: str, name: str) -> dict[str, Any]:
    # "leases.coordination.k8s.io": the details name the group apart (none for the core group).
    plural, _, group = resource.partition(".")
    return {"name": name, "group": group, "kind": plural} if group else {"name": name, "kind": plural}


def not_found(resource: str, name: str) -> NotFoundError:
    message = f'{resource} "{name}" not found'
    return NotFoundError(message, status=status_body(404, "NotFound", message, **_details(resource, name)))


def already_exists(resource: str, name: str) -> ConflictError:
    message = f'{resource} "{name}" already exists'
    return ConflictError(
        message,
        reason="AlreadyExists",
        status=status_body(409, "AlreadyExists", message, **_details(resource, name)),
    )


def conflict(resource: str, name: str, why: str) -> ConflictError:
    message = f'Operation cannot be fulfilled on {resource} "{name}": {why}'
    return ConflictError(message, status=status_body(409, "Conflict", message, **_details(resource, name)))


_MODIFIED = "the object has been modified; please apply your changes to the latest version and try again"


def bad_request(message: str) -> BadRequestError:
    return BadRequestError(message, status=status_body(400, "BadRequest", message))


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


def invalid(kind: str, name: str, errors: list[FieldError], group: str = "") -> UnprocessableEntityError:
    text = str(errors[0]) if len(errors) == 1 else "[" + ", ".join(str(e) for e in errors) + "]"
    qualified = f"{kind}.{group}" if group else kind
    message = f'{qualified} "{name}" is invalid: {text}'
    where = {"name": name, "group": group, "kind": kind} if group else {"name": name, "kind": kind}
    body = status_body(422, "Invalid", message, **where, causes=[e.cause() for e in errors])
    return UnprocessableEntityError(message, status=body)


# --- validation helpers ------------------------------------------------------------

_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
    "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
    "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
_LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must "
    "start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for "
    "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)
_CONDITION_STATUSES = ("False", "True", "Unknown")
# TotalAnnotationSizeLimitB of kube-apiserver.
MAX_ANNOTATIONS_BYTES = 256 * 1024
_TERMINAL = ("Succeeded", "Failed")
_GENERATE_CHARS = "bcdfghjklmnpqrstvwxz2456789"


def _check_subdomain(value: str, field: str, errors: list[FieldError]) -> None:
    if len(value) > 253:
        errors.append(FieldError(field, "Invalid value", value, "must be no more than 253 characters"))
    elif not _DNS1123_SUBDOMAIN.match(value):
        errors.append(FieldError(field, "Invalid value", value, _SUBDOMAIN_MSG))


def _check_label_name(value: str, field: str, errors: list[FieldError]) -> None:
    if len(value) > 63:
        errors.append(FieldError(field, "Invalid value", value, "must be no more than 63 characters"))
    elif not _DNS1123_LABEL.match(value):
        errors.append(FieldError(field, "Invalid value", value, _LABEL_MSG))


def _unsupported(field: str, value: Any, supported: tuple[str, ...]) -> FieldError:
    values = ", ".join(json.dumps(s) for s in supported)
    return FieldError(field, "Unsupported value", value, f"supported values: {values}")


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


def _default_pod_spec(spec: dict[str, Any]) -> None:
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


def _default_tolerations(spec: dict[str, Any]) -> None:
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


def _convert_pod_ips(status: dict[str, Any]) -> None:
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


def _default_conditions(status: dict[str, Any]) -> None:
    """A condition without ``type`` or ``status`` has them empty (Go's zero values), as on the real server."""
    conditions = status.get("conditions")
    if not isinstance(conditions, list):
        return
    if any(isinstance(c, dict) and ("type" not in c or "status" not in c) for c in conditions):
        # A new list: the given one may be shared with a stored object.
        status["conditions"] = [
            {"type": "", "status": "", **c} if isinstance(c, dict) else c for c in conditions
        ]


def _go_json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _qos_class(spec: dict[str, Any]) -> str:
    for c in [*(spec.get("initContainers") or ()), *(spec.get("containers") or ())]:
        res = c.get("resources") or {} if isinstance(c, dict) else {}
        if not isinstance(res, dict):
            # Typed ``Any`` in podstatus.types; the real server's decoder refuses it (400).
            raise bad_request(
                'Pod in version "v1" cannot be handled as a Pod: json: cannot unmarshal '
                f"{_go_json_type(res)} into Go struct field Container.spec.containers.resources "
                "of type v1.ResourceRequirements"
            )
    return compute_pod_qos(spec)


def _validate_pod_spec(spec: Any, errors: list[FieldError]) -> None:
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
            elif not _DNS1123_LABEL.match(name) or len(name) > 63:
                errors.append(FieldError(f"{path}.name", "Invalid value", name, _LABEL_MSG))
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
        errors.append(_unsupported("spec.restartPolicy", policy, ("Always", "Never", "OnFailure")))
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


# Kubernetes qualified names (condition types, label and annotation keys).
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_QUALIFIED_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_QUALIFIED_MSG = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    f"alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation "
    f"is '{_QUALIFIED_FMT}')"
)
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_LABEL_VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
    "and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or "
    "'12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
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


def _check_labels(meta: dict[str, Any], errors: list[FieldError]) -> None:
    """ValidateLabels and the key check of ValidateAnnotations (field ``metadata.labels`` / ``.annotations``)."""
    labels = meta.get("labels")
    for key, value in labels.items() if isinstance(labels, dict) else ():
        for msg in qualified_name_errors(str(key)):
            errors.append(FieldError("metadata.labels", "Invalid value", key, msg))
        text = value if isinstance(value, str) else ""
        if len(text.encode()) > 63:
            errors.append(
                FieldError("metadata.labels", "Invalid value", text, "must be no more than 63 bytes")
            )
        if not _LABEL_VALUE.match(text):
            errors.append(FieldError("metadata.labels", "Invalid value", text, _LABEL_VALUE_MSG))
    annotations = meta.get("annotations")
    for key in annotations if isinstance(annotations, dict) else ():
        for msg in qualified_name_errors(str(key).lower()):
            errors.append(FieldError("metadata.annotations", "Invalid value", key, msg))
    if isinstance(annotations, dict):
        # ValidateAnnotationsSize: keys and values together, in bytes.
        size = sum(
            len(str(k).encode()) + len(v.encode() if isinstance(v, str) else b"")
            for k, v in annotations.items()
        )
        if size > MAX_ANNOTATIONS_BYTES:
            errors.append(
                FieldError(
                    "metadata.annotations",
                    "Too long",
                    detail=f"may not be more than {MAX_ANNOTATIONS_BYTES} bytes",
                )
            )


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


def _validate_pod_status(
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
        if old_status.get("phase") in _TERMINAL and status.get("phase") not in _TERMINAL:
            errors.append(
                FieldError("status.phase", "Forbidden", detail="cannot transition from a terminal phase")
            )
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


# Metadata only the server sets: an update keeps the stored values.
_SERVER_META = (
    "name", "namespace", "uid", "creationTimestamp", "deletionTimestamp", "generation",
    "resourceVersion", "managedFields",
)  # fmt: skip


def _decode_error(err: Exception) -> str:
    # msgspec gives up on deeply nested JSON with a RecursionError (Go's decoder has a depth limit too).
    return "exceeded max depth" if isinstance(err, RecursionError) else str(err)


def _printed(obj: dict[str, Any], pod: Pod, live: dict[str, Any] | None) -> dict[str, Any]:
    """The pod as it will be stored (printed from its decoded form, as the real server prints
    it). Parts equal to the live object's are taken from it: only changed parts are printed."""
    out: dict[str, Any] = {}
    for key, value in obj.items():
        old = live.get(key) if live is not None else None
        if old is not None and (old is value or old == value):
            out[key] = old
        elif key in ("metadata", "spec", "status"):
            out[key] = _decode(getattr(pod, key).to_json())
        else:
            out[key] = value
    return out


def _mentions_managed_fields(patch: Any) -> bool:
    meta = patch.get("metadata") if isinstance(patch, dict) else None
    return isinstance(meta, dict) and "managedFields" in meta


# Set by admission plugins (DefaultTolerationSeconds, Priority), after the field manager ran.
_ADMITTED_SPEC = ("tolerations", "priority", "preemptionPolicy")


def _dry_run_result(stored: Stored, rv: int) -> Stored:
    """What a dry-run create answers: the object as it would be stored, without a resourceVersion."""
    obj = stored.obj
    obj["metadata"].pop("resourceVersion", None)
    return Stored(obj, _encode(obj), stored.is_pod, rv)


def _with_rv(pod: Pod, rv: int) -> Pod:
    return pod.replace(metadata=pod.metadata.replace(resource_version=str(rv)))


def _registry_key(info: ResourceInfo, ns: str, name: str) -> str:
    """Where kube-apiserver keeps the object in etcd (it shows in some error messages)."""
    if info.name == "nodes":
        return f"/registry/minions/{name}"
    return f"/registry/{info.name}/{ns}/{name}" if info.namespaced else f"/registry/{info.name}/{name}"


def _delete_conflict(info: ResourceInfo, name: str, why: str) -> ConflictError:
    """A failed delete precondition (rest.BeforeDelete names the kind, not the resource)."""
    message = f'Operation cannot be fulfilled on {info.kind} "{name}": {why}'
    return ConflictError(message, status=status_body(409, "Conflict", message, name=name, kind=info.kind))


# 9999-12-31T23:59:59Z: the last instant RFC 3339 (and Python's datetime) can write.
_MAX_TIMESTAMP = 253402300799.0


def _rfc3339(ts: float) -> str:
    return datetime.fromtimestamp(int(ts), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _parse_rfc3339(text: str) -> float:
    try:
        return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()
    except (TypeError, ValueError):
        return 0.0


def _selectors(
    resource: str, label_selector: str | LabelSelector | None, field_selector: str | FieldSelector | None
) -> tuple[LabelSelector | None, FieldSelector | None]:
    try:
        ls = label_selector if not isinstance(label_selector, str) else LabelSelector.parse(label_selector)
        fs = (
            field_selector
            if not isinstance(field_selector, str)
            else FieldSelector.parse(field_selector, resource)
        )
    except SelectorError as err:
        raise bad_request(str(err)) from None
    return (None if ls is None or ls.empty else ls), (None if fs is None or fs.empty else fs)


def _matches(obj: dict[str, Any], ls: LabelSelector | None, fs: FieldSelector | None) -> bool:
    if ls is not None and not ls.matches((obj.get("metadata") or {}).get("labels")):
        return False
    return fs is None or fs.matches(obj)


def _kind_key(info: ResourceInfo) -> str:
    return f"{getattr(info, 'api_version', 'v1')}/{info.kind}"


def _cannot_handle(info: ResourceInfo, why: str) -> BadRequestError:
    api_version = getattr(info, "api_version", "v1")
    version = api_version.rsplit("/", 1)[-1]
    return bad_request(f'{info.kind} in version "{version}" cannot be handled as a {info.kind}: {why}')


def _strict_message(problems: builtins.list[str]) -> str:
    return "strict decoding error: " + ", ".join(problems)


def _strict_problems(raw: Any, unknown: builtins.list[str], options: WriteOptions) -> builtins.list[str]:
    """The strict decoding errors (keys given twice in the raw JSON first, then unknown fields)."""
    if options.field_validation == "Ignore":
        return []
    problems = []
    if isinstance(raw, bytes | bytearray | memoryview | str):
        data = raw.encode() if isinstance(raw, str) else bytes(raw)
        try:
            # A fresh decoding: the one the caller holds may have been changed since.
            decoded = _decode(data)
        except (msgspec.DecodeError, RecursionError):
            decoded = None
        if decoded is not None:
            problems = [f'duplicate field "{p}"' for p in schema.duplicate_fields(data, decoded)]
    return problems + [f'unknown field "{p}"' for p in unknown]


def decode_body(info: ResourceInfo, obj: dict[str, Any], options: WriteOptions, raw: Any = None) -> None:
    """What the real server's decoder does to a create or update body (in place): a number out
    of its field's range is a 400; unknown fields are dropped and, like keys given twice in the
    ``raw`` JSON, refused or warned about as ``options.field_validation`` says."""
    found = schema.prune(_kind_key(info), obj)
    if found.range_error:
        raise _cannot_handle(info, found.range_error)
    problems = _strict_problems(raw, found.unknown, options)
    if problems:
        if options.field_validation == "Strict":
            raise _cannot_handle(info, _strict_message(problems))
        options.warnings.extend(problems)


def _go_repr(value: Any) -> str:
    """Go's ``%+v`` of a decoded JSON value (how the real server quotes a strategic merge patch)."""
    if isinstance(value, dict):
        return "map[" + " ".join(f"{k}:{_go_repr(value[k])}" for k in sorted(value)) + "]"
    if isinstance(value, list):
        return "[" + " ".join(_go_repr(v) for v in value) + "]"
    if value is None:
        return "<nil>"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _invalid_patch(detail: str, quoted: str) -> UnprocessableEntityError:
    """The real server's answer to a patch whose result does not decode (no kind, no name)."""
    err = FieldError("patch", "Invalid value", quoted, detail)
    message = f' "" is invalid: {err}'
    body = status_body(422, "Invalid", message, causes=[err.cause()])
    return UnprocessableEntityError(message, status=body)


def decode_patched(
    info: ResourceInfo,
    result: dict[str, Any],
    patch: Any,
    kind: str,
    options: WriteOptions,
    *,
    wrap: bool,
    raw: Any = None,
) -> None:
    """As :func:`decode_body`, for the result of a patch: failures are 422s on the field ``patch``
    (quoting the patch for a strategic merge patch, the patched object otherwise). ``wrap``:
    out-of-range integers of a strategic merge patch are converted as the real server does
    (silently, see schema.prune) instead of refused."""
    # Keys given twice in the patch itself (the real server decodes it strictly first).
    duplicates = _strict_problems(raw, [], options)
    if kind != JSON_PATCH and isinstance(patch, dict):
        # Stored objects hold known fields only: when the patch brings no unknown field and no
        # out-of-range number, neither does the result (and the whole object need not be walked).
        probe = schema.prune(_kind_key(info), patch, patch=True)
        if not probe.unknown and probe.range_error is None and not duplicates:
            return
    found = schema.prune(_kind_key(info), result, wrap=wrap and kind == STRATEGIC_MERGE_PATCH)
    problems = duplicates + _strict_problems(None, found.unknown, options)
    if not found.range_error and (not problems or options.field_validation != "Strict"):
        options.warnings.extend(problems)
        return
    quoted = _go_repr(patch) if kind == STRATEGIC_MERGE_PATCH else json.dumps(result, separators=(",", ":"))
    raise _invalid_patch(found.range_error or _strict_message(problems), quoted)


# --- the store -----------------------------------------------------------------------


# kube-apiserver v1.37.2's watch cache (k8s.io/apiserver pkg/storage/cacher): a resource keeps at
# least its newest 100 changes and every change of the last 75 s (DefaultEventsHistoryWindow), up to
# 102,400. `podstatus serve` keeps the same window (docs/reliability.md, "Watch history").
WATCH_CACHE_MIN_CHANGES = 100
WATCH_CACHE_SECONDS = 75.0
WATCH_CACHE_MAX_CHANGES = 100 * 1024


class Store:
    """Thread-safe in-memory objects (pods, nodes, namespaces, leases, events) with watch history.

    Each resource keeps its own history of changes, as kube-apiserver's watch cache does:
    the last ``history_size`` of them and, with ``history_seconds``, also every change
    younger than that (kube-apiserver keeps 75 s), up to ``max_history``; the changes are dated
    by ``clock``. A watch or read from a resourceVersion whose later changes of its resource are
    no longer all there gets 410 Expired. ``clock`` gives epoch seconds (tests may fake it). With ``reap_terminating`` (the default), a pod whose graceful
    deletion ran out is removed on the next store access (or :meth:`reap`
    call), like a kubelet that finished it would; without it, it stays until
    deleted with grace 0, as on a real server with no kubelet.

    ``strict_status`` (the default) adds podstatus's own checks to the real
    server's validation of pod status writes: a terminal phase may not move
    back to a non-terminal one and a condition's status must be ``True``,
    ``False`` or ``Unknown`` (SPEC section 5; they catch node agent bugs
    early). With ``strict_status=False`` status writes are validated exactly
    as kube-apiserver v1.37.2 does, which accepts both.

    Writes that name a field manager (every write over HTTP) keep
    ``metadata.managedFields`` as kube-apiserver does, and :meth:`apply` is
    server-side apply (:mod:`podstatus.server.apply`). ``managed_fields=False``
    stops tracking updates (about 0.1 ms per write in-process); apply still works.
    """

    def __init__(
        self,
        *,
        history_size: int = 10000,
        history_seconds: float = 0.0,
        max_history: int = 100 * 1024,
        clock: Callable[[], float] = time.time,
        reap_terminating: bool = True,
        strict_status: bool = True,
        managed_fields: bool = True,
    ) -> None:
        if history_size < 1:
            raise ValueError("history_size must be positive")
        if max_history < history_size:
            raise ValueError("max_history must be at least history_size")
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)
        self._clock = clock
        self._reap_terminating = reap_terminating
        self._strict_status = strict_status
        self._managed_fields = managed_fields
        self._rv = 0
        self._size = history_size
        self._history_seconds = history_seconds
        self._max_history = max_history
        # storage -> its recent changes
        self._histories: dict[str, _History] = {}
        # resource -> namespace ("" when cluster-scoped) -> name -> current version
        self._objects: dict[str, dict[str, dict[str, Stored]]] = {"pods": {}, "nodes": {"": {}}}
        self._namespaces: dict[str, Stored] = {}
        # (deadline, namespace, name, uid) of pods being deleted gracefully
        self._deadlines: list[tuple[float, str, str, str]] = []
        # (expiry, storage, namespace, name, resourceVersion) of objects with a TTL (Events)
        self._expiries: list[tuple[float, str, str, str, int]] = []
        self._closed = False
        # Set (lock held) while a dry-run write runs: commits answer without storing.
        self._dry_run = False
        for ns in _DEFAULT_NAMESPACES:
            self._ensure_namespace(ns)

    # -- basics ------------------------------------------------------------------------

    @property
    def strict_status(self) -> bool:
        """Whether pod status writes get podstatus's stricter checks (see the class docstring)."""
        return self._strict_status

    @property
    def reap_terminating(self) -> bool:
        """Whether pods whose graceful deletion ran out are removed (a simulated kubelet)."""
        return self._reap_terminating

    @property
    def resource_version(self) -> int:
        """The newest resourceVersion handed out."""
        with self._lock:
            return self._rv

    def now(self) -> float:
        return self._clock()

    def wait_for_resource_version(self, rv: int, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds until the store reached ``rv``; whether it did."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while self._rv < rv and not self._closed:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._changed.wait(remaining)
            return self._rv >= rv

    def close(self) -> None:
        """End every watch (they return ``None`` from then on)."""
        with self._lock:
            self._closed = True
            self._changed.notify_all()

    @property
    def closed(self) -> bool:
        return self._closed

    def _info(self, resource: str) -> ResourceInfo:
        info = RESOURCES.get(resource)
        if info is None:
            message = "the server could not find the requested resource"
            raise NotFoundError(message, status=status_body(404, "NotFound", message))
        return info

    def _bucket(self, info: ResourceInfo, namespace: str | None) -> dict[str, Stored]:
        if info.name == "namespaces":
            return self._namespaces
        objects = self._objects.setdefault(info.storage, {})
        key = (namespace or "") if info.namespaced else ""
        bucket = objects.get(key)
        if bucket is None:
            bucket = objects[key] = {}
        return bucket

    def _ensure_namespace(self, name: str) -> None:
        if name and name not in self._namespaces:
            self._namespaces[name] = self._namespace_object(name, {"metadata": {}}, self._rv)

    def _namespace_object(self, name: str, given: dict[str, Any], rv: int) -> Stored:
        """A namespace with the real server's defaults (the name label, the finalizer, Active)."""
        meta = dict(given.get("metadata") or {})
        labels = dict(meta.get("labels") or {})
        labels["kubernetes.io/metadata.name"] = name
        meta.update(
            name=name,
            uid=str(uuid.uuid4()),
            resourceVersion=str(rv),
            creationTimestamp=_rfc3339(self._clock()),
            labels=labels,
        )
        spec = dict(given.get("spec") or {})
        spec.setdefault("finalizers", ["kubernetes"])
        obj = {"kind": "Namespace", "apiVersion": "v1", "metadata": meta, "spec": spec,
               "status": {"phase": "Active"}}  # fmt: skip
        return Stored(obj, _encode(obj), None, rv)

    def _record(
        self, type_: str, info: ResourceInfo, namespace: str, stored: Stored, old: Stored | None
    ) -> None:
        # Caller holds the lock and has assigned stored.rv == self._rv + 1.
        self._rv = stored.rv
        history = self._histories.get(info.storage)
        if history is None:
            history = self._histories[info.storage] = _History()
        # The store's clock dates the changes, so a test can age them (kube-apiserver: RecordTime).
        now = self._clock()
        history.append(Event(type_, info.storage, namespace, stored, old, stored.rv), now)
        history.trim(self._size, self._history_seconds, self._max_history, now)
        ttl = info.strategy.ttl if info.strategy is not None else None
        if ttl and type_ != "DELETED":
            heapq.heappush(
                self._expiries, (self._clock() + ttl, info.storage, namespace, stored.name, stored.rv)
            )
        self._changed.notify_all()
        log.debug("%s %s %s/%s rv=%d", type_, info.name, namespace, stored.name, stored.rv)

    @contextlib.contextmanager
    def _dry(self, options: WriteOptions) -> Iterator[None]:
        """Within a write (lock held): with ``options.dry_run``, nothing the write does is stored."""
        if not options.dry_run:
            yield
            return
        self._dry_run = True
        try:
            yield
        finally:
            self._dry_run = False

    # -- reads -------------------------------------------------------------------------

    def get(self, resource: str, namespace: str | None, name: str) -> Stored:
        """The current version; raises NotFoundError."""
        info = self._info(resource)
        with self._lock:
            self._maybe_reap()
            if info.name == "namespaces":
                found = self._namespaces.get(name)
            else:
                found = self._bucket(info, namespace).get(name)
            if found is None:
                raise not_found(info.key, name)
            return info.view(found)

    def list(
        self,
        resource: str,
        namespace: str | None = None,
        *,
        label_selector: str | LabelSelector | None = None,
        field_selector: str | FieldSelector | None = None,
    ) -> tuple[builtins.list[Stored], int]:
        """Matching objects (sorted by namespace and name) and the list's resourceVersion."""
        info = self._info(resource)
        ls, fs = _selectors(info.key, label_selector, field_selector)
        with self._lock:
            self._maybe_reap()
            items = self._snapshot(info, namespace)
            rv = self._rv
        if ls is not None or fs is not None:
            items = [s for s in items if _matches(s.sel, ls, fs)]
        if info.strategy is not None and info.strategy.converts:
            items = [info.view(s) for s in items]
        return items, rv

    def list_page(
        self,
        resource: str,
        namespace: str | None = None,
        *,
        label_selector: str | LabelSelector | None = None,
        field_selector: str | FieldSelector | None = None,
        limit: int | None = None,
        continue_token: str | None = None,
        exact_resource_version: int | None = None,
    ) -> ListPage:
        """One page of a list, as kube-apiserver pages: at most ``limit`` items (none or <= 0:
        all), and a ``continue`` token when more match. Every page of a list shows the objects
        as they were at the first page's resourceVersion; a token older than the history
        answers 410 Expired with a token that goes on at the current state instead.
        ``exact_resource_version``: the objects as they were then (``resourceVersionMatch=Exact``,
        or a limit with a resourceVersion); 410 Expired when older than the history."""
        info = self._info(resource)
        ls, fs = _selectors(info.key, label_selector, field_selector)
        start: tuple[str, str] | None = None
        at: int | None = None
        if continue_token:
            start, token_rv = decode_continue(continue_token, info, namespace)
            at = token_rv if token_rv > 0 else None
        elif exact_resource_version is not None:
            at = exact_resource_version
        with self._lock:
            self._maybe_reap()
            dropped = self._dropped(info)
            if at is not None and start is None and at < dropped:
                raise _list_expired()
            if at is None:
                items, rv = self._snapshot(info, namespace), self._rv
            else:
                if at < dropped and start is not None:
                    raise _continue_expired(info, namespace, start)
                items, rv = self._state_at(info, namespace, at, start), at
        if ls is not None or fs is not None:
            items = [s for s in items if _matches(s.sel, ls, fs)]
        if start is not None:
            items = [s for s in items if _list_key(info, s) >= start]
        if info.strategy is not None and info.strategy.converts:
            items = [info.view(s) for s in items]
        if limit is None or limit <= 0 or len(items) <= limit:
            return ListPage(items, rv)
        page = items[:limit]
        last = _list_key(info, page[-1])
        token = encode_continue(info, namespace, (last[0], last[1] + "\x00"), rv)
        remaining = len(items) - limit if ls is None and fs is None else None
        return ListPage(page, rv, token, remaining)

    def _state_at(
        self, info: ResourceInfo, namespace: str | None, rv: int, start: tuple[str, str] | None
    ) -> builtins.list[Stored]:
        """The objects as they were at ``rv`` (lock held): the current ones with the newer
        events of the history undone."""
        objects = {_list_key(info, s): s for s in self._snapshot(info, namespace)}
        if rv < self._dropped(info):
            raise _continue_expired(info, namespace, start)
        history = self._histories.get(info.storage)
        for event in reversed(history.after(rv) if history is not None else []):
            if namespace and info.namespaced and event.namespace != namespace:
                continue
            key = _list_key(info, event.stored)
            if event.type == "ADDED" or event.old is None:
                objects.pop(key, None)
            else:
                objects[key] = event.old
        return [objects[k] for k in sorted(objects)]

    def _snapshot(self, info: ResourceInfo, namespace: str | None) -> builtins.list[Stored]:
        if info.name == "namespaces":
            return [self._namespaces[k] for k in sorted(self._namespaces)]
        objects = self._objects.get(info.storage) or {}
        if info.namespaced and namespace:
            bucket = objects.get(namespace) or {}
            return [bucket[k] for k in sorted(bucket)]
        return [objects[ns][k] for ns in sorted(objects) for k in sorted(objects[ns])]

    # -- writes ------------------------------------------------------------------------

    def create(
        self,
        resource: str,
        namespace: str | None,
        body: Any,
        *,
        options: WriteOptions | None = None,
        field_manager: str | None = None,
        tracker: _apply.Tracker | None = None,
    ) -> Stored:
        """Create an object (``generateName`` honoured); returns what was stored.

        A namespaced object needs its namespace to exist (404 otherwise, as kube-apiserver's
        NamespaceLifecycle admission answers); ``default``, ``kube-system``, ``kube-public``
        and ``kube-node-lease`` always do, others are created as ``namespaces``.

        With ``field_manager`` the object gets its ``managedFields`` entry, as over HTTP
        (``tracker`` is how an apply creates).
        """
        info = self._info(resource)
        opts = options if options is not None else WriteOptions(field_validation="Ignore")
        obj = self._private_copy(body, info)
        decode_body(info, obj, opts, raw=body)
        if info.name == "namespaces":
            return self._create_namespace(obj, opts)
        if info.strategy is not None:
            obj = info.strategy.to_storage(obj)
        meta = obj["metadata"]
        self._check_namespace(info, namespace, meta)
        name = meta.get("name") or ""
        generate = meta.get("generateName") or ""
        errors: builtins.list[FieldError] = []
        if not name and not generate:
            errors.append(
                FieldError("metadata.name", "Required value", detail="name or generateName is required")
            )
        elif name:
            _check_subdomain(name, "metadata.name", errors)
        _check_labels(meta, errors)
        for key in ("uid", "resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds", "selfLink"):
            meta.pop(key, None)
        requested = meta.pop("managedFields", None)
        if tracker is None and field_manager is not None and self._managed_fields:
            tracker = _apply.UpdateTracker(field_manager, now=self._clock(), create=True)
        # Admission plugins (not defaulting) set these: they are nobody's fields.
        admitted: tuple[str, ...] = ()
        if info.name == "pods":
            spec = obj.setdefault("spec", {})
            if isinstance(spec, dict):
                admitted = tuple(k for k in _ADMITTED_SPEC if k not in spec)
            if isinstance(spec, dict):
                _default_pod_spec(spec)
                _default_tolerations(spec)
            # The real server starts every pod Pending; a status in the body is dropped.
            obj["status"] = {"phase": "Pending"}
            self._typecheck(info, obj, 400)
            obj["status"]["qosClass"] = _qos_class(spec)
            _validate_pod_spec(spec, errors)
            meta["generation"] = 1
        elif info.strategy is not None:
            info.strategy.prepare_create(obj, errors)
        else:
            obj.setdefault("spec", {})
            obj.setdefault("status", {})
        if errors:
            raise invalid(info.kind, name or generate, errors, info.kind_group)
        with self._lock:
            self._maybe_reap()
            bucket = self._bucket(info, namespace)
            if not name:
                name = self._generate_name(generate, bucket)
                meta["name"] = name
                check: builtins.list[FieldError] = []
                _check_subdomain(name, "metadata.name", check)
                if check:
                    raise invalid(info.kind, name, check, info.kind_group)
            if info.namespaced and (namespace or "") not in self._namespaces:
                raise not_found("namespaces", namespace or "")
            if name in bucket:
                raise already_exists(info.key, name)
            rv = self._rv + 1
            meta["uid"] = str(uuid.uuid4())
            meta["resourceVersion"] = str(rv)
            meta["creationTimestamp"] = _rfc3339(self._clock())
            pod = self._typecheck(info, obj, 400)
            obj, pod = self._track(info, None, obj, pod, tracker, requested, admitted)
            if opts.dry_run:
                # As it would be stored, less the resourceVersion only storage hands out.
                return info.view(_dry_run_result(self._stored(info, obj, pod, rv), self._rv))
            stored = self._stored(info, obj, pod, rv)
            bucket[name] = stored
            self._record("ADDED", info, namespace or "", stored, None)
            return info.view(stored)

    def ensure_namespace(self, name: str) -> Stored:
        """The namespace ``name``, made when it does not exist yet: for in-process users that
        set up a world (tests, ``podstatus simulate``). Like the four default namespaces it
        is part of the world as it is (no new resourceVersion, no watch event); clients
        create namespaces through the API (``kubectl create namespace``)."""
        with self._lock:
            self._ensure_namespace(name)
            return self._namespaces[name]

    def _create_namespace(self, obj: dict[str, Any], opts: WriteOptions) -> Stored:
        """POST /api/v1/namespaces: validated and defaulted as the real server does."""
        info = RESOURCES["namespaces"]
        meta = obj["metadata"]
        meta.pop("namespace", None)
        name = meta.get("name") or ""
        generate = meta.get("generateName") or ""
        errors: builtins.list[FieldError] = []
        if not name and not generate:
            errors.append(
                FieldError("metadata.name", "Required value", detail="name or generateName is required")
            )
        elif name:
            _check_label_name(name, "metadata.name", errors)
        _check_labels(meta, errors)
        if errors:
            raise invalid(info.kind, name or generate, errors)
        for key in ("uid", "resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds", "selfLink"):
            meta.pop(key, None)
        meta.pop("managedFields", None)
        with self._lock:
            if not name:
                name = meta["name"] = self._generate_name(generate[: 63 - 5], self._namespaces)
            if name in self._namespaces:
                raise already_exists(info.name, name)
            stored = self._namespace_object(name, obj, self._rv + 1)
            if opts.dry_run:
                obj = stored.obj
                del obj["metadata"]["resourceVersion"]
                return Stored(obj, _encode(obj), None, self._rv)
            self._namespaces[name] = stored
            self._record("ADDED", info, "", stored, None)
            return stored

    def update(
        self,
        resource: str,
        namespace: str | None,
        name: str,
        body: Any,
        *,
        subresource: str | None = None,
        options: WriteOptions | None = None,
        field_manager: str | None = None,
    ) -> Stored:
        """Replace an object (PUT); with ``subresource="status"`` only its status changes.
        ``field_manager`` tracks the write in ``managedFields``."""
        info = self._info(resource)
        self._check_subresource(info, subresource)
        opts = options if options is not None else WriteOptions(field_validation="Ignore")
        obj = self._private_copy(body, info)
        decode_body(info, obj, opts, raw=body)
        if info.strategy is not None:
            obj = info.strategy.to_storage(obj)
        meta = obj["metadata"]
        self._check_namespace(info, namespace, meta)
        if meta.get("name") and meta["name"] != name:
            raise bad_request(
                f"the name of the object ({meta['name']}) does not match the name on the URL ({name})"
            )
        with self._lock:
            self._maybe_reap()
            current = self._current(info, namespace, name)
            with self._dry(opts):
                return info.view(
                    self._write(
                        info, namespace or "", current, obj, subresource, bad=400,
                        tracker=self._update_tracker(field_manager, subresource),
                    )
                )  # fmt: skip

    def patch(
        self,
        resource: str,
        namespace: str | None,
        name: str,
        patch: bytes | dict[str, Any] | builtins.list[Any],
        patch_type: str = STRATEGIC_MERGE_PATCH,
        *,
        subresource: str | None = None,
        options: WriteOptions | None = None,
        field_manager: str | None = None,
        force: bool = False,
    ) -> Stored:
        """Patch an object (``patch_type``: a patch content type, or strategic/merge/json/apply).

        ``metadata.uid`` and ``metadata.resourceVersion`` in the patch act as
        preconditions, as on the real server. ``field_manager`` tracks the write in
        ``managedFields``; an apply patch needs it (see :meth:`apply`).
        """
        info = self._info(resource)
        self._check_subresource(info, subresource)
        kind = _PATCH_TYPES.get(patch_type.split(";")[0].strip().lower())
        if kind is None and patch_type.split(";")[0].strip().lower() in (APPLY_PATCH, "apply"):
            if isinstance(patch, list):
                raise bad_request("an apply patch must be an object")
            return self.apply(
                resource,
                namespace,
                name,
                patch,
                field_manager=field_manager,
                force=force,
                subresource=subresource,
                options=options,
            )[0]
        if kind is None:
            if patch_type.startswith(APPLY_PATCH):
                message = "server-side apply (application/apply-patch+yaml) is not supported by this server"
                status = status_body(415, "UnsupportedMediaType", message)
            else:
                # As kube-apiserver words it for a patch type it does not know (with empty details).
                message = "415: Unsupported Media Type"
                status = status_body(415, "UnsupportedMediaType", message)
                status["details"] = {}
            raise UnsupportedMediaTypeError(message, status=status)
        if isinstance(patch, bytes | bytearray | memoryview | str):
            try:
                data: Any = _decode(patch)
            except (msgspec.DecodeError, RecursionError) as err:
                raise bad_request(f"error decoding patch: {_decode_error(err)}") from None
        else:
            data = patch
        with self._lock:
            self._maybe_reap()
            current = self._current(info, namespace, name)
            base = current.obj
            converts = info.strategy is not None and info.strategy.converts
            if converts:
                # The patch is written against this resource's wire form.
                base = info.view(current).obj
            if subresource == "status" and kind != JSON_PATCH:
                # Only metadata and status of the result are used: the patch engine need not
                # copy the spec (the status strategy keeps the stored one).
                base = {k: v for k, v in base.items() if k != "spec"}
            if (
                kind != JSON_PATCH
                and "managedFields" in base["metadata"]
                and not _mentions_managed_fields(data)
            ):
                # Nor the managed fields, which the write keeps (or recomputes) anyway.
                meta = {k: v for k, v in base["metadata"].items() if k != "managedFields"}
                base = dict(base, metadata=meta)
            try:
                if kind == STRATEGIC_MERGE_PATCH:
                    if not isinstance(data, dict):
                        raise PatchError("a strategic merge patch must be a JSON object")
                    result = apply_strategic_merge_patch(base, data, merge_keys=info.merge_keys)
                elif kind == JSON_MERGE_PATCH:
                    if not isinstance(data, dict):
                        raise PatchError("a JSON merge patch must be a JSON object")
                    result = apply_json_merge_patch(base, data)
                else:
                    result = apply_json_patch(base, data)
            except PatchError as err:
                message = str(err)
                raise UnprocessableEntityError(message, status=status_body(422, "Invalid", message)) from None
            if not isinstance(result, dict) or not isinstance(result.get("metadata", {}), dict):
                message = "the patched object is not a JSON object with metadata"
                raise UnprocessableEntityError(message, status=status_body(422, "Invalid", message))
            result.setdefault("metadata", {})
            opts = options if options is not None else WriteOptions(field_validation="Ignore")
            # podstatus refuses what kube-apiserver would store wrapped (2^40 as 0); kube-like stores it.
            decode_patched(info, result, data, kind, opts, wrap=not self._strict_status, raw=patch)
            if info.strategy is not None:
                result = info.strategy.to_storage(result)
            with self._dry(opts):
                written = self._write(
                    info, namespace or "", current, result, subresource, bad=422, patch=True,
                    tracker=self._update_tracker(field_manager, subresource),
                )  # fmt: skip
            return info.view(written)

    def apply(
        self,
        resource: str,
        namespace: str | None,
        name: str,
        body: bytes | str | Mapping[str, Any],
        *,
        field_manager: str | None,
        force: bool = False,
        subresource: str | None = None,
        options: WriteOptions | None = None,
    ) -> tuple[Stored, bool]:
        """Server-side apply of a YAML or JSON configuration; returns (the result, whether it was created).

        The configuration is merged into the object (created when absent, in an existing
        namespace), ``field_manager`` owns its fields from then on, and a field another
        manager owns with another value is a 409 Conflict unless ``force``. See
        :mod:`podstatus.server.apply`.
        """
        info = self._info(resource)
        self._check_subresource(info, subresource)
        if info.strategy is not None and info.strategy.converts:
            # Stored in another version's form: apply would have to merge and own fields in both.
            message = f"server-side apply is not supported for {info.key} by this server"
            raise UnsupportedMediaTypeError(message, status=status_body(415, "UnsupportedMediaType", message))
        _apply.validate_field_manager("PATCH", field_manager, apply=True, force=None)
        manager = field_manager or ""
        opts = options if options is not None else WriteOptions(field_validation="Ignore")
        config = _apply.parse_apply_body(body)
        _apply.check_type(config, info.kind, info.api_version)
        original = _decode(_encode(config))
        found = schema.prune(_kind_key(info), config)
        if found.unknown:
            # Whatever fieldValidation says: the field manager cannot type the configuration.
            raise _apply.undeclared_fields(original, found.unknown, kind=info.kind, api_version=info.api_version,
                                           schema=self._schema(info))  # fmt: skip
        decode_body(info, config, opts)  # numbers out of range
        with self._lock:
            self._maybe_reap()
            current = self._bucket(info, namespace).get(name) if info.name != "namespaces" else None
            if current is None:
                if info.name == "namespaces" or subresource:
                    self._current(info, namespace, name)  # 404 (or 405 for namespaces)
                if info.namespaced and (namespace or "") not in self._namespaces:
                    raise not_found("namespaces", namespace or "")
            merged, tracker = _apply.prepare_apply(
                kind=info.kind, api_version=info.api_version, schema=self._schema(info),
                live=current.obj if current is not None else None, config=config, manager=manager,
                subresource=subresource or "", force=force, now=self._clock(),
            )  # fmt: skip
            meta = merged.setdefault("metadata", {})
            if meta.get("name") and meta["name"] != name:
                raise bad_request(
                    f"the name of the object ({meta['name']}) does not match the name on the URL ({name})"
                )
            if current is None:
                meta["name"] = name
                return self.create(resource, namespace, merged, options=opts, tracker=tracker), True
            with self._dry(opts):
                written = self._write(
                    info, namespace or "", current, merged, subresource, bad=422, patch=True, tracker=tracker
                )
            return info.view(written), False

    def bind(self, namespace: str, name: str, node_name: str) -> Stored:
        """Set ``spec.nodeName`` of an unbound pod (the ``pods/binding`` subresource)."""
        info = RESOURCES["pods"]
        with self._lock:
            self._maybe_reap()
            current = self._current(info, namespace, name)
            obj = current.obj
            if obj.get("spec", {}).get("nodeName"):
                raise conflict(
                    "pods/binding",
                    name,
                    f'pod {name} is already assigned to node "{obj["spec"]["nodeName"]}"',
                )
            obj["spec"] = dict(obj["spec"], nodeName=node_name)
            return self._commit(info, namespace, current, obj)

    def delete(
        self,
        resource: str,
        namespace: str | None,
        name: str,
        *,
        grace_period_seconds: int | None = None,
        uid: str | None = None,
        resource_version: str | None = None,
        dry_run: bool = False,
    ) -> tuple[Stored, bool]:
        """Delete an object; returns (its last version, whether it is gone).

        As kube-apiserver v1.37.2: a pod bound to a node and not in a terminal
        phase is deleted gracefully: it gets ``deletionTimestamp`` and
        ``deletionGracePeriodSeconds`` and stays (second value ``False``) until
        deleted with grace 0 or (with ``reap_terminating``) its grace runs out;
        a second delete may only shorten the grace period. A pod deleted at
        once is first written with ``deletionTimestamp`` and grace 0 (a
        MODIFIED event), then removed; the answer is that last version.
        ``uid`` and ``resource_version`` are preconditions (409 Conflict). With
        ``dry_run`` nothing changes: the answer is the object as the delete would leave it
        (unchanged when it would go at once).
        """
        info = self._info(resource)
        if info.name == "namespaces":
            message = "namespaces cannot be deleted from this server"
            raise MethodNotAllowedError(message, status=status_body(405, "MethodNotAllowed", message))
        ns = namespace or ""
        with self._lock, self._dry(WriteOptions(dry_run=dry_run)):
            self._maybe_reap()
            current = self._current(info, namespace, name)
            cur = current.obj
            meta = cur["metadata"]
            if uid is not None and uid != meta.get("uid"):
                raise _delete_conflict(
                    info, name, f"the UID in the precondition ({uid}) does not match the UID in record "
                    f"({meta.get('uid')}). The object might have been deleted and then recreated",
                )  # fmt: skip
            if resource_version is not None and resource_version != meta.get("resourceVersion"):
                raise _delete_conflict(
                    info, name, f"the ResourceVersion in the precondition ({resource_version}) does not "
                    f"match the ResourceVersion in record ({meta.get('resourceVersion')}). "
                    "The object might have been modified",
                )  # fmt: skip
            if info.name != "pods":
                if meta.get("finalizers"):
                    if meta.get("deletionTimestamp"):
                        return info.view(current), False
                    marked = self._mark_deleted(info, ns, current, 0, bump_generation=False, obj=cur)
                    return info.view(marked), False
                return info.view(self._remove(info, ns, current)), True
            if grace_period_seconds is not None and grace_period_seconds < 0:
                grace_period_seconds = 1
            if meta.get("deletionTimestamp"):
                old_period = meta.get("deletionGracePeriodSeconds")
                if not old_period:
                    # Already going with grace 0 (or none): only finalizers keep it.
                    if meta.get("finalizers"):
                        return current, False
                    return self._remove(info, ns, current), True
                if grace_period_seconds is None or grace_period_seconds >= old_period:
                    return current, False  # already going at least as fast
                period = grace_period_seconds
                deadline = _parse_rfc3339(meta["deletionTimestamp"]) - old_period + period
                stored = self._mark_deleted(
                    info, ns, current, period, deadline, bump_generation=False, obj=cur
                )
            else:
                period = self._grace_period(cur, grace_period_seconds)
                stored = self._mark_deleted(info, ns, current, period, obj=cur)
            if period == 0 and not meta.get("finalizers"):
                return self._remove(info, ns, stored), True
            return stored, False

    # -- write helpers -----------------------------------------------------------------

    @staticmethod
    def _grace_period(pod: dict[str, Any], requested: int | None) -> int:
        """The pod strategy's CheckGracefulDelete."""
        spec = pod.get("spec") or {}
        if requested is not None:
            period = requested
        else:
            period = int(spec.get("terminationGracePeriodSeconds", 30) or 0)
        # As the real server: unscheduled or finished pods go at once.
        if not spec.get("nodeName") or (pod.get("status") or {}).get("phase") in _TERMINAL:
            period = 0
        return period if period >= 0 else 1

    def _mark_deleted(
        self,
        info: ResourceInfo,
        ns: str,
        current: Stored,
        period: int,
        deadline: float | None = None,
        *,
        bump_generation: bool = True,
        obj: dict[str, Any] | None = None,
    ) -> Stored:
        """Write ``deletionTimestamp`` (now + ``period`` unless ``deadline``) and the grace period.
        ``obj``: ``current.obj`` when the caller decoded it already (it is changed)."""
        if deadline is None:
            deadline = self._clock() + period
        # A grace period of centuries (any int64 is accepted) ends at the last representable second.
        deadline = min(max(deadline, 0.0), _MAX_TIMESTAMP)
        if obj is None:
            obj = current.obj
        new_meta = obj["metadata"]
        new_meta["deletionTimestamp"] = _rfc3339(deadline)
        new_meta["deletionGracePeriodSeconds"] = period
        if bump_generation and new_meta.get("generation"):
            new_meta["generation"] = int(new_meta["generation"]) + 1
        stored = self._commit(info, ns, current, obj)
        if period > 0 and self._reap_terminating and not self._dry_run:
            heapq.heappush(self._deadlines, (deadline, ns, stored.name, stored.uid))
        return stored

    def _remove(self, info: ResourceInfo, ns: str, current: Stored) -> Stored:
        if self._dry_run:
            return current
        rv = self._rv + 1
        obj = current.obj
        obj["metadata"]["resourceVersion"] = str(rv)
        stored = Stored(obj, _encode(obj), current.is_pod, rv)
        del self._bucket(info, ns)[current.name]
        self._record("DELETED", info, ns, stored, current)
        return stored

    def _current(self, info: ResourceInfo, namespace: str | None, name: str) -> Stored:
        current = self._bucket(info, namespace).get(name)
        if current is None:
            raise not_found(info.key, name)
        return current

    @staticmethod
    def _check_subresource(info: ResourceInfo, subresource: str | None) -> None:
        if subresource == "resize" and info.name == "pods":
            return  # pods/resize: in-place resize of container resources
        if subresource not in (None, "", "status") or (not info.has_status and subresource):
            message = "the server could not find the requested resource"
            status = status_body(404, "NotFound", message)
            status["details"] = {}
            raise NotFoundError(message, status=status)

    @staticmethod
    def _private_copy(body: Any, info: ResourceInfo) -> dict[str, Any]:
        if isinstance(body, bytes | bytearray | memoryview | str):
            try:
                body = _decode(body)
            except (msgspec.DecodeError, RecursionError) as err:
                raise bad_request(
                    f"the body of the request is not valid JSON: {_decode_error(err)}"
                ) from None
            obj = body
        elif isinstance(body, Pod):
            obj = body.to_dict()
        elif isinstance(body, dict):
            # Our own copy: the caller's dict is never changed or kept.
            try:
                obj = _decode(_encode(body))
            except RecursionError as err:
                raise bad_request(
                    f"the body of the request is not valid JSON: {_decode_error(err)}"
                ) from None
        else:
            obj = body
        if not isinstance(obj, dict):
            raise bad_request(f"the body of the request must be a JSON object, not {type(obj).__name__}")
        kind = obj.get("kind")
        if kind not in (None, "", info.kind):
            raise bad_request(
                f'{info.kind} in version "{info.version}" cannot be handled as a {info.kind}: wrong kind {kind!r}'
            )
        api_version = obj.get("apiVersion")
        if api_version not in (None, "", info.api_version):
            raise bad_request(
                f'{info.kind} in version "{info.version}" cannot be handled as a {info.kind}: '
                f"unsupported apiVersion {api_version!r}"
            )
        obj["kind"] = info.kind
        obj["apiVersion"] = info.api_version
        meta = obj.get("metadata")
        if meta is None:
            meta = obj["metadata"] = {}
        if not isinstance(meta, dict):
            raise bad_request(
                f'{info.kind} in version "v1" cannot be handled as a {info.kind}: metadata must be an object'
            )
        return obj

    @staticmethod
    def _check_namespace(info: ResourceInfo, namespace: str | None, meta: dict[str, Any]) -> None:
        if info.namespaced:
            given = meta.get("namespace")
            if given and given != namespace:
                raise bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request"
                )
            meta["namespace"] = namespace
        else:
            meta.pop("namespace", None)

    @staticmethod
    def _generate_name(prefix: str, bucket: Mapping[str, Stored]) -> str:
        prefix = prefix[: 253 - 5]
        for _ in range(100):
            name = prefix + "".join(random.choices(_GENERATE_CHARS, k=5))
            if name not in bucket:
                return name
        raise ApiError("could not generate a unique name", code=500, reason="InternalError")

    def _write(
        self,
        info: ResourceInfo,
        ns: str,
        current: Stored,
        new: dict[str, Any],
        subresource: str | None,
        *,
        bad: int,
        patch: bool = False,
        tracker: _apply.Tracker | None = None,
    ) -> Stored:
        """Shared by update and patch: preconditions, strategy, validation, commit (lock held)."""
        name = current.name
        cur = current.obj
        cur_meta = cur["metadata"]
        given_meta = new.get("metadata")
        meta = dict(given_meta) if isinstance(given_meta, dict) else {}
        requested = meta.get("managedFields")
        uid = meta.get("uid")
        other_uid = bool(uid) and uid != cur_meta.get("uid")
        if other_uid and not patch:
            # The UID of a PUT body is a storage precondition (rest.DefaultUpdatedObjectInfo).
            raise conflict(
                info.key, name, f"StorageError: invalid object, Code: 4, Key: {_registry_key(info, ns, name)}, "
                f"ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: UID in precondition: {uid}, "
                f"UID in object meta: {cur_meta.get('uid')}",
            )  # fmt: skip
        rv = meta.get("resourceVersion")
        if rv and rv != cur_meta.get("resourceVersion"):
            raise conflict(info.key, name, _MODIFIED)
        if meta.get("name") and meta["name"] != name:
            raise bad_request(
                f"the name of the object ({meta['name']}) does not match the name on the URL ({name})"
            )
        if info.namespaced and meta.get("namespace") and meta["namespace"] != ns:
            raise bad_request(
                "the namespace of the provided object does not match the namespace sent on the request"
            )
        errors: builtins.list[FieldError] = []
        # A patch changing metadata.uid fails validation (the field is immutable).
        if other_uid:
            errors.append(FieldError("metadata.uid", "Invalid value", uid, "field is immutable"))
        # What the server owns is kept (rest.BeforeUpdate); the rest of the metadata (labels,
        # annotations, finalizers...) is taken from the request, for pods/status too.
        for key in _SERVER_META:
            if key in cur_meta:
                meta[key] = cur_meta[key]
            else:
                meta.pop(key, None)
        meta.pop("selfLink", None)
        grace, old_grace = meta.get("deletionGracePeriodSeconds"), cur_meta.get("deletionGracePeriodSeconds")
        if grace is None:
            if old_grace is not None:
                meta["deletionGracePeriodSeconds"] = old_grace
        elif grace != old_grace:
            errors.append(
                FieldError(
                    "metadata.deletionGracePeriodSeconds", "Invalid value", grace, "field is immutable"
                )
            )
        if isinstance(meta.get("finalizers"), list) and not meta["finalizers"]:
            del meta["finalizers"]
        if cur_meta.get("deletionTimestamp"):
            old_finalizers = cur_meta.get("finalizers") or ()
            added = sorted({f for f in meta.get("finalizers") or () if f not in old_finalizers})
            if added:
                found = ", ".join(json.dumps(f) for f in added)
                errors.append(FieldError("metadata.finalizers", "Forbidden", detail=(
                    f"no new finalizers can be added if the object is being deleted, found new finalizers "
                    f"[]string{{{found}}}"
                )))  # fmt: skip
        if meta.get("labels") != cur_meta.get("labels") or meta.get("annotations") != cur_meta.get(
            "annotations"
        ):
            _check_labels(meta, errors)
        if info.name == "namespaces":
            # The namespace strategy keeps the name label whatever the write says.
            meta["labels"] = {**(meta.get("labels") or {}), "kubernetes.io/metadata.name": name}
        is_pod = info.name == "pods"
        if subresource == "status":
            # The status strategy: spec (and a pod's ownerReferences) stay as they were.
            obj = dict(cur)
            obj["metadata"] = meta
            if is_pod:
                if "ownerReferences" in cur_meta:
                    meta["ownerReferences"] = cur_meta["ownerReferences"]
                else:
                    meta.pop("ownerReferences", None)
            status = new.get("status")
            if is_pod and isinstance(status, dict):
                status = dict(status)
                old_qos = (cur.get("status") or {}).get("qosClass")
                if not status.get("qosClass") and old_qos:
                    status["qosClass"] = old_qos  # PrepareForUpdate backfills it
                _convert_pod_ips(status)
                _default_conditions(status)
            obj["status"] = status if status is not None else {}
        elif subresource == "resize":
            spec = new.get("spec")
            if isinstance(spec, dict):
                spec = dict(spec)
                _default_pod_spec(spec)
                new = dict(new, spec=spec)
            obj = _resize.prepare(cur, new, meta)
            errors.extend(FieldError(*e) for e in _resize.validate(cur, obj))
        else:
            obj = dict(new)
            obj["kind"] = cur.get("kind", info.kind)
            obj["apiVersion"] = cur.get("apiVersion", info.api_version)
            obj["metadata"] = meta
            # Writes to the main resource leave the status alone, as the real server does.
            if "status" in cur:
                obj["status"] = cur["status"]
            else:
                obj.pop("status", None)
            if is_pod:
                spec = obj.get("spec")
                spec = obj["spec"] = dict(spec) if isinstance(spec, dict) else {}
                _default_pod_spec(spec)
                _default_tolerations(spec)
                old_spec = cur.get("spec") or {}
                if spec != old_spec:
                    resized = _resized_containers(spec, old_spec)
                    if resized:
                        # ValidateContainerUpdates: the count is checked first, and alone.
                        errors.append(FieldError(f"spec.{resized}", "Forbidden",
                                                 detail="pod updates may not add or remove containers"))  # fmt: skip
                    elif _spec_fingerprint(spec) != _spec_fingerprint(old_spec):
                        errors.append(FieldError("spec", "Forbidden", detail=_SPEC_FORBIDDEN))
                    elif "generation" in meta:
                        meta["generation"] = int(meta["generation"]) + 1
        if info.strategy is not None:
            info.strategy.prepare_update(cur, obj, subresource, errors)
        # Types first: the semantic checks below may then trust them.
        pod = self._typecheck(info, obj, bad)
        if is_pod and subresource == "status":
            _validate_pod_status(cur, obj, errors, strict=self._strict_status)
        # Managed fields before validation: an apply's conflicts come first, as on the real server.
        obj, pod = self._track(info, cur, obj, pod, tracker, requested)
        if errors:
            raise invalid(info.kind, name, errors, info.kind_group)
        if subresource == "resize":
            self._admit_resize(name, cur, obj)
        if (pod == current.pod) if is_pod else (obj == cur):
            return current  # nothing changed: no new resourceVersion, no event (as the real server)
        if (
            meta.get("deletionTimestamp")
            and not meta.get("finalizers")
            and meta.get("deletionGracePeriodSeconds") == 0
        ):
            # The last finalizer of an object deleted with grace 0 is gone: it goes now.
            return self._remove(info, ns, current)
        return self._commit(info, ns, current, obj, pod)

    def _admit_resize(self, name: str, cur: dict[str, Any], obj: dict[str, Any]) -> None:
        """The validating admission kube-apiserver runs on a resize (lock held): 403 as it words it."""
        node_name = (obj.get("spec") or {}).get("nodeName")
        node = self._bucket(self._info("nodes"), None).get(node_name) if isinstance(node_name, str) else None
        refused = _resize.admission_error(cur, obj, node.obj if node is not None else None)
        if refused is None:
            return
        why, cause = refused
        message = f'pods "{name}" is forbidden: {why}'
        details: dict[str, Any] = {"name": name, "kind": "pods"}
        if cause:
            details["causes"] = [{"reason": cause}]
        raise ForbiddenError(message, status=status_body(403, "Forbidden", message, **details))

    def _update_tracker(self, field_manager: str | None, subresource: str | None) -> _apply.Tracker | None:
        if field_manager is None or not self._managed_fields:
            return None  # an untracked write keeps the managed fields as they are
        return _apply.UpdateTracker(field_manager, subresource=subresource or "", now=self._clock())

    @staticmethod
    def _schema(info: ResourceInfo) -> _apply.Schema:
        return _apply.schema_for(info.kind, info.api_version, info.merge_keys)

    def _track(
        self,
        info: ResourceInfo,
        live: dict[str, Any] | None,
        obj: dict[str, Any],
        pod: Pod | None,
        tracker: _apply.Tracker | None,
        requested: Any,
        hidden: tuple[str, ...] = (),
    ) -> tuple[dict[str, Any], Pod | None]:
        """Set the ``managedFields`` of a write (the field manager's hook; lock held).

        The tracker compares the objects in their stored wire form (a pod printed as the
        real server prints it), as the real field manager compares typed objects. ``hidden``
        spec fields (set by admission, not by the writer) are nobody's.
        """
        if tracker is None:
            return obj, pod
        new = obj if pod is None else _printed(obj, pod, live)
        if hidden and isinstance(new.get("spec"), dict):
            new = dict(new, spec={k: v for k, v in new["spec"].items() if k not in hidden})
        entries = tracker.managed_fields(
            info.kind, str(obj.get("apiVersion") or "v1"), self._schema(info), live, new, requested
        )
        if entries == (obj["metadata"].get("managedFields") or []):
            return obj, pod
        if entries:
            obj["metadata"]["managedFields"] = entries
        else:
            obj["metadata"].pop("managedFields", None)
        if pod is not None:
            pod = pod.replace(metadata=pod.metadata.replace(managed_fields=entries or None))
        return obj, pod

    def _commit(
        self, info: ResourceInfo, ns: str, current: Stored, obj: dict[str, Any], pod: Pod | None = None
    ) -> Stored:
        if pod is None:
            pod = self._typecheck(info, obj, 422)
        if self._dry_run:
            # Validated and answered, never stored: the resourceVersion stays the current one.
            return self._stored(info, obj, pod, current.rv)
        stored = self._stored(info, obj, pod, self._rv + 1)
        self._bucket(info, ns)[current.name] = stored
        self._record("MODIFIED", info, ns, stored, current)
        return stored

    @staticmethod
    def _stored(info: ResourceInfo, obj: dict[str, Any], pod: Pod | None, rv: int) -> Stored:
        """A new version at ``rv``. A pod is stored in its canonical wire form, printed from its
        decoded :class:`Pod` as the API server prints it (null times, ``{}`` states...)."""
        if pod is None:
            obj["metadata"]["resourceVersion"] = str(rv)
            return Stored(obj, _encode(obj), None, rv)
        pod = _with_rv(pod, rv)
        raw = pod.to_json()
        return Stored(_decode(raw), raw, pod, rv)

    @staticmethod
    def _typecheck(info: ResourceInfo, obj: dict[str, Any], bad: int) -> Pod | None:
        """Decode a pod (the types the API declares); ``bad`` is the code for a failure."""
        if info.name != "pods":
            return None
        try:
            return Pod.from_dict(obj)
        except InvalidObjectError as err:
            if bad == 400:
                raise bad_request(f'Pod in version "v1" cannot be handled as a Pod: {err}') from None
            name = str(obj["metadata"].get("name", ""))
            raise invalid(
                "Pod", name, [FieldError(err.path or "<root>", "Invalid value", None, str(err))]
            ) from None

    # -- graceful deletion deadlines ---------------------------------------------------

    def _maybe_reap(self) -> None:
        if self._deadlines and self._deadlines[0][0] <= self._clock():
            self._reap_locked()
        if self._expiries and self._expiries[0][0] <= self._clock():
            self._expire_locked()

    def reap(self) -> int:
        """Remove pods whose graceful deletion ran out (and expired Events); returns how many pods went."""
        with self._lock:
            self._expire_locked()
            return self._reap_locked()

    def _expire_locked(self) -> int:
        """Remove objects whose TTL ran out since their last write (etcd leases on the real server)."""
        count = 0
        now = self._clock()
        while self._expiries and self._expiries[0][0] <= now:
            _, storage, ns, name, rv = heapq.heappop(self._expiries)
            current = (self._objects.get(storage) or {}).get(ns, {}).get(name)
            if current is None or current.rv != rv:
                continue  # gone already, or written again since (a later expiry is queued)
            self._remove(RESOURCES[storage], ns, current)
            count += 1
        return count

    def _reap_locked(self) -> int:
        count = 0
        info = RESOURCES["pods"]
        now = self._clock()
        while self._deadlines and self._deadlines[0][0] <= now:
            _, ns, name, uid = heapq.heappop(self._deadlines)
            current = self._objects["pods"].get(ns, {}).get(name)
            if current is None or current.uid != uid:
                continue
            meta = current.metadata
            if meta.get("finalizers"):
                continue
            stamp = meta.get("deletionTimestamp")
            if not stamp or _parse_rfc3339(stamp) > now:
                continue
            self._remove(info, ns, current)
            count += 1
        return count

    # -- watch -------------------------------------------------------------------------

    def watch(
        self,
        resource: str,
        namespace: str | None = None,
        *,
        resource_version: str | None = None,
        label_selector: str | LabelSelector | None = None,
        field_selector: str | FieldSelector | None = None,
        send_initial_events: bool | None = None,
    ) -> Watch:
        """Start a watch. Without a resourceVersion (or with "0") the current objects
        come first as ADDED events; with one, the changes after it (410 Expired when
        it is older than the history)."""
        info = self._info(resource)
        ls, fs = _selectors(info.key, label_selector, field_selector)
        start: int | None = None
        if resource_version not in (None, "", "0"):
            try:
                start = int(str(resource_version))
            except ValueError:
                raise bad_request(f'invalid resource version "{resource_version}"') from None
        with self._lock:
            self._maybe_reap()
            initial: builtins.list[Stored] = []
            if start is None:
                if send_initial_events is not False:
                    initial = [s for s in self._snapshot(info, namespace) if _matches(s.sel, ls, fs)]
                start = self._rv
            else:
                dropped = self._dropped(info)
                if start < dropped:
                    raise _expired(start, dropped)
            return Watch(self, info, namespace, ls, fs, start, initial, send_initial_events is True)

    def _dropped(self, info: ResourceInfo) -> int:
        """The newest resourceVersion of ``info``'s changes no longer in its history (0: none)."""
        history = self._histories.get(info.storage)
        return 0 if history is None else history.dropped

    def _events_after(self, storage: str, cursor: int, limit: int) -> builtins.list[Event]:
        # Lock held. The storage's changes after cursor, at most `limit`; 410 when some are gone.
        history = self._histories.get(storage)
        if history is None:
            return []
        if cursor < history.dropped:
            raise _expired(cursor, history.dropped)
        return history.after(cursor, limit)


class _History:
    """One storage's recent changes, oldest first (kube-apiserver's watch cache of one resource)."""

    __slots__ = ("dropped", "events", "start", "times")

    def __init__(self) -> None:
        self.events: builtins.list[Event | None] = []
        self.times: builtins.list[float] = []
        self.start = 0  # events before it are dropped (None)
        self.dropped = 0  # the resourceVersion of the newest dropped change

    def append(self, event: Event, now: float) -> None:
        self.events.append(event)
        self.times.append(now)

    def trim(self, keep: int, seconds: float, cap: int, now: float) -> None:
        """Drop the oldest beyond ``keep`` that are older than ``seconds``, and any beyond ``cap``."""
        events, start = self.events, self.start
        count = len(events) - start
        if count <= keep:
            return
        while count > keep and (count > cap or seconds <= 0 or now - self.times[start] > seconds):
            event = events[start]
            assert event is not None
            self.dropped = event.rv
            events[start] = None
            start += 1
            count -= 1
        if start > 1024 and start * 2 > len(events):
            del events[:start]
            del self.times[:start]
            start = 0
        self.start = start

    def after(self, cursor: int, limit: int | None = None) -> builtins.list[Event]:
        """The changes newer than resourceVersion ``cursor``, at most ``limit``."""
        i = bisect.bisect_right(self.events, cursor, lo=self.start, key=_event_rv)
        out = self.events[i:] if limit is None else self.events[i : i + limit]
        return out  # type: ignore[return-value]  # none is None past start


def _event_rv(event: Event | None) -> int:
    return event.rv if event is not None else 0


class ListPage:
    """One page of a list: items, the list's resourceVersion, the continue token (``""`` on the
    last page) and, when known, how many items are left after this page."""

    __slots__ = ("continue_token", "items", "remaining", "rv")

    def __init__(
        self, items: list[Stored], rv: int, continue_token: str = "", remaining: int | None = None
    ) -> None:
        self.items = items
        self.rv = rv
        self.continue_token = continue_token
        self.remaining = remaining


def _list_key(info: ResourceInfo, stored: Stored) -> tuple[str, str]:
    ns = stored.namespace if info.namespaced else ""
    return ns, stored.name


def _token_prefix(info: ResourceInfo, namespace: str | None) -> bool:
    """Whether the list's keys carry the namespace (a list of a namespaced kind in all namespaces)."""
    return info.namespaced and not namespace


def encode_continue(info: ResourceInfo, namespace: str | None, start: tuple[str, str], rv: int) -> str:
    """A continue token in the real server's encoding (base64url of ``{"v","rv","start"}``),
    so clients that look inside (few do) see what they expect."""
    key = f"{start[0]}/{start[1]}" if _token_prefix(info, namespace) else start[1]
    data = json.dumps({"v": "meta.k8s.io/v1", "rv": rv, "start": key}, separators=(",", ":"))
    return base64.urlsafe_b64encode(data.encode()).decode().rstrip("=")


def _bad_continue(why: str) -> BadRequestError:
    return bad_request(f"invalid continue token: continue key is not valid{why}")


def _go_base64_error(token: str) -> str | None:
    """Go's RawURLEncoding error for ``token`` (None when it decodes)."""
    for i, ch in enumerate(token):
        if not (ch.isascii() and (ch.isalnum() or ch in "-_")):
            return f"illegal base64 data at input byte {i}"
    if len(token) % 4 == 1:
        return f"illegal base64 data at input byte {len(token) - 1}"
    return None


def decode_continue(token: str, info: ResourceInfo, namespace: str | None) -> tuple[tuple[str, str], int]:
    """The start key and resourceVersion of a continue token; 400 with the real server's
    words when it is not one."""
    err = _go_base64_error(token)
    if err:
        raise _bad_continue(f": {err}")
    raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise _bad_continue(f": {exc}") from None
    if not isinstance(data, dict):
        raise _bad_continue(": json: cannot unmarshal into a continue token")
    version = data.get("v")
    if version != "meta.k8s.io/v1":
        raise _bad_continue(f": server does not recognize this encoded version {version or ''}")
    rv = data.get("rv")
    if not isinstance(rv, int) or isinstance(rv, bool) or rv == 0:
        raise _bad_continue(": incorrect encoded start resourceVersion (version meta.k8s.io/v1)")
    key = data.get("start")
    if not isinstance(key, str) or not key:
        raise _bad_continue(": encoded start key empty (version meta.k8s.io/v1)")
    # Path traversal out of the list's prefix is refused, as upstream does (path.Clean must not change it).
    parts = key.lstrip("/").split("/")
    if any(p in ("", ".", "..") for p in parts[:-1]) or parts[-1] in (".", ".."):
        raise _bad_continue(f": {key}")
    if _token_prefix(info, namespace):
        ns, _, name = key.lstrip("/").partition("/")
        return (ns, name), rv
    return ("" if not info.namespaced else namespace or "", key.lstrip("/")), rv


_CONTINUE_EXPIRED = (
    "The provided continue parameter is too old to display a consistent list result. You can start a "
    "new list without the continue parameter, or use the continue token in this response to retrieve "
    "the remainder of the results. Continuing with the provided token results in an inconsistent list "
    "- objects that were created, modified, or deleted between the time the first chunk was returned "
    "and now may show up in the list."
)


def _list_expired() -> GoneError:
    message = "The resourceVersion for the provided list is too old."
    return GoneError(message, status=status_body(410, "Expired", message))


def _continue_expired(info: ResourceInfo, namespace: str | None, start: tuple[str, str] | None) -> GoneError:
    """410 Expired for a token older than the history, with a token (rv -1: the current state)
    that goes on where the old one stopped."""
    status = status_body(410, "Expired", _CONTINUE_EXPIRED)
    if start is not None:
        status["metadata"] = {"continue": encode_continue(info, namespace, start, -1)}
    return GoneError(_CONTINUE_EXPIRED, status=status)


def _expired(rv: int, lowest: int) -> GoneError:
    """410 Expired for a watch from ``rv``; ``lowest``: the oldest resourceVersion a watch may still
    start from (the number kube-apiserver's watch cache puts in brackets, its oldest event's - 1)."""
    message = f"too old resource version: {rv} ({lowest})"
    return GoneError(message, status=status_body(410, "Expired", message))


class Watch:
    """A watch on one resource: :meth:`next` gives events one by one.

    Events are ``Event`` objects (``type``, ``stored``, ``rv``); when an object
    stops (starts) matching the selectors the watch gets DELETED (ADDED), as
    from the real server. ``next`` raises :class:`~podstatus.errors.GoneError`
    when the watch fell behind the store's history.
    """

    def __init__(
        self,
        store: Store,
        info: ResourceInfo,
        namespace: str | None,
        label_selector: LabelSelector | None,
        field_selector: FieldSelector | None,
        cursor: int,
        initial: list[Stored],
        initial_events_end: bool,
    ) -> None:
        self._store = store
        self.info = info
        self._namespace = namespace if info.namespaced else None
        self._ls = label_selector
        self._fs = field_selector
        self._cursor = cursor
        self._pending: list[Event] = [
            Event("ADDED", info.storage, namespace or "", s, None, s.rv) for s in initial
        ]
        self._pending.reverse()
        self._initial_left = len(initial)
        # With sendInitialEvents=true, the client wants to know when the initial ADDED events end.
        self.initial_events_end_pending = initial_events_end
        self._closed = False

    @property
    def resource_version(self) -> int:
        """The resourceVersion this watch has seen up to (for bookmarks)."""
        return self._cursor

    @property
    def in_initial_events(self) -> bool:
        """True while the synthetic ADDED events of the current state are still coming."""
        return self._initial_left > 0

    @property
    def closed(self) -> bool:
        return self._closed or self._store._closed

    def close(self) -> None:
        store = self._store
        with store._lock:
            self._closed = True
            store._changed.notify_all()

    def __enter__(self) -> Watch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __iter__(self) -> Iterator[Event]:
        while True:
            event = self.next(timeout=None)
            if event is None:
                return
            yield event

    def next(self, timeout: float | None = None) -> Event | None:
        """The next event, or ``None`` on timeout or when the watch or store closed."""
        deadline = None if timeout is None else time.monotonic() + timeout
        store = self._store
        while True:
            if self._pending:
                if self._initial_left:
                    self._initial_left -= 1
                event = self._pending.pop()
                strategy = self.info.strategy
                if strategy is not None and strategy.converts:
                    event = Event(event.type, event.resource, event.namespace,
                                  self.info.view(event.stored), event.old, event.rv)  # fmt: skip
                return event
            if self._closed or store._closed:
                return None
            with store._lock:
                while self._cursor >= store._rv and not self._closed and not store._closed:
                    remaining = None if deadline is None else deadline - time.monotonic()
                    if remaining is not None and remaining <= 0:
                        return None
                    store._changed.wait(remaining)
                if self._closed or store._closed:
                    return None
                batch = store._events_after(self.info.storage, self._cursor, 256)
                # All of this resource's changes up to now are in the batch: the newer versions
                # are other resources' (the watch waits for a change of the store's version).
                caught_up = store._rv if len(batch) < 256 else 0
            for event in batch:
                self._cursor = event.rv
                out = self._filter(event)
                if out is not None:
                    self._pending.append(out)
            self._cursor = max(self._cursor, caught_up)
            self._pending.reverse()

    def _filter(self, event: Event) -> Event | None:
        if event.resource != self.info.storage:
            return None
        if self._namespace and event.namespace != self._namespace:
            return None
        if self._ls is None and self._fs is None:
            return event
        now = _matches(event.stored.sel, self._ls, self._fs)
        before = (
            event.old is not None and event.type == "MODIFIED" and _matches(event.old.sel, self._ls, self._fs)
        )
        if event.type != "MODIFIED":
            return event if now else None
        if now and before:
            return event
        if now:
            return Event("ADDED", event.resource, event.namespace, event.stored, None, event.rv)
        if before and event.old is not None:
            # The object left the selection: the watcher sees it deleted, at this event's version.
            old = event.old
            obj = old.obj
            obj["metadata"]["resourceVersion"] = str(event.rv)
            gone = Stored(obj, _encode(obj), old.is_pod, event.rv)
            return Event("DELETED", event.resource, event.namespace, gone, old, event.rv)
        return None
