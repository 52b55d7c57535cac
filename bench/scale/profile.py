"""Where `podstatus node` spends its CPU in the scale workload: one run under py-spy.

    python -m bench.scale.profile --size 1000x10000 --write docs/scale-profile.md

Runs the workload of ``bench.scale.harness`` once, podstatus only, on a fresh
kube-apiserver of ``tests/apiserver/``, with ``py-spy record --gil --nonblocking``
attached to the node process from its start (sampling from outside: the process is
never paused, and every thread is seen). ``--gil`` keeps the samples of the thread
holding the GIL, that is, the Python work; time in C with the GIL released (TLS,
``send``) is not sampled, and the page says how the samples compare to the process's
CPU-seconds.

Each sample is charged to the innermost podstatus frame of its stack (a sample in
``ssl`` under ``transport.ConnectionPool._exchange`` counts for ``_exchange``), so the
tables say which part of podstatus costs what, library calls below it included.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.scale.harness import (
    COLUMNS,
    PodstatusContender,
    RealApiServer,
    RunResult,
    git_commit,
    machine,
    markdown_table,
    parse_sizes,
    row,
    run_once,
)

log = logging.getLogger("bench.scale")

RATE = 250  # samples a second
OWN = "podstatus/"  # frames of this project's source (src/podstatus/...)


def py_spy() -> str:
    """The py-spy next to this interpreter (the dev extra installs it), else on PATH."""
    here = Path(sys.executable).with_name("py-spy")
    found = str(here) if here.exists() else shutil.which("py-spy")
    if not found:
        raise RuntimeError("py-spy is not installed (pip install -e '.[dev]')")
    return found


class ProfiledPodstatus(PodstatusContender):
    """``podstatus node`` with py-spy attached from the first moment, or (``at_rest``) only
    while every pod is up and nothing changes (the harness's ``--hold``)."""

    def __init__(self, output: Path, *, at_rest: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.output = output
        self.at_rest = at_rest
        self.spy: subprocess.Popen[bytes] | None = None
        self.workdir: Path | None = None

    def _attach(self, pid: int, duration: float | None = None) -> None:
        cmd = [py_spy(), "record", "--pid", str(pid), "--rate", str(RATE), "--gil", "--nonblocking"]
        cmd += ["--format", "raw", "--output", str(self.output)]
        if duration is not None:
            cmd += ["--duration", str(max(1, int(duration)))]
        assert self.workdir is not None
        with open(self.workdir / "py-spy.log", "wb") as out:
            self.spy = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)

    def start(self, kubeconfig: str, nodes: int, workdir: Path) -> subprocess.Popen[bytes]:
        proc = super().start(kubeconfig, nodes, workdir)
        self.workdir = workdir
        if not self.at_rest:
            self._attach(proc.pid)
        return proc

    def hold_started(self, pid: int, hold: float) -> Callable[[], None]:
        """The harness's ``at_rest`` hook: py-spy for the hold (a second less: it must end within it)."""
        if self.at_rest:
            self._attach(pid, hold - 1)
        return lambda: None

    def finish(self, timeout: float = 60.0) -> None:
        """py-spy stops when the node process has exited, and writes its file then."""
        if self.spy is not None:
            try:
                self.spy.wait(timeout)
            except subprocess.TimeoutExpired:
                self.spy.terminate()
                self.spy.wait(10)


@dataclass
class Profile:
    """Samples charged to the innermost podstatus frame (``owner``) and to the leaf frame (``leaf``)."""

    samples: int = 0
    by_module: Counter[str] = field(default_factory=Counter)
    by_owner: Counter[str] = field(default_factory=Counter)
    by_leaf: Counter[str] = field(default_factory=Counter)
    inclusive: Counter[str] = field(default_factory=Counter)


def _frame(text: str) -> tuple[str, str]:
    """``'fn (path/to/file.py:12)'`` -> ``('fn', 'path/to/file.py')``."""
    name, _, where = text.rpartition(" (")
    path = where.rstrip(")").rpartition(":")[0]
    return (name or text), path


def _short(path: str) -> str:
    """py-spy names files from their package (``podstatus/manager.py``); keep that part of longer ones."""
    return path[path.rindex(OWN) :] if OWN in path else path


def read_raw(path: Path) -> Profile:
    """py-spy's raw (collapsed stack) output: ``frame;frame;... count`` per line, outermost first."""
    profile = Profile()
    with open(path, encoding="utf-8") as f:
        for line in f:
            stack, _, count_text = line.rstrip("\n").rpartition(" ")
            if not stack or not count_text.isdigit():
                continue
            count = int(count_text)
            frames = [_frame(part) for part in stack.split(";") if part]
            if not frames:
                continue
            profile.samples += count
            name, leaf_path = frames[-1]
            profile.by_leaf[f"{name} ({_short(leaf_path)})"] += count
            own = [(n, p) for n, p in frames if OWN in p]
            if any("importlib" in p for _, p in frames):
                profile.by_module["(start-up: imports)"] += count
            elif own:
                owner_name, owner_path = own[-1]
                module = _short(owner_path).removeprefix(OWN).removesuffix(".py").replace("/", ".")
                profile.by_module[module] += count
                profile.by_owner[f"{module}.{owner_name}"] += count
                for n, p in {(n, p) for n, p in own}:
                    mod = _short(p).removeprefix(OWN).removesuffix(".py").replace("/", ".")
                    profile.inclusive[f"{mod}.{n}"] += count
            else:
                profile.by_module["(outside podstatus: the interpreter's own threads)"] += count
    return profile


def _share(count: int, total: int) -> str:
    return f"{100 * count / total:.1f} %" if total else "-"


def report(
    profile: Profile, result: RunResult, invocation: dict[str, str], top: int = 20, *, at_rest: bool = False
) -> str:
    total = profile.samples
    seconds = total / RATE
    process_cpu = (result.hold_cpu_s if at_rest else result.cpu_s) or 0
    what = "the hold (every pod up, nothing changing)" if at_rest else "the whole run"
    lines = [
        "# Where `podstatus node` spends its CPU at scale",
        "",
        f"Made by `{invocation['command']}` on commit {invocation['commit']}, "
        f"{invocation['started']} ({invocation['machine']}). One run, podstatus only, on a fresh "
        "kube-apiserver, the workload of `docs/scale.md`; py-spy attached to the node process "
        f"(`--gil --nonblocking`, {RATE} samples a second).",
        "",
        markdown_table(COLUMNS, [row(result)]),
        "",
        f"Sampled over {what}. {total:,} samples with the GIL held: about {seconds:.1f} s of Python "
        f"work, against {process_cpu:.1f} CPU-seconds of the process (the rest is C code that releases the "
        "GIL, TLS and sockets mostly, and threads waiting for the GIL). Each sample is charged to the "
        "innermost podstatus function on its stack, library code below it included.",
        "",
        "## By module",
        "",
        markdown_table(
            ["podstatus module", "samples", "share"],
            [[m, f"{n:,}", _share(n, total)] for m, n in profile.by_module.most_common(top)],
        ),
        "",
        "## By function (innermost podstatus frame)",
        "",
        markdown_table(
            ["function", "samples", "share"],
            [[f"`{f}`", f"{n:,}", _share(n, total)] for f, n in profile.by_owner.most_common(top)],
        ),
        "",
        "## Inclusive (a podstatus function anywhere on the stack)",
        "",
        markdown_table(
            ["function", "samples", "share"],
            [[f"`{f}`", f"{n:,}", _share(n, total)] for f, n in profile.inclusive.most_common(top)],
        ),
        "",
        "## Leaf frames (where the interpreter was)",
        "",
        markdown_table(
            ["frame", "samples", "share"],
            [[f"`{f}`", f"{n:,}", _share(n, total)] for f, n in profile.by_leaf.most_common(top)],
        ),
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--size", default="1000x10000", help="NODESxPODS (default 1000x10000)")
    parser.add_argument("--hold", type=float, default=30.0)
    parser.add_argument("--max-wait", type=float, default=300.0)
    parser.add_argument("--workdir", default=None)
    parser.add_argument("--write", default=None, help="write the report here (markdown)")
    parser.add_argument("--top", type=int, default=20)
    parser.add_argument(
        "--at-rest",
        action="store_true",
        help="sample only the hold (every pod up, nothing changing), not the whole run",
    )
    parser.add_argument("--kubelet-api", choices=("on", "off"), default="on")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    ((nodes, pods),) = parse_sizes(args.size)
    base = Path(args.workdir or f"/tmp/podstatus-profile-{os.getpid()}")
    workdir = base / f"{nodes}x{pods}-podstatus-profiled"
    workdir.mkdir(parents=True, exist_ok=True)
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    load = machine()
    contender = ProfiledPodstatus(
        workdir / "podstatus.pyspy", at_rest=args.at_rest, kubelet_api=args.kubelet_api == "on"
    )
    server = RealApiServer(workdir / "apiserver")
    try:
        result = run_once(
            contender,
            server,
            nodes,
            pods,
            workdir,
            hold=args.hold,
            max_wait=args.max_wait,
            at_rest=contender.hold_started,
        )
    finally:
        server.stop()
        contender.finish()
    if not result.completed:
        log.error("the run did not complete: %s", result.note)
    profile = read_raw(contender.output)
    command = "python -m bench.scale.profile " + " ".join(argv if argv is not None else sys.argv[1:])
    invocation = {"command": command.strip(), "commit": git_commit(), "started": started, "machine": load}
    text = report(profile, result, invocation, args.top, at_rest=args.at_rest)
    print(text)
    if args.write:
        Path(args.write).write_text(text, encoding="utf-8")
    return 0 if result.completed and profile.samples else 1


if __name__ == "__main__":
    sys.exit(main())
