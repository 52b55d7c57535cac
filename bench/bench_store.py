"""store: one PATCH of pods/status in the embedded server's store, in process (no HTTP).

Set-up (not measured): a Store holding the fixture pod (tests/fixtures/pod-running.json).
Measured, alternately in the same run so a noisy neighbour slows all alike:

- ``patch``: ``Store.patch(..., subresource="status")`` of a strategic merge patch given as
  JSON bytes, as the HTTP front hands it over; each patch changes one container's
  ``restartCount`` (a new version every time: validation, typing, storing, a watch event).
- ``noop``: the same patch again (nothing changes: no new version).
- ``floor``: what a write of this pod cannot avoid, one ``Pod.from_json`` and one ``to_json``.

The ratios (patch / floor, noop / floor) say how many pod decodes a PATCH costs, which does
not depend on the machine; docs/design.md records them before and after "one decode per write".
The store is imported from the public ``podstatus.server``, so the same file measures an older
checkout (``PYTHONPATH=<checkout>/src python bench/bench_store.py``).
"""

from __future__ import annotations

import json
import sys
from typing import Any

try:
    from bench._common import Stats, fixture_bytes, fixture_dict, per_call
except ImportError:  # run as a script from bench/
    from _common import Stats, fixture_bytes, fixture_dict, per_call  # type: ignore[no-redef]


def run(repeats: int = 7, number: int = 400) -> dict[str, Any]:
    from podstatus.server import Store
    from podstatus.types import Pod

    base = fixture_dict()
    body = {k: v for k, v in base.items() if k != "status"}
    body["metadata"] = {k: v for k, v in base["metadata"].items() if k in ("name", "namespace", "labels")}
    store = Store(history_size=1000)
    ns = body["metadata"].get("namespace") or "default"
    store.ensure_namespace(ns)
    name = body["metadata"]["name"]
    store.create("pods", ns, body)
    status = dict(base["status"])
    status["qosClass"] = store.get("pods", ns, name).obj["status"]["qosClass"]
    store.patch("pods", ns, name, {"status": status}, subresource="status")
    container = status["containerStatuses"][0]["name"]
    counter = iter(range(1, 10**9))

    def patch() -> Any:
        n = next(counter)
        data = json.dumps(
            {"status": {"containerStatuses": [{"name": container, "restartCount": n}]}}
        ).encode()
        return store.patch("pods", ns, name, data, subresource="status")

    same = json.dumps({"status": {"containerStatuses": [{"name": container, "restartCount": 0}]}}).encode()
    store.patch("pods", ns, name, same, subresource="status")

    def noop() -> Any:
        return store.patch("pods", ns, name, same, subresource="status")

    raw = store.get("pods", ns, name).raw or fixture_bytes()

    def floor() -> Any:
        return Pod.from_json(raw).to_json()

    # Checked once, outside the timing: the patch writes, the no-op does not.
    before = store.resource_version
    patch()
    assert store.resource_version == before + 1
    store.patch("pods", ns, name, same, subresource="status")
    before = store.resource_version
    noop()
    assert store.resource_version == before

    samples: dict[str, list[float]] = {"patch": [], "noop": [], "floor": []}
    for _ in range(repeats):
        samples["patch"].append(per_call(patch, number))
        store.patch("pods", ns, name, same, subresource="status")
        samples["noop"].append(per_call(noop, number))
        samples["floor"].append(per_call(floor, number))
    stats = {k: Stats(v) for k, v in samples.items()}
    ratios = {
        key: Stats([p / f for p, f in zip(samples[key], samples["floor"], strict=True)]).as_dict()
        for key in ("patch", "noop")
    }
    return {
        "patch_us": stats["patch"].as_dict(1e6),
        "noop_us": stats["noop"].as_dict(1e6),
        "floor_us": stats["floor"].as_dict(1e6),
        "ratio_patch": ratios["patch"],
        "ratio_noop": ratios["noop"],
    }


def main() -> int:
    quick = "--quick" in sys.argv
    result = run(repeats=3 if quick else 7, number=50 if quick else 400)
    for key in ("patch_us", "noop_us", "floor_us"):
        d = result[key]
        print(f"{key:9} median {d['median']:8.1f} µs  ({d['min']:.1f}-{d['max']:.1f})")
    for key in ("ratio_patch", "ratio_noop"):
        d = result[key]
        print(f"{key:11} {d['median']:.2f}x one Pod decode+encode  ({d['min']:.2f}-{d['max']:.2f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
