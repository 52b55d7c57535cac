"""What the status manager needs from a Kubernetes API client (SPEC 2.4), and request counting."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Protocol, runtime_checkable

from ..types import Pod

__all__ = [
    "PATCH_CONTENT_TYPE",
    "VERBS",
    "KubeClient",
    "NodeClient",
    "RequestCounter",
    "VersionedKubeClient",
]

log = logging.getLogger(__name__)

# The content type of the patches ``patch_pod_status`` sends.
PATCH_CONTENT_TYPE = "application/strategic-merge-patch+json"

# The verbs a RequestCounter always reports, zero or not (the API server's own names).
VERBS: tuple[str, ...] = ("get", "list", "watch", "create", "update", "patch", "delete")


@runtime_checkable
class KubeClient(Protocol):
    """The three pod requests the status manager makes.

    Every failure, network errors and timeouts included, raises a
    :class:`podstatus.ApiError` subclass, never a bare library exception.
    """

    def get_pod(self, namespace: str, name: str) -> Pod:
        """The pod; raises :class:`podstatus.NotFoundError` when it is absent."""
        ...

    def patch_pod_status(self, namespace: str, name: str, patch: bytes) -> Pod:
        """Send a JSON strategic merge patch to the ``pods/status`` subresource.

        ``patch`` is the request body (content type
        ``application/strategic-merge-patch+json``). A ``metadata.uid`` in it
        is a precondition: the server answers :class:`podstatus.ConflictError`
        when the pod's UID differs. Returns the pod after the patch.
        """
        ...

    def delete_pod(
        self, namespace: str, name: str, *, grace_period_seconds: int | None, uid: str | None
    ) -> None:
        """Delete the pod; ``uid`` is a precondition (ConflictError when the pod's UID differs)."""
        ...


@runtime_checkable
class VersionedKubeClient(KubeClient, Protocol):
    """A :class:`KubeClient` that can write with optimistic concurrency (SPEC 6 fast path).

    Every client this library ships implements it. ``patch_pod_status``
    takes an optional keyword ``resource_version``: when given, the patch
    sent carries ``metadata.resourceVersion`` as a precondition, and the
    server answers :class:`podstatus.ConflictError` when the pod has changed
    since that version. That lets the manager patch from the last status it
    knows to be on the server without a GET first, and read again only on a
    conflict. Without it, the request is exactly the plain protocol's.
    """

    def patch_pod_status(
        self, namespace: str, name: str, patch: bytes, *, resource_version: str | None = None
    ) -> Pod:
        """As :meth:`KubeClient.patch_pod_status`, with an optional resourceVersion precondition."""
        ...


@runtime_checkable
class NodeClient(VersionedKubeClient, Protocol):
    """Everything a node agent asks of the API server: pods, its Node, its Lease, Events.

    Objects other than pods are plain dicts in their wire form (a fresh dict per
    answer, the caller's to keep). Failures raise :class:`podstatus.ApiError`
    subclasses built from the server's ``Status`` (NotFoundError, ConflictError,
    UnprocessableEntityError, GoneError...). Implemented by
    :class:`~podstatus.clients.http.HttpKubeClient`,
    :class:`~podstatus.clients.embedded.EmbeddedClient` and
    :class:`~podstatus.clients.fake.FakeNodeClient`.
    """

    # -- pods ----------------------------------------------------------------------------

    def create_pod(self, pod: Any, namespace: str | None = None) -> Pod:
        """Create a pod (a :class:`Pod` or a wire dict) in ``namespace``, else its own, else ``default``."""
        ...

    def list_pods(
        self,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int | None = None,
    ) -> tuple[list[Pod], str]:
        """The pods (all namespaces when ``namespace`` is None) and the list's resourceVersion."""
        ...

    def watch_pods(
        self,
        namespace: str | None = None,
        *,
        field_selector: str | None = None,
        label_selector: str | None = None,
        resource_version: str | None = None,
        timeout_seconds: int | None = None,
        stop_event: threading.Event | None = None,
    ) -> Iterator[tuple[str, Pod]]:
        """``(event type, pod)`` pairs; raises :class:`podstatus.GoneError` when the version is too old."""
        ...

    # -- nodes ---------------------------------------------------------------------------

    def create_node(self, node: Mapping[str, Any]) -> dict[str, Any]: ...

    def get_node(self, name: str) -> dict[str, Any]: ...

    def list_nodes(
        self, *, label_selector: str | None = None, field_selector: str | None = None
    ) -> tuple[list[dict[str, Any]], str]:
        """The nodes and the list's resourceVersion."""
        ...

    def patch_node(self, name: str, patch: bytes) -> dict[str, Any]:
        """Strategic merge patch of the Node (metadata, ``spec.taints``, ``spec.unschedulable``)."""
        ...

    def patch_node_status(self, name: str, patch: bytes) -> dict[str, Any]:
        """Strategic merge patch of ``nodes/status`` (conditions merge by type, addresses by type)."""
        ...

    def delete_node(self, name: str) -> None: ...

    # -- leases (coordination.k8s.io/v1) ---------------------------------------------------

    def get_lease(self, namespace: str, name: str) -> dict[str, Any]: ...

    def create_lease(self, namespace: str, lease: Mapping[str, Any]) -> dict[str, Any]: ...

    def update_lease(self, namespace: str, name: str, lease: Mapping[str, Any]) -> dict[str, Any]:
        """PUT the Lease; a ``metadata.resourceVersion`` in it is a precondition (ConflictError when stale)."""
        ...

    # -- events (core/v1) ----------------------------------------------------------------

    def create_event(self, namespace: str, event: Mapping[str, Any]) -> dict[str, Any]: ...

    def patch_event(self, namespace: str, name: str, patch: bytes) -> dict[str, Any]:
        """Strategic merge patch of a core/v1 Event (``count``, ``lastTimestamp``, ``series``)."""
        ...


RequestCallback = Callable[[str], None]


class RequestCounter:
    """Thread-safe request counts by verb, with callbacks (for example Prometheus counters).

    Verbs are the API server's: ``get``, ``list``, ``watch``, ``create``,
    ``update``, ``patch``, ``delete``; others are counted too, under their own name.
    """

    def __init__(self, callback: RequestCallback | None = None) -> None:
        self._lock = threading.Lock()
        self._counts: dict[str, int] = dict.fromkeys(VERBS, 0)
        self._callbacks: list[RequestCallback] = [callback] if callback is not None else []

    def add_callback(self, callback: RequestCallback) -> None:
        """Call ``callback(verb)`` after every counted request."""
        with self._lock:
            self._callbacks.append(callback)

    def inc(self, verb: str, n: int = 1) -> None:
        """Count ``n`` requests (callbacks run once per request)."""
        with self._lock:
            self._counts[verb] = self._counts.get(verb, 0) + n
            callbacks = tuple(self._callbacks)
        for callback in callbacks:
            try:
                for _ in range(n):
                    callback(verb)
            except Exception:
                # Metrics must never fail a request.
                log.exception("request counter callback failed for verb %s", verb)

    def get(self, verb: str) -> int:
        with self._lock:
            return self._counts.get(verb, 0)

    def snapshot(self) -> dict[str, int]:
        """A copy of the counts: every standard verb, plus any other verb seen."""
        with self._lock:
            return dict(self._counts)

    def total(self) -> int:
        with self._lock:
            return sum(self._counts.values())

    def reset(self) -> None:
        with self._lock:
            self._counts = dict.fromkeys(VERBS, 0)
