"""The kubelet API's cost at N nodes in one process: one port per node vs one loopback address per node.

``python bench/kubelet_api_sites.py [N]``: binds N HTTPS sockets both ways in one aiohttp
application (as :class:`podstatus.node.kubeletapi.KubeletAPIServer` does), and prints the
time to bind, the resident memory added, open descriptors, and CPU used while idle for 5 s.
Figures go to docs/design.md ("The kubelet API").
"""

from __future__ import annotations

import asyncio
import os
import resource
import socket
import sys
import time

from aiohttp import web

from podstatus.tls import generate_tls, server_context


def rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def free_base(count: int) -> int:
    base = 20000
    while True:
        try:
            for i in range(count):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", base + i))
            return base
        except OSError:
            base += count


async def measure(n: int, per_address: bool) -> dict[str, float]:
    context = server_context(generate_tls(["127.0.0.1"]))
    runner = web.AppRunner(web.Application(), handle_signals=False)
    await runner.setup()
    before_rss, before_fds = rss_mib(), len(os.listdir("/proc/self/fd"))
    start = time.perf_counter()
    port = free_base(1 if per_address else n)
    for i in range(n):
        host = f"127.1.{i // 254}.{i % 254 + 1}" if per_address else "127.0.0.1"
        site = web.TCPSite(runner, host, port if per_address else port + i, ssl_context=context)
        await site.start()
    bind = time.perf_counter() - start
    cpu0 = resource.getrusage(resource.RUSAGE_SELF)
    await asyncio.sleep(5)
    cpu1 = resource.getrusage(resource.RUSAGE_SELF)
    out = {
        "bind_s": bind,
        "rss_mib": rss_mib() - before_rss,
        "fds": len(os.listdir("/proc/self/fd")) - before_fds,
        "idle_cpu_ms_per_s": 1000 * ((cpu1.ru_utime + cpu1.ru_stime) - (cpu0.ru_utime + cpu0.ru_stime)) / 5,
    }
    await runner.cleanup()
    return out


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, n + 1024)), hard))
    for per_address in (False, True):
        got = asyncio.run(measure(n, per_address))
        kind = "one loopback address per node" if per_address else "one port per node"
        print(f"{n} nodes, {kind}: " + ", ".join(f"{k}={v:.3g}" for k, v in got.items()))


if __name__ == "__main__":
    main()
