"""HttpKubeClient against a stdlib ``http.server`` stub: requests, error mapping, config loading, TLS."""

from __future__ import annotations

import base64
import contextlib
import json
import logging
import socket
import ssl
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from podstatus.clients.http import HttpKubeClient
from podstatus.clients.transport import CannotConnectError
from podstatus.clients.wire import parse_retry_after, with_resource_version
from podstatus.errors import (
    ApiError,
    ConflictError,
    ConnectionFailedError,
    GoneError,
    InternalServerError,
    InvalidObjectError,
    NotFoundError,
    RequestTimeoutError,
    ServerError,
    ServiceUnavailableError,
    TooManyRequestsError,
    UnauthorizedError,
    UnprocessableEntityError,
    status_body,
)
from podstatus.types import Pod

pytestmark = pytest.mark.timeout(60)

JSON = "application/json"


def pod_dict(
    name: str = "p1", namespace: str = "default", uid: str = "uid-1", rv: str = "7"
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "uid": uid, "resourceVersion": rv},
        "spec": {"nodeName": "node-1", "containers": [{"name": "c", "image": "busybox"}]},
        "status": {"phase": "Running"},
    }


# --- the stub server --------------------------------------------------------------------


@dataclass
class Seen:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Reply:
    status: int = 200
    body: Any = None  # bytes, or a JSON value
    content_type: str = JSON
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0


Action = Reply | Callable[["_Handler", Seen], None]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    server: _Server

    def do_GET(self) -> None:
        self._handle()

    do_POST = do_PATCH = do_DELETE = do_PUT = do_GET

    def _handle(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        url = urlsplit(self.path)
        seen = Seen(
            self.command, url.path, parse_qs(url.query), {k.lower(): v for k, v in self.headers.items()}, body
        )
        stub = self.server.stub
        with stub.lock:
            stub.seen.append(seen)
            action = stub.routes.get((self.command, url.path))
            if isinstance(action, list):
                action = action.pop(0) if len(action) > 1 else action[0]
        if action is None:
            action = Reply(404, status_body(404, "NotFound", f"{url.path} not found"))
        if isinstance(action, Reply):
            self.send(action)
        else:
            action(self, seen)

    def send(self, reply: Reply) -> None:
        if reply.delay:
            time.sleep(reply.delay)
        data = reply.body if isinstance(reply.body, bytes) else json.dumps(reply.body).encode()
        self.send_response(reply.status)
        self.send_header("Content-Type", reply.content_type)
        self.send_header("Content-Length", str(len(data)))
        for k, v in reply.headers.items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def finish(self) -> None:
        with contextlib.suppress(OSError):
            super().finish()

    def log_message(self, format: str, *args: Any) -> None:
        pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    stub: Stub

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass


class Stub:
    def __init__(self, ssl_context: ssl.SSLContext | None = None) -> None:
        self.lock = threading.Lock()
        self.seen: list[Seen] = []
        self.routes: dict[tuple[str, str], Action | list[Action]] = {}
        self.server = _Server(("127.0.0.1", 0), _Handler)
        self.server.stub = self
        scheme = "http"
        if ssl_context is not None:
            self.server.socket = ssl_context.wrap_socket(self.server.socket, server_side=True)
            scheme = "https"
        self.url = f"{scheme}://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self.thread.start()

    def on(self, method: str, path: str, *actions: Action) -> None:
        self.routes[(method, path)] = list(actions) if len(actions) > 1 else actions[0]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def stub() -> Iterator[Stub]:
    s = Stub()
    yield s
    s.close()


@pytest.fixture
def client(stub: Stub) -> Iterator[HttpKubeClient]:
    c = HttpKubeClient(stub.url, token="secret-token", timeout=(2.0, 5.0))
    yield c
    c.close()


POD_PATH = "/api/v1/namespaces/default/pods/p1"


def chunked(handler: _Handler, lines: list[bytes], *, hold: threading.Event | None = None) -> None:
    handler.send_response(200)
    handler.send_header("Content-Type", JSON)
    handler.send_header("Transfer-Encoding", "chunked")
    handler.end_headers()
    for line in lines:
        data = line + b"\n"
        handler.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        handler.wfile.flush()
    if hold is not None:
        hold.wait(10)
    handler.wfile.write(b"0\r\n\r\n")


# --- pods -------------------------------------------------------------------------------


def test_get_pod(stub: Stub, client: HttpKubeClient) -> None:
    stub.on("GET", POD_PATH, Reply(200, pod_dict()))
    pod = client.get_pod("default", "p1")
    assert isinstance(pod, Pod)
    assert (pod.uid, pod.metadata.resource_version, pod.status.phase) == ("uid-1", "7", "Running")
    (seen,) = stub.seen
    assert (seen.method, seen.path) == ("GET", POD_PATH)
    assert seen.headers["accept"] == JSON
    assert seen.headers["authorization"] == "Bearer secret-token"
    assert client.requests.get("get") == 1


def test_get_pod_not_found(stub: Stub, client: HttpKubeClient) -> None:
    stub.on("GET", POD_PATH, Reply(404, status_body(404, "NotFound", 'pods "p1" not found')))
    with pytest.raises(NotFoundError) as info:
        client.get_pod("default", "p1")
    err = info.value
    assert (err.code, err.reason, err.message) == (404, "NotFound", 'pods "p1" not found')
    assert err.status is not None and err.status["kind"] == "Status"


def test_path_segments_are_quoted(stub: Stub, client: HttpKubeClient) -> None:
    with pytest.raises(NotFoundError):
        client.get_pod("ns", "a/b")
    assert stub.seen[0].path == "/api/v1/namespaces/ns/pods/a%2Fb"


def test_patch_pod_status(stub: Stub, client: HttpKubeClient) -> None:
    stub.on("PATCH", POD_PATH + "/status", Reply(200, pod_dict(rv="8")))
    patch = b'{"metadata":{"uid":"uid-1"},"status":{"phase":"Running"}}'
    pod = client.patch_pod_status("default", "p1", patch)
    assert pod.metadata.resource_version == "8"
    (seen,) = stub.seen
    assert seen.method == "PATCH"
    assert seen.headers["content-type"] == "application/strategic-merge-patch+json"
    assert seen.body == patch  # sent as given, byte for byte
    assert client.requests.get("patch") == 1


def test_patch_pod_status_with_resource_version(stub: Stub, client: HttpKubeClient) -> None:
    stub.on("PATCH", POD_PATH + "/status", Reply(200, pod_dict(rv="9")))
    client.patch_pod_status(
        "default", "p1", b'{"metadata":{"uid":"uid-1"},"status":{"phase":"Failed"}}', resource_version="8"
    )
    assert stub.seen[0].json() == {
        "metadata": {"uid": "uid-1", "resourceVersion": "8"},
        "status": {"phase": "Failed"},
    }


def test_with_resource_version() -> None:
    assert json.loads(with_resource_version(b'{"status":{}}', "3")) == {
        "status": {},
        "metadata": {"resourceVersion": "3"},
    }
    for bad in (b"[1]", b"{", b'{"metadata": 1}'):
        with pytest.raises(InvalidObjectError):
            with_resource_version(bad, "3")


def test_patch_conflict(stub: Stub, client: HttpKubeClient) -> None:
    message = 'Operation cannot be fulfilled on pods "p1": the object has been modified'
    stub.on("PATCH", POD_PATH + "/status", Reply(409, status_body(409, "Conflict", message)))
    with pytest.raises(ConflictError) as info:
        client.patch_pod_status("default", "p1", b"{}", resource_version="1")
    assert info.value.message == message


def test_delete_pod_sends_delete_options(stub: Stub, client: HttpKubeClient) -> None:
    stub.on("DELETE", POD_PATH, Reply(200, pod_dict()))
    client.delete_pod("default", "p1", grace_period_seconds=0, uid="uid-1")
    (seen,) = stub.seen
    assert seen.method == "DELETE"
    assert seen.headers["content-type"] == JSON
    assert seen.json() == {
        "kind": "DeleteOptions",
        "apiVersion": "v1",
        "gracePeriodSeconds": 0,
        "preconditions": {"uid": "uid-1"},
    }
    assert client.requests.get("delete") == 1


def test_create_pod(stub: Stub, client: HttpKubeClient) -> None:
    stub.on("POST", "/api/v1/namespaces/ns1/pods", Reply(201, pod_dict(namespace="ns1")))
    pod = Pod.from_dict(
        {"metadata": {"name": "p1", "namespace": "ns1"}, "spec": {"containers": [{"name": "c"}]}}
    )
    created = client.create_pod(pod)
    assert created.namespace == "ns1"
    assert stub.seen[0].json()["metadata"] == {"name": "p1", "namespace": "ns1", "creationTimestamp": None}
    assert client.requests.get("create") == 1


def test_list_pods(stub: Stub, client: HttpKubeClient) -> None:
    items = [pod_dict("a", uid="ua"), pod_dict("b", uid="ub")]
    for item in items:
        del item["apiVersion"], item["kind"]  # as in a PodList
    stub.on(
        "GET",
        "/api/v1/pods",
        Reply(200, {"kind": "PodList", "metadata": {"resourceVersion": "42"}, "items": items}),
    )
    pods, rv = client.list_pods(label_selector="app=x", field_selector="spec.nodeName=node-1")
    assert [p.uid for p in pods] == ["ua", "ub"]
    assert rv == "42"
    assert stub.seen[0].query == {"labelSelector": ["app=x"], "fieldSelector": ["spec.nodeName=node-1"]}
    assert client.requests.get("list") == 1


def test_list_pods_pages(stub: Stub, client: HttpKubeClient) -> None:
    path = "/api/v1/namespaces/ns/pods"
    stub.on(
        "GET",
        path,
        Reply(200, {"metadata": {"continue": "tok"}, "items": [pod_dict("a", uid="ua")]}),
        Reply(200, {"metadata": {"resourceVersion": "9"}, "items": [pod_dict("b", uid="ub")]}),
    )
    pods, rv = client.list_pods("ns", limit=1)
    assert ([p.uid for p in pods], rv) == (["ua", "ub"], "9")
    assert [s.query for s in stub.seen] == [{"limit": ["1"]}, {"limit": ["1"], "continue": ["tok"]}]
    assert client.requests.get("list") == 2


# --- watch ------------------------------------------------------------------------------


def _event(kind: str, obj: dict[str, Any]) -> bytes:
    return json.dumps({"type": kind, "object": obj}).encode()


def test_watch_pods(stub: Stub, client: HttpKubeClient) -> None:
    lines = [
        _event("ADDED", pod_dict(rv="10")),
        b"",
        _event("BOOKMARK", {"kind": "Pod", "apiVersion": "v1", "metadata": {"resourceVersion": "11"}}),
        _event("MODIFIED", pod_dict(rv="12")),
        _event("DELETED", pod_dict(rv="13")),
        _event("BOOKMARK", {"kind": "Pod", "apiVersion": "v1", "metadata": {"resourceVersion": "14"}}),
    ]
    stub.on("GET", "/api/v1/namespaces/default/pods", lambda h, _s: chunked(h, lines))
    watch = client.watch_pods(
        "default", field_selector="spec.nodeName=node-1", resource_version="9", timeout_seconds=30
    )
    events = [(kind, pod.metadata.resource_version) for kind, pod in watch]
    assert events == [("ADDED", "10"), ("MODIFIED", "12"), ("DELETED", "13")]
    assert watch.resource_version == "14"
    assert stub.seen[0].query == {
        "watch": ["true"],
        "allowWatchBookmarks": ["true"],
        "fieldSelector": ["spec.nodeName=node-1"],
        "resourceVersion": ["9"],
        "timeoutSeconds": ["30"],
    }
    assert client.requests.get("watch") == 1
    # The connection was dropped, not reused with unread data; the client still works.
    stub.on("GET", POD_PATH, Reply(200, pod_dict()))
    assert client.get_pod("default", "p1").uid == "uid-1"


class _ChunkedResponse:
    """Stands in for urllib3's response: ``read1`` hands out the given chunks, then b''."""

    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = list(chunks)

    def read1(self, amount: int) -> bytes:
        return self.chunks.pop(0) if self.chunks else b""

    def close(self) -> None:
        pass

    def release_conn(self) -> None:
        pass


@pytest.mark.parametrize("size", [1, 7, 100, 4096, 1 << 20])
def test_watch_events_split_anywhere_across_chunks(size: int) -> None:
    from podstatus.clients.watch import PodWatch

    # An empty line between events is skipped; the last line may lack its newline.
    stream = b"\n".join(
        [
            _event("ADDED", pod_dict(rv="10")),
            b"",
            _event("MODIFIED", pod_dict(rv="11")),
            _event("DELETED", pod_dict(rv="12")),
        ]
    )
    chunks = [stream[i : i + size] for i in range(0, len(stream), size)]
    watch = PodWatch(_ChunkedResponse(chunks), "/api/v1/pods", None, None)  # type: ignore[arg-type]
    assert [(kind, pod.metadata.resource_version) for kind, pod in watch] == [
        ("ADDED", "10"),
        ("MODIFIED", "11"),
        ("DELETED", "12"),
    ]
    assert watch.resource_version == "12"


def test_watch_gone(stub: Stub, client: HttpKubeClient) -> None:
    gone = status_body(410, "Expired", "too old resource version: 1 (50)")
    stub.on("GET", "/api/v1/pods", lambda h, _s: chunked(h, [_event("ERROR", gone)]))
    with pytest.raises(GoneError) as info:
        list(client.watch_pods(resource_version="1"))
    assert info.value.code == 410


def test_watch_http_error(stub: Stub, client: HttpKubeClient) -> None:
    stub.on("GET", "/api/v1/pods", Reply(403, status_body(403, "Forbidden", "nope")))
    with pytest.raises(ApiError) as info:
        client.watch_pods()
    assert (info.value.code, info.value.message) == (403, "nope")


def test_watch_stop_event(stub: Stub, client: HttpKubeClient) -> None:
    hold = threading.Event()
    stub.on("GET", "/api/v1/pods", lambda h, _s: chunked(h, [_event("ADDED", pod_dict())], hold=hold))
    stop = threading.Event()
    watch = client.watch_pods(stop_event=stop)
    kind, _pod = next(watch)
    assert kind == "ADDED"
    threading.Timer(0.2, stop.set).start()
    start = time.monotonic()
    assert list(watch) == []  # blocked waiting for data, then woken by the stop event
    assert time.monotonic() - start < 3
    hold.set()


def test_watch_close_early(stub: Stub, client: HttpKubeClient) -> None:
    hold = threading.Event()
    stub.on("GET", "/api/v1/pods", lambda h, _s: chunked(h, [_event("ADDED", pod_dict())] * 3, hold=hold))
    with client.watch_pods() as watch:
        assert next(watch)[0] == "ADDED"
    assert list(watch) == []
    hold.set()


# --- errors -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "reason", "cls"),
    [
        (404, "NotFound", NotFoundError),
        (409, "Conflict", ConflictError),
        (422, "Invalid", UnprocessableEntityError),
        (500, "InternalError", InternalServerError),
        (503, "ServiceUnavailable", ServiceUnavailableError),
    ],
)
def test_status_errors(
    stub: Stub, client: HttpKubeClient, code: int, reason: str, cls: type[ApiError]
) -> None:
    stub.on("GET", POD_PATH, Reply(code, status_body(code, reason, f"failed with {reason}")))
    with pytest.raises(cls) as info:
        client.get_pod("default", "p1")
    assert (info.value.code, info.value.reason, info.value.message) == (code, reason, f"failed with {reason}")
    assert info.value.retry_after is None


def test_too_many_requests_retry_after(stub: Stub, client: HttpKubeClient) -> None:
    body = status_body(429, "TooManyRequests", "slow down", retryAfterSeconds=1)
    stub.on("GET", POD_PATH, Reply(429, body, headers={"Retry-After": "3"}))
    with pytest.raises(TooManyRequestsError) as info:
        client.get_pod("default", "p1")
    assert info.value.retry_after == 3.0  # the header wins over the body's details


def test_service_unavailable_retry_after_date(stub: Stub, client: HttpKubeClient) -> None:
    when = format_datetime(datetime.now(UTC) + timedelta(seconds=30), usegmt=True)
    stub.on(
        "GET", POD_PATH, Reply(503, b"overloaded", content_type="text/plain", headers={"Retry-After": when})
    )
    with pytest.raises(ServiceUnavailableError) as info:
        client.get_pod("default", "p1")
    assert info.value.retry_after is not None and 25 <= info.value.retry_after <= 30


def test_parse_retry_after() -> None:
    assert parse_retry_after(None) is None
    assert parse_retry_after("2.5") == 2.5
    assert parse_retry_after("-3") == 0.0
    assert parse_retry_after("Mon, 01 Jan 2001 00:00:00 GMT") == 0.0
    assert parse_retry_after("soon") is None


def test_non_json_error_body(stub: Stub, client: HttpKubeClient) -> None:
    stub.on("GET", POD_PATH, Reply(502, b"<html>bad gateway</html>", content_type="text/html"))
    with pytest.raises(ServerError) as info:
        client.get_pod("default", "p1")
    err = info.value
    assert err.code == 502
    assert "HTTP 502 Bad Gateway" in err.message and "bad gateway</html>" in err.message
    assert err.status is None


def test_malformed_json_error_body(stub: Stub, client: HttpKubeClient) -> None:
    stub.on("GET", POD_PATH, Reply(500, b'{"kind": "Sta', content_type=JSON))
    with pytest.raises(InternalServerError) as info:
        client.get_pod("default", "p1")
    assert "HTTP 500" in info.value.message


def test_invalid_pod_in_answer_is_an_api_error(stub: Stub, client: HttpKubeClient) -> None:
    stub.on("GET", POD_PATH, Reply(200, {"metadata": {"name": 5}}))
    with pytest.raises(ApiError) as info:
        client.get_pod("default", "p1")
    assert isinstance(info.value.__cause__, InvalidObjectError)


def test_read_timeout(stub: Stub) -> None:
    stub.on("GET", POD_PATH, Reply(200, pod_dict(), delay=1.0))
    with HttpKubeClient(stub.url, timeout=(1.0, 0.2)) as client, pytest.raises(RequestTimeoutError) as info:
        client.get_pod("default", "p1")
    assert isinstance(info.value.__cause__, TimeoutError)


def test_connection_refused() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with HttpKubeClient(f"http://127.0.0.1:{port}") as client, pytest.raises(ConnectionFailedError) as info:
        client.get_pod("default", "p1")
    assert isinstance(info.value.__cause__, CannotConnectError)
    assert "cannot connect" in str(info.value)
    assert client.requests.get("get") == 1


def _reset_mid_body(handler: _Handler, _seen: Seen) -> None:
    handler.send_response(200)
    handler.send_header("Content-Type", JSON)
    handler.send_header("Content-Length", "1000")
    handler.end_headers()
    handler.wfile.write(b'{"kind": "Pod", "metadata": {')
    handler.wfile.flush()
    handler.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    # Closing with SO_LINGER 0 sends a RST (the files made from the socket hold it open otherwise).
    handler.rfile.close()
    handler.wfile.close()
    handler.connection.close()


def test_connection_reset_mid_response(stub: Stub, client: HttpKubeClient) -> None:
    stub.on("GET", POD_PATH, _reset_mid_body)
    with pytest.raises(ConnectionFailedError) as info:
        client.get_pod("default", "p1")
    assert isinstance(info.value.__cause__, OSError)
    # The pool recovers.
    stub.on("GET", POD_PATH, Reply(200, pod_dict()))
    assert client.get_pod("default", "p1").uid == "uid-1"


# --- nodes, counting, threads, logs ----------------------------------------------------


def test_nodes(stub: Stub, client: HttpKubeClient) -> None:
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}}
    stub.on("POST", "/api/v1/nodes", Reply(201, node))
    stub.on("GET", "/api/v1/nodes/n1", Reply(200, node))
    stub.on("PATCH", "/api/v1/nodes/n1/status", Reply(200, node))
    stub.on("DELETE", "/api/v1/nodes/n1", Reply(200, status_body(200, "", "")))
    assert client.create_node(node) == node
    assert client.get_node("n1") == node
    assert client.patch_node_status("n1", b'{"status":{"phase":"Running"}}') == node
    client.delete_node("n1")
    assert [(s.method, s.path) for s in stub.seen] == [
        ("POST", "/api/v1/nodes"),
        ("GET", "/api/v1/nodes/n1"),
        ("PATCH", "/api/v1/nodes/n1/status"),
        ("DELETE", "/api/v1/nodes/n1"),
    ]
    assert stub.seen[2].headers["content-type"] == "application/strategic-merge-patch+json"
    counts = client.requests.snapshot()
    assert (counts["create"], counts["get"], counts["patch"], counts["delete"]) == (1, 1, 1, 1)


def test_threads_share_one_client(stub: Stub, client: HttpKubeClient) -> None:
    stub.on("GET", POD_PATH, Reply(200, pod_dict()))
    errors: list[BaseException] = []

    def work() -> None:
        try:
            for _ in range(15):
                assert client.get_pod("default", "p1").uid == "uid-1"
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert client.requests.get("get") == 90


def test_debug_logs_have_fields_and_no_token(
    stub: Stub, client: HttpKubeClient, caplog: pytest.LogCaptureFixture
) -> None:
    stub.on("GET", POD_PATH, Reply(200, pod_dict()))
    with caplog.at_level(logging.DEBUG, logger="podstatus.clients.http"):
        client.get_pod("default", "p1")
        with pytest.raises(NotFoundError):
            client.get_pod("default", "p2")
    records = [r for r in caplog.records if r.name == "podstatus.clients.http"]
    assert [(r.verb, r.path, r.code) for r in records] == [  # type: ignore[attr-defined]
        ("get", POD_PATH, 200),
        ("get", "/api/v1/namespaces/default/pods/p2", 404),
    ]
    assert all(r.duration_ms >= 0 for r in records)  # type: ignore[attr-defined]
    assert "secret-token" not in caplog.text
    assert "secret-token" not in repr(client)


# --- configuration ----------------------------------------------------------------------


def write_kubeconfig(
    path: Path, server: str, user: dict[str, Any], cluster: dict[str, Any] | None = None
) -> Path:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": server, **(cluster or {})}}],
        "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "ctx", "context": {"cluster": "c", "user": "u", "namespace": "default"}}],
        "current-context": "ctx",
    }
    path.write_text(json.dumps(config))  # JSON is YAML
    return path


def test_kubeconfig_token(stub: Stub, tmp_path: Path) -> None:
    path = write_kubeconfig(tmp_path / "config", stub.url, {"token": "kc-token"})
    stub.on("GET", POD_PATH, Reply(200, pod_dict()))
    with HttpKubeClient.from_kubeconfig(path) as client:
        assert client.base_url == stub.url
        client.get_pod("default", "p1")
    assert stub.seen[0].headers["authorization"] == "Bearer kc-token"


def test_kubeconfig_from_env(stub: Stub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write_kubeconfig(tmp_path / "config", stub.url, {"token": "env-token"})
    monkeypatch.setenv("KUBECONFIG", str(path))
    stub.on("GET", POD_PATH, Reply(200, pod_dict()))
    with HttpKubeClient.from_kubeconfig() as client:
        client.get_pod("default", "p1")
    assert stub.seen[0].headers["authorization"] == "Bearer env-token"


EXEC_PLUGIN = """
import json, pathlib, sys
token = pathlib.Path(sys.argv[1]).read_text().strip()
print(json.dumps({"apiVersion": "client.authentication.k8s.io/v1beta1", "kind": "ExecCredential",
                  "status": {"token": token}}))
"""


def _exec_user(tmp_path: Path, token: str) -> tuple[dict[str, Any], Path]:
    script = tmp_path / "plugin.py"
    script.write_text(EXEC_PLUGIN)
    token_file = tmp_path / "token"
    token_file.write_text(token)
    user = {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1beta1",
            "command": sys.executable,
            "args": [str(script), str(token_file)],
            "interactiveMode": "Never",
        }
    }
    return user, token_file


def test_kubeconfig_exec_plugin(stub: Stub, tmp_path: Path) -> None:
    user, _ = _exec_user(tmp_path, "exec-token-123")
    path = write_kubeconfig(tmp_path / "config", stub.url, user)
    stub.on("GET", POD_PATH, Reply(200, pod_dict()))
    with HttpKubeClient.from_kubeconfig(path, context="ctx") as client:
        client.get_pod("default", "p1")
    assert stub.seen[0].headers["authorization"] == "Bearer exec-token-123"


def test_unauthorized_reloads_credentials_and_retries_once(stub: Stub, tmp_path: Path) -> None:
    user, token_file = _exec_user(tmp_path, "old")
    path = write_kubeconfig(tmp_path / "config", stub.url, user)

    def auth_check(handler: _Handler, seen: Seen) -> None:
        if seen.headers.get("authorization") == "Bearer new":
            handler.send(Reply(200, pod_dict()))
        else:
            handler.send(Reply(401, status_body(401, "Unauthorized", "Unauthorized")))

    stub.on("GET", POD_PATH, auth_check)
    with HttpKubeClient.from_kubeconfig(path) as client:
        token_file.write_text("new")  # the plugin now hands out a new token
        assert client.get_pod("default", "p1").uid == "uid-1"
        assert [s.headers["authorization"] for s in stub.seen] == ["Bearer old", "Bearer new"]
        assert client.requests.get("get") == 2


def test_unauthorized_retried_at_most_once(stub: Stub, tmp_path: Path) -> None:
    user, token_file = _exec_user(tmp_path, "t0")
    path = write_kubeconfig(tmp_path / "config", stub.url, user)
    stub.on("GET", POD_PATH, Reply(401, status_body(401, "Unauthorized", "Unauthorized")))
    with HttpKubeClient.from_kubeconfig(path) as client:
        token_file.write_text("t1")
        with pytest.raises(UnauthorizedError):
            client.get_pod("default", "p1")
    assert [s.headers["authorization"] for s in stub.seen] == ["Bearer t0", "Bearer t1"]


def test_unauthorized_not_retried_when_credentials_unchanged(stub: Stub, tmp_path: Path) -> None:
    user, _ = _exec_user(tmp_path, "same")
    path = write_kubeconfig(tmp_path / "config", stub.url, user)
    stub.on("GET", POD_PATH, Reply(401, status_body(401, "Unauthorized", "Unauthorized")))
    with HttpKubeClient.from_kubeconfig(path) as client, pytest.raises(UnauthorizedError):
        client.get_pod("default", "p1")
    assert len(stub.seen) == 1


def test_static_token_401_is_not_retried(stub: Stub, client: HttpKubeClient) -> None:
    stub.on("GET", POD_PATH, Reply(401, status_body(401, "Unauthorized", "Unauthorized")))
    with pytest.raises(UnauthorizedError):
        client.get_pod("default", "p1")
    assert len(stub.seen) == 1


def test_in_cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kubernetes.config import incluster_config

    token, ca = tmp_path / "token", tmp_path / "ca.crt"
    token.write_text("sa-token")
    ca.write_text("not really a certificate")
    monkeypatch.setattr(incluster_config, "SERVICE_TOKEN_FILENAME", str(token))
    monkeypatch.setattr(incluster_config, "SERVICE_CERT_FILENAME", str(ca))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    for client in (HttpKubeClient.in_cluster(), HttpKubeClient.from_config()):
        assert client.base_url == "https://10.0.0.1:443"
        assert client._authorization() == "bearer sa-token"
        client.close()


def test_from_config_falls_back_to_kubeconfig(
    stub: Stub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(write_kubeconfig(tmp_path / "config", stub.url, {"token": "t"})))
    with HttpKubeClient.from_config() as client:
        assert client.base_url == stub.url


def test_base_url_must_be_http() -> None:
    with pytest.raises(ValueError):
        HttpKubeClient("localhost:6443")


# --- TLS --------------------------------------------------------------------------------


@dataclass
class Certs:
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    other_ca: Path


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def _ec_ca(directory: Path, name: str) -> tuple[Path, Path]:
    crt, key = directory / f"{name}.crt", directory / f"{name}.key"
    _openssl(
        "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
        "-keyout", str(key), "-out", str(crt), "-days", "2", "-subj", f"/CN={name}",
    )  # fmt: skip
    return crt, key


def _ec_leaf(directory: Path, name: str, ca: tuple[Path, Path], ext: str) -> tuple[Path, Path]:
    crt, key, csr, extfile = (directory / f"{name}.{s}" for s in ("crt", "key", "csr", "ext"))
    extfile.write_text(ext)
    _openssl(
        "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
        "-keyout", str(key), "-out", str(csr), "-subj", f"/CN={name}",
    )  # fmt: skip
    _openssl(
        "x509", "-req", "-in", str(csr), "-CA", str(ca[0]), "-CAkey", str(ca[1]), "-CAcreateserial",
        "-out", str(crt), "-days", "2", "-extfile", str(extfile),
    )  # fmt: skip
    return crt, key


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    d = tmp_path_factory.mktemp("certs")
    ca = _ec_ca(d, "ca")
    other_ca, _ = _ec_ca(d, "other-ca")
    server = _ec_leaf(d, "server", ca, "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n")
    client = _ec_leaf(d, "client", ca, "extendedKeyUsage=clientAuth\n")
    return Certs(ca[0], server[0], server[1], client[0], client[1], other_ca)


@pytest.fixture
def tls_stub(certs: Certs) -> Iterator[Stub]:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(certs.server_cert, certs.server_key)
    ctx.load_verify_locations(certs.ca)
    ctx.verify_mode = ssl.CERT_REQUIRED
    s = Stub(ctx)
    s.on("GET", POD_PATH, Reply(200, pod_dict()))
    yield s
    s.close()


def _b64(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode()


def test_kubeconfig_client_certificate(tls_stub: Stub, certs: Certs, tmp_path: Path) -> None:
    user = {"client-certificate-data": _b64(certs.client_cert), "client-key-data": _b64(certs.client_key)}
    cluster = {"certificate-authority-data": _b64(certs.ca)}
    path = write_kubeconfig(tmp_path / "config", tls_stub.url, user, cluster)
    with HttpKubeClient.from_kubeconfig(path) as client:
        assert client.get_pod("default", "p1").uid == "uid-1"
    assert "authorization" not in tls_stub.seen[0].headers


def test_tls_without_client_certificate_fails(tls_stub: Stub, certs: Certs) -> None:
    with HttpKubeClient(tls_stub.url, ca_cert=str(certs.ca)) as client, pytest.raises(ConnectionFailedError):
        client.get_pod("default", "p1")
    assert tls_stub.seen == []


def test_tls_untrusted_server_fails(tls_stub: Stub, certs: Certs) -> None:
    with (
        HttpKubeClient(
            tls_stub.url,
            ca_cert=str(certs.other_ca),
            client_cert=str(certs.client_cert),
            client_key=str(certs.client_key),
        ) as client,
        pytest.raises(ConnectionFailedError) as info,
    ):
        client.get_pod("default", "p1")
    assert "TLS" in info.value.message
