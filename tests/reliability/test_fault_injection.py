"""FaultPlan: each fault looks, over real HTTP, like what a flaky API server does, and only hits what it should."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import urllib3

from podstatus.clients.http import HttpKubeClient
from podstatus.errors import (
    ConflictError,
    ConnectionFailedError,
    InternalServerError,
    NotFoundError,
    RequestTimeoutError,
    ServiceUnavailableError,
    TooManyRequestsError,
    UnprocessableEntityError,
)
from podstatus.server.faults import FaultPlan, RequestInfo, parse_range, recreate_pod
from podstatus.server.http import EmbeddedApiServer

pytestmark = pytest.mark.timeout(60)

NS = "default"
POD = {
    "metadata": {"namespace": NS, "labels": {"app": "x"}, "annotations": {"a": "b"}},
    "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "busybox:1"}]},
}


@pytest.fixture
def server() -> Iterator[EmbeddedApiServer]:
    with EmbeddedApiServer() as srv:
        yield srv


@pytest.fixture
def client(server: EmbeddedApiServer) -> Iterator[HttpKubeClient]:
    c = HttpKubeClient(server.url, timeout=(2.0, 1.0))
    yield c
    c.close()


_names = iter(range(1_000_000))


def make_pod(server: EmbeddedApiServer) -> tuple[str, str]:
    """A pod created straight in the store (no faults): (name, uid)."""
    body = json.loads(json.dumps(POD))
    body["metadata"]["name"] = name = f"p-{next(_names)}"
    stored = server.store.create("pods", NS, body)
    return name, stored.uid


def status_patch(uid: str, **status: Any) -> bytes:
    return json.dumps({"metadata": {"uid": uid}, "status": status}).encode()


# --- parsing ------------------------------------------------------------------------------


def test_parse_full_spec() -> None:
    plan = FaultPlan.parse(
        "error=0.3,latency=5ms..200ms,conflict=0.1,reset=0.05,timeout=0.01,seed=7,hold=2s,codes=503/429,"
        "verbs=get/patch,retry-after=2"
    )
    assert plan.error == 0.3
    assert plan.latency == pytest.approx((0.005, 0.2))
    assert (plan.conflict, plan.reset, plan.timeout, plan.seed, plan.hold) == (0.1, 0.05, 0.01, 7, 2.0)
    assert plan.error_codes == (503, 429)
    assert plan.verbs == frozenset({"get", "patch"})
    assert plan.retry_after == 2
    assert plan.enabled.is_set()
    assert FaultPlan.parse("").error == 0.0
    assert FaultPlan.parse("latency=10ms").latency == pytest.approx((0.01, 0.01))
    assert parse_range("1..2") == (1.0, 2.0)


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        ("error=2", "error rate"),
        ("error=x", "error rate"),
        ("error", "key=value"),
        ("bogus=1", "unknown fault 'bogus'"),
        ("latency=5parsecs", "invalid duration"),
        ("latency=200ms..5ms", "upper bound"),
        ("codes=404", "invalid error codes"),
        ("codes=a/b", "invalid codes"),
        ("verbs=get/explode", "unknown verbs explode"),
        ("seed=x", "invalid seed"),
        ("error=0.1,error=0.2", "given twice"),
        ("error=0.6,reset=0.6", "more than 1"),
    ],
)
def test_parse_rejects_bad_specs(spec: str, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        FaultPlan.parse(spec)


# --- each fault -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "cls", "retry"),
    [(500, InternalServerError, None), (503, ServiceUnavailableError, 1.0), (429, TooManyRequestsError, 1.0)],
)
def test_errors_carry_status_and_retry_after(
    server: EmbeddedApiServer, client: HttpKubeClient, code: int, cls: type[Exception], retry: float | None
) -> None:
    name, _ = make_pod(server)
    plan = FaultPlan(error=1.0, error_codes=(code,), seed=1).install(server)
    with pytest.raises(cls) as info:
        client.get_pod(NS, name)
    err: Any = info.value
    assert err.code == code
    assert err.retry_after == retry
    assert err.status["kind"] == "Status"
    if retry is not None:
        assert err.status["details"]["retryAfterSeconds"] == 1
    raw = urllib3.request("GET", f"{server.url}/api/v1/namespaces/{NS}/pods/{name}", retries=False)
    assert raw.status == code
    assert (raw.headers.get("Retry-After") == "1") == (code != 500)
    assert plan.counts()["error"] == 2
    assert plan.counts()[f"error_{code}"] == 2


def test_discovery_and_other_resources_never_fault(server: EmbeddedApiServer) -> None:
    FaultPlan(error=1.0, seed=1).install(server)
    for path in ("/api", "/api/v1", "/apis", "/version", "/healthz", "/api/v1/nodes"):
        assert urllib3.request("GET", server.url + path, retries=False).status == 200, path


def test_watch_is_spared_unless_asked_for(server: EmbeddedApiServer) -> None:
    plan = FaultPlan(error=1.0, seed=1).install(server)
    r = urllib3.request(
        "GET", f"{server.url}/api/v1/pods?watch=true&timeoutSeconds=1", retries=False, preload_content=True
    )
    assert r.status == 200
    plan.uninstall()
    FaultPlan(error=1.0, verbs=frozenset({"watch"}), seed=1).install(server)
    assert urllib3.request("GET", f"{server.url}/api/v1/pods?watch=true", retries=False).status >= 429
    assert urllib3.request("GET", f"{server.url}/api/v1/pods", retries=False).status == 200


def test_conflict_only_for_writes_with_a_resource_version(
    server: EmbeddedApiServer, client: HttpKubeClient
) -> None:
    name, uid = make_pod(server)
    plan = FaultPlan(conflict=1.0, seed=1).install(server)
    pod = client.get_pod(NS, name)  # reads are never conflicts
    with pytest.raises(ConflictError, match="the object has been modified"):
        client.patch_pod_status(
            NS, name, status_patch(uid, message="x"), resource_version=pod.metadata.resource_version
        )
    assert server.store.get("pods", NS, name).obj["status"].get("message") is None  # not applied
    client.patch_pod_status(NS, name, status_patch(uid, message="y"))  # no precondition: no conflict
    assert server.store.get("pods", NS, name).obj["status"]["message"] == "y"
    assert plan.counts()["conflict"] == 1


def test_reset_before_and_mid_response(server: EmbeddedApiServer, client: HttpKubeClient) -> None:
    name, uid = make_pod(server)
    plan = FaultPlan(reset=1.0, seed=3).install(server)
    applied = 0
    for i in range(12):
        with pytest.raises(ConnectionFailedError):
            client.patch_pod_status(NS, name, status_patch(uid, message=f"m{i}"))
        if server.store.get("pods", NS, name).obj["status"].get("message") == f"m{i}":
            applied += 1
    # Some were dropped before the API logic ran, some after (the body cut off half way).
    assert 0 < applied < 12
    assert plan.counts()["reset"] == 12
    plan.stop()
    assert client.get_pod(NS, name).uid == uid  # the client recovers on a new connection


def test_timeout_holds_longer_than_the_client_waits(
    server: EmbeddedApiServer, client: HttpKubeClient
) -> None:
    name, _ = make_pod(server)
    plan = FaultPlan(timeout=1.0, hold=3.0, seed=1).install(server)
    start = time.monotonic()
    with pytest.raises(RequestTimeoutError):
        client.get_pod(NS, name)
    assert 0.9 < time.monotonic() - start < 2.5
    assert plan.counts()["timeout"] == 1
    # Stopping the faults lets held requests go at once.
    done = threading.Event()
    slow = HttpKubeClient(server.url, timeout=30.0)

    def call() -> None:
        with contextlib.suppress(Exception):
            slow.get_pod(NS, name)
        done.set()

    threading.Thread(target=call, daemon=True).start()
    time.sleep(0.3)
    start = time.monotonic()
    plan.stop()
    assert done.wait(5)
    assert time.monotonic() - start < 2


def test_latency_range(server: EmbeddedApiServer, client: HttpKubeClient) -> None:
    name, _ = make_pod(server)
    plan = FaultPlan(latency=(0.1, 0.15), seed=1).install(server)
    start = time.monotonic()
    for _ in range(3):
        client.get_pod(NS, name)
    assert 0.3 <= time.monotonic() - start < 1.5
    assert plan.counts()["latency"] == 3


def test_rates_are_shares_and_seeded(server: EmbeddedApiServer, client: HttpKubeClient) -> None:
    name, _ = make_pod(server)

    def run(seed: int) -> list[bool]:
        plan = FaultPlan(error=0.3, seed=seed).install(server)
        out = []
        for _ in range(200):
            try:
                client.get_pod(NS, name)
                out.append(True)
            except Exception:
                out.append(False)
        plan.uninstall()
        return out

    first, again = run(7), run(7)
    assert first == again
    assert 30 <= first.count(False) <= 90


def test_enabled_switch_install_idempotent_and_uninstall(
    server: EmbeddedApiServer, client: HttpKubeClient
) -> None:
    name, _ = make_pod(server)
    original = server.dispatch
    plan = FaultPlan(error=1.0, error_codes=(500,), seed=1)
    plan.install(server)
    wrapped = server.dispatch
    plan.install(server)
    assert server.dispatch == wrapped  # not wrapped twice
    with pytest.raises(InternalServerError):
        client.get_pod(NS, name)
    plan.enabled.clear()
    client.get_pod(NS, name)
    plan.enabled.set()
    with pytest.raises(InternalServerError):
        client.get_pod(NS, name)
    plan.uninstall()
    assert server.dispatch == original
    client.get_pod(NS, name)
    plan.uninstall()  # twice: no-op
    with EmbeddedApiServer() as other:
        plan.install(other)
        with pytest.raises(RuntimeError):
            plan.install(server)
        plan.uninstall()


def test_user_agent_filter_spares_other_clients(server: EmbeddedApiServer) -> None:
    name, _ = make_pod(server)
    FaultPlan(error=1.0, error_codes=(500,), user_agents=("node-agent",), seed=1).install(server)
    node = HttpKubeClient(server.url, user_agent="node-agent/1")
    test = HttpKubeClient(server.url, user_agent="test-setup/1")
    with pytest.raises(InternalServerError):
        node.get_pod(NS, name)
    assert test.get_pod(NS, name).name == name


def test_recreate_pod_on_the_nth_request(server: EmbeddedApiServer, client: HttpKubeClient) -> None:
    name, uid = make_pod(server)
    plan = FaultPlan(seed=1).install(server)
    seen: list[RequestInfo] = []
    new_uids: list[str] = []
    plan.on_request(seen.append)
    plan.on_nth_request(NS, name, 2, lambda info: new_uids.append(recreate_pod(server, NS, name)))
    assert client.get_pod(NS, name).uid == uid
    second = client.get_pod(NS, name)  # the hook runs before this request reaches the API
    assert new_uids and second.uid == new_uids[0] != uid
    assert second.metadata.labels == {"app": "x"}
    assert second.metadata.annotations == {"a": "b"}
    assert second.spec.node_name == "n1"
    assert second.status.phase == "Pending"
    # A write meant for the old pod is refused: metadata.uid is immutable (422, as kube-apiserver answers).
    with pytest.raises(UnprocessableEntityError, match=r"metadata\.uid"):
        client.patch_pod_status(NS, name, status_patch(uid, phase="Running"))
    assert [(i.verb, i.name, i.count) for i in seen] == [
        ("get", name, 1),
        ("get", name, 2),
        ("patch", name, 3),
    ]
    assert seen[2].subresource == "status"
    with pytest.raises(NotFoundError):
        recreate_pod(server.store, NS, "nope")
