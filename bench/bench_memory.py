"""memory: bytes per cached pod status with many pods cached.

Each pod gets the fixture's status, decoded from its own JSON text in which the
pod IP, the IPv6 pod IP and every container ID (init and regular containers)
are unique to the pod, so no string is shared between pods that would not be
shared on a real node. The pods themselves (what the pod manager holds) are
built before measuring and are not counted: only what the status manager
retains is.

Each measure runs in a fresh subprocess so the numbers are clean. The
headline is the RSS growth of the process with ``pods`` statuses cached (what
the OS sees, allocator slack included); ``tracemalloc`` (Python allocations
the manager retains) cross-checks it on fewer pods, as tracing makes every
allocation about four times slower and the figure is per pod anyway.
Peer: the same statuses kept as the official package's ``V1PodStatus`` models
(tracemalloc, fewer pods).

A second figure, ``built``, is for statuses a node agent builds with
``replace`` from one template (only the pod IPs and container IDs are its
own): what the manager costs when the status's pieces are shared, as they
are when an agent reuses the strings and values of the pod's spec.

A third, ``distinct_times``, is the decoded case with every timestamp of a pod
moved by the pod's index in seconds, so no two pods share a time (the manager
keeps one copy of equal timestamps and of small equal parts such as a
condition, so the plain decoded figure, where all pods have the fixture's
times, is its best case; real pods started in the same second share some).

Every figure is measured at the full size both ways: RSS growth of a fresh
subprocess (what the OS sees, allocator slack included) and tracemalloc (the
Python allocations retained; not timing-sensitive, so not disturbed by a busy
machine).
"""

from __future__ import annotations

import gc
import json
import os
import re
import subprocess
import sys
from datetime import datetime, timedelta
from typing import Any

try:
    from bench._common import ROOT, _hex, fixture_dict, pod_name, uid_of
except ImportError:  # run as a script from bench/
    from _common import ROOT, _hex, fixture_dict, pod_name, uid_of  # type: ignore[no-redef]

_IP4 = "10.244.17.42"
_IP6 = "fd00:10:244:17::2a"


def _status_template() -> tuple[str, list[str]]:
    """The fixture status as JSON text, and the container IDs in it (to substitute)."""
    status = fixture_dict()["status"]
    ids: list[str] = []
    for key in ("initContainerStatuses", "containerStatuses"):
        for cs in status.get(key) or ():
            if cs.get("containerID"):
                ids.append(cs["containerID"])
    return json.dumps(status, separators=(",", ":")), ids


def _status_json(template: str, ids: list[str], i: int) -> bytes:
    text = template.replace(f'"{_IP4}"', f'"10.{(i >> 16) & 255}.{(i >> 8) & 255}.{i & 255}"')
    text = text.replace(f'"{_IP6}"', f'"fd00:10:244::{i:x}"')
    for n, cid in enumerate(ids):
        text = text.replace(cid, cid.partition("://")[0] + "://" + _hex(i, 10 + n))
    return text.encode()


_TIME = re.compile(r'"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)"')


def _shift_times(text: str, i: int) -> str:
    """Every timestamp of the JSON text moved ``i`` seconds later."""

    def shift(m: re.Match[str]) -> str:
        t = datetime.strptime(m.group(1), "%Y-%m-%dT%H:%M:%SZ") + timedelta(seconds=i)
        return f'"{t:%Y-%m-%dT%H:%M:%SZ}"'

    return _TIME.sub(shift, text)


def _built_status(base: Any, i: int) -> Any:
    from podstatus.types import PodIP

    ip4 = f"10.{(i >> 16) & 255}.{(i >> 8) & 255}.{i & 255}"
    statuses = tuple(
        cs.replace(container_id=f"containerd://{_hex(i, 10 + n)}")
        for n, cs in enumerate(base.container_statuses)
    )
    return base.replace(
        pod_ip=ip4, pod_ips=(PodIP(ip=ip4), PodIP(ip=f"fd00:10:244::{i:x}")), container_statuses=statuses
    )


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def measure(pods: int, how: str, traced: bool = False) -> dict[str, Any]:
    """In this process: ``how`` is "decoded", "built", "distinct_times" or "peer" (always tracemalloc).

    ``traced``: tracemalloc, else the RSS growth.
    """
    import tracemalloc

    template, ids = _status_template()
    if how == "peer":
        from kubernetes.client import ApiClient

        api = ApiClient()
        gc.collect()
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        cache = {}
        for i in range(pods):
            data = json.loads(_status_json(template, ids, i))
            cache[uid_of(i)] = api._ApiClient__deserialize(data, "V1PodStatus")
        gc.collect()
        after = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        assert len(cache) == pods
        return {"pods": pods, "bytes_per_pod": (after - before) / pods}

    from podstatus.deletion import FakePodDeletionSafety
    from podstatus.manager import new_manager
    from podstatus.podmanager import BasicPodManager
    from podstatus.types import Pod, PodStatus

    template_pod = Pod.from_dict(fixture_dict())
    meta = template_pod.metadata
    objs = [template_pod.replace(metadata=meta.replace(uid=uid_of(i), name=pod_name(i))) for i in range(pods)]
    pm = BasicPodManager(objs)
    safety = FakePodDeletionSafety()
    base_status = template_pod.status
    gc.collect()
    if traced:
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
    else:
        before = _rss()
    mgr = new_manager(None, pm, safety)
    if how == "built":
        for i, pod in enumerate(objs):
            mgr.set_pod_status(pod, _built_status(base_status, i))
    elif how == "distinct_times":
        for i, pod in enumerate(objs):
            text = _shift_times(_status_json(template, ids, i).decode(), i)
            mgr.set_pod_status(pod, PodStatus.from_json(text))
    else:
        assert how == "decoded", how
        for i, pod in enumerate(objs):
            mgr.set_pod_status(pod, PodStatus.from_json(_status_json(template, ids, i)))
    gc.collect()
    if traced:
        after = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
    else:
        after = _rss()
    assert len(mgr.cached_uids()) == pods
    # Spot check: the cached statuses really are distinct.
    a, b = mgr.get_pod_status(objs[0].uid), mgr.get_pod_status(objs[-1].uid)
    assert a is not None and b is not None and (pods == 1 or a.pod_ip != b.pod_ip)
    return {"pods": pods, "bytes_per_pod": (after - before) / pods}


def _in_subprocess(pods: int, how: str, traced: bool) -> dict[str, Any]:
    code = (
        "import json, sys; sys.path.insert(0, sys.argv[1]); "
        "from bench.bench_memory import measure; "
        "print(json.dumps(measure(int(sys.argv[2]), sys.argv[3], sys.argv[4] == 'traced')))"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    out = subprocess.run(
        [sys.executable, "-c", code, str(ROOT), str(pods), how, "traced" if traced else "rss"],
        check=True,
        capture_output=True,
        text=True,
        env=env,
    )
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def run(pods: int = 100_000, peer_pods: int = 2_000) -> dict[str, Any]:
    """Bytes per cached status: decoded, built, decoded with distinct times (RSS and tracemalloc)."""
    figures: dict[str, float] = {}
    for how in ("decoded", "built", "distinct_times"):
        for traced in (False, True):
            key = f"{how}_{'traced' if traced else 'rss'}"
            figures[key] = _in_subprocess(pods, how, traced)["bytes_per_pod"]
    peer = _in_subprocess(peer_pods, "peer", True)["bytes_per_pod"]
    return {
        "pods": pods,
        "peer_pods": peer_pods,
        **figures,
        # Kept under their old names for the table.
        "ours_bytes": figures["decoded_rss"],
        "ours_traced_bytes": figures["decoded_traced"],
        "ours_built_bytes": figures["built_rss"],
        "peer_bytes": peer,
        "ratio": peer / figures["decoded_traced"],
        "target": 4096,
        "met": all(figures[f"{h}_{m}"] < 4096 for h in ("decoded", "built") for m in ("rss", "traced")),
    }


if __name__ == "__main__":
    import pprint

    pprint.pprint(run())
