"""The provider protocol: what runs a node's pods, as the node agent sees it.

Modelled on virtual-kubelet's ``PodLifecycleHandler`` and node provider. A
provider runs pods (containers, VMs, batch jobs, make-believe) and *reports*;
it never talks to the API server. The :class:`~podstatus.node.agent.NodeAgent`
owns every write: pod status through the status manager, Events through the
recorder, the Node and its Lease through the heartbeat.

Every method may be a plain function or an ``async def``; the agent runs
coroutines on an event loop thread of its own and plain calls on a thread
pool, each with a timeout, so a provider that hangs delays only itself. A
provider whose plain methods never block (in-memory state, like the simulated
one) may say so with a class attribute ``blocking = False``: the agent then
calls them on its own thread, without the pool hop and without a timeout,
which is cheaper with thousands of pods.

A provider reports pod status either by being polled (:meth:`get_pod_status`
every few seconds) or, better, through the :class:`PodNotifier` the agent hands
to an optional ``notify_pods(notifier)`` method: then every change reaches the
status manager at once.

:class:`FakeProvider` (below) is the fake of this protocol, for tests.
"""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from ..types import (
    ContainerState,
    ContainerStateTerminated,
    ContainerStateWaiting,
    ContainerStatus,
    Pod,
    PodStatus,
)

__all__ = [
    "FakeProvider",
    "NodeDescription",
    "NodeProvider",
    "PodLifecycleHandler",
    "PodNotifier",
    "Provider",
]


DEFAULT_ADDRESSES: tuple[Mapping[str, str], ...] = ({"type": "InternalIP", "address": "10.20.0.1"},)


@dataclass(frozen=True)
class NodeDescription:
    """What a provider says its node is. ``node_info`` is merged over the agent's defaults."""

    capacity: Mapping[str, str] = field(
        default_factory=lambda: {"cpu": "64", "memory": "256Gi", "pods": "110"}
    )
    allocatable: Mapping[str, str] | None = None  # None: the same as capacity
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Mapping[str, Any], ...] = ()
    # The default: an agent given a NodeNetwork puts the node's own InternalIP in its place.
    addresses: tuple[Mapping[str, str], ...] = DEFAULT_ADDRESSES
    node_info: Mapping[str, str] = field(default_factory=dict)

    def allocatable_or_capacity(self) -> Mapping[str, str]:
        return self.allocatable if self.allocatable is not None else self.capacity

    def pods_capacity(self) -> int | None:
        """The ``pods`` allocatable, or None when the provider sets no limit."""
        value = self.allocatable_or_capacity().get("pods")
        try:
            return int(value) if value is not None else None
        except ValueError:
            return None


class PodNotifier(Protocol):
    """Given to a provider by the agent: how a provider reports without writing anything itself."""

    def pod_status(self, pod_uid: str, status: PodStatus) -> None:
        """The pod's status changed (phase, container statuses, pod IP; the agent adds the conditions)."""
        ...

    def event(
        self, pod_uid: str, type: str, reason: str, message: str, field_path: str | None = None
    ) -> None:
        """Something happened to the pod that users should see in ``kubectl describe`` (Normal/Warning)."""
        ...


@runtime_checkable
class PodLifecycleHandler(Protocol):
    """Runs pods. Each method may be ``async def``. Errors are raised, never returned."""

    def create_pod(self, pod: Pod) -> Awaitable[None] | None:
        """Start running ``pod``. Called once per pod UID after admission."""
        ...

    def update_pod(self, pod: Pod) -> Awaitable[None] | None:
        """The pod's spec or metadata changed (labels, annotations, an ephemeral container)."""
        ...

    def delete_pod(self, pod: Pod, grace_period_seconds: int) -> Awaitable[None] | None:
        """Stop the pod within ``grace_period_seconds``; return once its containers have stopped."""
        ...

    def get_pod_status(self, pod: Pod) -> PodStatus | Awaitable[PodStatus | None] | None:
        """The pod's current status, or None when the provider does not run it."""
        ...

    def get_pods(self) -> Iterable[Pod] | Awaitable[Iterable[Pod]]:
        """The pods the provider runs now (after a restart: what it still runs)."""
        ...


@runtime_checkable
class NodeProvider(Protocol):
    """Describes the node and says whether it is healthy."""

    def ping(self) -> Awaitable[None] | None:
        """Raise when the back end is unhealthy: the node then reports Ready=False."""
        ...

    def node_description(self) -> NodeDescription | Awaitable[NodeDescription]:
        """Capacity, allocatable, labels, taints, addresses, node info."""
        ...


class Provider(PodLifecycleHandler, NodeProvider, Protocol):
    """A pod lifecycle handler and a node provider in one (the usual case)."""


# --- the fake ------------------------------------------------------------------------


def pending_status(pod: Pod) -> PodStatus:
    """Pending, every container waiting in ContainerCreating: what a pod looks like before it runs."""
    waiting = ContainerState(waiting=ContainerStateWaiting(reason="ContainerCreating"))
    return PodStatus(
        phase="Pending",
        container_statuses=tuple(
            ContainerStatus(name=c.name, image=c.image or "", ready=False, restart_count=0, state=waiting)
            for c in pod.spec.containers
        ),
    )


class FakeProvider:
    """A :class:`Provider` for tests: records calls, reports what the test tells it to.

    ``set_status(uid, status)`` stores a status and, once the agent has called
    ``notify_pods``, reports it at once. ``fail(method, exc)`` makes a method
    raise; ``hang(method)`` makes it block until ``release()``; ``healthy``
    drives :meth:`ping`; ``description`` is what :meth:`node_description` gives.
    """

    def __init__(self, description: NodeDescription | None = None, *, notify: bool = True) -> None:
        self.description = description or NodeDescription()
        self.healthy = True
        self.calls: list[tuple[str, str]] = []  # (method, pod key or "")
        self.running: dict[str, Pod] = {}
        self.statuses: dict[str, PodStatus] = {}
        self.notifier: PodNotifier | None = None
        self._notify = notify
        self._failures: dict[str, BaseException] = {}
        self._hangs: set[str] = set()
        self._released = threading.Event()
        self._lock = threading.Lock()

    # -- test controls -------------------------------------------------------------

    def fail(self, method: str, exc: BaseException | None) -> None:
        with self._lock:
            if exc is None:
                self._failures.pop(method, None)
            else:
                self._failures[method] = exc

    def hang(self, method: str) -> None:
        with self._lock:
            self._hangs.add(method)
            self._released.clear()

    def release(self) -> None:
        with self._lock:
            self._hangs.clear()
        self._released.set()

    def set_status(self, uid: str, status: Any) -> None:
        self.statuses[uid] = status
        if self.notifier is not None:
            self.notifier.pod_status(uid, status)

    def called(self, method: str) -> list[str]:
        with self._lock:
            return [key for m, key in self.calls if m == method]

    def _enter(self, method: str, key: str = "") -> None:
        with self._lock:
            self.calls.append((method, key))
            exc = self._failures.get(method)
            hang = method in self._hangs
        if hang:
            self._released.wait(60)
        if exc is not None:
            raise exc

    # -- the protocol --------------------------------------------------------------

    def notify_pods(self, notifier: PodNotifier) -> None:
        if not self._notify:
            # As a provider that cannot push: the agent polls get_pod_status instead.
            raise NotImplementedError("this provider is polled")
        self.notifier = notifier

    def create_pod(self, pod: Pod) -> None:
        self._enter("create_pod", pod.key())
        self.running[pod.uid] = pod
        self.statuses.setdefault(pod.uid, pending_status(pod))

    def update_pod(self, pod: Pod) -> None:
        self._enter("update_pod", pod.key())
        if pod.uid in self.running:
            self.running[pod.uid] = pod

    def delete_pod(self, pod: Pod, grace_period_seconds: int) -> None:
        self._enter("delete_pod", pod.key())
        self.running.pop(pod.uid, None)
        status = self.statuses.get(pod.uid)
        if status is not None and status.container_statuses:
            stopped = tuple(
                cs.replace(
                    ready=False,
                    state=ContainerState(terminated=_terminated(cs, exit_code=0, reason="Completed")),
                )
                if cs.state.running is not None
                else cs
                for cs in status.container_statuses
            )
            self.statuses[pod.uid] = status.replace(container_statuses=stopped)

    def get_pod_status(self, pod: Pod) -> PodStatus | None:
        self._enter("get_pod_status", pod.key())
        return self.statuses.get(pod.uid)

    def get_pods(self) -> list[Pod]:
        self._enter("get_pods")
        return list(self.running.values())

    def ping(self) -> None:
        self._enter("ping")
        if not self.healthy:
            raise RuntimeError("back end unreachable")

    def node_description(self) -> NodeDescription:
        self._enter("node_description")
        return self.description


def _terminated(cs: ContainerStatus, *, exit_code: int, reason: str) -> ContainerStateTerminated:
    running = cs.state.running
    return ContainerStateTerminated(
        exit_code=exit_code,
        reason=reason,
        started_at=running.started_at if running is not None else None,
        container_id=cs.container_id,
    )
