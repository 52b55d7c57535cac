"""Request handling and validation of the embedded server over real HTTP (http.client, raw sockets).

fieldValidation, dryRun, limit/continue paging, namespaces that must exist, /openapi/v2,
Accept negotiation, and hostile input (chunked framing, sizes, number ranges, huge grace
periods, reads at a future resourceVersion). Each answer is the one kube-apiserver v1.37
gives (tests/apiserver_suite/test_compare.py checks the ones a real server can be asked).
"""

from __future__ import annotations

import http.client
import json
import socket
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote, urlsplit

import pytest

from podstatus.server import EmbeddedApiServer
from podstatus.server.storage.store import Store

NS = "valid"
PODS = f"/api/v1/namespaces/{NS}/pods"
SMP = "application/strategic-merge-patch+json"
MERGE = "application/merge-patch+json"


def pod(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "c", "image": "busybox:1"}], **spec},
    }


class Answer:
    def __init__(self, resp: http.client.HTTPResponse) -> None:
        self.code = resp.status
        self.raw = resp.read()
        self.headers = resp.headers
        self.warnings = resp.headers.get_all("Warning") or []
        try:
            self.body: Any = json.loads(self.raw) if self.raw else None
        except ValueError:
            self.body = None


class Client:
    """Plain http.client to one server: a new connection per request (no pooling surprises)."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80

    def __call__(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        ctype: str = "application/json",
        accept: str | None = None,
        timeout: float = 10,
    ) -> Answer:
        conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        headers = {}
        data = None
        if body is not None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            headers["Content-Type"] = ctype
        if accept is not None:
            headers["Accept"] = accept
        try:
            conn.request(method, path, body=data, headers=headers)
            return Answer(conn.getresponse())
        finally:
            conn.close()

    def raw(self, request: bytes, timeout: float = 10) -> bytes:
        """Send bytes as they are; the whole answer (the server closes or answers one request)."""
        with socket.create_connection((self.host, self.port), timeout=timeout) as sock:
            try:
                sock.sendall(request)
                sock.shutdown(socket.SHUT_WR)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the server answered and closed before reading all of it (413): read the answer
            out = b""
            try:
                while chunk := sock.recv(65536):
                    out += chunk
            except ConnectionResetError:
                pass
            return out


@pytest.fixture
def server() -> Iterator[EmbeddedApiServer]:
    with EmbeddedApiServer(reap_terminating=False) as srv:
        srv.store.ensure_namespace(NS)
        yield srv


@pytest.fixture
def api(server: EmbeddedApiServer) -> Client:
    return Client(server.url)


# -- fieldValidation --------------------------------------------------------------------------


def test_strict_field_validation_refuses_unknown_fields(api: Client, server: EmbeddedApiServer) -> None:
    body = pod("s")
    body["spec"]["bogus"] = 1
    body["spec"]["containers"][0]["nope"] = True
    ans = api("POST", PODS + "?fieldValidation=Strict", body)
    assert ans.code == 400, ans.body
    assert ans.body["reason"] == "BadRequest"
    assert ans.body["message"] == (
        'Pod in version "v1" cannot be handled as a Pod: strict decoding error: '
        'unknown field "spec.containers[0].nope", unknown field "spec.bogus"'
    )
    assert api("GET", PODS + "/s").code == 404


def test_warn_and_ignore_drop_unknown_fields(api: Client) -> None:
    body = pod("w")
    body["spec"]["bogus"] = 1
    body["metadata"]["extra"] = "x"
    ans = api("POST", PODS + "?fieldValidation=Warn", body)
    assert ans.code == 201
    assert ans.warnings == [
        '299 - "unknown field \\"metadata.extra\\""',
        '299 - "unknown field \\"spec.bogus\\""',
    ]
    assert "bogus" not in ans.body["spec"] and "extra" not in ans.body["metadata"]
    # No fieldValidation at all: the real server's default is Warn.
    body["metadata"]["name"] = "d"
    assert len(api("POST", PODS, body).warnings) == 2
    body["metadata"]["name"] = "i"
    ans = api("POST", PODS + "?fieldValidation=Ignore", body)
    assert ans.code == 201 and ans.warnings == []
    assert "bogus" not in api("GET", PODS + "/i").body["spec"]


def test_field_validation_of_patches(api: Client) -> None:
    assert api("POST", PODS, pod("p")).code == 201
    ans = api("PATCH", PODS + "/p?fieldValidation=Strict", {"metadata": {"labels": {"a": "b"}}, "spec": {"x": 1}},
              ctype=SMP)  # fmt: skip
    assert ans.code == 422, ans.body
    assert ans.body["message"] == (
        ' "" is invalid: patch: Invalid value: "map[metadata:map[labels:map[a:b]] spec:map[x:1]]": '
        'strict decoding error: unknown field "spec.x"'
    )
    assert ans.body["details"]["causes"][0]["field"] == "patch"
    ans = api("PATCH", PODS + "/p/status?fieldValidation=Strict", {"status": {"weird": 1}}, ctype=MERGE)
    assert ans.code == 422 and ans.body["message"].endswith(
        'strict decoding error: unknown field "status.weird"'
    )
    ans = api("PATCH", PODS + "/p/status?fieldValidation=Warn", {"status": {"weird": 1}}, ctype=MERGE)
    assert ans.code == 200 and ans.warnings == ['299 - "unknown field \\"status.weird\\""']
    assert "weird" not in ans.body["status"]
    got = api("GET", PODS + "/p").body
    assert "labels" not in got["metadata"]


def test_bad_field_validation_value(api: Client) -> None:
    ans = api("POST", PODS + "?fieldValidation=Loud", pod("v"))
    assert ans.code == 422
    assert ans.body["message"] == (
        'CreateOptions.meta.k8s.io "" is invalid: fieldValidation: Unsupported value: "Loud": '
        'supported values: "", "Ignore", "Strict", "Warn"'
    )


# -- dryRun -----------------------------------------------------------------------------------


def test_dry_run_stores_nothing(api: Client, server: EmbeddedApiServer) -> None:
    assert api("POST", PODS, pod("live", nodeName="n1")).code == 201
    rv = server.store.resource_version
    watch = server.store.watch("pods", NS, resource_version=str(rv))
    ans = api("POST", PODS + "?dryRun=All", pod("ghost"))
    assert ans.code == 201 and ans.body["metadata"]["name"] == "ghost"
    assert ans.body["metadata"]["uid"] and "resourceVersion" not in ans.body["metadata"]
    assert api("GET", PODS + "/ghost").code == 404
    ans = api("PATCH", PODS + "/live?dryRun=All", {"metadata": {"labels": {"a": "b"}}}, ctype=SMP)
    assert ans.code == 200 and ans.body["metadata"]["labels"] == {"a": "b"}
    live = api("GET", PODS + "/live").body
    assert "labels" not in live["metadata"]
    put = {**live, "metadata": {**live["metadata"], "labels": {"c": "d"}}}
    ans = api("PUT", PODS + "/live?dryRun=All", put)
    assert ans.code == 200 and ans.body["metadata"]["labels"] == {"c": "d"}
    assert ans.body["metadata"]["resourceVersion"] == live["metadata"]["resourceVersion"]
    ans = api("DELETE", PODS + "/live?dryRun=All")
    assert ans.code == 200 and ans.body["metadata"]["deletionTimestamp"]
    ans = api("DELETE", PODS + "/live", {"kind": "DeleteOptions", "apiVersion": "v1", "dryRun": ["All"],
                                         "gracePeriodSeconds": 0})  # fmt: skip
    assert ans.code == 200
    # Still invalid when only rehearsed.
    assert api("POST", PODS + "?dryRun=All", pod("Bad_Name")).code == 422
    assert api("POST", PODS + "?dryRun=All", pod("live")).code == 409
    assert api("GET", PODS + "/live").body == live
    assert server.store.resource_version == rv
    assert watch.next(timeout=0.2) is None
    watch.close()
    ans = api("POST", PODS + "?dryRun=Some", pod("x"))
    assert ans.code == 422 and ans.body["message"] == (
        'CreateOptions.meta.k8s.io "" is invalid: dryRun: Unsupported value: ["Some"]: supported values: "All"'
    )


# -- paging -----------------------------------------------------------------------------------


def test_limit_and_continue(api: Client) -> None:
    for i in range(5):
        assert api("POST", PODS, pod(f"p{i}")).code == 201
    first = api("GET", PODS + "?limit=2").body
    assert [p["metadata"]["name"] for p in first["items"]] == ["p0", "p1"]
    assert first["metadata"]["remainingItemCount"] == 3
    token = first["metadata"]["continue"]
    # Changes after the first page do not show in the next pages: one consistent list.
    assert api("POST", PODS, pod("p2a")).code == 201
    assert api("DELETE", PODS + "/p3?gracePeriodSeconds=0").code == 200
    second = api("GET", PODS + f"?limit=2&continue={quote(token)}").body
    assert [p["metadata"]["name"] for p in second["items"]] == ["p2", "p3"]
    assert second["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
    assert second["metadata"]["remainingItemCount"] == 1
    third = api("GET", PODS + f"?limit=2&continue={quote(second['metadata']['continue'])}").body
    assert [p["metadata"]["name"] for p in third["items"]] == ["p4"]
    assert "continue" not in third["metadata"] and "remainingItemCount" not in third["metadata"]
    # With a selector, no count of what is left.
    sel = api("GET", "/api/v1/pods?limit=1&fieldSelector=metadata.namespace%3Dvalid").body
    assert sel["metadata"]["continue"] and "remainingItemCount" not in sel["metadata"]


def test_bad_continue_tokens(api: Client) -> None:
    ans = api("GET", PODS + "?limit=1&continue=bogus")
    assert ans.code == 400
    assert ans.body["message"] == (
        "invalid continue token: continue key is not valid: illegal base64 data at input byte 4"
    )
    assert api("POST", PODS, pod("a")).code == 201
    assert api("POST", PODS, pod("b")).code == 201
    token = api("GET", PODS + "?limit=1").body["metadata"]["continue"]
    ans = api("GET", PODS + f"?limit=1&continue={token}&resourceVersion=5")
    assert ans.code == 400
    assert ans.body["message"] == "specifying resource version is not allowed when using continue"


def test_expired_continue_token_is_410_with_a_fresh_token() -> None:
    store = Store(history_size=4)
    with EmbeddedApiServer(store=store) as srv:
        store.ensure_namespace(NS)
        api = Client(srv.url)
        for i in range(3):
            assert api("POST", PODS, pod(f"p{i}")).code == 201
        token = api("GET", PODS + "?limit=1").body["metadata"]["continue"]
        for i in range(5):
            assert api("POST", PODS, pod(f"q{i}")).code == 201
        ans = api("GET", PODS + f"?limit=1&continue={token}")
        assert ans.code == 410 and ans.body["reason"] == "Expired"
        assert ans.body["message"].startswith("The provided continue parameter is too old")
        fresh = ans.body["metadata"]["continue"]
        names = [p["metadata"]["name"] for p in api("GET", PODS + f"?continue={fresh}").body["items"]]
        assert names == ["p1", "p2", "q0", "q1", "q2", "q3", "q4"]


# -- namespaces -------------------------------------------------------------------------------


def test_namespace_must_exist(api: Client) -> None:
    ans = api("POST", "/api/v1/namespaces/nowhere/pods", pod("p"))
    assert ans.code == 404
    assert ans.body["message"] == 'namespaces "nowhere" not found'
    assert ans.body["details"] == {"name": "nowhere", "kind": "namespaces"}
    ans = api(
        "POST",
        "/api/v1/namespaces",
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "nowhere"}},
    )
    assert ans.code == 201
    assert ans.body["status"] == {"phase": "Active"}
    assert ans.body["metadata"]["labels"] == {"kubernetes.io/metadata.name": "nowhere"}
    assert api("POST", "/api/v1/namespaces/nowhere/pods", pod("p")).code == 201
    assert api("POST", "/api/v1/namespaces", {"metadata": {"name": "nowhere"}}).code == 409
    assert api("POST", "/api/v1/namespaces", {"metadata": {"name": "a.b"}}).code == 422
    for name in ("default", "kube-system", "kube-public", "kube-node-lease"):
        assert api("GET", f"/api/v1/namespaces/{name}").code == 200


# -- /openapi/v2 and Accept -------------------------------------------------------------------


def test_openapi_v2(api: Client) -> None:
    ans = api("GET", "/openapi/v2")
    assert ans.code == 200 and ans.body["swagger"] == "2.0"
    pod_def = ans.body["definitions"]["io.k8s.api.core.v1.Pod"]
    assert pod_def["x-kubernetes-group-version-kind"] == [{"group": "", "kind": "Pod", "version": "v1"}]
    port = ans.body["definitions"]["io.k8s.api.core.v1.ContainerPort"]["properties"]["containerPort"]
    assert (port["type"], port["format"]) == ("integer", "int32") and "valid port number" in port[
        "description"
    ]
    assert "/api/v1/namespaces/{namespace}/pods" in ans.body["paths"]


def test_accept_negotiation(api: Client) -> None:
    assert api("POST", PODS, pod("a")).code == 201
    ans = api("GET", PODS, accept="application/vnd.kubernetes.protobuf")
    assert ans.code == 406
    assert ans.body == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": "only the following media types are accepted: application/json, application/yaml",
        "reason": "NotAcceptable", "code": 406,
    }  # fmt: skip
    assert api("GET", PODS, accept="text/html").code == 406
    assert api("GET", PODS, accept="application/json;q=0").code == 406
    assert api("GET", PODS, accept="application/vnd.kubernetes.protobuf, application/json").code == 200
    assert api("GET", PODS, accept="*/*").code == 200
    table = api("GET", PODS, accept="application/json;as=Table;v=v1;g=meta.k8s.io, application/json")
    assert table.code == 200 and table.body["kind"] == "Table"
    assert (
        api("GET", "/openapi/v2", accept="application/com.github.proto-openapi.spec.v2@v1.0+protobuf").code
        == 406
    )
    assert api("GET", "/healthz", accept="application/vnd.kubernetes.protobuf").code == 200


# -- hostile input ----------------------------------------------------------------------------


def _chunked(path: str, chunks: list[bytes]) -> bytes:
    head = (
        f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
    ).encode()
    return head + b"".join(chunks)


def test_negative_chunk_size_is_refused(api: Client, server: EmbeddedApiServer) -> None:
    body = json.dumps(pod("sneaky")).encode()
    answer = api.raw(_chunked(PODS, [b"-1\r\n", body, b"\r\n0\r\n\r\n"]))
    assert answer.startswith(b"HTTP/1.1 400 ")
    for size in (b"+10", b" 10", b"0x10", b"1" * 17, b""):
        answer = api.raw(_chunked(PODS, [size + b"\r\n", body, b"\r\n0\r\n\r\n"]))
        assert answer.startswith(b"HTTP/1.1 400 "), (size, answer[:60])
    assert api("GET", PODS + "/sneaky").code == 404


def test_chunked_body_is_capped_while_reading(api: Client, server: EmbeddedApiServer) -> None:
    # 4 MiB in 64 KiB chunks: refused once past 3 MiB, never stored.
    big = pod("big")
    big["metadata"]["labels"] = {"x": "y"}
    payload = json.dumps(big).encode()[:-1] + b', "pad": "' + b"a" * (4 << 20) + b'"}'
    chunks = [b"%x\r\n%s\r\n" % (len(payload[i : i + 65536]), payload[i : i + 65536])
              for i in range(0, len(payload), 65536)]  # fmt: skip
    answer = api.raw(_chunked(PODS, [*chunks, b"0\r\n\r\n"]))
    assert answer.startswith(b"HTTP/1.1 413 ")
    assert api("GET", PODS + "/big").code == 404
    # A correct chunked body under the limit works.
    ok = json.dumps(pod("small")).encode()
    answer = api.raw(_chunked(PODS, [b"%x\r\n%s\r\n" % (len(ok), ok), b"0\r\n\r\n"]))
    assert answer.startswith(b"HTTP/1.1 201 ")


def test_bad_content_length_is_refused(api: Client) -> None:
    body = json.dumps(pod("cl")).encode()
    for value in (b"-1", b"+5", b"1e3", b"5, 5"):
        req = (b"POST " + PODS.encode() + b" HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
               b"Content-Length: " + value + b"\r\nConnection: close\r\n\r\n" + body)  # fmt: skip
        answer = api.raw(req)
        assert answer.startswith(b"HTTP/1.1 400 "), (value, answer)
        assert b"bad Content-Length" in answer.split(b"\r\n\r\n", 1)[1], (value, answer)


def test_annotations_are_capped_at_256_kib(api: Client) -> None:
    body = pod("ann")
    body["metadata"]["annotations"] = {"a": "x" * (256 * 1024)}
    ans = api("POST", PODS, body)
    assert ans.code == 422
    assert (
        ans.body["message"]
        == 'Pod "ann" is invalid: metadata.annotations: Too long: may not be more than 262144 bytes'
    )
    assert ans.body["details"]["causes"] == [
        {"reason": "FieldValueTooLong", "message": "Too long: may not be more than 262144 bytes",
         "field": "metadata.annotations"}
    ]  # fmt: skip
    body["metadata"]["annotations"] = {"a": "x" * (256 * 1024 - 1)}
    assert api("POST", PODS, body).code == 201


def test_number_ranges(api: Client) -> None:
    big_port = pod(
        "port",
    )
    big_port["spec"]["containers"][0]["ports"] = [{"containerPort": 2**40}]
    ans = api("POST", PODS, big_port)
    assert ans.code == 400
    assert ans.body["message"] == (
        'Pod in version "v1" cannot be handled as a Pod: json: cannot unmarshal number 1099511627776 into '
        "Go struct field ContainerPort.spec.containers.ports.containerPort of type int32"
    )
    big_port["spec"]["containers"][0]["ports"] = [{"containerPort": 99999}]
    ans = api("POST", PODS, big_port)
    assert ans.code == 422
    assert ans.body["message"] == (
        'Pod "port" is invalid: spec.containers[0].ports[0].containerPort: Invalid value: 99999: '
        "must be between 1 and 65535, inclusive"
    )
    assert api("POST", PODS, pod("st", nodeName="n1")).code == 201
    status = {"status": {"containerStatuses": [{"name": "c", "image": "busybox:1", "imageID": "", "ready": False,
                                                "restartCount": 2**40, "state": {}}]}}  # fmt: skip
    ans = api("PATCH", PODS + "/st/status", status, ctype=MERGE)
    assert ans.code == 422 and ans.body["message"].endswith(
        "json: cannot unmarshal number 1099511627776 into Go struct field "
        "ContainerStatus.status.containerStatuses.restartCount of type int32"
    )
    status["status"]["containerStatuses"][0].update(restartCount=0, state={"terminated": {"exitCode": 2**63}})
    ans = api("PATCH", PODS + "/st/status", status, ctype=SMP)
    assert (
        ans.code == 422
        and "ContainerStateTerminated.status.containerStatuses.state.terminated.exitCode"
        in (ans.body["message"])
    )
    got = api("GET", PODS + "/st").body
    assert "containerStatuses" not in got["status"]


def test_huge_grace_periods(api: Client) -> None:
    ans = api("DELETE", PODS + f"/x?gracePeriodSeconds={2**70}")
    assert ans.code == 400
    assert ans.body["message"] == f'strconv.ParseInt: parsing "{2**70}": value out of range'
    assert api("DELETE", PODS + "/x?gracePeriodSeconds=abc").code == 400
    assert api("POST", PODS, pod("long", nodeName="n1", terminationGracePeriodSeconds=2**62)).code == 201
    ans = api("DELETE", PODS + "/long")
    assert ans.code == 200, ans.body
    assert ans.body["metadata"]["deletionGracePeriodSeconds"] == 2**62
    assert ans.body["metadata"]["deletionTimestamp"] == "9999-12-31T23:59:59Z"
    assert api("DELETE", PODS + "/long?gracePeriodSeconds=0").code == 200
    assert api("GET", PODS + "/long").code == 404
    assert api("POST", PODS, pod("huge", nodeName="n1")).code == 201
    assert api("DELETE", PODS + f"/huge?gracePeriodSeconds={2**63 - 1}").code == 200
    ans = api(
        "DELETE", PODS + "/huge", {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 2**64}
    )
    assert ans.code == 400 and "of type int64" in ans.body["message"]


def test_reads_at_a_future_resource_version(api: Client, server: EmbeddedApiServer) -> None:
    future = server.store.resource_version + 1000
    started = time.monotonic()
    ans = api("GET", PODS + f"?resourceVersion={future}")
    assert ans.code == 504
    assert 2.5 < time.monotonic() - started < 8
    current = server.store.resource_version
    assert ans.body["reason"] == "Timeout"
    assert ans.body["message"] == f"Timeout: Too large resource version: {future}, current: {current}"
    assert ans.body["details"] == {
        "causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
        "retryAfterSeconds": 1,
    }
    ans = api("GET", PODS + f"?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan"
                            f"&allowWatchBookmarks=true&resourceVersion={future}")  # fmt: skip
    assert ans.code == 200
    event = json.loads(ans.raw.splitlines()[0])
    assert event["type"] == "ERROR" and event["object"]["code"] == 504
    assert event["object"]["message"].startswith(f"Timeout: Too large resource version: {future}")


def test_kube_like_server_wraps_numbers_of_strategic_merge_patches() -> None:
    """As kube-apiserver v1.37.2 (tests/apiserver_suite/test_compare.py): with strict_status=False a
    strategic merge patch's out-of-range int32 is stored converted as Go converts it."""
    with EmbeddedApiServer(strict_status=False, reap_terminating=False) as srv:
        srv.store.ensure_namespace(NS)
        api = Client(srv.url)
        assert api("POST", PODS, pod("w", nodeName="n1")).code == 201
        cs = {"name": "c", "image": "busybox:1", "imageID": "", "ready": False, "restartCount": 2**40 + 5,
              "state": {}}  # fmt: skip
        ans = api("PATCH", PODS + "/w/status", {"status": {"containerStatuses": [cs]}}, ctype=SMP)
        assert ans.code == 200 and ans.body["status"]["containerStatuses"][0]["restartCount"] == 5
        # A JSON merge patch decodes the JSON: refused, as on the real server.
        assert (
            api("PATCH", PODS + "/w/status", {"status": {"containerStatuses": [cs]}}, ctype=MERGE).code == 422
        )


def test_namespace_labels_can_be_patched(api: Client) -> None:
    ans = api("PATCH", f"/api/v1/namespaces/{NS}", {"metadata": {"labels": {"team": "a"}}}, ctype=MERGE)
    assert ans.code == 200, ans.body
    assert ans.body["metadata"]["labels"] == {"kubernetes.io/metadata.name": NS, "team": "a"}
    ans = api("PATCH", f"/api/v1/namespaces/{NS}", {"metadata": {"labels": None}}, ctype=MERGE)
    assert ans.body["metadata"]["labels"] == {"kubernetes.io/metadata.name": NS}
    assert api("DELETE", f"/api/v1/namespaces/{NS}").code == 405


def test_exact_reads_show_the_past() -> None:
    store = Store(history_size=8)
    with EmbeddedApiServer(store=store) as srv:
        store.ensure_namespace(NS)
        api = Client(srv.url)
        assert api("POST", PODS, pod("a")).code == 201
        rv = api("GET", PODS).body["metadata"]["resourceVersion"]
        assert api("POST", PODS, pod("b")).code == 201
        assert api("DELETE", PODS + "/a?gracePeriodSeconds=0").code == 200
        then = api("GET", PODS + f"?resourceVersion={rv}&resourceVersionMatch=Exact").body
        assert [p["metadata"]["name"] for p in then["items"]] == ["a"]
        assert then["metadata"]["resourceVersion"] == rv
        legacy = api("GET", PODS + f"?resourceVersion={rv}&limit=5").body
        assert [p["metadata"]["name"] for p in legacy["items"]] == ["a"]
        now = api("GET", PODS + f"?resourceVersion={rv}").body  # not older than: the current state
        assert [p["metadata"]["name"] for p in now["items"]] == ["b"]
        for i in range(10):
            assert api("POST", PODS, pod(f"q{i}")).code == 201
        ans = api("GET", PODS + f"?resourceVersion={rv}&resourceVersionMatch=Exact")
        assert ans.code == 410
        assert ans.body["message"] == "The resourceVersion for the provided list is too old."


def test_duplicate_fields(api: Client) -> None:
    text = json.dumps(pod("dup")).replace('"name": "dup"', '"name": "dup", "name": "dup"', 1)
    ans = api("POST", PODS + "?fieldValidation=Strict", text.encode())
    assert ans.code == 400
    assert ans.body["message"].endswith('strict decoding error: duplicate field "metadata.name"')
    ans = api("POST", PODS, text.encode())  # Warn
    assert ans.code == 201 and ans.warnings == ['299 - "duplicate field \\"metadata.name\\""']
    patch = b'{"metadata": {"labels": {"a": "1", "a": "2"}}}'
    ans = api("PATCH", PODS + "/dup?fieldValidation=Strict", patch, ctype=MERGE)
    assert ans.code == 422 and ans.body["message"].endswith('duplicate field "metadata.labels.a"')
    ans = api("PATCH", PODS + "/dup?fieldValidation=Ignore", patch, ctype=MERGE)
    assert ans.code == 200 and ans.warnings == [] and ans.body["metadata"]["labels"] == {"a": "2"}
    # A string holding `":` is no key: no false alarm.
    odd = pod("odd")
    odd["metadata"]["annotations"] = {"x": 'say "a": 1'}
    assert api("POST", PODS + "?fieldValidation=Strict", odd).code == 201
