"""The kubelet API's CPU at rest, measured side by side: two ``podstatus node --nodes N`` at once.

    python -m bench.scale.paired --nodes 1000 --pods 10000 --windows 6 --window 30

On a shared machine, runs one after the other see different neighbours (docs/scale.md's
*load at start*), and the kubelet API's cost at rest is smaller than that noise. Here both
processes run at the same time on one fresh kube-apiserver (``tests/apiserver/start``), one
with the API on every node (``--kubelet-port``) and one without (``--kubelet-port 0``), each
with N nodes and M/2 pods (bound round-robin to its own nodes, the simulated provider with no
waits, as the harness). Once every pod is up, the CPU of both is read over the same windows:
whatever the machine does meanwhile, it does to both. Prints each window and the median ratio.
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .harness import (
    NAMESPACE,
    ROOT,
    PodCreator,
    RealApiServer,
    free_port_range,
    pod_manifest,
    proc_cpu_seconds,
    proc_peak_rss,
)

log = logging.getLogger("bench.scale")

PREFIXES = {"on": "api", "off": "noapi"}


def start_node(
    kubeconfig: str, prefix: str, nodes: int, api: bool, ca: Path, workdir: Path
) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "podstatus.cli", "node", "--kubeconfig", kubeconfig, "--nodes", str(nodes)]
    cmd += ["--name", prefix, "--events", "warning", "--provider", "bench.scale.provider:InstantProvider"]
    cmd += (
        ["--kubelet-port", str(free_port_range(nodes)), "--kubelet-client-ca", str(ca)]
        if api
        else ["--kubelet-port", "0"]
    )
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([*filter(None, [env.get("PYTHONPATH")]), str(ROOT)])
    with open(workdir / f"{prefix}.log", "wb") as out:
        return subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)


@dataclass
class Window:
    load: float  # the machine's 1-minute load average as the window began
    on: float  # CPU-seconds of the process with the kubelet API over the window
    off: float  # ... and of the one without

    @property
    def ratio(self) -> float:
        return self.on / self.off if self.off else float("nan")


@dataclass
class Paired:
    nodes: int
    pods: int
    seconds: float  # per window
    windows: list[Window] = field(default_factory=list)
    peak_rss_mib: dict[str, float] = field(default_factory=dict)

    @property
    def median_ratio(self) -> float:
        return statistics.median(w.ratio for w in self.windows)


def measure(server: Any, nodes: int, pods: int, windows: int, seconds: float, workdir: Path) -> Paired:
    """Both node processes on ``server`` (a fresh API server of the harness), pods up, then the windows."""
    ca = getattr(server, "kubelet_client_ca", None)
    if ca is None:
        raise RuntimeError("the API server has no kubelet client CA: the nodes could not trust it")
    procs: dict[str, subprocess.Popen[bytes]] = {}
    try:
        for mode, prefix in PREFIXES.items():
            procs[mode] = start_node(server.kubeconfig, prefix, nodes, mode == "on", ca, workdir)
        names = [f"{prefix}-{i}" for prefix in PREFIXES.values() for i in range(1, nodes + 1)]
        driver = server.driver()
        deadline = time.monotonic() + 120 + nodes * 0.2
        while True:
            listed, _ = driver.list_nodes()
            ready = {
                n["metadata"]["name"]
                for n in listed
                if any(
                    c.get("type") == "Ready" and c.get("status") == "True"
                    for c in (n.get("status") or {}).get("conditions") or ()
                )
            }
            if ready >= set(names):
                break
            if time.monotonic() > deadline or any(p.poll() is not None for p in procs.values()):
                raise RuntimeError(f"only {len(ready)}/{len(names)} nodes Ready (logs in {workdir})")
            time.sleep(0.5)
        # Pod i on node i % (2N): the two processes get every other pod, the same mix of kinds.
        manifests = [pod_manifest(i, names[i % len(names)]) for i in range(pods)]
        with PodCreator(server.kubeconfig, manifests, 8, workdir) as creator:
            creates = creator.run(600)
        if creates.failures:
            raise RuntimeError(f"{len(creates.failures)} creates failed, e.g. {creates.failures[0]}")
        deadline = time.monotonic() + 600
        while True:
            listed_pods, _ = driver.list_pods(NAMESPACE)
            up = sum(1 for p in listed_pods if p.status.phase in ("Running", "Succeeded"))
            if up >= pods:
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"only {up}/{pods} pods up")
            time.sleep(0.5)
        driver.close()
        time.sleep(seconds)  # the last status writes settle
        result = Paired(nodes, pods, seconds)
        for w in range(windows):
            before = {m: proc_cpu_seconds(p.pid) for m, p in procs.items()}
            load = os.getloadavg()[0]
            time.sleep(seconds)
            used = {m: proc_cpu_seconds(p.pid) - before[m] for m, p in procs.items()}
            result.windows.append(Window(load, used["on"], used["off"]))
            log.info("window %d: load %.1f, on %.2f s, off %.2f s", w + 1, load, used["on"], used["off"])
        result.peak_rss_mib = {m: proc_peak_rss(p.pid) / 2**20 for m, p in procs.items()}
        return result
    finally:
        for p in procs.values():
            p.terminate()
        for p in procs.values():
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(5)


def render(result: Paired) -> str:
    """The windows as a markdown table, then the median ratio and the peak RSS of both."""
    per_min = 60 / result.seconds
    lines = [
        f"{result.nodes} nodes and {result.pods // 2} pods per process, "
        f"{len(result.windows)} windows of {result.seconds:.0f} s",
        "",
        "| window | load | kubelet API on (s/min) | off (s/min) | on / off |",
        "|---|---|---|---|---|",
    ]
    for i, w in enumerate(result.windows, 1):
        lines.append(f"| {i} | {w.load:.1f} | {w.on * per_min:.2f} | {w.off * per_min:.2f} | {w.ratio:.3f} |")
    median = result.median_ratio
    rss = result.peak_rss_mib
    lines += [
        "",
        f"median on / off: {median:.3f} ({100 * (median - 1):+.1f} %); "
        f"peak RSS on {rss.get('on', 0):.0f} MiB, off {rss.get('off', 0):.0f} MiB",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000, help="nodes of each process")
    parser.add_argument("--pods", type=int, default=10000, help="pods in all, half on each process's nodes")
    parser.add_argument("--windows", type=int, default=6)
    parser.add_argument("--window", type=float, default=30.0, help="seconds per window")
    parser.add_argument("--workdir", default=None)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s", stream=sys.stderr)
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="podstatus-paired-"))
    workdir.mkdir(parents=True, exist_ok=True)
    server = RealApiServer(workdir / "apiserver")
    try:
        result = measure(server, args.nodes, args.pods, args.windows, args.window, workdir)
    finally:
        server.stop()
    print(render(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
