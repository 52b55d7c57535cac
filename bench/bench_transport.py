"""transport: the client's CPU per short request, the lean transport against urllib3.

A node agent at scale spends its own CPU mostly on short requests: a status
PATCH, a DELETE, a Lease PUT. ``HttpKubeClient`` sends those over
``podstatus.clients.transport`` (one ``sendall``, one buffered reader); before,
it sent them through urllib3's connection pool. Both are measured here in one
process, alternating, against one ``podstatus serve`` (plain HTTP, its own
process so its CPU is not counted): the CPU seconds of the client process
(``time.process_time``) per status PATCH of a pod, the answer decoded as the
status manager decodes it. The peer is the same client with its lean pool
switched off, so every other part of the request (building the patch,
counting, decoding the pod) is the same on both sides.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from typing import Any

try:
    from bench._common import ROOT, Stats
except ImportError:  # run as a script from bench/
    from _common import ROOT, Stats  # type: ignore[no-redef]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_open(port: int, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def run(requests: int = 2_000, repeats: int = 5) -> dict[str, Any]:
    from podstatus.clients.http import HttpKubeClient

    port = _free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    server = subprocess.Popen(
        [sys.executable, "-m", "podstatus.cli", "serve", "--port", str(port), "--no-tls", "--no-token"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    try:
        _wait_open(port)
        url = f"http://127.0.0.1:{port}"
        setup = HttpKubeClient(url)
        setup.create_pod(
            {
                "metadata": {"name": "p"},
                "spec": {"nodeName": "n", "containers": [{"name": "c", "image": "i"}]},
            },
            "default",
        )
        lean = HttpKubeClient(url)
        pooled = HttpKubeClient(url)
        pooled._pools.lean = None
        bodies = [json.dumps({"status": {"message": f"m{i}"}}).encode() for i in range(requests)]

        def cpu_per_request(client: HttpKubeClient) -> float:
            start = time.process_time()
            for body in bodies:
                client.patch_pod_status("default", "p", body)
            return (time.process_time() - start) / requests

        cpu_per_request(lean), cpu_per_request(pooled)  # warm both
        ours: list[float] = []
        peer: list[float] = []
        for _ in range(repeats):
            ours.append(cpu_per_request(lean))
            peer.append(cpu_per_request(pooled))
        ratio = Stats([p / o for p, o in zip(peer, ours, strict=True)])
        o, p = Stats(ours), Stats(peer)
        return {
            "requests": requests,
            "repeats": repeats,
            "ours_us": o.as_dict(1e6),
            "peer_us": p.as_dict(1e6),
            "ratio": ratio.as_dict(),
            "target": 2.0,
            "met": ratio.median >= 2.0,
        }
    finally:
        server.terminate()
        server.wait(10)


if __name__ == "__main__":
    print(json.dumps(run(), indent=2))
