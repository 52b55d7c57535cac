"""setter: ``set_pod_status`` throughput with many pods cached.

Ours: a manager with no kube client (nothing syncs), ``pods`` distinct pods
cached; each call hands one pod a status whose ``Ready`` condition flipped
(built with ``PodStatus.replace``), or, for the unchanged case, a fresh but
equal status object (a node agent rebuilds its status each time; handing back
the cached object itself would be a trivial identity check).

Peer (baseline): what the kubelet's setter does with the official package's
models: for each call ``copy.deepcopy`` the cached ``V1PodStatus``, change one
condition, compare with the cached one (``==``), store it.
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


def _flip(value: str) -> str:
    return "False" if value == "True" else "True"


def _ours(pods: int, calls: int, repeats: int) -> dict[str, Any]:
    from podstatus.deletion import FakePodDeletionSafety
    from podstatus.manager import new_manager
    from podstatus.podmanager import BasicPodManager
    from podstatus.types import Pod

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

    v0 = mgr.get_status_version(objs[0].uid)
    changed: list[float] = []
    unchanged: list[float] = []
    n_changed = calls - calls % (2 * pods) if calls >= 2 * pods else 2 * pods
    for _ in range(repeats):
        gc.collect()
        gc.disable()
        t0 = time.perf_counter()
        changed_round(n_changed)
        t1 = time.perf_counter()
        unchanged_round(calls)
        t2 = time.perf_counter()
        gc.enable()
        changed.append((t1 - t0) / n_changed)
        unchanged.append((t2 - t1) / calls)
    # Each changed call made a new version; unchanged calls made none.
    versions = mgr.get_status_version(objs[0].uid) - v0
    assert versions == repeats * n_changed // pods, versions
    return {"changed": Stats(changed), "unchanged": Stats(unchanged), "calls_changed": n_changed}


def _peer(pods: int, calls: int, repeats: int) -> dict[str, Any]:
    from kubernetes.client import ApiClient

    api = ApiClient()
    base = fixture_dict()
    cache = {}
    for i in range(pods):
        d = distinct_pod_dict(base, i)
        cache[d["metadata"]["uid"]] = api._ApiClient__deserialize(d["status"], "V1PodStatus")
    uids = list(cache)
    ready_at = [c.type for c in next(iter(cache.values())).conditions].index(READY)

    def changed_round(n: int) -> None:
        for k in range(n):
            uid = uids[k % pods]
            old = cache[uid]
            new = copy.deepcopy(old)
            cond = new.conditions[ready_at]
            cond.status = _flip(cond.status)
            if new != old:
                cache[uid] = new

    def unchanged_round(n: int) -> None:
        for k in range(n):
            uid = uids[k % pods]
            old = cache[uid]
            new = copy.deepcopy(old)
            if new != old:
                cache[uid] = new

    changed: list[float] = []
    unchanged: list[float] = []
    for _ in range(repeats):
        gc.collect()
        gc.disable()
        t0 = time.perf_counter()
        changed_round(calls)
        t1 = time.perf_counter()
        unchanged_round(calls)
        t2 = time.perf_counter()
        gc.enable()
        changed.append((t1 - t0) / calls)
        unchanged.append((t2 - t1) / calls)
    return {"changed": Stats(changed), "unchanged": Stats(unchanged)}


def run(pods: int = 10_000, calls: int = 20_000, peer_calls: int = 600, repeats: int = 5) -> dict[str, Any]:
    """ops/s of ours and the peer; ``calls`` per repeat for ours, ``peer_calls`` for the (slow) peer."""
    ours = _ours(pods, calls, repeats)
    peer = _peer(pods, peer_calls, repeats)
    ratio = ratio_stats(peer["changed"], ours["changed"])
    ratio_unchanged = ratio_stats(peer["unchanged"], ours["unchanged"])

    def ops(s: Stats) -> dict[str, float]:
        return {"median": 1 / s.median, "min": 1 / s.hi, "max": 1 / s.lo, "spread": s.spread()}

    cheaper = ours["unchanged"].median < ours["changed"].median
    return {
        "pods": pods,
        "repeats": repeats,
        "calls": ours["calls_changed"],
        "peer_calls": peer_calls,
        "ours_ops": ops(ours["changed"]),
        "ours_unchanged_ops": ops(ours["unchanged"]),
        "peer_ops": ops(peer["changed"]),
        "peer_unchanged_ops": ops(peer["unchanged"]),
        "ratio": ratio.as_dict(),
        "ratio_unchanged": ratio_unchanged.as_dict(),
        "unchanged_cheaper": cheaper,
        "unchanged_vs_changed": ours["changed"].median / ours["unchanged"].median,
        "target": 10.0,
        "met": ratio.median >= 10.0 and cheaper,
    }


if __name__ == "__main__":
    import pprint

    pprint.pprint(run())
