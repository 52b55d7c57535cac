"""A lean HTTP/1.1 keep-alive transport for the client's short requests.

A node agent at scale spends most of its own CPU on short requests (a status patch, a
delete, a Lease renewal), and with urllib3 most of that went to the machinery around
each one: building the request header by header, parsing the answer's headers with the
``email`` package, the pool's bookkeeping. This transport sends a request as one
``sendall`` and reads the answer with one buffered reader per connection. It knows only
what the API server speaks: HTTP/1.1 with ``Content-Length`` or chunked bodies, and
persistent connections.

Watches (long streams) and requests through a proxy stay on urllib3 (see ``http.py``).
"""

from __future__ import annotations

import contextlib
import select
import socket
import ssl
import threading
import weakref
from collections.abc import Mapping
from typing import BinaryIO
from urllib.parse import urlsplit

from .kubeconfig import ConnectionSettings

__all__ = ["CannotConnectError", "ConnectionPool", "NoFreeConnectionError", "Response"]

_MAX_LINE = 65536
_MAX_HEADERS = 200
_NO_BODY_STATUS = frozenset({204, 304})


class CannotConnectError(OSError):
    """The TCP (or TLS) connection to the server could not be made."""


class NoFreeConnectionError(TimeoutError):
    """Every connection of the pool stayed busy for the whole wait."""


class BadResponseError(ConnectionError):
    """The server's answer is not HTTP/1.x as we know it (the connection is dropped)."""


class Headers(dict[str, str]):
    """Answer headers by lower-case name; ``get`` takes any case."""

    __slots__ = ()

    def get(self, name: str, default: str | None = None) -> str | None:  # type: ignore[override]
        return dict.get(self, name.lower(), default)

    def __getitem__(self, name: str) -> str:
        return dict.__getitem__(self, name.lower())

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and dict.__contains__(self, name.lower())


class Response:
    """An answer read whole: ``status``, ``reason``, ``headers`` and ``data`` (the body)."""

    __slots__ = ("data", "headers", "reason", "status")

    def __init__(self, status: int, reason: str, headers: Headers, data: bytes) -> None:
        self.status = status
        self.reason = reason
        self.headers = headers
        self.data = data


def ssl_context(settings: ConnectionSettings) -> ssl.SSLContext:
    """The TLS context for ``settings``: the cluster's CA (or none, unverified), the client certificate."""
    context = ssl.create_default_context(cafile=settings.ca_cert if settings.verify else None)
    if not settings.verify:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if settings.client_cert:
        context.load_cert_chain(settings.client_cert, settings.client_key)
    # HTTP/1.1 only: the server must not pick h2 for these connections.
    context.set_alpn_protocols(["http/1.1"])
    return context


class _Connection:
    __slots__ = ("reader", "sock")

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.reader: BinaryIO = sock.makefile("rb", buffering=16384)  # type: ignore[assignment]

    def dropped(self) -> bool:
        """The server closed it (or sent something unasked) while it sat idle in the pool."""
        try:
            # poll, not select: select() cannot take descriptors past 1023.
            poller = select.poll()
            poller.register(self.sock, select.POLLIN)
            return bool(poller.poll(0))
        except (OSError, ValueError):
            return True

    def close(self) -> None:
        try:
            self.reader.close()
        finally:
            self.sock.close()


class ConnectionPool:
    """Persistent connections to one server, at most ``maxsize`` in use at once (callers wait)."""

    def __init__(
        self,
        settings: ConnectionSettings,
        *,
        maxsize: int,
        connect_timeout: float,
        pool_timeout: float,
        user_agent_headers: Mapping[str, str] | None = None,
    ) -> None:
        parts = urlsplit(settings.base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {settings.base_url!r}")
        self.prefix = parts.path.rstrip("/")
        self._host = parts.hostname
        self._port = parts.port or (443 if parts.scheme == "https" else 80)
        default_port = (parts.scheme == "https" and self._port == 443) or (
            parts.scheme == "http" and self._port == 80
        )
        host = f"[{self._host}]" if ":" in self._host else self._host
        self._host_line = f"Host: {host if default_port else f'{host}:{self._port}'}\r\n"
        # Built at the first connection (a bad CA file is an error of the request, as with urllib3).
        self._settings = settings
        self._https = parts.scheme == "https"
        self._tls: ssl.SSLContext | None = None
        self._server_hostname = settings.tls_server_name or self._host
        self._connect_timeout = connect_timeout
        self._pool_timeout = pool_timeout
        self._slots = threading.BoundedSemaphore(maxsize)
        self._idle: list[_Connection] = []
        self._lock = threading.Lock()
        self._closed = False
        # A pool dropped without close() still closes its idle connections (as urllib3's do).
        weakref.finalize(self, _close_all, self._idle)

    # -- connections -------------------------------------------------------------------

    def _connect(self) -> _Connection:
        try:
            sock = socket.create_connection((self._host, self._port), timeout=self._connect_timeout)
        except TimeoutError:
            raise
        except OSError as exc:
            raise CannotConnectError(f"{self._host}:{self._port}: {exc}") from exc
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self._https:
                sock = self._tls_context().wrap_socket(sock, server_hostname=self._server_hostname)
        except BaseException:
            sock.close()
            raise
        return _Connection(sock)

    def _tls_context(self) -> ssl.SSLContext:
        context = self._tls
        if context is None:
            context = self._tls = ssl_context(self._settings)
        return context

    def _take_idle(self) -> _Connection | None:
        while True:
            with self._lock:
                if not self._idle:
                    return None
                conn = self._idle.pop()
            if not conn.dropped():
                return conn
            conn.close()

    def _give_back(self, conn: _Connection) -> None:
        with self._lock:
            if not self._closed:
                self._idle.append(conn)
                return
        conn.close()

    def clear(self) -> None:
        """Close the idle connections; the pool stays usable."""
        with self._lock:
            idle = self._idle[:]
            self._idle.clear()
        _close_all(idle)

    def close(self) -> None:
        with self._lock:
            self._closed = True
        self.clear()

    # -- requests ----------------------------------------------------------------------

    def request(
        self,
        method: str,
        target: str,
        headers: Mapping[str, str],
        body: bytes | None,
        read_timeout: float | None,
    ) -> Response:
        """Send one request and read its answer whole. Raises ``OSError`` subclasses on failure."""
        head = [f"{method} {target} HTTP/1.1\r\n", self._host_line]
        head += [f"{name}: {value}\r\n" for name, value in headers.items()]
        if body is not None or method in ("POST", "PUT", "PATCH"):
            head.append(f"Content-Length: {len(body) if body else 0}\r\n")
        head.append("\r\n")
        data = "".join(head).encode("latin-1")
        if body:
            data += body
        if not self._slots.acquire(timeout=self._pool_timeout):
            raise NoFreeConnectionError(f"no free connection in {self._pool_timeout:.0f} s")
        try:
            conn = self._take_idle()
            if conn is not None:
                try:
                    return self._exchange(conn, method, data, read_timeout)
                except _STALE:
                    # The server closed the reused connection: a read goes once more on a new
                    # one. A write does not: the server may have done it before closing, and
                    # the caller decides (the status manager retries with fresh knowledge).
                    if method != "GET":
                        raise
            return self._exchange(self._connect(), method, data, read_timeout)
        finally:
            self._slots.release()

    def _exchange(self, conn: _Connection, method: str, data: bytes, read_timeout: float | None) -> Response:
        try:
            conn.sock.settimeout(read_timeout)
            conn.sock.sendall(data)
            response, keep = _read_response(conn.reader, method)
        except BaseException:
            conn.close()
            raise
        if keep:
            self._give_back(conn)
        else:
            conn.close()
        return response


def _close_all(connections: list[_Connection]) -> None:
    for conn in connections:
        with contextlib.suppress(OSError):
            conn.close()
    connections.clear()


class _ClosedBeforeAnswer(ConnectionError):
    """The connection ended before the first byte of an answer."""


# How a reused connection the server had closed fails before the server reads anything.
_STALE = (ConnectionResetError, BrokenPipeError, _ClosedBeforeAnswer, ssl.SSLEOFError, ssl.SSLZeroReturnError)


def _read_response(reader: BinaryIO, method: str) -> tuple[Response, bool]:
    """The answer on ``reader``, and whether the connection may carry another request."""
    while True:
        line = reader.readline(_MAX_LINE + 1)
        if not line:
            raise _ClosedBeforeAnswer("the server closed the connection without an answer")
        parts = line.split(None, 2)
        if len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or not parts[1].isdigit():
            raise BadResponseError(f"not an HTTP/1.x status line: {line[:80]!r}")
        status = int(parts[1])
        reason = parts[2].strip().decode("latin-1") if len(parts) > 2 else ""
        headers = _read_headers(reader)
        if 100 <= status < 200:  # an interim answer (we send no Expect, but a server may)
            continue
        break
    keep = parts[0] == b"HTTP/1.1" and (headers.get("connection") or "").lower() != "close"
    if method == "HEAD" or status in _NO_BODY_STATUS:
        return Response(status, reason, headers, b""), keep
    if "chunked" in (headers.get("transfer-encoding") or "").lower():
        return Response(status, reason, headers, _read_chunked(reader)), keep
    length = headers.get("content-length")
    if length is not None:
        try:
            size = int(length)
        except ValueError:
            raise BadResponseError(f"bad Content-Length: {length!r}") from None
        data = reader.read(size) if size > 0 else b""
        if len(data) != size:
            raise BadResponseError(f"the answer ended after {len(data)} of {size} bytes")
        return Response(status, reason, headers, data), keep
    # Neither: the body runs to the end of the connection.
    return Response(status, reason, headers, reader.read()), False


def _read_headers(reader: BinaryIO) -> Headers:
    headers = Headers()
    for _ in range(_MAX_HEADERS):
        line = reader.readline(_MAX_LINE + 1)
        if line in (b"\r\n", b"\n"):
            return headers
        if not line:
            raise BadResponseError("the answer ended inside its headers")
        name, sep, value = line.partition(b":")
        if not sep:
            raise BadResponseError(f"bad header line: {line[:80]!r}")
        key = name.strip().decode("latin-1").lower()
        text = value.strip().decode("latin-1")
        previous = dict.get(headers, key)
        dict.__setitem__(headers, key, text if previous is None else f"{previous}, {text}")
    raise BadResponseError(f"more than {_MAX_HEADERS} header lines")


def _read_chunked(reader: BinaryIO) -> bytes:
    chunks: list[bytes] = []
    while True:
        line = reader.readline(_MAX_LINE + 1)
        if not line:
            raise BadResponseError("the answer ended inside its body")
        size_text = line.split(b";", 1)[0].strip()
        try:
            size = int(size_text, 16)
        except ValueError:
            raise BadResponseError(f"bad chunk size line: {line[:80]!r}") from None
        if size == 0:
            # Trailers (none expected) up to the blank line.
            while reader.readline(_MAX_LINE + 1) not in (b"\r\n", b"\n", b""):
                pass
            return b"".join(chunks)
        chunk = reader.read(size)
        if len(chunk) != size:
            raise BadResponseError("the answer ended inside a chunk")
        chunks.append(chunk)
        if reader.readline(_MAX_LINE + 1) not in (b"\r\n", b"\n"):
            raise BadResponseError("no line end after a chunk")
