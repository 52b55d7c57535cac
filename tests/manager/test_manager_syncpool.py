"""Managers on a shared SyncPool: no threads of their own, the same promises as a manager's own loop."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from mgrkit import World, make_pod, new_threads, running_status, wait_for

from podstatus import PodStatus
from podstatus.clients.fake import FakeKubeClient
from podstatus.scheduling import SyncPool


@pytest.fixture
def pool() -> Iterator[SyncPool]:
    p = SyncPool(workers=4, name="test-sync")
    yield p
    p.close()


def _on_server(world: World, pod: Any, manager: Any) -> bool:
    server = world.server_status(pod)
    cached = manager.get_pod_status(pod.uid)
    return cached is not None and server.to_dict() == cached.to_dict()


def test_many_managers_share_the_pools_threads(world: World, pool: SyncPool) -> None:
    before = threading.enumerate()
    pods = [world.add(make_pod(f"p{i}")) for i in range(40)]
    managers = [world.manager("fast", sync_pool=pool, sync_period=60) for _ in range(20)]
    for m in managers:
        m.start()
    started = new_threads(before)
    # 20 managers, 5 threads: the pool's 4 workers and its timer, none of the managers' own.
    assert len(started) == pool.workers + 1
    for i, pod in enumerate(pods):
        managers[i % 20].set_pod_status(pod, running_status(pod))
    assert wait_for(lambda: all(_on_server(world, p, managers[i % 20]) for i, p in enumerate(pods)))
    assert sum(m.pending_count() for m in managers) == 0
    for m in managers:
        m.stop(timeout=2)


def test_statuses_set_before_start_are_synced_at_start(world: World, pool: SyncPool) -> None:
    pod = world.add(make_pod("a"))
    m = world.manager("fast", sync_pool=pool, sync_period=60)
    m.set_pod_status(pod, running_status(pod))
    assert world.verbs() == []
    m.start()
    assert wait_for(lambda: _on_server(world, pod, m))
    m.stop(timeout=2)


def test_one_pod_is_never_synced_twice_at_once_and_the_newest_version_wins(
    world: World, pool: SyncPool
) -> None:
    pods = [world.add(make_pod(f"p{i}")) for i in range(6)]
    active: Counter[str] = Counter()
    overlap: list[str] = []
    lock = threading.Lock()

    def slow(verb: str, namespace: str, name: str) -> None:
        if verb != "patch":
            return
        with lock:
            active[name] += 1
            if active[name] > 1:
                overlap.append(name)
        time.sleep(0.002)
        with lock:
            active[name] -= 1

    world.client.before_request(slow)
    m = world.manager("fast", sync_pool=pool, sync_period=3600)
    m.start()
    last: dict[str, PodStatus] = {}

    def writer(k: int) -> None:
        for j in range(30):
            pod = pods[(k + j) % len(pods)]
            status = running_status(pod, ready=j % 2 == 0)
            m.set_pod_status(pod, status)

    threads = [threading.Thread(target=writer, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for pod in pods:
        got = m.get_pod_status(pod.uid)
        assert got is not None
        last[pod.uid] = got
    assert wait_for(lambda: m.pending_count() == 0, timeout=10)
    assert overlap == []
    for pod in pods:
        assert world.server_status(pod).to_dict() == last[pod.uid].to_dict()
    m.stop(timeout=2)


def test_workers_option_caps_one_managers_pods_in_flight(world: World, pool: SyncPool) -> None:
    pods = [world.add(make_pod(f"p{i}")) for i in range(8)]
    in_flight = {"now": 0, "max": 0}
    lock = threading.Lock()

    def slow(verb: str, namespace: str, name: str) -> None:
        if verb != "patch":
            return
        with lock:
            in_flight["now"] += 1
            in_flight["max"] = max(in_flight["max"], in_flight["now"])
        time.sleep(0.02)
        with lock:
            in_flight["now"] -= 1

    world.client.before_request(slow)
    m = world.manager("fast", sync_pool=pool, sync_period=3600, workers=2)
    m.start()
    for pod in pods:
        m.set_pod_status(pod, running_status(pod))
    assert wait_for(lambda: m.pending_count() == 0, timeout=10)
    assert in_flight["max"] == 2  # the pool has 4 workers; this manager may use 2
    m.stop(timeout=2)


def test_a_failing_pod_is_retried_after_its_back_off(world: World, pool: SyncPool) -> None:
    pod = world.add(make_pod("a"))
    failures = {"n": 2}

    def flaky(verb: str, namespace: str, name: str) -> None:
        if verb == "patch" and failures["n"] > 0:
            failures["n"] -= 1
            raise OSError("connection reset")

    world.client.before_request(flaky)
    m = world.manager("fast", sync_pool=pool, sync_period=3600, backoff_base=0.02)
    m.start()
    m.set_pod_status(pod, running_status(pod))
    # No setter call and no full pass: only the back-off wake-up can bring the retry.
    assert wait_for(lambda: _on_server(world, pod, m), timeout=5)
    assert failures["n"] == 0
    m.stop(timeout=2)


def test_stop_and_start_again_on_the_pool(world: World, pool: SyncPool) -> None:
    pod = world.add(make_pod("a"))
    m = world.manager("fast", sync_pool=pool, sync_period=60)
    m.start()
    m.set_pod_status(pod, running_status(pod))
    assert wait_for(lambda: _on_server(world, pod, m))
    m.stop(timeout=2)
    world.clear()
    m.set_pod_status(pod, running_status(pod, ready=False))
    time.sleep(0.05)
    assert world.verbs() == []  # stopped: the change stays local, and owed
    assert m.pending_count() == 1
    m.start()
    assert wait_for(lambda: _on_server(world, pod, m))
    m.stop(timeout=2)


def test_a_stuck_request_of_one_manager_does_not_hold_the_others(world: World) -> None:
    pool = SyncPool(workers=2, name="test-sync-stuck")
    try:
        stuck_pod = world.add(make_pod("stuck"))
        other_client = FakeKubeClient(clock=world.clock)
        release = threading.Event()

        def hang(verb: str, namespace: str, name: str) -> None:
            if verb == "patch" and name == "stuck":
                release.wait(10)

        world.client.before_request(hang)
        stuck = world.manager("fast", sync_pool=pool, sync_period=3600)
        stuck.start()
        stuck.set_pod_status(stuck_pod, running_status(stuck_pod))
        time.sleep(0.05)
        other_pod = other_client.add_pod(make_pod("b"))
        world.pods.add_pod(other_pod)
        from podstatus import new_manager

        other = new_manager(other_client, world.pods, world.safety, fast_path=True, sync_pool=pool)
        other.start()
        other.set_pod_status(other_pod, running_status(other_pod))
        ok = wait_for(lambda: other_client.pod("default", "b").status.phase == "Running", timeout=5)  # type: ignore[union-attr]
        release.set()
        assert ok
        assert wait_for(lambda: _on_server(world, stuck_pod, stuck))
        other.stop(timeout=2)
        stuck.stop(timeout=2)
    finally:
        pool.close()


def test_managers_on_one_pool_hold_equal_status_parts_once(world: World, pool: SyncPool) -> None:
    """Two nodes' pods whose Ready conditions are equal (same second) share one condition object."""
    first, second = world.add(make_pod("a")), world.add(make_pod("b"))
    one = world.manager("fast", sync_pool=pool, sync_period=60)
    two = world.manager("fast", sync_pool=pool, sync_period=60)
    own = world.manager("fast", sync_period=60)  # not on the pool: a value pool of its own
    status = running_status(first)
    one.set_pod_status(first, status)
    two.set_pod_status(second, running_status(second))
    own.set_pod_status(second, running_status(second))
    a, b, c = (m.get_pod_status(p.uid) for m, p in ((one, first), (two, second), (own, second)))
    assert a is not None and b is not None and c is not None
    assert a.conditions is not None and b.conditions is not None and c.conditions is not None
    ready = [next(x for x in s.conditions or () if x.type == "Ready") for s in (a, b, c)]
    assert ready[0] == ready[1] == ready[2]
    assert ready[0] is ready[1]  # one pool between them
    assert ready[2] is not ready[0]
