"""Builds tests/statusoracle (the upstream status manager of k8s.io/kubernetes v1.37.2) once per source hash.

The program imports ``k8s.io/kubernetes/pkg/kubelet/status`` as a package of its own module
(``upstreamstatus``) whose files are upstream's ``status_manager.go`` and ``generate.go``, taken
verbatim from the Go module cache through ``go build -overlay``, plus ``export_status.go.in``, an
exported hook for the unexported ``syncBatch`` (the package's own tests call it; an overlay may not
replace files inside the module cache, so the package is compiled under our module's path). Upstream
code is untouched and nothing is copied into the tree.

The first build compiles k8s.io/kubernetes' dependencies: about 5 minutes on 2 busy cores, a few
seconds when Go's build cache is warm (the apiserver build warms most of it). The binary lives in
~/.cache/podstatus-statusoracle (or PODSTATUS_STATUSORACLE_CACHE), one per hash of the sources.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import tempfile
import time
from pathlib import Path

from clientgo_build import go_binary

SOURCE = Path(__file__).resolve().parent / "statusoracle"
CACHE = Path(
    os.environ.get("PODSTATUS_STATUSORACLE_CACHE", Path.home() / ".cache" / "podstatus-statusoracle")
)
# The upstream files compiled as tests/statusoracle/upstreamstatus (see the module docstring).
UPSTREAM_FILES = ("status_manager.go", "generate.go")
HOOK = "export_status.go.in"


def source_hash() -> str:
    digest = hashlib.sha256()
    for path in sorted(SOURCE.iterdir()):
        if path.suffix in (".go", ".mod", ".sum", ".in"):
            digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def _env() -> dict[str, str]:
    return {**os.environ, "GOFLAGS": "-mod=mod"}


def build() -> tuple[Path, float]:
    """The cached binary (built now when missing) and the seconds this call spent building."""
    go = go_binary()
    if go is None:
        raise RuntimeError("Go is not installed (looked for /usr/local/go/bin/go and go on PATH)")
    target = CACHE / source_hash() / "statusoracle"
    if target.exists():
        return target, 0.0
    target.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    proc = subprocess.run(
        [go, "list", "-m", "-f", "{{.Dir}}", "k8s.io/kubernetes"],
        cwd=SOURCE,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=900,
    )
    if proc.returncode != 0 or not proc.stdout.strip():
        raise RuntimeError(f"go list of k8s.io/kubernetes failed:\n{proc.stderr}")
    upstream = Path(proc.stdout.strip()) / "pkg" / "kubelet" / "status"
    package = SOURCE / "upstreamstatus"
    replace = {str(package / name): str(upstream / name) for name in UPSTREAM_FILES}
    replace[str(package / "export_oracle.go")] = str(SOURCE / HOOK)
    tmp = target.with_name(f"statusoracle.tmp.{os.getpid()}")
    with tempfile.TemporaryDirectory(prefix="statusoracle-") as scratch:
        overlay = Path(scratch) / "overlay.json"
        overlay.write_text(json.dumps({"Replace": replace}), encoding="utf-8")
        proc = subprocess.run(
            [go, "build", "-overlay", str(overlay), "-o", str(tmp), "."],
            cwd=SOURCE,
            env=_env(),
            capture_output=True,
            text=True,
            timeout=1800,
        )
    if proc.returncode != 0:
        raise RuntimeError(f"go build of tests/statusoracle failed:\n{proc.stderr}")
    tmp.replace(target)
    return target, time.monotonic() - started


if __name__ == "__main__":
    binary, seconds = build()
    print(f"{binary} (built in {seconds:.0f} s)" if seconds else f"{binary} (cached)")
