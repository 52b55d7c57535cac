"""Helpers of the tests that run ``podstatus node`` (and ``serve``) as a user does, with kubectl."""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from testkit import kubectl_path

SRC = Path(__file__).resolve().parents[2] / "src"
KUBECTL = kubectl_path()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(cond: Callable[[], Any], timeout: float = 20.0, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def kubectl(env: dict[str, str], *args: str, input: str | None = None) -> str:
    """kubectl's output; it must succeed."""
    proc = subprocess.run([KUBECTL, *args], env=env, capture_output=True, text=True, timeout=60, input=input)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def kubectl_try(env: dict[str, str], *args: str) -> str | None:
    """kubectl's output, or None when it failed (the server is not up yet, say)."""
    proc = subprocess.run([KUBECTL, *args], env=env, capture_output=True, text=True, timeout=60)
    return proc.stdout if proc.returncode == 0 else None


def node_ready(env: dict[str, str], name: str) -> bool:
    """``kubectl get nodes`` shows ``name`` Ready."""
    out = kubectl_try(env, "get", "nodes") or ""
    return any(line.split()[:2] == [name, "Ready"] for line in out.splitlines())
