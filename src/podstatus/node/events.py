"""Events as the kubelet writes them: deduplicated, aggregated, rate limited, off the status path.

The correlation rules are client-go's event recorder's (``tools/record``),
reimplemented from their documented behaviour:

* **Dedup** - an event equal to one seen before in every field but time
  (source, involved object and field path, type, reason, message) is not a
  new object: the existing Event gets a PATCH of ``count``, ``lastTimestamp``.
* **Aggregation** - more than ``max_similar`` (10) events that differ only
  in message within ``similar_window`` (600 s) for the same object and reason
  become one Event whose message starts with ``(combined from similar events): ``.
* **Spam filter** - a token bucket per source and object: ``burst`` (25)
  events at once, then one per 300 s. Dropped events are counted, not queued.

:class:`EventRecorder` puts events on a bounded queue that a background
thread drains: recording never blocks (a full queue drops and counts), so a
slow or failing Events API never delays a pod status.

Which types are written is a choice (``events=``): ``"all"`` (the kubelet's:
Normal and Warning), ``"warning"`` (Warning only: a simulator of many nodes
seldom needs the Normal trail, which is most of its requests) or ``"none"``.
A filtered event is logged at debug and counted, never queued.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

import msgspec

from ..errors import ApiError, NotFoundError
from ..types import Pod
from .calls import SerialTasks

__all__ = [
    "DEFAULT_BURST",
    "DEFAULT_QPS",
    "EVENT_FILTERS",
    "EventCorrelator",
    "EventRecorder",
    "EventSink",
    "ObjectRef",
    "TokenBucket",
]

log = logging.getLogger(__name__)

# client-go's defaults (tools/record/events_cache.go): 25 at once, then one every 5 minutes.
DEFAULT_BURST = 25
DEFAULT_QPS = 1.0 / 300.0
DEFAULT_MAX_SIMILAR = 10
DEFAULT_SIMILAR_WINDOW = 600.0
DEFAULT_CACHE_SIZE = 4096
COMBINED_PREFIX = "(combined from similar events): "

NORMAL = "Normal"
WARNING = "Warning"

# events= of EventRecorder (and --events of the commands): which event types are written.
EVENT_FILTERS: dict[str, frozenset[str]] = {
    "all": frozenset({NORMAL, WARNING}),
    "warning": frozenset({WARNING}),
    "none": frozenset(),
}


class EventSink(Protocol):
    """The two Event requests the recorder makes (NodeClient has both)."""

    def create_event(self, namespace: str, event: Mapping[str, Any]) -> dict[str, Any]: ...

    def patch_event(self, namespace: str, name: str, patch: bytes) -> dict[str, Any]: ...


@dataclass(frozen=True)
class ObjectRef:
    """An Event's ``involvedObject``."""

    kind: str
    name: str
    namespace: str = ""
    uid: str = ""
    api_version: str = "v1"
    resource_version: str = ""
    field_path: str = ""

    @classmethod
    def for_pod(cls, pod: Pod, field_path: str | None = None) -> ObjectRef:
        return cls(
            kind="Pod",
            name=pod.name,
            namespace=pod.namespace,
            uid=pod.uid,
            resource_version=pod.metadata.resource_version or "",
            field_path=field_path or "",
        )

    @classmethod
    def for_node(cls, name: str, uid: str = "") -> ObjectRef:
        # The kubelet's node events have the node's name as UID and live in "default".
        return cls(kind="Node", name=name, namespace="", uid=uid or name)

    def event_namespace(self) -> str:
        return self.namespace or "default"

    def to_wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "name": self.name, "apiVersion": self.api_version}
        if self.namespace:
            out["namespace"] = self.namespace
        if self.uid:
            out["uid"] = self.uid
        if self.resource_version:
            out["resourceVersion"] = self.resource_version
        if self.field_path:
            out["fieldPath"] = self.field_path
        return out


def _timestamp(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class TokenBucket:
    """``burst`` tokens, refilled at ``qps`` per second; full at the start."""

    def __init__(self, burst: int, qps: float, now: float) -> None:
        self.burst = burst
        self.qps = qps
        self.tokens = float(burst)
        self.last = now

    def try_accept(self, now: float) -> bool:
        self.tokens = min(float(self.burst), self.tokens + max(0.0, now - self.last) * self.qps)
        self.last = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return True
        return False


class _LRU(OrderedDict[str, Any]):
    def __init__(self, size: int) -> None:
        super().__init__()
        self.size = size

    def get_fresh(self, key: str) -> Any:
        value = self.get(key)
        if value is not None:
            self.move_to_end(key)
        return value

    def put(self, key: str, value: Any) -> None:
        self[key] = value
        self.move_to_end(key)
        while len(self) > self.size:
            self.popitem(last=False)


@dataclass
class _Observed:
    name: str
    count: int
    first_timestamp: str


@dataclass
class _Similar:
    messages: set[str] = field(default_factory=set)
    last: float = 0.0


@dataclass(frozen=True)
class Correlated:
    """What to send: a new Event (``patch`` None) or a PATCH of the existing ``event['metadata']['name']``."""

    event: dict[str, Any]
    patch: bytes | None
    key: str


class EventCorrelator:
    """Pure correlation state (no I/O): decides create, patch, or drop for each event."""

    def __init__(
        self,
        *,
        burst: int = DEFAULT_BURST,
        qps: float = DEFAULT_QPS,
        max_similar: int = DEFAULT_MAX_SIMILAR,
        similar_window: float = DEFAULT_SIMILAR_WINDOW,
        cache_size: int = DEFAULT_CACHE_SIZE,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.burst = burst
        self.qps = qps
        self.max_similar = max_similar
        self.similar_window = similar_window
        self.clock = clock
        self._buckets = _LRU(cache_size)
        self._similar = _LRU(cache_size)
        self._observed = _LRU(cache_size)
        self._lock = threading.Lock()

    @staticmethod
    def _spam_key(event: Mapping[str, Any]) -> str:
        src, obj = event["source"], event["involvedObject"]
        return "\x00".join(
            (
                src.get("component", ""),
                src.get("host", ""),
                obj.get("kind", ""),
                obj.get("namespace", ""),
                obj.get("name", ""),
                obj.get("uid", ""),
                obj.get("apiVersion", ""),
            )
        )

    @classmethod
    def _similar_key(cls, event: Mapping[str, Any]) -> str:
        return "\x00".join(
            (
                cls._spam_key(event),
                event.get("type", ""),
                event.get("reason", ""),
                event.get("reportingComponent", ""),
                event.get("reportingInstance", ""),
            )
        )

    @classmethod
    def _event_key(cls, event: Mapping[str, Any]) -> str:
        obj = event["involvedObject"]
        return "\x00".join(
            (
                cls._spam_key(event),
                obj.get("fieldPath", ""),
                event.get("type", ""),
                event.get("reason", ""),
                event.get("message", ""),
            )
        )

    def correlate(self, event: dict[str, Any]) -> Correlated | None:
        """The request to make for ``event`` (a fresh Event body), or None when the spam filter drops it."""
        now = self.clock()
        with self._lock:
            # 1. Aggregation: many messages for one (object, reason) become one combined Event.
            similar_key = self._similar_key(event)
            record = self._similar.get_fresh(similar_key)
            if record is None or now - record.last > self.similar_window:
                record = _Similar()
            record.messages.add(event.get("message", ""))
            record.last = now
            self._similar.put(similar_key, record)
            if len(record.messages) >= self.max_similar:
                event = dict(event, message=COMBINED_PREFIX + event.get("message", ""))
                key = similar_key
            else:
                key = self._event_key(event)
            # 2. Dedup: a repeat patches the existing Event's count.
            seen = self._observed.get_fresh(key)
            patch: bytes | None = None
            if seen is not None:
                event = dict(event)
                event["metadata"] = dict(event["metadata"], name=seen.name)
                event["count"] = seen.count + 1
                event["firstTimestamp"] = seen.first_timestamp
                patch = msgspec.json.encode(
                    {
                        "count": event["count"],
                        "lastTimestamp": event["lastTimestamp"],
                        "message": event["message"],
                    }
                )
            # 3. Spam filter, per source and object, on every event (repeats too).
            spam_key = self._spam_key(event)
            bucket = self._buckets.get_fresh(spam_key)
            if bucket is None:
                bucket = TokenBucket(self.burst, self.qps, now)
                self._buckets.put(spam_key, bucket)
            if not bucket.try_accept(now):
                return None
            self._observed.put(
                key,
                _Observed(
                    name=event["metadata"]["name"],
                    count=event.get("count", 1),
                    first_timestamp=event["firstTimestamp"],
                ),
            )
            return Correlated(event=event, patch=patch, key=key)

    def renamed(self, key: str, name: str, count: int, first_timestamp: str) -> None:
        """The Event behind ``key`` is now ``name`` (the old one was gone: a fresh one was created)."""
        with self._lock:
            self._observed.put(key, _Observed(name=name, count=count, first_timestamp=first_timestamp))


@dataclass
class RecorderStats:
    created: int = 0
    patched: int = 0
    dropped_spam: int = 0
    dropped_queue: int = 0
    failed: int = 0
    # Not written: their type is filtered out (events="warning" or "none").
    filtered: int = 0


class EventRecorder:
    """Writes Events from a background thread. :meth:`event` never blocks and never raises.

    ``events`` says which types are written (:data:`EVENT_FILTERS`): ``"all"``
    (the default, the kubelet's), ``"warning"`` or ``"none"``.
    """

    def __init__(
        self,
        sink: Any,
        *,
        component: str = "podstatus-node",
        host: str = "",
        correlator: EventCorrelator | None = None,
        queue_size: int = 1000,
        clock: Callable[[], float] = time.time,
        writer: SerialTasks | None = None,
        events: str = "all",
    ) -> None:
        if events not in EVENT_FILTERS:
            raise ValueError(f"events must be one of {', '.join(EVENT_FILTERS)}, got {events!r}")
        self.sink = sink
        self.events = events
        self._written_types = EVENT_FILTERS[events]
        self.component = component
        self.host = host
        self.clock = clock
        self.correlator = correlator or EventCorrelator(clock=clock)
        self.stats = RecorderStats()
        self.queue_size = queue_size
        # A shared writer (NodeRuntime.events) keeps this recorder's events in order under its key.
        self._shared_writer = writer
        # Our own writer (one thread, made when the first event comes) when none is shared.
        self._writer: SerialTasks | None = writer or SerialTasks(workers=1, name="podstatus-events")
        self._key = f"events-{id(self):x}"
        self._idle = threading.Condition()
        self._busy = 0
        self._unsupported = False
        self._seq = 0

    # -- recording -------------------------------------------------------------------

    def event(self, ref: ObjectRef, type: str, reason: str, message: str) -> None:
        """Queue an Event about ``ref``. Drops (and counts) when the queue is full or its type is filtered."""
        filtered = self.events != "all" and type not in self._written_types
        log.log(
            logging.INFO if type == WARNING and not filtered else logging.DEBUG,
            "event%s object=%s/%s/%s type=%s reason=%s message=%s",
            f" not written (events={self.events})" if filtered else "",
            ref.kind,
            ref.namespace,
            ref.name,
            type,
            reason,
            message,
        )
        if filtered:
            self.stats.filtered += 1
            return
        now = self.clock()
        stamp = _timestamp(now)
        self._seq += 1
        body: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {
                # client-go's naming: the object's name and a hex timestamp (unique enough per object).
                "name": f"{ref.name}.{int(now * 1e9) + self._seq:x}",
                "namespace": ref.event_namespace(),
            },
            "involvedObject": ref.to_wire(),
            "reason": reason,
            "message": message[:1024],
            "source": {"component": self.component, "host": self.host},
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
            "type": type,
            "eventTime": None,
            "reportingComponent": self.component,
            "reportingInstance": self.host,
        }
        with self._idle:
            if self._busy >= self.queue_size:
                self.stats.dropped_queue += 1
                return
            self._busy += 1
        writer = self._writer
        if writer is None or not writer.submit(self._key, self._write_one, body):
            self.stats.dropped_queue += 1
            self._done()

    # -- the writer --------------------------------------------------------------------

    def start(self) -> None:
        if self._writer is None:
            self._writer = SerialTasks(workers=1, name="podstatus-events")

    def stop(self, timeout: float = 2.0) -> None:
        """Write what is queued (for at most ``timeout`` seconds), then stop writing."""
        self.flush(timeout)
        writer = self._writer
        if writer is not None and writer is not self._shared_writer:
            self._writer = None
            writer.close()

    def flush(self, timeout: float = 5.0) -> bool:
        """Wait until every queued event was handled; False on timeout."""
        deadline = time.monotonic() + timeout
        with self._idle:
            while self._busy:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self._writer is None:
                    return False
                self._idle.wait(remaining)
        return True

    def _done(self) -> None:
        with self._idle:
            self._busy -= 1
            self._idle.notify_all()

    def _write_one(self, body: dict[str, Any]) -> None:
        try:
            self._write(body)
        except Exception:
            self.stats.failed += 1
            log.exception("event writer failed reason=%s", body.get("reason"))
        finally:
            self._done()

    def _write(self, body: dict[str, Any]) -> None:
        if self._unsupported:
            return
        result = self.correlator.correlate(body)
        if result is None:
            self.stats.dropped_spam += 1
            log.debug("event dropped by the spam filter reason=%s", body["reason"])
            return
        event = result.event
        namespace = event["metadata"]["namespace"]
        try:
            if result.patch is not None:
                try:
                    self.sink.patch_event(namespace, event["metadata"]["name"], result.patch)
                    self.stats.patched += 1
                    return
                except NotFoundError:
                    # The Event expired or was deleted: start a new one, counting from here.
                    name = f"{event['involvedObject']['name']}.{time.time_ns():x}"
                    event = dict(event, metadata=dict(event["metadata"], name=name))
                    self.correlator.renamed(result.key, name, event["count"], event["firstTimestamp"])
            self.sink.create_event(namespace, event)
            self.stats.created += 1
        except AttributeError:
            # A client without the Events API: warn once, then record nothing.
            self._unsupported = True
            log.warning("the client cannot write Events; events are logged only client=%s", type(self.sink))
        except ApiError as err:
            self.stats.failed += 1
            log.warning("could not write event reason=%s error=%s", event.get("reason"), err)
