"""Sync scheduling: one pool of sync workers for many status managers (a process hosting many nodes).

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
from collections.abc import Callable

from .sharing import ValuePool

__all__ = ["SyncPool", "SyncTask"]

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
