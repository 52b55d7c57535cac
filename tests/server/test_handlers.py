"""The API handler: routing, content negotiation and Status bodies (no sockets)."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from podstatus.server.endpoints import ApiHandler, Request, Response
from podstatus.server.storage.store import Store

POD = {"metadata": {"name": "p"}, "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "i:1"}]}}
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"


@pytest.fixture
def api() -> ApiHandler:
    return ApiHandler(Store())


def call(
    api: ApiHandler, method: str, path: str, body: Any = None, **headers: str
) -> tuple[int, Any, Response]:
    query: dict[str, str] = {}
    if "?" in path:
        path, _, qs = path.partition("?")
        query = dict(p.split("=", 1) for p in qs.split("&"))
    raw = body if isinstance(body, bytes) else (msgspec.json.encode(body) if body is not None else b"")
    resp = api.handle(Request(method, path, query, {k.replace("_", "-"): v for k, v in headers.items()}, raw))
    data = (
        msgspec.json.decode(resp.body)
        if resp.body and resp.content_type.startswith("application/json")
        else None
    )
    return resp.status, data, resp


def test_discovery(api: ApiHandler) -> None:
    assert call(api, "GET", "/api")[1]["versions"] == ["v1"]
    names = {r["name"] for r in call(api, "GET", "/api/v1")[1]["resources"]}
    assert {"pods", "pods/status", "nodes", "nodes/status", "namespaces"} <= names
    groups = [g["name"] for g in call(api, "GET", "/apis")[1]["groups"]]
    assert groups == [
        "authentication.k8s.io", "authorization.k8s.io", "coordination.k8s.io", "events.k8s.io", "metrics.k8s.io",
    ]  # fmt: skip
    assert call(api, "GET", "/version")[1]["major"] == "1"
    root = call(api, "GET", "/openapi/v3")[1]
    url = root["paths"]["api/v1"]["serverRelativeURL"]
    assert url.startswith("/openapi/v3/api/v1?hash=")
    doc = call(api, "GET", "/openapi/v3/api/v1")[1]
    schemas = doc["components"]["schemas"]
    for name in ("io.k8s.api.core.v1.Pod", "io.k8s.api.core.v1.PodList", "io.k8s.api.core.v1.Node",
                 "io.k8s.api.core.v1.NodeList", "io.k8s.apimachinery.pkg.apis.meta.v1.Status",
                 "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"):  # fmt: skip
        assert name in schemas
    assert schemas["io.k8s.api.core.v1.Pod"]["x-kubernetes-group-version-kind"] == [
        {"group": "", "kind": "Pod", "version": "v1"}
    ]
    patch_op = doc["paths"]["/api/v1/namespaces/{namespace}/pods/{name}"]["patch"]
    assert any(p["name"] == "fieldValidation" for p in patch_op["parameters"])


def test_crud_codes(api: ApiHandler) -> None:
    code, pod, _ = call(api, "POST", "/api/v1/namespaces/default/pods", POD)
    assert code == 201 and pod["metadata"]["namespace"] == "default"
    code, body, _ = call(api, "POST", "/api/v1/namespaces/default/pods", POD)
    assert code == 409 and body["reason"] == "AlreadyExists" and body["kind"] == "Status"
    assert call(api, "GET", "/api/v1/namespaces/default/pods/p")[0] == 200
    code, body, _ = call(api, "GET", "/api/v1/namespaces/default/pods/nope")
    assert (code, body["message"], body["details"]) == (
        404,
        'pods "nope" not found',
        {"name": "nope", "kind": "pods"},
    )
    code, body, _ = call(api, "GET", "/api/v1/pods")
    assert code == 200 and body["kind"] == "PodList" and len(body["items"]) == 1
    assert body["metadata"]["resourceVersion"] == "1"
    code, body, _ = call(api, "PATCH", "/api/v1/namespaces/default/pods/p/status", {"status": {"phase": "Running"}},
                         content_type="application/merge-patch+json")  # fmt: skip
    assert code == 200 and body["status"]["phase"] == "Running"
    code, body, _ = call(
        api, "PATCH", "/api/v1/namespaces/default/pods/p", {}, content_type="application/apply-patch+yaml"
    )
    # Server-side apply needs a field manager (the real server's PatchOptions validation).
    assert (code, body["reason"], body["message"]) == (
        422, "Invalid", 'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required for apply patch',
    )  # fmt: skip
    code, body, _ = call(
        api, "PATCH", "/api/v1/namespaces/default/pods/p", {}, content_type="application/cbor-seq"
    )
    assert code == 415 and body["reason"] == "UnsupportedMediaType"
    code, body, _ = call(
        api,
        "PATCH",
        "/api/v1/namespaces/default/pods/p",
        b"{bad",
        content_type="application/merge-patch+json",
    )
    assert code == 400 and body["reason"] == "BadRequest"
    assert call(api, "POST", "/api/v1/namespaces/default/pods/p")[0] == 405
    assert call(api, "GET", "/api/v2/pods")[0] == 404
    assert call(api, "GET", "/api/v1/namespaces/default/pods/p/log")[0] == 404
    code, body, _ = call(api, "DELETE", "/api/v1/namespaces/default/pods/p",
                         {"preconditions": {"uid": "zzz"}, "gracePeriodSeconds": 0})  # fmt: skip
    assert code == 409 and "the UID in the precondition (zzz) does not match" in body["message"]
    assert body["details"]["kind"] == "Pod"
    code, body, _ = call(api, "DELETE", "/api/v1/namespaces/default/pods/p?gracePeriodSeconds=5")
    assert code == 200 and body["metadata"]["deletionGracePeriodSeconds"] == 5
    code, body, _ = call(api, "DELETE", "/api/v1/namespaces/default/pods/p", {"gracePeriodSeconds": 0})
    assert code == 200
    assert call(api, "GET", "/api/v1/namespaces/default/pods/p")[0] == 404


def test_invalid_has_causes(api: ApiHandler) -> None:
    code, body, _ = call(
        api, "POST", "/api/v1/namespaces/default/pods", {"metadata": {"name": "x"}, "spec": {}}
    )
    assert code == 422 and body["reason"] == "Invalid"
    assert body["details"]["causes"] == [
        {"reason": "FieldValueRequired", "message": "Required value", "field": "spec.containers"}
    ]
    assert body["message"] == 'Pod "x" is invalid: spec.containers: Required value'


def test_tables(api: ApiHandler) -> None:
    call(api, "POST", "/api/v1/namespaces/default/pods", POD)
    patch = {"status": {"phase": "Running", "podIPs": [{"ip": "10.1.1.1"}], "containerStatuses": [
        {"name": "c", "ready": True, "restartCount": 2, "image": "i:1", "imageID": "", "state": {"running": {}}}]}}  # fmt: skip
    call(
        api,
        "PATCH",
        "/api/v1/namespaces/default/pods/p/status",
        patch,
        content_type="application/merge-patch+json",
    )
    code, body, resp = call(api, "GET", "/api/v1/namespaces/default/pods", accept=TABLE)
    assert code == 200 and body["kind"] == "Table" and "as=Table" in resp.content_type
    assert [c["name"] for c in body["columnDefinitions"]][:5] == [
        "Name",
        "Ready",
        "Status",
        "Restarts",
        "Age",
    ]
    cells = body["rows"][0]["cells"]
    assert cells[:4] == ["p", "1/1", "Running", "2"] and cells[5:] == ["10.1.1.1", "n1", "<none>", "<none>"]
    assert body["rows"][0]["object"]["kind"] == "PartialObjectMetadata"
    call(api, "DELETE", "/api/v1/namespaces/default/pods/p")
    cells = call(api, "GET", "/api/v1/namespaces/default/pods/p", accept=TABLE)[1]["rows"][0]["cells"]
    assert cells[2] == "Terminating"
    call(api, "POST", "/api/v1/nodes", {"metadata": {"name": "n1", "labels": {"node-role.kubernetes.io/control-plane": ""}},
                                        "status": {"conditions": [{"type": "Ready", "status": "True"}],
                                                   "nodeInfo": {"kubeletVersion": "v1.37.0"}}})  # fmt: skip
    cells = call(api, "GET", "/api/v1/nodes", accept=TABLE)[1]["rows"][0]["cells"]
    assert cells[:3] == ["n1", "Ready", "control-plane"] and cells[4] == "v1.37.0"


def test_watch_stream(api: ApiHandler) -> None:
    call(api, "POST", "/api/v1/namespaces/default/pods", POD)
    code, _, resp = call(
        api,
        "GET",
        "/api/v1/namespaces/default/pods?watch=true&timeoutSeconds=1&allowWatchBookmarks=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan",
    )
    assert code == 200 and resp.stream is not None
    lines = [msgspec.json.decode(c) for c in resp.stream if c]
    assert [e["type"] for e in lines] == ["ADDED", "BOOKMARK"]
    assert lines[1]["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}
    code, _, resp = call(api, "GET", "/api/v1/pods?watch=1&resourceVersion=0&timeoutSeconds=1")
    assert resp.stream is not None
    assert [msgspec.json.decode(c)["type"] for c in resp.stream if c] == ["ADDED"]


def test_watch_too_old_sends_error_event() -> None:
    api = ApiHandler(Store(history_size=2))
    for i in range(5):
        call(api, "POST", "/api/v1/namespaces/default/pods", {**POD, "metadata": {"name": f"p{i}"}})
    _, _, resp = call(api, "GET", "/api/v1/pods?watch=true&resourceVersion=1&timeoutSeconds=1")
    # As kube-apiserver's watch cache: 200, then one ERROR event carrying the 410, then the end.
    assert resp.status == 200 and resp.stream is not None
    lines = [msgspec.json.decode(c) for c in resp.stream if c]
    assert [e["type"] for e in lines] == ["ERROR"]
    body = lines[0]["object"]
    assert body["reason"] == "Expired" and body["code"] == 410
    assert body["message"] == "too old resource version: 1 (3)"


def test_dry_run_answers_and_stores_nothing(api: ApiHandler) -> None:
    code, body, _ = call(api, "POST", "/api/v1/namespaces/default/pods?dryRun=All", POD)
    assert code == 201 and body["metadata"]["name"] == "p"
    assert call(api, "GET", "/api/v1/namespaces/default/pods/p")[0] == 404


def _managers(body: Any) -> list[tuple[str, str]]:
    return [(e["manager"], e["operation"]) for e in body["metadata"].get("managedFields") or []]


def test_field_manager_from_query_or_user_agent(api: ApiHandler) -> None:
    code, body, _ = call(
        api, "POST", "/api/v1/namespaces/default/pods", POD, user_agent="my-controller/1.2 (linux)"
    )
    assert code == 201 and _managers(body) == [("my-controller", "Update")]
    patch = {"metadata": {"labels": {"a": "b"}}}
    code, body, _ = call(api, "PATCH", "/api/v1/namespaces/default/pods/p?fieldManager=labeller", patch,
                         content_type="application/merge-patch+json", user_agent="ignored/1")  # fmt: skip
    # Same operation and second: ordered by manager name.
    assert code == 200 and _managers(body) == [("labeller", "Update"), ("my-controller", "Update")]
    code, body, _ = call(api, "POST", "/api/v1/namespaces/default/pods?fieldManager=" + "m" * 129, POD)
    assert (code, body["details"]["kind"], body["details"]["group"]) == (422, "CreateOptions", "meta.k8s.io")
    code, body, _ = call(api, "PATCH", "/api/v1/namespaces/default/pods/p?force=true", patch,
                         content_type="application/merge-patch+json")  # fmt: skip
    assert code == 422 and body["message"].endswith(
        "force: Forbidden: may not be specified for non-apply patch"
    )


def test_apply_over_the_handler(api: ApiHandler) -> None:
    config = b"apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec: {containers: [{name: c, image: i}]}\n"
    ctype = "application/apply-patch+yaml"
    path = "/api/v1/namespaces/default/pods/a"
    code, body, _ = call(api, "PATCH", path + "?fieldManager=ssa&dryRun=All", config, content_type=ctype)
    assert code == 201 and "resourceVersion" not in body["metadata"]
    assert call(api, "GET", path)[0] == 404  # the dry run stored nothing
    code, body, _ = call(api, "PATCH", path + "?fieldManager=ssa", config, content_type=ctype)
    assert code == 201 and _managers(body) == [("ssa", "Apply")]
    code, body, _ = call(api, "PATCH", path + "?fieldManager=ssa", config, content_type=ctype)
    assert code == 200
    changed = config.replace(b"image: i", b"image: j")
    code, body, _ = call(api, "PATCH", path + "?fieldManager=other", changed, content_type=ctype)
    assert code == 409 and body["reason"] == "Conflict"
    code, body, _ = call(api, "PATCH", path + "?fieldManager=other&force=true", changed, content_type=ctype)
    assert code == 200 and body["spec"]["containers"][0]["image"] == "j"
