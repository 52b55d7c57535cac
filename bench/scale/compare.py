"""Before/after figures of ``bench.scale.harness`` for two checkouts of podstatus, run alternately.

Each checkout runs its own harness (``python -m bench.scale.harness`` with the checkout as the
working directory and ``PYTHONPATH=<checkout>/src``), so the ``podstatus node`` the harness
starts (``sys.executable -m podstatus.cli node``, inheriting that environment) runs that
checkout's code. Before any run, the same interpreter and environment are asked where
``podstatus`` comes from; a checkout whose import resolves elsewhere is refused.

The runs alternate (old, new, then new, old, ...) so that a machine growing busier or quieter
weighs on both sides alike. Each side's figures are the medians of its completed runs; the
table gives them and their ratio new/old (below 1 is better for times, CPU, memory and
requests; above 1 for the creation rate).

Usage (from the repository root)::

    python -m bench.scale.compare --old OLD_CHECKOUT --new . --runs 5 --write docs/scale.md

``--write`` adds the comparison to the page's section "Reshape (issue 23): before/after" (made at
the end of the page when missing); the entries already there are kept, the new one goes last.

Each checkout's ``.venv/bin/python`` is used when it exists (its dependencies may differ),
this interpreter otherwise; ``--old-python`` / ``--new-python`` override that.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import shlex
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

log = logging.getLogger("bench.scale.compare")

Result = Mapping[str, Any]  # one RunResult of the harness, as its .json twin holds it


@dataclass
class Checkout:
    label: str  # "old" or "new"
    root: Path
    python: str
    runs: list[Result] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)  # why a run gave no figures

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        # The checkout's src first: it wins over any editable install in the interpreter's venv.
        env["PYTHONPATH"] = os.pathsep.join([str(self.root / "src"), *filter(None, [env.get("PYTHONPATH")])])
        return env


def default_python(root: Path) -> str:
    venv = root / ".venv" / "bin" / "python"
    return str(venv) if venv.exists() else sys.executable


def podstatus_origin(checkout: Checkout) -> Path:
    """Where ``import podstatus`` resolves for ``checkout``'s interpreter and environment."""
    out = subprocess.run(
        [checkout.python, "-c", "import podstatus; print(podstatus.__file__)"],
        cwd=checkout.root,
        env=checkout.env(),
        capture_output=True,
        text=True,
        check=True,
    )
    return Path(out.stdout.strip()).resolve()


def check_origin(checkout: Checkout) -> None:
    origin = podstatus_origin(checkout)
    src = (checkout.root / "src").resolve()
    if not origin.is_relative_to(src):
        raise SystemExit(f"{checkout.label}: podstatus imports from {origin}, not from {src}")
    log.info("%s: podstatus from %s (python %s)", checkout.label, origin.parent, checkout.python)


def compile_bytecode(checkout: Checkout) -> None:
    # As `make bench-scale` does: without bytecode every process compiles its modules at start-up,
    # and that CPU would be counted as the contender's.
    subprocess.run([checkout.python, "-m", "compileall", "-q", "src"], cwd=checkout.root, check=True)


def harness_command(
    checkout: Checkout, size: str, hold: float, page: Path, extra: Sequence[str]
) -> list[str]:
    return [
        checkout.python,
        "-m",
        "bench.scale.harness",
        "--sizes",
        size,
        "--scheduled-sizes",
        "",
        "--contenders",
        "podstatus",
        "--hold",
        str(hold),
        "--write",
        str(page),
        "--workdir",
        str(page.with_suffix("")),
        *extra,
    ]


def run_harness(checkout: Checkout, size: str, hold: float, page: Path, extra: Sequence[str]) -> None:
    """One harness run in ``checkout``; its result (or why there is none) goes to ``checkout``."""
    cmd = harness_command(checkout, size, hold, page, extra)
    log.info("%s: %s", checkout.label, shlex.join(cmd))
    with open(page.with_suffix(".log"), "wb") as out:
        code = subprocess.run(
            cmd, cwd=checkout.root, env=checkout.env(), stdout=out, stderr=subprocess.STDOUT
        ).returncode
    twin = page.with_suffix(".json")
    if not twin.exists():
        checkout.failed.append(f"{page.name}: no results (exit {code}, see {page.with_suffix('.log')})")
        return
    for result in json.loads(twin.read_text(encoding="utf-8"))["results"]:
        if result.get("completed"):
            checkout.runs.append(result)
        else:
            checkout.failed.append(f"{page.name}: incomplete: {result.get('note', '')}")


def _events(r: Result) -> int:
    return sum(n for k, n in (r.get("requests_by_resource") or {}).items() if k.split(" ")[-1] == "events")


def _pod_requests_per_pod(r: Result) -> float | None:
    by_resource = r.get("requests_by_resource") or {}
    if not by_resource or not r.get("pods"):
        return None
    n = sum(
        count
        for key, count in by_resource.items()
        if key.split(" ")[-1].split("/")[0] == "pods" and not key.startswith("create ")
    )
    return float(n / r["pods"])


def _difference(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a - b


def _per_minute(r: Result) -> float | None:
    cpu, hold = r.get("hold_cpu_s"), r.get("hold_s")
    return None if cpu is None or not hold else float(cpu / hold * 60)


# (label, how to read it from one run, digits): the harness's columns, as numbers.
METRICS: list[tuple[str, Callable[[Result], float | None], int]] = [
    ("nodes up (s)", lambda r: r.get("nodes_up_s"), 1),
    ("create rate (pods/s)", lambda r: r.get("create_rate"), 0),
    ("create → all up (s)", lambda r: r.get("ready_s"), 1),
    ("per pod p50 (ms)", lambda r: r.get("pod_p50_ms"), 0),
    ("per pod p99 (ms)", lambda r: r.get("pod_p99_ms"), 0),
    ("delete → all gone (s)", lambda r: r.get("gone_s"), 1),
    ("contender CPU (s)", lambda r: r.get("cpu_s"), 1),
    ("of which start-up (s)", lambda r: r.get("start_cpu_s"), 2),
    ("after start-up (s)", lambda r: _difference(r.get("cpu_s"), r.get("start_cpu_s")), 1),
    ("CPU at rest (s/min)", _per_minute, 2),
    ("peak RSS (MiB)", lambda r: r["peak_rss"] / 2**20 if r.get("peak_rss") else None, 0),
    ("API requests", lambda r: sum((r.get("requests") or {}).values()) or None, 0),
    ("of which Events", lambda r: _events(r) if r.get("requests_by_resource") else None, 0),
    ("pod requests per pod", _pod_requests_per_pod, 2),
    ("apiserver CPU (s)", lambda r: (r.get("server_cpu") or {}).get("kube-apiserver"), 1),
    ("etcd CPU (s)", lambda r: (r.get("server_cpu") or {}).get("etcd"), 1),
    ("missed heartbeats", lambda r: r.get("not_ready_samples", 0) + r.get("stale_lease_samples", 0), 0),
    ("load at start", lambda r: r.get("load"), 1),
]


def median(values: Sequence[float | None]) -> float | None:
    present = [float(v) for v in values if v is not None]
    return statistics.median(present) if present else None


def _fmt(value: float | None, digits: int) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def _ratio(new: float | None, old: float | None) -> str:
    if new is None or old is None:
        return "—"
    if old == 0:
        return "=" if new == 0 else "—"
    return f"{new / old:.2f}"


def _cell(middle: float | None, values: Sequence[float | None], digits: int) -> str:
    return f"{_fmt(middle, digits)} ({', '.join(_fmt(v, digits) for v in values)})"


def comparison_table(old: Sequence[Result], new: Sequence[Result]) -> str:
    """Markdown: per metric, each side's median (its runs in brackets) and new/old."""
    lines = [
        f"| metric | old: median (runs, n={len(old)}) | new: median (runs, n={len(new)}) | new/old |",
        "|---|---|---|---|",
    ]
    for label, read, digits in METRICS:
        old_values, new_values = [read(r) for r in old], [read(r) for r in new]
        old_median, new_median = median(old_values), median(new_values)
        lines.append(
            f"| {label} | {_cell(old_median, old_values, digits)} | {_cell(new_median, new_values, digits)} "
            f"| {_ratio(new_median, old_median)} |"
        )
    return "\n".join(lines)


SECTION = "## Reshape (issue 23): before/after"
SECTION_INTRO = """
The same workload as above (`bench.scale.harness`, podstatus alone on a fresh kube-apiserver), for
two checkouts of podstatus in turn, written by `python -m bench.scale.compare` (`bench/scale/compare.py`):
each checkout runs its own harness with its own `src` first on `PYTHONPATH`, so the `podstatus node`
the harness starts runs that checkout's code (checked before the first run); the runs alternate
(old, new, then new, old, ...), and each side's figure is the median of its completed runs, with
every run's value in brackets. *new/old* below 1 is better for times, CPU, memory and requests,
above 1 for the creation rate. On this shared 2-core machine the wall-clock figures (create rate,
per pod, all up, all gone) move with the neighbours' load (*load at start*); CPU-seconds, memory and
request counts are the steadier measure of the code.
"""


def write_section(page: Path, entry: str) -> None:
    """Add ``entry`` at the end of the page's section :data:`SECTION`, made at the end when missing."""
    text = page.read_text(encoding="utf-8") if page.exists() else ""
    start = text.find(SECTION + "\n")
    if start < 0:
        text = text.rstrip("\n") + ("\n\n" if text else "") + SECTION + "\n" + SECTION_INTRO + "\n" + entry
    else:
        end = text.find("\n## ", start + len(SECTION))
        end = len(text) if end < 0 else end + 1
        text = (
            text[:start]
            + text[start:end].rstrip("\n")
            + "\n\n"
            + entry
            + ("\n" + text[end:] if end < len(text) else "")
        )
    page.write_text(text, encoding="utf-8")


def machine() -> str:
    load = " ".join(f"{x:.1f}" for x in os.getloadavg())
    return f"{os.cpu_count()} cores, {platform.python_implementation()} {platform.python_version()}, load average at start {load}"


def git_describe(root: Path) -> str:
    """The checkout's commit (short hash and subject), and whether its src differs from it."""

    def git(*args: str) -> str:
        out = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=False)
        return out.stdout.strip()

    subject = git("log", "-1", "--format=%h %s")
    if not subject:
        return "not a git checkout"
    short = subject if len(subject) <= 70 else subject[:69] + "…"
    return short + (" (with uncommitted changes in src)" if git("status", "--porcelain", "--", "src") else "")


def git_commit(root: Path) -> str:
    out = subprocess.run(
        ["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    )
    return out.stdout.strip() or "?"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", required=True, type=Path, help="the checkout before (a git worktree)")
    parser.add_argument("--new", required=True, type=Path, help="the checkout after")
    parser.add_argument("--old-python", default=None, help="default: the checkout's .venv/bin/python")
    parser.add_argument("--new-python", default=None, help="default: the checkout's .venv/bin/python")
    parser.add_argument("--runs", type=int, default=3, help="runs of each checkout (default 3)")
    parser.add_argument("--size", default="100x1000", help="NODESxPODS (default 100x1000)")
    parser.add_argument("--hold", type=float, default=30.0, help="--hold of the harness (default 30)")
    parser.add_argument("--workdir", type=Path, default=None, help="pages and logs of every run")
    parser.add_argument(
        "--write", type=Path, default=None, help="add the comparison to this page (docs/scale.md)"
    )
    parser.add_argument(
        "--new-args",
        default="",
        help="harness options for the new checkout only, one string (e.g. --new-args=--follow=0 when "
        "the new harness has a phase the old one lacks: both sides must measure the same workload)",
    )
    parser.add_argument("harness_args", nargs="*", help="more harness options, after --")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s", stream=sys.stderr)
    sides = [
        Checkout(label, root.resolve(), python or default_python(root.resolve()))
        for label, root, python in (("old", args.old, args.old_python), ("new", args.new, args.new_python))
    ]
    for checkout in sides:
        check_origin(checkout)
        compile_bytecode(checkout)
    started = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    at_start = machine()
    command = "python -m bench.scale.compare " + shlex.join(argv if argv is not None else sys.argv[1:])
    work = args.workdir or Path(tempfile.mkdtemp(prefix="podstatus-compare-"))
    work.mkdir(parents=True, exist_ok=True)
    for n in range(args.runs):
        # old, new; then new, old: a drifting machine load weighs on both sides alike.
        for checkout in sides if n % 2 == 0 else sides[::-1]:
            extra = [*args.harness_args, *(shlex.split(args.new_args) if checkout.label == "new" else [])]
            run_harness(checkout, args.size, args.hold, work / f"{checkout.label}-{n + 1}.md", extra)
    old, new = sides
    log.info("pages and logs of the runs: %s", work)
    lines = [f"### {started}: old {git_commit(old.root)} → new {git_commit(new.root)}", ""]
    lines += [f"`{command}` ({at_start}).", ""]
    for checkout in sides:
        lines.append(f"- {checkout.label}: {git_describe(checkout.root)}; {len(checkout.runs)} runs counted")
        lines += [f"  - not counted: {why}" for why in checkout.failed]
    lines += ["", comparison_table(old.runs, new.runs), ""]
    entry = "\n".join(lines)
    print(entry)
    if args.write:
        write_section(args.write, entry)
    return 0 if old.runs and new.runs and not old.failed and not new.failed else 1


if __name__ == "__main__":
    sys.exit(main())
