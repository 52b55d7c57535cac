"""Watches: a store's watch as a stream of event lines, with bookmarks, the 410 window and the
watch-list's initial events, as kube-apiserver's watch cache serves them."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

from ...errors import ApiError, GoneError, status_body
from ...requestcount import RequestCounter
from .. import discovery
from ..storage.errors import bad_request
from ..storage.objects import Event
from ..storage.store import Store
from ..storage.strategy import RESOURCES
from ..storage.watch import Watch
from .wire import JSON, TABLE_TYPE, Request, Response, encode, flag, int_param, wants_table

__all__ = ["POLL_SECONDS", "WatchEndpoint", "too_large_resource_version", "wait_for_resource_version"]

# How often an idle watch checks whether its client left or the server is stopping.
POLL_SECONDS = 1.0
# How long a read waits for a resourceVersion the store has not reached (the real watch cache's 3 s).
TOO_NEW_WAIT_SECONDS = 3.0


def too_large_resource_version(wanted: int, current: int) -> ApiError:
    message = f"Timeout: Too large resource version: {wanted}, current: {current}"
    status = status_body(
        504, "Timeout", message,
        causes=[{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
        retryAfterSeconds=1,
    )  # fmt: skip
    return ApiError(message, code=504, reason="Timeout", status=status)


def wait_for_resource_version(store: Store, value: str | None) -> None:
    """A read at a resourceVersion newer than the store's waits for it up to 3 s (the watch
    cache's blockTimeout), then answers 504 "Too large resource version"."""
    if value in (None, "", "0"):
        return
    try:
        wanted = int(str(value))
    except ValueError:
        raise bad_request(f'invalid resource version "{value}"') from None
    if not store.wait_for_resource_version(wanted, TOO_NEW_WAIT_SECONDS):
        raise too_large_resource_version(wanted, store.resource_version)


class WatchEndpoint:
    """``GET ...?watch=1`` and ``/watch/...``: the answer streams until the timeout, the client
    leaves, or the server stops (``stopping``)."""

    def __init__(
        self,
        store: Store,
        counter: RequestCounter,
        stopping: threading.Event,
        *,
        bookmark_interval: float,
        default_watch_timeout: float,
        poll_seconds: float = POLL_SECONDS,
    ) -> None:
        self.store = store
        self.counter = counter
        self._stopping = stopping
        self.bookmark_interval = bookmark_interval
        self.default_watch_timeout = default_watch_timeout
        # How long one step of a stream waits for an event: 0 for a front that waits on the
        # store's changes itself (then a step never blocks).
        self.poll_seconds = poll_seconds

    def serve(self, req: Request, resource: str, namespace: str | None) -> Response:
        self.counter.inc("watch")
        q = req.query
        if flag(q.get("sendInitialEvents")):
            # A watch-list waits for the store to reach its resourceVersion; past the wait the
            # stream carries one ERROR event. A plain watch from a future resourceVersion just
            # waits for the events after it, as on the real server.
            try:
                wait_for_resource_version(self.store, q.get("resourceVersion"))
            except ApiError as err:
                if err.code != 504:
                    raise
                line = b'{"type":"ERROR","object":' + encode(err.status) + b"}\n"
                return Response(200, stream=iter([line]))
        try:
            watch = self.store.watch(
                resource,
                namespace,
                resource_version=q.get("resourceVersion"),
                label_selector=q.get("labelSelector"),
                field_selector=q.get("fieldSelector"),
                send_initial_events=flag(q.get("sendInitialEvents")),
            )
        except GoneError as err:
            # As kube-apiserver's watch cache (newErrWatcher): 200, one ERROR event, the end.
            body = err.status or status_body(410, "Expired", err.message)
            return Response(200, stream=iter([b'{"type":"ERROR","object":' + encode(body) + b"}\n"]))
        timeout = int_param(q, "timeoutSeconds")
        table = wants_table(req, resource)
        stream = self._watch_stream(
            watch,
            resource,
            timeout=float(timeout) if timeout is not None else self.default_watch_timeout,
            bookmarks=bool(flag(q.get("allowWatchBookmarks"))),
            table=table,
            include_object=q.get("includeObject", ""),
        )
        return Response(
            200, content_type=TABLE_TYPE if table else JSON, stream=stream,
            stream_polls=self.poll_seconds == 0,
        )  # fmt: skip

    def _watch_stream(
        self,
        watch: Watch,
        resource: str,
        *,
        timeout: float,
        bookmarks: bool,
        table: bool,
        include_object: str,
    ) -> Iterator[bytes]:
        """Event lines; an empty chunk now and then lets the writer notice a departed client."""
        deadline = time.monotonic() + timeout
        last_bookmark = time.monotonic()
        first = True
        kind = RESOURCES[resource].kind
        api_version = RESOURCES[resource].api_version
        try:
            while True:
                if watch.initial_events_end_pending and not watch.in_initial_events:
                    watch.initial_events_end_pending = False
                    if bookmarks:
                        yield self._bookmark(
                            kind, watch.resource_version, initial_end=True, api_version=api_version
                        )
                        last_bookmark = time.monotonic()
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self._stopping.is_set():
                    return
                try:
                    event = watch.next(timeout=min(remaining, self.poll_seconds))
                except GoneError as err:
                    body = err.status or status_body(410, "Expired", err.message)
                    yield b'{"type":"ERROR","object":' + encode(body) + b"}\n"
                    return
                if event is None:
                    if self.store.closed:
                        return
                    if bookmarks and time.monotonic() - last_bookmark >= self.bookmark_interval:
                        yield self._bookmark(kind, watch.resource_version, api_version=api_version)
                        last_bookmark = time.monotonic()
                    else:
                        yield b""
                    continue
                yield self._event_line(event, resource, table, include_object, first)
                first = False
        finally:
            watch.close()

    def _event_line(
        self, event: Event, resource: str, table: bool, include_object: str, first: bool
    ) -> bytes:
        if table:
            data = discovery.table(
                resource, [event.stored], event.rv, include_object=include_object or "PartialObjectMetadata",
                now=self.store.now(), with_columns=first,
            )  # fmt: skip
            obj = encode(data)
        else:
            obj = event.stored.raw
        return b'{"type":"' + event.type.encode() + b'","object":' + obj + b"}\n"

    @staticmethod
    def _bookmark(kind: str, rv: int, *, initial_end: bool = False, api_version: str = "v1") -> bytes:
        meta: dict[str, Any] = {"resourceVersion": str(rv), "creationTimestamp": None}
        if initial_end:
            meta["annotations"] = {"k8s.io/initial-events-end": "true"}
        obj = {"kind": kind, "apiVersion": api_version, "metadata": meta}
        return encode({"type": "BOOKMARK", "object": obj}) + b"\n"
