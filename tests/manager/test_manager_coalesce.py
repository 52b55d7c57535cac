"""The coalesce option: changes that follow each other closely go out in one write, never much later."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from mgrkit import World, make_pod, running_status, wait_for

from podstatus import PodStatus
from podstatus.scheduling import SyncPool


@pytest.fixture(params=["own-threads", "pool"])
def driver(request: pytest.FixtureRequest) -> Iterator[dict[str, Any]]:
    if request.param == "own-threads":
        yield {}
        return
    pool = SyncPool(workers=2, name="test-coalesce")
    yield {"sync_pool": pool}
    pool.close()


def _pending(pod: Any) -> PodStatus:
    return running_status(pod).replace(phase="Pending", container_statuses=None, conditions=None)


def _started(pod: Any) -> PodStatus:
    """Running, its containers started but not yet ready: nothing users wait on has happened."""
    status = running_status(pod)
    return status.replace(
        conditions=tuple(
            c.replace(status="False") if c.type in ("Ready", "ContainersReady") else c
            for c in status.conditions or ()
        ),
        container_statuses=tuple(c.replace(ready=False) for c in status.container_statuses or ()),
    )


def test_a_quick_second_change_goes_out_in_the_same_write(world: World, driver: dict[str, Any]) -> None:
    pod = world.add(make_pod("a"))
    m = world.manager("fast", sync_period=60, coalesce=0.3, **driver)
    m.start()
    t0 = time.monotonic()
    m.set_pod_status(pod, _pending(pod))
    time.sleep(0.02)
    m.set_pod_status(pod, _started(pod))
    assert wait_for(lambda: world.verbs() == ["patch"], timeout=5)
    took = time.monotonic() - t0
    time.sleep(0.35)  # a second write, if any, would have gone out by now
    assert world.verbs() == ["patch"]
    assert world.client.patches()[0]["status"]["phase"] == "Running"
    assert world.server_status(pod).phase == "Running"
    assert took >= 0.25  # it waited for company
    assert m.pending_count() == 0
    m.stop(timeout=2)


def test_a_change_users_wait_on_is_not_held(world: World, driver: dict[str, Any]) -> None:
    """Ready (or finished) goes out at once, taking the change held before it along: one write."""
    pod = world.add(make_pod("a"))
    m = world.manager("fast", sync_period=60, coalesce=2.0, **driver)
    m.start()
    t0 = time.monotonic()
    m.set_pod_status(pod, _pending(pod))  # held: nothing users wait on
    time.sleep(0.05)
    assert world.verbs() == []
    m.set_pod_status(pod, running_status(pod))  # Ready: written now, not 2 s after the first change
    assert wait_for(lambda: world.verbs() == ["patch"], timeout=5)
    assert time.monotonic() - t0 < 1.5
    assert world.server_status(pod).phase == "Running"
    ready = [c for c in world.server_status(pod).conditions or () if c.type == "Ready"]
    assert ready and ready[0].status == "True"
    time.sleep(0.1)
    assert world.verbs() == ["patch"]
    m.stop(timeout=2)


def test_changes_that_never_stop_are_still_written_every_window(world: World, driver: dict[str, Any]) -> None:
    pod = world.add(make_pod("a"))
    m = world.manager("fast", sync_period=60, coalesce=0.1, **driver)
    m.start()
    stop = threading.Event()

    def flapping() -> None:
        tick = 0
        while not stop.is_set():
            tick += 1  # every status differs from every earlier one
            m.set_pod_status(pod, running_status(pod).replace(message=f"tick {tick}"))
            time.sleep(0.01)

    writer = threading.Thread(target=flapping)
    writer.start()
    try:
        # The hold counts from the oldest change not yet written: a write lands while changes go on.
        assert wait_for(lambda: len(world.verbs()) >= 3, timeout=5)
    finally:
        stop.set()
        writer.join()
    cached = m.get_pod_status(pod.uid)
    assert cached is not None
    assert wait_for(lambda: world.server_status(pod).to_dict() == cached.to_dict(), timeout=5)
    m.stop(timeout=2)


def test_sync_batch_does_not_wait(world: World) -> None:
    pod = world.add(make_pod("a"))
    m = world.manager("fast", coalesce=5.0)
    m.set_pod_status(pod, running_status(pod))
    assert m.sync_batch() == 1
    assert world.verbs() == ["patch"]


@pytest.mark.parametrize("value", [-0.1, 10.0])
def test_coalesce_out_of_range_is_refused(world: World, value: float) -> None:
    with pytest.raises(ValueError, match="coalesce"):
        world.manager("fast", coalesce=value, sync_period=10.0)
