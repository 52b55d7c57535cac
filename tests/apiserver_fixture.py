"""The real-apiserver fixture (tests/apiserver/start) as the suites use it: build once, start, stop.

Shared by tests/apiserver_suite (etcd + kube-apiserver) and tests/controlplane_suite
(plus kube-controller-manager and kube-scheduler).
"""

from __future__ import annotations

import contextlib
import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

START = Path(__file__).resolve().parent / "apiserver" / "start"

MISSING_GO = (
    "The real kube-apiserver suites need the Go toolchain (Go >= 1.26) to build "
    "tests/apiserver (etcd, kube-apiserver, kube-controller-manager, kube-scheduler v1.37.2), "
    "and `go` is not on PATH (nor in /usr/local/go/bin). Install Go, then run `make test-apiserver` again."
)


def go_env() -> dict[str, str]:
    """The environment for ``start``: Go's usual install dir is added to PATH when go is not on it."""
    env = dict(os.environ)
    if shutil.which("go") is None:
        for candidate in ("/usr/local/go/bin", str(Path.home() / "go" / "bin"), "/usr/lib/go/bin"):
            if Path(candidate, "go").exists():
                env["PATH"] = f"{candidate}{os.pathsep}{env.get('PATH', '')}"
                break
    return env


def build_before_tests(
    session: pytest.Session, suite_dir: Path, label: str, errors: list[str], *, timeout: float
) -> None:
    """Build the binary (cached) once, before any test of ``suite_dir`` runs.

    Done from ``pytest_collection_finish`` so the build is not cut by the per-test
    timeout; its progress goes to stderr. A failure is recorded in ``errors`` for the
    fixtures to report.
    """
    if session.config.option.collectonly:
        return
    if not any(Path(str(item.fspath)).resolve().parent == suite_dir for item in session.items):
        return
    env = go_env()
    if shutil.which("go", path=env.get("PATH")) is None:
        errors.append(MISSING_GO)
        return
    capture = session.config.pluginmanager.getplugin("capturemanager")
    started = time.monotonic()
    with capture.global_and_fixture_disabled() if capture is not None else contextlib.nullcontext():
        try:
            proc = subprocess.run(
                [str(START), "--build-only"],
                stdout=sys.stderr,
                stderr=sys.stderr,
                stdin=subprocess.DEVNULL,
                env=env,
                timeout=timeout,
                check=False,
            )
        except subprocess.TimeoutExpired:
            errors.append(f"building the fixture binary took more than {timeout:.0f} s")
            return
    if proc.returncode == 3:
        errors.append(
            "`tests/apiserver/start --build-only` failed (exit 3: go missing or the build failed); "
            "its output is above on stderr"
        )
    elif proc.returncode != 0:
        errors.append(f"`tests/apiserver/start --build-only` exited with {proc.returncode}")
    elif time.monotonic() - started > 5:
        sys.stderr.write(f"[{label}] fixture binary built in {time.monotonic() - started:.0f} s\n")


def _read_lines(stream: Any, out: queue.Queue[str | None]) -> None:
    for line in stream:
        out.put(line)
    out.put(None)


def _stop(proc: subprocess.Popen[str], timeout: float) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


@contextlib.contextmanager
def running(
    args: list[str], *, what: str, start_timeout: float, stop_timeout: float
) -> Iterator[dict[str, str]]:
    """Run ``start ARGS`` until its KEY=VALUE lines end with KUBECONFIG; yield them; stop it on exit.

    Its stderr is inherited, so build progress and startup logs stay visible.
    """
    env = go_env()
    if shutil.which("go", path=env.get("PATH")) is None:
        pytest.fail(MISSING_GO, pytrace=False)
    proc = subprocess.Popen(
        [str(START), *args], stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True, env=env
    )
    lines: queue.Queue[str | None] = queue.Queue()
    reader = threading.Thread(target=_read_lines, args=(proc.stdout, lines), daemon=True)
    reader.start()
    info: dict[str, str] = {}
    deadline = time.monotonic() + start_timeout
    try:
        while "KUBECONFIG" not in info:
            try:
                line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                pytest.fail(f"{what} was not ready within {start_timeout:.0f} s", pytrace=False)
            if line is None:
                code = proc.wait(timeout=30)
                hint = " (go missing or the build failed)" if code == 3 else ""
                pytest.fail(f"tests/apiserver/start exited with {code}{hint}; see stderr", pytrace=False)
            key, _, value = line.rstrip("\n").partition("=")
            info[key] = value
        yield info
    finally:
        _stop(proc, stop_timeout)
        reader.join(timeout=5)
        if proc.stdout is not None:
            proc.stdout.close()
