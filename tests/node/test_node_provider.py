"""Providers that fail, hang, return garbage, are async, or only answer when polled."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import pytest
from nodekit import events_for, pod_manifest, start, wait_for
from test_node_agent import running

from podstatus.clients.embedded import EmbeddedClient
from podstatus.errors import ServiceUnavailableError
from podstatus.node import FakeProvider, NodeAgent, NodeDescription
from podstatus.node.provider import pending_status
from podstatus.types import (
    ContainerState,
    ContainerStateTerminated,
    ContainerStatus,
    Pod,
    PodStatus,
)


def reasons(client: EmbeddedClient, agent: NodeAgent, name: str) -> list[str]:
    agent.recorder.flush()
    return [e["reason"] for e in events_for(client, name)]


def written_by_agent(client: EmbeddedClient, name: str) -> bool:
    """The agent's first status is on the server (the API server alone sets only phase Pending)."""
    status = client.get_pod("default", name).status
    return status.phase == "Pending" and bool(status.container_statuses)


def test_a_failing_create_is_reported_and_retried(
    client: EmbeddedClient, agents: list[NodeAgent], caplog: pytest.LogCaptureFixture
) -> None:
    provider = FakeProvider()
    provider.fail("create_pod", RuntimeError("no capacity in region"))
    agent = start(agents, client, provider)
    pod = client.create_pod(pod_manifest("web"))
    wait_for(lambda: "FailedCreatePodSandBox" in reasons(client, agent, "web"))
    assert "no capacity in region" in caplog.text
    wait_for(lambda: written_by_agent(client, "web"))  # Pending, ContainerCreating
    provider.fail("create_pod", None)
    wait_for(lambda: pod.uid in provider.running, timeout=5, what="the retry")
    assert len(provider.called("create_pod")) >= 2
    provider.set_status(pod.uid, running())
    wait_for(lambda: client.get_pod("default", "web").status.phase == "Running")


def test_a_hanging_provider_times_out_and_others_go_on(
    client: EmbeddedClient, agents: list[NodeAgent], caplog: pytest.LogCaptureFixture
) -> None:
    provider = FakeProvider()
    agent = start(agents, client, provider, provider_timeout=0.3)
    provider.hang("create_pod")
    client.create_pod(pod_manifest("stuck"))
    wait_for(lambda: "FailedCreatePodSandBox" in reasons(client, agent, "stuck"))
    assert "did not return within 0.3 s" in caplog.text
    provider.release()
    other = client.create_pod(pod_manifest("other"))
    wait_for(lambda: other.uid in provider.running)
    provider.set_status(other.uid, running())
    wait_for(lambda: client.get_pod("default", "other").status.phase == "Running")
    assert agent.healthy()


@pytest.mark.parametrize(
    ("garbage", "words"),
    [
        ("Running", "expected a PodStatus, got str"),
        (PodStatus(phase="Sleeping"), "phase 'Sleeping'"),
        (
            PodStatus(phase="Running", container_statuses=(ContainerStatus(name="ghost", image="x"),)),
            "containers the pod does not have: ghost",
        ),
        (PodStatus(phase="Running", container_statuses=("app",)), "expected a ContainerStatus"),  # type: ignore[arg-type]
    ],
)
def test_garbage_status_is_refused_with_a_log_line_and_an_event(
    client: EmbeddedClient,
    agents: list[NodeAgent],
    caplog: pytest.LogCaptureFixture,
    garbage: Any,
    words: str,
) -> None:
    provider = FakeProvider()
    agent = start(agents, client, provider)
    pod = client.create_pod(pod_manifest("web"))
    wait_for(lambda: written_by_agent(client, "web"))
    caplog.clear()
    provider.set_status(pod.uid, garbage)
    assert words in caplog.text
    assert "ProviderError" in reasons(client, agent, "web")
    time.sleep(0.3)
    assert client.get_pod("default", "web").status.phase == "Pending"
    provider.set_status(pod.uid, running())  # and the agent goes on
    wait_for(lambda: client.get_pod("default", "web").status.phase == "Running")


def test_an_impossible_transition_is_refused_and_never_written(
    client: EmbeddedClient, agents: list[NodeAgent], caplog: pytest.LogCaptureFixture
) -> None:
    provider = FakeProvider()
    agent = start(agents, client, provider)
    pod = client.create_pod(pod_manifest("job", restartPolicy="Never"))
    wait_for(lambda: provider.called("create_pod"))
    done = ContainerStatus(
        name="app",
        image="nginx",
        container_id="containerd://abc",
        state=ContainerState(terminated=ContainerStateTerminated(exit_code=1, reason="Error")),
    )
    provider.set_status(pod.uid, PodStatus(phase="Failed", container_statuses=(done,)))
    wait_for(lambda: client.get_pod("default", "job").status.phase == "Failed")
    caplog.clear()
    provider.set_status(pod.uid, running())  # a Never container cannot run again
    assert "impossible transition" in caplog.text
    assert "ProviderError" in reasons(client, agent, "job")
    time.sleep(0.3)
    status = client.get_pod("default", "job").status
    assert status.phase == "Failed"
    assert status.container_statuses[0].state.terminated is not None


def test_a_hanging_ping_makes_the_node_not_ready(client: EmbeddedClient, agents: list[NodeAgent]) -> None:
    provider = FakeProvider()
    start(agents, client, provider, provider_timeout=0.2)
    provider.hang("ping")
    wait_for(
        lambda: any(
            c["type"] == "Ready" and c["status"] == "False" and "did not return" in c["message"]
            for c in client.get_node("vn-1")["status"]["conditions"]
        )
    )
    provider.release()


def test_a_garbage_node_description_keeps_the_last_good_one(
    client: EmbeddedClient, agents: list[NodeAgent], caplog: pytest.LogCaptureFixture
) -> None:
    provider = FakeProvider(NodeDescription(capacity={"cpu": "2", "memory": "1Gi", "pods": "7"}))
    agent = start(agents, client, provider)
    provider.description = {"pods": 9}  # type: ignore[assignment]
    wait_for(lambda: "not a NodeDescription" in caplog.text)
    assert client.get_node("vn-1")["status"]["capacity"]["pods"] == "7"
    assert agent.healthy()


class AsyncProvider:
    """Every method a coroutine: run on the agent's event loop thread."""

    def __init__(self) -> None:
        self.statuses: dict[str, PodStatus] = {}
        self.loop_names: set[str] = set()

    async def create_pod(self, pod: Pod) -> None:
        await asyncio.sleep(0.01)
        self.statuses[pod.uid] = running()

    async def update_pod(self, pod: Pod) -> None:
        return None

    async def delete_pod(self, pod: Pod, grace_period_seconds: int) -> None:
        self.statuses.pop(pod.uid, None)

    async def get_pod_status(self, pod: Pod) -> PodStatus | None:
        return self.statuses.get(pod.uid)

    async def get_pods(self) -> list[Pod]:
        return []

    async def ping(self) -> None:
        return None

    async def node_description(self) -> NodeDescription:
        return NodeDescription()


def test_an_async_provider_works_polled(client: EmbeddedClient, agents: list[NodeAgent]) -> None:
    start(agents, client, AsyncProvider())
    client.create_pod(pod_manifest("web"))
    wait_for(lambda: client.get_pod("default", "web").status.phase == "Running")
    client.delete_pod("default", "web", grace_period_seconds=5, uid=client.get_pod("default", "web").uid)
    wait_for(lambda: not client.list_pods()[0], what="the final delete")


def test_a_provider_without_notify_is_polled(client: EmbeddedClient, agents: list[NodeAgent]) -> None:
    provider = FakeProvider(notify=False)
    start(agents, client, provider)
    pod = client.create_pod(pod_manifest("web"))
    wait_for(lambda: pod.uid in provider.running)
    assert provider.statuses[pod.uid] == pending_status(pod)
    provider.set_status(pod.uid, running())  # stored only: the agent must come and ask
    wait_for(lambda: client.get_pod("default", "web").status.phase == "Running")
    assert len(provider.called("get_pod_status")) >= 2


def test_events_from_the_provider_reach_describe(client: EmbeddedClient, agents: list[NodeAgent]) -> None:
    provider = FakeProvider()
    agent = start(agents, client, provider)
    pod = client.create_pod(pod_manifest("web"))
    wait_for(lambda: provider.notifier is not None and pod.uid in provider.running)
    assert provider.notifier is not None
    provider.notifier.event(
        pod.uid, "Normal", "Pulled", 'Successfully pulled image "nginx"', "spec.containers{app}"
    )
    provider.notifier.event(pod.uid, "Bogus", "", "x")  # refused, logged
    wait_for(lambda: "Pulled" in reasons(client, agent, "web"))
    (pulled,) = [e for e in events_for(client) if e["reason"] == "Pulled"]
    assert pulled["involvedObject"]["fieldPath"] == "spec.containers{app}"
    assert pulled["involvedObject"]["uid"] == pod.uid
    assert "" not in reasons(client, agent, "web")
    logging.getLogger().info("done")


def test_a_stopped_pod_reported_running_again_is_refused(
    client: EmbeddedClient, agents: list[NodeAgent], caplog: pytest.LogCaptureFixture
) -> None:
    provider = FakeProvider()
    agent = start(agents, client, provider)
    pod = client.create_pod(pod_manifest("web"))
    wait_for(lambda: pod.uid in provider.running)
    provider.set_status(pod.uid, running())
    wait_for(lambda: client.get_pod("default", "web").status.phase == "Running")
    delete = client.delete_pod

    def no_final_delete(namespace: str, name: str, *, grace_period_seconds: Any, uid: Any) -> None:
        if grace_period_seconds == 0:
            raise ServiceUnavailableError("etcd is slow today")  # keeps the pod, and our state of it
        delete(namespace, name, grace_period_seconds=grace_period_seconds, uid=uid)

    client.delete_pod = no_final_delete  # type: ignore[method-assign]
    client.delete_pod("default", "web", grace_period_seconds=1, uid=pod.uid)
    wait_for(lambda: agent.pod_states()[pod.uid].stopped)
    wait_for(lambda: client.get_pod("default", "web").status.phase in ("Succeeded", "Failed"))
    caplog.clear()
    provider.set_status(pod.uid, running())  # a late, wrong report after the stop
    assert "running in a pod it has stopped" in caplog.text
    time.sleep(0.3)
    states = client.get_pod("default", "web").status.container_statuses
    assert states is not None and states[0].state.running is None
