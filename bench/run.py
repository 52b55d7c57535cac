"""``make bench``: every benchmark in one run, one table, optionally written to docs/benchmarks.md.

    python bench/run.py [--quick] [--write docs/benchmarks.md] [--only types,setter,...]

Each benchmark lives in its own module (``bench/bench_*.py``) with a ``run(...)``
function taking its sizes and returning a dict; :data:`SIZES` holds the full
sizes and the tiny ``--quick`` ones (a smoke test can call
:func:`run_benchmark` with ``quick=True``). Machines are shared and noisy:
every figure that has a peer is a ratio to that peer measured in the same run,
medians over repeats, with the spread ``(max - min) / median``.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
for _p in (str(ROOT), str(ROOT / "src")):
    if _p not in sys.path:
        sys.path.insert(0, _p)

from bench import (  # noqa: E402
    bench_e2e,
    bench_memory,
    bench_resync,
    bench_server,
    bench_setter,
    bench_store,
    bench_transport,
    bench_types,
)
from bench._common import machine  # noqa: E402
from bench.scale.harness import RunResult, cpu_after_start, pod_requests_per_pod  # noqa: E402

NAMES = ("types", "setter", "memory", "resync", "transport", "server", "e2e", "scaling", "store")

# Sizes of every benchmark: the full run (make bench) and a smoke run (--quick).
SIZES: dict[str, dict[str, dict[str, Any]]] = {
    "full": {
        "types": {"repeats": 9, "target": 0.05},
        "setter": {"pods": 10_000, "calls": 20_000, "peer_calls": 600, "repeats": 5},
        "memory": {"pods": 100_000, "peer_pods": 2_000},
        "resync": {"pods": 100_000},
        "transport": {"requests": 2_000, "repeats": 5},
        "server": {
            "requests": 2_000,
            "list_requests": 40,
            "pods": 1_000,
            "watchers": 500,
            "events": 10,
            "repeats": 3,
        },
        "e2e": {"pods": 1_000, "changes_per_pod": 5, "rate": 100.0, "latency": 0.005},
        "scaling": {"pods": 10_000, "changes_per_pod": 0.2, "rate": 100.0, "latency": 0.005},
        "store": {"repeats": 7, "number": 400},
    },
    "quick": {
        "types": {"repeats": 3, "target": 0.002},
        "setter": {"pods": 100, "calls": 200, "peer_calls": 20, "repeats": 2},
        "memory": {"pods": 300, "peer_pods": 20},
        "resync": {"pods": 300},
        "transport": {"requests": 50, "repeats": 2},
        "server": {"requests": 50, "list_requests": 3, "pods": 30, "watchers": 10, "events": 2, "repeats": 1},
        "e2e": {"pods": 20, "changes_per_pod": 2, "rate": 400.0, "latency": 0.005},
        "scaling": {"pods": 60, "changes_per_pod": 0.5, "rate": 400.0, "latency": 0.005},
        "store": {"repeats": 3, "number": 50},
    },
}

RUNNERS: dict[str, Callable[..., dict[str, Any]]] = {
    "types": bench_types.run,
    "setter": bench_setter.run,
    "memory": bench_memory.run,
    "resync": bench_resync.run,
    "transport": bench_transport.run,
    "server": bench_server.run,
    "e2e": bench_e2e.run,
    "scaling": bench_e2e.run,
    "store": bench_store.run,
}


def run_benchmark(name: str, quick: bool = False) -> dict[str, Any]:
    """Run one benchmark at its full or quick size; returns its result dict (with ``seconds``)."""
    sizes = SIZES["quick" if quick else "full"][name]
    start = time.perf_counter()
    result = RUNNERS[name](**sizes)
    result["seconds"] = time.perf_counter() - start
    result["sizes"] = sizes
    return result


def run_all(
    names: tuple[str, ...] = NAMES, quick: bool = False, log: Callable[[str], None] = print
) -> dict[str, Any]:
    results: dict[str, Any] = {}
    for name in names:
        log(f"running {name}...")
        results[name] = run_benchmark(name, quick)
        log(f"  {name} took {results[name]['seconds']:.1f} s")
    return results


# --- the table ------------------------------------------------------------------------------

Row = tuple[str, str, str, str, str, str]


def _spread(d: dict[str, float]) -> str:
    return f"±{d['spread'] * 50:.0f}%"


def _us(d: dict[str, float]) -> str:
    return f"{d['median']:.0f} µs ({_spread(d)})"


def _ops(d: dict[str, float]) -> str:
    return f"{d['median']:,.0f}/s ({_spread(d)})"


def _x(d: dict[str, float]) -> str:
    return f"{d['median']:.1f}x ({d['min']:.1f}-{d['max']:.1f})"


def _met(ok: bool | None) -> str:
    return "—" if ok is None else ("yes" if ok else "NO")


def _kb(n: float) -> str:
    return f"{n / 1024:.1f} KB"


def rows(results: dict[str, Any]) -> list[Row]:
    out: list[Row] = []
    r = results.get("types")
    if r:
        out.append(
            (
                "types: decode + encode, from_json + to_json (fixture pod)",
                _us(r["ours_json_us"]),
                _us(r["peer_us"]),
                _x(r["ratio_json"]),
                "≥ 20x",
                _met(r["met"]),
            )
        )
        out.append(
            (
                "types: decode + to_dict (to_json, then decoded into fresh containers)",
                _us(r["ours_us"]),
                _us(r["peer_us"]),
                _x(r["ratio"]),
                "",
                "—",
            )
        )
        out.append(
            (
                "types: dict to dict, from_dict + to_dict (peer: deserialize + sanitize)",
                _us(r["ours_dict_us"]),
                _us(r["peer_dict_us"]),
                _x(r["ratio_dict"]),
                "≥ 20x",
                _met(r["met_dict"]),
            )
        )
        out.append(
            (
                "types: decode only",
                _us(r["ours_decode_us"]),
                _us(r["peer_decode_us"]),
                _x(r["ratio_decode"]),
                "",
                "—",
            )
        )
    r = results.get("setter")
    if r:
        out.append(
            (
                f"setter: one condition changed, parts shared ({r['pods']:,} pods, CPU time)",
                _ops(r["ours_ops"]),
                _ops(r["peer_ops"]),
                _x(r["ratio"]),
                "≥ 10x",
                _met(r["ratio"]["median"] >= 10),
            )
        )
        out.append(
            (
                "setter: one condition changed, status built afresh",
                _ops(r["ours_fresh_ops"]),
                _ops(r["peer_ops"]),
                _x(r["ratio_fresh"]),
                "≥ 10x",
                _met(r["ratio_fresh"]["median"] >= 10),
            )
        )
        out.append(
            (
                "setter: nothing changed, status built afresh",
                _ops(r["ours_fresh_unchanged_ops"]),
                _ops(r["peer_unchanged_ops"]),
                _x(r["ratio_fresh_unchanged"]),
                "",
                "—",
            )
        )
        out.append(
            (
                "setter: status unchanged",
                _ops(r["ours_unchanged_ops"]),
                _ops(r["peer_unchanged_ops"]),
                _x(r["ratio_unchanged"]),
                "cheaper than changed",
                _met(r["unchanged_cheaper"]) + f" ({r['unchanged_vs_changed']:.2f}x)",
            )
        )
    r = results.get("memory")
    if r:
        n = f"{r['pods']:,} pods"
        out.append(
            (
                f"memory: per cached status, decoded ({n}, RSS / tracemalloc)",
                f"{_kb(r['decoded_rss'])} / {_kb(r['decoded_traced'])}",
                f"{_kb(r['peer_bytes'])} (V1PodStatus, tracemalloc, {r['peer_pods']:,})",
                f"{r['ratio']:.1f}x",
                "< 4 KB",
                _met(max(r["decoded_rss"], r["decoded_traced"]) < 4096),
            )
        )
        out.append(
            (
                f"memory: per cached status, built with replace ({n}, RSS / tracemalloc)",
                f"{_kb(r['built_rss'])} / {_kb(r['built_traced'])}",
                "",
                "",
                "< 4 KB",
                _met(max(r["built_rss"], r["built_traced"]) < 4096),
            )
        )
        out.append(
            (
                f"memory: decoded, no timestamp shared between pods ({n}, RSS / tracemalloc)",
                f"{_kb(r['distinct_times_rss'])} / {_kb(r['distinct_times_traced'])}",
                "",
                "",
                "",
                "—",
            )
        )
    r = results.get("resync")
    if r:
        out.append(
            (
                f"resync: sync_batch(all) nothing changed ({r['pods']:,} pods)",
                f"{r['cpu_s']:.2f} s CPU, {r['requests']} requests",
                "",
                "",
                f"0 requests, < {r['target_s']:g} s",
                _met(r["met"]),
            )
        )
    r = results.get("transport")
    if r:
        out.append(
            (
                "transport: client CPU per status PATCH (lean keep-alive vs urllib3 pool)",
                _us(r["ours_us"]),
                _us(r["peer_us"]),
                _x(r["ratio"]),
                f"≥ {r['target']:g}x",
                _met(r["met"]),
            )
        )
    r = results.get("server")
    if r:
        out.extend(server_rows(r))
    for key, label in (("e2e", "e2e"), ("scaling", "scaling")):
        r = results.get(key)
        if not r:
            continue
        f, k = r["fast"], r["kubelet"]
        size = f"{f['pods']:,} pods × {f['changes_per_pod']:g}"
        out.append(
            (
                f"{label}: requests per change ({size})",
                f"{f['requests_per_change']:.3f}",
                f"{k['requests_per_change']:.3f} (kubelet)",
                f"{k['requests_per_change'] / f['requests_per_change']:.2f}x",
                "≤ 1.05" if key == "e2e" else "",
                _met(f["requests_per_change"] <= 1.05) if key == "e2e" else "—",
            )
        )
        out.append(
            (
                f"{label}: latency p50",
                f"{f['p50_ms']:.1f} ms",
                f"{k['p50_ms']:.0f} ms",
                f"{k['p50_ms'] / f['p50_ms']:.0f}x",
                "",
                "—",
            )
        )
        out.append(
            (
                f"{label}: latency p99",
                f"{f['p99_ms']:.1f} ms",
                f"{k['p99_ms']:.0f} ms",
                f"{r['p99_ratio']:.0f}x",
                "≥ 10x lower" if key == "e2e" else "",
                _met(r["met_latency"]) if key == "e2e" else "—",
            )
        )
        out.append(
            (
                f"{label}: wall time ({f['changes']:,} changes at {f['rate']:g}/s)",
                f"{f['wall_s']:.1f} s",
                f"{k['wall_s']:.1f} s",
                f"{k['wall_s'] / f['wall_s']:.2f}x",
                "",
                "—",
            )
        )
        out.append(
            (
                f"{label}: client CPU per change",
                f"{f['cpu_ms_per_change']:.2f} ms",
                f"{k['cpu_ms_per_change']:.2f} ms",
                "",
                "",
                "—",
            )
        )
        out.append(
            (
                f"{label}: warm-up, first status of every pod (no added latency)",
                f"{f['warmup_s']:.1f} s",
                f"{k['warmup_s']:.1f} s",
                "",
                "",
                "—",
            )
        )
        out.append(
            (
                f"{label}: invariant violations",
                str(f["violations"]),
                str(k["violations"]),
                "",
                "0 in both",
                _met(r["met_violations"]),
            )
        )
    e, s = results.get("e2e"), results.get("scaling")
    if e and s:
        n = s["fast"]["pods"] / e["fast"]["pods"]
        for mode in ("fast", "kubelet"):
            a, b = e[mode], s[mode]
            cpu = b["cpu_ms_per_change"] / a["cpu_ms_per_change"]
            req = b["requests_per_change"] / a["requests_per_change"]
            warm = (b["warmup_s"] / b["pods"]) / (a["warmup_s"] / a["pods"])
            out.append((
                f"scaling ×{n:g} pods, {mode}: per change CPU, requests; warm-up per pod",
                f"{cpu:.2f}x, {req:.2f}x; {warm:.2f}x",
                "", "", "≈ 1x (linear: ≤ 1.3x)", _met(cpu <= 1.3 and warm <= 1.3),
            ))  # fmt: skip
    r = results.get("store")
    if r:
        # "peer" is the floor of a write: one Pod decode + encode of the same pod.
        out.append((
            "store: PATCH pods/status in process (peer: one Pod decode + encode)",
            _us(r["patch_us"]), _us(r["floor_us"]), _x(r["ratio_patch"]), "", "—",
        ))  # fmt: skip
        out.append((
            "store: PATCH pods/status that changes nothing (peer: one Pod decode + encode)",
            _us(r["noop_us"]), _us(r["floor_us"]), _x(r["ratio_noop"]), "", "—",
        ))  # fmt: skip
    return out


def server_rows(r: dict[str, Any]) -> list[Row]:
    """The embedded server's rows; the peer is another source tree's server (PODSTATUS_BENCH_PEER_SRC)."""
    labels = {
        "get": "GET pod",
        "patch": "PATCH pods/status",
        "list": f"LIST {r['pods']:,} pods",
    }
    peer = r.get("peer")
    where = f"{r['clients']} keep-alive clients, {r['repeats']} servers" + (
        f"; peer: {r['trees']['peer']}" if peer else ""
    )
    out: list[Row] = []

    def cell(x: dict[str, float]) -> str:
        return (
            f"{x['rps']:,.0f}/s, p50 {x['p50_ms']:.2f} ms, p99 {x['p99_ms']:.2f} ms, "
            f"server CPU {x['server_cpu_us']:,.0f} µs/req"
        )

    for op, label in labels.items():
        ours = r["ours"][op]
        out.append((
            f"server: {label} ({where})",
            cell(ours),
            cell(peer[op]) if peer else "",
            f"{ours['rps'] / peer[op]['rps']:.2f}x" if peer else "",
            "", "—",
        ))  # fmt: skip

    def watch_cell(x: dict[str, float]) -> str:
        return (
            f"p50 {x['p50_ms']:.1f} ms, p99 {x['p99_ms']:.1f} ms, lost {x['lost']:.0f}, "
            f"server CPU {x['server_cpu_us']:,.0f} µs/delivery"
        )

    w = r["ours"]["watch"]
    out.append((
        f"server: watch event delivery, PATCH to each of {r['watchers']:,} watches ({r['events']} events)",
        watch_cell(w),
        watch_cell(peer["watch"]) if peer else "",
        f"{peer['watch']['p99_ms'] / w['p99_ms']:.2f}x (p99)" if peer else "",
        "0 lost", _met(w["lost"] == 0),
    ))  # fmt: skip
    return out


HEADER = ("benchmark", "ours", "peer", "ratio", "target", "met?")


def machine_line(m: dict[str, Any]) -> str:
    v = m["versions"]
    return (
        f"{m['cores']} cores ({m['processor']}), {m['implementation']} {m['python']}, {m['platform']}; "
        f"load average at start {m['load'][0]:.2f}; podstatus {v['podstatus']}, msgspec {v['msgspec']}, "
        f"kubernetes {v['kubernetes']}, pydantic {v['pydantic']}, urllib3 {v['urllib3']}"
    )


def print_table(results: dict[str, Any], m: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="podstatus benchmarks", caption=machine_line(m))
    for h in HEADER:
        table.add_column(h, overflow="fold")
    for row in rows(results):
        style = "red" if row[5].startswith("NO") else None
        table.add_row(*row, style=style)
    Console(width=200).print(table)


def _details(results: dict[str, Any]) -> str:
    lines = []
    for name in ("e2e", "scaling"):
        r = results.get(name)
        if not r:
            continue
        lines.append(f"\n{name}:\n")
        lines.append(
            "| mode | pods | changes | requests | req/change | p50 ms | p99 ms | max ms | wall s | client CPU ms/change | server CPU ms/change | warm-up s | violations |"
        )
        lines.append(
            "| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
        )
        for mode in ("kubelet", "fast"):
            x = r[mode]
            req = ", ".join(f"{k} {v}" for k, v in x["requests"].items())
            lines.append(
                f"| {mode} | {x['pods']:,} | {x['changes']:,} | {req} | {x['requests_per_change']:.3f} | {x['p50_ms']:.1f} | "
                f"{x['p99_ms']:.1f} | {x['max_ms']:.1f} | {x['wall_s']:.1f} | {x['cpu_ms_per_change']:.2f} | "
                f"{x['server_cpu_ms_per_change']:.2f} | {x['warmup_s']:.1f} | {x['violations']} |"
            )
    r = results.get("resync")
    if r:
        lines.append(
            f"\nresync set-up: the first sync_batch(all=True) over {r['pods']:,} pods took {r['first_cpu_s']:.1f} s CPU "
            f"and sent {r['first_requests']}; the measured second one chose {r['chosen']} pods, "
            f"{r['cpu_s']:.2f} s CPU ({r['wall_s']:.2f} s wall), {r['requests']} requests."
        )
    return "\n".join(lines)


def markdown(
    results: dict[str, Any], m: dict[str, Any], command: str, elapsed: float, date: str | None = None
) -> str:
    out = [
        "# Benchmarks",
        "",
        "Generated by `make bench` (do not edit by hand: the profiling notes at the end come from",
        "`bench/FINDINGS.md`).",
        "",
        f"- command: `{command}`",
        f"- date: {date or _now()}, whole run {elapsed:.0f} s",
        f"- machine: {machine_line(m)}",
        "",
        "Ratios are to a peer measured in the same run (alternating within each repeat);",
        "figures are medians over repeats, ± is half the spread (max - min) / median.",
        "",
        "| " + " | ".join(HEADER) + " |",
        "| --- | ---: | ---: | ---: | --- | --- |",
    ]
    for row in rows(results):
        out.append("| " + " | ".join(c.replace("|", "\\|") for c in row) + " |")
    out.append(_details(results))
    out.extend(scale_summary(ROOT / "docs" / "scale.json"))
    findings = ROOT / "bench" / "FINDINGS.md"
    if findings.exists():
        out.append("")
        out.append(findings.read_text().rstrip())
    return "\n".join(out) + "\n"


def scale_summary(path: Path) -> list[str]:
    """The ratio rows of the scale benchmark (``make bench-scale``), from its JSON twin of docs/scale.md."""
    if not path.exists():
        return []
    data = json.loads(path.read_text())
    runs: dict[tuple[int, int, bool, str], dict[str, dict[str, Any]]] = {}
    for r in data.get("results", []):
        key = (r["nodes"], r["pods"], bool(r.get("scheduled")), r.get("server", ""))
        runs.setdefault(key, {})[r["contender"]] = r

    def total(r: dict[str, Any]) -> int:
        return sum(r.get("requests", {}).values())

    def per_pod(r: dict[str, Any]) -> float | None:
        return pod_requests_per_pod(RunResult(**r))

    def ratio(a: float | None, b: float | None) -> str:
        return f"{a / b:.2f}×" if a is not None and b else "—"

    def after_start(r: dict[str, Any]) -> float | None:
        return cpu_after_start(RunResult(**r))

    def cpu_ratio(ps: dict[str, Any], kw: dict[str, Any]) -> str:
        total_ratio = ratio(ps.get("cpu_s"), kw.get("cpu_s"))
        if after_start(ps) is None or after_start(kw) is None:
            return total_ratio
        return f"{total_ratio} (after start-up {ratio(after_start(ps), after_start(kw))})"

    def missed(r: dict[str, Any]) -> str:
        bad = r.get("not_ready_samples", 0) + r.get("stale_lease_samples", 0)
        return f"{bad} of {r.get('heartbeat_samples', 0) * r['nodes']:,}"

    out = [
        "",
        "## Scale against KWOK (`make bench-scale`; every figure and the commands in docs/scale.md)",
        "",
        "Same workload and driver, a fresh kube-apiserver per contender, one after the other (docs/scale.md lists",
        "each run's command, start time and machine load); ratios are podstatus / KWOK (below 1: podstatus is",
        "faster, lighter, or sends fewer requests). Rows on `podstatus serve` are podstatus alone on the embedded",
        "server (KWOK needs a kube-apiserver).",
        "",
        "| size | all Running+Ready (s) podstatus / KWOK | ratio | CPU (s) ratio | peak RSS ratio | requests ratio | "
        "pod requests per pod, ratio | create rate (pods/s) | missed heartbeats (podstatus) |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for (nodes, pods, scheduled, server), by in sorted(runs.items()):
        ps, kw = by.get("podstatus"), by.get("kwok")
        if ps is None:
            continue
        size = (
            f"{nodes:,} × {pods:,}"
            + (" via kube-scheduler" if scheduled else "")
            + (f" on {server}" if server else "")
        )
        # A run can reach all-up and still stop short later (the delete phase): the up time stands.
        ready_s = ps.get("ready_s")
        up = f"{ready_s:.1f}" if ready_s is not None else "not all up"
        if ready_s is not None and not ps.get("completed", False):
            size += " (delete phase not finished)"
        if kw is not None and kw.get("ready_s") is None:
            # KWOK never got every pod up: there is no like-for-like figure to divide by.
            row = [size, f"{up} / not all up", "—", "—", "—", "—", "—"]
        elif kw is not None:
            up += f" / {kw['ready_s']:.1f}"
            row = [
                size,
                up,
                ratio(ps.get("ready_s"), kw.get("ready_s")),
                cpu_ratio(ps, kw),
                ratio(ps.get("peak_rss"), kw.get("peak_rss")),
                ratio(total(ps), total(kw)),
                ratio(per_pod(ps), per_pod(kw)),
            ]
        else:
            rss = ps.get("peak_rss")
            row = [
                size,
                up,
                "—",
                f"{ps.get('cpu_s') or 0:.0f} s",
                f"{(rss or 0) / 2**20:,.0f} MiB",
                f"{total(ps):,}",
                f"{p:.2f}" if (p := per_pod(ps)) is not None else "—",
            ]
        row += [f"{ps.get('create_rate') or 0:.0f}", missed(ps)]
        out.append("| " + " | ".join(row) + " |")
    if (path.parent / "scale-profile.md").exists():
        out += [
            "",
            "Where `podstatus node` spends its CPU at these sizes: docs/scale-profile.md (`make bench-profile`:",
            "one run under py-spy, every sample charged to the podstatus function it was in or under).",
        ]
    return out


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="tiny sizes (a smoke test)")
    parser.add_argument("--write", metavar="PATH", help="write the results as markdown to PATH")
    parser.add_argument("--only", default="", help=f"comma-separated subset of {','.join(NAMES)}")
    parser.add_argument("--json", metavar="PATH", help="also save the raw results (with the machine) as JSON")
    parser.add_argument(
        "--render", metavar="PATH", help="do not run: print (and --write) results saved by --json"
    )
    args = parser.parse_args(argv)
    if args.render:
        saved = json.loads(Path(args.render).read_text())
        print_table(saved["results"], saved["machine"])
        if args.write:
            Path(args.write).write_text(
                markdown(
                    saved["results"],
                    saved["machine"],
                    saved["command"],
                    saved["elapsed"],
                    saved.get("date")
                    or datetime.fromtimestamp(Path(args.render).stat().st_mtime, UTC).strftime(
                        "%Y-%m-%d %H:%M UTC"
                    ),
                )
            )
            print(f"wrote {args.write}")
        return 0
    names = tuple(n for n in args.only.split(",") if n) or NAMES
    unknown = set(names) - set(NAMES)
    if unknown:
        parser.error(f"unknown benchmarks: {', '.join(sorted(unknown))}")
    m = machine()
    start = time.perf_counter()
    results = run_all(names, quick=args.quick)
    elapsed = time.perf_counter() - start
    print_table(results, m)
    print(f"whole run: {elapsed:.0f} s")
    shown = list(argv if argv is not None else sys.argv[1:])
    if "--json" in shown:  # where the raw results went is not part of the command
        k = shown.index("--json")
        del shown[k : k + 2]
    command = "python bench/run.py " + " ".join(shlex.quote(a) for a in shown)
    if args.json:
        saved = {
            "results": results,
            "machine": m,
            "command": command.strip(),
            "elapsed": elapsed,
            "date": _now(),
        }
        Path(args.json).write_text(json.dumps(saved, indent=1, default=str))
    if args.write:
        path = Path(args.write)
        if not path.is_absolute():
            path = Path.cwd() / path
        path.write_text(markdown(results, m, command.strip(), elapsed))
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
