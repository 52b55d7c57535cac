"""Soak: many pods through full lifecycles while the API server misbehaves; every write is checked.

A simulated node (``NodeAgent``: real status manager, make-believe containers)
runs a mix of workloads (long-running with readiness gates, batch jobs,
init containers, sidecars, crash loops, OnFailure retries). The users around
it create pods, set readiness gates (another writer), delete pods gracefully,
force-delete some, and delete-and-recreate some under the same name, one of
them from inside the server at the N-th request for that pod. Meanwhile a
``FaultPlan`` makes the manager's requests fail (500/503/429), time out, drop
the connection and answer stale-resourceVersion conflicts, and a
``WriteObserver`` behind the faults checks every request that reaches the API
logic.

When the faults stop and the node goes quiet, within three full sync periods
the server must hold, for every pod, the manager's last accepted status (as
SPEC 4.7 merges it), and every deletion handshake must be over.

The short versions run in ``make test``; ``make soak`` runs the long ones (``-m slow``).
"""

from __future__ import annotations

import contextlib
import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import msgspec
import pytest
from relkit import (
    FreezableManager,
    StoreClient,
    WriteObserver,
    phase_counts,
    report,
    unfinished_handshakes,
    unsynced_pods,
)

from podstatus import BasicPodManager, PodStatus, new_manager
from podstatus.clients.http import HttpKubeClient
from podstatus.errors import ApiError
from podstatus.node.simpod import Timings
from podstatus.server.faults import FaultPlan, recreate_pod
from podstatus.server.http import EmbeddedApiServer
from podstatus.simulator.agent import NodeAgent
from podstatus.workloads import builtin_mix

NODE = "soak-node"
NS = "soak"
MODES: dict[str, dict[str, Any]] = {"kubelet": {}, "fast": {"fast_path": True}}

FAST_TIMINGS = Timings(
    image_pull=(0.05, 0.4),
    init_run=(0.05, 0.3),
    startup=(0.05, 0.3),
    readiness=(0.05, 0.5),
    job_run=(0.5, 3.0),
    crash_run=(0.2, 0.8),
    crash_backoff=0.3,
    crash_backoff_max=1.5,
    stop=(0.05, 0.4),
)


@dataclass(frozen=True)
class SoakConfig:
    pods: int
    duration: float
    sync_period: float
    faults: str
    seed: int = 7


SHORT = SoakConfig(
    pods=24,
    duration=7.0,
    sync_period=1.5,
    faults="error=0.2,latency=1ms..30ms,conflict=0.3,reset=0.06,timeout=0.02,hold=2.5s",
)
LONG = SoakConfig(
    pods=150,
    duration=60.0,
    sync_period=3.0,
    faults="error=0.25,latency=1ms..80ms,conflict=0.3,reset=0.08,timeout=0.03,hold=3s",
)


class _Safety:
    """Deletion safety from the simulated containers (as the simulator's own).

    ``sim_pod`` is looked up when asked: the manager is built with this while its agent is.
    """

    def __init__(self, sim_pod: Callable[[str], Any]) -> None:
        self.sim_pod = sim_pod

    def pod_resources_are_reclaimed(self, pod: Any, status: Any) -> bool:
        sim = self.sim_pod(pod.uid)
        return sim is None or not sim.any_running()

    def pod_could_have_running_containers(self, pod: Any) -> bool:
        sim = self.sim_pod(pod.uid)
        return sim is not None and sim.any_running()


def manifests(count: int, seed: int) -> list[dict[str, Any]]:
    out = builtin_mix(count, namespace=NS, seed=seed)
    for i, m in enumerate(out):
        m["spec"]["nodeName"] = NODE
        behaviour = m["metadata"]["annotations"]["podstatus.io/behaviour"]
        if i % 3 == 0 and behaviour in ("fail", "complete") and "initContainers" not in m["spec"]:
            # OnFailure retries: the container fails, restarts, fails... (terminated -> running is legal).
            m["spec"]["restartPolicy"] = "OnFailure"
            m["metadata"]["annotations"]["podstatus.io/behaviour"] = "fail"
    return out


def set_gates(store: Any, agent: NodeAgent, done: set[str]) -> int:
    """An outside controller marks readiness gates once the containers are ready (another writer)."""
    count = 0
    for sim in agent.sims():
        pod = sim.pod
        gates = [g.condition_type for g in pod.spec.readiness_gates or ()]
        if not gates or pod.uid in done or sim.deleting or not all(c.ready for c in sim.containers):
            continue
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        patch = {
            "metadata": {"uid": pod.uid},
            "status": {
                "conditions": [{"type": t, "status": "True", "lastTransitionTime": now} for t in gates]
            },
        }
        try:
            store.patch("pods", pod.namespace, pod.name, msgspec.json.encode(patch), subresource="status")
            done.add(pod.uid)
            count += 1
        except ApiError:
            pass
    return count


@pytest.fixture
def server() -> Iterator[EmbeddedApiServer]:
    with EmbeddedApiServer(reap_interval=0.5) as srv:
        srv.store.ensure_namespace(NS)
        yield srv


def run_soak(server: EmbeddedApiServer, mode: str, cfg: SoakConfig) -> dict[str, Any]:
    rng = random.Random(cfg.seed)
    store = server.store
    client = HttpKubeClient(server.url, timeout=(2.0, 2.0))
    built: list[Any] = []

    def soak_manager(pods: BasicPodManager, safety: Any) -> Any:
        # The agent is given a manager of the soak's own: over HTTP with faults, frozen at will.
        manager = new_manager(
            client, pods, _Safety(lambda uid: agent.sim_pod(uid)), sync_period=cfg.sync_period, **MODES[mode]
        )
        built.extend((manager, FreezableManager(manager)))
        return built[1]

    agent = NodeAgent(
        StoreClient(store), NODE, timings=FAST_TIMINGS, seed=cfg.seed, manager_factory=soak_manager
    )
    manager, proxy = built

    def stopped(uid: str) -> bool:
        sim = agent.sim_pod(uid)
        return sim is None or not sim.any_running()

    observer = WriteObserver(server, sync_period=cfg.sync_period, containers_stopped=stopped).install()
    plan = FaultPlan.parse(f"{cfg.faults},seed={cfg.seed}").install(server)

    recreated: list[str] = []
    wanted = manifests(cfg.pods, cfg.seed)
    serving = [
        m["metadata"]["name"]
        for m in wanted
        if m["metadata"]["annotations"]["podstatus.io/behaviour"] == "serve"
    ]
    # Some pods are deleted and recreated from inside the server, at their N-th request.
    for name in serving[: max(1, len(serving) // 8)]:
        plan.on_nth_request(
            NS,
            name,
            rng.randint(2, 6),
            lambda info: recreated.append(recreate_pod(store, info.namespace, info.name)),
        )

    agent.register_node()
    agent.start()
    start = time.monotonic()
    gates: set[str] = set()
    deleted_gracefully = force_deleted = 0
    try:
        for _i, m in enumerate(wanted):
            store.create("pods", NS, m)
            time.sleep(cfg.duration * 0.2 / len(wanted))
        phase_two = phase_three = False
        while time.monotonic() - start < cfg.duration:
            time.sleep(0.1)
            set_gates(store, agent, gates)
            elapsed = time.monotonic() - start
            if not phase_two and elapsed > cfg.duration * 0.4:
                phase_two = True
                victims = [s for s in agent.sims() if s.behaviour in ("serve", "crash") and not s.deleting]
                rng.shuffle(victims)
                for sim in victims[: max(2, len(victims) // 3)]:
                    try:
                        store.delete("pods", NS, sim.pod.name, grace_period_seconds=600, uid=sim.uid)
                        deleted_gracefully += 1
                    except ApiError:
                        pass
            if not phase_three and elapsed > cfg.duration * 0.6:
                phase_three = True
                others = [s for s in agent.sims() if not s.deleting]
                rng.shuffle(others)
                for sim in others[:2]:  # users force-delete: the manager may still hold a status
                    try:
                        store.delete("pods", NS, sim.pod.name, grace_period_seconds=0, uid=sim.uid)
                        force_deleted += 1
                    except ApiError:
                        pass
                for sim in others[2:3]:
                    with contextlib.suppress(ApiError):
                        recreated.append(recreate_pod(store, NS, sim.pod.name))
        # The world stops misbehaving and the node goes quiet.
        proxy.frozen.set()
        plan.stop()
        stopped_at = time.monotonic()
        deadline = stopped_at + 3 * cfg.sync_period
        left: list[str] = ["?"]
        open_handshakes: list[str] = []
        while time.monotonic() < deadline:
            left = unsynced_pods(
                manager, agent.pods, store, _Safety(agent.sim_pod).pod_could_have_running_containers
            )
            open_handshakes = unfinished_handshakes(store, stopped)
            if not left and not open_handshakes:
                break
            time.sleep(0.05)
        converged_in = time.monotonic() - stopped_at
    finally:
        agent.stop()
        plan.uninstall()
        client.close()
    storm = observer.check_storm()
    counts = plan.counts()
    result = {
        "mode": mode,
        "pods": len(wanted),
        "requests": observer.requests,
        "writes checked": observer.writes,
        "faults injected": plan.total,
        "faults": {k: v for k, v in counts.items() if k != "requests" and v},
        "deleted gracefully": deleted_gracefully,
        "force deleted": force_deleted,
        "recreated": len(recreated),
        "uid refusals": observer.uid_refusals,
        **storm,
        "phases": phase_counts(store),
        "converged in s": round(converged_in, 2),
        "violations": observer.violations(),
    }
    report(f"soak[{mode}] " + ", ".join(f"{k}={v}" for k, v in result.items()))
    assert observer.violations() == 0, observer.examples()
    assert not left, f"not synced {3 * cfg.sync_period}s after the faults stopped: {left}"
    assert not open_handshakes, f"deletion handshakes not finished: {open_handshakes}"
    assert manager.pending_count() == 0 or not left
    # The faults really happened, of every kind, and the scenario really covered the cases.
    assert counts["error"] and counts["reset"], counts
    if mode == "fast":
        assert counts["conflict"], counts  # only resourceVersion writes can meet one
    assert recreated and deleted_gracefully and force_deleted
    assert observer.writes > cfg.pods
    return result


@pytest.mark.timeout(60)
@pytest.mark.parametrize("mode", list(MODES))
def test_soak_short(server: EmbeddedApiServer, mode: str) -> None:
    run_soak(server, mode, SHORT)


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("mode", list(MODES))
def test_soak_long(server: EmbeddedApiServer, mode: str) -> None:
    result = run_soak(server, mode, LONG)
    assert result["faults"].get("timeout")


# --- the observer itself catches what it claims to ---------------------------------------------


def test_observer_catches_each_violation(server: EmbeddedApiServer) -> None:
    """Bad writes sent on purpose: each one is counted against the right invariant."""
    stopped = {"yes": False}
    observer = WriteObserver(server, sync_period=1.0, containers_stopped=lambda uid: stopped["yes"]).install()
    store = server.store
    body = {
        "metadata": {"name": "v"},
        "spec": {"nodeName": NODE, "restartPolicy": "Never", "containers": [{"name": "c", "image": "i"}]},
    }
    uid = store.create("pods", NS, body).uid
    other = store.create("pods", NS, {**body, "metadata": {"name": "w"}}).uid
    http = HttpKubeClient(server.url, timeout=2.0)

    def patch(name: str, status: dict[str, Any], pod_uid: str | None) -> None:
        doc: dict[str, Any] = {"status": status}
        if pod_uid:
            doc["metadata"] = {"uid": pod_uid}
        with contextlib.suppress(ApiError):
            http.patch_pod_status(NS, name, msgspec.json.encode(doc))

    tag = other.replace("-", "")[:24]
    term = {"terminated": {"exitCode": 0}}
    patch("v", {"phase": "Running"}, None)  # no UID precondition
    patch("v", {"containerStatuses": [{"name": "c", "containerID": f"containerd://{tag}", "state": {}}]}, uid)
    patch("v", {"phase": "Succeeded", "containerStatuses": [{"name": "c", "state": term}]}, uid)
    patch("v", {"phase": "Running"}, uid)  # terminal undone (the server refuses: 422)
    patch("v", {"containerStatuses": [{"name": "c", "state": {"running": {}}}]}, uid)  # Never: illegal
    store.delete("pods", NS, "w", grace_period_seconds=0)
    for _ in range(30):  # a storm for a pod that is gone
        with contextlib.suppress(ApiError):
            http.get_pod(NS, "w")
    http.delete_pod(NS, "v", grace_period_seconds=0, uid=uid)  # no deletionTimestamp, containers running
    observer.check_storm()
    found = {i.name: i.violations for i in observer.invariants()}
    assert observer.unguarded.violations == 1, found
    assert observer.wrong_uid.violations == 1, found
    assert observer.terminal_undone.violations == 1, found
    assert observer.illegal_transition.violations == 1, found
    assert observer.refused.violations == 2, found
    assert observer.early_delete.violations == 1, found
    assert observer.storm.violations == 1, found


# --- gone pods: no request storm, in either mode --------------------------------------------


@pytest.mark.timeout(30)
@pytest.mark.parametrize("mode", list(MODES))
def test_no_request_storm_for_a_pod_gone_behind_the_nodes_back(server: EmbeddedApiServer, mode: str) -> None:
    """The pod is force-deleted and the agent never hears of it (its status stays cached)."""
    period = 0.5
    observer = WriteObserver(server, sync_period=period, containers_stopped=lambda uid: True).install()
    FaultPlan.parse("error=0.2,latency=1ms..10ms,seed=5").install(server)
    body = {
        "metadata": {"name": "gone"},
        "spec": {"nodeName": NODE, "containers": [{"name": "c", "image": "i"}]},
    }
    pod = server.store.create("pods", NS, body).pod
    assert pod is not None
    pods = BasicPodManager()
    pods.add_pod(pod)
    client = HttpKubeClient(server.url, timeout=2.0)
    manager = new_manager(client, pods, _NoSafety(), sync_period=period, **MODES[mode])

    with manager:
        manager.set_pod_status(pod, PodStatus(phase="Running"))
        time.sleep(0.5)
        server.store.delete("pods", NS, "gone", grace_period_seconds=0)
        for i in range(8):  # the agent keeps reporting
            manager.set_pod_status(pod, PodStatus(phase="Running", message=f"still here {i}"))
            time.sleep(period / 2)
    storm = observer.check_storm()
    client.close()
    report(
        f"gone-pod[{mode}] {storm}, window={8 * period / 2 + 0.5:.1f}s, violations={observer.storm.violations}"
    )
    assert observer.storm.violations == 0, observer.storm.examples


class _NoSafety:
    def pod_resources_are_reclaimed(self, pod: Any, status: Any) -> bool:
        return True

    def pod_could_have_running_containers(self, pod: Any) -> bool:
        return False
