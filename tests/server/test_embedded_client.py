"""The in-process client bound to the store (SPEC 2.4)."""

from __future__ import annotations

import pytest

from podstatus.clients.embedded import EmbeddedClient
from podstatus.errors import ConflictError, NotFoundError
from podstatus.protocols import KubeClient
from podstatus.server.storage.store import Store
from podstatus.types import Pod

POD = {
    "metadata": {"name": "p", "namespace": "ns"},
    "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "i"}]},
}


def _store() -> Store:
    store = Store()
    store.ensure_namespace("ns")
    return store


def test_protocol_and_round_trip() -> None:
    client = EmbeddedClient(_store())
    assert isinstance(client, KubeClient)
    created = client.create_pod(Pod.from_dict(POD))
    assert created.namespace == "ns" and created.uid
    assert client.get_pod("ns", "p") == created
    patch = b'{"metadata":{"uid":"%s"},"status":{"phase":"Running"}}' % created.uid.encode()
    after = client.patch_pod_status("ns", "p", patch)
    assert after.status.phase == "Running"
    with pytest.raises(ConflictError):
        client.patch_pod_status(
            "ns", "p", b'{"status":{"phase":"Running","message":"x"}}', resource_version="1"
        )
    again = client.patch_pod_status(
        "ns", "p", b'{"status":{"message":"x"}}', resource_version=after.metadata.resource_version
    )
    assert again.status.message == "x"
    with pytest.raises(ConflictError):
        client.delete_pod("ns", "p", grace_period_seconds=0, uid="other")
    client.delete_pod("ns", "p", grace_period_seconds=0, uid=created.uid)
    with pytest.raises(NotFoundError):
        client.get_pod("ns", "p")
    counts = client.counter.snapshot()
    assert (counts["create"], counts["get"], counts["patch"], counts["delete"]) == (1, 2, 3, 2)


def test_list_watch_and_nodes() -> None:
    client = EmbeddedClient(_store())
    client.create_pod(POD)
    client.create_pod({**POD, "metadata": {"name": "q", "namespace": "ns", "labels": {"a": "b"}}})
    assert [p.name for p in client.list_pods(label_selector="a=b")[0]] == ["q"]
    assert [p.name for p in client.list_pods(namespace="ns", field_selector="spec.nodeName=n1")[0]] == [
        "p",
        "q",
    ]
    events = client.watch_pods(timeout=0.2)
    assert sorted((t, p.name) for t, p in events) == [("ADDED", "p"), ("ADDED", "q")]
    node = client.create_node({"metadata": {"name": "n1"}})
    assert node["kind"] == "Node"
    client.patch_node_status("n1", {"status": {"conditions": [{"type": "Ready", "status": "True"}]}})
    assert client.get_node("n1")["status"]["conditions"][0]["status"] == "True"
    assert [n["metadata"]["name"] for n in client.list_nodes()[0]] == ["n1"]
    client.delete_node("n1")
    with pytest.raises(NotFoundError):
        client.get_node("n1")
