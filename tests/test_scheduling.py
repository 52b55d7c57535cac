"""Sync scheduling through its public interface alone (podstatus.scheduling), no manager: the shared
pool running tasks made of two callables, the private OwnLoop of a manager without a pool running
plain callables, its WorkQueue and DueTimes. The managers on them are tested in tests/manager/."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from podstatus.flags import Flag
from podstatus.scheduling import DueTimes, OwnLoop, SyncPool, SyncTask, WorkQueue


class Recorder:
    """A task's two callables; every call recorded. Steps block until ``gate`` is set."""

    def __init__(self, *, generation: int = 1, wants_step: bool = True) -> None:
        self.generation = generation
        self.wants_step = wants_step
        self.steps = 0
        self.fired: list[tuple[int, bool]] = []
        self.gate = threading.Event()
        self.gate.set()
        self.stepped = threading.Event()
        self.threads: set[str] = set()
        self.in_step = 0
        self.overlap = False
        self._lock = threading.Lock()
        self.task = SyncTask(self.step, self.timer_fired)

    def step(self) -> None:
        with self._lock:
            self.in_step += 1
            self.overlap = self.overlap or self.in_step > 1
            self.threads.add(threading.current_thread().name)
        self.gate.wait(5)
        with self._lock:
            self.steps += 1
            self.in_step -= 1
        self.stepped.set()

    def timer_fired(self, generation: int, full: bool) -> bool:
        self.fired.append((generation, full))
        return self.wants_step and generation == self.generation


def wait_for(predicate: object, timeout: float = 5.0) -> None:
    assert callable(predicate)
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.005)


@pytest.fixture
def pool() -> Iterator[SyncPool]:
    p = SyncPool(workers=2, name="test-scheduling")
    yield p
    p.close()


def test_wake_runs_one_step(pool: SyncPool) -> None:
    r = Recorder()
    pool.attach(r.task, 1, period=60.0)
    pool.wake(r.task)
    wait_for(lambda: r.steps == 1)
    assert all(name.startswith("test-scheduling-") for name in r.threads)


def test_a_wake_while_a_step_runs_is_not_lost(pool: SyncPool) -> None:
    r = Recorder()
    r.gate.clear()
    pool.attach(r.task, 1, period=60.0)
    pool.wake(r.task)
    wait_for(lambda: r.in_step == 1)
    # Woken while its step runs: another step follows (on another worker if one is free; the
    # manager caps its own pods in flight).
    pool.wake(r.task)
    r.gate.set()
    wait_for(lambda: r.steps == 2)


def test_wakes_while_queued_are_one_step() -> None:
    pool = SyncPool(workers=1, name="test-scheduling-one")
    try:
        busy, queued, last = Recorder(), Recorder(), Recorder()
        busy.gate.clear()
        for r in (busy, queued, last):
            pool.attach(r.task, 1, period=60.0)
        pool.wake(busy.task)
        wait_for(lambda: busy.in_step == 1)
        for _ in range(3):
            pool.wake(queued.task)  # the one worker is busy: queued once
        pool.wake(last.task)
        busy.gate.set()
        # One worker, in order: once ``last`` has stepped, any second step of ``queued`` would have too.
        wait_for(lambda: last.steps == 1)
        assert queued.steps == 1
        assert busy.steps == 1
    finally:
        pool.close()


def test_timers_fire_with_their_generation_and_kind(pool: SyncPool) -> None:
    r = Recorder(generation=2)
    pool.attach(r.task, 2, period=60.0)
    now = time.monotonic()
    pool.call_at(now, r.task, 1, full=False)  # an earlier run's entry: refused by the task
    pool.call_at(now, r.task, 2, full=False)
    wait_for(lambda: (2, False) in r.fired and r.steps == 1)
    assert (1, False) in r.fired
    assert r.steps == 1


def test_a_timer_that_asks_for_no_step_takes_none(pool: SyncPool) -> None:
    r = Recorder(wants_step=False)
    pool.attach(r.task, 1, period=60.0)
    pool.call_at(time.monotonic(), r.task, 1, full=True)
    wait_for(lambda: r.fired == [(1, True)])
    assert r.steps == 0


def test_the_first_full_resync_falls_within_the_period(pool: SyncPool) -> None:
    r = Recorder()
    pool.attach(r.task, 1, period=0.05)
    wait_for(lambda: (1, True) in r.fired)
    wait_for(lambda: r.steps == 1)


def test_many_tasks_share_the_pools_workers(pool: SyncPool) -> None:
    recorders = [Recorder() for _ in range(20)]
    for r in recorders:
        pool.attach(r.task, 1, period=60.0)
        pool.wake(r.task)
    wait_for(lambda: all(r.steps == 1 for r in recorders))
    used = set().union(*(r.threads for r in recorders))
    assert len(used) <= pool.workers
    assert pool.steps == 20


def test_a_failing_step_does_not_stop_the_pool(pool: SyncPool, caplog: pytest.LogCaptureFixture) -> None:
    def boom() -> None:
        raise RuntimeError("boom")

    bad = SyncTask(boom, lambda generation, full: True)
    good = Recorder()
    pool.wake(bad)
    pool.attach(good.task, 1, period=60.0)
    pool.wake(good.task)
    wait_for(lambda: good.steps == 1)
    assert "Status sync step failed" in caplog.text


def test_closed_pool_takes_no_more_work() -> None:
    pool = SyncPool(workers=1, name="test-scheduling-closed")
    r = Recorder()
    pool.attach(r.task, 1, period=60.0)
    pool.close()
    assert not pool.alive()
    pool.wake(r.task)
    pool.call_at(time.monotonic(), r.task, 1, full=False)
    time.sleep(0.05)
    assert r.steps == 0 and r.fired == []


def test_workers_must_be_positive() -> None:
    with pytest.raises(ValueError):
        SyncPool(workers=0)


# --- the private scheduler of a manager without a shared pool (OwnLoop), through its interface alone ---


class LoopWork:
    """What a manager hands its OwnLoop: passes, a next timed wait, and the pods a pass queues.

    Every call is recorded. ``gate`` blocks passes (a request that hangs) until set.
    """

    def __init__(self, *, workers: int = 1, period: float = 60.0) -> None:
        self.lock = threading.RLock()
        self.queue = WorkQueue(self.lock)
        self.passes: list[bool] = []
        self.synced: list[str] = []
        self.pass_threads: set[str] = set()
        self.sync_threads: set[str] = set()
        self.waits: list[float] = []  # what next_wait answers, one per call (then 3600)
        self.again: set[str] = set()  # keys whose sync asks for another pass
        self.fail_passes = 0
        self.dropped: list[list[str]] = []  # what was still queued as each run ended
        self.gate = threading.Event()
        self.gate.set()
        self.stopping = Flag()
        self.loop: OwnLoop[str] = OwnLoop(
            period=period,
            workers=workers,
            queue=self.queue,
            run_pass=self.run_pass,
            next_wait=self.next_wait,
            take=self.take,
            sync=self.sync,
            stopped=lambda: self.dropped.append(self.queue.drop()),
        )

    def start(self) -> bool:
        """Start a run with a stop flag of its own (the manager's way)."""
        self.stopping = Flag()
        return self.loop.start(self.stopping)

    def stop(self, timeout: float = 5.0) -> list[str]:
        self.stopping.set()
        return self.loop.stop(timeout)

    def run_pass(self, full: bool) -> None:
        self.pass_threads.add(threading.current_thread().name)
        self.gate.wait(5)
        self.passes.append(full)
        if self.fail_passes:
            self.fail_passes -= 1
            raise RuntimeError("pass hiccup")

    def next_wait(self) -> float:
        return self.waits.pop(0) if self.waits else 3600.0

    def take(self) -> str:
        return self.queue.pop()

    def sync(self, key: str) -> bool:
        self.sync_threads.add(threading.current_thread().name)
        self.synced.append(key)
        with self.queue.cond:
            self.queue.done(key)
        return key in self.again

    def enqueue(self, *keys: str) -> None:
        with self.queue.cond:
            for key in keys:
                self.queue.push(key, 1)
            self.queue.cond.notify_all()


@pytest.fixture
def work() -> Iterator[LoopWork]:
    w = LoopWork()
    yield w
    w.stop()


def test_own_loop_runs_a_pass_when_woken(work: LoopWork) -> None:
    assert work.start()
    assert work.loop.running and not work.loop.has_workers
    work.loop.wake()
    wait_for(lambda: work.passes == [False])
    assert work.pass_threads == {"podstatus-sync"}


def test_own_loop_keeps_a_wake_up_given_before_start(work: LoopWork) -> None:
    # A manager's statuses set before start are owed: the first pass runs without another wake.
    work.loop.wake()
    work.start()
    wait_for(lambda: work.passes == [False])


def test_own_loop_runs_a_full_pass_every_period() -> None:
    w = LoopWork(period=0.05)
    w.start()
    try:
        # Never woken, no timed wait: the full resyncs come by themselves.
        wait_for(lambda: w.passes.count(True) >= 2)
    finally:
        w.stop()


def test_own_loop_runs_a_pass_when_the_next_wait_is_over(work: LoopWork) -> None:
    # A back-off or a held change is due (next_wait 0): a pass runs with no wake-up and no period.
    work.waits = [0.0]
    work.start()
    wait_for(lambda: work.passes == [False])


def test_own_loop_goes_on_after_a_failing_pass(work: LoopWork, caplog: pytest.LogCaptureFixture) -> None:
    work.fail_passes = 1
    work.start()
    work.loop.wake()
    wait_for(lambda: len(work.passes) == 1)
    work.loop.wake()
    wait_for(lambda: len(work.passes) == 2)
    assert "Status sync pass failed" in caplog.text


def test_own_loop_starts_one_run_at_a_time(work: LoopWork) -> None:
    before = set(threading.enumerate())
    assert work.start()
    assert not work.start()
    started = [t for t in threading.enumerate() if t not in before]
    assert [t.name for t in started] == ["podstatus-sync"]


def test_own_loop_workers_take_what_a_pass_queued() -> None:
    w = LoopWork(workers=3)
    before = set(threading.enumerate())
    w.start()
    try:
        started = sorted(t.name for t in threading.enumerate() if t not in before)
        assert started == ["podstatus-sync", "podstatus-worker-0", "podstatus-worker-1", "podstatus-worker-2"]
        assert w.loop.has_workers
        w.enqueue("a", "b", "c")
        wait_for(lambda: sorted(w.synced) == ["a", "b", "c"])
        assert w.sync_threads <= {"podstatus-worker-0", "podstatus-worker-1", "podstatus-worker-2"}
        assert w.passes == []  # syncing needs no pass
        # A sync that says another pass must look again wakes the loop.
        w.again.add("d")
        w.enqueue("d")
        wait_for(lambda: w.passes == [False])
    finally:
        w.stop()
    assert not w.loop.has_workers and not w.loop.running


def test_own_loop_stop_joins_its_threads() -> None:
    w = LoopWork(workers=2)
    before = set(threading.enumerate())
    w.start()
    started = [t for t in threading.enumerate() if t not in before]
    assert len(started) == 3
    assert w.stop() == []
    assert not any(t.is_alive() for t in started)
    assert w.dropped == [[]]
    # Stopped: what is queued now is taken by nobody.
    w.enqueue("a")
    assert w.synced == []
    assert len(w.queue) == 1


def test_own_loop_stop_gives_up_on_a_hung_pass_and_a_new_run_is_apart() -> None:
    w = LoopWork()
    w.gate.clear()  # the pass hangs, as a request would
    before = set(threading.enumerate())
    w.start()
    w.loop.wake()
    wait_for(lambda: w.pass_threads == {"podstatus-sync"})
    hung = [t for t in threading.enumerate() if t not in before]
    assert w.stop(timeout=0.1) == ["podstatus-sync"]
    assert not w.loop.running
    assert w.start()
    newer = [t for t in threading.enumerate() if t not in before and t not in hung]
    assert [t.name for t in newer] == ["podstatus-sync"]
    w.gate.set()
    # The hung run sees its own stop flag once its pass returns, and ends; the new run goes on.
    wait_for(lambda: not any(t.is_alive() for t in hung))
    assert all(t.is_alive() for t in newer)
    w.loop.wake()
    wait_for(lambda: len(w.passes) >= 2)
    assert w.stop() == []


# --- WorkQueue and DueTimes --------------------------------------------------------------------------------


def test_work_queue_orders_by_priority_then_arrival() -> None:
    q = WorkQueue(threading.RLock())
    with q.cond:
        q.push("late", 1)
        q.push("urgent", 0)
        q.push("later", 1)
        assert len(q) == 3 and q.is_queued("late")
        assert [q.pop(), q.pop()] == ["urgent", "late"]
        assert q.is_in_flight("urgent") and not q.is_queued("urgent")
        assert q.in_flight_count == 2
        assert q.drop() == ["later"]
        assert len(q) == 0 and q.in_flight_count == 2  # dropping leaves what is in flight


def test_work_queue_waits_for_keys_done_and_for_idle() -> None:
    q = WorkQueue(threading.RLock())
    with q.cond:
        q.push("a", 1)
        q.pop()

    def finish() -> None:
        time.sleep(0.05)
        with q.cond:
            q.done("a")

    t = threading.Thread(target=finish)
    t.start()
    q.wait_done(["a"], lambda: False)
    assert not q.is_in_flight("a")
    assert q.wait_idle(time.monotonic() + 5)
    t.join()
    # A stop ends a wait whatever is still queued; a deadline ends a wait for idle.
    with q.cond:
        q.push("b", 1)
        q.pop()
    q.wait_done(["b"], lambda: True)
    assert not q.wait_idle(time.monotonic())


def test_due_times_pop_what_is_due_and_drop_what_is_stale() -> None:
    d = DueTimes()
    d.add(1.0, "stale")
    d.add(2.0, "due")
    d.add(5.0, "later")
    live = {"due": 2.0, "later": 5.0}
    due, wait = d.pop_due(3.0, lambda key, when: live.get(key) == when)
    assert due == ["due"] and wait == 2.0
    assert d.pop_due(6.0, lambda key, when: True) == (["later"], None)
    assert d.pop_due(7.0, lambda key, when: True) == ([], None)
