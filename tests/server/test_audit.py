"""The audit log (``podstatus serve --audit-log``): kube-apiserver's shape, one line per request sent."""

from __future__ import annotations

import json
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import urllib3

from podstatus.clients.http import HttpKubeClient
from podstatus.errors import NotFoundError
from podstatus.requestcount import RequestCounter
from podstatus.server import EmbeddedApiServer
from podstatus.server.audit import request_attributes

POD = {"metadata": {"name": "p"}, "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "i:1"}]}}
LEASE = {"metadata": {"name": "n1"}, "spec": {"holderIdentity": "n1", "leaseDurationSeconds": 40}}
AGENT = "audit-test/1.0"


def _events(path: Path, expected: int, timeout: float = 5.0) -> list[dict[str, Any]]:
    """The log's events once it has ``expected`` lines (flushed while the server runs)."""
    deadline = time.monotonic() + timeout
    while True:
        lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
        if len(lines) >= expected or time.monotonic() > deadline:
            return [json.loads(line) for line in lines]
        time.sleep(0.05)


def test_every_request_is_one_line_in_kube_apiservers_shape(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    with EmbeddedApiServer(audit_log=log) as server:
        client = HttpKubeClient(server.url, requests=RequestCounter(), user_agent=AGENT)
        client.create_pod(POD, namespace="default")
        client.get_pod("default", "p")
        with pytest.raises(NotFoundError):
            client.get_pod("default", "missing")
        client.list_pods("default", label_selector="a!=b")
        client.patch_pod_status("default", "p", b'{"status":{"phase":"Running"}}')
        t_watch = time.time()
        events = list(client.watch_pods("default", resource_version="0", timeout_seconds=1))
        assert [kind for kind, _ in events][:1] == ["ADDED"]
        client.create_lease("kube-node-lease", LEASE)
        client.delete_pod("default", "p", grace_period_seconds=0)
        http = urllib3.PoolManager(retries=False, timeout=10)
        headers = {"User-Agent": AGENT}
        http.request(
            "DELETE", server.url + "/api/v1/namespaces/default/pods?labelSelector=x%3Dy", headers=headers
        )
        http.request("GET", server.url + "/version", headers=headers)
        http.request("GET", server.url + "/api/v1/namespaces/default/nothings", headers=headers)
        sent = client.requests.snapshot()
        logged = _events(log, sum(sent.values()) + 3)
        client.close()

    assert len(logged) == sum(sent.values()) + 3
    for event in logged:
        assert event["kind"] == "Event" and event["apiVersion"] == "audit.k8s.io/v1"
        assert event["level"] == "Metadata" and event["stage"] == "ResponseComplete"
        assert event["userAgent"] == AGENT
        assert event["user"]["username"] == "system:anonymous"
        assert event["sourceIPs"] == ["127.0.0.1"]
        assert event["stageTimestamp"] >= event["requestReceivedTimestamp"]
        assert event["requestReceivedTimestamp"].endswith("Z") and len(event["stageTimestamp"]) == 27
    assert len({e["auditID"] for e in logged}) == len(logged)
    by_verb = Counter(e["verb"] for e in logged if e.get("objectRef", {}).get("resource") != "nothings")
    assert by_verb == Counter({**sent, "deletecollection": 1, "get": sent["get"] + 1})

    def ref(event: dict[str, Any]) -> str:
        r = event.get("objectRef") or {}
        sub = "/" + r["subresource"] if r.get("subresource") else ""
        return f"{event['verb']} {r.get('resource', '-')}{sub} {event['responseStatus']['code']}"

    assert Counter(ref(e) for e in logged) == Counter(
        [
            "create pods 201",
            "get pods 200",
            "get pods 404",
            "list pods 200",
            "patch pods/status 200",
            "watch pods 200",
            "create leases 201",
            "delete pods 200",
            "deletecollection pods 200",
            "get - 200",  # /version: a non-resource request
            "list nothings 404",  # as kube-apiserver: the resource as the URL names it
        ]
    )
    missing = next(
        e for e in logged if e["responseStatus"]["code"] == 404 and e["objectRef"]["resource"] == "pods"
    )
    assert missing["objectRef"] == {
        "resource": "pods",
        "namespace": "default",
        "name": "missing",
        "apiVersion": "v1",
    }
    assert missing["responseStatus"]["reason"] == "NotFound"
    assert missing["responseStatus"]["message"] == 'pods "missing" not found'
    lease = next(e for e in logged if e["objectRef"].get("resource") == "leases")
    assert lease["objectRef"] == {
        "resource": "leases",
        "namespace": "kube-node-lease",
        "apiGroup": "coordination.k8s.io",
        "apiVersion": "v1",
    }
    # A watch is logged when it ends, about its timeoutSeconds after it began.
    watch = next(e for e in logged if e["verb"] == "watch")
    assert "watch=true" in watch["requestURI"]
    assert watch["responseStatus"] == {"metadata": {}, "code": 200}
    received = _seconds(watch["requestReceivedTimestamp"])
    assert received >= t_watch - 0.01
    assert _seconds(watch["stageTimestamp"]) - received >= 0.9


def _seconds(stamp: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def test_with_a_token_the_user_is_the_tokens_and_a_401_is_anonymous(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    with EmbeddedApiServer(audit_log=log, token="secret") as server:
        http = urllib3.PoolManager(retries=False, timeout=10)
        ok = http.request("GET", server.url + "/api/v1/nodes", headers={"Authorization": "Bearer secret"})
        refused = http.request("GET", server.url + "/api/v1/nodes")
        assert (ok.status, refused.status) == (200, 401)
    first, second = (json.loads(line) for line in log.read_text(encoding="utf-8").splitlines())
    assert first["user"]["username"] == "podstatus" and first["verb"] == "list"
    assert second["user"]["username"] == "system:anonymous" and second["responseStatus"]["code"] == 401
    assert second["responseStatus"]["reason"] == "Unauthorized"


def test_off_by_default_and_appends(tmp_path: Path) -> None:
    with EmbeddedApiServer() as server:
        assert server.audit is None
    log = tmp_path / "audit.log"
    for _ in range(2):
        with EmbeddedApiServer(audit_log=log) as server:
            urllib3.PoolManager(retries=False).request("GET", server.url + "/healthz")
    assert len(log.read_text(encoding="utf-8").splitlines()) == 2


@pytest.mark.parametrize(
    ("method", "uri", "verb", "ref"),
    [
        ("GET", "/api/v1/pods", "list", {"resource": "pods"}),
        ("GET", "/api/v1/pods?watch=1", "watch", {"resource": "pods"}),
        ("GET", "/api/v1/watch/namespaces/ns/pods", "watch", {"resource": "pods", "namespace": "ns"}),
        (
            "GET",
            "/api/v1/watch/namespaces/ns/pods/p",
            "watch",
            {"resource": "pods", "namespace": "ns", "name": "p"},
        ),
        (
            "GET",
            "/api/v1/namespaces/ns/pods?watch=true&fieldSelector=metadata.name%3Dp",
            "watch",
            {"resource": "pods", "namespace": "ns", "name": "p"},
        ),
        ("GET", "/api/v1/nodes/n1", "get", {"resource": "nodes", "name": "n1"}),
        (
            "PATCH",
            "/api/v1/nodes/n1/status",
            "patch",
            {"resource": "nodes", "name": "n1", "subresource": "status"},
        ),
        (
            "PUT",
            "/api/v1/namespaces/ns/finalize",
            "update",
            {"resource": "namespaces", "namespace": "ns", "name": "ns", "subresource": "finalize"},
        ),
        ("GET", "/api/v1/namespaces/ns", "get", {"resource": "namespaces", "namespace": "ns", "name": "ns"}),
        (
            "POST",
            "/api/v1/namespaces/ns/pods/p/binding",
            "create",
            {"resource": "pods", "namespace": "ns", "name": "p", "subresource": "binding"},
        ),
        (
            "POST",
            "/api/v1/namespaces/ns/pods/p/eviction",
            "create",
            {"resource": "pods", "namespace": "ns", "name": "p", "subresource": "eviction"},
        ),
        ("DELETE", "/api/v1/namespaces/ns/pods", "deletecollection", {"resource": "pods", "namespace": "ns"}),
        (
            "DELETE",
            "/api/v1/namespaces/ns/pods/p",
            "delete",
            {"resource": "pods", "namespace": "ns", "name": "p"},
        ),
        (
            "PUT",
            "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n1",
            "update",
            {
                "resource": "leases",
                "namespace": "kube-node-lease",
                "name": "n1",
                "apiGroup": "coordination.k8s.io",
            },
        ),
        ("GET", "/apis/events.k8s.io/v1/events", "list", {"resource": "events", "apiGroup": "events.k8s.io"}),
        ("GET", "/api/v1", "get", None),
        ("GET", "/apis/coordination.k8s.io/v1", "get", None),
        ("POST", "/version", "post", None),
        ("GET", "/openapi/v3/api/v1", "get", None),
    ],
)
def test_verb_and_object_as_kube_apiserver_resolves_them(
    method: str, uri: str, verb: str, ref: dict[str, str] | None
) -> None:
    from urllib.parse import parse_qsl, urlsplit

    split = urlsplit(uri)
    got_verb, got_ref = request_attributes(method, split.path, dict(parse_qsl(split.query)))
    assert got_verb == verb
    if ref is None:
        assert got_ref is None
    else:
        assert got_ref == {**ref, "apiVersion": "v1"}


def test_serve_with_an_audit_log_and_kube_like(tmp_path: Path) -> None:
    """``podstatus serve --audit-log PATH --kube-like``: both reach the server."""
    import subprocess

    kubeconfig, log = tmp_path / "kubeconfig", tmp_path / "audit.log"
    proc = subprocess.Popen(
        [sys.executable, "-m", "podstatus.cli", "serve", "--port", "0", "--no-tls", "--no-token",
         "--kubeconfig", str(kubeconfig), "--audit-log", str(log), "--kube-like"],
        stdout=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while not kubeconfig.exists():
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        client = HttpKubeClient.from_kubeconfig(str(kubeconfig), user_agent=AGENT)
        client.list_nodes()
        client.create_pod(POD, namespace="default")
        client.delete_pod("default", "p", grace_period_seconds=1)
        time.sleep(2.5)  # past its grace period, and the reaper's second
        # As on kube-apiserver with no kubelet: the pod stays, terminating.
        assert client.get_pod("default", "p").metadata.deletion_timestamp is not None
        client.close()
        first, *_ = _events(log, 4)
        assert (first["verb"], first["objectRef"]["resource"], first["userAgent"]) == ("list", "nodes", AGENT)
    finally:
        proc.terminate()
        proc.wait(10)
