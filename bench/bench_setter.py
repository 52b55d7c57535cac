"""setter: ``set_pod_status`` throughput with many pods cached.

Ours: a manager with no kube client (nothing syncs), ``pods`` distinct pods
cached; each call hands one pod a status whose ``Ready`` condition flipped
(built with ``PodStatus.replace``), or, for the unchanged case, a fresh but
equal status object (a node agent rebuilds its status each time; handing back
the cached object itself would be a trivial identity check).

"Fresh": the same change, but the status handed over is built afresh each
time and shares no part with the cached one, as a node agent that rebuilds
its status from its runtime hands it over: decoded with ``PodStatus.from_dict``
from its own wire dict, the conditions the manager times without a
``lastTransitionTime`` (agents leave it to the manager). Fresh statuses are
built 25 at a time outside the timing; only the setter calls are timed. "Fresh,
unchanged": the same, with nothing changed (it must not make a new version).

Peer (baseline): what the kubelet's setter does with the official package's
models: for each call ``copy.deepcopy`` the cached ``V1PodStatus``, change one
condition, compare with the cached one (``==``), store it.

Times are CPU time of the benchmark thread (``time.thread_time``): the machine
is shared, and time the scheduler gives to other processes is not ours nor the
peer's. Ours and the peer alternate within each repeat.
"""

from __future__ import annotations

import copy
import gc
import time
from typing import Any

try:
    from bench._common import Stats, distinct_pod_dict, fixture_dict, ratio_stats
except ImportError:  # run as a script from bench/
    from _common import Stats, distinct_pod_dict, fixture_dict, ratio_stats  # type: ignore[no-redef]

READY = "Ready"
# Conditions whose lastTransitionTime the manager sets (SPEC 4.2 step 4): an agent leaves them unset.
TIMED = {"ContainersReady", "Ready", "Initialized", "PodReadyToStartContainers", "PodScheduled"}
# Fresh statuses are built this many at a time, outside the timing: a few, so that they are
# still in the CPU's caches when handed over, as a status an agent has just built is.
BATCH = 25
_clock = time.thread_time


def _flip(value: str) -> str:
    return "False" if value == "True" else "True"


def _ours(pods: int, calls: int, repeats: int, peer_round: Any = None) -> dict[str, Any]:
    from podstatus.deletion import FakePodDeletionSafety
    from podstatus.manager import new_manager
    from podstatus.podmanager import BasicPodManager
    from podstatus.types import Pod, PodStatus

    base = fixture_dict()
    objs = [Pod.from_dict(distinct_pod_dict(base, i)) for i in range(pods)]
    pm = BasicPodManager(objs)
    mgr = new_manager(None, pm, FakePodDeletionSafety())
    for p in objs:
        mgr.set_pod_status(p, p.status)
    # Per pod: the conditions with Ready as cached, and with Ready flipped.
    ready_at = [c.type for c in objs[0].status.conditions or ()].index(READY)
    variants = []
    for p in objs:
        cached = mgr.get_pod_status(p.uid)
        assert cached is not None
        conds = cached.conditions or ()
        c = conds[ready_at]
        flipped = (*conds[:ready_at], c.replace(status=_flip(c.status)), *conds[ready_at + 1 :])
        variants.append((p, cached, conds, flipped))

    def changed_round(n: int) -> None:
        set_status = mgr.set_pod_status
        for k in range(n):
            p, cached, conds, flipped = variants[k % pods]
            # Alternate rounds flip Ready back: every call changes one condition.
            use = flipped if (k // pods) % 2 == 0 else conds
            set_status(p, cached.replace(conditions=use))

    def unchanged_round(n: int) -> None:
        set_status = mgr.set_pod_status
        for k in range(n):
            p, _, _, _ = variants[k % pods]
            current = mgr.get_pod_status(p.uid)
            assert current is not None
            set_status(p, current.replace(conditions=current.conditions))

    # Per pod: its wire dict as an agent would build it, Ready as cached and flipped.
    wire = []
    for p, cached, _, _ in variants:
        d = cached.to_dict()
        d["conditions"] = [
            {k: v for k, v in c.items() if k != "lastTransitionTime" or c["type"] not in TIMED}
            for c in d["conditions"]
        ]
        flipped_d = copy.deepcopy(d)
        for c in flipped_d["conditions"]:
            if c["type"] == READY:
                c["status"] = _flip(c["status"])
        wire.append((p, d, flipped_d))

    def fresh_round(n: int, flip: bool) -> float:
        """CPU seconds of ``n`` setter calls with fresh statuses (built outside the timing)."""
        from_dict = PodStatus.from_dict
        set_status = mgr.set_pod_status
        spent = 0.0
        for start in range(0, n, BATCH):
            batch = []
            for k in range(start, min(n, start + BATCH)):
                p, d, flipped_d = wire[k % pods]
                # Alternate rounds flip Ready back: every call changes one condition.
                use = flipped_d if flip and (k // pods) % 2 == 0 else d
                batch.append((p, from_dict(use)))
            t0 = _clock()
            for p, status in batch:
                set_status(p, status)
            spent += _clock() - t0
        return spent

    v0 = mgr.get_status_version(objs[0].uid)
    changed: list[float] = []
    unchanged: list[float] = []
    fresh: list[float] = []
    fresh_unchanged: list[float] = []
    n_changed = calls - calls % (2 * pods) if calls >= 2 * pods else 2 * pods
    for _ in range(repeats):
        gc.collect()
        gc.disable()
        t0 = _clock()
        changed_round(n_changed)
        t1 = _clock()
        unchanged_round(calls)
        t2 = _clock()
        gc.enable()
        changed.append((t1 - t0) / n_changed)
        unchanged.append((t2 - t1) / calls)
        if peer_round is not None:
            peer_round()
        gc.collect()
        gc.disable()
        fresh.append(fresh_round(n_changed, True) / n_changed)
        fresh_unchanged.append(fresh_round(calls, False) / calls)
        gc.enable()
    # Each changed call made a new version; unchanged calls made none.
    versions = mgr.get_status_version(objs[0].uid) - v0
    assert versions == 2 * repeats * n_changed // pods, versions
    return {
        "changed": Stats(changed),
        "unchanged": Stats(unchanged),
        "fresh": Stats(fresh),
        "fresh_unchanged": Stats(fresh_unchanged),
        "calls_changed": n_changed,
    }


class _Peer:
    """The baseline's cache; :meth:`round` times one repeat of its changed and unchanged calls."""

    def __init__(self, pods: int, calls: int) -> None:
        from kubernetes.client import ApiClient

        api = ApiClient()
        base = fixture_dict()
        self.cache: dict[str, Any] = {}
        for i in range(pods):
            d = distinct_pod_dict(base, i)
            self.cache[d["metadata"]["uid"]] = api._ApiClient__deserialize(d["status"], "V1PodStatus")
        self.uids = list(self.cache)
        self.ready_at = [c.type for c in next(iter(self.cache.values())).conditions].index(READY)
        self.pods = pods
        self.calls = calls
        self.changed: list[float] = []
        self.unchanged: list[float] = []

    def _changed(self, n: int) -> None:
        cache, uids, pods, ready_at = self.cache, self.uids, self.pods, self.ready_at
        for k in range(n):
            uid = uids[k % pods]
            old = cache[uid]
            new = copy.deepcopy(old)
            cond = new.conditions[ready_at]
            cond.status = _flip(cond.status)
            if new != old:
                cache[uid] = new

    def _unchanged(self, n: int) -> None:
        cache, uids, pods = self.cache, self.uids, self.pods
        for k in range(n):
            uid = uids[k % pods]
            old = cache[uid]
            new = copy.deepcopy(old)
            if new != old:
                cache[uid] = new

    def round(self) -> None:
        calls = self.calls
        gc.collect()
        gc.disable()
        t0 = _clock()
        self._changed(calls)
        t1 = _clock()
        self._unchanged(calls)
        t2 = _clock()
        gc.enable()
        self.changed.append((t1 - t0) / calls)
        self.unchanged.append((t2 - t1) / calls)


def run(pods: int = 10_000, calls: int = 20_000, peer_calls: int = 600, repeats: int = 5) -> dict[str, Any]:
    """ops/s of ours and the peer; ``calls`` per repeat for ours, ``peer_calls`` for the (slow) peer."""
    peer = _Peer(pods, peer_calls)
    ours = _ours(pods, calls, repeats, peer.round)
    peer_changed, peer_unchanged = Stats(peer.changed), Stats(peer.unchanged)
    ratio = ratio_stats(peer_changed, ours["changed"])
    ratio_unchanged = ratio_stats(peer_unchanged, ours["unchanged"])
    # The fresh statuses make the same change as the peer's changed calls (and none, when unchanged).
    ratio_fresh = ratio_stats(peer_changed, ours["fresh"])
    ratio_fresh_unchanged = ratio_stats(peer_unchanged, ours["fresh_unchanged"])

    def ops(s: Stats) -> dict[str, float]:
        return {"median": 1 / s.median, "min": 1 / s.hi, "max": 1 / s.lo, "spread": s.spread()}

    cheaper = ours["unchanged"].median < ours["changed"].median
    return {
        "pods": pods,
        "repeats": repeats,
        "calls": ours["calls_changed"],
        "peer_calls": peer_calls,
        "clock": "thread CPU time",
        "ours_ops": ops(ours["changed"]),
        "ours_unchanged_ops": ops(ours["unchanged"]),
        "ours_fresh_ops": ops(ours["fresh"]),
        "ours_fresh_unchanged_ops": ops(ours["fresh_unchanged"]),
        "peer_ops": ops(peer_changed),
        "peer_unchanged_ops": ops(peer_unchanged),
        "ratio": ratio.as_dict(),
        "ratio_unchanged": ratio_unchanged.as_dict(),
        "ratio_fresh": ratio_fresh.as_dict(),
        "ratio_fresh_unchanged": ratio_fresh_unchanged.as_dict(),
        "unchanged_cheaper": cheaper,
        "unchanged_vs_changed": ours["changed"].median / ours["unchanged"].median,
        "target": 10.0,
        "met": ratio.median >= 10.0 and ratio_fresh.median >= 10.0 and cheaper,
    }


if __name__ == "__main__":
    import pprint

    pprint.pprint(run())
