"""A node agent's requests over real HTTP: our clients write Leases, Events and Node status,
the official ``kubernetes`` package and kubectl 1.37 read them back."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
import urllib3
from kubernetes import client, watch
from kubernetes.client.rest import ApiException

from podstatus.clients.embedded import EmbeddedClient
from podstatus.clients.fake import FakeNodeClient
from podstatus.clients.http import HttpKubeClient
from podstatus.errors import ConflictError, NotFoundError, UnprocessableEntityError
from podstatus.protocols import NodeClient
from podstatus.server import EmbeddedApiServer
from testkit import kubectl_path

NODE_LEASES = "kube-node-lease"


@pytest.fixture(scope="module")
def server() -> Iterator[EmbeddedApiServer]:
    with EmbeddedApiServer() as srv:
        yield srv


@pytest.fixture(scope="module")
def api_client(server: EmbeddedApiServer) -> Iterator[client.ApiClient]:
    config = client.Configuration()
    config.host = server.url
    with client.ApiClient(config) as api:
        yield api


@pytest.fixture(scope="module")
def env(server: EmbeddedApiServer, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    home = tmp_path_factory.mktemp("kubectl-home")
    config = server.write_kubeconfig(home / "config")
    return {**os.environ, "KUBECONFIG": str(config), "HOME": str(home)}


def kubectl(env: dict[str, str], *args: str) -> str:
    proc = subprocess.run([kubectl_path(), *args], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.fixture(params=["http", "embedded", "fake"])
def node_client(request: pytest.FixtureRequest, server: EmbeddedApiServer) -> Iterator[NodeClient]:
    """Each of our NodeClients, all writing to the one server."""
    if request.param == "http":
        with HttpKubeClient(server.url) as http:
            yield http
    elif request.param == "embedded":
        yield EmbeddedClient(server)
    else:
        yield FakeNodeClient(server.store)


def micro() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def seconds(ago: float = 0.0) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - ago))


def node_manifest(name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {
            "conditions": [{"type": "Ready", "status": "False", "reason": "KubeletNotReady"}],
            "nodeInfo": {"kubeletVersion": "v1.37.0", "osImage": "podstatus", "architecture": "amd64"},
        },
    }


def test_clients_implement_the_protocol(node_client: NodeClient) -> None:
    assert isinstance(node_client, NodeClient)


def test_node_lease_heartbeat_and_conflict(
    node_client: NodeClient, api_client: client.ApiClient, request: pytest.FixtureRequest
) -> None:
    name = f"lease-{request.node.callspec.id}"
    lease = node_client.create_lease(
        NODE_LEASES,
        {"metadata": {"name": name}, "spec": {"holderIdentity": name, "leaseDurationSeconds": 40,
                                              "renewTime": micro()}},
    )  # fmt: skip
    assert lease["apiVersion"] == "coordination.k8s.io/v1"
    got = node_client.get_lease(NODE_LEASES, name)
    assert got == lease
    renewed = node_client.update_lease(
        NODE_LEASES, name, {**got, "spec": {**got["spec"], "renewTime": micro()}}
    )
    assert int(renewed["metadata"]["resourceVersion"]) > int(got["metadata"]["resourceVersion"])
    # The old version again: another writer got there first.
    with pytest.raises(ConflictError) as err:
        node_client.update_lease(NODE_LEASES, name, {**got, "spec": {**got["spec"], "renewTime": micro()}})
    assert err.value.reason == "Conflict"
    assert 'leases.coordination.k8s.io "' in err.value.message
    with pytest.raises(NotFoundError):
        node_client.get_lease(NODE_LEASES, "no-such-lease")
    with pytest.raises(UnprocessableEntityError):
        node_client.update_lease(NODE_LEASES, name, {**renewed, "spec": {"leaseDurationSeconds": 0}})
    # The official client reads what ours wrote.
    coordination = client.CoordinationV1Api(api_client)
    read = coordination.read_namespaced_lease(name, NODE_LEASES)
    assert read.spec.holder_identity == name
    assert read.spec.lease_duration_seconds == 40
    assert read.spec.renew_time is not None
    listed = coordination.list_namespaced_lease(NODE_LEASES)
    assert name in [item.metadata.name for item in listed.items]


def test_official_client_writes_leases_and_events_we_read(
    api_client: client.ApiClient, server: EmbeddedApiServer
) -> None:
    coordination = client.CoordinationV1Api(api_client)
    body = client.V1Lease(
        metadata=client.V1ObjectMeta(name="official"),
        spec=client.V1LeaseSpec(holder_identity="official", lease_duration_seconds=15),
    )
    coordination.create_namespaced_lease(NODE_LEASES, body)
    stale = coordination.read_namespaced_lease("official", NODE_LEASES)
    stale.spec.lease_transitions = 1
    coordination.replace_namespaced_lease("official", NODE_LEASES, stale)
    with pytest.raises(ApiException) as err:
        coordination.replace_namespaced_lease("official", NODE_LEASES, stale)
    assert err.value.status == 409
    assert EmbeddedClient(server).get_lease(NODE_LEASES, "official")["spec"]["leaseDurationSeconds"] == 15

    events = client.EventsV1Api(api_client)
    created = events.create_namespaced_event(
        "default",
        client.EventsV1Event(
            metadata=client.V1ObjectMeta(name="official.1"),
            # A datetime with microseconds: the package prints it as isoformat, which
            # MicroTime parses only with its six fraction digits.
            event_time=datetime.now(UTC).replace(microsecond=123456),
            reporting_controller="example.com/controller",
            reporting_instance="i-1",
            action="Check",
            reason="Checked",
            note="all good",
            type="Normal",
            regarding=client.V1ObjectReference(kind="Node", name="n-official"),
        ),
    )
    assert created.note == "all good"
    core = client.CoreV1Api(api_client).read_namespaced_event("official.1", "default")
    assert core.message == "all good" and core.reporting_component == "example.com/controller"
    assert core.involved_object.name == "n-official"


def test_events_through_both_apis_and_kubectl_describe(
    node_client: NodeClient,
    api_client: client.ApiClient,
    server: EmbeddedApiServer,
    env: dict[str, str],
    request: pytest.FixtureRequest,
) -> None:
    which = request.node.callspec.id
    pod = node_client.create_pod(
        {
            "metadata": {"name": f"ev-{which}"},
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "i"}]},
        },
        "default",
    )
    ref = {"kind": "Pod", "namespace": "default", "name": pod.name, "uid": pod.uid, "apiVersion": "v1"}
    event_name = f"{pod.name}.17f0000000000000"
    created = node_client.create_event(
        "default",
        {
            "metadata": {"name": event_name, "namespace": "default"},
            "involvedObject": {**ref, "fieldPath": "spec.containers{c}"},
            "reason": "BackOff",
            "message": f"Back-off restarting failed container c ({which})",
            "source": {"component": "kubelet", "host": "n1"},
            "firstTimestamp": seconds(120),
            "lastTimestamp": seconds(120),
            "count": 1,
            "type": "Warning",
        },
    )
    assert created["count"] == 1
    # A repeat, as the kubelet's recorder sends it.
    patch = json.dumps({"count": 4, "lastTimestamp": seconds(5), "message": created["message"]}).encode()
    repeated = node_client.patch_event("default", event_name, patch)
    assert repeated["count"] == 4

    core = client.CoreV1Api(api_client)
    selector = f"involvedObject.name={pod.name},involvedObject.namespace=default,involvedObject.uid={pod.uid}"
    found = core.list_namespaced_event("default", field_selector=selector).items
    assert [e.count for e in found] == [4]
    # Through events.k8s.io (raw: the official package's model refuses the null eventTime
    # that the real server sends for a core/v1 event, too).
    raw = urllib3.request("GET", f"{server.url}/apis/events.k8s.io/v1/namespaces/default/events/{event_name}")
    v1 = json.loads(raw.data)
    assert v1["note"] == created["message"]
    assert v1["deprecatedCount"] == 4
    assert v1["regarding"]["uid"] == pod.uid
    assert v1["deprecatedSource"] == {"component": "kubelet", "host": "n1"}
    assert v1["eventTime"] is None

    described = kubectl(env, "describe", "pod", pod.name)
    events = described[described.index("Events:") :]
    assert "Warning  BackOff" in events
    assert f"Back-off restarting failed container c ({which})" in events
    assert "(x4 over 2m" in events and "kubelet" in events

    listed = kubectl(env, "get", "events", "--field-selector", f"involvedObject.name={pod.name}")
    header = listed.splitlines()[0].split()
    assert header == ["LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    assert f"pod/{pod.name}" in listed
    wide = kubectl(
        env, "get", "events.events.k8s.io", "-o", "wide", "--field-selector", f"regarding.name={pod.name}"
    )
    assert "spec.containers{c}" in wide and "kubelet, n1" in wide and event_name in wide
    assert f"Pod/{pod.name}" in kubectl(env, "events", "--for", f"pod/{pod.name}")


def test_node_status_cordon_and_taint(
    node_client: NodeClient, api_client: client.ApiClient, env: dict[str, str], request: pytest.FixtureRequest
) -> None:
    name = f"node-{request.node.callspec.id}"
    node_client.create_node(node_manifest(name))
    assert "NotReady" in kubectl(env, "get", "node", name)
    beat = {
        "status": {
            "conditions": [
                {"type": "Ready", "status": "True", "reason": "KubeletReady", "lastHeartbeatTime": seconds()}
            ],
            "capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"},
            "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
            "addresses": [
                {"type": "InternalIP", "address": "10.0.0.9"},
                {"type": "Hostname", "address": name},
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
        }
    }
    after = node_client.patch_node_status(name, json.dumps(beat).encode())
    assert [c["status"] for c in after["status"]["conditions"]] == ["True"]
    assert after["status"]["nodeInfo"]["kubeletVersion"] == "v1.37.0"  # kept: a patch merges
    read = client.CoreV1Api(api_client).read_node_status(name)
    assert read.status.allocatable["pods"] == "110"
    assert read.status.daemon_endpoints.kubelet_endpoint.port == 10250
    assert [a.address for a in read.status.addresses] == ["10.0.0.9", name]

    assert kubectl(env, "get", "node", name, "--no-headers").split()[1] == "Ready"
    # kubectl describe node shows the node's Lease (kube-node-lease/<node name>).
    node_client.create_lease(NODE_LEASES, {"metadata": {"name": name}, "spec": {"holderIdentity": name,
                                                                                "renewTime": micro()}})  # fmt: skip
    described = kubectl(env, "describe", "node", name)
    assert f"HolderIdentity:  {name}" in described
    assert "KubeletReady" in described
    kubectl(env, "cordon", name)
    assert kubectl(env, "get", "node", name, "--no-headers").split()[1] == "Ready,SchedulingDisabled"
    kubectl(env, "taint", "node", name, "dedicated=agents:NoSchedule")
    taints = node_client.get_node(name)["spec"]["taints"]
    assert taints == [{"key": "dedicated", "value": "agents", "effect": "NoSchedule"}]
    proc = subprocess.run(
        [kubectl_path(), "taint", "node", name, "dedicated=other:Sometimes"],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode != 0
    kubectl(env, "uncordon", name)
    kubectl(env, "taint", "node", name, "dedicated-")
    assert node_client.get_node(name)["spec"].get("unschedulable") in (None, False)
    # Our own patch of the Node: labels and taints; the status stays.
    patched = node_client.patch_node(
        name, json.dumps({"metadata": {"labels": {"tier": "edge"}}, "spec": {"unschedulable": True}}).encode()
    )
    assert patched["metadata"]["labels"]["tier"] == "edge"
    assert patched["status"]["allocatable"]["pods"] == "110"
    nodes, rv = node_client.list_nodes(label_selector="tier=edge")
    assert [n["metadata"]["name"] for n in nodes] == [name] and rv
    node_client.delete_node(name)
    with pytest.raises(NotFoundError):
        node_client.get_node(name)


def test_requests_are_counted_by_verb(server: EmbeddedApiServer) -> None:
    with HttpKubeClient(server.url) as http:
        http.create_lease(NODE_LEASES, {"metadata": {"name": "counted"}, "spec": {"holderIdentity": "c"}})
        lease = http.get_lease(NODE_LEASES, "counted")
        http.update_lease(NODE_LEASES, "counted", lease)
        http.create_event(
            "default",
            {
                "metadata": {"name": "counted.1"},
                "involvedObject": {"kind": "Node", "name": "c"},
                "reason": "R",
            },
        )
        http.patch_event("default", "counted.1", b'{"count": 2}')
        http.list_nodes()
        counts = http.requests.snapshot()
    assert {k: counts[k] for k in ("create", "get", "update", "patch", "list")} == {
        "create": 2,
        "get": 1,
        "update": 1,
        "patch": 1,
        "list": 1,
    }


def test_leases_and_events_tables(server: EmbeddedApiServer, env: dict[str, str]) -> None:
    EmbeddedClient(server).create_lease(
        NODE_LEASES, {"metadata": {"name": "table-node"}, "spec": {"holderIdentity": "table-node"}}
    )
    out = kubectl(env, "get", "leases", "-n", NODE_LEASES, "table-node")
    assert out.split() == ["NAME", "HOLDER", "AGE", "table-node", "table-node", out.split()[-1]]
    discovered = kubectl(env, "api-resources", "--api-group", "coordination.k8s.io")
    assert "leases" in discovered and "Lease" in discovered


def test_watch_patch_types_and_delete_over_http(
    server: EmbeddedApiServer, api_client: client.ApiClient
) -> None:
    coordination = client.CoordinationV1Api(api_client)
    http = HttpKubeClient(server.url)
    # A write first: a list of a fresh store is at resourceVersion "0", which a watch reads as "now".
    http.create_lease(NODE_LEASES, {"metadata": {"name": "before-watch"}, "spec": {}})
    start = coordination.list_namespaced_lease(NODE_LEASES).metadata.resource_version
    http.create_lease(NODE_LEASES, {"metadata": {"name": "watched"}, "spec": {"holderIdentity": "a"}})
    base = f"{server.url}/apis/coordination.k8s.io/v1/namespaces/{NODE_LEASES}/leases/watched"
    merge = urllib3.request(
        "PATCH", base, body=b'{"spec": {"holderIdentity": "b"}}',
        headers={"Content-Type": "application/merge-patch+json"},
    )  # fmt: skip
    assert merge.status == 200 and json.loads(merge.data)["spec"]["holderIdentity"] == "b"
    ops = b'[{"op": "replace", "path": "/spec/holderIdentity", "value": "c"}]'
    jp = urllib3.request("PATCH", base, body=ops, headers={"Content-Type": "application/json-patch+json"})
    assert jp.status == 200 and json.loads(jp.data)["spec"]["holderIdentity"] == "c"
    gone = urllib3.request("DELETE", base)
    # As kube-apiserver: a removed Lease is answered with a Status, not the object.
    assert gone.status == 200 and json.loads(gone.data)["status"] == "Success"
    assert json.loads(gone.data)["details"]["group"] == "coordination.k8s.io"

    stream = watch.Watch().stream(
        coordination.list_namespaced_lease, NODE_LEASES, resource_version=start, timeout_seconds=1
    )
    seen = [
        (e["type"], e["object"].spec.holder_identity)
        for e in stream
        if e["object"].metadata.name == "watched"
    ]
    assert seen == [("ADDED", "a"), ("MODIFIED", "b"), ("MODIFIED", "c"), ("DELETED", "c")]

    # An Event written through core/v1 is watched through events.k8s.io.
    events_start = client.CoreV1Api(api_client).list_namespaced_event("default").metadata.resource_version
    http.create_event(
        "default",
        {"metadata": {"name": "watched.1"}, "involvedObject": {"kind": "Node", "name": "w"}, "reason": "R"},
    )
    url = (
        f"{server.url}/apis/events.k8s.io/v1/namespaces/default/events"
        f"?watch=true&resourceVersion={events_start}&timeoutSeconds=1"
    )
    lines = [json.loads(line) for line in urllib3.request("GET", url).data.splitlines() if line.strip()]
    assert [(e["type"], e["object"]["apiVersion"], e["object"]["reason"]) for e in lines] == [
        ("ADDED", "events.k8s.io/v1", "R")
    ]
    http.close()
