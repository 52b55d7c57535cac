"""``podstatus node --nodes 2 --kubelet-port P``: every node's kubelet API on its own address and port
(P, P+1), each answering for its own node, its Node pointing there. The real command against
the embedded API server on loopback."""

from __future__ import annotations

import asyncio
import json
import signal
import socket
import ssl
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
from kubeletkit import client_context, issue_client_cert
from nodeproc import NodeProcess, pod_body, wait_for

from podstatus.clients.http import HttpKubeClient
from podstatus.tls import generate_ca

TOLERATE = [{"key": "podstatus.io/virtual-node", "operator": "Exists", "effect": "NoSchedule"}]
KIT = Path(__file__).resolve().parent


def free_ports(count: int) -> int:
    """A base port whose next ``count`` ports are free now (loopback)."""
    for _ in range(50):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            base = int(probe.getsockname()[1])
        if base + count > 65535:
            continue
        try:
            for offset in range(count):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", base + offset))
        except OSError:
            continue
        return base
    raise AssertionError("no free ports")


def fetch(url: str, context: Any) -> tuple[int, str]:
    async def go() -> tuple[int, str]:
        try:
            async with aiohttp.ClientSession() as session, session.get(url, ssl=context) as resp:
                return resp.status, await resp.text()
        finally:
            await asyncio.sleep(0.25)  # aiohttp's TLS close settles on the loop

    return asyncio.run(go())


def test_each_node_of_a_process_answers_on_its_own_port(
    http_api: HttpKubeClient, node_procs: Callable[..., NodeProcess], tmp_path: Path
) -> None:
    ca_pem, ca_key = generate_ca()
    (tmp_path / "ca.crt").write_bytes(ca_pem)
    (tmp_path / "capable.py").write_text(
        f"import sys\nsys.path.insert(0, {str(KIT)!r})\nfrom kubeletkit import CapableProvider\n"
    )
    base = free_ports(2)
    node = node_procs(
        "--name", "kn", "--nodes", "2", "--provider", "capable:CapableProvider",
        "--kubelet-port", str(base), "--address", "127.0.0.1", "--client-ca-file", str(tmp_path / "ca.crt"),
    )  # fmt: skip
    nodes = wait_for(
        lambda: (
            ((got := {n["metadata"]["name"]: n for n in http_api.list_nodes()[0]}).keys() >= {"kn-1", "kn-2"})
            and got
        ),
        timeout=60,
        what="two nodes registered",
    )
    # On loopback each node has an address of its own (127.0.0.1, 127.0.0.2), and its own port.
    address = {"kn-1": "127.0.0.1", "kn-2": "127.0.0.2"}
    for i, name in enumerate(("kn-1", "kn-2")):
        status = nodes[name]["status"]
        assert status["daemonEndpoints"]["kubeletEndpoint"]["Port"] == base + i
        internal = [a["address"] for a in status["addresses"] if a["type"] == "InternalIP"]
        assert internal == [address[name]], status["addresses"]
        assert "ExtendWebSocketsToKubelet" in status["declaredFeatures"]
    http_api.create_pod(pod_body("only-on-2", "kn-2", tolerations=TOLERATE))

    # The serving certificate is self-signed: trust the one the node presents.
    server_pem = ssl.get_server_certificate(("127.0.0.1", base))
    admin = client_context(server_pem.encode(), tmp_path, issue_client_cert(ca_pem, ca_key, "admin"))
    anonymous = client_context(server_pem.encode(), tmp_path)

    def pods(host: str, port: int) -> list[str]:
        status, body = fetch(f"https://{host}:{port}/pods", admin)
        assert status == 200, body
        return [p["metadata"]["name"] for p in json.loads(body)["items"]]

    wait_for(
        lambda: pods("127.0.0.2", base + 1) == ["only-on-2"], timeout=60, what="the pod on kn-2's kubelet API"
    )
    assert pods("127.0.0.1", base) == []
    for i, name in enumerate(("kn-1", "kn-2")):
        status, body = fetch(f"https://{address[name]}:{base + i}/stats/summary", admin)
        assert status == 200 and json.loads(body)["node"]["nodeName"] == name
    assert fetch(f"https://127.0.0.1:{base}/pods", anonymous) == (401, "Unauthorized")
    status, text = fetch(f"https://127.0.0.2:{base + 1}/containerLogs/default/only-on-2/app", admin)
    assert (status, text.splitlines()[-1]) == (200, "app line 5")
    node.signal(signal.SIGTERM)
    code, _, _ = node.wait(30)
    assert code == 0, node.err()
