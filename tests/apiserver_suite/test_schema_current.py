"""The shipped schemas (podstatus/data/apischema.json and openapi.json.gz, podstatus/server/fieldschema.py)
are the pinned Kubernetes' ones."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.apiserver

ROOT = Path(__file__).resolve().parents[2]
GEN = ROOT / "tests" / "apiserver" / "gen_schema.py"
GEN_FIELDS = ROOT / "tests" / "apiserver" / "gen_fieldschema.py"
GEN_OPENAPI = ROOT / "tests" / "apiserver" / "gen_openapi.py"


def test_schema_is_generated_from_the_pinned_kubernetes() -> None:
    # The apiserver build has put k8s.io/kubernetes of go.mod's version in the module cache.
    proc = subprocess.run([sys.executable, str(GEN), "--check"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


def test_shipped_field_schema_is_what_the_generator_makes() -> None:
    # Same module cache as above; the generator's output, formatted as the repository formats it.
    made = subprocess.run([sys.executable, str(GEN_FIELDS)], capture_output=True, text=True, check=True,
                          timeout=120).stdout  # fmt: skip
    ruff = Path(sys.executable).parent / "ruff"
    formatted = subprocess.run([str(ruff), "format", "--stdin-filename", "fieldschema.py", "-"], input=made,
                               capture_output=True, text=True, check=True, cwd=ROOT).stdout  # fmt: skip
    assert formatted == (ROOT / "src/podstatus/server/fieldmanager/fieldschema.py").read_text()


def test_served_openapi_documents_are_the_pinned_kubernetes_ones() -> None:
    # Same module cache; the generator trims to what discovery lists, so a newly served
    # resource without regenerating shows up here too.
    proc = subprocess.run([sys.executable, str(GEN_OPENAPI), "--check"], capture_output=True, text=True,
                          timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
