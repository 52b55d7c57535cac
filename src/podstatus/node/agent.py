"""``NodeAgent``: a node of a real cluster, whose pods a provider runs and whose status podstatus keeps.

The agent is three controllers behind one checked :class:`~.config.NodeConfig`, sharing one
:class:`~.runtime.NodeRuntime` (virtual-kubelet's ``podcontroller.go``, ``node.go`` and
``lease_controller_v1.go``):

* :class:`~.podcontroller.PodController`: the pod watch, admission, the provider's
  create/update/delete on per-pod serial queues, in-place resize, and every report of the
  provider on one path to the status manager (which is given, or built by a factory).
* :class:`~.nodecontroller.NodeStatusController`: registers (or adopts) the Node, posts its
  status when it changes and at least every ``node_status_report_frequency``, Ready=False
  while the provider's ``ping`` fails, registers again a Node that disappeared.
* :class:`~.leasecontroller.LeaseController`: renews ``kube-node-lease/<node>`` on the
  heartbeat lane; tells the agent of a heartbeat gap and of a Lease taken over.

The agent owns what they share: the runtime (its own, or a :class:`NodeGroup`'s), the Event
recorder, the housekeeping tick (node status posts, polls, create retries, each when due) and
start and stop. Events (:mod:`.events`) are written from a background queue.
"""

from __future__ import annotations

import concurrent.futures
import logging
import math
import threading
import time
import zlib
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import Any

from ..manager import new_manager
from ..podmanager import BasicPodManager
from ..protocols import NodeClient, StatusManager
from ..types import Pod
from .calls import BoundCaller, ProviderError
from .config import NodeConfig
from .events import NORMAL, EventRecorder, ObjectRef
from .heartbeat import LeaseHeldError, LeaseKeeper, NodeStatusReporter, utcnow
from .leasecontroller import LeaseController
from .logs import log_fields
from .nodecontroller import NodeStatusController, UpkeepClient
from .podcontroller import DeletionSafety, ManagerFactory, PodController, PodState
from .provider import NodeDescription, Provider
from .runtime import HOUSEKEEPING, AgentTicks, NodeRuntime
from .watch import PodWatcher

__all__ = ["LeaseHeldError", "NodeAgent", "NodeGroup", "PodWatcher"]

log = logging.getLogger(__name__)


def _log(level: int, message: str, **fields: Any) -> None:
    log_fields(log, level, message, **fields)


ON_STOP = ("leave", "cordon")
# The longest a provider's close may take at stop.
STOP_CALL_TIMEOUT = 2.0
_HOUSEKEEPING = "housekeeping"


def default_manager_factory(client: NodeClient, options: Mapping[str, Any] | None) -> ManagerFactory:
    """The real status manager (:func:`podstatus.new_manager`), the fast path unless ``options`` say."""
    chosen = dict(options if options is not None else {"fast_path": True})

    def build(pods: BasicPodManager, safety: DeletionSafety) -> StatusManager:
        return new_manager(client, pods, safety, **chosen)

    return build


class NodeAgent:
    """A kubelet-like agent for one node: ``NodeAgent(client, provider, NodeConfig(node_name=...))``.

    ``client`` implements the NodeClient protocol (pods, nodes, leases, events).
    The status manager: ``manager`` (one built already, a fake say), else
    ``manager_factory(pods, safety)``, else :func:`podstatus.new_manager` with
    ``manager_options`` (default: the fast path; with ``sync_pool`` the runtime's when shared).
    ``runtime``: the timer and pools shared by the agents of a process (default: its own).
    ``heartbeat_client``: a client of its own for the Lease and the Node (the kubelet's
    heartbeat client: a full connection pool of pod writes never delays a heartbeat).
    ``on_watch_event(kind, pod)``: sees every pod event; ``on_lost(agent)``: the node was taken over.
    """

    def __init__(
        self,
        client: NodeClient,
        provider: Provider,
        config: NodeConfig,
        *,
        manager: StatusManager | None = None,
        manager_factory: ManagerFactory | None = None,
        manager_options: Mapping[str, Any] | None = None,
        runtime: NodeRuntime | None = None,
        heartbeat_client: NodeClient | None = None,
        clock: Callable[[], datetime] = utcnow,
        on_watch_event: Callable[[str, Pod], None] | None = None,
        on_lost: Callable[[NodeAgent], None] | None = None,
    ) -> None:
        if not isinstance(config, NodeConfig):
            raise TypeError(f"config must be a NodeConfig, got {type(config).__name__}")
        if sum(x is not None for x in (manager, manager_factory, manager_options)) > 1:
            raise ValueError("give one of manager, manager_factory and manager_options")
        self.config = config
        self.client = client
        self.provider = provider
        self.node_name = config.node_name
        self.identity = config.identity
        self.clock = clock
        self._on_lost = on_lost

        self.upkeep_requests: Counter[str] = Counter()
        self._upkeep_lock = threading.Lock()
        upkeep = UpkeepClient(heartbeat_client or client, self.upkeep_requests, self._upkeep_lock)
        self._own_runtime = runtime is None
        self.runtime = runtime if runtime is not None else self._new_runtime()
        self.recorder = EventRecorder(
            UpkeepClient(client, self.upkeep_requests, self._upkeep_lock),
            component=config.event_component,
            host=self.node_name,
            writer=None if self._own_runtime else self.runtime.events,
            events=config.events,
        )
        # A provider whose methods never block (blocking = False) is called without a thread hop.
        self._inline_provider = getattr(provider, "blocking", True) is False
        self.calls = self._bound_caller()

        self.lease = LeaseKeeper(
            upkeep, self.node_name, self.identity, duration=config.lease_duration, clock=clock
        )
        reporter = NodeStatusReporter(
            self.node_name, report_frequency=config.node_status_report_frequency, clock=clock
        )
        reporter.kubelet_port = config.kubelet_endpoint[1] if config.kubelet_endpoint is not None else None
        self.nodes = NodeStatusController(
            config,
            provider,
            upkeep,
            recorder=self.recorder,
            calls=self.calls,
            reporter=reporter,
            on_node_uid=self._node_uid_known,
        )
        if manager is not None:
            given = manager
            manager_factory = lambda pods, safety: given  # noqa: E731
        elif manager_factory is None:
            options = dict(manager_options if manager_options is not None else {"fast_path": True})
            if not self._own_runtime:
                # Agents sharing a runtime share its sync workers too: no threads per node.
                options.setdefault("sync_pool", self.runtime.sync)
            manager_factory = default_manager_factory(client, options)
        self.pod_controller = PodController(
            config,
            provider,
            manager_factory=manager_factory,
            recorder=self.recorder,
            calls=self.calls,
            tasks=self.runtime.tasks,
            describe=lambda: self.nodes.description,
            schedule_housekeeping=self._schedule_housekeeping,
            on_watch_event=on_watch_event,
        )
        self._ticks = AgentTicks()
        self.leases = LeaseController(
            self.lease,
            config.lease_renew_interval,
            self._ticks,
            on_gap=self._heartbeat_gap,
            on_recreated=lambda: self._schedule_housekeeping(time.monotonic()),
            on_lost=self._lose,
        )
        self._watcher = (
            PodWatcher(client, self, f"spec.nodeName={self.node_name}", timeout=config.watch_timeout)
            if config.watch
            else None
        )
        self._started = False
        self.lost = False
        # The housekeeping tick: one pending or running at a time (see _schedule_housekeeping).
        self._hk_running = False
        self._hk_wanted: float | None = None
        self._hk_due = 0.0
        self._next_status = 0.0
        self._next_poll = 0.0
        # Where in each interval this node's heartbeats fall: spread by name, not all at once.
        self._phase = (zlib.crc32(self.node_name.encode()) % 1000) / 1000.0

    def _new_runtime(self) -> NodeRuntime:
        return NodeRuntime(
            provider_timeout=self.config.provider_timeout,
            task_workers=32,
            provider_workers=32,
            heartbeat_workers=1,
            housekeeping_workers=1,
            event_workers=1,
            name=f"podstatus-{self.node_name}",
        )

    def _bound_caller(self) -> BoundCaller:
        return BoundCaller(
            self.runtime.calls,
            self.config.provider_timeout,
            inline=self._inline_provider,
            node=self.node_name,
        )

    def _node_uid_known(self, uid: str) -> None:
        self.lease.node_uid = uid

    # -- what the controllers hold, read by tests, the kubelet API and the simulator --------

    @property
    def manager(self) -> StatusManager:
        return self.pod_controller.manager

    @property
    def pods(self) -> BasicPodManager:
        return self.pod_controller.pods

    @property
    def deleted_uids(self) -> set[str]:
        return self.pod_controller.deleted_uids

    @property
    def watch_events(self) -> int:
        return self.pod_controller.watch_events

    @property
    def node_status(self) -> NodeStatusReporter:
        return self.nodes.node_status

    @property
    def pod_cidr(self) -> str | None:
        return self.nodes.pod_cidr

    @property
    def description(self) -> NodeDescription:
        return self.nodes.description

    @property
    def watch_errors(self) -> int:
        return self._watcher.errors if self._watcher is not None else 0

    def pod_states(self) -> dict[str, PodState]:
        return self.pod_controller.pod_states()

    def healthy(self) -> bool:
        """For a liveness probe: the housekeeping is not overdue, the timer runs, the node is ours."""
        if not self._started or self.lost or not self.runtime.timer.alive():
            return False
        limit = max(5.0, 3 * max(self.config.housekeeping_interval, 1.0))
        return time.monotonic() - self._hk_due < limit

    def problems(self) -> list[str]:
        """What keeps the node from being Ready, for ``/readyz`` and ``/healthz``: empty when it is.

        :meth:`healthy` (the loops run) and the provider's last ``ping`` (its failure makes
        the node Ready=False).
        """
        out = []
        if not self.healthy():
            out.append(f"{self.node_name}: not running (not started, taken over, or housekeeping overdue)")
        error = self.nodes.ready_error
        if error is not None:
            out.append(f"{self.node_name}: NotReady: provider is not healthy: {error}")
        return out

    # -- the pod watch feeds the pod controller ------------------------------------------

    def relist(self, pods: Iterable[Pod]) -> None:
        self.pod_controller.relist(pods)

    def handle_pod_event(self, kind: str, pod: Pod) -> None:
        self.pod_controller.handle_pod_event(kind, pod)

    def register_node(self, status: dict[str, Any] | None = None) -> bool:
        """Create the Node (with ``status`` when given), or adopt it: True when created."""
        return self.nodes.register_node(status)

    def cordon(self) -> None:
        self.nodes.cordon()

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> None:
        """Check the Lease, register the Node, start everything. Raises :class:`LeaseHeldError`."""
        if self._started:
            return
        if self._own_runtime and self.runtime.closed:
            self.runtime = self._new_runtime()
            self.calls = self._bound_caller()
            self.nodes.calls = self.calls
            self.pod_controller.use(self.calls, self.runtime.tasks)
        config = self.config
        self.lease.check(config.take_over)
        error, was_ready, created = self.nodes.start()
        if not self.lease.created_at_check:
            self.lease.renew()
        if created:
            self.nodes.node_status_posted(error, was_ready, force=True)
        else:
            self.nodes.post_node_status(force=True)
        self.pod_controller.start()
        self._ticks.stopped.clear()
        self.recorder.start()
        self.manager.start()
        self._started = True
        self.recorder.event(
            ObjectRef.for_node(self.node_name), NORMAL, "Starting", "Starting podstatus node agent."
        )
        now = time.monotonic()
        # The first renewal and status check at this node's phase of the interval, then every
        # interval: a thousand nodes started together renew spread over the interval. The Lease
        # was just written: its first renewal is one to one and a half intervals away, well
        # inside its duration (four intervals).
        self.leases.start(self.runtime.timer, config.lease_renew_interval * (1 + self._phase / 2))
        self._next_status = now + config.node_status_update_frequency * (0.5 + self._phase / 2)
        self._next_poll = now + config.status_poll_interval
        self._schedule_housekeeping(now + min(config.housekeeping_interval, config.status_poll_interval))
        if self._watcher is not None:
            self._watcher.start()
        _log(
            logging.INFO,
            "node agent started",
            node=self.node_name,
            identity=self.identity,
            providerPods=self.pod_controller.provider_pod_count,
        )

    def stop(self, on_stop: str = "leave", timeout: float = 5.0) -> None:
        """Stop. ``on_stop="cordon"`` marks the Node unschedulable first; pods are left as they are."""
        if on_stop not in ON_STOP:
            raise ValueError(f"on_stop must be one of {', '.join(ON_STOP)}")
        if on_stop == "cordon" and self._started:
            self.cordon()
        self._ticks.stopped.set()
        if self._watcher is not None:
            self._watcher.stop()
        self._ticks.cancel(timeout)
        self.runtime.tasks.wait_idle(min(timeout, 2.0))
        self.manager.stop(timeout=timeout)
        self.recorder.stop(min(timeout, 2.0))
        if self._started:
            self.lease.release()
        close = getattr(self.provider, "close", None)
        if close is not None:
            try:
                # Bounded even for a blocking = False provider: a close that hangs must not hold
                # the stop (and the process) up.
                self.calls.call(
                    "close", close, timeout=min(self.config.provider_timeout, STOP_CALL_TIMEOUT), bounded=True
                )
            except ProviderError as err:
                _log(logging.WARNING, "provider close failed", node=self.node_name, error=err)
        if self._own_runtime:
            self.runtime.close()
        self._started = False
        _log(logging.INFO, "node agent stopped", node=self.node_name, onStop=on_stop)

    def _lose(self) -> None:
        """Another agent took the node over: stop writing anything for it."""
        if self.lost:
            return
        self.lost = True
        self.pod_controller.lost = True
        _log(logging.ERROR, "another agent took this node over; stopping", node=self.node_name)
        self._ticks.stopped.set()
        self._ticks.cancel_handles()
        if self._watcher is not None:
            self._watcher.stop()
        self.manager.stop(timeout=1)
        if self._on_lost is not None:
            self._on_lost(self)

    # -- housekeeping ----------------------------------------------------------------------

    def _heartbeat_gap(self) -> None:
        self.nodes.heartbeat_gap = True
        self._schedule_housekeeping(time.monotonic())

    def _schedule_housekeeping(self, when: float) -> None:
        """Run the housekeeping at ``when`` at the latest (earlier if it is already due earlier)."""
        ticks = self._ticks
        with ticks.lock:
            if ticks.stopped.is_set():
                return
            if self._hk_running:
                self._hk_wanted = when if self._hk_wanted is None else min(self._hk_wanted, when)
                return
            handle = ticks.handles.get(_HOUSEKEEPING)
            if handle is not None and not handle.cancelled:
                if handle.when <= when:
                    return
                handle.cancel()
            self._hk_due = when
            ticks.schedule(_HOUSEKEEPING, self.runtime.timer, when, self._housekeeping_tick, HOUSEKEEPING)

    def _housekeeping_tick(self) -> None:
        ticks = self._ticks
        if not ticks.begin():
            return
        config = self.config
        now = time.monotonic()
        with ticks.lock:
            self._hk_running = True
            ticks.handles[_HOUSEKEEPING] = None
            self._hk_due = now
        next_retry = math.inf
        try:
            if self.nodes.heartbeat_gap:
                self.nodes.heartbeat_gap = False
                self._next_status = now + config.node_status_update_frequency
                self.nodes.resync_node_status()
            elif self.lease.recreated:
                # The Lease vanished (its Node deleted, and the Lease collected with it?): post
                # now, which registers the Node again if it is gone.
                self.lease.recreated = False
                self._next_status = now + config.node_status_update_frequency
                self.nodes.post_node_status(force=True)
            elif now >= self._next_status:
                self._next_status = now + config.node_status_update_frequency
                self.nodes.post_node_status()
            notifying = self.pod_controller.notifying
            if not notifying and now >= self._next_poll:
                self._next_poll = now + config.status_poll_interval
                self.pod_controller.poll()
            next_retry = self.pod_controller.retry_due(now)
        except Exception:
            log.exception("housekeeping failed, it goes on node=%s", self.node_name)
        finally:
            due = min(self._next_status, next_retry, now + config.housekeeping_interval)
            if not self.pod_controller.notifying:
                due = min(due, self._next_poll)
            if self.nodes.heartbeat_gap:
                due = now + max(config.housekeeping_interval, 1.0)  # a failed resync: try again soon
            with ticks.lock:
                self._hk_running = False
                if self._hk_wanted is not None:
                    due, self._hk_wanted = min(due, self._hk_wanted), None
            self._schedule_housekeeping(max(due, now))
            ticks.end()


class NodeGroup:
    """Several agents in one process sharing one pod watch (``spec.nodeName!=``, dispatched by node).

    Build the agents with ``watch=False`` and one :class:`NodeRuntime` (the group closes it
    on :meth:`stop`). They start ``start_workers`` at a time.
    """

    def __init__(
        self,
        client: NodeClient,
        agents: Iterable[NodeAgent],
        *,
        watch_timeout: float = 300.0,
        runtime: NodeRuntime | None = None,
        start_workers: int = 16,
    ) -> None:
        self.agents = {a.node_name: a for a in agents}
        for agent in self.agents.values():
            if agent._watcher is not None:
                raise ValueError("agents of a NodeGroup are built with watch=False")
        self.watcher = PodWatcher(client, self, "spec.nodeName!=", timeout=watch_timeout)
        self.runtime = runtime
        self.start_workers = max(1, start_workers)

    def relist(self, pods: Iterable[Pod]) -> None:
        by_node: dict[str, list[Pod]] = {name: [] for name in self.agents}
        for pod in pods:
            if pod.spec.node_name in by_node:
                by_node[pod.spec.node_name].append(pod)
        for name, agent in self.agents.items():
            agent.relist(by_node[name])

    def handle_pod_event(self, kind: str, pod: Pod) -> None:
        agent = self.agents.get(pod.spec.node_name or "")
        if agent is not None:
            agent.handle_pod_event(kind, pod)

    def start_agents(self) -> None:
        """Start every agent (registration, first Lease, first status), several at a time.

        Raises the first failure (a :class:`LeaseHeldError`, say) after stopping the agents
        that did start.
        """
        agents = list(self.agents.values())
        if len(agents) == 1 or self.start_workers == 1:
            started: list[NodeAgent] = []
            try:
                for agent in agents:
                    agent.start()
                    started.append(agent)
            except BaseException:
                for agent in started:
                    agent.stop()
                raise
            return
        with concurrent.futures.ThreadPoolExecutor(
            self.start_workers, thread_name_prefix="node-start"
        ) as pool:
            futures = {pool.submit(agent.start): agent for agent in agents}
            failure: BaseException | None = None
            for future in concurrent.futures.as_completed(futures):
                error = future.exception()
                if error is not None and failure is None:
                    failure = error
        if failure is not None:
            self._stop_all([a for f, a in futures.items() if f.exception() is None], "leave")
            raise failure

    def start(self) -> None:
        self.start_agents()
        self.watcher.start()

    def stop(self, on_stop: str = "leave") -> None:
        self.watcher.stop()
        self._stop_all(list(self.agents.values()), on_stop)
        if self.runtime is not None:
            self.runtime.close()

    def _stop_all(self, agents: list[NodeAgent], on_stop: str) -> None:
        if len(agents) <= 1:
            for agent in agents:
                agent.stop(on_stop)
            return
        with concurrent.futures.ThreadPoolExecutor(
            self.start_workers, thread_name_prefix="node-stop"
        ) as pool:
            for future in [pool.submit(agent.stop, on_stop) for agent in agents]:
                try:
                    future.result()
                except Exception:
                    log.exception("stopping a node agent failed")

    def healthy(self) -> bool:
        return all(a.healthy() for a in self.agents.values())

    def problems(self) -> list[str]:
        return [p for a in self.agents.values() for p in a.problems()]
