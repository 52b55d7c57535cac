"""The kubelet API server of a process: its event loop, its TLS, a listening socket per node.

One :class:`KubeletAPIServer` per process serves every node of it (``podstatus node
--nodes N``): one event loop thread, one aiohttp application, one listening socket (a
``TCPSite``) per node, on its own port or its own loopback address (docs/design.md says
why and what it costs). A request is routed to its node by the local port it arrived on,
so ``/stats/summary`` and ``/pods``, which name no node, answer for the right one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
import ssl
import threading
from collections.abc import Callable, Sequence
from typing import Any

from aiohttp import web

from ...tls import TlsMaterial, generate_tls, private_dir, server_context, write_private
from ..calls import DaemonPool
from ..logs import log_fields
from ..servingcert import ServingCertRotator
from .auth import Gatekeeper
from .config import KubeletAPIConfig
from .context import HTTPFailure, NodeContext, NodeEntry
from .routes import PlainRoutes
from .streams import StreamRoutes

__all__ = ["KubeletAPIServer"]

log = logging.getLogger(__name__)


class KubeletAPIServer:
    """The kubelet API of every node of a process: ``add_node`` binds a node's socket,
    ``set_agent`` hands it the node's :class:`~podstatus.node.agent.NodeAgent`."""

    def __init__(self, config: KubeletAPIConfig) -> None:
        self.config = config
        self._context = NodeContext(DaemonPool(max(1, config.stream_threads), "kubelet-api"))
        self._gate = Gatekeeper(config, self._context)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self._ssl: ssl.SSLContext | None = None
        self.tls: TlsMaterial | None = None
        self.rotators: dict[str, ServingCertRotator] = {}
        self.requests = 0

    # -- lifecycle ------------------------------------------------------------------

    def start(self, node_names: Sequence[str] = (), addresses: Sequence[str] = ()) -> None:
        """Start the event loop; the serving certificate covers the addresses and ``node_names``."""
        if self._loop is not None:
            return
        hosts = list(dict.fromkeys([self.config.address, *addresses]))
        self.tls = self.config.tls or generate_tls([*hosts, *node_names])
        self._ssl = self._tls_context()
        loop = asyncio.new_event_loop()
        ready = threading.Event()

        def run() -> None:
            asyncio.set_event_loop(loop)
            ready.set()
            loop.run_forever()

        self._loop = loop
        self._thread = threading.Thread(target=run, name="kubelet-api", daemon=True)
        self._thread.start()
        ready.wait()
        self._call_soon(self._setup()).result(30)

    def _tls_context(self) -> ssl.SSLContext:
        assert self.tls is not None
        context = server_context(self.tls)
        if self.config.client_ca_pem:
            folder = private_dir("podstatus-kubelet-ca-")
            try:
                ca = folder / "ca.crt"
                write_private(ca, self.config.client_ca_pem)
                context.load_verify_locations(cafile=str(ca))
            finally:
                shutil.rmtree(folder, ignore_errors=True)
            # Optional: a caller with a token, or none, still gets its 401 as an HTTP answer.
            context.verify_mode = ssl.CERT_OPTIONAL
        return context

    def _call_soon(self, coro: Any) -> Any:
        assert self._loop is not None
        return asyncio.run_coroutine_threadsafe(coro, self._loop)

    async def _setup(self) -> None:
        app = web.Application(middlewares=[self._authenticate], client_max_size=1 << 20)
        plain, streams = PlainRoutes(self._context), StreamRoutes(self._context)
        for method in ("GET", "POST"):
            for path in ("/exec/{ns}/{pod}/{container}", "/exec/{ns}/{pod}/{uid}/{container}"):
                app.router.add_route(method, path, streams.exec)
            for path in ("/attach/{ns}/{pod}/{container}", "/attach/{ns}/{pod}/{uid}/{container}"):
                app.router.add_route(method, path, streams.attach)
            for path in ("/portForward/{ns}/{pod}", "/portForward/{ns}/{pod}/{uid}"):
                app.router.add_route(method, path, streams.port_forward)
        app.router.add_get("/containerLogs/{ns}/{pod}/{container}", plain.logs)
        app.router.add_get("/pods", plain.pods)
        app.router.add_get("/pods/", plain.pods)
        app.router.add_get("/runningpods/", plain.running_pods)
        app.router.add_get("/healthz", plain.healthz)
        app.router.add_get("/stats/summary", plain.stats)
        app.router.add_get("/stats/summary/", plain.stats)
        app.router.add_get("/metrics/resource", plain.metrics)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=1.0)
        await self._runner.setup()

    def add_node(self, node_name: str, port: int = 0, address: str | None = None) -> tuple[str, int]:
        """Listen for ``node_name`` on ``address`` (default the configured one) and ``port`` (0: any
        free one); returns (address, port)."""
        result: tuple[str, int] = self._call_soon(
            self._add(node_name, port, address or self.config.address)
        ).result(30)
        return result

    async def _add(self, node_name: str, port: int, address: str) -> tuple[str, int]:
        assert self._runner is not None
        context = self._ssl
        if self.config.rotate_server_certificates:
            context = self._tls_context()  # its own: the node's certificate goes into it
        site = web.TCPSite(self._runner, address, port, ssl_context=context, backlog=128, reuse_address=True)
        await site.start()
        server = site._server
        assert server is not None and server.sockets  # type: ignore[attr-defined]
        bound = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]
        self._context.nodes[bound] = NodeEntry(node_name, bound, site=site, address=address)
        if self.config.rotate_server_certificates and context is not None:
            rotator = ServingCertRotator(
                self.config.reviewer,
                node_name,
                address,
                context,
                renew_fraction=self.config.csr_renew_fraction,
                expiration_seconds=self.config.csr_expiration_seconds,
            )
            self.rotators[node_name] = rotator
            rotator.start()
        log_fields(
            log,
            logging.INFO,
            "kubelet API listening",
            node=node_name,
            address=address,
            port=bound,
        )
        return address, bound

    def endpoints(self) -> list[tuple[str, int]]:
        """(address, port) of every node, in the order they were added."""
        return [(node.address or self.config.address, node.port) for node in self._context.nodes.values()]

    def set_agent(self, port: int, agent: Any) -> None:
        self._context.nodes[port].agent = agent

    def stop(self) -> None:
        loop = self._loop
        if loop is None:
            return
        for rotator in self.rotators.values():
            rotator.stop()
        with contextlib.suppress(Exception):
            self._call_soon(self._cleanup()).result(10)
        loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(5)
            if not self._thread.is_alive():
                loop.close()
        self._context.pool.shutdown()
        self._loop = None

    async def _cleanup(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    # -- every request --------------------------------------------------------------

    @web.middleware
    async def _authenticate(self, request: web.Request, handler: Callable[..., Any]) -> web.StreamResponse:
        self.requests += 1
        try:
            node = self._context.node_of(request)
            refusal = await self._gate.refusal(request, node)
            if refusal is not None:
                return refusal
            response: web.StreamResponse = await handler(request)
            return response
        except HTTPFailure as failure:
            return web.Response(status=failure.status, text=failure.text)
