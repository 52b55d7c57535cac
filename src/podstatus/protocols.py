"""The one declaration of each protocol the status manager and the node agent are given.

The kubelet hands its status manager narrow interfaces (a pod manager, a
pod-deletion-safety provider, a client) and the node is handed the status
manager as one too. Each is declared here once; every implementation the
library ships is checked against it by mypy in :mod:`podstatus.conformance`.

This module sits just above :mod:`podstatus.types`: it imports nothing else
of the package, so anything may depend on it.
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Iterable, Iterator, Mapping
from typing import Any, NamedTuple, Protocol, runtime_checkable

from .types import ContainerID, Pod, PodCondition, PodStatus

__all__ = [
    "PATCH_CONTENT_TYPE",
    "KubeClient",
    "NodeClient",
    "PodDeletionSafety",
    "PodManager",
    "PodUpdateNotifier",
    "StatusAcceptance",
    "StatusManager",
    "VersionedKubeClient",
]

# The content type of the patches ``patch_pod_status`` sends.
PATCH_CONTENT_TYPE = "application/strategic-merge-patch+json"


# -- what the status manager is given (SPEC 2.4) ------------------------------------------


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
    :class:`~podstatus.clients.fake.FakeNodeClient` (``podstatus.conformance`` proves it).
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


@runtime_checkable
class PodManager(Protocol):
    """What the status manager needs to know about the node's pods (SPEC 2.4 ``pod_manager``)."""

    def get_pod_by_uid(self, uid: str) -> Pod | None:
        """The (non-mirror) pod with that UID."""
        ...

    def get_mirror_pod_by_pod(self, pod: Pod) -> Pod | None:
        """The mirror pod of a static pod."""
        ...

    def translate_pod_uid(self, uid: str) -> str:
        """A mirror pod's UID becomes its static pod's UID; any other UID is returned unchanged."""
        ...

    def get_uid_translations(self) -> tuple[dict[str, str], dict[str, str]]:
        """``(pod_to_mirror, mirror_to_pod)``.

        Every static pod UID maps to its mirror pod's UID, or to ``""`` when it
        has no mirror pod yet; every known mirror UID maps to its static pod's UID.
        """
        ...


@runtime_checkable
class PodDeletionSafety(Protocol):
    """Tells the status manager when a terminated pod may be deleted from the API server."""

    def pod_resources_are_reclaimed(self, pod: Pod, status: PodStatus) -> bool:
        """True when the pod can safely be deleted: nothing of it is left on the node."""
        ...

    def pod_could_have_running_containers(self, pod: Pod) -> bool:
        """True while any container of the pod may still run."""
        ...


class PodUpdateNotifier(Protocol):
    """Told of every status the manager accepts (upstream's PodUpdateNotifier).

    Called after the manager's lock is released, on the thread of the setter.
    """

    def on_pod_updated(self, pod: Pod, status: PodStatus, is_added: bool) -> None: ...

    def on_pod_removed(self, pod: Pod) -> None: ...


# -- what the node agent is given -----------------------------------------------------------


class StatusAcceptance(NamedTuple):
    """What the status manager did with one status given to ``accept_pod_status``.

    ``status``: the status now cached for the pod (None: none); ``changed``: whether this
    call changed it; ``refused``: why the manager refused it (an impossible container state
    transition, SPEC 4.2), None when it did not. The node's pod controller turns a refusal
    into the provider's ``ProviderError`` Event, so the rule is checked once, by the manager.
    """

    status: PodStatus | None
    changed: bool
    refused: str | None = None


@runtime_checkable
class StatusManager(Protocol):
    """The status manager as a node agent uses it (the kubelet's ``status.Manager`` interface).

    :class:`podstatus.Manager` implements it; :class:`podstatus.fakes.FakeStatusManager`
    is the fake a test hands an agent instead (the kubelet's ``fake_status_manager.go``).
    """

    def start(self) -> None: ...

    def stop(self, timeout: float | None = None) -> None: ...

    def get_pod_status(self, uid: str) -> PodStatus | None: ...

    def set_pod_status(self, pod: Pod, status: PodStatus) -> None: ...

    def accept_pod_status(self, pod: Pod, status: PodStatus) -> StatusAcceptance:
        """``set_pod_status``, answering what became of the status (and why it was refused)."""
        ...

    def set_container_readiness(self, pod_uid: str, container_id: str | ContainerID, ready: bool) -> None: ...

    def set_container_startup(self, pod_uid: str, container_id: str | ContainerID, started: bool) -> None: ...

    def terminate_pod(self, pod: Pod) -> None: ...

    def remove_orphaned_statuses(self, pod_uids: Collection[str] | Iterable[str]) -> None: ...

    def sync_batch(self, all: bool = False) -> int: ...

    def pending_count(self) -> int:
        """Pods whose newest cached status is not known to be on the server."""
        ...

    # -- resize conditions (v1.37) --

    def get_pod_resize_conditions(self, pod_uid: str) -> list[PodCondition]: ...

    def set_pod_resize_pending_condition(
        self, pod_uid: str, reason: str, message: str = "", observed_generation: int = 0
    ) -> bool: ...

    def set_pod_resize_in_progress_condition(
        self, pod_uid: str, reason: str = "", message: str = "", observed_generation: int = 0
    ) -> tuple[int, bool]: ...

    def clear_pod_resize_pending_condition(self, pod_uid: str, resolution: str = "") -> None: ...

    def clear_pod_resize_in_progress_condition(self, pod_uid: str) -> tuple[int, bool]: ...

    def is_pod_resize_deferred(self, pod_uid: str) -> bool: ...

    def is_pod_resize_infeasible(self, pod_uid: str) -> bool: ...

    def backfill_pod_resize_conditions(self, pods: Iterable[Pod]) -> None: ...
