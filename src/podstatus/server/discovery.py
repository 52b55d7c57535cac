"""What clients ask the embedded API server for besides objects.

- Discovery: ``/version``, ``/api``, ``/api/v1``, ``/apis`` (the legacy form; clients
  that ask for aggregated discovery accept it when the Content-Type says so).
- OpenAPI v3 for core/v1 (``/openapi/v3`` and ``/openapi/v3/api/v1``): ``kubectl
  apply`` reads it to learn that the server does field validation and how to merge
  lists, and fails without it. Schemas are permissive where detail buys nothing.
- Server-side printing: the ``Table`` (meta.k8s.io/v1) that ``kubectl get`` asks
  for, with the columns and cell logic of the real server's printers.
"""

from __future__ import annotations

import functools
import hashlib
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import msgspec

from . import schema
from .store import RESOURCES, Stored

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
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": [_api_group(g) for g in sorted(_GROUPS)]}


_OBJECT_VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]


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
            sub("pods/binding", "Binding", True, ["create"]),
            # kubectl drain evicts only when this names its group and version (policy/v1).
            {**sub("pods/eviction", "Eviction", True, ["create"]), "group": "policy", "version": "v1"},
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


# -- OpenAPI v3 -----------------------------------------------------------------------

_META = "io.k8s.apimachinery.pkg.apis.meta.v1."
_CORE = "io.k8s.api.core.v1."
_PATCH_TYPES = (
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
    "application/apply-patch+yaml",
)


def _ref(name: str) -> dict[str, Any]:
    return {"$ref": f"#/components/schemas/{name}"}


def _obj(properties: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    if properties:
        schema["properties"] = properties
    schema.update(extra)
    return schema


def _merge_list(item: str, key: str) -> dict[str, Any]:
    return {
        "type": "array",
        "items": {"default": {}, "allOf": [_ref(item)]},
        "x-kubernetes-list-map-keys": [key],
        "x-kubernetes-list-type": "map",
        "x-kubernetes-patch-merge-key": key,
        "x-kubernetes-patch-strategy": "merge",
    }


def _embedded(name: str) -> dict[str, Any]:
    return {"default": {}, "allOf": [_ref(name)]}


_STR: dict[str, Any] = {"type": "string"}
_STR_MAP: dict[str, Any] = {"type": "object", "additionalProperties": {"type": "string", "default": ""}}


def _gvk(kind: str, group: str = "", version: str = "v1") -> list[dict[str, str]]:
    return [{"group": group, "kind": kind, "version": version}]


def _top(kind: str, spec: str | None, status: str | None) -> dict[str, Any]:
    props: dict[str, Any] = {"apiVersion": _STR, "kind": _STR, "metadata": _embedded(_META + "ObjectMeta")}
    if spec:
        props["spec"] = _embedded(spec)
    if status:
        props["status"] = _embedded(status)
    return {
        "description": f"{kind} (served by the podstatus embedded API server).",
        "type": "object",
        "properties": props,
        "x-kubernetes-group-version-kind": _gvk(kind),
    }


def _list(kind: str, item: str) -> dict[str, Any]:
    return {
        "type": "object",
        "required": ["items"],
        "properties": {
            "apiVersion": _STR,
            "kind": _STR,
            "items": {"type": "array", "items": _embedded(item)},
            "metadata": _embedded(_META + "ListMeta"),
        },
        "x-kubernetes-group-version-kind": _gvk(kind + "List"),
    }


def _schemas() -> dict[str, Any]:
    container = _obj(
        {
            "name": _STR,
            "image": _STR,
            "env": _merge_list(_CORE + "EnvVar", "name"),
            "ports": _merge_list(_CORE + "ContainerPort", "containerPort"),
            "volumeMounts": _merge_list(_CORE + "VolumeMount", "mountPath"),
            "volumeDevices": _merge_list(_CORE + "VolumeDevice", "devicePath"),
        },
        required=["name"],
    )
    return {
        _CORE + "Pod": _top("Pod", _CORE + "PodSpec", _CORE + "PodStatus"),
        _CORE + "PodList": _list("Pod", _CORE + "Pod"),
        _CORE + "PodSpec": _obj(
            {
                "containers": _merge_list(_CORE + "Container", "name"),
                "initContainers": _merge_list(_CORE + "Container", "name"),
                "ephemeralContainers": _merge_list(_CORE + "EphemeralContainer", "name"),
                "volumes": {
                    **_merge_list(_CORE + "Volume", "name"),
                    "x-kubernetes-patch-strategy": "merge,retainKeys",
                },
                "imagePullSecrets": _merge_list(_CORE + "LocalObjectReference", "name"),
                "hostAliases": _merge_list(_CORE + "HostAlias", "ip"),
                "readinessGates": {"type": "array", "items": _embedded(_CORE + "PodReadinessGate")},
                "nodeName": _STR,
                "restartPolicy": _STR,
            }
        ),
        _CORE + "PodStatus": _obj(
            {
                "phase": _STR,
                "conditions": _merge_list(_CORE + "PodCondition", "type"),
                "podIPs": _merge_list(_CORE + "PodIP", "ip"),
                "hostIPs": _merge_list(_CORE + "HostIP", "ip"),
                "containerStatuses": {"type": "array", "items": _embedded(_CORE + "ContainerStatus")},
                "initContainerStatuses": {"type": "array", "items": _embedded(_CORE + "ContainerStatus")},
            }
        ),
        _CORE + "Container": container,
        _CORE + "EphemeralContainer": container,
        _CORE + "EnvVar": _obj({"name": _STR}, required=["name"]),
        _CORE + "ContainerPort": _obj({"containerPort": {"type": "integer", "format": "int32"}}),
        _CORE + "VolumeMount": _obj({"mountPath": _STR, "name": _STR}),
        _CORE + "VolumeDevice": _obj({"devicePath": _STR, "name": _STR}),
        _CORE + "Volume": _obj({"name": _STR}, required=["name"]),
        _CORE + "LocalObjectReference": _obj({"name": _STR}),
        _CORE + "HostAlias": _obj({"ip": _STR}),
        _CORE + "PodReadinessGate": _obj({"conditionType": _STR}, required=["conditionType"]),
        _CORE + "PodCondition": _obj({"type": _STR, "status": _STR}, required=["type", "status"]),
        _CORE + "PodIP": _obj({"ip": _STR}, required=["ip"]),
        _CORE + "HostIP": _obj({"ip": _STR}, required=["ip"]),
        _CORE + "ContainerStatus": _obj({"name": _STR, "ready": {"type": "boolean"}}),
        _CORE + "Node": _top("Node", _CORE + "NodeSpec", _CORE + "NodeStatus"),
        _CORE + "NodeList": _list("Node", _CORE + "Node"),
        _CORE + "NodeSpec": _obj({"podCIDR": _STR, "unschedulable": {"type": "boolean"}}),
        _CORE + "NodeStatus": _obj(
            {
                "conditions": _merge_list(_CORE + "NodeCondition", "type"),
                "addresses": _merge_list(_CORE + "NodeAddress", "type"),
            }
        ),
        _CORE + "NodeCondition": _obj({"type": _STR, "status": _STR}, required=["type", "status"]),
        _CORE + "NodeAddress": _obj({"type": _STR, "address": _STR}, required=["type", "address"]),
        _CORE + "Event": _top("Event", None, None),
        _CORE + "EventList": _list("Event", _CORE + "Event"),
        _CORE + "Namespace": _top("Namespace", None, None),
        _CORE + "NamespaceList": _list("Namespace", _CORE + "Namespace"),
        _CORE + "Binding": {
            "type": "object",
            "required": ["target"],
            "properties": {
                "apiVersion": _STR,
                "kind": _STR,
                "metadata": _embedded(_META + "ObjectMeta"),
                "target": _obj({"name": _STR}),
            },
            "x-kubernetes-group-version-kind": _gvk("Binding"),
        },
        _META + "ObjectMeta": _obj(
            {
                "name": _STR,
                "generateName": _STR,
                "namespace": _STR,
                "uid": _STR,
                "resourceVersion": _STR,
                "generation": {"type": "integer", "format": "int64"},
                "creationTimestamp": {"type": "string", "format": "date-time"},
                "deletionTimestamp": {"type": "string", "format": "date-time"},
                "deletionGracePeriodSeconds": {"type": "integer", "format": "int64"},
                "labels": _STR_MAP,
                "annotations": _STR_MAP,
                "finalizers": {
                    "type": "array",
                    "items": {"type": "string", "default": ""},
                    "x-kubernetes-list-type": "set",
                    "x-kubernetes-patch-strategy": "merge",
                },
                "ownerReferences": _merge_list(_META + "OwnerReference", "uid"),
                "managedFields": {"type": "array", "items": _embedded(_META + "ManagedFieldsEntry")},
            }
        ),
        _META + "OwnerReference": _obj(
            {"apiVersion": _STR, "kind": _STR, "name": _STR, "uid": _STR},
            required=["apiVersion", "kind", "name", "uid"],
        ),
        _META + "ManagedFieldsEntry": _obj(),
        _META + "ListMeta": _obj(
            {"resourceVersion": _STR, "continue": _STR, "remainingItemCount": {"type": "integer"}}
        ),
        _META + "Status": {
            "type": "object",
            "properties": {
                "apiVersion": _STR,
                "kind": _STR,
                "code": {"type": "integer", "format": "int32"},
                "details": _obj(),
                "message": _STR,
                "metadata": _embedded(_META + "ListMeta"),
                "reason": _STR,
                "status": _STR,
            },
            "x-kubernetes-group-version-kind": _gvk("Status"),
        },
        _META + "DeleteOptions": _obj(
            {
                "gracePeriodSeconds": {"type": "integer", "format": "int64"},
                "preconditions": _obj({"uid": _STR, "resourceVersion": _STR}),
                "propagationPolicy": _STR,
            },
            **{"x-kubernetes-group-version-kind": _gvk("DeleteOptions")},
        ),
        _META + "Patch": {"type": "object"},
        _META + "WatchEvent": {
            "type": "object",
            "required": ["type", "object"],
            "properties": {"type": _STR, "object": _obj()},
        },
    }


def _param(name: str, type_: str = "string") -> dict[str, Any]:
    return {"name": name, "in": "query", "schema": {"type": type_, "uniqueItems": True}}


_WRITE_PARAMS = [_param("dryRun"), _param("fieldManager"), _param("fieldValidation")]
_LIST_PARAMS = [
    _param(n, t)
    for n, t in (
        ("allowWatchBookmarks", "boolean"),
        ("continue", "string"),
        ("fieldSelector", "string"),
        ("labelSelector", "string"),
        ("limit", "integer"),
        ("resourceVersion", "string"),
        ("resourceVersionMatch", "string"),
        ("sendInitialEvents", "boolean"),
        ("timeoutSeconds", "integer"),
        ("watch", "boolean"),
    )
]


def _content(schema: dict[str, Any], types: tuple[str, ...] = ("application/json",)) -> dict[str, Any]:
    return {t: {"schema": schema} for t in types}


def _op(kind: str, action: str, schema: str, *, params: list[dict[str, Any]] | None = None,
        body: dict[str, Any] | None = None, code: str = "200") -> dict[str, Any]:  # fmt: skip
    op: dict[str, Any] = {
        "tags": ["core_v1"],
        "operationId": f"{action}CoreV1{kind}",
        "responses": {
            code: {"description": "OK", "content": _content(_ref(schema))},
            "401": {"description": "Unauthorized"},
        },
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": {"group": "", "version": "v1", "kind": kind},
    }
    if params:
        op["parameters"] = params
    if body is not None:
        op["requestBody"] = body
    return op


def _item_path(kind: str, *, writable: bool = True, deletable: bool = True) -> dict[str, Any]:
    schema = _CORE + kind
    path: dict[str, Any] = {"get": _op(kind, "get", schema)}
    if writable:
        path["put"] = _op(
            kind,
            "put",
            schema,
            params=_WRITE_PARAMS,
            body={"content": _content(_ref(schema)), "required": True},
        )
        path["patch"] = _op(
            kind,
            "patch",
            schema,
            params=[*_WRITE_PARAMS, _param("force", "boolean")],
            body={"content": _content(_ref(_META + "Patch"), _PATCH_TYPES), "required": True},
        )
    if deletable:
        path["delete"] = _op(
            kind,
            "delete",
            schema,
            params=[_param("dryRun"), _param("gracePeriodSeconds", "integer"), _param("propagationPolicy")],
            body={"content": _content(_ref(_META + "DeleteOptions"))},
        )
    path["parameters"] = [
        {"name": "name", "in": "path", "required": True, "schema": {"type": "string", "uniqueItems": True}}
    ]
    return path


def _collection_path(kind: str, *, creatable: bool = True) -> dict[str, Any]:
    path: dict[str, Any] = {"get": _op(kind, "list", _CORE + kind + "List", params=_LIST_PARAMS)}
    if creatable:
        path["post"] = _op(
            kind,
            "post",
            _CORE + kind,
            params=_WRITE_PARAMS,
            body={"content": _content(_ref(_CORE + kind)), "required": True},
            code="201",
        )
    return path


def _ns_param(path: dict[str, Any]) -> dict[str, Any]:
    ns = {
        "name": "namespace",
        "in": "path",
        "required": True,
        "schema": {"type": "string", "uniqueItems": True},
    }
    path["parameters"] = [*path.get("parameters", []), ns]
    return path


def openapi_v3_document() -> dict[str, Any]:
    """The OpenAPI v3 document of core/v1 (``/openapi/v3/api/v1``)."""
    paths = {
        "/api/v1/namespaces": _collection_path("Namespace"),
        "/api/v1/namespaces/{name}": _item_path("Namespace", deletable=False),
        "/api/v1/namespaces/{namespace}/pods": _ns_param(_collection_path("Pod")),
        "/api/v1/namespaces/{namespace}/pods/{name}": _ns_param(_item_path("Pod")),
        "/api/v1/namespaces/{namespace}/pods/{name}/status": _ns_param(_item_path("Pod", deletable=False)),
        "/api/v1/namespaces/{namespace}/pods/{name}/resize": _ns_param(_item_path("Pod", deletable=False)),
        "/api/v1/nodes": _collection_path("Node"),
        "/api/v1/nodes/{name}": _item_path("Node"),
        "/api/v1/nodes/{name}/status": _item_path("Node", deletable=False),
        "/api/v1/pods": _collection_path("Pod", creatable=False),
        "/api/v1/events": _collection_path("Event", creatable=False),
        "/api/v1/namespaces/{namespace}/events": _ns_param(_collection_path("Event")),
        "/api/v1/namespaces/{namespace}/events/{name}": _ns_param(_item_path("Event")),
    }
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": SERVER_VERSION},
        "paths": paths,
        "components": {"schemas": _schemas()},
    }


_DOC: bytes | None = None


def openapi_v3_document_bytes() -> bytes:
    """The encoded document (built once)."""
    global _DOC
    if _DOC is None:
        _DOC = msgspec.json.encode(openapi_v3_document())
    return _DOC


@functools.cache
def openapi_v2_document() -> dict[str, Any]:
    """``/openapi/v2`` (Swagger 2.0, JSON only): the full definitions of the served kinds from
    the schema the server validates with (see :mod:`.schema`), and their paths."""
    paths: dict[str, Any] = {}
    for path, item in openapi_v3_document()["paths"].items():
        ops: dict[str, Any] = {}
        for method, op in item.items():
            if method == "parameters":
                ops[method] = [_v2_param(p) for p in op]
                continue
            v2 = {k: v for k, v in op.items() if k not in ("requestBody", "responses", "parameters")}
            v2["consumes"] = sorted((op.get("requestBody") or {}).get("content") or {}) or ["*/*"]
            v2["produces"] = ["application/json"]
            v2["schemes"] = ["https"]
            params = [_v2_param(p) for p in op.get("parameters", [])]
            body = op.get("requestBody")
            if body:
                ref = next(iter(body["content"].values()))["schema"]["$ref"].rsplit("/", 1)[-1]
                params.append(
                    {"name": "body", "in": "body", "required": bool(body.get("required")),
                     "schema": {"$ref": f"#/definitions/{ref}"}}
                )  # fmt: skip
            if params:
                v2["parameters"] = params
            v2["responses"] = {code: _v2_response(resp) for code, resp in op["responses"].items()}
            ops[method] = v2
        paths[path] = ops
    return {
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": SERVER_VERSION},
        "paths": paths,
        "definitions": _v2_definitions(),
        "securityDefinitions": {"BearerToken": {"type": "apiKey", "name": "authorization", "in": "header"}},
        "security": [{"BearerToken": []}],
    }


def _v2_definitions() -> dict[str, Any]:
    # The full types from the schema; lists, Status, Patch... from the v3 components.
    defs = schema.swagger_definitions()
    v3 = msgspec.json.encode(_schemas()).replace(b"#/components/schemas/", b"#/definitions/")
    for name, definition in msgspec.json.decode(v3).items():
        defs.setdefault(name, definition)
    return defs


def _v2_param(param: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in param.items() if k != "schema"}
    out.update(param.get("schema") or {"type": "string"})
    out.pop("uniqueItems", None)
    out["uniqueItems"] = True
    return out


def _v2_response(resp: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"description": resp.get("description", "")}
    content = resp.get("content")
    if content:
        ref = next(iter(content.values()))["schema"]["$ref"].rsplit("/", 1)[-1]
        out["schema"] = {"$ref": f"#/definitions/{ref}"}
    return out


def openapi_v3_hash() -> str:
    return hashlib.sha512(openapi_v3_document_bytes()).hexdigest().upper()


def openapi_v3_root() -> dict[str, Any]:
    paths = {"api/v1": {"serverRelativeURL": f"/openapi/v3/api/v1?hash={openapi_v3_hash()}"}}
    paths.update(_openapi_group_paths())
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


# OpenAPI v3 of the groups: enough for kubectl (apply, explain) to know the kinds and verbs.
_COORD = "io.k8s.api.coordination.v1."
_EVENTS = "io.k8s.api.events.v1."


def _group_op(tag: str, kind: str, action: str, schema: str, group: str, **kw: Any) -> dict[str, Any]:
    op = _op(kind, action, schema, **kw)
    op["tags"] = [tag]
    op["operationId"] = op["operationId"].replace("CoreV1", tag.title().replace("_", ""))
    op["x-kubernetes-group-version-kind"] = {"group": group, "version": "v1", "kind": kind}
    return op


def _group_paths(group: str, plural: str, kind: str, prefix: str) -> dict[str, Any]:
    tag = group.split(".")[0] + "_v1"
    schema = prefix + kind
    base = f"/apis/{group}/v1/namespaces/{{namespace}}/{plural}"
    name_param = {"name": "name", "in": "path", "required": True, "schema": {"type": "string"}}
    ns_param = {"name": "namespace", "in": "path", "required": True, "schema": {"type": "string"}}
    body = {"content": _content(_ref(schema)), "required": True}
    patch_body = {"content": _content(_ref(_META + "Patch"), _PATCH_TYPES), "required": True}
    return {
        f"/apis/{group}/v1/{plural}": {
            "get": _group_op(tag, kind, "list", schema + "List", group, params=_LIST_PARAMS)
        },
        base: {
            "get": _group_op(tag, kind, "list", schema + "List", group, params=_LIST_PARAMS),
            "post": _group_op(tag, kind, "post", schema, group, params=_WRITE_PARAMS, body=body, code="201"),
            "parameters": [ns_param],
        },
        base + "/{name}": {
            "get": _group_op(tag, kind, "get", schema, group),
            "put": _group_op(tag, kind, "put", schema, group, params=_WRITE_PARAMS, body=body),
            "patch": _group_op(tag, kind, "patch", schema, group, params=_WRITE_PARAMS, body=patch_body),
            "delete": _group_op(tag, kind, "delete", schema, group),
            "parameters": [name_param, ns_param],
        },
    }


def _group_top(kind: str, group: str, fields: dict[str, Any]) -> dict[str, Any]:
    props: dict[str, Any] = {"apiVersion": _STR, "kind": _STR, "metadata": _embedded(_META + "ObjectMeta")}
    props.update(fields)
    return {
        "description": f"{kind} (served by the podstatus embedded API server).",
        "type": "object",
        "properties": props,
        "x-kubernetes-group-version-kind": _gvk(kind, group),
    }


def _group_list(kind: str, group: str, item: str) -> dict[str, Any]:
    schema = _list(kind, item)
    schema["x-kubernetes-group-version-kind"] = _gvk(kind + "List", group)
    return schema


def _event_v1_fields(micro: dict[str, Any], ref: dict[str, Any]) -> dict[str, Any]:
    int32 = {"type": "integer", "format": "int32"}
    return {
        "eventTime": micro,
        "reportingController": _STR,
        "reportingInstance": _STR,
        "action": _STR,
        "reason": _STR,
        "regarding": ref,
        "related": ref,
        "note": _STR,
        "type": _STR,
        "deprecatedSource": _obj({"component": _STR, "host": _STR}),
        "deprecatedFirstTimestamp": micro,
        "deprecatedLastTimestamp": micro,
        "deprecatedCount": int32,
        "series": _obj({"count": int32, "lastObservedTime": micro}),
    }


def _group_schemas(group: str) -> dict[str, Any]:
    common = {k: v for k, v in _schemas().items() if k.startswith(_META)}
    micro = {"type": "string", "format": "date-time"}
    if group == "coordination.k8s.io":
        spec = _obj({
            "holderIdentity": _STR,
            "leaseDurationSeconds": {"type": "integer", "format": "int32"},
            "acquireTime": micro,
            "renewTime": micro,
            "leaseTransitions": {"type": "integer", "format": "int32"},
        })  # fmt: skip
        return {
            **common,
            _COORD + "Lease": _group_top("Lease", group, {"spec": _embedded(_COORD + "LeaseSpec")}),
            _COORD + "LeaseList": _group_list("Lease", group, _COORD + "Lease"),
            _COORD + "LeaseSpec": spec,
        }
    ref = _obj({k: _STR for k in ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion",
                                   "fieldPath")})  # fmt: skip
    return {
        **common,
        _EVENTS + "Event": _group_top("Event", group, _event_v1_fields(micro, ref)),
        _EVENTS + "EventList": _group_list("Event", group, _EVENTS + "Event"),
    }


def openapi_v3_group_document(group: str, version: str) -> dict[str, Any] | None:
    """``/openapi/v3/apis/GROUP/VERSION``, or None when not served."""
    if group not in _GROUPS or version != "v1":
        return None
    if group == "coordination.k8s.io":
        paths = _group_paths(group, "leases", "Lease", _COORD)
    else:
        paths = _group_paths(group, "events", "Event", _EVENTS)
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": SERVER_VERSION},
        "paths": paths,
        "components": {"schemas": _group_schemas(group)},
    }


_GROUP_DOCS: dict[str, bytes] = {}


def openapi_v3_group_document_bytes(group: str, version: str) -> bytes | None:
    key = f"{group}/{version}"
    if key not in _GROUP_DOCS:
        doc = openapi_v3_group_document(group, version)
        if doc is None:
            return None
        _GROUP_DOCS[key] = msgspec.json.encode(doc)
    return _GROUP_DOCS[key]


def _openapi_group_paths() -> dict[str, Any]:
    out: dict[str, Any] = {}
    for group in sorted(_GROUPS):
        doc = openapi_v3_group_document_bytes(group, "v1") or b""
        digest = hashlib.sha512(doc).hexdigest().upper()
        out[f"apis/{group}/v1"] = {"serverRelativeURL": f"/openapi/v3/apis/{group}/v1?hash={digest}"}
    return out


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
    from .kinds import v1_event_to_core

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
