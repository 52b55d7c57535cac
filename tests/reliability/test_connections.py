"""Connections to the embedded server: descriptors past 1023, slowloris clients, the connection cap.

Each test talks to a real server on loopback over raw sockets or ``http.client``.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import resource
import selectors
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import urllib3

from podstatus.server import EmbeddedApiServer

POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "w", "namespace": "default"},
    "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "busybox"}]},
}


def _raise_fd_limit(want: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft >= want:
        return
    if hard != resource.RLIM_INFINITY and hard < want:
        pytest.skip(f"RLIMIT_NOFILE hard limit {hard} < {want}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))


@contextlib.contextmanager
def _descriptors_taken_up_to(n: int) -> Iterator[None]:
    """Hold open every free descriptor below ``n``: the next sockets get numbers >= n."""
    _raise_fd_limit(n + 512)
    held: list[int] = []
    try:
        while True:
            fd = os.open(os.devnull, os.O_RDONLY)
            held.append(fd)
            if fd >= n - 1:
                break
        yield
    finally:
        for fd in held:
            os.close(fd)


def _create_pod(url: str, name: str) -> None:
    body = json.dumps({**POD, "metadata": {**POD["metadata"], "name": name}}).encode()  # type: ignore[dict-item]
    resp = urllib3.request(
        "POST", url + "/api/v1/namespaces/default/pods", body=body,
        headers={"Content-Type": "application/json"}, retries=False, timeout=30,
    )  # fmt: skip
    assert resp.status == 201, resp.data[:200]


def test_a_watch_on_a_descriptor_past_1023_stays_open_and_gets_events() -> None:
    """select() refuses descriptors >= 1024 (ValueError): the watch's departure check must not use it."""
    with EmbeddedApiServer() as server, _descriptors_taken_up_to(1100):
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
        conn.request("GET", "/api/v1/namespaces/default/pods?watch=1")
        resp = conn.getresponse()
        assert resp.status == 200
        assert conn.sock is not None and conn.sock.fileno() >= 1024
        # Idle long enough for the server to check twice whether the client left.
        time.sleep(2.5)
        _create_pod(server.url, "past-1023")
        line = resp.readline()
        assert line, "the watch was cut"
        event = json.loads(line)
        assert (event["type"], event["object"]["metadata"]["name"]) == ("ADDED", "past-1023")
        conn.close()


def _trickle_until_closed(socks: list[socket.socket], limit: float) -> tuple[int, float]:
    """Send one header byte to each open socket every 0.2 s; returns (closed by the server, seconds)."""
    start = time.monotonic()
    open_ = set(socks)
    closed = 0
    while open_ and time.monotonic() - start < limit:
        for s in list(open_):
            try:
                s.sendall(b"X")
                s.setblocking(False)
                try:
                    data = s.recv(4096)
                except BlockingIOError:
                    continue
                finally:
                    s.setblocking(True)
                if data == b"":
                    open_.discard(s)
                    closed += 1
            except OSError:  # reset or broken pipe: closed by the server
                open_.discard(s)
                closed += 1
        time.sleep(0.2)
    return closed, time.monotonic() - start


def test_slowloris_connections_are_closed_after_the_header_timeout() -> None:
    with EmbeddedApiServer(header_timeout=1.0) as server:
        socks = [socket.create_connection(("127.0.0.1", server.port), timeout=5) for _ in range(20)]
        for s in socks:
            s.sendall(b"GET /api/v1/pods HTTP/1.1\r\nHost: x\r\nX-Slow: ")
        # One more that made a full request first: the next request's headers get the same bound.
        keep = socket.create_connection(("127.0.0.1", server.port), timeout=5)
        keep.sendall(b"GET /version HTTP/1.1\r\nHost: x\r\n\r\n")
        assert keep.recv(65536).startswith(b"HTTP/1.1 200")
        keep.sendall(b"GET /version HTTP/1.1\r\nX-Slow: ")
        socks.append(keep)
        assert server.open_connections == len(socks)
        # A bystander is served meanwhile.
        bystander = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
        bystander.request("GET", "/version")
        assert bystander.getresponse().status == 200
        bystander.close()
        closed, _ = _trickle_until_closed(socks, limit=30)
        assert closed == len(socks), "slowloris connections outlived the header timeout"
        deadline = time.monotonic() + 10
        while server.open_connections and time.monotonic() < deadline:
            time.sleep(0.05)
        assert server.open_connections == 0, "their threads were not given back"
        for s in socks:
            s.close()


def test_connections_past_the_cap_are_closed() -> None:
    with EmbeddedApiServer(max_connections=8) as server:
        held = []
        for _ in range(8):
            conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
            conn.request("GET", "/version")
            assert conn.getresponse().read()
            held.append(conn)
        assert server.open_connections == 8
        extra = socket.create_connection(("127.0.0.1", server.port), timeout=10)
        try:
            extra.sendall(b"GET /version HTTP/1.1\r\nHost: x\r\n\r\n")
            got = extra.recv(65536)
        except ConnectionResetError:
            got = b""
        assert got == b"", "a connection past the cap was served"
        extra.close()
        for conn in held[:4]:
            conn.close()
        deadline = time.monotonic() + 10
        while server.open_connections > 4 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert urllib3.request("GET", server.url + "/version", retries=False, timeout=10).status == 200
        for conn in held[4:]:
            conn.close()


def _serve(tmp_path: Path, *args: str) -> tuple[subprocess.Popen[str], str]:
    kubeconfig = tmp_path / "kubeconfig"
    proc = subprocess.Popen(
        [sys.executable, "-m", "podstatus.cli", "serve", "--port", "0", "--no-token", "--no-tls",
         "--kubeconfig", str(kubeconfig), "--state-dir", str(tmp_path / "state"), *args],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while not kubeconfig.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"podstatus serve did not start: {proc.communicate()[1]}")
        time.sleep(0.05)
    url = json.loads(kubeconfig.read_text())["clusters"][0]["cluster"]["server"]
    return proc, url


@pytest.mark.slow
def test_over_1100_watches_stay_open_and_each_gets_the_event(tmp_path: Path) -> None:
    watches = 1150
    _raise_fd_limit(watches * 2 + 512)  # the server process inherits the limit
    proc, url = _serve(tmp_path)
    port = int(url.rsplit(":", 1)[1])
    sel = selectors.DefaultSelector()
    socks: list[socket.socket] = []
    try:
        request = b"GET /api/v1/namespaces/default/pods?watch=1 HTTP/1.1\r\nHost: x\r\n\r\n"
        for _ in range(watches):
            s = socket.create_connection(("127.0.0.1", port), timeout=30)
            s.sendall(request)
            socks.append(s)
        got = {s: b"" for s in socks}
        for s in socks:
            s.setblocking(False)
            sel.register(s, selectors.EVENT_READ)
        # Every watch answers 200 first; past 1,024 descriptors each must still be open.
        _read_until(sel, got, lambda data: b"\r\n\r\n" in data, 120)
        assert all(data.startswith(b"HTTP/1.1 200") for data in got.values())
        time.sleep(2.5)  # idle: the server checks each client's departure on the way
        _create_pod(url, "many")
        _read_until(sel, got, lambda data: b'"name":"many"' in data, 120)
        missing = sum(1 for data in got.values() if b'"name":"many"' not in data)
        assert missing == 0, f"{missing} of {watches} watches got no event"
    finally:
        sel.close()
        for s in socks:
            s.close()
        proc.terminate()
        _, stderr = proc.communicate(timeout=30)
    assert "Traceback" not in stderr, stderr[-2000:]


def _read_until(
    sel: selectors.BaseSelector, got: dict[socket.socket, bytes], done: object, limit: float
) -> None:
    check = done if callable(done) else (lambda data: True)
    waiting = {s for s, data in got.items() if not check(data)}
    deadline = time.monotonic() + limit
    while waiting and time.monotonic() < deadline:
        for key, _ in sel.select(timeout=1.0):
            s = key.fileobj
            assert isinstance(s, socket.socket)
            try:
                chunk = s.recv(65536)
            except BlockingIOError:
                continue
            if not chunk:
                sel.unregister(s)
                waiting.discard(s)
                continue
            got[s] += chunk
            if check(got[s]):
                waiting.discard(s)


_ = threading  # threads are counted through the server's own figure, not here
