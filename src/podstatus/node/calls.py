"""Calling a provider: plain or ``async def`` methods alike, each with a timeout.

One core for both kinds (STYLE 8): a plain method runs on a thread pool, a
coroutine on one event loop thread owned by the caller; either way the caller
waits at most ``timeout`` seconds. A method that hangs keeps its pool thread
(Python cannot kill a thread), but the agent goes on, and says so.
"""

from __future__ import annotations

import concurrent.futures
import inspect
import logging
import threading
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import asyncio

__all__ = ["BoundCaller", "ProviderCaller", "ProviderError", "SerialTasks"]

log = logging.getLogger(__name__)


class ProviderError(Exception):
    """A provider method raised, timed out, or returned something unusable."""

    def __init__(self, method: str, message: str) -> None:
        super().__init__(f"provider {method}: {message}")
        self.method = method


class ProviderCaller:
    """Runs provider methods with a timeout; ``call`` raises :class:`ProviderError` on any failure."""

    def __init__(self, timeout: float = 10.0, *, workers: int = 8, name: str = "podstatus-provider") -> None:
        self.timeout = timeout
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix=name)
        self._name = name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def _event_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                import asyncio  # only for providers with ``async def`` methods: not paid otherwise

                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=loop.run_forever, name=f"{self._name}-loop", daemon=True)
                thread.start()
                self._loop, self._loop_thread = loop, thread
            return self._loop

    def call(self, method: str, fn: Callable[..., Any], *args: Any, timeout: float | None = None) -> Any:
        limit = self.timeout if timeout is None else timeout
        try:
            if inspect.iscoroutinefunction(fn):
                import asyncio

                future: concurrent.futures.Future[Any] = asyncio.run_coroutine_threadsafe(
                    fn(*args), self._event_loop()
                )
            else:
                future = self._pool.submit(fn, *args)
            result = future.result(limit)
            if inspect.isawaitable(result):
                import asyncio

                # A plain method that returned a coroutine (a wrapper): run it too.
                result = asyncio.run_coroutine_threadsafe(_await(result), self._event_loop()).result(limit)
            return result
        except concurrent.futures.TimeoutError:
            raise ProviderError(method, f"did not return within {limit:g} s") from None
        except ProviderError:
            raise
        except Exception as err:
            raise ProviderError(method, f"{type(err).__name__}: {err}") from err

    def close(self) -> None:
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
    pool hop and no timeout; coroutines still go to the event loop.
    """

    def __init__(self, caller: ProviderCaller, timeout: float, *, inline: bool = False) -> None:
        self.caller = caller
        self.timeout = timeout
        self.inline = inline

    def call(self, method: str, fn: Callable[..., Any], *args: Any, timeout: float | None = None) -> Any:
        if self.inline and not inspect.iscoroutinefunction(fn):
            try:
                result = fn(*args)
            except ProviderError:
                raise
            except Exception as err:
                raise ProviderError(method, f"{type(err).__name__}: {err}") from err
            if not inspect.isawaitable(result):
                return result
            limit = self.timeout if timeout is None else timeout
            return self.caller.call(method, _await, result, timeout=limit)
        return self.caller.call(method, fn, *args, timeout=self.timeout if timeout is None else timeout)


class SerialTasks:
    """Tasks keyed by pod: run on a pool, one at a time and in order per key, keys in parallel."""

    def __init__(self, workers: int = 4, name: str = "podstatus-pod") -> None:
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix=name)
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
