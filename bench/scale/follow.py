"""``kubectl logs -f`` on many pods at once, for the scale benchmark's follow phase.

Each follower is a real ``kubectl logs -f`` process (the venv's kubectl) against the API
server of the run, which proxies ``pods/log`` to the node's kubelet API: the path a user's
command takes. A reader thread per process counts the lines that arrive and when, so the
harness can say how many streams opened, how many were still open at the end of the hold
and how many kept receiving lines during it (the simulated serving containers print a
probe's access-log line every 10 s).
"""

from __future__ import annotations

import logging
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

log = logging.getLogger("bench.scale")


def kubectl() -> str:
    """The kubectl next to this interpreter (the dev extra installs one), else on PATH."""
    here = Path(sys.executable).with_name("kubectl")
    found = str(here) if here.exists() else shutil.which("kubectl")
    if not found:
        raise RuntimeError("kubectl is not installed (pip install -e '.[dev]')")
    return found


@dataclass
class Follower:
    """One ``kubectl logs -f`` and what it has printed: the time of every line."""

    pod: str
    proc: subprocess.Popen[bytes]
    lines: list[float] = field(default_factory=list)
    first: threading.Event = field(default_factory=threading.Event)
    stderr: bytes = b""

    def read(self, stream: IO[bytes]) -> None:
        for _ in iter(stream.readline, b""):
            self.lines.append(time.monotonic())
            self.first.set()

    def lines_between(self, start: float, end: float) -> int:
        return sum(1 for t in list(self.lines) if start <= t <= end)


@dataclass
class FollowResult:
    streams: int = 0  # asked for
    opened: int = 0  # printed their first line within the open timeout
    open_at_end: int = 0  # kubectl still running at the end of the hold
    receiving: int = 0  # still open and printed at least one line during the hold
    lines: int = 0  # lines printed during the hold, all streams
    errors: list[str] = field(default_factory=list)  # what the ones that ended said (a few)


class LogFollowers:
    """``kubectl logs -f`` on each of ``pods`` (namespace ``namespace``) until :meth:`close`."""

    def __init__(self, kubeconfig: str, namespace: str, pods: list[str]) -> None:
        self.followers: list[Follower] = []
        self._threads: list[threading.Thread] = []
        binary = kubectl()
        for pod in pods:
            proc = subprocess.Popen(
                [binary, "--kubeconfig", kubeconfig, "logs", "-f", "-n", namespace, pod],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                stdin=subprocess.DEVNULL,
            )
            follower = Follower(pod, proc)
            self.followers.append(follower)
            assert proc.stdout is not None
            thread = threading.Thread(target=follower.read, args=(proc.stdout,), daemon=True)
            thread.start()
            self._threads.append(thread)

    def wait_open(self, timeout: float) -> int:
        """Wait until every stream has printed a line (or ``timeout``); how many have."""
        deadline = time.monotonic() + timeout
        for follower in self.followers:
            follower.first.wait(max(0.0, deadline - time.monotonic()))
        return sum(1 for f in self.followers if f.first.is_set())

    def result(self, start: float, end: float) -> FollowResult:
        """The streams' state now, and their lines between ``start`` and ``end`` (monotonic)."""
        out = FollowResult(streams=len(self.followers))
        for f in self.followers:
            running = f.proc.poll() is None
            during = f.lines_between(start, end)
            out.opened += f.first.is_set()
            out.open_at_end += running
            out.receiving += running and during > 0
            out.lines += during
        return out

    def close(self) -> list[str]:
        """Stop every kubectl; what the ones that had ended on their own said (up to 5)."""
        ended = [f for f in self.followers if f.proc.poll() is not None]
        for f in self.followers:
            if f.proc.poll() is None:
                f.proc.terminate()
        for f in self.followers:
            try:
                f.proc.wait(10)
            except subprocess.TimeoutExpired:
                f.proc.kill()
                f.proc.wait(5)
        for thread in self._threads:
            thread.join(5)
        errors = []
        for f in ended[:5]:
            assert f.proc.stderr is not None
            text = f.proc.stderr.read().decode(errors="replace").strip()
            errors.append(f"{f.pod}: exit {f.proc.returncode}: {text[:200]}")
        for f in self.followers:
            for pipe in (f.proc.stdout, f.proc.stderr):
                if pipe is not None:
                    pipe.close()
        return errors
