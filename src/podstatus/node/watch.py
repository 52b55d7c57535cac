"""``PodWatcher``: list+watch pods with a field selector and feed a handler; relists on 410 Gone."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from typing import Any, Protocol

from ..errors import ApiError, GoneError
from ..protocols import NodeClient
from ..types import Pod
from .logs import log_fields

__all__ = ["PodEventHandler", "PodWatcher"]

log = logging.getLogger(__name__)


def _log(level: int, message: str, **fields: Any) -> None:
    log_fields(log, level, message, **fields)


class PodEventHandler(Protocol):
    """What a watch feeds: a full list, then one event at a time."""

    def relist(self, pods: Iterable[Pod]) -> None: ...

    def handle_pod_event(self, kind: str, pod: Pod) -> None: ...


class PodWatcher:
    """List+watch pods with a field selector and feed a handler; relists on 410 Gone.

    ``handler`` has ``relist(pods)`` and ``handle_pod_event(kind, pod)``.
    """

    def __init__(
        self, client: NodeClient, handler: PodEventHandler, field_selector: str, *, timeout: float = 300.0
    ) -> None:
        self.client = client
        self.handler = handler
        self.field_selector = field_selector
        self.timeout = timeout
        self.errors = 0
        self.relists = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="podstatus-node-watch", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)
        self._thread = None

    def _run(self) -> None:
        resource_version: str | None = None
        delay = 0.2
        while not self._stop.is_set():
            try:
                if resource_version is None:
                    pods, resource_version = self.client.list_pods(field_selector=self.field_selector)
                    self.relists += 1
                    self.handler.relist(pods)
                    # The handler keeps lean copies; the list as decoded (managedFields and
                    # all) must not live on for as long as the watch that follows it.
                    del pods
                for kind, pod in self.client.watch_pods(
                    field_selector=self.field_selector,
                    resource_version=resource_version,
                    timeout_seconds=max(1, int(self.timeout)),
                    stop_event=self._stop,
                ):
                    if self._stop.is_set():
                        return
                    resource_version = pod.metadata.resource_version or resource_version
                    if kind in ("BOOKMARK", "ERROR"):
                        continue
                    self.handler.handle_pod_event(kind, pod)
                delay = 0.2
            except GoneError:
                _log(logging.INFO, "pod watch expired (410); listing again", selector=self.field_selector)
                resource_version = None
            except ApiError as err:
                self.errors += 1
                _log(logging.WARNING, "pod watch failed", retryIn=f"{delay:.1f}s", error=err)
                self._stop.wait(delay)
                delay = min(delay * 2, 5.0)
                resource_version = None
            except Exception:
                self.errors += 1
                log.exception("pod watch error")
                self._stop.wait(delay)
                delay = min(delay * 2, 5.0)
                resource_version = None
