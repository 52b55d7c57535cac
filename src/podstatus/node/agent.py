"""``NodeAgent``: a node of a real cluster, whose pods a provider runs and whose status podstatus keeps.

The agent owns every write to the API server; the provider only reports.

* **Node and Lease** (:mod:`.heartbeat`): registers the Node (or adopts it),
  renews ``kube-node-lease/<node>`` every ``lease_renew_interval``, posts node
  status when it changes and at least every ``node_status_report_frequency``,
  Ready=False while the provider's ``ping`` fails, re-registers a Node that
  disappeared. Refuses to start while another live agent holds the Lease.
* **Pods**: list+watch of ``spec.nodeName=<node>`` (relist on 410), admission
  (the ``pods`` capacity: OutOfpods as the kubelet says it), the provider's
  create/update/delete on per-pod serial queues with timeouts, every status
  through the status manager (so SPEC 3-4 and the fast path apply), the
  deletion handshake, adoption of running pods after a restart.
* **Events** (:mod:`.events`): the kubelet's reasons, deduplicated, counted,
  rate limited, written from a background queue.

Threads: the pod watch (or a shared one, :class:`NodeGroup`), the status
manager's, and a :class:`~podstatus.node.runtime.NodeRuntime`: one timer for
the Lease renewals and the housekeeping (node status, polling, retries), the
per-pod task pool, the provider call pool (and its event loop thread for
``async`` providers), the event writers. An agent alone owns its runtime;
the agents of a :class:`NodeGroup` share one, so the thread count does not
grow with the number of nodes.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import logging
import math
import socket
import threading
import time
import uuid
import zlib
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import msgspec

from ..conditions import (
    POD_READY_TO_START_CONTAINERS,
    POD_RESIZE_IN_PROGRESS,
    POD_RESIZE_PENDING,
    POD_SCHEDULED,
    calculate_pod_condition_observed_generation,
    generate_containers_ready_condition,
    generate_pod_initialized_condition,
    generate_pod_ready_condition,
    is_kubelet_owned,
    is_terminal_phase,
)
from ..errors import ApiError, ConflictError, GoneError, InvalidObjectError, NotFoundError
from ..flags import Flag
from ..manager import Manager, SyncRecord, new_manager
from ..podmanager import BasicPodManager, lean_pod
from ..qos import compute_pod_qos
from ..sharing import share_equal_parts
from ..statusutil import bound_messages
from ..types import (
    ContainerState,
    ContainerStateWaiting,
    ContainerStatus,
    HostIP,
    Pod,
    PodCondition,
    PodIP,
    PodStatus,
)
from ..validation import check_container_state_transition
from .calls import BoundCaller, ProviderError
from .events import NORMAL, WARNING, EventRecorder, ObjectRef
from .heartbeat import LeaseHeldError, LeaseKeeper, NodeStatusReporter, build_node, utcnow
from .logs import log_fields
from .network import NodeNetwork
from .provider import DEFAULT_ADDRESSES, NodeDescription, pending_status
from .resize import (
    ACCEPTED,
    DEFERRED,
    INFEASIBLE,
    Allocation,
    allocation_of,
    allocation_of_pod,
    decide,
    pod_requests,
    resize_message,
    same_allocation,
    same_resources,
)
from .runtime import HEARTBEAT, HOUSEKEEPING, NodeRuntime

__all__ = ["LeaseHeldError", "NodeAgent", "NodeGroup", "PodWatcher"]

log = logging.getLogger(__name__)


def _log(level: int, message: str, **fields: Any) -> None:
    log_fields(log, level, message, **fields)


PHASES = ("Pending", "Running", "Succeeded", "Failed", "Unknown")
ON_STOP = ("leave", "cordon")
# The longest a provider's close may take at stop.
STOP_CALL_TIMEOUT = 2.0


# --- upkeep requests, counted apart from pod status -----------------------------------------

_VERBS = {
    "get_lease": "get",
    "create_lease": "create",
    "update_lease": "update",
    "get_node": "get",
    "create_node": "create",
    "patch_node": "patch",
    "patch_node_status": "patch",
    "create_event": "create",
    "patch_event": "patch",
}


class _UpkeepClient:
    """The client, for leases, the Node and Events: counts those requests by verb (they are not pod status)."""

    def __init__(self, client: Any, counter: Counter[str], lock: threading.Lock) -> None:
        self._client = client
        self._counter = counter
        self._lock = lock

    def __getattr__(self, name: str) -> Any:
        fn = getattr(self._client, name)  # AttributeError: the client has no such API
        verb = _VERBS.get(name)
        if verb is None:
            return fn

        def counted(*args: Any, **kwargs: Any) -> Any:
            with self._lock:
                self._counter[verb] += 1
            return fn(*args, **kwargs)

        return counted


# --- per-pod state ------------------------------------------------------------------------


@dataclass
class _PodState:
    pod: Pod
    admitted: bool = False
    rejected: bool = False
    created: bool = False
    deleting: bool = False
    stopped: bool = False
    create_failures: int = 0
    retry_at: float | None = None
    last_report: PodStatus | None = None
    # In-place resize: what the agent allocated each container (the kubelet's checkpoint), and
    # what the provider applied (None: what it was created with, or what it reports).
    allocated: Allocation | None = None
    actuated: Allocation | None = None
    status_error_event_at: float | None = None  # the last FailedSync Event for a status that failed
    lock: threading.Lock = field(default_factory=threading.Lock)


def _non_kubelet_conditions(pod: Pod) -> tuple[tuple[str, str], ...]:
    return tuple((c.type, c.status) for c in pod.status.conditions or () if not is_kubelet_owned(c.type))


def _waiting(c: Any, reason: str) -> ContainerStatus:
    return ContainerStatus(
        name=c.name,
        image=c.image or "",
        ready=False,
        restart_count=0,
        state=ContainerState(waiting=ContainerStateWaiting(reason=reason)),
    )


def _initial_allocation(pod: Pod) -> Allocation:
    """What a pod was allocated when the agent first sees it: its spec, or (a pod running before a
    restart of the agent) the resources its container statuses report, as the kubelet's checkpoint."""
    allocation = allocation_of_pod(pod)
    for cs in (*(pod.status.init_container_statuses or ()), *(pod.status.container_statuses or ())):
        if cs.name in allocation and isinstance(cs.resources, dict):
            allocation[cs.name] = {
                k: dict(v) for k, v in cs.resources.items() if k in ("limits", "requests") and v
            }
    return allocation


def _with_resources(
    statuses: tuple[ContainerStatus, ...] | None,
    reported: Any,
    allocated: Allocation | None,
    actuated: Allocation | None,
) -> tuple[ContainerStatus, ...] | None:
    """convertContainerStatusResources: ``allocatedResources`` (the allocated requests) and
    ``resources`` (what runs: the provider's word, else what it was given) on each container
    the provider reported; a container that does not run shows its allocation."""
    if statuses is None or allocated is None:
        return statuses
    names = {cs.name for cs in reported or () if isinstance(cs, ContainerStatus)}
    out = []
    for cs in statuses:
        alloc = allocated.get(cs.name)
        if cs.name in names and alloc is not None:
            resources = cs.resources
            if cs.state.running is None or not isinstance(resources, dict):
                applied = (
                    actuated.get(cs.name) if actuated is not None and cs.state.running is not None else None
                )
                resources = applied if applied is not None else alloc
            requests = alloc.get("requests")
            if cs.allocated_resources is not requests or cs.resources is not resources:
                cs = cs.replace(allocated_resources=requests, resources=resources)
        out.append(cs)
    return tuple(out)


class _Garbage(ValueError):
    """The provider reported a status that cannot be a pod's status."""


class _Notifier:
    """What the provider gets: reports go to the agent, never to the API server."""

    def __init__(self, agent: NodeAgent) -> None:
        self._agent = agent

    def pod_status(self, pod_uid: str, status: PodStatus) -> None:
        self._agent.report(pod_uid, status)

    def event(
        self, pod_uid: str, type: str, reason: str, message: str, field_path: str | None = None
    ) -> None:
        self._agent.pod_event(pod_uid, type, reason, message, field_path)


class _Safety:
    """Pod deletion safety from the provider: reclaimed once the provider stopped the pod.

    Lock-free reads: the status manager asks while holding its lock, and the agent
    calls the manager while holding a pod's lock.
    """

    def __init__(self, agent: NodeAgent) -> None:
        self._agent = agent

    def pod_resources_are_reclaimed(self, pod: Pod, status: PodStatus) -> bool:
        state = self._agent._states.get(pod.uid)
        if state is None:
            return pod.uid not in self._agent._provider_uids
        every = (*(status.init_container_statuses or ()), *(status.container_statuses or ()))
        return state.stopped and not any(cs.state.running is not None for cs in every)

    def pod_could_have_running_containers(self, pod: Pod) -> bool:
        state = self._agent._states.get(pod.uid)
        if state is None:
            return pod.uid in self._agent._provider_uids
        if state.stopped:
            return False
        report = state.last_report
        if report is None:
            return state.created or pod.uid in self._agent._provider_uids
        # What the provider said last: a finished job's phase may go out once nothing runs.
        every = (*(report.init_container_statuses or ()), *(report.container_statuses or ()))
        return any(cs.state.running is not None for cs in every)


# --- the agent ----------------------------------------------------------------------------


class NodeAgent:
    """A kubelet-like agent for one node: ``NodeAgent(client, provider, node_name, ...)``.

    ``client`` implements the NodeClient protocol (pods, nodes, leases, events).
    Intervals are the kubelet's by default; tests shorten them.
    ``manager_options`` go to :func:`podstatus.new_manager` (default: the fast path).
    ``take_over`` starts even when another live agent holds the node's Lease.
    ``watch=False`` leaves the pod watch to a :class:`NodeGroup` that feeds
    :meth:`handle_pod_event` and :meth:`relist`.
    ``runtime``: the timer and pools shared by the agents of a process (default: its own).
    ``heartbeat_client``: a client of its own for the Lease and the Node (the kubelet's
    heartbeat client: a full connection pool of pod writes never delays a heartbeat).
    ``housekeeping_interval``: the longest the housekeeping sleeps; node status posts,
    polls and retries wake it when they are due.
    ``status_error_event_interval``: a pod whose ``get_pod_status`` raises or hangs gets a
    Warning ``FailedSync`` Event at most this often (the log has every failure).
    ``network``: the node's InternalIP (used when the provider's description keeps the
    default address) and pod CIDR (the Node's ``spec.podCIDR``, handed to the provider's
    optional ``update_pod_cidr``); see :mod:`.network`.
    ``kubelet_endpoint``: (address, port) of the node's kubelet API (:mod:`.kubeletapi`): the
    Node's InternalIP and ``daemonEndpoints`` point there and it declares ``ExtendWebSocketsToKubelet``.
    """

    def __init__(
        self,
        client: Any,
        provider: Any,
        node_name: str,
        *,
        identity: str | None = None,
        take_over: bool = False,
        lease_duration: int = 40,
        lease_renew_interval: float = 10.0,
        node_status_update_frequency: float = 10.0,
        node_status_report_frequency: float = 300.0,
        provider_timeout: float = 10.0,
        status_poll_interval: float = 5.0,
        create_retry_max: float = 60.0,
        housekeeping_interval: float = 5.0,
        watch: bool = True,
        watch_timeout: float = 300.0,
        manager_options: Mapping[str, Any] | None = None,
        on_sync: Callable[[SyncRecord], None] | None = None,
        on_watch_event: Callable[[str, Pod], None] | None = None,
        on_lost: Callable[[NodeAgent], None] | None = None,
        event_component: str = "podstatus-node",
        events: str = "all",
        clock: Callable[[], datetime] = utcnow,
        runtime: NodeRuntime | None = None,
        heartbeat_client: Any = None,
        cpu_manager_policy: str = "none",
        status_error_event_interval: float = 60.0,
        network: NodeNetwork | None = None,
        kubelet_endpoint: tuple[str, int] | None = None,
    ) -> None:
        self.client = client
        # Where this node's kubelet API listens (see .kubeletapi); None: it has none.
        self.kubelet_endpoint = kubelet_endpoint
        # The kubelet's --cpu-manager-policy: "static" makes a Guaranteed pod's cpu resize infeasible.
        self.cpu_manager_policy = cpu_manager_policy
        self.network = network
        self.pod_cidr: str | None = None  # the Node's spec.podCIDR once registered
        self.status_error_event_interval = status_error_event_interval
        self.provider = provider
        self.node_name = node_name
        self.identity = identity or f"{socket.gethostname()}_{uuid.uuid4().hex[:12]}"
        self.take_over = take_over
        self.lease_renew_interval = lease_renew_interval
        self.node_status_update_frequency = node_status_update_frequency
        self.status_poll_interval = status_poll_interval
        self.create_retry_max = create_retry_max
        self.housekeeping_interval = housekeeping_interval
        self.provider_timeout = provider_timeout
        self.clock = clock
        self._on_watch_event = on_watch_event
        self._on_lost = on_lost

        self.upkeep_requests: Counter[str] = Counter()
        self._upkeep_lock = threading.Lock()
        upkeep = _UpkeepClient(heartbeat_client or client, self.upkeep_requests, self._upkeep_lock)
        self.lease = LeaseKeeper(upkeep, node_name, self.identity, duration=lease_duration, clock=clock)
        self.node_status = NodeStatusReporter(
            node_name, report_frequency=node_status_report_frequency, clock=clock
        )
        self.node_status.kubelet_port = kubelet_endpoint[1] if kubelet_endpoint is not None else None
        self._own_runtime = runtime is None
        self.runtime = runtime if runtime is not None else self._new_runtime()
        self.recorder = EventRecorder(
            _UpkeepClient(client, self.upkeep_requests, self._upkeep_lock),
            component=event_component,
            host=node_name,
            writer=None if self._own_runtime else self.runtime.events,
            events=events,
        )
        self._upkeep = upkeep
        # A provider whose methods never block (blocking = False) is called without a thread hop.
        self._inline_provider = getattr(provider, "blocking", True) is False
        self.calls = BoundCaller(
            self.runtime.calls, provider_timeout, inline=self._inline_provider, node=node_name
        )
        self._tasks = self.runtime.tasks

        self.pods = BasicPodManager()
        options = dict(manager_options if manager_options is not None else {"fast_path": True})
        if not self._own_runtime:
            # Agents sharing a runtime share its sync workers too: no threads per node.
            options.setdefault("sync_pool", self.runtime.sync)
        if on_sync is not None:
            options["on_sync"] = on_sync
        self.manager: Manager = new_manager(client, self.pods, _Safety(self), **options)

        self._states: dict[str, _PodState] = {}
        # Pods whose resize is deferred: tried again when room may have been freed.
        self._deferred: set[str] = set()
        self._lock = threading.RLock()
        self._provider_uids: set[str] = set()
        self._provider_pods: dict[str, Pod] = {}
        self.deleted_uids: set[str] = set()
        self.watch_events = 0
        self._description = self._with_network(NodeDescription())
        self._node_uid = ""
        self._notifying = False
        self._ready_error: str | None = None
        self._stop = Flag()
        self._watcher = (
            PodWatcher(client, self, f"spec.nodeName={node_name}", timeout=watch_timeout) if watch else None
        )
        self._started = False
        self._first_list_done = False
        self.lost = False
        self._no_status_api = False
        self._heartbeat_gap = False  # set by the lease tick, handled by housekeeping
        # The timer's entries of this agent (see start): one lease tick and one housekeeping
        # tick pending or running at a time.
        self._tick_lock = threading.Condition()
        self._tick_threads: list[int] = []  # the threads running a tick of this agent now
        self._lease_handle: Any = None
        self._hk_handle: Any = None
        self._hk_running = False
        self._hk_wanted: float | None = None
        self._hk_due = 0.0
        self._last_renewed = 0.0
        self._next_status = 0.0
        self._next_poll = 0.0
        # Where in each interval this node's heartbeats fall: spread by name, not all at once.
        self._phase = (zlib.crc32(node_name.encode()) % 1000) / 1000.0

    def _new_runtime(self) -> NodeRuntime:
        return NodeRuntime(
            provider_timeout=self.provider_timeout,
            task_workers=32,
            provider_workers=32,
            heartbeat_workers=1,
            housekeeping_workers=1,
            event_workers=1,
            name=f"podstatus-{self.node_name}",
        )

    # -- reading -------------------------------------------------------------------------

    @property
    def watch_errors(self) -> int:
        return self._watcher.errors if self._watcher is not None else 0

    def pod_states(self) -> dict[str, _PodState]:
        with self._lock:
            return dict(self._states)

    def healthy(self) -> bool:
        """For a liveness probe: the housekeeping is not overdue, the timer runs, the node is ours."""
        if not self._started or self.lost or not self.runtime.timer.alive():
            return False
        limit = max(5.0, 3 * max(self.housekeeping_interval, 1.0))
        return time.monotonic() - self._hk_due < limit

    def problems(self) -> list[str]:
        """What keeps the node from being Ready, for ``/readyz`` and ``/healthz``: empty when it is.

        :meth:`healthy` (the loops run) and the provider's last ``ping`` (its failure makes
        the node Ready=False).
        """
        out = []
        if not self.healthy():
            out.append(f"{self.node_name}: not running (not started, taken over, or housekeeping overdue)")
        error = self._ready_error
        if error is not None:
            out.append(f"{self.node_name}: NotReady: provider is not healthy: {error}")
        return out

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> None:
        """Check the Lease, register the Node, start everything. Raises :class:`LeaseHeldError`."""
        if self._started:
            return
        if self._own_runtime and self.runtime.closed:
            self.runtime = self._new_runtime()
            self.calls = BoundCaller(
                self.runtime.calls, self.provider_timeout, inline=self._inline_provider, node=self.node_name
            )
            self._tasks = self.runtime.tasks
        self.lease.check(self.take_over)
        error, was_ready = self._check_provider()
        # A new Node is created with its whole status, conditions included (the API server keeps
        # a Node's status on create): one request, not a create and a status post.
        status = self.node_status.build(self._description, error)
        created = self.register_node(status=status)
        self.lease.node_uid = self._node_uid
        self._hand_pod_cidr()
        if not self.lease.created_at_check:
            self.lease.renew()
        if created:
            self._node_status_posted(error, was_ready, force=True)
        else:
            self._post_node_status(force=True)
        notify = getattr(self.provider, "notify_pods", None)
        if notify is not None:
            try:
                self.calls.call("notify_pods", notify, _Notifier(self))
                self._notifying = True
            except ProviderError as err:
                _log(
                    logging.ERROR,
                    "provider cannot notify; polling its pod status",
                    node=self.node_name,
                    error=err,
                )
        try:
            running = list(self.calls.call("get_pods", self.provider.get_pods) or ())
            self._provider_pods = {p.uid: p for p in running if isinstance(p, Pod)}
            self._provider_uids = set(self._provider_pods)
        except ProviderError as err:
            _log(logging.ERROR, "provider could not list its pods", node=self.node_name, error=err)
        self._stop.clear()
        self.recorder.start()
        self.manager.start()
        self._started = True
        self.recorder.event(
            ObjectRef.for_node(self.node_name), NORMAL, "Starting", "Starting podstatus node agent."
        )
        now = time.monotonic()
        self._last_renewed = now
        # The first renewal and status check at this node's phase of the interval, then every
        # interval: a thousand nodes started together renew spread over the interval. The Lease
        # was just written: its first renewal is one to one and a half intervals away, well
        # inside its duration (four intervals).
        self._lease_handle = self.runtime.timer.call_at(
            now + self.lease_renew_interval * (1 + self._phase / 2), self._lease_tick, lane=HEARTBEAT
        )
        self._next_status = now + self.node_status_update_frequency * (0.5 + self._phase / 2)
        self._next_poll = now + self.status_poll_interval
        self._schedule_housekeeping(now + min(self.housekeeping_interval, self.status_poll_interval))
        if self._watcher is not None:
            self._watcher.start()
        _log(
            logging.INFO,
            "node agent started",
            node=self.node_name,
            identity=self.identity,
            providerPods=len(self._provider_uids),
        )

    def stop(self, on_stop: str = "leave", timeout: float = 5.0) -> None:
        """Stop. ``on_stop="cordon"`` marks the Node unschedulable first; pods are left as they are."""
        if on_stop not in ON_STOP:
            raise ValueError(f"on_stop must be one of {', '.join(ON_STOP)}")
        if on_stop == "cordon" and self._started:
            self.cordon()
        self._stop.set()
        if self._watcher is not None:
            self._watcher.stop()
        self._cancel_ticks(timeout)
        self._tasks.wait_idle(min(timeout, 2.0))
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
                    "close", close, timeout=min(self.provider_timeout, STOP_CALL_TIMEOUT), bounded=True
                )
            except ProviderError as err:
                _log(logging.WARNING, "provider close failed", node=self.node_name, error=err)
        if self._own_runtime:
            self.runtime.close()
        self._started = False
        _log(logging.INFO, "node agent stopped", node=self.node_name, onStop=on_stop)

    def cordon(self) -> None:
        try:
            self._upkeep.patch_node(self.node_name, msgspec.json.encode({"spec": {"unschedulable": True}}))
            self.recorder.event(
                ObjectRef.for_node(self.node_name),
                NORMAL,
                "NodeNotSchedulable",
                f"Node {self.node_name} status is now: NodeNotSchedulable",
            )
            _log(logging.INFO, "node cordoned", node=self.node_name)
        except (ApiError, AttributeError) as err:
            _log(logging.ERROR, "could not cordon the node", node=self.node_name, error=err)

    # -- the Node ------------------------------------------------------------------------

    def _with_network(self, description: NodeDescription) -> NodeDescription:
        """The node's own InternalIP in place of the default one every description starts with.

        With a kubelet API, its address is the InternalIP (kube-apiserver reaches the node there).
        """
        if self.kubelet_endpoint is not None:
            others = tuple(a for a in description.addresses if a.get("type") != "InternalIP")
            return dataclasses.replace(
                description,
                addresses=({"type": "InternalIP", "address": self.kubelet_endpoint[0]}, *others),
            )
        if self.network is None or tuple(description.addresses) != DEFAULT_ADDRESSES:
            return description
        return dataclasses.replace(
            description, addresses=({"type": "InternalIP", "address": self.network.internal_ip},)
        )

    def _hand_pod_cidr(self) -> None:
        """The Node's pod CIDR to the provider (the kubelet's runtime gets it the same way)."""
        update = getattr(self.provider, "update_pod_cidr", None)
        if update is None or not self.pod_cidr:
            return
        try:
            self.calls.call("update_pod_cidr", update, self.pod_cidr)
        except ProviderError as err:
            _log(logging.ERROR, "provider could not take the pod CIDR", node=self.node_name, error=err)

    def _describe(self) -> NodeDescription:
        try:
            description = self.calls.call("node_description", self.provider.node_description)
        except ProviderError as err:
            _log(logging.ERROR, "provider could not describe the node", node=self.node_name, error=err)
            return self._description
        if not isinstance(description, NodeDescription):
            _log(
                logging.ERROR,
                "provider described the node with something that is not a NodeDescription",
                node=self.node_name,
                got=type(description).__name__,
            )
            return self._description
        return self._with_network(description)

    def register_node(self, status: dict[str, Any] | None = None) -> bool:
        """Create the Node (with ``status`` when given), or adopt an existing one of that name.

        True when it was created: ``status`` is then on the server.
        """
        wanted_cidr = self.network.pod_cidr if self.network is not None else None
        node = build_node(
            self.node_name,
            self._description,
            pod_cidr=wanted_cidr,
            kubelet_port=self.node_status.kubelet_port,
        )
        if status is not None:
            node["status"] = status
        try:
            created = self._upkeep.create_node(node)
            self._node_uid = str((created.get("metadata") or {}).get("uid") or "")
            self.pod_cidr = (created.get("spec") or {}).get("podCIDR") or wanted_cidr
            _log(logging.INFO, "node registered", node=self.node_name)
            return True
        except ConflictError:
            pass
        except ApiError as err:
            if err.code != 409:
                raise
        try:
            existing = self._upkeep.get_node(self.node_name)
        except AttributeError:
            _log(logging.INFO, "node exists; the client cannot read it", node=self.node_name)
            return False
        self._node_uid = str((existing.get("metadata") or {}).get("uid") or "")
        self.node_status.adopt(existing)
        labels = (existing.get("metadata") or {}).get("labels") or {}
        missing = {k: v for k, v in node["metadata"]["labels"].items() if labels.get(k) != v}
        patch: dict[str, Any] = {"metadata": {"labels": missing}} if missing else {}
        # A Node's pod CIDR is set once (the API server refuses a change): keep the one it has.
        self.pod_cidr = (existing.get("spec") or {}).get("podCIDR") or wanted_cidr
        if wanted_cidr and not (existing.get("spec") or {}).get("podCIDR"):
            patch["spec"] = {"podCIDR": wanted_cidr, "podCIDRs": [wanted_cidr]}
        if patch:
            try:
                self._upkeep.patch_node(self.node_name, msgspec.json.encode(patch))
            except (ApiError, AttributeError) as err:
                _log(
                    logging.WARNING,
                    "could not update the node's labels or pod CIDR",
                    node=self.node_name,
                    error=err,
                )
        _log(logging.INFO, "node adopted", node=self.node_name, uid=self._node_uid)
        return False

    def _check_provider(self) -> tuple[str | None, bool]:
        """Ping the provider and describe the node: (the ping's error or None, whether it was ready)."""
        error: str | None = None
        ping = getattr(self.provider, "ping", None)
        if ping is not None:
            try:
                self.calls.call("ping", ping)
            except ProviderError as err:
                error = str(err)
        self._description = self._describe()
        was_ready = self._ready_error is None
        self._ready_error = error
        if error is not None and was_ready:
            _log(logging.ERROR, "provider is not healthy: node not ready", node=self.node_name, error=error)
        return error, was_ready

    def _post_node_status(self, *, force: bool = False) -> None:
        error, was_ready = self._check_provider()
        if not force and not self.node_status.due(self._description, error):
            return
        status = self.node_status.build(self._description, error)
        body = msgspec.json.encode({"status": status})
        try:
            self._upkeep.patch_node_status(self.node_name, body)
        except NotFoundError:
            _log(logging.WARNING, "the node is gone; registering it again", node=self.node_name)
            try:
                self.node_status.forget()
                created = self.register_node(status=status)
                self.lease.node_uid = self._node_uid
                if not created:
                    self._upkeep.patch_node_status(self.node_name, body)
            except ApiError as err:
                _log(logging.ERROR, "could not register the node again", node=self.node_name, error=err)
                return
        except ApiError as err:
            _log(logging.WARNING, "failed to post node status", node=self.node_name, error=err)
            return
        except AttributeError:
            # A client with pods only (a test harness): the node lives by its registration alone.
            if not self._no_status_api:
                _log(logging.WARNING, "the client cannot post node status", node=self.node_name)
            self._no_status_api = True
            return
        self._node_status_posted(error, was_ready, force=force)

    def _node_status_posted(self, error: str | None, was_ready: bool, *, force: bool) -> None:
        self.node_status.posted(self._description, error)
        ready = error is None
        if ready != was_ready or force:
            self.recorder.event(
                ObjectRef.for_node(self.node_name),
                NORMAL,
                "NodeReady" if ready else "NodeNotReady",
                f"Node {self.node_name} status is now: {'NodeReady' if ready else 'NodeNotReady'}",
            )

    def _resync_node_status(self) -> None:
        """After a heartbeat gap: post again over what the API shows (the controller's Unknown).

        The node's conditions are read back first, so a condition the node lifecycle
        controller changed gets a transition time of now when the agent sets it back.
        """
        try:
            node = self._upkeep.get_node(self.node_name)
        except NotFoundError:
            node = None  # posting registers it again
        except (ApiError, AttributeError) as err:
            _log(
                logging.WARNING,
                "could not read the node after a heartbeat gap",
                node=self.node_name,
                error=err,
            )
            self._heartbeat_gap = True  # try again at the next round
            return
        if node is not None:
            self.node_status.adopt(node)
        self.node_status.forget()
        self._post_node_status(force=True)

    # -- housekeeping ----------------------------------------------------------------------

    def _cancel_ticks(self, timeout: float) -> None:
        """No tick of this agent runs after this returns (one running now gets ``timeout``)."""
        deadline = time.monotonic() + timeout
        with self._tick_lock:
            self._cancel_handles()
            me = threading.get_ident()
            while any(t != me for t in self._tick_threads):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._tick_lock.wait(remaining)

    def _cancel_handles(self) -> None:
        # Under self._tick_lock.
        for handle in (self._lease_handle, self._hk_handle):
            if handle is not None:
                handle.cancel()
        self._lease_handle = self._hk_handle = None

    def _tick_begin(self) -> bool:
        with self._tick_lock:
            if self._stop.is_set():
                return False
            self._tick_threads.append(threading.get_ident())
            return True

    def _tick_end(self) -> None:
        with self._tick_lock:
            self._tick_threads.remove(threading.get_ident())
            self._tick_lock.notify_all()

    def _lease_tick(self) -> None:
        """On the heartbeat lane: a provider that hangs (ping, describe) never delays the heartbeat."""
        if not self._tick_begin():
            return
        try:
            try:
                renewed = self.lease.renew()
            except Exception:
                renewed = False
                log.exception("lease renewal failed, it goes on node=%s", self.node_name)
            now = time.monotonic()
            if renewed:
                # A renewal missed (the process was stopped, the API unreachable): the node
                # lifecycle controller may have marked the node Unknown meanwhile.
                if now - self._last_renewed > 2 * self.lease_renew_interval:
                    _log(
                        logging.WARNING,
                        "heartbeats resumed after a gap; checking the node as the API shows it",
                        node=self.node_name,
                        gap_seconds=round(now - self._last_renewed, 1),
                    )
                    self._heartbeat_gap = True
                self._last_renewed = now
                if self._heartbeat_gap or self.lease.recreated:
                    self._schedule_housekeeping(now)
            if self.lease.lost and not self.lost:
                self._lose()
                return
            with self._tick_lock:
                if not self._stop.is_set():
                    self._lease_handle = self.runtime.timer.call_at(
                        now + self.lease_renew_interval, self._lease_tick, lane=HEARTBEAT
                    )
        finally:
            self._tick_end()

    def _schedule_housekeeping(self, when: float) -> None:
        """Run the housekeeping at ``when`` at the latest (earlier if it is already due earlier)."""
        with self._tick_lock:
            if self._stop.is_set():
                return
            if self._hk_running:
                self._hk_wanted = when if self._hk_wanted is None else min(self._hk_wanted, when)
                return
            handle = self._hk_handle
            if handle is not None and not handle.cancelled:
                if handle.when <= when:
                    return
                handle.cancel()
            self._hk_due = when
            self._hk_handle = self.runtime.timer.call_at(when, self._housekeeping_tick, lane=HOUSEKEEPING)

    def _housekeeping_tick(self) -> None:
        if not self._tick_begin():
            return
        now = time.monotonic()
        with self._tick_lock:
            self._hk_running = True
            self._hk_handle = None
            self._hk_due = now
        next_retry = math.inf
        try:
            if self._heartbeat_gap:
                self._heartbeat_gap = False
                self._next_status = now + self.node_status_update_frequency
                self._resync_node_status()
            elif self.lease.recreated:
                # The Lease vanished (its Node deleted, and the Lease collected with it?): post
                # now, which registers the Node again if it is gone.
                self.lease.recreated = False
                self._next_status = now + self.node_status_update_frequency
                self._post_node_status(force=True)
            elif now >= self._next_status:
                self._next_status = now + self.node_status_update_frequency
                self._post_node_status()
            if not self._notifying and now >= self._next_poll:
                self._next_poll = now + self.status_poll_interval
                self._poll()
            next_retry = self._retry_due(now)
        except Exception:
            log.exception("housekeeping failed, it goes on node=%s", self.node_name)
        finally:
            due = min(self._next_status, next_retry, now + self.housekeeping_interval)
            if not self._notifying:
                due = min(due, self._next_poll)
            if self._heartbeat_gap:
                due = now + max(self.housekeeping_interval, 1.0)  # a failed resync: try again soon
            with self._tick_lock:
                self._hk_running = False
                if self._hk_wanted is not None:
                    due, self._hk_wanted = min(due, self._hk_wanted), None
            self._schedule_housekeeping(max(due, now))
            self._tick_end()

    def _lose(self) -> None:
        """Another agent took the node over: stop writing anything for it."""
        self.lost = True
        _log(logging.ERROR, "another agent took this node over; stopping", node=self.node_name)
        self._stop.set()
        with self._tick_lock:
            self._cancel_handles()
        if self._watcher is not None:
            self._watcher.stop()
        self.manager.stop(timeout=1)
        if self._on_lost is not None:
            self._on_lost(self)

    def _poll(self) -> None:
        for uid, state in self.pod_states().items():
            if state.created and not state.stopped and not state.deleting:
                self._tasks.submit(uid, self._refresh_status, uid)

    def _retry_due(self, now: float) -> float:
        """Submit the creates whose retry is due; the time of the next one (inf: none)."""
        upcoming = math.inf
        for uid, state in self.pod_states().items():
            at = state.retry_at
            if at is None:
                continue
            if at <= now:
                state.retry_at = None
                self._tasks.submit(uid, self._create_pod, uid)
            else:
                upcoming = min(upcoming, at)
        return upcoming

    # -- the pod watch --------------------------------------------------------------------

    def relist(self, pods: Iterable[Pod]) -> None:
        """A full list of the node's pods (start, or after 410 Gone): add, update, forget."""
        seen: set[str] = set()
        for pod in pods:
            seen.add(pod.uid)
            self.handle_pod_event("ADDED", pod)
        for state in list(self.pod_states().values()):
            if state.pod.uid not in seen:
                self.handle_pod_event("DELETED", state.pod)
        if not self._first_list_done:
            self._first_list_done = True
            # Pods the provider runs that the API server no longer has: orphans, stop them.
            for uid, pod in self._provider_pods.items():
                if uid not in seen:
                    _log(
                        logging.INFO, "stopping a pod the API server no longer has", pod=pod.key(), podUID=uid
                    )
                    self._tasks.submit(uid, self._provider_delete, pod, 0)

    def handle_pod_event(self, kind: str, pod: Pod) -> None:
        """One watch event. Cheap: provider calls go to the pod's task queue."""
        self.watch_events += 1
        if self._on_watch_event is not None:
            self._on_watch_event(kind, pod)
        if pod.spec.node_name != self.node_name or self.lost:
            return
        if kind == "DELETED":
            self._forget(pod)
            return
        if kind not in ("ADDED", "MODIFIED"):
            return
        cached = self.manager.get_pod_status(pod.uid)  # not under our lock: the manager has its own
        with self._lock:
            state = self._states.get(pod.uid)
            # Held until the next event: lean, with what it shares with the copy it replaces
            # and with the status the manager caches held once.
            pod = lean_pod(pod, state.pod if state is not None else None, cached)
            if state is None:
                if pod.uid in self.deleted_uids:
                    return  # a late event of a pod already gone
                self._new_pod(pod)
                return
            old, state.pod = state.pod, pod
        self.pods.update_pod(pod)
        if pod.metadata.deletion_timestamp is not None and not state.deleting:
            state.deleting = True
            self._tasks.submit(pod.uid, self._stop_pod, pod.uid)
            return
        if state.deleting or state.rejected:
            return
        if state.last_report is not None and (
            _non_kubelet_conditions(old) != _non_kubelet_conditions(pod)
            or old.metadata.generation != pod.metadata.generation
        ):
            # A readiness gate moved: Ready must follow. A new generation of the pod: the
            # status says it has been seen (observedGeneration), as the kubelet's next sync does.
            self._tasks.submit(pod.uid, self._republish, pod.uid)
        if old.spec != pod.spec and state.allocated is not None:
            # Resources may have changed (pods/resize): decide before the provider hears of it.
            self._tasks.submit(pod.uid, self._resize, pod.uid, False)
        if state.created and (
            old.spec != pod.spec
            or old.metadata.labels != pod.metadata.labels
            or old.metadata.annotations != pod.metadata.annotations
        ):
            self._tasks.submit(pod.uid, self._update_pod, pod.uid)

    def _new_pod(self, pod: Pod) -> None:
        # Under self._lock.
        uid = pod.uid
        state = _PodState(pod=pod)
        state.allocated = state.actuated = _initial_allocation(pod)
        self._states[uid] = state
        self.pods.add_pod(pod)
        if is_terminal_phase(pod.status.phase):
            # Finished before we saw it (or before a restart): nothing to run. Seed the cache with
            # what the server holds, so a deletion handshake can still complete.
            state.stopped = uid not in self._provider_uids
            state.admitted = True
            self._seed(state)
            if uid in self._provider_uids:
                self._tasks.submit(uid, self._stop_pod, uid)
            return
        adopted = (
            uid in self._provider_uids
            or pod.status.phase not in (None, "", "Pending")
            or bool(pod.status.container_statuses)
        )
        if adopted:
            # A restart: what the server holds is the truth until the provider says otherwise.
            self._seed(state)
        if pod.metadata.deletion_timestamp is not None:
            state.deleting = True
            state.admitted = True
            self._tasks.submit(uid, self._stop_pod, uid)
            return
        if not adopted and not self._admit(state):
            return
        state.admitted = True
        self._tasks.submit(uid, self._create_pod, uid)
        if adopted and not same_allocation(allocation_of_pod(pod), state.allocated):
            # A resize the agent had not finished (or not seen) before it restarted.
            self._tasks.submit(uid, self._resize, uid, True)

    def _seed(self, state: _PodState) -> None:
        # A resize pending or in progress when the agent stopped is still so (the kubelet
        # backfills them at start): without this the next status would drop the conditions.
        self.manager.backfill_pod_resize_conditions([state.pod])
        if self.manager.is_pod_resize_deferred(state.pod.uid):
            self._deferred.add(state.pod.uid)
        try:
            self.manager.set_pod_status(state.pod, state.pod.status)
        except InvalidObjectError as err:
            _log(logging.WARNING, "cannot adopt the server's status", pod=state.pod.key(), error=err)

    def _admit(self, state: _PodState) -> bool:
        """The kubelet's pods-capacity admission; a pod that does not fit is failed, not run."""
        capacity = self._description.pods_capacity()
        if capacity is None:
            return True
        used = sum(
            1
            for s in self._states.values()
            if s.admitted and not is_terminal_phase(s.pod.status.phase) and not s.stopped
        )
        if used + 1 <= capacity:
            return True
        reason = "OutOfpods"
        message = f"Node didn't have enough resource: pods, requested: 1, used: {used}, capacity: {capacity}"
        state.rejected = True
        state.stopped = True
        pod = state.pod
        _log(
            logging.WARNING,
            "pod rejected at admission",
            pod=pod.key(),
            podUID=pod.uid,
            reason=reason,
            detail=message,
        )
        self.recorder.event(ObjectRef.for_pod(pod), WARNING, reason, message)
        status = PodStatus(
            phase="Failed",
            reason=reason,
            message=f"Pod was rejected: {message}",
            qos_class=pod.status.qos_class or compute_pod_qos(pod.spec.to_dict()),
        )
        try:
            self.manager.set_pod_status(pod, status)
        except InvalidObjectError as err:
            _log(logging.ERROR, "could not fail a rejected pod", pod=pod.key(), error=err)
        return False

    def _forget(self, pod: Pod) -> None:
        with self._lock:
            state = self._states.pop(pod.uid, None)
            self.deleted_uids.add(pod.uid)
            self.pods.remove_pod(pod)
            keep = set(self._states)
            self._deferred.discard(pod.uid)
        self.manager.remove_orphaned_statuses(keep)
        if state is not None and state.allocated is not None and self._deferred:
            self._retry_deferred_resizes()  # what it held is free
        if state is not None and not state.stopped and (state.created or pod.uid in self._provider_uids):
            # Deleted at once (grace 0, or a force delete): the provider must still stop it.
            self._tasks.submit(pod.uid, self._provider_delete, pod, 0)

    # -- per-pod tasks (on the pod's serial queue) --------------------------------------------

    def _create_pod(self, uid: str) -> None:
        state = self._states.get(uid)
        if state is None or state.deleting or state.stopped:
            return
        pod = state.pod
        if uid in self._provider_uids:
            state.created = True  # it survived our restart: nothing to create
        else:
            try:
                allocated = state.allocated
                self.calls.call("create_pod", self.provider.create_pod, self._allocated_pod(state))
                state.actuated = allocated  # it runs as allocated now
            except ProviderError as err:
                state.create_failures += 1
                delay = min(self.create_retry_max, 2.0 ** (state.create_failures - 1))
                state.retry_at = time.monotonic() + delay
                self._schedule_housekeeping(state.retry_at)
                _log(
                    logging.ERROR,
                    "provider could not create the pod",
                    pod=pod.key(),
                    podUID=uid,
                    retryIn=f"{delay:.0f}s",
                    error=err,
                )
                self.recorder.event(
                    ObjectRef.for_pod(pod), WARNING, "FailedCreatePodSandBox", f"Failed to create pod: {err}"
                )
                if self.manager.get_pod_status(uid) is None:
                    self.report(uid, pending_status(pod))
                return
            state.created = True
        if not self._notifying or state.last_report is None:
            self._refresh_status(uid)
        if state.last_report is None and self.manager.get_pod_status(uid) is None:
            self.report(uid, pending_status(pod))

    def _refresh_status(self, uid: str) -> None:
        state = self._states.get(uid)
        if state is None:
            return
        try:
            status = self.calls.call("get_pod_status", self.provider.get_pod_status, state.pod)
        except ProviderError as err:
            _log(logging.WARNING, "provider could not report pod status", pod=state.pod.key(), error=err)
            now = time.monotonic()
            last = state.status_error_event_at
            if last is None or now - last >= self.status_error_event_interval:
                # The kubelet's reason and message; one per interval, not one per poll (the
                # recorder would count each poll into the Event, one write each).
                state.status_error_event_at = now
                self.recorder.event(
                    ObjectRef.for_pod(state.pod), WARNING, "FailedSync", f"error determining status: {err}"
                )
            return
        if status is not None:
            self.report(uid, status)

    def _update_pod(self, uid: str) -> None:
        state = self._states.get(uid)
        if state is None or state.deleting:
            return
        allocated = state.allocated
        try:
            # The provider runs the pod as allocated: a deferred resize is not its business yet.
            self.calls.call("update_pod", self.provider.update_pod, self._allocated_pod(state))
        except ProviderError as err:
            _log(logging.WARNING, "provider could not update the pod", pod=state.pod.key(), error=err)
            self.recorder.event(ObjectRef.for_pod(state.pod), WARNING, "FailedUpdate", str(err))
            if allocated is not state.actuated and self._resize_in_progress(uid):
                self._resize_error(state, str(err))
            return
        if allocated is not state.actuated:
            state.actuated = allocated
            if self._resize_in_progress(uid):
                # Applied: a fresh report tells whether the resize is done.
                self._refresh_status(uid)
                if state.last_report is not None:
                    self.report(uid, state.last_report)

    # -- in-place resize (the kubelet's allocation manager) --------------------------------------

    def _allocated_pod(self, state: _PodState) -> Pod:
        """The pod with the resources the agent allocated it (the spec may ask for more)."""
        pod, allocated = state.pod, state.allocated
        if allocated is None or same_allocation(allocation_of_pod(pod), allocated):
            return pod
        spec = pod.spec.to_dict()
        for key in ("initContainers", "containers"):
            for c in spec.get(key) or ():
                resources = allocated.get(c.get("name"))
                if resources is not None:
                    c["resources"] = {**(c.get("resources") or {}), **resources}
                    for part in ("limits", "requests"):
                        if part not in resources:
                            c["resources"].pop(part, None)
        return pod.replace(spec=type(pod.spec).from_dict(spec))

    def _resize_in_progress(self, uid: str) -> bool:
        return any(c.type == POD_RESIZE_IN_PROGRESS for c in self.manager.get_pod_resize_conditions(uid))

    def _resize(self, uid: str, actuate: bool) -> None:
        """handlePodResourcesResize: the spec's resources against the allocation; accept, defer or refuse."""
        state = self._states.get(uid)
        if state is None or state.allocated is None or state.deleting or state.stopped or state.rejected:
            return
        pod = state.pod
        spec = pod.spec.to_dict()
        desired = allocation_of(spec)
        generation = pod.metadata.generation or 0
        if same_allocation(desired, state.allocated):
            # Nothing to do, or a resize asked back: no longer pending.
            with self._lock:
                self._deferred.discard(uid)
            if any(c.type == POD_RESIZE_PENDING for c in self.manager.get_pod_resize_conditions(uid)):
                self.manager.clear_pod_resize_pending_condition(uid)
                self._republish(uid)
            return
        others = [
            pod_requests(s.pod.spec.to_dict(), s.allocated)
            for s in self.pod_states().values()
            if s is not state
            and s.allocated is not None
            and s.admitted
            and not s.stopped
            and not is_terminal_phase(s.pod.status.phase)
        ]
        decision = decide(
            spec,
            state.allocated,
            others,
            self._description.allocatable_or_capacity(),
            qos_class=pod.status.qos_class,
            cpu_manager_policy=self.cpu_manager_policy,
        )
        ref = ObjectRef.for_pod(pod)
        with self._lock:
            if decision.outcome == DEFERRED:
                self._deferred.add(uid)
            else:
                self._deferred.discard(uid)
        if decision.outcome != ACCEPTED:
            if self.manager.set_pod_resize_pending_condition(
                uid, decision.reason, decision.message, generation
            ):
                reason = "ResizeInfeasible" if decision.reason == INFEASIBLE else "ResizeDeferred"
                text = resize_message(f"Pod resize {decision.reason}", spec, generation, decision.message)
                self.recorder.event(ref, WARNING, reason, text)
            _log(logging.INFO, "pod resize pending", pod=pod.key(), podUID=uid, reason=decision.reason,
                 detail=decision.message)  # fmt: skip
            self._republish(uid)
            return
        state.allocated = desired
        self.manager.clear_pod_resize_pending_condition(uid)
        # A new allocation restarts the in-progress condition at this generation.
        self.manager.clear_pod_resize_in_progress_condition(uid)
        self.manager.set_pod_resize_in_progress_condition(uid, "", "", generation)
        self.recorder.event(
            ref, NORMAL, "ResizeStarted", resize_message("Pod resize started", spec, generation)
        )
        _log(logging.INFO, "pod resize accepted", pod=pod.key(), podUID=uid, generation=generation)
        self._republish(uid)
        if actuate and state.created:
            self._update_pod(uid)
        if self._deferred:
            self._retry_deferred_resizes()  # a smaller allocation may let a deferred one in

    def _resize_error(self, state: _PodState, message: str) -> None:
        generation = state.pod.metadata.generation or 0
        observed, updated = self.manager.set_pod_resize_in_progress_condition(
            state.pod.uid, "Error", message, generation
        )
        if updated:
            text = resize_message("Pod resize error", state.pod.spec.to_dict(), observed, message)
            self.recorder.event(ObjectRef.for_pod(state.pod), WARNING, "ResizeError", text)
        self._republish(state.pod.uid)

    def _retry_deferred_resizes(self) -> None:
        with self._lock:
            waiting = list(self._deferred)
        for uid in waiting:
            self._tasks.submit(uid, self._resize, uid, True)

    def _check_resize_done(self, state: _PodState, statuses: Iterable[ContainerStatus]) -> None:
        """IsPodResizeInProgress: running containers as allocated end the in-progress condition."""
        allocated = state.allocated
        if allocated is None or not self._resize_in_progress(state.pod.uid):
            return
        for cs in statuses:
            if cs.state.running is not None and not same_resources(cs.resources, allocated.get(cs.name)):
                return
        generation, cleared = self.manager.clear_pod_resize_in_progress_condition(state.pod.uid)
        if cleared:
            spec = self._allocated_pod(state).spec.to_dict()
            self.recorder.event(
                ObjectRef.for_pod(state.pod),
                NORMAL,
                "ResizeCompleted",
                resize_message("Pod resize completed", spec, generation),
            )

    def _republish(self, uid: str) -> None:
        state = self._states.get(uid)
        if state is not None and state.last_report is not None:
            self.report(uid, state.last_report)

    def _grace_period(self, pod: Pod) -> int:
        if pod.metadata.deletion_grace_period_seconds is not None:
            return max(0, pod.metadata.deletion_grace_period_seconds)
        if pod.spec.termination_grace_period_seconds is not None:
            return max(0, pod.spec.termination_grace_period_seconds)
        return 30

    def _stop_pod(self, uid: str) -> None:
        """The pod is being deleted: stop it (within its grace period), report, finish the handshake."""
        state = self._states.get(uid)
        if state is None or (state.stopped and state.rejected):
            if state is not None:
                self.manager.terminate_pod(state.pod)
            return
        pod = state.pod
        if not state.stopped and (state.created or uid in self._provider_uids):
            grace = self._grace_period(pod)
            report = state.last_report or pod.status
            for cs in report.container_statuses or ():
                if cs.state.running is not None:
                    self.recorder.event(
                        ObjectRef.for_pod(pod, f"spec.containers{{{cs.name}}}"),
                        NORMAL,
                        "Killing",
                        f"Stopping container {cs.name}",
                    )
            self._provider_delete(pod, grace)
            self._refresh_status(uid)
        state.stopped = True
        state.retry_at = None
        # Whatever the provider could not say: containers it lost are terminated, the phase terminal.
        self.manager.terminate_pod(state.pod)

    def _provider_delete(self, pod: Pod, grace: int) -> None:
        try:
            # The provider has the grace period to stop the pod, and a little more to say so.
            self.calls.call(
                "delete_pod", self.provider.delete_pod, pod, grace, timeout=grace + self.provider_timeout
            )
        except ProviderError as err:
            _log(logging.ERROR, "provider could not stop the pod", pod=pod.key(), podUID=pod.uid, error=err)
            self.recorder.event(ObjectRef.for_pod(pod), WARNING, "FailedKillPod", f"error killing pod: {err}")

    # -- reports from the provider ---------------------------------------------------------------

    def pod_event(
        self, pod_uid: str, type: str, reason: str, message: str, field_path: str | None = None
    ) -> None:
        state = self._states.get(pod_uid)
        if state is None:
            _log(logging.DEBUG, "event for a pod the agent does not know", podUID=pod_uid, reason=reason)
            return
        if type not in (NORMAL, WARNING) or not isinstance(reason, str) or not reason:
            _log(logging.ERROR, "provider sent an invalid event", podUID=pod_uid, type=type, reason=reason)
            return
        self.recorder.event(ObjectRef.for_pod(state.pod, field_path), type, reason, str(message))

    def report(self, pod_uid: str, status: Any) -> None:
        """A status from the provider: completed with the kubelet's conditions, then to the manager."""
        state = self._states.get(pod_uid)
        if state is None or state.rejected:
            return
        with state.lock:
            try:
                if isinstance(status, PodStatus):
                    # Messages cut first (as the kubelet cuts terminated ones): a huge one is
                    # neither held here nor sent to be refused (413) and retried for ever.
                    status = bound_messages(state.pod.spec, status)
                complete = self._complete(state, status)
            except (_Garbage, TypeError, AttributeError, ValueError) as err:
                # Whatever shape it had, it is the provider's mistake: said, never written.
                self._refuse(state, f"provider reported an unusable status: {err}")
                return
            cached = self.manager.get_pod_status(pod_uid)
            if state.stopped and any(
                cs.state.running is not None
                for cs in (*(complete.init_container_statuses or ()), *(complete.container_statuses or ()))
            ):
                self._refuse(state, "provider reported a container running in a pod it has stopped")
                return
            problem = check_container_state_transition(cached or state.pod.status, complete, state.pod.spec)
            if problem is not None:
                self._refuse(state, f"provider reported an impossible transition: {problem}")
                return
            previous, state.last_report = state.last_report, status
            try:
                self.manager.set_pod_status(state.pod, complete)
            except InvalidObjectError as err:
                state.last_report = previous  # what was refused is not what the provider runs
                self._refuse(state, f"provider reported an invalid status: {err}")
                return
            if type(status) is PodStatus:
                # Kept for the next completion: what equals the cached status is held once.
                state.last_report = share_equal_parts(status, self.manager.get_pod_status(pod_uid))

    def _refuse(self, state: _PodState, message: str) -> None:
        _log(logging.ERROR, message, pod=state.pod.key(), podUID=state.pod.uid)
        self.recorder.event(ObjectRef.for_pod(state.pod), WARNING, "ProviderError", message)

    def _complete(self, state: _PodState, status: Any) -> PodStatus:
        if not isinstance(status, PodStatus):
            raise _Garbage(f"expected a PodStatus, got {type(status).__name__}")
        if status.phase not in PHASES:
            raise _Garbage(f"phase {status.phase!r} is not one of {', '.join(PHASES)}")
        pod = state.pod
        base = self.manager.get_pod_status(pod.uid) or pod.status
        inits = self._containers(status.init_container_statuses, pod.spec.init_containers or (), base, True)
        mains = self._containers(status.container_statuses, pod.spec.containers, base, False)
        inits = _with_resources(inits, status.init_container_statuses, state.allocated, state.actuated)
        mains = _with_resources(mains, status.container_statuses, state.allocated, state.actuated)
        self._check_resize_done(state, (*(inits or ()), *(mains or ())))
        phase = status.phase
        if phase == "Pending" and base.phase == "Running":
            # Containers waiting again (restarts, a resumed pod) do not make a running pod Pending.
            phase = "Running"
        every = [*(inits or ()), *(mains or ())]
        conditions: list[PodCondition] = [
            c for c in pod.status.conditions or () if not is_kubelet_owned(c.type)
        ]
        known = {c.type for c in conditions}
        conditions += [
            c
            for c in status.conditions or ()
            if isinstance(c, PodCondition) and not is_kubelet_owned(c.type) and c.type not in known
        ]
        # The kubelet's conditions carry the pod generation they were made for (KEP-5067).
        generation = calculate_pod_condition_observed_generation(base, pod.metadata.generation, POD_SCHEDULED)
        # The manager's resize conditions go out with every status, as the kubelet adds them.
        conditions += self.manager.get_pod_resize_conditions(pod.uid)
        started = bool(status.pod_ip) or any(cs.state.waiting is None for cs in every)
        conditions.append(PodCondition(type=POD_SCHEDULED, status="True", observed_generation=generation))
        conditions.append(
            PodCondition(
                type=POD_READY_TO_START_CONTAINERS,
                status="True" if started and not is_terminal_phase(phase) else "False",
                observed_generation=generation,
            )
        )
        conditions.append(
            generate_pod_initialized_condition(pod.spec, every, phase, pod=pod, old_status=base)
        )
        conditions.append(
            generate_containers_ready_condition(pod.spec, every, phase, pod=pod, old_status=base)
        )
        conditions.append(
            generate_pod_ready_condition(pod.spec, conditions, every, phase, pod=pod, old_status=base)
        )
        host_ip = next(
            (a.get("address") for a in self._description.addresses if a.get("type") == "InternalIP"), None
        )
        # The API server keeps podIP and podIPs in step: so do we, or every resync would differ.
        pod_ip, pod_ips = status.pod_ip, status.pod_ips
        if pod_ip and not pod_ips:
            pod_ips = (PodIP(ip=pod_ip),)
        elif pod_ips and not pod_ip:
            pod_ip = pod_ips[0].ip
        return status.replace(
            phase=phase,
            pod_ip=pod_ip,
            pod_ips=pod_ips,
            conditions=tuple(conditions),
            host_ip=host_ip,
            host_ips=(HostIP(ip=host_ip),) if host_ip else None,
            init_container_statuses=inits,
            container_statuses=mains,
            qos_class=pod.status.qos_class or compute_pod_qos(pod.spec.to_dict()),
            start_time=None,
        )

    def _containers(
        self,
        reported: Any,
        spec: Iterable[Any],
        base: PodStatus,
        init: bool,
    ) -> tuple[ContainerStatus, ...] | None:
        spec = tuple(spec)
        if not spec:
            return None
        if reported is not None and not isinstance(reported, tuple | list):
            raise _Garbage(f"container statuses must be a list, got {type(reported).__name__}")
        by_name: dict[str, ContainerStatus] = {}
        for cs in reported or ():
            if not isinstance(cs, ContainerStatus):
                raise _Garbage(f"expected a ContainerStatus, got {type(cs).__name__}")
            by_name.setdefault(cs.name, cs)
        names = {c.name for c in spec}
        unknown = sorted(set(by_name) - names)
        if unknown:
            raise _Garbage(f"statuses for containers the pod does not have: {', '.join(unknown)}")
        previous = {
            cs.name: cs for cs in (base.init_container_statuses if init else base.container_statuses) or ()
        }
        out = []
        for c in spec:
            cs = by_name.get(c.name) or _waiting(c, "PodInitializing" if init else "ContainerCreating")
            before = previous.get(c.name)
            if (
                before is not None
                and isinstance(cs.restart_count, int)
                and cs.restart_count < before.restart_count
            ):
                cs = cs.replace(restart_count=before.restart_count)  # counts survive a restart of the agent
            if not cs.image:
                cs = cs.replace(image=c.image or "")
            out.append(cs)
        return tuple(out)


# --- the pod watch ------------------------------------------------------------------------------


class PodWatcher:
    """List+watch pods with a field selector and feed a handler; relists on 410 Gone.

    ``handler`` has ``relist(pods)`` and ``handle_pod_event(kind, pod)``.
    """

    def __init__(self, client: Any, handler: Any, field_selector: str, *, timeout: float = 300.0) -> None:
        self.client = client
        self.handler = handler
        self.field_selector = field_selector
        self.timeout = timeout
        self.errors = 0
        self.relists = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="podstatus-node-watch", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)
        self._thread = None

    def _run(self) -> None:
        resource_version: str | None = None
        delay = 0.2
        while not self._stop.is_set():
            try:
                if resource_version is None:
                    pods, resource_version = self.client.list_pods(field_selector=self.field_selector)
                    self.relists += 1
                    self.handler.relist(pods)
                    # The handler keeps lean copies; the list as decoded (managedFields and
                    # all) must not live on for as long as the watch that follows it.
                    del pods
                for kind, pod in self.client.watch_pods(
                    field_selector=self.field_selector,
                    resource_version=resource_version,
                    timeout_seconds=max(1, int(self.timeout)),
                    stop_event=self._stop,
                ):
                    if self._stop.is_set():
                        return
                    resource_version = pod.metadata.resource_version or resource_version
                    if kind in ("BOOKMARK", "ERROR"):
                        continue
                    self.handler.handle_pod_event(kind, pod)
                delay = 0.2
            except GoneError:
                _log(logging.INFO, "pod watch expired (410); listing again", selector=self.field_selector)
                resource_version = None
            except ApiError as err:
                self.errors += 1
                _log(logging.WARNING, "pod watch failed", retryIn=f"{delay:.1f}s", error=err)
                self._stop.wait(delay)
                delay = min(delay * 2, 5.0)
                resource_version = None
            except Exception:
                self.errors += 1
                log.exception("pod watch error")
                self._stop.wait(delay)
                delay = min(delay * 2, 5.0)
                resource_version = None


class NodeGroup:
    """Several agents in one process sharing one pod watch (``spec.nodeName!=``, dispatched by node).

    Build the agents with ``watch=False`` and one :class:`NodeRuntime` (the group closes it
    on :meth:`stop`). They start ``start_workers`` at a time.
    """

    def __init__(
        self,
        client: Any,
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
