"""The KubeClient of SPEC 2.4 bound in process to an embedded API server's store (no HTTP).

Requests go straight to :class:`podstatus.server.Store`, so they mean exactly
what the same request over HTTP means (same validation, preconditions,
resourceVersions and watch events) at a fraction of the cost: the simulator's
fast path, and a convenient fake for tests.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Mapping
from typing import Any

import msgspec

from ..errors import BadRequestError
from ..requestcount import RequestCounter
from ..server.http import EmbeddedApiServer
from ..server.registry.pods import bind
from ..server.storage.decoding import STRATEGIC_MERGE_PATCH
from ..server.storage.store import Store
from ..server.storage.watch import Watch
from ..types import Pod

__all__ = ["EmbeddedClient"]

# The store's names of the resources beside pods and nodes.
LEASES = "leases.coordination.k8s.io"
EVENTS = "events"

_decode = msgspec.json.decode


def _pod(value: Pod | None) -> Pod:
    # Pods in the store always carry their decoded form.
    assert value is not None
    return value


class EmbeddedClient:
    """``EmbeddedClient(store_or_server, *, counter=None)``: pods and nodes, in process.

    Raises the :class:`podstatus.ApiError` subclasses the HTTP server would
    answer with (NotFoundError, ConflictError, UnprocessableEntityError...).
    ``counter`` (a :class:`RequestCounter`) counts requests by verb.
    Pods come back as immutable :class:`~podstatus.types.Pod` values; nodes as
    fresh dicts.
    """

    def __init__(
        self,
        store_or_server: Store | EmbeddedApiServer,
        *,
        counter: RequestCounter | None = None,
        requests: RequestCounter | None = None,
    ) -> None:
        self.store = (
            store_or_server.store if isinstance(store_or_server, EmbeddedApiServer) else store_or_server
        )
        given = requests if requests is not None else counter
        self.counter = given if given is not None else RequestCounter()
        # The same name as HttpKubeClient's, so callers can treat both alike.
        self.requests = self.counter

    # -- SPEC 2.4 ----------------------------------------------------------------------

    def get_pod(self, namespace: str, name: str) -> Pod:
        self.counter.inc("get")
        return _pod(self.store.get("pods", namespace, name).pod)

    def patch_pod_status(
        self, namespace: str, name: str, patch: bytes, *, resource_version: str | None = None
    ) -> Pod:
        """Strategic merge patch of ``pods/status``; ``resource_version`` adds a precondition."""
        self.counter.inc("patch")
        body: bytes | dict[str, Any] = patch
        if resource_version is not None:
            try:
                data = _decode(patch)
            except msgspec.DecodeError as err:
                raise BadRequestError(f"error decoding patch: {err}") from None
            if not isinstance(data, dict):
                raise BadRequestError("a strategic merge patch must be a JSON object")
            meta = data.get("metadata")
            data["metadata"] = {
                **(meta if isinstance(meta, dict) else {}),
                "resourceVersion": resource_version,
            }
            body = data
        stored = self.store.patch("pods", namespace, name, body, STRATEGIC_MERGE_PATCH, subresource="status")
        return _pod(stored.pod)

    def delete_pod(
        self, namespace: str, name: str, *, grace_period_seconds: int | None = None, uid: str | None = None
    ) -> None:
        self.counter.inc("delete")
        self.store.delete("pods", namespace, name, grace_period_seconds=grace_period_seconds, uid=uid)

    # -- conveniences ------------------------------------------------------------------

    def create_pod(self, pod: Pod | dict[str, Any], namespace: str | None = None) -> Pod:
        """Create a pod (its namespace from ``namespace`` or its metadata, else ``default``)."""
        self.counter.inc("create")
        body = pod.to_dict() if isinstance(pod, Pod) else pod
        ns = namespace or (body.get("metadata") or {}).get("namespace") or "default"
        return _pod(self.store.create("pods", ns, body).pod)

    def update_pod(self, pod: Pod | dict[str, Any]) -> Pod:
        """Replace a pod (PUT; its status is left alone, as on the real server)."""
        self.counter.inc("update")
        body = pod.to_dict() if isinstance(pod, Pod) else pod
        meta = body.get("metadata") or {}
        return _pod(
            self.store.update("pods", meta.get("namespace") or "default", meta.get("name", ""), body).pod
        )

    def patch_pod(
        self,
        namespace: str,
        name: str,
        patch: bytes | dict[str, Any] | list[Any],
        patch_type: str = STRATEGIC_MERGE_PATCH,
        *,
        subresource: str | None = None,
    ) -> Pod:
        """Any patch of a pod or ``pods/status`` (``patch_type``: content type or strategic/merge/json)."""
        self.counter.inc("patch")
        return _pod(self.store.patch("pods", namespace, name, patch, patch_type, subresource=subresource).pod)

    def bind_pod(self, namespace: str, name: str, node_name: str) -> Pod:
        """Set the node of an unbound pod (``pods/binding``)."""
        self.counter.inc("create")
        return _pod(bind(self.store, namespace, name, node_name).pod)

    def list_pods(
        self,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int | None = None,
    ) -> tuple[list[Pod], str]:
        """The pods, and the resourceVersion to watch from (as ``HttpKubeClient.list_pods``).

        ``limit`` is accepted for the protocol's sake: the whole list comes at once,
        as HttpKubeClient gives it after following every page.
        """
        self.counter.inc("list")
        items, rv = self.store.list(
            "pods", namespace, label_selector=label_selector, field_selector=field_selector
        )
        return [_pod(s.pod) for s in items], str(rv)

    def watch_pods(
        self,
        namespace: str | None = None,
        *,
        resource_version: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        timeout: float | None = None,
        timeout_seconds: float | None = None,
        stop_event: threading.Event | None = None,
    ) -> Iterator[tuple[str, Pod]]:
        """``(event type, pod)`` pairs until ``timeout`` seconds pass (forever when None).

        Without ``resource_version`` the current pods come first as ``ADDED``.
        Raises :class:`podstatus.errors.GoneError` when the version is too old.
        """
        self.counter.inc("watch")
        watch = self.store.watch(
            "pods",
            namespace,
            resource_version=resource_version,
            label_selector=label_selector,
            field_selector=field_selector,
        )
        if timeout is None:
            timeout = timeout_seconds
        return self._events(watch, timeout, stop_event)

    @staticmethod
    def _events(
        watch: Watch, timeout: float | None, stop_event: threading.Event | None
    ) -> Iterator[tuple[str, Pod]]:
        deadline = None if timeout is None else time.monotonic() + timeout
        with watch:
            while True:
                if stop_event is not None and stop_event.is_set():
                    return
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return
                # Wake now and then to notice stop_event.
                wait = 0.5 if remaining is None else min(remaining, 0.5)
                event = watch.next(timeout=wait)
                if event is None:
                    if not watch.closed:
                        continue
                    return
                yield event.type, _pod(event.stored.pod)

    def create_node(self, node: Mapping[str, Any]) -> dict[str, Any]:
        self.counter.inc("create")
        return _decode(self.store.create("nodes", None, dict(node)).raw)

    def get_node(self, name: str) -> dict[str, Any]:
        self.counter.inc("get")
        return _decode(self.store.get("nodes", None, name).raw)

    def list_nodes(
        self, *, label_selector: str | None = None, field_selector: str | None = None
    ) -> tuple[list[dict[str, Any]], str]:
        """The nodes and the list's resourceVersion."""
        self.counter.inc("list")
        items, rv = self.store.list("nodes", label_selector=label_selector, field_selector=field_selector)
        return [_decode(s.raw) for s in items], str(rv)

    def patch_node(
        self, name: str, patch: bytes | dict[str, Any] | list[Any], patch_type: str = STRATEGIC_MERGE_PATCH
    ) -> dict[str, Any]:
        """Patch the Node itself (labels, ``spec.taints``, ``spec.unschedulable``); its status stays."""
        self.counter.inc("patch")
        return _decode(self.store.patch("nodes", None, name, patch, patch_type).raw)

    def patch_node_status(
        self, name: str, patch: bytes | dict[str, Any] | list[Any], patch_type: str = STRATEGIC_MERGE_PATCH
    ) -> dict[str, Any]:
        self.counter.inc("patch")
        stored = self.store.patch("nodes", None, name, patch, patch_type, subresource="status")
        return _decode(stored.raw)

    def delete_node(self, name: str) -> None:
        self.counter.inc("delete")
        self.store.delete("nodes", None, name)

    # -- leases and events ---------------------------------------------------------------

    def get_lease(self, namespace: str, name: str) -> dict[str, Any]:
        self.counter.inc("get")
        return _decode(self.store.get(LEASES, namespace, name).raw)

    def create_lease(self, namespace: str, lease: Mapping[str, Any]) -> dict[str, Any]:
        self.counter.inc("create")
        return _decode(self.store.create(LEASES, namespace, dict(lease)).raw)

    def update_lease(self, namespace: str, name: str, lease: Mapping[str, Any]) -> dict[str, Any]:
        """Replace the Lease; its ``metadata.resourceVersion`` is a precondition (ConflictError)."""
        self.counter.inc("update")
        return _decode(self.store.update(LEASES, namespace, name, dict(lease)).raw)

    def create_event(self, namespace: str, event: Mapping[str, Any]) -> dict[str, Any]:
        """Create a core/v1 Event."""
        self.counter.inc("create")
        return _decode(self.store.create(EVENTS, namespace, dict(event)).raw)

    def patch_event(
        self,
        namespace: str,
        name: str,
        patch: bytes | dict[str, Any] | list[Any],
        patch_type: str = STRATEGIC_MERGE_PATCH,
    ) -> dict[str, Any]:
        """Patch a core/v1 Event (a repeat: ``count``, ``lastTimestamp``, ``series``)."""
        self.counter.inc("patch")
        return _decode(self.store.patch(EVENTS, namespace, name, patch, patch_type).raw)
