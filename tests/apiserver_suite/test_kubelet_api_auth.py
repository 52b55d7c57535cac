"""The kubelet API's webhook authentication and authorization against a genuine kube-apiserver:
bearer tokens through TokenReview, SubjectAccessReview on nodes/proxy (and nodes/stats), as
the kubelet with ``--authentication-token-webhook --authorization-mode=Webhook``.

A ServiceAccount token without any role gets 403; one bound to a ClusterRole with
``nodes/proxy`` gets in; one with only ``nodes/stats`` reads /stats/summary but not /pods
(nodes/pods or nodes/proxy) nor /exec (nodes/proxy); anonymous callers get 401.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from apisuite_kit import Server, unique, wait_for

from podstatus.node import NodeAgent, NodeConfig
from podstatus.node.kubeletapi import KubeletAPIConfig, KubeletAPIServer

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "node"))
from kubeletkit import CapableProvider, client_context

pytestmark = pytest.mark.apiserver


def _token(server: Server, namespace: str, account: str) -> str:
    raw = server.raw
    answer = raw.request(
        "POST", f"/api/v1/namespaces/{namespace}/serviceaccounts", {"metadata": {"name": account}}
    )
    assert answer.code in (201, 409), answer.body
    answer = raw.request(
        "POST",
        f"/api/v1/namespaces/{namespace}/serviceaccounts/{account}/token",
        {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"expirationSeconds": 600},
        },
    )
    assert answer.code == 201, answer.body
    token: str = answer.body["status"]["token"]
    return token


def _grant(server: Server, namespace: str, account: str, subresources: list[str]) -> None:
    role = unique("kubelet-api")
    answer = server.raw.request(
        "POST",
        "/apis/rbac.authorization.k8s.io/v1/clusterroles",
        {
            "metadata": {"name": role},
            "rules": [
                {"apiGroups": [""], "resources": [f"nodes/{s}" for s in subresources], "verbs": ["get"]}
            ],
        },
    )
    assert answer.code == 201, answer.body
    answer = server.raw.request(
        "POST",
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
        {
            "metadata": {"name": role},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": namespace}],
        },
    )
    assert answer.code == 201, answer.body


def _get(url: str, context: Any, token: str | None = None) -> tuple[int, str]:
    async def go() -> tuple[int, str]:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        try:
            async with (
                aiohttp.ClientSession() as session,
                session.get(url, ssl=context, headers=headers) as r,
            ):
                return r.status, await r.text()
        finally:
            await asyncio.sleep(0.25)

    return asyncio.run(go())


def test_tokens_are_reviewed_and_authorized_by_the_apiserver(real_server: Server, tmp_path: Path) -> None:
    client = real_server.client()
    node = unique("vn")
    api = KubeletAPIServer(
        KubeletAPIConfig(address="127.0.0.1", token_webhook=True, authorization="Webhook", reviewer=client)
    )
    api.start([node])
    address, port = api.add_node(node, 0)
    agent = NodeAgent(
        client,
        CapableProvider(node),
        NodeConfig(node_name=node, lease_renew_interval=0.5, kubelet_endpoint=(address, port)),
    )
    api.set_agent(port, agent)
    agent.start()
    try:
        assert api.tls is not None
        context = client_context(api.tls.ca_pem, tmp_path)
        url = f"https://127.0.0.1:{port}"
        nobody = _token(real_server, "default", unique("nobody"))
        proxy_account, stats_account = unique("proxy"), unique("stats")
        proxy = _token(real_server, "default", proxy_account)
        stats = _token(real_server, "default", stats_account)
        _grant(real_server, "default", proxy_account, ["proxy"])
        _grant(real_server, "default", stats_account, ["stats"])

        assert _get(url + "/pods", context) == (401, "Unauthorized")
        assert _get(url + "/pods", context, "not-a-token") == (401, "Unauthorized")
        status, text = _get(url + "/pods", context, nobody)
        assert status == 403 and "verb=get, resource=nodes, subresource(s)=[pods proxy]" in text, text
        # RBAC may take a moment to see the new bindings.
        wait_for(lambda: _get(url + "/pods", context, proxy)[0] == 200, timeout=20)
        assert _get(url + "/containerLogs/default/nope/app", context, proxy)[0] == 404  # in, then not found
        wait_for(lambda: _get(url + "/stats/summary", context, stats)[0] == 200, timeout=20)
        status, text = _get(url + "/pods", context, stats)
        assert status == 403 and "subresource(s)=[pods proxy]" in text
        status, _ = _get(url + "/exec/default/nope/app?command=ls&output=1", context, stats)
        assert status == 403
    finally:
        agent.stop(timeout=2)
        api.stop()
