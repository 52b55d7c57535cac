"""Profile the hot paths with pyinstrument (not part of ``make bench``).

    python bench/profile_hot.py setter          # set_pod_status, 10,000 pods cached
    python bench/profile_hot.py setter-fresh    # the same with statuses built afresh each call
    python bench/profile_hot.py resync          # sync_batch(all=True), nothing changed
    python bench/profile_hot.py e2e [--pods N]  # fast path end to end (manager process only)
    python bench/profile_hot.py types           # Pod.from_json + to_dict

Prints pyinstrument's text report; ``--html PATH`` writes the HTML one as well.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
for _p in (str(ROOT), str(ROOT / "src")):
    if _p not in sys.path:
        sys.path.insert(0, _p)

from bench._common import distinct_pod_dict, fixture_bytes, fixture_dict  # noqa: E402


def setter(pods: int = 10_000, calls: int = 40_000) -> Any:
    from podstatus.deletion import FakePodDeletionSafety
    from podstatus.manager import new_manager
    from podstatus.podmanager import BasicPodManager
    from podstatus.types import Pod

    base = fixture_dict()
    objs = [Pod.from_dict(distinct_pod_dict(base, i)) for i in range(pods)]
    mgr = new_manager(None, BasicPodManager(objs), FakePodDeletionSafety())
    for p in objs:
        mgr.set_pod_status(p, p.status)
    at = [c.type for c in objs[0].status.conditions or ()].index("Ready")
    work = []
    for p in objs:
        s = mgr.get_pod_status(p.uid)
        assert s is not None
        conds = s.conditions or ()
        flipped = (*conds[:at], conds[at].replace(status="False"), *conds[at + 1 :])
        work.append((p, s, conds, flipped))

    def go() -> None:
        for k in range(calls):
            p, s, conds, flipped = work[k % pods]
            mgr.set_pod_status(p, s.replace(conditions=flipped if (k // pods) % 2 == 0 else conds))
        for k in range(calls // 2):
            p, _, _, _ = work[k % pods]
            cur = mgr.get_pod_status(p.uid)
            assert cur is not None
            mgr.set_pod_status(p, cur.replace(conditions=cur.conditions))

    return go


def setter_fresh(pods: int = 10_000, calls: int = 20_000) -> Any:
    """set_pod_status with statuses built afresh (no part shared with the cached one), Ready flipping."""
    from podstatus.deletion import FakePodDeletionSafety
    from podstatus.manager import new_manager
    from podstatus.podmanager import BasicPodManager
    from podstatus.types import Pod, PodStatus

    base = fixture_dict()
    objs = [Pod.from_dict(distinct_pod_dict(base, i)) for i in range(pods)]
    mgr = new_manager(None, BasicPodManager(objs), FakePodDeletionSafety())
    for p in objs:
        mgr.set_pod_status(p, p.status)
    wire = []
    for p in objs:
        s = mgr.get_pod_status(p.uid)
        assert s is not None
        d = s.to_dict()
        flipped = s.to_dict()
        for c in flipped["conditions"]:
            if c["type"] == "Ready":
                c["status"] = "False" if c["status"] == "True" else "True"
        wire.append((p, d, flipped))

    def go() -> None:
        # The decode is profiled too; it shows apart from set_pod_status in the report.
        for k in range(calls):
            p, d, flipped = wire[k % pods]
            mgr.set_pod_status(p, PodStatus.from_dict(flipped if (k // pods) % 2 == 0 else d))

    return go


def resync(pods: int = 20_000) -> Any:
    from bench.bench_resync import StubClient
    from podstatus.deletion import FakePodDeletionSafety
    from podstatus.manager import new_manager
    from podstatus.podmanager import BasicPodManager
    from podstatus.requestcount import RequestCounter
    from podstatus.types import Pod

    base = fixture_dict()
    pm = BasicPodManager()
    mgr = new_manager(StubClient(pm, RequestCounter()), pm, FakePodDeletionSafety())
    for i in range(pods):
        d = distinct_pod_dict(base, i)
        pm.add_pod(Pod.from_dict(d))
        pod = Pod.from_dict(d)
        mgr.set_pod_status(pod, pod.status)
    for pod in pm.get_pods():
        cached = mgr.get_pod_status(pod.uid)
        pm.update_pod(pod.replace(status=Pod.from_dict(pod.replace(status=cached).to_dict()).status))
    mgr.sync_batch(all=True)

    def go() -> None:
        mgr.sync_batch(all=True)

    return go


SESSIONS: list[Any] = []


def _profiled(fn: Any) -> Any:
    """Wrap a thread's body so that it runs under its own pyinstrument profiler."""
    from pyinstrument import Profiler

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        profiler = Profiler(interval=0.0005, async_mode="disabled")
        profiler.start()
        try:
            return fn(*args, **kwargs)
        finally:
            SESSIONS.append(profiler.stop())

    return wrapper


def e2e(pods: int = 1000) -> Any:
    """The fast path end to end; the manager's loop and worker threads are profiled too."""
    from bench.bench_e2e import run_mode
    from podstatus.manager import Manager

    Manager._loop = _profiled(Manager._loop)  # type: ignore[method-assign]
    Manager._worker = _profiled(Manager._worker)  # type: ignore[method-assign]

    def go() -> None:
        print(run_mode(pods, 3, True, rate=100.0))

    return go


def types() -> Any:
    from podstatus.types import Pod

    raw = fixture_bytes()

    def go() -> None:
        for _ in range(5000):
            Pod.from_json(raw).to_dict()

    return go


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("what", choices=["setter", "setter-fresh", "resync", "e2e", "types"])
    parser.add_argument("--pods", type=int, default=None)
    parser.add_argument("--html", default=None)
    args = parser.parse_args()
    from pyinstrument import Profiler

    kwargs = {"pods": args.pods} if args.pods else {}
    makers = {"setter": setter, "setter-fresh": setter_fresh, "resync": resync, "e2e": e2e, "types": types}
    go = makers[args.what](**kwargs)
    profiler = Profiler(interval=0.0005, async_mode="disabled")
    profiler.start()
    go()
    session = profiler.stop()
    if SESSIONS:
        from pyinstrument.renderers import ConsoleRenderer
        from pyinstrument.session import Session

        threads = SESSIONS[0]
        for other in SESSIONS[1:]:
            threads = Session.combine(threads, other)
        print("== the manager's threads (sync loop and workers), combined ==")
        print(ConsoleRenderer(unicode=True, color=False).render(threads))
        print("== the driving thread ==")
        session = threads if args.what == "e2e" and not session else session
    print(profiler.output_text(unicode=True, color=False, show_all=False))
    if args.html:
        Path(args.html).write_text(profiler.output_html())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
