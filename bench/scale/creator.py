"""The driver's pod creates, in a process of their own (``bench.scale.harness.create_pods``).

    python -m bench.scale.creator KUBECONFIG MANIFESTS.json WORKERS

In the harness's process the creating threads shared one interpreter lock with the
driver's watch, which decodes every status change the contender writes: the faster a
contender answered, the slower the driver created pods beside it (294 pods/s beside
podstatus, 566 beside KWOK, in the same run). Here nothing else runs.

Protocol on stdin/stdout, one JSON line each: the process says ``{"ready": true}`` once
its client is built, creates when it reads a line, then answers ``{"started": t0,
"finished": t1, "created": {name: t}, "failures": [...], "requests": {verb: n}}`` with
``time.monotonic()`` times (one clock for every process of the machine).
"""

from __future__ import annotations

import contextlib
import json
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from podstatus.errors import ApiError, NotFoundError


def main(argv: list[str]) -> int:
    from bench.scale.harness import kubeconfig_driver

    kubeconfig, manifests_path, workers = argv[0], argv[1], int(argv[2])
    manifests: list[dict[str, Any]] = json.loads(Path(manifests_path).read_text(encoding="utf-8"))
    driver = kubeconfig_driver(kubeconfig)
    created: dict[str, float] = {}
    failures: list[str] = []

    def create(manifest: dict[str, Any]) -> None:
        name = manifest["metadata"]["name"]
        try:
            driver.create_pod(manifest)
            created[name] = time.monotonic()
        except ApiError as err:
            failures.append(f"{name}: {err}")

    # One connection a worker, open before the clock (TLS handshakes are start-up, not creates).
    together = threading.Barrier(workers)

    def connect(_: int) -> None:
        together.wait(10)
        with contextlib.suppress(NotFoundError):
            driver.get_pod("default", "bench-scale-creator-connects")

    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(connect, range(workers)))
    print(json.dumps({"ready": True}), flush=True)
    if not sys.stdin.readline():
        return 1  # the harness went away
    started = time.monotonic()
    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(create, manifests))
    finished = time.monotonic()
    answer = {
        "started": started,
        "finished": finished,
        "created": created,
        "failures": failures,
        "requests": {verb: n for verb, n in driver.requests.snapshot().items() if n},
    }
    print(json.dumps(answer), flush=True)
    driver.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
