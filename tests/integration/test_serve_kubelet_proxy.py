"""kubectl logs / exec / get --raw nodes/proxy / top through `podstatus serve` to a node's kubelet.

The kubelet here is :mod:`loopkubelet`'s (a real aiohttp HTTPS server on loopback that checks
client certificates); the serve side is the real embedded server and the venv's kubectl.
"""

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
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import urllib3
from loopkubelet import LoopbackKubelet

from podstatus.server import EmbeddedApiServer, security
from podstatus.server.proxy import KubeletClientConfig
from podstatus.tls import generate_ca, issue_serving_cert
from testkit import kubectl_path

KUBECTL = kubectl_path()
TOKEN = "kubelet-proxy-test-token"
LINES = ["line 1", "line 2", "line 3"]


def _free_port() -> int:
    # A port nothing listens on once this returns: a node "without a kubelet API".
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _node(server: EmbeddedApiServer, name: str, port: int | None, address: str = "127.0.0.1") -> None:
    server.store.create("nodes", None, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}})
    status: dict[str, Any] = {"addresses": [{"type": "InternalIP", "address": address}]}
    if port is not None:
        status["daemonEndpoints"] = {"kubeletEndpoint": {"Port": port}}
    server.store.patch("nodes", None, name, {"status": status}, subresource="status")


def _pod(
    server: EmbeddedApiServer, name: str, node: str | None, containers: tuple[str, ...] = ("app",)
) -> None:
    spec: dict[str, Any] = {"containers": [{"name": c, "image": "busybox"} for c in containers]}
    if node:
        spec["nodeName"] = node
    meta = {"name": name, "labels": {"app": name}}
    server.store.create(
        "pods", "default", {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}
    )


@pytest.fixture(scope="module")
def ca() -> tuple[bytes, bytes]:
    return generate_ca()


@pytest.fixture(scope="module")
def kubelet(ca: tuple[bytes, bytes]) -> Iterator[LoopbackKubelet]:
    pods = {
        ("default", "web"): {"app": LINES},
        ("default", "two"): {"a": ["a1"], "b": ["b1"]},
        ("default", "endless"): {"endless": ["start"]},
    }
    kl = LoopbackKubelet(ca[0], pods).start()
    yield kl
    kl.stop()


@pytest.fixture(scope="module")
def server(ca: tuple[bytes, bytes], kubelet: LoopbackKubelet) -> Iterator[EmbeddedApiServer]:
    material = issue_serving_cert(ca[0], ca[1], ["127.0.0.1"])
    cert, key = security.issue_client_cert(*ca)
    with EmbeddedApiServer(token=TOKEN, tls=material, kubelet_client=KubeletClientConfig(cert, key)) as srv:
        _node(srv, "vn-1", kubelet.port)
        _node(srv, "vn-dead", _free_port())
        _node(srv, "vn-none", None)
        _pod(srv, "web", "vn-1")
        _pod(srv, "two", "vn-1", ("a", "b"))
        _pod(srv, "endless", "vn-1", ("endless",))
        _pod(srv, "dead", "vn-dead")
        _pod(srv, "none", "vn-none")
        _pod(srv, "pending", None)
        yield srv


@pytest.fixture(scope="module")
def env(server: EmbeddedApiServer, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    home = tmp_path_factory.mktemp("kubectl-home")
    config = server.write_kubeconfig(home / "config")
    return {**os.environ, "KUBECONFIG": str(config), "HOME": str(home)}


def kubectl(env: dict[str, str], *args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([KUBECTL, *args], env=env, input=input, capture_output=True, text=True, timeout=60)


def _seen_since(kubelet: LoopbackKubelet, mark: int) -> list[Any]:
    return kubelet.seen[mark:]


def test_kubectl_logs_goes_to_the_nodes_kubelet_with_the_client_certificate(
    env: dict[str, str], kubelet: LoopbackKubelet
) -> None:
    mark = len(kubelet.seen)
    proc = kubectl(env, "logs", "web")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == LINES
    seen = _seen_since(kubelet, mark)
    assert [(s.path, s.query) for s in seen] == [("/containerLogs/default/web/app", [])]
    # serve presented its kubelet client certificate (the kubelet would answer 401 without one).
    assert seen[0].peer_cn == security.KUBELET_CLIENT_NAME


def test_kubectl_logs_parameters_reach_the_kubelet(env: dict[str, str], kubelet: LoopbackKubelet) -> None:
    mark = len(kubelet.seen)
    proc = kubectl(env, "logs", "web", "--tail", "1", "--timestamps", "--since", "1h", "--limit-bytes", "100")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["line 3"]
    (seen,) = _seen_since(kubelet, mark)
    assert dict(seen.query) == {
        "timestamps": "true",
        "sinceSeconds": "3600",
        "tailLines": "1",
        "limitBytes": "100",
    }


def test_kubectl_logs_follow_streams_until_the_container_ends(
    env: dict[str, str], kubelet: LoopbackKubelet
) -> None:
    proc = subprocess.Popen(
        [KUBECTL, "logs", "-f", "web"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    # The first lines arrive while the kubelet still holds the stream open.
    first = [proc.stdout.readline().rstrip("\n") for _ in range(3)]
    assert first == LINES
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert out.splitlines() == ["follow 0", "follow 1", "follow 2"]


def test_kubectl_logs_picks_the_container_as_kube_apiserver_does(env: dict[str, str]) -> None:
    proc = kubectl(env, "logs", "two", "-c", "b")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["b1"]
    raw = kubectl(env, "get", "--raw", "/api/v1/namespaces/default/pods/two/log")
    assert raw.returncode != 0
    assert "a container name must be specified for pod two, choose one of: [a b]" in raw.stderr
    bad = kubectl(env, "logs", "web", "-c", "nope")
    assert bad.returncode != 0 and "container nope is not valid for pod web" in bad.stderr


def test_bad_log_options_are_refused_before_any_node_is_asked(
    server: EmbeddedApiServer, kubelet: LoopbackKubelet
) -> None:
    mark = len(kubelet.seen)
    resp = _get(server, "/api/v1/namespaces/default/pods/web/log?tailLines=-1")
    assert resp.status == 422
    body = json.loads(resp.data)
    assert body["reason"] == "Invalid"
    assert (
        body["message"]
        == 'PodLogOptions "web" is invalid: tailLines: Invalid value: -1: must be greater than or equal to 0'
    )
    resp = _get(server, "/api/v1/namespaces/default/pods/web/log?tailLines=x")
    assert resp.status == 400
    assert kubelet.seen[mark:] == []


def test_a_pod_not_found_is_the_pods_404_and_an_unscheduled_pod_has_an_empty_log(
    server: EmbeddedApiServer, env: dict[str, str]
) -> None:
    proc = kubectl(env, "logs", "ghost")
    assert proc.returncode != 0 and 'pods "ghost" not found' in proc.stderr
    resp = _get(server, "/api/v1/namespaces/default/pods/pending/log")
    assert resp.status == 200 and resp.data == b""


def test_kubectl_exec_runs_with_stdin_output_and_exit_code(
    env: dict[str, str], kubelet: LoopbackKubelet
) -> None:
    mark = len(kubelet.seen)
    proc = kubectl(env, "exec", "web", "--", "echo", "hello", "world")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "hello world\n"
    (seen,) = _seen_since(kubelet, mark)
    assert seen.path == "/exec/default/web/app"
    assert seen.query == [
        ("stdout", "1"),
        ("stderr", "1"),
        ("command", "echo"),
        ("command", "hello"),
        ("command", "world"),
    ]

    piped = kubectl(env, "exec", "-i", "web", "--", "cat", input="through stdin\n")
    assert piped.returncode == 0, piped.stderr
    assert piped.stdout == "through stdin\n"

    failed = kubectl(env, "exec", "web", "--", "sh", "-c", "echo oops >&2; exit 3")
    assert failed.returncode == 3
    assert "oops" in failed.stderr


def test_kubectl_get_raw_node_proxy_stats_summary(env: dict[str, str], kubelet: LoopbackKubelet) -> None:
    proc = kubectl(env, "get", "--raw", "/api/v1/nodes/vn-1/proxy/stats/summary")
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["node"]["cpu"]["usageNanoCores"] == 350_000_000
    assert {p["podRef"]["name"] for p in summary["pods"]} == {"web", "two", "endless"}
    health = kubectl(env, "get", "--raw", "/api/v1/nodes/vn-1/proxy/healthz")
    assert health.returncode == 0 and health.stdout == "ok"


def test_kubectl_top_pod_and_node_read_metrics_from_the_kubelets(env: dict[str, str]) -> None:
    pods = kubectl(env, "top", "pod", "web", "--no-headers")
    assert pods.returncode == 0, pods.stderr
    assert pods.stdout.split() == ["web", "25m", "64Mi"]
    containers = kubectl(env, "top", "pod", "two", "--containers", "--no-headers")
    assert containers.returncode == 0, containers.stderr
    assert [line.split() for line in containers.stdout.splitlines()] == [
        ["two", "a", "25m", "64Mi"],
        ["two", "b", "30m", "65Mi"],
    ]
    nodes = kubectl(env, "top", "node", "vn-1", "--no-headers")
    assert nodes.returncode == 0, nodes.stderr
    assert nodes.stdout.split()[:3] == ["vn-1", "350m", "2048Mi"]


def test_metrics_api_discovery_and_objects(server: EmbeddedApiServer) -> None:
    groups = json.loads(_get(server, "/apis").data)["groups"]
    metrics = next(g for g in groups if g["name"] == "metrics.k8s.io")
    assert metrics["preferredVersion"] == {"groupVersion": "metrics.k8s.io/v1beta1", "version": "v1beta1"}
    resources = json.loads(_get(server, "/apis/metrics.k8s.io/v1beta1").data)["resources"]
    assert {(r["name"], r["kind"], r["namespaced"]) for r in resources} == {
        ("nodes", "NodeMetrics", False),
        ("pods", "PodMetrics", True),
    }
    listed = json.loads(
        _get(server, "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods?labelSelector=app%3Dweb").data
    )
    assert listed["kind"] == "PodMetricsList"
    assert [(i["metadata"]["name"], i["containers"]) for i in listed["items"]] == [
        ("web", [{"name": "app", "usage": {"cpu": "25000000n", "memory": "65536Ki"}}])
    ]
    every = json.loads(_get(server, "/apis/metrics.k8s.io/v1beta1/pods").data)
    assert sorted(i["metadata"]["name"] for i in every["items"]) == ["endless", "two", "web"]
    nodes = json.loads(_get(server, "/apis/metrics.k8s.io/v1beta1/nodes").data)
    # Only vn-1 can be scraped: vn-dead refuses connections and vn-none has no kubelet port.
    assert [(i["metadata"]["name"], i["usage"]) for i in nodes["items"]] == [
        ("vn-1", {"cpu": "350000000n", "memory": "2097152Ki"})
    ]
    # Pods on nodes that cannot be scraped have no metrics, as with metrics-server.
    missing = _get(server, "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods/dead")
    assert missing.status == 404
    assert json.loads(missing.data)["message"] == 'pods.metrics.k8s.io "dead" not found'


def test_discovery_lists_the_kubelet_subresources(server: EmbeddedApiServer) -> None:
    names = {r["name"]: r for r in json.loads(_get(server, "/api/v1").data)["resources"]}
    for sub, kind in (
        ("pods/log", "Pod"),
        ("pods/exec", "PodExecOptions"),
        ("pods/attach", "PodAttachOptions"),
        ("pods/portforward", "PodPortForwardOptions"),
        ("nodes/proxy", "NodeProxyOptions"),
    ):
        assert names[sub]["kind"] == kind


def test_a_node_without_a_kubelet_api_says_so(env: dict[str, str], server: EmbeddedApiServer) -> None:
    port = _kubelet_port(server, "vn-dead")
    logs = kubectl(env, "logs", "dead")
    assert logs.returncode != 0
    url = f"https://127.0.0.1:{port}/containerLogs/default/dead/app"
    assert (
        f'Error from server: Get "{url}": dial tcp 127.0.0.1:{port}: connect: connection refused'
        in logs.stderr
    )
    resp = _get(server, "/api/v1/namespaces/default/pods/dead/log")
    assert resp.status == 500 and "reason" not in json.loads(resp.data)

    exec_ = kubectl(env, "exec", "dead", "--", "true")
    assert exec_.returncode != 0
    assert f"error dialing backend: dial tcp 127.0.0.1:{port}: connect: connection refused" in exec_.stderr

    none = kubectl(env, "logs", "none")
    assert none.returncode != 0
    assert 'node "vn-none" has no kubelet API' in none.stderr
    proxied = kubectl(env, "get", "--raw", "/api/v1/nodes/vn-none/proxy/stats/summary")
    assert proxied.returncode != 0 and 'node "vn-none" has no kubelet API' in proxied.stderr


def test_exec_without_an_upgrade_is_refused(server: EmbeddedApiServer) -> None:
    resp = _get(server, "/api/v1/namespaces/default/pods/web/exec?command=ls&stdout=true")
    assert resp.status == 400
    assert json.loads(resp.data)["message"] == "Upgrade request required"


def _kubelet_port(server: EmbeddedApiServer, node: str) -> int:
    return int(
        server.store.get("nodes", None, node).obj["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"]
    )


def _get(server: EmbeddedApiServer, path: str) -> urllib3.BaseHTTPResponse:
    assert server.tls is not None
    http = urllib3.PoolManager(cert_reqs="CERT_REQUIRED", ca_cert_data=server.tls.ca_pem.decode())
    return http.request(
        "GET", server.url + path, headers={"Authorization": f"Bearer {TOKEN}"}, retries=False, timeout=30
    )


def test_podstatus_serve_keeps_its_kubelet_client_certificate_and_ca_in_the_state_folder(
    tmp_path: Path,
) -> None:
    """The CLI: the kubelet client CA file appears in --state-dir; a kubelet that trusts that file
    serves `kubectl logs` through `podstatus serve`; a restart presents the same certificate."""
    state = tmp_path / "state"
    kubeconfig = tmp_path / "kubeconfig"
    port = _free_port()

    def start() -> subprocess.Popen[str]:
        proc = subprocess.Popen(
            [sys.executable, "-m", "podstatus.cli", "serve", "--port", str(port), "--state-dir", str(state),
             "--kubeconfig", str(kubeconfig)],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        assert proc.stdout is not None
        for line in proc.stdout:
            if "kubelet client CA" in line:
                return proc
        proc.kill()
        raise AssertionError(f"serve did not start: {proc.communicate()[0]}")

    serve = start()
    kl: LoopbackKubelet | None = None
    try:
        ca_file = state / security.KUBELET_CLIENT_CA_FILE
        assert ca_file.read_bytes().startswith(b"-----BEGIN CERTIFICATE-----")
        kl = LoopbackKubelet(ca_file.read_bytes(), {("default", "web"): {"app": LINES}}).start()
        env = {**os.environ, "KUBECONFIG": str(kubeconfig), "HOME": str(tmp_path)}
        node = {
            "apiVersion": "v1", "kind": "Node", "metadata": {"name": "vn-1"},
        }  # fmt: skip
        assert kubectl(env, "create", "-f", "-", input=json.dumps(node)).returncode == 0
        status = {"status": {"addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
                             "daemonEndpoints": {"kubeletEndpoint": {"Port": kl.port}}}}  # fmt: skip
        patched = kubectl(env, "patch", "node", "vn-1", "--subresource", "status", "-p", json.dumps(status))
        assert patched.returncode == 0, patched.stderr
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web"},
               "spec": {"nodeName": "vn-1", "containers": [{"name": "app", "image": "busybox"}]}}  # fmt: skip
        assert kubectl(env, "create", "-f", "-", input=json.dumps(pod)).returncode == 0
        logs = kubectl(env, "logs", "web")
        assert logs.returncode == 0, logs.stderr
        assert logs.stdout.splitlines() == LINES
        saved = json.loads((state / security.STATE_FILE).read_text())
        first_cert = saved["kubeletClientCert"]
        serve.terminate()
        serve.communicate(timeout=30)
        serve = start()
        assert json.loads((state / security.STATE_FILE).read_text())["kubeletClientCert"] == first_cert
        deadline = time.monotonic() + 20
        # The restarted server has an empty store: the kubelet is reached only once objects exist again.
        while kubectl(env, "get", "--raw", "/version").returncode != 0 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert kubectl(env, "create", "-f", "-", input=json.dumps(node)).returncode == 0
        assert (
            kubectl(
                env, "patch", "node", "vn-1", "--subresource", "status", "-p", json.dumps(status)
            ).returncode
            == 0
        )
        health = kubectl(env, "get", "--raw", "/api/v1/nodes/vn-1/proxy/healthz")
        assert health.returncode == 0 and health.stdout == "ok", health.stderr
        assert kl.seen[-1].peer_cn == security.KUBELET_CLIENT_NAME
    finally:
        serve.terminate()
        serve.communicate(timeout=30)
        if kl is not None:
            kl.stop()


def test_kubectl_attach_streams_both_ways(env: dict[str, str], kubelet: LoopbackKubelet) -> None:
    mark = len(kubelet.seen)
    proc = kubectl(env, "attach", "-i", "web", input="typed in\n")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["attached to app", "typed in"]
    (seen,) = _seen_since(kubelet, mark)
    assert seen.path == "/attach/default/web/app"
    assert dict(seen.query) == {"stdin": "1", "stdout": "1", "stderr": "1"}


class _Hello(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = f"hello from the pod's port, path {self.path}\n".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def test_port_forward_relays_an_http_request_through_serve(
    server: EmbeddedApiServer, kubelet: LoopbackKubelet
) -> None:
    """The WebSocket upgrade goes through serve untouched (the kubelet's port-forward channel
    protocol here: kubectl's own SPDY-over-WebSocket tunnel is the kubelet's to speak)."""
    responder = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hello)
    threading.Thread(target=responder.serve_forever, daemon=True).start()
    kubelet.forwards[80] = responder.server_address[1]
    assert server.tls is not None
    context = ssl.create_default_context(cadata=server.tls.ca_pem.decode())

    async def forward() -> bytes:
        url = server.url + "/api/v1/namespaces/default/pods/web/portforward?ports=80"
        got = b""
        async with aiohttp.ClientSession() as session, session.ws_connect(
            url, protocols=("v4.channel.k8s.io",), ssl=context,
            headers={"Authorization": f"Bearer {TOKEN}"},
        ) as ws:  # fmt: skip
            assert ws.protocol == "v4.channel.k8s.io"
            # Each channel opens with the port, little endian.
            assert [(await ws.receive_bytes()) for _ in range(2)] == [b"\x00\x50\x00", b"\x01\x50\x00"]
            await ws.send_bytes(b"\x00GET /through HTTP/1.0\r\nHost: pod\r\n\r\n")
            async for msg in ws:
                if msg.type == aiohttp.WSMsgType.BINARY and msg.data[:1] == b"\x00":
                    got += msg.data[1:]
        # aiohttp closes TLS transports on the next loop turns (its documented graceful shutdown).
        await asyncio.sleep(0.25)
        return got

    try:
        answer = asyncio.run(asyncio.wait_for(forward(), 30))
    finally:
        responder.shutdown()
        responder.server_close()
    assert answer.startswith(b"HTTP/1.0 200")
    assert answer.endswith(b"hello from the pod's port, path /through\n")
    assert kubelet.seen[-1].path == "/portForward/default/web" and kubelet.seen[-1].query == [("port", "80")]


def test_a_followed_log_ends_at_the_kubelet_when_kubectl_goes(
    env: dict[str, str], kubelet: LoopbackKubelet
) -> None:
    """serve notices the departed client (an idle check each second) and closes the node's
    stream, so abandoned `logs -f` hold nothing on either side."""
    proc = subprocess.Popen(
        [KUBECTL, "logs", "-f", "endless"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    assert proc.stdout.readline() == "start\n"
    assert proc.stdout.readline() == "tick 0\n"
    assert not kubelet.endless_ended.is_set()
    proc.kill()
    proc.communicate(timeout=30)
    assert kubelet.endless_ended.wait(20)
