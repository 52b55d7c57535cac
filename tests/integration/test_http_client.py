"""HttpKubeClient against the embedded API server: the requests the status manager makes, end to end."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from podstatus.clients.http import HttpKubeClient
from podstatus.errors import ConflictError, NotFoundError, UnprocessableEntityError
from podstatus.protocols import VersionedKubeClient
from podstatus.types import Pod

server_module = pytest.importorskip("podstatus.server")
if not hasattr(server_module, "EmbeddedApiServer"):
    server_module = pytest.importorskip("podstatus.server.http")

pytestmark = pytest.mark.timeout(60)

NS = "default"


@pytest.fixture(scope="module")
def server() -> Iterator[Any]:
    srv = server_module.EmbeddedApiServer("127.0.0.1", 0)
    srv.start()
    yield srv
    srv.stop()


@pytest.fixture
def client(server: Any) -> Iterator[HttpKubeClient]:
    c = HttpKubeClient(server.url, timeout=(2.0, 10.0))
    yield c
    c.close()


_counter = iter(range(1_000_000))


def new_pod(client: HttpKubeClient, node: str = "node-1", **labels: str) -> Pod:
    name = f"p-{next(_counter)}"
    pod = Pod.from_dict(
        {
            "metadata": {"name": name, "namespace": NS, "labels": labels or None},
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "busybox"}]},
        }
    )
    return client.create_pod(pod)


def status_patch(uid: str, **status: Any) -> bytes:
    return json.dumps({"metadata": {"uid": uid}, "status": status}).encode()


def test_is_a_versioned_kube_client(client: HttpKubeClient) -> None:
    assert isinstance(client, VersionedKubeClient)


def test_create_get_patch(client: HttpKubeClient) -> None:
    created = new_pod(client)
    assert created.uid and created.metadata.resource_version
    got = client.get_pod(NS, created.name)
    assert got.uid == created.uid
    patched = client.patch_pod_status(
        NS,
        created.name,
        status_patch(
            created.uid,
            phase="Running",
            conditions=[{"type": "Ready", "status": "True", "lastProbeTime": None}],
        ),
    )
    assert patched.status.phase == "Running"
    assert [(c.type, c.status) for c in patched.status.conditions or ()] == [("Ready", "True")]
    assert patched.metadata.resource_version != created.metadata.resource_version
    assert client.get_pod(NS, created.name).status.phase == "Running"
    counts = client.requests.snapshot()
    assert (counts["create"], counts["get"], counts["patch"]) == (1, 2, 1)


def test_resource_version_precondition(client: HttpKubeClient) -> None:
    pod = new_pod(client)
    stale = pod.metadata.resource_version
    fresh = client.patch_pod_status(
        NS, pod.name, status_patch(pod.uid, message="one"), resource_version=stale
    )
    assert fresh.metadata.resource_version != stale
    with pytest.raises(ConflictError):
        client.patch_pod_status(NS, pod.name, status_patch(pod.uid, message="two"), resource_version=stale)
    assert client.get_pod(NS, pod.name).status.message == "one"
    ok = client.patch_pod_status(
        NS, pod.name, status_patch(pod.uid, message="two"), resource_version=fresh.metadata.resource_version
    )
    assert ok.status.message == "two"


def test_uid_precondition_in_patch(client: HttpKubeClient) -> None:
    pod = new_pod(client)
    # As kube-apiserver: metadata.uid is immutable, so a patch naming another UID is refused (422).
    with pytest.raises(UnprocessableEntityError):
        client.patch_pod_status(NS, pod.name, status_patch("another-uid", phase="Running"))


def test_delete_with_uid_precondition(client: HttpKubeClient) -> None:
    pod = new_pod(client)
    with pytest.raises(ConflictError):
        client.delete_pod(NS, pod.name, grace_period_seconds=0, uid="another-uid")
    client.get_pod(NS, pod.name)  # still there
    client.delete_pod(NS, pod.name, grace_period_seconds=0, uid=pod.uid)
    with pytest.raises(NotFoundError):
        client.get_pod(NS, pod.name)


def test_delete_not_found(client: HttpKubeClient) -> None:
    with pytest.raises(NotFoundError):
        client.delete_pod(NS, "no-such-pod", grace_period_seconds=0, uid="u")


def test_list_by_node(client: HttpKubeClient) -> None:
    mine = {new_pod(client, node="list-node-a").uid for _ in range(3)}
    new_pod(client, node="list-node-b")
    pods, rv = client.list_pods(field_selector="spec.nodeName=list-node-a")
    assert {p.uid for p in pods} == mine
    assert rv
    pods, _ = client.list_pods(NS, field_selector="spec.nodeName=list-node-a", limit=2)
    assert {p.uid for p in pods} == mine


def test_watch_sees_patch(client: HttpKubeClient) -> None:
    pod = new_pod(client, node="watch-node")
    _, rv = client.list_pods(field_selector="spec.nodeName=watch-node")
    stop = threading.Event()
    with client.watch_pods(
        NS,
        field_selector="spec.nodeName=watch-node",
        resource_version=rv,
        timeout_seconds=10,
        stop_event=stop,
    ) as watch:
        client.patch_pod_status(NS, pod.name, status_patch(pod.uid, phase="Running"))
        kind, seen = next(watch)
        assert (kind, seen.uid, seen.status.phase) == ("MODIFIED", pod.uid, "Running")
        assert watch.resource_version == seen.metadata.resource_version
        stop.set()
        assert list(watch) == []


def test_from_kubeconfig(server: Any, tmp_path: Path) -> None:
    path = tmp_path / "kubeconfig"
    server.write_kubeconfig(str(path))
    with HttpKubeClient.from_kubeconfig(path) as client:
        pod = new_pod(client)
        assert client.get_pod(NS, pod.name).uid == pod.uid


def test_workers_share_one_client(client: HttpKubeClient) -> None:
    pods = [new_pod(client, node="threads-node") for _ in range(4)]
    errors: list[BaseException] = []

    def work(pod: Pod) -> None:
        try:
            for i in range(10):
                client.patch_pod_status(NS, pod.name, status_patch(pod.uid, message=f"m{i}"))
                assert client.get_pod(NS, pod.name).status.message == f"m{i}"
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(pod,)) for pod in pods]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
