"""The kubelet API's streams: ``/exec``, ``/attach`` and ``/portForward`` over WebSocket.

exec and attach (``/{ns}/{pod}[/{uid}]/{container}``) speak ``v5.channel.k8s.io``,
``v4.channel.k8s.io`` (and the older channel protocols); query ``command`` (repeated),
``input``/``output``/``error``/``tty`` (kube-apiserver's names; ``stdin``/``stdout``/
``stderr`` too), ``1`` or ``true``. ``/portForward/{ns}/{pod}[/{uid}]`` speaks the kubelet's
channel protocol (``?port=N`` repeated, a data and an error channel per port, each opened
with the port as two little-endian bytes) and SPDY/3.1 tunnelled in WebSocket (what
kubectl >= 1.31 asks for, see :mod:`..spdy`). The framing is aiohttp's.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import json
import logging
import struct
import zlib
from collections.abc import Callable, Sequence
from typing import Any

from aiohttp import WSMsgType, web

from .. import spdy
from ..capabilities import ExecIO, Pipe, PortStream, TermSize
from ..logs import log_fields
from .context import HTTPFailure, NodeContext, NodeEntry

__all__ = ["EXEC_PROTOCOLS", "INBOUND_LIMIT", "PORT_FORWARD_PROTOCOLS", "StreamRoutes"]

log = logging.getLogger(__name__)

# Channels of the remote command protocols (k8s.io/streaming remotecommand).
STDIN, STDOUT, STDERR, ERROR, RESIZE = 0, 1, 2, 3, 4
STREAM_CLOSE = 255

V5 = "v5.channel.k8s.io"
V4 = "v4.channel.k8s.io"
V4_BASE64 = "v4.base64.channel.k8s.io"
V1 = "channel.k8s.io"
V1_BASE64 = "base64.channel.k8s.io"
EXEC_PROTOCOLS = (V5, V4, V4_BASE64, V1, V1_BASE64, "")
# SPDY/3.1 tunnelled in WebSocket: what kubectl >= 1.31 asks for (see .spdy).
TUNNEL = "SPDY/3.1+portforward.k8s.io"
PORT_FORWARD_PROTOCOLS = (TUNNEL, V4, V4_BASE64, V1, V1_BASE64, "")
_BASE64 = {V4_BASE64, V1_BASE64}
_STATUS_ERRORS = {V5, V4, V4_BASE64}  # the error channel carries a metav1.Status (else text)
# Bytes a caller may send ahead of the provider (stdin, port-forward data) before its frames
# are no longer read: TCP then slows the caller down instead of memory growing.
INBOUND_LIMIT = 4 << 20


def _flag(query: Any, *names: str) -> bool:
    # remotecommand.NewOptions: a stream is on when its parameter is "1" (kubectl may say "true").
    return any(query.get(n) in ("1", "true", "True") for n in names)


class StreamRoutes:
    """The handlers of the WebSocket routes; the provider's stream ends are :mod:`..capabilities`'."""

    def __init__(self, context: NodeContext) -> None:
        self.context = context

    @staticmethod
    def _negotiate(request: web.Request, supported: Sequence[str]) -> str:
        if request.headers.get("Upgrade", "").lower() != "websocket":
            upgrade = request.headers.get("Upgrade", "")
            if upgrade.lower().startswith("spdy"):
                raise HTTPFailure(
                    400,
                    "SPDY is not served by this podstatus node: use a WebSocket protocol "
                    f"({', '.join(p for p in supported if p)}); kube-apiserver 1.36+ proxies them "
                    "to a node that declares ExtendWebSocketsToKubelet",
                )
            raise HTTPFailure(400, "Upgrade request required")
        header = request.headers.get("Sec-WebSocket-Protocol", "")
        offered = [p.strip() for p in header.split(",") if p.strip()] or [""]
        for protocol in offered:
            if protocol in supported:
                return protocol
        raise HTTPFailure(
            400,
            f"requested protocol(s) are not supported: {offered}; supports {[p for p in supported if p]}",
        )

    async def exec(self, request: web.Request) -> web.StreamResponse:
        return await self._remote_command(request, "exec")

    async def attach(self, request: web.Request) -> web.StreamResponse:
        return await self._remote_command(request, "attach")

    async def _remote_command(self, request: web.Request, kind: str) -> web.StreamResponse:
        node = self.context.node_of(request)
        query = request.query
        tty = _flag(query, "tty")
        stdin = _flag(query, "input", "stdin")
        stdout = _flag(query, "output", "stdout")
        stderr = _flag(query, "error", "stderr") and not tty  # a terminal merges stderr
        if not (stdin or stdout or stderr):
            raise HTTPFailure(400, "you must specify at least 1 of stdin, stdout, stderr")
        command = query.getall("command", [])
        if kind == "exec" and not command:
            raise HTTPFailure(400, "command is required: at least one command= parameter")
        pod = self.context.pod(node, request)
        container = self.context.container(pod, request)
        method = "run_in_container" if kind == "exec" else "attach_to_container"
        fn = self.context.capability(node, method)
        protocol = self._negotiate(request, EXEC_PROTOCOLS)
        ws = web.WebSocketResponse(protocols=[protocol] if protocol else (), max_msg_size=0, autoping=True)
        await ws.prepare(request)
        b64 = protocol in _BASE64
        io = ExecIO(
            stdin=Pipe() if stdin else None,
            stdout=Pipe() if stdout else None,
            stderr=Pipe() if stderr else None,
            tty=tty,
        )
        log_fields(
            log,
            logging.INFO,
            f"{kind} started",
            node=node.name,
            pod=pod.key(),
            container=container,
            protocol=protocol or "(none)",
            tty=tty,
            command=" ".join(command)[:200],
        )

        async def send(channel: int, data: bytes) -> None:
            if b64:
                await ws.send_str(chr(ord("0") + channel) + base64.b64encode(data).decode())
            else:
                await ws.send_bytes(bytes([channel]) + data)

        # The first (empty) frame on the lowest writable channel tells the client it is open.
        await send(STDOUT if stdout else STDERR if stderr else ERROR, b"")
        reader = asyncio.ensure_future(self._read_commands(ws, io, b64, protocol == V5))
        pumps = [
            asyncio.ensure_future(self._pump(pipe, channel, send))
            for pipe, channel in ((io.stdout, STDOUT), (io.stderr, STDERR))
            if pipe is not None
        ]
        ns, name = pod.metadata.namespace, pod.metadata.name
        args = (ns, name, container, list(command), io) if kind == "exec" else (ns, name, container, io)
        call = asyncio.ensure_future(self.context.call(fn, *args))
        status: dict[str, Any]
        try:
            done, _ = await asyncio.wait({call, reader}, return_when=asyncio.FIRST_COMPLETED)
            if call not in done:
                # The caller went away: tell the provider, give it a moment, and stop.
                io.closed.set()
                for pump in pumps:
                    pump.cancel()
                with contextlib.suppress(BaseException):
                    await asyncio.wait_for(asyncio.shield(call), 5)
                log_fields(log, logging.INFO, f"{kind} caller went away", node=node.name, pod=pod.key())
                return ws
            code = call.result()
            status = _exit_status(code, command if kind == "exec" else None, protocol)
        except Exception as err:
            status = {"metadata": {}, "status": "Failure", "message": f"{kind} failed: {err}"}
        finally:
            for pipe in (io.stdout, io.stderr, io.stdin):
                if pipe is not None:
                    pipe.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(asyncio.gather(*pumps), 10)
            if protocol in _STATUS_ERRORS:
                await send(ERROR, json.dumps(status).encode())
            elif status["status"] != "Success":
                await send(ERROR, str(status.get("message", "")).encode())
        io.closed.set()
        reader.cancel()
        await ws.close()
        log_fields(
            log,
            logging.INFO,
            f"{kind} ended",
            node=node.name,
            pod=pod.key(),
            status=status.get("message", "Success"),
        )
        return ws

    @staticmethod
    async def _pump(pipe: Pipe, channel: int, send: Callable[[int, bytes], Any]) -> None:
        while True:
            chunk = await pipe.read(32 * 1024)
            if not chunk:
                return
            await send(channel, chunk)

    @staticmethod
    async def _read_commands(ws: web.WebSocketResponse, io: ExecIO, b64: bool, v5: bool) -> None:
        """The caller's frames: stdin, terminal sizes, and (v5) the close of a stream."""
        try:
            async for msg in ws:
                if msg.type == WSMsgType.BINARY:
                    data: bytes = msg.data
                elif msg.type == WSMsgType.TEXT and b64:
                    text: str = msg.data
                    if not text:
                        continue
                    try:
                        data = bytes([ord(text[0]) - ord("0")]) + base64.b64decode(text[1:])
                    except (binascii.Error, ValueError):
                        continue
                else:
                    continue
                if not data:
                    continue
                if v5 and data[0] == STREAM_CLOSE and len(data) == 2:
                    if data[1] == STDIN and io.stdin is not None:
                        io.stdin.close()
                    continue
                if data[0] == STDIN and io.stdin is not None:
                    io.stdin.write(data[1:])
                    await io.stdin.wait_below(INBOUND_LIMIT)
                elif data[0] == RESIZE:
                    with contextlib.suppress(ValueError, TypeError, KeyError, AttributeError):
                        size = json.loads(data[1:])
                        io.resizes.put(TermSize(int(size["Width"]), int(size["Height"])))
        finally:
            if io.stdin is not None:
                io.stdin.close()
            io.resizes.close()

    async def port_forward(self, request: web.Request) -> web.StreamResponse:
        node = self.context.node_of(request)
        ports: list[int] = []
        for value in request.query.getall("port", []):
            try:
                port = int(value)
            except ValueError:
                raise HTTPFailure(400, f'unable to parse "{value}" as a port: must be an integer') from None
            if not 0 < port <= 65535:
                raise HTTPFailure(400, f"port {port} must be > 0 and <= 65535")
            ports.append(port)
        tunnel = TUNNEL in request.headers.get("Sec-WebSocket-Protocol", "")
        if not ports and not tunnel and request.headers.get("Upgrade", "").lower() == "websocket":
            raise HTTPFailure(400, 'query parameter "port" is required')
        pod = self.context.pod(node, request)
        fn = self.context.capability(node, "port_forward")
        protocol = self._negotiate(request, PORT_FORWARD_PROTOCOLS)
        if protocol == TUNNEL:
            return await self._spdy_port_forward(request, node, pod, fn)
        ws = web.WebSocketResponse(protocols=[protocol] if protocol else (), max_msg_size=0)
        await ws.prepare(request)
        b64 = protocol in _BASE64
        streams = [PortStream(port) for port in ports]
        log_fields(
            log,
            logging.INFO,
            "port-forward started",
            node=node.name,
            pod=pod.key(),
            ports=",".join(map(str, ports)),
        )

        async def send(channel: int, data: bytes) -> None:
            if b64:
                await ws.send_str(chr(ord("0") + channel) + base64.b64encode(data).decode())
            else:
                await ws.send_bytes(bytes([channel]) + data)

        # Each channel opens with its port, two bytes little-endian (portforward/websocket.go).
        for i, port in enumerate(ports):
            await send(2 * i, struct.pack("<H", port))
            await send(2 * i + 1, struct.pack("<H", port))
        ns, name = pod.metadata.namespace, pod.metadata.name
        tasks = []
        for i, stream in enumerate(streams):
            tasks.append(asyncio.ensure_future(self._forward_one(fn, ns, name, stream, i, send)))
        try:
            async for msg in ws:
                if msg.type == WSMsgType.BINARY:
                    data: bytes = msg.data
                elif msg.type == WSMsgType.TEXT and b64 and msg.data:
                    try:
                        data = bytes([ord(msg.data[0]) - ord("0")]) + base64.b64decode(msg.data[1:])
                    except (binascii.Error, ValueError):
                        continue
                else:
                    continue
                if len(data) < 1 or data[0] % 2 or data[0] // 2 >= len(streams):
                    continue
                inbound = streams[data[0] // 2].inbound
                inbound.write(data[1:])
                await inbound.wait_below(INBOUND_LIMIT)
        finally:
            for stream in streams:
                stream.closed.set()
                stream.inbound.close()
            # What the caller sent before it left is still read: a moment for the provider.
            if tasks:
                await asyncio.wait(tasks, timeout=5)
            for task in tasks:
                task.cancel()
            await ws.close()
        log_fields(log, logging.INFO, "port-forward ended", node=node.name, pod=pod.key())
        return ws

    async def _spdy_port_forward(
        self, request: web.Request, node: NodeEntry, pod: Any, fn: Callable[..., Any]
    ) -> web.StreamResponse:
        """port-forward over SPDY/3.1 in WebSocket: a stream pair (error, data) per connection."""
        ws = web.WebSocketResponse(protocols=[TUNNEL], max_msg_size=0)
        await ws.prepare(request)
        codec = spdy.HeaderCodec()
        reader = spdy.FrameReader(codec)
        lock = asyncio.Lock()
        ns, name = pod.metadata.namespace, pod.metadata.name
        inbound: dict[int, Pipe] = {}  # data stream id -> what the caller sends on it
        pairs: dict[str, dict[str, int]] = {}  # requestid -> streamtype -> stream id
        ports: dict[str, int] = {}
        tasks: list[asyncio.Future[Any]] = []
        log_fields(log, logging.INFO, "port-forward (SPDY tunnel) started", node=node.name, pod=pod.key())

        async def send(frame: bytes) -> None:
            async with lock:  # header compression and frame order are per connection
                await ws.send_bytes(frame)

        async def reply(stream_id: int) -> None:
            async with lock:
                block = codec.encode({})
                await ws.send_bytes(
                    spdy.control_frame(spdy.SYN_REPLY, 0, struct.pack(">I", stream_id) + block)
                )

        async def forward(request_id: str) -> None:
            pair, port = pairs[request_id], ports[request_id]
            data_id, error_id = pair["data"], pair["error"]
            stream = PortStream(port)
            stream.inbound = inbound[data_id]

            async def pump_out() -> None:
                while chunk := await stream.outbound.read(32 * 1024):
                    await send(spdy.data_frame(data_id, 0, chunk))

            async def pump_errors() -> None:
                while (message := await stream.errors.get()) is not None:
                    await send(spdy.data_frame(error_id, 0, message.encode()))

            out, errors = asyncio.ensure_future(pump_out()), asyncio.ensure_future(pump_errors())
            try:
                await self.context.call(fn, ns, name, port, stream)
            except Exception as err:
                stream.error(f"error forwarding port {port} to pod {ns}/{name}: {type(err).__name__}: {err}")
            finally:
                stream.close()
                stream.inbound.close()  # nobody reads it any more: a caller waiting to send goes on
                stream.errors.close()
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(asyncio.gather(out, errors), 10)
                    # Both streams end as the kubelet ends them: closed (FIN), not reset.
                    await send(spdy.data_frame(data_id, spdy.DATA_FIN, b""))
                    await send(spdy.data_frame(error_id, spdy.DATA_FIN, b""))

        try:
            async for msg in ws:
                if msg.type != WSMsgType.BINARY:
                    continue
                try:
                    frames = reader.feed(msg.data)
                except (ValueError, struct.error, zlib.error) as err:
                    log_fields(
                        log, logging.WARNING, "bad SPDY frame: closing", node=node.name, error=str(err)
                    )
                    break
                for frame in frames:
                    if frame.type == 0:
                        pipe = inbound.get(frame.stream_id)
                        if pipe is not None:
                            pipe.write(frame.payload)
                            if frame.flags & spdy.DATA_FIN:
                                pipe.close()
                            await pipe.wait_below(INBOUND_LIMIT)
                    elif frame.type == spdy.SYN_STREAM:
                        kind = frame.headers.get("streamtype", "")
                        request_id = frame.headers.get("requestid", "")
                        try:
                            port = int(frame.headers.get("port", ""))
                        except ValueError:
                            port = 0
                        if kind not in ("data", "error") or not 0 < port <= 65535:
                            await send(
                                spdy.control_frame(
                                    spdy.RST_STREAM,
                                    0,
                                    struct.pack(">II", frame.stream_id, spdy.PROTOCOL_ERROR),
                                )
                            )
                            continue
                        await reply(frame.stream_id)
                        if kind == "data":
                            inbound[frame.stream_id] = Pipe()
                        pairs.setdefault(request_id, {})[kind] = frame.stream_id
                        ports[request_id] = port
                        if len(pairs[request_id]) == 2:
                            tasks.append(asyncio.ensure_future(forward(request_id)))
                    elif frame.type == spdy.RST_STREAM:
                        pipe = inbound.get(frame.stream_id)
                        if pipe is not None:
                            pipe.close()
                    elif frame.type == spdy.PING:
                        await send(spdy.control_frame(spdy.PING, 0, frame.payload[:4]))
                    elif frame.type == spdy.GOAWAY:
                        break
        finally:
            for pipe in inbound.values():
                pipe.close()
            if tasks:
                await asyncio.wait(tasks, timeout=5)
            for task in tasks:
                task.cancel()
            await ws.close()
        log_fields(log, logging.INFO, "port-forward (SPDY tunnel) ended", node=node.name, pod=pod.key())
        return ws

    async def _forward_one(
        self,
        fn: Callable[..., Any],
        ns: str,
        name: str,
        stream: PortStream,
        index: int,
        send: Callable[..., Any],
    ) -> None:
        async def pump_out() -> None:
            while chunk := await stream.outbound.read(32 * 1024):
                await send(2 * index, chunk)

        async def pump_errors() -> None:
            while (message := await stream.errors.get()) is not None:
                await send(2 * index + 1, message.encode())

        out = asyncio.ensure_future(pump_out())
        errors = asyncio.ensure_future(pump_errors())
        try:
            await self.context.call(fn, ns, name, stream.port, stream)
        except Exception as err:
            stream.error(
                f"error forwarding port {stream.port} to pod {ns}/{name}, uid : {type(err).__name__}: {err}"
            )
        finally:
            stream.close()
            stream.inbound.close()  # nobody reads it any more: a caller waiting to send goes on
            stream.errors.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.gather(out, errors), 10)


def _exit_status(code: Any, command: list[str] | None, protocol: str) -> dict[str, Any]:
    """The error channel's metav1.Status: Success, or NonZeroExitCode with the code as cause."""
    if code is None or code == 0:
        return {"metadata": {}, "status": "Success"}
    what = (
        f"error executing command {command}, exit code {code}" if command is not None else f"exit code {code}"
    )
    return {
        "metadata": {},
        "status": "Failure",
        "message": f"command terminated with non-zero exit code: {what}",
        "reason": "NonZeroExitCode",
        "details": {"causes": [{"reason": "ExitCode", "message": str(int(code))}]},
    }
