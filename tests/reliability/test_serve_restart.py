"""`podstatus serve` restarted: its clients keep working.

Real processes on loopback: `podstatus serve` stopped and started again, a `podstatus node`
running across the restart, an `HttpKubeClient` whose kubeconfig is rewritten, and a TLS
client that does not trust the server.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import urllib3
import yaml

from podstatus.clients.http import HttpKubeClient
from podstatus.server import EmbeddedApiServer

LEASES = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"
POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "after-restart"},
    "spec": {"nodeName": "vr7", "containers": [{"name": "c", "image": "busybox"}]},
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Serve:
    """One `podstatus serve` process; its stderr is kept when it stops."""

    def __init__(self, kubeconfig: Path, port: int, *args: str) -> None:
        self.kubeconfig = kubeconfig
        if kubeconfig.exists():
            kubeconfig.unlink()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "podstatus.cli", "serve", "--port", str(port),
             "--kubeconfig", str(kubeconfig), *args],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
            env={**os.environ, "COLUMNS": "200"},
        )  # fmt: skip
        self.stderr = ""
        deadline = time.monotonic() + 60
        while not kubeconfig.exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise AssertionError(f"podstatus serve did not start: {self.stderr}")
            time.sleep(0.05)
        self.config = yaml.safe_load(kubeconfig.read_text())

    def get(self, path: str) -> urllib3.BaseHTTPResponse:
        cluster = self.config["clusters"][0]["cluster"]
        token = self.config["users"][0]["user"]["token"]
        ca = base64.b64decode(cluster["certificate-authority-data"]).decode()
        http = urllib3.PoolManager(cert_reqs="CERT_REQUIRED", ca_cert_data=ca)
        return http.request(
            "GET",
            cluster["server"] + path,
            headers={"Authorization": f"Bearer {token}"},
            retries=False,
            timeout=10,
        )

    def post(self, path: str, obj: object) -> urllib3.BaseHTTPResponse:
        cluster = self.config["clusters"][0]["cluster"]
        token = self.config["users"][0]["user"]["token"]
        ca = base64.b64decode(cluster["certificate-authority-data"]).decode()
        http = urllib3.PoolManager(cert_reqs="CERT_REQUIRED", ca_cert_data=ca)
        headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        return http.request(
            "POST", cluster["server"] + path, body=json.dumps(obj), headers=headers, retries=False, timeout=10
        )

    def stop(self) -> str:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            _, self.stderr = self.proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _, self.stderr = self.proc.communicate()
        return self.stderr


def _renew_times(serve: Serve) -> dict[str, str]:
    resp = serve.get(LEASES)
    assert resp.status == 200, resp.data[:200]
    return {
        item["metadata"]["name"]: (item.get("spec") or {}).get("renewTime", "")
        for item in json.loads(resp.data)["items"]
    }


def _wait_for_renewals(serve: Serve, count: int, limit: float) -> list[str]:
    """The distinct renewTimes of the node's Lease seen on this server, until ``count`` of them."""
    seen: list[str] = []
    deadline = time.monotonic() + limit
    while len(seen) < count and time.monotonic() < deadline:
        times = _renew_times(serve)
        for renewed in times.values():
            if renewed and renewed not in seen:
                seen.append(renewed)
        time.sleep(0.5)
    return seen


@pytest.fixture
def node_process(tmp_path: Path) -> Iterator[list[subprocess.Popen[str]]]:
    procs: list[subprocess.Popen[str]] = []
    yield procs
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate()


@pytest.mark.parametrize("restart", ["same-state-dir", "ephemeral"])
def test_a_running_node_keeps_renewing_its_lease_across_a_serve_restart(
    tmp_path: Path, node_process: list[subprocess.Popen[str]], restart: str
) -> None:
    """Same state folder: the same CA and token, nothing for the node to do but reconnect.
    ``--ephemeral``: a new CA and token; the node re-reads the rewritten kubeconfig."""
    port = _free_port()
    kubeconfig = tmp_path / "kubeconfig"
    args = ["--state-dir", str(tmp_path / "state")] if restart == "same-state-dir" else ["--ephemeral"]
    first = Serve(kubeconfig, port, *args)
    node = subprocess.Popen(
        [sys.executable, "-m", "podstatus.cli", "node", "--kubeconfig", str(kubeconfig), "--name", "vr7", "--kubelet-port", "0"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    node_process.append(node)
    try:
        assert _wait_for_renewals(first, 1, 60), "the node never created its Lease"
    finally:
        first.stop()
    second = Serve(kubeconfig, port, *args)
    try:
        same = second.config == first.config
        assert same == (restart == "same-state-dir")
        # The new server's store is empty: the node creates its Lease again, then renews it.
        renewals = _wait_for_renewals(second, 2, 60)
        assert len(renewals) == 2, f"the node's Lease was not renewed after the restart: {renewals}"
        assert node.poll() is None, "the node agent exited"
        # And it runs a pod bound to it on the new server.
        assert second.post("/api/v1/namespaces/default/pods", POD).status == 201
        deadline = time.monotonic() + 60
        phase = None
        while phase != "Running" and time.monotonic() < deadline:
            phase = json.loads(second.get("/api/v1/namespaces/default/pods/after-restart").data)[
                "status"
            ].get("phase")
            time.sleep(0.5)
        assert phase == "Running"
    finally:
        stderr = second.stop()
    assert "Traceback" not in stderr, stderr[-2000:]


def test_a_client_rereads_a_rewritten_kubeconfig(tmp_path: Path) -> None:
    """A server gone and another one, with a new CA, token and port, writing the same kubeconfig."""
    config = tmp_path / "kubeconfig"
    first = EmbeddedApiServer(token="first-token", tls=True).start()
    first.write_kubeconfig(config)
    client = HttpKubeClient.from_kubeconfig(config)
    try:
        assert client.list_pods("default")[0] == []
        first.stop()
        # The same port: the old CA no longer verifies the server (CERTIFICATE_VERIFY_FAILED).
        second = EmbeddedApiServer(port=first.port, token="second-token", tls=True).start()
        try:
            second.write_kubeconfig(config)
            assert client.list_pods("default")[0] == []
            assert second.counter.get("list") == 1
        finally:
            second.stop()
        # Another port: the old address refuses connections.
        third = EmbeddedApiServer(token="third-token", tls=True).start()
        try:
            third.write_kubeconfig(config)
            assert client.list_pods("default")[0] == []
            assert third.counter.get("list") == 1
        finally:
            third.stop()
    finally:
        client.close()


def test_a_refused_tls_handshake_is_one_log_line(tmp_path: Path) -> None:
    serve = Serve(tmp_path / "kubeconfig", 0, "--state-dir", str(tmp_path / "state"))
    try:
        url = serve.config["clusters"][0]["cluster"]["server"]
        port = int(url.rsplit(":", 1)[1])
        # A client that does not trust the server's CA aborts the handshake.
        context = ssl.create_default_context()
        with (
            socket.create_connection(("127.0.0.1", port), timeout=10) as raw,
            pytest.raises(ssl.SSLCertVerificationError),
        ):
            context.wrap_socket(raw, server_hostname="127.0.0.1")
        # The server still serves a client that trusts it.
        assert serve.get("/version").status == 200
        time.sleep(0.5)
    finally:
        stderr = serve.stop()
    assert "Traceback" not in stderr, stderr
    lines = [line for line in stderr.splitlines() if "TLS handshake" in line]
    assert len(lines) == 1, stderr
    assert "127.0.0.1" in lines[0]
