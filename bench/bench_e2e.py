"""end to end: status changes through the manager to the embedded API server over real HTTP.

Set-up, for each run (not measured):

* the embedded API server runs in its own process (``podstatus.server.http.serve``),
  so its CPU does not share the manager's GIL; the manager talks to it with
  ``HttpKubeClient`` over loopback HTTP/1.1 keep-alive;
* ``pods`` pods are created from the fixture (own names; the server gives them
  their UIDs), and a watch thread feeds a ``BasicPodManager`` from list + watch,
  as a node agent's informer would;
* every pod gets a first status (the fixture's running status, with its own pod
  IPs and container IDs) and the manager syncs them all, with no added latency.

Measured: ``changes`` status changes (``changes_per_pod`` per pod, round by
round, pods in a shuffled order) handed to ``set_pod_status`` by one driver
thread paced at ``rate`` changes per second, so syncs and changes overlap as on
a node; each change flips the ``app`` container's readiness and with it the
``Ready`` and ``ContainersReady`` conditions. Every request pays ``latency``
seconds (5 ms): a thin wrapper around ``HttpKubeClient`` sleeps before sending
it (the embedded server's fault plan can add latency too, but the wrapper can
be switched off for the set-up). Then it waits until every change is on the
server.

Reported: requests per change (from the client's ``RequestCounter``), wall
time, CPU of both processes per change, and the propagation latency of every
change: from the setter call to the end of the first sync that carried its
version or a newer one (``SyncRecord.version`` / ``synced_at`` from ``on_sync``;
coalesced changes count each). Also the manager's own ``synced_at -
changed_at``. Violations: a patch whose ``metadata.uid`` precondition is not
the pod's UID, and a pod whose final status on the server differs from the
manager's cached status.
"""

from __future__ import annotations

import contextlib
import copy
import os
import random
import subprocess
import sys
import threading
import time
from collections import defaultdict
from typing import Any

import msgspec

try:
    from bench._common import ROOT, distinct_status_dict, fixture_dict, percentile
except ImportError:  # run as a script from bench/
    from _common import ROOT, distinct_status_dict, fixture_dict, percentile  # type: ignore[no-redef]

GATE = "target-health.elbv2.k8s.aws/checkout"


# --- the server, in its own process ------------------------------------------------------


class ServerProcess:
    """``podstatus.server.http.serve`` in a subprocess; ``url`` once it listens."""

    def __init__(self) -> None:
        code = (
            "import sys\n"
            "from podstatus.server.http import serve\n"
            # The benchmark's namespaces exist before the pods, as on a real cluster.
            "def ready(s):\n"
            "    for ns in ('bench-kubelet', 'bench-fast'):\n"
            "        s.store.ensure_namespace(ns)\n"
            "    print(s.url, flush=True)\n"
            "serve('127.0.0.1', 0, ready=ready)\n"
        )
        env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
        self.proc = subprocess.Popen(
            [sys.executable, "-c", code],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=env,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().strip()
        if not line.startswith("http"):
            self.proc.kill()
            raise RuntimeError(f"the embedded server did not start: {line!r}")
        self.url = line

    def cpu_seconds(self) -> float:
        with open(f"/proc/{self.proc.pid}/stat") as f:
            fields = f.read().rpartition(")")[2].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()


# --- the client: latency and the UID invariant ---------------------------------------------


class LatencyClient:
    """``HttpKubeClient`` with ``delay`` seconds slept before every request.

    It also checks every patch: its ``metadata.uid`` precondition must be the
    UID of the pod it is sent to (``uids``).
    """

    def __init__(self, inner: Any, uids: dict[tuple[str, str], str]) -> None:
        self.inner = inner
        self.delay = 0.0
        self.uids = uids
        self.patches = 0
        self.violations: list[str] = []
        self._lock = threading.Lock()

    def get_pod(self, namespace: str, name: str) -> Any:
        if self.delay:
            time.sleep(self.delay)
        return self.inner.get_pod(namespace, name)

    def patch_pod_status(self, namespace: str, name: str, patch: bytes, **kwargs: Any) -> Any:
        uid = (msgspec.json.decode(patch).get("metadata") or {}).get("uid")
        want = self.uids.get((namespace, name))
        with self._lock:
            self.patches += 1
            if uid != want:
                self.violations.append(f"patch of {namespace}/{name} with uid {uid}, pod uid {want}")
        if self.delay:
            time.sleep(self.delay)
        return self.inner.patch_pod_status(namespace, name, patch, **kwargs)

    def delete_pod(self, namespace: str, name: str, **kwargs: Any) -> None:
        if self.delay:
            time.sleep(self.delay)
        self.inner.delete_pod(namespace, name, **kwargs)


# --- the informer ---------------------------------------------------------------------------


class Informer:
    """List + watch of one namespace into a ``BasicPodManager`` (in a thread)."""

    def __init__(self, client: Any, namespace: str, pod_manager: Any) -> None:
        self.client = client
        self.namespace = namespace
        self.pm = pod_manager
        self.stop = threading.Event()
        self.events = 0
        self.latest_rv = 0
        pods, rv = client.list_pods(namespace)
        pod_manager.set_pods(pods)
        self.rv = rv
        self.thread = threading.Thread(target=self._run, name="bench-informer", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.is_set():
            try:
                watch = self.client.watch_pods(
                    self.namespace, resource_version=self.rv, timeout_seconds=300, stop_event=self.stop
                )
                for kind, pod in watch:
                    self.events += 1
                    if kind == "DELETED":
                        self.pm.remove_pod(pod)
                    else:
                        self.pm.update_pod(pod)
                    self.latest_rv = int(pod.metadata.resource_version or 0)
                self.rv = watch.resource_version or self.rv
            except Exception:
                if self.stop.is_set():
                    return
                time.sleep(0.1)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(5)


# --- statuses -------------------------------------------------------------------------------


def _statuses(base_status: dict[str, Any], i: int) -> tuple[Any, Any]:
    """This pod's running status, all ready and with ``app`` not ready."""
    from podstatus.types import PodStatus

    d = distinct_status_dict(base_status, i)
    # No controller sets the readiness gate here: the status the node owns has no gate condition.
    d["conditions"] = [c for c in d["conditions"] if c["type"] != GATE]
    ready = PodStatus.from_dict(d)
    u = copy.deepcopy(d)
    for c in u["conditions"]:
        if c["type"] in ("Ready", "ContainersReady"):
            c["status"] = "False"
            c["reason"] = "ContainersNotReady"
            c["message"] = "containers with unready status: [app]"
    for cs in u["containerStatuses"]:
        if cs["name"] == "app":
            cs["ready"] = False
    return ready, PodStatus.from_dict(u)


def _pod_body(base: dict[str, Any], namespace: str, i: int) -> dict[str, Any]:
    meta = base["metadata"]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"checkout-{i:06d}",
            "namespace": namespace,
            "labels": dict(meta.get("labels") or {}),
            "annotations": dict(meta.get("annotations") or {}),
        },
        "spec": base["spec"],
    }


def _create_pods(client: Any, bodies: list[dict[str, Any]], threads: int = 4) -> list[Any]:
    out: list[Any] = [None] * len(bodies)

    def work(k: int) -> None:
        for j in range(k, len(bodies), threads):
            out[j] = client.create_pod(bodies[j])

    ts = [threading.Thread(target=work, args=(k,)) for k in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return out


def _wait(predicate: Any, timeout: float, step: float = 0.01) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return predicate()


# --- one run ----------------------------------------------------------------------------------


def run_mode(
    pods: int,
    changes_per_pod: float,
    fast_path: bool,
    rate: float = 100.0,
    latency: float = 0.005,
    seed: int = 1,
    drain_timeout: float = 600.0,
) -> dict[str, Any]:
    from podstatus.clients.http import HttpKubeClient
    from podstatus.deletion import FakePodDeletionSafety
    from podstatus.manager import SyncRecord, new_manager
    from podstatus.podmanager import BasicPodManager

    base = fixture_dict()
    mode = "fast" if fast_path else "kubelet"
    namespace = f"bench-{mode}"
    server = ServerProcess()
    informer: Informer | None = None
    mgr = None
    try:
        http = HttpKubeClient(server.url, timeout=(5.0, 60.0), pool_maxsize=16)
        watcher = HttpKubeClient(server.url, timeout=(5.0, 60.0))
        t0 = time.perf_counter()
        created = _create_pods(http, [_pod_body(base, namespace, i) for i in range(pods)])
        uids = {(p.namespace, p.name): p.uid for p in created}
        pm = BasicPodManager()
        informer = Informer(watcher, namespace, pm)
        client = LatencyClient(http, uids)
        records: list[SyncRecord] = []
        rec_lock = threading.Lock()

        def on_sync(record: SyncRecord) -> None:
            with rec_lock:
                records.append(record)

        mgr = new_manager(client, pm, FakePodDeletionSafety(), fast_path=fast_path, on_sync=on_sync)
        variants = [_statuses(base["status"], i) for i in range(pods)]
        # Warm-up: every pod running, synced, no added latency.
        setup_pods = time.perf_counter() - t0
        # The statuses are all set before the manager starts (as at a node agent's start-up):
        # set while it runs, every change wakes a sync pass that scans every cached pod,
        # which made the 10,000-pod warm-up quadratic (see bench/FINDINGS.md).
        w0, wcpu0 = time.perf_counter(), time.process_time()
        for pod, (ready, _) in zip(created, variants):
            mgr.set_pod_status(pod, ready)
        mgr.start()
        if not _wait(lambda: mgr.pending_count() == 0, drain_timeout, step=0.05):
            raise RuntimeError(f"warm-up did not finish: {mgr.pending_count()} pods pending")
        warmup_s, warmup_cpu = time.perf_counter() - w0, time.process_time() - wcpu0
        server_rv_now = int(http.list_pods(namespace, limit=1)[1])
        _wait(lambda: informer.latest_rv >= server_rv_now, 60)
        setup = time.perf_counter() - t0

        # The changes: round by round, pods shuffled in each round.
        rng = random.Random(seed)
        total = max(1, round(pods * changes_per_pod))
        order: list[int] = []
        while len(order) < total:
            r = list(range(pods))
            rng.shuffle(r)
            order.extend(r)
        order = order[:total]
        flips = [0] * pods

        with rec_lock:
            records.clear()
        http.requests.reset()
        client.delay = latency
        changes: list[tuple[str, int, float]] = []
        cpu0, scpu0 = time.process_time(), server.cpu_seconds()
        start = time.monotonic()
        for k, i in enumerate(order):
            due = start + k / rate
            wait = due - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            pod = created[i]
            flips[i] += 1
            status = variants[i][flips[i] % 2]
            t = time.monotonic()
            mgr.set_pod_status(pod, status)
            changes.append((pod.uid, mgr.get_status_version(pod.uid), t))
        drive_end = time.monotonic()
        # pending_count() scans every cached pod under the manager's lock: poll it sparingly,
        # and take the end from the last sync's own timestamp.
        drained = _wait(lambda: mgr.pending_count() == 0, drain_timeout, step=0.05)
        with rec_lock:
            end = max((r.synced_at for r in records), default=time.monotonic())
        cpu, scpu = time.process_time() - cpu0, server.cpu_seconds() - scpu0
        counts = {k: v for k, v in http.requests.snapshot().items() if v}
        client.delay = 0.0
        mgr.stop(timeout=10)

        # Latency of every change: the first sync carrying its version (or newer).
        with rec_lock:
            recs = list(records)
        by_uid: dict[str, list[tuple[float, int]]] = defaultdict(list)
        for r in recs:
            by_uid[r.pod_uid].append((r.synced_at, r.version))
        for v in by_uid.values():
            v.sort()
        latencies: list[float] = []
        unsynced = 0
        for uid, version, t in changes:
            done = next((s for s, v in by_uid.get(uid, ()) if v >= version and s >= t), None)
            if done is None:
                unsynced += 1
            else:
                latencies.append(done - t)
        own = [r.synced_at - r.changed_at for r in recs if r.changed_at is not None]

        # Final state: the server holds what the manager has cached, for every pod.
        server_pods, _ = http.list_pods(namespace)
        mismatched = []
        for p in server_pods:
            cached = mgr.get_pod_status(p.uid)
            if cached is None or cached.to_dict() != p.status.to_dict():
                mismatched.append(p.name)
        violations = len(client.violations) + len(mismatched) + (0 if len(server_pods) == pods else 1)
        n = len(changes)
        sent = counts.get("get", 0) + counts.get("patch", 0) + counts.get("delete", 0)
        return {
            "mode": mode,
            "pods": pods,
            "changes": n,
            "changes_per_pod": changes_per_pod,
            "rate": rate,
            "latency_ms": latency * 1000,
            "setup_s": setup,
            "create_s": setup_pods,
            "warmup_s": warmup_s,
            "warmup_cpu_s": warmup_cpu,
            "drive_s": drive_end - start,
            "wall_s": end - start,
            "drained": drained,
            "requests": counts,
            "requests_per_change": sent / n,
            "cpu_ms_per_change": cpu / n * 1000,
            "server_cpu_ms_per_change": scpu / n * 1000,
            "p50_ms": percentile(latencies, 50) * 1000,
            "p99_ms": percentile(latencies, 99) * 1000,
            "max_ms": max(latencies, default=float("nan")) * 1000,
            "own_p50_ms": percentile(own, 50) * 1000,
            "own_p99_ms": percentile(own, 99) * 1000,
            "syncs": len(recs),
            "unsynced": unsynced,
            "uid_violations": client.violations[:5],
            "mismatched": mismatched[:5],
            "violations": violations + unsynced,
        }
    finally:
        if mgr is not None:
            mgr.stop(timeout=10)
        if informer is not None:
            informer.close()
        server.close()


def run(
    pods: int = 1000, changes_per_pod: float = 5, rate: float = 100.0, latency: float = 0.005
) -> dict[str, Any]:
    kubelet = run_mode(pods, changes_per_pod, False, rate=rate, latency=latency)
    fast = run_mode(pods, changes_per_pod, True, rate=rate, latency=latency)
    p99_ratio = kubelet["p99_ms"] / fast["p99_ms"] if fast["p99_ms"] else float("inf")
    return {
        "kubelet": kubelet,
        "fast": fast,
        "p99_ratio": p99_ratio,
        "met_requests": fast["requests_per_change"] <= 1.05,
        "met_latency": p99_ratio >= 10,
        "met_violations": kubelet["violations"] == 0 and fast["violations"] == 0,
    }


if __name__ == "__main__":
    import argparse
    import json

    parser = argparse.ArgumentParser()
    parser.add_argument("--pods", type=int, default=1000)
    parser.add_argument("--changes-per-pod", type=float, default=5)
    parser.add_argument("--rate", type=float, default=100.0)
    parser.add_argument("--mode", choices=["kubelet", "fast", "both"], default="both")
    args = parser.parse_args()
    with contextlib.suppress(KeyboardInterrupt):
        if args.mode == "both":
            print(json.dumps(run(args.pods, args.changes_per_pod, args.rate), indent=1))
        else:
            print(
                json.dumps(
                    run_mode(args.pods, args.changes_per_pod, args.mode == "fast", rate=args.rate), indent=1
                )
            )
