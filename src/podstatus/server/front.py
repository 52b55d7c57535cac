"""The embedded API server's HTTP front on aiohttp: one event loop thread does every socket's I/O.

It turns bytes into a :class:`~.endpoints.Request`, hands it to its owner
(:class:`~.http.EmbeddedApiServer`: authentication, then ``dispatch``), and writes the
:class:`~.endpoints.Response` back: a body, a chunked stream (watch), a reset (fault
injection) or a hand-over of the connection (an upgraded stream relayed to a kubelet).

``dispatch`` and a watch's stream are blocking calls (fault injection sleeps, a read waits for
a resourceVersion, the kubelet relay does blocking I/O): they run on a thread pool, so the
loop never waits on them. Limits: ``max_connections`` at once (more are closed at accept),
``header_timeout`` for the TLS handshake (asyncio's ``ssl_handshake_timeout``) and each
request's headers (a per-connection timer: aiohttp bounds no header read by itself),
``idle_timeout`` between keep-alive requests (aiohttp's keep-alive timeout).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
import struct
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Protocol, cast
from urllib.parse import parse_qsl

from aiohttp import HttpVersion11, web
from aiohttp.web_protocol import RequestHandler

from .audit import AuditLog
from .endpoints.wire import Request, Response, status_error, warning_value

__all__ = [
    "DEFAULT_HEADER_TIMEOUT",
    "DEFAULT_IDLE_TIMEOUT",
    "DEFAULT_MAX_CONNECTIONS",
    "AioFront",
    "FrontOwner",
]

log = logging.getLogger(__name__)

# Connection limits. kube-apiserver's http.Server: ReadHeaderTimeout 32 s (TLS handshake and
# request headers), IdleTimeout 90 s (between keep-alive requests). It has no cap on
# connections; here there is one, as each open watch holds a thread of the pool.
DEFAULT_MAX_CONNECTIONS = 4096
DEFAULT_HEADER_TIMEOUT = 32.0
DEFAULT_IDLE_TIMEOUT = 90.0
# A body over the limit is read and dropped up to this many times the limit, then the connection closes.
_DRAIN_FACTOR = 16
_END = object()
# How often an idle watch checks whether its client left or the server is stopping.
_IDLE_CHECK_SECONDS = 1.0


class _Versions(Protocol):
    """The store's version counter, which the watches wait on."""

    @property
    def resource_version(self) -> int: ...

    def wait_for_resource_version(self, rv: int, timeout: float) -> bool: ...


class FrontOwner(Protocol):
    """What the front needs of the server it serves (:class:`~.http.EmbeddedApiServer`)."""

    max_connections: int
    header_timeout: float
    idle_timeout: float
    max_body_bytes: int
    token: str | None
    audit: AuditLog | None
    dispatch: Callable[[Request], Response]

    @property
    def store(self) -> _Versions: ...

    def authenticate(self, request: Request) -> Response | None: ...

    def may_block(self, request: Request) -> bool: ...


class _Connection(RequestHandler):
    """aiohttp's protocol, plus the connection cap and the header timeout."""

    front: AioFront
    _header_timer: asyncio.TimerHandle | None = None
    # The client sent its end (EOF): it reads what is in hand, but no stream goes on for it.
    client_done = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        front = self.front
        front.transports.add(cast(asyncio.Transport, transport))
        if front.open_connections >= front.owner.max_connections:
            front.refused(transport)
            transport.close()
            return
        front.open_connections += 1
        self._counted = True
        sock = transport.get_extra_info("socket")
        if sock is not None:
            # Small request/response pairs on keep-alive connections: never wait for Nagle.
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        super().connection_made(transport)
        self._arm_header_timer()

    def connection_lost(self, exc: BaseException | None) -> None:
        self._cancel_header_timer()
        if getattr(self, "_counted", False):
            self._counted = False
            self.front.open_connections -= 1
        if self._manager is not None or self.transport is not None:
            super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        before = self._request_count
        in_headers = self._payload_parser is None and not self._upgraded
        super().data_received(data)
        if self._request_count != before:
            self._cancel_header_timer()  # a request's headers are complete
        elif in_headers and data and self._header_timer is None:
            self._arm_header_timer()  # the next request started: its headers get the timeout

    def eof_received(self) -> bool:  # type: ignore[override]  # asyncio's: True keeps it open
        self.client_done = True  # a stream being written to it ends (its client left)
        # A client that half-closes after its request still reads the answer (as from Go's
        # server): the connection ends once the requests in hand are answered. An idle one
        # ends now.
        waiting = self._waiter
        if waiting is not None and not waiting.done():
            return False  # nothing in hand (or a request that can no longer complete): close
        self.close()
        return True

    def handle_error(
        self,
        request: web.BaseRequest,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        """A request aiohttp could not parse (bad framing: Content-Length, chunk sizes) or a
        handler's failure: kube-apiserver's Status body, one log line, the connection closed."""
        if status >= 500:
            log.error("error serving %s", request.remote, exc_info=exc)
            text = "Internal error occurred"
            reason = "InternalError"
        else:
            detail = (getattr(exc, "message", None) or message or str(exc or "")).strip().splitlines()
            first = detail[0].rstrip(":") if detail else "bad request"
            if "Content-Length" in first:
                text = f"bad Content-Length: {first}"
            elif "chunk" in first.lower():
                text = f"malformed chunked encoding: {first}"
            else:
                text = first
            reason = "BadRequest" if status == 400 else "RequestError"
            log.info("refused a malformed request", extra={"peer": str(request.remote), "error": text})
        body = status_error(status, reason, text)
        resp = web.Response(status=status, body=body.body, headers={"Content-Type": body.content_type})
        resp.force_close()
        # A request that failed to parse has no version of its own: answer as HTTP/1.1.
        request._version = HttpVersion11
        return resp

    def _arm_header_timer(self) -> None:
        self._cancel_header_timer()
        self._header_timer = self._loop.call_later(self.front.owner.header_timeout, self._header_expired)

    def _cancel_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _header_expired(self) -> None:
        self._header_timer = None
        if self.transport is None:
            return
        self.front.expired += 1
        log.info(
            "closed a connection that sent no complete request headers in time",
            extra={"peer": str(self.transport.get_extra_info("peername"))},
        )
        self.force_close()  # closes the transport


class _Splice(asyncio.Protocol):
    """One side of a relayed connection: what it receives goes to ``peer``; its end ends the peer.

    On the client's side, ``owner`` is aiohttp's protocol the transport was taken from: it is
    told the connection is lost (so its counts and timers end), and ``done`` resolves."""

    def __init__(self, owner: RequestHandler | None, done: asyncio.Future[None] | None) -> None:
        self.peer: asyncio.Transport | None = None
        self._owner = owner
        self._done = done
        self._transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        if self.peer is not None and not self.peer.is_closing():
            self.peer.write(data)

    def eof_received(self) -> bool | None:
        peer = self.peer
        if peer is not None and not peer.is_closing():
            if peer.can_write_eof():
                peer.write_eof()
            else:
                peer.close()
        return True  # keep this side open for what the peer still sends

    def connection_lost(self, exc: BaseException | None) -> None:
        if self.peer is not None and not self.peer.is_closing():
            self.peer.close()
        if self._owner is not None:
            owner, self._owner = self._owner, None
            owner.connection_lost(exc)
        if self._done is not None and not self._done.done():
            self._done.set_result(None)


class _TlsAccept(asyncio.Protocol):
    """A TLS connection's first protocol: the handshake (bounded by the header timeout), then
    the connection goes to aiohttp's protocol. A refused handshake is one log line."""

    def __init__(self, front: AioFront, web_server: _Server, context: ssl.SSLContext) -> None:
        self._front = front
        self._web = web_server
        self._context = context

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        tcp = cast(asyncio.Transport, transport)
        self._front.transports.add(tcp)
        tcp.pause_reading()  # the ClientHello is the handshake's, not the HTTP parser's
        asyncio.get_running_loop().create_task(self._handshake(tcp))

    async def _handshake(self, tcp: asyncio.Transport) -> None:
        loop = asyncio.get_running_loop()
        conn = self._web()
        peer = tcp.get_extra_info("peername")
        try:
            tls = await loop.start_tls(
                tcp, conn, self._context, server_side=True,
                ssl_handshake_timeout=self._front.owner.header_timeout,
            )  # fmt: skip
        except (OSError, TimeoutError, ConnectionError) as err:
            log.warning(
                "TLS handshake with %s failed: %s",
                peer[0] if peer else "?",
                getattr(err, "reason", None) or err or type(err).__name__,
                extra={"peer": str(peer), "error": str(err)},
            )
            tcp.abort()
            return
        if tls is None:
            tcp.abort()
            return
        conn.connection_made(tls)

    def data_received(self, data: bytes) -> None:  # pragma: no cover - reading is paused
        pass


class _Server(web.Server):
    front: AioFront

    def __call__(self) -> RequestHandler:
        conn = _Connection(self, loop=self._loop, **self._kwargs)
        conn.front = self.front
        return conn


class AioFront:
    """The listening socket, its event loop thread and the thread pool for blocking calls."""

    def __init__(self, owner: FrontOwner, host: str, port: int, tls: ssl.SSLContext | None) -> None:
        self.owner = owner
        self.open_connections = 0
        self.refused_connections = 0
        self.expired = 0
        # Every accepted socket's transport, until it is collected (aborted at stop).
        self.transports: weakref.WeakSet[asyncio.Transport] = weakref.WeakSet()
        # Responses being streamed now (watches, logs): each holds a pool thread while it waits.
        self.open_streams = 0
        self._refusal_logged = 0.0
        self._tls = tls
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
            # The listen backlog (the kernel caps it at somaxconn): a burst of clients is queued.
            sock.listen(4096)
        except OSError:
            sock.close()
            raise
        sock.setblocking(False)
        self._sock = sock
        self.port: int = sock.getsockname()[1]
        self._pool = ThreadPoolExecutor(
            max_workers=owner.max_connections, thread_name_prefix=f"apiserver-{self.port}"
        )
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._server: asyncio.AbstractServer | None = None
        self._web: _Server | None = None
        self._thread = threading.Thread(target=self._run, name=f"apiserver-{self.port}", daemon=True)
        # Set (and replaced) on the loop each time the store's version moves: the watches' wake-up.
        self._changed: asyncio.Event = asyncio.Event()
        self._stopped = threading.Event()
        # Set while a watch is being stepped on the loop (``_polling`` of them).
        self._watching = threading.Event()
        self._polling = 0
        self._notifier = threading.Thread(
            target=self._notify_changes, name=f"apiserver-changes-{self.port}", daemon=True
        )

    def start(self) -> None:
        self._thread.start()
        self._ready.wait(10)
        self._notifier.start()

    def _notify_changes(self) -> None:
        # One thread waits on the store for every watch; the loop wakes those that wait. With
        # no watch open it waits for one instead, so writes do not wake the loop for nobody.
        store = self.owner.store
        while not self._stopped.is_set():
            if not self._watching.wait(0.5):
                continue
            # What changed before the first watch began is its first step's; wake once to be sure.
            seen = store.resource_version
            self._wake_loop()
            while self._watching.is_set() and not self._stopped.is_set():
                if store.wait_for_resource_version(seen + 1, 0.5):
                    seen = store.resource_version
                    self._wake_loop()

    def _wake_loop(self) -> None:
        with contextlib.suppress(RuntimeError):  # the loop is closed: stopping
            self._loop.call_soon_threadsafe(self._wake)

    def _wake(self) -> None:
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    def _run(self) -> None:
        loop = self._loop
        asyncio.set_event_loop(loop)
        web_server = _Server(
            self._handle,
            loop=loop,
            keepalive_timeout=self.owner.idle_timeout,
            access_log=None,
            max_field_size=1 << 16,
            max_line_size=1 << 16,
        )
        web_server.front = self
        self._web = web_server
        tls = self._tls
        factory: Callable[[], asyncio.BaseProtocol] = (
            web_server if tls is None else lambda: _TlsAccept(self, web_server, tls)
        )
        self._server = loop.run_until_complete(loop.create_server(factory, sock=self._sock, backlog=4096))
        self._ready.set()
        try:
            loop.run_forever()
            # What the aborted connections left: their handlers end on cancellation.
            tasks = asyncio.all_tasks(loop)
            for task in tasks:
                task.cancel()
            loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            loop.close()

    def stop(self) -> None:
        loop = self._loop
        if not self._thread.is_alive():
            return

        async def shut() -> None:
            if self._server is not None:
                self._server.close()
            if self._web is not None:
                for conn in list(self._web.connections):
                    conn.force_close()
            # A stopped server answers nothing more, keep-alive or not, handshake or relay.
            for transport in list(self.transports):
                transport.abort()
            for _ in range(3):  # their connection_lost callbacks
                await asyncio.sleep(0)
            loop.stop()

        self._stopped.set()
        asyncio.run_coroutine_threadsafe(shut(), loop)
        self._thread.join(timeout=10)
        self._notifier.join(timeout=5)
        self._pool.shutdown(wait=False, cancel_futures=True)

    def refused(self, transport: asyncio.BaseTransport) -> None:
        self.refused_connections += 1
        now = time.monotonic()
        if now - self._refusal_logged >= 10.0:
            self._refusal_logged = now
            log.warning(
                "connection refused: %d connections open (--max-connections)",
                self.owner.max_connections,
                extra={
                    "peer": str(transport.get_extra_info("peername")),
                    "refused": self.refused_connections,
                },
            )

    # -- one request ------------------------------------------------------------------------

    async def _handle(self, raw: web.BaseRequest) -> web.StreamResponse:
        owner = self.owner
        audit = owner.audit
        received = time.time()
        request: Request | None = None
        response: Response | None = None
        try:
            body = await self._read_body(raw, owner.max_body_bytes)
            answered: Response
            if body is None:
                # The rest of the body is never read: the connection cannot be reused.
                raw.protocol.close()
                response = answered = status_error(
                    413, "RequestEntityTooLarge", f"Request entity too large: limit is {owner.max_body_bytes}"
                )
            else:
                request = Request(
                    method=raw.method,
                    path=raw.path,
                    query=dict(parse_qsl(raw.query_string, keep_blank_values=True)),
                    headers={k.lower(): v for k, v in raw.headers.items()},
                    body=body,
                    raw_query=raw.query_string,
                )
                denied = owner.authenticate(request)
                if denied is not None:
                    answered = denied
                elif owner.may_block(request):
                    answered = await self._loop.run_in_executor(self._pool, owner.dispatch, request)
                else:
                    # Quick store work: on the loop, no thread hand-off.
                    answered = owner.dispatch(request)
                response = answered
            return await self._write(raw, answered, close=body is None)
        finally:
            if audit is not None:
                code = 500 if response is None or response.abort else response.status
                audit.record(
                    method=raw.method,
                    uri=raw.path_qs,
                    path=raw.path if request is None else request.path,
                    query=dict(parse_qsl(raw.query_string, keep_blank_values=True)) if request is None
                    else request.query,
                    user_agent=raw.headers.get("User-Agent", ""),
                    source_ip=str(raw.remote or ""),
                    code=code,
                    received=received,
                    authenticated=owner.token is not None and code != 401 and "Authorization" in raw.headers,
                    body=b"" if response is None or response.stream is not None else response.body,
                    content_type="" if response is None else response.content_type,
                    audit_id=raw.headers.get("Audit-ID", ""),
                )  # fmt: skip

    @staticmethod
    async def _read_body(raw: web.BaseRequest, limit: int) -> bytes | None:
        """The body, or None when it is larger than ``limit`` (drained up to a bound, so the
        client reads the 413 instead of a reset)."""
        if not raw.body_exists:
            return b""
        chunks: list[bytes] = []
        size = 0
        while True:
            data = await raw.content.readany()
            if not data:
                break
            size += len(data)
            if size > _DRAIN_FACTOR * limit:
                return None
            if size <= limit:
                chunks.append(data)
        return b"".join(chunks) if size <= limit else None

    def _headers(self, response: Response) -> dict[str, str]:
        headers = {"Content-Type": response.content_type, "Cache-Control": "no-cache, private"}
        headers.update(response.headers)
        return headers

    async def _write(
        self, raw: web.BaseRequest, response: Response, close: bool = False
    ) -> web.StreamResponse:
        if response.abort:
            self._reset(raw)
            return web.Response(status=500)
        if response.takeover is not None:
            return await self._takeover(raw, response)
        headers = self._headers(response)
        if response.stream is None:
            out = web.Response(status=response.status, body=response.body, headers=headers)
            for w in response.warnings:
                out.headers.add("Warning", warning_value(w))
            if close:
                out.force_close()  # Connection: close
            return out
        stream = response.stream
        streamed = web.StreamResponse(status=response.status, headers=headers)
        for w in response.warnings:
            streamed.headers.add("Warning", warning_value(w))
        streamed.enable_chunked_encoding()
        if response.stream_polls:
            return await self._poll_stream(raw, stream, streamed)
        return await self._stream(raw, stream, streamed)

    async def _poll_stream(
        self, raw: web.BaseRequest, stream: Iterator[bytes], out: web.StreamResponse
    ) -> web.StreamResponse:
        """A stream whose steps never block (a watch), on the loop: after "nothing now" it
        waits for the store to change (or a second, for the departed-client check)."""
        self.open_streams += 1
        self._polling += 1
        self._watching.set()
        try:
            await out.prepare(raw)
            while True:
                changed = self._changed
                chunk = next(stream, None)
                if chunk is None:
                    break
                if chunk:
                    await out.write(chunk)
                    continue
                if _client_gone(raw):
                    raw.protocol.force_close()
                    return out
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(changed.wait(), _IDLE_CHECK_SECONDS)
            await out.write_eof()
        except (ConnectionResetError, OSError):
            raw.protocol.force_close()
        finally:
            self.open_streams -= 1
            self._polling -= 1
            if not self._polling:
                self._watching.clear()
            close = getattr(stream, "close", None)
            if close is not None:
                close()
        return out

    async def _stream(
        self, raw: web.BaseRequest, stream: Iterator[bytes], out: web.StreamResponse
    ) -> web.StreamResponse:
        pending: Future[object] | None = None
        self.open_streams += 1
        try:
            await out.prepare(raw)
            while True:
                pending = self._pool.submit(next, stream, _END)
                chunk = await asyncio.wrap_future(pending)
                pending = None
                if chunk is _END:
                    break
                if not chunk:
                    # The stream's "still there?": a departed client shows as a closing transport.
                    if _client_gone(raw):
                        raw.protocol.force_close()
                        return out
                    continue
                await out.write(cast(bytes, chunk))
            await out.write_eof()
        except (ConnectionResetError, OSError):
            raw.protocol.force_close()
        finally:
            self.open_streams -= 1
            # The stream is closed on the pool, after the step it may still be running
            # (cancelled at stop, or the client left): a generator cannot be closed mid-step.
            close = getattr(stream, "close", None)
            if close is not None:
                if pending is not None and not pending.done():
                    pending.add_done_callback(lambda _: close())
                else:
                    with contextlib.suppress(RuntimeError):  # the pool is shut down: stopping
                        self._pool.submit(close)
        return out

    @staticmethod
    def _reset(raw: web.BaseRequest) -> None:
        # SO_LINGER 0: close sends RST, as a crashed or overloaded server would.
        transport = raw.transport
        raw.protocol.force_close()
        if transport is None:
            return
        sock = transport.get_extra_info("socket")
        with contextlib.suppress(OSError):
            if sock is not None:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        transport.abort()

    async def _takeover(self, raw: web.BaseRequest, response: Response) -> web.StreamResponse:
        """The connection goes to the relay (server/proxy.py, which splices blocking sockets).

        The relay gets one end of a socket pair, on a thread; the loop carries bytes between
        the other end and the client's transport (TLS or not: the TLS state stays the loop's).
        The client's transport leaves aiohttp's protocol for a :class:`_Splice`; when either
        side ends, both close and aiohttp's protocol learns the connection is gone."""
        transport = raw.transport
        takeover = response.takeover
        assert takeover is not None
        if transport is None:
            return web.Response(status=500)
        relay_end, loop_end = socket.socketpair()
        relay_end.setblocking(True)
        done: asyncio.Future[None] = self._loop.create_future()
        client = _Splice(raw.protocol, done)
        pair_transport, pair = await self._loop.create_connection(lambda: _Splice(None, None), sock=loop_end)
        client.peer, pair.peer = pair_transport, transport
        transport.set_protocol(client)
        client.connection_made(transport)
        rfile = relay_end.makefile("rb")

        def relay() -> None:
            try:
                takeover(relay_end, cast(Any, rfile))
            finally:
                rfile.close()
                with contextlib.suppress(OSError):
                    relay_end.shutdown(socket.SHUT_RDWR)
                relay_end.close()

        relayed = self._loop.run_in_executor(self._pool, relay)
        try:
            await done  # the client's side ended (after the relay's, or before it)
        finally:
            pair_transport.close()
        with contextlib.suppress(Exception):
            await relayed
        # Nothing more may be written: aiohttp's writer finds no transport.
        return web.Response(status=101)

    def _plain(self, response: Response) -> web.Response:
        return web.Response(status=response.status, body=response.body, headers=self._headers(response))


def _client_gone(raw: web.BaseRequest) -> bool:
    """Whether the client of a streamed response left: its connection closed, or it sent its end."""
    conn = raw.protocol
    return (
        raw.transport is None
        or raw.transport.is_closing()
        or (isinstance(conn, _Connection) and conn.client_done)
    )
