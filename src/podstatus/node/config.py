"""``NodeConfig``: what one node agent is told, checked once when it is built.

The settings of a node (its name, intervals, limits, addresses) are values; what it talks to
(the clients, the provider, the status manager, the runtime) is passed to the agent apart.
A bad value is refused here, as a ``ValueError`` naming the field, not found later by a loop
that divides by it or sleeps for it.
"""

from __future__ import annotations

import math
import socket
import uuid
from dataclasses import dataclass, field, fields

from .events import EVENT_FILTERS
from .network import NodeNetwork

__all__ = ["CPU_MANAGER_POLICIES", "NODE_SETTINGS", "NodeConfig"]

CPU_MANAGER_POLICIES = ("none", "static")
# The longest a Lease may last (the API's leaseDurationSeconds is an int32; a day is plenty).
_MAX_LEASE_DURATION = 86400


def _identity() -> str:
    return f"{socket.gethostname()}_{uuid.uuid4().hex[:12]}"


@dataclass(frozen=True, kw_only=True)
class NodeConfig:
    """One node agent's settings; the kubelet's defaults unless said otherwise.

    ``identity``: who holds the Lease (two agents of one node tell each other apart by it).
    ``take_over``: start even when another live agent holds the node's Lease.
    ``watch``: False leaves the pod watch to a :class:`~podstatus.node.agent.NodeGroup`.
    ``housekeeping_interval``: the longest the housekeeping sleeps; node status posts, polls and
    retries wake it when they are due.
    ``status_error_event_interval``: a pod whose ``get_pod_status`` fails gets a Warning
    ``FailedSync`` Event at most this often.
    ``network``: the node's InternalIP and pod CIDR (see :mod:`.network`).
    ``kubelet_endpoint``: (address, port) of the node's kubelet API (:mod:`.kubeletapi`).
    """

    node_name: str
    identity: str = field(default_factory=_identity)
    take_over: bool = False
    lease_duration: int = 40
    lease_renew_interval: float = 10.0
    node_status_update_frequency: float = 10.0
    node_status_report_frequency: float = 300.0
    provider_timeout: float = 10.0
    status_poll_interval: float = 5.0
    create_retry_max: float = 60.0
    housekeeping_interval: float = 5.0
    watch: bool = True
    watch_timeout: float = 300.0
    event_component: str = "podstatus-node"
    events: str = "all"
    cpu_manager_policy: str = "none"
    status_error_event_interval: float = 60.0
    network: NodeNetwork | None = None
    kubelet_endpoint: tuple[str, int] | None = None

    def __post_init__(self) -> None:
        _check_name("node_name", self.node_name)
        if not isinstance(self.identity, str) or not self.identity:
            raise ValueError(f"identity must be a non-empty string, got {self.identity!r}")
        for name in ("take_over", "watch"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be a bool, got {getattr(self, name)!r}")
        lease = self.lease_duration
        if isinstance(lease, bool) or not isinstance(lease, int) or not 1 <= lease <= _MAX_LEASE_DURATION:
            raise ValueError(
                f"lease_duration must be whole seconds in 1..{_MAX_LEASE_DURATION}, got {lease!r}"
            )
        for name in (
            "lease_renew_interval",
            "node_status_update_frequency",
            "node_status_report_frequency",
            "provider_timeout",
            "status_poll_interval",
            "create_retry_max",
            "housekeeping_interval",
            "watch_timeout",
        ):
            _check_positive(name, getattr(self, name))
        _check_positive("status_error_event_interval", self.status_error_event_interval, zero=True)
        if not isinstance(self.event_component, str) or not self.event_component:
            raise ValueError(f"event_component must be a non-empty string, got {self.event_component!r}")
        if self.events not in EVENT_FILTERS:
            raise ValueError(f"events must be one of {', '.join(EVENT_FILTERS)}, got {self.events!r}")
        if self.cpu_manager_policy not in CPU_MANAGER_POLICIES:
            raise ValueError(
                f"cpu_manager_policy must be one of {', '.join(CPU_MANAGER_POLICIES)}, "
                f"got {self.cpu_manager_policy!r}"
            )
        if self.network is not None and not isinstance(self.network, NodeNetwork):
            raise ValueError(f"network must be a NodeNetwork, got {type(self.network).__name__}")
        endpoint = self.kubelet_endpoint
        if endpoint is not None and (
            not isinstance(endpoint, tuple)
            or len(endpoint) != 2
            or not isinstance(endpoint[0], str)
            or not endpoint[0]
            or isinstance(endpoint[1], bool)
            or not isinstance(endpoint[1], int)
            or not 1 <= endpoint[1] <= 65535
        ):
            raise ValueError(f"kubelet_endpoint must be (address, port 1..65535), got {endpoint!r}")


# The names of NodeConfig's fields: what a caller's mixed options give the config.
NODE_SETTINGS = frozenset(f.name for f in fields(NodeConfig))


def _check_name(name: str, value: object) -> None:
    # A Node's name is a DNS subdomain: lower case, digits, '-' and '.', at most 253 characters.
    if not isinstance(value, str) or not value or len(value) > 253:
        raise ValueError(f"{name} must be a DNS subdomain (1..253 characters), got {value!r}")
    ok = all(c.islower() or c.isdigit() or c in "-." for c in value if c.isascii()) and value.isascii()
    if not ok or not value[0].isalnum() or not value[-1].isalnum():
        raise ValueError(f"{name} must be a DNS subdomain (a-z, 0-9, '-', '.'), got {value!r}")


def _check_positive(name: str, value: object, *, zero: bool = False) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number of seconds, got {value!r}")
    if value < 0 or (value == 0 and not zero):
        raise ValueError(f"{name} must be {'at least 0' if zero else 'over 0'} seconds, got {value!r}")
