"""A tiny kubelet endpoint for the serve-proxy tests: a real aiohttp HTTPS server on loopback.

It speaks the kubelet paths ``podstatus serve`` relays to — ``/containerLogs``, ``/exec``
(WebSocket, ``v5.channel.k8s.io``), ``/stats/summary``, ``/healthz`` — with the kubelet's
client-certificate check (a CA it is given; anonymous callers get 401), so the proxy is
tested on its own, apart from ``podstatus node``'s kubelet API. Exec runs the command here
with ``sh``-free argv (what kubectl sent), so stdin, output and exit codes are real.
It records every request (path and query) so tests can check what the proxy sent.
"""

from __future__ import annotations

import asyncio
import json
import ssl
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from aiohttp import WSMsgType, web

from podstatus.tls import TlsMaterial, generate_tls


@dataclass
class Seen:
    path: str
    query: list[tuple[str, str]]
    peer_cn: str


@dataclass
class LoopbackKubelet:
    """Serve ``pods`` (``{(ns, pod): {container: [log lines]}}``) until :meth:`stop`."""

    client_ca_pem: bytes
    pods: Mapping[tuple[str, str], Mapping[str, list[str]]]
    seen: list[Seen] = field(default_factory=list)
    # Port-forward: a pod's port -> the local port of the responder that stands in for it.
    forwards: dict[int, int] = field(default_factory=dict)
    # Set when a followed log that never ends by itself ("endless" containers) is ended by its caller.
    endless_ended: threading.Event = field(default_factory=threading.Event)
    port: int = 0
    tls: TlsMaterial = field(default_factory=lambda: generate_tls(["127.0.0.1"]))
    _loop: asyncio.AbstractEventLoop | None = None
    _runner: web.AppRunner | None = None
    _thread: threading.Thread | None = None

    def start(self) -> LoopbackKubelet:
        ready = threading.Event()
        self._loop = asyncio.new_event_loop()

        def run() -> None:
            assert self._loop is not None
            asyncio.set_event_loop(self._loop)
            self._loop.run_until_complete(self._start())
            ready.set()
            self._loop.run_forever()

        self._thread = threading.Thread(target=run, name="test-kubelet", daemon=True)
        self._thread.start()
        assert ready.wait(10)
        return self

    def stop(self) -> None:
        if self._loop is None:
            return
        asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        assert self._thread is not None
        self._thread.join(10)

    async def _stop(self) -> None:
        assert self._runner is not None
        await self._runner.cleanup()

    def _context(self) -> ssl.SSLContext:
        from podstatus.tls import private_dir, write_private

        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        folder = private_dir()
        write_private(folder / "c.crt", self.tls.cert_pem)
        write_private(folder / "c.key", self.tls.key_pem)
        context.load_cert_chain(folder / "c.crt", folder / "c.key")
        context.load_verify_locations(cadata=self.client_ca_pem.decode())
        # The kubelet asks for a client certificate but lets a caller without one through to
        # its authenticator, which answers 401 (x509 or token, else Unauthorized).
        context.verify_mode = ssl.CERT_OPTIONAL
        return context

    async def _start(self) -> None:
        app = web.Application(middlewares=[self._authn])
        app.router.add_get("/containerLogs/{ns}/{pod}/{container}", self._logs)
        app.router.add_get("/exec/{ns}/{pod}/{container}", self._exec)
        app.router.add_post("/exec/{ns}/{pod}/{container}", self._exec)
        app.router.add_get("/attach/{ns}/{pod}/{container}", self._attach)
        app.router.add_get("/portForward/{ns}/{pod}", self._port_forward)
        app.router.add_get("/stats/summary", self._summary)
        app.router.add_get("/healthz", self._healthz)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", self.port, ssl_context=self._context())
        await site.start()
        sockets = site._server.sockets if site._server is not None else []  # type: ignore[union-attr]
        self.port = sockets[0].getsockname()[1]

    @web.middleware
    async def _authn(self, request: web.Request, handler: Any) -> web.StreamResponse:
        transport = request.transport
        cert = transport.get_extra_info("peercert") if transport is not None else None
        cn = ""
        for rdn in (cert or {}).get("subject", ()):
            for key, value in rdn:
                if key == "commonName":
                    cn = value
        self.seen.append(Seen(request.path, list(request.query.items()), cn))
        if not cn:
            return web.Response(status=401, text="Unauthorized")
        return await handler(request)

    def _container(self, request: web.Request) -> list[str] | None:
        pod = self.pods.get((request.match_info["ns"], request.match_info["pod"]))
        return None if pod is None else pod.get(request.match_info["container"])

    async def _healthz(self, request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def _logs(self, request: web.Request) -> web.StreamResponse:
        lines = self._container(request)
        if lines is None:
            ns, pod = request.match_info["ns"], request.match_info["pod"]
            return web.Response(status=404, text=f'pod "{pod}" in namespace "{ns}" not found')
        tail = request.query.get("tailLines")
        shown = lines[-int(tail) :] if tail is not None else list(lines)
        response = web.StreamResponse(headers={"Content-Type": "text/plain"})
        await response.prepare(request)
        for line in shown:
            await response.write(line.encode() + b"\n")
        if request.query.get("follow") == "true" and request.match_info["container"] == "endless":
            try:
                for i in range(10_000):
                    await asyncio.sleep(0.2)
                    await response.write(f"tick {i}\n".encode())
            finally:
                # The caller left (the write failed or the handler was cancelled).
                self.endless_ended.set()
        if request.query.get("follow") == "true":
            # A followed log: three more lines, spaced out, then the container "ends".
            for i in range(3):
                await asyncio.sleep(0.3)
                await response.write(f"follow {i}\n".encode())
        await response.write_eof()
        return response

    async def _summary(self, request: web.Request) -> web.Response:
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        pods = []
        for (ns, name), containers in sorted(self.pods.items()):
            pods.append(
                {
                    "podRef": {"name": name, "namespace": ns, "uid": ""},
                    "startTime": now,
                    "containers": [
                        {
                            "name": c,
                            "startTime": now,
                            "cpu": {"time": now, "usageNanoCores": 25_000_000 + 5_000_000 * i},
                            "memory": {"time": now, "workingSetBytes": (64 + i) * 1024 * 1024},
                        }
                        for i, c in enumerate(sorted(containers))
                    ],
                }
            )
        node = {
            "nodeName": "test",
            "cpu": {"time": now, "usageNanoCores": 350_000_000, "usageCoreNanoSeconds": 10**12},
            "memory": {"time": now, "workingSetBytes": 2 * 1024**3},
        }
        return web.json_response({"node": node, "pods": pods})

    async def _exec(self, request: web.Request) -> web.StreamResponse:
        if self._container(request) is None:
            return web.Response(status=404, text="container not found")
        ws = web.WebSocketResponse(protocols=("v5.channel.k8s.io", "v4.channel.k8s.io"))
        await ws.prepare(request)
        command = request.query.getall("command", [])
        stdin = request.query.get("stdin") == "1"
        proc = await asyncio.create_subprocess_exec(
            *command,
            stdin=asyncio.subprocess.PIPE if stdin else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )

        async def pump(stream: asyncio.StreamReader | None, channel: int) -> None:
            assert stream is not None
            while data := await stream.read(4096):
                await ws.send_bytes(bytes([channel]) + data)

        async def feed() -> None:
            assert proc.stdin is not None
            async for msg in ws:
                if msg.type != WSMsgType.BINARY or not msg.data:
                    continue
                if msg.data[0] == 0:
                    proc.stdin.write(msg.data[1:])
                    await proc.stdin.drain()
                elif msg.data[0] == 255 and msg.data[1:2] == b"\x00":
                    proc.stdin.close()  # v5: the client closed stdin

        feeder = asyncio.create_task(feed()) if stdin else None
        await asyncio.gather(pump(proc.stdout, 1), pump(proc.stderr, 2))
        code = await proc.wait()
        if code == 0:
            status: dict[str, Any] = {"metadata": {}, "status": "Success"}
        else:
            status = {
                "metadata": {},
                "status": "Failure",
                "message": f"command terminated with non-zero exit code: exit status {code}",
                "reason": "NonZeroExitCode",
                "details": {"causes": [{"reason": "ExitCode", "message": str(code)}]},
            }
        await ws.send_bytes(b"\x03" + json.dumps(status).encode())
        if feeder is not None:
            feeder.cancel()
        await ws.close()
        return ws

    async def _attach(self, request: web.Request) -> web.StreamResponse:
        """Attach: a greeting on stdout, then stdin echoed back until the client closes it."""
        if self._container(request) is None:
            return web.Response(status=404, text="container not found")
        ws = web.WebSocketResponse(protocols=("v5.channel.k8s.io", "v4.channel.k8s.io"))
        await ws.prepare(request)
        await ws.send_bytes(b"\x01attached to " + request.match_info["container"].encode() + b"\n")
        if request.query.get("stdin") == "1":
            async for msg in ws:
                if msg.type != WSMsgType.BINARY or not msg.data:
                    continue
                if msg.data[0] == 0:
                    await ws.send_bytes(b"\x01" + msg.data[1:])
                elif msg.data[0] == 255:
                    break
        await ws.send_bytes(b"\x03" + json.dumps({"metadata": {}, "status": "Success"}).encode())
        await ws.close()
        return ws

    async def _port_forward(self, request: web.Request) -> web.StreamResponse:
        """The kubelet's WebSocket port-forward: a data and an error channel per port, each
        opened with the port (2 bytes, little endian); one connection to the responder."""
        ports = [int(p) for v in request.query.getall("port", []) for p in v.split(",")]
        if len(ports) != 1 or ports[0] not in self.forwards:
            return web.Response(status=400, text=f"cannot forward {ports}")
        ws = web.WebSocketResponse(protocols=("v4.channel.k8s.io",))
        await ws.prepare(request)
        port = ports[0].to_bytes(2, "little")
        await ws.send_bytes(b"\x00" + port)
        await ws.send_bytes(b"\x01" + port)
        reader, writer = await asyncio.open_connection("127.0.0.1", self.forwards[ports[0]])

        async def back() -> None:
            while data := await reader.read(4096):
                await ws.send_bytes(b"\x00" + data)
            await ws.close()

        task = asyncio.create_task(back())
        async for msg in ws:
            if msg.type == WSMsgType.BINARY and msg.data[:1] == b"\x00" and len(msg.data) > 1:
                writer.write(msg.data[1:])
                await writer.drain()
        await task
        writer.close()
        return ws
