"""What the simulated provider offers the kubelet API (see :mod:`.capabilities`): container logs,
exec (local, when asked for), attach, port-forward, and the stats Summary with usage that
follows each container's profile (:mod:`.simusage`).

:class:`SimulatedCapabilities` is a base of :class:`~.simulated.SimulatedProvider`: it reads
the provider's pods and never changes their lifecycle.
"""

from __future__ import annotations

import logging
import os
import random
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from . import simlogs, simstreams, simusage
from .capabilities import ExecIO, LogOptions, PortStream
from .logs import log_fields
from .provider import NodeDescription
from .simlogs import ContainerLog
from .simpod import SimContainer, SimPod, container_spec, ports_of
from .simstreams import SimulatedError

__all__ = ["SimulatedCapabilities"]

log = logging.getLogger(__name__)


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


class SimulatedCapabilities:
    """The kubelet API's capabilities over the pods of a simulated provider."""

    # Set by SimulatedProvider.__init__.
    node_name: str
    description: NodeDescription
    exec_locally: bool
    exec_root: Path
    _seed: int
    _rng: random.Random | None
    _sims: dict[str, SimPod]
    _names: dict[tuple[str, str], str]
    _lock: threading.RLock
    _log_lock: threading.Lock
    _clock_start: float
    _cpu_gone: float

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
                    if c.state == "running" and port in ports_of(sim.pod, c.name)
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
        spec = container_spec(sim.pod, c.name)
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
