"""The simulated node: a node agent whose containers are make-believe, and whose status is real.

:class:`NodeAgent` is :class:`podstatus.node.NodeAgent` (the Node, its Lease,
the pod watch, admission, the status manager, Events) driving a
:class:`~podstatus.node.simulated.SimulatedProvider` (image pull, init
containers in order, sidecars, start-up and readiness, completion, crash
loops with back-off, termination on delete).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, Protocol, cast

from .. import node
from ..manager import SyncRecord
from ..node.config import NODE_SETTINGS, NodeConfig
from ..node.provider import NodeDescription
from ..node.simpod import SimPod, Timings
from ..node.simulated import SimulatedProvider
from ..podmanager import BasicPodManager
from ..protocols import NodeClient, StatusManager
from ..types import Pod


class SimClient(Protocol):
    """What the simulator needs from a client: the manager's three calls and a few more."""

    def get_pod(self, namespace: str, name: str) -> Pod: ...

    def patch_pod_status(self, namespace: str, name: str, patch: bytes, **kwargs: Any) -> Pod: ...

    def delete_pod(
        self, namespace: str, name: str, *, grace_period_seconds: int | None, uid: str | None
    ) -> None: ...

    def create_pod(self, pod: Any, namespace: str | None = None) -> Pod: ...

    def list_pods(self, namespace: str | None = None, **kwargs: Any) -> tuple[list[Pod], str]: ...

    def watch_pods(self, namespace: str | None = None, **kwargs: Any) -> Iterator[tuple[str, Pod]]: ...

    def create_node(self, node: dict[str, Any]) -> dict[str, Any]: ...


# A node for the benchmark: room for any number of pods, so admission never gets in the way.
SIMULATED_NODE = NodeDescription(
    capacity={"cpu": "64", "memory": "256Gi", "pods": "10000"},
    labels={"type": "podstatus-simulated"},
)


class NodeAgent:
    """The simulated node: a :class:`podstatus.node.NodeAgent` driving a :class:`SimulatedProvider`.

    The agent does what a kubelet-like agent does (the Node and its Lease, the pod
    watch, admission, the status manager, Events); the provider plays the
    containers. ``manager_options`` default to the kubelet's behaviour, as before.
    """

    def __init__(
        self,
        client: SimClient,
        node_name: str,
        *,
        timings: Timings | None = None,
        seed: int = 1,
        manager_options: dict[str, Any] | None = None,
        on_sync: Callable[[SyncRecord], None] | None = None,
        on_event: Callable[[str, Pod], None] | None = None,
        **agent_options: Any,
    ) -> None:
        self.client = client
        self.node_name = node_name
        self.timings = timings or Timings()
        self.provider = SimulatedProvider(timings=self.timings, seed=seed, description=SIMULATED_NODE)
        self._on_event = on_event
        # Settings to the agent's checked config; the manager_factory, runtime... to the agent.
        settings = {k: v for k, v in agent_options.items() if k in NODE_SETTINGS}
        extra = {k: v for k, v in agent_options.items() if k not in NODE_SETTINGS}
        if "manager_factory" not in extra:
            extra["manager_options"] = dict(manager_options or {})
            if on_sync is not None:
                extra["manager_options"]["on_sync"] = on_sync
        self.agent = node.NodeAgent(
            # The agent does without the Node and Lease calls a simulation's client may lack.
            cast(NodeClient, client),
            self.provider,
            NodeConfig(node_name=node_name, **settings),
            on_watch_event=self._watched,
            **extra,
        )

    def _watched(self, kind: str, pod: Pod) -> None:
        if kind != "DELETED":
            self.provider.observe(pod)
        if self._on_event is not None:
            self._on_event(kind, pod)

    @property
    def manager(self) -> StatusManager:
        return self.agent.manager

    @property
    def pods(self) -> BasicPodManager:
        return self.agent.pods

    @property
    def deleted_uids(self) -> set[str]:
        return self.agent.deleted_uids

    @property
    def watch_errors(self) -> int:
        return self.agent.watch_errors

    @property
    def events_seen(self) -> int:
        return self.agent.watch_events

    def register_node(self) -> None:
        """Register the Node now (again, when it vanished); before :meth:`start`, nothing to do.

        :meth:`start` registers (or adopts) the Node itself, after checking its Lease. The
        agent also registers a vanished Node again on its own, at its next status post.
        """
        if self.agent._started:
            self.agent.register_node()

    def start(self) -> None:
        self.agent.start()

    def stop(self) -> None:
        self.agent.stop()

    def sim_pod(self, uid: str) -> SimPod | None:
        return self.provider.sim_pod(uid)

    def sims(self) -> list[SimPod]:
        return self.provider.sims()
