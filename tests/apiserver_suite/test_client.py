"""HttpKubeClient against a genuine kube-apiserver: TLS + token from the kubeconfig the fixture wrote."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest
from apisuite_kit import NODE, NS, pod_manifest, unique

from podstatus import ConflictError, NotFoundError, Pod
from podstatus.clients.http import HttpKubeClient
from podstatus.errors import ApiError, UnauthorizedError

pytestmark = pytest.mark.apiserver


def status_patch(uid: str | None = None, **status: Any) -> bytes:
    doc: dict[str, Any] = {"status": status}
    if uid:
        doc["metadata"] = {"uid": uid}
    return json.dumps(doc).encode()


def test_tls_and_token_from_kubeconfig(real_client: HttpKubeClient, real_apiserver: str) -> None:
    assert real_client.base_url.startswith("https://127.0.0.1:")
    _, rv = real_client.list_pods(NS, limit=1)
    assert rv
    node = real_client.get_node(NODE)
    assert node["metadata"]["name"] == NODE


def test_wrong_token_is_unauthorized(real_apiserver: str) -> None:
    from podstatus.clients.kubeconfig import load_kubeconfig_configuration, settings_from_configuration

    # Same URL and CA as the kubeconfig, another token: 401 through the verified TLS connection.
    settings = settings_from_configuration(load_kubeconfig_configuration(real_apiserver))
    assert settings.ca_cert and settings.verify
    bad = HttpKubeClient(settings.base_url, token="not-the-token", ca_cert=settings.ca_cert)
    try:
        with pytest.raises(UnauthorizedError) as info:
            bad.get_pod(NS, "anything")
        assert info.value.code == 401
    finally:
        bad.close()


def test_create_get_patch_status(real_client: HttpKubeClient) -> None:
    created = real_client.create_pod(pod_manifest())
    assert isinstance(created, Pod)
    assert created.uid and created.metadata.resource_version
    assert created.spec.node_name == NODE
    got = real_client.get_pod(NS, created.name)
    assert got.uid == created.uid
    patched = real_client.patch_pod_status(
        NS,
        created.name,
        status_patch(
            created.uid,
            phase="Running",
            conditions=[{"type": "Ready", "status": "True"}],
        ),
    )
    assert patched.status.phase == "Running"
    assert [(c.type, c.status) for c in patched.status.conditions or ()] == [("Ready", "True")]
    assert int(patched.metadata.resource_version or 0) > int(created.metadata.resource_version or 0)
    # What the server stores is what the patch returned.
    assert real_client.get_pod(NS, created.name).status.to_dict() == patched.status.to_dict()


def test_get_missing_pod_is_not_found(real_client: HttpKubeClient) -> None:
    with pytest.raises(NotFoundError) as info:
        real_client.get_pod(NS, unique("missing"))
    assert info.value.code == 404
    assert info.value.reason == "NotFound"
    with pytest.raises(NotFoundError):
        real_client.patch_pod_status(NS, unique("missing"), status_patch(phase="Running"))
    with pytest.raises(NotFoundError):
        real_client.delete_pod(NS, unique("missing"), grace_period_seconds=0)


def test_delete_with_uid_precondition(real_client: HttpKubeClient) -> None:
    created = real_client.create_pod(pod_manifest())
    with pytest.raises(ConflictError) as info:
        real_client.delete_pod(
            NS, created.name, grace_period_seconds=0, uid="00000000-0000-0000-0000-000000000000"
        )
    assert info.value.code == 409
    assert real_client.get_pod(NS, created.name).uid == created.uid  # still there
    real_client.delete_pod(NS, created.name, grace_period_seconds=0, uid=created.uid)
    with pytest.raises(NotFoundError):
        real_client.get_pod(NS, created.name)


def test_graceful_delete_leaves_pod_terminating(real_client: HttpKubeClient) -> None:
    created = real_client.create_pod(pod_manifest())
    real_client.delete_pod(NS, created.name, grace_period_seconds=30, uid=created.uid)
    pod = real_client.get_pod(NS, created.name)
    assert pod.metadata.deletion_timestamp is not None
    assert pod.metadata.deletion_grace_period_seconds == 30
    real_client.delete_pod(NS, created.name, grace_period_seconds=0, uid=created.uid)
    with pytest.raises(NotFoundError):
        real_client.get_pod(NS, created.name)


def test_resource_version_precondition_conflict(real_client: HttpKubeClient) -> None:
    created = real_client.create_pod(pod_manifest())
    rv = created.metadata.resource_version
    assert rv
    first = real_client.patch_pod_status(
        NS, created.name, status_patch(created.uid, phase="Running"), resource_version=rv
    )
    with pytest.raises(ConflictError) as info:
        real_client.patch_pod_status(
            NS, created.name, status_patch(created.uid, message="stale"), resource_version=rv
        )
    assert info.value.code == 409
    assert "the object has been modified" in info.value.message
    ok = real_client.patch_pod_status(
        NS,
        created.name,
        status_patch(created.uid, message="fresh"),
        resource_version=first.metadata.resource_version,
    )
    assert ok.status.message == "fresh"


def test_status_patch_with_wrong_uid_is_refused(real_client: HttpKubeClient) -> None:
    """The manager's UID precondition in status patches: the real server refuses with 422 (see test_compare)."""
    created = real_client.create_pod(pod_manifest())
    with pytest.raises(ApiError) as info:
        real_client.patch_pod_status(
            NS, created.name, status_patch("00000000-0000-0000-0000-000000000000", phase="Running")
        )
    assert info.value.code in (409, 422)
    assert real_client.get_pod(NS, created.name).status.phase == "Pending"


def test_list_with_node_name_field_selector(real_client: HttpKubeClient) -> None:
    other_node = unique("node")
    mine = real_client.create_pod(pod_manifest(labels={"suite": "list"}))
    theirs = real_client.create_pod(pod_manifest(node=other_node, labels={"suite": "list"}))
    pods, rv = real_client.list_pods(NS, field_selector=f"spec.nodeName={other_node}")
    assert rv
    assert [p.uid for p in pods] == [theirs.uid]
    pods, _ = real_client.list_pods(
        None, field_selector=f"spec.nodeName={NODE}", limit=2
    )  # paged, all namespaces
    assert mine.uid in {p.uid for p in pods}
    assert all(p.spec.node_name == NODE for p in pods)
    pods, _ = real_client.list_pods(NS, label_selector="suite=list", field_selector=f"spec.nodeName={NODE}")
    assert mine.uid in {p.uid for p in pods} and theirs.uid not in {p.uid for p in pods}


def test_watch_sees_modified(real_client: HttpKubeClient, other_client: HttpKubeClient) -> None:
    created = real_client.create_pod(pod_manifest())
    _, rv = real_client.list_pods(NS, field_selector=f"metadata.name={created.name}")
    stop = threading.Event()
    seen: list[tuple[str, str | None]] = []
    with real_client.watch_pods(
        NS,
        field_selector=f"metadata.name={created.name}",
        resource_version=rv,
        timeout_seconds=20,
        stop_event=stop,
    ) as watch:
        other_client.patch_pod_status(NS, created.name, status_patch(created.uid, phase="Running"))
        for kind, pod in watch:
            seen.append((kind, pod.status.phase))
            if kind == "MODIFIED":
                break
    stop.set()
    assert ("MODIFIED", "Running") in seen
    assert watch.resource_version and int(watch.resource_version) > int(rv)


def test_request_counter_counts_verbs(real_apiserver: str) -> None:
    client = HttpKubeClient.from_kubeconfig(real_apiserver)
    try:
        pod = client.create_pod(pod_manifest())
        client.get_pod(NS, pod.name)
        client.patch_pod_status(NS, pod.name, status_patch(pod.uid, phase="Running"))
        client.delete_pod(NS, pod.name, grace_period_seconds=0, uid=pod.uid)
        snap = client.requests.snapshot()
        assert {k: v for k, v in snap.items() if v} == {"create": 1, "get": 1, "patch": 1, "delete": 1}
    finally:
        client.close()
