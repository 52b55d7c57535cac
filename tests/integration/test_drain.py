"""`kubectl drain` (1.37) against the embedded server: eviction, and delete with protobuf DeleteOptions."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from podstatus.server import EmbeddedApiServer
from testkit import kubectl_path

KUBECTL = kubectl_path()
pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl 1.37 is not installed")


@pytest.fixture
def server() -> Iterator[EmbeddedApiServer]:
    with EmbeddedApiServer() as srv:
        yield srv


def _kubectl(env: dict[str, str], *args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
    assert KUBECTL is not None
    return subprocess.run([KUBECTL, *args], env=env, input=input, capture_output=True, text=True, timeout=120)


def _cluster(server: EmbeddedApiServer, home: Path, pods: int) -> dict[str, str]:
    config = server.write_kubeconfig(home / "config")
    env = {**os.environ, "KUBECONFIG": str(config), "HOME": str(home)}
    objects = [{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}}]
    objects += [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"p{i}"},
            "spec": {"nodeName": "n1", "containers": [{"name": "app", "image": "nginx:1.27"}]},
        }
        for i in range(pods)
    ]
    proc = _kubectl(env, "create", "-f", "-", input="\n---\n".join(json.dumps(o) for o in objects))
    assert proc.returncode == 0, proc.stderr
    return env


def test_drain_evicts_through_the_eviction_subresource(server: EmbeddedApiServer, tmp_path: Path) -> None:
    env = _cluster(server, tmp_path, pods=2)
    proc = _kubectl(env, "drain", "n1", "--force", "--grace-period=1", "--timeout=60s", "-v=6")
    assert proc.returncode == 0, proc.stderr
    assert "pod/p0 evicted" in proc.stdout and "node/n1 drained" in proc.stdout
    assert "/pods/p0/eviction" in proc.stderr and "201 Created" in proc.stderr
    assert server.store.get("nodes", None, "n1").obj["spec"]["unschedulable"] is True
    assert server.store.list("pods", "default")[0] == []


def test_drain_without_eviction_deletes_with_protobuf_delete_options(
    server: EmbeddedApiServer, tmp_path: Path
) -> None:
    env = _cluster(server, tmp_path, pods=1)
    proc = _kubectl(env, "drain", "n1", "--force", "--disable-eviction", "--grace-period=1", "--timeout=60s")
    assert proc.returncode == 0, proc.stderr
    assert "pod/p0 deleted" in proc.stdout
    assert server.store.list("pods", "default")[0] == []


def test_discovery_names_the_eviction_subresource(server: EmbeddedApiServer, tmp_path: Path) -> None:
    env = _cluster(server, tmp_path, pods=0)
    proc = _kubectl(env, "get", "--raw", "/api/v1")
    resources = {r["name"]: r for r in json.loads(proc.stdout)["resources"]}
    eviction = resources["pods/eviction"]
    assert (eviction["group"], eviction["version"], eviction["kind"]) == ("policy", "v1", "Eviction")
