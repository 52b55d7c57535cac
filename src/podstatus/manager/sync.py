"""The sync loop (SPEC 4.4) and syncing one pod (SPEC 4.5): what is owed, and writing it.

Where the work runs is :mod:`podstatus.scheduling`'s (a shared pool) or the
manager's own threads (a loop and ``workers`` workers); what a pass chooses and
how one pod is merged, patched and deleted is here.
"""

from __future__ import annotations

import heapq
import logging
import threading
import time
from dataclasses import replace

from .. import patch as patchlib
from ..conditions import (
    DISRUPTION_TARGET,
    is_terminal_phase,
)
from ..errors import ApiError, ConflictError, InvalidObjectError, NotFoundError
from ..podmanager import is_mirror_pod, is_static_pod, lean_pod
from ..statusutil import (
    get_condition,
    is_pod_status_by_kubelet_equal,
    merge_pod_status,
    normalize_status,
)
from ..types import Pod, PodStatus
from .state import (
    ManagerState,
    SyncRecord,
    _Entry,
    _fields,
    _log,
    _PodSyncState,
    log,
)


class StatusSyncing(ManagerState):
    """Passes over the owed statuses, the worker queue, and one pod's sync."""

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
