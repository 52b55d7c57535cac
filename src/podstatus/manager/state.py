"""The manager's records and options, and the state its parts share."""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple

from ..flags import Flag
from ..protocols import KubeClient, PodDeletionSafety, PodManager, PodUpdateNotifier, VersionedKubeClient
from ..scheduling import SyncPool, SyncTask
from ..sharing import ValuePool
from ..statusutil import (
    normalize_time,
    now_seconds,
)
from ..types import Pod, PodCondition, PodStatus

log = logging.getLogger("podstatus.manager")


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


class ManagerState:
    """What every part of the manager shares; :class:`~podstatus.manager.core.Manager` sets it up.

    The manager is one object with one lock, written as parts by concept
    (accepting a status, resize conditions, the sync loop): each part is a
    class over this state, and ``Manager`` joins them.
    """

    _client: KubeClient | None
    # skip_get writes with a resourceVersion precondition: only a versioned client can.
    _versioned: VersionedKubeClient | None
    _pods: PodManager
    _safety: PodDeletionSafety
    _opts: ManagerOptions
    _lock: threading.RLock
    _statuses: dict[str, _Entry]
    _pool: ValuePool
    _now_second: int
    _now_value: datetime
    _api_versions: dict[str, int]
    _sync_state: dict[str, _PodSyncState]
    _dirty: dict[str, None]
    _consistent: dict[str, tuple[PodStatus, PodStatus | None, str, str]]
    _backoff_heap: list[tuple[float, str]]
    _wake: Flag
    _stopping: Flag
    _thread: threading.Thread | None
    _workers: list[threading.Thread]
    _queue: list[tuple[int, int, str]]
    _queued: set[str]
    _in_flight: set[str]
    _queue_cond: threading.Condition
    _seq: itertools.count[int]
    _sync_pool: SyncPool | None
    _task: SyncTask
    _attached: bool
    _pool_generation: int
    _pass_wanted: bool
    _full_due: bool
    _pool_wake_at: float
    _hold_due: float
    _resize: dict[str, _ResizeConditions]
    _notifiers: list[PodUpdateNotifier]
    _static_uids: frozenset[str]

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
