"""Node status times and the Lease, with a pinned clock."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from podstatus.clients.embedded import EmbeddedClient
from podstatus.clients.fake import FakeNodeClient
from podstatus.node.heartbeat import (
    AGENT_ANNOTATION,
    LEASE_NAMESPACE,
    LeaseHeldError,
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


# --- check() then the first renew(): what check() read is the base (FakeNodeClient records) ----


def _lease(agent: str, renewed: datetime) -> dict[str, Any]:
    return {
        "metadata": {"name": "vn-1", "namespace": LEASE_NAMESPACE, "annotations": {AGENT_ANNOTATION: agent}},
        "spec": {
            "holderIdentity": "vn-1",
            "leaseDurationSeconds": 40,
            "renewTime": renewed.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        },
    }


def _lease_calls(fake: FakeNodeClient) -> list[str]:
    return [verb for verb, resource in fake.calls() if resource == "leases"]


def _holder(fake: FakeNodeClient) -> str:
    lease = EmbeddedClient(fake.store).get_lease(LEASE_NAMESPACE, "vn-1")
    return str(lease["metadata"]["annotations"][AGENT_ANNOTATION])


def test_absent_lease_is_created_by_the_check_in_one_request() -> None:
    fake = FakeNodeClient()
    keeper = LeaseKeeper(fake, "vn-1", "me", clock=Clock())
    keeper.check(take_over=False)
    assert _lease_calls(fake) == ["create"]  # no GET that would answer 404
    assert keeper.created_at_check and keeper.renewals == 1 and not keeper.recreated
    assert _holder(fake) == "me"
    assert keeper.renew()  # and from then on, one update per renewal
    assert _lease_calls(fake) == ["create", "update"]


def test_a_second_check_of_a_held_lease_reads_it() -> None:
    fake = FakeNodeClient()
    keeper = LeaseKeeper(fake, "vn-1", "me", clock=Clock())
    keeper.check(take_over=False)
    keeper.check(take_over=False)  # a restart of the same agent: it has the Lease already
    assert _lease_calls(fake) == ["create", "get"]
    assert not keeper.created_at_check


def test_lease_taken_between_check_and_renew_is_not_overwritten() -> None:
    fake = FakeNodeClient()
    clock = Clock()
    store = EmbeddedClient(fake.store)
    store.create_lease(LEASE_NAMESPACE, _lease("", clock()))  # released by a clean stop
    keeper = LeaseKeeper(fake, "vn-1", "me", clock=clock)
    keeper.check(take_over=False)
    lease = store.get_lease(LEASE_NAMESPACE, "vn-1")
    lease["metadata"]["annotations"][AGENT_ANNOTATION] = "other"
    store.update_lease(LEASE_NAMESPACE, "vn-1", lease)  # another agent takes it meanwhile
    assert not keeper.renew()
    assert keeper.lost
    assert _lease_calls(fake) == ["create", "get", "update", "get"]
    assert _holder(fake) == "other"


@pytest.mark.parametrize("case", ["ours", "released", "expired", "take-over"])
def test_present_lease_seen_by_check_is_the_base_of_the_first_update(case: str) -> None:
    fake = FakeNodeClient()
    clock = Clock()
    agent = {"ours": "me", "released": "", "expired": "other", "take-over": "other"}[case]
    renewed = clock() - timedelta(seconds=41) if case == "expired" else clock()
    EmbeddedClient(fake.store).create_lease(LEASE_NAMESPACE, _lease(agent, renewed))
    keeper = LeaseKeeper(fake, "vn-1", "me", clock=clock)
    keeper.check(take_over=case == "take-over")
    assert keeper.renew()
    assert _lease_calls(fake) == ["create", "get", "update"]  # AlreadyExists, then read
    assert _holder(fake) == "me"
    assert not keeper.lost


def test_a_stale_checked_lease_conflicts_then_reads() -> None:
    fake = FakeNodeClient()
    clock = Clock()
    store = EmbeddedClient(fake.store)
    store.create_lease(LEASE_NAMESPACE, _lease("", clock()))
    keeper = LeaseKeeper(fake, "vn-1", "me", clock=clock)
    keeper.check(take_over=False)
    lease = store.get_lease(LEASE_NAMESPACE, "vn-1")
    lease["metadata"].setdefault("labels", {})["touched"] = "yes"
    store.update_lease(LEASE_NAMESPACE, "vn-1", lease)  # the checked copy is now stale
    assert keeper.renew()
    assert _lease_calls(fake) == ["create", "get", "update", "get", "update"]
    assert _holder(fake) == "me"


def test_check_still_refuses_a_live_foreign_holder() -> None:
    fake = FakeNodeClient()
    clock = Clock()
    EmbeddedClient(fake.store).create_lease(LEASE_NAMESPACE, _lease("other", clock()))
    keeper = LeaseKeeper(fake, "vn-1", "me", clock=clock)
    with pytest.raises(LeaseHeldError):
        keeper.check(take_over=False)
    assert _lease_calls(fake) == ["create", "get"]
