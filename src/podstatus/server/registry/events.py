"""Events: core/v1 ``events`` and ``events.events.k8s.io`` (events.k8s.io/v1), one storage in the
core form (kube-apiserver's pkg/registry/core/event and pkg/registry/events/event).

The second resource converts both ways (``message``/``note``, ``involvedObject``/``regarding``,
``source``/``deprecatedSource``, ``count``/``deprecatedCount``, the timestamps) and validates as
``ValidateEventCreate``/``ValidateEventUpdate`` do for the version of the request (strict rules
only for events.k8s.io). Events expire an hour after their last write, as etcd leases them.
Objects are stored in the canonical form the real server prints.
"""

from __future__ import annotations

from typing import Any

from ...validation import qualified_name_errors
from ..selectors import FIELD_GETTERS, SELECTED_FIELDS
from ..storage.errors import FieldError
from ..storage.strategy import ResourceInfo, Strategy, register
from .wire import REF_FIELDS, Decoder, meta_field, nested_field, reference, source, top_field

__all__ = ["EVENTS", "EVENTS_V1", "EventStrategy", "core_event_to_v1", "v1_event_to_core"]

_CORE_FIELDS = (
    "involvedObject", "reason", "message", "source", "firstTimestamp", "lastTimestamp", "count", "type",
    "eventTime", "series", "action", "related", "reportingComponent", "reportingInstance",
)  # fmt: skip
_MAX_REPORTING_INSTANCE = 128
_MAX_ACTION = 128
_MAX_REASON = 128
_MAX_NOTE = 1024


def _series(dec: Decoder, value: dict[str, Any], path: str) -> dict[str, Any]:
    dec.int32(value, "count", "EventSeries", f"{path}.count")
    if "lastObservedTime" in value:
        dec.time(value, "lastObservedTime", micro=True)
    return {k: value[k] for k in ("count", "lastObservedTime") if value.get(k) is not None}


def _canonical_core(dec: Decoder, obj: dict[str, Any]) -> dict[str, Any]:
    """A core/v1 Event body decoded and printed as the server prints it."""
    for key in ("reason", "message", "type", "action", "reportingComponent", "reportingInstance"):
        dec.string(obj, key, "Event", key)
    dec.int32(obj, "count", "Event", "count")
    for key, micro in (("firstTimestamp", False), ("lastTimestamp", False), ("eventTime", True)):
        dec.time(obj, key, micro=micro)
    out: dict[str, Any] = {"kind": "Event", "apiVersion": "v1", "metadata": obj["metadata"]}
    out["involvedObject"] = reference(
        dec,
        dec.struct(obj, "involvedObject", "Event", "involvedObject", "v1.ObjectReference"),
        "involvedObject",
    )
    for key in ("reason", "message"):
        if obj.get(key):
            out[key] = obj[key]
    out["source"] = source(dec, dec.struct(obj, "source", "Event", "source", "v1.EventSource"), "source")
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
        out["related"] = reference(
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
        self._dec = Decoder("Event")

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


def _event_source(obj: Any) -> str:
    # The source of an Event made through events.k8s.io is its reportingController.
    source = obj.get("source")
    component = source.get("component") if isinstance(source, dict) else None
    return str(component or obj.get("reportingComponent") or "")


_EVENT_FIELDS = {
    **{f"involvedObject.{k}": nested_field("involvedObject", k) for k in REF_FIELDS},
    "reason": top_field("reason"),
    "reportingComponent": top_field("reportingComponent"),
    "source": _event_source,
    "type": top_field("type"),
    "metadata.name": meta_field("name"),
    "metadata.namespace": meta_field("namespace"),
}
# events.k8s.io/v1 selects by its own names; objects are matched in the stored (core) form.
_EVENT_V1_FIELDS = {
    **{f"regarding.{k}": nested_field("involvedObject", k) for k in REF_FIELDS},
    "reason": top_field("reason"),
    "reportingController": top_field("reportingComponent"),
    "source": _event_source,
    "type": top_field("type"),
    "metadata.name": meta_field("name"),
    "metadata.namespace": meta_field("namespace"),
}


# --- registration -----------------------------------------------------------------------

_EVENT_MERGE_KEYS: dict[tuple[str, ...], str] = {}

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

FIELD_GETTERS[EVENTS.key] = _EVENT_FIELDS
FIELD_GETTERS[EVENTS_V1.key] = _EVENT_V1_FIELDS
# Both groups' Events are stored in the core form, which their getters read.
SELECTED_FIELDS["Event"] = {
    "involvedObject": REF_FIELDS,
    "source": ("component",),
    "reason": None,
    "reportingComponent": None,
    "type": None,
}
