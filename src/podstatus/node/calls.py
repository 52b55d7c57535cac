"""Calling a provider: plain or ``async def`` methods alike, each with a timeout.

One core for both kinds (STYLE 8): a plain method runs on a thread pool, a
coroutine on one event loop thread owned by the caller; either way the caller
waits at most ``timeout`` seconds. A method that hangs keeps its pool thread
(Python cannot kill a thread), but the agent goes on, and says so.

Every call in progress is tracked (method, pod, node, since when): one that
runs past its limit is logged once while it runs (for a ``blocking = False``
provider, called on the agent's own thread, that log line is all there is),
and the ones still running when the caller closes are logged as abandoned.
The pools' threads are daemons (:class:`DaemonPool`): a provider call that
never returns never holds up the interpreter's exit.
"""

from __future__ import annotations

import concurrent.futures
import inspect
import itertools
import logging
import queue
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..types import Pod
from .logs import log_fields

if TYPE_CHECKING:
    import asyncio

__all__ = [
    "BoundCaller",
    "DaemonPool",
    "ProviderCaller",
    "ProviderError",
    "RunningCall",
    "SerialTasks",
    "log_running_call",
]

log = logging.getLogger(__name__)


class ProviderError(Exception):
    """A provider method raised, timed out, or returned something unusable."""

    def __init__(self, method: str, message: str) -> None:
        super().__init__(f"provider {method}: {message}")
        self.method = method


class DaemonPool:
    """A small thread pool of daemon threads: ``submit(fn, *args)`` gives a ``Future``.

    ``concurrent.futures.ThreadPoolExecutor`` joins its threads at interpreter exit,
    so one provider call that never returns kept ``podstatus node`` alive for ever
    after SIGTERM. Here a thread stuck in a call is left behind when the process exits.
    """

    def __init__(self, max_workers: int, name: str) -> None:
        if max_workers < 1:
            raise ValueError("max_workers must be at least 1")
        self._max = max_workers
        self._name = name
        self._queue: queue.SimpleQueue[
            tuple[concurrent.futures.Future[Any], Callable[..., Any], tuple[Any, ...]] | None
        ] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads = 0
        self._idle = 0
        self._closed = False

    def submit(self, fn: Callable[..., Any], *args: Any) -> concurrent.futures.Future[Any]:
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        with self._lock:
            if self._closed:
                raise RuntimeError("cannot schedule new calls after shutdown")
            self._queue.put((future, fn, args))
            if self._idle > 0:
                self._idle -= 1  # an idle thread takes it
                return future
            if self._threads >= self._max:
                return future  # queued until a thread is free
            self._threads += 1
            number = self._threads
        threading.Thread(target=self._work, name=f"{self._name}_{number}", daemon=True).start()
        return future

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            future, fn, args = item
            if future.set_running_or_notify_cancel():
                try:
                    result = fn(*args)
                except BaseException as err:
                    future.set_exception(err)
                else:
                    future.set_result(result)
                del future, fn, args, item  # nothing of a finished call is held while idle
            with self._lock:
                if self._closed:
                    return
                self._idle += 1

    def shutdown(self, wait: bool = False, *, cancel_futures: bool = True) -> None:
        """Stop taking calls; queued ones are cancelled. Never waits for a running call."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            threads = self._threads
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if item is not None and cancel_futures:
                item[0].cancel()
        for _ in range(threads):
            self._queue.put(None)


@dataclass
class RunningCall:
    """A provider call in progress: which method, for which pod and node, since when."""

    method: str
    pod: str  # namespace/name, or "" for node-wide calls
    node: str
    started: float  # time.monotonic()
    limit: float  # seconds after which it is late (logged once)
    inline: bool  # on the agent's own thread (a blocking = False provider)
    warned: bool = False

    def fields(self, now: float) -> dict[str, Any]:
        out: dict[str, Any] = {"method": self.method}
        if self.pod:
            out["pod"] = self.pod
        if self.node:
            out["node"] = self.node
        out["runningFor"] = f"{now - self.started:.1f}s"
        return out


def _pod_key(args: tuple[Any, ...]) -> str:
    return args[0].key() if args and isinstance(args[0], Pod) else ""


def log_running_call(level: int, message: str, call: RunningCall, now: float) -> None:
    log_fields(log, level, message, **call.fields(now))


class ProviderCaller:
    """Runs provider methods with a timeout; ``call`` raises :class:`ProviderError` on any failure.

    ``schedule(when, fn)`` (a timer's ``call_at``) lets it check, while calls run,
    for the ones past their limit and log them; without it nothing is logged
    before :meth:`close`.
    """

    def __init__(
        self,
        timeout: float = 10.0,
        *,
        workers: int = 8,
        name: str = "podstatus-provider",
        schedule: Callable[[float, Callable[[], None]], Any] | None = None,
    ) -> None:
        self.timeout = timeout
        self._pool = DaemonPool(workers, name)
        self._name = name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._schedule = schedule
        self._ids = itertools.count()
        self._running: dict[int, RunningCall] = {}
        self._check_at: float | None = None  # when the next lateness check is due (None: none set)
        self._closed = False

    # -- tracking ------------------------------------------------------------------------

    def begin(self, method: str, args: tuple[Any, ...], limit: float, *, node: str = "", inline: bool) -> int:
        """Record a call that starts now; :meth:`end` with the id it returns."""
        started = time.monotonic()
        call = RunningCall(method, _pod_key(args), node, started, limit, inline)
        due = started + limit
        with self._lock:
            ident = next(self._ids)
            self._running[ident] = call
            if (
                self._schedule is None
                or self._closed
                or (self._check_at is not None and self._check_at <= due)
            ):
                return ident
            self._check_at = due
        self._schedule(due, self._check_late)
        return ident

    def end(self, ident: int) -> None:
        with self._lock:
            self._running.pop(ident, None)

    def running(self) -> list[RunningCall]:
        """The calls in progress now (a copy), oldest first."""
        with self._lock:
            calls = list(self._running.values())
        return sorted(calls, key=lambda c: c.started)

    def _check_late(self) -> None:
        now = time.monotonic()
        late: list[RunningCall] = []
        with self._lock:
            self._check_at = None
            upcoming = None
            for call in self._running.values():
                if call.warned:
                    continue
                due = call.started + call.limit
                if due <= now:
                    call.warned = True
                    late.append(call)
                elif upcoming is None or due < upcoming:
                    upcoming = due
            if upcoming is not None and not self._closed and self._schedule is not None:
                self._check_at = upcoming
        for call in late:
            if call.inline:
                log_running_call(
                    logging.ERROR,
                    "provider call runs past its timeout on the agent's own thread "
                    "(blocking = False: it must never block); that thread waits for it",
                    call,
                    now,
                )
            else:
                log_running_call(
                    logging.WARNING,
                    "provider call still running past its timeout; its pool thread stays busy until it returns",
                    call,
                    now,
                )
        if upcoming is not None and self._schedule is not None and not self._closed:
            self._schedule(upcoming, self._check_late)

    # -- calling -------------------------------------------------------------------------

    def _event_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                import asyncio  # only for providers with ``async def`` methods: not paid otherwise

                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=loop.run_forever, name=f"{self._name}-loop", daemon=True)
                thread.start()
                self._loop, self._loop_thread = loop, thread
            return self._loop

    def _run_tracked(
        self, method: str, fn: Callable[..., Any], args: tuple[Any, ...], limit: float, node: str
    ) -> Any:
        ident = self.begin(method, args, limit, node=node, inline=False)
        try:
            return fn(*args)
        finally:
            self.end(ident)

    async def _await_tracked(
        self, method: str, awaitable: Any, args: tuple[Any, ...], limit: float, node: str
    ) -> Any:
        ident = self.begin(method, args, limit, node=node, inline=False)
        try:
            return await awaitable
        finally:
            self.end(ident)

    def call(
        self, method: str, fn: Callable[..., Any], *args: Any, timeout: float | None = None, node: str = ""
    ) -> Any:
        limit = self.timeout if timeout is None else timeout
        try:
            if inspect.iscoroutinefunction(fn):
                import asyncio

                future: concurrent.futures.Future[Any] = asyncio.run_coroutine_threadsafe(
                    self._await_tracked(method, fn(*args), args, limit, node), self._event_loop()
                )
            else:
                future = self._pool.submit(self._run_tracked, method, fn, args, limit, node)
            result = future.result(limit)
            if inspect.isawaitable(result):
                import asyncio

                # A plain method that returned a coroutine (a wrapper): run it too.
                result = asyncio.run_coroutine_threadsafe(
                    self._await_tracked(method, result, args, limit, node), self._event_loop()
                ).result(limit)
            return result
        except concurrent.futures.TimeoutError:
            raise ProviderError(method, f"did not return within {limit:g} s") from None
        except concurrent.futures.CancelledError:
            raise ProviderError(method, "not run: the agent is stopping") from None
        except ProviderError:
            raise
        except RuntimeError as err:
            if self._closed:
                raise ProviderError(method, "not run: the agent is stopping") from None
            raise ProviderError(method, f"{type(err).__name__}: {err}") from err
        except Exception as err:
            raise ProviderError(method, f"{type(err).__name__}: {err}") from err

    def close(self) -> None:
        """Stop; calls still running are logged as abandoned (their threads are daemons)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        now = time.monotonic()
        for call in self.running():
            log_running_call(
                logging.WARNING, "abandoned a provider call that had not returned at stop", call, now
            )
        self._pool.shutdown(wait=False, cancel_futures=True)
        with self._lock:
            loop, self._loop = self._loop, None
            thread, self._loop_thread = self._loop_thread, None
        if loop is not None:
            loop.call_soon_threadsafe(loop.stop)
            if thread is not None:
                thread.join(2)
            if not loop.is_running():
                loop.close()


async def _await(awaitable: Any) -> Any:
    return await awaitable


class BoundCaller:
    """One agent's view of a (shared) :class:`ProviderCaller`: its own timeout, its provider's kind.

    ``inline``: the provider said its methods never block (``blocking = False``, as the
    simulated provider does): plain methods are called on the caller's thread, with no
    pool hop and no timeout (one that runs past ``timeout`` anyway is logged while it
    runs); coroutines still go to the event loop. ``node``: named in the log lines.
    """

    def __init__(
        self, caller: ProviderCaller, timeout: float, *, inline: bool = False, node: str = ""
    ) -> None:
        self.caller = caller
        self.timeout = timeout
        self.inline = inline
        self.node = node

    def call(
        self,
        method: str,
        fn: Callable[..., Any],
        *args: Any,
        timeout: float | None = None,
        bounded: bool = False,
    ) -> Any:
        """``bounded``: on the pool with the timeout even for an inline provider (used at stop)."""
        limit = self.timeout if timeout is None else timeout
        if self.inline and not bounded and not inspect.iscoroutinefunction(fn):
            ident = self.caller.begin(method, args, limit, node=self.node, inline=True)
            try:
                result = fn(*args)
            except ProviderError:
                raise
            except Exception as err:
                raise ProviderError(method, f"{type(err).__name__}: {err}") from err
            finally:
                self.caller.end(ident)
            if not inspect.isawaitable(result):
                return result
            return self.caller.call(method, _await, result, timeout=limit, node=self.node)
        return self.caller.call(method, fn, *args, timeout=limit, node=self.node)


class SerialTasks:
    """Tasks keyed by pod: run on a pool, one at a time and in order per key, keys in parallel."""

    def __init__(self, workers: int = 4, name: str = "podstatus-pod") -> None:
        self._pool = DaemonPool(workers, name)
        self._pending: dict[str, deque[tuple[Callable[..., Any], tuple[Any, ...]]]] = {}
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._closed = False

    def submit(self, key: str, fn: Callable[..., Any], *args: Any) -> bool:
        """Queue ``fn(*args)`` behind ``key``'s earlier tasks; False when closed (it never runs)."""
        with self._lock:
            if self._closed:
                return False
            tasks = self._pending.get(key)
            if tasks is not None:
                tasks.append((fn, args))
                return True
            self._pending[key] = deque([(fn, args)])
        try:
            self._pool.submit(self._drain, key)
        except RuntimeError:  # closed meanwhile
            return False
        return True

    def _drain(self, key: str) -> None:
        while True:
            with self._lock:
                tasks = self._pending[key]
                if not tasks:
                    del self._pending[key]
                    self._idle.notify_all()
                    return
                fn, args = tasks[0]
            try:
                fn(*args)
            except Exception:
                log.exception("pod task failed key=%s task=%s", key, getattr(fn, "__name__", fn))
            with self._lock:
                self._pending[key].popleft()

    def wait_idle(self, timeout: float) -> bool:
        with self._idle:
            return self._idle.wait_for(lambda: not self._pending, timeout)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._pending.clear()
        self._pool.shutdown(wait=False, cancel_futures=True)
