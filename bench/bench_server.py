"""server: the embedded API server's throughput, latency and CPU, from real clients on loopback.

``podstatus serve --no-tls --no-token`` runs in its own process, from a source tree given
(this checkout's ``src`` by default; ``--peer-src`` adds another checkout's, e.g. main's, so
two HTTP fronts are measured alternately in one run). Against each, in turn:

- ``get``: GET one pod (the realistic fixture pod, about 12 KB of JSON);
- ``patch``: PATCH pods/status (a strategic merge patch of the status message);
- ``list``: LIST a namespace of ``pods`` pods;

each from ``clients`` client processes at once, every one on its own keep-alive connection,
sending its requests back to back: throughput (requests/s over the phase's wall time), latency
p50/p99 of every request, and the server's CPU (``/proc/PID/stat``) per request. Then
``watch``: ``watchers`` watches of one pod, one status PATCH at a time, and the time from
sending the PATCH until each watch got its MODIFIED event (p50/p99 over watches and events;
the reading client is one thread, so a figure includes the client's own turn-around, the same
on both sides).

    .venv/bin/python bench/bench_server.py [--quick] [--peer-src OTHER_CHECKOUT/src]
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing
import os
import resource
import selectors
import socket
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

try:
    from bench._common import ROOT, fixture_dict
    from bench.connections import serve
except ImportError:  # run as a script from bench/
    from _common import ROOT, fixture_dict  # type: ignore[no-redef]
    from connections import serve  # type: ignore[no-redef]

NAMESPACE = "bench"
PATCH_TYPE = "application/strategic-merge-patch+json"
_TICK = os.sysconf("SC_CLK_TCK")


def _cpu_seconds(pid: int) -> float:
    # utime and stime, fields 14 and 15 of /proc/PID/stat (after the parenthesised name).
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK


def _pod(name: str) -> dict[str, Any]:
    pod = fixture_dict()
    meta = pod["metadata"]
    pod["metadata"] = {
        "name": name,
        "namespace": NAMESPACE,
        "labels": meta.get("labels", {}),
        "annotations": meta.get("annotations", {}),
    }
    pod.pop("status", None)
    return pod


def _request(conn: http.client.HTTPConnection, method: str, path: str, body: bytes | None = None,
             content_type: str = "application/json") -> bytes:  # fmt: skip
    headers = {"Content-Type": content_type} if body is not None else {}
    conn.request(method, path, body, headers)
    resp = conn.getresponse()
    data = resp.read()
    if resp.status >= 300:
        raise RuntimeError(f"{method} {path}: {resp.status} {data[:200]!r}")
    return data


def _setup(port: int, pods: int) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    _request(conn, "POST", "/api/v1/namespaces", json.dumps({"metadata": {"name": NAMESPACE}}).encode())
    for i in range(pods):
        body = json.dumps(_pod(f"p-{i:05d}")).encode()
        _request(conn, "POST", f"/api/v1/namespaces/{NAMESPACE}/pods", body)
    conn.close()


def _client(port: int, op: str, count: int, index: int, barrier: Any, results: Any) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    pod = f"/api/v1/namespaces/{NAMESPACE}/pods/p-{index:05d}"
    _request(conn, "GET", pod)  # the connection is open before the clock starts
    barrier.wait()
    times: list[float] = []
    for i in range(count):
        start = time.perf_counter()
        if op == "get":
            _request(conn, "GET", pod)
        elif op == "patch":
            body = b'{"status":{"message":"m%d-%d"}}' % (index, i)
            _request(conn, "PATCH", pod + "/status", body, PATCH_TYPE)
        else:
            _request(conn, "GET", f"/api/v1/namespaces/{NAMESPACE}/pods")
        times.append(time.perf_counter() - start)
    conn.close()
    results.put(times)


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


def _load(pid: int, port: int, op: str, count: int, clients: int) -> dict[str, float]:
    # Forked client processes (the barrier and queue are inherited): the clients' own CPU
    # is not the server's, and the GIL of one client process does not cap the load.
    ctx = multiprocessing.get_context("fork")
    barrier = ctx.Barrier(clients + 1)
    results = ctx.Queue()
    procs = [
        ctx.Process(target=_client, args=(port, op, count, i, barrier, results), daemon=True)
        for i in range(clients)
    ]
    for p in procs:
        p.start()
    barrier.wait(120)
    cpu0, start = _cpu_seconds(pid), time.perf_counter()
    per_client = [results.get(timeout=600) for _ in procs]
    wall, cpu = time.perf_counter() - start, _cpu_seconds(pid) - cpu0
    for p in procs:
        p.join(30)
    times = [t for ts in per_client for t in ts]
    return {
        "rps": len(times) / wall,
        "p50_ms": _pct(times, 0.5) * 1e3,
        "p99_ms": _pct(times, 0.99) * 1e3,
        "server_cpu_us": cpu / len(times) * 1e6,
    }


def _watch(pid: int, port: int, watchers: int, events: int) -> dict[str, float]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    name = "watched"
    _request(conn, "POST", f"/api/v1/namespaces/{NAMESPACE}/pods", json.dumps(_pod(name)).encode())
    listed = json.loads(_request(conn, "GET", f"/api/v1/namespaces/{NAMESPACE}/pods?limit=1"))
    rv = listed["metadata"]["resourceVersion"]
    request = (
        f"GET /api/v1/namespaces/{NAMESPACE}/pods?watch=1&resourceVersion={rv}"
        f"&fieldSelector=metadata.name%3D{name} HTTP/1.1\r\nHost: bench\r\n\r\n"
    ).encode()
    sel = selectors.DefaultSelector()
    socks: list[socket.socket] = []
    for _ in range(watchers):
        s = socket.create_connection(("127.0.0.1", port), timeout=30)
        s.sendall(request)
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ)
        socks.append(s)
    seen = dict.fromkeys(socks, 0)
    time.sleep(1.0)  # every watch is registered
    latencies: list[float] = []
    lost = 0
    cpu0 = _cpu_seconds(pid)
    for e in range(events):
        body = b'{"status":{"message":"event-%d"}}' % e
        start = time.perf_counter()
        _request(conn, "PATCH", f"/api/v1/namespaces/{NAMESPACE}/pods/{name}/status", body, PATCH_TYPE)
        waiting = set(socks)
        deadline = start + 30
        while waiting and time.perf_counter() < deadline:
            for key, _ in sel.select(timeout=1.0):
                s = key.fileobj
                assert isinstance(s, socket.socket)
                try:
                    chunk = s.recv(65536)
                except BlockingIOError:
                    continue
                seen[s] += chunk.count(b'"MODIFIED"')
                if s in waiting and seen[s] > e:
                    waiting.discard(s)
                    latencies.append(time.perf_counter() - start)
        lost += len(waiting)
    cpu = _cpu_seconds(pid) - cpu0
    for s in socks:
        sel.unregister(s)
        s.close()
    sel.close()
    conn.close()
    return {
        "p50_ms": _pct(latencies, 0.5) * 1e3,
        "p99_ms": _pct(latencies, 0.99) * 1e3,
        "max_ms": max(latencies) * 1e3,
        "lost": lost,
        "server_cpu_us": cpu / (events * watchers) * 1e6,
    }


def _one_server(src: str, sizes: dict[str, int]) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="podstatus-bench-") as state:
        proc, port = serve(src, state)
        try:
            _setup(port, sizes["pods"])
            clients = sizes["clients"]
            out: dict[str, Any] = {}
            for op in ("get", "patch", "list"):
                count = sizes["list_requests" if op == "list" else "requests"]
                _load(proc.pid, port, op, max(1, count // 10), clients)  # warm-up
                out[op] = _load(proc.pid, port, op, count, clients)
            out["watch"] = _watch(proc.pid, port, sizes["watchers"], sizes["events"])
            return out
        finally:
            proc.terminate()
            proc.wait(30)


def _median(runs: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for op in runs[0]:
        out[op] = {k: statistics.median(r[op][k] for r in runs) for k in runs[0][op]}
    return out


def run(
    requests: int = 2_000,
    list_requests: int = 40,
    pods: int = 1_000,
    clients: int = 2,
    watchers: int = 500,
    events: int = 10,
    repeats: int = 3,
    src: str | None = None,
    peer_src: str | None = None,
) -> dict[str, Any]:
    """Medians over ``repeats`` fresh servers; with ``peer_src``, that tree's server alternately."""
    sizes = {"requests": requests, "list_requests": list_requests, "pods": pods, "clients": clients,
             "watchers": watchers, "events": events}  # fmt: skip
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 2 * watchers + 256:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(2 * watchers + 256, hard), hard))
    peer_src = peer_src or os.environ.get("PODSTATUS_BENCH_PEER_SRC") or None
    trees = {"ours": src or str(ROOT / "src")}
    if peer_src:
        trees["peer"] = peer_src
    runs: dict[str, list[dict[str, Any]]] = {k: [] for k in trees}
    for _ in range(repeats):
        for key, tree in trees.items():
            runs[key].append(_one_server(tree, sizes))
    result: dict[str, Any] = {**sizes, "repeats": repeats, "trees": trees}
    for key in trees:
        result[key] = _median(runs[key])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--src", default=None, help="the podstatus source tree to serve (default: this one)")
    parser.add_argument("--peer-src", default=None, help="another source tree, measured alternately")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    sizes: dict[str, int] = (
        {"requests": 100, "list_requests": 4, "pods": 50, "watchers": 20, "events": 3, "repeats": 1}
        if args.quick
        else {}
    )
    print(json.dumps(run(src=args.src, peer_src=args.peer_src, **sizes), indent=1))


if __name__ == "__main__":
    main()
