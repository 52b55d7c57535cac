"""Concurrency: every setter from many threads while the sync loop runs; stop() while requests hang."""

from __future__ import annotations

import random
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

import pytest
from relkit import report

from podstatus import (
    BasicPodManager,
    ContainerState,
    ContainerStateRunning,
    ContainerStatus,
    Pod,
    PodCondition,
    PodStatus,
    SyncRecord,
    new_manager,
)
from podstatus.clients.embedded import EmbeddedClient
from podstatus.clients.http import HttpKubeClient
from podstatus.deletion import FakePodDeletionSafety
from podstatus.server.faults import FaultPlan
from podstatus.server.http import EmbeddedApiServer

MODES: dict[str, dict[str, Any]] = {"kubelet": {}, "fast": {"fast_path": True}}
NS = "conc"


@pytest.fixture
def server() -> Iterator[EmbeddedApiServer]:
    with EmbeddedApiServer() as srv:
        srv.store.ensure_namespace(NS)
        yield srv


def make_pods(server: EmbeddedApiServer, count: int) -> list[Pod]:
    pods = []
    for i in range(count):
        body = {
            "metadata": {"name": f"c-{i}", "namespace": NS},
            "spec": {
                "nodeName": "n1",
                "restartPolicy": "Always",
                "containers": [{"name": "a", "image": "busybox"}, {"name": "b", "image": "busybox"}],
            },
        }
        stored = server.store.create("pods", NS, body)
        assert stored.pod is not None
        pods.append(stored.pod)
    return pods


def cid(pod: Pod, name: str) -> str:
    return f"containerd://{pod.uid[:8]}{name}"


def running_status(pod: Pod, message: str, ready: bool = False) -> PodStatus:
    statuses = tuple(
        ContainerStatus(
            name=n,
            image="busybox",
            ready=ready,
            started=True,
            container_id=cid(pod, n),
            state=ContainerState(running=ContainerStateRunning()),
        )
        for n in ("a", "b")
    )
    ready_text = "True" if ready else "False"
    return PodStatus(
        phase="Running",
        message=message,
        container_statuses=statuses,
        conditions=(
            PodCondition(type="Ready", status=ready_text),
            PodCondition(type="ContainersReady", status=ready_text),
            PodCondition(type="PodScheduled", status="True"),
        ),
    )


@pytest.mark.timeout(60)
@pytest.mark.parametrize("mode", list(MODES))
def test_every_setter_from_many_threads(server: EmbeddedApiServer, mode: str) -> None:
    pods = make_pods(server, 16)
    counted, toggled, terminated, orphans = pods[:6], pods[6:12], pods[12:14], pods[14:]
    pm = BasicPodManager()
    for p in pods:
        pm.add_pod(p)
    synced: dict[str, list[int]] = defaultdict(list)
    sync_lock = threading.Lock()

    def on_sync(record: SyncRecord) -> None:
        with sync_lock:
            synced[record.pod_uid].append(record.version)

    manager = new_manager(
        EmbeddedClient(server), pm, FakePodDeletionSafety(), sync_period=0.2, on_sync=on_sync, **MODES[mode]
    )
    for p in pods:
        manager.set_pod_status(p, running_status(p, "initial"))
    calls: dict[str, int] = defaultdict(int)
    calls_lock = threading.Lock()
    errors: list[BaseException] = []
    stop = threading.Event()
    seen_versions: dict[str, list[int]] = defaultdict(list)

    def writer(tid: int) -> None:
        rng = random.Random(tid)
        n = 0
        try:
            while not stop.is_set():
                n += 1
                action = rng.randrange(6)
                if action <= 1:
                    p = rng.choice(counted)
                    with calls_lock:  # count, then call: the count is what must arrive
                        calls[p.uid] += 1
                        manager.set_pod_status(p, running_status(p, f"t{tid}-{n}"))
                elif action == 2:
                    p = rng.choice(toggled)
                    manager.set_container_readiness(p.uid, cid(p, rng.choice("ab")), rng.random() < 0.5)
                elif action == 3:
                    p = rng.choice(toggled)
                    manager.set_container_startup(p.uid, cid(p, rng.choice("ab")), rng.random() < 0.5)
                elif action == 4:
                    manager.terminate_pod(rng.choice(terminated))
                    manager.set_pod_status(terminated[0], running_status(terminated[0], f"late-{tid}-{n}"))
                else:
                    manager.remove_orphaned_statuses([p.uid for p in pods if p not in orphans])
                    p = rng.choice(orphans)
                    manager.set_pod_status(p, running_status(p, f"o{tid}-{n}"))
        except BaseException as err:  # pragma: no cover - reported below
            errors.append(err)

    def sampler() -> None:
        while not stop.is_set():
            for p in counted + toggled:
                seen_versions[p.uid].append(manager.get_status_version(p.uid))
            time.sleep(0.001)

    threads = [threading.Thread(target=writer, args=(i,), daemon=True) for i in range(8)]
    threads.append(threading.Thread(target=sampler, daemon=True))
    manager.start()
    for t in threads:
        t.start()
    time.sleep(3.0)
    stop.set()
    for t in threads:
        t.join(5)
    assert not any(t.is_alive() for t in threads), "a setter thread is stuck (deadlock?)"
    assert not errors, errors
    # Everything reaches the server, and nothing sent is lost.
    deadline = time.monotonic() + 10
    while manager.pending_count() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert manager.pending_count() == 0
    started = time.monotonic()
    manager.stop(timeout=5)
    stop_took = time.monotonic() - started
    for p in counted:
        # Versions rise by exactly one per accepted change: 1 for "initial", then one per call.
        assert manager.get_status_version(p.uid) == 1 + calls[p.uid], p.name
        cached = manager.get_pod_status(p.uid)
        assert cached is not None
        server_status = server.store.get("pods", NS, p.name).obj["status"]
        assert server_status["message"] == cached.message
    for uid, versions in seen_versions.items():
        assert versions == sorted(versions), f"version went down for {uid}"
    orphan_uids = {p.uid for p in orphans}  # dropped and cached again: their versions start over
    for uid, versions in synced.items():
        if uid in orphan_uids:
            continue
        assert versions == sorted(versions), f"syncs of {uid} reordered: {versions}"
    for p in terminated:
        phase = server.store.get("pods", NS, p.name).obj["status"]["phase"]
        assert phase == "Failed", (p.name, phase)
    assert stop_took < 2
    report(
        f"concurrency[{mode}] setter calls counted={sum(calls.values())}, "
        f"syncs={sum(len(v) for v in synced.values())}, version samples={sum(len(v) for v in seen_versions.values())}, "
        f"stop took {stop_took:.2f}s"
    )


@pytest.mark.timeout(30)
@pytest.mark.parametrize("mode", list(MODES))
def test_stop_returns_promptly_while_requests_hang(server: EmbeddedApiServer, mode: str) -> None:
    pods = make_pods(server, 6)
    pm = BasicPodManager()
    for p in pods:
        pm.add_pod(p)
    plan = FaultPlan(timeout=1.0, hold=30.0).install(server)
    client = HttpKubeClient(server.url, timeout=(2.0, 30.0))
    manager = new_manager(client, pm, FakePodDeletionSafety(), sync_period=0.2, **MODES[mode])
    manager.start()
    for p in pods:
        manager.set_pod_status(p, running_status(p, "hang"))
    deadline = time.monotonic() + 5
    while plan.counts()["timeout"] == 0 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert plan.counts()["timeout"] > 0, "no request is hanging yet"
    started = time.monotonic()
    manager.stop(timeout=1.0)
    took = time.monotonic() - started
    plan.stop()
    client.close()
    assert took < 1.5, f"stop() took {took:.2f}s while requests hung"
    report(f"stop[{mode}] returned in {took:.2f}s with {plan.counts()['timeout']} requests hanging")
