"""A node of a real cluster whose pods a provider runs: ``NodeAgent``, the provider protocol, events.

See :mod:`podstatus.node.agent` for what the agent does and
:mod:`podstatus.node.provider` for what a provider implements.
"""

from __future__ import annotations

from .agent import NodeAgent, NodeGroup, PodWatcher
from .calls import ProviderError
from .config import NodeConfig
from .events import EventCorrelator, EventRecorder, ObjectRef
from .heartbeat import LeaseHeldError, node_system_info
from .network import NodeNetwork, PodIPPool
from .provider import (
    FakeProvider,
    NodeDescription,
    NodeProvider,
    PodLifecycleHandler,
    PodNotifier,
    Provider,
    pending_status,
)
from .runtime import NodeRuntime
from .simpod import Timings
from .simulated import SimulatedProvider

__all__ = [
    "EventCorrelator",
    "EventRecorder",
    "FakeProvider",
    "LeaseHeldError",
    "NodeAgent",
    "NodeConfig",
    "NodeDescription",
    "NodeGroup",
    "NodeNetwork",
    "NodeProvider",
    "NodeRuntime",
    "ObjectRef",
    "PodIPPool",
    "PodLifecycleHandler",
    "PodNotifier",
    "PodWatcher",
    "Provider",
    "ProviderError",
    "SimulatedProvider",
    "Timings",
    "node_system_info",
    "pending_status",
]
