"""Container logs of the simulated provider: what each simulated container "printed".

A container instance has one :class:`ContainerLog`: a ring buffer bounded in
lines and bytes, written at its lifecycle steps (start, ready, exit, stop) and,
lazily, with the lines a running container prints now and then (a probe's
access-log line for a serving container, progress for a job). Those periodic
lines are made when someone reads the log, from the instance's start time and a
fixed period, so a node of idle pods spends nothing on them.

:func:`render` applies the kubelet's log options (tail, since, timestamps,
limit bytes) to a snapshot; :meth:`ContainerLog.follow` is an async iterator
that gets new lines as they are written and ends when the instance has stopped
(no thread and no timer per follower: a follower waits on a future woken by the
writer, or until its next periodic line is due).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime

__all__ = ["MAX_BYTES", "MAX_LINES", "ContainerLog", "format_time", "render", "select"]

# A container instance keeps at most this much (the kubelet rotates at 10 MiB; make-believe
# output needs far less, and 10,000 pods keep their buffers in memory).
MAX_LINES = 1000
MAX_BYTES = 64 * 1024

Line = tuple[float, bytes]  # (unix time, the line without its newline)


def format_time(t: float) -> str:
    """RFC 3339 with nanoseconds, trailing zeros cut, as Go's ``time.RFC3339Nano`` (the kubelet's)."""
    whole = int(t)
    nanos = round((t - whole) * 1_000_000) * 1000  # a float holds microseconds reliably
    if nanos >= 1_000_000_000:
        whole, nanos = whole + 1, 0
    text = datetime.fromtimestamp(whole, UTC).strftime("%Y-%m-%dT%H:%M:%S")
    if nanos:
        text += "." + f"{nanos:09d}".rstrip("0")
    return text + "Z"


class ContainerLog:
    """The output of one container instance: a bounded ring of timestamped lines."""

    __slots__ = (
        "_futures",
        "_lines",
        "_lock",
        "_size",
        "closed",
        "exit_code",
        "first_seq",
        "period",
        "periodic_done",
        "periodic_from",
        "periodic_text",
    )

    def __init__(self, lock: threading.Lock | None = None) -> None:
        # A list, not a deque: 3 lines in a list take 88 bytes, an empty deque 600 (x 20,000 containers).
        self._lines: list[Line] = []
        self._size = 0
        # One lock per provider is enough (writes are a few per lifecycle step); a log made
        # alone (tests) gets its own.
        self._lock = lock if lock is not None else threading.Lock()
        self._futures: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] | None = None
        self.first_seq = 0  # the sequence number of the oldest line kept
        self.closed = False  # the instance has stopped: followers end
        self.exit_code: int | None = None  # how it ended, once closed
        self.period = 0.0  # seconds between periodic lines; 0: none
        self.periodic_from = 0.0
        self.periodic_done = 0  # periodic lines already in the ring
        self.periodic_text: Callable[[int], str] | None = None

    # -- writing ---------------------------------------------------------------------------

    def write(self, text: str, at: float | None = None) -> None:
        """Append one line per ``\\n``-separated part of ``text``, wake followers."""
        stamp = time.time() if at is None else at
        with self._lock:
            if self.closed:
                return
            self._materialise(stamp)
            for part in text.split("\n"):
                self._append(stamp, part.encode("utf-8", "replace"))
            self._wake()

    def every(self, period: float, text: Callable[[int], str], start: float | None = None) -> None:
        """From now on, a line every ``period`` seconds (made when read): ``text(n)`` for the n-th."""
        with self._lock:
            now = time.time() if start is None else start
            self._materialise(now)
            self.period = period
            self.periodic_from = now
            self.periodic_done = 0
            self.periodic_text = text

    def close(self, text: str | None = None, at: float | None = None, exit_code: int | None = None) -> None:
        """The instance stopped: a last line (when given), and followers end."""
        stamp = time.time() if at is None else at
        with self._lock:
            if self.closed:
                return
            self._materialise(stamp)
            if text is not None:
                for part in text.split("\n"):
                    self._append(stamp, part.encode("utf-8", "replace"))
            self.closed = True
            self.exit_code = exit_code
            self.period = 0.0
            self.periodic_text = None
            self._wake()

    def _append(self, stamp: float, line: bytes) -> None:
        lines = self._lines
        lines.append((stamp, line))
        self._size += len(line) + 1
        drop = 0
        while len(lines) - drop > MAX_LINES or (self._size > MAX_BYTES and len(lines) - drop > 1):
            self._size -= len(lines[drop][1]) + 1
            drop += 1
        if drop:
            del lines[:drop]
            self.first_seq += drop

    def _materialise(self, now: float) -> None:
        """The periodic lines due by ``now``, appended (call with the lock held)."""
        if not self.period or self.periodic_text is None:
            return
        due = int((now - self.periodic_from) / self.period)
        if due <= self.periodic_done:
            return
        # After a long quiet spell only what the ring could hold is made.
        first = max(self.periodic_done, due - MAX_LINES)
        for n in range(first, due):
            at = self.periodic_from + (n + 1) * self.period
            self._append(at, self.periodic_text(n + 1).encode("utf-8", "replace"))
        self.periodic_done = due

    def _next_due(self) -> float | None:
        if not self.period or self.periodic_text is None:
            return None
        return self.periodic_from + (self.periodic_done + 1) * self.period

    def _wake(self) -> None:
        futures, self._futures = self._futures, None
        for loop, future in futures or ():
            with contextlib.suppress(RuntimeError):  # that loop is closed: its follower is gone
                loop.call_soon_threadsafe(_resolve, future)

    # -- reading ---------------------------------------------------------------------------

    def snapshot(self, now: float | None = None) -> tuple[list[Line], int, bool]:
        """The lines kept, the sequence number after the last, and whether the instance stopped."""
        with self._lock:
            self._materialise(time.time() if now is None else now)
            return self._lines[:], self.first_seq + len(self._lines), self.closed

    def _since_seq(self, seq: int) -> tuple[list[Line], int, bool, float | None]:
        with self._lock:
            self._materialise(time.time())
            skip = max(0, seq - self.first_seq)
            lines = self._lines[skip:]
            return lines, self.first_seq + len(self._lines), self.closed, self._next_due()

    async def follow(self, after_seq: int) -> AsyncIterator[list[Line]]:
        """Batches of lines written after ``after_seq``, until the instance has stopped."""
        seq = after_seq
        while True:
            lines, seq, closed, due = self._since_seq(seq)
            if lines:
                yield lines
            if closed:
                return
            with self._lock:
                if self.first_seq + len(self._lines) != seq or self.closed:
                    continue  # written meanwhile
                loop = asyncio.get_running_loop()
                future: asyncio.Future[None] = loop.create_future()
                if self._futures is None:
                    self._futures = []
                self._futures.append((loop, future))
            timeout = None if due is None else max(0.0, due - time.time()) + 0.001
            try:
                await asyncio.wait_for(asyncio.shield(future), timeout)
            except TimeoutError:
                pass  # a periodic line is due
            finally:
                if not future.done():
                    with self._lock:
                        if self._futures is not None:
                            self._futures = [f for f in self._futures if f[1] is not future] or None
                    future.cancel()


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


# -- the kubelet's options ----------------------------------------------------------------------


def select(lines: list[Line], *, tail_lines: int | None, since: float | None) -> list[Line]:
    """The kubelet's order: the last ``tail_lines`` first, then those older than ``since`` dropped."""
    if tail_lines is not None:
        lines = lines[-tail_lines:] if tail_lines > 0 else []
    if since is not None:
        lines = [line for line in lines if line[0] >= since]
    return lines


def render(lines: list[Line], *, timestamps: bool) -> bytes:
    """Lines as the kubelet sends them: each ending in a newline, with its time first when asked."""
    if timestamps:
        return b"".join(format_time(t).encode() + b" " + text + b"\n" for t, text in lines)
    return b"".join(text + b"\n" for _, text in lines)


async def follow_bytes(
    log: ContainerLog,
    head: bytes,
    after_seq: int,
    *,
    since: float | None,
    timestamps: bool,
    limit_bytes: int | None,
) -> AsyncIterator[bytes]:
    """``head`` (what was there), then what the container prints, until it stops or
    ``limit_bytes`` have gone."""
    left = limit_bytes
    if head:
        yield head
        if left is not None:
            left -= len(head)
    async for batch in log.follow(after_seq):
        data = render(select(batch, tail_lines=None, since=since), timestamps=timestamps)
        if not data:
            continue
        if left is not None:
            data = data[:left]
            left -= len(data)
        yield data
        if left is not None and left <= 0:
            return
