"""Helpers of the node agent tests: fast intervals, waiting, pods, the Events on the server."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import msgspec
import pytest

from podstatus.clients.embedded import EmbeddedClient
from podstatus.node import NodeAgent
from podstatus.node.config import NODE_SETTINGS, NodeConfig
from podstatus.server.http import EmbeddedApiServer


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
    """An agent with FAST intervals: ``options`` naming a NodeConfig field go to its config,
    the others (manager, manager_options, runtime, clock...) to the agent."""
    settings = {**FAST, **{k: v for k, v in options.items() if k in NODE_SETTINGS}}
    extra = {k: v for k, v in options.items() if k not in NODE_SETTINGS}
    if not {"manager", "manager_factory", "manager_options"} & set(extra):
        extra["manager_options"] = {"fast_path": True, "sync_period": 0.5}
    on_sync = extra.pop("on_sync", None)
    if on_sync is not None:
        extra["manager_options"] = {**extra.get("manager_options", {}), "on_sync": on_sync}
    return NodeAgent(client, provider, NodeConfig(node_name=node, **settings), **extra)


def pod_manifest(name: str, node: str = "vn-1", **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"nodeName": node, "containers": [{"name": "app", "image": "nginx"}], **spec},
    }
    return body


# --- fixtures shared by the agent tests (conftest.py hands them out) ---------------------------


@pytest.fixture
def server() -> Iterator[EmbeddedApiServer]:
    """An embedded API server on loopback, for the test."""
    with EmbeddedApiServer() as srv:
        yield srv


@pytest.fixture
def client(server: EmbeddedApiServer) -> EmbeddedClient:
    return EmbeddedClient(server)


@pytest.fixture
def agents() -> Iterator[list[NodeAgent]]:
    """The agents a test started (see :func:`start`): stopped at its end."""
    started: list[NodeAgent] = []
    yield started
    for agent in started:
        agent.stop(timeout=2)


def start(
    agents: list[NodeAgent], client: Any, provider: Any, node: str = "vn-1", **options: Any
) -> NodeAgent:
    """:func:`make_agent`, started, and kept in ``agents`` (the fixture) to be stopped."""
    agent = make_agent(client, provider, node, **options)
    agent.start()
    agents.append(agent)
    return agent
