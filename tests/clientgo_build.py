"""Builds tests/clientgo (client-go v0.37.2) once per source hash, cached.

The first build compiles client-go: about 4 minutes on 2 busy cores, a few seconds
when Go's build cache is warm. The binary lives in ~/.cache/podstatus-clientgo
(or PODSTATUS_CLIENTGO_CACHE), one per hash of tests/clientgo's files.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import time
from pathlib import Path

SOURCE = Path(__file__).resolve().parent / "clientgo"
CACHE = Path(os.environ.get("PODSTATUS_CLIENTGO_CACHE", Path.home() / ".cache" / "podstatus-clientgo"))
GO_CANDIDATES = ("/usr/local/go/bin/go", "go")


def go_binary() -> str | None:
    for candidate in GO_CANDIDATES:
        found = shutil.which(candidate)
        if found:
            return found
    return None


def source_hash() -> str:
    digest = hashlib.sha256()
    for path in sorted(SOURCE.iterdir()):
        if path.suffix in (".go", ".mod", ".sum"):
            digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def build() -> tuple[Path, float]:
    """The cached binary (built now when missing) and the seconds this call spent building."""
    go = go_binary()
    if go is None:
        raise RuntimeError("Go is not installed (looked for /usr/local/go/bin/go and go on PATH)")
    target = CACHE / source_hash() / "clientgo"
    if target.exists():
        return target, 0.0
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f"clientgo.tmp.{os.getpid()}")
    env = {**os.environ, "GOFLAGS": "-mod=mod"}
    started = time.monotonic()
    proc = subprocess.run(
        [go, "build", "-o", str(tmp), "."], cwd=SOURCE, env=env, capture_output=True, text=True, timeout=1500
    )
    if proc.returncode != 0:
        raise RuntimeError(f"go build of tests/clientgo failed:\n{proc.stderr}")
    tmp.replace(target)
    return target, time.monotonic() - started


def module_dir(module: str) -> Path:
    """Where the Go module cache holds ``module`` (as tests/clientgo requires it)."""
    go = go_binary()
    assert go is not None
    proc = subprocess.run(
        [go, "list", "-m", "-f", "{{.Dir}}", module],
        cwd=SOURCE,
        env={**os.environ, "GOFLAGS": "-mod=mod"},
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    return Path(proc.stdout.strip())


if __name__ == "__main__":
    binary, seconds = build()
    print(f"{binary} (built in {seconds:.0f} s)" if seconds else f"{binary} (cached)")
