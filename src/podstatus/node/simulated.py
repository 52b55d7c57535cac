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
import random
import tempfile
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..flags import Flag
from ..qos import compute_pod_qos
from ..types import ContainerStateTerminated, Pod, PodIP, PodStatus
from ..workloads import behaviour_of
from .network import PodIPPool
from .provider import NodeDescription, PodNotifier
from .resize import allocation_of_pod, same_resources
from .runtime import shared_timer
from .simkubelet import SimulatedCapabilities
from .simlogs import ContainerLog
from .simpod import SimContainer, SimPod, Timings, ports_of

__all__ = ["SimulatedProvider"]

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


class SimulatedProvider(SimulatedCapabilities):
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
            ports = ports_of(sim.pod, c.name)
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
