"""``SimulatedProvider``: containers that are make-believe, with a realistic lifecycle.

Each pod goes through image pulls, init containers in order, sidecars,
start-up and readiness, then what its behaviour says (annotation
``podstatus.io/behaviour``, see :mod:`podstatus.workloads`): serve until
deleted, complete, fail, or crash again and again with back-off. Deleting
stops its containers within the grace period. Every step is reported to the
agent (status and the kubelet's Events) through the notifier; nothing here
talks to the API server.

After a restart of the agent, a pod the server shows as running is resumed
where it was (container IDs, readiness and restart counts from its status),
not started again from scratch.
"""

from __future__ import annotations

import itertools
import logging
import os
import random
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..flags import Flag
from ..qos import compute_pod_qos
from ..types import (
    Container,
    ContainerState,
    ContainerStateRunning,
    ContainerStateTerminated,
    ContainerStateWaiting,
    ContainerStatus,
    Pod,
    PodIP,
    PodStatus,
)
from ..workloads import behaviour_of
from . import simlogs, simstreams, simusage
from .capabilities import ExecIO, LogOptions, PortStream
from .logs import log_fields
from .network import PodIPPool
from .provider import NodeDescription, PodNotifier
from .resize import allocation_of_pod, same_resources
from .runtime import shared_timer
from .simlogs import ContainerLog
from .simstreams import SimulatedError

__all__ = ["SimContainer", "SimPod", "SimulatedError", "SimulatedProvider", "Timings"]

log = logging.getLogger(__name__)


# How many instant steps one pod runs before the rest wait for the timer.
_STEPS_AT_ONCE = 64


def _now() -> datetime:
    return datetime.now(UTC).replace(microsecond=0)


_exec_warned = False  # said once that simulated exec runs commands locally

# What a container prints as it ends, by behaviour, and now and then while it runs.
_SIGTERM = "received SIGTERM, shutting down"
_LAST_WORDS = {"crash": "panic: simulated crash", "fail": "error: simulated failure", "complete": "done"}
_PROBE_PERIOD = 10.0
_WORK_PERIOD = 1.0


def _probe_line(n: int) -> str:
    return f'"GET /healthz HTTP/1.1" 200 2 "-" "kube-probe/1.37" request={n}'


def _work_line(n: int) -> str:
    return f"working: step {n}"


def _ports_of(pod: Pod, container: str) -> list[int]:
    """The containerPorts a container declares (TCP; the wire form keeps them as dicts)."""
    c = _container_spec(pod, container)
    if c is None or not isinstance(c.ports, list | tuple):
        return []
    return [
        p["containerPort"]
        for p in c.ports
        if isinstance(p, dict)
        and isinstance(p.get("containerPort"), int)
        and p.get("protocol", "TCP") == "TCP"
    ]


def _safe(name: str) -> str:
    """A path component from a name (kept as is when it is a plain one)."""
    cleaned = name.replace(os.sep, "_").replace("\0", "_")
    return cleaned if cleaned not in ("", ".", "..") else f"_{cleaned}_"


def _cpu(stamp: str, rate: float, total: float) -> dict[str, Any]:
    return {"time": stamp, "usageNanoCores": int(rate), "usageCoreNanoSeconds": int(total)}


def _memory(stamp: str, working_set: int, limit: int | None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "time": stamp,
        "usageBytes": working_set + working_set // 8,  # the page cache on top of the working set
        "workingSetBytes": working_set,
        "rssBytes": working_set * 4 // 5,
        "pageFaults": 0,
        "majorPageFaults": 0,
    }
    if limit is not None:
        out["availableBytes"] = max(0, limit - working_set)
    return out


def _container_spec(pod: Pod, name: str) -> Container | None:
    for c in (*(pod.spec.init_containers or ()), *pod.spec.containers):
        if c.name == name:
            return c
    return None


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


class SimulatedProvider:
    """A :class:`~podstatus.node.provider.Provider` whose containers are simulated."""

    # Its methods never block (in-memory state; delete_pod waits at most the simulated stop
    # time): the agent calls them on its own thread, without a pool hop or a timeout.
    blocking = False

    def __init__(
        self,
        *,
        timings: Timings | None = None,
        seed: int = 1,
        description: NodeDescription | None = None,
        node_name: str = "",
        exec_locally: bool = False,
        exec_root: str | None = None,
    ) -> None:
        self.timings = timings or Timings()
        self.node_name = node_name
        # exec runs commands on this machine (in a folder per container): remote code execution
        # for whoever may exec, hence off unless asked for, and said loudly when on.
        self.exec_locally = exec_locally
        self.exec_root = Path(exec_root) if exec_root else Path(tempfile.gettempdir()) / "podstatus-sim-exec"
        if exec_locally:
            # Once per process at warning (a thousand nodes are not a thousand warnings).
            global _exec_warned
            level, _exec_warned = (logging.DEBUG if _exec_warned else logging.WARNING), True
            log.log(
                level,
                "simulated exec runs commands locally node=%s folder=%s",
                node_name or "-",
                self.exec_root,
                extra={"podstatus": {"node": node_name, "folder": str(self.exec_root)}},
            )
        self.description = description or NodeDescription(
            capacity={"cpu": "64", "memory": "256Gi", "pods": "110"},
            labels={"type": "podstatus-simulated"},
        )
        self._seed = seed
        self._rng: random.Random | None = None  # 2.5 KB of state: made when first drawn from
        self.notifier: PodNotifier | None = None
        self._sims: dict[str, SimPod] = {}
        self._lock = threading.RLock()
        # Lifecycle steps run on the process's one timer thread (shared by every simulated
        # provider: a thousand simulated nodes are not a thousand timer threads).
        self._timer = shared_timer()
        self._stop = Flag()
        self._ip_counter = itertools.count(2)
        # Pod IPs from the node's pod CIDR once the agent gives one (update_pod_cidr).
        self._ips: PodIPPool | None = None
        self._names: dict[tuple[str, str], str] = {}  # (namespace, name) -> uid, for the kubelet API
        self._log_lock = threading.Lock()  # every container log of this node
        self._clock_start = time.time()  # the node's start, for its stats
        self._cpu_gone = 0.0  # core-nanoseconds of the pods deleted since (the node's counter goes on)

    @property
    def rng(self) -> random.Random:
        rng = self._rng
        if rng is None:
            rng = self._rng = random.Random(self._seed)
        return rng

    # -- the provider protocol ---------------------------------------------------------

    def notify_pods(self, notifier: PodNotifier) -> None:
        self.notifier = notifier
        self._ensure_timer_thread()

    def ping(self) -> None:
        return None

    def update_pod_cidr(self, cidr: str) -> None:
        """The node's ``spec.podCIDR`` (the kubelet hands it to its runtime): pod IPs come from it."""
        with self._lock:
            if self._ips is not None and self._ips.cidr == cidr:
                return
            self._ips = PodIPPool(cidr)
            for sim in self._sims.values():
                if sim.pod_ip:
                    self._ips.claim(sim.pod_ip)

    def node_description(self) -> NodeDescription:
        return self.description

    def get_pods(self) -> list[Pod]:
        with self._lock:
            return [s.pod for s in self._sims.values()]

    def get_pod_status(self, pod: Pod) -> PodStatus | None:
        with self._lock:
            sim = self._sims.get(pod.uid)
            return self.build_status(sim) if sim is not None else None

    def create_pod(self, pod: Pod) -> None:
        self._ensure_timer_thread()
        with self._lock:
            if pod.uid in self._sims:
                return
            sim = self._new_sim(pod)
            if sim.pod_ip == "" and not pod.status.pod_ip:
                # As a CNI plugin says it; the agent reports the failure and retries.
                raise RuntimeError(
                    f"failed to allocate a pod IP: no IP addresses available in range {self._ips and self._ips.cidr}"
                )
            self._sims[pod.uid] = sim
            self._names[(pod.namespace, pod.name)] = pod.uid
            if self._resume(sim):
                log.info("resumed a running pod pod=%s podUID=%s", pod.key(), pod.uid)
                self._publish(sim)
            else:
                self._publish(sim)
                for c in sim.all_containers():
                    self._event(sim, "Normal", "Pulling", f'Pulling image "{c.image}"', c)
                self._after(sim, self.timings.image_pull, self._sandbox_ready)
            self._settle(sim)

    def update_pod(self, pod: Pod) -> None:
        self.observe(pod)
        with self._lock:
            sim = self._sims.get(pod.uid)
            if sim is None or sim.deleting:
                return
            wanted = allocation_of_pod(pod)
            for c in sim.all_containers():
                new = wanted.get(c.name)
                if new is not None and not same_resources(new, c.resources):
                    # An in-place resize (the pod comes as the agent allocated it): applied after a while.
                    self._after(sim, self.timings.resize, self._resized, c, new)
            self._settle(sim)

    def delete_pod(self, pod: Pod, grace_period_seconds: int) -> None:
        with self._lock:
            sim = self._sims.get(pod.uid)
            if sim is None:
                return
            sim.deleting = True
            sim.generation += 1  # cancel pending lifecycle steps
        # Containers take a moment to stop, never longer than the grace period.
        delay = min(float(grace_period_seconds), self._draw(self.timings.stop))
        if delay > 0:
            self._stop.wait(delay)
        with self._lock:
            for c in sim.all_containers():
                if c.state == "running":
                    self._terminate(sim, c, 0 if sim.behaviour != "crash" else 137, _SIGTERM)
            sim.stopped = True
            sim.done = True
            sim.steps.clear()
            self._publish(sim)
            self._settle(sim)
            self._sims.pop(pod.uid, None)
            if self._names.get((pod.namespace, pod.name)) == pod.uid:
                del self._names[(pod.namespace, pod.name)]
            self._cpu_gone += sum(c.cpu_done for c in sim.all_containers())
            if self._ips is not None and sim.pod_ip:
                self._ips.release(sim.pod_ip)

    def close(self) -> None:
        self._stop.set()  # steps still on the timer find it set and do nothing

    # -- beyond the protocol --------------------------------------------------------------

    def observe(self, pod: Pod) -> None:
        """The newest copy of a pod from the watch (its readiness gates, its phase on the server)."""
        with self._lock:
            sim = self._sims.get(pod.uid)
            if sim is not None:
                sim.pod = pod

    def sim_pod(self, uid: str) -> SimPod | None:
        # No lock: a dict read is atomic, and deletion safety asks while the manager holds its lock.
        return self._sims.get(uid)

    def sims(self) -> list[SimPod]:
        with self._lock:
            return list(self._sims.values())

    # -- the kubelet API's capabilities (see capabilities.py) -------------------------------------

    def get_container_logs(
        self, namespace: str, pod: str, container: str, options: LogOptions
    ) -> bytes | AsyncIterator[bytes]:
        """What the container printed (see simlogs); with ``follow``, a stream until it stops."""
        sim = self._find(namespace, pod)
        with self._lock:
            clog = self._log_for(sim, self._container(sim, container), options.previous)
        since: float | None = None
        if options.since_time is not None:
            since = options.since_time.timestamp()
        elif options.since_seconds is not None:
            since = time.time() - options.since_seconds
        lines, seq, closed = clog.snapshot()
        head = simlogs.render(
            simlogs.select(lines, tail_lines=options.tail_lines, since=since), timestamps=options.timestamps
        )
        limit = options.limit_bytes
        if limit is not None and len(head) >= limit:
            return head[:limit]
        if not options.follow or closed:
            return head
        return simlogs.follow_bytes(
            clog, head, seq, since=since, timestamps=options.timestamps, limit_bytes=limit
        )

    async def run_in_container(
        self, namespace: str, pod: str, container: str, command: list[str], io: ExecIO
    ) -> int:
        """The command, run locally in the container's folder when ``exec_locally``; else refused."""
        sim = self._find(namespace, pod)
        with self._lock:
            c = self._container(sim, container)
            running = c.state == "running"
            env = self._env_of(sim, c)
        if not self.exec_locally:
            raise SimulatedError(
                501,
                f"exec is not supported by the simulated provider of node {self.node_name or '-'}: its "
                "containers are make-believe (start `podstatus node --sim-exec` to run commands locally, "
                "in a folder per container)",
            )
        if not running:
            raise SimulatedError(400, f'container "{container}" in pod "{pod}" is not running')
        if not command:
            raise SimulatedError(400, "no command given to exec")
        folder = (
            self.exec_root
            / _safe(self.node_name or "node")
            / _safe(namespace)
            / _safe(pod)
            / _safe(container)
        )
        log_fields(
            log,
            logging.INFO,
            "simulated exec runs a local command",
            node=self.node_name,
            pod=f"{namespace}/{pod}",
            container=container,
            folder=str(folder),
            command=command[0],
        )
        # What a command writes to ~ stays in the container's folder too.
        return await simstreams.exec_locally(command, folder, {"HOME": str(folder), **env}, io)

    async def attach_to_container(self, namespace: str, pod: str, container: str, io: ExecIO) -> int | None:
        """The container's output from now on; what is typed, printed back (see simstreams)."""
        sim = self._find(namespace, pod)
        with self._lock:
            c = self._container(sim, container)
            clog = c.log if c.state == "running" else None
        if clog is None:
            raise SimulatedError(400, f'container "{container}" in pod "{pod}" is not running')
        return await simstreams.attach(clog, io)

    async def port_forward(self, namespace: str, pod: str, port: int, stream: PortStream) -> None:
        """A responder for each declared containerPort of a running container; else refused."""
        sim = self._find(namespace, pod)
        with self._lock:
            owner = next(
                (
                    c.name
                    for c in sim.all_containers()
                    if c.state == "running" and port in _ports_of(sim.pod, c.name)
                ),
                None,
            )
        if owner is None:
            # What the kubelet says when nothing listens on the port in the pod.
            stream.error(
                f'failed to connect to localhost:{port} inside namespace "{sim.uid}", IPv4: dial tcp4 '
                f"127.0.0.1:{port}: connect: connection refused IPv6 dial tcp6 [::1]:{port}: "
                "connect: connection refused "
            )
            stream.close()
            return
        await simstreams.respond(
            stream, f"podstatus simulated pod {namespace}/{pod} container {owner} port {port}"
        )

    def get_stats_summary(self) -> dict[str, Any]:
        """The kubelet's stats/v1alpha1 Summary of the node and its pods (see simusage)."""
        now = time.time()
        stamp = simusage.rfc3339(now)
        pods: list[dict[str, Any]] = []
        total, rate, working = self._cpu_gone, 0.0, 0
        with self._lock:
            for sim in self._sims.values():
                pod_total = sum(c.cpu_done for c in sim.all_containers())
                if not sim.sandbox_ready or sim.stopped:
                    total += pod_total
                    continue
                containers, pod_rate, pod_ws = [], 0.0, 0
                starts = [c.started_clock for c in sim.all_containers() if c.started_clock]
                for c in sim.all_containers():
                    if c.state != "running":
                        continue
                    p = self._profile(sim, c)
                    age = now - c.started_clock
                    c_rate, c_total = simusage.cpu_rate(p, age), self._instance_cpu(sim, c, now)
                    c_ws = simusage.memory_bytes(p, age)
                    pod_rate, pod_total, pod_ws = pod_rate + c_rate, pod_total + c_total, pod_ws + c_ws
                    containers.append(
                        {
                            "name": c.name,
                            "startTime": simusage.rfc3339(c.started_clock),
                            "cpu": _cpu(stamp, c_rate, c_total),
                            "memory": _memory(stamp, c_ws, simusage.memory_limit(c.resources)),
                        }
                    )
                pods.append(
                    {
                        "podRef": {"name": sim.pod.name, "namespace": sim.pod.namespace, "uid": sim.uid},
                        "startTime": simusage.rfc3339(min(starts) if starts else now),
                        "containers": containers,
                        "cpu": _cpu(stamp, pod_rate, pod_total),
                        "memory": _memory(stamp, pod_ws, None),
                    }
                )
                total, rate, working = total + pod_total, rate + pod_rate, working + pod_ws
        # The node's own daemons: a serving profile of its own.
        system = simusage.profile_for(self._seed, "node", self.node_name, "serve")
        age = now - self._clock_start
        rate += simusage.cpu_rate(system, age)
        total += simusage.cpu_total(system, age)
        working += simusage.memory_bytes(system, age)
        capacity = simusage.memory_capacity(self.description.capacity.get("memory"))
        return {
            "node": {
                "nodeName": self.node_name,
                "startTime": simusage.rfc3339(self._clock_start),
                "cpu": _cpu(stamp, rate, total),
                "memory": _memory(stamp, working, capacity),
            },
            "pods": pods,
        }

    def _find(self, namespace: str, name: str) -> SimPod:
        with self._lock:
            uid = self._names.get((namespace, name))
            sim = self._sims.get(uid) if uid is not None else None
        if sim is None:
            # The kubelet's words, with the namespace and node (a 404 that names the pod).
            raise SimulatedError(
                404, f'pod "{name}" does not exist in namespace "{namespace}" on node {self.node_name or "-"}'
            )
        return sim

    def _container(self, sim: SimPod, name: str) -> SimContainer:
        for c in sim.all_containers():
            if c.name == name:
                return c
        raise SimulatedError(404, f'container "{name}" not found in pod "{sim.pod.name}"')

    def _log_for(self, sim: SimPod, c: SimContainer, previous: bool) -> ContainerLog:
        """The instance whose output ``kubectl logs [--previous]`` shows, as the kubelet picks it."""
        pod = sim.pod.name
        if previous:
            if c.state == "waiting" and c.restart_count and c.log is not None:
                return c.log  # backing off: the last termination is the instance that just ended
            if c.previous_log is not None:
                return c.previous_log
            raise SimulatedError(400, f'previous terminated container "{c.name}" in pod "{pod}" not found')
        if c.log is None:
            if c.state == "waiting":
                raise SimulatedError(
                    400, f'container "{c.name}" in pod "{pod}" is waiting to start: {c.reason}'
                )
            # Taken up after an agent restart: what it printed before is gone with that process.
            c.log = ContainerLog(self._log_lock)
            c.log.write("(output from before the node agent restarted is not kept)")
            if c.state == "terminated":
                c.log.close(exit_code=c.exit_code)
        return c.log

    def _env_of(self, sim: SimPod, c: SimContainer) -> dict[str, str]:
        """The container's environment as exec sees it: literal values and the pod's own fields."""
        env = {
            "PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
            "HOSTNAME": sim.pod.name,
        }
        fields = {
            "metadata.name": sim.pod.name,
            "metadata.namespace": sim.pod.namespace,
            "metadata.uid": sim.uid,
            "spec.nodeName": self.node_name,
            "status.podIP": sim.pod_ip,
        }
        spec = _container_spec(sim.pod, c.name)
        for item in spec.env if spec is not None and isinstance(spec.env, list) else ():
            if not isinstance(item, dict) or not isinstance(item.get("name"), str):
                continue
            if isinstance(item.get("value"), str):
                env[item["name"]] = item["value"]
                continue
            ref = (
                (item.get("valueFrom") or {}).get("fieldRef")
                if isinstance(item.get("valueFrom"), dict)
                else None
            )
            if isinstance(ref, dict) and ref.get("fieldPath") in fields:
                env[item["name"]] = fields[ref["fieldPath"]]
        return env

    # -- building ----------------------------------------------------------------------------

    def _new_sim(self, pod: Pod) -> SimPod:
        inits = [
            SimContainer(
                name=c.name,
                image=c.image or "",
                init=True,
                sidecar=c.restart_policy == "Always",
                reason="PodInitializing",
            )
            for c in pod.spec.init_containers or ()
        ]
        containers = [
            SimContainer(
                name=c.name, image=c.image or "", reason="PodInitializing" if inits else "ContainerCreating"
            )
            for c in pod.spec.containers
        ]
        allocated = allocation_of_pod(pod)
        for c in [*inits, *containers]:
            c.resources = allocated.get(c.name)
        if self._ips is not None:
            pod_ip = self._ips.allocate() or ""
        else:
            n = next(self._ip_counter)
            pod_ip = f"10.244.{(n // 250) % 250}.{n % 250 + 1}"
        return SimPod(
            pod=pod,
            behaviour=behaviour_of(pod.metadata.annotations, pod.spec.restart_policy),
            inits=inits,
            containers=containers,
            pod_ip=pod_ip,
            qos_class=pod.status.qos_class or compute_pod_qos(pod.spec.to_dict()),
        )

    def _resume(self, sim: SimPod) -> bool:
        """A pod the server shows running (an agent restart): take its containers up where they were."""
        status = sim.pod.status
        if status.phase != "Running" or not status.container_statuses:
            return False
        known = {cs.name: cs for cs in (*(status.init_container_statuses or ()), *status.container_statuses)}
        for c in sim.all_containers():
            cs = known.get(c.name)
            if cs is None:
                continue
            c.restart_count = cs.restart_count
            c.container_id = cs.container_id or ""
            if isinstance(cs.resources, dict):
                c.resources = dict(cs.resources)
            c.ready = cs.ready
            c.started = cs.started
            c.last_terminated = cs.last_state.terminated
            if cs.state.running is not None:
                c.state = "running"
                c.started_at = cs.state.running.started_at
                # Its usage goes on from its real start, not from the epoch.
                c.started_clock = c.started_at.timestamp() if c.started_at is not None else time.time()
            elif cs.state.terminated is not None:
                t = cs.state.terminated
                c.state, c.exit_code, c.started_at, c.finished_at = (
                    "terminated",
                    t.exit_code,
                    t.started_at,
                    t.finished_at,
                )
            else:
                c.state = "waiting"
                c.reason = (
                    cs.state.waiting.reason if cs.state.waiting and cs.state.waiting.reason else c.reason
                )
        sim.sandbox_ready = True
        sim.init_index = len(sim.inits)
        if status.pod_ip and status.pod_ip != sim.pod_ip:
            if self._ips is not None:
                # The IP it had keeps; the one drawn for it goes back.
                self._ips.release(sim.pod_ip)
                self._ips.claim(status.pod_ip)
            sim.pod_ip = status.pod_ip
        for c in sim.containers:
            if c.state == "running":
                if not c.started:
                    self._after(sim, self.timings.startup, self._container_started, c)
                elif not c.ready:
                    self._after(sim, self.timings.readiness, self._became_ready, c)
                if c.started:
                    self._plan_exit(sim, c)
            elif c.state == "waiting":
                self._after(sim, max(self.timings.crash_backoff, c.backoff), self._restart, c)
        for c in sim.inits:
            if c.sidecar and c.state == "running" and not c.ready:
                self._after(sim, self.timings.readiness, self._became_ready, c)
        return True

    # -- timers ------------------------------------------------------------------------------

    def _ensure_timer_thread(self) -> None:
        with self._lock:
            if self._stop.is_set():  # closed before: open again
                self._stop.clear()
            if not self._timer.alive():
                self._timer = shared_timer()

    def _after(
        self, sim: SimPod, delay: tuple[float, float] | float, action: Callable[..., None], *args: Any
    ) -> None:
        seconds = float(delay) if isinstance(delay, float | int) else self._draw(delay)
        if seconds <= 0:
            # A step that takes no time happens in the same instant: it runs before the status
            # is published, as a kubelet's relist sees a container created, started and ready
            # within one period as one change (one status, not one per step).
            sim.steps.append((action, args))
            return
        self._timer.call_later(seconds, self._fire, sim.uid, sim.generation, action, args)

    def _draw(self, span: tuple[float, float]) -> float:
        low, high = span
        return low if low == high else self.rng.uniform(low, high)

    def _fire(self, uid: str, generation: int, action: Callable[..., None], args: tuple[Any, ...]) -> None:
        with self._lock:
            if self._stop.is_set():
                return
            sim = self._sims.get(uid)
            if sim is None or sim.generation != generation or sim.done:
                return
            self._step(sim, action, args)
            self._settle(sim)

    def _step(self, sim: SimPod, action: Callable[..., None], args: tuple[Any, ...]) -> None:
        try:
            action(sim, *args)
        except Exception:
            log.exception("simulated lifecycle step failed pod=%s podUID=%s", sim.pod.key(), sim.uid)

    def _settle(self, sim: SimPod) -> None:
        """Run the steps due now (in the order they were planned), then publish the status once."""
        ran = 0
        while sim.steps and not sim.done:
            if ran == _STEPS_AT_ONCE:
                # A loop of instant steps (a crash with no back-off) goes on from the timer: the
                # status of each round is published, and the caller is not held up.
                for action, args in sim.steps:
                    self._timer.call_later(0.0, self._fire, sim.uid, sim.generation, action, args)
                sim.steps.clear()
                break
            action, args = sim.steps.pop(0)
            self._step(sim, action, args)
            ran += 1
        if sim.changed:
            sim.changed = False
            if self.notifier is not None:
                self.notifier.pod_status(sim.uid, self.build_status(sim))

    # -- the lifecycle ---------------------------------------------------------------------

    def _event(
        self, sim: SimPod, type: str, reason: str, message: str, c: SimContainer | None = None
    ) -> None:
        if self.notifier is not None:
            self.notifier.event(sim.uid, type, reason, message, c.field_path if c is not None else None)

    def _cid(self, sim: SimPod, c: SimContainer) -> str:
        return f"containerd://{sim.uid.replace('-', '')[:24]}{c.name[:8].encode().hex()}{c.restart_count:04d}"

    def _start(self, sim: SimPod, c: SimContainer) -> None:
        c.state = "running"
        c.started_at = _now()
        c.started_clock = time.time()
        c.container_id = self._cid(sim, c)
        c.ready = False
        c.started = False
        c.cpu_segments = c.segment_age = 0.0
        if c.log is not None:
            c.log.close()
            c.previous_log = c.log
        c.log = ContainerLog(self._log_lock)
        again = f" (restart {c.restart_count})" if c.restart_count else ""
        c.log.write(f"starting {c.name}{again}: image {c.image}, pod {sim.pod.namespace}/{sim.pod.name}")
        self._event(sim, "Normal", "Created", f"Created container: {c.name}", c)
        self._event(sim, "Normal", "Started", f"Started container {c.name}", c)

    def _terminate(self, sim: SimPod, c: SimContainer, exit_code: int, last_line: str) -> None:
        if c.state == "running":
            # The instance's CPU stays in the pod's and node's cumulative counters.
            c.cpu_done += self._instance_cpu(sim, c, time.time())
        c.state = "terminated"
        c.exit_code = exit_code
        c.finished_at = _now()
        c.ready = False
        c.started = False
        if c.log is not None:
            c.log.close(f"{last_line}; exit code {exit_code}", exit_code=exit_code)

    def _sandbox_ready(self, sim: SimPod) -> None:
        sim.sandbox_ready = True
        for c in sim.all_containers():
            self._event(sim, "Normal", "Pulled", f'Successfully pulled image "{c.image}"', c)
        self._next_init_or_main(sim)

    def _next_init_or_main(self, sim: SimPod) -> None:
        if sim.init_index < len(sim.inits):
            c = sim.inits[sim.init_index]
            self._start(sim, c)
            self._publish(sim)
            if c.sidecar:
                self._after(sim, self.timings.startup, self._sidecar_started, c)
            else:
                self._after(sim, self.timings.init_run, self._init_done, c)
            return
        for c in sim.containers:
            self._start(sim, c)
        self._publish(sim)
        for c in sim.containers:
            self._after(sim, self.timings.startup, self._container_started, c)

    def _init_done(self, sim: SimPod, c: SimContainer) -> None:
        self._terminate(sim, c, 0, "initialisation done")
        c.ready = True  # a completed init container reports ready
        sim.init_index += 1
        self._publish(sim)
        self._next_init_or_main(sim)

    def _resized(self, sim: SimPod, c: SimContainer, resources: dict[str, Any]) -> None:
        c.resources = resources
        if c.state == "running":
            now = time.time()
            c.cpu_segments = self._instance_cpu(sim, c, now)
            c.segment_age = now - c.started_clock
        c.profile = None  # new limits, new figures (the counters go on from where they are)
        self._publish(sim)

    def _sidecar_started(self, sim: SimPod, c: SimContainer) -> None:
        c.started = True
        self._publish(sim)
        self._after(sim, self.timings.readiness, self._became_ready, c)
        sim.init_index += 1
        self._next_init_or_main(sim)

    def _container_started(self, sim: SimPod, c: SimContainer) -> None:
        if c.state != "running":
            return
        c.started = True
        if c.log is not None:
            ports = _ports_of(sim.pod, c.name)
            c.log.write(f"listening on {', '.join(f':{p}' for p in ports)}" if ports else "started")
            if self._kind(sim, c) != "serve":
                c.log.every(_WORK_PERIOD, _work_line)
        self._publish(sim)
        self._after(sim, self.timings.readiness, self._became_ready, c)
        self._plan_exit(sim, c)

    def _plan_exit(self, sim: SimPod, c: SimContainer) -> None:
        if sim.behaviour == "complete":
            self._after(sim, self.timings.job_run, self._exit, c, 0)
        elif sim.behaviour == "fail":
            self._after(sim, self.timings.job_run, self._exit, c, 1)
        elif sim.behaviour == "crash":
            self._after(sim, self.timings.crash_run, self._exit, c, 1)

    def _became_ready(self, sim: SimPod, c: SimContainer) -> None:
        if c.state != "running" or c.ready:
            return
        c.ready = True
        if c.log is not None:
            c.log.write("ready")
            if self._kind(sim, c) == "serve":
                # A serving container prints a probe's access-log line every few seconds (made
                # when read, see simlogs).
                c.log.every(_PROBE_PERIOD, _probe_line)
        self._publish(sim)

    def _exit(self, sim: SimPod, c: SimContainer, exit_code: int) -> None:
        if c.state != "running":
            return
        if sim.behaviour == "crash":
            self._event(
                sim,
                "Warning",
                "Unhealthy",
                "Liveness probe failed: HTTP probe failed with statuscode: 500",
                c,
            )
        self._terminate(sim, c, exit_code, _LAST_WORDS.get(sim.behaviour, "done"))
        policy = sim.pod.spec.restart_policy or "Always"
        restarts = policy == "Always" or (policy == "OnFailure" and exit_code != 0)
        if restarts:
            c.last_terminated = ContainerStateTerminated(
                exit_code=exit_code,
                reason="Error" if exit_code else "Completed",
                started_at=c.started_at,
                finished_at=c.finished_at,
                container_id=c.container_id,
            )
            c.restart_count += 1
            c.state = "waiting"
            c.reason = "CrashLoopBackOff"
            c.backoff = min(self.timings.crash_backoff_max, max(self.timings.crash_backoff, c.backoff * 2))
            self._event(
                sim,
                "Warning",
                "BackOff",
                f"Back-off restarting failed container {c.name} in pod {sim.pod.name}_{sim.pod.namespace}({sim.uid})",
                c,
            )
            self._publish(sim)
            self._after(sim, c.backoff, self._restart, c)
            return
        if all(x.state == "terminated" for x in sim.containers):
            # The job is over: sidecars are stopped, the pod is finished.
            for s in sim.inits:
                if s.sidecar and s.state == "running":
                    self._terminate(sim, s, 0, _SIGTERM)
        self._publish(sim)

    def _restart(self, sim: SimPod, c: SimContainer) -> None:
        self._start(sim, c)
        self._publish(sim)
        self._after(sim, self.timings.startup, self._container_started, c)

    # -- usage -------------------------------------------------------------------------------------

    def _kind(self, sim: SimPod, c: SimContainer) -> str:
        """How the container behaves: its pod's behaviour, a sidecar serves, an init container works."""
        if c.init:
            return "serve" if c.sidecar else "init"
        return sim.behaviour

    def _profile(self, sim: SimPod, c: SimContainer) -> simusage.Profile:
        p = c.profile
        if p is None:
            p = c.profile = simusage.profile_for(self._seed, sim.uid, c.name, self._kind(sim, c), c.resources)
        return p

    def _instance_cpu(self, sim: SimPod, c: SimContainer, now: float) -> float:
        """Core-nanoseconds the running instance has used by ``now``."""
        p = self._profile(sim, c)
        age = max(c.segment_age, now - c.started_clock)
        return c.cpu_segments + simusage.cpu_total(p, age) - simusage.cpu_total(p, c.segment_age)

    # -- status --------------------------------------------------------------------------------

    def _phase(self, sim: SimPod) -> str:
        policy = sim.pod.spec.restart_policy or "Always"
        inits_done = all(
            (c.state == "terminated" and c.exit_code == 0) or (c.sidecar and c.started) for c in sim.inits
        )
        if not sim.sandbox_ready or not inits_done:
            return "Pending"
        states = [c.state for c in sim.containers]
        if all(s == "waiting" for s in states) and not any(c.restart_count for c in sim.containers):
            return "Pending"
        if any(s == "running" for s in states) or any(s == "waiting" for s in states):
            return "Running"
        codes = [c.exit_code for c in sim.containers]
        if policy == "Always" and not sim.deleting:
            return "Running"
        if all(code == 0 for code in codes):
            return "Succeeded"
        if policy == "OnFailure" and not sim.deleting:
            return "Running"
        return "Failed"

    def build_status(self, sim: SimPod) -> PodStatus:
        """Phase, container statuses and pod IP; the agent adds the conditions and host details."""
        init_statuses = [c.status() for c in sim.inits] or None
        return PodStatus(
            phase=self._phase(sim),
            pod_ip=sim.pod_ip if sim.sandbox_ready else None,
            pod_ips=(PodIP(ip=sim.pod_ip),) if sim.sandbox_ready else None,
            init_container_statuses=tuple(init_statuses) if init_statuses else None,
            container_statuses=tuple(c.status() for c in sim.containers),
            qos_class=sim.qos_class,
        )

    def _publish(self, sim: SimPod) -> None:
        sim.changed = True  # sent by _settle, once the steps due now have run
