"""Each node of ``podstatus node --nodes N`` has its own InternalIP and ``spec.podCIDR``, and its
pods get IPs from that CIDR, unique across the process's nodes (issue 22.6).

The real command against the embedded API server over HTTP on loopback.
"""

from __future__ import annotations

import ipaddress
import signal
from collections.abc import Callable

import pytest
from nodeproc import NodeProcess, pod_body, wait_for

from podstatus.clients.http import HttpKubeClient

NODES = ("edge-1", "edge-2", "edge-3")
TOLERATE = [{"key": "podstatus.io/virtual-node", "operator": "Exists", "effect": "NoSchedule"}]


def test_three_nodes_have_their_own_addresses_cidrs_and_pod_ips(
    http_api: HttpKubeClient, node_procs: Callable[..., NodeProcess]
) -> None:
    node = node_procs("--name", "edge", "--nodes", "3")
    nodes = wait_for(
        lambda: (
            (got := {n["metadata"]["name"]: n for n in http_api.list_nodes()[0]}).keys() >= set(NODES) and got
        ),
        what="three nodes registered",
    )
    cidrs = {name: ipaddress.ip_network(nodes[name]["spec"]["podCIDR"]) for name in NODES}
    for name in NODES:
        assert nodes[name]["spec"]["podCIDRs"] == [str(cidrs[name])]
    assert not any(a.overlaps(b) for a in cidrs.values() for b in cidrs.values() if a is not b), cidrs
    internal = {
        name: next(a["address"] for a in nodes[name]["status"]["addresses"] if a["type"] == "InternalIP")
        for name in NODES
    }
    assert len(set(internal.values())) == 3, internal

    for name in NODES:
        for i in range(4):
            http_api.create_pod(pod_body(f"{name}-p{i}", name, tolerations=TOLERATE))

    def pod_ips() -> dict[str, tuple[str, str, str]] | None:
        pods, _ = http_api.list_pods()
        got = {p.name: (p.spec.node_name or "", p.status.pod_ip or "", p.status.host_ip or "") for p in pods}
        return got if len(got) == 12 and all(ip for _, ip, _ in got.values()) else None

    ips = wait_for(pod_ips, timeout=30, what="every pod with an IP")
    assert len({ip for _, ip, _ in ips.values()}) == 12, ips  # unique across the process's nodes
    for name, (node_name, ip, host_ip) in ips.items():
        assert ipaddress.ip_address(ip) in cidrs[node_name], (name, ip, cidrs[node_name])
        assert host_ip == internal[node_name], (name, host_ip)
    assert node.proc.poll() is None, node.err()  # still running
    node.signal(signal.SIGTERM)
    code, _, _ = node.wait(30)
    assert code == 0, node.err()


def test_the_plan_gives_distinct_ranges_and_the_pool_reuses_freed_ips() -> None:
    from podstatus.node import NodeNetwork, PodIPPool

    plans = [NodeNetwork.for_index(i) for i in range(3072)]
    assert len({p.internal_ip for p in plans}) == len({p.pod_cidr for p in plans}) == 3072
    assert plans[0] == NodeNetwork("10.20.0.1", "10.244.0.0/24")
    assert plans[3071].pod_cidr == "10.255.255.0/24"
    with pytest.raises(ValueError):
        NodeNetwork.for_index(-1)
    pool = PodIPPool("10.244.7.0/24")
    got = [pool.allocate() for _ in range(253)]
    assert got[0] == "10.244.7.2" and got[-1] == "10.244.7.254" and len(set(got)) == 253
    assert pool.allocate() is None  # full: .0, .1 (the bridge) and .255 are never given
    pool.release("10.244.7.9")
    assert pool.allocate() == "10.244.7.9"
    assert not pool.claim("10.9.0.1")
