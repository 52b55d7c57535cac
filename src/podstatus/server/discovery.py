"""What clients ask the embedded API server for besides objects.

- Discovery: ``/version``, ``/api``, ``/api/v1``, ``/apis`` (the legacy form; clients
  that ask for aggregated discovery accept it when the Content-Type says so).
- OpenAPI (``/openapi/v3``, ``/openapi/v3/api/v1``, ``/openapi/v3/apis/GROUP/v1``,
  ``/openapi/v2``): Kubernetes' own documents for the served kinds. ``kubectl apply``
  reads them to learn that the server does field validation and how to merge lists
  (and fails without them); ``kubectl explain`` prints their descriptions.
- Server-side printing: the ``Table`` (meta.k8s.io/v1) that ``kubectl get`` asks
  for, with the columns and cell logic of the real server's printers.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import json
import time
from collections.abc import Callable
from datetime import UTC, datetime
from importlib import resources
from typing import Any

import msgspec

from . import reviews
from .storage.objects import Stored
from .storage.strategy import RESOURCES

__all__ = [
    "SERVER_VERSION",
    "api_resource_list",
    "api_versions",
    "human_duration",
    "openapi_v2_document",
    "openapi_v3_document",
    "openapi_v3_root",
    "table",
    "version_info",
]

SERVER_VERSION = "v1.37.0"

# -- discovery ------------------------------------------------------------------------


def version_info() -> dict[str, Any]:
    return {
        "major": "1",
        "minor": "37",
        "emulationMajor": "1",
        "emulationMinor": "37",
        "minCompatibilityMajor": "1",
        "minCompatibilityMinor": "36",
        "gitVersion": SERVER_VERSION,
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "go1.25.0",
        "compiler": "gc",
        "platform": "linux/amd64",
    }


def api_versions(server_address: str) -> dict[str, Any]:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
    }


def api_group_list() -> dict[str, Any]:
    from . import metricsapi

    # metrics.k8s.io is served here, as metrics-server's APIService adds it to kube-apiserver's list.
    groups = [_api_group(g) for g in sorted(_GROUPS)] + [metricsapi.api_group()]
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


_OBJECT_VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
# The verbs kube-apiserver lists for nodes/proxy (GET, POST, PUT, PATCH, DELETE relayed).
_PROXY_VERBS = ["create", "delete", "get", "patch", "update"]


def api_resource_list() -> dict[str, Any]:
    def sub(name: str, kind: str, namespaced: bool, verbs: list[str]) -> dict[str, Any]:
        return {"name": name, "singularName": "", "namespaced": namespaced, "kind": kind, "verbs": verbs}

    return {
        "kind": "APIResourceList",
        "groupVersion": "v1",
        "resources": [
            {
                "name": "namespaces",
                "singularName": "namespace",
                "namespaced": False,
                "kind": "Namespace",
                "verbs": ["create", "get", "list", "patch", "update", "watch"],
                "shortNames": ["ns"],
            },
            {
                "name": "nodes",
                "singularName": "node",
                "namespaced": False,
                "kind": "Node",
                "verbs": _OBJECT_VERBS,
                "shortNames": ["no"],
            },
            sub("nodes/proxy", "NodeProxyOptions", False, _PROXY_VERBS),
            sub("nodes/status", "Node", False, ["get", "patch", "update"]),
            {
                "name": "pods",
                "singularName": "pod",
                "namespaced": True,
                "kind": "Pod",
                "verbs": _OBJECT_VERBS,
                "shortNames": ["po"],
                "categories": ["all"],
            },
            sub("pods/attach", "PodAttachOptions", True, ["create", "get"]),
            sub("pods/binding", "Binding", True, ["create"]),
            # kubectl drain evicts only when this names its group and version (policy/v1).
            {**sub("pods/eviction", "Eviction", True, ["create"]), "group": "policy", "version": "v1"},
            sub("pods/exec", "PodExecOptions", True, ["create", "get"]),
            sub("pods/log", "Pod", True, ["get"]),
            sub("pods/portforward", "PodPortForwardOptions", True, ["create", "get"]),
            sub("pods/resize", "Pod", True, ["get", "patch", "update"]),
            sub("pods/status", "Pod", True, ["get", "patch", "update"]),
            {
                "name": "events",
                "singularName": "event",
                "namespaced": True,
                "kind": "Event",
                "verbs": _OBJECT_VERBS,
                "shortNames": ["ev"],
            },
        ],
    }


# -- OpenAPI ----------------------------------------------------------------------------
# Kubernetes' own documents (v3 per group-version, and v2), trimmed to what this server serves, in
# podstatus/data/openapi.json.gz (made by tests/apiserver/gen_openapi.py). kubectl explain prints
# their descriptions; kubectl apply reads their patch strategies and fieldValidation parameters.


@functools.cache
def _openapi() -> dict[str, Any]:
    raw = resources.files("podstatus").joinpath("data/openapi.json.gz").read_bytes()
    data: dict[str, Any] = json.loads(gzip.decompress(raw))
    for doc in (*data["v3"].values(), data["v2"]):
        # As kube-apiserver fills it in: the server's version.
        doc["info"] = {**doc["info"], "version": SERVER_VERSION}
    return data


@functools.cache
def _openapi_v3_bytes() -> dict[str, bytes]:
    return {key: msgspec.json.encode(doc) for key, doc in _openapi()["v3"].items()}


def openapi_v3_document_bytes(key: str = "api/v1") -> bytes | None:
    """``/openapi/v3/<key>`` (``api/v1``, ``apis/GROUP/VERSION``), encoded; None when not served."""
    return _openapi_v3_bytes().get(key)


def openapi_v3_document(key: str = "api/v1") -> dict[str, Any] | None:
    """The decoded document of :func:`openapi_v3_document_bytes`."""
    doc: dict[str, Any] | None = _openapi()["v3"].get(key)
    return doc


def openapi_v3_group_document_bytes(group: str, version: str) -> bytes | None:
    """``/openapi/v3/apis/GROUP/VERSION``, or None when not served."""
    return openapi_v3_document_bytes(f"apis/{group}/{version}")


def openapi_v2_document() -> dict[str, Any]:
    """``/openapi/v2`` (Swagger 2.0, JSON only)."""
    doc: dict[str, Any] = _openapi()["v2"]
    return doc


@functools.cache
def openapi_v3_root() -> dict[str, Any]:
    """``/openapi/v3``: each document's URL, with its hash as kube-apiserver gives it."""
    paths = {
        key: {"serverRelativeURL": f"/openapi/v3/{key}?hash={hashlib.sha512(doc).hexdigest().upper()}"}
        for key, doc in sorted(_openapi_v3_bytes().items())
    }
    return {"paths": paths}


# -- Table printing ---------------------------------------------------------------------


def human_duration(seconds: float) -> str:
    """``k8s.io/apimachinery/pkg/util/duration.HumanDuration``."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        rest = s % 60
        return f"{minutes}m" if rest == 0 else f"{minutes}m{rest}s"
    if minutes < 180:
        return f"{minutes}m"
    hours = s // 3600
    if hours < 8:
        rest = minutes % 60
        return f"{hours}h" if rest == 0 else f"{hours}h{rest}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        rest = hours % 24
        return f"{hours // 24}d" if rest == 0 else f"{hours // 24}d{rest}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        rest = (hours // 24) % 365
        return f"{hours // 24 // 365}y" if rest == 0 else f"{hours // 24 // 365}y{rest}d"
    return f"{hours // 24 // 365}y"


def _epoch(text: Any) -> float | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        return datetime.strptime(text[:19], "%Y-%m-%dT%H:%M:%S").replace(tzinfo=UTC).timestamp()
    except ValueError:
        return None


def _since(text: Any, now: float) -> str:
    ts = _epoch(text)
    return "<unknown>" if ts is None else human_duration(now - ts)


def _col(name: str, description: str, priority: int = 0, fmt: str = "") -> dict[str, Any]:
    return {"name": name, "type": "string", "format": fmt, "description": description, "priority": priority}


_NAME_COL = _col("Name", "Name must be unique within a namespace.", fmt="name")
_AGE_COL = _col(
    "Age", "CreationTimestamp is a timestamp representing the server time when this object was created."
)

_COLUMNS: dict[str, list[dict[str, Any]]] = {
    "pods": [
        _NAME_COL,
        _col("Ready", "The aggregate readiness state of this pod for accepting traffic."),
        _col("Status", "The aggregate status of the containers in this pod."),
        _col(
            "Restarts",
            "The number of times the containers in this pod have been restarted and when the last "
            "container in this pod has restarted.",
        ),
        _AGE_COL,
        _col("IP", "IP address allocated to the pod. Routable at least within the cluster.", 1),
        _col("Node", "NodeName is a request to schedule this pod onto a specific node.", 1),
        _col("Nominated Node", "nominatedNodeName is set when this pod preempts other pods on the node.", 1),
        _col("Readiness Gates", "If specified, all readiness gates will be evaluated for pod readiness.", 1),
    ],
    "nodes": [
        _NAME_COL,
        _col("Status", "The status of the node"),
        _col("Roles", "The roles of the node"),
        _AGE_COL,
        _col("Version", "Kubelet Version reported by the node."),
        _col(
            "Internal-IP",
            "List of addresses reachable to the node. Queried from cloud provider, if available.",
            1,
        ),
        _col(
            "External-IP",
            "List of addresses reachable to the node. Queried from cloud provider, if available.",
            1,
        ),
        _col(
            "OS-Image",
            "OS Image reported by the node from /etc/os-release (e.g. Debian GNU/Linux 7 (wheezy)).",
            1,
        ),
        _col(
            "Kernel-Version",
            "Kernel Version reported by the node from 'uname -r' (e.g. 3.16.0-0.bpo.4-amd64).",
            1,
        ),
        _col("Container-Runtime", "ContainerRuntime Version reported by the node.", 1),
    ],
    "namespaces": [
        _NAME_COL,
        _col("Status", "The status of the namespace"),
        _AGE_COL,
    ],
}


def _terminated_reason(term: dict[str, Any], prefix: str = "") -> str:
    if term.get("reason"):
        return prefix + str(term["reason"])
    if term.get("signal"):
        return f"{prefix}Signal:{term['signal']}"
    return f"{prefix}ExitCode:{term.get('exitCode', 0)}"


def pod_cells(pod: dict[str, Any], now: float) -> list[Any]:
    """The cells of the real server's pod printer (``printPod``)."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    conditions = status.get("conditions") or []
    restarts = 0
    sidecar_restarts = 0
    last_restart: float | None = None
    sidecar_last_restart: float | None = None
    total = len(spec.get("containers") or [])
    ready = 0
    phase = status.get("phase") or ""
    reason = status.get("reason") or phase
    for cond in conditions:
        if cond.get("type") == "PodScheduled" and cond.get("reason") == "SchedulingGated":
            reason = "SchedulingGated"
    init_specs = {c.get("name"): c for c in spec.get("initContainers") or []}
    total += sum(1 for c in init_specs.values() if c.get("restartPolicy") == "Always")

    def later(current: float | None, cs: dict[str, Any]) -> float | None:
        term = (cs.get("lastState") or {}).get("terminated")
        ts = _epoch(term.get("finishedAt")) if isinstance(term, dict) else None
        if ts is not None and (current is None or ts > current):
            return ts
        return current

    initializing = False
    init_statuses = status.get("initContainerStatuses") or []
    for i, cs in enumerate(init_statuses):
        restarts += int(cs.get("restartCount") or 0)
        last_restart = later(last_restart, cs)
        sidecar = (init_specs.get(cs.get("name")) or {}).get("restartPolicy") == "Always"
        if sidecar:
            sidecar_restarts += int(cs.get("restartCount") or 0)
            sidecar_last_restart = later(sidecar_last_restart, cs)
        state = cs.get("state") or {}
        term = state.get("terminated")
        waiting = state.get("waiting")
        if isinstance(term, dict) and term.get("exitCode", 0) == 0:
            continue
        if sidecar and cs.get("started"):
            if cs.get("ready"):
                ready += 1
            continue
        if isinstance(term, dict):
            reason = _terminated_reason(term, "Init:")
        elif isinstance(waiting, dict) and waiting.get("reason") and waiting["reason"] != "PodInitializing":
            reason = "Init:" + waiting["reason"]
        else:
            reason = f"Init:{i}/{len(init_specs)}"
        initializing = True
        break
    initialized = any(c.get("type") == "Initialized" and c.get("status") == "True" for c in conditions)
    if not initializing or initialized:
        restarts = sidecar_restarts
        last_restart = sidecar_last_restart
        running = False
        for cs in reversed(status.get("containerStatuses") or []):
            restarts += int(cs.get("restartCount") or 0)
            last_restart = later(last_restart, cs)
            state = cs.get("state") or {}
            waiting, term = state.get("waiting"), state.get("terminated")
            if isinstance(waiting, dict) and waiting.get("reason"):
                reason = waiting["reason"]
            elif isinstance(term, dict):
                reason = _terminated_reason(term)
            elif cs.get("ready") and isinstance(state.get("running"), dict):
                running = True
                ready += 1
        if reason == "Completed" and running:
            has_ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
            reason = "Running" if has_ready else "NotReady"
    if meta.get("deletionTimestamp"):
        if status.get("reason") == "NodeLost":
            reason = "Unknown"
        elif phase not in ("Succeeded", "Failed"):
            reason = "Terminating"
    restarts_text = str(restarts)
    if restarts and last_restart is not None:
        restarts_text = f"{restarts} ({human_duration(now - last_restart)} ago)"
    pod_ips = status.get("podIPs") or []
    pod_ip = (pod_ips[0].get("ip") if pod_ips else "") or "<none>"
    gates = spec.get("readinessGates") or []
    gates_text = "<none>"
    if gates:
        by_type = {c.get("type"): c.get("status") for c in reversed(conditions)}
        passed = sum(1 for g in gates if by_type.get(g.get("conditionType")) == "True")
        gates_text = f"{passed}/{len(gates)}"
    return [
        meta.get("name", ""),
        f"{ready}/{total}",
        reason,
        restarts_text,
        _since(meta.get("creationTimestamp"), now),
        pod_ip,
        spec.get("nodeName") or "<none>",
        status.get("nominatedNodeName") or "<none>",
        gates_text,
    ]


def node_cells(node: dict[str, Any], now: float) -> list[Any]:
    meta = node.get("metadata") or {}
    spec = node.get("spec") or {}
    status = node.get("status") or {}
    states: list[str] = []
    for cond in status.get("conditions") or []:
        if cond.get("type") == "Ready":
            states.append("Ready" if cond.get("status") == "True" else "NotReady")
    if not states:
        states.append("Unknown")
    if spec.get("unschedulable"):
        states.append("SchedulingDisabled")
    roles: set[str] = set()
    for key, value in (meta.get("labels") or {}).items():
        if key.startswith("node-role.kubernetes.io/"):
            roles.add(key.partition("/")[2])
        elif key == "kubernetes.io/role" and value:
            roles.add(value)
    roles.discard("")
    info = status.get("nodeInfo") or {}

    def address(kind: str) -> str:
        for a in status.get("addresses") or []:
            if a.get("type") == kind:
                return str(a.get("address") or "<none>")
        return "<none>"

    return [
        meta.get("name", ""),
        ",".join(states),
        ",".join(sorted(roles)) or "<none>",
        _since(meta.get("creationTimestamp"), now),
        info.get("kubeletVersion", ""),
        address("InternalIP"),
        address("ExternalIP"),
        info.get("osImage") or "<unknown>",
        info.get("kernelVersion") or "<unknown>",
        info.get("containerRuntimeVersion") or "<unknown>",
    ]


def namespace_cells(ns: dict[str, Any], now: float) -> list[Any]:
    meta = ns.get("metadata") or {}
    return [
        meta.get("name", ""),
        (ns.get("status") or {}).get("phase", ""),
        _since(meta.get("creationTimestamp"), now),
    ]


_CELLS: dict[str, Callable[[dict[str, Any], float], list[Any]]] = {
    "pods": pod_cells,
    "nodes": node_cells,
    "namespaces": namespace_cells,
}


def has_table(resource: str) -> bool:
    """Whether the server prints ``resource`` as a Table (else kubectl prints names only)."""
    return resource in _CELLS


def table(
    resource: str,
    items: list[Stored],
    resource_version: int | str,
    *,
    include_object: str = "PartialObjectMetadata",
    now: float | None = None,
    with_columns: bool = True,
) -> dict[str, Any]:
    """A ``Table`` of ``items`` as the real server prints them for ``kubectl get``."""
    when = time.time() if now is None else now
    cells = _CELLS[resource]
    rows: list[dict[str, Any]] = []
    for item in items:
        obj = item.obj
        row: dict[str, Any] = {"cells": cells(obj, when)}
        if include_object == "Object":
            row["object"] = msgspec.Raw(item.raw)
        elif include_object != "None":
            row["object"] = {
                "kind": "PartialObjectMetadata",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": obj.get("metadata") or {},
            }
        rows.append(row)
    _ = RESOURCES[resource]
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": str(resource_version)},
        "columnDefinitions": _COLUMNS[resource] if with_columns else [],
        "rows": rows,
    }


# -- the API groups beside the core one (coordination.k8s.io, events.k8s.io) ------------------

_GROUPS: dict[str, list[dict[str, Any]]] = {
    "coordination.k8s.io": [
        {
            "name": "leases",
            "singularName": "lease",
            "namespaced": True,
            "kind": "Lease",
            "verbs": _OBJECT_VERBS,
        }
    ],
    "events.k8s.io": [
        {
            "name": "events",
            "singularName": "event",
            "namespaced": True,
            "kind": "Event",
            "verbs": _OBJECT_VERBS,
            "shortNames": ["ev"],
        }
    ],
}


# kubectl auth whoami / can-i find their reviews here.
_GROUPS.update(reviews.GROUPS)


def _api_group(group: str) -> dict[str, Any]:
    version = {"groupVersion": f"{group}/v1", "version": "v1"}
    return {"name": group, "versions": [version], "preferredVersion": version}


def api_group(group: str) -> dict[str, Any] | None:
    """``/apis/GROUP``: the APIGroup, or None for a group this server does not serve."""
    if group not in _GROUPS:
        return None
    return {"kind": "APIGroup", "apiVersion": "v1", **_api_group(group)}


def group_resource_list(group: str, version: str) -> dict[str, Any] | None:
    """``/apis/GROUP/VERSION``: the APIResourceList, or None when not served."""
    if group not in _GROUPS or version != "v1":
        return None
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{group}/{version}",
        "resources": _GROUPS[group],
    }


# -- Tables of events and leases (the real server's printEvent and printLease) --------------------


def _micro_since(text: Any, now: float) -> str:
    return _since(text, now)


def event_cells(event: dict[str, Any], now: float) -> list[Any]:
    """The cells of ``printEvent`` (wide, as the server prints for kubectl) of a core/v1 Event."""
    first = _since(event.get("firstTimestamp"), now)
    if not event.get("firstTimestamp"):
        first = _micro_since(event.get("eventTime"), now)
    last = _since(event.get("lastTimestamp"), now) if event.get("lastTimestamp") else first
    count = event.get("count") or 0
    series = event.get("series")
    if isinstance(series, dict):
        last = _micro_since(series.get("lastObservedTime"), now)
        count = series.get("count") or 0
    elif not count:
        count = 1  # a singleton event of the new API has no count
    involved = event.get("involvedObject") or {}
    kind = str(involved.get("kind") or "").lower()
    target = f"{kind}/{involved['name']}" if involved.get("name") else kind
    source = event.get("source") or {}
    component = source.get("component") or event.get("reportingComponent") or ""
    instance = source.get("host") or event.get("reportingInstance") or ""
    return [
        last,
        event.get("type") or "",
        event.get("reason") or "",
        target,
        involved.get("fieldPath") or "",
        f"{component}, {instance}" if instance else component,
        str(event.get("message") or "").strip(),
        first,
        int(count),
        (event.get("metadata") or {}).get("name", ""),
    ]


def _events_v1_cells(event: dict[str, Any], now: float) -> list[Any]:
    from .registry.events import v1_event_to_core

    return event_cells(v1_event_to_core(event), now)


def lease_cells(lease: dict[str, Any], now: float) -> list[Any]:
    meta = lease.get("metadata") or {}
    return [
        meta.get("name", ""),
        (lease.get("spec") or {}).get("holderIdentity") or "",
        _since(meta.get("creationTimestamp"), now),
    ]


_EVENT_COLUMNS = [
    _col("Last Seen", "The time at which the most recent occurrence of this event was recorded."),
    _col("Type", "Type of this event (Normal, Warning), new types could be added in the future"),
    _col("Reason", "This should be a short, machine understandable string that gives the reason for the "
         "transition into the object's current status."),
    _col("Object", "The object that this event is about."),
    _col("Subobject", "The field of the object the event is about (for example a container).", 1),
    _col("Source", "The component reporting this event.", 1),
    _col("Message", "A human-readable description of the status of this operation."),
    _col("First Seen", "The time at which the event was first recorded.", 1),
    _col("Count", "The number of times this event has occurred.", 1),
    _col("Name", "Name must be unique within a namespace.", 1, "name"),
]  # fmt: skip
_COLUMNS["events"] = _EVENT_COLUMNS
_COLUMNS["events.events.k8s.io"] = _EVENT_COLUMNS
_COLUMNS["leases.coordination.k8s.io"] = [
    _NAME_COL,
    _col("Holder", "The identity of the holder of the current lease."),
    _AGE_COL,
]
_CELLS["events"] = event_cells
_CELLS["events.events.k8s.io"] = _events_v1_cells
_CELLS["leases.coordination.k8s.io"] = lease_cells
