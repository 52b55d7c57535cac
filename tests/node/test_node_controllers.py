"""The node agent's three controllers, each on its own: the pod controller with the fake status
manager (what it reported, and the one path a report takes), the node-status controller and the
Lease controller with FakeNodeClient (the requests they made)."""

from __future__ import annotations

import sys
import threading
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from nodekit import events_for, make_agent, pod_manifest, wait_for

from podstatus import validation
from podstatus.clients.embedded import LEASES, EmbeddedClient
from podstatus.clients.fake import FakeNodeClient
from podstatus.clients.http import HttpKubeClient
from podstatus.fakes import FakeStatusManager
from podstatus.node import FakeProvider, NodeAgent, NodeDescription
from podstatus.node.calls import BoundCaller
from podstatus.node.config import NodeConfig
from podstatus.node.events import EventRecorder
from podstatus.node.heartbeat import LEASE_NAMESPACE, LeaseKeeper, NodeStatusReporter
from podstatus.node.leasecontroller import LeaseController
from podstatus.node.network import NodeNetwork
from podstatus.node.nodecontroller import NodeStatusController, UpkeepClient
from podstatus.node.runtime import HEARTBEAT, AgentTicks, NodeRuntime, Timer
from podstatus.server.http import EmbeddedApiServer
from podstatus.types import ContainerState, ContainerStateRunning, ContainerStatus, PodStatus

STARTED = datetime(2026, 1, 1, tzinfo=UTC)


def running(ready: bool = True) -> PodStatus:
    return PodStatus(
        phase="Running",
        pod_ip="10.244.0.9",
        container_statuses=(
            ContainerStatus(
                name="app",
                image="nginx",
                ready=ready,
                restart_count=0,
                container_id="containerd://abc",
                started=True,
                state=ContainerState(running=ContainerStateRunning(started_at=STARTED)),
            ),
        ),
    )


# --- the pod controller, given the fake status manager ---------------------------------------


@pytest.fixture
def http(server: EmbeddedApiServer) -> Iterator[HttpKubeClient]:
    c = HttpKubeClient(server.url, timeout=(2.0, 10.0))
    yield c
    c.close()


@pytest.fixture
def faked(http: HttpKubeClient, agents: list[NodeAgent]) -> tuple[NodeAgent, FakeStatusManager, FakeProvider]:
    """An agent over HTTP on loopback whose status manager is the fake, with a pod "web" created."""
    manager = FakeStatusManager()
    provider = FakeProvider(NodeDescription(addresses=({"type": "InternalIP", "address": "10.1.2.3"},)))
    agent = make_agent(http, provider, manager=manager)
    agent.start()
    agents.append(agent)
    http.create_pod(pod_manifest("web"))
    wait_for(lambda: provider.called("create_pod"), what="the provider to create the pod")
    wait_for(lambda: manager.calls_of("accept_pod_status"), what="the first status (Pending)")
    agent.runtime.tasks.wait_idle(5)
    return agent, manager, provider


def test_the_agent_uses_the_manager_it_is_given(
    faked: tuple[NodeAgent, FakeStatusManager, FakeProvider],
) -> None:
    agent, manager, _ = faked
    assert agent.manager is manager and manager.started
    pod, status = manager.calls_of("accept_pod_status")[0]
    assert pod.metadata.name == "web" and status.phase == "Pending"
    waiting = status.container_statuses[0].state.waiting
    assert waiting is not None and waiting.reason == "ContainerCreating"


def test_a_report_reaches_the_manager_completed(
    faked: tuple[NodeAgent, FakeStatusManager, FakeProvider], client: EmbeddedClient
) -> None:
    agent, manager, provider = faked
    uid = agent.pods.get_pod_by_name("default", "web").uid
    provider.set_status(uid, running())
    pod, status = manager.calls_of("accept_pod_status")[-1]
    assert pod.uid == uid and status.phase == "Running"
    conditions = {c.type: c.status for c in status.conditions}
    assert conditions == {
        "PodScheduled": "True",
        "PodReadyToStartContainers": "True",
        "Initialized": "True",
        "ContainersReady": "True",
        "Ready": "True",
    }
    assert status.host_ip == "10.1.2.3" and [h.ip for h in status.host_ips] == ["10.1.2.3"]
    assert [p.ip for p in status.pod_ips] == ["10.244.0.9"]  # podIPs kept in step with podIP
    assert status.qos_class == "BestEffort"
    # The controller never writes a pod's status itself: the (fake) manager would, and did not.
    assert not client.get_pod("default", "web").status.container_statuses


def test_one_path_for_a_report_reads_the_cached_status_once(
    faked: tuple[NodeAgent, FakeStatusManager, FakeProvider],
) -> None:
    agent, manager, provider = faked
    uid = agent.pods.get_pod_by_name("default", "web").uid
    manager.clear_calls()
    provider.set_status(uid, running(ready=False))
    # One read of the cached status (the base of the completion), one of the resize conditions,
    # the set, whose answer is the status now cached (to share equal parts) and any refusal:
    # the container state transitions are checked by the manager alone.
    assert manager.methods() == [
        "get_pod_status",
        "get_pod_resize_conditions",
        "accept_pod_status",
    ]


@pytest.mark.parametrize(
    ("report", "why"),
    [
        ({"phase": "Running"}, "expected a PodStatus, got dict"),
        (PodStatus(phase="Sleeping"), "phase 'Sleeping' is not one of"),
        (
            PodStatus(
                phase="Running",
                container_statuses=(
                    ContainerStatus(
                        name="ghost", image="x", ready=False, restart_count=0, state=ContainerState()
                    ),
                ),
            ),
            "statuses for containers the pod does not have: ghost",
        ),
    ],
)
def test_an_unusable_report_is_said_never_set(
    faked: tuple[NodeAgent, FakeStatusManager, FakeProvider], client: EmbeddedClient, report: object, why: str
) -> None:
    agent, manager, provider = faked
    uid = agent.pods.get_pod_by_name("default", "web").uid
    manager.clear_calls()
    provider.set_status(uid, report)
    assert "set_pod_status" not in manager.methods()
    assert "accept_pod_status" not in manager.methods()
    assert agent.recorder.flush(10)
    messages = [e["message"] for e in events_for(client, "web") if e["reason"] == "ProviderError"]
    assert any(why in m for m in messages), messages


def test_a_container_running_again_in_a_never_restarting_pod_is_refused(
    http: HttpKubeClient, agents: list[NodeAgent], client: EmbeddedClient
) -> None:
    manager = FakeStatusManager()
    provider = FakeProvider()
    agent = make_agent(http, provider, manager=manager)
    agent.start()
    agents.append(agent)
    http.create_pod(pod_manifest("once", restartPolicy="Never"))
    wait_for(lambda: provider.called("create_pod"))
    agent.runtime.tasks.wait_idle(5)
    uid = agent.pods.get_pod_by_name("default", "once").uid
    done = (
        running()
        .container_statuses[0]
        .replace(
            ready=False,
            state=ContainerState.from_dict({"terminated": {"exitCode": 0, "reason": "Completed"}}),
        )
    )
    provider.set_status(uid, PodStatus(phase="Succeeded", container_statuses=(done,)))
    assert manager.calls_of("accept_pod_status")[-1][1].phase == "Succeeded"
    manager.clear_calls()
    provider.set_status(uid, running())
    assert "set_pod_status" not in manager.methods()
    # Handed to the manager once, which refused it (as the real one does): nothing kept.
    assert len(manager.calls_of("accept_pod_status")) == 1
    assert manager.statuses[uid].phase == "Succeeded"
    assert agent.recorder.flush(10)
    reasons = [e["message"] for e in events_for(client, "once") if e["reason"] == "ProviderError"]
    assert any("impossible transition" in m for m in reasons), reasons


def counted_transition_checks(monkeypatch: pytest.MonkeyPatch) -> list[str | None]:
    """Every evaluation of the container state transition rule from now on, in whichever module
    of the package holds it (the answers, in order)."""
    original = validation.check_container_state_transition
    answers: list[str | None] = []

    def counted(*args: Any, **kwargs: Any) -> str | None:
        answers.append(original(*args, **kwargs))
        return answers[-1]

    for name, module in list(sys.modules.items()):
        if (
            name.startswith("podstatus")
            and getattr(module, "check_container_state_transition", None) is original
        ):
            monkeypatch.setattr(module, "check_container_state_transition", counted)
    return answers


def test_the_transition_rule_is_evaluated_once_per_report(
    http: HttpKubeClient, agents: list[NodeAgent], client: EmbeddedClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The real status manager (the agent's own), the real server on loopback.
    provider = FakeProvider()
    agent = make_agent(http, provider)
    agent.start()
    agents.append(agent)
    http.create_pod(pod_manifest("job", restartPolicy="Never"))
    wait_for(lambda: provider.called("create_pod"))
    agent.runtime.tasks.wait_idle(5)
    uid = agent.pods.get_pod_by_name("default", "job").uid
    checks = counted_transition_checks(monkeypatch)
    provider.set_status(uid, running(ready=False))
    assert checks == [None]
    done = (
        running()
        .container_statuses[0]
        .replace(
            ready=False, state=ContainerState.from_dict({"terminated": {"exitCode": 1, "reason": "Error"}})
        )
    )
    provider.set_status(uid, PodStatus(phase="Failed", container_statuses=(done,)))
    assert checks == [None, None]
    provider.set_status(uid, running())  # a Never container cannot run again
    assert len(checks) == 3 and checks[2] is not None
    cached = agent.manager.get_pod_status(uid)
    assert cached is not None and cached.phase == "Failed"
    # The manager's refusal, said by the pod controller as the provider's mistake.
    assert agent.recorder.flush(10)
    messages = [e["message"] for e in events_for(client, "job") if e["reason"] == "ProviderError"]
    assert messages == [f"provider reported an impossible transition: {checks[2]}"], messages
    wait_for(lambda: client.get_pod("default", "job").status.phase == "Failed")
    assert client.get_pod("default", "job").status.container_statuses[0].state.terminated is not None


# --- the node-status controller, with FakeNodeClient ---------------------------------------------


@pytest.fixture
def runtime() -> Iterator[NodeRuntime]:
    rt = NodeRuntime(name="test-node")
    yield rt
    rt.close()


def node_controller(
    fake: FakeNodeClient, provider: FakeProvider, runtime: NodeRuntime, uids: list[str]
) -> NodeStatusController:
    counter: Counter[str] = Counter()
    upkeep = UpkeepClient(fake, counter, threading.Lock())
    return NodeStatusController(
        NodeConfig(node_name="vn-1", network=NodeNetwork.for_index(0)),
        provider,
        upkeep,
        recorder=EventRecorder(upkeep, component="test", host="vn-1"),
        calls=BoundCaller(runtime.calls, 2.0, node="vn-1"),
        reporter=NodeStatusReporter("vn-1"),
        on_node_uid=uids.append,
    )


def node_calls(fake: FakeNodeClient) -> list[tuple[str, str]]:
    """The requests about the Node (the Events the controller records are written beside them)."""
    return [c for c in fake.calls() if c[1] != "events"]


def test_the_node_is_created_with_its_status_in_one_request(runtime: NodeRuntime) -> None:
    fake, uids = FakeNodeClient(), []
    nodes = node_controller(fake, FakeProvider(), runtime, uids)
    error, was_ready, created = nodes.start()
    assert (error, was_ready, created) == (None, True, True)
    assert fake.calls() == [("create", "nodes")]
    node = fake.get_node("vn-1")
    assert uids == [node["metadata"]["uid"]] and nodes.node_uid == uids[0]
    assert {c["type"]: c["status"] for c in node["status"]["conditions"]}["Ready"] == "True"
    # The network's pod CIDR and InternalIP (the description keeps the default address).
    assert node["spec"]["podCIDR"] == nodes.pod_cidr == NodeNetwork.for_index(0).pod_cidr
    assert {"type": "InternalIP", "address": NodeNetwork.for_index(0).internal_ip} in node["status"][
        "addresses"
    ]


def test_an_existing_node_is_adopted_not_created_again(runtime: NodeRuntime) -> None:
    fake, uids = FakeNodeClient(), []
    node_controller(fake, FakeProvider(), runtime, []).start()
    fake.clear_requests()
    _, _, created = node_controller(fake, FakeProvider(), runtime, uids).start()
    assert not created and fake.calls()[:2] == [("create", "nodes"), ("get", "nodes")]
    assert uids == [fake.get_node("vn-1")["metadata"]["uid"]]


def test_status_is_posted_when_it_changed_and_a_vanished_node_is_registered_again(
    runtime: NodeRuntime,
) -> None:
    fake, uids, provider = FakeNodeClient(), [], FakeProvider()
    nodes = node_controller(fake, provider, runtime, uids)
    error, was_ready, _ = nodes.start()
    nodes.node_status_posted(error, was_ready, force=True)  # created with its status: posted
    fake.clear_requests()
    nodes.post_node_status()  # nothing changed, the report frequency not over
    assert node_calls(fake) == []
    provider.healthy = False
    nodes.post_node_status()
    assert nodes.ready_error == "provider ping: RuntimeError: back end unreachable"
    assert node_calls(fake) == [("patch", "nodes/status")]
    ready = next(c for c in fake.get_node("vn-1")["status"]["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "False"
    fake.delete_node("vn-1")
    fake.clear_requests()
    provider.healthy = True
    nodes.post_node_status()
    assert node_calls(fake) == [("patch", "nodes/status"), ("create", "nodes")]
    assert len(uids) == 2 and uids[1] == fake.get_node("vn-1")["metadata"]["uid"] != uids[0]


# --- the Lease controller, with FakeNodeClient -----------------------------------------------------


class LeaseWatch:
    def __init__(self) -> None:
        self.gaps = 0
        self.recreated = 0
        self.lost = threading.Event()

    def gap(self) -> None:
        self.gaps += 1

    def again(self) -> None:
        self.recreated += 1


@pytest.fixture
def timer() -> Iterator[Timer]:
    t = Timer({HEARTBEAT: 1}, name="test-lease")
    yield t
    t.close()


def lease_controller(
    fake: FakeNodeClient, seen: LeaseWatch, ticks: AgentTicks, identity: str
) -> LeaseController:
    keeper = LeaseKeeper(fake, "vn-1", identity)
    keeper.check(take_over=False)
    return LeaseController(
        keeper, 0.05, ticks, on_gap=seen.gap, on_recreated=seen.again, on_lost=seen.lost.set
    )


def test_the_lease_is_renewed_each_interval_with_one_put(timer: Timer) -> None:
    fake, seen, ticks = FakeNodeClient(), LeaseWatch(), AgentTicks()
    leases = lease_controller(fake, seen, ticks, "me")
    fake.clear_requests()
    leases.start(timer, 0.05)
    wait_for(lambda: leases.lease.renewals >= 4, what="renewals")
    ticks.stopped.set()
    ticks.cancel(2)
    assert leases.next_renewal is None
    calls = fake.calls()
    assert set(calls) == {("update", "leases")} and len(calls) >= 3
    assert not seen.lost.is_set() and seen.recreated == 0
    settled = len(fake.calls())
    timer.call_later(0.2, lambda: None)  # the timer runs on: no renewal is due any more
    wait_for(lambda: timer.pending() == 0, what="the timer to be idle")
    assert len(fake.calls()) == settled


def test_a_gap_between_renewals_is_told(timer: Timer) -> None:
    fake, seen, ticks = FakeNodeClient(), LeaseWatch(), AgentTicks()
    leases = lease_controller(fake, seen, ticks, "me")
    leases.start(timer, 0.05)
    leases.last_renewed -= 60  # as if the process had been stopped for a minute
    wait_for(lambda: seen.gaps == 1, what="the gap to be told")
    ticks.stopped.set()
    ticks.cancel(2)


def test_a_vanished_lease_is_created_again_and_told(timer: Timer) -> None:
    fake, seen, ticks = FakeNodeClient(), LeaseWatch(), AgentTicks()
    leases = lease_controller(fake, seen, ticks, "me")
    leases.lease.renew()
    fake.store.delete(LEASES, LEASE_NAMESPACE, "vn-1")  # what the garbage collector does
    leases.start(timer, 0.05)
    wait_for(lambda: seen.recreated >= 1, what="the new Lease to be told")
    assert ("create", "leases") in fake.calls()
    ticks.stopped.set()
    ticks.cancel(2)


def test_a_lease_taken_over_stops_the_renewals(timer: Timer) -> None:
    fake, seen, ticks = FakeNodeClient(), LeaseWatch(), AgentTicks()
    leases = lease_controller(fake, seen, ticks, "me")
    leases.start(timer, 0.05)
    wait_for(lambda: leases.lease.renewals >= 2)
    other = LeaseKeeper(fake, "vn-1", "them")
    other.check(take_over=True)
    assert other.renew()
    assert seen.lost.wait(5)
    assert leases.lease.lost
    wait_for(lambda: leases.next_renewal is None, what="no renewal scheduled after the loss")
