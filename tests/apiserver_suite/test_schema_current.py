"""The shipped schema of known fields (podstatus/data/apischema.json) is the one of the pinned Kubernetes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.apiserver

GEN = Path(__file__).resolve().parents[1] / "apiserver" / "gen_schema.py"


def test_schema_is_generated_from_the_pinned_kubernetes() -> None:
    # The apiserver build has put k8s.io/kubernetes of go.mod's version in the module cache.
    proc = subprocess.run([sys.executable, str(GEN), "--check"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
