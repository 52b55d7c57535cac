"""The node agent's resources in the embedded server: Node rules, Leases and Events.

Each resource is a :class:`~podstatus.server.store.ResourceInfo` with a
:class:`~podstatus.server.store.Strategy` (kube-apiserver v1.37's registry
strategies, for the fields a node agent uses), registered in
:data:`~podstatus.server.store.RESOURCES` when this module is imported (the
package ``podstatus.server`` imports it).

- ``nodes``: taints validated as ``validateNodeTaints`` does; ``providerID``
  and ``podCIDRs`` may only be set once.
- ``leases.coordination.k8s.io`` (namespaced): the MicroTime fields are parsed
  as Go's ``time.Parse`` with ``2006-01-02T15:04:05.000000Z07:00`` parses them
  (a malformed one is a 400, as from the real decoder) and stored in UTC;
  ``leaseDurationSeconds`` > 0 and ``leaseTransitions`` >= 0.
- ``events`` (core/v1) and ``events.events.k8s.io`` (events.k8s.io/v1): one
  storage in the core form; the second resource converts both ways
  (``message``/``note``, ``involvedObject``/``regarding``, ``source``/
  ``deprecatedSource``, ``count``/``deprecatedCount``, the timestamps) and
  validates as ``ValidateEventCreate``/``ValidateEventUpdate`` do for the
  version of the request (strict rules only for events.k8s.io).

Objects are stored in the canonical form the real server prints (only the
fields the API defines, in its order, ``null`` for unset times): clients that
compare our answers with a real server's see the same keys.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from typing import Any

from .selectors import FIELD_GETTERS, SELECTED_FIELDS
from .store import (
    RESOURCES,
    FieldError,
    ResourceInfo,
    Strategy,
    _go_json_type,
    _unsupported,
    bad_request,
    qualified_name_errors,
    register,
)

__all__ = [
    "EVENTS",
    "EVENTS_V1",
    "LEASES",
    "MICRO_FORMAT",
    "EventStrategy",
    "LeaseStrategy",
    "NodeStrategy",
    "core_event_to_v1",
    "format_micro_time",
    "v1_event_to_core",
]

# metav1.RFC3339Micro, as Go's layout and as strftime.
MICRO_LAYOUT = "2006-01-02T15:04:05.000000Z07:00"
MICRO_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"
_TIME_LAYOUT = "2006-01-02T15:04:05Z07:00"

# --- Go's time.Parse, for the two layouts the API uses ------------------------------

# (layout element, digits) in order; digits 0 means a literal.
_ELEMENTS = (
    ("2006", 4), ("-", 0), ("01", 2), ("-", 0), ("02", 2), ("T", 0),
    ("15", 2), (":", 0), ("04", 2), (":", 0), ("05", 2),
)  # fmt: skip
_ZONE = re.compile(r"^(Z|[+-]\d\d:\d\d)")


class _TimeError(ValueError):
    pass


def _parse_go_time(value: str, *, micro: bool) -> datetime:
    """``time.Parse(layout, value)`` for RFC3339 (``micro`` False) or RFC3339Micro, with Go's
    error text (``parsing time "..." as "...": cannot parse "..." as "..."``)."""
    layout = MICRO_LAYOUT if micro else _TIME_LAYOUT
    rest = value

    def fail(elem: str) -> _TimeError:
        return _TimeError(f'parsing time "{value}" as "{layout}": cannot parse "{rest}" as "{elem}"')

    numbers: list[int] = []
    for elem, digits in _ELEMENTS:
        if digits:
            chunk = rest[:digits]
            if len(chunk) < digits or not chunk.isdigit():
                raise fail(elem)
            numbers.append(int(chunk))
            rest = rest[digits:]
        else:
            if not rest.startswith(elem):
                raise fail(elem)
            rest = rest[len(elem) :]
    micros = 0
    if micro:
        # A fixed ".000000" takes exactly six digits.
        chunk = rest[:7]
        if len(chunk) < 7 or chunk[0] != "." or not chunk[1:].isdigit():
            raise fail(".000000")
        micros = int(chunk[1:])
        rest = rest[7:]
    elif rest.startswith(".") or rest.startswith(","):
        # Go accepts a fraction after the seconds even when the layout has none.
        end = 1
        while end < len(rest) and rest[end].isdigit():
            end += 1
        if end > 1:
            micros = int((rest[1:end] + "000000")[:6])
            rest = rest[end:]
    zone = _ZONE.match(rest)
    if zone is None:
        raise fail("Z07:00")
    tz = zone.group(1)
    if rest[len(tz) :]:
        raise _TimeError(f'parsing time "{value}": extra text: "{rest[len(tz) :]}"')
    year, month, day, hour, minute, second = numbers
    try:
        when = datetime(year, month, day, hour, minute, second, micros, tzinfo=UTC)
    except ValueError:
        what = "month" if not 1 <= month <= 12 else "day"
        raise _TimeError(f'parsing time "{value}": {what} out of range') from None
    if tz != "Z":
        sign = 1 if tz[0] == "+" else -1
        when -= sign * timedelta(hours=int(tz[1:3]), minutes=int(tz[4:6]))
    return when


def format_micro_time(when: datetime) -> str:
    """A MicroTime as the server prints it (UTC, six fraction digits)."""
    return when.astimezone(UTC).strftime(MICRO_FORMAT)


def _format_time(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# --- decoding checks (the real server answers these with 400) ------------------------


class _Decoder:
    """Type checks of a body as Go's JSON decoder does them, for one kind."""

    def __init__(self, kind: str) -> None:
        self.kind = kind

    def fail(self, message: str) -> Exception:
        return bad_request(f'{self.kind} in version "v1" cannot be handled as a {self.kind}: {message}')

    def type_error(self, value: Any, struct: str, path: str, go_type: str) -> Exception:
        return self.fail(
            f"json: cannot unmarshal {_go_json_type(value)} into Go struct field "
            f"{struct}.{path} of type {go_type}"
        )

    def string(self, obj: dict[str, Any], key: str, struct: str, path: str) -> None:
        value = obj.get(key)
        if value is not None and not isinstance(value, str):
            raise self.type_error(value, struct, path, "string")

    def int32(self, obj: dict[str, Any], key: str, struct: str, path: str) -> None:
        value = obj.get(key)
        if value is None:
            return
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.type_error(value, struct, path, "int32")
        if isinstance(value, float) and not value.is_integer():
            raise self.fail(
                f"json: cannot unmarshal number {value} into Go struct field {struct}.{path} of type int32"
            )
        if not -(2**31) <= value < 2**31:
            raise self.fail(
                f"json: cannot unmarshal number {int(value)} into Go struct field {struct}.{path} "
                "of type int32"
            )
        obj[key] = int(value)

    def time(self, obj: dict[str, Any], key: str, *, micro: bool) -> None:
        """Parse and normalise a Time (whole seconds) or MicroTime field in place."""
        value = obj.get(key)
        if value is None:
            obj[key] = None
            return
        if not isinstance(value, str):
            go_type = "v1.MicroTime" if micro else "v1.Time"
            raise self.fail(f"json: cannot unmarshal {_go_json_type(value)} into Go value of type {go_type}")
        try:
            when = _parse_go_time(value, micro=micro)
        except _TimeError as err:
            raise self.fail(str(err)) from None
        obj[key] = format_micro_time(when) if micro else _format_time(when)

    def struct(self, obj: dict[str, Any], key: str, struct: str, path: str, go_type: str) -> dict[str, Any]:
        value = obj.get(key)
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise self.type_error(value, struct, path, go_type)
        return dict(value)


_REF_FIELDS = ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath")


def _reference(dec: _Decoder, value: dict[str, Any], path: str) -> dict[str, Any]:
    for key in _REF_FIELDS:
        dec.string(value, key, "ObjectReference", f"{path}.{key}")
    return {k: value[k] for k in _REF_FIELDS if value.get(k)}


def _source(dec: _Decoder, value: dict[str, Any], path: str) -> dict[str, Any]:
    for key in ("component", "host"):
        dec.string(value, key, "EventSource", f"{path}.{key}")
    return {k: value[k] for k in ("component", "host") if value.get(k)}


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
            errors.append(_unsupported(f"{path}.effect", effect, _TAINT_EFFECTS))
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


_NODE_DEC = _Decoder("Node")


def _list_of_objects(
    dec: _Decoder, owner: dict[str, Any], key: str, struct: str, path: str, go: str
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

_LEASE_SPEC = (
    "holderIdentity", "leaseDurationSeconds", "acquireTime", "renewTime", "leaseTransitions",
    "strategy", "preferredHolder",
)  # fmt: skip


class LeaseStrategy(Strategy):
    """coordination.k8s.io/v1 Leases: decoding of the spec, ValidateLeaseSpec."""

    _dec = _Decoder("Lease")

    def _canonical(
        self, obj: dict[str, Any], errors: list[FieldError], old: dict[str, Any] | None = None
    ) -> None:
        dec = self._dec
        spec = dec.struct(obj, "spec", "Lease", "spec", "v1.LeaseSpec")
        for key in ("holderIdentity", "strategy", "preferredHolder"):
            dec.string(spec, key, "LeaseSpec", f"spec.{key}")
        for key in ("leaseDurationSeconds", "leaseTransitions"):
            dec.int32(spec, key, "LeaseSpec", f"spec.{key}")
        for key in ("acquireTime", "renewTime"):
            if key in spec:
                dec.time(spec, key, micro=True)
        # Only the API's fields, in its order; pointers left out when unset.
        spec = {k: spec[k] for k in _LEASE_SPEC if spec.get(k) is not None}
        # strategy and preferredHolder belong to CoordinatedLeaderElection, off by default in
        # v1.37: dropped unless the stored Lease already has them (DropDisabledSpecFields).
        old_spec = (old or {}).get("spec") or {}
        for key in ("strategy", "preferredHolder"):
            if key in spec and not old_spec.get(key):
                del spec[key]
        obj["spec"] = spec
        obj.pop("status", None)
        duration = spec.get("leaseDurationSeconds")
        if duration is not None and duration <= 0:
            errors.append(
                FieldError("spec.leaseDurationSeconds", "Invalid value", duration, "must be greater than 0")
            )
        transitions = spec.get("leaseTransitions")
        if transitions is not None and transitions < 0:
            errors.append(FieldError(
                "spec.leaseTransitions", "Invalid value", transitions, "must be greater than or equal to 0"
            ))  # fmt: skip
        if spec.get("preferredHolder") and not spec.get("strategy"):
            errors.append(FieldError(
                "spec.preferredHolder", "Forbidden", detail="may only be specified if `strategy` is defined"
            ))  # fmt: skip

    def prepare_create(self, obj: dict[str, Any], errors: list[FieldError]) -> None:
        self._canonical(obj, errors)

    def prepare_update(
        self, old: dict[str, Any], obj: dict[str, Any], subresource: str | None, errors: list[FieldError]
    ) -> None:
        self._canonical(obj, errors, old)


# --- Events ---------------------------------------------------------------------------

# core/v1 Event's fields in the order the server prints them (Go's struct order).
_CORE_FIELDS = (
    "involvedObject", "reason", "message", "source", "firstTimestamp", "lastTimestamp", "count", "type",
    "eventTime", "series", "action", "related", "reportingComponent", "reportingInstance",
)  # fmt: skip
_MAX_REPORTING_INSTANCE = 128
_MAX_ACTION = 128
_MAX_REASON = 128
_MAX_NOTE = 1024


def _series(dec: _Decoder, value: dict[str, Any], path: str) -> dict[str, Any]:
    dec.int32(value, "count", "EventSeries", f"{path}.count")
    if "lastObservedTime" in value:
        dec.time(value, "lastObservedTime", micro=True)
    return {k: value[k] for k in ("count", "lastObservedTime") if value.get(k) is not None}


def _canonical_core(dec: _Decoder, obj: dict[str, Any]) -> dict[str, Any]:
    """A core/v1 Event body decoded and printed as the server prints it."""
    for key in ("reason", "message", "type", "action", "reportingComponent", "reportingInstance"):
        dec.string(obj, key, "Event", key)
    dec.int32(obj, "count", "Event", "count")
    for key, micro in (("firstTimestamp", False), ("lastTimestamp", False), ("eventTime", True)):
        dec.time(obj, key, micro=micro)
    out: dict[str, Any] = {"kind": "Event", "apiVersion": "v1", "metadata": obj["metadata"]}
    out["involvedObject"] = _reference(
        dec,
        dec.struct(obj, "involvedObject", "Event", "involvedObject", "v1.ObjectReference"),
        "involvedObject",
    )
    for key in ("reason", "message"):
        if obj.get(key):
            out[key] = obj[key]
    out["source"] = _source(dec, dec.struct(obj, "source", "Event", "source", "v1.EventSource"), "source")
    out["firstTimestamp"] = obj.get("firstTimestamp")
    out["lastTimestamp"] = obj.get("lastTimestamp")
    if obj.get("count"):
        out["count"] = obj["count"]
    if obj.get("type"):
        out["type"] = obj["type"]
    out["eventTime"] = obj.get("eventTime")
    if obj.get("series") is not None:
        out["series"] = _series(dec, dec.struct(obj, "series", "Event", "series", "v1.EventSeries"), "series")
    if obj.get("action"):
        out["action"] = obj["action"]
    if obj.get("related") is not None:
        out["related"] = _reference(
            dec, dec.struct(obj, "related", "Event", "related", "v1.ObjectReference"), "related"
        )
    out["reportingComponent"] = obj.get("reportingComponent") or ""
    out["reportingInstance"] = obj.get("reportingInstance") or ""
    return out


def v1_event_to_core(obj: dict[str, Any]) -> dict[str, Any]:
    """An events.k8s.io/v1 Event as the core/v1 one (Convert_v1_Event_To_core_Event)."""
    out: dict[str, Any] = {"kind": "Event", "apiVersion": "v1", "metadata": obj.get("metadata") or {}}
    renamed = {
        "regarding": "involvedObject",
        "note": "message",
        "deprecatedSource": "source",
        "deprecatedFirstTimestamp": "firstTimestamp",
        "deprecatedLastTimestamp": "lastTimestamp",
        "deprecatedCount": "count",
        "reportingController": "reportingComponent",
    }
    for key, value in obj.items():
        if key in _V1_FIELDS:
            out[renamed.get(key, key)] = value
    return out


# events.k8s.io/v1 Event's fields (others are dropped, as the real decoder drops unknown fields).
_V1_FIELDS = frozenset({
    "eventTime", "series", "reportingController", "reportingInstance", "action", "reason", "regarding",
    "related", "note", "type", "deprecatedSource", "deprecatedFirstTimestamp", "deprecatedLastTimestamp",
    "deprecatedCount",
})  # fmt: skip


def core_event_to_v1(obj: dict[str, Any]) -> dict[str, Any]:
    """A stored (core/v1) Event as events.k8s.io/v1 prints it (Convert_core_Event_To_v1_Event)."""
    out: dict[str, Any] = {"kind": "Event", "apiVersion": "events.k8s.io/v1", "metadata": obj.get("metadata")}
    out["eventTime"] = obj.get("eventTime")
    if obj.get("series") is not None:
        series = obj["series"]
        # events.k8s.io prints both series fields (no omitempty there).
        out["series"] = {"count": series.get("count", 0), "lastObservedTime": series.get("lastObservedTime")}
    for src, dst in (("reportingComponent", "reportingController"), ("reportingInstance", "reportingInstance"),
                     ("action", "action"), ("reason", "reason")):  # fmt: skip
        if obj.get(src):
            out[dst] = obj[src]
    out["regarding"] = dict(obj.get("involvedObject") or {})
    if obj.get("related") is not None:
        out["related"] = obj["related"]
    if obj.get("message"):
        out["note"] = obj["message"]
    if obj.get("type"):
        out["type"] = obj["type"]
    out["deprecatedSource"] = dict(obj.get("source") or {})
    out["deprecatedFirstTimestamp"] = obj.get("firstTimestamp")
    out["deprecatedLastTimestamp"] = obj.get("lastTimestamp")
    if obj.get("count"):
        out["deprecatedCount"] = obj["count"]
    return out


_IMMUTABLE_V1 = (
    ("involvedObject", "regarding"), ("reason", "reason"), ("message", "note"),
    ("source", "deprecatedSource"), ("firstTimestamp", "deprecatedFirstTimestamp"),
    ("lastTimestamp", "deprecatedLastTimestamp"), ("count", "deprecatedCount"), ("type", "type"),
    ("eventTime", "eventTime"), ("action", "action"), ("related", "related"),
    ("reportingComponent", "reportingController"), ("reportingInstance", "reportingInstance"),
)  # fmt: skip


class EventStrategy(Strategy):
    """Events: one storage (core/v1 form) for both API groups.

    ``strict`` is the events.k8s.io/v1 variant: bodies are converted, and
    creates and updates get the strict validation of that API version.
    """

    # kube-apiserver's --event-ttl default: an Event goes an hour after its last write.
    ttl = 3600.0

    def __init__(self, *, strict: bool) -> None:
        self.strict = strict
        self.converts = strict
        self._dec = _Decoder("Event")

    def to_storage(self, obj: dict[str, Any]) -> dict[str, Any]:
        core = v1_event_to_core(obj) if self.strict else obj
        return _canonical_core(self._dec, core)

    def from_storage(self, obj: dict[str, Any]) -> dict[str, Any]:
        return core_event_to_v1(obj) if self.strict else obj

    def prepare_create(self, obj: dict[str, Any], errors: list[FieldError]) -> None:
        self._legacy(obj, errors)
        if not self.strict:
            return
        self._series(obj, errors)
        if not obj.get("eventTime"):
            errors.append(FieldError("eventTime", "Required value"))
        kind = obj.get("type") or ""
        if kind not in ("Normal", "Warning"):
            errors.append(FieldError("type", "Invalid value", "", f"has invalid value: {kind}"))
        # Stored names: the events.k8s.io ones say "deprecated..." but the real server's
        # messages name the internal (core) fields.
        for key in ("firstTimestamp", "lastTimestamp"):
            if obj.get(key):
                errors.append(FieldError(key, "Invalid value", "", "needs to be unset"))
        if obj.get("count"):
            errors.append(FieldError("count", "Invalid value", "", "needs to be unset"))
        if obj.get("source"):
            errors.append(FieldError("source", "Invalid value", "", "needs to be unset"))

    def prepare_update(
        self, old: dict[str, Any], obj: dict[str, Any], subresource: str | None, errors: list[FieldError]
    ) -> None:
        self._legacy(obj, errors)
        if not self.strict:
            return
        if obj.get("series") != old.get("series"):
            self._series(obj, errors)
        for core_key, _ in _IMMUTABLE_V1:
            if obj.get(core_key) != old.get(core_key):
                errors.append(FieldError(core_key, "Invalid value", _immutable_value(obj.get(core_key)),
                                         "field is immutable"))  # fmt: skip

    @staticmethod
    def _series(obj: dict[str, Any], errors: list[FieldError]) -> None:
        series = obj.get("series")
        if series is None:
            return
        if (series.get("count") or 0) < 2:
            errors.append(FieldError("series.count", "Invalid value", "", "should be at least 2"))
        if not series.get("lastObservedTime"):
            errors.append(FieldError("series.lastObservedTime", "Required value"))

    @staticmethod
    def _legacy(obj: dict[str, Any], errors: list[FieldError]) -> None:
        """legacyValidateEvent: every Event, whichever API it came through."""
        namespace = obj["metadata"].get("namespace") or ""
        involved = obj.get("involvedObject") or {}
        involved_ns = involved.get("namespace") or ""
        mismatch = FieldError(
            "involvedObject.namespace", "Invalid value", involved_ns, "does not match event.namespace"
        )
        if not obj.get("eventTime"):
            if not involved_ns:
                if namespace not in ("", "default"):
                    errors.append(mismatch)
            elif namespace != involved_ns:
                errors.append(mismatch)
        else:
            if not involved_ns and namespace not in ("default", "kube-system"):
                errors.append(mismatch)
            controller = obj.get("reportingComponent") or ""
            if not controller:
                errors.append(FieldError("reportingController", "Required value"))
            for msg in qualified_name_errors(controller):
                errors.append(FieldError("reportingController", "Invalid value", controller, msg))
            instance = obj.get("reportingInstance") or ""
            if not instance:
                errors.append(FieldError("reportingInstance", "Required value"))
            if len(instance) > _MAX_REPORTING_INSTANCE:
                errors.append(FieldError("reportingInstance", "Invalid value", "",
                                         f"can have at most {_MAX_REPORTING_INSTANCE} characters"))  # fmt: skip
            action = obj.get("action") or ""
            if not action:
                errors.append(FieldError("action", "Required value"))
            if len(action) > _MAX_ACTION:
                errors.append(
                    FieldError("action", "Invalid value", "", f"can have at most {_MAX_ACTION} characters")
                )
            reason = obj.get("reason") or ""
            if not reason:
                errors.append(FieldError("reason", "Required value"))
            if len(reason) > _MAX_REASON:
                errors.append(
                    FieldError("reason", "Invalid value", "", f"can have at most {_MAX_REASON} characters")
                )
            if len(obj.get("message") or "") > _MAX_NOTE:
                errors.append(
                    FieldError("message", "Invalid value", "", f"can have at most {_MAX_NOTE} characters")
                )


def _immutable_value(value: Any) -> Any:
    # Go prints strings quoted and numbers plainly; structs are shown as JSON here.
    return "" if value is None else value


# --- field selectors ---------------------------------------------------------------------


def _top(key: str) -> Any:
    def get(obj: Any) -> str:
        value = obj.get(key)
        return "" if value is None else str(value)

    return get


def _nested(section: str, key: str) -> Any:
    def get(obj: Any) -> str:
        sub = obj.get(section)
        value = sub.get(key) if isinstance(sub, dict) else None
        return "" if value is None else str(value)

    return get


def _meta(key: str) -> Any:
    return _nested("metadata", key)


def _event_source(obj: Any) -> str:
    # The source of an Event made through events.k8s.io is its reportingController.
    source = obj.get("source")
    component = source.get("component") if isinstance(source, dict) else None
    return str(component or obj.get("reportingComponent") or "")


_EVENT_FIELDS = {
    **{f"involvedObject.{k}": _nested("involvedObject", k) for k in _REF_FIELDS},
    "reason": _top("reason"),
    "reportingComponent": _top("reportingComponent"),
    "source": _event_source,
    "type": _top("type"),
    "metadata.name": _meta("name"),
    "metadata.namespace": _meta("namespace"),
}
# events.k8s.io/v1 selects by its own names; objects are matched in the stored (core) form.
_EVENT_V1_FIELDS = {
    **{f"regarding.{k}": _nested("involvedObject", k) for k in _REF_FIELDS},
    "reason": _top("reason"),
    "reportingController": _top("reportingComponent"),
    "source": _event_source,
    "type": _top("type"),
    "metadata.name": _meta("name"),
    "metadata.namespace": _meta("namespace"),
}


# --- registration -----------------------------------------------------------------------

_EVENT_MERGE_KEYS: dict[tuple[str, ...], str] = {}

NODES = register(
    ResourceInfo(
        "nodes", "Node", namespaced=False, merge_keys=RESOURCES["nodes"].merge_keys, strategy=NodeStrategy()
    )
)
LEASES = register(
    ResourceInfo(
        "leases", "Lease", namespaced=True, merge_keys={}, group="coordination.k8s.io",
        has_status=False, strategy=LeaseStrategy(),
    )
)  # fmt: skip
EVENTS = register(
    ResourceInfo(
        "events", "Event", namespaced=True, merge_keys=_EVENT_MERGE_KEYS, has_status=False,
        strategy=EventStrategy(strict=False),
    )
)  # fmt: skip
EVENTS_V1 = register(
    ResourceInfo(
        "events", "Event", namespaced=True, merge_keys=_EVENT_MERGE_KEYS, group="events.k8s.io",
        storage="events", has_status=False, strategy=EventStrategy(strict=True),
    )
)  # fmt: skip

FIELD_GETTERS[LEASES.key] = {"metadata.name": _meta("name"), "metadata.namespace": _meta("namespace")}
FIELD_GETTERS[EVENTS.key] = _EVENT_FIELDS
FIELD_GETTERS[EVENTS_V1.key] = _EVENT_V1_FIELDS
# Both groups' Events are stored in the core form, which their getters read.
SELECTED_FIELDS["Event"] = {
    "involvedObject": _REF_FIELDS,
    "source": ("component",),
    "reason": None,
    "reportingComponent": None,
    "type": None,
}
