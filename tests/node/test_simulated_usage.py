"""CPU and memory use of simulated containers, and the stats Summary the provider builds from it."""

from __future__ import annotations

import itertools
import time

from simkit import pod, provider, wait_for

from podstatus.node import Timings
from podstatus.node.simusage import cpu_rate, cpu_total, memory_bytes, profile_for


def test_profiles_are_fixed_by_seed_pod_and_container() -> None:
    a = profile_for(1, "uid-a", "app", "serve")
    assert a == profile_for(1, "uid-a", "app", "serve")
    assert a != profile_for(2, "uid-a", "app", "serve")
    assert a != profile_for(1, "uid-b", "app", "serve")


def test_cumulative_cpu_is_the_integral_of_the_rate_and_never_goes_back() -> None:
    for behaviour in ("serve", "complete", "crash"):
        p = profile_for(7, "uid-x", "app", behaviour)
        ages = [i * 0.5 for i in range(2000)]
        totals = [cpu_total(p, a) for a in ages]
        assert all(b >= a for a, b in itertools.pairwise(totals))
        assert all(cpu_rate(p, a) >= 0 for a in ages)
        # The trapezoid rule over fine steps agrees with the closed form.
        step, end = 0.01, 120.0
        n = int(end / step)
        numeric = sum((cpu_rate(p, i * step) + cpu_rate(p, (i + 1) * step)) / 2 * step for i in range(n))
        assert abs(numeric - cpu_total(p, end)) / cpu_total(p, end) < 1e-3


def test_behaviour_shapes_the_figures_and_limits_hold() -> None:
    idle = [cpu_rate(profile_for(1, f"u{i}", "app", "serve"), 600) for i in range(50)]
    busy = [cpu_rate(profile_for(1, f"u{i}", "app", "complete"), 600) for i in range(50)]
    assert max(idle) < 20e6 < min(busy)  # idle: a few millicores; a job: hundreds
    limits = {"limits": {"cpu": "100m", "memory": "64Mi"}, "requests": {"cpu": "100m", "memory": "64Mi"}}
    for i in range(50):
        p = profile_for(1, f"u{i}", "app", "crash", limits)
        for age in (0, 0.1, 1, 10, 100, 1000):
            assert cpu_rate(p, age) <= 100e6
            assert memory_bytes(p, age) <= 64 * 1024 * 1024
    leak = profile_for(1, "u", "app", "crash")
    assert memory_bytes(leak, 10) > memory_bytes(leak, 1)  # a crash-looping container leaks


def test_the_stats_summary_has_the_kubelets_shape_and_changing_monotonic_counters() -> None:
    crash = Timings(
        image_pull=(0.0, 0.0),
        init_run=(0.0, 0.0),
        startup=(0.0, 0.0),
        readiness=(0.0, 0.0),
        crash_run=(0.2, 0.2),
        crash_backoff=0.1,
        crash_backoff_max=0.1,
        stop=(0.0, 0.0),
    )
    p = provider(crash)
    try:
        p.create_pod(pod("web", "serve"))
        p.create_pod(pod("loop", "crash"))
        first = p.get_stats_summary()
        node = first["node"]
        assert node["nodeName"] == "vn-1"
        for key in ("usageNanoCores", "usageCoreNanoSeconds"):
            assert isinstance(node["cpu"][key], int) and node["cpu"][key] > 0
        assert node["memory"]["workingSetBytes"] > 0 and node["memory"]["availableBytes"] > 0
        pods = {x["podRef"]["name"]: x for x in first["pods"]}
        assert pods["web"]["podRef"] == {"name": "web", "namespace": "default", "uid": "uid-web"}
        (app,) = pods["web"]["containers"]
        assert app["name"] == "app" and app["startTime"].endswith("Z")
        assert app["cpu"]["time"].endswith("Z") and app["memory"]["workingSetBytes"] > 0
        sim = p.sim_pod("uid-loop")
        assert sim is not None
        wait_for(lambda: sim.containers[0].restart_count >= 2)
        time.sleep(0.05)
        second = p.get_stats_summary()
        assert second["node"]["cpu"]["usageCoreNanoSeconds"] > node["cpu"]["usageCoreNanoSeconds"]
        for name in ("web", "loop"):
            before = pods[name]["cpu"]["usageCoreNanoSeconds"]
            after = next(x for x in second["pods"] if x["podRef"]["name"] == name)["cpu"][
                "usageCoreNanoSeconds"
            ]
            assert after > before  # the pod's counter goes on across its container's restarts
    finally:
        p.close()


def test_the_nodes_counter_keeps_the_cpu_of_deleted_pods() -> None:
    p = provider()
    try:
        p.create_pod(pod("web"))
        time.sleep(0.05)
        before = p.get_stats_summary()["node"]["cpu"]["usageCoreNanoSeconds"]
        p.delete_pod(pod("web"), 0)
        after = p.get_stats_summary()
        assert after["pods"] == []
        assert after["node"]["cpu"]["usageCoreNanoSeconds"] >= before
    finally:
        p.close()


def test_a_pod_taken_up_after_an_agent_restart_counts_from_its_real_start() -> None:
    from datetime import UTC, datetime, timedelta

    from podstatus.types import Pod

    started = (datetime.now(UTC) - timedelta(hours=1)).replace(microsecond=0)
    manifest = pod("web").to_dict()
    manifest["status"] = {
        "phase": "Running",
        "containerStatuses": [
            {
                "name": "app",
                "image": "nginx:1.27",
                "ready": True,
                "started": True,
                "restartCount": 0,
                "containerID": "containerd://abc",
                "state": {"running": {"startedAt": started.strftime("%Y-%m-%dT%H:%M:%SZ")}},
            }
        ],
    }
    p = provider()
    try:
        p.create_pod(Pod.from_dict(manifest))
        (summary_pod,) = p.get_stats_summary()["pods"]
        (app,) = summary_pod["containers"]
        assert app["startTime"] == started.strftime("%Y-%m-%dT%H:%M:%SZ")
        used = app["cpu"]["usageCoreNanoSeconds"]
        assert 3600 * 1e6 < used < 3600 * 1e9  # more than a millicore for the hour, under a core
    finally:
        p.close()
