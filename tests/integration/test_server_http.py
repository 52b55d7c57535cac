"""The embedded API server over real HTTP (urllib3): codes, Status bodies, keep-alive, watch streams."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import urllib3

from podstatus.server import EmbeddedApiServer, Response

POD = {"metadata": {"name": "p"}, "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "i:1"}]}}


@pytest.fixture(scope="module")
def server() -> Iterator[EmbeddedApiServer]:
    with EmbeddedApiServer() as srv:
        for ns in ("http", "watch"):
            srv.store.ensure_namespace(ns)
        yield srv


@pytest.fixture(scope="module")
def http() -> urllib3.PoolManager:
    return urllib3.PoolManager(retries=False, timeout=10)


def req(http: urllib3.PoolManager, server: EmbeddedApiServer, method: str, path: str, body: Any = None,
        ctype: str = "application/json", **kw: Any) -> tuple[int, Any]:  # fmt: skip
    raw = body if isinstance(body, bytes) else (json.dumps(body).encode() if body is not None else None)
    r = http.request(method, server.url + path, body=raw, headers={"Content-Type": ctype}, **kw)
    return r.status, json.loads(r.data) if r.data else None


def test_lifecycle_and_errors(server: EmbeddedApiServer, http: urllib3.PoolManager) -> None:
    base = "/api/v1/namespaces/http/pods"
    code, pod = req(http, server, "POST", base, POD)
    assert code == 201
    code, body = req(http, server, "POST", base, POD)
    assert (code, body["reason"], body["message"]) == (409, "AlreadyExists", 'pods "p" already exists')
    code, body = req(http, server, "POST", base, b"{nope")
    assert code == 400 and body["kind"] == "Status" and body["status"] == "Failure"
    code, body = req(http, server, "POST", base, {"metadata": {"name": "q"}, "spec": {"containers": []}})
    assert code == 422 and body["details"]["causes"][0]["field"] == "spec.containers"
    code, body = req(http, server, "GET", base + "/missing")
    assert (code, body["details"]) == (404, {"name": "missing", "kind": "pods"})
    code, body = req(http, server, "PATCH", base + "/p/status", {"status": {"phase": "Succeeded"}},
                     "application/strategic-merge-patch+json")  # fmt: skip
    assert code == 200 and body["status"]["phase"] == "Succeeded"
    code, body = req(http, server, "PATCH", base + "/p/status", [{"op": "replace", "path": "/status/phase", "value": "Running"}],
                     "application/json-patch+json")  # fmt: skip
    assert code == 422 and "cannot transition from a terminal phase" in body["message"]
    code, body = req(http, server, "PATCH", base + "/p", {"metadata": {"resourceVersion": "1"}, "spec": {}},
                     "application/merge-patch+json")  # fmt: skip
    assert code == 409 and body["reason"] == "Conflict" and "the object has been modified" in body["message"]
    code, body = req(
        http, server, "PATCH", base + "/p?fieldManager=t", b"x: 1", "application/apply-patch+yaml"
    )
    assert code == 400 and body["message"] == "invalid object type: /, Kind="
    code, body = req(
        http, server, "PUT", base + "/p", {**pod, "metadata": {**pod["metadata"], "labels": {"x": "y"}}}
    )
    assert code == 409  # the resourceVersion in the body is stale now
    code, body = req(http, server, "POST", base + "/p")
    assert code == 405 and body["reason"] == "MethodNotAllowed"
    code, body = req(http, server, "DELETE", base + "/p", {"preconditions": {"resourceVersion": "1"}})
    assert code == 409 and "the ResourceVersion in the precondition (1) does not match" in body["message"]
    code, body = req(http, server, "DELETE", base + "/p", {"preconditions": {"uid": pod["metadata"]["uid"]}})
    assert code == 200  # phase Succeeded: deleted at once
    assert req(http, server, "GET", base + "/p")[0] == 404


def test_body_limit(server: EmbeddedApiServer, http: urllib3.PoolManager) -> None:
    big = b'{"metadata":{"name":"big","annotations":{"a":"' + b"x" * (3 * 1024 * 1024) + b'"}}}'
    code, body = req(http, server, "POST", "/api/v1/namespaces/http/pods", big)
    assert code == 413 and body["reason"] == "RequestEntityTooLarge"
    # The pool recovers: the next request works.
    assert req(http, server, "GET", "/version")[0] == 200


def test_keep_alive(server: EmbeddedApiServer) -> None:
    pool = urllib3.HTTPConnectionPool("127.0.0.1", server.port, maxsize=1, retries=False)
    for _ in range(5):
        assert pool.request("GET", "/api/v1/namespaces/http/pods").status == 200
    assert pool.num_connections == 1


def test_watch_stream(server: EmbeddedApiServer, http: urllib3.PoolManager) -> None:
    base = "/api/v1/namespaces/watch/pods"
    _, listing = req(http, server, "GET", base)
    rv = listing["metadata"]["resourceVersion"]
    r = http.request("GET", f"{server.url}{base}?watch=true&resourceVersion={rv}&timeoutSeconds=3",
                     preload_content=False)  # fmt: skip
    assert r.status == 200 and r.headers["Transfer-Encoding"] == "chunked"
    threading.Timer(0.2, lambda: req(http, server, "POST", base, {**POD, "metadata": {"name": "w"}})).start()
    line = next(iter(r.readline, b""))
    event = json.loads(line)
    assert event["type"] == "ADDED" and event["object"]["metadata"]["name"] == "w"
    r.release_conn()


def test_dispatch_can_be_wrapped() -> None:
    with EmbeddedApiServer() as srv:
        inner = srv.dispatch
        srv.dispatch = lambda request: (
            Response(503, b'{"kind":"Status"}') if request.method == "POST" else inner(request)
        )
        http = urllib3.PoolManager(retries=False)
        assert http.request("POST", srv.url + "/api/v1/namespaces/x/pods", body=b"{}").status == 503
        assert http.request("GET", srv.url + "/version").status == 200
        srv.dispatch = lambda request: Response(200, abort=True)
        with pytest.raises(urllib3.exceptions.HTTPError):
            urllib3.PoolManager(retries=False).request("GET", srv.url + "/version")


def test_kubeconfig(server: EmbeddedApiServer, tmp_path: Any) -> None:
    import yaml

    path = server.write_kubeconfig(tmp_path / "kc" / "config")
    data = yaml.safe_load(path.read_text())
    assert data["clusters"][0]["cluster"]["server"] == server.url


def test_a_watch_ends_when_its_client_leaves_and_is_audited(tmp_path: Any) -> None:
    # The front sees the client's end (its FIN) while the watch is idle; the audit line is then written.
    import socket
    import time

    audit = tmp_path / "audit.log"
    with EmbeddedApiServer(audit_log=audit) as srv:
        sock = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
        sock.sendall(b"GET /api/v1/pods?watch=1 HTTP/1.1\r\nHost: x\r\n\r\n")
        assert sock.recv(65536).startswith(b"HTTP/1.1 200")
        assert srv.open_streams == 1
        sock.close()
        deadline = time.monotonic() + 10
        while (srv.open_streams or srv.open_connections) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert (srv.open_streams, srv.open_connections) == (0, 0), "the watch outlived its client"
        deadline = time.monotonic() + 5
        while '"verb":"watch"' not in audit.read_text() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert '"verb":"watch"' in audit.read_text()
