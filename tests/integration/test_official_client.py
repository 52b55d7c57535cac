"""The official ``kubernetes`` Python package against the embedded API server."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from kubernetes import client, watch
from kubernetes.client.rest import ApiException

from podstatus.server import EmbeddedApiServer


@pytest.fixture(scope="module")
def server() -> Iterator[EmbeddedApiServer]:
    with EmbeddedApiServer() as srv:
        for ns in ("official", "watched", "deleting"):
            srv.store.ensure_namespace(ns)
        yield srv


@pytest.fixture(scope="module")
def api(server: EmbeddedApiServer) -> Iterator[client.CoreV1Api]:
    config = client.Configuration()
    config.host = server.url
    with client.ApiClient(config) as api_client:
        yield client.CoreV1Api(api_client)


def make_pod(name: str, node: str | None = "node-1", labels: dict[str, str] | None = None) -> client.V1Pod:
    return client.V1Pod(
        metadata=client.V1ObjectMeta(name=name, labels=labels or {"app": "web"}),
        spec=client.V1PodSpec(
            node_name=node, containers=[client.V1Container(name="c", image="busybox:1.36")]
        ),
    )


def test_create_list_selectors(api: client.CoreV1Api) -> None:
    created = api.create_namespaced_pod("official", make_pod("a"))
    assert created.metadata.uid and created.status.phase == "Pending"
    api.create_namespaced_pod("official", make_pod("b", node="node-2", labels={"app": "db"}))
    names = lambda pods: sorted(p.metadata.name for p in pods.items)  # noqa: E731
    assert names(api.list_namespaced_pod("official", label_selector="app=web")) == ["a"]
    assert names(api.list_namespaced_pod("official", label_selector="app in (web,db)")) == ["a", "b"]
    assert names(api.list_pod_for_all_namespaces(field_selector="spec.nodeName=node-2")) == ["b"]
    with pytest.raises(ApiException) as info:
        api.create_namespaced_pod("official", make_pod("a"))
    assert info.value.status == 409


def test_patch_status_and_watch(api: client.CoreV1Api) -> None:
    api.create_namespaced_pod("watched", make_pod("w"))
    rv = api.list_namespaced_pod("watched").metadata.resource_version

    def change() -> None:
        api.patch_namespaced_pod_status(
            "w",
            "watched",
            {"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}},
        )

    timer = threading.Timer(0.3, change)
    timer.start()
    w = watch.Watch()
    seen = []
    for event in w.stream(api.list_namespaced_pod, "watched", resource_version=rv, timeout_seconds=5):
        seen.append((event["type"], event["object"].status.phase))
        w.stop()
    timer.join()
    assert seen == [("MODIFIED", "Running")]
    pod = api.read_namespaced_pod_status("w", "watched")
    assert pod.status.conditions[0].type == "Ready"


def test_delete_with_preconditions(api: client.CoreV1Api) -> None:
    pod = api.create_namespaced_pod("deleting", make_pod("d"))
    wrong = client.V1DeleteOptions(
        preconditions=client.V1Preconditions(uid="not-the-uid"), grace_period_seconds=0
    )
    with pytest.raises(ApiException) as info:
        api.delete_namespaced_pod("d", "deleting", body=wrong)
    assert info.value.status == 409 and "the UID in the precondition (not-the-uid)" in info.value.body
    api.delete_namespaced_pod("d", "deleting", grace_period_seconds=20)
    terminating = api.read_namespaced_pod("d", "deleting")
    assert terminating.metadata.deletion_timestamp is not None
    assert terminating.metadata.deletion_grace_period_seconds == 20
    right = client.V1DeleteOptions(
        preconditions=client.V1Preconditions(uid=pod.metadata.uid), grace_period_seconds=0
    )
    api.delete_namespaced_pod("d", "deleting", body=right)
    with pytest.raises(ApiException) as info:
        api.read_namespaced_pod("d", "deleting")
    assert info.value.status == 404


def test_namespaces_paging_and_dry_run(api: client.CoreV1Api) -> None:
    with pytest.raises(ApiException) as missing:
        api.create_namespaced_pod("paged", make_pod("x"))
    assert missing.value.status == 404
    api.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name="paged")))
    for i in range(5):
        api.create_namespaced_pod("paged", make_pod(f"p{i}"))
    seen: list[str] = []
    token = None
    while True:
        page = api.list_namespaced_pod("paged", limit=2, _continue=token)
        seen += [p.metadata.name for p in page.items]
        token = page.metadata._continue
        if not token:
            break
    assert seen == [f"p{i}" for i in range(5)]
    assert api.list_namespaced_pod("paged", limit=2).metadata.remaining_item_count == 3
    api.create_namespaced_pod("paged", make_pod("ghost"), dry_run="All")
    with pytest.raises(ApiException) as gone:
        api.read_namespaced_pod("ghost", "paged")
    assert gone.value.status == 404
