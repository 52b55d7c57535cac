"""The public status manager: its construction, lifecycle and reads, joining its parts."""

from __future__ import annotations

import inspect
import itertools
import threading
import time
from typing import Any, TypeGuard

from ..flags import Flag
from ..protocols import KubeClient, PodDeletionSafety, PodManager, PodUpdateNotifier, VersionedKubeClient
from ..scheduling import SyncTask
from ..sharing import ValuePool
from ..statusutil import (
    now_seconds,
)
from ..types import PodStatus
from .accept import StatusAccepting
from .resize import ResizeConditions
from .state import (
    ManagerOptions,
    _Entry,
    _PodSyncState,
    _ResizeConditions,
    log,
)
from .sync import StatusSyncing


class Manager(StatusAccepting, ResizeConditions, StatusSyncing):
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
