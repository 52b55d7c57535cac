"""Many threads calling the setters while the loop runs (SPEC 2.3: all methods are thread-safe)."""

from __future__ import annotations

import itertools
import random
import threading
import time
from collections import defaultdict

from mgrkit import World, cid, drain, make_pod, running_status

from podstatus import SyncRecord

N_PODS = 50
N_THREADS = 8
DURATION = 1.2


def test_setters_from_many_threads_while_the_loop_runs(world: World, mode: str) -> None:
    pods = [world.add(make_pod(f"p{i:02d}", containers=("app", "side"))) for i in range(N_PODS)]
    records: dict[str, list[int]] = defaultdict(list)
    records_lock = threading.Lock()

    def on_sync(record: SyncRecord) -> None:
        with records_lock:
            records[record.pod_uid].append(record.version)

    # No full pass during the test (it may legitimately re-sync a version); workers=4 in fast mode.
    m = world.manager(mode, sync_period=3600, on_sync=on_sync)
    for p in pods:
        m.set_pod_status(p, running_status(p, ready=False))
    m.start()

    errors: list[BaseException] = []
    stop_at = time.monotonic() + DURATION
    calls = [0] * N_THREADS

    def hammer(seed: int) -> None:
        rng = random.Random(seed)
        try:
            while time.monotonic() < stop_at:
                p = rng.choice(pods)
                action = rng.random()
                if action < 0.4:
                    ready = {"app": rng.random() < 0.5, "side": rng.random() < 0.5}
                    m.set_pod_status(p, running_status(p, ready=ready, pod_ip=f"10.0.{rng.randrange(4)}.1"))
                elif action < 0.8:
                    m.set_container_readiness(p.uid, cid(p, rng.choice(["app", "side"])), rng.random() < 0.5)
                else:
                    m.set_container_startup(p.uid, cid(p, rng.choice(["app", "side"])), rng.random() < 0.5)
                calls[seed] += 1
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=hammer, args=(i,)) for i in range(N_THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    m.stop(timeout=5)
    assert not errors, errors
    assert sum(calls) > 500, calls

    drain(m)

    for p in pods:
        cached = m.get_pod_status(p.uid)
        assert cached is not None
        server = world.server_status(p)
        assert server.phase == cached.phase
        assert [(c.type, c.status, c.reason, c.message) for c in server.conditions or ()] == [
            (c.type, c.status, c.reason, c.message) for c in cached.conditions or ()
        ]
        assert server.container_statuses == cached.container_statuses
        assert server.to_dict() == cached.to_dict()

    assert set(records) == {p.uid for p in pods}
    for p in pods:
        versions = records[p.uid]
        assert all(a < b for a, b in itertools.pairwise(versions)), (p.name, versions)
        assert versions[-1] == m.get_status_version(p.uid)
