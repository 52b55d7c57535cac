"""``kubectl patch pod --subresource resize`` against the embedded API server (pods/resize, v1.37)."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

from podstatus.server import EmbeddedApiServer
from testkit import kubectl_path

KUBECTL = kubectl_path()


def _pod_yaml(name: str, *, cpu: str = "100m", memory: str = "64Mi", limit_cpu: str | None = None,
              extra: str = "") -> str:  # fmt: skip
    limits = f"\n      limits: {{cpu: {limit_cpu}, memory: {memory}}}" if limit_cpu else ""
    return f"""\
apiVersion: v1
kind: Pod
metadata:
  name: {name}
  labels: {{app: rs}}
spec:
  nodeName: node-1
  containers:
  - name: app
    image: nginx:1.27
    resources:
      requests: {{cpu: {cpu}, memory: {memory}}}{limits}
{extra}"""


@pytest.fixture(scope="module")
def server() -> Iterator[EmbeddedApiServer]:
    with EmbeddedApiServer() as srv:
        yield srv


NODE = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {"name": "node-1", "labels": {"kubernetes.io/os": "linux"}},
    "status": {"capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"},
               "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}},
}  # fmt: skip


@pytest.fixture(scope="module")
def env(server: EmbeddedApiServer, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    home = tmp_path_factory.mktemp("kubectl-home")
    config = server.write_kubeconfig(home / "config")
    out = {**os.environ, "KUBECONFIG": str(config), "HOME": str(home)}
    # The pods' node: kube-apiserver's resize admission reads its allocatable (and declared features).
    kubectl(out, "create", "-f", "-", input=json.dumps(NODE))
    return out


def kubectl(
    env: dict[str, str], *args: str, input: str | None = None, ok: bool = True
) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([KUBECTL, *args], env=env, input=input, capture_output=True, text=True, timeout=60)
    if ok:
        assert proc.returncode == 0, proc.stderr
    return proc


def get(env: dict[str, str], name: str) -> dict[str, Any]:
    return json.loads(kubectl(env, "get", "pod", name, "-o", "json").stdout)


def resize(env: dict[str, str], name: str, patch: Any, *, ok: bool = True,
           kind: str = "strategic") -> subprocess.CompletedProcess[str]:  # fmt: skip
    return kubectl(env, "patch", "pod", name, "--subresource", "resize", "--type", kind,
                   "--patch", json.dumps(patch), ok=ok)  # fmt: skip


def _containers(cpu: str, memory: str = "64Mi", **more: Any) -> dict[str, Any]:
    return {"spec": {"containers": [{"name": "app", "resources": {"requests": {"cpu": cpu, "memory": memory}},
                                     **more}]}}  # fmt: skip


def test_discovery_lists_pods_resize(env: dict[str, str]) -> None:
    out = kubectl(env, "get", "--raw", "/api/v1").stdout
    resources = {r["name"]: r for r in json.loads(out)["resources"]}
    assert resources["pods/resize"] == {
        "name": "pods/resize", "singularName": "", "namespaced": True, "kind": "Pod",
        "verbs": ["get", "patch", "update"],
    }  # fmt: skip


def test_resize_changes_resources_and_bumps_generation(env: dict[str, str]) -> None:
    kubectl(env, "apply", "-f", "-", input=_pod_yaml("grow"))
    before = get(env, "grow")
    assert before["metadata"]["generation"] == 1
    # Only the resources of the patch survive: the label and image in it are dropped, not refused.
    patch = _containers("300m", "128Mi")
    patch["metadata"] = {"labels": {"app": "other"}}
    patch["spec"]["containers"][0]["image"] = "nginx:9"
    out = resize(env, "grow", patch).stdout
    assert "pod/grow patched" in out
    after = get(env, "grow")
    app = after["spec"]["containers"][0]
    assert app["resources"]["requests"] == {"cpu": "300m", "memory": "128Mi"}
    assert app["image"] == "nginx:1.27"
    assert after["metadata"]["labels"] == {"app": "rs"}
    assert after["metadata"]["generation"] == 2
    assert after["status"] == before["status"]
    # GET on the subresource answers the pod itself.
    got = json.loads(kubectl(env, "get", "--raw", "/api/v1/namespaces/default/pods/grow/resize").stdout)
    assert got["kind"] == "Pod" and got["metadata"]["generation"] == 2
    # The same resources again: nothing changed, the generation stays.
    resize(env, "grow", _containers("300m", "128Mi"))
    assert get(env, "grow")["metadata"]["generation"] == 2
    # Removing a request is refused.
    patch = [{"op": "remove", "path": "/spec/containers/0/resources/requests/memory"}]
    proc = resize(env, "grow", patch, kind="json", ok=False)
    assert (
        "spec.containers[0].resources.requests: Forbidden: resource requests cannot be removed" in proc.stderr
    )


def test_resize_through_the_main_resource_is_refused(env: dict[str, str]) -> None:
    kubectl(env, "apply", "-f", "-", input=_pod_yaml("main"))
    proc = kubectl(env, "patch", "pod", "main", "--patch", json.dumps(_containers("200m")), ok=False)
    assert proc.returncode != 0 and "spec: Forbidden: pod updates may not change fields" in proc.stderr


def test_resize_validation_errors(env: dict[str, str]) -> None:
    kubectl(env, "apply", "-f", "-", input=_pod_yaml("bad", limit_cpu="500m"))
    # Requests above the limit.
    proc = resize(env, "bad", {"spec": {"containers": [{"name": "app", "resources": {"requests": {"cpu": "1"}}}]}},
                  ok=False)  # fmt: skip
    assert (
        'The Pod "bad" is invalid: spec.containers[0].resources.requests: Invalid value: "1": '
        "must be less than or equal to cpu limit of 500m"
    ) in proc.stderr
    # Removing a limit (a request removed under a limit comes back by defaulting).
    patch = [{"op": "remove", "path": "/spec/containers/0/resources/limits/memory"}]
    proc = resize(env, "bad", patch, kind="json", ok=False)
    assert "spec.containers[0].resources.limits: Forbidden: resource limits cannot be removed" in proc.stderr
    # A resource other than cpu and memory.
    patch2 = [
        {"op": "add", "path": "/spec/containers/0/resources/requests/ephemeral-storage", "value": "1Gi"}
    ]
    proc = resize(env, "bad", patch2, kind="json", ok=False)
    assert (
        'The Pod "bad" is invalid: spec: Forbidden: only cpu and memory resources are mutable' in proc.stderr
    )
    # resizePolicy is carried to the pod but may not change (ValidatePodResize compares it).
    policy = [{"resourceName": "cpu", "restartPolicy": "RestartContainer"}]
    proc = resize(env, "bad", {"spec": {"containers": [{"name": "app", "resizePolicy": policy}]}}, ok=False)
    assert "spec: Forbidden: only cpu and memory resources are mutable" in proc.stderr
    # The QoS class may not change: Burstable to Guaranteed.
    guaranteed = {"spec": {"containers": [{"name": "app", "resources": {
        "requests": {"cpu": "500m", "memory": "64Mi"}, "limits": {"cpu": "500m", "memory": "64Mi"}}}]}}  # fmt: skip
    proc = resize(env, "bad", guaranteed, ok=False)
    assert (
        'spec: Invalid value: "Burstable": Pod QOS Class may not change as a result of resizing'
        in proc.stderr
    )
    # Renaming a container.
    proc = resize(env, "bad", [{"op": "replace", "path": "/spec/containers/0/name", "value": "x"}], kind="json",
                  ok=False)  # fmt: skip
    assert (
        "spec.containers[0].name: Forbidden: containers may not be renamed or reordered on resize"
        in proc.stderr
    )
    # Nothing of it was stored.
    assert get(env, "bad")["metadata"]["generation"] == 1


def test_resize_refused_while_running_without_resources_in_status(
    server: EmbeddedApiServer, env: dict[str, str]
) -> None:
    """isPodResizeRequestSupported: a running container whose status has no resources is on an old node."""
    kubectl(env, "apply", "-f", "-", input=_pod_yaml("oldnode"))
    status = {"status": {"phase": "Running", "containerStatuses": [{
        "name": "app", "image": "nginx:1.27", "imageID": "", "ready": True, "restartCount": 0,
        "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}}]}}  # fmt: skip
    kubectl(env, "patch", "pod", "oldnode", "--subresource=status", "--type=merge", "-p", json.dumps(status))
    proc = resize(env, "oldnode", _containers("200m"), ok=False)
    assert "spec: Forbidden: Pod running on node without support for resize" in proc.stderr
    status["status"]["containerStatuses"][0]["resources"] = {"requests": {"cpu": "100m", "memory": "64Mi"}}
    kubectl(env, "patch", "pod", "oldnode", "--subresource=status", "--type=merge", "-p", json.dumps(status))
    resize(env, "oldnode", _containers("200m"))
    assert get(env, "oldnode")["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "200m"


def test_static_pods_cannot_be_resized(env: dict[str, str]) -> None:
    extra = ""
    manifest = _pod_yaml("mirror", extra=extra).replace(
        "  labels: {app: rs}", "  labels: {app: rs}\n  annotations: {kubernetes.io/config.mirror: abc}"
    )
    kubectl(env, "apply", "-f", "-", input=manifest)
    proc = resize(env, "mirror", _containers("200m"), ok=False)
    assert 'The Pod "mirror" is invalid: []: Forbidden: static pods cannot be resized' in proc.stderr


def test_resize_of_a_missing_pod_and_other_kinds(env: dict[str, str]) -> None:
    proc = resize(env, "nope", _containers("200m"), ok=False)
    assert 'pods "nope" not found' in proc.stderr
    out = kubectl(env, "get", "--raw", "/api/v1/nodes/x/resize", ok=False)
    assert "the server could not find the requested resource" in out.stderr


def test_replace_through_the_resize_subresource(env: dict[str, str]) -> None:
    """PUT pods/NAME/resize: the whole pod is sent, only its resources are taken."""
    kubectl(env, "apply", "-f", "-", input=_pod_yaml("put"))
    pod = get(env, "put")
    pod["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "250m"
    pod["metadata"]["labels"] = {"app": "changed"}
    kubectl(env, "replace", "--subresource", "resize", "-f", "-", input=json.dumps(pod))
    after = get(env, "put")
    assert after["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "250m"
    assert after["metadata"]["labels"] == {"app": "rs"}
    assert after["metadata"]["generation"] == 2


def test_resize_admission_against_the_node(env: dict[str, str]) -> None:
    """PodResizeValidator and NodeDeclaredFeatureValidator: 403s from what the pod's node says."""
    kubectl(env, "apply", "-f", "-", input=_pod_yaml("adm"))
    proc = resize(env, "adm", _containers("5", "9Gi"), ok=False)
    assert (
        'pods "adm" is forbidden: node didn\'t have enough allocatable resources: '
        "cpu, requested: 5000, allocatable: 4000; memory, requested: 9663676416, allocatable: 8589934592"
    ) in proc.stderr
    # Exactly the node's allocatable is allowed.
    resize(env, "adm", _containers("4", "8Gi"))
    # A pod on a node the server does not have.
    kubectl(env, "apply", "-f", "-", input=_pod_yaml("lost").replace("nodeName: node-1", "nodeName: node-9"))
    proc = resize(env, "lost", _containers("200m"), ok=False)
    assert 'pods "lost" is forbidden: node "node-9" not found' in proc.stderr
    # An init container resize needs the node to declare InPlacePodVerticalScalingInitContainers.
    manifest = _pod_yaml("init") + (
        "  initContainers:\n  - name: setup\n    image: busybox:1.36\n"
        "    resources:\n      requests: {cpu: 100m, memory: 64Mi}\n"
    )
    kubectl(env, "apply", "-f", "-", input=manifest)
    patch = {"spec": {"initContainers": [{"name": "setup", "resources": {"requests": {"cpu": "200m"}}}]}}
    proc = resize(env, "init", patch, ok=False)
    assert (
        'pods "init" is forbidden: pod update requires features InPlacePodVerticalScalingInitContainers '
        'which are not available on node "node-1"'
    ) in proc.stderr
    kubectl(env, "patch", "node", "node-1", "--subresource=status", "--type=merge",
            "-p", json.dumps({"status": {"declaredFeatures": ["InPlacePodVerticalScalingInitContainers"]}}))  # fmt: skip
    resize(env, "init", patch)
    assert get(env, "init")["spec"]["initContainers"][0]["resources"]["requests"]["cpu"] == "200m"
