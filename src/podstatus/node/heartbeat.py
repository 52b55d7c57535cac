"""Keeping a Node alive as the kubelet does: its Lease, and its status with the four conditions.

Two signals tell the control plane a node is alive (KEP-589): the Lease
``kube-node-lease/<node>`` renewed every 10 s with a 40 s duration, and
``status`` posted when something changed and at least every 5 minutes
(``nodeStatusReportFrequency``). The node lifecycle controller marks a node
Unknown when neither moved for its grace period.

These classes do one request each and keep the state between them; the agent
decides when to call them. Times come from an injectable clock, so tests can
check ``lastHeartbeatTime`` and ``lastTransitionTime`` exactly.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec

from ..errors import ApiError, ConflictError, NotFoundError
from .logs import log_fields
from .provider import NodeDescription

__all__ = [
    "AGENT_ANNOTATION",
    "LEASE_NAMESPACE",
    "LeaseHeldError",
    "LeaseKeeper",
    "NodeStatusReporter",
    "build_node",
    "node_system_info",
]

log = logging.getLogger(__name__)


def _log(level: int, message: str, **fields: Any) -> None:
    log_fields(log, level, message, **fields)


LEASE_NAMESPACE = "kube-node-lease"
# holderIdentity is the node's name (what the kubelet writes and the control plane expects); which
# process holds it is recorded here, so two agents for one node can tell each other apart.
AGENT_ANNOTATION = "podstatus.io/agent-identity"
NODE_LABEL_TYPE = "type"


def utcnow() -> datetime:
    return datetime.now(UTC)


def _time(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _micro_time(value: datetime) -> str:
    # Lease times are MicroTime: six fractional digits.
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _parse_time(text: Any) -> datetime | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def node_system_info(node_name: str) -> dict[str, str]:
    """``status.nodeInfo`` with every field NodeSystemInfo requires (clients refuse a Node without them).

    The IDs are stable per node name (a restarted agent reports the same machine) and
    in the forms a kubelet reports: a 32-hex machine ID, UUIDs for the system and boot.
    """
    machine = uuid.uuid5(uuid.NAMESPACE_DNS, f"{node_name}.nodes.podstatus")
    return {
        "machineID": machine.hex,
        "systemUUID": str(uuid.uuid5(machine, "system")),
        "bootID": str(uuid.uuid5(machine, "boot")),
        "kernelVersion": "6.1.0-podstatus",
        "osImage": "podstatus simulated node",
        "containerRuntimeVersion": "podstatus://0.1.0",
        "kubeletVersion": "v1.37.0-podstatus",
        "kubeProxyVersion": "",
        "operatingSystem": "linux",
        "architecture": "amd64",
    }


# --- the Lease ----------------------------------------------------------------------------


class LeaseHeldError(RuntimeError):
    """Another live agent holds the node's Lease: starting would mean two writers for one node."""


@dataclass
class LeaseInfo:
    holder: str
    agent: str
    renew_time: datetime | None
    duration: int

    def live(self, now: datetime) -> bool:
        return self.renew_time is not None and self.renew_time + timedelta(seconds=self.duration) > now

    def expires_in(self, now: datetime) -> float:
        if self.renew_time is None:
            return 0.0
        return max(0.0, (self.renew_time + timedelta(seconds=self.duration) - now).total_seconds())


def lease_info(lease: Mapping[str, Any]) -> LeaseInfo:
    spec = lease.get("spec") or {}
    annotations = (lease.get("metadata") or {}).get("annotations") or {}
    duration = spec.get("leaseDurationSeconds")
    return LeaseInfo(
        holder=str(spec.get("holderIdentity") or ""),
        agent=str(annotations.get(AGENT_ANNOTATION) or ""),
        renew_time=_parse_time(spec.get("renewTime")),
        duration=duration if isinstance(duration, int) else 0,
    )


class LeaseKeeper:
    """The node's Lease in ``kube-node-lease``: check who holds it, renew it, release it."""

    def __init__(
        self,
        client: Any,
        node_name: str,
        identity: str,
        *,
        duration: int = 40,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self.client = client
        self.node_name = node_name
        self.identity = identity
        self.duration = duration
        self.clock = clock
        self.node_uid = ""
        self.renewals = 0
        self.lost = False
        self._lease: dict[str, Any] | None = None
        self.supported = True
        # Set by check(take_over=True): the next renewal overwrites a live foreign holder once.
        self._taking_over = False
        self.recreated = False
        # What check() read, for the first renewal (no second GET): the Lease, or absent.
        self._checked: dict[str, Any] | None = None
        self._checked_absent = False
        # check() created the Lease (it was absent): the first renewal can wait its turn.
        self.created_at_check = False

    def other_holder(self) -> LeaseInfo | None:
        """The live Lease of another agent (or another kubelet) for this node, if there is one."""
        try:
            lease = self.client.get_lease(LEASE_NAMESPACE, self.node_name)
        except NotFoundError:
            return None
        return self._other_holder_of(lease)

    def _other_holder_of(self, lease: Mapping[str, Any]) -> LeaseInfo | None:
        info = lease_info(lease)
        if not info.live(self.clock()):
            return None
        if info.holder == self.node_name and info.agent in ("", self.identity):
            # Ours (a restart with the same identity), or released by a clean stop.
            return None
        return info

    def check(self, take_over: bool) -> None:
        """Raise :class:`LeaseHeldError` when another live holder has the Lease (unless taking over).

        What it read is the base of the first :meth:`renew`: an absent Lease is created
        directly, a present one updated from this copy (a stale copy gets a 409, then a GET).
        """
        self._checked, self._checked_absent = None, False
        self.created_at_check = False
        if self._lease is None:
            # Create first: on a fresh node that is the one request (a GET would only answer 404).
            # Created, nobody else held it. Without the Node's ownerReference as yet, as the
            # kubelet's first Lease when its Node is not there: the next renewal adds it.
            try:
                self._lease = self.client.create_lease(LEASE_NAMESPACE, self._body(None))
            except AttributeError:
                self._unsupported()
                return
            except ApiError:
                pass  # AlreadyExists (409), or not allowed to create: read it and check its holder
            else:
                self.renewals += 1
                self.created_at_check = True
                return
        try:
            lease = self.client.get_lease(LEASE_NAMESPACE, self.node_name)
        except NotFoundError:
            self._checked_absent = True
            return
        except AttributeError:
            self._unsupported()
            return
        self._checked = lease
        other = self._other_holder_of(lease)
        if other is None:
            return
        who = other.agent or other.holder
        if take_over:
            self._taking_over = True
            _log(
                logging.WARNING,
                "taking over the node's lease from a live holder",
                node=self.node_name,
                holder=who,
                expiresIn=f"{other.expires_in(self.clock()):.0f}s",
            )
            return
        raise LeaseHeldError(
            f"node {self.node_name}: lease {LEASE_NAMESPACE}/{self.node_name} is held by {who!r}, "
            f"live for {other.expires_in(self.clock()):.0f} s more; two agents driving one node lose "
            "data. Stop the other agent, wait, or take over (take_over=True, --take-over)."
        )

    def _body(self, base: Mapping[str, Any] | None) -> dict[str, Any]:
        lease: dict[str, Any] = msgspec.json.decode(msgspec.json.encode(base)) if base else {}
        lease["apiVersion"] = "coordination.k8s.io/v1"
        lease["kind"] = "Lease"
        meta = lease.setdefault("metadata", {})
        meta["name"] = self.node_name
        meta["namespace"] = LEASE_NAMESPACE
        meta.setdefault("annotations", {})[AGENT_ANNOTATION] = self.identity
        if self.node_uid:
            # As the kubelet does: the Lease goes when its Node goes (the Node of now: it may be new).
            meta["ownerReferences"] = [
                {"apiVersion": "v1", "kind": "Node", "name": self.node_name, "uid": self.node_uid}
            ]
        spec = lease.setdefault("spec", {})
        spec["holderIdentity"] = self.node_name
        spec["leaseDurationSeconds"] = self.duration
        spec["renewTime"] = _micro_time(self.clock())
        return lease

    def renew(self) -> bool:
        """Renew (or create) the Lease once; False when the request failed (logged)."""
        if not self.supported:
            return False
        checked, absent = self._checked, self._checked_absent
        self._checked, self._checked_absent = None, False
        try:
            if absent and self._lease is None:
                # check() found none: create it without reading again.
                try:
                    self._lease = self.client.create_lease(LEASE_NAMESPACE, self._body(None))
                    self.renewals += 1
                    return True
                except ConflictError:
                    pass  # AlreadyExists: created meanwhile; read it and update as usual
            for attempt in range(2):
                base = self._lease if self._lease is not None else checked
                if base is None or attempt:
                    try:
                        base = self.client.get_lease(LEASE_NAMESPACE, self.node_name)
                    except NotFoundError:
                        self._lease = self.client.create_lease(LEASE_NAMESPACE, self._body(None))
                        # Gone after we had one: deleted, or collected with its Node. Look at the Node.
                        self.recreated = self.renewals > 0
                        self.renewals += 1
                        return True
                    info = lease_info(base)
                    foreign = info.agent not in ("", self.identity)
                    if foreign and info.live(self.clock()) and not self._taking_over:
                        # Someone took the node over: stop renewing, the agent stops driving it.
                        self.lost = True
                        _log(
                            logging.ERROR,
                            "the node's lease was taken over",
                            node=self.node_name,
                            holder=info.agent,
                        )
                        return False
                try:
                    self._lease = self.client.update_lease(LEASE_NAMESPACE, self.node_name, self._body(base))
                    self.renewals += 1
                    return True
                except (ConflictError, NotFoundError):
                    self._lease = None  # stale copy, or deleted: read again
                    continue
            return False
        except AttributeError:
            self._unsupported()
            return False
        except ApiError as err:
            _log(logging.WARNING, "failed to renew the node's lease", node=self.node_name, error=err)
            self._lease = None
            return False

    def release(self) -> None:
        """On a clean stop: clear our identity so the next agent need not wait out the duration."""
        if not self.supported or self._lease is None or self.lost:
            return
        try:
            lease = self._body(self._lease)
            lease["metadata"]["annotations"][AGENT_ANNOTATION] = ""
            self.client.update_lease(LEASE_NAMESPACE, self.node_name, lease)
        except (ApiError, AttributeError) as err:
            _log(logging.INFO, "could not release the node's lease", node=self.node_name, error=err)

    def _unsupported(self) -> None:
        if self.supported:
            log.warning("the client has no Lease API; the node is kept alive by its status only")
        self.supported = False


# --- the Node -------------------------------------------------------------------------------

# type -> (status, reason, message) when all is well (the kubelet's reasons).
HEALTHY_CONDITIONS: tuple[tuple[str, str, str, str], ...] = (
    ("MemoryPressure", "False", "KubeletHasSufficientMemory", "node has sufficient memory available"),
    ("DiskPressure", "False", "KubeletHasNoDiskPressure", "node has no disk pressure"),
    ("PIDPressure", "False", "KubeletHasSufficientPID", "node has sufficient PID available"),
    ("Ready", "True", "KubeletReady", "node agent is posting ready status"),
)


def build_node(
    node_name: str,
    description: NodeDescription,
    *,
    pod_cidr: str | None = None,
    kubelet_port: int | None = None,
) -> dict[str, Any]:
    """The Node to register: labels, taints, ``spec.podCIDR``, the status parts that are not conditions."""
    labels = {
        "kubernetes.io/hostname": node_name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        **dict(description.labels),
    }
    node: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": node_name, "labels": labels, "annotations": dict(description.annotations)},
        "spec": {"taints": [dict(t) for t in description.taints]} if description.taints else {},
        "status": status_body(node_name, description, kubelet_port=kubelet_port),
    }
    if pod_cidr:
        node["spec"]["podCIDR"] = pod_cidr
        node["spec"]["podCIDRs"] = [pod_cidr]
    return node


# What a v1.37 kubelet with its default feature gates declares for in-place resize
# (nodedeclaredfeatures: the names sorted). kube-apiserver's NodeDeclaredFeatureValidator
# refuses a resize of an init container, or of pod-level resources, on a node without them.
DECLARED_FEATURES = ("InPlacePodLevelResourcesVerticalScaling", "InPlacePodVerticalScalingInitContainers")


# A node whose kubelet API serves exec/attach/port-forward over WebSocket says so: kube-apiserver
# 1.36+ then proxies kubectl's WebSocket straight to it instead of translating to SPDY
# (checkNodeSupportsWebsockets in pkg/registry/core/pod/rest/subresources.go).
WEBSOCKETS_FEATURE = "ExtendWebSocketsToKubelet"


def status_body(
    node_name: str, description: NodeDescription, *, kubelet_port: int | None = None
) -> dict[str, Any]:
    """``kubelet_port``: where the node's kubelet API listens (None: it has none; the
    kubelet's default port is still advertised, as before)."""
    features = list(DECLARED_FEATURES)
    if kubelet_port is not None:
        features = sorted({*features, WEBSOCKETS_FEATURE})
    return {
        "capacity": dict(description.capacity),
        "allocatable": dict(description.allocatable_or_capacity()),
        "addresses": [dict(a) for a in description.addresses],
        "nodeInfo": {**node_system_info(node_name), **dict(description.node_info)},
        "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250 if kubelet_port is None else kubelet_port}},
        "declaredFeatures": features,
    }


class NodeStatusReporter:
    """Decides when to post node status and builds it, with correct heartbeat and transition times."""

    def __init__(
        self,
        node_name: str,
        *,
        report_frequency: float = 300.0,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self.node_name = node_name
        self.report_frequency = report_frequency
        self.clock = clock
        self.kubelet_port: int | None = None  # set by the agent when its kubelet API listens
        # type -> (status, reason, message, lastTransitionTime)
        self._conditions: dict[str, tuple[str, str, str, str]] = {}
        self._last_content: Any = None
        self._last_post: datetime | None = None
        self.posts = 0

    def adopt(self, node: Mapping[str, Any]) -> None:
        """Start from a registered Node's conditions, so a restart does not fake a transition."""
        for c in (node.get("status") or {}).get("conditions") or ():
            if isinstance(c, dict) and c.get("type") and c.get("lastTransitionTime"):
                self._conditions[c["type"]] = (
                    str(c.get("status", "")),
                    str(c.get("reason", "")),
                    str(c.get("message", "")),
                    str(c["lastTransitionTime"]),
                )

    def _conditions_for(self, ready_error: str | None, now: str) -> list[dict[str, Any]]:
        out = []
        for ctype, status, reason, message in HEALTHY_CONDITIONS:
            if ctype == "Ready" and ready_error is not None:
                status, reason, message = (
                    "False",
                    "KubeletNotReady",
                    f"provider is not healthy: {ready_error}",
                )
            previous = self._conditions.get(ctype)
            transition = previous[3] if previous is not None and previous[0] == status else now
            self._conditions[ctype] = (status, reason, message, transition)
            out.append(
                {
                    "type": ctype,
                    "status": status,
                    "reason": reason,
                    "message": message,
                    "lastHeartbeatTime": now,
                    "lastTransitionTime": transition,
                }
            )
        return out

    def ready_status(self) -> str | None:
        c = self._conditions.get("Ready")
        return c[0] if c is not None else None

    def due(self, description: NodeDescription, ready_error: str | None) -> bool:
        """Whether to post now: something changed, or the report frequency has passed."""
        if self._last_post is None:
            return True
        if (description, ready_error is None) != self._last_content:
            return True
        return (self.clock() - self._last_post).total_seconds() >= self.report_frequency

    def build(self, description: NodeDescription, ready_error: str | None) -> dict[str, Any]:
        """The status to post now (records it as posted only after :meth:`posted`)."""
        now = _time(self.clock())
        status = status_body(self.node_name, description, kubelet_port=self.kubelet_port)
        status["conditions"] = self._conditions_for(ready_error, now)
        return status

    def posted(self, description: NodeDescription, ready_error: str | None) -> None:
        self._last_content = (description, ready_error is None)
        self._last_post = self.clock()
        self.posts += 1

    def forget(self) -> None:
        """The Node was re-registered: post everything again."""
        self._last_post = None
