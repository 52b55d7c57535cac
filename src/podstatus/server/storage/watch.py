"""Watches: each reads its storage's :class:`~.objects.History` at its own pace (fan-out costs
nothing per watcher on the write path), filtered by namespace and selectors as kube-apiserver's
watch cache filters them.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import msgspec

from ..selectors import FieldSelector, LabelSelector, SelectorError
from .errors import bad_request
from .objects import Event, Stored
from .strategy import ResourceInfo

if TYPE_CHECKING:
    from .tables import Tables

__all__ = ["Watch", "matches", "parse_selectors"]

_encode = msgspec.json.encode


def parse_selectors(
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


def matches(obj: dict[str, Any], ls: LabelSelector | None, fs: FieldSelector | None) -> bool:
    if ls is not None and not ls.matches((obj.get("metadata") or {}).get("labels")):
        return False
    return fs is None or fs.matches(obj)


class Watch:
    """A watch on one resource: :meth:`next` gives events one by one.

    Events are ``Event`` objects (``type``, ``stored``, ``rv``); when an object
    stops (starts) matching the selectors the watch gets DELETED (ADDED), as
    from the real server. ``next`` raises :class:`~podstatus.errors.GoneError`
    when the watch fell behind the store's history.
    """

    def __init__(
        self,
        store: Tables,
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
        now = matches(event.stored.sel, self._ls, self._fs)
        before = (
            event.old is not None and event.type == "MODIFIED" and matches(event.old.sel, self._ls, self._fs)
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
