"""Node status times and the Lease, with a pinned clock."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from podstatus.clients.embedded import EmbeddedClient
from podstatus.node.heartbeat import (
    AGENT_ANNOTATION,
    LEASE_NAMESPACE,
    LeaseKeeper,
    NodeStatusReporter,
)
from podstatus.node.provider import NodeDescription
from podstatus.server.http import EmbeddedApiServer

T0 = datetime(2026, 5, 1, 12, 0, 0, tzinfo=UTC)


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


def ready(status: dict) -> dict:  # type: ignore[type-arg]
    return next(c for c in status["conditions"] if c["type"] == "Ready")


def test_heartbeat_moves_on_every_post_transition_only_on_change() -> None:
    clock = Clock()
    rep = NodeStatusReporter("vn-1", clock=clock)
    desc = NodeDescription()
    first = rep.build(desc, None)
    rep.posted(desc, None)
    assert ready(first)["lastHeartbeatTime"] == ready(first)["lastTransitionTime"] == "2026-05-01T12:00:00Z"
    clock.advance(300)
    second = rep.build(desc, None)
    assert ready(second)["lastHeartbeatTime"] == "2026-05-01T12:05:00Z"
    assert ready(second)["lastTransitionTime"] == "2026-05-01T12:00:00Z"
    clock.advance(10)
    third = rep.build(desc, "unreachable")
    assert ready(third)["status"] == "False"
    assert ready(third)["lastTransitionTime"] == "2026-05-01T12:05:10Z"
    # MemoryPressure did not change: its transition time stays.
    memory = next(c for c in third["conditions"] if c["type"] == "MemoryPressure")
    assert memory["lastTransitionTime"] == "2026-05-01T12:00:00Z"
    assert memory["lastHeartbeatTime"] == "2026-05-01T12:05:10Z"


def test_due_on_change_and_after_the_report_frequency_only() -> None:
    clock = Clock()
    rep = NodeStatusReporter("vn-1", clock=clock, report_frequency=300)
    desc = NodeDescription()
    assert rep.due(desc, None)
    rep.posted(desc, None)
    clock.advance(299)
    assert not rep.due(desc, None)
    assert rep.due(desc, "down")  # Ready would change
    assert rep.due(NodeDescription(capacity={"pods": "5"}), None)  # capacity changed
    clock.advance(1)
    assert rep.due(desc, None)


def test_adopting_a_node_keeps_its_transition_times() -> None:
    clock = Clock()
    rep = NodeStatusReporter("vn-1", clock=clock)
    rep.adopt(
        {
            "status": {
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "True",
                        "reason": "KubeletReady",
                        "lastTransitionTime": "2026-04-01T00:00:00Z",
                    }
                ]
            }
        }
    )
    assert ready(rep.build(NodeDescription(), None))["lastTransitionTime"] == "2026-04-01T00:00:00Z"


def test_lease_renew_time_and_take_over() -> None:
    with EmbeddedApiServer() as server:
        client = EmbeddedClient(server)
        clock = Clock()
        mine = LeaseKeeper(client, "vn-1", "me", clock=clock)
        assert mine.renew()
        lease = client.get_lease(LEASE_NAMESPACE, "vn-1")
        assert lease["spec"]["renewTime"] == "2026-05-01T12:00:00.000000Z"
        assert lease["metadata"]["annotations"][AGENT_ANNOTATION] == "me"
        clock.advance(10)
        assert mine.renew()
        assert client.get_lease(LEASE_NAMESPACE, "vn-1")["spec"]["renewTime"] == "2026-05-01T12:00:10.000000Z"
        other = LeaseKeeper(client, "vn-1", "other", clock=clock)
        assert other.other_holder() is not None
        clock.advance(41)  # expired: free for anyone
        assert other.other_holder() is None
        clock.advance(-41)
        other.check(take_over=True)
        assert other.renew()
        assert not mine.renew() and mine.lost
