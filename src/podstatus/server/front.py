"""The embedded API server's HTTP front: the standard library's ``ThreadingHTTPServer``, HTTP/1.1
keep-alive, one thread per connection.

It turns bytes into a :class:`~.endpoints.Request`, hands it to its owner
(:class:`~.http.EmbeddedApiServer`: authentication, then ``dispatch``), and writes the
:class:`~.endpoints.Response` back: a body, a chunked stream (watch), a reset (fault
injection) or a hand-over of the connection (an upgraded stream relayed to a kubelet).
Limits: ``max_connections`` at once, ``header_timeout`` for the TLS handshake and each
request's headers (:class:`Deadlines`), ``idle_timeout`` between keep-alive requests.
"""

from __future__ import annotations

import contextlib
import heapq
import io
import itertools
import logging
import re
import select
import socket
import ssl
import struct
import sys
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol, cast
from urllib.parse import parse_qsl, urlsplit

from .audit import AuditLog
from .endpoints.wire import Request, Response, status_error, warning_value

__all__ = ["DEFAULT_HEADER_TIMEOUT", "DEFAULT_IDLE_TIMEOUT", "DEFAULT_MAX_CONNECTIONS", "Deadlines",
           "FrontOwner", "Handler", "HttpServer"]  # fmt: skip

log = logging.getLogger(__name__)

# Connection limits. kube-apiserver's http.Server: ReadHeaderTimeout 32 s (TLS handshake and
# request headers), IdleTimeout 90 s (between keep-alive requests). It has no cap on
# connections (Go's goroutines are cheap); here each connection holds a thread, so there is one.
DEFAULT_MAX_CONNECTIONS = 4096
DEFAULT_HEADER_TIMEOUT = 32.0
DEFAULT_IDLE_TIMEOUT = 90.0


class FrontOwner(Protocol):
    """What the front needs of the server it serves (:class:`~.http.EmbeddedApiServer`)."""

    max_connections: int
    header_timeout: float
    idle_timeout: float
    max_body_bytes: int
    token: str | None
    deadlines: Deadlines | None
    audit: AuditLog | None
    dispatch: Callable[[Request], Response]

    def authenticate(self, request: Request) -> Response | None: ...


_DIGITS = re.compile(r"[0-9]{1,19}")
_CHUNK_SIZE = re.compile(rb"[0-9a-fA-F]{1,16}")
_MAX_CHUNK_LINE = 4096
_MAX_TRAILERS = 64
# A body over the limit is read and dropped up to this many times the limit, then the connection closes.
_DRAIN_FACTOR = 16


class _FramingError(ValueError):
    """A request whose body framing is broken: answered with ``code`` and the connection closed."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


class Deadlines:
    """One thread that shuts down connections still reading request headers past their deadline.

    A socket timeout bounds each read, not the whole: a slowloris client that sends a
    byte now and then never trips it. A deadline does, whatever the client trickles;
    shutting the socket down ends the handler's read, and its thread goes back.
    """

    def __init__(self, name: str) -> None:
        self._heap: list[tuple[float, int]] = []
        self._live: dict[int, socket.socket] = {}
        self._tokens = itertools.count()
        self._cond = threading.Condition()
        self._stopped = False
        self.expired = 0
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def add(self, sock: socket.socket, seconds: float) -> int:
        token = next(self._tokens)
        with self._cond:
            self._live[token] = sock
            heapq.heappush(self._heap, (time.monotonic() + seconds, token))
            if self._heap[0][1] == token:
                self._cond.notify()
        return token

    def cancel(self, token: int) -> None:
        with self._cond:
            self._live.pop(token, None)

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        while True:
            with self._cond:
                while True:
                    if self._stopped:
                        return
                    # Entries cancelled in time are dropped when they come to the top.
                    while self._heap and self._heap[0][1] not in self._live:
                        heapq.heappop(self._heap)
                    if not self._heap:
                        self._cond.wait()
                        continue
                    wait = self._heap[0][0] - time.monotonic()
                    if wait <= 0:
                        break
                    self._cond.wait(wait)
                _, token = heapq.heappop(self._heap)
                sock = self._live.pop(token)
                self.expired += 1
            try:
                peer = sock.getpeername()
                # The plain socket's shutdown: an SSLSocket's would drop its TLS state under the reader.
                socket.socket.shutdown(sock, socket.SHUT_RDWR)
            except OSError:
                continue
            log.info(
                "closed a connection that sent no complete request headers in time",
                extra={"peer": str(peer)},
            )


class HttpServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    # The listen backlog (the kernel caps it at somaxconn): a burst of clients is queued, not dropped.
    request_queue_size = 4096
    owner: FrontOwner
    open_connections = 0
    refused_connections = 0
    _count_lock: threading.Lock
    active: set[socket.socket]
    _refusal_logged = 0.0

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._count_lock:
            full = self.open_connections >= self.owner.max_connections
            if full:
                self.refused_connections += 1
                refused = self.refused_connections
            else:
                self.open_connections += 1
                self.active.add(request)
        if full:
            self.shutdown_request(request)
            now = time.monotonic()
            if now - self._refusal_logged >= 10.0:
                self._refusal_logged = now
                log.warning(
                    "connection refused: %d connections open (--max-connections)",
                    self.owner.max_connections,
                    extra={"peer": str(client_address), "refused": refused},
                )
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._closed_one(request)  # no thread started: nobody else counts it down
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._closed_one(request)

    def _closed_one(self, request: Any) -> None:
        with self._count_lock:
            self.open_connections -= 1
            self.active.discard(request)

    def close_connections(self) -> None:
        """End every open connection (a stopped server answers nothing more, keep-alive or not)."""
        with self._count_lock:
            active = list(self.active)
        for sock in active:
            with contextlib.suppress(OSError):
                socket.socket.shutdown(sock, socket.SHUT_RDWR)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """One log line for what peers do (a refused TLS handshake, a reset); a traceback for bugs."""
        err = sys.exc_info()[1]
        if isinstance(err, ssl.SSLError):
            log.warning(
                "TLS handshake with %s failed: %s",
                client_address[0],
                getattr(err, "reason", None) or err,
                extra={"peer": str(client_address), "error": str(err)},
            )
        elif isinstance(err, OSError):
            log.info(
                "connection from %s ended: %s", client_address[0], err, extra={"peer": str(client_address)}
            )
        else:
            log.error("error serving a connection from %s", client_address[0], exc_info=err)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "podstatus-embedded-apiserver"
    sys_version = ""
    # Each read or write waits this long at most (then set to the server's idle timeout).
    timeout = DEFAULT_IDLE_TIMEOUT
    server: HttpServer
    _deadline: int | None = None

    def setup(self) -> None:
        super().setup()
        self.connection.settimeout(self.server.owner.idle_timeout)
        # Small request/response pairs on keep-alive connections: never wait for Nagle.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._first = True
        # The TLS handshake and the first request's headers get the header timeout, in all.
        self._header_phase()
        if isinstance(self.connection, ssl.SSLSocket):
            try:
                self.connection.do_handshake()  # a refusal is one log line (HttpServer.handle_error)
            except BaseException:
                self._end_header_phase()  # finish() is not called when setup() fails
                raise

    def finish(self) -> None:
        self._end_header_phase()
        super().finish()

    def _header_phase(self) -> None:
        owner = self.server.owner
        if owner.deadlines is not None:
            self._deadline = owner.deadlines.add(self.connection, owner.header_timeout)

    def _end_header_phase(self) -> None:
        owner = self.server.owner
        if self._deadline is not None and owner.deadlines is not None:
            owner.deadlines.cancel(self._deadline)
        self._deadline = None

    def handle_one_request(self) -> None:
        if not self._first:
            # Keep-alive: the next request may come within the idle timeout (the socket's);
            # once it starts, its headers get the header timeout.
            try:
                if not cast(io.BufferedReader, self.rfile).peek(1):
                    self.close_connection = True
                    return
            except OSError:
                self.close_connection = True
                return
            self._header_phase()
        self._first = False
        try:
            super().handle_one_request()
        finally:
            self._end_header_phase()

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s " + format, self.client_address[0], *args)

    def do_GET(self) -> None:
        self._serve()

    do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = do_GET

    def _read_body(self, limit: int) -> bytes | None:
        """The request body, or None when it is larger than ``limit``; ValueError for bad framing.

        Framing is parsed strictly, as Go's net/http does: a chunk size is 1 to 16 hex digits
        (no sign, no spaces), each chunk ends in CRLF, a Content-Length is digits only, and
        both together are refused. The size is checked before anything is read, so no
        framing trick reads more than ``limit`` bytes of body.
        """
        te = self.headers.get("Transfer-Encoding")
        cl = self.headers.get("Content-Length")
        if te is not None:
            if te.strip().lower() != "chunked":
                raise _FramingError(501, f"unsupported transfer encoding: {te!r}")
            if cl is not None:
                raise _FramingError(400, "Transfer-Encoding and Content-Length cannot be sent together")
            return self._read_chunked(limit)
        if cl is None or cl.strip() == "":
            return b""
        if not _DIGITS.fullmatch(cl.strip()):
            raise _FramingError(400, f"bad Content-Length {cl!r}")
        length = int(cl.strip())
        if length > limit:
            # Drain a moderately large body so the client reads our 413 instead of a reset.
            left = length if length <= _DRAIN_FACTOR * limit else 0
            while left > 0:
                got = self.rfile.read(min(left, 1 << 20))
                if not got:
                    break
                left -= len(got)
            return None
        body = self.rfile.read(length) if length > 0 else b""
        if len(body) != length:
            raise _FramingError(400, "unexpected EOF reading the body")
        return body

    def _read_chunked(self, limit: int) -> bytes | None:
        chunks: list[bytes] = []
        size = 0
        while True:
            line = self.rfile.readline(_MAX_CHUNK_LINE + 1)
            if not line.endswith(b"\n") or len(line) > _MAX_CHUNK_LINE:
                raise _FramingError(400, "malformed chunked encoding")
            token = line.rstrip(b"\r\n").split(b";", 1)[0]
            if not _CHUNK_SIZE.fullmatch(token):
                raise _FramingError(400, "malformed chunked encoding: invalid chunk size")
            n = int(token, 16)
            if n == 0:
                # Trailers, bounded, up to the empty line.
                for _ in range(_MAX_TRAILERS + 1):
                    trailer = self.rfile.readline(_MAX_CHUNK_LINE + 1)
                    if trailer in (b"\r\n", b"\n"):
                        return b"".join(chunks) if size <= limit else None
                    if not trailer.endswith(b"\n"):
                        break
                raise _FramingError(400, "malformed chunked encoding: bad trailer")
            size += n
            if size > limit:
                # Too large: the rest is read and dropped (up to a bound, chunk by chunk, never held)
                # so the client reads the 413 instead of a reset; past the bound the connection goes.
                if size > _DRAIN_FACTOR * limit:
                    return None
                chunks = []
            data = self.rfile.read(n)
            if len(data) != n or self.rfile.read(2) != b"\r\n":
                raise _FramingError(400, "malformed chunked encoding: bad chunk data")
            if size <= limit:
                chunks.append(data)

    def _serve(self) -> None:
        self._end_header_phase()
        owner = self.server.owner
        audit = owner.audit
        if audit is None:
            self._answer(owner, None)
            return
        received = time.time()
        done: list[Any] = [None, None]  # the Request, the Response
        try:
            self._answer(owner, done)
        finally:
            self._audit(audit, owner, received, done[0], done[1])

    def _audit(
        self, audit: AuditLog, owner: FrontOwner, received: float, request: Request | None,
        response: Response | None,
    ) -> None:  # fmt: skip
        if request is None:
            split = urlsplit(self.path)
            path, query = split.path, dict(parse_qsl(split.query, keep_blank_values=True))
        else:
            path, query = request.path, request.query
        code = 500 if response is None or response.abort else response.status
        audit.record(
            method=self.command,
            uri=self.path,
            path=path,
            query=query,
            user_agent=self.headers.get("User-Agent", ""),
            source_ip=str(self.client_address[0]),
            code=code,
            received=received,
            # A public path answered without a token was the anonymous user's.
            authenticated=owner.token is not None and code != 401 and "Authorization" in self.headers,
            body=b"" if response is None or response.stream is not None else response.body,
            content_type="" if response is None else response.content_type,
            audit_id=self.headers.get("Audit-ID", ""),
        )

    def _answer(self, owner: FrontOwner, done: list[Any] | None) -> None:
        """Read, dispatch, write; ``done`` (the audit's) gets the Request and the Response."""
        started = time.perf_counter()
        try:
            body = self._read_body(owner.max_body_bytes)
        except _FramingError as err:
            # The rest of the stream cannot be trusted: answer and close.
            self.close_connection = True
            reason = "BadRequest" if err.code == 400 else "NotImplemented"
            response = status_error(err.code, reason, str(err))
            if done is not None:
                done[1] = response
            self._write(response)
            return
        if body is None:
            # The rest of the body is never read: the connection cannot be reused.
            self.close_connection = True
            response = status_error(
                413, "RequestEntityTooLarge", f"Request entity too large: limit is {owner.max_body_bytes}"
            )
        else:
            split = urlsplit(self.path)
            request = Request(
                method=self.command,
                path=split.path,
                query=dict(parse_qsl(split.query, keep_blank_values=True)),
                headers={k.lower(): v for k, v in self.headers.items()},
                body=body,
                raw_query=split.query,
            )
            if done is not None:
                done[0] = request
            response = owner.authenticate(request) or owner.dispatch(request)
        if done is not None:
            done[1] = response
        if response.abort:
            self._reset()
            return
        if response.takeover is not None:
            # The connection is the stream's now; it closes when the stream ends.
            self.close_connection = True
            response.takeover(self.connection, cast(Any, self.rfile))
            return
        self._write(response)
        if log.isEnabledFor(logging.DEBUG):
            log.debug(
                "%s %s -> %d (%.1f ms)", self.command, self.path, response.status,
                (time.perf_counter() - started) * 1000,
            )  # fmt: skip

    def _reset(self) -> None:
        # SO_LINGER 0: close sends RST, as a crashed or overloaded server would.
        self.close_connection = True
        try:
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.connection.close()
        except OSError:
            pass

    def _head(self, response: Response, extra: list[tuple[str, str]]) -> bytes:
        reason = self.responses.get(response.status, ("",))[0]
        lines = [
            f"HTTP/1.1 {response.status} {reason}",
            f"Content-Type: {response.content_type}",
            "Cache-Control: no-cache, private",
            f"Date: {self.date_time_string()}",
        ]
        lines += [f"{k}: {v}" for k, v in response.headers.items()]
        lines += [f"{k}: {v}" for k, v in extra]
        lines += [f"Warning: {warning_value(w)}" for w in response.warnings]
        if self.close_connection:
            lines.append("Connection: close")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    def _write(self, response: Response) -> None:
        if response.stream is None:
            body = b"" if self.command == "HEAD" else response.body
            head = self._head(response, [("Content-Length", str(len(response.body)))])
            self.wfile.write(head + body)
            return
        stream = response.stream
        try:
            self.wfile.write(self._head(response, [("Transfer-Encoding", "chunked")]))
            for chunk in stream:
                if not chunk:
                    if self._client_gone():
                        self.close_connection = True
                        return
                    continue
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            self.wfile.write(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError, OSError):
            self.close_connection = True
        finally:
            close = getattr(stream, "close", None)
            if close is not None:
                close()

    def _client_gone(self) -> bool:
        try:
            # poll, not select: select() cannot take descriptors past 1023.
            poller = select.poll()
            poller.register(self.connection, select.POLLIN)
            if not poller.poll(0):
                return False
            if isinstance(self.connection, ssl.SSLSocket):
                # No peeking through TLS; a client sends nothing while it reads a watch, so
                # anything readable is its close_notify or its FIN.
                return True
            return self.connection.recv(1, socket.MSG_PEEK) == b""
        except OSError:
            return True
