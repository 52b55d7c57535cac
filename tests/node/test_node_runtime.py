"""The shared runtime: one timer and shared pools, so many nodes in one process stay cheap."""

from __future__ import annotations

import threading
import time

import pytest
from nodekit import make_agent, pod_manifest, wait_for

from podstatus.clients.embedded import EmbeddedClient
from podstatus.node import FakeProvider, NodeGroup, NodeRuntime, SimulatedProvider, Timings
from podstatus.node.runtime import Timer
from podstatus.types import Pod

ZERO = Timings(
    image_pull=(0.0, 0.0),
    init_run=(0.0, 0.0),
    startup=(0.0, 0.0),
    readiness=(0.0, 0.0),
    stop=(0.0, 0.0),
)


def test_timer_runs_calls_in_due_order_and_skips_cancelled_ones() -> None:
    timer = Timer({"lane": 2})
    ran: list[str] = []
    done = threading.Event()
    try:
        timer.call_later(0.06, ran.append, "c")
        timer.call_later(0.02, ran.append, "a")
        cancelled = timer.call_later(0.03, ran.append, "never")
        timer.call_later(0.04, ran.append, "b")
        timer.call_later(0.08, done.set, lane="lane")
        cancelled.cancel()
        assert done.wait(5)
        assert ran == ["a", "b", "c"]
        with pytest.raises(ValueError, match="no lane"):
            timer.call_later(0, ran.append, "x", lane="other")
    finally:
        timer.close()
    assert not timer.alive()
    late = timer.call_later(0, ran.append, "after close")
    assert late.cancelled


def test_a_failing_timer_call_does_not_stop_the_timer(caplog: pytest.LogCaptureFixture) -> None:
    timer = Timer()
    done = threading.Event()
    try:
        timer.call_later(0, lambda: 1 / 0)
        timer.call_later(0.01, done.set)
        assert done.wait(5)
        assert "timer call failed" in caplog.text
    finally:
        timer.close()


def test_many_nodes_share_threads_instead_of_a_set_each(client: EmbeddedClient) -> None:
    """40 nodes with pods: threads grow by the status managers (one per node) and the shared pools.

    With a set of threads per node (housekeeping, lease, task and provider pools, event
    writer, simulated timers) this was 5-9 threads a node.
    """
    nodes = 40
    before = threading.active_count()
    runtime = NodeRuntime(task_workers=4, provider_workers=4, event_workers=2)
    agents = [
        make_agent(
            client,
            SimulatedProvider(timings=ZERO, seed=i),
            f"vn-{i}",
            watch=False,
            runtime=runtime,
            manager_options={"fast_path": True, "workers": 1},
        )
        for i in range(nodes)
    ]
    group = NodeGroup(client, agents, runtime=runtime, start_workers=8)
    group.start()
    try:
        for i in range(nodes):
            client.create_pod(pod_manifest(f"p{i}", node=f"vn-{i}"))
        wait_for(
            lambda: all(client.get_pod("default", f"p{i}").status.phase == "Running" for i in range(nodes)),
            timeout=30,
            what="every pod Running",
        )
        grown = threading.active_count() - before
        # managers (40) + watch + timers + pools (4 + 4 + 2 + 4 + 8 lanes at most) + the sim timer
        assert grown <= nodes + 30, f"{grown} new threads for {nodes} nodes"
        assert group.healthy()
    finally:
        group.stop()
    assert runtime.closed


def test_heartbeats_of_nodes_started_together_are_spread_over_the_interval(client: EmbeddedClient) -> None:
    runtime = NodeRuntime()
    agents = [
        make_agent(
            client,
            SimulatedProvider(timings=ZERO),
            f"node-{i}",
            watch=False,
            runtime=runtime,
            lease_renew_interval=10.0,
        )
        for i in range(50)
    ]
    group = NodeGroup(client, agents, runtime=runtime)
    started = time.monotonic()
    group.start()
    try:
        due = sorted(a.leases.next_renewal - started for a in agents)
        # The Lease was just written: the first renewal one to one and a half intervals on
        # (it lives four), and not in one burst.
        assert due[0] >= 9.5 and due[-1] <= 15.5
        assert due[-1] - due[0] > 3.0, due
        buckets = {int(d) for d in due}
        assert len(buckets) >= 4, due
    finally:
        group.stop()


def test_a_group_that_cannot_start_stops_the_agents_that_did(client: EmbeddedClient) -> None:
    from podstatus.node import LeaseHeldError

    holder = make_agent(client, SimulatedProvider(timings=ZERO), "vn-2")
    holder.start()
    try:
        runtime = NodeRuntime()
        agents = [
            make_agent(client, SimulatedProvider(timings=ZERO), f"vn-{i}", watch=False, runtime=runtime)
            for i in (1, 2, 3)
        ]
        group = NodeGroup(client, agents, runtime=runtime, start_workers=3)
        with pytest.raises(LeaseHeldError):
            group.start_agents()
        wait_for(lambda: not any(a.healthy() for a in agents), what="the started agents stopped")
    finally:
        holder.stop()


class _ThreadRecorder(FakeProvider):
    """Records which thread runs create_pod."""

    def __init__(self) -> None:
        super().__init__()
        self.threads: list[str] = []

    def create_pod(self, pod: Pod) -> None:
        self.threads.append(threading.current_thread().name)
        super().create_pod(pod)


class _NonBlocking(_ThreadRecorder):
    blocking = False


@pytest.mark.parametrize(("provider_class", "on_pool"), [(_ThreadRecorder, True), (_NonBlocking, False)])
def test_a_provider_that_never_blocks_is_called_without_a_pool_hop(
    client: EmbeddedClient, provider_class: type[_ThreadRecorder], on_pool: bool
) -> None:
    provider = provider_class()
    agent = make_agent(client, provider)
    agent.start()
    try:
        client.create_pod(pod_manifest("p"))
        wait_for(lambda: provider.threads, what="create_pod called")
        # Pod tasks run on the task pool ("-pods"); plain provider calls hop to "-provider".
        assert ("-provider" in provider.threads[0]) is on_pool, provider.threads
        assert "-pods" in provider.threads[0] or on_pool, provider.threads
    finally:
        agent.stop()
