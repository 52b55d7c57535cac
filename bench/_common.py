"""Shared helpers of the benchmarks: the fixture, distinct pods, timing and statistics.

Every benchmark reports medians over repeats and the spread (min..max), and
measures ours and the peer alternately in the same run, so a noisy neighbour
slows both and the ratio stays meaningful.
"""

from __future__ import annotations

import copy
import gc
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT / "src") not in sys.path:
    sys.path.insert(0, str(ROOT / "src"))

# The repository's own copy of the realistic pod; PODSTATUS_FIXTURES may name another folder.
FIXTURE = Path(os.environ.get("PODSTATUS_FIXTURES", ROOT / "tests" / "fixtures")) / "pod-running.json"


def fixture_bytes() -> bytes:
    return FIXTURE.read_bytes()


def fixture_dict() -> dict[str, Any]:
    result: dict[str, Any] = json.loads(fixture_bytes())
    return result


# --- distinct pods ---------------------------------------------------------------------


def _hex(i: int, salt: int, width: int = 64) -> str:
    # Cheap, distinct and random-looking hex (splitmix-style), like a container runtime's IDs.
    out = []
    x = (i * 0x9E3779B97F4A7C15 + salt * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
    while len(out) * 16 < width:
        x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9 & 0xFFFFFFFFFFFFFFFF
        x = (x ^ (x >> 27)) * 0x94D049BB133111EB & 0xFFFFFFFFFFFFFFFF
        x ^= x >> 31
        out.append(f"{x:016x}")
    return "".join(out)[:width]


def uid_of(i: int) -> str:
    h = _hex(i, 1, 32)
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-a{h[17:20]}-{h[20:32]}"


def pod_name(i: int) -> str:
    return f"checkout-7f9c6d5b8-{i:06d}"


def distinct_status_dict(base: dict[str, Any], i: int) -> dict[str, Any]:
    """The fixture's status with this pod's own podIP(s), hostIP and container IDs.

    Every string that differs between real pods is made distinct, so the memory
    figure does not profit from strings shared between pods.
    """
    status = copy.deepcopy(base)
    ip4 = f"10.{(i >> 16) & 255}.{(i >> 8) & 255}.{i & 255}"
    ip6 = f"fd00:10:244::{i:x}"
    status["podIP"] = ip4
    status["podIPs"] = [{"ip": ip4}, {"ip": ip6}]
    for key in ("initContainerStatuses", "containerStatuses", "ephemeralContainerStatuses"):
        for n, cs in enumerate(status.get(key) or ()):
            cid = cs.get("containerID")
            if cid:
                cs["containerID"] = cid.partition("://")[0] + "://" + _hex(i, 10 + n)
            for state_key in ("state", "lastState"):
                term = (cs.get(state_key) or {}).get("terminated")
                if term and term.get("containerID"):
                    term["containerID"] = cs.get("containerID") or term["containerID"]
    return status


def distinct_pod_dict(base: dict[str, Any], i: int) -> dict[str, Any]:
    """The fixture pod as a distinct pod: its own uid, name, IPs and container IDs."""
    pod = {k: v for k, v in base.items() if k != "status"}
    meta = dict(base["metadata"])
    meta["uid"] = uid_of(i)
    meta["name"] = pod_name(i)
    pod["metadata"] = meta
    pod["status"] = distinct_status_dict(base["status"], i)
    return pod


# --- timing ----------------------------------------------------------------------------


@dataclass
class Stats:
    """Seconds per operation over repeats."""

    samples: list[float]

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @property
    def lo(self) -> float:
        return min(self.samples)

    @property
    def hi(self) -> float:
        return max(self.samples)

    def spread(self) -> float:
        """(max - min) / median: how noisy the repeats were."""
        return (self.hi - self.lo) / self.median if self.median else 0.0

    def as_dict(self, scale: float = 1.0) -> dict[str, float]:
        return {
            "median": self.median * scale,
            "min": self.lo * scale,
            "max": self.hi * scale,
            "spread": self.spread(),
        }


def per_call(fn: Callable[[], Any], number: int) -> float:
    """Seconds per call of ``fn`` over ``number`` calls (no GC during the loop)."""
    gc_was = gc.isenabled()
    gc.disable()
    try:
        start = time.perf_counter()
        for _ in range(number):
            fn()
        return (time.perf_counter() - start) / number
    finally:
        if gc_was:
            gc.enable()


def autonumber(fn: Callable[[], Any], target: float = 0.05, cap: int = 100_000) -> int:
    """How many calls take about ``target`` seconds (at least one)."""
    fn()
    n = 1
    while n < cap:
        t = per_call(fn, n) * n
        if t >= target / 4:
            return max(1, min(cap, int(n * target / max(t, 1e-9))))
        n *= 4
    return cap


def interleaved(cases: dict[str, Callable[[], Any]], repeats: int, target: float = 0.05) -> dict[str, Stats]:
    """Time every case ``repeats`` times, alternating cases within each repeat."""
    numbers = {name: autonumber(fn, target) for name, fn in cases.items()}
    samples: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(repeats):
        for name, fn in cases.items():
            samples[name].append(per_call(fn, numbers[name]))
    return {name: Stats(s) for name, s in samples.items()}


def ratio_stats(slow: Stats, fast: Stats) -> Stats:
    """Per-repeat ratios slow/fast (both measured in the same repeat)."""
    return Stats([s / f for s, f in zip(slow.samples, fast.samples)])


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    k = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[k]


def machine() -> dict[str, Any]:
    import platform
    from importlib import metadata

    versions = {}
    for name in ("podstatus", "msgspec", "kubernetes", "pydantic", "urllib3"):
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    if versions["podstatus"] == "not installed":
        try:
            import podstatus

            versions["podstatus"] = getattr(podstatus, "__version__", "source tree")
        except ImportError:
            pass
    load = os.getloadavg() if hasattr(os, "getloadavg") else (float("nan"),) * 3
    return {
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "processor": platform.machine(),
        "load": load,
        "versions": versions,
    }
