"""Sync scheduling: where a status manager's passes and pod syncs run, and when.

Every thread, queue, timer and wake-up of sync scheduling lives here; the
manager hands in its work as callables and never sees a thread:

* :class:`OwnLoop`: the private scheduler of a manager built without a shared
  pool (the kubelet's shape: a loop thread, and ``workers`` sync threads when
  there are more than one).
* :class:`SyncPool`: one pool of sync workers for many managers (a process
  hosting many nodes), running each manager's :class:`SyncTask`.
* :class:`WorkQueue` (one manager's pods to sync) and :class:`DueTimes` (its
  back-off waits), used by the manager's step under either scheduler.

A status manager on its own runs a loop thread and ``workers`` sync threads.
A process with 1,000 virtual nodes would then run thousands of threads that
mostly sleep, and a burst (every node's pods deleted at once) wakes all of
them together: hundreds of runnable threads fighting for one GIL, each
holding a connection. Managers built with ``sync_pool=`` run no threads of
their own: their passes and pod syncs are steps taken by this pool's
workers, in turn, so the work in flight is bounded by the pool (sized to the
client's connection pool) whatever the number of nodes.

What a manager promises does not change: one pod is never synced by two
workers at once, every sync sends the newest cached status, at most
``workers`` pods of one manager are in flight, a full resync every
``sync_period`` (each manager at its own phase, so 1,000 resyncs do not fall
in the same instant) and back-off waits are kept.

The pool knows no manager: a manager hands it a :class:`SyncTask`, two
callables of its own (take one step; a timer of yours is due). That is the
whole interface, so this module sits below the manager in the layers and the
node runtime builds pools without knowing what runs on them.
"""

from __future__ import annotations

import collections
import heapq
import itertools
import logging
import threading
import time
import zlib
from collections.abc import Callable, Iterable
from typing import Generic, TypeVar

from .flags import Flag
from .sharing import ValuePool

__all__ = ["DueTimes", "OwnLoop", "SyncPool", "SyncTask", "WorkQueue"]

T = TypeVar("T")

log = logging.getLogger(__name__)

_FULL = 0
_PASS = 1


class SyncTask:
    """What a status manager gives the pool: its work, as two callables. Compared by identity.

    ``step()`` runs on a pool worker: the pass that is wanted, then the sync of
    one queued pod. Wakes of a task that is waiting for a worker count once; a task
    woken while a step of it runs may step again on another worker at the same
    time (the manager caps its own pods in flight, and wakes itself for more).
    ``timer_fired(generation, full)`` runs under the pool's
    lock when a timer entry of the task is due; True asks for a step. An entry
    whose ``generation`` is no longer the task's is void (stopped meanwhile).
    """

    __slots__ = ("step", "timer_fired")

    def __init__(self, step: Callable[[], None], timer_fired: Callable[[int, bool], bool]) -> None:
        self.step = step
        self.timer_fired = timer_fired


class SyncPool:
    """Worker threads shared by the SyncTasks of the managers attached (``new_manager(..., sync_pool=pool)``)."""

    def __init__(self, workers: int = 32, *, name: str = "podstatus-sync") -> None:
        if workers < 1:
            raise ValueError("workers must be at least 1")
        self.workers = workers
        self._name = name
        lock = threading.Lock()
        self._cond = threading.Condition(lock)  # workers wait here for managers with work
        # The timer thread waits here: only it sleeps until the next due entry, so a timer
        # firing wakes one thread, not every idle worker.
        self._timer_cond = threading.Condition(lock)
        self._ready: collections.deque[SyncTask] = collections.deque()
        self._in_ready: set[int] = set()
        # (when, seq, manager, generation, kind): full resyncs and back-off wake-ups.
        self._timers: list[tuple[float, int, SyncTask, int, int]] = []
        self._seq = itertools.count()
        self._threads: list[threading.Thread] = []
        self._closed = False
        self.steps = 0  # steps taken (a pass, a pod sync, or both): for tests and metrics
        # The value pool of every manager attached (equal parts of statuses held once per process).
        self.values = ValuePool(limit=65_536)

    # -- what managers call ------------------------------------------------------------------

    def attach(self, task: SyncTask, generation: int, period: float) -> None:
        """Start serving ``task``: its first full resync at its own phase within ``period``."""
        phase = (zlib.crc32(str(id(task)).encode()) % 1000) / 1000.0
        self._start_threads()
        self.call_at(time.monotonic() + period * (0.5 + 0.5 * phase), task, generation, full=True)

    def wake(self, task: SyncTask) -> None:
        """``task`` has work (a pass wanted, or pods queued): a worker will take a step of it."""
        key = id(task)
        with self._cond:
            if key in self._in_ready or self._closed:
                return
            self._in_ready.add(key)
            self._ready.append(task)
            self._cond.notify()

    def call_at(self, when: float, task: SyncTask, generation: int, *, full: bool) -> None:
        """Fire ``task.timer_fired(generation, full)`` at ``when`` (``time.monotonic()``)."""
        with self._cond:
            if self._closed:
                return
            heapq.heappush(self._timers, (when, next(self._seq), task, generation, _FULL if full else _PASS))
            if self._timers[0][2] is task:
                self._timer_cond.notify()

    # -- lifecycle -----------------------------------------------------------------------------

    def alive(self) -> bool:
        return not self._closed

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._ready.clear()
            self._in_ready.clear()
            self._timers.clear()
            self._cond.notify_all()
            self._timer_cond.notify_all()
            threads, self._threads = self._threads, []
        deadline = time.monotonic() + 5.0
        for t in threads:
            if t is not threading.current_thread():
                t.join(max(0.0, deadline - time.monotonic()))

    def _start_threads(self) -> None:
        with self._cond:
            if self._threads or self._closed:
                return
            self._threads = [
                threading.Thread(target=self._run, name=f"{self._name}-{i}", daemon=True)
                for i in range(self.workers)
            ]
            self._threads.append(
                threading.Thread(target=self._run_timers, name=f"{self._name}-timer", daemon=True)
            )
            threads = list(self._threads)
        for t in threads:
            t.start()

    # -- the workers ------------------------------------------------------------------------------

    def _next(self) -> SyncTask | None:
        """The next task to take a step of. None when the pool is closed."""
        with self._cond:
            while True:
                if self._closed:
                    return None
                if self._ready:
                    task = self._ready.popleft()
                    self._in_ready.discard(id(task))
                    if self._ready:
                        self._cond.notify()  # more work: another waiting worker may take it
                    return task
                self._cond.wait()

    def _run_timers(self) -> None:
        with self._cond:
            while not self._closed:
                now = time.monotonic()
                timers = self._timers
                fired = 0
                while timers and timers[0][0] <= now:
                    _, _, task, generation, kind = heapq.heappop(timers)
                    if task.timer_fired(generation, kind == _FULL):
                        key = id(task)
                        if key not in self._in_ready:
                            self._in_ready.add(key)
                            self._ready.append(task)
                            fired += 1
                if fired:
                    self._cond.notify(fired)
                self._timer_cond.wait(min(60.0, timers[0][0] - now) if timers else 60.0)

    def _run(self) -> None:
        while True:
            task = self._next()
            if task is None:
                return
            self.steps += 1
            try:
                task.step()
            except Exception:
                log.exception("Status sync step failed; the pool goes on")


class WorkQueue:
    """One manager's pods to sync: each queued or in flight once, lower priority first, then in order.

    ``cond`` wraps the manager's own lock, so the manager's state and its queue
    change together; every method but :meth:`wait_done` and :meth:`wait_idle`
    expects the caller to hold it.
    """

    __slots__ = ("_heap", "_in_flight", "_queued", "_seq", "cond")

    def __init__(self, lock: threading.RLock) -> None:
        self.cond = threading.Condition(lock)
        self._heap: list[tuple[int, int, str]] = []  # (priority, seq, key)
        self._queued: set[str] = set()
        self._in_flight: set[str] = set()
        self._seq = itertools.count()

    def __len__(self) -> int:
        return len(self._heap)

    def is_queued(self, key: str) -> bool:
        return key in self._queued

    def is_in_flight(self, key: str) -> bool:
        return key in self._in_flight

    @property
    def in_flight_count(self) -> int:
        return len(self._in_flight)

    def push(self, key: str, priority: int) -> None:
        heapq.heappush(self._heap, (priority, next(self._seq), key))
        self._queued.add(key)

    def pop(self) -> str:
        """The next key, now in flight until :meth:`done`."""
        _, _, key = heapq.heappop(self._heap)
        self._queued.discard(key)
        self._in_flight.add(key)
        return key

    def done(self, key: str) -> None:
        """``key``'s sync is over: waiters on it (:meth:`wait_done`, :meth:`wait_idle`) look again."""
        self._in_flight.discard(key)
        self.cond.notify_all()

    def drop(self) -> list[str]:
        """Empty the queue (not what is in flight); the keys that were queued."""
        keys = list(self._queued)
        self._heap.clear()
        self._queued.clear()
        return keys

    def notify_all(self) -> None:
        with self.cond:
            self.cond.notify_all()

    def wait_done(self, keys: Iterable[str], stopped: Callable[[], bool]) -> None:
        """Wait until none of ``keys`` is queued or in flight, or until ``stopped()``."""
        keys = list(keys)
        with self.cond:
            while not stopped() and any(k in self._queued or k in self._in_flight for k in keys):
                self.cond.wait(0.05)

    def wait_idle(self, deadline: float) -> bool:
        """Wait until nothing is in flight or ``deadline`` (``time.monotonic()``); True when idle."""
        with self.cond:
            while self._in_flight and time.monotonic() < deadline:
                self.cond.wait(max(0.001, min(0.05, deadline - time.monotonic())))
            return not self._in_flight


class DueTimes:
    """Keys due at a time (back-off waits): a heap cleaned lazily, as entries go stale."""

    __slots__ = ("_heap",)

    def __init__(self) -> None:
        self._heap: list[tuple[float, str]] = []

    def add(self, when: float, key: str) -> None:
        heapq.heappush(self._heap, (when, key))

    def pop_due(self, now: float, live: Callable[[str, float], bool]) -> tuple[list[str], float | None]:
        """The keys due by ``now``, and seconds until the next one (None: none waits).

        An entry for which ``live(key, when)`` is False is stale (the key synced,
        was dropped, or failed again later) and is dropped.
        """
        heap = self._heap
        due: list[str] = []
        while heap:
            when, key = heap[0]
            if not live(key, when):
                heapq.heappop(heap)
                continue
            if when <= now:
                heapq.heappop(heap)
                due.append(key)
                continue
            return due, when - now
        return due, None


class OwnLoop(Generic[T]):
    """The private scheduler of a manager built without a shared pool: the kubelet's shape.

    One loop thread runs ``run_pass(full)`` when woken (:meth:`wake`, channel-like:
    one pending wake-up is enough, and a wake-up while stopped is kept for the
    next start), when the manager's ``next_wait()`` is over (a back-off, a held
    change), and a full pass every ``period``. With ``workers`` > 1, that many
    worker threads take what the passes put on ``queue``: ``take()`` (under the
    queue's lock) picks the next pod, ``sync(item)`` syncs it and says whether a
    pass must look again. With one worker the pass syncs pods itself, in the loop
    thread. ``stopped()`` runs under the queue's lock as a run ends, in the same
    hold that marks it ended (what is still queued was never synced). Each run has its own stop flag: a thread of an earlier run stuck in a
    request ends when the request returns, and never joins a later run.
    """

    __slots__ = (
        "_next_wait",
        "_period",
        "_queue",
        "_run_pass",
        "_stopped",
        "_sync",
        "_take",
        "_thread",
        "_wake",
        "_workers",
        "workers",
    )

    def __init__(
        self,
        *,
        period: float,
        workers: int,
        queue: WorkQueue,
        run_pass: Callable[[bool], None],
        next_wait: Callable[[], float],
        take: Callable[[], T],
        sync: Callable[[T], bool],
        stopped: Callable[[], None],
    ) -> None:
        self._period = period
        self.workers = workers
        self._queue = queue
        self._run_pass = run_pass
        self._next_wait = next_wait
        self._take = take
        self._sync = sync
        self._stopped = stopped
        self._wake = Flag()
        self._thread: threading.Thread | None = None
        self._workers: list[threading.Thread] = []

    @property
    def running(self) -> bool:
        return self._thread is not None

    @property
    def has_workers(self) -> bool:
        """Worker threads take queued pods (the passes queue them rather than sync them)."""
        return bool(self._workers)

    def wake(self) -> None:
        """A pass is wanted. Never blocks."""
        if not self._wake.is_set():
            self._wake.set()

    def start(self, stopping: Flag) -> bool:
        """Start a run that ends when ``stopping`` is set; False when one is running already."""
        with self._queue.cond:
            if self._thread is not None:
                return False
            self._thread = threading.Thread(
                target=self._loop, args=(stopping,), name="podstatus-sync", daemon=True
            )
            if self.workers > 1:
                self._workers = [
                    threading.Thread(
                        target=self._work, args=(stopping,), name=f"podstatus-worker-{i}", daemon=True
                    )
                    for i in range(self.workers)
                ]
            threads = [*self._workers, self._thread]
        for t in threads:
            t.start()
        return True

    def stop(self, timeout: float | None = None) -> list[str]:
        """End the run (its stop flag is set by the caller) and join its threads, at most ``timeout``
        seconds (default 5); the names of the threads still busy in a request."""
        self._wake.set()
        self._queue.notify_all()
        with self._queue.cond:
            threads = [t for t in (self._thread, *self._workers) if t is not None]
        deadline = time.monotonic() + (5.0 if timeout is None else timeout)
        me = threading.current_thread()
        for t in threads:
            if t is not me:
                t.join(max(0.0, deadline - time.monotonic()))
        with self._queue.cond:
            self._thread = None
            self._workers = []
            self._stopped()
        return [t.name for t in threads if t.is_alive() and t is not me]

    def _loop(self, stopping: Flag) -> None:
        period = self._period
        next_full = time.monotonic() + period
        while not stopping.is_set():
            timeout = min(max(0.0, next_full - time.monotonic()), self._next_wait())
            self._wake.wait(timeout)
            if stopping.is_set():
                return
            self._wake.clear()
            full = time.monotonic() >= next_full
            try:
                if full:
                    next_full = time.monotonic() + period
                self._run_pass(full)
            except Exception:
                log.exception("Status sync pass failed; the loop goes on")

    def _work(self, stopping: Flag) -> None:
        queue = self._queue
        while True:
            with queue.cond:
                while not queue and not stopping.is_set():
                    queue.cond.wait()
                if stopping.is_set():
                    return
                item = self._take()
            if self._sync(item):
                self.wake()
