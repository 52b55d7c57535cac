"""The simulated node: a node agent whose containers are make-believe, and whose status is real.

:class:`NodeAgent` is :class:`podstatus.node.NodeAgent` (the Node, its Lease,
the pod watch, admission, the status manager, Events) driving a
:class:`~podstatus.node.simulated.SimulatedProvider` (image pull, init
containers in order, sidecars, start-up and readiness, completion, crash
loops with back-off, termination on delete).

:class:`Simulation` plays the users around it: it creates the workloads,
sets readiness gates as an outside controller would, deletes some pods and
recreates one under the same name, and waits until everything settles. It
checks invariants on every write and on every watch event.

With several nodes (``nodes=[...]``, ``podstatus simulate --nodes N``) the agents
run as ``podstatus node --nodes N`` runs them: one shared
:class:`~podstatus.node.runtime.NodeRuntime` (timer, pools, the status managers'
sync pool), one pod watch for all of them (:class:`~podstatus.node.NodeGroup`),
and the workload's pods spread over the nodes by ``spec.nodeName``. Every node's
writes go through the same invariant checker.
"""

from __future__ import annotations

import logging
import random
import secrets
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

import msgspec

from . import node
from .conditions import is_terminal_phase
from .errors import (
    ApiError,
    ConflictError,
    ConnectionFailedError,
    NotFoundError,
    RequestTimeoutError,
    ServerError,
    TooManyRequestsError,
)
from .manager import Manager, SyncRecord
from .node.command import node_names, shared_runtime
from .node.heartbeat import LEASE_NAMESPACE, lease_info, node_system_info
from .node.network import simulation_network
from .node.provider import NodeDescription
from .node.simulated import SimContainer, SimPod, SimulatedProvider, Timings
from .podmanager import BasicPodManager
from .types import Pod
from .validation import check_container_state_transition

__all__ = [
    "RUN_LABEL",
    "CheckedClient",
    "Invariant",
    "InvariantChecker",
    "NodeAgent",
    "NodeHeartbeat",
    "SimContainer",
    "SimPod",
    "Simulation",
    "SimulationResult",
    "Timings",
    "node_system_info",
    "simulated_node_names",
]

log = logging.getLogger(__name__)


class SimClient(Protocol):
    """What the simulator needs from a client: the manager's three calls and a few more."""

    def get_pod(self, namespace: str, name: str) -> Pod: ...

    def patch_pod_status(self, namespace: str, name: str, patch: bytes, **kwargs: Any) -> Pod: ...

    def delete_pod(
        self, namespace: str, name: str, *, grace_period_seconds: int | None, uid: str | None
    ) -> None: ...

    def create_pod(self, pod: Any, namespace: str | None = None) -> Pod: ...

    def list_pods(self, namespace: str | None = None, **kwargs: Any) -> tuple[list[Pod], str]: ...

    def watch_pods(self, namespace: str | None = None, **kwargs: Any) -> Iterator[tuple[str, Pod]]: ...

    def create_node(self, node: dict[str, Any]) -> dict[str, Any]: ...


def _now() -> datetime:
    return datetime.now(UTC).replace(microsecond=0)


# --- the node agent ----------------------------------------------------------------

# A node for the benchmark: room for any number of pods, so admission never gets in the way.
SIMULATED_NODE = NodeDescription(
    capacity={"cpu": "64", "memory": "256Gi", "pods": "10000"},
    labels={"type": "podstatus-simulated"},
)


class NodeAgent:
    """The simulated node: a :class:`podstatus.node.NodeAgent` driving a :class:`SimulatedProvider`.

    The agent does what a kubelet-like agent does (the Node and its Lease, the pod
    watch, admission, the status manager, Events); the provider plays the
    containers. ``manager_options`` default to the kubelet's behaviour, as before.
    """

    def __init__(
        self,
        client: SimClient,
        node_name: str,
        *,
        timings: Timings | None = None,
        seed: int = 1,
        manager_options: dict[str, Any] | None = None,
        on_sync: Callable[[SyncRecord], None] | None = None,
        on_event: Callable[[str, Pod], None] | None = None,
        **agent_options: Any,
    ) -> None:
        self.client = client
        self.node_name = node_name
        self.timings = timings or Timings()
        self.provider = SimulatedProvider(timings=self.timings, seed=seed, description=SIMULATED_NODE)
        self._on_event = on_event
        self.agent = node.NodeAgent(
            client,
            self.provider,
            node_name,
            manager_options=dict(manager_options or {}),
            on_sync=on_sync,
            on_watch_event=self._watched,
            **agent_options,
        )

    def _watched(self, kind: str, pod: Pod) -> None:
        if kind != "DELETED":
            self.provider.observe(pod)
        if self._on_event is not None:
            self._on_event(kind, pod)

    @property
    def manager(self) -> Manager:
        return self.agent.manager

    @manager.setter
    def manager(self, value: Manager) -> None:
        self.agent.manager = value

    @property
    def pods(self) -> BasicPodManager:
        return self.agent.pods

    @property
    def deleted_uids(self) -> set[str]:
        return self.agent.deleted_uids

    @property
    def watch_errors(self) -> int:
        return self.agent.watch_errors

    @property
    def events_seen(self) -> int:
        return self.agent.watch_events

    def register_node(self) -> None:
        """Register the Node now (again, when it vanished); before :meth:`start`, nothing to do.

        :meth:`start` registers (or adopts) the Node itself, after checking its Lease. The
        agent also registers a vanished Node again on its own, at its next status post.
        """
        if self.agent._started:
            self.agent.register_node()

    def start(self) -> None:
        self.agent.start()

    def stop(self) -> None:
        self.agent.stop()

    def sim_pod(self, uid: str) -> SimPod | None:
        return self.provider.sim_pod(uid)

    def sims(self) -> list[SimPod]:
        return self.provider.sims()


# --- invariants ------------------------------------------------------------------------


@dataclass
class Invariant:
    name: str
    checked: int = 0
    violations: int = 0
    examples: list[str] = field(default_factory=list)

    def check(self, ok: bool, detail: Callable[[], str]) -> None:
        self.checked += 1
        if not ok:
            self.violations += 1
            if len(self.examples) < 5:
                self.examples.append(detail())


class InvariantChecker:
    """Watches every write and every watch event for the promises of SPEC section 7."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.wrong_uid = Invariant("no write to a pod with another UID")
        self.terminal_undone = Invariant("no terminal phase undone on the server")
        self.illegal_transition = Invariant("no illegal container transition on the server")
        self.early_delete = Invariant("no delete before the pod is terminal on the server")
        self._last: dict[str, Pod] = {}
        # (namespace, name) -> the UIDs the simulation knows to be that pod's, by time.
        self.owner_uid: dict[tuple[str, str], str] = {}

    def all(self) -> list[Invariant]:
        return [self.wrong_uid, self.terminal_undone, self.illegal_transition, self.early_delete]

    def ok(self) -> bool:
        return all(i.violations == 0 for i in self.all())

    def observe_write(self, namespace: str, name: str, patch: bytes, result: Pod) -> None:
        precondition = (msgspec.json.decode(patch).get("metadata") or {}).get("uid")
        with self._lock:
            self.wrong_uid.check(
                precondition is not None and precondition == result.uid,
                lambda: f"{namespace}/{name}: patch for UID {precondition} landed on {result.uid}",
            )
        self.observe_event("MODIFIED", result)

    def observe_delete(self, namespace: str, name: str, uid: str) -> None:
        """A final delete (grace 0) succeeded: the pod must have been terminal on the server."""
        with self._lock:
            last = self._last.get(uid)
            self.early_delete.check(
                last is not None and is_terminal_phase(last.status.phase),
                lambda: f"{namespace}/{name}: deleted while {last.status.phase if last else 'unseen'}",
            )

    def observe_event(self, kind: str, pod: Pod) -> None:
        if kind not in ("ADDED", "MODIFIED"):
            return
        with self._lock:
            before = self._last.get(pod.uid)
            if before is not None:
                rv_new, rv_old = pod.metadata.resource_version or "", before.metadata.resource_version or ""
                if rv_new.isdigit() and rv_old.isdigit() and int(rv_new) < int(rv_old):
                    return  # an older copy (a write's answer racing the watch)
                self.terminal_undone.check(
                    not (is_terminal_phase(before.status.phase) and not is_terminal_phase(pod.status.phase)),
                    lambda: f"{pod.key()}: {before.status.phase} -> {pod.status.phase}",
                )
                self.illegal_transition.check(
                    _legal_transition(before, pod), lambda: f"{pod.key()}: container left terminated state"
                )
            self._last[pod.uid] = pod


def _legal_transition(before: Pod, after: Pod) -> bool:
    # The same rule the manager applies before caching (SPEC 4.2 step 2), here to what the server holds.
    return check_container_state_transition(before.status, after.status, after.spec) is None


class CheckedClient:
    """Wraps a client: every status write and delete passes the invariant checker."""

    def __init__(self, inner: Any, checker: InvariantChecker) -> None:
        self._inner = inner
        self._checker = checker

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def patch_pod_status(self, namespace: str, name: str, patch: bytes, **kwargs: Any) -> Pod:
        result: Pod = self._inner.patch_pod_status(namespace, name, patch, **kwargs)
        self._checker.observe_write(namespace, name, patch, result)
        return result

    def delete_pod(
        self, namespace: str, name: str, *, grace_period_seconds: int | None, uid: str | None
    ) -> None:
        self._inner.delete_pod(namespace, name, grace_period_seconds=grace_period_seconds, uid=uid)
        if grace_period_seconds == 0 and uid is not None:
            self._checker.observe_delete(namespace, name, uid)


# --- the simulation ------------------------------------------------------------------

DEFAULT_NODE = "podstatus-node-1"

# Set on every pod a run creates, its value the run's id: the run deletes, recreates and cleans
# up only pods that carry its own (never a user's pod bound to the same node, nor another run's).
RUN_LABEL = "podstatus.io/simulation"


def simulated_node_names(base: str | None, count: int) -> list[str]:
    """The nodes of a run: one is ``base`` as given (default ``podstatus-node-1``); N are
    ``<base>-1`` .. ``<base>-N`` (default base ``podstatus-node``), as ``podstatus node`` names them."""
    if count < 1:
        raise ValueError(f"--nodes must be at least 1, got {count}")
    if count == 1:
        return [base or DEFAULT_NODE]
    return node_names(base or "podstatus-node", count)


@dataclass
class NodeHeartbeat:
    """One node's heartbeat at the end of the run (before the agents stop), as the API server has it."""

    node: str
    pods: int  # pods the run placed on this node (names: a pod re-created under its name counts once)
    renewals: int  # the agent's Lease writes (the first one creates it)
    lease_age: float | None  # seconds since the Lease's renewTime; None: not known (see ``state``)
    lease_duration: int = 40
    state: str = "live"  # live | stale | missing (no Lease on the server) | unknown (could not read it)

    @property
    def ok(self) -> bool:
        return self.state in ("live", "unknown")


@dataclass
class SimulationResult:
    pods_created: int
    phases: dict[str, int]
    deleted: int
    requests: dict[str, int]
    status_changes: int
    latencies: list[float]
    invariants: list[Invariant]
    elapsed: float
    settled: bool
    watch_errors: int
    controller_writes: int = 0
    # The world the run made, and what became of it (see docs/design.md, "simulate keeps count").
    lost: list[str] = field(default_factory=list)  # created, then gone without the simulation deleting them
    not_created: list[str] = field(default_factory=list)  # never created, with why
    create_retries: int = 0  # create attempts repeated after a transient failure
    creates_adopted: int = 0  # a retry found the earlier, unanswered attempt had landed
    node_registrations: int = 1  # 1: registered once; more: the Node vanished and was registered again
    node_checks: int = 0  # GETs of the Node made to notice it vanished
    final_state_known: bool = True  # the final list of the node's pods succeeded
    heartbeats: list[NodeHeartbeat] = field(default_factory=list)  # one per node, in node order
    interrupted: bool = False  # stop() (Ctrl-C) ended the run early: the summary so far
    recreated: int = 0  # pods deleted and created again under their name (counted once, as the new one)

    @property
    def invariants_ok(self) -> bool:
        return all(i.violations == 0 for i in self.invariants)

    def failures(self) -> list[str]:
        """Why the run failed, one line each; empty when it did what it claims."""
        out = [f"{i.name}: {i.violations} violations" for i in self.invariants if i.violations]
        if self.lost:
            out.append(f"{len(self.lost)} pods lost (gone from the server without being deleted)")
        if self.not_created:
            out.append(f"{len(self.not_created)} pods never created")
        if not self.final_state_known:
            out.append("the node's pods could not be listed at the end")
        for beat in self.heartbeats:
            if beat.state == "missing":
                out.append(f"node {beat.node}: no Lease on the server")
            elif beat.state == "stale":
                age = "never renewed" if beat.lease_age is None else f"renewed {beat.lease_age:.0f} s ago"
                out.append(f"node {beat.node}: Lease stale ({age}, duration {beat.lease_duration} s)")
        return out

    @property
    def ok(self) -> bool:
        return not self.failures()

    def percentile(self, q: float) -> float | None:
        if not self.latencies:
            return None
        data = sorted(self.latencies)
        k = min(len(data) - 1, max(0, round(q / 100 * (len(data) - 1))))
        return data[k]


class Simulation:
    """Creates workloads, plays the outside world, and drives :class:`NodeAgent` s to the end.

    ``nodes``: the names of the nodes to run (default: ``node_name`` alone). More than one
    share a runtime and one pod watch, as ``podstatus node --nodes N`` does; the pods are
    placed on them in turn. ``agent_options`` go to every :class:`podstatus.node.NodeAgent`
    (intervals, say).

    ``manifests`` are the simulation's own: some are deleted midway and one is recreated.
    ``user_manifests`` (``simulate -f``) run as written: created, watched and counted, never
    deleted or recreated by the run. Every pod created carries :data:`RUN_LABEL`.
    """

    def __init__(
        self,
        client: Any,
        manifests: list[dict[str, Any]],
        *,
        node_name: str = DEFAULT_NODE,
        nodes: Sequence[str] | None = None,
        duration: float = 60.0,
        delete_fraction: float = 0.3,
        recreate: int = 1,
        seed: int = 1,
        timings: Timings | None = None,
        manager_options: dict[str, Any] | None = None,
        request_counter: Any = None,
        on_progress: Callable[[dict[str, int]], None] | None = None,
        on_sync: Callable[[SyncRecord], None] | None = None,
        create_attempts: int = 10,
        create_backoff: float = 0.1,
        create_backoff_max: float = 2.0,
        events: str = "all",
        agent_options: Mapping[str, Any] | None = None,
        user_manifests: Sequence[dict[str, Any]] = (),
    ) -> None:
        self.node_names = list(nodes) if nodes is not None else [node_name]
        if not self.node_names:
            raise ValueError("a simulation needs at least one node")
        if len(set(self.node_names)) != len(self.node_names):
            raise ValueError(f"node names must differ: {', '.join(self.node_names)}")
        self.checker = InvariantChecker()
        # Bounded: 10 attempts from 0.1 s doubling to 2 s ride out ~10 s of an unreachable server.
        self.create_attempts = create_attempts
        self.create_backoff = create_backoff
        self.create_backoff_max = create_backoff_max
        self.raw_client = client
        self.client = CheckedClient(client, self.checker)
        self.run_id = secrets.token_hex(4)
        # The user's pods first (as given), then the simulation's own; the latter may be played with.
        self.manifests = [*user_manifests, *manifests]
        self._playable = [False] * len(user_manifests) + [True] * len(manifests)
        self.node_name = self.node_names[0]
        self.duration = duration
        self.delete_fraction = delete_fraction
        self.recreate = recreate
        self.rng = random.Random(seed)
        self.timings = timings or Timings()
        self._latencies: list[float] = []
        self._lat_lock = threading.Lock()
        self._status_changes = 0
        self._user_on_sync = on_sync
        self.on_progress = on_progress
        self.request_counter = request_counter
        options = dict(agent_options or {})
        # One node keeps its own runtime and watch; several share them, as `podstatus node` runs them.
        self.runtime = shared_runtime(len(self.node_names)) if len(self.node_names) > 1 else None
        if self.runtime is not None:
            options.update(watch=False, runtime=self.runtime)
        self.agents = [
            NodeAgent(
                self.client,
                name,
                timings=self.timings,
                seed=seed + i,
                manager_options=manager_options,
                on_sync=self._on_sync,
                on_event=self.checker.observe_event,
                events=events,
                # Each node its own InternalIP and pod CIDR, pod IPs from it: none shared.
                network=simulation_network(i),
                **options,
            )
            for i, name in enumerate(self.node_names)
        ]
        self.agent = self.agents[0]
        # Every node's pods through one watch (of the same checked client): not one per node.
        self.group = (
            node.NodeGroup(self.client, [a.agent for a in self.agents], runtime=self.runtime)
            if self.runtime is not None
            else None
        )
        self._created: dict[tuple[str, str], str] = {}
        self._placed: dict[tuple[str, str], str] = {}  # (namespace, name) -> its node
        # Every UID the simulation created (key by UID) and the ones it deleted itself.
        self._created_uids: dict[str, str] = {}
        self._deleted_by_us: set[str] = set()
        self._not_created: list[str] = []
        self.create_retries = 0
        self.creates_adopted = 0
        self.node_registrations = 0
        self.node_checks = 0  # GETs of the Node (not the pods' status traffic)
        self.node_check_interval = 10.0
        self._node_checked_at = 0.0
        self._watch_errors_seen = 0
        self._gates_set: set[str] = set()
        self._victims: set[str] = set()
        self._played_uids: set[str] = set()  # created from the simulation's own manifests
        self._replaced: set[str] = set()  # UIDs deleted and recreated under the same name
        # Status writes of the outside controller (readiness gates), not the node's.
        self.controller_writes = 0
        self._interrupt = threading.Event()
        self._registered: list[str] = []  # the nodes this run registered (not found there)

    def stop(self) -> None:
        """End :meth:`run` early (Ctrl-C): it stops creating and waiting and returns what it has."""
        self._interrupt.set()

    def _on_sync(self, record: SyncRecord) -> None:
        if record.patched and record.changed_at is not None:
            with self._lat_lock:
                self._latencies.append(record.synced_at - record.changed_at)
        if self._user_on_sync is not None:
            self._user_on_sync(record)

    # -- the outside world -----------------------------------------------------------

    def _create_all(self, deadline: float) -> None:
        # Spread creation over the first moments so pods overlap in every stage.
        spread = min(5.0, self.duration / 6)
        start = time.monotonic()
        for i, manifest in enumerate(self.manifests):
            manifest = msgspec.json.decode(msgspec.json.encode(manifest))
            manifest.setdefault("spec", {})["nodeName"] = self.node_names[i % len(self.node_names)]
            meta = manifest.setdefault("metadata", {})
            meta["labels"] = {**(meta.get("labels") or {}), RUN_LABEL: self.run_id}
            if self._interrupt.is_set():
                self._not_created.append(f"{_manifest_key(manifest)}: interrupted before its turn")
                continue
            if time.monotonic() > deadline:
                self._not_created.append(f"{_manifest_key(manifest)}: --duration ended before its turn")
                continue
            target = start + spread * i / max(1, len(self.manifests))
            delay = target - time.monotonic()
            if delay > 0:
                self._interrupt.wait(delay)
            self._check_node()
            pod = self._create(manifest, deadline)
            if pod is not None and self._playable[i]:
                self._played_uids.add(pod.uid)
            if pod is not None and self.on_progress is not None and i % 10 == 0:
                self.on_progress(self.progress())

    def _create(self, manifest: dict[str, Any], deadline: float) -> Pod | None:
        """Create one pod, retrying transient failures with a bounded back-off; None if it never was."""
        key = _manifest_key(manifest)
        attempt = 0
        while True:
            attempt += 1
            try:
                pod = self.client.create_pod(manifest)
            except ConflictError as err:
                # After an attempt whose answer was lost, "already exists" means it landed.
                adopted = self._adopt(manifest) if attempt > 1 and err.reason == "AlreadyExists" else None
                if adopted is None:
                    self._not_created.append(f"{key}: {err}")
                    log.warning("could not create pod=%s: %s", key, err)
                    return None
                pod = adopted
                self.creates_adopted += 1
            except ApiError as err:
                out_of_time = time.monotonic() >= deadline
                if not _transient(err) or attempt >= self.create_attempts or out_of_time:
                    self._not_created.append(f"{key}: {err} (after {attempt} attempts)")
                    log.warning("could not create pod=%s attempts=%d: %s", key, attempt, err)
                    return None
                backoff = min(self.create_backoff_max, self.create_backoff * 2 ** (attempt - 1))
                # Jitter, so retries after a server restart do not come back all at once.
                wait = err.retry_after or backoff * self.rng.uniform(0.5, 1.0)
                self.create_retries += 1
                self._check_node(force=True)
                log.info("create pod=%s attempt=%d failed, retrying in %.2fs: %s", key, attempt, wait, err)
                if self._interrupt.wait(min(wait, max(0.0, deadline - time.monotonic()))):
                    self._not_created.append(f"{key}: {err} (interrupted after {attempt} attempts)")
                    return None
                continue
            self._record_created(pod)
            return pod

    def _adopt(self, manifest: dict[str, Any]) -> Pod | None:
        meta = manifest.get("metadata") or {}
        try:
            pod: Pod = self.raw_client.get_pod(meta.get("namespace") or "default", meta.get("name") or "")
        except ApiError:
            return None
        # Ours only if it is on its node, carries this run's label, and no other copy of ours has this name.
        if (
            pod.spec.node_name != (manifest.get("spec") or {}).get("nodeName")
            or (pod.metadata.labels or {}).get(RUN_LABEL) != self.run_id
            or pod.uid in self._created_uids
        ):
            return None
        return pod

    def _record_created(self, pod: Pod) -> None:
        self._created[(pod.namespace, pod.name)] = pod.uid
        self._placed[(pod.namespace, pod.name)] = pod.spec.node_name or self.node_name
        self._created_uids[pod.uid] = f"{pod.namespace}/{pod.name}"

    # -- the nodes, together --------------------------------------------------------------

    def _watch_errors(self) -> int:
        return self.group.watcher.errors if self.group is not None else self.agent.watch_errors

    def _sims(self) -> list[SimPod]:
        return [sim for agent in self.agents for sim in agent.sims()]

    def _deleted_uids(self) -> set[str]:
        return set().union(*(agent.deleted_uids for agent in self.agents))

    def _pending_sync(self) -> int:
        return sum(agent.manager.pending_count() for agent in self.agents)

    def _start_agents(self) -> None:
        if self.group is None:
            self.agent.start()
            return
        try:
            self.group.start()  # every agent (several at a time), then the one pod watch
        except BaseException:
            assert self.runtime is not None
            self.runtime.close()
            raise

    def _stop_agents(self) -> None:
        if self.group is None:
            self.agent.stop()
        else:
            self.group.stop()  # the watch, the agents, then the shared runtime

    def _heartbeats(self) -> tuple[list[NodeHeartbeat], int]:
        """Each node's Lease as the API server has it now; and how many GETs that took."""
        pods = Counter(self._placed.values())
        get_lease = getattr(self.raw_client, "get_lease", None)
        beats: list[NodeHeartbeat] = []
        reads = 0
        for agent in self.agents:
            keeper = agent.agent.lease
            beat = NodeHeartbeat(
                agent.node_name, pods[agent.node_name], keeper.renewals, None, keeper.duration, "unknown"
            )
            beats.append(beat)
            if get_lease is None or not keeper.supported:
                continue
            reads += 1
            try:
                info = lease_info(get_lease(LEASE_NAMESPACE, agent.node_name))
            except NotFoundError:
                beat.state = "missing"
                continue
            except ApiError as err:
                log.warning("reading the Lease of node=%s failed: %s", agent.node_name, err)
                continue
            beat.lease_duration = info.duration or keeper.duration
            if info.renew_time is not None:
                beat.lease_age = max(0.0, (datetime.now(UTC) - info.renew_time).total_seconds())
            beat.state = "live" if info.live(datetime.now(UTC)) else "stale"
        return beats, reads

    def _check_node(self, *, force: bool = False) -> None:
        """Register a Node again when it is gone (an API server that restarted empty).

        Asked after a sign of trouble (a watch error, a failed create) and otherwise every
        ``node_check_interval`` seconds, so a healthy run spends almost no requests on it.
        """
        now = time.monotonic()
        get_node = getattr(self.raw_client, "get_node", None)
        trouble = force or self._watch_errors() != self._watch_errors_seen
        if get_node is None or (not trouble and now - self._node_checked_at < self.node_check_interval):
            return
        if trouble and now - self._node_checked_at < 0.5:
            return  # at most twice a second while the server is in trouble
        self._node_checked_at = now
        self._watch_errors_seen = self._watch_errors()
        for agent in self.agents:
            self.node_checks += 1
            try:
                get_node(agent.node_name)
            except NotFoundError:
                log.warning("node=%s is gone from the API server: registering it again", agent.node_name)
                try:
                    agent.register_node()
                    self.node_registrations += 1
                except ApiError as err:
                    log.warning("registering node=%s again failed: %s", agent.node_name, err)
            except ApiError as err:
                log.info("node check: %s", err)
                self._watch_errors_seen = -1  # still in trouble: ask again soon
                return

    def _set_gates(self) -> None:
        """An outside controller (a load balancer) marks readiness gates once containers are ready."""
        for sim in self._sims():
            pod = sim.pod
            gates = [g.condition_type for g in pod.spec.readiness_gates or ()]
            if not gates or pod.uid in self._gates_set or sim.deleting:
                continue
            if not all(c.ready for c in sim.containers):
                continue
            self._gates_set.add(pod.uid)
            now = _now().isoformat().replace("+00:00", "Z")
            patch = {
                "metadata": {"uid": pod.uid},
                "status": {
                    "conditions": [
                        {"type": t, "status": "True", "lastTransitionTime": now, "lastProbeTime": None}
                        for t in gates
                    ]
                },
            }
            try:
                # Through the raw client: this is another writer, not the node.
                self.raw_client.patch_pod_status(pod.namespace, pod.name, msgspec.json.encode(patch))
                self.controller_writes += 1
            except ApiError as err:
                log.info("readiness gate controller: %s", err)
                self._gates_set.discard(pod.uid)

    def _ours_to_play(self, sim: SimPod) -> bool:
        """Created by this run from its own manifests: never a user's pod (-f, or bound by hand)."""
        labels = sim.pod.metadata.labels or {}
        return labels.get(RUN_LABEL) == self.run_id and sim.uid in self._played_uids

    def _delete_some(self) -> int:
        victims = [
            s
            for s in self._sims()
            if s.behaviour in ("serve", "crash") and not s.deleting and s.pod.name and self._ours_to_play(s)
        ]
        self.rng.shuffle(victims)
        count = max(1, int(len(victims) * self.delete_fraction)) if victims else 0
        for sim in victims[:count]:
            try:
                self.raw_client.delete_pod(
                    sim.pod.namespace, sim.pod.name, grace_period_seconds=30, uid=sim.uid
                )
                self._victims.add(sim.uid)
                self._deleted_by_us.add(sim.uid)
            except ApiError as err:
                log.info("delete %s: %s", sim.pod.key(), err)
        return count

    def _recreate_some(self) -> None:
        """Delete a pod at once and create it again under the same name: a new UID, same key."""
        candidates = [
            s for s in self._sims() if s.behaviour == "serve" and not s.deleting and self._ours_to_play(s)
        ]
        for sim in candidates[: self.recreate]:
            pod = sim.pod
            try:
                self.raw_client.delete_pod(pod.namespace, pod.name, grace_period_seconds=0, uid=pod.uid)
                self._deleted_by_us.add(pod.uid)
                manifest: dict[str, Any] = {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {
                        "name": pod.name,
                        "namespace": pod.namespace,
                        "labels": dict(pod.metadata.labels or {}),
                        "annotations": dict(pod.metadata.annotations or {}),
                    },
                    "spec": {k: v for k, v in pod.spec.to_dict().items() if k != "nodeName"},
                }
                manifest["spec"]["nodeName"] = pod.spec.node_name or self.node_name  # the same node
                new = self._create(manifest, time.monotonic() + 10.0)
                if new is None:
                    continue
                self._replaced.add(pod.uid)
                self._played_uids.add(new.uid)
                log.info("recreated %s: UID %s -> %s", pod.key(), pod.uid, new.uid)
            except ApiError as err:
                log.info("recreate %s: %s", pod.key(), err)

    def progress(self) -> dict[str, int]:
        sims = self._sims()
        phases = Counter(s.pod.status.phase or "Pending" for s in sims)
        deleted_uids = self._deleted_uids()
        return {
            "created": len(self._created),
            "running": phases.get("Running", 0),
            "succeeded": phases.get("Succeeded", 0),
            "failed": phases.get("Failed", 0),
            "deleted": len((deleted_uids & self._deleted_by_us) - self._replaced),
            "lost": len((deleted_uids - self._deleted_by_us) & self._created_uids.keys()),
            "pending_sync": self._pending_sync(),
            "synced": len(self._latencies),
        }

    def _settled(self) -> bool:
        # Every pod we deleted must be gone: the node saw the delete, stopped it, and the manager
        # finished the deletion handshake.
        if not self._victims <= self._deleted_uids():
            return False
        for sim in self._sims():
            if sim.deleting:
                return False  # the deletion handshake is not over
            if sim.behaviour in ("complete", "fail") and not is_terminal_phase(sim.pod.status.phase):
                return False
            if sim.behaviour == "serve":
                if not all(c.ready for c in sim.containers):
                    return False
                if sim.pod.spec.readiness_gates and sim.pod.uid not in self._gates_set:
                    return False
        return self._pending_sync() == 0

    def run(self) -> SimulationResult:
        start = time.monotonic()
        deadline = start + self.duration
        for agent in self.agents:
            agent.register_node()
        self.node_registrations = len(self.agents)
        self._note_new_nodes()
        self._node_checked_at = time.monotonic()
        self._start_agents()
        try:
            self._create_all(deadline)
            deleted_at = start + max(self.duration * 0.35, min(12.0, self.duration * 0.6))
            did_delete = False
            settled = False
            while time.monotonic() < deadline and not self._interrupt.is_set():
                if self._interrupt.wait(0.2):
                    break
                self._check_node()
                self._set_gates()
                if not did_delete and time.monotonic() >= deleted_at:
                    self._delete_some()
                    self._recreate_some()
                    did_delete = True
                if self.on_progress is not None:
                    self.on_progress(self.progress())
                if did_delete and self._settled():
                    settled = True
                    break
            # Let the last writes land.
            for _ in range(3):
                for agent in self.agents:
                    agent.manager.sync_batch(all=False)
            # While the agents still run: a Lease released at the stop says nothing of the heartbeats.
            heartbeats, lease_reads = self._heartbeats()
        finally:
            self._stop_agents()
        elapsed = time.monotonic() - start
        phases: Counter[str] = Counter()
        listed: set[str] = set()
        on_server: set[str] | None = listed
        for name in self.node_names:
            try:
                pods, _ = self.raw_client.list_pods(field_selector=f"spec.nodeName={name}")
            except ApiError as err:
                log.warning("final list of node=%s failed: %s", name, err)
                on_server = None
                break
            listed.update(pod.uid for pod in pods)
            for pod in pods:
                phase = pod.status.phase or "Pending"
                if pod.metadata.deletion_timestamp is not None:
                    phase += " (terminating)"
                phases[phase] += 1
        requests = self.request_counter.snapshot() if self.request_counter is not None else {}
        # The summary is about pod status: the nodes' upkeep (Lease, Node status, Events) is not
        # counted, nor the Lease reads of the heartbeat check.
        upkeep: Counter[str] = Counter(get=lease_reads)
        for agent in self.agents:
            upkeep.update(agent.agent.upkeep_requests)
        for verb, n in upkeep.items():
            if verb in requests:
                requests[verb] = max(0, requests[verb] - n)
        deleted_uids = self._deleted_uids()
        # Lost: created by the run, gone, never deleted by it. Without a final list, the nodes' view.
        gone = self._created_uids.keys() - on_server if on_server is not None else deleted_uids
        lost = sorted(
            self._created_uids[uid] for uid in gone - self._deleted_by_us if uid in self._created_uids
        )
        if lost:
            log.warning("pods lost count=%d first=%s", len(lost), lost[:5])
        return SimulationResult(
            pods_created=len(self._created),  # names: a pod re-created under its name counts once
            phases=dict(phases),
            # A recreated pod is counted once, as the new copy (its name is on the server).
            deleted=len((self._deleted_by_us & deleted_uids) - self._replaced),
            requests=requests,
            status_changes=len(self._latencies),
            latencies=list(self._latencies),
            invariants=self.checker.all(),
            elapsed=elapsed,
            settled=settled,
            watch_errors=self._watch_errors(),
            controller_writes=self.controller_writes,
            lost=lost,
            not_created=list(self._not_created),
            create_retries=self.create_retries,
            creates_adopted=self.creates_adopted,
            node_registrations=self.node_registrations,
            node_checks=self.node_checks,
            final_state_known=on_server is not None,
            heartbeats=heartbeats,
            interrupted=self._interrupt.is_set(),
            recreated=len(self._replaced),
        )

    def _note_new_nodes(self) -> None:
        """Remember the Nodes not on the server yet: the run registers them, :meth:`cleanup` removes them."""
        get_node = getattr(self.raw_client, "get_node", None)
        if get_node is None:
            return
        for name in self.node_names:
            try:
                get_node(name)
            except NotFoundError:
                self._registered.append(name)
            except ApiError as err:
                log.info("node=%s: could not tell whether it exists: %s", name, err)

    def cleanup(self) -> tuple[int, int]:
        """Delete what the run created on the server (after :meth:`run`): its pods, then its Nodes.

        Only pods carrying this run's :data:`RUN_LABEL` and a UID it created, and only Nodes
        that were not there before: a cluster is left as the run found it, and the same
        command runs again. Returns (pods, nodes) deleted; failures are logged.
        """
        pods_deleted = 0
        try:
            pods, _ = self.raw_client.list_pods(label_selector=f"{RUN_LABEL}={self.run_id}")
        except ApiError as err:
            log.warning("cleanup: listing this run's pods failed: %s", err)
            pods = []
        for pod in pods:
            if pod.uid not in self._created_uids:
                continue
            try:
                self.raw_client.delete_pod(pod.namespace, pod.name, grace_period_seconds=0, uid=pod.uid)
                pods_deleted += 1
            except NotFoundError:
                pods_deleted += 1  # gone meanwhile
            except ApiError as err:
                log.warning("cleanup: deleting pod=%s failed: %s", pod.key(), err)
        nodes_deleted = 0
        delete_node = getattr(self.raw_client, "delete_node", None)
        for name in self._registered:
            if delete_node is None:
                break
            try:
                delete_node(name)  # its Lease goes with it (it names the Node as its owner)
                nodes_deleted += 1
            except NotFoundError:
                pass
            except ApiError as err:
                log.warning("cleanup: deleting node=%s failed: %s", name, err)
        log.info("cleanup: pods=%d nodes=%d", pods_deleted, nodes_deleted)
        return pods_deleted, nodes_deleted


def _manifest_key(manifest: dict[str, Any]) -> str:
    meta = manifest.get("metadata") or {}
    return f"{meta.get('namespace') or 'default'}/{meta.get('name') or meta.get('generateName') or '?'}"


def _transient(err: ApiError) -> bool:
    """Worth trying again: the server failed or was busy, or no answer came (it may be restarting)."""
    return isinstance(err, ServerError | TooManyRequestsError | ConnectionFailedError | RequestTimeoutError)
