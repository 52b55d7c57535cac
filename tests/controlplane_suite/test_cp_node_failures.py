"""The agent of the flaky node is paused (heartbeats withheld) and killed; the controllers react.

Both cases pin their pods to ``cp-flaky`` (``spec.nodeName``), wait for full recovery
before they return, and so never disturb the other cases or the stable node.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Any

import pytest
from cpkit import (
    FLAKY_NODE,
    NODE_MONITOR_GRACE,
    Agent,
    Agents,
    Cluster,
    NodeWatcher,
    PodRecorder,
    agent_supports,
    condition,
    condition_status,
    pod_manifest,
    pod_ready,
    restart_counts,
    wait_until,
)

pytestmark = pytest.mark.apiserver

UNREACHABLE = "node.kubernetes.io/unreachable"
NOT_READY = "node.kubernetes.io/not-ready"


def _taints(node: dict[str, Any]) -> set[tuple[str, str]]:
    return {(t["key"], t["effect"]) for t in (node.get("spec") or {}).get("taints") or []}


def _node_state(cluster: Cluster) -> dict[str, Any]:
    node = cluster.node(FLAKY_NODE)
    return {
        "ready": condition(node, "Ready"),
        "taints": node["spec"].get("taints"),
        "lease": cluster.lease(FLAKY_NODE)["spec"],
    }


def _pods_state(cluster: Cluster, ns: str) -> list[dict[str, Any]]:
    return [
        {
            "name": p["metadata"]["name"],
            "phase": p["status"].get("phase"),
            "conditions": [
                (c["type"], c["status"], c.get("reason")) for c in p["status"].get("conditions") or []
            ],
            "restarts": restart_counts(p),
        }
        for p in cluster.pods(ns)
    ]


def test_heartbeats_withheld_past_the_grace_period_and_back(
    cluster: Cluster, ns: str, agents: Agents
) -> None:
    names = ["svc-a", "svc-b"]
    for n in names:
        cluster.core.create_namespaced_pod(ns, pod_manifest(n, node=FLAKY_NODE))
    wait_until(
        lambda: all(pod_ready(cluster.pod(ns, n)) for n in names),
        timeout=90,
        what="pods Ready",
        state=lambda: _pods_state(cluster, ns),
    )

    # The whole-session watcher's check, on this node: it must see what goes wrong here.
    watcher = NodeWatcher(cluster, FLAKY_NODE, interval=1.0)
    watcher.start()
    agents.flaky.signal(signal.SIGSTOP)
    paused = time.monotonic()
    try:
        # The node lifecycle controller: Ready Unknown after the grace period, then the taints.
        wait_until(
            lambda: condition_status(cluster.node(FLAKY_NODE), "Ready") == "Unknown",
            timeout=NODE_MONITOR_GRACE + 45,
            what="node Ready=Unknown",
            state=lambda: _node_state(cluster),
        )
        unknown_after = time.monotonic() - paused
        ready = condition(cluster.node(FLAKY_NODE), "Ready")
        assert ready is not None and ready.get("reason") == "NodeStatusUnknown", ready
        wait_until(
            lambda: (
                {(UNREACHABLE, "NoSchedule"), (UNREACHABLE, "NoExecute")} <= _taints(cluster.node(FLAKY_NODE))
            ),
            timeout=30,
            what="unreachable taints (NoSchedule and NoExecute)",
            state=lambda: _node_state(cluster),
        )
        # ... and the pods on it marked not ready by the controller, not by the (paused) agent.
        wait_until(
            lambda: all(condition_status(cluster.pod(ns, n), "Ready") == "False" for n in names),
            timeout=30,
            what="pods Ready=False",
            state=lambda: _pods_state(cluster, ns),
        )
        # Not before the grace period: the controller waited for the heartbeats to be late.
        assert unknown_after >= NODE_MONITOR_GRACE - 12, f"Unknown after only {unknown_after:.1f} s"
        symptoms = ("Ready=", "taints added", "lease renewed")
        wait_until(
            lambda: all(x in "\n".join(watcher.violations) for x in symptoms),
            timeout=15,
            what=f"the node watcher to report {symptoms}",
            state=lambda: watcher.violations[-10:],
        )
    finally:
        agents.flaky.signal(signal.SIGCONT)
        watcher.stop()

    wait_until(
        lambda: condition_status(cluster.node(FLAKY_NODE), "Ready") == "True",
        timeout=60,
        what="node Ready again",
        state=lambda: _node_state(cluster),
    )
    wait_until(
        lambda: not {t for t in _taints(cluster.node(FLAKY_NODE)) if t[0] in (UNREACHABLE, NOT_READY)},
        timeout=60,
        what="taints gone",
        state=lambda: _node_state(cluster),
    )
    # The agent restores what the controller overwrote.
    wait_until(
        lambda: all(pod_ready(cluster.pod(ns, n)) for n in names),
        timeout=90,
        what="pods Ready again (restored by the agent)",
        state=lambda: _pods_state(cluster, ns),
    )
    for n in names:
        pod = cluster.pod(ns, n)
        assert pod["status"]["phase"] == "Running", pod["status"]
        assert pod["metadata"].get("deletionTimestamp") is None, "the pod was evicted"


_ORDER = {"Pending": 0, "Running": 1, "Succeeded": 2, "Failed": 2}


def test_agent_killed_and_restarted_keeps_every_pod_state(cluster: Cluster, ns: str, agents: Agents) -> None:
    specs = {
        "serve": pod_manifest("serve", node=FLAKY_NODE),
        "crash": pod_manifest("crash", behaviour="crash", node=FLAKY_NODE),
        "done": pod_manifest("done", behaviour="complete", restart_policy="Never", node=FLAKY_NODE),
        "broken": pod_manifest("broken", behaviour="fail", restart_policy="Never", node=FLAKY_NODE),
    }
    for manifest in specs.values():
        cluster.core.create_namespaced_pod(ns, manifest)

    def settled() -> bool:
        pods = {n: cluster.pod(ns, n) for n in specs}
        return (
            pod_ready(pods["serve"])
            and pods["done"]["status"].get("phase") == "Succeeded"
            and pods["broken"]["status"].get("phase") == "Failed"
            and restart_counts(pods["crash"]).get("app", 0) >= 2
        )

    wait_until(
        settled,
        timeout=120,
        what="serve Ready, done Succeeded, broken Failed, crash restarted twice",
        state=lambda: _pods_state(cluster, ns),
    )
    before = {n: cluster.pod(ns, n) for n in specs}
    take_over = agent_supports("--take-over")

    with PodRecorder(cluster, ns) as rec:
        time.sleep(1)
        agents.flaky.kill()
        lease_before = cluster.lease(FLAKY_NODE)["spec"].get("renewTime")
        time.sleep(2)
        agents.flaky.start(take_over=take_over)
        # The new process heartbeats again and keeps the running pod Ready ...
        wait_until(
            lambda: cluster.lease(FLAKY_NODE)["spec"].get("renewTime") != lease_before,
            timeout=40,
            what="the restarted agent renews the Lease",
            state=lambda: {"node": _node_state(cluster), "log": agents.flaky.log_text()[-3000:]},
        )
        wait_until(
            lambda: (
                restart_counts(cluster.pod(ns, "crash")).get("app", 0)
                > restart_counts(before["crash"])["app"]
            ),
            timeout=60,
            what="the crash-looping pod restarting again under the new agent",
            state=lambda: _pods_state(cluster, ns),
        )
        time.sleep(3)
    assert agents.flaky.alive(), agents.flaky.log_text()[-3000:]

    after = {n: cluster.pod(ns, n) for n in specs}
    assert pod_ready(after["serve"]), after["serve"]["status"]
    assert after["done"]["status"]["phase"] == "Succeeded", after["done"]["status"]
    assert after["broken"]["status"]["phase"] == "Failed", after["broken"]["status"]
    # The containers were not restarted by the new agent (same start time, same restart count).
    for n in ("serve",):
        b, a = before[n]["status"]["containerStatuses"][0], after[n]["status"]["containerStatuses"][0]
        assert a.get("restartCount") == b.get("restartCount"), (b, a)
        assert (a["state"].get("running") or {}).get("startedAt") == (b["state"].get("running") or {}).get(
            "startedAt"
        ), (b, a)

    # Every state seen during the kill and the restart: no phase went back, no restart count fell.
    problems: list[str] = []
    for n in specs:
        last_phase = before[n]["status"]["phase"]
        last_counts = restart_counts(before[n])
        for pod in rec.states(n):
            phase = pod["status"].get("phase")
            if _ORDER.get(phase, -1) < _ORDER[last_phase] or (
                last_phase in ("Succeeded", "Failed") and phase != last_phase
            ):
                problems.append(
                    f"{n}: phase {last_phase} -> {phase} (rv {pod['metadata']['resourceVersion']})"
                )
            counts = restart_counts(pod)
            for c, k in last_counts.items():
                if counts.get(c, 0) < k:
                    problems.append(f"{n}: restartCount of {c} {k} -> {counts.get(c)}")
            last_phase = phase or last_phase
            last_counts = {**last_counts, **counts}
    assert not problems, "\n".join(problems)


def test_sigterm_with_on_stop_cordon_marks_the_node_unschedulable_and_exits(
    cluster: Cluster, agent_kubeconfig: str, agents: Agents, tmp_path: Path
) -> None:
    """A third agent, stopped as a Deployment's pod would be: SIGTERM; it cordons its node and exits 0."""
    name = "cp-cordon-1"
    agent = Agent(name, agent_kubeconfig, tmp_path / f"{name}.log", ["--on-stop", "cordon"])
    agent.start()
    try:
        wait_until(
            lambda: condition_status(cluster.node(name), "Ready") == "True",
            timeout=90,
            what=f"node {name} Ready",
            state=lambda: agent.log_text()[-3000:],
        )
        assert not cluster.node(name)["spec"].get("unschedulable")
        code = agent.stop(timeout=30)
        assert code == 0, f"exit {code}:\n{agent.log_text()[-3000:]}"
        node = cluster.node(name)
        assert node["spec"].get("unschedulable") is True, node["spec"]
        reasons = [e.get("reason") for e in cluster.events_for("default", name)]
        assert "NodeNotSchedulable" in reasons, reasons
    finally:
        agent.stop()
        cluster.core.delete_node(name)
