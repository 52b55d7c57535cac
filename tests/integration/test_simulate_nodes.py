"""``podstatus simulate --nodes N``: N simulated nodes in one process, as ``podstatus node --nodes N`` runs them.

Over real HTTP to the embedded API server on loopback: the pods are spread over
the nodes by ``spec.nodeName``, every node keeps its Lease, the process opens one
pod watch (not one per node), every node's status manager runs on the shared
sync pool, and every node's writes pass the invariant checker.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from podstatus import cli
from podstatus.clients.http import HttpKubeClient
from podstatus.node.heartbeat import LEASE_NAMESPACE, lease_info
from podstatus.requestcount import RequestCounter
from podstatus.server.http import EmbeddedApiServer
from podstatus.simulator import Simulation, Timings, simulated_node_names
from podstatus.workloads import builtin_mix

# Quick containers, so a few seconds see pods start, become ready, finish and be deleted.
QUICK = Timings(
    image_pull=(0.05, 0.2),
    init_run=(0.05, 0.1),
    startup=(0.05, 0.1),
    readiness=(0.05, 0.2),
    job_run=(0.3, 0.8),
    crash_run=(0.1, 0.3),
    stop=(0.05, 0.2),
)


@pytest.fixture
def server() -> Iterator[EmbeddedApiServer]:
    srv = EmbeddedApiServer("127.0.0.1", 0)
    srv.start()
    srv.store.ensure_namespace("default")
    try:
        yield srv
    finally:
        srv.stop()


def _spread(client: HttpKubeClient, names: list[str]) -> Counter[str]:
    pods, _ = client.list_pods()
    assert pods, "the run left pods on the server"
    on = Counter(pod.spec.node_name for pod in pods)
    assert set(on) <= set(names), f"pods on nodes the run does not have: {on}"
    return on


def test_three_nodes_share_one_watch_and_each_keeps_its_lease(server: EmbeddedApiServer) -> None:
    names = simulated_node_names("sim", 3)
    assert names == ["sim-1", "sim-2", "sim-3"]
    counter = RequestCounter()
    client = HttpKubeClient(server.url, requests=counter)
    started = datetime.now(UTC)
    sim = Simulation(
        client,
        builtin_mix(12, seed=3),
        nodes=names,
        duration=6.0,
        delete_fraction=0.0,  # still one delete (and one re-create): at most one pod gone
        seed=3,
        timings=QUICK,
        manager_options={"fast_path": True},
        request_counter=counter,
        # Renewals every half second: a few seconds see each node renew its Lease several times.
        agent_options={"lease_renew_interval": 0.5},
    )
    # Every node's status manager must run on the one shared sync pool.
    assert sim.runtime is not None and all(a.agent.runtime is sim.runtime for a in sim.agents)
    attached: list[Any] = []
    attach = sim.runtime.sync.attach
    sim.runtime.sync.attach = lambda t, g, p: (attached.append(t), attach(t, g, p))[1]  # type: ignore[method-assign]
    try:
        result = sim.run()
        assert result.failures() == [] and result.ok
        # The pool is handed each manager's SyncTask (scheduling never sees the manager itself).
        assert {id(t) for t in attached} == {id(a.manager._task) for a in sim.agents}
        assert sim.runtime.sync.steps > 0

        # The pods: on the 3 nodes only, and each node got its share.
        on = _spread(client, names)
        assert all(on[name] >= 3 for name in names), on
        assert [b.pods for b in result.heartbeats] == [4, 4, 4]

        # One pod watch for the process (the client's count and the server's), not one per node.
        assert result.requests["watch"] == 1
        assert server.counter.get("watch") == 1

        # Every node's writes were checked: each node's pods were patched through the checker.
        checked = {i.name: i for i in result.invariants}
        assert all(i.violations == 0 for i in result.invariants)
        assert checked["no write to a pod with another UID"].checked >= result.status_changes > 0
        reported = {pod.spec.node_name for pod in client.list_pods()[0] if pod.status.container_statuses}
        assert reported == set(names)

        # Heartbeats: each node's Lease exists, held by its node, renewed during the run.
        assert [b.node for b in result.heartbeats] == names
        for beat in result.heartbeats:
            assert beat.state == "live" and beat.renewals >= 3, beat
            assert beat.lease_age is not None and beat.lease_age < 2.0, beat
        for name in names:
            info = lease_info(client.get_lease(LEASE_NAMESPACE, name))
            assert info.holder == name and info.renew_time is not None and info.renew_time > started
    finally:
        client.close()


def test_the_cli_runs_three_nodes_and_says_so(
    server: EmbeddedApiServer,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COLUMNS", "140")
    kubeconfig = tmp_path / "kubeconfig"
    server.write_kubeconfig(kubeconfig)
    args = ["simulate", "--kubeconfig", str(kubeconfig), "--nodes", "3", "--node", "edge"]
    code = cli.main([*args, "--pods", "6", "--duration", "4", "--no-progress"])
    out = capsys.readouterr().out
    assert code == 0, out
    names = ["edge-1", "edge-2", "edge-3"]
    assert "Simulating 3 nodes edge-1 .. edge-3 (one pod watch) with 6 pods" in out
    assert "podstatus simulate: 3 nodes edge-1 .. edge-3 (one pod watch)" in out
    assert "Node heartbeats (3 nodes, 0 stale)" in out
    for name in names:
        assert re.search(rf"│ {name}\s*│\s*2\s*│\s*\d+\s*│\s*[\d.]+ s\s*│ live", out), name
    assert re.search(r"│ watch\s+│\s+1 │", out)
    for row in re.findall(r"│\s*(no [^│]+?)\s*│\s*(\d+)\s*│\s*(\d+)\s*│", out):
        assert row[2] == "0", row
    client = HttpKubeClient(server.url)
    try:
        # 2 pods placed on each node (the heartbeat rows above); at the end the run took its pods
        # and Nodes away again (--kubeconfig: a cluster is left as found), the Leases stay released.
        assert client.list_pods()[0] == [] and client.list_nodes()[0] == []
        for name in names:
            assert lease_info(client.get_lease(LEASE_NAMESPACE, name)).holder == name
    finally:
        client.close()
    assert server.counter.get("watch") == 1  # the server's count: one watch for the 3 nodes


def test_nodes_must_be_at_least_one(capsys: pytest.CaptureFixture[str]) -> None:
    for bad in ("0", "-2"):
        with pytest.raises(SystemExit) as exit_info:
            cli.main(["simulate", "--in-process", "--nodes", bad])
        assert exit_info.value.code == 2
        assert "argument --nodes: must be at least 1" in capsys.readouterr().err
    with pytest.raises(ValueError, match="--nodes must be at least 1"):
        simulated_node_names("x", 0)
    with pytest.raises(ValueError, match="at least one node"):
        Simulation(None, [], nodes=[])


def test_each_simulated_node_has_its_own_address_cidr_and_pod_ips(server: EmbeddedApiServer) -> None:
    # Issue 22.6 for `simulate --nodes N`: no node shares an InternalIP or a pod CIDR, and each
    # pod's IP comes from its node's CIDR, none given twice.
    import ipaddress

    names = simulated_node_names("ips", 3)
    client = HttpKubeClient(server.url)
    sim = Simulation(
        client,
        builtin_mix(12, seed=5),
        nodes=names,
        duration=4.0,
        delete_fraction=0.0,
        recreate=False,
        seed=5,
        timings=QUICK,
    )
    try:
        result = sim.run()
        assert result.ok, result.failures()
        nodes = {n["metadata"]["name"]: n for n in client.list_nodes()[0]}
        internal = {
            name: next(a["address"] for a in nodes[name]["status"]["addresses"] if a["type"] == "InternalIP")
            for name in names
        }
        cidrs = {name: ipaddress.ip_network(nodes[name]["spec"]["podCIDR"]) for name in names}
        assert len(set(internal.values())) == 3, internal
        assert len(set(cidrs.values())) == 3, cidrs
        ips: list[str] = []
        for pod in client.list_pods()[0]:
            if pod.status.pod_ip:
                assert ipaddress.ip_address(pod.status.pod_ip) in cidrs[pod.spec.node_name], pod.status.pod_ip
                ips.append(pod.status.pod_ip)
        assert len(ips) >= 6 and len(ips) == len(set(ips)), ips
    finally:
        client.close()
