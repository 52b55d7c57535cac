"""Shared test helpers: where the shared fixtures are."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
# ../shared beside the checkout (as CI lays it out), or PODSTATUS_SHARED.
SHARED = Path(os.environ.get("PODSTATUS_SHARED", ROOT.parent / "shared"))
POD_RUNNING = SHARED / "fixtures" / "pod-running.json"


@pytest.fixture
def pod_running_dict() -> dict[str, Any]:
    """The realistic pod of shared/fixtures, as a fresh dict."""
    if not POD_RUNNING.exists():
        pytest.fail(f"fixture not found: {POD_RUNNING} (set PODSTATUS_SHARED to the shared/ folder)")
    result: dict[str, Any] = json.loads(POD_RUNNING.read_text(encoding="utf-8"))
    return result
