"""Nodes: their strategy (kube-apiserver's pkg/registry/core/node, for the fields a node agent uses).

Taints are validated as ``validateNodeTaints`` does; ``providerID`` and ``podCIDRs`` may only be
set once; the body is type-checked as Go's decoder would (400).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from ...validation import qualified_name_errors
from ..storage.errors import FieldError, unsupported
from ..storage.strategy import ResourceInfo, Strategy, register
from .wire import Decoder

__all__ = ["NODES", "NodeStrategy", "validate_taints"]

# --- Nodes ------------------------------------------------------------------------------

_TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


class _Raw(FieldError):
    """A field error whose value is printed as given (Go's ``%#v`` of a struct)."""

    def body(self) -> str:
        text = f"{self.type}: {self.value}"
        return f"{text}: {self.detail}" if self.detail else text


def _taint_json(taint: dict[str, Any]) -> str:
    # The internal Taint printed as JSON (no json tags: Go's field names).
    added = taint.get("timeAdded")
    fields = {
        "Key": taint.get("key") or "",
        "Value": taint.get("value") or "",
        "Effect": taint.get("effect") or "",
    }
    return json.dumps({**fields, "TimeAdded": added}, separators=(",", ":"))


def validate_taints(taints: Any, errors: list[FieldError]) -> None:
    """validateNodeTaints: key a label name, value a label value, a known effect, unique (key, effect)."""
    if not isinstance(taints, list):
        return
    seen: set[tuple[str, str]] = set()
    for i, taint in enumerate(taints):
        if not isinstance(taint, dict):
            continue
        # kube-apiserver v1.37 names the field under metadata (it passes that path down).
        path = f"metadata.taints[{i}]"
        key = taint.get("key") or ""
        key = key if isinstance(key, str) else ""
        for msg in qualified_name_errors(key):
            errors.append(FieldError(f"{path}.key", "Invalid value", key, msg))
        value = taint.get("value") or ""
        value = value if isinstance(value, str) else ""
        value_errors = _label_value_errors(value)
        if value_errors:
            errors.append(FieldError(f"{path}.value", "Invalid value", value, ";".join(value_errors)))
        effect = taint.get("effect") or ""
        if not effect:
            errors.append(FieldError(f"{path}.effect", "Required value"))
        elif effect not in _TAINT_EFFECTS:
            errors.append(unsupported(f"{path}.effect", effect, _TAINT_EFFECTS))
        if (key, effect) in seen:
            errors.append(
                _Raw(
                    path,
                    "Duplicate value",
                    _taint_json(taint),
                    "taints must be unique by key and effect pair",
                )
            )
            continue
        seen.add((key, effect))


_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def _label_value_errors(value: str) -> list[str]:
    errs = []
    if len(value) > 63:
        errs.append("must be no more than 63 characters")
    if not _LABEL_VALUE.match(value):
        errs.append(
            "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or "
            "'.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or "
            "'my_value',  or '12345', regex used for validation is "
            "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
        )
    return errs


_NODE_INFO = (
    "machineID", "systemUUID", "bootID", "kernelVersion", "osImage", "containerRuntimeVersion",
    "kubeletVersion", "kubeProxyVersion", "operatingSystem", "architecture",
)  # fmt: skip


def _node_status(status: Any) -> Any:
    """The status as the server prints it: unset condition times null, every nodeInfo field,
    the kubelet endpoint (Go structs, never omitted). A new dict: the given one may be shared."""
    if not isinstance(status, dict):
        return status
    out = dict(status)
    conditions = status.get("conditions")
    if isinstance(conditions, list):
        out["conditions"] = [
            {"lastHeartbeatTime": None, "lastTransitionTime": None, **c} if isinstance(c, dict) else c
            for c in conditions
        ]
    info = status.get("nodeInfo")
    if info is None or isinstance(info, dict):
        out["nodeInfo"] = {**dict.fromkeys(_NODE_INFO, ""), **(info or {})}
    if out.get("daemonEndpoints") is None:
        out["daemonEndpoints"] = {"kubeletEndpoint": {"Port": 0}}
    return out


_NODE_DEC = Decoder("Node")


def _list_of_objects(
    dec: Decoder, owner: dict[str, Any], key: str, struct: str, path: str, go: str
) -> list[Any]:
    value = owner.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise dec.type_error(value, struct, path, f"[]{go}")
    for item in value:
        if item is not None and not isinstance(item, dict):
            raise dec.type_error(item, struct, path, go)
    return [item for item in value if item is not None]


def _check_node_types(obj: dict[str, Any]) -> None:
    """What Go's decoder refuses in the Node fields a node agent writes (a 400, not stored)."""
    dec = _NODE_DEC
    spec = obj.get("spec")
    if spec is not None and not isinstance(spec, dict):
        raise dec.type_error(spec, "Node", "spec", "v1.NodeSpec")
    spec = spec or {}
    for key in ("podCIDR", "providerID"):
        dec.string(spec, key, "NodeSpec", f"spec.{key}")
    unschedulable = spec.get("unschedulable")
    if unschedulable is not None and not isinstance(unschedulable, bool):
        raise dec.type_error(unschedulable, "NodeSpec", "spec.unschedulable", "bool")
    cidrs = spec.get("podCIDRs")
    if cidrs is not None and (not isinstance(cidrs, list) or not all(isinstance(c, str) for c in cidrs)):
        raise dec.type_error(cidrs, "NodeSpec", "spec.podCIDRs", "[]string")
    for taint in _list_of_objects(dec, spec, "taints", "NodeSpec", "spec.taints", "v1.Taint"):
        for key in ("key", "value", "effect"):
            dec.string(taint, key, "Taint", f"spec.taints.{key}")
    status = obj.get("status")
    if status is not None and not isinstance(status, dict):
        raise dec.type_error(status, "Node", "status", "v1.NodeStatus")
    status = status or {}
    for cond in _list_of_objects(
        dec, status, "conditions", "NodeStatus", "status.conditions", "v1.NodeCondition"
    ):
        for key in ("type", "status", "reason", "message"):
            dec.string(cond, key, "NodeCondition", f"status.conditions.{key}")
    for address in _list_of_objects(
        dec, status, "addresses", "NodeStatus", "status.addresses", "v1.NodeAddress"
    ):
        for key in ("type", "address"):
            dec.string(address, key, "NodeAddress", f"status.addresses.{key}")
    for key, go in (("capacity", "v1.ResourceList"), ("allocatable", "v1.ResourceList"),
                    ("nodeInfo", "v1.NodeSystemInfo"), ("daemonEndpoints", "v1.NodeDaemonEndpoints")):  # fmt: skip
        value = status.get(key)
        if value is not None and not isinstance(value, dict):
            raise dec.type_error(value, "NodeStatus", f"status.{key}", go)
    info = status.get("nodeInfo") or {}
    for key in _NODE_INFO:
        dec.string(info, key, "NodeSystemInfo", f"status.nodeInfo.{key}")


class NodeStrategy(Strategy):
    """Nodes: the spec rules of ValidateNode / ValidateNodeUpdate that a node agent meets.

    Unlike kube-apiserver, a new Node does not get the ``node.kubernetes.io/not-ready``
    taint (its TaintNodesByCondition admission): there is no node lifecycle
    controller here to take it off once the node is Ready.
    """

    # etcd keeps nodes under their old name.
    storage_path = "minions"

    def prepare_create(self, obj: dict[str, Any], errors: list[FieldError]) -> None:
        _check_node_types(obj)
        spec = obj.setdefault("spec", {})
        if spec is None:
            spec = obj["spec"] = {}
        obj["status"] = _node_status(obj.get("status") or {})
        if isinstance(spec, dict):
            validate_taints(spec.get("taints"), errors)

    def prepare_update(
        self, old: dict[str, Any], obj: dict[str, Any], subresource: str | None, errors: list[FieldError]
    ) -> None:
        _check_node_types(obj)
        if subresource == "status":
            obj["status"] = _node_status(obj.get("status") or {})
        spec = obj.get("spec")
        if not isinstance(spec, dict):
            return
        validate_taints(spec.get("taints"), errors)
        old_spec = old.get("spec") or {}
        if old_spec.get("providerID") and spec.get("providerID") != old_spec.get("providerID"):
            errors.append(FieldError("spec.providerID", "Forbidden", detail=(
                'node updates may not change providerID except from "" to valid'
            )))  # fmt: skip
        old_cidrs = old_spec.get("podCIDRs") or []
        if old_cidrs and (spec.get("podCIDRs") or []) != old_cidrs:
            errors.append(FieldError("spec.podCIDRs", "Forbidden", detail=(
                'node updates may not change podCIDR except from "" to valid'
            )))  # fmt: skip


# --- Leases ---------------------------------------------------------------------------


NODE_MERGE_KEYS: Mapping[tuple[str, ...], str] = {
    ("metadata", "finalizers"): "",
    ("metadata", "ownerReferences"): "uid",
    ("spec", "podCIDRs"): "",
    ("status", "conditions"): "type",
    ("status", "addresses"): "type",
    ("status", "volumesAttached"): "name",
}

NODES = register(
    ResourceInfo("nodes", "Node", namespaced=False, merge_keys=NODE_MERGE_KEYS, strategy=NodeStrategy())
)
