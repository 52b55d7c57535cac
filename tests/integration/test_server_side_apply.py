"""Server-side apply and managedFields of the embedded API server, with real clients over HTTP:
kubectl (apply --server-side, diff, get --show-managed-fields) and lightkube's Client.apply()."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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
  containers:
  - name: app
    image: {image}
"""


@pytest.fixture(scope="module")
def server() -> Iterator[EmbeddedApiServer]:
    with EmbeddedApiServer() as srv:
        yield srv


@pytest.fixture(scope="module")
def kubeconfig(server: EmbeddedApiServer, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return server.write_kubeconfig(tmp_path_factory.mktemp("ssa") / "config")


@pytest.fixture(scope="module")
def env(kubeconfig: Path) -> dict[str, str]:
    # A private HOME keeps kubectl's discovery cache out of the user's.
    return {**os.environ, "KUBECONFIG": str(kubeconfig), "HOME": str(kubeconfig.parent)}


def kubectl(env: dict[str, str], *args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
    assert KUBECTL is not None
    return subprocess.run([KUBECTL, *args], env=env, input=input, capture_output=True, text=True, timeout=60)


def ok(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def managed(env: dict[str, str], name: str) -> dict[str, dict[str, Any]]:
    pod = json.loads(ok(kubectl(env, "get", "pod", name, "-o", "json", "--show-managed-fields")))
    return {e["manager"]: e for e in pod["metadata"]["managedFields"]}


def test_apply_server_side_twice_with_a_change(env: dict[str, str]) -> None:
    manifest = POD_YAML.format(name="ssa1", image="nginx:1.27")
    assert "pod/ssa1 serverside-applied" in ok(
        kubectl(env, "apply", "--server-side", "-f", "-", input=manifest)
    )
    first = json.loads(ok(kubectl(env, "get", "pod", "ssa1", "-o", "json")))
    assert "managedFields" not in first["metadata"]  # kubectl hides them unless asked
    changed = manifest.replace("nginx:1.27", "nginx:1.28").replace("{app: web}", "{app: web, tier: front}")
    assert "serverside-applied" in ok(kubectl(env, "apply", "--server-side", "-f", "-", input=changed))
    pod = json.loads(ok(kubectl(env, "get", "pod", "ssa1", "-o", "json")))
    assert pod["spec"]["containers"][0]["image"] == "nginx:1.28"
    assert pod["metadata"]["labels"] == {"app": "web", "tier": "front"}
    assert int(pod["metadata"]["resourceVersion"]) > int(first["metadata"]["resourceVersion"])
    entry = managed(env, "ssa1")["kubectl"]
    assert entry["operation"] == "Apply" and entry["fieldsV1"]["f:metadata"] == {
        "f:labels": {"f:app": {}, "f:tier": {}}
    }
    # A label left out of the manifest goes: nobody else owns it.
    ok(kubectl(env, "apply", "--server-side", "-f", "-", input=manifest.replace("nginx:1.27", "nginx:1.28")))
    pod = json.loads(ok(kubectl(env, "get", "pod", "ssa1", "-o", "json")))
    assert pod["metadata"]["labels"] == {"app": "web"}


def test_conflict_between_two_managers_and_force(env: dict[str, str]) -> None:
    manifest = POD_YAML.format(name="ssa2", image="nginx:1.27")
    ok(kubectl(env, "apply", "--server-side", "-f", "-", input=manifest))
    theirs = manifest.replace("nginx:1.27", "nginx:1.29")
    proc = kubectl(env, "apply", "--server-side", "--field-manager=deployer", "-f", "-", input=theirs)
    assert proc.returncode == 1
    assert (
        'Apply failed with 1 conflict: conflict with "kubectl": .spec.containers[name="app"].image'
        in proc.stderr
    )
    assert "--force-conflicts" in proc.stderr
    ok(
        kubectl(
            env,
            "apply",
            "--server-side",
            "--field-manager=deployer",
            "--force-conflicts",
            "-f",
            "-",
            input=theirs,
        )
    )
    pod = json.loads(ok(kubectl(env, "get", "pod", "ssa2", "-o", "json")))
    assert pod["spec"]["containers"][0]["image"] == "nginx:1.29"
    entries = managed(env, "ssa2")
    item = 'k:{"name":"app"}'
    assert "f:image" in entries["deployer"]["fieldsV1"]["f:spec"]["f:containers"][item]
    assert "f:image" not in entries["kubectl"]["fieldsV1"]["f:spec"]["f:containers"][item]


def test_diff_exit_codes(env: dict[str, str], tmp_path: Path) -> None:
    path = tmp_path / "pod.yaml"
    path.write_text(POD_YAML.format(name="ssa3", image="nginx:1.27"))
    ok(kubectl(env, "apply", "--server-side", "-f", str(path)))
    before = json.loads(ok(kubectl(env, "get", "pod", "ssa3", "-o", "json")))
    same = kubectl(env, "diff", "--server-side", "-f", str(path))
    assert same.returncode == 0 and same.stdout == "", same.stderr
    path.write_text(POD_YAML.format(name="ssa3", image="nginx:1.30"))
    changed = kubectl(env, "diff", "--server-side", "-f", str(path))
    assert changed.returncode == 1, changed.stderr
    assert "-  - image: nginx:1.27" in changed.stdout and "+  - image: nginx:1.30" in changed.stdout
    # The dry run changed nothing.
    after = json.loads(ok(kubectl(env, "get", "pod", "ssa3", "-o", "json")))
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    assert after["spec"]["containers"][0]["image"] == "nginx:1.27"


def test_show_managed_fields_after_create_and_status_update(env: dict[str, str]) -> None:
    ok(kubectl(env, "create", "-f", "-", input=POD_YAML.format(name="ssa4", image="nginx:1.27")))
    status = {"status": {"conditions": [{"type": "Ready", "status": "True"}]}}
    ok(kubectl(env, "patch", "pod", "ssa4", "--subresource=status", "--field-manager=my-kubelet",
               "-p", json.dumps(status)))  # fmt: skip
    text = ok(kubectl(env, "get", "pod", "ssa4", "-o", "yaml", "--show-managed-fields"))
    assert (
        "manager: kubectl-create" in text and "manager: my-kubelet" in text and "subresource: status" in text
    )
    entries = managed(env, "ssa4")
    create = entries["kubectl-create"]
    assert (create["operation"], create["apiVersion"], create["fieldsType"]) == ("Update", "v1", "FieldsV1")
    assert create["fieldsV1"]["f:metadata"] == {"f:labels": {".": {}, "f:app": {}}}
    assert (
        entries["my-kubelet"]["fieldsV1"]["f:status"]["f:conditions"]['k:{"type":"Ready"}']["f:status"] == {}
    )
    # kubectl label changes an owned field: it moves to the kubectl-label manager.
    ok(kubectl(env, "label", "pod", "ssa4", "app=db", "--overwrite"))
    entries = managed(env, "ssa4")
    assert entries["kubectl-label"]["fieldsV1"] == {"f:metadata": {"f:labels": {"f:app": {}}}}
    assert entries["kubectl-create"]["fieldsV1"]["f:metadata"] == {"f:labels": {}}


def test_server_side_apply_over_client_side_apply(env: dict[str, str]) -> None:
    manifest = POD_YAML.format(name="ssa5", image="nginx:1.27")
    ok(kubectl(env, "apply", "-f", "-", input=manifest))
    assert "kubectl-client-side-apply" in managed(env, "ssa5")
    # kubectl moves its own fields over without a conflict.
    ok(kubectl(env, "apply", "--server-side", "-f", "-", input=manifest.replace("nginx:1.27", "nginx:1.28")))
    entries = managed(env, "ssa5")
    assert "kubectl" in entries and "kubectl-client-side-apply" not in entries
    pod = json.loads(ok(kubectl(env, "get", "pod", "ssa5", "-o", "json")))
    last = json.loads(pod["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"])
    assert last["spec"]["containers"][0]["image"] == "nginx:1.28"


def test_lightkube_client_apply(kubeconfig: Path) -> None:
    from lightkube import Client, KubeConfig
    from lightkube.models.core_v1 import Container, PodSpec
    from lightkube.models.meta_v1 import ObjectMeta
    from lightkube.resources.core_v1 import Pod

    client = Client(KubeConfig.from_file(str(kubeconfig)), field_manager="lk")
    other = Client(KubeConfig.from_file(str(kubeconfig)), field_manager="lk-other")
    with client, other:
        _lightkube_apply(client, other, Pod(
            metadata=ObjectMeta(name="lk1", namespace="default", labels={"app": "lk"}),
            spec=PodSpec(containers=[Container(name="app", image="nginx:1.27")]),
        ))  # fmt: skip


def _lightkube_apply(client: Any, other: Any, pod: Any) -> None:
    from lightkube.core.exceptions import ApiError

    created = client.apply(pod)
    assert created.metadata is not None and created.metadata.managedFields is not None
    (entry,) = created.metadata.managedFields
    assert (entry.manager, entry.operation) == ("lk", "Apply")
    assert pod.spec is not None
    pod.spec.containers[0].image = "nginx:1.28"
    updated = client.apply(pod)
    assert updated.spec is not None and updated.spec.containers[0].image == "nginx:1.28"
    pod.spec.containers[0].image = "nginx:1.29"
    with pytest.raises(ApiError) as info:
        other.apply(pod)
    assert info.value.status.code == 409 and info.value.status.reason == "Conflict"
    assert other.apply(pod, force=True).spec.containers[0].image == "nginx:1.29"


def test_client_side_diff_exit_codes(env: dict[str, str], tmp_path: Path) -> None:
    # Plain "kubectl diff" sends a dry-run strategic merge patch of its last-applied configuration.
    path = tmp_path / "pod.yaml"
    path.write_text(POD_YAML.format(name="csa1", image="nginx:1.27"))
    ok(kubectl(env, "apply", "-f", str(path)))
    same = kubectl(env, "diff", "-f", str(path))
    assert same.returncode == 0 and same.stdout == "", same.stderr
    path.write_text(POD_YAML.format(name="csa1", image="nginx:1.30"))
    changed = kubectl(env, "diff", "-f", str(path))
    assert changed.returncode == 1, changed.stderr
    assert "+  - image: nginx:1.30" in changed.stdout
    pod = json.loads(ok(kubectl(env, "get", "pod", "csa1", "-o", "json")))
    assert pod["spec"]["containers"][0]["image"] == "nginx:1.27"
