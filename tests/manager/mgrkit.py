"""Factories and helpers for the status manager tests (fixtures are in conftest.py).

Every manager test runs against :class:`FakeKubeClient` (which records each
request), :class:`BasicPodManager` and :class:`FakePodDeletionSafety`, with a
pinned clock. Most are parametrized over two modes:

- ``kubelet``: no options, the kubelet's behaviour (SPEC section 4);
- ``fast``: ``fast_path=True`` (SPEC section 6), but driven by calling
  ``sync_batch`` synchronously (no worker threads are started, so the
  requests come in a deterministic order).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from podstatus import (
    BasicPodManager,
    Container,
    ContainerState,
    ContainerStateRunning,
    ContainerStateTerminated,
    ContainerStateWaiting,
    ContainerStatus,
    Manager,
    ObjectMeta,
    Pod,
    PodCondition,
    PodReadinessGate,
    PodSpec,
    PodStatus,
    new_manager,
)
from podstatus.clients.fake import FakeKubeClient
from podstatus.deletion import FakePodDeletionSafety

NOW = datetime(2024, 5, 1, 12, 0, 0, tzinfo=UTC)
EARLIER = datetime(2024, 5, 1, 11, 0, 0, tzinfo=UTC)
NAMESPACE = "default"

MODES: dict[str, dict[str, Any]] = {"kubelet": {}, "fast": {"fast_path": True}}

STATIC_ANNOTATIONS = {"kubernetes.io/config.source": "file"}
MIRROR_ANNOTATIONS = {"kubernetes.io/config.source": "file", "kubernetes.io/config.mirror": "mirror-hash"}


class Clock:
    """A pinned, settable "now" (whole seconds)."""

    def __init__(self, now: datetime = NOW) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


# --- objects ---------------------------------------------------------------------------


def _container(c: str | Container) -> Container:
    return c if isinstance(c, Container) else Container(name=c, image="busybox")


def sidecar(name: str) -> Container:
    """A restartable init container."""
    return Container(name=name, image="busybox", restart_policy="Always")


def make_pod(
    name: str = "pod-a",
    uid: str | None = None,
    *,
    namespace: str = NAMESPACE,
    containers: Sequence[str | Container] = ("app",),
    init_containers: Sequence[str | Container] = (),
    restart_policy: str | None = None,
    node_name: str = "node-1",
    readiness_gates: Sequence[str] = (),
    deletion_timestamp: datetime | None = None,
    annotations: dict[str, str] | None = None,
    status: PodStatus | None = None,
) -> Pod:
    return Pod(
        metadata=ObjectMeta(
            name=name,
            namespace=namespace,
            uid=uid if uid is not None else f"uid-{name}",
            annotations=annotations,
            deletion_timestamp=deletion_timestamp,
            deletion_grace_period_seconds=30 if deletion_timestamp is not None else None,
        ),
        spec=PodSpec(
            containers=tuple(_container(c) for c in containers),
            init_containers=tuple(_container(c) for c in init_containers) or None,
            restart_policy=restart_policy,
            node_name=node_name,
            readiness_gates=tuple(PodReadinessGate(condition_type=g) for g in readiness_gates) or None,
        ),
        status=status if status is not None else PodStatus(phase="Pending"),
    )


def cid(pod: Pod, container: str) -> str:
    """The container ID the factories give a container of a pod."""
    return f"containerd://{pod.uid}-{container}"


def running(started_at: datetime = EARLIER) -> ContainerState:
    return ContainerState(running=ContainerStateRunning(started_at=started_at))


def waiting(reason: str = "ContainerCreating") -> ContainerState:
    return ContainerState(waiting=ContainerStateWaiting(reason=reason))


def terminated(exit_code: int = 0, reason: str = "Completed") -> ContainerState:
    return ContainerState(
        terminated=ContainerStateTerminated(
            exit_code=exit_code, reason=reason, started_at=EARLIER, finished_at=EARLIER
        )
    )


def container_status(
    pod: Pod,
    name: str,
    state: ContainerState | None = None,
    *,
    ready: bool = True,
    started: bool | None = True,
    restart_count: int = 0,
) -> ContainerStatus:
    return ContainerStatus(
        name=name,
        state=state if state is not None else running(),
        ready=ready,
        started=started,
        restart_count=restart_count,
        image="docker.io/library/busybox:latest",
        image_id="docker.io/library/busybox@sha256:1234",
        container_id=cid(pod, name),
    )


def condition(
    ctype: str, status: str = "True", reason: str | None = None, message: str | None = None
) -> PodCondition:
    return PodCondition(type=ctype, status=status, reason=reason, message=message)


def running_status(
    pod: Pod,
    *,
    ready: bool | dict[str, bool] = True,
    phase: str = "Running",
    pod_ip: str = "10.0.0.1",
    extra_conditions: Sequence[PodCondition] = (),
    message: str | None = None,
) -> PodStatus:
    """A plausible status of a running pod: every container running, Ready as ``ready`` says."""
    names = [c.name for c in pod.spec.containers]
    readiness = ready if isinstance(ready, dict) else dict.fromkeys(names, ready)
    statuses = tuple(container_status(pod, n, ready=readiness.get(n, False)) for n in names)
    init = tuple(
        container_status(
            pod,
            c.name,
            running() if c.restart_policy == "Always" else terminated(0),
            ready=c.restart_policy == "Always",
        )
        for c in pod.spec.init_containers or ()
    )
    all_ready = all(readiness.get(n, False) for n in names)
    unready = [n for n in names if not readiness.get(n, False)]
    ready_cond = (
        condition("Ready")
        if all_ready
        else condition(
            "Ready", "False", "ContainersNotReady", f"containers with unready status: [{' '.join(unready)}]"
        )
    )
    cr_cond = ready_cond.replace(type="ContainersReady")
    return PodStatus(
        phase=phase,
        message=message,
        conditions=(
            condition("PodReadyToStartContainers"),
            condition("Initialized"),
            ready_cond,
            cr_cond,
            condition("PodScheduled"),
            *extra_conditions,
        ),
        host_ip="192.168.0.10",
        pod_ip=pod_ip,
        container_statuses=statuses,
        init_container_statuses=init or None,
    )


def types_of(status: PodStatus | None) -> list[str]:
    return [c.type for c in (status.conditions or ())] if status is not None else []


def get_cond(status: PodStatus | None, ctype: str) -> PodCondition | None:
    for c in (status.conditions or ()) if status is not None else ():
        if c.type == ctype:
            return c
    return None


# --- the world ----------------------------------------------------------------------------


@dataclass
class World:
    client: FakeKubeClient
    pods: BasicPodManager
    safety: FakePodDeletionSafety
    clock: Clock
    managers: list[Manager] = field(default_factory=list)

    def add(self, pod: Pod, *, to_server: bool = True, to_pod_manager: bool = True) -> Pod:
        """Create the pod on the fake server and tell the pod manager (as a watch would)."""
        if to_server:
            pod = self.client.add_pod(pod)
        if to_pod_manager:
            self.pods.add_pod(pod)
        return pod

    def manager(self, mode: str = "kubelet", **options: Any) -> Manager:
        opts = {**MODES[mode], "clock": self.clock, **options}
        m = new_manager(self.client, self.pods, self.safety, **opts)
        self.managers.append(m)
        return m

    def server(self, pod: Pod) -> Pod:
        got = self.client.pod(pod.namespace, pod.name)
        assert got is not None, f"{pod.key()} is not on the server"
        return got

    def server_status(self, pod: Pod) -> PodStatus:
        return self.server(pod).status

    def refresh(self, pod: Pod) -> Pod:
        """Feed the pod manager the server's copy of the pod (as a watch would)."""
        fresh = self.server(pod)
        self.pods.update_pod(fresh)
        return fresh

    def verbs(self) -> list[str]:
        return self.client.verbs()

    def clear(self) -> None:
        self.client.clear_requests()


def by_mode(mode: str, *, kubelet: Any, fast: Any) -> Any:
    return kubelet if mode == "kubelet" else fast


def wait_for(predicate: Callable[[], bool], timeout: float = 5.0, interval: float = 0.005) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return predicate()


def drain(manager: Manager, limit: int = 50) -> None:
    """Run ``sync_batch(all=False)`` until nothing is pending."""
    for _ in range(limit):
        if manager.pending_count() == 0:
            return
        manager.sync_batch(all=False)
    assert manager.pending_count() == 0, "statuses still pending after draining"


def new_threads(before: Iterable[threading.Thread]) -> list[threading.Thread]:
    known = set(before)
    return [t for t in threading.enumerate() if t not in known and t.is_alive()]
