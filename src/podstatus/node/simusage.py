"""CPU and memory use of simulated containers, and the kubelet's stats Summary built from it.

Nothing is sampled on a timer: a container's use is a pure function of its
*profile* (drawn once from the pod's seed, its UID and the container's name)
and its age. CPU is a rate made of a base, two slow waves and a start-up burst,
so its integral — the cumulative ``usageCoreNanoSeconds`` — has a closed form:
monotonic, exact, and as cheap at a year of age as at a second. The figures
follow the behaviour (see :mod:`podstatus.workloads`): a serving container idles
at a few millicores, a job works hard, a crash-looping one bursts and leaks
memory until it dies. Limits are honoured (a little under them).
"""

from __future__ import annotations

import math
import time
import zlib
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from ..qos import parse_quantity

__all__ = ["Profile", "cpu_rate", "cpu_total", "memory_bytes", "profile_for", "rfc3339"]

_MI = 1024 * 1024
_NANO = 1_000_000_000  # nanocores per core


@dataclass(frozen=True)
class Profile:
    """How one container instance uses the machine (rates in nanocores, sizes in bytes)."""

    base: float
    amp1: float
    period1: float
    phase1: float
    amp2: float
    period2: float
    phase2: float
    burst: float  # extra rate at start, fading with time constant tau
    tau: float
    mem_base: float
    mem_amp: float
    mem_period: float
    mem_growth: float  # bytes per second (a leak), up to mem_cap
    mem_cap: float


def _unit(seed: int, uid: str, name: str, what: str) -> float:
    """A number in [0, 1) fixed by the pod's seed, its UID, the container and ``what``."""
    return zlib.crc32(f"{seed}/{uid}/{name}/{what}".encode()) / 2**32


def _quantity(resources: Any, kind: str, name: str) -> Decimal | None:
    if not isinstance(resources, dict):
        return None
    values = resources.get(kind)
    if not isinstance(values, dict) or name not in values:
        return None
    try:
        q = parse_quantity(values[name])
    except ValueError:
        return None
    return q if q > 0 else None


def profile_for(seed: int, uid: str, name: str, behaviour: str, resources: Any = None) -> Profile:
    """The profile of a container: ``behaviour`` is serve, complete, fail or crash (or init)."""

    def u(what: str) -> float:
        return _unit(seed, uid, name, what)

    cpu_request = _quantity(resources, "requests", "cpu")
    cpu_limit = _quantity(resources, "limits", "cpu")
    mem_request = _quantity(resources, "requests", "memory")
    mem_limit = _quantity(resources, "limits", "memory")
    if behaviour == "serve":
        base = (1 + 7 * u("base")) * 1e6  # 1-8 millicores: idle, answering probes
        burst, tau = (50 + 150 * u("burst")) * 1e6, 3.0 + 5 * u("tau")
        mem_base = (12 + 60 * u("mem")) * _MI
        growth = 0.0
    elif behaviour == "crash":
        base = (80 + 220 * u("base")) * 1e6  # busy until it falls over
        burst, tau = (200 + 300 * u("burst")) * 1e6, 0.5 + u("tau")
        mem_base = (20 + 40 * u("mem")) * _MI
        growth = (5 + 20 * u("growth")) * _MI  # leaks fast
    else:  # complete, fail, init: a job at work
        base = (150 + 450 * u("base")) * 1e6
        burst, tau = (50 + 100 * u("burst")) * 1e6, 1.0 + 2 * u("tau")
        mem_base = (30 + 90 * u("mem")) * _MI
        growth = (0.5 + 2 * u("growth")) * _MI
    if cpu_request is not None and behaviour != "serve":
        # A job uses about what it asked for.
        base = float(cpu_request) * _NANO * (0.6 + 0.5 * u("req"))
    if mem_request is not None:
        mem_base = float(mem_request) * (0.3 + 0.4 * u("memreq"))
    amp1, amp2 = base * (0.2 + 0.3 * u("amp1")), base * (0.1 + 0.2 * u("amp2"))
    if cpu_limit is not None:
        # The peak (base, both waves, the burst) stays under the limit, as CFS quota holds it.
        peak = base + amp1 + amp2 + burst
        room = float(cpu_limit) * _NANO * 0.95
        if peak > room:
            scale = room / peak
            base, amp1, amp2, burst = base * scale, amp1 * scale, amp2 * scale, burst * scale
    cap = float(mem_limit) * 0.95 if mem_limit is not None else mem_base * 4
    mem_base = min(mem_base, cap * 0.9)
    return Profile(
        base=base,
        amp1=amp1,
        period1=120 + 480 * u("p1"),
        phase1=2 * math.pi * u("f1"),
        amp2=amp2,
        period2=15 + 45 * u("p2"),
        phase2=2 * math.pi * u("f2"),
        burst=burst,
        tau=tau,
        mem_base=mem_base,
        mem_amp=mem_base * (0.02 + 0.06 * u("mamp")),
        mem_period=60 + 240 * u("mp"),
        mem_growth=growth,
        mem_cap=cap,
    )


def cpu_rate(p: Profile, age: float) -> float:
    """Nanocores in use ``age`` seconds after the instance started (never below zero)."""
    age = max(0.0, age)
    return (
        p.base
        + p.amp1 * math.sin(2 * math.pi * age / p.period1 + p.phase1)
        + p.amp2 * math.sin(2 * math.pi * age / p.period2 + p.phase2)
        + p.burst * math.exp(-age / p.tau)
    )


def cpu_total(p: Profile, age: float) -> float:
    """Core-nanoseconds used in the first ``age`` seconds: the integral of :func:`cpu_rate`.

    Monotonic in ``age`` because the rate is never negative (the waves' amplitudes are
    below the base)."""
    age = max(0.0, age)
    w1, w2 = 2 * math.pi / p.period1, 2 * math.pi / p.period2
    # Nanocores times seconds are core-nanoseconds.
    return (
        p.base * age
        + p.amp1 / w1 * (math.cos(p.phase1) - math.cos(w1 * age + p.phase1))
        + p.amp2 / w2 * (math.cos(p.phase2) - math.cos(w2 * age + p.phase2))
        + p.burst * p.tau * (1 - math.exp(-age / p.tau))
    )


def memory_bytes(p: Profile, age: float) -> int:
    """The working set ``age`` seconds after the start: a base, a slow wave, a leak, a cap."""
    age = max(0.0, age)
    warm = 1 - math.exp(-age / 2.0)  # the heap fills in the first seconds
    ws = p.mem_base * (0.4 + 0.6 * warm) + p.mem_amp * math.sin(2 * math.pi * age / p.mem_period)
    ws += p.mem_growth * age
    return int(max(1 * _MI, min(ws, p.mem_cap)))


def rfc3339(t: float) -> str:
    """Seconds since the epoch as RFC 3339 in UTC, whole seconds (as the kubelet's startTime)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def memory_limit(resources: Any) -> int | None:
    """A container's memory limit in bytes, when it has one."""
    q = _quantity(resources, "limits", "memory")
    return int(q) if q is not None else None


def memory_capacity(value: Any) -> int | None:
    """A node's memory capacity (a quantity) in bytes; None when absent or not a quantity."""
    if value is None:
        return None
    try:
        return int(parse_quantity(value))
    except ValueError:
        return None
