"""A stand-in for the NodeClient's lease, event and node-spec methods, until the real ones land.

EmbeddedClient gives the pod and node requests; this adds exactly the NodeClient
methods it lacks, in memory, with the preconditions a real server checks
(resourceVersion on update_lease, 404 on a missing Event). To be deleted once
EmbeddedClient implements the whole NodeClient protocol.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import msgspec

from podstatus.clients.embedded import EmbeddedClient
from podstatus.errors import ConflictError, NotFoundError
from podstatus.node import NodeAgent
from podstatus.server.store import STRATEGIC_MERGE_PATCH


class StandInNodeClient(EmbeddedClient):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._lock = threading.Lock()
        self._rv = itertools.count(1)
        self.leases: dict[tuple[str, str], dict[str, Any]] = {}
        self.events: dict[tuple[str, str], dict[str, Any]] = {}

    def patch_node(self, name: str, patch: bytes) -> dict[str, Any]:
        self.counter.inc("patch")
        return msgspec.json.decode(self.store.patch("nodes", None, name, patch, STRATEGIC_MERGE_PATCH).raw)

    def get_lease(self, namespace: str, name: str) -> dict[str, Any]:
        self.counter.inc("get")
        with self._lock:
            lease = self.leases.get((namespace, name))
            if lease is None:
                raise NotFoundError(f'leases.coordination.k8s.io "{name}" not found')
            return msgspec.json.decode(msgspec.json.encode(lease))

    def create_lease(self, namespace: str, lease: Mapping[str, Any]) -> dict[str, Any]:
        self.counter.inc("create")
        body: dict[str, Any] = msgspec.json.decode(msgspec.json.encode(lease))
        name = body["metadata"]["name"]
        with self._lock:
            if (namespace, name) in self.leases:
                raise ConflictError(f'leases.coordination.k8s.io "{name}" already exists')
            body["metadata"]["resourceVersion"] = str(next(self._rv))
            self.leases[(namespace, name)] = body
            return msgspec.json.decode(msgspec.json.encode(body))

    def update_lease(self, namespace: str, name: str, lease: Mapping[str, Any]) -> dict[str, Any]:
        self.counter.inc("update")
        body: dict[str, Any] = msgspec.json.decode(msgspec.json.encode(lease))
        with self._lock:
            current = self.leases.get((namespace, name))
            if current is None:
                raise NotFoundError(f'leases.coordination.k8s.io "{name}" not found')
            wanted = body["metadata"].get("resourceVersion")
            if wanted and wanted != current["metadata"]["resourceVersion"]:
                raise ConflictError(f'Operation cannot be fulfilled on leases.coordination.k8s.io "{name}"')
            body["metadata"]["resourceVersion"] = str(next(self._rv))
            self.leases[(namespace, name)] = body
            return msgspec.json.decode(msgspec.json.encode(body))

    def create_event(self, namespace: str, event: Mapping[str, Any]) -> dict[str, Any]:
        self.counter.inc("create")
        body: dict[str, Any] = msgspec.json.decode(msgspec.json.encode(event))
        with self._lock:
            key = (namespace, body["metadata"]["name"])
            if key in self.events:
                raise ConflictError(f'events "{key[1]}" already exists')
            self.events[key] = body
            return body

    def patch_event(self, namespace: str, name: str, patch: bytes) -> dict[str, Any]:
        self.counter.inc("patch")
        with self._lock:
            current = self.events.get((namespace, name))
            if current is None:
                raise NotFoundError(f'events "{name}" not found')
            current.update(msgspec.json.decode(patch))
            return dict(current)


# --- helpers shared by the node agent tests --------------------------------------------------


FAST = {
    "lease_renew_interval": 0.2,
    "node_status_update_frequency": 0.2,
    "node_status_report_frequency": 300.0,
    "provider_timeout": 1.0,
    "status_poll_interval": 0.2,
    "housekeeping_interval": 0.05,
    "watch_timeout": 5.0,
}


def wait_for(cond: Callable[[], Any], timeout: float = 10.0, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def make_agent(client: Any, provider: Any, node: str = "vn-1", **options: Any) -> NodeAgent:
    merged: dict[str, Any] = {**FAST, "manager_options": {"fast_path": True, "sync_period": 0.5}}
    merged.update(options)
    return NodeAgent(client, provider, node, **merged)


def pod_manifest(name: str, node: str = "vn-1", **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"nodeName": node, "containers": [{"name": "app", "image": "nginx"}], **spec},
    }
    return body
