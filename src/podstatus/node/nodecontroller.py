"""The node-status controller: registers the Node, posts its status, cordons it.

The kubelet's ``registerWithAPIServer`` and ``updateNodeStatus`` (virtual-kubelet's
``node.go``): the Node is created with its whole status (or adopted when it exists), its
status is posted when it changed and at least every ``node_status_report_frequency``
(:class:`~.heartbeat.NodeStatusReporter` decides and builds), Ready=False while the
provider's ``ping`` fails, and a Node that disappeared is registered again. The agent's
housekeeping decides when; this controller does one round each call.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

import msgspec

from ..errors import ApiError, ConflictError, NotFoundError
from .calls import BoundCaller, ProviderError
from .config import NodeConfig
from .events import NORMAL, EventRecorder, ObjectRef
from .heartbeat import NodeStatusReporter, build_node
from .logs import log_fields
from .provider import DEFAULT_ADDRESSES, NodeDescription, Provider

__all__ = ["NodeStatusController", "UpkeepClient"]

log = logging.getLogger(__name__)


def _log(level: int, message: str, **fields: Any) -> None:
    log_fields(log, level, message, **fields)


_VERBS = {
    "get_lease": "get",
    "create_lease": "create",
    "update_lease": "update",
    "get_node": "get",
    "create_node": "create",
    "patch_node": "patch",
    "patch_node_status": "patch",
    "create_event": "create",
    "patch_event": "patch",
}


class UpkeepClient:
    """The client, for leases, the Node and Events: counts those requests by verb (they are not pod status)."""

    def __init__(self, client: Any, counter: Counter[str], lock: threading.Lock) -> None:
        self._client = client
        self._counter = counter
        self._lock = lock

    def __getattr__(self, name: str) -> Any:
        fn = getattr(self._client, name)  # AttributeError: the client has no such API
        verb = _VERBS.get(name)
        if verb is None:
            return fn

        def counted(*args: Any, **kwargs: Any) -> Any:
            with self._lock:
                self._counter[verb] += 1
            return fn(*args, **kwargs)

        return counted


class NodeStatusController:
    """One node's Node object: registration, status posts, cordon.

    ``on_node_uid(uid)``: the Node was registered (again) and has this uid (the Lease's owner).
    """

    def __init__(
        self,
        config: NodeConfig,
        provider: Provider,
        upkeep: UpkeepClient,
        *,
        recorder: EventRecorder,
        calls: BoundCaller,
        reporter: NodeStatusReporter,
        on_node_uid: Callable[[str], None],
    ) -> None:
        self.config = config
        self.node_name = config.node_name
        self.kubelet_endpoint = config.kubelet_endpoint
        self.network = config.network
        self.provider = provider
        self._upkeep = upkeep
        self.recorder = recorder
        self.calls = calls
        self.node_status = reporter
        self._on_node_uid = on_node_uid
        self.pod_cidr: str | None = None  # the Node's spec.podCIDR once registered
        self._description = self._with_network(NodeDescription())
        self._node_uid = ""
        self._ready_error: str | None = None
        self._no_status_api = False
        # Set when the heartbeats resumed after a gap: the next round reads the Node back first.
        self.heartbeat_gap = False

    @property
    def description(self) -> NodeDescription:
        """What the provider last said of the node (with the node's addresses)."""
        return self._description

    @property
    def ready_error(self) -> str | None:
        """Why the node is not Ready (the provider's failed ``ping``), or None."""
        return self._ready_error

    @property
    def node_uid(self) -> str:
        return self._node_uid

    def start(self) -> tuple[str | None, bool, bool]:
        """Describe the node and register it with its status: (ping error, was ready, created)."""
        error, was_ready = self.check_provider()
        # A new Node is created with its whole status, conditions included (the API server keeps
        # a Node's status on create): one request, not a create and a status post.
        status = self.node_status.build(self._description, error)
        created = self.register_node(status=status)
        self.hand_pod_cidr()
        return error, was_ready, created

    def cordon(self) -> None:
        try:
            self._upkeep.patch_node(self.node_name, msgspec.json.encode({"spec": {"unschedulable": True}}))
            self.recorder.event(
                ObjectRef.for_node(self.node_name),
                NORMAL,
                "NodeNotSchedulable",
                f"Node {self.node_name} status is now: NodeNotSchedulable",
            )
            _log(logging.INFO, "node cordoned", node=self.node_name)
        except (ApiError, AttributeError) as err:
            _log(logging.ERROR, "could not cordon the node", node=self.node_name, error=err)

    def _with_network(self, description: NodeDescription) -> NodeDescription:
        """The node's own InternalIP in place of the default one every description starts with.

        With a kubelet API, its address is the InternalIP (kube-apiserver reaches the node there).
        """
        if self.kubelet_endpoint is not None:
            others = tuple(a for a in description.addresses if a.get("type") != "InternalIP")
            return dataclasses.replace(
                description,
                addresses=({"type": "InternalIP", "address": self.kubelet_endpoint[0]}, *others),
            )
        if self.network is None or tuple(description.addresses) != DEFAULT_ADDRESSES:
            return description
        return dataclasses.replace(
            description, addresses=({"type": "InternalIP", "address": self.network.internal_ip},)
        )

    def hand_pod_cidr(self) -> None:
        """The Node's pod CIDR to the provider (the kubelet's runtime gets it the same way)."""
        update = getattr(self.provider, "update_pod_cidr", None)
        if update is None or not self.pod_cidr:
            return
        try:
            self.calls.call("update_pod_cidr", update, self.pod_cidr)
        except ProviderError as err:
            _log(logging.ERROR, "provider could not take the pod CIDR", node=self.node_name, error=err)

    def _describe(self) -> NodeDescription:
        try:
            description = self.calls.call("node_description", self.provider.node_description)
        except ProviderError as err:
            _log(logging.ERROR, "provider could not describe the node", node=self.node_name, error=err)
            return self._description
        if not isinstance(description, NodeDescription):
            _log(
                logging.ERROR,
                "provider described the node with something that is not a NodeDescription",
                node=self.node_name,
                got=type(description).__name__,
            )
            return self._description
        return self._with_network(description)

    def register_node(self, status: dict[str, Any] | None = None) -> bool:
        """Create the Node (with ``status`` when given), or adopt an existing one of that name.

        True when it was created: ``status`` is then on the server.
        """
        wanted_cidr = self.network.pod_cidr if self.network is not None else None
        node = build_node(
            self.node_name,
            self._description,
            pod_cidr=wanted_cidr,
            kubelet_port=self.node_status.kubelet_port,
        )
        if status is not None:
            node["status"] = status
        try:
            created = self._upkeep.create_node(node)
            self._node_uid = str((created.get("metadata") or {}).get("uid") or "")
            self._on_node_uid(self._node_uid)
            self.pod_cidr = (created.get("spec") or {}).get("podCIDR") or wanted_cidr
            _log(logging.INFO, "node registered", node=self.node_name)
            return True
        except ConflictError:
            pass
        except ApiError as err:
            if err.code != 409:
                raise
        try:
            existing = self._upkeep.get_node(self.node_name)
        except AttributeError:
            _log(logging.INFO, "node exists; the client cannot read it", node=self.node_name)
            return False
        self._node_uid = str((existing.get("metadata") or {}).get("uid") or "")
        self._on_node_uid(self._node_uid)
        self.node_status.adopt(existing)
        labels = (existing.get("metadata") or {}).get("labels") or {}
        missing = {k: v for k, v in node["metadata"]["labels"].items() if labels.get(k) != v}
        patch: dict[str, Any] = {"metadata": {"labels": missing}} if missing else {}
        # A Node's pod CIDR is set once (the API server refuses a change): keep the one it has.
        self.pod_cidr = (existing.get("spec") or {}).get("podCIDR") or wanted_cidr
        if wanted_cidr and not (existing.get("spec") or {}).get("podCIDR"):
            patch["spec"] = {"podCIDR": wanted_cidr, "podCIDRs": [wanted_cidr]}
        if patch:
            try:
                self._upkeep.patch_node(self.node_name, msgspec.json.encode(patch))
            except (ApiError, AttributeError) as err:
                _log(
                    logging.WARNING,
                    "could not update the node's labels or pod CIDR",
                    node=self.node_name,
                    error=err,
                )
        _log(logging.INFO, "node adopted", node=self.node_name, uid=self._node_uid)
        return False

    def check_provider(self) -> tuple[str | None, bool]:
        """Ping the provider and describe the node: (the ping's error or None, whether it was ready)."""
        error: str | None = None
        ping = getattr(self.provider, "ping", None)
        if ping is not None:
            try:
                self.calls.call("ping", ping)
            except ProviderError as err:
                error = str(err)
        self._description = self._describe()
        was_ready = self._ready_error is None
        self._ready_error = error
        if error is not None and was_ready:
            _log(logging.ERROR, "provider is not healthy: node not ready", node=self.node_name, error=error)
        return error, was_ready

    def post_node_status(self, *, force: bool = False) -> None:
        error, was_ready = self.check_provider()
        if not force and not self.node_status.due(self._description, error):
            return
        status = self.node_status.build(self._description, error)
        body = msgspec.json.encode({"status": status})
        try:
            self._upkeep.patch_node_status(self.node_name, body)
        except NotFoundError:
            _log(logging.WARNING, "the node is gone; registering it again", node=self.node_name)
            try:
                self.node_status.forget()
                created = self.register_node(status=status)
                if not created:
                    self._upkeep.patch_node_status(self.node_name, body)
            except ApiError as err:
                _log(logging.ERROR, "could not register the node again", node=self.node_name, error=err)
                return
        except ApiError as err:
            _log(logging.WARNING, "failed to post node status", node=self.node_name, error=err)
            return
        except AttributeError:
            # A client with pods only (a test harness): the node lives by its registration alone.
            if not self._no_status_api:
                _log(logging.WARNING, "the client cannot post node status", node=self.node_name)
            self._no_status_api = True
            return
        self.node_status_posted(error, was_ready, force=force)

    def node_status_posted(self, error: str | None, was_ready: bool, *, force: bool) -> None:
        self.node_status.posted(self._description, error)
        ready = error is None
        if ready != was_ready or force:
            self.recorder.event(
                ObjectRef.for_node(self.node_name),
                NORMAL,
                "NodeReady" if ready else "NodeNotReady",
                f"Node {self.node_name} status is now: {'NodeReady' if ready else 'NodeNotReady'}",
            )

    def resync_node_status(self) -> None:
        """After a heartbeat gap: post again over what the API shows (the controller's Unknown).

        The node's conditions are read back first, so a condition the node lifecycle
        controller changed gets a transition time of now when the agent sets it back.
        """
        try:
            node = self._upkeep.get_node(self.node_name)
        except NotFoundError:
            node = None  # posting registers it again
        except (ApiError, AttributeError) as err:
            _log(
                logging.WARNING,
                "could not read the node after a heartbeat gap",
                node=self.node_name,
                error=err,
            )
            self.heartbeat_gap = True  # try again at the next round
            return
        if node is not None:
            self.node_status.adopt(node)
        self.node_status.forget()
        self.post_node_status(force=True)
