"""A simulated pod and its containers: the state :class:`~.simulated.SimulatedProvider` plays.

:class:`Timings` (how long simulated things take), :class:`SimContainer` (one container's
state, turned into a ``ContainerStatus``) and :class:`SimPod` (a pod's containers and where
its lifecycle is). Data only; the provider moves them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ..types import (
    Container,
    ContainerState,
    ContainerStateRunning,
    ContainerStateTerminated,
    ContainerStateWaiting,
    ContainerStatus,
    Pod,
)
from . import simusage
from .simlogs import ContainerLog

__all__ = ["SimContainer", "SimPod", "Timings", "container_spec", "ports_of"]


def container_spec(pod: Pod, name: str) -> Container | None:
    for c in (*(pod.spec.init_containers or ()), *pod.spec.containers):
        if c.name == name:
            return c
    return None


def ports_of(pod: Pod, container: str) -> list[int]:
    """The containerPorts a container declares (TCP; the wire form keeps them as dicts)."""
    c = container_spec(pod, container)
    if c is None or not isinstance(c.ports, list | tuple):
        return []
    return [
        p["containerPort"]
        for p in c.ports
        if isinstance(p, dict)
        and isinstance(p.get("containerPort"), int)
        and p.get("protocol", "TCP") == "TCP"
    ]


@dataclass(frozen=True)
class Timings:
    """How long simulated things take, in seconds (each drawn uniformly from its range)."""

    image_pull: tuple[float, float] = (0.2, 1.2)
    init_run: tuple[float, float] = (0.2, 0.8)
    startup: tuple[float, float] = (0.1, 0.6)
    readiness: tuple[float, float] = (0.2, 1.5)
    job_run: tuple[float, float] = (2.0, 8.0)
    crash_run: tuple[float, float] = (0.3, 1.5)
    crash_backoff: float = 0.5
    crash_backoff_max: float = 4.0
    stop: tuple[float, float] = (0.1, 0.8)
    gate: tuple[float, float] = (0.2, 1.0)
    resize: tuple[float, float] = (0.1, 0.5)  # applying an in-place resize to a running container


@dataclass
class SimContainer:
    name: str
    image: str
    init: bool = False
    sidecar: bool = False
    state: str = "waiting"  # waiting | running | terminated
    reason: str = "ContainerCreating"
    started: bool | None = None
    ready: bool = False
    restart_count: int = 0
    exit_code: int = 0
    started_at: datetime | None = None
    finished_at: datetime | None = None
    last_terminated: ContainerStateTerminated | None = None
    container_id: str = ""
    backoff: float = 0.0
    resources: dict[str, Any] | None = None  # what runs (requests/limits), reported while running
    # What the running instance printed and what the one before it printed (`logs --previous`).
    log: ContainerLog | None = None
    previous_log: ContainerLog | None = None
    started_clock: float = 0.0  # time.time() at the start of the instance (usage is a function of age)
    cpu_done: float = 0.0  # core-nanoseconds of the instances that have ended (counters never go back)
    # The running instance's CPU before its last resize, and its age then: a resize changes the
    # profile, not what was used.
    cpu_segments: float = 0.0
    segment_age: float = 0.0
    profile: simusage.Profile | None = None  # drawn when first asked

    @property
    def field_path(self) -> str:
        return f"spec.{'initContainers' if self.init else 'containers'}{{{self.name}}}"

    def status(self) -> ContainerStatus:
        if self.state == "running":
            state = ContainerState(running=ContainerStateRunning(started_at=self.started_at))
        elif self.state == "terminated":
            state = ContainerState(
                terminated=ContainerStateTerminated(
                    exit_code=self.exit_code,
                    reason="Completed" if self.exit_code == 0 else "Error",
                    started_at=self.started_at,
                    finished_at=self.finished_at,
                    container_id=self.container_id or None,
                )
            )
        else:
            state = ContainerState(waiting=ContainerStateWaiting(reason=self.reason))
        return ContainerStatus(
            name=self.name,
            state=state,
            last_state=ContainerState(terminated=self.last_terminated)
            if self.last_terminated
            else ContainerState(),
            ready=self.ready,
            restart_count=self.restart_count,
            image=self.image,
            image_id=f"{self.image.split(':')[0]}@sha256:{abs(hash(self.image)):064x}"[:200]
            if self.state != "waiting" or self.restart_count
            else "",
            container_id=self.container_id or None,
            started=self.started,
            resources=self.resources if self.state == "running" else None,
        )


@dataclass
class SimPod:
    pod: Pod
    behaviour: str
    inits: list[SimContainer]
    containers: list[SimContainer]
    sandbox_ready: bool = False
    init_index: int = 0
    deleting: bool = False
    stopped: bool = False  # every container has stopped after a delete
    done: bool = False  # nothing more to do for it
    pod_ip: str = ""
    qos_class: str = "BestEffort"
    generation: int = 0  # bumps on every change of plan: stale timer events are dropped
    # Steps due now, run before the status is published (see SimulatedProvider._after).
    steps: list[tuple[Callable[..., None], tuple[Any, ...]]] = field(default_factory=list)
    changed: bool = False  # a status to publish once the steps due now have run

    @property
    def uid(self) -> str:
        return self.pod.uid

    def all_containers(self) -> list[SimContainer]:
        return [*self.inits, *self.containers]

    def any_running(self) -> bool:
        return any(c.state == "running" for c in self.all_containers())
