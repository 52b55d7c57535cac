"""A watch of pods over HTTP: one request's stream of events, ended by the caller or the server."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from types import TracebackType
from typing import Self

import msgspec
import urllib3

from ..errors import ApiError, InvalidObjectError, api_error_from_status
from ..types import Pod
from .wire import connection_error

__all__ = ["PodWatch"]

logger = logging.getLogger("podstatus.clients.http")

_POLL_STOP = 0.25  # how often a watch's stopper thread looks at the caller's stop event
_json_decode = msgspec.json.decode


class PodWatch(Iterator[tuple[str, Pod]]):
    """The events of one watch request: ``(type, pod)`` with type ADDED, MODIFIED or DELETED.

    ``resource_version`` is the last one seen (bookmarks included): pass it to the next
    ``watch_pods`` to resume. Close it (or use it as a context manager) to end the watch
    early; ``stop_event`` ends it from another thread, even while it waits for data.
    """

    def __init__(
        self,
        resp: urllib3.BaseHTTPResponse,
        path: str,
        resource_version: str | None,
        stop_event: threading.Event | None,
    ) -> None:
        self.resource_version = resource_version
        self._resp = resp
        self._path = path
        self._buffer = b""
        self._closed = False
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._stop = stop_event
        if stop_event is not None:
            threading.Thread(
                target=_stopper,
                args=(resp, stop_event, self._done, self._lock),
                name="podwatch-stop",
                daemon=True,
            ).start()

    def __iter__(self) -> Self:
        return self

    def __next__(self) -> tuple[str, Pod]:
        while True:
            line = self._next_line()
            if line is None:
                self.close()
                raise StopIteration
            if not line.strip():
                continue
            try:
                event = _json_decode(line)
                kind = event["type"]
                obj = event["object"]
            except (msgspec.DecodeError, KeyError, TypeError) as exc:
                self.close()
                raise ApiError(f"watch {self._path}: malformed event: {line[:200]!r}", code=200) from exc
            if kind == "ERROR":
                self.close()
                code = obj.get("code", 500) if isinstance(obj, dict) else 500
                raise api_error_from_status(
                    int(code), obj, default_message=f"watch {self._path}: error event"
                )
            meta = obj.get("metadata") if isinstance(obj, dict) else None
            if isinstance(meta, dict) and meta.get("resourceVersion"):
                self.resource_version = str(meta["resourceVersion"])
            if kind == "BOOKMARK":
                continue
            try:
                return kind, Pod.from_dict(obj)
            except InvalidObjectError as exc:
                self.close()
                raise ApiError(
                    f"watch {self._path}: invalid pod in a {kind} event: {exc}",
                    code=200,
                    reason="InvalidResponse",
                ) from exc

    def _next_line(self) -> bytes | None:
        while True:
            end = self._buffer.find(b"\n")
            if end >= 0:
                line = self._buffer[:end]
                self._buffer = self._buffer[end + 1 :]
                return line
            if self._closed or (self._stop is not None and self._stop.is_set()):
                return None
            try:
                chunk = self._resp.read1(64 * 1024)
            except (urllib3.exceptions.HTTPError, OSError, ValueError) as exc:
                if self._closed or (self._stop is not None and self._stop.is_set()):
                    return None
                self.close()
                raise connection_error(exc, "GET", f"{self._path} (watch)") from exc
            if not chunk:
                if self._buffer:
                    line, self._buffer = self._buffer, b""
                    return line
                return None
            self._buffer += chunk

    def close(self) -> None:
        """End the watch and drop its connection (unread events cannot be left on a reused one)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._done.set()
            try:
                self._resp.close()
                self._resp.release_conn()
            except Exception:  # closing must not fail
                logger.debug("closing a watch response failed", exc_info=True)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __del__(self) -> None:
        if not getattr(self, "_closed", True):
            self.close()


def _stopper(
    resp: urllib3.BaseHTTPResponse, stop_event: threading.Event, done: threading.Event, lock: threading.Lock
) -> None:
    """Wake a watch blocked on reading when the caller's ``stop_event`` is set."""
    while not stop_event.wait(_POLL_STOP):
        if done.is_set():
            return
    with lock:
        if done.is_set():
            return
        try:
            resp.shutdown()
        except Exception:  # already released or closed
            logger.debug("interrupting a watch failed", exc_info=True)
