"""What every route of the kubelet API needs: the node a request came for, its pod and
container, the provider's capability, and a way to call the provider."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from ..calls import DaemonPool
from ..capabilities import CAPABILITIES, has_capability

__all__ = ["HTTPFailure", "NodeContext", "NodeEntry"]


class HTTPFailure(Exception):
    """An answer other than 200: status, plain text (as the kubelet writes its errors)."""

    def __init__(self, status: int, text: str) -> None:
        super().__init__(text)
        self.status = status
        self.text = text


@dataclass
class NodeEntry:
    """One node of the process: its name, the port it listens on, its agent once running."""

    name: str
    port: int
    agent: Any = None
    site: Any = None
    address: str = ""


class NodeContext:
    """The nodes by the local port their socket listens on, and the pool provider calls run on."""

    def __init__(self, pool: DaemonPool) -> None:
        self.nodes: dict[int, NodeEntry] = {}
        self.pool = pool

    def node_of(self, request: web.Request) -> NodeEntry:
        """The node whose socket the request arrived on (``/pods`` and ``/stats`` name none)."""
        sock = request.transport.get_extra_info("sockname") if request.transport is not None else None
        node = self.nodes.get(sock[1]) if sock else None
        if node is None or node.agent is None:
            raise HTTPFailure(503, "the node is not running yet")
        return node

    @staticmethod
    def pod(node: NodeEntry, request: web.Request) -> Any:
        ns, name = request.match_info["ns"], request.match_info["pod"]
        pod = node.agent.pods.get_pod_by_name(ns, name)
        uid = request.match_info.get("uid")
        if pod is None or (uid and pod.uid != uid):
            raise HTTPFailure(404, f'pod "{name}" does not exist on node "{node.name}" (namespace "{ns}")')
        return pod

    @staticmethod
    def container(pod: Any, request: web.Request) -> str:
        container = request.match_info["container"]
        spec = pod.spec
        names = {
            c.name
            for c in (*spec.containers, *(spec.init_containers or ()), *(spec.ephemeral_containers or ()))
        }
        if container not in names:
            raise HTTPFailure(404, f'container "{container}" not found in pod "{pod.metadata.name}"')
        return container

    @staticmethod
    def capability(node: NodeEntry, method: str) -> Callable[..., Any]:
        """The provider's ``method``; 501 naming the node and the capability when it has none."""
        provider = node.agent.provider
        if not has_capability(provider, method):
            raise HTTPFailure(
                501,
                f'node "{node.name}": the provider ({type(provider).__name__}) does not implement '
                f"{CAPABILITIES[method]} ({method})",
            )
        fn: Callable[..., Any] = getattr(provider, method)
        return fn

    async def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        """A provider method: a coroutine on this loop, a plain call on a thread of the pool."""
        if inspect.iscoroutinefunction(fn):
            return await fn(*args)
        result = await asyncio.wrap_future(self.pool.submit(fn, *args))
        if inspect.isawaitable(result):
            result = await result
        return result

    async def in_pool(self, fn: Callable[..., Any], *args: Any) -> Any:
        """A plain call on a thread of the pool (a blocking iterator's next, a review)."""
        return await asyncio.wrap_future(self.pool.submit(fn, *args))
