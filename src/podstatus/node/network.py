"""Each node's own addresses: an InternalIP, a pod CIDR, and pod IPs from that CIDR.

A kubelet's node has its host's address, and ``spec.podCIDR`` from the node IPAM
controller; its runtime (CNI) gives pods IPs from that range. Virtual nodes have
neither, so :class:`NodeNetwork` plans them for the nodes of one process: node ``i``
(0-based) gets InternalIP ``10.20.0.1 + i`` (in 10.20.0.0/16) and pod CIDR the
``i``-th /24 from 10.244.0.0 (10.244.0.0/24, 10.244.1.0/24, ... up to 10.255.255.0/24:
3,072 nodes, then the plan wraps). The agent writes the CIDR into the Node's
``spec.podCIDR`` and hands it to the provider (``update_pod_cidr``, as the kubelet
hands it to the runtime); :class:`PodIPPool` gives pod IPs from it, each in use once.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

__all__ = ["NodeNetwork", "PodIPPool", "simulation_network"]

_NODE_BASE = int(ipaddress.IPv4Address("10.20.0.1"))
_NODE_COUNT = 65534  # hosts of 10.20.0.0/16
_POD_BASE = int(ipaddress.IPv4Address("10.244.0.0"))
_POD_PREFIX = 24
_POD_BLOCKS = (int(ipaddress.IPv4Address("10.255.255.0")) - _POD_BASE) // 256 + 1  # 3072


@dataclass(frozen=True)
class NodeNetwork:
    """A node's InternalIP and pod CIDR."""

    internal_ip: str
    pod_cidr: str

    @classmethod
    def for_index(cls, index: int) -> NodeNetwork:
        """The plan of the ``index``-th node of a process (0-based); distinct for 3,072 nodes."""
        if index < 0:
            raise ValueError("index must be at least 0")
        ip = ipaddress.IPv4Address(_NODE_BASE + index % _NODE_COUNT)
        block = ipaddress.IPv4Network((_POD_BASE + (index % _POD_BLOCKS) * 256, _POD_PREFIX))
        return cls(internal_ip=str(ip), pod_cidr=str(block))


_SIM_POD_BASE = int(ipaddress.IPv4Address("10.64.0.0"))
_SIM_POD_PREFIX = 18  # 16,382 pod IPs: room for a simulated node's 10,000 pods
_SIM_POD_BLOCKS = 256  # 10.64.0.0/18 .. 10.127.192.0/18


def simulation_network(index: int) -> NodeNetwork:
    """The plan of ``podstatus simulate``'s ``index``-th node: its own InternalIP (as
    :meth:`NodeNetwork.for_index`) and a /18 pod CIDR from 10.64.0.0, since a simulated node
    takes up to 10,000 pods (a /24 holds 253); distinct for 256 nodes."""
    if index < 0:
        raise ValueError("index must be at least 0")
    ip = ipaddress.IPv4Address(_NODE_BASE + index % _NODE_COUNT)
    block = ipaddress.IPv4Network(
        (_SIM_POD_BASE + (index % _SIM_POD_BLOCKS) * (1 << (32 - _SIM_POD_PREFIX)), _SIM_POD_PREFIX)
    )
    return NodeNetwork(internal_ip=str(ip), pod_cidr=str(block))


class PodIPPool:
    """Pod IPs from one CIDR, each given to one pod at a time; the first host is the gateway.

    Not thread-safe: its owner (a provider) calls it under its own lock.
    """

    def __init__(self, cidr: str) -> None:
        network = ipaddress.ip_network(cidr, strict=False)
        self.cidr = str(network)
        self._network = network
        hosts = network.num_addresses - (2 if network.version == 4 and network.prefixlen < 31 else 0)
        self._first = int(network.network_address) + (
            1 if network.version == 4 and network.prefixlen < 31 else 0
        )
        self._size = hosts
        self._next = 1  # host 0 (x.x.x.1) is the bridge's, as with the kubelet's CNI bridge
        self._used: set[int] = set()

    def __contains__(self, ip: str) -> bool:
        try:
            return ipaddress.ip_address(ip) in self._network
        except ValueError:
            return False

    def allocate(self) -> str | None:
        """A free IP, or None when every one is in use."""
        for _ in range(self._size):
            offset = self._next
            self._next = self._next + 1 if self._next + 1 < self._size else 1
            if offset not in self._used:
                self._used.add(offset)
                return str(ipaddress.ip_address(self._first + offset))
        return None

    def claim(self, ip: str) -> bool:
        """Mark ``ip`` in use (a pod resumed with it); False when it is not of this CIDR."""
        if ip not in self:
            return False
        self._used.add(int(ipaddress.ip_address(ip)) - self._first)
        return True

    def release(self, ip: str) -> None:
        if ip in self:
            self._used.discard(int(ipaddress.ip_address(ip)) - self._first)

    def in_use(self) -> int:
        return len(self._used)
