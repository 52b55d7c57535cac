"""`podstatus serve` + `podstatus node` (its kubelet API) + kubectl 1.37: logs, exec, nodes/proxy,
top and a port-forward stream, end to end on loopback (the provider: tests/node/kubeletkit.py's)."""

from __future__ import annotations

import asyncio
import http.server
import json
import os
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest

from podstatus.server import EmbeddedApiServer, security
from podstatus.server.proxy import KubeletClientConfig
from podstatus.tls import generate_ca, issue_serving_cert
from testkit import kubectl_path

KUBECTL = kubectl_path()
TOKEN = "serve-node-kubelet-token"
ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[EmbeddedApiServer, dict[str, str]]]:
    tmp = tmp_path_factory.mktemp("serve-node")
    ca, ca_key = generate_ca()
    material = issue_serving_cert(ca, ca_key, ["127.0.0.1"])
    client = security.issue_client_cert(ca, ca_key)
    with EmbeddedApiServer(token=TOKEN, tls=material, kubelet_client=KubeletClientConfig(*client)) as server:
        config = server.write_kubeconfig(tmp / "kubeconfig")
        env = {**os.environ, "KUBECONFIG": str(config), "HOME": str(tmp)}
        (tmp / "httpprovider.py").write_text(HTTP_PROVIDER)
        responder = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hello)
        threading.Thread(target=responder.serve_forever, daemon=True).start()
        node_env = {
            **env,
            "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT / "tests" / "node"), str(tmp)]),
            "TEST_HTTP_PORT": str(responder.server_address[1]),
        }
        port = _free_port()
        err = open(tmp / "node.err", "wb")  # noqa: SIM115 (closed below)
        node = subprocess.Popen(
            [sys.executable, "-m", "podstatus.cli", "node", "--name", "vn-1", "--kubeconfig", str(config),
             # No --kubelet-client-ca: the node trusts the serve CA its kubeconfig carries.
             "--provider", "httpprovider:HttpProvider", "--kubelet-port", str(port), "--address", "127.0.0.1"],
            env=node_env, stdout=subprocess.DEVNULL, stderr=err,
        )  # fmt: skip
        try:
            pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "namespace": "default"},
                   "spec": {"nodeName": "vn-1", "containers": [{"name": "app", "image": "nginx"}]}}  # fmt: skip
            server.store.create("pods", "default", pod)
            # The node takes the pod (the fake provider reports no phase of its own): its
            # kubelet API answers for it once the Node points at it and the agent runs the pod.
            deadline = time.monotonic() + 60
            while True:
                assert node.poll() is None, (tmp / "node.err").read_text()
                status = (
                    server.store.get("nodes", None, "vn-1").obj.get("status") if _has_node(server) else None
                )
                if (
                    status
                    and (status.get("daemonEndpoints") or {}).get("kubeletEndpoint", {}).get("Port") == port
                ) and kubectl(env, "logs", "web").returncode == 0:
                    break
                assert time.monotonic() < deadline, "no logs: " + (tmp / "node.err").read_text()[-2000:]
                time.sleep(0.3)
            yield server, env
        finally:
            node.terminate()
            node.wait(30)
            err.close()
            responder.shutdown()
            responder.server_close()


# The test provider: kubeletkit's, with port 8080 forwarded to a real HTTP server of the test.
HTTP_PROVIDER = """
import asyncio
import os

from kubeletkit import CapableProvider


class HttpProvider(CapableProvider):
    async def port_forward(self, namespace, pod, port, stream):
        if port != 8080:
            return await super().port_forward(namespace, pod, port, stream)
        reader, writer = await asyncio.open_connection("127.0.0.1", int(os.environ["TEST_HTTP_PORT"]))

        async def up():
            while chunk := await stream.read():
                writer.write(chunk)
                await writer.drain()

        task = asyncio.create_task(up())
        while data := await reader.read(65536):
            stream.write(data)
        task.cancel()
        writer.close()
        stream.close()
"""


class _Hello(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = f"hello through kubectl port-forward, path {self.path}\n".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


def _has_node(server: EmbeddedApiServer) -> bool:
    return any(n.name == "vn-1" for n in server.store.list("nodes", None)[0])


def kubectl(env: dict[str, str], *args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([KUBECTL, *args], env=env, input=input, capture_output=True, text=True, timeout=60)


def test_kubectl_logs_through_serve_and_the_node(world: tuple[EmbeddedApiServer, dict[str, str]]) -> None:
    _, env = world
    logs = kubectl(env, "logs", "web")
    assert logs.returncode == 0, logs.stderr
    assert logs.stdout.splitlines() == [f"app line {i}" for i in range(1, 6)]
    tail = kubectl(env, "logs", "web", "--tail", "2")
    assert tail.returncode == 0 and tail.stdout.splitlines() == ["app line 4", "app line 5"]


def test_kubectl_exec_through_serve_and_the_node(world: tuple[EmbeddedApiServer, dict[str, str]]) -> None:
    _, env = world
    echo = kubectl(env, "exec", "web", "--", "echo", "hi", "there")
    assert echo.returncode == 0, echo.stderr
    assert echo.stdout == "hi there\n"
    cat = kubectl(env, "exec", "-i", "web", "--", "cat", input="piped\n")
    assert cat.returncode == 0 and cat.stdout == "piped\n", cat.stderr
    failed = kubectl(env, "exec", "web", "--", "fail", "4")
    assert failed.returncode == 4 and "failing" in failed.stderr


def test_kubectl_raw_node_proxy_and_top(world: tuple[EmbeddedApiServer, dict[str, str]]) -> None:
    _, env = world
    raw = kubectl(env, "get", "--raw", "/api/v1/nodes/vn-1/proxy/stats/summary")
    assert raw.returncode == 0, raw.stderr
    assert [p["podRef"]["name"] for p in json.loads(raw.stdout)["pods"]] == ["web"]
    top = kubectl(env, "top", "pod", "web", "--no-headers")
    assert top.returncode == 0, top.stderr
    assert top.stdout.split() == ["web", "5m", "0Mi"]
    nodes = kubectl(env, "top", "node", "--no-headers")
    assert nodes.returncode == 0, nodes.stderr
    name, cpu, _, memory, _ = nodes.stdout.split()  # the percentages of the node's allocatable
    assert (name, cpu, memory) == ("vn-1", "10m", "1Mi")


def test_a_port_forward_stream_through_serve_and_the_node(
    world: tuple[EmbeddedApiServer, dict[str, str]],
) -> None:
    server, _ = world
    assert server.tls is not None
    context = ssl.create_default_context(cadata=server.tls.ca_pem.decode())

    async def forward() -> bytes:
        url = server.url + "/api/v1/namespaces/default/pods/web/portforward?ports=80"
        got = b""
        async with (
            aiohttp.ClientSession() as session,
            session.ws_connect(
                url,
                protocols=("v4.channel.k8s.io",),
                ssl=context,
                headers={"Authorization": f"Bearer {TOKEN}"},
            ) as ws,
        ):
            assert [(await ws.receive_bytes()) for _ in range(2)] == [b"\x00\x50\x00", b"\x01\x50\x00"]
            await ws.send_bytes(b"\x00hello")
            while not got:
                data = await ws.receive_bytes()
                if data[:1] == b"\x00":
                    got = data[1:]
            await ws.close()
        # aiohttp closes TLS transports on the next loop turns (its documented graceful shutdown).
        await asyncio.sleep(0.25)
        return got

    assert asyncio.run(asyncio.wait_for(forward(), 30)) == b"echo:hello"


def test_only_a_podstatus_serve_ca_is_taken_from_the_kubeconfig(tmp_path: Path) -> None:
    """A real cluster's CA also signs its users' certificates: never trusted for clients unasked."""
    import datetime as dt

    import yaml
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    from podstatus.node.command import serve_client_ca

    def kubeconfig(ca_pem: bytes) -> str:
        import base64

        path = tmp_path / f"config-{len(list(tmp_path.iterdir()))}"
        cluster = {
            "server": "https://127.0.0.1:1",
            "certificate-authority-data": base64.b64encode(ca_pem).decode(),
        }
        path.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "c",
            "clusters": [{"name": "c", "cluster": cluster}], "users": [{"name": "u", "user": {"token": "t"}}],
            "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
        }))  # fmt: skip
        return str(path)

    serve_ca, _ = generate_ca()
    assert serve_client_ca(kubeconfig(serve_ca), None) == serve_ca
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kubernetes")])
    now = dt.datetime.now(dt.UTC)
    other = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
        .serial_number(1).not_valid_before(now).not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256()).public_bytes(serialization.Encoding.PEM)
    )  # fmt: skip
    assert serve_client_ca(kubeconfig(other), None) is None
    assert serve_client_ca(str(tmp_path / "missing"), None) is None


def test_kubectl_exec_with_a_terminal_through_serve(world: tuple[EmbeddedApiServer, dict[str, str]]) -> None:
    """-t on a real terminal (a pty): kubectl sends tty=1 and the terminal's size (the resize
    channel); the provider's `size` command prints what reached it."""
    import fcntl
    import pty
    import struct
    import termios

    _, env = world
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 33, 111, 0, 0))
    proc = subprocess.Popen(
        [KUBECTL, "exec", "-it", "web", "--", "size"],
        env=env,
        stdin=follower,
        stdout=follower,
        stderr=follower,
    )
    os.close(follower)
    out = b""
    try:
        proc.wait(30)
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # EIO: the terminal's other side is gone
                break
            if not chunk:
                break
            out += chunk
    finally:
        os.close(leader)
    assert proc.returncode == 0, out
    assert b"111x33 tty=True" in out


def test_kubectl_logs_previous_gets_the_kubelets_answer(
    world: tuple[EmbeddedApiServer, dict[str, str]],
) -> None:
    _, env = world
    previous = kubectl(env, "logs", "web", "--previous")
    assert previous.returncode != 0
    assert 'previous terminated container "app" in pod "web" not found' in previous.stderr


def test_kubectl_port_forward_carries_an_http_request(
    world: tuple[EmbeddedApiServer, dict[str, str]],
) -> None:
    """kubectl port-forward (SPDY tunnelled in a WebSocket) through serve, untouched, to the
    node's kubelet API; the provider connects port 8080 to a real HTTP server."""
    server, env = world
    # kubectl forwards only to a Running pod; the test provider reports no phase of its own.
    server.store.patch("pods", "default", "web", {"status": {"phase": "Running"}}, subresource="status")
    local = _free_port()
    proc = subprocess.Popen(
        [KUBECTL, "port-forward", "pod/web", f"{local}:8080"], env=env,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        assert "Forwarding from 127.0.0.1" in proc.stdout.readline()
        with urllib.request.urlopen(f"http://127.0.0.1:{local}/through", timeout=20) as answer:
            assert answer.status == 200
            assert answer.read() == b"hello through kubectl port-forward, path /through\n"
    finally:
        proc.terminate()
        proc.communicate(timeout=30)


def test_a_provider_without_the_capabilities_gets_the_nodes_clear_answer(
    world: tuple[EmbeddedApiServer, dict[str, str]], tmp_path: Path
) -> None:
    """Not a 404 that reads as "pod not found": the node and the missing capability, named."""
    server, env = world
    port = _free_port()
    node = subprocess.Popen(
        [sys.executable, "-m", "podstatus.cli", "node", "--name", "vn-plain", "--kubeconfig", env["KUBECONFIG"],
         "--provider", "podstatus.node.provider:FakeProvider", "--kubelet-port", str(port), "--address", "127.0.0.1"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "plain", "namespace": "default"},
               "spec": {"nodeName": "vn-plain", "containers": [{"name": "app", "image": "nginx"}]}}  # fmt: skip
        server.store.create("pods", "default", pod)
        wanted = 'node "vn-plain": the provider (FakeProvider) does not implement'
        deadline = time.monotonic() + 60
        while wanted not in (logs := kubectl(env, "logs", "plain")).stderr:
            assert node.poll() is None and time.monotonic() < deadline, logs.stderr
            time.sleep(0.3)
        assert logs.returncode != 0 and "not found" not in logs.stderr
        exec_ = kubectl(env, "exec", "plain", "--", "ls")
        assert exec_.returncode != 0 and wanted in exec_.stderr, exec_.stderr
    finally:
        node.terminate()
        node.wait(30)
