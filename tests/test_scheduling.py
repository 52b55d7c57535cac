"""The sync pool through its public interface alone (podstatus.scheduling): tasks made of two
callables, no manager. The managers on a pool are tested in tests/manager/test_manager_syncpool.py."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from podstatus.scheduling import SyncPool, SyncTask


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
