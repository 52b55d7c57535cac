"""The node agent and in-place resize, against the embedded API server (pods/resize) with the
simulated provider: observedGeneration, a resize accepted and completed, deferred, infeasible."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from nodekit import events_for, make_agent, pod_manifest, wait_for
from nodekit import start as start_agent

from podstatus.clients.embedded import EmbeddedClient
from podstatus.errors import ForbiddenError
from podstatus.node import NodeAgent, NodeDescription, SimulatedProvider, Timings

QUICK = Timings(
    image_pull=(0.01, 0.01),
    init_run=(0.01, 0.01),
    startup=(0.01, 0.01),
    readiness=(0.01, 0.01),
    resize=(0.05, 0.05),
)
KUBELET_CONDITIONS = ("PodScheduled", "PodReadyToStartContainers", "Initialized", "ContainersReady", "Ready")


def start(
    agents: list[NodeAgent], client: Any, *, cpu: str = "1", timings: Timings = QUICK, **options: Any
) -> NodeAgent:
    description = NodeDescription(capacity={"cpu": cpu, "memory": "4Gi", "pods": "110"})
    return start_agent(agents, client, SimulatedProvider(timings=timings, description=description), **options)


def pod_with(name: str, cpu: str, *, guaranteed: bool = False) -> dict[str, Any]:
    resources: dict[str, Any] = {"requests": {"cpu": cpu, "memory": "64Mi"}}
    if guaranteed:
        resources["limits"] = {"cpu": cpu, "memory": "64Mi"}
    return pod_manifest(name, containers=[{"name": "app", "image": "nginx", "resources": resources}])


def raw(client: EmbeddedClient, name: str) -> dict[str, Any]:
    return msgspec.json.decode(client.store.get("pods", "default", name).raw)


def resize(client: EmbeddedClient, name: str, cpu: str, *, guaranteed: bool = False) -> None:
    res: dict[str, Any] = {"requests": {"cpu": cpu}}
    if guaranteed:
        res["limits"] = {"cpu": cpu}
    patch = {"spec": {"containers": [{"name": "app", "resources": res}]}}
    client.store.patch("pods", "default", name, patch, subresource="resize", field_manager="test")


def cond(pod: dict[str, Any], ctype: str) -> dict[str, Any] | None:
    return next((c for c in pod["status"].get("conditions") or () if c["type"] == ctype), None)


def running(client: EmbeddedClient, name: str) -> bool:
    pod = raw(client, name)
    return pod["status"].get("phase") == "Running" and (cond(pod, "Ready") or {}).get("status") == "True"


def test_pods_on_the_node_report_observed_generation(client: EmbeddedClient, agents: list[NodeAgent]) -> None:
    start(agents, client)
    client.create_pod(pod_with("gen", "100m"))
    wait_for(lambda: running(client, "gen"), what="running")
    pod = raw(client, "gen")
    assert pod["metadata"]["generation"] == 1
    assert pod["status"]["observedGeneration"] == 1
    for ctype in KUBELET_CONDITIONS:
        assert (cond(pod, ctype) or {}).get("observedGeneration") == 1, ctype


def test_an_accepted_resize_goes_in_progress_then_completes(
    client: EmbeddedClient, agents: list[NodeAgent]
) -> None:
    # The provider takes a second to apply it: long enough to see the resize in progress.
    slow = Timings(
        image_pull=(0.01, 0.01), init_run=(0.01, 0.01), startup=(0.01, 0.01), readiness=(0.01, 0.01),
        resize=(1.0, 1.0),
    )  # fmt: skip
    agent = start(agents, client, timings=slow)
    client.create_pod(pod_with("grow", "100m"))
    wait_for(lambda: running(client, "grow"), what="running")
    app = raw(client, "grow")["status"]["containerStatuses"][0]
    assert app["allocatedResources"] == {"cpu": "100m", "memory": "64Mi"}
    assert app["resources"] == {"requests": {"cpu": "100m", "memory": "64Mi"}}

    resize(client, "grow", "300m")
    progress = wait_for(lambda: cond(raw(client, "grow"), "PodResizeInProgress"), what="in progress")
    assert progress["status"] == "True" and progress["observedGeneration"] == 2
    during = raw(client, "grow")["status"]["containerStatuses"][0]
    assert during["allocatedResources"]["cpu"] == "300m"  # allocated at once ...
    assert during["resources"]["requests"]["cpu"] == "100m"  # ... running as before until applied

    def done() -> bool:
        pod = raw(client, "grow")
        return cond(pod, "PodResizeInProgress") is None and pod["status"].get("observedGeneration") == 2

    wait_for(done, what="resize completed")
    pod = raw(client, "grow")
    app = pod["status"]["containerStatuses"][0]
    assert app["allocatedResources"] == {"cpu": "300m", "memory": "64Mi"}
    assert app["resources"] == {"requests": {"cpu": "300m", "memory": "64Mi"}}
    assert cond(pod, "PodResizePending") is None
    assert (cond(pod, "Ready") or {}).get("observedGeneration") == 2
    agent.recorder.flush()
    reasons = [
        (e["type"], e["reason"], e["message"]) for e in events_for(client, "grow") if "Resize" in e["reason"]
    ]
    summary = '{"containers":[{"name":"app","resources":{"requests":{"cpu":"300m","memory":"64Mi"}}}],"generation":2}'
    assert reasons == [
        ("Normal", "ResizeStarted", f"Pod resize started: {summary}"),
        ("Normal", "ResizeCompleted", f"Pod resize completed: {summary}"),
    ]


def test_a_resize_that_does_not_fit_is_deferred_until_room_is_freed(
    client: EmbeddedClient, agents: list[NodeAgent]
) -> None:
    agent = start(agents, client, cpu="1")
    client.create_pod(pod_with("big", "600m"))
    client.create_pod(pod_with("small", "300m"))
    wait_for(lambda: running(client, "big") and running(client, "small"), what="both running")
    resize(client, "small", "500m")
    pending = wait_for(lambda: cond(raw(client, "small"), "PodResizePending"), what="deferred")
    assert pending["status"] == "True"
    assert pending["reason"] == "Deferred"
    assert (
        pending["message"]
        == "Node didn't have enough resource: cpu, requested: 500, used: 600, capacity: 1000"
    )
    assert pending["observedGeneration"] == 2
    pod = raw(client, "small")
    assert pod["status"]["containerStatuses"][0]["allocatedResources"]["cpu"] == "300m"
    assert pod["status"]["observedGeneration"] == 2
    agent.recorder.flush()
    deferred = [e for e in events_for(client, "small") if e["reason"] == "ResizeDeferred"]
    assert [e["message"] for e in deferred] == [
        'Pod resize OutOfcpu: {"containers":[{"name":"app","resources":{"requests":{"cpu":"500m","memory":"64Mi"}}}],'
        '"generation":2,"error":"Node didn\'t have enough resource: cpu, requested: 500, used: 600, capacity: 1000"}'
    ]
    # The big pod goes: the deferred resize is tried again and fits.
    client.delete_pod("default", "big", grace_period_seconds=0)

    def applied() -> bool:
        p = raw(client, "small")
        cs = p["status"]["containerStatuses"][0]
        return (
            cond(p, "PodResizePending") is None
            and cond(p, "PodResizeInProgress") is None
            and cs["allocatedResources"]["cpu"] == "500m"
            and cs["resources"]["requests"]["cpu"] == "500m"
        )

    wait_for(applied, what="the deferred resize applied")


def test_a_resize_beyond_the_whole_node_is_refused_by_the_server_and_a_revert_clears_pending(
    client: EmbeddedClient, agents: list[NodeAgent]
) -> None:
    """v1.37: PodResizeValidator refuses (403) what exceeds the node's allocatable: the node never sees it."""
    start(agents, client, cpu="1")
    client.create_pod(pod_with("other", "800m"))
    client.create_pod(pod_with("huge", "100m"))
    wait_for(lambda: running(client, "huge") and running(client, "other"), what="running")
    with pytest.raises(ForbiddenError) as refused:
        resize(client, "huge", "2")
    assert refused.value.status["message"] == (
        'pods "huge" is forbidden: node didn\'t have enough allocatable resources: cpu, requested: 2000, '
        "allocatable: 1000"
    )
    assert raw(client, "huge")["metadata"]["generation"] == 1
    # Within the node but not beside the other pod: deferred; asked back: no longer pending.
    resize(client, "huge", "500m")
    pending = wait_for(lambda: cond(raw(client, "huge"), "PodResizePending"), what="pending")
    assert (pending["reason"], pending["message"]) == (
        "Deferred",
        "Node didn't have enough resource: cpu, requested: 500, used: 800, capacity: 1000",
    )
    resize(client, "huge", "100m")
    wait_for(lambda: cond(raw(client, "huge"), "PodResizePending") is None, what="pending cleared")
    assert raw(client, "huge")["status"]["observedGeneration"] == 3


def test_a_guaranteed_cpu_resize_under_the_static_cpu_manager_is_infeasible(
    client: EmbeddedClient, agents: list[NodeAgent]
) -> None:
    agent = start(agents, client, cpu="4", cpu_manager_policy="static")
    client.create_pod(pod_with("pinned", "1", guaranteed=True))
    wait_for(lambda: running(client, "pinned"), what="running")
    resize(client, "pinned", "2", guaranteed=True)
    pending = wait_for(lambda: cond(raw(client, "pinned"), "PodResizePending"), what="infeasible")
    assert (pending["status"], pending["reason"], pending["message"]) == (
        "True",
        "Infeasible",
        'Resize is infeasible for Guaranteed Pods alongside CPU Manager policy "static"',
    )
    pod = raw(client, "pinned")
    assert pod["status"]["containerStatuses"][0]["allocatedResources"]["cpu"] == "1"
    agent.recorder.flush()
    assert [e["reason"] for e in events_for(client, "pinned") if "Resize" in e["reason"]] == [
        "ResizeInfeasible"
    ]


def test_a_resize_made_while_the_agent_was_down_is_acted_on_when_it_starts(
    client: EmbeddedClient, agents: list[NodeAgent]
) -> None:
    """The allocation survives in the status (container resources), as the kubelet's checkpoint does."""
    description = NodeDescription(capacity={"cpu": "4", "memory": "4Gi", "pods": "110"})
    provider = SimulatedProvider(timings=QUICK, description=description)
    first = make_agent(client, provider)
    first.start()
    client.create_pod(pod_with("later", "100m"))
    wait_for(lambda: running(client, "later"), what="running")
    first.stop(timeout=2)
    resize(client, "later", "300m")  # nobody is watching
    assert raw(client, "later")["status"]["containerStatuses"][0]["allocatedResources"]["cpu"] == "100m"
    second = make_agent(client, provider)
    second.start()
    agents.append(second)

    def applied() -> bool:
        pod = raw(client, "later")
        cs = pod["status"]["containerStatuses"][0]
        return (
            cond(pod, "PodResizeInProgress") is None
            and cs["allocatedResources"]["cpu"] == "300m"
            and cs["resources"]["requests"]["cpu"] == "300m"
            and pod["status"].get("observedGeneration") == 2
        )

    wait_for(applied, what="the resize applied after the restart")
