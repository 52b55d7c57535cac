"""The background sync loop (SPEC 2.3, 4.4): start, stop, wake-ups, full passes, never dying."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from mgrkit import World, get_cond, make_pod, new_threads, running_status, wait_for

from podstatus import BasicPodManager, new_manager
from podstatus.scheduling import SyncPool


def _on_server(world: World, pod: Any, manager: Any) -> bool:
    server = world.server_status(pod)
    cached = manager.get_pod_status(pod.uid)
    return cached is not None and server.to_dict() == cached.to_dict()


def test_a_setter_wakes_the_loop(world: World, mode: str) -> None:
    pod = world.add(make_pod("a"))
    m = world.manager(mode, sync_period=60)  # no full pass during the test
    m.start()
    m.set_pod_status(pod, running_status(pod))
    assert wait_for(lambda: _on_server(world, pod, m))
    m.set_pod_status(pod, running_status(pod, ready=False))
    assert wait_for(lambda: _on_server(world, pod, m))
    m.stop(timeout=5)


@pytest.mark.parametrize("pooled", [False, True], ids=["own-loop", "sync-pool"])
def test_full_pass_runs_every_sync_period(world: World, mode: str, pooled: bool) -> None:
    pod = world.add(make_pod("a"))
    pool = SyncPool(workers=2, name="test-loop") if pooled else None
    m = world.manager(mode, sync_period=0.05, sync_pool=pool)
    m.set_pod_status(pod, running_status(pod))
    m.sync_batch()
    # Someone flips Ready on the server; no setter is called: only a full pass repairs it.
    other = world.server(pod)
    conditions = tuple(
        c.replace(status="False") if c.type == "Ready" else c for c in other.status.conditions or ()
    )
    world.client.put_pod(other.replace(status=other.status.replace(conditions=conditions)))
    world.refresh(pod)
    m.start()
    assert wait_for(lambda: get_cond(world.server_status(pod), "Ready").status == "True")  # type: ignore[union-attr]
    m.stop(timeout=5)
    if pool is not None:
        pool.close()


class FlakyPodManager(BasicPodManager):
    """get_uid_translations raises the first ``failures`` times."""

    def __init__(self, failures: int = 1) -> None:
        super().__init__()
        self.failures = failures
        self.calls = 0

    def get_uid_translations(self) -> tuple[dict[str, str], dict[str, str]]:
        self.calls += 1
        if self.failures > 0:
            self.failures -= 1
            raise RuntimeError("pod manager hiccup")
        return super().get_uid_translations()


def test_loop_survives_an_exception_in_a_pass(world: World, mode: str) -> None:
    world.pods = FlakyPodManager(failures=1)
    pod = world.add(make_pod("a"))
    m = world.manager(mode, sync_period=0.05)
    m.start()
    m.set_pod_status(pod, running_status(pod))  # wakes the loop: the pass raises
    # No further setter call: a later pass of the same loop must sync it.
    assert wait_for(lambda: _on_server(world, pod, m))
    assert world.pods.calls >= 2
    # And it keeps going.
    m.set_pod_status(pod, running_status(pod, ready=False))
    assert wait_for(lambda: _on_server(world, pod, m))
    m.stop(timeout=5)


def test_loop_survives_an_exception_syncing_one_pod(world: World, mode: str) -> None:
    pod = world.add(make_pod("a"))
    calls = {"n": 0}
    original = world.safety.pod_could_have_running_containers

    def flaky(p: Any) -> bool:
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("runtime hiccup")
        return original(p)

    world.safety.pod_could_have_running_containers = flaky  # type: ignore[method-assign]
    m = world.manager(mode, sync_period=0.05)
    m.start()
    m.set_pod_status(pod, running_status(pod))
    assert wait_for(lambda: _on_server(world, pod, m))
    assert calls["n"] >= 2
    m.stop(timeout=5)


def test_context_manager_starts_and_stops(world: World, mode: str) -> None:
    pod = world.add(make_pod("a"))
    before = threading.enumerate()
    with world.manager(mode, sync_period=60) as m:
        started = new_threads(before)
        assert started, "entering the context starts the loop"
        m.set_pod_status(pod, running_status(pod))
        assert wait_for(lambda: _on_server(world, pod, m))
    assert wait_for(lambda: not any(t.is_alive() for t in started), timeout=2)
    # Stopped: a new status stays local.
    world.clear()
    m.set_pod_status(pod, running_status(pod, ready=False))
    time.sleep(0.05)
    assert world.verbs() == []


def test_start_twice_starts_one_loop(world: World) -> None:
    m = world.manager("kubelet")
    before = threading.enumerate()
    m.start()
    first = new_threads(before)
    m.start()
    assert new_threads(before) == first
    assert len(first) == 1
    m.stop(timeout=5)


def test_start_without_a_client_starts_nothing(world: World, mode: str, caplog: Any) -> None:
    import logging

    pod = world.add(make_pod("a"))
    opts = {"fast_path": True} if mode == "fast" else {}
    m = new_manager(None, world.pods, world.safety, clock=world.clock, **opts)
    before = threading.enumerate()
    with caplog.at_level(logging.INFO, logger="podstatus"):
        m.start()
    assert new_threads(before) == []
    assert any("not starting" in r.getMessage().lower() for r in caplog.records)
    m.set_pod_status(pod, running_status(pod))
    got = m.get_pod_status(pod.uid)
    assert got is not None and got.phase == "Running"
    with m:
        assert new_threads(before) == []
    m.stop(timeout=1)


def test_stop_returns_promptly_while_a_request_hangs(world: World, mode: str) -> None:
    pod = world.add(make_pod("a"), to_pod_manager=False)
    world.pods.add_pod(make_pod("a"))  # no resourceVersion: the fast path reads first too
    entered = threading.Event()
    release = threading.Event()

    def hang(verb: str, namespace: str, name: str) -> None:
        if verb == "get":
            entered.set()
            release.wait(10)

    world.client.before_request(hang)
    m = world.manager(mode, sync_period=60)
    m.start()
    try:
        m.set_pod_status(pod, running_status(pod))
        assert entered.wait(5), "the sync never reached the server"
        t0 = time.monotonic()
        m.stop(timeout=0.2)
        assert time.monotonic() - t0 < 1.0
    finally:
        release.set()
    # The abandoned request finishes; nothing cached was lost.
    assert m.get_pod_status(pod.uid) is not None


def test_restart_after_an_abandoned_request_runs_one_loop(world: World, mode: str) -> None:
    # stop() abandons a hung request; start() again must not leave the old loop running too
    # (two loops would sync the same pod twice at once).
    pod = world.add(make_pod("a"), to_pod_manager=False)
    world.pods.add_pod(make_pod("a"))  # no resourceVersion: the fast path reads first too
    entered = threading.Event()
    release = threading.Event()

    def hang_once(verb: str, namespace: str, name: str) -> None:
        if verb == "get" and not release.is_set():
            entered.set()
            release.wait(10)

    world.client.before_request(hang_once)
    m = world.manager(mode, sync_period=0.05)
    before = threading.enumerate()
    m.start()
    first = new_threads(before)
    m.set_pod_status(pod, running_status(pod))
    assert entered.wait(5)
    m.stop(timeout=0.1)
    m.start()
    second = [t for t in new_threads(before) if t not in first]
    release.set()
    # The abandoned threads see the stop once their request returns, and end.
    assert wait_for(lambda: not any(t.is_alive() for t in first), timeout=2), [
        t.name for t in first if t.is_alive()
    ]
    assert all(t.is_alive() for t in second)
    assert wait_for(lambda: _on_server(world, pod, m))
    m.stop(timeout=5)
