"""What the generic store keeps: object versions (:class:`Stored`), changes (:class:`Event`) and
each storage's recent changes (:class:`History`, kube-apiserver's watch cache of one resource).

A stored version is its JSON and a few decoded fields; nothing here knows a kind.
"""

from __future__ import annotations

import bisect
import builtins
import functools
from dataclasses import dataclass, field
from typing import Any

import msgspec

from ...types import Pod
from ..selectors import SELECTED_FIELDS

__all__ = ["FIELD_VALIDATION", "Event", "History", "Stored", "WriteOptions"]

_encode = msgspec.json.encode
_decode = msgspec.json.decode


class _Head(msgspec.Struct):
    """The metadata of an object's JSON, decoded without the rest."""

    metadata: dict[str, Any] = {}


class _MetaView(msgspec.Struct):
    """What a :class:`Stored` keeps of the metadata (the rest of the JSON is skipped, not built)."""

    name: Any = msgspec.UNSET
    namespace: Any = msgspec.UNSET
    uid: Any = msgspec.UNSET
    labels: Any = msgspec.UNSET


def _given(view: msgspec.Struct) -> dict[str, Any]:
    return {k: v for k in view.__struct_fields__ if (v := getattr(view, k)) is not msgspec.UNSET}


@functools.cache
def _view_decoder(kind: str) -> msgspec.json.Decoder[Any]:
    """A decoder of only what a Stored of ``kind`` keeps: its metadata head and selected fields."""
    fields: list[tuple[str, Any, Any]] = [("metadata", _MetaView, msgspec.field(default_factory=_MetaView))]
    for key, below in SELECTED_FIELDS.get(kind, {}).items():
        if below is None:
            fields.append((key, Any, msgspec.UNSET))
        else:
            part = msgspec.defstruct(f"_{kind}_{key}", [(k, Any, msgspec.UNSET) for k in below])
            fields.append((key, part | None, msgspec.UNSET))
    return msgspec.json.Decoder(msgspec.defstruct(f"_{kind}View", fields))


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

    @classmethod
    def from_json(cls, kind: str, raw: bytes, typed: bool, rv: int) -> Stored:
        """The version whose JSON is ``raw`` (an object of ``kind``), without decoding it whole:
        only the metadata head and the selected fields are read (the write that made ``raw``
        decoded its object once already)."""
        view = _view_decoder(kind).decode(raw)
        obj: dict[str, Any] = {"kind": kind, "metadata": _given(view.metadata)}
        for key in SELECTED_FIELDS.get(kind, {}):
            value = getattr(view, key)
            if value is not msgspec.UNSET and value is not None:
                obj[key] = _given(value) if isinstance(value, msgspec.Struct) else value
        return cls(obj, raw, typed, rv)

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


class History:
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
