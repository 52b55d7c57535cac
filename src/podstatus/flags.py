"""A ``threading.Event`` for objects made by the thousand: no ``Condition`` until a thread waits.

A ``threading.Event`` carries a ``Condition`` and its waiter queue (about 0.7 KB). A process
running a thousand nodes holds several per node (stop flags, wake-ups), most of them only
ever set and read, never waited on: :class:`Flag` is a boolean until the first ``wait``.
"""

from __future__ import annotations

import threading

__all__ = ["Flag"]

# Guards the step from a boolean to an Event (rare: once per flag that is waited on).
_promote = threading.Lock()


class Flag:
    """``set`` / ``clear`` / ``is_set`` / ``wait`` as ``threading.Event``."""

    __slots__ = ("_event", "_value")

    def __init__(self) -> None:
        self._value = False
        self._event: threading.Event | None = None

    def is_set(self) -> bool:
        event = self._event
        return event.is_set() if event is not None else self._value

    def set(self) -> None:
        self._change(True)

    def clear(self) -> None:
        self._change(False)

    def _change(self, value: bool) -> None:
        event = self._event
        if event is None:
            with _promote:
                event = self._event
                if event is None:
                    self._value = value
                    return
        if value:
            event.set()
        else:
            event.clear()

    def wait(self, timeout: float | None = None) -> bool:
        event = self._event
        if event is None:
            with _promote:
                event = self._event
                if event is None:
                    event = threading.Event()
                    if self._value:
                        event.set()
                    self._event = event
        return event.wait(timeout)
