"""The lean keep-alive transport under HttpKubeClient: framing, reuse, stale connections, TLS."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from podstatus.clients.http import HttpKubeClient
from podstatus.clients.kubeconfig import ConnectionSettings
from podstatus.clients.transport import CannotConnectError, ConnectionPool, Headers, NoFreeConnectionError
from podstatus.clients.wire import connection_error
from podstatus.errors import ConnectionFailedError, RequestTimeoutError
from podstatus.server import EmbeddedApiServer

POD = {
    "kind": "Pod",
    "apiVersion": "v1",
    "metadata": {"name": "p1", "namespace": "default", "uid": "uid-1", "resourceVersion": "7"},
    "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    "status": {"phase": "Running"},
}
BODY = json.dumps(POD).encode()

# What the scripted server does with one request: (request head, its socket) -> bytes to send,
# or None to close the connection without answering.
Answer = Callable[[bytes, socket.socket], bytes | None]


def plain(body: bytes = BODY, status: str = "200 OK", extra: str = "") -> bytes:
    head = (
        f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n{extra}\r\n"
    )
    return head.encode() + body


def chunked(body: bytes = BODY, pieces: int = 3) -> bytes:
    size = -(-len(body) // pieces)
    out = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    for i in range(0, len(body), size):
        part = body[i : i + size]
        out += f"{len(part):x};ext=1\r\n".encode() + part + b"\r\n"
    return out + b"0\r\n\r\n"


class ScriptedServer:
    """A loopback HTTP/1.1 server that answers each request with the next scripted answer."""

    def __init__(self, answers: list[Answer]) -> None:
        self.answers = answers
        self.requests: list[bytes] = []
        self.connections = 0
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self._threads: list[threading.Thread] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            t = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            t.start()
            self._threads.append(t)

    def _serve(self, conn: socket.socket) -> None:
        reader = conn.makefile("rb")
        with conn, reader:
            while True:
                head = b""
                while not head.endswith(b"\r\n\r\n"):
                    line = reader.readline()
                    if not line:
                        return
                    head += line
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":", 1)[1])
                body = reader.read(length) if length else b""
                self.requests.append(head + body)
                answer = self.answers.pop(0) if self.answers else (lambda h, s: plain())
                out = answer(head, conn)
                if out is None:
                    return
                if out:
                    conn.sendall(out)

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def serve() -> Iterator[Callable[[list[Answer]], ScriptedServer]]:
    servers: list[ScriptedServer] = []

    def make(answers: list[Answer]) -> ScriptedServer:
        servers.append(ScriptedServer(answers))
        return servers[-1]

    yield make
    for s in servers:
        s.close()


def test_content_length_and_chunked_answers_share_one_connection(
    serve: Callable[..., ScriptedServer],
) -> None:
    server = serve([lambda h, s: plain(), lambda h, s: chunked(), lambda h, s: plain()])
    with HttpKubeClient(server.url) as client:
        for _ in range(3):
            assert client.get_pod("default", "p1").uid == "uid-1"
    assert server.connections == 1
    head = server.requests[0].decode()
    assert head.startswith("GET /api/v1/namespaces/default/pods/p1 HTTP/1.1\r\n")
    assert f"Host: {server.url.removeprefix('http://')}\r\n" in head
    assert "User-Agent: podstatus/" in head and "Accept: application/json" in head


def test_a_write_sends_its_body_with_its_length(serve: Callable[..., ScriptedServer]) -> None:
    server = serve([lambda h, s: plain()])
    with HttpKubeClient(server.url, token="t0k") as client:
        client.patch_pod_status("default", "p1", b'{"status":{"phase":"Running"}}')
    request = server.requests[0]
    head, _, body = request.partition(b"\r\n\r\n")
    assert body == b'{"status":{"phase":"Running"}}'
    assert f"Content-Length: {len(body)}".encode() in head
    assert b"Authorization: Bearer t0k" in head
    assert b"Content-Type: application/strategic-merge-patch+json" in head


def test_connection_close_is_honoured(serve: Callable[..., ScriptedServer]) -> None:
    def close_after(h: bytes, s: socket.socket) -> bytes:
        s.sendall(plain(extra="Connection: close\r\n"))
        s.shutdown(socket.SHUT_RDWR)
        return b""

    server = serve([close_after, lambda h, s: plain()])
    with HttpKubeClient(server.url) as client:
        client.get_pod("default", "p1")
        client.get_pod("default", "p1")
    assert server.connections == 2


def test_an_interim_answer_is_skipped(serve: Callable[..., ScriptedServer]) -> None:
    server = serve([lambda h, s: b"HTTP/1.1 100 Continue\r\n\r\n" + plain()])
    with HttpKubeClient(server.url) as client:
        assert client.get_pod("default", "p1").uid == "uid-1"


def test_an_idle_connection_the_server_closed_is_not_reused(serve: Callable[..., ScriptedServer]) -> None:
    def answer_then_close(h: bytes, s: socket.socket) -> bytes | None:
        s.sendall(plain())  # keep-alive promised, then closed while idle
        return None

    server = serve([answer_then_close, lambda h, s: plain()])
    with HttpKubeClient(server.url) as client:
        client.get_pod("default", "p1")
        time.sleep(0.2)  # the close reaches us before the next request: the pool connects anew
        client.patch_pod_status("default", "p1", b"{}")
    assert server.connections == 2
    assert [r.split(b" ", 1)[0] for r in server.requests] == [b"GET", b"PATCH"]


def test_no_answer_on_a_reused_connection_a_read_is_retried_a_write_is_not(
    serve: Callable[..., ScriptedServer],
) -> None:
    hang_up: Answer = lambda h, s: None  # noqa: E731 - read the request, close without a word
    server = serve([lambda h, s: plain(), hang_up, lambda h, s: plain(), hang_up])
    with HttpKubeClient(server.url) as client:
        client.get_pod("default", "p1")  # connection 1
        assert client.get_pod("default", "p1").uid == "uid-1"  # 1 closes unanswered: again on 2
        with pytest.raises(ConnectionFailedError, match="without an answer"):
            client.patch_pod_status("default", "p1", b"{}")  # 2 closes unanswered: not sent again
    methods = [r.split(b" ", 1)[0] for r in server.requests]
    assert methods == [b"GET", b"GET", b"GET", b"PATCH"]
    assert client.requests.get("patch") == 1


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (b"SPDY/3 200 OK\r\n\r\n", "not an HTTP/1.x status line"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 500\r\n\r\n{}", "ended after 2 of 500 bytes"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n", "bad Content-Length"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "bad chunk size"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n10\r\n{}", "inside a chunk"),
        (b"HTTP/1.1 200 OK\r\nbroken header\r\n\r\n", "bad header line"),
    ],
)
def test_a_broken_answer_is_a_clear_connection_error(
    serve: Callable[..., ScriptedServer], answer: bytes, message: str
) -> None:
    def broken(h: bytes, s: socket.socket) -> bytes | None:
        s.sendall(answer)
        return None

    server = serve([broken, lambda h, s: plain()])
    with HttpKubeClient(server.url) as client:
        with pytest.raises(ConnectionFailedError, match=message):
            client.get_pod("default", "p1")
        assert client.get_pod("default", "p1").uid == "uid-1"  # a fresh connection


def test_an_error_answer_keeps_its_status_and_headers(serve: Callable[..., ScriptedServer]) -> None:
    status = json.dumps(
        {
            "kind": "Status",
            "status": "Failure",
            "message": "slow down",
            "reason": "TooManyRequests",
            "code": 429,
        }
    ).encode()
    server = serve([lambda h, s: plain(status, "429 Too Many Requests", "Retry-After: 3\r\n")])
    with HttpKubeClient(server.url) as client, pytest.raises(Exception) as info:
        client.get_pod("default", "p1")
    assert getattr(info.value, "code", None) == 429
    assert getattr(info.value, "retry_after", None) == 3.0
    assert "slow down" in str(info.value)


def test_every_connection_busy_is_a_timeout_naming_the_pool(serve: Callable[..., ScriptedServer]) -> None:
    release = threading.Event()

    def slow(h: bytes, s: socket.socket) -> bytes:
        release.wait(5)
        return plain()

    server = serve([slow])
    pool = ConnectionPool(
        ConnectionSettings(base_url=server.url), maxsize=1, connect_timeout=2, pool_timeout=0.2
    )
    first = threading.Thread(target=pool.request, args=("GET", "/x", {}, None, 5.0))
    first.start()
    try:
        for _ in range(100):
            if server.requests:
                break
            threading.Event().wait(0.01)
        with pytest.raises(TimeoutError, match="no free connection"):
            pool.request("GET", "/y", {}, None, 5.0)
    finally:
        release.set()
        first.join(5)
        pool.close()


def test_a_full_pool_is_a_request_timeout_of_the_client() -> None:
    error = connection_error(NoFreeConnectionError("no free connection in 5 s"), "GET", "/p")
    assert isinstance(error, RequestTimeoutError) and "no free connection in the pool" in str(error)
    refused = connection_error(CannotConnectError("127.0.0.1:1: refused"), "GET", "/p")
    assert isinstance(refused, ConnectionFailedError) and "cannot connect" in str(refused)
    assert isinstance(connection_error(TimeoutError("timed out"), "GET", "/p"), RequestTimeoutError)


def test_headers_are_found_in_any_case() -> None:
    headers = Headers()
    dict.__setitem__(headers, "retry-after", "3")
    assert headers.get("Retry-After") == "3" and headers["RETRY-AFTER"] == "3"
    assert "Retry-after" in headers and headers.get("X-Missing") is None


# --- TLS ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tls_server() -> Iterator[EmbeddedApiServer]:
    with EmbeddedApiServer(token="tls-token", tls=True) as srv:
        yield srv


def test_tls_with_the_cluster_ca_verifies_and_reuses_the_connection(
    tls_server: EmbeddedApiServer, tmp_path: Path
) -> None:
    assert tls_server.tls is not None
    ca = tmp_path / "ca.pem"
    ca.write_bytes(tls_server.tls.ca_pem)
    with HttpKubeClient(tls_server.url, token="tls-token", ca_cert=str(ca)) as client:
        created = client.create_pod(
            {"metadata": {"name": "t"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}, "default"
        )
        assert client.get_pod("default", "t").uid == created.uid
        pool = client._pools.lean
        assert pool is not None and len(pool._idle) == 1


def test_tls_with_another_ca_is_a_tls_error(tls_server: EmbeddedApiServer, tmp_path: Path) -> None:
    other = EmbeddedApiServer(tls=True)
    assert other.tls is not None
    ca = tmp_path / "other-ca.pem"
    ca.write_bytes(other.tls.ca_pem)
    with (
        HttpKubeClient(tls_server.url, token="tls-token", ca_cert=str(ca)) as client,
        pytest.raises(ConnectionFailedError, match="TLS error"),
    ):
        client.get_pod("default", "missing")


def test_tls_unverified_when_asked(tls_server: EmbeddedApiServer) -> None:
    with HttpKubeClient(tls_server.url, token="tls-token", verify=False) as client:
        with pytest.raises(Exception) as info:
            client.get_pod("default", "missing")
        assert getattr(info.value, "code", None) == 404
