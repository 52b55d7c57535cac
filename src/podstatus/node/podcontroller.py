"""The pod controller: a node's pods from the watch to the provider, their status to the manager.

* **The watch** (:meth:`PodController.relist`, :meth:`PodController.handle_pod_event`): each pod
  event updates the pod's state and queues the provider's work on the pod's serial queue.
* **Lifecycle**: admission (the ``pods`` capacity: OutOfpods as the kubelet says it), the
  provider's create/update/delete with retries, the deletion handshake, adoption of running
  pods after a restart, in-place resize (the kubelet's allocation manager).
* **Reports**: every status the provider gives (pushed to the notifier, or polled) takes one
  path, :meth:`PodController.report`: the cached status read once, completed
  (:mod:`.completion`), and set on the status manager, which checks its container
  transitions, says why it refused one, and writes it.
* **Housekeeping of pods**: polls of a provider that cannot notify, create retries
  (:meth:`PodController.poll`, :meth:`PodController.retry_due`, run by the agent's housekeeping).

The status manager is given (:class:`~podstatus.manager.Manager`, or
:class:`~podstatus.fakes.FakeStatusManager` in tests); the controller
never writes to the API server itself.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from ..conditions import POD_RESIZE_IN_PROGRESS, POD_RESIZE_PENDING, is_terminal_phase
from ..errors import InvalidObjectError
from ..podmanager import BasicPodManager, lean_pod
from ..protocols import StatusManager
from ..qos import compute_pod_qos
from ..sharing import share_equal_parts
from ..statusutil import bound_messages
from ..types import ContainerStatus, Pod, PodCondition, PodStatus
from .calls import BoundCaller, ProviderError, SerialTasks
from .completion import (
    UnusableStatus,
    complete_containers,
    complete_status,
    initial_allocation,
    non_kubelet_conditions,
)
from .config import NodeConfig
from .events import NORMAL, WARNING, EventRecorder, ObjectRef
from .logs import log_fields
from .provider import NodeDescription, Provider, pending_status
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

__all__ = ["DeletionSafety", "PodController", "PodState"]

log = logging.getLogger(__name__)


def _log(level: int, message: str, **fields: Any) -> None:
    log_fields(log, level, message, **fields)


@dataclass
class PodState:
    """What the controller knows of one pod besides its status (which the manager holds)."""

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


class _Notifier:
    """What the provider gets: reports go to the controller, never to the API server."""

    def __init__(self, controller: PodController) -> None:
        self._controller = controller

    def pod_status(self, pod_uid: str, status: PodStatus) -> None:
        self._controller.report(pod_uid, status)

    def event(
        self, pod_uid: str, type: str, reason: str, message: str, field_path: str | None = None
    ) -> None:
        self._controller.pod_event(pod_uid, type, reason, message, field_path)


class DeletionSafety:
    """Pod deletion safety from the provider: reclaimed once the provider stopped the pod.

    Lock-free reads: the status manager asks while holding its lock, and the controller
    calls the manager while holding a pod's lock. Built before the manager (which is given
    it), so it reads the controller's tables, not the controller.
    """

    def __init__(self, states: dict[str, PodState], provider_uids: set[str]) -> None:
        self._states = states
        self._provider_uids = provider_uids

    def pod_resources_are_reclaimed(self, pod: Pod, status: PodStatus) -> bool:
        state = self._states.get(pod.uid)
        if state is None:
            return pod.uid not in self._provider_uids
        every = (*(status.init_container_statuses or ()), *(status.container_statuses or ()))
        return state.stopped and not any(cs.state.running is not None for cs in every)

    def pod_could_have_running_containers(self, pod: Pod) -> bool:
        state = self._states.get(pod.uid)
        if state is None:
            return pod.uid in self._provider_uids
        if state.stopped:
            return False
        report = state.last_report
        if report is None:
            return state.created or pod.uid in self._provider_uids
        # What the provider said last: a finished job's phase may go out once nothing runs.
        every = (*(report.init_container_statuses or ()), *(report.container_statuses or ()))
        return any(cs.state.running is not None for cs in every)


# Builds the status manager of a controller from its pod manager and deletion safety.
ManagerFactory = Callable[[BasicPodManager, DeletionSafety], StatusManager]


class PodController:
    """One node's pods: the watch's events in, the provider's work out, reports to the manager.

    ``manager_factory`` builds the status manager from the controller's pod manager and
    deletion safety (a fake manager may ignore both). ``describe`` gives the node's current
    description (capacity, allocatable, addresses); ``schedule_housekeeping(when)`` asks the
    agent's housekeeping to run by then (a create retry is due).
    """

    def __init__(
        self,
        config: NodeConfig,
        provider: Provider,
        *,
        manager_factory: ManagerFactory,
        recorder: EventRecorder,
        calls: BoundCaller,
        tasks: SerialTasks,
        describe: Callable[[], NodeDescription],
        schedule_housekeeping: Callable[[float], None],
        on_watch_event: Callable[[str, Pod], None] | None = None,
    ) -> None:
        self.config = config
        self.node_name = config.node_name
        self.provider = provider
        self.recorder = recorder
        self.calls = calls
        self._tasks = tasks
        self._describe = describe
        self._schedule_housekeeping = schedule_housekeeping
        self._on_watch_event = on_watch_event
        self._states: dict[str, PodState] = {}
        self._provider_uids: set[str] = set()
        self._provider_pods: dict[str, Pod] = {}
        self.pods = BasicPodManager()
        self.safety = DeletionSafety(self._states, self._provider_uids)
        self.manager = manager_factory(self.pods, self.safety)
        # Pods whose resize is deferred: tried again when room may have been freed.
        self._deferred: set[str] = set()
        self._lock = threading.RLock()
        self.deleted_uids: set[str] = set()
        self.watch_events = 0
        self.notifying = False
        self.lost = False
        self._first_list_done = False

    def use(self, calls: BoundCaller, tasks: SerialTasks) -> None:
        """The pools of a new runtime (an agent started again after a stop)."""
        self.calls = calls
        self._tasks = tasks

    def pod_states(self) -> dict[str, PodState]:
        with self._lock:
            return dict(self._states)

    def start(self) -> None:
        """Hear the provider's reports (or poll them), and learn which pods it already runs."""
        notify = getattr(self.provider, "notify_pods", None)
        if notify is not None:
            try:
                self.calls.call("notify_pods", notify, _Notifier(self))
                self.notifying = True
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
            # In place: the deletion safety holds this set.
            self._provider_uids.clear()
            self._provider_uids.update(self._provider_pods)
        except ProviderError as err:
            _log(logging.ERROR, "provider could not list its pods", node=self.node_name, error=err)

    @property
    def provider_pod_count(self) -> int:
        return len(self._provider_uids)

    # -- housekeeping of pods -----------------------------------------------------------

    def poll(self) -> None:
        """Ask the provider for every running pod's status (a provider that cannot notify)."""
        for uid, state in self.pod_states().items():
            if state.created and not state.stopped and not state.deleting:
                self._tasks.submit(uid, self._refresh_status, uid)

    def retry_due(self, now: float) -> float:
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
            non_kubelet_conditions(old) != non_kubelet_conditions(pod)
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
        state = PodState(pod=pod)
        state.allocated = state.actuated = initial_allocation(pod)
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

    def _seed(self, state: PodState) -> None:
        # A resize pending or in progress when the agent stopped is still so (the kubelet
        # backfills them at start): without this the next status would drop the conditions.
        self.manager.backfill_pod_resize_conditions([state.pod])
        if self.manager.is_pod_resize_deferred(state.pod.uid):
            self._deferred.add(state.pod.uid)
        try:
            self.manager.set_pod_status(state.pod, state.pod.status)
        except InvalidObjectError as err:
            _log(logging.WARNING, "cannot adopt the server's status", pod=state.pod.key(), error=err)

    def _admit(self, state: PodState) -> bool:
        """The kubelet's pods-capacity admission; a pod that does not fit is failed, not run."""
        capacity = self._describe().pods_capacity()
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
                delay = min(self.config.create_retry_max, 2.0 ** (state.create_failures - 1))
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
        if not self.notifying or state.last_report is None:
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
            if last is None or now - last >= self.config.status_error_event_interval:
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

    def _allocated_pod(self, state: PodState) -> Pod:
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
            self._describe().allocatable_or_capacity(),
            qos_class=pod.status.qos_class,
            cpu_manager_policy=self.config.cpu_manager_policy,
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

    def _resize_error(self, state: PodState, message: str) -> None:
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

    def _check_resize_done(
        self, state: PodState, statuses: Iterable[ContainerStatus], resize_conditions: Iterable[PodCondition]
    ) -> bool:
        """IsPodResizeInProgress: running containers as allocated end the in-progress condition.

        True when it ended (the manager's resize conditions changed)."""
        allocated = state.allocated
        if allocated is None or not any(c.type == POD_RESIZE_IN_PROGRESS for c in resize_conditions):
            return False
        for cs in statuses:
            if cs.state.running is not None and not same_resources(cs.resources, allocated.get(cs.name)):
                return False
        generation, cleared = self.manager.clear_pod_resize_in_progress_condition(state.pod.uid)
        if cleared:
            spec = self._allocated_pod(state).spec.to_dict()
            self.recorder.event(
                ObjectRef.for_pod(state.pod),
                NORMAL,
                "ResizeCompleted",
                resize_message("Pod resize completed", spec, generation),
            )
        return cleared

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
                "delete_pod",
                self.provider.delete_pod,
                pod,
                grace,
                timeout=grace + self.config.provider_timeout,
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
        """A status from the provider, on its one path to the manager.

        The cached status is read once (the base of the completion); the report is cut,
        completed, and set. Whatever is wrong with it is the provider's mistake: said (an
        Event, the log), never written. The container state transitions are checked once, by
        the manager, which answers why it refused one.
        """
        state = self._states.get(pod_uid)
        if state is None or state.rejected:
            return
        with state.lock:
            pod = state.pod
            base = self.manager.get_pod_status(pod_uid) or pod.status
            try:
                if isinstance(status, PodStatus):
                    # Messages cut first (as the kubelet cuts terminated ones): a huge one is
                    # neither held here nor sent to be refused (413) and retried for ever.
                    status = bound_messages(pod.spec, status)
                inits, mains = complete_containers(pod, status, base, state.allocated, state.actuated)
                resize_conditions = self.manager.get_pod_resize_conditions(pod_uid)
                if self._check_resize_done(state, (*(inits or ()), *(mains or ())), resize_conditions):
                    resize_conditions = self.manager.get_pod_resize_conditions(pod_uid)
                complete = complete_status(
                    pod,
                    status,
                    base,
                    inits,
                    mains,
                    resize_conditions=resize_conditions,
                    host_ip=self._host_ip(),
                )
            except (UnusableStatus, TypeError, AttributeError, ValueError) as err:
                self._refuse(state, f"provider reported an unusable status: {err}")
                return
            if state.stopped and any(cs.state.running is not None for cs in (*(inits or ()), *(mains or ()))):
                self._refuse(state, "provider reported a container running in a pod it has stopped")
                return
            previous, state.last_report = state.last_report, status
            try:
                accepted = self.manager.accept_pod_status(pod, complete)
            except InvalidObjectError as err:
                state.last_report = previous  # what was refused is not what the provider runs
                self._refuse(state, f"provider reported an invalid status: {err}")
                return
            if accepted.refused is not None:
                state.last_report = previous
                self._refuse(state, f"provider reported an impossible transition: {accepted.refused}")
                return
            if type(status) is PodStatus:
                # Kept for the next completion: what equals the status now cached is held once.
                state.last_report = share_equal_parts(status, accepted.status)

    def _refuse(self, state: PodState, message: str) -> None:
        _log(logging.ERROR, message, pod=state.pod.key(), podUID=state.pod.uid)
        self.recorder.event(ObjectRef.for_pod(state.pod), WARNING, "ProviderError", message)

    def _host_ip(self) -> str | None:
        return next(
            (a.get("address") for a in self._describe().addresses if a.get("type") == "InternalIP"), None
        )
