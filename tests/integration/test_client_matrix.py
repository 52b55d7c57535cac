"""Real Kubernetes clients against the embedded API server and a simulated node.

Each client a user may reach for: kubectl 1.37 (the dev extra's) and 1.32 (installed
into the venv by ``make install``), the official ``kubernetes`` package,
``kubernetes_asyncio``, ``lightkube`` and ``kr8s``. Against one embedded server on
loopback, with a Node registered by the simulated node agent and pods it runs, each
client lists and reads the node (these clients refuse a Node whose ``nodeInfo``
lacks a required field), lists and reads pods with their conditions, creates a pod
on the node, watches it become Running and Ready, and deletes it (the agent stops
it and finishes the deletion). client-go is tested elsewhere (its own Go program).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import kr8s
import kubernetes
import kubernetes_asyncio
import lightkube
import pytest
from lightkube import codecs
from lightkube.resources.core_v1 import Node as LkNode
from lightkube.resources.core_v1 import Pod as LkPod

from podstatus.clients.http import HttpKubeClient
from podstatus.node.simpod import Timings
from podstatus.server import EmbeddedApiServer
from podstatus.server.security import generate_token
from podstatus.simulator.agent import NodeAgent
from testkit import kubectl_path, old_kubectl_path

NODE = "matrix-node"
NAMESPACE = "default"  # exists in every cluster
# The fields a NodeSystemInfo must have: the generated clients refuse a Node without them.
REQUIRED_NODE_INFO = (
    "machineID",
    "systemUUID",
    "bootID",
    "kernelVersion",
    "osImage",
    "containerRuntimeVersion",
    "kubeletVersion",
    "kubeProxyVersion",
    "operatingSystem",
    "architecture",
)
KUBELET_CONDITIONS = {"PodScheduled", "PodReadyToStartContainers", "Initialized", "ContainersReady", "Ready"}
# Slow enough that a watch opened after the create sees the pod change (Pending, then Running, then Ready).
TIMINGS = Timings(image_pull=(1.5, 2.0), startup=(0.1, 0.2), readiness=(0.4, 0.6), stop=(0.1, 0.2))
WAIT = 30.0


def pod_manifest(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": {"app": "matrix"}},
        "spec": {"nodeName": NODE, "containers": [{"name": "app", "image": "nginx:1.27"}]},
    }


@pytest.fixture(scope="module", params=["http", "https-token"])
def cluster(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Any]]:
    """An embedded server, the simulated node agent, and two pods it runs (Running and Ready).

    Plain HTTP (the embedded server's default), and HTTPS with a bearer token (what
    ``podstatus serve`` gives a new user): every client reads the kubeconfig the server wrote.
    """
    home = tmp_path_factory.mktemp("matrix-home")
    secure = request.param == "https-token"
    token = generate_token() if secure else None
    with EmbeddedApiServer(token=token, tls=secure) as server:
        kubeconfig = server.write_kubeconfig(home / "config")
        client = HttpKubeClient.from_kubeconfig(str(kubeconfig))
        agent = NodeAgent(client, NODE, timings=TIMINGS, manager_options={"fast_path": True})
        agent.register_node()
        agent.start()
        try:
            for name in ("sim-a", "sim-b"):
                client.create_pod(pod_manifest(name))
            deadline = time.monotonic() + WAIT
            while time.monotonic() < deadline:
                pods, _ = client.list_pods(NAMESPACE)
                if len(pods) == 2 and all(_ready(p.to_dict()) for p in pods):
                    break
                time.sleep(0.1)
            else:
                pytest.fail("the simulated node did not make its pods Ready")
            yield {"server": server, "kubeconfig": str(kubeconfig), "home": str(home), "client": client}
        finally:
            agent.stop()
            client.close()


def _conditions(pod: dict[str, Any]) -> dict[str, str]:
    return {c["type"]: c["status"] for c in (pod.get("status") or {}).get("conditions") or ()}


def _ready(pod: dict[str, Any]) -> bool:
    return pod.get("status", {}).get("phase") == "Running" and _conditions(pod).get("Ready") == "True"


# --- one adapter per client: the same operations, answers as wire-form dicts --------------------


class Adapter:
    name = ""

    def nodes(self) -> list[dict[str, Any]]:
        raise NotImplementedError

    def node(self, name: str) -> dict[str, Any]:
        raise NotImplementedError

    def pods(self) -> list[dict[str, Any]]:
        raise NotImplementedError

    def pod(self, name: str) -> dict[str, Any]:
        raise NotImplementedError

    def pod_status(self, name: str) -> dict[str, Any]:
        """The pod read through the status subresource where the client has it."""
        return self.pod(name)

    def create(self, manifest: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError

    def watch_until_ready(self, name: str, create: Callable[[], None]) -> list[tuple[str, dict[str, Any]]]:
        """Open a watch from the list's resourceVersion, ``create()``, collect events until Ready."""
        raise NotImplementedError

    def delete(self, name: str) -> None:
        raise NotImplementedError

    def exists(self, name: str) -> bool:
        raise NotImplementedError

    def close(self) -> None:
        """Let go of connections (a client left to the garbage collector warns of open sockets)."""


class Kubectl(Adapter):
    def __init__(self, binary: str, label: str, cluster: dict[str, Any]) -> None:
        self.binary = binary
        self.name = label
        # A private HOME keeps kubectl's discovery cache out of the user's.
        self.env = {**os.environ, "KUBECONFIG": cluster["kubeconfig"], "HOME": cluster["home"]}

    def run(self, *args: str, input: str | None = None, ok: bool = True) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            [self.binary, *args], env=self.env, input=input, capture_output=True, text=True, timeout=60
        )
        if ok:
            assert proc.returncode == 0, f"{self.name} {args}: {proc.stderr}"
        return proc

    def json(self, *args: str) -> Any:
        return json.loads(self.run(*args, "-o", "json").stdout)

    def nodes(self) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = self.json("get", "nodes")["items"]
        # The human table too: kubectl prints nodeInfo columns.
        table = self.run("get", "nodes", "-o", "wide").stdout
        assert NODE in table and "Ready" in table, table
        return items

    def node(self, name: str) -> dict[str, Any]:
        described = self.run("describe", "node", name).stdout
        assert "System Info:" in described and "Boot ID:" in described, described
        result: dict[str, Any] = self.json("get", "node", name)
        return result

    def pods(self) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = self.json("get", "pods", "-n", NAMESPACE)["items"]
        return items

    def pod(self, name: str) -> dict[str, Any]:
        result: dict[str, Any] = self.json("get", "pod", name, "-n", NAMESPACE)
        return result

    def pod_status(self, name: str) -> dict[str, Any]:
        result: dict[str, Any] = self.json("get", "pod", name, "-n", NAMESPACE, "--subresource=status")
        return result

    def create(self, manifest: dict[str, Any]) -> dict[str, Any]:
        result: dict[str, Any] = json.loads(
            self.run("create", "-f", "-", "-o", "json", input=json.dumps(manifest)).stdout
        )
        return result

    def watch_until_ready(self, name: str, create: Callable[[], None]) -> list[tuple[str, dict[str, Any]]]:
        create()
        # kubectl lists, then watches from the list's resourceVersion: the pod shows as ADDED, then
        # each change as MODIFIED.
        template = (
            '{.type} {.object.status.phase} {.object.status.conditions[?(@.type=="Ready")].status}{"\\n"}'
        )
        proc = subprocess.Popen(
            [self.binary, "get", "pods", "-n", NAMESPACE, "-w", "--output-watch-events",
             "--field-selector", f"metadata.name={name}", "-o", f"jsonpath={template}"],
            env=self.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        events: list[tuple[str, dict[str, Any]]] = []
        timer = threading.Timer(WAIT, proc.kill)
        timer.start()
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                parts = line.split()
                if not parts:
                    continue
                kind, phase, ready = ([*parts, "", "", ""])[:3]
                pod = {"status": {"phase": phase, "conditions": [{"type": "Ready", "status": ready}]}}
                events.append((kind, pod))
                if _ready(pod):
                    break
        finally:
            timer.cancel()
            proc.kill()
            proc.communicate()
        return events

    def delete(self, name: str) -> None:
        # kubectl waits until the pod is gone (the node stops it, then the final delete).
        self.run("delete", "pod", name, "-n", NAMESPACE, "--timeout=30s")

    def exists(self, name: str) -> bool:
        proc = self.run("get", "pod", name, "-n", NAMESPACE, "--ignore-not-found", "-o", "name", ok=False)
        assert proc.returncode == 0, proc.stderr
        return bool(proc.stdout.strip())


class Official(Adapter):
    name = "kubernetes"

    def __init__(self, cluster: dict[str, Any]) -> None:
        config = kubernetes.client.Configuration()
        kubernetes.config.load_kube_config(cluster["kubeconfig"], client_configuration=config)
        self.api_client = kubernetes.client.ApiClient(config)
        self.v1 = kubernetes.client.CoreV1Api(self.api_client)

    def close(self) -> None:
        self.api_client.close()

    def _dict(self, obj: Any) -> Any:
        return self.api_client.sanitize_for_serialization(obj)

    def nodes(self) -> list[dict[str, Any]]:
        return [self._dict(n) for n in self.v1.list_node().items]

    def node(self, name: str) -> dict[str, Any]:
        self._dict(self.v1.read_node_status(name))
        return dict(self._dict(self.v1.read_node(name)))

    def pods(self) -> list[dict[str, Any]]:
        return [self._dict(p) for p in self.v1.list_namespaced_pod(NAMESPACE).items]

    def pod(self, name: str) -> dict[str, Any]:
        return dict(self._dict(self.v1.read_namespaced_pod(name, NAMESPACE)))

    def pod_status(self, name: str) -> dict[str, Any]:
        return dict(self._dict(self.v1.read_namespaced_pod_status(name, NAMESPACE)))

    def create(self, manifest: dict[str, Any]) -> dict[str, Any]:
        return dict(self._dict(self.v1.create_namespaced_pod(NAMESPACE, manifest)))

    def watch_until_ready(self, name: str, create: Callable[[], None]) -> list[tuple[str, dict[str, Any]]]:
        rv = self.v1.list_namespaced_pod(NAMESPACE).metadata.resource_version
        create()
        events = []
        w = kubernetes.watch.Watch()
        for event in w.stream(
            self.v1.list_namespaced_pod,
            NAMESPACE,
            field_selector=f"metadata.name={name}",
            resource_version=rv,
            timeout_seconds=int(WAIT),
        ):
            pod = self._dict(event["object"])
            events.append((event["type"], pod))
            if _ready(pod):
                w.stop()
        return events

    def delete(self, name: str) -> None:
        self.v1.delete_namespaced_pod(name, NAMESPACE)

    def exists(self, name: str) -> bool:
        try:
            self.v1.read_namespaced_pod(name, NAMESPACE)
        except kubernetes.client.ApiException as err:
            assert err.status == 404
            return False
        return True


class Asyncio(Adapter):
    """kubernetes_asyncio: every call in its own event loop, as a short script would."""

    name = "kubernetes_asyncio"

    def __init__(self, cluster: dict[str, Any]) -> None:
        self.kubeconfig = cluster["kubeconfig"]

    def _call(self, fn: Callable[[Any, Any], Any]) -> Any:
        async def main() -> Any:
            config = kubernetes_asyncio.client.Configuration()
            await kubernetes_asyncio.config.load_kube_config(self.kubeconfig, client_configuration=config)
            async with kubernetes_asyncio.client.ApiClient(config) as api_client:
                v1 = kubernetes_asyncio.client.CoreV1Api(api_client)
                result = await fn(v1, api_client)
                answer = api_client.sanitize_for_serialization(result)
            # aiohttp closes TLS connections a moment after its session: let it, before the loop ends.
            await asyncio.sleep(0.05)
            return answer

        return asyncio.run(main())

    def nodes(self) -> list[dict[str, Any]]:
        return list(self._call(lambda v1, _: v1.list_node())["items"])

    def node(self, name: str) -> dict[str, Any]:
        return dict(self._call(lambda v1, _: v1.read_node(name)))

    def pods(self) -> list[dict[str, Any]]:
        return list(self._call(lambda v1, _: v1.list_namespaced_pod(NAMESPACE))["items"])

    def pod(self, name: str) -> dict[str, Any]:
        return dict(self._call(lambda v1, _: v1.read_namespaced_pod(name, NAMESPACE)))

    def pod_status(self, name: str) -> dict[str, Any]:
        return dict(self._call(lambda v1, _: v1.read_namespaced_pod_status(name, NAMESPACE)))

    def create(self, manifest: dict[str, Any]) -> dict[str, Any]:
        return dict(self._call(lambda v1, _: v1.create_namespaced_pod(NAMESPACE, manifest)))

    def watch_until_ready(self, name: str, create: Callable[[], None]) -> list[tuple[str, dict[str, Any]]]:
        async def watch(v1: Any, api_client: Any) -> list[Any]:
            rv = (await v1.list_namespaced_pod(NAMESPACE)).metadata.resource_version
            await asyncio.to_thread(create)
            events = []
            w = kubernetes_asyncio.watch.Watch()
            # Until the server ends the watch: a watch cut short by the client leaks its TLS socket
            # (aiohttp's Watch.close() hands the open stream back to a pool it has just closed).
            async with w.stream(
                v1.list_namespaced_pod,
                NAMESPACE,
                field_selector=f"metadata.name={name}",
                resource_version=rv,
                timeout_seconds=6,
            ) as stream:
                async for event in stream:
                    events.append([event["type"], api_client.sanitize_for_serialization(event["object"])])
            return events

        return [(kind, pod) for kind, pod in self._call(watch)]

    def delete(self, name: str) -> None:
        self._call(lambda v1, _: v1.delete_namespaced_pod(name, NAMESPACE))

    def exists(self, name: str) -> bool:
        try:
            self.pod(name)
        except kubernetes_asyncio.client.ApiException as err:
            assert err.status == 404
            return False
        return True


class Lightkube(Adapter):
    name = "lightkube"

    def __init__(self, cluster: dict[str, Any]) -> None:
        self.client = lightkube.Client(lightkube.KubeConfig.from_file(cluster["kubeconfig"]))

    def nodes(self) -> list[dict[str, Any]]:
        return [n.to_dict() for n in self.client.list(LkNode)]

    def close(self) -> None:
        self.client.close()

    def node(self, name: str) -> dict[str, Any]:
        self.client.get(LkNode.Status, name)
        return dict(self.client.get(LkNode, name).to_dict())

    def pods(self) -> list[dict[str, Any]]:
        return [p.to_dict() for p in self.client.list(LkPod, namespace=NAMESPACE)]

    def pod(self, name: str) -> dict[str, Any]:
        return dict(self.client.get(LkPod, name, namespace=NAMESPACE).to_dict())

    def pod_status(self, name: str) -> dict[str, Any]:
        return dict(self.client.get(LkPod.Status, name, namespace=NAMESPACE).to_dict())

    def create(self, manifest: dict[str, Any]) -> dict[str, Any]:
        return dict(self.client.create(codecs.from_dict(manifest)).to_dict())

    def watch_until_ready(self, name: str, create: Callable[[], None]) -> list[tuple[str, dict[str, Any]]]:
        listing = self.client.list(LkPod, namespace=NAMESPACE)
        list(listing)
        rv = listing.resourceVersion
        create()
        events = []
        for kind, obj in self.client.watch(
            LkPod,
            namespace=NAMESPACE,
            fields={"metadata.name": name},
            resource_version=rv,
            server_timeout=int(WAIT),
        ):
            pod = obj.to_dict()
            events.append((kind, pod))
            if _ready(pod):
                break
        return events

    def delete(self, name: str) -> None:
        self.client.delete(LkPod, name, namespace=NAMESPACE)

    def exists(self, name: str) -> bool:
        try:
            self.client.get(LkPod, name, namespace=NAMESPACE)
        except lightkube.ApiError as err:
            assert err.status.code == 404
            return False
        return True


class Kr8s(Adapter):
    name = "kr8s"

    def __init__(self, cluster: dict[str, Any]) -> None:
        self.api = kr8s.api(kubeconfig=cluster["kubeconfig"])

    def close(self) -> None:
        # kr8s has no public close: its HTTP session lives on kr8s's own event loop thread.
        session = getattr(self.api, "_session", None)
        if session is not None and not session.is_closed:
            kr8s._async_utils.Portal().call(session.aclose)

    def nodes(self) -> list[dict[str, Any]]:
        return [n.raw for n in self.api.get("nodes")]

    def node(self, name: str) -> dict[str, Any]:
        return dict(kr8s.objects.Node.get(name, api=self.api).raw)

    def pods(self) -> list[dict[str, Any]]:
        return [p.raw for p in self.api.get("pods", namespace=NAMESPACE)]

    def pod(self, name: str) -> dict[str, Any]:
        return dict(kr8s.objects.Pod.get(name, namespace=NAMESPACE, api=self.api).raw)

    def create(self, manifest: dict[str, Any]) -> dict[str, Any]:
        pod = kr8s.objects.Pod(manifest, api=self.api)
        pod.create()
        return dict(pod.raw)

    def watch_until_ready(self, name: str, create: Callable[[], None]) -> list[tuple[str, dict[str, Any]]]:
        assert any(p.name == "sim-a" for p in self.api.get("pods", namespace=NAMESPACE))
        create()
        # kr8s's get gives objects, not the list's resourceVersion: watch from "now" (ADDED first).
        events = []
        stream = self.api.watch("pods", namespace=NAMESPACE, field_selector=f"metadata.name={name}")
        deadline = time.monotonic() + WAIT
        for kind, obj in stream:
            events.append((kind, obj.raw))
            if _ready(obj.raw) or time.monotonic() > deadline:
                break
        stream.close()
        return events

    def delete(self, name: str) -> None:
        kr8s.objects.Pod.get(name, namespace=NAMESPACE, api=self.api).delete()

    def exists(self, name: str) -> bool:
        return bool(kr8s.objects.Pod(name, namespace=NAMESPACE, api=self.api).exists())


CLIENTS = ["kubectl-1.37", "kubectl-1.32", "kubernetes", "kubernetes_asyncio", "lightkube", "kr8s"]


@pytest.fixture(params=CLIENTS)
def adapter(request: pytest.FixtureRequest, cluster: dict[str, Any]) -> Iterator[Adapter]:
    name = request.param
    made: Adapter
    if name == "kubectl-1.37":
        made = Kubectl(kubectl_path(), name, cluster)
    elif name == "kubectl-1.32":
        made = Kubectl(old_kubectl_path(), name, cluster)
    else:
        kinds: dict[str, Callable[[dict[str, Any]], Adapter]] = {
            "kubernetes": Official, "kubernetes_asyncio": Asyncio, "lightkube": Lightkube, "kr8s": Kr8s
        }  # fmt: skip
        made = kinds[name](cluster)
    yield made
    made.close()


# kr8s 0.20 warns that it supports API servers 1.28 to 1.35 (the embedded one says 1.37).
pytestmark = pytest.mark.filterwarnings("ignore:Kubernetes version .* is not supported:UserWarning")


def test_kubectl_versions_are_the_ones_meant() -> None:
    for binary, version in ((kubectl_path(), "v1.37."), (old_kubectl_path(), "v1.32.")):
        out = subprocess.run([binary, "version", "--client", "-o", "json"], capture_output=True, text=True)
        assert json.loads(out.stdout)["clientVersion"]["gitVersion"].startswith(version)
        assert Path(binary).resolve() != Path("/usr/bin/kubectl").resolve()


def test_list_and_read_the_simulated_node(adapter: Adapter) -> None:
    nodes = adapter.nodes()
    assert [n["metadata"]["name"] for n in nodes] == [NODE]
    node = adapter.node(NODE)
    info = node["status"]["nodeInfo"]
    for key in REQUIRED_NODE_INFO:
        assert key in info, f"{adapter.name}: nodeInfo.{key}"
    assert info["bootID"] and info["machineID"] and info["kubeletVersion"]
    ready = [c for c in node["status"]["conditions"] if c["type"] == "Ready"]
    assert ready and ready[0]["status"] == "True"


def test_list_and_read_pods_with_conditions(adapter: Adapter) -> None:
    pods = {p["metadata"]["name"]: p for p in adapter.pods()}
    assert {"sim-a", "sim-b"} <= set(pods)
    for name in ("sim-a", "sim-b"):
        for pod in (pods[name], adapter.pod(name), adapter.pod_status(name)):
            assert pod["spec"]["nodeName"] == NODE
            status = pod["status"]
            assert status["phase"] == "Running", adapter.name
            assert status["qosClass"] == "BestEffort"
            conditions = _conditions(pod)
            assert set(conditions) >= KUBELET_CONDITIONS, conditions
            assert all(conditions[t] == "True" for t in KUBELET_CONDITIONS), conditions
            ready = next(c for c in status["conditions"] if c["type"] == "Ready")
            assert ready["lastTransitionTime"]
            (cs,) = status["containerStatuses"]
            assert cs["ready"] is True and "running" in cs["state"], cs


def test_create_watch_and_delete_a_pod(adapter: Adapter) -> None:
    name = f"made-by-{adapter.name.replace('_', '-').replace('.', '-')}"
    created: list[dict[str, Any]] = []
    events = adapter.watch_until_ready(name, lambda: created.append(adapter.create(pod_manifest(name))))
    assert created and created[0]["metadata"]["uid"] and created[0]["status"]["phase"] == "Pending"
    kinds = [kind for kind, _ in events]
    assert kinds[0] == "ADDED" and "MODIFIED" in kinds, events
    assert _ready(events[-1][1]), events
    # The status as read afterwards: every condition the node owns, with the server's QoS class.
    pod = adapter.pod_status(name)
    assert _ready(pod) and pod["status"]["qosClass"] == "BestEffort"
    assert all(_conditions(pod)[t] == "True" for t in KUBELET_CONDITIONS), _conditions(pod)
    adapter.delete(name)
    deadline = time.monotonic() + WAIT
    while adapter.exists(name):
        assert time.monotonic() < deadline, f"{adapter.name}: {name} never went away"
        time.sleep(0.2)
