"""The kubelet API's serving certificate from a kubernetes.io/kubelet-serving CSR, signed by
kube-controller-manager v1.37.2 once approved, installed in the live TLS context, and renewed
before it expires (--rotate-server-certificates)."""

from __future__ import annotations

import json
import ssl
from typing import Any

import pytest
from cpkit import kubectl, unique, wait_until

from podstatus.clients.http import HttpKubeClient
from podstatus.node.kubeletapi import KubeletAPIConfig, KubeletAPIServer

pytestmark = pytest.mark.apiserver


def _pending(kubeconfig: str, node: str) -> list[str]:
    items = json.loads(kubectl(kubeconfig, "get", "csr", "-o", "json"))["items"]
    return [
        c["metadata"]["name"]
        for c in items
        if c["metadata"]["name"].startswith(f"csr-{node}-")
        and c["spec"]["signerName"] == "kubernetes.io/kubelet-serving"
        and not (c.get("status") or {}).get("conditions")
    ]


def _served_subject(port: int) -> str:
    from cryptography import x509

    pem = ssl.get_server_certificate(("127.0.0.1", port))
    return x509.load_pem_x509_certificate(pem.encode()).subject.rfc4514_string()


def test_serving_certificate_is_requested_approved_installed_and_renewed(control_plane: Any) -> None:
    kc = control_plane.kubeconfig
    client = HttpKubeClient.from_kubeconfig(kc)
    node = unique("vn-cert")
    api = KubeletAPIServer(
        KubeletAPIConfig(
            address="127.0.0.1",
            reviewer=client,
            rotate_server_certificates=True,
            csr_expiration_seconds=600,
            # Renew almost at once: the test sees a second request without waiting 8 minutes.
            csr_renew_fraction=0.01,
        )
    )
    api.start([node])
    try:
        _, port = api.add_node(node, 0)
        assert "podstatus" in _served_subject(port)  # self-signed until one is issued
        first = wait_until(lambda: _pending(kc, node), timeout=30, what="the first CSR")[0]
        csr = json.loads(kubectl(kc, "get", "csr", first, "-o", "json"))
        assert csr["spec"]["usages"] == ["digital signature", "server auth"]
        kubectl(kc, "certificate", "approve", first)
        rotator = api.rotators[node]
        wait_until(lambda: rotator.issued, timeout=60, what="the certificate installed")
        assert _served_subject(port) == f"CN=system:node:{node},O=system:nodes"
        served = ssl.get_server_certificate(("127.0.0.1", port))
        # Renewal: a new request, approved, replaces the certificate in the running server.
        second = wait_until(lambda: _pending(kc, node), timeout=30, what="the renewal CSR")[0]
        assert second != first
        kubectl(kc, "certificate", "approve", second)
        wait_until(lambda: len(rotator.issued) >= 2, timeout=60, what="the renewed certificate installed")
        assert ssl.get_server_certificate(("127.0.0.1", port)) != served
        assert rotator.issued[:2] == [first, second]
    finally:
        api.stop()
        client.close()
