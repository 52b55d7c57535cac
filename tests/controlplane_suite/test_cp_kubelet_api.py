"""The kubelet API of ``podstatus node`` behind the real kube-apiserver v1.37.2, and a real metrics-server.

Everything goes the way a user's request goes: ``kubectl logs|exec|attach|port-forward`` to
kube-apiserver, which reaches the node's kubelet port (its ``status.addresses`` InternalIP
and ``daemonEndpoints``; the fixture starts kube-apiserver with
``--kubelet-preferred-address-types=InternalIP,Hostname`` and a kubelet client certificate
signed by the cluster CA, which the node is given as its client CA).

Two things kube-apiserver does not do on loopback, found here and said in the tests:

- ``nodes/proxy`` (``kubectl get --raw /api/v1/nodes/<n>/proxy/...``) refuses any node address
  that is not global unicast (``isProxyableHostname`` in pkg/registry/core/node/strategy.go):
  "address not allowed". The suite proves that refusal, and reads the same ``/stats/summary``
  from the kubelet port with the apiserver's own kubelet client certificate.
- metrics-server is reached through the aggregation layer by an ExternalName Service
  (``localhost``), which needs no Endpoints (EndpointSlices refuse loopback addresses).
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import pty
import re
import select
import ssl
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import metrics_server
import pytest
import yaml
from cpkit import (
    BEHAVIOUR,
    STABLE_NODE,
    TOLERATIONS,
    Agent,
    Cluster,
    agent_supports,
    bin_path,
    condition_status,
    free_port,
    kubectl,
    kubectl_run,
    pod_ready,
    restart_counts,
    unique,
    wait_until,
)

pytestmark = pytest.mark.apiserver

# conftest.ControlPlane (a conftest is not importable by name: the suites each have one).
ControlPlane = Any

KUBELET_NODE = "cp-kubelet-1"
WEB_PORT = 8080


@dataclass
class KubeletNode:
    name: str
    port: int
    pki: Path
    agent: Agent

    def request(
        self,
        path: str,
        *,
        cert: bool = True,
        token: str | None = None,
        method: str = "GET",
    ) -> tuple[int, bytes]:
        """One HTTPS request to the node's kubelet port: as kube-apiserver (its client cert), by token, or anonymous."""
        ctx = ssl.create_default_context()
        # The serving certificate is self-signed (the node's default), as kube-apiserver
        # without --kubelet-certificate-authority accepts it.
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        if cert:
            ctx.load_cert_chain(self.pki / "kubelet-client.crt", self.pki / "kubelet-client.key")
        conn = http.client.HTTPSConnection("127.0.0.1", self.port, context=ctx, timeout=30)
        try:
            headers = {"Authorization": f"Bearer {token}"} if token else {}
            conn.request(method, path, headers=headers)
            resp = conn.getresponse()
            return resp.status, resp.read()
        finally:
            conn.close()


def _kubelet_args(port: int, pki: Path) -> list[str]:
    # --address is left to its default: the address the agent reaches kube-apiserver from (loopback).
    return [
        "--kubelet-port",
        str(port),
        "--kubelet-client-ca",
        str(pki / "ca.crt"),
        "--authentication-token-webhook",
        "--sim-exec",
    ]


@pytest.fixture(scope="module")
def kubelet_node(
    control_plane: ControlPlane,
    cluster: Cluster,
    agent_kubeconfig: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[KubeletNode]:
    """A node of its own with the kubelet API on a free loopback port, exec simulated (opt-in)."""
    if not agent_supports("--kubelet-port"):
        pytest.fail("podstatus node has no --kubelet-port: the kubelet API is not there", pytrace=False)
    port = free_port()
    pki = control_plane.workdir / "pki"
    logs = tmp_path_factory.mktemp("kubelet-node")
    agent = Agent(
        KUBELET_NODE, agent_kubeconfig, logs / f"{KUBELET_NODE}.log", extra_args=_kubelet_args(port, pki)
    )
    agent.start()
    try:
        wait_until(
            lambda: agent.alive() and condition_status(cluster.node(KUBELET_NODE), "Ready") == "True",
            timeout=90,
            what=f"node {KUBELET_NODE} Ready",
            state=lambda: agent.log_text()[-3000:],
        )
        yield KubeletNode(KUBELET_NODE, port, pki, agent)
    finally:
        agent.stop()
        with contextlib.suppress(Exception):  # cleanup only
            cluster.core.delete_node(KUBELET_NODE)


def web_pod(name: str, *, behaviour: str = "serve", containers: tuple[str, ...] = ("app",)) -> dict[str, Any]:
    """A pod bound to the kubelet node; the first container declares WEB_PORT and an env var."""
    specs: list[dict[str, Any]] = []
    for i, cname in enumerate(containers):
        c: dict[str, Any] = {
            "name": cname,
            "image": f"registry.example.com/web/{cname}:1.0",
            "env": [{"name": "GREETING", "value": f"hello from {cname}"}],
        }
        if i == 0:
            c["ports"] = [{"name": "http", "containerPort": WEB_PORT, "protocol": "TCP"}]
        specs.append(c)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": name}, "annotations": {BEHAVIOUR: behaviour}},
        "spec": {
            "nodeName": KUBELET_NODE,
            "containers": specs,
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 2,
            "tolerations": TOLERATIONS,
        },
    }


def running_pod(cluster: Cluster, ns: str, manifest: dict[str, Any], *, ready: bool = True) -> dict[str, Any]:
    name = manifest["metadata"]["name"]
    cluster.core.create_namespaced_pod(ns, manifest)
    check = pod_ready if ready else (lambda p: (p.get("status") or {}).get("phase") == "Running")
    result: dict[str, Any] = wait_until(
        lambda: (lambda p: p if check(p) else None)(cluster.pod(ns, name)),
        timeout=60,
        what=f"pod {ns}/{name} {'Ready' if ready else 'Running'}",
        state=lambda: cluster.pod(ns, name).get("status"),
    )
    return result


# --- the node as kube-apiserver sees it ---------------------------------------------------


def test_node_advertises_where_the_kubelet_api_listens(cluster: Cluster, kubelet_node: KubeletNode) -> None:
    node = cluster.node(KUBELET_NODE)
    status = node["status"]
    assert status["daemonEndpoints"]["kubeletEndpoint"]["Port"] == kubelet_node.port
    internal = [a["address"] for a in status["addresses"] if a["type"] == "InternalIP"]
    assert internal == ["127.0.0.1"], status["addresses"]
    # kube-apiserver >= 1.36 proxies WebSockets straight to a node that declares this.
    assert "ExtendWebSocketsToKubelet" in (status.get("declaredFeatures") or [])
    code, body = kubelet_node.request("/healthz")
    assert (code, body.strip()) == (200, b"ok")


# --- logs -----------------------------------------------------------------------------------


def test_kubectl_logs_tail_container_and_follow(
    control_plane: ControlPlane, cluster: Cluster, ns: str, kubelet_node: KubeletNode
) -> None:
    kc = control_plane.kubeconfig
    running_pod(cluster, ns, web_pod("web", containers=("app", "sidecar")))
    out = kubectl(kc, "logs", "-n", ns, "web", "-c", "app")
    assert f"pod {ns}/web" in out and "starting app" in out, out
    side = kubectl(kc, "logs", "-n", ns, "web", "-c", "sidecar")
    assert "starting sidecar" in side and "starting app" not in side, side
    # Without -c kubectl picks the first container (and says so on stderr).
    default = kubectl_run(kc, "logs", "-n", ns, "web")
    assert default.returncode == 0 and "starting app" in default.stdout, default
    lines = [ln for ln in out.splitlines() if ln]
    assert len(lines) >= 2, out
    # --tail=1: one line, the last one (a probe line may have come since: it is a line of the log).
    tail = kubectl(kc, "logs", "-n", ns, "web", "-c", "app", "--tail=1")
    assert len(tail.splitlines()) == 1, tail
    assert tail.strip() in kubectl(kc, "logs", "-n", ns, "web", "-c", "app").splitlines(), tail
    assert len(kubectl(kc, "logs", "-n", ns, "web", "-c", "app", "--tail=2").splitlines()) == 2
    assert kubectl(kc, "logs", "-n", ns, "web", "-c", "app", "--limit-bytes=7") == out[:7]
    assert kubectl(kc, "logs", "-n", ns, "web", "-c", "app", "--since-time=2999-01-01T00:00:00Z") == ""
    stamped = kubectl(kc, "logs", "-n", ns, "web", "-c", "app", "--timestamps", "--tail=1")
    assert re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z ", stamped), stamped
    # -f: the stream stays open and new lines arrive; deleting the pod ends the container and the stream.
    proc = subprocess.Popen(
        [bin_path("kubectl"), "--kubeconfig", kc, "logs", "-f", "-n", ns, "web", "-c", "app"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        assert b"starting app" in first, first
        time.sleep(1)
        assert proc.poll() is None, "kubectl logs -f ended while the container runs"
        cluster.core.delete_namespaced_pod("web", ns)
        rest, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        assert b"SIGTERM" in rest or b"exit code" in rest, rest
    finally:
        _reap(proc)


def test_kubectl_logs_previous_after_a_restart(
    control_plane: ControlPlane, cluster: Cluster, ns: str, kubelet_node: KubeletNode
) -> None:
    kc = control_plane.kubeconfig
    cluster.core.create_namespaced_pod(ns, web_pod("crashy", behaviour="crash"))
    wait_until(
        lambda: restart_counts(cluster.pod(ns, "crashy")).get("app", 0) >= 1,
        timeout=90,
        what="crashy restarted once",
        state=lambda: cluster.pod(ns, "crashy").get("status"),
    )
    prev = kubectl(kc, "logs", "-n", ns, "crashy", "--previous")
    assert "starting app" in prev and "panic: simulated crash; exit code" in prev, prev
    # While it waits out its back-off, the current log is still the crashed instance's (as the
    # kubelet's); once it runs again, the new instance's, which says it is a restart.
    wait_until(
        lambda: "(restart " in kubectl(kc, "logs", "-n", ns, "crashy"),
        timeout=90,
        what="the restarted instance's log",
        state=lambda: cluster.pod(ns, "crashy").get("status"),
        interval=2,
    )
    # A pod that never restarted has no previous instance: the kubelet's 400, not a 404 of the pod.
    running_pod(cluster, ns, web_pod("steady"))
    none = kubectl_run(kc, "logs", "-n", ns, "steady", "--previous")
    assert none.returncode != 0
    assert "previous terminated container" in none.stderr or "not found" not in none.stderr.lower(), (
        none.stderr
    )


# --- exec and attach ----------------------------------------------------------------------------


def test_kubectl_exec_output_stdin_and_exit_codes(
    control_plane: ControlPlane, cluster: Cluster, ns: str, kubelet_node: KubeletNode
) -> None:
    kc = control_plane.kubeconfig
    running_pod(cluster, ns, web_pod("sh"))
    out = kubectl(kc, "exec", "-n", ns, "sh", "--", "sh", "-c", "echo $GREETING")
    assert out == "hello from app\n", out
    echoed = kubectl(kc, "exec", "-i", "-n", ns, "sh", "--", "cat", stdin="line one\nline two\n")
    assert echoed == "line one\nline two\n", echoed
    failed = kubectl_run(kc, "exec", "-n", ns, "sh", "--", "sh", "-c", "echo oops >&2; exit 7")
    assert failed.returncode == 7, (failed.returncode, failed.stderr)
    assert "oops" in failed.stderr
    assert "command terminated with exit code 7" in failed.stderr
    # A container the pod does not have: kube-apiserver's 400 naming it.
    missing = kubectl_run(kc, "exec", "-n", ns, "sh", "-c", "nope", "--", "true")
    assert missing.returncode != 0 and "nope" in missing.stderr, missing.stderr


def _reap(proc: subprocess.Popen[bytes]) -> None:
    """The child gone and its pipes closed (an open pipe left to the collector fails the next test)."""
    if proc.poll() is None:
        proc.kill()
        proc.wait()
    for pipe in (proc.stdin, proc.stdout, proc.stderr):
        if pipe is not None:
            with contextlib.suppress(OSError):
                pipe.close()


def test_exec_on_a_node_that_cannot_says_so_through_the_apiserver(
    control_plane: ControlPlane, cluster: Cluster, ns: str, kubelet_node: KubeletNode
) -> None:
    """The suite's other nodes run without --sim-exec: exec is refused naming node and capability."""
    manifest = web_pod("plain")
    manifest["spec"]["nodeName"] = STABLE_NODE
    running_pod(cluster, ns, manifest)
    proc = kubectl_run(control_plane.kubeconfig, "exec", "-n", ns, "plain", "--", "true")
    assert proc.returncode != 0
    assert "exec is not supported" in proc.stderr and STABLE_NODE in proc.stderr, proc.stderr
    assert "NotFound" not in proc.stderr and "could not find" not in proc.stderr, proc.stderr
    # Its logs work all the same.
    assert "starting app" in kubectl(control_plane.kubeconfig, "logs", "-n", ns, "plain")


def _read_until(stream: Any, needle: bytes, *, timeout: float) -> bytes:
    """What a child's pipe gave until ``needle`` showed up (or the time ran out, or it closed)."""
    got = b""
    deadline = time.monotonic() + timeout
    fd = stream.fileno()
    while needle not in got and time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.5)
        if ready:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            got += chunk
    return got


def _run_on_pty(args: list[str], send: bytes, timeout: float = 60) -> tuple[int, bytes]:
    """Run ``args`` with a pseudo-terminal as stdin/stdout (kubectl -t wants a terminal); type ``send``."""
    primary, secondary = pty.openpty()
    proc = subprocess.Popen(args, stdin=secondary, stdout=secondary, stderr=secondary, close_fds=True)
    os.close(secondary)
    out = b""
    deadline = time.monotonic() + timeout
    sent = False
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([primary], [], [], 0.5)
            if ready:
                try:
                    chunk = os.read(primary, 4096)
                except OSError:  # the child closed the terminal
                    break
                if not chunk:
                    break
                out += chunk
            if not sent and time.monotonic() > deadline - timeout + 2:
                os.write(primary, send)
                sent = True
            if proc.poll() is not None and not ready:
                break
        proc.wait(timeout=10)
    finally:
        _reap(proc)
        os.close(primary)
    return proc.returncode, out


def test_kubectl_exec_with_a_terminal(
    control_plane: ControlPlane, cluster: Cluster, ns: str, kubelet_node: KubeletNode
) -> None:
    running_pod(cluster, ns, web_pod("tty"))
    args = [
        bin_path("kubectl"),
        "--kubeconfig",
        control_plane.kubeconfig,
        "exec",
        "-it",
        "-n",
        ns,
        "tty",
        "--",
    ]
    code, out = _run_on_pty([*args, "sh", "-c", "test -t 0 && test -t 1 && echo on-a-tty; exit 3"], b"")
    assert b"on-a-tty" in out, out
    assert code == 3, (code, out)
    # Typed input goes through the terminal: a shell reads a line and answers it.
    code, out = _run_on_pty([*args, "sh", "-c", "read line; echo got:$line"], b"typed\r")
    assert b"got:typed" in out, out
    assert code == 0, (code, out)


def test_kubectl_attach(
    control_plane: ControlPlane, cluster: Cluster, ns: str, kubelet_node: KubeletNode
) -> None:
    kc = control_plane.kubeconfig
    running_pod(cluster, ns, web_pod("attached"))
    proc = subprocess.Popen(
        [bin_path("kubectl"), "--kubeconfig", kc, "attach", "-i", "-n", ns, "attached", "-c", "app"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert proc.stdin is not None and proc.stdout is not None
        time.sleep(3)
        assert proc.poll() is None, proc.communicate(timeout=5)
        # The simulated container reads its stdin and prints each line it gets.
        proc.stdin.write(b"typed into attach\n")
        proc.stdin.flush()
        seen = _read_until(proc.stdout, b"typed into attach", timeout=30)
        assert b"typed into attach" in seen, seen
        # Its end ends the attach: the last words, then kubectl exits.
        cluster.core.delete_namespaced_pod("attached", ns)
        out, err = proc.communicate(timeout=60)
        assert b"SIGTERM" in out or b"exit code" in out, (out, err)
    finally:
        _reap(proc)


# --- port-forward ---------------------------------------------------------------------------------


def test_kubectl_port_forward_carries_a_real_http_request(
    control_plane: ControlPlane, cluster: Cluster, ns: str, kubelet_node: KubeletNode
) -> None:
    running_pod(cluster, ns, web_pod("web"))
    local = free_port()
    proc = subprocess.Popen(
        [
            bin_path("kubectl"),
            "--kubeconfig",
            control_plane.kubeconfig,
            "port-forward",
            "-n",
            ns,
            "pod/web",
            f"{local}:{WEB_PORT}",
            "--address=127.0.0.1",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if b"Forwarding from 127.0.0.1" not in line:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=10)
            err = proc.stderr.read() if proc.stderr is not None and proc.poll() is not None else b""
            pytest.fail(f"kubectl port-forward did not forward: {line!r} {err.decode(errors='replace')}")
        for path in ("/", "/healthz"):
            with urllib.request.urlopen(f"http://127.0.0.1:{local}{path}", timeout=30) as resp:
                body = resp.read()
                assert resp.status == 200, (resp.status, body)
        # The responder stands for the container: it names its pod and port.
        with urllib.request.urlopen(f"http://127.0.0.1:{local}/", timeout=30) as resp:
            text = resp.read().decode("utf-8", "replace")
        assert "web" in text and str(WEB_PORT) in text, text
        assert proc.poll() is None
    finally:
        proc.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=10)
        _reap(proc)


# --- stats and authentication ----------------------------------------------------------------------


def test_stats_summary_through_nodes_proxy_and_the_kubelet_port(
    control_plane: ControlPlane, cluster: Cluster, ns: str, kubelet_node: KubeletNode
) -> None:
    running_pod(cluster, ns, web_pod("stats"))
    kc = control_plane.kubeconfig
    raw = kubectl_run(kc, "get", "--raw", f"/api/v1/nodes/{KUBELET_NODE}/proxy/stats/summary")
    # kube-apiserver refuses nodes/proxy to an address that is not global unicast, as a loopback
    # node's is (isProxyableHostname): the request never reaches the node. Not the node's doing.
    assert raw.returncode != 0 and "address not allowed" in raw.stderr, (raw.returncode, raw.stderr)
    # The same request as kube-apiserver would send it: its kubelet client certificate, the node's port.
    code, body = kubelet_node.request("/stats/summary")
    assert code == 200, body[:500]
    summary = json.loads(body)
    assert summary["node"]["nodeName"] == KUBELET_NODE
    pods = {(p["podRef"]["namespace"], p["podRef"]["name"]): p for p in summary["pods"]}
    assert (ns, "stats") in pods, list(pods)
    app = {c["name"]: c for c in pods[(ns, "stats")]["containers"]}["app"]
    assert app["memory"]["workingSetBytes"] > 0
    assert app["cpu"]["usageCoreNanoSeconds"] > 0


def test_anonymous_callers_get_401_and_the_apiserver_cert_is_let_in(kubelet_node: KubeletNode) -> None:
    for path in ("/pods", "/stats/summary", "/metrics/resource", "/runningpods/"):
        code, body = kubelet_node.request(path, cert=False)
        assert code == 401, (path, code, body[:300])
        code, body = kubelet_node.request(path)
        assert code == 200, (path, code, body[:300])
    pods = json.loads(kubelet_node.request("/pods")[1])
    assert pods["kind"] == "PodList"


def test_a_token_without_nodes_proxy_gets_403(
    control_plane: ControlPlane, cluster: Cluster, ns: str, kubelet_node: KubeletNode
) -> None:
    kc = control_plane.kubeconfig
    kubectl(kc, "create", "serviceaccount", "-n", ns, "nobody")
    kubectl(kc, "create", "serviceaccount", "-n", ns, "reader")
    role = unique("node-reader")
    kubectl(
        kc, "create", "clusterrole", role, "--verb=get", "--resource=nodes/proxy,nodes/stats,nodes/metrics"
    )
    kubectl(
        kc, "create", "clusterrolebinding", role, f"--clusterrole={role}", f"--serviceaccount={ns}:reader"
    )
    try:
        nobody = kubectl(kc, "create", "token", "-n", ns, "nobody").strip()
        reader = kubectl(kc, "create", "token", "-n", ns, "reader").strip()
        code, body = kubelet_node.request("/pods", cert=False, token=nobody)
        assert code == 403, (code, body[:300])
        assert b"nodes" in body and b"proxy" in body, body[:300]
        code, body = kubelet_node.request("/stats/summary", cert=False, token=nobody)
        assert code == 403, (code, body[:300])
        # The same path with a token bound to nodes/proxy: let in (so the 403 was the authorization).
        code, body = kubelet_node.request("/pods", cert=False, token=reader)
        assert code == 200, (code, body[:300])
        code, _ = kubelet_node.request("/pods", cert=False, token="not-a-token")
        assert code == 401
    finally:
        kubectl(kc, "delete", "clusterrolebinding", role, check=False)
        kubectl(kc, "delete", "clusterrole", role, check=False)


# --- metrics-server ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def metrics_server_running(
    control_plane: ControlPlane, cluster: Cluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[int]:
    """Upstream metrics-server v0.8.0 on loopback, registered as v1beta1.metrics.k8s.io."""
    binary = metrics_server.ensure_metrics_server()
    kc = control_plane.kubeconfig
    port = free_port()
    work = tmp_path_factory.mktemp("metrics-server")
    docs = metrics_server.manifests(port)
    manifest = work / "metrics-server.yaml"
    manifest.write_text(yaml.safe_dump_all(docs), encoding="utf-8")
    kubectl(kc, "apply", "-f", str(manifest))
    # Its own identity, as in a cluster: the ServiceAccount's token and upstream's RBAC.
    token = kubectl(
        kc, "create", "token", metrics_server.NAME, "-n", metrics_server.NAMESPACE, "--duration=2h"
    ).strip()
    ms_kc = work / "kubeconfig"
    ca = control_plane.workdir / "pki" / "ca.crt"
    ms_kc.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {
                        "name": "cp",
                        "cluster": {
                            "server": control_plane.info["APISERVER_URL"],
                            "certificate-authority": str(ca),
                        },
                    }
                ],
                "users": [{"name": "ms", "user": {"token": token}}],
                "contexts": [{"name": "cp", "context": {"cluster": "cp", "user": "ms"}}],
                "current-context": "cp",
            }
        ),
        encoding="utf-8",
    )
    ms_kc.chmod(0o600)
    log_path = work / "metrics-server.log"
    cmd = metrics_server.command(binary, kubeconfig=str(ms_kc), port=port, cert_dir=work / "certs")
    with log_path.open("wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        wait_until(
            lambda: proc.poll() is None and _https_ok(port, "/livez"),
            timeout=60,
            what="metrics-server /livez",
            state=lambda: {"exit": proc.poll(), "log": log_path.read_text(errors="replace")[-3000:]},
        )
        yield port
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        kubectl(kc, "delete", "-f", str(manifest), "--ignore-not-found", check=False)


def _https_ok(port: int, path: str) -> bool:
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=5)
    try:
        conn.request("GET", path)
        return conn.getresponse().status == 200
    except OSError:
        return False
    finally:
        conn.close()


def test_metrics_server_is_served_through_the_aggregation_layer(
    control_plane: ControlPlane, metrics_server_running: int
) -> None:
    """The loopback route: APIService -> ExternalName Service (localhost) -> metrics-server."""
    kc = control_plane.kubeconfig

    def available() -> bool:
        svc = json.loads(kubectl(kc, "get", "apiservice", "v1beta1.metrics.k8s.io", "-o", "json"))
        conds = {c["type"]: c for c in (svc.get("status") or {}).get("conditions") or []}
        return conds.get("Available", {}).get("status") == "True"

    wait_until(
        available,
        timeout=60,
        what="APIService v1beta1.metrics.k8s.io Available",
        state=lambda: kubectl(kc, "get", "apiservice", "v1beta1.metrics.k8s.io", "-o", "yaml", check=False),
        interval=1,
    )
    discovery = json.loads(kubectl(kc, "get", "--raw", "/apis/metrics.k8s.io/v1beta1"))
    assert {r["name"] for r in discovery["resources"]} >= {"nodes", "pods"}, discovery
    # kube-apiserver authenticated the caller and passed the user on (front proxy headers); an
    # identity without RBAC on metrics.k8s.io is refused by metrics-server's delegated authorization.
    listed = json.loads(kubectl(kc, "get", "--raw", "/apis/metrics.k8s.io/v1beta1/nodes"))
    assert listed["kind"] == "NodeMetricsList"
    denied = kubectl_run(kc, "get", "--raw", "/apis/metrics.k8s.io/v1beta1/nodes", "--as=nobody")
    assert denied.returncode != 0 and "forbidden" in denied.stderr.lower(), denied.stderr


def _cpu_nanos(q: str) -> int:
    if q.endswith("n"):
        return int(q[:-1])
    if q.endswith("u"):
        return int(q[:-1]) * 1000
    if q.endswith("m"):
        return int(q[:-1]) * 1_000_000
    return int(float(q) * 1e9)


def test_metrics_server_answers_metrics_k8s_io_through_the_aggregator(
    control_plane: ControlPlane,
    cluster: Cluster,
    ns: str,
    kubelet_node: KubeletNode,
    metrics_server_running: int,
) -> None:
    kc = control_plane.kubeconfig
    running_pod(cluster, ns, web_pod("busy", behaviour="serve"))
    path = f"/apis/metrics.k8s.io/v1beta1/namespaces/{ns}/pods/busy"

    def pod_metrics() -> dict[str, Any] | None:
        r = kubectl_run(kc, "get", "--raw", path)
        return json.loads(r.stdout) if r.returncode == 0 else None

    first = wait_until(
        pod_metrics,
        timeout=120,
        what="metrics-server's PodMetrics of busy (through kube-apiserver's aggregation layer)",
        state=lambda: {
            "get": kubectl_run(kc, "get", "--raw", path).stderr,
            "apiservice": kubectl(
                kc, "get", "apiservice", "v1beta1.metrics.k8s.io", "-o", "json", check=False
            )[-2000:],
        },
        interval=2,
    )
    usage = {c["name"]: c["usage"] for c in first["containers"]}
    assert set(usage) == {"app"}, first
    assert _cpu_nanos(usage["app"]["cpu"]) >= 0
    assert usage["app"]["memory"] not in ("0", "0Ki"), usage
    node = wait_until(
        lambda: (lambda r: json.loads(r.stdout) if r.returncode == 0 else None)(
            kubectl_run(kc, "get", "--raw", f"/apis/metrics.k8s.io/v1beta1/nodes/{KUBELET_NODE}")
        ),
        timeout=60,
        what=f"NodeMetrics of {KUBELET_NODE}",
        interval=2,
    )
    assert node["usage"]["memory"] not in ("0", "0Ki"), node
    # The simulated usage changes: the scrapes of the next minute do not all give the same figures.
    samples = [first]

    def usage_changed() -> bool:
        m = pod_metrics()
        if m and m["timestamp"] != samples[-1]["timestamp"]:
            samples.append(m)
        return len({json.dumps(x["containers"][0]["usage"], sort_keys=True) for x in samples}) > 1

    wait_until(
        usage_changed,
        timeout=90,
        what="PodMetrics of busy with other figures than before",
        state=lambda: samples,
        interval=3,
    )
    top = kubectl(kc, "top", "pod", "-n", ns, "busy", "--no-headers")
    assert top.split()[0] == "busy" and top.split()[1].endswith("m"), top
    top_node = kubectl(kc, "top", "node", KUBELET_NODE, "--no-headers")
    assert top_node.split()[0] == KUBELET_NODE, top_node
