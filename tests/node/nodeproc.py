"""``podstatus node`` as a subprocess against the embedded API server over HTTP (loopback).

Its stderr goes to a file, so a test can wait for a log line while it runs.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from podstatus.clients.http import HttpKubeClient
from podstatus.server import EmbeddedApiServer

SRC = Path(__file__).resolve().parents[2] / "src"


def wait_for(cond: Callable[[], Any], timeout: float = 20.0, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def _no_kubelet_api(args: tuple[str, ...]) -> list[str]:
    """Off unless the test asks for it: tests must not take the kubelet's port 10250."""
    return list(args) if any(a.startswith("--kubelet-port") for a in args) else [*args, "--kubelet-port", "0"]


class NodeProcess:
    """One ``python -m podstatus.cli node ...``; ``err()`` is its stderr so far."""

    def __init__(self, env: dict[str, str], workdir: Path, *args: str) -> None:
        self.stderr_path = workdir / f"node-{time.monotonic_ns()}.err"
        self._stderr = self.stderr_path.open("w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "podstatus.cli", "node", *_no_kubelet_api(args)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
        )

    def err(self) -> str:
        return self.stderr_path.read_text()

    def wait_log(self, text: str, timeout: float = 30.0) -> str:
        return wait_for(lambda: text in self.err() and self.err(), timeout, f"log line {text!r}")

    def signal(self, sig: int = signal.SIGTERM) -> None:
        self.proc.send_signal(sig)

    def wait(self, timeout: float) -> tuple[int, str, float]:
        """Exit code, stdout, and how long it took to exit (seconds)."""
        start = time.monotonic()
        try:
            out, _ = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"podstatus node did not exit within {timeout:g} s:\n{self.err()}") from None
        return self.proc.returncode, out, time.monotonic() - start

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.communicate(timeout=10)
        self._stderr.close()


@pytest.fixture
def http_server() -> Iterator[EmbeddedApiServer]:
    with EmbeddedApiServer() as srv:
        yield srv


@pytest.fixture
def kubeconfig(http_server: EmbeddedApiServer, tmp_path: Path) -> Path:
    return http_server.write_kubeconfig(str(tmp_path / "kubeconfig"))


@pytest.fixture
def http_api(kubeconfig: Path) -> Iterator[HttpKubeClient]:
    client = HttpKubeClient.from_kubeconfig(str(kubeconfig))
    yield client
    client.close()


@pytest.fixture
def node_env(kubeconfig: Path, tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir()
    out = dict(os.environ)
    out.update(
        {
            "KUBECONFIG": str(kubeconfig),
            "HOME": str(home),
            # Provider modules the tests write go in tmp_path.
            "PYTHONPATH": str(SRC) + os.pathsep + str(tmp_path) + os.pathsep + out.get("PYTHONPATH", ""),
        }
    )
    return out


@pytest.fixture
def node_procs(node_env: dict[str, str], tmp_path: Path) -> Iterator[Callable[..., NodeProcess]]:
    started: list[NodeProcess] = []

    def start(*args: str) -> NodeProcess:
        p = NodeProcess(node_env, tmp_path, *args)
        started.append(p)
        return p

    yield start
    for p in started:
        p.kill()


def pod_body(name: str, node: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"nodeName": node, "containers": [{"name": "app", "image": "nginx"}], **spec},
    }
