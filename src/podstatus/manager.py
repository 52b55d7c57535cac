"""The status manager: the node's source of truth for pod status, synced to the API server.

With default options it behaves towards the API server exactly as the
kubelet's ``pkg/kubelet/status`` manager does (SPEC section 4): one worker, a
GET before every PATCH, a full resync every 10 seconds. The options of SPEC
section 6 are opt-in (:class:`ManagerOptions`):

* ``skip_get``: write from the last pod known to be on the server, with its
  ``resourceVersion`` as a precondition; read again only on a conflict.
* ``workers``: several sync workers; one pod is never synced by two at once,
  and every sync sends the newest cached status, so changes are never reordered.
* ``prioritize``: readiness and terminal transitions jump the queue.
* ``backoff``: pods that keep failing wait longer; pods that are gone are not
  asked for again until their status changes.

``fast_path=True`` turns all four on.
"""

from __future__ import annotations

import heapq
import inspect
import itertools
import logging
import threading
import time
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, NamedTuple, TypeGuard

from . import patch as patchlib
from .conditions import (
    CONTAINERS_READY,
    DISRUPTION_TARGET,
    POD_READY,
    POD_REASON_DEFERRED,
    POD_REASON_INFEASIBLE,
    POD_RESIZE_IN_PROGRESS,
    POD_RESIZE_PENDING,
    calculate_pod_status_observed_generation,
    generate_containers_ready_condition,
    generate_pod_ready_condition,
    is_terminal_phase,
)
from .errors import ApiError, ConflictError, InvalidObjectError, NotFoundError
from .flags import Flag
from .podmanager import is_mirror_pod, is_static_pod, lean_pod
from .protocols import KubeClient, PodDeletionSafety, PodManager, PodUpdateNotifier, VersionedKubeClient
from .scheduling import SyncPool, SyncTask
from .sharing import ValuePool, compact_status, share_equal_parts
from .statusutil import (
    find_container_status,
    get_condition,
    is_pod_status_by_kubelet_equal,
    merge_pod_status,
    normalize_status,
    normalize_time,
    now_seconds,
    replace_or_append_condition,
    terminated_status,
    update_last_transition_times,
    with_container_status,
)
from .types import ContainerID, ContainerStatus, Pod, PodCondition, PodStatus
from .validation import check_container_state_transition, validate_status

__all__ = [
    "Manager",
    "ManagerOptions",
    "SetPodStatusResult",
    "SyncRecord",
    "new_manager",
    "volume_health_condition_sets_equal",
]

log = logging.getLogger(__name__)


class SetPodStatusResult(NamedTuple):
    """What upstream's SetPodStatus returns: the status now cached (None: none) and whether it changed."""

    status: PodStatus | None
    changed: bool


@dataclass(frozen=True)
class _Note:
    pod: Pod
    status: PodStatus
    is_added: bool
    pod_is_finished: bool


@dataclass(frozen=True)
class _ResizeConditions:
    pending: PodCondition | None = None
    in_progress: PodCondition | None = None

    def as_list(self) -> list[PodCondition]:
        return [c for c in (self.pending, self.in_progress) if c is not None]


def volume_health_condition_sets_equal(a: Iterable[Any] | None, b: Iterable[Any] | None) -> bool:
    """Whether two lists of volume health conditions hold the same (status, reason) pairs.

    volumeutil.VolumeHealthConditionSetsEqual: messages and order do not count.
    Conditions are the wire dicts (``{"status": ..., "reason": ..., "message": ...}``).
    """

    def pairs(conditions: Iterable[Any] | None) -> set[tuple[Any, Any]]:
        return {(c.get("status") or "", c.get("reason") or "") for c in conditions or ()}

    return pairs(a) == pairs(b)


def _check_volume_health_conditions(conditions: Any) -> list[dict[str, Any]]:
    if not isinstance(conditions, list | tuple):
        raise InvalidObjectError(
            f"invalid volume health at healthConditions: expected a list, got {type(conditions).__name__}",
            path="healthConditions",
        )
    out: list[dict[str, Any]] = []
    for i, c in enumerate(conditions):
        path = f"healthConditions[{i}]"
        if not isinstance(c, dict):
            raise InvalidObjectError(f"invalid volume health at {path}: expected an object", path=path)
        for key in ("status", "reason"):
            if not isinstance(c.get(key), str) or not c.get(key):
                raise InvalidObjectError(
                    f"invalid volume health at {path}.{key}: Required value", path=f"{path}.{key}"
                )
        if c.get("message") is not None and not isinstance(c.get("message"), str):
            raise InvalidObjectError(
                f"invalid volume health at {path}.message: expected a string", path=f"{path}.message"
            )
        out.append({k: v for k, v in c.items() if v is not None})
    return out


@dataclass(frozen=True)
class SyncRecord:
    """What one successful sync of one pod did; handed to ``on_sync`` observers."""

    pod_uid: str
    namespace: str
    name: str
    version: int
    # time.monotonic() of the oldest change this sync carried to the server (None: nothing new).
    changed_at: float | None
    synced_at: float
    patched: bool
    deleted: bool
    requests: int


@dataclass(frozen=True)
class ManagerOptions:
    """Options of :func:`new_manager`. The defaults are the kubelet's behaviour."""

    sync_period: float = 10.0
    skip_get: bool = False
    workers: int = 1
    prioritize: bool = False
    backoff: bool = False
    backoff_base: float = 0.5
    backoff_max: float = 60.0
    # Called after every pod sync that reached the server (from the worker thread).
    on_sync: Callable[[SyncRecord], None] | None = None
    # "Now" for timestamps the manager sets; tests pin it.
    clock: Callable[[], datetime] = now_seconds
    # Run passes and syncs on this shared pool instead of threads of the manager's own
    # (many managers in one process); ``workers`` then caps this manager's pods in flight.
    sync_pool: SyncPool | None = None
    # Background passes leave a pod's change alone for this many seconds (from its oldest change
    # not yet on the server), so changes that follow one another closely (a pod created, its
    # sandbox up and its containers started within milliseconds) go out in one write. A change
    # users wait on (readiness flipped, the pod finished) is written at once, with whatever was
    # held. ``sync_batch`` does not wait. 0: write at once.
    coalesce: float = 0.0

    @classmethod
    def build(cls, *, fast_path: bool = False, **options: Any) -> ManagerOptions:
        if fast_path:
            options.setdefault("skip_get", True)
            options.setdefault("workers", 4)
            options.setdefault("prioritize", True)
            options.setdefault("backoff", True)
        unknown = set(options) - set(cls.__dataclass_fields__)
        if unknown:
            raise TypeError(f"unknown manager options: {', '.join(sorted(unknown))}")
        opts = cls(**options)
        if opts.workers < 1:
            raise ValueError("workers must be at least 1")
        if opts.sync_period <= 0:
            raise ValueError("sync_period must be positive")
        if not 0 <= opts.coalesce < opts.sync_period:
            raise ValueError("coalesce must be at least 0 and shorter than sync_period")
        return opts


@dataclass(slots=True)
class _Entry:
    """A cached status: the kubelet's versionedPodStatus."""

    version: int
    namespace: str
    name: str
    status: PodStatus
    # time.monotonic() of the oldest change not yet on the server; None when all is synced.
    changed_at: float | None
    pod_is_finished: bool = False
    # A readiness or terminal transition is waiting to be synced (prioritize option).
    urgent: bool = False


@dataclass
class _PodSyncState:
    """Per-pod state of the sync side (only touched under the sync lock)."""

    # Last pod object seen from the server (skip_get option).
    server_pod: Pod | None = None
    failures: int = 0
    not_before: float = 0.0
    # The version that found the pod gone (backoff option): not asked again until it changes.
    gone_version: int | None = None
    # Worker queue bookkeeping (workers > 1).
    status_uid: str = ""
    reconcile: bool = False
    again: bool = False


def _fields(pod_key: str, uid: str, version: int | None = None, **more: Any) -> dict[str, Any]:
    fields: dict[str, Any] = {"pod": pod_key, "podUID": uid}
    if version is not None:
        fields["version"] = version
    fields.update(more)
    return fields


def _log(level: int, message: str, **fields: Any) -> None:
    if log.isEnabledFor(level):
        text = " ".join(f"{k}={v}" for k, v in fields.items())
        log.log(level, "%s %s", message, text, extra={"podstatus": fields})


class Manager:
    """The status manager of SPEC 2.3. Build it with :func:`new_manager`."""

    def __init__(
        self,
        kube_client: KubeClient | None,
        pod_manager: PodManager,
        pod_deletion_safety: PodDeletionSafety,
        options: ManagerOptions,
    ) -> None:
        self._client = kube_client
        # skip_get writes with a resourceVersion precondition: only a versioned client can.
        self._versioned: VersionedKubeClient | None = None
        if kube_client is not None and options.skip_get:
            if not _is_versioned(kube_client):
                raise TypeError(
                    "skip_get (fast_path) needs a client whose patch_pod_status takes resource_version"
                )
            self._versioned = kube_client
        self._pods = pod_manager
        self._safety = pod_deletion_safety
        self._opts = options
        self._lock = threading.RLock()
        self._statuses: dict[str, _Entry] = {}
        # Managers on one sync pool share its value pool: equal conditions and times of
        # pods on different nodes are held once.
        self._pool = options.sync_pool.values if options.sync_pool is not None else ValuePool()
        self._now_second = 0
        self._now_value = now_seconds()
        # (mirror) pod UID -> last version known to be on the API server.
        self._api_versions: dict[str, int] = {}
        self._sync_state: dict[str, _PodSyncState] = {}
        # Pods that may have a version newer than the server's: a non-full pass looks at these only,
        # so its cost follows the number of changes, not the number of pods.
        self._dirty: dict[str, None] = {}  # an ordered set: passes sync in order of change
        # pod uid -> (cached status, pod manager's status, its pod's UID and resourceVersion) last
        # found consistent by a full resync (see _needs_reconcile).
        self._consistent: dict[str, tuple[PodStatus, PodStatus | None, str, str]] = {}
        # (not_before, uid) of pods waiting out a back-off.
        self._backoff_heap: list[tuple[float, str]] = []
        self._wake = Flag()
        self._stopping = Flag()
        self._thread: threading.Thread | None = None
        self._workers: list[threading.Thread] = []
        # Worker queue (workers > 1): heap of (priority, seq, pod uid); a pod is queued or in flight once.
        self._queue: list[tuple[int, int, str]] = []
        self._queued: set[str] = set()
        self._in_flight: set[str] = set()
        self._queue_cond = threading.Condition(self._lock)
        self._seq = itertools.count()
        # Shared pool mode (options.sync_pool): no threads of our own.
        self._sync_pool = options.sync_pool
        # What the pool runs of this manager: the pool knows these two callables, not the manager.
        self._task = SyncTask(self._pool_step, self._pool_timer_fired)
        self._attached = False
        self._pool_generation = 0
        self._pass_wanted = False
        self._full_due = False
        self._pool_wake_at = float("inf")
        # The earliest time a change held back by the coalesce option is due (inf: none held).
        self._hold_due = float("inf")
        # Resize conditions the manager owns (podResizeConditions), by pod UID.
        self._resize: dict[str, _ResizeConditions] = {}
        self._notifiers: list[PodUpdateNotifier] = []
        # Static pods of the last pass (pod -> mirror translations): a non-full pass looks at
        # these besides the changed ones, as their status UID may have moved (SPEC 4.4 step 3).
        self._static_uids: frozenset[str] = frozenset()

    # -- lifecycle -------------------------------------------------------------------

    @property
    def options(self) -> ManagerOptions:
        return self._opts

    def start(self) -> None:
        """Start the background sync loop; returns at once."""
        if self._client is None:
            log.info("Kubernetes client is nil, not starting status manager: statuses are kept locally only")
            return
        if self._sync_pool is not None:
            with self._lock:
                if self._attached:
                    return
                self._stopping = Flag()
                self._attached = True
                self._pool_generation += 1
                self._pass_wanted = True  # statuses set before start are owed
                self._full_due = False
                self._pool_wake_at = float("inf")
                generation = self._pool_generation
            log.debug("Starting to sync pod status on a shared pool workers=%d", self._opts.workers)
            self._sync_pool.attach(self._task, generation, self._opts.sync_period)
            self._sync_pool.wake(self._task)
            return
        with self._lock:
            if self._thread is not None:
                return
            # Each run has its own stop flag: a thread of an earlier run that is still stuck in a
            # request (stop() does not wait for those) sees its own flag and ends, never joining this run.
            stopping = self._stopping = Flag()
            self._thread = threading.Thread(
                target=self._loop, args=(stopping,), name="podstatus-sync", daemon=True
            )
            if self._opts.workers > 1:
                self._workers = [
                    threading.Thread(
                        target=self._worker, args=(stopping,), name=f"podstatus-worker-{i}", daemon=True
                    )
                    for i in range(self._opts.workers)
                ]
        log.info(
            "Starting to sync pod status with apiserver workers=%d skipGet=%s prioritize=%s",
            self._opts.workers,
            self._opts.skip_get,
            self._opts.prioritize,
        )
        for w in self._workers:
            w.start()
        self._thread.start()

    def stop(self, timeout: float | None = None) -> None:
        """Stop the loop and wait for it, at most ``timeout`` seconds (default 5).

        A request that hangs does not hold ``stop`` up: its thread is a daemon
        that notices the stop when the request returns, and nothing it would
        record matters any more.
        """
        self._stopping.set()
        self._wake.set()
        with self._queue_cond:
            self._queue_cond.notify_all()
        if self._attached:
            self._stop_pooled(timeout)
            return
        threads = [t for t in (self._thread, *self._workers) if t is not None]
        deadline = time.monotonic() + (5.0 if timeout is None else timeout)
        for t in threads:
            if t is threading.current_thread():
                continue
            t.join(max(0.0, deadline - time.monotonic()))
        busy = [t.name for t in threads if t.is_alive() and t is not threading.current_thread()]
        if busy:
            log.warning("Status manager stopped while requests were in flight threads=%s", ",".join(busy))
        with self._lock:
            self._thread = None
            self._workers = []
            self._drop_queue()

    def _stop_pooled(self, timeout: float | None) -> None:
        deadline = time.monotonic() + (5.0 if timeout is None else timeout)
        with self._queue_cond:
            self._attached = False
            self._pool_generation += 1  # its pending timer entries are void
            while self._in_flight and time.monotonic() < deadline:
                self._queue_cond.wait(max(0.001, min(0.05, deadline - time.monotonic())))
            if self._in_flight:
                log.warning(
                    "Status manager stopped while requests were in flight pods=%d", len(self._in_flight)
                )
            self._drop_queue()

    def _drop_queue(self) -> None:
        """Empty the worker queue on a stop (under the lock): what it held was never synced, still owed."""
        self._dirty.update(dict.fromkeys(self._queued))
        self._queue.clear()
        self._queued.clear()

    def __enter__(self) -> Manager:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- reading -----------------------------------------------------------------------

    def get_pod_status(self, uid: str) -> PodStatus | None:
        uid = self._pods.translate_pod_uid(uid)
        with self._lock:
            entry = self._statuses.get(uid)
            return entry.status if entry is not None else None

    def get_status_version(self, uid: str) -> int:
        """The cached version of a pod's status (0 when not cached)."""
        uid = self._pods.translate_pod_uid(uid)
        with self._lock:
            entry = self._statuses.get(uid)
            return entry.version if entry is not None else 0

    def cached_uids(self) -> list[str]:
        with self._lock:
            return list(self._statuses)

    def pending_count(self) -> int:
        """Pods whose newest cached status is not known to be on the server."""
        pod_to_mirror, _ = self._pods.get_uid_translations()
        with self._lock:
            # A static pod's status is recorded under its mirror pod's UID (SPEC 4.4).
            return sum(
                1
                for uid, e in self._statuses.items()
                if self._api_versions.get(pod_to_mirror.get(uid) or uid, 0) < e.version
            )

    # -- setters -----------------------------------------------------------------------

    def set_pod_status(self, pod: Pod, status: PodStatus) -> None:
        if self._notifiers:
            self._set_pod_status(pod, status, None)
            return
        # The hot path (no notifiers), inlined: _set_pod_status does the same.
        meta = pod.metadata
        generation = meta.generation or None
        if type(status) is PodStatus and status.observed_generation != generation:
            status = status.replace(observed_generation=generation)
        with self._lock:
            self._update_status(pod, status, meta.deletion_timestamp is not None, pod_is_finished=False)

    def set_pod_status_result(self, pod: Pod, status: PodStatus) -> SetPodStatusResult:
        """:meth:`set_pod_status`, answering what upstream's SetPodStatus returns.

        The status now cached for the pod (None when there is none: the change
        was refused and nothing was cached before) and whether this call
        changed it.
        """
        cached: list[PodStatus | None] = []
        changed = self._set_pod_status(pod, status, cached)
        return SetPodStatusResult(cached[0], changed)

    def _set_pod_status(self, pod: Pod, status: PodStatus, cached: list[PodStatus | None] | None) -> bool:
        # A pod being deleted must get its final status out, even if it looks unchanged.
        force = pod.metadata.deletion_timestamp is not None
        # The kubelet reports which generation of the pod it has seen (KEP-5067).
        generation = calculate_pod_status_observed_generation(pod)
        if type(status) is PodStatus and status.observed_generation != generation:
            status = status.replace(observed_generation=generation)
        notes: list[_Note] | None = [] if self._notifiers else None
        with self._lock:
            changed = self._update_status(pod, status, force, pod_is_finished=False, notes=notes)
            if cached is not None:
                entry = self._statuses.get(pod.uid)
                cached.append(entry.status if entry is not None else None)
        if notes:
            self._send_notes(notes)
        return changed

    def set_container_readiness(self, pod_uid: str, container_id: str | ContainerID, ready: bool) -> None:
        notes: list[_Note] | None = [] if self._notifiers else None
        with self._lock:
            self._set_container_readiness(pod_uid, container_id, ready, notes)
        self._send_notes(notes)

    def _set_container_readiness(
        self, pod_uid: str, container_id: str | ContainerID, ready: bool, notes: list[_Note] | None
    ) -> None:
        found = self._locate_container(pod_uid, str(container_id), "readiness")
        if found is None:
            return
        pod, entry, where, cs = found
        if cs.ready == ready:
            _log(logging.DEBUG, "Container readiness unchanged", **_fields(pod.key(), pod.uid, ready=ready))
            return
        status = with_container_status(entry.status, where, cs.replace(ready=ready))
        every = [*(status.init_container_statuses or ()), *(status.container_statuses or ())]
        phase = status.phase or ""
        conditions = status.conditions or ()
        old = entry.status
        conditions = _update_condition(
            conditions,
            generate_pod_ready_condition(pod.spec, conditions, every, phase, pod=pod, old_status=old),
        )
        conditions = _update_condition(
            conditions,
            generate_containers_ready_condition(pod.spec, every, phase, pod=pod, old_status=old),
        )
        self._update_status(
            pod, status.replace(conditions=conditions), False, pod_is_finished=False, notes=notes
        )

    def set_container_startup(self, pod_uid: str, container_id: str | ContainerID, started: bool) -> None:
        notes: list[_Note] | None = [] if self._notifiers else None
        with self._lock:
            self._set_container_startup(pod_uid, container_id, started, notes)
        self._send_notes(notes)

    def _set_container_startup(
        self, pod_uid: str, container_id: str | ContainerID, started: bool, notes: list[_Note] | None
    ) -> None:
        found = self._locate_container(pod_uid, str(container_id), "startup")
        if found is None:
            return
        pod, entry, where, cs = found
        # An unset ``started`` differs from both True and False.
        if cs.started is not None and cs.started == started:
            _log(logging.DEBUG, "Container startup unchanged", **_fields(pod.key(), pod.uid))
            return
        status = with_container_status(entry.status, where, cs.replace(started=started))
        self._update_status(pod, status, False, pod_is_finished=False, notes=notes)

    def _locate_container(
        self, pod_uid: str, cid: str, what: str
    ) -> tuple[Pod, _Entry, tuple[str, int], ContainerStatus] | None:
        """The guards shared by the container setters (SPEC 4.3); None (logged) when one fails."""
        pod = self._pods.get_pod_by_uid(pod_uid)
        if pod is None:
            _log(logging.DEBUG, f"Pod has been deleted, no need to update {what}", podUID=pod_uid)
            return None
        entry = self._statuses.get(pod.uid)
        if entry is None:
            _log(
                logging.WARNING,
                f"Container {what} changed before pod has synced",
                **_fields(pod.key(), pod.uid, containerID=cid),
            )
            return None
        where = find_container_status(entry.status, cid)
        if where is None:
            _log(
                logging.WARNING,
                f"Container {what} changed for unknown container",
                **_fields(pod.key(), pod.uid, entry.version, containerID=cid),
            )
            return None
        return pod, entry, where, getattr(entry.status, where[0])[where[1]]

    def terminate_pod(self, pod: Pod) -> None:
        notes: list[_Note] | None = [] if self._notifiers else None
        with self._lock:
            entry = self._statuses.get(pod.uid)
            base = entry.status if entry is not None else pod.status
            if not is_static_pod(pod) and entry is not None and base.phase == "Running":
                _log(
                    logging.INFO,
                    "Terminal running pod should have already been marked as failed",
                    **_fields(pod.key(), pod.uid),
                )
            status = terminated_status(pod, base, is_static=is_static_pod(pod))
            self._update_status(pod, status, True, pod_is_finished=True, notes=notes)
        self._send_notes(notes)

    def remove_orphaned_statuses(self, pod_uids: Collection[str] | Iterable[str]) -> None:
        keep: Collection[str] = pod_uids if isinstance(pod_uids, set | frozenset | dict) else set(pod_uids)
        with self._lock:
            for uid in [u for u in self._statuses if u not in keep]:
                entry = self._statuses.pop(uid)
                self._sync_state.pop(uid, None)
                self._dirty.pop(uid, None)
                self._consistent.pop(uid, None)
                self._resize.pop(uid, None)
                _log(
                    logging.DEBUG,
                    "Removing pod from status map",
                    **_fields(f"{entry.namespace}/{entry.name}", uid, entry.version),
                )

    # -- accepting a status (SPEC 4.2) -------------------------------------------------

    def _update_status(
        self,
        pod: Pod,
        status: PodStatus,
        force: bool,
        *,
        pod_is_finished: bool,
        notes: list[_Note] | None = None,
    ) -> bool:
        uid = pod.uid
        entry = self._statuses.get(uid)
        if entry is not None and not force and (status is entry.status or status == entry.status):
            # Equal to what we hold (which is valid and normal): nothing can differ.
            if log.isEnabledFor(logging.DEBUG):
                _log(logging.DEBUG, "Ignoring same status for pod", **_fields(pod.key(), uid, entry.version))
            return False
        # Parts shared with the cached status (built with replace) were checked and normalised then.
        known = entry.status if entry is not None else None
        if known is not None:
            # A status rebuilt from scratch: take the cached parts it equals (valid and normal).
            status = share_equal_parts(status, known)
        validate_status(status, known)
        if known is not None:
            old = known
        else:
            mirror = self._pods.get_mirror_pod_by_pod(pod) if is_static_pod(pod) else None
            old = mirror.status if mirror is not None else pod.status
        spec = pod.spec
        status = normalize_status(spec, status, known)

        problem = check_container_state_transition(old, status, spec)
        if problem is not None:
            _log(logging.ERROR, "Status update on pod aborted: " + problem, **_fields(pod.key(), uid))
            return False

        if is_terminal_phase(old.phase) and not is_terminal_phase(status.phase):
            _log(
                logging.ERROR,
                "Refusing to move pod out of a terminal phase",
                **_fields(pod.key(), uid, oldPhase=old.phase, newPhase=status.phase),
            )
            status = status.replace(phase=old.phase, reason=old.reason, message=old.message)

        now = self._now()
        status = update_last_transition_times(old, status, now)
        start = old.start_time
        if start is not None:
            # Normalised after it is copied: the old status may be a pod object's, with
            # sub-second times the server would cut (upstream normalises after copying).
            if start.microsecond or start.tzinfo is not UTC:
                start = normalize_time(start)
        elif status.start_time is not None:
            start = status.start_time
        else:
            start = now
        if start != status.start_time:
            status = status.replace(start_time=start)
        # Volume health is set on its own (set_pod_volume_health): a status without it keeps it.
        if old.volume_health and not status.volume_health:
            status = status.replace(volume_health=old.volume_health)
        # Never report an older generation than the one reported (no needless patches).
        old_generation = old.observed_generation
        if old_generation is not None and old_generation > (status.observed_generation or 0):
            status = status.replace(observed_generation=old_generation)

        if entry is not None and not force and is_pod_status_by_kubelet_equal(entry.status, status):
            if log.isEnabledFor(logging.DEBUG):
                _log(logging.DEBUG, "Ignoring same status for pod", **_fields(pod.key(), uid, entry.version))
            return False

        if entry is not None:
            version = entry.version + 1
            changed_at = entry.changed_at if entry.changed_at is not None else time.monotonic()
            urgent = entry.urgent or _is_urgent(old, status)
            pod_is_finished = pod_is_finished or entry.pod_is_finished
        else:
            version = 1
            changed_at = time.monotonic()
            urgent = _is_urgent(old, status)
        # Held once, whatever many cached statuses have in common (SPEC 2.1: equal values, read-only).
        status = compact_status(status, known, self._pool)
        self._statuses[uid] = _Entry(
            version=version,
            namespace=pod.namespace,
            name=pod.name,
            status=status,
            changed_at=changed_at,
            pod_is_finished=pod_is_finished,
            urgent=urgent,
        )
        if log.isEnabledFor(logging.DEBUG):
            _log(logging.DEBUG, "Pod status accepted", **_fields(pod.key(), uid, version, phase=status.phase))
        self._notify(uid)
        if notes is not None:
            notes.append(
                _Note(
                    pod=pod.replace(status=status),
                    status=status,
                    is_added=entry is None and pod.metadata.deletion_timestamp is None,
                    pod_is_finished=pod_is_finished,
                )
            )
        return True

    # -- notifiers, volume health, resize conditions (v1.37) --------------------------------

    def add_pod_update_notifier(self, notifier: PodUpdateNotifier) -> None:
        """Tell ``notifier`` of every status accepted from now on (AddPodUpdateNotifier).

        ``on_pod_removed(pod)`` for the status of a finished pod (terminate_pod),
        ``on_pod_updated(pod, status, is_added)`` for any other; ``is_added``
        when the pod had no cached status and is not being deleted.
        """
        with self._lock:
            self._notifiers = [*self._notifiers, notifier]

    def _send_notes(self, notes: list[_Note] | None) -> None:
        if not notes:
            return
        for note in notes:
            for notifier in self._notifiers:
                try:
                    if note.pod_is_finished:
                        notifier.on_pod_removed(note.pod)
                    else:
                        notifier.on_pod_updated(note.pod, note.status, note.is_added)
                except Exception:
                    log.exception("Pod update notifier failed podUID=%s", note.pod.uid)

    def set_pod_volume_health(self, pod_uid: str, volume_name: str, conditions: Iterable[Any]) -> bool:
        """Cache the health of one of the pod's volumes (SetPodVolumeHealth); True when the status changed.

        ``conditions`` is the whole set for that volume, as wire dicts
        (``{"status": "Degraded", "reason": "...", "message": "..."}``); empty
        means healthy. Only a change of the (status, reason) pairs is a change:
        a new message alone is not written.
        """
        # Any iterable of conditions will do, but not a string or a single object.
        given: Any = conditions
        if not isinstance(given, list | tuple | str | bytes | dict) and isinstance(given, Iterable):
            given = list(given)
        checked = _check_volume_health_conditions(given)
        notes: list[_Note] | None = [] if self._notifiers else None
        with self._lock:
            changed = self._set_pod_volume_health(pod_uid, volume_name, checked, notes)
        self._send_notes(notes)
        return changed

    def _set_pod_volume_health(
        self, pod_uid: str, volume_name: str, conditions: list[dict[str, Any]], notes: list[_Note] | None
    ) -> bool:
        pod = self._pods.get_pod_by_uid(pod_uid)
        if pod is None:
            _log(logging.DEBUG, "Pod has been deleted, no need to update volume health", podUID=pod_uid)
            return False
        entry = self._statuses.get(pod.uid)
        if entry is None:
            _log(
                logging.INFO,
                "Volume health changed before pod has synced",
                **_fields(pod.key(), pod.uid, volumeName=volume_name),
            )
            return False
        entries = list(entry.status.volume_health or ())
        index = next(
            (i for i, v in enumerate(entries) if isinstance(v, dict) and v.get("name") == volume_name), -1
        )
        existing = entries[index].get("healthConditions") if index >= 0 else None
        if volume_health_condition_sets_equal(existing, conditions):
            _log(
                logging.DEBUG,
                "Volume health unchanged",
                **_fields(pod.key(), pod.uid, volumeName=volume_name),
            )
            return False
        stamp = self._now().strftime("%Y-%m-%dT%H:%M:%SZ")
        health: dict[str, Any] = {"name": volume_name}
        if conditions:
            health["healthConditions"] = conditions
        health["lastTransitionTime"] = stamp
        if index >= 0:
            entries[index] = health
        else:
            entries.append(health)
        status = entry.status.replace(volume_health=entries)
        return self._update_status(pod, status, False, pod_is_finished=False, notes=notes)

    def get_pod_resize_conditions(self, pod_uid: str) -> list[PodCondition]:
        """The pod's cached resize conditions: ``PodResizePending``, then ``PodResizeInProgress``, when set."""
        with self._lock:
            held = self._resize.get(pod_uid)
            return held.as_list() if held is not None else []

    def set_pod_resize_pending_condition(
        self, pod_uid: str, reason: str, message: str = "", observed_generation: int = 0
    ) -> bool:
        """Cache ``PodResizePending`` (SetPodResizePendingCondition).

        Any reason but ``Infeasible`` is ``Deferred``. True when the condition
        is new or its reason or observedGeneration changed.
        """
        if reason != POD_REASON_INFEASIBLE:
            reason = POD_REASON_DEFERRED
        with self._lock:
            held = self._resize.get(pod_uid) or _ResizeConditions()
            previous = held.pending
            self._resize[pod_uid] = replace(
                held,
                pending=self._resize_condition(
                    POD_RESIZE_PENDING, previous, reason, message, observed_generation
                ),
            )
        if previous is None:
            return True
        return (previous.reason or "") != reason or (previous.observed_generation or 0) != observed_generation

    def set_pod_resize_in_progress_condition(
        self, pod_uid: str, reason: str = "", message: str = "", observed_generation: int = 0
    ) -> tuple[int, bool]:
        """Cache ``PodResizeInProgress`` (SetPodResizeInProgressCondition).

        An existing condition keeps its observedGeneration (clear it first to
        change that), and its reason and message when both given are empty.
        Returns the condition's observedGeneration and whether it changed
        (times aside).
        """
        with self._lock:
            held = self._resize.get(pod_uid) or _ResizeConditions()
            previous = held.in_progress
            if previous is not None:
                if not reason and not message:
                    reason, message = previous.reason or "", previous.message or ""
                observed_generation = previous.observed_generation or 0
            condition = self._resize_condition(
                POD_RESIZE_IN_PROGRESS, previous, reason, message, observed_generation
            )
            self._resize[pod_uid] = replace(held, in_progress=condition)
        if previous is None:
            return observed_generation, True
        same = previous.replace(last_probe_time=None, last_transition_time=None) == condition.replace(
            last_probe_time=None, last_transition_time=None
        )
        return observed_generation, not same

    def clear_pod_resize_pending_condition(self, pod_uid: str, resolution: str = "") -> None:
        """Drop ``PodResizePending`` (ClearPodResizePendingCondition); ``resolution`` is logged."""
        with self._lock:
            held = self._resize.get(pod_uid)
            if held is None or held.pending is None:
                return
            self._resize[pod_uid] = replace(held, pending=None)
        _log(logging.DEBUG, "Pod resize no longer pending", podUID=pod_uid, resolution=resolution)

    def clear_pod_resize_in_progress_condition(self, pod_uid: str) -> tuple[int, bool]:
        """Drop ``PodResizeInProgress``; its observedGeneration and True, or (0, False) when there was none."""
        with self._lock:
            held = self._resize.get(pod_uid)
            if held is None or held.in_progress is None:
                return 0, False
            self._resize[pod_uid] = replace(held, in_progress=None)
            return held.in_progress.observed_generation or 0, True

    def is_pod_resize_deferred(self, pod_uid: str) -> bool:
        with self._lock:
            held = self._resize.get(pod_uid)
            return (
                held is not None and held.pending is not None and held.pending.reason == POD_REASON_DEFERRED
            )

    def is_pod_resize_infeasible(self, pod_uid: str) -> bool:
        with self._lock:
            held = self._resize.get(pod_uid)
            return (
                held is not None and held.pending is not None and held.pending.reason == POD_REASON_INFEASIBLE
            )

    def backfill_pod_resize_conditions(self, pods: Iterable[Pod]) -> None:
        """Take the resize conditions the pods' statuses carry into the cache (BackfillPodResizeConditions).

        A node agent that restarts calls it with the pods it finds, so a resize
        in progress or pending is neither lost nor written anew. The times start afresh.
        """
        with self._lock:
            for pod in pods:
                for c in pod.status.conditions or ():
                    if c.type not in (POD_RESIZE_PENDING, POD_RESIZE_IN_PROGRESS):
                        continue
                    condition = self._resize_condition(
                        c.type, None, c.reason or "", c.message or "", c.observed_generation or 0
                    )
                    held = self._resize.get(pod.uid) or _ResizeConditions()
                    if c.type == POD_RESIZE_PENDING:
                        self._resize[pod.uid] = replace(held, pending=condition)
                    else:
                        self._resize[pod.uid] = replace(held, in_progress=condition)

    def _resize_condition(
        self,
        condition_type: str,
        old: PodCondition | None,
        reason: str,
        message: str,
        observed_generation: int,
    ) -> PodCondition:
        # updatedPodResizeCondition: probed now; the transition time moves with the reason.
        now = self._now()
        moved = old is None or (old.reason or "") != reason
        return PodCondition(
            type=condition_type,
            status="True",
            observed_generation=observed_generation or None,
            last_probe_time=now,
            last_transition_time=now if moved or old is None else old.last_transition_time,
            reason=reason or None,
            message=message or None,
        )

    def _now(self) -> datetime:
        # Times the manager sets are normal too: whole seconds, UTC.
        clock = self._opts.clock
        if clock is now_seconds:
            # The default clock: one datetime per second of wall time is enough.
            second = int(time.time())
            if second != self._now_second:
                self._now_second, self._now_value = second, now_seconds()
            return self._now_value
        now = normalize_time(clock())
        assert now is not None
        return now

    def _notify(self, uid: str) -> None:
        self._dirty[uid] = None
        if self._attached:
            if not self._pass_wanted:
                self._pass_wanted = True
                pool = self._sync_pool
                assert pool is not None
                pool.wake(self._task)
            return
        # Never blocks; one pending wake-up is enough.
        if not self._wake.is_set():
            self._wake.set()

    # -- the sync loop (SPEC 4.4) ------------------------------------------------------

    def _loop(self, stopping: threading.Event) -> None:
        period = self._opts.sync_period
        next_full = time.monotonic() + period
        while not stopping.is_set():
            timeout = min(max(0.0, next_full - time.monotonic()), self._next_timed_wait())
            self._wake.wait(timeout)
            if stopping.is_set():
                return
            self._wake.clear()
            full = time.monotonic() >= next_full
            try:
                if full:
                    next_full = time.monotonic() + period
                self._run_pass(all=full, wait=False)
            except Exception:
                log.exception("Status sync pass failed; the loop goes on")

    def _next_timed_wait(self) -> float:
        """Seconds until a pass is due for a pod that waits out a back-off or a coalesce hold (3600: none)."""
        wait = self._next_backoff_wait() if self._opts.backoff else 3600.0
        if self._hold_due != float("inf"):
            wait = min(wait, max(0.0, self._hold_due - time.monotonic()))
        return wait

    def _next_backoff_wait(self) -> float:
        """Seconds until the earliest backed-off pod may be tried again (a heap, lazily cleaned)."""
        due = False
        with self._lock:
            now = time.monotonic()
            heap = self._backoff_heap
            while heap:
                when, uid = heap[0]
                state = self._sync_state.get(uid)
                if state is None or state.not_before != when or uid not in self._statuses:
                    heapq.heappop(heap)  # stale: the pod synced, was dropped, or failed again later
                    continue
                if when <= now:
                    heapq.heappop(heap)
                    self._dirty[uid] = None  # its wait is over: the next pass tries it
                    due = True
                    continue
                return 0.0 if due else max(0.01, when - now)
        return 0.0 if due else 3600.0

    def sync_batch(self, all: bool = False) -> int:
        """One synchronous sync pass; returns how many pods it tried to sync."""
        return self._run_pass(all=all, wait=True)

    def _run_pass(self, *, all: bool, wait: bool) -> int:
        if self._client is None:
            return 0
        chosen = self._choose(all, hold=not wait)
        queued = self._attached or bool(self._workers)
        if not queued:
            for i, (uid, status_uid, reconcile) in enumerate(chosen):
                if self._stopping.is_set() and not wait:
                    with self._lock:  # not synced after all: still owed
                        self._dirty.update(dict.fromkeys(u for u, _, _ in chosen[i:]))
                    break
                self._sync_guarded(uid, status_uid, reconcile)
            return len(chosen)
        pending: list[str] = []
        with self._queue_cond:
            if self._stopping.is_set() or not (self._workers or self._attached):
                # Stopped while choosing: nobody would take these from the queue. Still owed.
                self._dirty.update(dict.fromkeys(u for u, _, _ in chosen))
                return len(chosen)
            for uid, status_uid, reconcile in chosen:
                state = self._sync_state.setdefault(uid, _PodSyncState())
                state.status_uid = status_uid
                state.reconcile = reconcile or state.reconcile
                if uid in self._queued:
                    continue
                if uid in self._in_flight:
                    # The worker re-queues it when it finishes if something newer came in.
                    state.again = True
                    continue
                entry = self._statuses.get(uid)
                priority = 0 if (self._opts.prioritize and entry is not None and entry.urgent) else 1
                heapq.heappush(self._queue, (priority, next(self._seq), uid))
                self._queued.add(uid)
                pending.append(uid)
            self._queue_cond.notify_all()
            if self._attached and pending:
                pool = self._sync_pool
                assert pool is not None
                pool.wake(self._task)
            if wait:
                while not self._stopping.is_set() and any(
                    u in self._queued or u in self._in_flight for u in pending
                ):
                    self._queue_cond.wait(0.05)
        return len(chosen)

    def _worker(self, stopping: threading.Event) -> None:
        while True:
            with self._queue_cond:
                while not self._queue and not stopping.is_set():
                    self._queue_cond.wait()
                if stopping.is_set():
                    return
                uid, state, status_uid, reconcile = self._take_queued()
            try:
                self._sync_guarded(uid, status_uid, reconcile)
            finally:
                if self._finish_queued(uid, state, status_uid):
                    self._wake.set()

    def _take_queued(self) -> tuple[str, _PodSyncState, str, bool]:
        """Pop the next queued pod and mark it in flight (the caller holds the lock)."""
        _, _, uid = heapq.heappop(self._queue)
        self._queued.discard(uid)
        self._in_flight.add(uid)
        state = self._sync_state.setdefault(uid, _PodSyncState())
        status_uid = state.status_uid or uid
        reconcile, state.reconcile, state.again = state.reconcile, False, False
        return uid, state, status_uid, reconcile

    def _finish_queued(self, uid: str, state: _PodSyncState, status_uid: str) -> bool:
        """A queued pod's sync is over; True when another pass must look at it."""
        with self._queue_cond:
            self._in_flight.discard(uid)
            entry = self._statuses.get(uid)
            again, state.again = state.again, False
            newer = entry is not None and self._api_versions.get(status_uid, 0) < entry.version
            if newer:
                self._dirty[uid] = None
            self._queue_cond.notify_all()
        return again or newer

    # -- shared pool mode (options.sync_pool) ----------------------------------------------

    def _pool_timer_fired(self, generation: int, full: bool) -> bool:
        """A timer entry of the pool is due (called under the pool's lock); True to take a step."""
        if generation != self._pool_generation or not self._attached:
            return False
        if full:
            self._full_due = True
        else:
            self._pool_wake_at = float("inf")
            self._pass_wanted = True
        return True

    def _pool_step(self) -> None:
        """One step on a pool worker: the pass that is wanted, then the sync of one queued pod."""
        pool = self._sync_pool
        stopping = self._stopping
        if pool is None or not self._attached or stopping.is_set():
            return
        generation = self._pool_generation
        if self._pass_wanted or self._full_due:
            full, self._full_due = self._full_due, False
            self._pass_wanted = False  # before choosing: a change made meanwhile wakes us again
            if full:
                pool.call_at(time.monotonic() + self._opts.sync_period, self._task, generation, full=True)
            try:
                self._run_pass(all=full, wait=False)
            except Exception:
                log.exception("Status sync pass failed; the loop goes on")
            wait = self._next_timed_wait()
            if wait < 3600.0:
                when = time.monotonic() + wait
                if when < self._pool_wake_at:
                    self._pool_wake_at = when
                    pool.call_at(when, self._task, generation, full=False)
        with self._queue_cond:
            if not self._queue or len(self._in_flight) >= self._opts.workers or stopping.is_set():
                return
            uid, state, status_uid, reconcile = self._take_queued()
            more = bool(self._queue) and len(self._in_flight) < self._opts.workers
        if more:
            pool.wake(self._task)  # another worker may take the next pod of this manager meanwhile
        try:
            self._sync_guarded(uid, status_uid, reconcile)
        finally:
            again = self._finish_queued(uid, state, status_uid)
            # The manager as it is now: stopped and started again meanwhile, it is the new run's work.
            if (again or self._queue) and self._attached and not self._stopping.is_set():
                if again:
                    self._pass_wanted = True
                pool.wake(self._task)

    def _choose(self, all: bool, *, hold: bool = False) -> list[tuple[str, str, bool]]:
        """SPEC 4.4 steps 1-3: which pods to sync, as (pod uid, status uid, reconcile)."""
        pod_to_mirror, mirror_to_pod = self._pods.get_uid_translations()
        chosen: list[tuple[str, str, bool]] = []
        now = time.monotonic()
        window = self._opts.coalesce if hold and not all else 0.0
        hold_due = float("inf")
        with self._lock:
            if all:
                for uid in [
                    u for u in self._api_versions if u not in self._statuses and u not in mirror_to_pod
                ]:
                    del self._api_versions[uid]
            if all:
                candidates = list(self._statuses.items())
            else:
                # Every cached status newer than the server's (SPEC 4.4 step 3). A pod's version
                # only gets ahead by a change (which marks it dirty) or, for a static pod, when its
                # mirror pod's UID moves: so the changed pods and the static pods (of this pass's
                # translations and the last one's) are all there is to look at.
                statuses = self._statuses
                static = self._static_uids.union(pod_to_mirror)
                candidates = [(u, statuses[u]) for u in self._dirty if u in statuses]
                candidates += [(u, statuses[u]) for u in static if u in statuses and u not in self._dirty]
                self._dirty.clear()
            self._static_uids = frozenset(pod_to_mirror)
            for uid, entry in candidates:
                status_uid = uid
                mirror_uid = pod_to_mirror.get(uid)
                if mirror_uid is not None:
                    if mirror_uid == "":
                        _log(
                            logging.DEBUG,
                            "Static pod does not have a corresponding mirror pod; skipping",
                            **_fields(f"{entry.namespace}/{entry.name}", uid),
                        )
                        self._dirty[uid] = None
                        continue
                    status_uid = mirror_uid
                if self._opts.backoff:
                    state = self._sync_state.get(uid)
                    if state is not None:
                        if state.gone_version is not None and state.gone_version >= entry.version:
                            continue  # gone from the server, nothing new to say
                        if state.not_before > now and not all:
                            self._dirty[uid] = None  # still owed: try again when the wait is over
                            continue
                if not all:
                    if self._api_versions.get(status_uid, 0) >= entry.version:
                        continue
                    if (
                        window
                        and not entry.urgent
                        and entry.changed_at is not None
                        and now - entry.changed_at < window
                    ):
                        # Held: a later pass sends it with what follows. A change users wait on
                        # (readiness flipped, the pod finished) is not held.
                        self._dirty[uid] = None
                        hold_due = min(hold_due, entry.changed_at + window)
                        continue
                    chosen.append((uid, status_uid, False))
                    continue
                if self._needs_update(status_uid, entry):
                    chosen.append((uid, status_uid, False))
                elif self._needs_reconcile(uid, entry.status):
                    self._api_versions.pop(status_uid, None)
                    chosen.append((uid, status_uid, True))
            if self._opts.prioritize:
                chosen.sort(key=lambda c: 0 if self._statuses[c[0]].urgent else 1)
            if not all:
                self._hold_due = hold_due
        return chosen

    def _needs_update(self, status_uid: str, entry: _Entry) -> bool:
        latest = self._api_versions.get(status_uid)
        if latest is None or latest < entry.version:
            return True
        pod = self._pods.get_pod_by_uid(status_uid)
        if pod is None:
            return False
        return self._can_be_deleted(pod, entry.status)

    def _needs_reconcile(self, uid: str, status: PodStatus) -> bool:
        pod = self._pods.get_pod_by_uid(uid)
        if pod is None:
            return False
        if is_static_pod(pod):
            mirror = self._pods.get_mirror_pod_by_pod(pod)
            if mirror is None:
                return False
            pod = mirror
        # Pods and statuses are immutable values, and a resourceVersion names one state of a pod on
        # the server: when the cached status is the one last found consistent and the pod manager
        # holds the same pod object, or another copy of the same pod at the same resourceVersion
        # (an informer's relist), the answer is the same, and a full resync of an idle node is a
        # walk over dicts.
        consistent = self._consistent.get(uid)
        if consistent is not None and consistent[0] is status:
            if consistent[1] is pod.status:
                return False
            meta = pod.metadata
            if meta.resource_version and meta.resource_version == consistent[3] and meta.uid == consistent[2]:
                # Hold this copy's objects, not the old copy's: identity next time, and no old
                # status kept alive.
                self._note_consistent(uid, status, pod)
                return False
        # Equal before normalising implies equal after (the cached status is normal, so the parts
        # compared are normal already): try the cheap way first.
        if is_pod_status_by_kubelet_equal(pod.status, status):
            self._note_consistent(uid, status, pod)
            return False
        try:
            api_status = normalize_status(pod.spec, pod.status)
        except Exception:
            return True
        if is_pod_status_by_kubelet_equal(api_status, status):
            self._note_consistent(uid, status, pod)
            return False
        _log(
            logging.DEBUG,
            "Pod status is inconsistent with cached status, a reconciliation should be triggered",
            **_fields(pod.key(), uid),
        )
        return True

    def _note_synced(self, uid: str, pod: Pod, status: PodStatus) -> None:
        """After a sync: ``pod`` is the server's copy (the PATCH's answer, or what was read).

        When its status is consistent with the cached ``status`` just synced, so is the pod
        manager's copy at the same resourceVersion (the watch delivers that state), and the next
        full resync need not compare them again (SPEC 4.4 step 3 gives the same answer). The
        compare runs here, on the object just decoded, instead of on a cold one at the resync.
        """
        meta = pod.metadata
        rv = meta.resource_version
        if not rv or not is_pod_status_by_kubelet_equal(pod.status, status):
            return
        with self._lock:
            current = self._statuses.get(uid)
            if current is not None and current.status is status:
                # Not the server copy's status itself: nothing else holds it, and it is a full
                # decoded status (the pod manager holds its own copy).
                self._consistent[uid] = (status, None, meta.uid or "", rv)

    def _note_consistent(self, uid: str, status: PodStatus, pod: Pod) -> None:
        """Remember that ``pod`` (a copy from the server) was found consistent with the cached ``status``."""
        meta = pod.metadata
        self._consistent[uid] = (status, pod.status, meta.uid or "", meta.resource_version or "")

    def _can_be_deleted(self, pod: Pod, status: PodStatus) -> bool:
        """SPEC 4.6."""
        if pod.metadata.deletion_timestamp is None or is_mirror_pod(pod):
            return False
        if not is_terminal_phase(pod.status.phase):
            _log(
                logging.DEBUG,
                "Delaying pod deletion as the phase is non-terminal",
                **_fields(pod.key(), pod.uid, phase=pod.status.phase, localPhase=status.phase),
            )
            return False
        return bool(self._safety.pod_resources_are_reclaimed(pod, status))

    # -- syncing one pod (SPEC 4.5) -----------------------------------------------------

    def _sync_guarded(self, uid: str, status_uid: str, reconcile: bool) -> None:
        try:
            ok = self._sync_pod(uid, status_uid, reconcile)
        except Exception:
            log.exception("Unexpected error syncing pod status podUID=%s", uid)
            ok = False
        with self._lock:
            entry = self._statuses.get(uid)
            if entry is not None and self._api_versions.get(status_uid, 0) < entry.version:
                # Failed, or changed meanwhile: the next non-full pass must look at it again.
                self._dirty[uid] = None
        if self._opts.backoff:
            with self._lock:
                state = self._sync_state.get(uid)
                if state is None:
                    if uid not in self._statuses:
                        return
                    state = self._sync_state[uid] = _PodSyncState()
                if ok:
                    state.failures = 0
                    state.not_before = 0.0
                else:
                    state.failures += 1
                    delay = min(self._opts.backoff_max, self._opts.backoff_base * (2 ** (state.failures - 1)))
                    state.not_before = time.monotonic() + delay
                    heapq.heappush(self._backoff_heap, (state.not_before, uid))

    def _sync_pod(self, uid: str, status_uid: str, reconcile: bool) -> bool:
        """Sync one pod; True when the server is known to hold the cached version (or nothing is owed)."""
        client = self._client
        assert client is not None
        with self._lock:
            entry = self._statuses.get(uid)
            if entry is None:
                return True  # dropped meanwhile
            entry = replace(entry)  # a snapshot: setters may move on while we talk to the server
            state = self._sync_state.get(uid)
            cached_pod = state.server_pod if (state is not None and self._opts.skip_get) else None
            if cached_pod is None and self._opts.skip_get:
                # First write: the pod manager's copy (from the agent's watch) is as good a
                # base as a GET; if it is stale, the resourceVersion precondition says so.
                cached_pod = self._known_api_pod(uid)
        key = f"{entry.namespace}/{entry.name}"
        requests = 0

        use_cached = False
        if cached_pod is not None and not reconcile:
            # The pod manager (the agent's watch) may hold a newer copy than our last write (a
            # deletionTimestamp, another writer): write from that one. The resourceVersion
            # precondition still turns a stale base into a 409 and a GET, and the UID check
            # below runs on whichever base is used.
            cached_pod = self._newest_known_pod(uid, cached_pod)
            use_cached = cached_pod is not None
        for attempt in range(2):
            if use_cached and attempt == 0:
                assert cached_pod is not None
                pod = cached_pod
            else:
                try:
                    requests += 1
                    pod = client.get_pod(entry.namespace, entry.name)
                except NotFoundError:
                    _log(logging.INFO, "Pod does not exist on the server", **_fields(key, uid, entry.version))
                    self._forget_server_pod(uid, gone_version=entry.version)
                    return self._opts.backoff  # with backoff, "gone" is a settled state
                except ApiError as err:
                    _log(
                        logging.WARNING,
                        "Failed to get status for pod",
                        **_fields(key, uid, entry.version, error=err),
                    )
                    return False
                except InvalidObjectError as err:
                    _log(
                        logging.ERROR,
                        "Server returned an invalid pod",
                        **_fields(key, uid, entry.version, error=err),
                    )
                    return False

            translated = self._pods.translate_pod_uid(pod.uid)
            if translated and translated != uid:
                _log(
                    logging.INFO,
                    "Pod was deleted and then recreated, skipping status update",
                    **_fields(key, uid, entry.version, newPodUID=pod.uid),
                )
                self._delete_status(uid)
                return True

            could_run = bool(self._safety.pod_could_have_running_containers(pod))
            merged = merge_pod_status(
                pod.status,
                entry.status,
                could_run,
                self._now(),
                generation=pod.metadata.generation or None,
            )
            if (
                not could_run
                and is_terminal_phase(entry.status.phase)
                and not is_terminal_phase(pod.status.phase)
            ):
                # The merge took the cached DisruptionTarget (SPEC 4.7).
                self._keep_merged_disruption_time(uid, entry, merged)
            patch = patchlib.diff_pod_status(pod.status.to_dict(), merged.to_dict(), pod.uid)
            patched = False
            if patchlib.has_changes(patch):
                try:
                    requests += 1
                    if self._versioned is not None:
                        new_pod = self._versioned.patch_pod_status(
                            pod.namespace,
                            pod.name,
                            patchlib.encode_patch(patch),
                            resource_version=pod.metadata.resource_version,
                        )
                    else:
                        new_pod = client.patch_pod_status(
                            pod.namespace, pod.name, patchlib.encode_patch(patch)
                        )
                except ConflictError as err:
                    self._forget_server_pod(uid)
                    if use_cached and attempt == 0:
                        _log(
                            logging.DEBUG,
                            "Stale pod, reading it again",
                            **_fields(key, uid, entry.version, error=err),
                        )
                        continue
                    _log(
                        logging.WARNING,
                        "Failed to update status for pod",
                        **_fields(key, uid, entry.version, error=err),
                    )
                    return False
                except NotFoundError:
                    _log(logging.INFO, "Pod does not exist on the server", **_fields(key, uid, entry.version))
                    self._forget_server_pod(uid, gone_version=entry.version)
                    return self._opts.backoff
                except (ApiError, InvalidObjectError) as err:
                    self._forget_server_pod(uid)
                    _log(
                        logging.WARNING,
                        "Failed to update status for pod",
                        **_fields(key, uid, entry.version, error=err),
                    )
                    return False
                _log(
                    logging.INFO,
                    "Status for pod updated successfully",
                    **_fields(key, uid, entry.version, phase=merged.phase),
                )
                pod = new_pod
                patched = True
            else:
                _log(logging.DEBUG, "Status for pod is up-to-date", **_fields(key, uid, entry.version))
            break
        else:  # pragma: no cover - the loop always breaks or returns
            return False

        synced_at = time.monotonic()
        with self._lock:
            self._api_versions[status_uid] = max(self._api_versions.get(status_uid, 0), entry.version)
            current = self._statuses.get(uid)
            if current is not None and current.version == entry.version:
                current.changed_at = None
                current.urgent = False
            if self._opts.skip_get and current is not None:
                # Kept until the next write: lean, sharing what equals the pod manager's copy
                # and the cached status.
                self._sync_state.setdefault(uid, _PodSyncState()).server_pod = lean_pod(
                    pod, self._pods.get_pod_by_uid(uid), current.status
                )
            state = self._sync_state.get(uid)
            if state is not None:
                state.gone_version = None
        self._note_synced(uid, pod, entry.status)

        deleted = False
        if self._can_be_deleted(pod, entry.status):
            try:
                requests += 1
                client.delete_pod(pod.namespace, pod.name, grace_period_seconds=0, uid=pod.uid)
                deleted = True
            except NotFoundError:
                deleted = True
            except ApiError as err:
                _log(
                    logging.WARNING,
                    "Failed to delete status for pod",
                    **_fields(key, uid, entry.version, error=err),
                )
            if deleted:
                _log(
                    logging.INFO,
                    "Pod fully terminated and removed from etcd",
                    **_fields(key, uid, entry.version),
                )
                self._delete_status(uid)
        if self._opts.on_sync is not None:
            try:
                self._opts.on_sync(
                    SyncRecord(
                        pod_uid=uid,
                        namespace=entry.namespace,
                        name=entry.name,
                        version=entry.version,
                        changed_at=entry.changed_at,
                        synced_at=synced_at,
                        patched=patched,
                        deleted=deleted,
                        requests=requests,
                    )
                )
            except Exception:
                log.exception("on_sync observer failed")
        return True

    def _keep_merged_disruption_time(self, uid: str, entry: _Entry, merged: PodStatus) -> None:
        """The cached DisruptionTarget takes the transition time the merge gave it.

        Upstream's mergePodStatus sets that time on the condition the cache itself
        holds (the status it syncs shares the cache's condition list), so the cached
        status, and every later status built from it, carries the time the server
        got. Only the version that was synced: a newer one is a copy upstream too.
        """
        cached = get_condition(entry.status.conditions, DISRUPTION_TARGET)
        if cached is None:
            return
        sent = get_condition(merged.conditions, DISRUPTION_TARGET)
        if (
            sent is None
            or sent.last_transition_time == cached.last_transition_time
            or sent.status != cached.status
        ):
            return
        with self._lock:
            current = self._statuses.get(uid)
            if current is None or current.version != entry.version:
                return
            conditions = tuple(
                c.replace(last_transition_time=sent.last_transition_time) if c is cached else c
                for c in current.status.conditions or ()
            )
            current.status = current.status.replace(conditions=conditions)

    def _newest_known_pod(self, uid: str, cached_pod: Pod) -> Pod | None:
        """The newest copy of the pod we know of, to write from; None when a GET must tell.

        The node agent feeds the pod manager from a watch: a newer
        resourceVersion there (a deletion, another writer) means our copy from
        the last write is stale, and the pod manager's copy is as good a base as
        a GET. When the two versions cannot be ordered (not integers), read.
        """
        pod = self._known_api_pod(uid)
        if pod is None:
            return cached_pod
        mine, theirs = cached_pod.metadata.resource_version, pod.metadata.resource_version
        if theirs == mine:
            return cached_pod
        try:
            newer = int(theirs or "0") > int(mine or "0")
        except ValueError:
            return None
        return pod if newer else cached_pod

    def _known_api_pod(self, uid: str) -> Pod | None:
        pod = self._pods.get_pod_by_uid(uid)
        if pod is not None and is_static_pod(pod):
            pod = self._pods.get_mirror_pod_by_pod(pod)
        if pod is None or not pod.metadata.resource_version or not pod.metadata.name:
            return None
        return pod

    def _forget_server_pod(self, uid: str, gone_version: int | None = None) -> None:
        with self._lock:
            state = self._sync_state.get(uid)
            if state is None:
                if gone_version is None or not self._opts.backoff or uid not in self._statuses:
                    return
                state = self._sync_state[uid] = _PodSyncState()
            state.server_pod = None
            if gone_version is not None and self._opts.backoff:
                state.gone_version = gone_version

    def _delete_status(self, uid: str) -> None:
        with self._lock:
            self._resize.pop(uid, None)
            self._statuses.pop(uid, None)
            self._sync_state.pop(uid, None)
            self._dirty.pop(uid, None)
            self._consistent.pop(uid, None)


def _update_condition(conditions: tuple[Any, ...] | Any, condition: Any) -> tuple[Any, ...]:
    if get_condition(conditions, condition.type) is None:
        log.debug("PodStatus missing condition type %s", condition.type)
    return replace_or_append_condition(tuple(conditions), condition)


def _ready_status(status: PodStatus) -> str | None:
    c = get_condition(status.conditions, POD_READY)
    return c.status if c is not None else None


def _is_urgent(old: PodStatus, new: PodStatus) -> bool:
    """A transition users wait on: the pod (or its containers) became ready or stopped being ready,
    or the pod finished. A condition appearing as False (a pod starting up) is not one."""
    if (_ready_status(old) == "True") != (_ready_status(new) == "True"):
        return True
    old_cr = get_condition(old.conditions, CONTAINERS_READY)
    new_cr = get_condition(new.conditions, CONTAINERS_READY)
    if (old_cr is not None and old_cr.status == "True") != (new_cr is not None and new_cr.status == "True"):
        return True
    return is_terminal_phase(new.phase) and not is_terminal_phase(old.phase)


def _is_versioned(client: KubeClient) -> TypeGuard[VersionedKubeClient]:
    """Whether ``patch_pod_status`` takes ``resource_version`` (by name, or any keyword)."""
    try:
        params = inspect.signature(client.patch_pod_status).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.name == "resource_version" or p.kind is p.VAR_KEYWORD for p in params)


def new_manager(
    kube_client: KubeClient | None,
    pod_manager: PodManager,
    pod_deletion_safety: PodDeletionSafety,
    **options: Any,
) -> Manager:
    """Build a status manager (SPEC 2.3).

    With no options it behaves towards the API server exactly as the kubelet.
    ``fast_path=True`` enables every option of SPEC section 6; see
    :class:`ManagerOptions` for each one.
    """
    return Manager(kube_client, pod_manager, pod_deletion_safety, ManagerOptions.build(**options))
