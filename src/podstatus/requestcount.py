"""Request counts by verb, shared by the clients and the embedded API server.

Low in the layers (it imports nothing of the package), so the server and the
clients can both count without importing one another.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

__all__ = ["VERBS", "RequestCallback", "RequestCounter"]

log = logging.getLogger(__name__)

# The verbs a RequestCounter always reports, zero or not (the API server's own names).
VERBS: tuple[str, ...] = ("get", "list", "watch", "create", "update", "patch", "delete")

RequestCallback = Callable[[str], None]


class RequestCounter:
    """Thread-safe request counts by verb, with callbacks (for example Prometheus counters).

    Verbs are the API server's: ``get``, ``list``, ``watch``, ``create``,
    ``update``, ``patch``, ``delete``; others are counted too, under their own name.
    """

    def __init__(self, callback: RequestCallback | None = None) -> None:
        self._lock = threading.Lock()
        self._counts: dict[str, int] = dict.fromkeys(VERBS, 0)
        self._callbacks: list[RequestCallback] = [callback] if callback is not None else []

    def add_callback(self, callback: RequestCallback) -> None:
        """Call ``callback(verb)`` after every counted request."""
        with self._lock:
            self._callbacks.append(callback)

    def inc(self, verb: str, n: int = 1) -> None:
        """Count ``n`` requests (callbacks run once per request)."""
        with self._lock:
            self._counts[verb] = self._counts.get(verb, 0) + n
            callbacks = tuple(self._callbacks)
        for callback in callbacks:
            try:
                for _ in range(n):
                    callback(verb)
            except Exception:
                # Metrics must never fail a request.
                log.exception("request counter callback failed for verb %s", verb)

    def get(self, verb: str) -> int:
        with self._lock:
            return self._counts.get(verb, 0)

    def snapshot(self) -> dict[str, int]:
        """A copy of the counts: every standard verb, plus any other verb seen."""
        with self._lock:
            return dict(self._counts)

    def total(self) -> int:
        with self._lock:
            return sum(self._counts.values())

    def reset(self) -> None:
        with self._lock:
            self._counts = dict.fromkeys(VERBS, 0)
