"""Pods on a podstatus node report the generation they were seen at (v1.37, KEP-5067).

The node agent with the simulated provider, against the embedded API server over
HTTP on loopback: ``status.observedGeneration`` and the kubelet conditions'
``observedGeneration`` follow ``metadata.generation``, so a controller waiting for
``status.observedGeneration >= metadata.generation`` does not wait forever.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from nodekit import make_agent, pod_manifest, wait_for

from podstatus.clients.http import HttpKubeClient
from podstatus.node import FakeProvider, NodeAgent, SimulatedProvider, Timings
from podstatus.server.http import EmbeddedApiServer
from podstatus.types import ContainerState, ContainerStateRunning, ContainerStatus, PodStatus

ZERO = Timings(
    image_pull=(0.0, 0.0),
    init_run=(0.0, 0.0),
    startup=(0.0, 0.0),
    readiness=(0.0, 0.0),
    job_run=(0.0, 0.0),
    crash_run=(0.0, 0.0),
    crash_backoff=0.0,
    crash_backoff_max=0.0,
    stop=(0.0, 0.0),
)
KUBELET_CONDITIONS = ("PodScheduled", "PodReadyToStartContainers", "Initialized", "ContainersReady", "Ready")


@pytest.fixture
def server() -> Iterator[EmbeddedApiServer]:
    srv = EmbeddedApiServer("127.0.0.1", 0)
    srv.start()
    yield srv
    srv.stop()


@pytest.fixture
def client(server: EmbeddedApiServer) -> Iterator[HttpKubeClient]:
    c = HttpKubeClient(server.url, timeout=(2.0, 10.0))
    yield c
    c.close()


@pytest.fixture
def agent(client: HttpKubeClient) -> Iterator[NodeAgent]:
    provider = SimulatedProvider(timings=ZERO)
    a = make_agent(client, provider)
    a.start()
    yield a
    a.stop(timeout=2)


def seen_at(client: HttpKubeClient, name: str, generation: int) -> dict[str, Any] | None:
    pod = client.get_pod("default", name).to_dict()
    status = pod["status"]
    if pod["metadata"].get("generation") != generation or status.get("observedGeneration") != generation:
        return None
    conditions = {c["type"]: c for c in status.get("conditions") or ()}
    if any(conditions.get(t, {}).get("observedGeneration") != generation for t in KUBELET_CONDITIONS):
        return None
    return pod


def test_pods_report_the_generation_they_run(client: HttpKubeClient, agent: NodeAgent) -> None:
    client.create_pod(pod_manifest("web"))
    pod = wait_for(lambda: seen_at(client, "web", 1), what="observedGeneration 1")
    assert pod["status"]["phase"] == "Running"
    # A spec change makes generation 2; the node reports it without any container change.
    client.patch_pod("default", "web", json.dumps({"spec": {"activeDeadlineSeconds": 3600}}).encode())
    pod = wait_for(lambda: seen_at(client, "web", 2), what="observedGeneration 2")
    conditions = {c["type"]: c for c in pod["status"]["conditions"]}
    assert all(conditions[t]["status"] == "True" for t in KUBELET_CONDITIONS)


def running_status() -> PodStatus:
    return PodStatus(
        phase="Running",
        pod_ip="10.244.0.9",
        container_statuses=(
            ContainerStatus(
                name="app",
                image="nginx",
                ready=True,
                container_id="containerd://abc",
                started=True,
                state=ContainerState(
                    running=ContainerStateRunning(started_at=datetime(2026, 1, 1, tzinfo=UTC))
                ),
            ),
        ),
    )


def resize_pending(client: HttpKubeClient) -> Any:
    pod = client.get_pod("default", "web")
    return next((c for c in pod.status.conditions or () if c.type == "PodResizePending"), None)


def test_a_resize_condition_survives_an_agent_restart(client: HttpKubeClient) -> None:
    provider = FakeProvider()
    agent = make_agent(client, provider)
    agent.start()
    try:
        web = client.create_pod(pod_manifest("web"))
        wait_for(lambda: provider.called("create_pod"), what="the pod created")
        agent.manager.set_pod_resize_pending_condition(
            web.uid, "Infeasible", "Node didn't have enough capacity", 1
        )
        provider.set_status(web.uid, running_status())  # the status goes out with the resize condition
        wait_for(lambda: resize_pending(client), what="PodResizePending written")
    finally:
        agent.stop(timeout=2)

    # A new process: the condition is taken back from the pod, not dropped by the next status.
    fresh = FakeProvider()
    again = make_agent(client, fresh)
    again.start()
    try:
        wait_for(lambda: "default/web" in fresh.called("create_pod"), what="the pod adopted")
        assert again.manager.is_pod_resize_infeasible(web.uid)
        fresh.set_status(web.uid, running_status().replace(pod_ip="10.244.0.10"))
        wait_for(lambda: client.get_pod("default", "web").status.pod_ip == "10.244.0.10", what="new status")
        again.manager.sync_batch(all=True)
        got = resize_pending(client)
        assert got is not None and (got.reason, got.observed_generation) == ("Infeasible", 1)
    finally:
        again.stop(timeout=2)
