"""Connections held by `podstatus serve`: many watches, slowloris clients, and a bystander's GETs.

Starts `podstatus serve --no-token --no-tls` from the source tree given (``--src``: this
checkout's ``src`` by default, or another checkout's to compare), then, in turn:

- ``watches``: opens N watch connections, idles a few seconds, creates a pod, and counts
  the watches that got its ADDED event (the rest were cut);
- ``slowloris``: opens M connections that send a request's first line and then one header
  byte every few seconds, never finishing; after ``--hold`` seconds counts how many the
  server still holds.

For each it reports the server's thread count (``/proc/PID/status``) and the p50/p99 of a
bystander's GET ``/api/v1/namespaces/default/pods`` (one keep-alive connection, sequential)
while the load is there. Loopback only. Figures in docs/reliability.md.

    .venv/bin/python bench/connections.py                       # this tree
    .venv/bin/python bench/connections.py --src /other/checkout/src
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import resource
import selectors
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "bench", "namespace": "default"},
    "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "busybox"}]},
}


def _threads(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Threads:"):
            return int(line.split()[1])
    return -1


def _bystander(port: int, count: int) -> tuple[float, float, int]:
    """p50 and p99 ms of ``count`` sequential GETs, and how many failed."""
    times: list[float] = []
    failed = 0
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    for _ in range(count):
        start = time.perf_counter()
        try:
            conn.request("GET", "/api/v1/namespaces/default/pods")
            resp = conn.getresponse()
            resp.read()
            if resp.status != 200:
                failed += 1
        except OSError:
            failed += 1
            conn.close()
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            continue
        times.append((time.perf_counter() - start) * 1000)
    conn.close()
    if not times:
        return float("nan"), float("nan"), failed
    times.sort()
    return statistics.median(times), times[min(len(times) - 1, int(len(times) * 0.99))], failed


def serve(src: str, state: str) -> tuple[subprocess.Popen[bytes], int]:
    kubeconfig = Path(state) / "kubeconfig"
    env = {**os.environ, "PYTHONPATH": src, "XDG_STATE_HOME": state}
    proc = subprocess.Popen(
        [sys.executable, "-m", "podstatus.cli", "serve", "--port", "0", "--no-token", "--no-tls",
         "--kubeconfig", str(kubeconfig)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while not kubeconfig.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError(f"podstatus serve from {src} did not start")
        time.sleep(0.05)
    url = json.loads(kubeconfig.read_text())["clusters"][0]["cluster"]["server"]
    return proc, int(url.rsplit(":", 1)[1])


def watches(proc: subprocess.Popen[bytes], port: int, n: int) -> dict[str, object]:
    sel = selectors.DefaultSelector()
    socks: list[socket.socket] = []
    got: dict[socket.socket, bytes] = {}
    request = b"GET /api/v1/namespaces/default/pods?watch=1 HTTP/1.1\r\nHost: x\r\n\r\n"
    opened = 0
    for _ in range(n):
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=10)
            s.sendall(request)
        except OSError:
            continue
        opened += 1
        s.setblocking(False)
        socks.append(s)
        got[s] = b""
        sel.register(s, selectors.EVENT_READ)
    time.sleep(3.0)  # idle: the server checks each watch's client on the way
    threads = _threads(proc.pid)
    p50, p99, failed = _bystander(port, 200)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request(
        "POST", "/api/v1/namespaces/default/pods", json.dumps(POD), {"Content-Type": "application/json"}
    )
    conn.getresponse().read()
    conn.close()
    deadline = time.monotonic() + 20
    waiting = set(socks)
    while waiting and time.monotonic() < deadline:
        for key, _ in sel.select(timeout=1.0):
            s = key.fileobj
            assert isinstance(s, socket.socket)
            try:
                chunk = s.recv(65536)
            except (BlockingIOError, ConnectionResetError):
                chunk = b"" if s in waiting else b"x"
            if not chunk:
                sel.unregister(s)
                waiting.discard(s)
                continue
            got[s] += chunk
            if b'"name":"bench"' in got[s]:
                waiting.discard(s)
    held = sum(1 for data in got.values() if b'"name":"bench"' in data)
    for s in socks:
        s.close()
    sel.close()
    return {"watches opened": opened, "got the event": held, "server threads": threads,
            "bystander p50 ms": round(p50, 1), "bystander p99 ms": round(p99, 1), "bystander failures": failed}  # fmt: skip


def slowloris(proc: subprocess.Popen[bytes], port: int, m: int, hold: float) -> dict[str, object]:
    socks: list[socket.socket] = []
    for _ in range(m):
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=10)
            s.sendall(b"GET /api/v1/pods HTTP/1.1\r\nHost: x\r\nX-Slow: ")
            s.setblocking(False)
            socks.append(s)
        except OSError:
            continue
    time.sleep(1.0)
    threads_at_start = _threads(proc.pid)
    during = _bystander(port, 200)
    start = time.monotonic()
    alive = set(socks)
    while time.monotonic() - start < hold:
        for s in list(alive):
            try:
                s.send(b"X")
                if s.recv(1) == b"":
                    alive.discard(s)
            except BlockingIOError:
                pass
            except OSError:
                alive.discard(s)
        time.sleep(5.0)
    threads_after = _threads(proc.pid)
    p50, p99, failed = _bystander(port, 200)
    for s in socks:
        s.close()
    return {"slowloris opened": len(socks), f"still held after {hold:.0f} s": len(alive),
            "server threads at start": threads_at_start, f"server threads after {hold:.0f} s": threads_after,
            "bystander p50/p99 ms while held": [round(during[0], 1), round(during[1], 1)],
            f"bystander p50/p99 ms after {hold:.0f} s": [round(p50, 1), round(p99, 1)],
            "bystander failures": failed + during[2]}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--src", default=str(ROOT / "src"), help="the source tree of podstatus to run")
    parser.add_argument("--watches", type=int, default=1100)
    parser.add_argument("--slowloris", type=int, default=600)
    parser.add_argument(
        "--hold", type=float, default=40.0, help="seconds the slowloris clients keep trickling"
    )
    args = parser.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = 2 * (args.watches + args.slowloris) + 512
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(want, hard), hard))  # the server inherits it
    with tempfile.TemporaryDirectory(prefix="podstatus-bench-") as state:
        proc, port = serve(args.src, state)
        try:
            idle = _threads(proc.pid)
            p50, p99, _ = _bystander(port, 200)
            print(json.dumps({"src": args.src, "idle server threads": idle, "idle bystander p50 ms": round(p50, 1),
                              "idle bystander p99 ms": round(p99, 1)}))  # fmt: skip
            print(json.dumps(watches(proc, port, args.watches)))
            time.sleep(2.0)
            print(json.dumps(slowloris(proc, port, args.slowloris, args.hold)))
        finally:
            proc.terminate()
            proc.wait(timeout=30)


if __name__ == "__main__":
    main()
