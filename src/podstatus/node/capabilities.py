"""Optional provider capabilities: what the node's kubelet API asks of a provider.

A provider may implement any of these methods, each a plain function or an
``async def`` (as the rest of :mod:`.provider`). The kubelet API server of the
node (:mod:`.kubeletapi`) calls them; a provider without one gets the answer the
kubelet gives for an operation its runtime cannot do, naming the node and the
capability (never a 404 that reads as "pod not found").

- ``get_container_logs(namespace, pod, container, options: LogOptions)`` returns
  ``bytes``, or an iterable or async iterable of ``bytes`` chunks. A follow stream
  ends when the container ends; when the caller goes away the iterator is closed
  (``close()`` / ``aclose()``), so a generator's ``finally`` runs.
- ``run_in_container(namespace, pod, container, command: list[str], io: ExecIO) -> int``:
  the command's exit code.
- ``attach_to_container(namespace, pod, container, io: ExecIO) -> int | None``: the
  exit code when the container ended, None when the caller detached.
- ``port_forward(namespace, pod, port: int, stream: PortStream) -> None``: returns when
  the stream ends (either side closed it).
- ``get_stats_summary() -> dict``: the kubelet's ``stats/v1alpha1`` Summary as JSON
  (``node`` and ``pods``, with each container's cpu ``usageNanoCores`` /
  ``usageCoreNanoSeconds`` and memory ``workingSetBytes`` / ``usageBytes`` and ``time``).
- ``get_metrics_resource() -> str``: Prometheus text of ``/metrics/resource``. When absent
  the server derives it from the stats summary, as the kubelet does.

Threads: an ``async def`` capability runs on the kubelet API server's event loop
(each node's server has one); a plain one runs on a thread of its own for the
length of the call (a stream may last hours), so it may block. The I/O objects
below work from both: ``await x.read(n)`` in a coroutine, ``x.read_blocking(n)``
in a thread; ``write`` never blocks and is thread-safe.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import threading
from collections.abc import AsyncIterable, Awaitable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, Protocol, TypeVar, runtime_checkable

__all__ = [
    "CAPABILITIES",
    "Channel",
    "ContainerAttacher",
    "ContainerExecutor",
    "ContainerLogs",
    "ExecIO",
    "LogOptions",
    "MetricsResource",
    "Pipe",
    "PortForwarder",
    "PortStream",
    "StatsSummary",
    "TermSize",
    "has_capability",
]

T = TypeVar("T")

# The method each capability needs, and its name in messages.
CAPABILITIES: dict[str, str] = {
    "get_container_logs": "container logs",
    "run_in_container": "exec",
    "attach_to_container": "attach",
    "port_forward": "port forward",
    "get_stats_summary": "stats summary",
    "get_metrics_resource": "resource metrics",
}


def has_capability(provider: Any, method: str) -> bool:
    """Whether ``provider`` implements the optional ``method`` (a callable attribute)."""
    if method not in CAPABILITIES:
        raise ValueError(f"unknown capability {method!r}; known: {', '.join(CAPABILITIES)}")
    return callable(getattr(provider, method, None))


@dataclass(frozen=True)
class LogOptions:
    """The kubelet's ``PodLogOptions`` as a provider sees them (already validated)."""

    follow: bool = False
    tail_lines: int | None = None  # the last N lines only
    since_seconds: int | None = None  # lines newer than this many seconds
    since_time: datetime | None = None  # lines at or after this time (aware, UTC)
    timestamps: bool = False  # prefix each line with its RFC 3339 time and a space
    previous: bool = False  # the previous (terminated) instance of the container
    limit_bytes: int | None = None  # the server also cuts the stream at this many bytes


@dataclass(frozen=True)
class TermSize:
    """A terminal size (columns, rows), as kubectl sends on the resize channel."""

    width: int
    height: int


class _Waiters:
    """Wakes thread waiters (a Condition) and coroutine waiters (futures on their loops) alike."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self._futures: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []

    def wake(self) -> None:
        """Call with ``cond`` held."""
        self.cond.notify_all()
        futures, self._futures = self._futures, []
        for loop, future in futures:
            # A closed loop raises RuntimeError: its waiter is gone.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(_resolve, future)

    def future(self) -> asyncio.Future[None]:
        """A future resolved at the next wake. Call with ``cond`` held, from a coroutine."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        self._futures.append((loop, future))
        return future


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


class Pipe:
    """A one-way byte pipe: ``write`` from any thread, ``read`` from a coroutine or a thread.

    ``read`` returns at most ``n`` bytes, waiting for at least one; ``b""`` once the
    pipe is closed and drained (end of stream). ``write`` after ``close`` is dropped.
    """

    def __init__(self) -> None:
        self._chunks: collections.deque[bytes] = collections.deque()
        self._size = 0
        self._eof = False
        self._w = _Waiters()

    @property
    def buffered(self) -> int:
        return self._size

    @property
    def closed(self) -> bool:
        return self._eof

    def write(self, data: bytes) -> None:
        if not data:
            return
        with self._w.cond:
            if self._eof:
                return
            self._chunks.append(bytes(data))
            self._size += len(data)
            self._w.wake()

    def close(self) -> None:
        with self._w.cond:
            self._eof = True
            self._w.wake()

    def _take(self, n: int) -> bytes:
        out = bytearray()
        while self._chunks and len(out) < n:
            chunk = self._chunks.popleft()
            room = n - len(out)
            if len(chunk) > room:
                self._chunks.appendleft(chunk[room:])
                chunk = chunk[:room]
            out += chunk
        self._size -= len(out)
        if out:
            self._w.wake()  # a writer waiting in wait_below may go on
        return bytes(out)

    def read_blocking(self, n: int = 65536, timeout: float | None = None) -> bytes:
        """Wait (at most ``timeout`` s) for data; ``b""`` at end of stream or on timeout
        (tell them apart with :attr:`closed`)."""
        with self._w.cond:
            self._w.cond.wait_for(lambda: self._chunks or self._eof, timeout)
            return self._take(n)

    async def read(self, n: int = 65536) -> bytes:
        while True:
            with self._w.cond:
                if self._chunks or self._eof:
                    return self._take(n)
                waiter = self._w.future()
            await waiter

    async def wait_below(self, limit: int) -> None:
        """Wait until at most ``limit`` bytes are buffered (or the pipe is closed): back-pressure
        for a writer that reads from a network peer faster than the reader consumes."""
        while True:
            with self._w.cond:
                if self._size <= limit or self._eof:
                    return
                waiter = self._w.future()
            await waiter


class Channel(Generic[T]):
    """A queue of items (terminal sizes, say): ``put`` from anywhere, ``get`` sync or async.

    ``get`` returns None once the channel is closed and empty.
    """

    def __init__(self) -> None:
        self._items: collections.deque[T] = collections.deque()
        self._closed = False
        self._w = _Waiters()

    def put(self, item: T) -> None:
        with self._w.cond:
            if not self._closed:
                self._items.append(item)
                self._w.wake()

    def close(self) -> None:
        with self._w.cond:
            self._closed = True
            self._w.wake()

    def get_blocking(self, timeout: float | None = None) -> T | None:
        with self._w.cond:
            self._w.cond.wait_for(lambda: self._items or self._closed, timeout)
            return self._items.popleft() if self._items else None

    async def get(self) -> T | None:
        while True:
            with self._w.cond:
                if self._items or self._closed:
                    return self._items.popleft() if self._items else None
                waiter = self._w.future()
            await waiter


@dataclass
class ExecIO:
    """The streams of an exec or attach, as the caller asked for them.

    ``stdin`` is None when the caller sends none; read it until ``b""``. ``stdout`` /
    ``stderr`` are None when not asked for (with ``tty`` there is no stderr: the
    terminal merges it). ``resizes`` gives :class:`TermSize` values (the first, when
    kubectl knows it, arrives at once). ``closed`` is set when the caller went away: a
    long-running command should stop then.
    """

    stdin: Pipe | None = None
    stdout: Pipe | None = None
    stderr: Pipe | None = None
    tty: bool = False
    resizes: Channel[TermSize] = field(default_factory=Channel)
    closed: threading.Event = field(default_factory=threading.Event)


class PortStream:
    """One port-forward connection: bytes from the caller in, bytes to the caller out.

    ``read`` / ``read_blocking`` give what the caller sent (``b""`` when it closed its
    side); ``write`` sends to the caller; ``close`` ends the provider's side; ``error``
    reports a failure on the error channel (as the kubelet's "failed to connect" text).
    """

    def __init__(self, port: int) -> None:
        self.port = port
        self.inbound = Pipe()
        self.outbound = Pipe()
        self.errors: Channel[str] = Channel()
        self.closed = threading.Event()  # set when the caller went away

    async def read(self, n: int = 65536) -> bytes:
        return await self.inbound.read(n)

    def read_blocking(self, n: int = 65536, timeout: float | None = None) -> bytes:
        return self.inbound.read_blocking(n, timeout)

    def write(self, data: bytes) -> None:
        self.outbound.write(data)

    def close(self) -> None:
        self.outbound.close()

    def error(self, message: str) -> None:
        self.errors.put(message)


# --- the protocols (for type checks and documentation; the server tests with has_capability) ---


@runtime_checkable
class ContainerLogs(Protocol):
    def get_container_logs(
        self, namespace: str, pod: str, container: str, options: LogOptions
    ) -> bytes | Iterable[bytes] | AsyncIterable[bytes] | Awaitable[bytes | Iterable[bytes]]: ...


@runtime_checkable
class ContainerExecutor(Protocol):
    def run_in_container(
        self, namespace: str, pod: str, container: str, command: list[str], io: ExecIO
    ) -> int | Awaitable[int]: ...


@runtime_checkable
class ContainerAttacher(Protocol):
    def attach_to_container(
        self, namespace: str, pod: str, container: str, io: ExecIO
    ) -> int | Awaitable[int | None] | None: ...


@runtime_checkable
class PortForwarder(Protocol):
    def port_forward(
        self, namespace: str, pod: str, port: int, stream: PortStream
    ) -> Awaitable[None] | None: ...


@runtime_checkable
class StatsSummary(Protocol):
    def get_stats_summary(self) -> dict[str, Any] | Awaitable[dict[str, Any]]: ...


@runtime_checkable
class MetricsResource(Protocol):
    def get_metrics_resource(self) -> str | Awaitable[str]: ...
