"""Shared test helpers: where the fixtures are."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
# The repository's own copy (tests/fixtures), or PODSTATUS_FIXTURES: nothing outside the clone.
FIXTURES = Path(os.environ.get("PODSTATUS_FIXTURES", ROOT / "tests" / "fixtures"))
POD_RUNNING = FIXTURES / "pod-running.json"


@pytest.fixture(scope="session", autouse=True)
def _serve_state_out_of_home(tmp_path_factory: pytest.TempPathFactory) -> None:
    """`podstatus serve` keeps its CA and token under $XDG_STATE_HOME: the tests' go to a temp folder."""
    os.environ["XDG_STATE_HOME"] = str(tmp_path_factory.mktemp("xdg-state"))


@pytest.fixture
def pod_running_dict() -> dict[str, Any]:
    """The realistic pod of tests/fixtures, as a fresh dict."""
    if not POD_RUNNING.exists():
        pytest.fail(f"fixture not found: {POD_RUNNING} (PODSTATUS_FIXTURES points to the folder holding it)")
    result: dict[str, Any] = json.loads(POD_RUNNING.read_text(encoding="utf-8"))
    return result
