"""The provider the scale benchmark gives ``podstatus node``: simulated containers with no waits.

KWOK's default ("fast") stages move a pod to Running and Ready as soon as they see
it, and a Job's pod to Succeeded right after. For a like-for-like race the
podstatus side uses the same simulated provider as ``podstatus node`` does by
default, with every simulated duration (image pull, start-up, readiness, the
job's run, stopping) set to zero. Every status still goes through the status
manager, the node's Lease and Node heartbeats are the agent's own.

Used as ``podstatus node --provider bench.scale.provider:InstantProvider`` with the
repository root on ``PYTHONPATH``.
"""

from __future__ import annotations

import zlib

from podstatus.node.command import VIRTUAL_NODE
from podstatus.node.simulated import SimulatedProvider, Timings

ZERO = (0.0, 0.0)
INSTANT = Timings(
    image_pull=ZERO,
    init_run=ZERO,
    startup=ZERO,
    readiness=ZERO,
    job_run=ZERO,
    crash_run=ZERO,
    crash_backoff=0.0,
    crash_backoff_max=0.0,
    stop=ZERO,
    gate=ZERO,
)


class InstantProvider(SimulatedProvider):
    """:class:`SimulatedProvider` whose simulated containers take no time for anything."""

    def __init__(self, node_name: str) -> None:
        super().__init__(timings=INSTANT, seed=zlib.crc32(node_name.encode()), description=VIRTUAL_NODE)
