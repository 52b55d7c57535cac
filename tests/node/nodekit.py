"""Helpers of the node agent tests: fast intervals, waiting, pods, the Events on the server."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import msgspec

from podstatus.clients.embedded import EmbeddedClient
from podstatus.node import NodeAgent


def events_for(client: EmbeddedClient, name: str | None = None) -> list[dict[str, Any]]:
    """The core/v1 Events on the server (about the object ``name``, when given)."""
    items, _ = client.store.list("events", None)
    out = [msgspec.json.decode(s.raw) for s in items]
    return [e for e in out if name is None or e["involvedObject"]["name"] == name]


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
