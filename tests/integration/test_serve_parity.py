"""What kubectl and the `kubernetes` package meet first against `podstatus serve` (issue 22, item 14).

Each case talks to a real `EmbeddedApiServer` on loopback with a token and TLS, as `podstatus
serve` runs it: negative counts refused, the public health and version endpoints, `kubectl auth
can-i` / `whoami`, YAML answers, `kubectl explain` from the real OpenAPI schema, and a watch from a
resourceVersion older than the kept history.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import urllib3
import yaml
from kubernetes import client, watch
from kubernetes.client.rest import ApiException

from podstatus.server import EmbeddedApiServer
from podstatus.server.storage.store import Store
from testkit import kubectl_path

KUBECTL = kubectl_path()
TOKEN = "parity-token-for-tests"


def _pod(name: str) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "busybox"}]},
    }


@pytest.fixture(scope="module")
def secured() -> Iterator[EmbeddedApiServer]:
    with EmbeddedApiServer(token=TOKEN, tls=True) as srv:
        yield srv


@pytest.fixture(scope="module")
def kube_like() -> Iterator[EmbeddedApiServer]:
    with EmbeddedApiServer(token=TOKEN, tls=True, strict_status=False, reap_terminating=False) as srv:
        yield srv


def _core(server: EmbeddedApiServer, tmp_path: Path) -> client.CoreV1Api:
    """The official client, configured from the kubeconfig the server writes (CA + token)."""
    from kubernetes import config as kube_config

    path = server.write_kubeconfig(tmp_path / f"kubeconfig-{server.port}")
    configuration = client.Configuration()
    kube_config.load_kube_config(config_file=str(path), client_configuration=configuration)
    return client.CoreV1Api(client.ApiClient(configuration))


def _http(server: EmbeddedApiServer) -> urllib3.PoolManager:
    assert server.tls is not None
    return urllib3.PoolManager(cert_reqs="CERT_REQUIRED", ca_cert_data=server.tls.ca_pem.decode())


def _request(
    server: EmbeddedApiServer,
    method: str,
    path: str,
    headers: dict[str, str] | None = None,
    body: bytes = b"",
) -> urllib3.BaseHTTPResponse:
    return _http(server).request(
        method, server.url + path, headers=headers or {}, body=body or None, retries=False, timeout=30
    )


def _auth(extra: dict[str, str] | None = None) -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKEN}", **(extra or {})}


def _kubectl(
    server: EmbeddedApiServer, home: Path, *args: str, ok: bool = True
) -> subprocess.CompletedProcess[str]:
    config = server.write_kubeconfig(home / "config")
    # A private HOME keeps kubectl's discovery cache (and its OpenAPI cache) out of the user's.
    env = {**os.environ, "KUBECONFIG": str(config), "HOME": str(home)}
    proc = subprocess.run([KUBECTL, *args], env=env, capture_output=True, text=True, timeout=60)
    if ok:
        assert proc.returncode == 0, proc.stderr
    return proc


# -- negative counts ------------------------------------------------------------------------------


def _status_with(restart_count: int) -> dict[str, object]:
    state = {"running": {"startedAt": "2026-01-01T00:00:00Z"}}
    cs = {"name": "c", "image": "busybox", "imageID": "", "ready": True, "restartCount": restart_count,
          "state": state}  # fmt: skip
    return {"status": {"phase": "Running", "containerStatuses": [cs]}}


def test_a_negative_restart_count_is_refused_with_422(secured: EmbeddedApiServer, tmp_path: Path) -> None:
    api = _core(secured, tmp_path)
    api.create_namespaced_pod("default", _pod("neg-restarts"))
    for count in (-1, -2147483648):
        with pytest.raises(ApiException) as info:
            api.patch_namespaced_pod_status("neg-restarts", "default", _status_with(count))
        assert info.value.status == 422
        status = json.loads(info.value.body)
        assert status["reason"] == "Invalid"
        assert status["details"]["causes"] == [{
            "reason": "FieldValueInvalid", "field": "status.containerStatuses[0].restartCount",
            "message": f"Invalid value: {count}: must be greater than or equal to 0",
        }]  # fmt: skip
    # Nothing was written; a count of 0 and up still goes through.
    assert api.read_namespaced_pod_status("neg-restarts", "default").status.container_statuses is None
    done = api.patch_namespaced_pod_status("neg-restarts", "default", _status_with(3))
    assert done.status.container_statuses[0].restart_count == 3


def test_negative_observed_generations_are_refused_as_kube_apiserver_does(
    secured: EmbeddedApiServer, kube_like: EmbeddedApiServer, tmp_path: Path
) -> None:
    # ValidatePodStatusUpdate of v1.37.2 checks these itself: refused in both configurations.
    for server in (secured, kube_like):
        api = _core(server, tmp_path)
        api.create_namespaced_pod("default", _pod("neg-generation"))
        for patch, where in (
            ({"status": {"observedGeneration": -1}}, "status.observedGeneration"),
            ({"status": {"conditions": [{"type": "Ready", "status": "True", "observedGeneration": -5}]}},
             "status.conditions[0].observedGeneration"),
        ):  # fmt: skip
            with pytest.raises(ApiException) as info:
                api.patch_namespaced_pod_status("neg-generation", "default", patch)
            assert info.value.status == 422
            causes = json.loads(info.value.body)["details"]["causes"]
            assert [c["field"] for c in causes] == [where]
            assert causes[0]["message"].endswith("must be a non-negative integer")


def test_kube_like_accepts_a_negative_restart_count_as_v1_37_2_does(
    kube_like: EmbeddedApiServer, tmp_path: Path
) -> None:
    # kube-apiserver v1.37.2 does not validate restartCount (the negative check is podstatus's own).
    api = _core(kube_like, tmp_path)
    api.create_namespaced_pod("default", _pod("neg-kube-like"))
    done = api.patch_namespaced_pod_status("neg-kube-like", "default", _status_with(-1))
    assert done.status.container_statuses[0].restart_count == -1


# -- the public endpoints -------------------------------------------------------------------------


def test_health_and_version_answer_anyone_and_nothing_else_does(secured: EmbeddedApiServer) -> None:
    for path in ("/healthz", "/livez", "/readyz"):
        resp = _request(secured, "GET", path)
        assert (resp.status, resp.data) == (200, b"ok"), path
    version = _request(secured, "GET", "/version")
    assert version.status == 200 and json.loads(version.data)["major"] == "1"
    # Everything else still needs the token; a wrong token is refused even on the public paths.
    for path in ("/api/v1/namespaces/default/pods", "/api", "/apis", "/openapi/v3", "/healthz/ping"):
        assert _request(secured, "GET", path).status == 401, path
    for path in ("/healthz", "/version"):
        assert _request(secured, "GET", path, {"Authorization": "Bearer wrong"}).status == 401
    assert _request(secured, "POST", "/healthz").status == 401


def test_the_official_client_reads_version_without_credentials(
    secured: EmbeddedApiServer, tmp_path: Path
) -> None:
    assert secured.tls is not None
    ca = tmp_path / "ca.crt"
    ca.write_bytes(secured.tls.ca_pem)
    configuration = client.Configuration()
    configuration.host = secured.url
    configuration.ssl_ca_cert = str(ca)
    with client.ApiClient(configuration) as anonymous:
        assert client.VersionApi(anonymous).get_code().git_version.startswith("v1.")
        with pytest.raises(ApiException) as info:
            client.CoreV1Api(anonymous).list_namespaced_pod("default")
        assert info.value.status == 401


# -- YAML ---------------------------------------------------------------------------------------------


def test_accept_yaml_gets_yaml_for_gets_lists_and_errors(secured: EmbeddedApiServer) -> None:
    resp = _request(secured, "POST", "/api/v1/namespaces/default/pods", _auth({"Content-Type": "application/json"}),
                    json.dumps(_pod("in-yaml")).encode())  # fmt: skip
    assert resp.status == 201
    one = _request(
        secured, "GET", "/api/v1/namespaces/default/pods/in-yaml", _auth({"Accept": "application/yaml"})
    )
    assert one.status == 200 and one.headers["Content-Type"] == "application/yaml"
    assert not one.data.lstrip().startswith(b"{")
    pod = yaml.safe_load(one.data)
    assert pod["kind"] == "Pod" and pod["spec"]["containers"][0]["name"] == "c"
    # Keys sorted and lists flush with their key, as Go's YAML writer lays them out.
    assert one.data.startswith(b"apiVersion: v1\nkind: Pod\nmetadata:\n")
    assert b"\n  containers:\n  - image: busybox\n" in one.data
    assert b'\n  creationTimestamp: "20' in one.data  # would read as a timestamp: double quotes
    listing = _request(
        secured, "GET", "/api/v1/namespaces/default/pods", _auth({"Accept": "application/yaml"})
    )
    assert listing.status == 200 and yaml.safe_load(listing.data)["kind"] == "PodList"
    missing = _request(
        secured, "GET", "/api/v1/namespaces/default/pods/nope", _auth({"Accept": "application/yaml"})
    )
    assert missing.status == 404 and missing.headers["Content-Type"] == "application/yaml"
    assert yaml.safe_load(missing.data) == {
        "apiVersion": "v1", "kind": "Status", "metadata": {}, "status": "Failure", "code": 404,
        "reason": "NotFound", "message": 'pods "nope" not found',
        "details": {"name": "nope", "kind": "pods"},
    }  # fmt: skip
    # The client's order and q decide; JSON stays the default.
    both = _request(secured, "GET", "/api/v1/namespaces/default/pods/in-yaml",
                    _auth({"Accept": "application/json;q=0.5, application/yaml"}))  # fmt: skip
    assert both.headers["Content-Type"] == "application/yaml"
    plain = _request(secured, "GET", "/api/v1/namespaces/default/pods/in-yaml", _auth({"Accept": "*/*"}))
    assert plain.headers["Content-Type"] == "application/json"
    # A watch has no YAML stream; protobuf alone is still refused.
    watch = _request(secured, "GET", "/api/v1/namespaces/default/pods?watch=1&timeoutSeconds=1",
                     _auth({"Accept": "application/yaml"}))  # fmt: skip
    assert watch.status == 406 and watch.headers["Content-Type"] == "application/yaml"
    assert yaml.safe_load(watch.data)["message"] == (
        "only the following media types are accepted: application/json;stream=watch"
    )
    refused = _request(
        secured, "GET", "/api/v1/pods", _auth({"Accept": "application/vnd.kubernetes.protobuf"})
    )
    assert refused.status == 406
    assert json.loads(refused.data)["message"] == (
        "only the following media types are accepted: application/json, application/yaml"
    )


# -- watch history ------------------------------------------------------------------------------------


def _watch_lines(server: EmbeddedApiServer, rv: int) -> tuple[int, list[dict[str, Any]]]:
    resp = _request(server, "GET", f"/api/v1/namespaces/default/pods?watch=1&resourceVersion={rv}&timeoutSeconds=1",
                    _auth())  # fmt: skip
    return resp.status, [json.loads(line) for line in resp.data.splitlines() if line.strip()]


def test_a_watch_from_before_the_kept_window_gets_one_410_error_event(tmp_path: Path) -> None:
    # `podstatus serve`'s window (kube-apiserver's watch cache): the newest 100 changes of a
    # resource and every change of the last 75 s. The store's clock dates the changes.
    # (storage.tables.WATCH_CACHE_MIN_CHANGES, WATCH_CACHE_SECONDS, WATCH_CACHE_MAX_CHANGES, which cli.py uses.)
    now = [1_000_000.0]
    store = Store(history_size=100, history_seconds=75.0, max_history=100 * 1024, clock=lambda: now[0])
    with EmbeddedApiServer(token=TOKEN, tls=True, store=store) as server:
        api = _core(server, tmp_path)
        for i in range(150):
            api.create_namespaced_pod("default", _pod(f"w{i}"))
        # 150 changes within 75 s: all kept, a watch from the first replays the other 149.
        code, events = _watch_lines(server, 1)
        assert code == 200 and len(events) == 149 and {e["type"] for e in events} == {"ADDED"}
        now[0] += 80
        api.create_namespaced_pod("default", _pod("late"))
        # 151 changes, the older ones past 75 s: the newest 100 stay (resourceVersions 52..151).
        code, events = _watch_lines(server, 1)
        assert code == 200 and len(events) == 1
        assert events[0] == {"type": "ERROR", "object": {
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "too old resource version: 1 (51)", "reason": "Expired", "code": 410,
        }}  # fmt: skip
        code, events = _watch_lines(server, 51)
        assert code == 200 and len(events) == 100 and events[-1]["object"]["metadata"]["name"] == "late"
        # The official client's watch sees the 410 (it retries once, then raises).
        with pytest.raises(ApiException) as info:
            for _ in watch.Watch().stream(api.list_namespaced_pod, "default", resource_version="1",
                                          timeout_seconds=2):  # fmt: skip
                pass
        assert info.value.status == 410 and "too old resource version: 1 (51)" in str(info.value.reason)


# -- kubectl auth ----------------------------------------------------------------------------------


def test_kubectl_auth_whoami_and_can_i(secured: EmbeddedApiServer, tmp_path: Path) -> None:
    who = json.loads(_kubectl(secured, tmp_path, "auth", "whoami", "-o", "json").stdout)
    assert who["kind"] == "SelfSubjectReview"
    assert who["status"]["userInfo"] == {
        "username": "podstatus", "groups": ["system:masters", "system:authenticated"],
    }  # fmt: skip
    # The token may do everything (system:masters): kubectl says so, for objects and for URLs.
    for question in (["create", "pods"], ["patch", "pods", "--subresource=status"], ["delete", "nodes"],
                     ["get", "/healthz"]):  # fmt: skip
        assert _kubectl(secured, tmp_path, "auth", "can-i", *question).stdout == "yes\n", question
    rules = _kubectl(secured, tmp_path, "auth", "can-i", "--list").stdout.splitlines()
    assert rules[1].split() == ["*.*", "[]", "[]", "[*]"]
    # kubectl finds the reviews through discovery.
    found = _kubectl(
        secured, tmp_path, "api-resources", "--api-group=authorization.k8s.io", "-o", "name"
    ).stdout
    assert found.split() == ["selfsubjectaccessreviews.authorization.k8s.io",
                             "selfsubjectrulesreviews.authorization.k8s.io"]  # fmt: skip
    # No RBAC here: a question about another user is refused, not answered for the caller.
    other = _kubectl(secured, tmp_path, "auth", "can-i", "get", "pods", "--as=bob", ok=False)
    assert other.returncode != 0 and "impersonation is not supported by this server" in other.stderr


def test_the_official_client_asks_the_reviews(secured: EmbeddedApiServer, tmp_path: Path) -> None:
    api_client = _core(secured, tmp_path).api_client
    who = client.AuthenticationV1Api(api_client).create_self_subject_review(client.V1SelfSubjectReview())
    assert who.status.user_info.username == "podstatus"
    authz = client.AuthorizationV1Api(api_client)
    spec = client.V1SelfSubjectAccessReviewSpec(
        resource_attributes=client.V1ResourceAttributes(verb="watch", resource="pods", namespace="default")
    )
    review = authz.create_self_subject_access_review(client.V1SelfSubjectAccessReview(spec=spec))
    assert review.status.allowed is True and review.spec.resource_attributes.verb == "watch"
    with pytest.raises(ApiException) as info:
        authz.create_self_subject_access_review(
            client.V1SelfSubjectAccessReview(spec=client.V1SelfSubjectAccessReviewSpec())
        )
    assert info.value.status == 422
    # kube-apiserver v1.37.2's words, empty kind included.
    assert json.loads(info.value.body)["message"] == (
        '.authorization.k8s.io "" is invalid: spec: Invalid value: null: '
        "exactly one of nonResourceAttributes or resourceAttributes must be specified"
    )


def test_without_a_token_everyone_is_the_anonymous_user(tmp_path: Path) -> None:
    with EmbeddedApiServer() as server:
        who = json.loads(_kubectl(server, tmp_path, "auth", "whoami", "-o", "json").stdout)
        assert who["status"]["userInfo"] == {
            "username": "system:anonymous",
            "groups": ["system:unauthenticated"],
        }
        assert _kubectl(server, tmp_path, "auth", "can-i", "delete", "pods").stdout == "yes\n"


# -- kubectl explain ----------------------------------------------------------------------------------


def test_kubectl_explain_reads_the_kubernetes_schema(secured: EmbeddedApiServer, tmp_path: Path) -> None:
    out = _kubectl(secured, tmp_path, "explain", "pod.spec.containers.resources").stdout
    assert "FIELD: resources <ResourceRequirements>" in out
    for field in (
        "claims\t<[]ResourceClaim>",
        "limits\t<map[string]Quantity>",
        "requests\t<map[string]Quantity>",
    ):
        assert field in out, out
    assert "Requests describes the minimum amount of compute resources required." in out
    lease = _kubectl(secured, tmp_path, "explain", "lease.spec.holderIdentity").stdout
    assert "GROUP:      coordination.k8s.io" in lease and "holderIdentity <string>" in lease
    recursive = _kubectl(secured, tmp_path, "explain", "node.status", "--recursive").stdout
    assert "conditions\t<[]NodeCondition>" in recursive and "lastHeartbeatTime\t<string>" in recursive
    # What the server does not serve is not in its documents.
    missing = _kubectl(secured, tmp_path, "explain", "deployments", ok=False)
    assert missing.returncode != 0 and "doesn't have a resource type" in missing.stderr


def test_openapi_documents_list_only_what_is_served(secured: EmbeddedApiServer) -> None:
    root = json.loads(_request(secured, "GET", "/openapi/v3", _auth()).data)
    assert sorted(root["paths"]) == [
        "api/v1", "apis/authentication.k8s.io/v1", "apis/authorization.k8s.io/v1",
        "apis/coordination.k8s.io/v1", "apis/events.k8s.io/v1",
    ]  # fmt: skip
    core = json.loads(_request(secured, "GET", root["paths"]["api/v1"]["serverRelativeURL"], _auth()).data)
    assert "/api/v1/namespaces/{namespace}/pods/{name}/status" in core["paths"]
    assert not any("/services" in p for p in core["paths"])
    # The subresources relayed to kubelets are served, so documented.
    assert "/api/v1/namespaces/{namespace}/pods/{name}/exec" in core["paths"]
    assert "/api/v1/nodes/{name}/proxy/{path}" in core["paths"]
    answers = core["paths"]["/api/v1/namespaces/{namespace}/pods/{name}"]["get"]["responses"]["200"][
        "content"
    ]
    assert sorted(answers) == ["application/json", "application/yaml"]
    v2 = json.loads(_request(secured, "GET", "/openapi/v2", _auth()).data)
    assert "io.k8s.api.core.v1.ResourceRequirements" in v2["definitions"]
