"""What the kubelet API costs the API server: nothing. A node with it and a node without it,
side by side on one embedded server, make the same kinds of requests; the one with the API
creates its Node with the whole truth (addresses, daemonEndpoints, declaredFeatures) and
never posts its status again for it, and serving logs, pods and stats asks the server nothing.
"""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
from kubeletkit import CapableProvider, client_context, issue_client_cert
from nodekit import make_agent, pod_manifest, wait_for

from podstatus.clients.embedded import EmbeddedClient
from podstatus.node.kubeletapi import KubeletAPIConfig, KubeletAPIServer
from podstatus.server.http import EmbeddedApiServer
from podstatus.server.security import generate_ca

# Requests whose number follows the clock (a Lease renewal each interval), not what a node is.
TIMED = {"update_lease", "get_lease"}


class RecordingClient:
    """An :class:`EmbeddedClient` (the real server's store) that notes every method called on it."""

    def __init__(self, client: EmbeddedClient) -> None:
        self._client = client
        self.calls: Counter[str] = Counter()
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._client, name)
        if not callable(value) or name.startswith("__"):
            return value

        def call(*args: Any, **kwargs: Any) -> Any:
            with self._lock:
                self.calls[name] += 1
            return value(*args, **kwargs)

        return call


def test_the_kubelet_api_adds_no_request_and_the_node_is_true_from_its_first_post(tmp_path: Path) -> None:
    server = EmbeddedApiServer()
    server.start()
    ca_pem, ca_key = generate_ca()
    api = KubeletAPIServer(KubeletAPIConfig(address="127.0.0.1", client_ca_pem=ca_pem))
    api.start(["vn-on"])
    endpoint = api.add_node("vn-on", 0)
    with_api, without = RecordingClient(EmbeddedClient(server)), RecordingClient(EmbeddedClient(server))
    agent_on = make_agent(with_api, CapableProvider(), "vn-on", kubelet_endpoint=endpoint)
    agent_off = make_agent(without, CapableProvider(), "vn-off")
    api.set_agent(endpoint[1], agent_on)
    plain = EmbeddedClient(server)
    try:
        for agent in (agent_on, agent_off):
            agent.start()
        for node in ("vn-on", "vn-off"):
            plain.create_pod(pod_manifest(f"web-{node}", node))
        for agent, node in ((agent_on, "vn-on"), (agent_off, "vn-off")):
            wait_for(
                lambda a=agent, n=node: a.pods.get_pod_by_name("default", f"web-{n}"),
                what=f"web-{node} taken",
            )
        # The node with the API serves its routes; nothing of it reaches the API server.
        assert api.tls is not None
        admin = issue_client_cert(ca_pem, ca_key, "kube-apiserver-kubelet-client", ("system:masters",))
        context = client_context(api.tls.ca_pem, tmp_path, admin)
        before = Counter(with_api.calls)
        url = f"https://127.0.0.1:{endpoint[1]}"
        for path in (
            "/pods",
            "/stats/summary",
            "/metrics/resource",
            "/healthz",
            "/containerLogs/default/web-vn-on/app",
        ):
            assert _get(url + path, context) == 200, path
        served = Counter(with_api.calls)
        served.subtract(before)
        assert {k for k, v in served.items() if v > 0} <= TIMED, served
        # Both nodes through several heartbeats (FAST: every 0.2 s).
        renewals = with_api.calls["update_lease"]
        wait_for(lambda: with_api.calls["update_lease"] >= renewals + 5, what="five more Lease renewals")
    finally:
        agent_on.stop(timeout=2)
        agent_off.stop(timeout=2)
        api.stop()
    node = plain.get_node("vn-on")
    status = node["status"]
    server.stop()

    def untimed(calls: Counter[str]) -> set[str]:
        return {k for k, v in calls.items() if v > 0 and k not in TIMED}

    # The same kinds of requests with and without the API; for the Node, one create each and
    # the same number of status posts (the API changes nothing about the Node after its create).
    assert untimed(with_api.calls) == untimed(without.calls), (with_api.calls, without.calls)
    assert with_api.calls["create_node"] == without.calls["create_node"] == 1
    assert with_api.calls["patch_node_status"] == without.calls["patch_node_status"]
    # The first post already says where the API listens and what it speaks.
    assert status["daemonEndpoints"] == {"kubeletEndpoint": {"Port": endpoint[1]}}
    assert {"type": "InternalIP", "address": "127.0.0.1"} in status["addresses"]
    assert "ExtendWebSocketsToKubelet" in status["declaredFeatures"]


def _get(url: str, context: Any) -> int:
    async def go() -> int:
        async with aiohttp.ClientSession() as session, session.get(url, ssl=context) as resp:
            await resp.read()
            return resp.status

    async def settle(coro: Callable[[], Any]) -> int:
        try:
            result: int = await coro()
            return result
        finally:
            await asyncio.sleep(0.1)  # aiohttp closes its TLS connection after the session

    return asyncio.run(settle(go))
