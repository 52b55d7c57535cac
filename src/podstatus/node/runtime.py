"""What the agents of one process share: a timer, the pod task pool, the provider pool, the event writers.

A kubelet is one node per process; a simulator or a virtual-kubelet host runs
hundreds. Threads per node (a housekeeping loop, a lease loop, task and
provider pools, an event writer) made the idle cost of 1,000 nodes thousands
of threads fighting for the GIL, and heartbeats came late. Here the periodic
work of every agent is an entry in one :class:`Timer` heap, run on small
pools ("lanes"): the Lease renewals on a lane of their own, so node status
posts or a slow provider never hold a heartbeat up. Pod tasks, provider calls
and event writes go to pools sized for the process, not for each node.

A :class:`NodeAgent` built without a runtime makes its own (and closes it on
``stop``); a :class:`NodeGroup` or ``podstatus node --nodes N`` passes one
shared runtime to all of its agents.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from ..scheduling import SyncPool
from .calls import DaemonPool, ProviderCaller, SerialTasks

__all__ = ["HEARTBEAT", "HOUSEKEEPING", "NodeRuntime", "Timer", "TimerHandle", "shared_timer"]

log = logging.getLogger(__name__)

HEARTBEAT = "heartbeat"
HOUSEKEEPING = "housekeeping"


class TimerHandle:
    """One scheduled call; :meth:`cancel` before it runs and it never does."""

    __slots__ = ("args", "cancelled", "fn", "lane", "when")

    def __init__(self, when: float, fn: Callable[..., Any], args: tuple[Any, ...], lane: str | None) -> None:
        self.when = when
        self.fn = fn
        self.args = args
        self.lane = lane
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class Timer:
    """One thread keeping a heap of due calls; each runs on its lane's pool, or inline (``lane=None``).

    Inline calls run on the timer thread itself: only for work that never
    blocks (the simulated provider's state changes).
    """

    def __init__(self, lanes: Mapping[str, int] | None = None, *, name: str = "podstatus-timer") -> None:
        self._name = name
        self._heap: list[tuple[float, int, TimerHandle]] = []
        self._seq = itertools.count()
        self._cond = threading.Condition()
        self._closed = False
        self._thread: threading.Thread | None = None
        # Daemon threads: a lane call stuck in a provider (an inline ping) never holds up exit.
        self._lanes = {lane: DaemonPool(n, f"{name}-{lane}") for lane, n in (lanes or {}).items()}
        self.late_max = 0.0  # the largest delay between a call's due time and its start (seconds)

    def call_at(
        self, when: float, fn: Callable[..., Any], *args: Any, lane: str | None = None
    ) -> TimerHandle:
        if lane is not None and lane not in self._lanes:
            raise ValueError(f"no lane {lane!r}; lanes: {', '.join(self._lanes) or 'none'}")
        handle = TimerHandle(when, fn, args, lane)
        with self._cond:
            if self._closed:
                handle.cancelled = True
                return handle
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()
            heapq.heappush(self._heap, (when, next(self._seq), handle))
            if self._heap[0][2] is handle:
                self._cond.notify()
        return handle

    def call_later(
        self, delay: float, fn: Callable[..., Any], *args: Any, lane: str | None = None
    ) -> TimerHandle:
        return self.call_at(time.monotonic() + delay, fn, *args, lane=lane)

    def alive(self) -> bool:
        return not self._closed and (self._thread is None or self._thread.is_alive())

    def pending(self) -> int:
        with self._cond:
            return sum(1 for _, _, h in self._heap if not h.cancelled)

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._heap.clear()
            self._cond.notify_all()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(5)
        for pool in self._lanes.values():
            pool.shutdown(wait=False, cancel_futures=True)

    def _run(self) -> None:
        while True:
            with self._cond:
                while True:
                    if self._closed:
                        return
                    while self._heap and self._heap[0][2].cancelled:
                        heapq.heappop(self._heap)
                    if self._heap:
                        wait = self._heap[0][0] - time.monotonic()
                        if wait <= 0:
                            break
                        self._cond.wait(min(wait, 60.0))
                    else:
                        self._cond.wait(60.0)
                _, _, handle = heapq.heappop(self._heap)
            late = time.monotonic() - handle.when
            if late > self.late_max:
                self.late_max = late
            if handle.lane is None:
                self._call(handle)
            else:
                try:
                    self._lanes[handle.lane].submit(self._call, handle)
                except RuntimeError:
                    return  # shut down meanwhile

    @staticmethod
    def _call(handle: TimerHandle) -> None:
        if handle.cancelled:
            return
        try:
            handle.fn(*handle.args)
        except Exception:
            log.exception("timer call failed fn=%s", getattr(handle.fn, "__qualname__", handle.fn))


_shared_timer: Timer | None = None
_shared_lock = threading.Lock()


def shared_timer() -> Timer:
    """The process's timer for inline work (no lanes): the simulated providers' lifecycle steps."""
    global _shared_timer
    with _shared_lock:
        if _shared_timer is None or not _shared_timer.alive():
            _shared_timer = Timer(name="podstatus-sim-timer")
        return _shared_timer


class NodeRuntime:
    """The pools and the timer that agents of one process share.

    ``task_workers``: pod tasks (create, stop, refresh) of every node, serial per pod.
    ``provider_workers``: plain provider methods run there, each with its timeout
    (a method that hangs keeps a thread: more than ``provider_workers`` hung calls
    at once stall the other nodes' calls until they time out).
    ``heartbeat_workers``: Lease renewals only. ``housekeeping_workers``: node
    status posts, polls, retries. ``event_workers``: Event writes, in order per node.
    ``sync_workers``: the status managers' pod syncs (size it to the client's connection pool).
    """

    def __init__(
        self,
        *,
        provider_timeout: float = 10.0,
        task_workers: int = 32,
        provider_workers: int = 64,
        heartbeat_workers: int = 4,
        housekeeping_workers: int = 8,
        event_workers: int = 8,
        sync_workers: int = 32,
        name: str = "podstatus-node",
    ) -> None:
        self.timer = Timer(
            {HEARTBEAT: heartbeat_workers, HOUSEKEEPING: housekeeping_workers}, name=f"{name}-timer"
        )
        self.tasks = SerialTasks(workers=task_workers, name=f"{name}-pods")
        self.calls = ProviderCaller(
            provider_timeout,
            workers=provider_workers,
            name=f"{name}-provider",
            # Lateness checks run inline on the timer thread: a scan of the calls in progress.
            schedule=lambda when, fn: self.timer.call_at(when, fn),
        )
        self.events = SerialTasks(workers=event_workers, name=f"{name}-events")
        self.sync = SyncPool(sync_workers, name=f"{name}-sync")
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.timer.close()
        self.sync.close()
        self.tasks.close()
        self.events.close()
        self.calls.close()
