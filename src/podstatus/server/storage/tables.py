"""The objects of every storage under one lock: what etcd and the watch cache are to kube-apiserver.

:class:`Tables` keeps, per storage key, the current version of each object (by namespace and
name), hands out the one global resourceVersion, records every change in its storage's
:class:`~.objects.History` (which watches read), and removes objects whose TTL ran out. It
knows no verbs and no kinds: the :class:`~.store.Store` built on it does.
"""

from __future__ import annotations

import builtins
import contextlib
import heapq
import logging
import threading
import time
from collections.abc import Callable, Iterator

import msgspec

from .listing import continue_expired, expired, list_key
from .objects import Event, History, Stored, WriteOptions
from .strategy import RESOURCES, ResourceInfo

__all__ = ["WATCH_CACHE_MAX_CHANGES", "WATCH_CACHE_MIN_CHANGES", "WATCH_CACHE_SECONDS", "Tables"]

log = logging.getLogger(__name__)

_encode = msgspec.json.encode

# kube-apiserver v1.37.2's watch cache (k8s.io/apiserver pkg/storage/cacher): a resource keeps at
# least its newest 100 changes and every change of the last 75 s (DefaultEventsHistoryWindow), up to
# 102,400. `podstatus serve` keeps the same window (docs/reliability.md, "Watch history").
WATCH_CACHE_MIN_CHANGES = 100
WATCH_CACHE_SECONDS = 75.0
WATCH_CACHE_MAX_CHANGES = 100 * 1024


class Tables:
    """Objects, the resourceVersion counter and each storage's history, behind one lock.

    Each storage keeps its own history of changes, as kube-apiserver's watch cache does: the
    last ``history_size`` of them and, with ``history_seconds``, also every change younger than
    that, up to ``max_history``; the changes are dated by ``clock`` (epoch seconds; tests may
    fake it). A read from a resourceVersion whose later changes are no longer all there gets
    410 Expired.
    """

    def __init__(
        self,
        *,
        history_size: int = 10000,
        history_seconds: float = 0.0,
        max_history: int = 100 * 1024,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if history_size < 1:
            raise ValueError("history_size must be positive")
        if max_history < history_size:
            raise ValueError("max_history must be at least history_size")
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)
        self._clock = clock
        self._rv = 0
        self._size = history_size
        self._history_seconds = history_seconds
        self._max_history = max_history
        # storage -> its recent changes
        self._histories: dict[str, History] = {}
        # storage -> namespace ("" when cluster-scoped) -> name -> current version
        self._objects: dict[str, dict[str, dict[str, Stored]]] = {}
        # (expiry, storage, namespace, name, resourceVersion) of objects with a TTL (Events)
        self._expiries: list[tuple[float, str, str, str, int]] = []
        self._closed = False
        # Set (lock held) while a dry-run write runs: commits answer without storing.
        self._dry_run = False

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

    def _bucket(self, info: ResourceInfo, namespace: str | None) -> dict[str, Stored]:
        objects = self._objects.setdefault(info.storage, {})
        key = (namespace or "") if info.namespaced else ""
        bucket = objects.get(key)
        if bucket is None:
            bucket = objects[key] = {}
        return bucket

    def _record(
        self, type_: str, info: ResourceInfo, namespace: str, stored: Stored, old: Stored | None
    ) -> None:
        # Caller holds the lock and has assigned stored.rv == self._rv + 1.
        self._rv = stored.rv
        history = self._histories.get(info.storage)
        if history is None:
            history = self._histories[info.storage] = History()
        # The store's clock dates the changes, so a test can age them (kube-apiserver: RecordTime).
        now = self._clock()
        history.append(Event(type_, info.storage, namespace, stored, old, stored.rv), now)
        history.trim(self._size, self._history_seconds, self._max_history, now)
        ttl = info.strategy.ttl
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

    def _state_at(
        self, info: ResourceInfo, namespace: str | None, rv: int, start: tuple[str, str] | None
    ) -> builtins.list[Stored]:
        """The objects as they were at ``rv`` (lock held): the current ones with the newer
        events of the history undone."""
        objects = {list_key(info, s): s for s in self._snapshot(info, namespace)}
        if rv < self._dropped(info):
            raise continue_expired(info, namespace, start)
        history = self._histories.get(info.storage)
        for event in reversed(history.after(rv) if history is not None else []):
            if namespace and info.namespaced and event.namespace != namespace:
                continue
            key = list_key(info, event.stored)
            if event.type == "ADDED" or event.old is None:
                objects.pop(key, None)
            else:
                objects[key] = event.old
        return [objects[k] for k in sorted(objects)]

    def _snapshot(self, info: ResourceInfo, namespace: str | None) -> builtins.list[Stored]:
        objects = self._objects.get(info.storage) or {}
        if info.namespaced and namespace:
            bucket = objects.get(namespace) or {}
            return [bucket[k] for k in sorted(bucket)]
        return [objects[ns][k] for ns in sorted(objects) for k in sorted(objects[ns])]

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
            raise expired(cursor, history.dropped)
        return history.after(cursor, limit)
