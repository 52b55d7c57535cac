"""The simulated provider behind the node's real kubelet API (HTTPS on loopback, WebSocket streams):
logs with options and follow, exec run locally, port-forward to the responder, the stats summary and
the resource metrics derived from it."""

from __future__ import annotations

import asyncio
import json
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from kubeletkit import client_context, issue_client_cert, status_of
from nodekit import make_agent, pod_manifest, wait_for
from simkit import ZERO

from podstatus.clients.embedded import EmbeddedClient
from podstatus.node import SimulatedProvider
from podstatus.node.kubeletapi import KubeletAPIConfig, KubeletAPIServer
from podstatus.server.http import EmbeddedApiServer
from podstatus.tls import generate_ca


@pytest.fixture
def node(tmp_path: Path) -> Iterator[dict[str, Any]]:
    server = EmbeddedApiServer()
    server.start()
    client = EmbeddedClient(server)
    ca_pem, ca_key = generate_ca()
    api = KubeletAPIServer(KubeletAPIConfig(address="127.0.0.1", client_ca_pem=ca_pem))
    api.start(["vn-1"])
    endpoint = api.add_node("vn-1", 0)
    provider = SimulatedProvider(
        timings=ZERO, node_name="vn-1", exec_locally=True, exec_root=str(tmp_path / "exec")
    )
    agent = make_agent(client, provider, "vn-1", kubelet_endpoint=endpoint)
    api.set_agent(endpoint[1], agent)
    agent.start()
    app = {
        "name": "app",
        "image": "nginx",
        "ports": [{"containerPort": 8080}],
        "env": [{"name": "WHO", "value": "sim"}],
    }
    client.create_pod(pod_manifest("web", "vn-1", containers=[app]))
    wait_for(lambda: provider.sim_pod(_uid(agent)) is not None, what="the pod on the provider")
    assert api.tls is not None
    admin = issue_client_cert(ca_pem, ca_key, "kube-apiserver-kubelet-client", ("system:masters",))
    try:
        yield {
            "url": f"https://127.0.0.1:{endpoint[1]}",
            "ssl": client_context(api.tls.ca_pem, tmp_path, admin),
            "provider": provider,
        }
    finally:
        agent.stop(timeout=2)
        api.stop()
        server.stop()


def _uid(agent: Any) -> str:
    pod = agent.pods.get_pod_by_name("default", "web")
    return pod.uid if pod is not None else ""


async def _get(n: dict[str, Any], path: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as session, session.get(n["url"] + path, ssl=n["ssl"]) as resp:
        return resp.status, await resp.text()


async def _ws(n: dict[str, Any], path: str, protocol: str, send: list[bytes]) -> list[bytes]:
    frames: list[bytes] = []
    async with (
        aiohttp.ClientSession() as session,
        session.ws_connect(n["url"] + path, protocols=(protocol,), ssl=n["ssl"]) as ws,
    ):
        for frame in send:
            await ws.send_bytes(frame)
        async with asyncio.timeout(20):
            async for msg in ws:
                if msg.type == aiohttp.WSMsgType.BINARY:
                    frames.append(msg.data)
    return frames


def test_logs_exec_port_forward_and_stats_of_a_simulated_pod_over_the_kubelet_api(
    node: dict[str, Any],
) -> None:
    async def go() -> None:
        # Logs: the lifecycle lines, then options as the kubelet takes them.
        status, text = await _get(node, "/containerLogs/default/web/app")
        assert (
            status == 200
            and text.startswith("starting app: image nginx")
            and "listening on :8080\nready\n" in text
        )
        assert await _get(node, "/containerLogs/default/web/app?tailLines=1") == (200, "ready\n")
        status, text = await _get(node, "/containerLogs/default/web/app?previous=true")
        assert (status, text) == (400, 'previous terminated container "app" in pod "web" not found')
        # A follower gets a line written after it connected.
        async with (
            aiohttp.ClientSession() as session,
            session.get(
                node["url"] + "/containerLogs/default/web/app?follow=true&tailLines=0", ssl=node["ssl"]
            ) as resp,
        ):
            sim = node["provider"].sim_pod(node["provider"]._names[("default", "web")])
            sim.containers[0].log.write("a line for the follower")
            async with asyncio.timeout(10):
                assert await resp.content.readline() == b"a line for the follower\n"

        # Exec: run locally with the container's env; the exit code comes back as the kubelet's Status.
        frames = await _ws(
            node,
            "/exec/default/web/app?command=sh&command=-c&command=echo+$WHO;exit+4&output=1&error=1",
            "v5.channel.k8s.io",
            [],
        )
        assert b"".join(f[1:] for f in frames if f[:1] == b"\x01") == b"sim\n"
        st = status_of(frames)
        assert st["reason"] == "NonZeroExitCode" and st["details"]["causes"][0]["message"] == "4"

        # With local exec off (the default), the caller is told so, naming the node.
        node["provider"].exec_locally = False
        frames = await _ws(node, "/exec/default/web/app?command=ls&output=1", "v5.channel.k8s.io", [])
        message = status_of(frames)["message"]
        assert "exec is not supported by the simulated provider of node vn-1" in message, message

        # Port-forward: the responder of the declared port answers HTTP.
        data = b""
        async with (
            aiohttp.ClientSession() as session,
            session.ws_connect(
                node["url"] + "/portForward/default/web?port=8080",
                protocols=("v4.channel.k8s.io",),
                ssl=node["ssl"],
            ) as ws,
        ):
            async with asyncio.timeout(20):
                opening = [await ws.receive_bytes() for _ in range(2)]
                assert opening == [b"\x00" + struct.pack("<H", 8080), b"\x01" + struct.pack("<H", 8080)]
                await ws.send_bytes(b"\x00GET / HTTP/1.0\r\n\r\n")
                while b"port 8080\n" not in data:
                    frame = await ws.receive_bytes()
                    if frame[0] == 0:
                        data += frame[1:]
        assert data.startswith(b"HTTP/1.1 200 OK")
        assert data.endswith(b"podstatus simulated pod default/web container app port 8080\n")

        # Stats and the resource metrics derived from them: figures of this pod.
        status, text = await _get(node, "/stats/summary")
        summary = json.loads(text)
        assert status == 200 and summary["node"]["nodeName"] == "vn-1"
        (pod,) = summary["pods"]
        assert pod["podRef"]["name"] == "web" and pod["containers"][0]["cpu"]["usageCoreNanoSeconds"] > 0
        status, text = await _get(node, "/metrics/resource")
        assert status == 200
        assert 'container_cpu_usage_seconds_total{container="app",namespace="default",pod="web"}' in text

    asyncio.run(go())
