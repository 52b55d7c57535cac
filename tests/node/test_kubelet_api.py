"""The kubelet API of a podstatus node (HTTPS on loopback): each route's parameters and errors,
exec/attach/port-forward over WebSocket driven by a real client (aiohttp) speaking the
channel protocols, authentication (401) and a provider without a capability (501)."""

from __future__ import annotations

import asyncio
import json
import socket
import struct
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from kubeletkit import CapableProvider, build_kubeletclient, client_context, issue_client_cert, status_of
from nodekit import make_agent, pod_manifest, wait_for

from podstatus.clients.embedded import EmbeddedClient
from podstatus.node import FakeProvider, NodeAgent
from podstatus.node.kubeletapi import (
    KubeletAPIConfig,
    KubeletAPIServer,
    metrics_from_summary,
    parse_log_options,
)
from podstatus.node.kubeletapi.auth import attributes
from podstatus.node.kubeletapi.streams import INBOUND_LIMIT
from podstatus.server.http import EmbeddedApiServer
from podstatus.tls import generate_ca


def run(coro: Any) -> Any:
    """``asyncio.run``, letting aiohttp finish closing its TLS connections first (its documented wait)."""

    async def settle() -> Any:
        try:
            return await coro
        finally:
            await asyncio.sleep(0.25)

    return asyncio.run(settle())


@dataclass
class Node:
    agent: NodeAgent
    api: KubeletAPIServer
    url: str
    ssl: Any  # client context with the admin's certificate
    anonymous_ssl: Any  # client context without one
    provider: Any
    client: EmbeddedClient
    admin: tuple[bytes, bytes]  # the admin's client certificate and key (PEM)


def _start(tmp_path: Path, provider: Any, name: str = "vn-1") -> Iterator[Node]:
    server = EmbeddedApiServer()
    server.start()
    client = EmbeddedClient(server)
    ca_pem, ca_key = generate_ca()
    api = KubeletAPIServer(KubeletAPIConfig(address="127.0.0.1", client_ca_pem=ca_pem))
    api.start([name])
    endpoint = api.add_node(name, 0)
    agent = make_agent(client, provider, name, kubelet_endpoint=endpoint)
    api.set_agent(endpoint[1], agent)
    agent.start()
    client.create_pod(pod_manifest("web", name, containers=[{"name": "app", "image": "nginx"},
                                                            {"name": "side", "image": "busybox"}]))  # fmt: skip
    wait_for(lambda: agent.pods.get_pod_by_name("default", "web"), what="the pod on the node")
    assert api.tls is not None
    admin = issue_client_cert(ca_pem, ca_key, "kube-apiserver-kubelet-client", ("system:masters",))
    try:
        yield Node(
            agent,
            api,
            f"https://127.0.0.1:{endpoint[1]}",
            client_context(api.tls.ca_pem, tmp_path, admin),
            client_context(api.tls.ca_pem, tmp_path),
            provider,
            client,
            admin,
        )
    finally:
        agent.stop(timeout=2)
        api.stop()
        server.stop()


@pytest.fixture
def node(tmp_path: Path) -> Iterator[Node]:
    yield from _start(tmp_path, CapableProvider())


@pytest.fixture
def bare(tmp_path: Path) -> Iterator[Node]:
    """A node whose provider has none of the capabilities."""
    yield from _start(tmp_path, FakeProvider(), "vn-bare")


def get(n: Node, path: str, *, anonymous: bool = False, **headers: str) -> tuple[int, str]:
    async def go() -> tuple[int, str]:
        async with (
            aiohttp.ClientSession() as session,
            session.get(n.url + path, ssl=n.anonymous_ssl if anonymous else n.ssl, headers=headers) as resp,
        ):
            return resp.status, await resp.text()

    return run(go())


async def ws_session(
    n: Node, path: str, protocols: tuple[str, ...], send: list[bytes] = (), close_stdin: bool = False
) -> tuple[str | None, list[bytes]]:
    """Connect, send ``send`` frames, optionally the v5 close of stdin, and read frames to the end."""
    frames: list[bytes] = []
    async with (
        aiohttp.ClientSession() as session,
        session.ws_connect(n.url + path, protocols=protocols, ssl=n.ssl) as ws,
    ):
        for frame in send:
            await ws.send_bytes(frame)
        if close_stdin:
            await ws.send_bytes(bytes([255, 0]))
        async with asyncio.timeout(20):
            async for msg in ws:
                if msg.type == aiohttp.WSMsgType.BINARY:
                    frames.append(msg.data)
                elif msg.type == aiohttp.WSMsgType.TEXT:
                    frames.append(msg.data.encode())
        return ws.protocol, frames


def channel(frames: list[bytes], number: int) -> bytes:
    return b"".join(f[1:] for f in frames if f[:1] == bytes([number]))


# --- authentication ----------------------------------------------------------------------


def test_anonymous_callers_get_401_on_every_route(node: Node) -> None:
    for path in ("/pods", "/healthz", "/containerLogs/default/web/app", "/stats/summary",
                 "/exec/default/web/app?command=ls&output=1", "/portForward/default/web?port=80"):  # fmt: skip
        assert get(node, path, anonymous=True) == (401, "Unauthorized"), path
    # A bearer token without the token webhook authenticates nobody either.
    assert get(node, "/pods", anonymous=True, Authorization="Bearer abc")[0] == 401


def test_a_certificate_of_another_ca_is_anonymous(node: Node, tmp_path: Path) -> None:
    other_ca, other_key = generate_ca()
    assert node.api.tls is not None
    stranger = client_context(
        node.api.tls.ca_pem, tmp_path, issue_client_cert(other_ca, other_key, "mallory")
    )

    async def go() -> int:
        async with aiohttp.ClientSession() as session:
            try:
                async with session.get(node.url + "/pods", ssl=stranger) as resp:
                    return resp.status
            except aiohttp.ClientError:
                return -1  # refused in the handshake: as good as a 401

    assert go and run(go()) in (401, -1)


# --- plain routes --------------------------------------------------------------------------


def test_pods_runningpods_and_healthz_answer_for_this_node(node: Node) -> None:
    status, body = get(node, "/pods")
    assert status == 200
    pods = json.loads(body)
    assert pods["kind"] == "PodList"
    assert [p["metadata"]["name"] for p in pods["items"]] == ["web"]
    wait_for(lambda: node.provider.running, what="the provider runs the pod")
    running = json.loads(get(node, "/runningpods/")[1])
    assert [
        (p["metadata"]["name"], [c["name"] for c in p["spec"]["containers"]]) for p in running["items"]
    ] == [("web", ["app", "side"])]
    assert get(node, "/healthz") == (200, "ok")


def test_node_status_points_at_the_kubelet_api_and_declares_websockets(node: Node) -> None:
    port = int(node.url.rsplit(":", 1)[1])
    status = node.client.get_node("vn-1")["status"]
    assert status["daemonEndpoints"] == {"kubeletEndpoint": {"Port": port}}
    assert {"type": "InternalIP", "address": "127.0.0.1"} in status["addresses"]
    assert "ExtendWebSocketsToKubelet" in status["declaredFeatures"]
    assert status["declaredFeatures"] == sorted(status["declaredFeatures"])


def test_stats_summary_and_metrics_resource(node: Node) -> None:
    wait_for(lambda: node.provider.running, what="the provider runs the pod")
    status, body = get(node, "/stats/summary")
    assert status == 200
    summary = json.loads(body)
    assert [p["podRef"]["name"] for p in summary["pods"]] == ["web"]
    status, text = get(node, "/metrics/resource")
    assert status == 200
    assert "# TYPE container_cpu_usage_seconds_total counter" in text
    assert (
        'container_cpu_usage_seconds_total{container="app",namespace="default",pod="web"} 2.5 1796472000000'
        in text
    )
    assert 'container_memory_working_set_bytes{container="side",namespace="default",pod="web"} 4096' in text
    assert "node_cpu_usage_seconds_total 7 1796472000000" in text
    assert 'pod_memory_working_set_bytes{namespace="default",pod="web"} 4096' in text
    assert "resource_scrape_error 0" in text


def test_metrics_without_a_summary_report_a_scrape_error() -> None:
    text = metrics_from_summary(None)
    assert "resource_scrape_error 1" in text
    assert "container_cpu_usage_seconds_total" not in text


# --- logs -----------------------------------------------------------------------------------


def test_container_logs_with_tail_and_limit_bytes(node: Node) -> None:
    assert get(node, "/containerLogs/default/web/app") == (
        200,
        "".join(f"app line {i}\n" for i in range(1, 6)),
    )
    assert get(node, "/containerLogs/default/web/side?tailLines=2")[1] == "side line 4\nside line 5\n"
    # The kubelet's legacy "tail"; "all" is every line.
    assert get(node, "/containerLogs/default/web/side?tail=1")[1] == "side line 5\n"
    assert get(node, "/containerLogs/default/web/side?tail=all")[1].count("\n") == 5
    assert get(node, "/containerLogs/default/web/app?limitBytes=8") == (200, "app line")
    get(node, "/containerLogs/default/web/app?timestamps=true&sinceSeconds=30")
    options = node.provider.log_options[-1]
    assert options.timestamps and options.since_seconds == 30 and not options.follow


def test_container_log_errors_as_the_kubelet(node: Node) -> None:
    assert get(node, "/containerLogs/default/web/app?tailLines=abc") == (
        400,
        '{"message": "Unable to decode query."}',
    )
    assert get(node, "/containerLogs/default/web/app?follow=maybe")[0] == 400
    for bad in ("tailLines=-1", "limitBytes=0", "sinceSeconds=0",
                "sinceSeconds=5&sinceTime=2026-01-01T00:00:00Z", "stream=Both"):  # fmt: skip
        assert get(node, f"/containerLogs/default/web/app?{bad}") == (
            422,
            '{"message": "Invalid request."}',
        ), bad
    status, text = get(node, "/containerLogs/default/nope/app")
    assert status == 404 and '"nope"' in text and "vn-1" in text
    assert get(node, "/containerLogs/default/web/nope") == (404, 'container "nope" not found in pod "web"')
    # The provider's own refusal (no previous instance): 400 with its text, as the kubelet.
    assert get(node, "/containerLogs/default/web/app?previous=true") == (
        400,
        'previous terminated container "app" in pod "web" not found',
    )


def test_followed_logs_stream_lines_as_they_come_and_stop_when_the_caller_leaves(node: Node) -> None:
    async def go() -> list[str]:
        got: list[str] = []
        async with (
            aiohttp.ClientSession() as session,
            session.get(
                node.url + "/containerLogs/default/web/app?follow=true&tailLines=1", ssl=node.ssl
            ) as resp,
        ):
            assert resp.status == 200
            got.append((await resp.content.readline()).decode())
            node.provider.add_log_line("app started")
            got.append((await resp.content.readline()).decode())
        return got

    assert run(go()) == ["app line 5\n", "app started\n"]
    node.provider.add_log_line("wakes the generator")
    assert node.provider.follow_closed.wait(10), "the provider's follow stream was not closed"


@pytest.mark.parametrize(
    ("method", "path", "verb", "subresources"),
    [
        ("GET", "/stats/summary", "get", ["stats"]),
        ("GET", "/metrics/resource", "get", ["metrics"]),
        ("GET", "/logs/messages", "get", ["log"]),
        ("GET", "/pods", "get", ["pods", "proxy"]),
        ("GET", "/runningpods/", "get", ["pods", "proxy"]),
        ("GET", "/healthz", "get", ["healthz", "proxy"]),
        ("GET", "/containerLogs/ns/web/app", "get", ["proxy"]),
        ("POST", "/exec/ns/web/app", "create", ["proxy"]),
        ("GET", "/podsx", "get", ["proxy"]),
    ],
)
def test_requests_map_to_nodes_subresources_as_the_kubelets(
    method: str, path: str, verb: str, subresources: list[str]
) -> None:
    # nodeAuthorizerAttributesGetter with KubeletFineGrainedAuthz: any one allowed suffices.
    assert attributes(path, method) == (verb, subresources)


def test_log_options_are_parsed_as_pod_log_options() -> None:
    from multidict import MultiDict

    opts = parse_log_options(MultiDict(follow="1", sinceTime="2026-12-05T10:00:00+01:00", previous="True"))
    assert opts.follow and opts.previous and opts.since_time is not None
    assert opts.since_time.isoformat() == "2026-12-05T09:00:00+00:00"


# --- exec and attach -------------------------------------------------------------------------


@pytest.mark.parametrize("protocol", ["v5.channel.k8s.io", "v4.channel.k8s.io"])
def test_exec_stdout_and_success_status(node: Node, protocol: str) -> None:
    chosen, frames = run(
        ws_session(
            node, "/exec/default/web/app?command=echo&command=hello&command=world&output=1", (protocol,)
        )
    )
    assert chosen == protocol
    assert frames[0] == b"\x01"  # the empty frame that says the streams are open
    assert channel(frames, 1) == b"hello world\n"
    assert status_of(frames) == {"metadata": {}, "status": "Success"}
    assert node.provider.exec_commands[-1] == ["echo", "hello", "world"]


def test_exec_exit_code_and_stderr(node: Node) -> None:
    _, frames = run(
        ws_session(
            node, "/exec/default/web/app?command=fail&command=3&output=1&error=1", ("v5.channel.k8s.io",)
        )
    )
    assert channel(frames, 2) == b"failing\n"
    status = status_of(frames)
    assert status["status"] == "Failure" and status["reason"] == "NonZeroExitCode"
    assert status["details"]["causes"] == [{"reason": "ExitCode", "message": "3"}]


def test_exec_stdin_until_the_v5_close_signal(node: Node) -> None:
    _, frames = run(
        ws_session(
            node,
            "/exec/default/web/side?command=cat&input=1&output=1",
            ("v5.channel.k8s.io",),
            send=[b"\x00hello ", b"\x00there"],
            close_stdin=True,
        )
    )
    assert channel(frames, 1) == b"hello there"
    assert status_of(frames)["status"] == "Success"


def test_exec_tty_gets_the_terminal_size_and_no_stderr(node: Node) -> None:
    resize = b"\x04" + json.dumps({"Width": 120, "Height": 40}).encode()
    _, frames = run(
        ws_session(
            node,
            "/exec/default/web/app?command=size&tty=1&output=1&error=1",
            ("v5.channel.k8s.io",),
            [resize],
        )
    )
    assert channel(frames, 1) == b"120x40 tty=True\n"
    assert channel(frames, 2) == b""


def test_exec_base64_protocol(node: Node) -> None:
    chosen, frames = run(
        ws_session(
            node, "/exec/default/web/app?command=echo&command=b64&output=1", ("v4.base64.channel.k8s.io",)
        )
    )
    assert chosen == "v4.base64.channel.k8s.io"
    import base64

    assert b"".join(base64.b64decode(f[1:]) for f in frames if f[:1] == b"1") == b"b64\n"


def test_attach_stdin_to_stdout_and_exit_code(node: Node) -> None:
    _, frames = run(
        ws_session(
            node, "/attach/default/web/app?input=1&output=1", ("v5.channel.k8s.io",), [b"\x00hi\n"], True
        )
    )
    assert channel(frames, 1) == b"attached:hi\n"
    assert status_of(frames)["details"]["causes"][0]["message"] == "7"


def test_a_caller_going_away_ends_the_command(node: Node) -> None:
    async def go() -> None:
        async with (
            aiohttp.ClientSession() as session,
            session.ws_connect(
                node.url + "/exec/default/web/app?command=sleep&output=1",
                protocols=("v5.channel.k8s.io",),
                ssl=node.ssl,
            ) as ws,
        ):
            assert await ws.receive_bytes() == b"\x01"  # open; then leave

    run(go())
    wait_for(
        lambda: ["sleep ended: the caller went away"] in node.provider.exec_commands, what="io.closed seen"
    )


def test_exec_request_errors(node: Node) -> None:
    # No stream asked for, no command, not a WebSocket, a protocol nobody speaks, unknown pod / container.
    assert get(node, "/exec/default/web/app?command=ls") == (
        400,
        "you must specify at least 1 of stdin, stdout, stderr",
    )
    assert get(node, "/exec/default/web/app?output=1")[0] == 400
    assert get(node, "/exec/default/web/app?command=ls&output=1") == (400, "Upgrade request required")
    spdy = get(node, "/exec/default/web/app?command=ls&output=1", Connection="Upgrade", Upgrade="SPDY/3.1")
    assert spdy[0] == 400 and "SPDY is not served" in spdy[1]

    async def refused(path: str, protocols: tuple[str, ...]) -> int:
        async with aiohttp.ClientSession() as session:
            try:
                async with session.ws_connect(node.url + path, protocols=protocols, ssl=node.ssl):
                    return 101
            except aiohttp.WSServerHandshakeError as err:
                return err.status

    assert run(refused("/exec/default/web/app?command=ls&output=1", ("v9.channel.k8s.io",))) == 400
    assert run(refused("/exec/default/nope/app?command=ls&output=1", ("v5.channel.k8s.io",))) == 404
    assert run(refused("/exec/default/web/nope?command=ls&output=1", ("v5.channel.k8s.io",))) == 404
    uid = node.agent.pods.get_pod_by_name("default", "web").uid
    assert run(refused(f"/exec/default/web/not-{uid}/app?command=ls&output=1", ("v5.channel.k8s.io",))) == 404
    _, frames = run(
        ws_session(
            node, f"/exec/default/web/{uid}/app?command=echo&command=uid&output=1", ("v5.channel.k8s.io",)
        )
    )
    assert channel(frames, 1) == b"uid\n"


# --- port-forward ----------------------------------------------------------------------------


def test_port_forward_channels_carry_the_port_and_the_data(node: Node) -> None:
    async def go() -> tuple[list[bytes], list[bytes]]:
        data: list[bytes] = []
        errors: list[bytes] = []
        async with (
            aiohttp.ClientSession() as session,
            session.ws_connect(
                node.url + "/portForward/default/web?port=80&port=81",
                protocols=("v4.channel.k8s.io",),
                ssl=node.ssl,
            ) as ws,
        ):
            assert ws.protocol == "v4.channel.k8s.io"
            async with asyncio.timeout(20):
                # Each of the 4 channels opens with its port, little-endian.
                opening = [await ws.receive_bytes() for _ in range(4)]
                assert opening == [b"\x00" + struct.pack("<H", 80), b"\x01" + struct.pack("<H", 80),
                                   b"\x02" + struct.pack("<H", 81), b"\x03" + struct.pack("<H", 81)]  # fmt: skip
                await ws.send_bytes(b"\x00GET / HTTP/1.0\r\n\r\n")
                while not (b"".join(data) and errors):
                    frame = await ws.receive_bytes()
                    (data if frame[0] == 0 else errors).append(frame[1:]) if frame[0] in (0, 3) else None
        return data, errors

    data, errors = run(go())
    assert b"".join(data) == b"echo:GET / HTTP/1.0\r\n\r\n"
    assert b"".join(errors) == b"connection refused on port 81"


def test_port_forward_holds_a_fast_sender_back_and_loses_nothing(node: Node) -> None:
    chunk, count = b"x" * (512 << 10), 40  # 20 MiB to a provider that waits before reading

    async def go() -> bytes:
        async with (
            aiohttp.ClientSession() as session,
            session.ws_connect(
                node.url + "/portForward/default/web?port=82", protocols=("v4.channel.k8s.io",), ssl=node.ssl
            ) as ws,
        ):
            async with asyncio.timeout(60):
                for _ in range(2):
                    await ws.receive_bytes()  # the port on both channels
                for _ in range(count):
                    await ws.send_bytes(b"\x00" + chunk)
                await ws.close()
                return b""

    run(go())
    wait_for(lambda: node.provider.received, timeout=30, what="the provider read to the end")
    assert node.provider.received == [len(chunk) * count]
    assert node.provider.max_buffered <= INBOUND_LIMIT + 2 * len(chunk), node.provider.max_buffered


def test_port_forward_errors(node: Node) -> None:
    ws = {"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13",
          "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="}  # fmt: skip
    assert get(node, "/portForward/default/web", **ws) == (400, 'query parameter "port" is required')
    assert get(node, "/portForward/default/web?port=http", **ws)[0] == 400
    assert get(node, "/portForward/default/web?port=70000", **ws)[0] == 400
    assert get(node, "/portForward/default/nope?port=80", **ws)[0] == 404


# --- a provider without the capabilities --------------------------------------------------


def test_a_provider_without_a_capability_gets_501_naming_node_and_capability(bare: Node) -> None:
    cases = {
        "/containerLogs/default/web/app": "container logs",
        "/stats/summary": "stats summary",
        "/metrics/resource": "stats summary",
        "/exec/default/web/app?command=ls&output=1": "exec",
        "/attach/default/web/app?output=1": "attach",
        "/portForward/default/web?port=80": "port forward",
    }
    for path, capability in cases.items():
        status, text = get(bare, path)
        assert status == 501, (path, status, text)
        assert 'node "vn-bare"' in text and capability in text and "FakeProvider" in text, text
    # Pods and health need no capability.
    assert get(bare, "/healthz") == (200, "ok")
    assert get(bare, "/pods")[0] == 200


# --- client-go's own stream clients (what kubectl runs) ------------------------------------


@pytest.fixture(scope="module")
def kubeletclient() -> Path:
    try:
        return build_kubeletclient()
    except FileNotFoundError as err:
        pytest.skip(str(err))


def _cert_files(n: Node, tmp_path: Path) -> tuple[str, str]:
    crt, key = tmp_path / "admin.crt", tmp_path / "admin.key"
    crt.write_bytes(n.admin[0])
    key.write_bytes(n.admin[1])
    return str(crt), str(key)


def test_client_go_websocket_executor_runs_exec_with_stdin_and_exit_code(
    node: Node, kubeletclient: Path, tmp_path: Path
) -> None:
    crt, key = _cert_files(node, tmp_path)
    url = node.url + "/exec/default/web/app?command=cat&input=1&output=1&error=1"
    done = subprocess.run(
        [str(kubeletclient), "exec", url, crt, key],
        input=b"through client-go\n",
        capture_output=True,
        timeout=60,
    )
    assert (done.returncode, done.stdout) == (0, b"through client-go\n"), done.stderr
    url = node.url + "/exec/default/web/app?command=fail&command=42&output=1&error=1"
    done = subprocess.run([str(kubeletclient), "exec", url, crt, key], capture_output=True, timeout=60)
    assert (done.returncode, done.stderr) == (42, b"failing\n")


def test_client_go_port_forward_over_spdy_in_websocket(
    node: Node, kubeletclient: Path, tmp_path: Path
) -> None:
    crt, key = _cert_files(node, tmp_path)
    proc = subprocess.Popen(
        [str(kubeletclient), "portforward", node.url + "/portForward/default/web", crt, key],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None and proc.stdin is not None
        local = int(proc.stdout.readline())
        for attempt in range(2):  # two connections: two stream pairs on one SPDY connection
            with socket.create_connection(("127.0.0.1", local), timeout=20) as conn:
                conn.sendall(f"GET /{attempt} HTTP/1.0\r\n\r\n".encode())
                conn.shutdown(socket.SHUT_WR)
                got = b""
                while chunk := conn.recv(4096):
                    got += chunk
            assert got == f"echo:GET /{attempt} HTTP/1.0\r\n\r\n".encode()
        proc.stdin.close()
        assert proc.wait(20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
