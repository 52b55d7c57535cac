"""The Lease controller: renews ``kube-node-lease/<node>`` on the runtime's heartbeat lane.

A provider that hangs (ping, describe) or a slow node status post never delays a renewal:
the renewals have a lane of the timer of their own. The controller tells the agent two
things: the heartbeats resumed after a gap (the node lifecycle controller may have marked the
node Unknown meanwhile: the node status is checked again), and the Lease was taken by another
agent (the node is lost: stop writing).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from .heartbeat import LeaseKeeper
from .logs import log_fields
from .runtime import HEARTBEAT, AgentTicks, Timer

__all__ = ["LeaseController"]

log = logging.getLogger(__name__)

TICK = "lease"


class LeaseController:
    """Renews the node's Lease every ``interval`` seconds (the first at ``first_delay``).

    ``on_gap()``: a renewal succeeded after more than two intervals without one.
    ``on_recreated()``: the Lease had vanished and was created again.
    ``on_lost()``: another agent holds the Lease now.
    """

    def __init__(
        self,
        lease: LeaseKeeper,
        interval: float,
        ticks: AgentTicks,
        *,
        on_gap: Callable[[], None],
        on_recreated: Callable[[], None],
        on_lost: Callable[[], None],
    ) -> None:
        self.lease = lease
        self.interval = interval
        self._ticks = ticks
        self._on_gap = on_gap
        self._on_recreated = on_recreated
        self._on_lost = on_lost
        self._timer: Timer | None = None
        self.last_renewed = 0.0

    @property
    def next_renewal(self) -> float | None:
        """When (``time.monotonic()``) the next renewal is due; None when none is scheduled."""
        handle = self._ticks.handles.get(TICK)
        return handle.when if handle is not None and not handle.cancelled else None

    def start(self, timer: Timer, first_delay: float) -> None:
        self._timer = timer
        now = time.monotonic()
        self.last_renewed = now
        self._ticks.schedule(TICK, timer, now + first_delay, self.tick, HEARTBEAT)

    def tick(self) -> None:
        if not self._ticks.begin():
            return
        with self._ticks.lock:
            self._ticks.handles[TICK] = None  # this one runs: none is pending until rescheduled
        try:
            try:
                renewed = self.lease.renew()
            except Exception:
                renewed = False
                log.exception("lease renewal failed, it goes on node=%s", self.lease.node_name)
            now = time.monotonic()
            if renewed:
                # A renewal missed (the process was stopped, the API unreachable): the node
                # lifecycle controller may have marked the node Unknown meanwhile.
                gap = now - self.last_renewed
                self.last_renewed = now
                if gap > 2 * self.interval:
                    _log(
                        logging.WARNING,
                        "heartbeats resumed after a gap; checking the node as the API shows it",
                        node=self.lease.node_name,
                        gap_seconds=round(gap, 1),
                    )
                    self._on_gap()
                if self.lease.recreated:
                    self._on_recreated()
            if self.lease.lost:
                self._on_lost()
                return
            if self._timer is not None:
                self._ticks.schedule(TICK, self._timer, now + self.interval, self.tick, HEARTBEAT)
        finally:
            self._ticks.end()


def _log(level: int, message: str, **fields: Any) -> None:
    log_fields(log, level, message, **fields)
