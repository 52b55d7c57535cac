"""observedGeneration and in-place resize on `podstatus node`, with kube-apiserver v1.37.2's pods/resize.

A Deployment's pods report ``status.observedGeneration`` (and each kubelet condition's), a
waiter on it (``kubectl wait --for=jsonpath``) returns after a resize bumps the generation,
and a rollout completes. On a node of its own (64 cpu, ``--cpu-manager-policy static``) a
resize that fits completes, one that does not is Deferred, and a Guaranteed pod's cpu is
Infeasible; each is read with ``kubectl get pod -o yaml`` as a user would.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from cpkit import (
    TOLERATIONS,
    Agent,
    Agents,
    Cluster,
    condition,
    condition_status,
    kubectl,
    kubectl_run,
    pod_manifest,
    template,
    wait_until,
)

pytestmark = pytest.mark.apiserver

RESIZE_NODE = "cp-resize-1"
KUBELET_CONDITIONS = ("PodScheduled", "PodReadyToStartContainers", "Initialized", "ContainersReady", "Ready")


def pod_yaml(cluster: Cluster, ns: str, name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(
        kubectl(cluster.kubeconfig, "-n", ns, "get", "pod", name, "-o", "yaml")
    )
    return loaded


def resize(cluster: Cluster, ns: str, name: str, cpu: str, *, limit: bool = False) -> None:
    res: dict[str, Any] = {"requests": {"cpu": cpu}}
    if limit:
        res["limits"] = {"cpu": cpu}
    patch = {"spec": {"containers": [{"name": "app", "resources": res}]}}
    kubectl(
        cluster.kubeconfig,
        "-n",
        ns,
        "patch",
        "pod",
        name,
        "--subresource",
        "resize",
        "--patch",
        json.dumps(patch),
    )


def observed_everywhere(pod: dict[str, Any], generation: int) -> bool:
    status = pod.get("status") or {}
    if status.get("observedGeneration") != generation:
        return False
    return all((condition(pod, t) or {}).get("observedGeneration") == generation for t in KUBELET_CONDITIONS)


def test_deployment_pods_report_observed_generation_and_a_waiter_on_it_returns(
    cluster: Cluster, ns: str, agents: Agents
) -> None:
    labels = {"app": "gen"}
    tmpl = template(labels, behaviour="serve")
    tmpl["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "100m", "memory": "32Mi"}}
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "gen", "labels": labels},
        "spec": {"replicas": 3, "selector": {"matchLabels": labels}, "template": tmpl},
    }
    cluster.apps.create_namespaced_deployment(ns, deployment)
    out = kubectl(cluster.kubeconfig, "-n", ns, "rollout", "status", "deployment/gen", "--timeout=180s")
    assert "successfully rolled out" in out, out
    pods = wait_until(
        lambda: (
            (p := cluster.pods(ns, "app=gen"))
            and len(p) == 3
            and all(observed_everywhere(x, 1) for x in p)
            and p
        ),
        timeout=60,
        what="every pod of the Deployment observed generation 1",
        state=lambda: [(p["metadata"]["name"], p.get("status")) for p in cluster.pods(ns, "app=gen")],
    )
    # A resize bumps the pod's generation; a controller waiting for the node to have seen it returns.
    name = pods[0]["metadata"]["name"]
    resize(cluster, ns, name, "200m")
    assert cluster.pod(ns, name)["metadata"]["generation"] == 2
    kubectl(cluster.kubeconfig, "-n", ns, "wait", f"pod/{name}", "--for=jsonpath={.status.observedGeneration}=2",
            "--timeout=60s")  # fmt: skip
    wait_until(
        lambda: observed_everywhere(cluster.pod(ns, name), 2),
        timeout=60,
        what="every kubelet condition observed generation 2",
        state=lambda: cluster.pod(ns, name).get("status"),
    )
    # A rollout: the new pods report observedGeneration as well and the rollout completes.
    kubectl(cluster.kubeconfig, "-n", ns, "set", "image", "deployment/gen", "app=registry.example.com/web:2")
    out = kubectl(cluster.kubeconfig, "-n", ns, "rollout", "status", "deployment/gen", "--timeout=180s")
    assert "successfully rolled out" in out, out
    wait_until(
        lambda: all(
            observed_everywhere(p, 1)
            for p in cluster.pods(ns, "app=gen")
            if p["spec"]["containers"][0]["image"].endswith(":2")
            and not p["metadata"].get("deletionTimestamp")
        ),
        timeout=60,
        what="the new pods observed generation 1",
    )


@pytest.fixture
def resize_node(cluster: Cluster, agent_kubeconfig: str, tmp_path: Path) -> Iterator[Agent]:
    """A node of its own (the simulated provider's 64 cpu) under the static CPU manager policy."""
    agent = Agent(
        RESIZE_NODE,
        agent_kubeconfig,
        tmp_path / f"{RESIZE_NODE}.log",
        extra_args=["--cpu-manager-policy", "static", "--on-stop", "cordon"],
    )
    agent.start()
    try:
        wait_until(
            lambda: agent.alive() and condition_status(cluster.node(RESIZE_NODE), "Ready") == "True",
            timeout=90,
            what=f"node {RESIZE_NODE} Ready",
            state=lambda: agent.log_text()[-3000:],
        )
        node = cluster.node(RESIZE_NODE)
        # What a v1.37 kubelet declares for in-place resize (and ExtendWebSocketsToKubelet for its API).
        assert {
            "InPlacePodLevelResourcesVerticalScaling",
            "InPlacePodVerticalScalingInitContainers",
        } <= set(node["status"]["declaredFeatures"])
        yield agent
    finally:
        agent.stop()
        with contextlib.suppress(Exception):  # cleanup only
            cluster.core.delete_node(RESIZE_NODE)  # no other case may be scheduled onto it


def _pod(name: str, cpu: str, *, guaranteed: bool = False) -> dict[str, Any]:
    manifest = pod_manifest(name, node=RESIZE_NODE)
    resources: dict[str, Any] = {"requests": {"cpu": cpu, "memory": "64Mi"}}
    if guaranteed:
        resources["limits"] = {"cpu": cpu, "memory": "64Mi"}
    manifest["spec"]["containers"][0]["resources"] = resources
    manifest["spec"]["tolerations"] = TOLERATIONS
    return manifest


def test_resize_completed_deferred_and_infeasible(cluster: Cluster, ns: str, resize_node: Agent) -> None:
    cluster.core.create_namespaced_pod(ns, _pod("grow", "20"))
    cluster.core.create_namespaced_pod(ns, _pod("hog", "40", guaranteed=True))
    for name in ("grow", "hog"):
        wait_until(
            lambda n=name: condition_status(cluster.pod(ns, n), "Ready") == "True",
            timeout=90,
            what=f"{name} Ready",
            state=lambda n=name: cluster.pod(ns, n).get("status"),
        )
    app = pod_yaml(cluster, ns, "grow")["status"]["containerStatuses"][0]
    assert app["allocatedResources"] == {"cpu": "20", "memory": "64Mi"}
    assert app["resources"] == {"requests": {"cpu": "20", "memory": "64Mi"}}

    # 20 -> 24 fits (40 + 24 = 64 cpu): accepted, applied, the in-progress condition gone.
    resize(cluster, ns, "grow", "24")

    def completed() -> dict[str, Any] | None:
        pod = pod_yaml(cluster, ns, "grow")
        cs = pod["status"]["containerStatuses"][0]
        done = (
            pod["status"].get("observedGeneration") == 2
            and condition(pod, "PodResizeInProgress") is None
            and cs.get("resources", {}).get("requests", {}).get("cpu") == "24"
        )
        return pod if done else None

    pod = wait_until(completed, timeout=60, what="grow resized to 24 cpu",
                     state=lambda: pod_yaml(cluster, ns, "grow")["status"])  # fmt: skip
    app = pod["status"]["containerStatuses"][0]
    assert app["allocatedResources"] == {"cpu": "24", "memory": "64Mi"}
    assert app["resources"] == {"requests": {"cpu": "24", "memory": "64Mi"}}
    assert condition(pod, "PodResizePending") is None
    assert pod["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "24"

    # More than the whole node: kube-apiserver's PodResizeValidator refuses it; the node never sees it.
    patch = {"spec": {"containers": [{"name": "app", "resources": {"requests": {"cpu": "100"}}}]}}
    refused = kubectl_run(cluster.kubeconfig, "-n", ns, "patch", "pod", "grow", "--subresource", "resize",
                          "--patch", json.dumps(patch))  # fmt: skip
    assert refused.returncode != 0
    assert (
        'pods "grow" is forbidden: node didn\'t have enough allocatable resources: cpu, requested: 100000, '
        "allocatable: 64000"
    ) in refused.stderr, refused.stderr
    assert cluster.pod(ns, "grow")["metadata"]["generation"] == 2

    # 24 -> 30 does not fit (40 + 30 > 64): Deferred, with the kubelet's message.
    resize(cluster, ns, "grow", "30")
    pending = wait_until(
        lambda: condition(pod_yaml(cluster, ns, "grow"), "PodResizePending"),
        timeout=60,
        what="grow deferred",
        state=lambda: pod_yaml(cluster, ns, "grow")["status"],
    )
    assert (pending["status"], pending["reason"], pending["message"], pending["observedGeneration"]) == (
        "True",
        "Deferred",
        "Node didn't have enough resource: cpu, requested: 30000, used: 40000, capacity: 64000",
        3,
    )
    app = pod_yaml(cluster, ns, "grow")["status"]["containerStatuses"][0]
    assert app["allocatedResources"]["cpu"] == "24" and app["resources"]["requests"]["cpu"] == "24"

    # A Guaranteed pod's cpu under the static CPU manager policy: Infeasible, though it would fit.
    resize(cluster, ns, "hog", "30", limit=True)
    infeasible = wait_until(
        lambda: condition(pod_yaml(cluster, ns, "hog"), "PodResizePending"),
        timeout=60,
        what="hog infeasible",
        state=lambda: pod_yaml(cluster, ns, "hog")["status"],
    )
    assert (infeasible["status"], infeasible["reason"], infeasible["message"]) == (
        "True",
        "Infeasible",
        'Resize is infeasible for Guaranteed Pods alongside CPU Manager policy "static"',
    )
    hog = pod_yaml(cluster, ns, "hog")["status"]["containerStatuses"][0]
    assert hog["allocatedResources"]["cpu"] == "40"

    # The hog goes: the deferred resize is tried again, fits, and is applied.
    kubectl(cluster.kubeconfig, "-n", ns, "delete", "pod", "hog", "--wait=true", "--timeout=60s")

    def applied() -> bool:
        p = pod_yaml(cluster, ns, "grow")
        cs = p["status"]["containerStatuses"][0]
        return (
            condition(p, "PodResizePending") is None
            and condition(p, "PodResizeInProgress") is None
            and cs.get("resources", {}).get("requests", {}).get("cpu") == "30"
        )

    wait_until(applied, timeout=60, what="the deferred resize applied",
               state=lambda: pod_yaml(cluster, ns, "grow")["status"])  # fmt: skip
    reasons = {e.get("reason") for e in cluster.events_for(ns, "grow")}
    assert {"ResizeStarted", "ResizeCompleted", "ResizeDeferred"} <= reasons, reasons
