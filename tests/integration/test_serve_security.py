"""`podstatus serve` access: bearer token, TLS, the kubeconfig file, the non-loopback warning."""

from __future__ import annotations

import json
import logging
import os
import signal
import stat
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
from podstatus.server.security import bearer_ok, is_loopback
from podstatus.tls import write_private
from testkit import kubectl_path

KUBECTL = kubectl_path()
TOKEN = "s3cret-token-for-tests"
POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "p", "namespace": "default"},
    "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "busybox"}]},
}


@pytest.fixture(scope="module")
def secured() -> Iterator[EmbeddedApiServer]:
    with EmbeddedApiServer(token=TOKEN, tls=True) as srv:
        yield srv


def _get(server: EmbeddedApiServer, path: str, headers: dict[str, str]) -> urllib3.BaseHTTPResponse:
    assert server.tls is not None
    http = urllib3.PoolManager(cert_reqs="CERT_REQUIRED", ca_cert_data=server.tls.ca_pem.decode())
    return http.request("GET", server.url + path, headers=headers, retries=False, timeout=10)


@pytest.mark.parametrize(
    "headers", [{}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Basic {TOKEN}"}]
)
def test_requests_without_the_token_get_401_with_a_status_body(
    secured: EmbeddedApiServer, headers: dict[str, str]
) -> None:
    # /version and the health checks answer anyone without credentials (test_serve_parity.py).
    for path in ("/api/v1/namespaces/default/pods", "/api", "/openapi/v2"):
        resp = _get(secured, path, headers)
        assert resp.status == 401
        assert json.loads(resp.data) == {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": "Unauthorized",
            "reason": "Unauthorized",
            "code": 401,
        }


def test_requests_with_the_token_pass(secured: EmbeddedApiServer) -> None:
    resp = _get(secured, "/api/v1/namespaces/default/pods", {"Authorization": f"Bearer {TOKEN}"})
    assert resp.status == 200 and json.loads(resp.data)["kind"] == "PodList"


def test_the_certificate_is_for_loopback_and_signed_by_the_written_ca(
    secured: EmbeddedApiServer, tmp_path: Path
) -> None:
    assert secured.url.startswith("https://127.0.0.1:")
    # Without the CA, verification fails: the server is not trusted blindly.
    with pytest.raises(urllib3.exceptions.SSLError):
        urllib3.PoolManager(cert_reqs="CERT_REQUIRED").request(
            "GET", secured.url + "/version", retries=False, timeout=10
        )
    config = yaml.safe_load(secured.write_kubeconfig(tmp_path / "config").read_text())
    assert config["clusters"][0]["cluster"]["certificate-authority-data"]
    assert config["users"][0]["user"] == {"token": TOKEN}


@pytest.mark.skipif(KUBECTL is None, reason="kubectl 1.37 is not installed")
def test_kubectl_over_tls_with_the_written_kubeconfig(secured: EmbeddedApiServer, tmp_path: Path) -> None:
    assert KUBECTL is not None
    config = secured.write_kubeconfig(tmp_path / "config")
    env = {**os.environ, "KUBECONFIG": str(config), "HOME": str(tmp_path)}
    run = [KUBECTL]
    proc = subprocess.run([*run, "create", "-f", "-"], env=env, input=json.dumps(POD), capture_output=True,
                          text=True, timeout=60)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    proc = subprocess.run([*run, "get", "pod", "p", "-o", "jsonpath={.spec.nodeName}"], env=env,
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert proc.returncode == 0 and proc.stdout == "n1", proc.stderr
    proc = subprocess.run([*run, "delete", "pod", "p", "--grace-period=0", "--force"], env=env,
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    # The same kubeconfig with a wrong token is refused.
    broken = yaml.safe_load(config.read_text())
    broken["users"][0]["user"] = {"token": "wrong"}
    config.write_text(json.dumps(broken))
    proc = subprocess.run([*run, "get", "pods"], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0 and "Unauthorized" in proc.stderr


def test_http_kube_client_over_tls_with_a_token(secured: EmbeddedApiServer, tmp_path: Path) -> None:
    config = secured.write_kubeconfig(tmp_path / "config")
    client = HttpKubeClient.from_kubeconfig(config)
    try:
        created = client.create_pod({**POD, "metadata": {"name": "via-client", "namespace": "default"}})
        got = client.get_pod("default", "via-client")
        assert got.metadata.uid == created.metadata.uid
    finally:
        client.close()


def test_kubeconfig_is_private_and_never_written_through_a_symlink(tmp_path: Path) -> None:
    with EmbeddedApiServer(token=TOKEN) as server:
        path = server.write_kubeconfig(tmp_path / "kc")
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        # Rewriting an existing file (0644 before) leaves it 0600 too.
        path.chmod(0o644)
        server.write_kubeconfig(path)
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        victim = tmp_path / "victim"
        victim.write_text("untouched")
        link = tmp_path / "planted"
        link.symlink_to(victim)
        with pytest.raises(PermissionError, match="symbolic link"):
            server.write_kubeconfig(link)
        assert victim.read_text() == "untouched"
        assert link.is_symlink()
    assert not list(tmp_path.glob(".*.tmp")), "no temporary file is left behind"


def test_write_private_refuses_a_symlinked_target_even_to_nowhere(tmp_path: Path) -> None:
    link = tmp_path / "dangling"
    link.symlink_to(tmp_path / "would-be-created")
    with pytest.raises(PermissionError):
        write_private(link, b"secret")
    assert not (tmp_path / "would-be-created").exists()


def test_token_and_loopback_rules() -> None:
    assert bearer_ok(f"Bearer {TOKEN}", TOKEN) and bearer_ok(f"bearer  {TOKEN} ", TOKEN)
    assert not bearer_ok(None, TOKEN) and not bearer_ok(f"Bearer {TOKEN}x", TOKEN)
    assert all(map(is_loopback, ["127.0.0.1", "127.1.2.3", "::1", "localhost"]))
    assert not any(map(is_loopback, ["0.0.0.0", "::", "10.0.0.1", "example.com"]))


def test_a_non_loopback_host_is_warned_about_in_the_log(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="podstatus.server.http"), EmbeddedApiServer(host="0.0.0.0"):
        pass
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings and "reachable from other machines" in warnings[0].getMessage()
    assert "NO authentication" in warnings[0].getMessage()


def _serve(tmp_path: Path, *args: str) -> tuple[str, dict[str, object]]:
    """Run `podstatus serve ARGS` until its kubeconfig exists; its stderr and the kubeconfig."""
    kubeconfig = tmp_path / "serve.kubeconfig"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "podstatus.cli",
            "serve",
            "--port",
            "0",
            "--kubeconfig",
            str(kubeconfig),
            *args,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "COLUMNS": "200"},
    )
    try:
        deadline = time.monotonic() + 30
        while not kubeconfig.exists() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        config = yaml.safe_load(kubeconfig.read_text())
        assert stat.S_IMODE(kubeconfig.stat().st_mode) == 0o600
    finally:
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=20)
    return stderr, config


def test_serve_defaults_to_a_token_and_tls_on_loopback(tmp_path: Path) -> None:
    stderr, config = _serve(tmp_path)
    assert "warning" not in stderr
    cluster = config["clusters"][0]["cluster"]  # type: ignore[index]
    assert cluster["server"].startswith("https://127.0.0.1:") and cluster["certificate-authority-data"]
    assert len(config["users"][0]["user"]["token"]) >= 40  # type: ignore[index]
    (tmp_path / "open").mkdir()
    _, config = _serve(tmp_path / "open", "--no-token")
    assert config["clusters"][0]["cluster"] == {"server": config["clusters"][0]["cluster"]["server"]}  # type: ignore[index]
    assert config["clusters"][0]["cluster"]["server"].startswith("http://")  # type: ignore[index]


def test_serve_refuses_a_token_without_tls(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "podstatus.cli", "serve", "--port", "0", "--no-tls",
         "--kubeconfig", str(tmp_path / "kc")],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 2 and "--no-tls needs --no-token" in proc.stderr


def test_serve_on_a_non_loopback_host_warns_on_stderr_and_defaults_to_tls(tmp_path: Path) -> None:
    stderr, config = _serve(tmp_path, "--host", "0.0.0.0")
    assert "not a loopback address" in stderr and "token required" in stderr
    assert "reachable from other machines" in stderr  # the logged warning too
    cluster = config["clusters"][0]["cluster"]  # type: ignore[index]
    assert cluster["server"].startswith("https://0.0.0.0:") and cluster["certificate-authority-data"]
    (tmp_path / "open").mkdir()
    stderr, _ = _serve(tmp_path / "open", "--host", "0.0.0.0", "--no-token", "--no-tls")
    assert "NO authentication" in stderr and "NO TLS" in stderr


def test_serve_refuses_a_planted_symlink_kubeconfig(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("untouched")
    (tmp_path / "serve.kubeconfig").symlink_to(victim)
    proc = subprocess.run(
        [sys.executable, "-m", "podstatus.cli", "serve", "--port", "0", "--kubeconfig",
         str(tmp_path / "serve.kubeconfig")],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 2 and "symbolic link" in proc.stderr
    assert victim.read_text() == "untouched"


def test_a_watch_over_tls_ends_when_its_client_leaves(
    secured: EmbeddedApiServer, capfd: pytest.CaptureFixture[str]
) -> None:
    import http.client
    import ssl

    assert secured.tls is not None
    context = ssl.create_default_context(cadata=secured.tls.ca_pem.decode())
    baseline = secured.open_streams
    conn = http.client.HTTPSConnection("127.0.0.1", secured.port, context=context, timeout=10)
    conn.request(
        "GET", "/api/v1/namespaces/default/pods?watch=1", headers={"Authorization": f"Bearer {TOKEN}"}
    )
    resp = conn.getresponse()
    assert resp.status == 200
    assert secured.open_streams > baseline  # the watch is being served (it holds a pool thread)
    conn.close()
    resp.close()
    deadline = time.monotonic() + 10
    while secured.open_streams > baseline and time.monotonic() < deadline:
        time.sleep(0.1)
    assert secured.open_streams == baseline, "the watch outlived its client"
    # It ended by noticing the departure, not by an error (no peeking through TLS).
    assert "Traceback" not in capfd.readouterr().err
