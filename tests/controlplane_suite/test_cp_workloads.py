"""Workloads through the real controllers and scheduler onto `podstatus node`'s virtual nodes.

Each case creates its objects in a fresh namespace and reads the outcome from the API
as a user would; a case that does not hold fails with the object's state.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from cpkit import (
    FLAKY_NODE,
    GATE,
    STABLE_NODE,
    Agents,
    Cluster,
    PodRecorder,
    condition,
    condition_status,
    kubectl,
    pod_manifest,
    pod_ready,
    template,
    wait_until,
    when_condition,
)

pytestmark = pytest.mark.apiserver

NODES = {STABLE_NODE, FLAKY_NODE}


def _deployment(name: str, replicas: int, *, image: str, gates: tuple[str, ...] = ()) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": template(labels, behaviour="serve", image=image, gates=gates),
        },
    }


def _rolled_out(dep: dict[str, Any], replicas: int) -> bool:
    st = dep.get("status") or {}
    return (
        st.get("observedGeneration", 0) >= dep["metadata"]["generation"]
        and st.get("updatedReplicas") == replicas
        and st.get("replicas") == replicas
        and st.get("availableReplicas") == replicas
        and st.get("readyReplicas") == replicas
    )


def _pods_summary(cluster: Cluster, ns: str, selector: str | None) -> list[dict[str, Any]]:
    return [
        {
            "name": p["metadata"]["name"],
            "node": p["spec"].get("nodeName"),
            "phase": (p.get("status") or {}).get("phase"),
            "ready": condition_status(p, "Ready"),
            "image": p["spec"]["containers"][0]["image"],
            "deleting": bool(p["metadata"].get("deletionTimestamp")),
        }
        for p in cluster.pods(ns, selector)
    ]


def test_deployment_of_20_is_scheduled_becomes_available_and_rolls_out(
    cluster: Cluster, ns: str, agents: Agents
) -> None:
    name = "web"
    cluster.apps.create_namespaced_deployment(ns, _deployment(name, 20, image="registry.example.com/web:1"))
    wait_until(
        lambda: _rolled_out(cluster.deployment(ns, name), 20),
        timeout=180,
        what="Deployment web 20/20 available",
        state=lambda: {
            "deployment": cluster.deployment(ns, name)["status"],
            "pods": _pods_summary(cluster, ns, "app=web"),
        },
    )
    pods = cluster.pods(ns, "app=web")
    assert len(pods) == 20
    # No pod had a nodeName: the scheduler placed each on a virtual node, and said so.
    placed = {p["spec"]["nodeName"] for p in pods}
    assert placed <= NODES, placed
    assert all(condition_status(p, "PodScheduled") == "True" for p in pods)
    assert all((p.get("status") or {}).get("podIP") for p in pods), _pods_summary(cluster, ns, "app=web")
    events = cluster.events_for(ns, pods[0]["metadata"]["name"])
    assert "Scheduled" in {e.get("reason") for e in events}, [e.get("reason") for e in events]
    # kubectl shows what the status says.
    out = kubectl(cluster.kubeconfig, "-n", ns, "get", "deployment", name, "--no-headers")
    assert " 20/20 " in f" {out} ", out

    # A rollout to a new image: every pod replaced, the Deployment settles on 20/20 again.
    kubectl(
        cluster.kubeconfig, "-n", ns, "set", "image", f"deployment/{name}", "app=registry.example.com/web:2"
    )
    status = kubectl(
        cluster.kubeconfig, "-n", ns, "rollout", "status", f"deployment/{name}", "--timeout=240s"
    )
    assert "successfully rolled out" in status, status
    wait_until(
        lambda: (
            _rolled_out(cluster.deployment(ns, name), 20)
            and all(
                p["image"].endswith(":2") and not p["deleting"] for p in _pods_summary(cluster, ns, "app=web")
            )
            and len(cluster.pods(ns, "app=web")) == 20
        ),
        timeout=120,
        what="only new pods left after the rollout",
        state=lambda: {
            "deployment": cluster.deployment(ns, name)["status"],
            "pods": _pods_summary(cluster, ns, "app=web"),
        },
    )


def _job(
    name: str, *, behaviour: str, completions: int, parallelism: int, backoff_limit: int
) -> dict[str, Any]:
    labels = {"job": name}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "completions": completions,
            "parallelism": parallelism,
            "backoffLimit": backoff_limit,
            "template": template(labels, behaviour=behaviour, restart_policy="Never"),
        },
    }


def _job_state(cluster: Cluster, ns: str, name: str) -> dict[str, Any]:
    return {"job": cluster.job(ns, name).get("status"), "pods": _pods_summary(cluster, ns, f"job={name}")}


def test_job_with_several_completions_completes(cluster: Cluster, ns: str, agents: Agents) -> None:
    cluster.batch.create_namespaced_job(
        ns, _job("batch", behaviour="complete", completions=4, parallelism=2, backoff_limit=2)
    )
    job = wait_until(
        when_condition(lambda: cluster.job(ns, "batch"), "Complete"),
        timeout=180,
        what="Job batch Complete",
        state=lambda: _job_state(cluster, ns, "batch"),
    )
    assert job["status"].get("succeeded") == 4, job["status"]
    assert not job["status"].get("failed"), job["status"]
    phases = [p["phase"] for p in _pods_summary(cluster, ns, "job=batch")]
    assert phases.count("Succeeded") == 4, phases


def test_failing_job_fails_by_its_backoff_limit(cluster: Cluster, ns: str, agents: Agents) -> None:
    cluster.batch.create_namespaced_job(
        ns, _job("broken", behaviour="fail", completions=1, parallelism=1, backoff_limit=1)
    )
    job = wait_until(
        when_condition(lambda: cluster.job(ns, "broken"), "Failed"),
        timeout=180,
        what="Job broken Failed",
        state=lambda: _job_state(cluster, ns, "broken"),
    )
    failed = condition(job, "Failed")
    assert failed is not None and failed.get("reason") == "BackoffLimitExceeded", job["status"]
    # backoffLimit 1: the first pod and one retry, both failed with a non-zero exit code.
    assert job["status"].get("failed") == 2, job["status"]
    assert condition_status(job, "Complete") != "True"
    for pod in cluster.pods(ns, "job=broken"):
        assert pod["status"]["phase"] == "Failed", pod["status"]
        term = pod["status"]["containerStatuses"][0]["state"].get("terminated") or {}
        assert term.get("exitCode", 0) != 0, pod["status"]


def _slice_view(cluster: Cluster, ns: str, service: str) -> dict[str, bool]:
    """pod name -> ready, over every endpoint of the Service's EndpointSlices."""
    view: dict[str, bool] = {}
    for s in cluster.endpoint_slices(ns, service):
        for ep in s.get("endpoints") or []:
            ref = ep.get("targetRef") or {}
            view[ref.get("name", "?")] = bool((ep.get("conditions") or {}).get("ready"))
    return view


def _ready_pods(cluster: Cluster, ns: str, selector: str) -> set[str]:
    return {p["metadata"]["name"] for p in cluster.pods(ns, selector) if pod_ready(p)}


def test_service_endpoint_slices_list_exactly_the_ready_pods(
    cluster: Cluster, ns: str, agents: Agents
) -> None:
    """Readiness is flipped by another controller (the test) through a readiness gate."""
    name = "api"
    cluster.apps.create_namespaced_deployment(
        ns, _deployment(name, 3, image="registry.example.com/api:1", gates=(GATE,))
    )
    cluster.core.create_namespaced_service(
        ns,
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": name},
            "spec": {"selector": {"app": name}, "ports": [{"port": 80, "targetPort": 8080}]},
        },
    )
    sel = f"app={name}"

    def running() -> list[str]:
        pods = cluster.pods(ns, sel)
        ok = [
            p
            for p in pods
            if p["status"].get("phase") == "Running" and condition_status(p, "ContainersReady") == "True"
        ]
        return sorted(p["metadata"]["name"] for p in ok) if len(ok) == 3 else []

    names = wait_until(
        running, timeout=120, what="3 running pods", state=lambda: _pods_summary(cluster, ns, sel)
    )

    def agrees(ready: set[str]) -> bool:
        view = _slice_view(cluster, ns, name)
        return set(view) == set(names) and {n for n, r in view.items() if r} == ready == _ready_pods(
            cluster, ns, sel
        )

    def state() -> dict[str, Any]:
        return {"slices": _slice_view(cluster, ns, name), "pods": _pods_summary(cluster, ns, sel)}

    # Gates unset: every pod is listed, none ready.
    wait_until(lambda: agrees(set()), timeout=60, what="all 3 endpoints listed, none ready", state=state)
    for n in names[:2]:
        cluster.set_pod_condition(ns, n, GATE, "True")
    wait_until(lambda: agrees(set(names[:2])), timeout=60, what=f"exactly {names[:2]} ready", state=state)
    # The flip: one pod goes unready, another becomes ready.
    cluster.set_pod_condition(ns, names[0], GATE, "False")
    cluster.set_pod_condition(ns, names[2], GATE, "True")
    wait_until(
        lambda: agrees(set(names[1:])),
        timeout=60,
        what=f"exactly {names[1:]} ready after the flip",
        state=state,
    )


def test_readiness_gated_pod_is_ready_only_when_the_gate_is_true(
    cluster: Cluster, ns: str, agents: Agents
) -> None:
    cluster.core.create_namespaced_pod(ns, pod_manifest("gated", gates=(GATE,)))
    wait_until(
        when_condition(lambda: cluster.pod(ns, "gated"), "ContainersReady"),
        timeout=90,
        what="gated pod's containers ready",
        state=lambda: cluster.pod(ns, "gated").get("status"),
    )
    # Containers ready, gate unset: the pod is not Ready, and stays so.
    time.sleep(3)
    pod = cluster.pod(ns, "gated")
    ready = condition(pod, "Ready")
    assert ready is not None and ready["status"] == "False", pod["status"]
    assert ready.get("reason") == "ReadinessGatesNotReady", ready
    cluster.set_pod_condition(ns, "gated", GATE, "True")
    wait_until(
        lambda: pod_ready(cluster.pod(ns, "gated")),
        timeout=60,
        what="Ready after the gate is True",
        state=lambda: cluster.pod(ns, "gated").get("status"),
    )
    # The agent keeps the other controller's condition: it is still there, unchanged.
    assert condition_status(cluster.pod(ns, "gated"), GATE) == "True"
    cluster.set_pod_condition(ns, "gated", GATE, "False")
    wait_until(
        lambda: condition_status(cluster.pod(ns, "gated"), "Ready") == "False",
        timeout=60,
        what="not Ready after the gate is False",
        state=lambda: cluster.pod(ns, "gated").get("status"),
    )


def test_graceful_delete_stops_containers_removes_the_pod_and_leaves_events(
    cluster: Cluster, ns: str, agents: Agents
) -> None:
    cluster.core.create_namespaced_pod(ns, pod_manifest("doomed", grace=5))
    wait_until(
        lambda: pod_ready(cluster.pod(ns, "doomed")),
        timeout=90,
        what="pod doomed Ready",
        state=lambda: cluster.pod(ns, "doomed").get("status"),
    )
    with PodRecorder(cluster, ns) as rec:
        time.sleep(1)
        cluster.core.delete_namespaced_pod("doomed", ns, grace_period_seconds=5)
        wait_until(
            lambda: not cluster.pod_exists(ns, "doomed"),
            timeout=60,
            what="pod doomed removed",
            state=lambda: cluster.pod(ns, "doomed"),
        )
        time.sleep(1)
    states = rec.states("doomed")
    deleting = [s for s in states if s["metadata"].get("deletionTimestamp")]
    assert deleting, f"no state with a deletionTimestamp seen: {len(states)} states"
    stopped = [
        s
        for s in deleting
        if s["status"].get("containerStatuses")
        and all(c["state"].get("terminated") for c in s["status"]["containerStatuses"])
    ]
    assert stopped, "the containers were never reported stopped before removal:\n" + "\n".join(
        str(s["status"].get("containerStatuses")) for s in deleting
    )
    assert any(t == "DELETED" for t, n, _ in rec.seen if n == "doomed")
    reasons = [e.get("reason") for e in cluster.events_for(ns, "doomed")]
    for want in ("Scheduled", "Killing"):
        assert want in reasons, f"event {want} missing; events: {reasons}"
    # The trail is in order: the container started before it was killed.
    assert "Started" in reasons, reasons


def test_pods_on_different_virtual_nodes_get_distinct_ips(cluster: Cluster, ns: str, agents: Agents) -> None:
    """The cluster network model: every pod has its own IP, whichever agent runs it."""
    names = [f"ip-{node}-{i}" for node in (STABLE_NODE, FLAKY_NODE) for i in range(3)]
    for n in names:
        node = STABLE_NODE if STABLE_NODE in n else FLAKY_NODE
        cluster.core.create_namespaced_pod(ns, pod_manifest(n, node=node))

    def ips() -> dict[str, str]:
        found = {p["metadata"]["name"]: (p.get("status") or {}).get("podIP") for p in cluster.pods(ns)}
        return found if all(found.get(n) for n in names) else {}

    found = wait_until(
        ips, timeout=90, what="an IP on every pod", state=lambda: _pods_summary(cluster, ns, None)
    )
    by_ip: dict[str, list[str]] = {}
    for name, ip in found.items():
        by_ip.setdefault(ip, []).append(name)
    shared = {ip: pods for ip, pods in by_ip.items() if len(pods) > 1}
    assert not shared, f"pods sharing an IP: {shared}"
