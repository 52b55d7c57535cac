"""A real, current kubectl against the embedded API server."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator

import pytest

from podstatus.server import EmbeddedApiServer
from testkit import kubectl_path

KUBECTL = kubectl_path()

POD_YAML = """\
apiVersion: v1
kind: Pod
metadata:
  name: {name}
  labels: {{app: web}}
spec:
  nodeName: {node}
  containers:
  - name: app
    image: nginx:1.27
"""


NAMESPACE_YAML = """\
apiVersion: v1
kind: Namespace
metadata:
  name: {name}
"""


@pytest.fixture(scope="module")
def server() -> Iterator[EmbeddedApiServer]:
    with EmbeddedApiServer() as srv:
        yield srv


@pytest.fixture(scope="module")
def env(server: EmbeddedApiServer, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    home = tmp_path_factory.mktemp("kubectl-home")
    config = server.write_kubeconfig(home / "config")
    # A private HOME keeps kubectl's discovery cache out of the user's.
    return {**os.environ, "KUBECONFIG": str(config), "HOME": str(home)}


def kubectl(
    env: dict[str, str], *args: str, input: str | None = None, ok: bool = True
) -> subprocess.CompletedProcess[str]:
    assert KUBECTL is not None
    proc = subprocess.run([KUBECTL, *args], env=env, input=input, capture_output=True, text=True, timeout=60)
    if ok:
        assert proc.returncode == 0, proc.stderr
    return proc


def test_apply_get_and_reapply(server: EmbeddedApiServer, env: dict[str, str]) -> None:
    manifest = POD_YAML.format(name="web", node="node-1")
    assert "pod/web created" in kubectl(env, "apply", "-f", "-", input=manifest).stdout
    assert "pod/web unchanged" in kubectl(env, "apply", "-f", "-", input=manifest).stdout
    changed = manifest.replace("{app: web}", "{app: web, tier: front}")
    assert "pod/web configured" in kubectl(env, "apply", "-f", "-", input=changed).stdout
    pod = json.loads(kubectl(env, "get", "pod", "web", "-o", "json").stdout)
    assert pod["metadata"]["labels"] == {"app": "web", "tier": "front"}
    assert "kubectl.kubernetes.io/last-applied-configuration" in pod["metadata"]["annotations"]
    listing = json.loads(kubectl(env, "get", "pods", "-l", "tier=front", "-o", "json").stdout)
    assert [p["metadata"]["name"] for p in listing["items"]] == ["web"]
    table = kubectl(env, "get", "pods", "-o", "wide").stdout.splitlines()
    assert table[0].split()[:5] == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert table[1].split()[:3] == ["web", "0/1", "Pending"] and "node-1" in table[1]


def test_patch_status_three_ways(server: EmbeddedApiServer, env: dict[str, str]) -> None:
    kubectl(env, "apply", "-f", "-", input=POD_YAML.format(name="st", node="node-1"))
    status = {"status": {"phase": "Running", "podIP": "10.0.0.9", "podIPs": [{"ip": "10.0.0.9"}],
                         "conditions": [{"type": "Ready", "status": "True"}]}}  # fmt: skip
    kubectl(env, "patch", "pod", "st", "--subresource=status", "-p", json.dumps(status))
    kubectl(
        env, "patch", "pod", "st", "--subresource=status", "--type=merge", "-p", '{"status":{"message":"m"}}'
    )
    kubectl(env, "patch", "pod", "st", "--subresource=status", "--type=json",
            "-p", '[{"op":"add","path":"/status/reason","value":"R"}]')  # fmt: skip
    pod = json.loads(kubectl(env, "get", "pod", "st", "-o", "json").stdout)
    assert (
        pod["status"]["phase"] == "Running"
        and pod["status"]["message"] == "m"
        and pod["status"]["reason"] == "R"
    )
    bad = kubectl(env, "patch", "pod", "st", "--subresource=status", "-p",
                  '{"status":{"conditions":[{"type":"Ready","status":"Maybe"}]}}', ok=False)  # fmt: skip
    assert bad.returncode != 0 and 'Unsupported value: "Maybe"' in bad.stderr
    wide = kubectl(env, "get", "pod", "st", "-o", "wide").stdout.splitlines()[1].split()
    assert wide[2] == "R" and "10.0.0.9" in wide  # STATUS shows status.reason, as kubectl's printer does


def test_watch_sees_a_change(server: EmbeddedApiServer, env: dict[str, str]) -> None:
    kubectl(env, "apply", "-f", "-", input=POD_YAML.format(name="wt", node="node-1"))
    assert KUBECTL is not None
    proc = subprocess.Popen(
        [KUBECTL, "get", "pod", "wt", "-w", "--output-watch-events", "-o", "json"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        decoder = json.JSONDecoder()
        buffer = ""
        events: list[dict[str, object]] = []
        deadline = time.monotonic() + 20
        labelled = False
        while time.monotonic() < deadline and not any(e.get("type") == "MODIFIED" for e in events):
            buffer += proc.stdout.readline()
            try:
                event, end = decoder.raw_decode(buffer.lstrip())
            except json.JSONDecodeError:
                continue
            buffer = buffer.lstrip()[end:]
            events.append(event)
            if not labelled:
                kubectl(env, "label", "pod", "wt", "seen=yes")
                labelled = True
        assert [e["type"] for e in events][:1] == ["ADDED"]
        modified = [e for e in events if e["type"] == "MODIFIED"]
        assert modified and modified[0]["object"]["metadata"]["labels"]["seen"] == "yes"  # type: ignore[index]
    finally:
        proc.kill()
        proc.communicate()  # also closes the pipes


def test_delete_graceful_and_forced(server: EmbeddedApiServer, env: dict[str, str]) -> None:
    kubectl(env, "apply", "-f", "-", input=POD_YAML.format(name="del", node="node-1"))
    kubectl(env, "delete", "pod", "del", "--wait=false")
    pod = json.loads(kubectl(env, "get", "pod", "del", "-o", "json").stdout)
    assert pod["metadata"]["deletionTimestamp"] and pod["metadata"]["deletionGracePeriodSeconds"] == 30
    assert "Terminating" in kubectl(env, "get", "pod", "del").stdout
    out = kubectl(env, "delete", "pod", "del", "--grace-period=0", "--force")
    assert "force deleted" in out.stdout
    gone = kubectl(env, "get", "pod", "del", ok=False)
    assert gone.returncode != 0 and 'pods "del" not found' in gone.stderr


def test_unbound_pod_deleted_at_once(server: EmbeddedApiServer, env: dict[str, str]) -> None:
    manifest = POD_YAML.format(name="free", node="x").replace("  nodeName: x\n", "")
    kubectl(env, "apply", "-f", "-", input=manifest)
    kubectl(env, "delete", "pod", "free", "--timeout=20s")
    assert kubectl(env, "get", "pod", "free", ok=False).returncode != 0


def test_nodes_and_namespaces(server: EmbeddedApiServer, env: dict[str, str]) -> None:
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-1"},
            "status": {"conditions": [{"type": "Ready", "status": "True"}], "nodeInfo": {"kubeletVersion": "v1.37.0"}}}  # fmt: skip
    kubectl(env, "create", "-f", "-", input=json.dumps(node))
    row = kubectl(env, "get", "nodes").stdout.splitlines()[1].split()
    assert row[:3] == ["node-1", "Ready", "<none>"] and row[-1] == "v1.37.0"
    kubectl(env, "patch", "node", "node-1", "--subresource=status", "-p",
            '{"status":{"conditions":[{"type":"Ready","status":"False"}]}}')  # fmt: skip
    assert "NotReady" in kubectl(env, "get", "node", "node-1").stdout
    assert "kube-system" in kubectl(env, "get", "namespaces").stdout


def test_namespace_is_created_before_its_pods(server: EmbeddedApiServer, env: dict[str, str]) -> None:
    manifest = POD_YAML.format(name="ns-pod", node="node-1")
    missing = kubectl(env, "-n", "team", "create", "-f", "-", input=manifest, ok=False)
    assert missing.returncode != 0 and 'namespaces "team" not found' in missing.stderr
    # kubectl sends the Namespace as protobuf.
    assert "namespace/team created" in kubectl(env, "create", "namespace", "team").stdout
    assert "pod/ns-pod created" in kubectl(env, "-n", "team", "create", "-f", "-", input=manifest).stdout
    assert "team" in kubectl(env, "get", "namespaces", "-o", "name").stdout


def test_unknown_fields_and_server_dry_run(server: EmbeddedApiServer, env: dict[str, str]) -> None:
    manifest = POD_YAML.format(name="typo", node="node-1").replace(
        "  nodeName:", "  nodeNmae: x\n  nodeName:"
    )
    # kubectl asks for fieldValidation=Strict by default.
    strict = kubectl(env, "create", "-f", "-", input=manifest, ok=False)
    assert strict.returncode != 0
    assert 'strict decoding error: unknown field "spec.nodeNmae"' in strict.stderr
    warned = kubectl(env, "create", "--validate=warn", "--dry-run=server", "-f", "-", input=manifest)
    assert 'unknown field "spec.nodeNmae"' in warned.stderr
    assert kubectl(env, "get", "pod", "typo", ok=False).returncode != 0  # a dry run stores nothing
    kubectl(env, "create", "--validate=false", "-f", "-", input=manifest)
    pod = json.loads(kubectl(env, "get", "pod", "typo", "-o", "json").stdout)
    assert "nodeNmae" not in pod["spec"]


def test_listing_in_chunks(server: EmbeddedApiServer, env: dict[str, str]) -> None:
    kubectl(env, "create", "-f", "-", input=NAMESPACE_YAML.format(name="chunks"))  # from a manifest too
    for i in range(7):
        kubectl(env, "-n", "chunks", "create", "-f", "-", input=POD_YAML.format(name=f"c{i}", node="node-1"))
    lists = server.counter.get("list")
    names = kubectl(env, "-n", "chunks", "get", "pods", "--chunk-size=2", "-o", "name").stdout.split()
    assert names == [f"pod/c{i}" for i in range(7)]
    table = kubectl(env, "-n", "chunks", "get", "pods", "--chunk-size=3").stdout.splitlines()
    assert [row.split()[0] for row in table[1:]] == [f"c{i}" for i in range(7)]
    assert server.counter.get("list") - lists >= 4 + 3  # ceil(7/2) + ceil(7/3) pages: really paged
