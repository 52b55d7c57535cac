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

import dataclasses
import zlib
from typing import Any

from podstatus.node import SimulatedProvider, Timings

try:  # the description `podstatus node` gives its simulated nodes (tainted, 110 pods)
    from podstatus.node.command import VIRTUAL_NODE as DESCRIPTION
except ImportError:  # pragma: no cover - an older tree: the provider's own default
    DESCRIPTION = None


def _zero(value: Any) -> Any:
    return (0.0, 0.0) if isinstance(value, tuple) else 0.0


# Every duration of the simulation zero, whatever fields Timings has.
INSTANT = Timings(**{f.name: _zero(f.default) for f in dataclasses.fields(Timings)})


class InstantProvider(SimulatedProvider):
    """:class:`SimulatedProvider` whose simulated containers take no time for anything."""

    def __init__(self, node_name: str) -> None:
        super().__init__(timings=INSTANT, seed=zlib.crc32(node_name.encode()), description=DESCRIPTION)
