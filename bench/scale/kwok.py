"""KWOK for the scale benchmark: the ``kwok`` binary built from the Go module proxy, and its stages.

``kwok`` (not ``kwokctl``) runs against an existing cluster, but from v0.8.0 on it
starts only with Stage objects in ``--config`` (it stops with "no stages found"
otherwise). kwokctl hands it its default set: the ``fast`` node and pod stages plus
the node heartbeat with leases. We give the bare binary that same set, read at
build time from the module's own files in the Go module cache (nothing of KWOK's
is kept in this repository), so the comparison is against KWOK as it ships.

Cache: ``${PODSTATUS_KWOK_CACHE:-~/.cache/podstatus-kwok}/<version>/`` holds
``kwok`` and ``stages.yaml``; either missing is rebuilt, under a lock so parallel
runs wait for one build.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

log = logging.getLogger("bench.scale.kwok")

VERSION = "v0.8.0"
MODULE = "sigs.k8s.io/kwok"

# KWOK's default stages (what kwokctl configures): node-initialize and the Lease heartbeat
# for nodes; pod-ready, pod-complete (Job-owned pods only) and pod-delete for pods.
STAGE_FILES = (
    "kustomize/stage/node/fast/node-initialize.yaml",
    "kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
    "kustomize/stage/pod/fast/pod-ready.yaml",
    "kustomize/stage/pod/fast/pod-complete.yaml",
    "kustomize/stage/pod/fast/pod-delete.yaml",
)

# The annotation KWOK is told to manage nodes by (--manage-nodes-with-annotation-selector).
NODE_ANNOTATION = ("kwok.x-k8s.io/node", "fake")


def cache_dir(version: str = VERSION) -> Path:
    base = os.environ.get("PODSTATUS_KWOK_CACHE") or str(Path.home() / ".cache" / "podstatus-kwok")
    return Path(base) / version


def go_binary() -> str:
    found = shutil.which("go")
    if found:
        return found
    if Path("/usr/local/go/bin/go").exists():
        return "/usr/local/go/bin/go"
    raise RuntimeError("go is neither on PATH nor at /usr/local/go/bin/go: it is needed to build kwok")


def _module_dir(go: str, version: str) -> Path:
    # Outside any module, `go mod download -json mod@version` fetches (or finds) it and says where.
    out = subprocess.run(
        [go, "mod", "download", "-json", f"{MODULE}@{version}"],
        check=True,
        capture_output=True,
        text=True,
        cwd=tempfile.gettempdir(),
        env={**os.environ, "GO111MODULE": "on"},
    ).stdout
    return Path(json.loads(out)["Dir"])


def ensure_kwok(version: str = VERSION) -> tuple[Path, Path]:
    """The kwok binary and its stages config, built or assembled first when missing."""
    directory = cache_dir(version)
    directory.mkdir(parents=True, exist_ok=True)
    binary, stages = directory / "kwok", directory / "stages.yaml"
    if binary.exists() and stages.exists():
        return binary, stages
    with open(directory / ".build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        go = go_binary()
        if not binary.exists():
            log.warning("building kwok %s from the Go module proxy (takes minutes on 2 cores)", version)
            tmp = Path(tempfile.mkdtemp(prefix="gobin-", dir=directory))
            try:
                subprocess.run(
                    ["nice", "-n", "10", go, "install", "-trimpath", f"{MODULE}/cmd/kwok@{version}"],
                    check=True,
                    cwd=tempfile.gettempdir(),
                    env={**os.environ, "GOBIN": str(tmp)},
                )
                (tmp / "kwok").replace(binary)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
        if not stages.exists():
            source = _module_dir(go, version)
            docs = [(source / name).read_text(encoding="utf-8").strip() for name in STAGE_FILES]
            tmp_stages = stages.with_suffix(".tmp")
            tmp_stages.write_text("\n---\n".join(docs) + "\n", encoding="utf-8")
            tmp_stages.replace(stages)
    return binary, stages


def kwok_command(binary: Path, stages: Path, kubeconfig: str) -> list[str]:
    key, value = NODE_ANNOTATION
    return [
        str(binary),
        "--kubeconfig",
        kubeconfig,
        "--config",
        str(stages),
        "--manage-all-nodes=false",
        f"--manage-nodes-with-annotation-selector={key}={value}",
        # Fallback pod CIDR; every benchmark node brings its own spec.podCIDR.
        "--cidr=10.128.0.0/16",
        "--node-lease-duration-seconds=40",
    ]


def node_manifest(name: str, index: int) -> dict[str, object]:
    """A Node for KWOK to take over (it fills the status from its node-initialize stage)."""
    key, value = NODE_ANNOTATION
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {key: value},
            "labels": {"type": "kwok", "kubernetes.io/hostname": name},
        },
        "spec": {
            # One /24 per node: KWOK hands pod IPs out of it (the default pool has only 254).
            "podCIDR": f"10.{64 + index // 256}.{index % 256}.0/24",
            "taints": [{"key": key, "value": value, "effect": "NoSchedule"}],
        },
    }


if __name__ == "__main__":  # `python -m bench.scale.kwok`: build only
    logging.basicConfig(level=logging.INFO)
    b, s = ensure_kwok()
    print(f"kwok={b}\nstages={s}")
