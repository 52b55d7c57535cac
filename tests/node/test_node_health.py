"""``/healthz`` follows the node's readiness: a provider whose ping fails makes it 503 (issue 22.9).

The real ``podstatus node`` against the embedded API server over HTTP on loopback. ``/livez``
says only that the agent's loops run; ``/readyz`` and ``/healthz`` also need every node Ready
(its provider's ping answers), so a liveness probe on ``/healthz`` sees a dead back end.
"""

from __future__ import annotations

import signal
import socket
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

from nodeproc import NodeProcess, wait_for

from podstatus.clients.http import HttpKubeClient

# ping fails while the file $PING_FAILS exists.
PROVIDER = """
import os

from podstatus.node import NodeDescription


class Pingable:
    def create_pod(self, pod): pass
    def update_pod(self, pod): pass
    def delete_pod(self, pod, grace_period_seconds): pass
    def get_pod_status(self, pod): return None
    def get_pods(self): return []
    def node_description(self): return NodeDescription()

    def ping(self):
        if os.path.exists(os.environ["PING_FAILS"]):
            raise ConnectionError("back end unreachable")
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as err:
        with err:
            return err.code, err.read().decode()
    except OSError:
        return 0, ""


def _ready(api: HttpKubeClient, name: str) -> str:
    try:
        node = api.get_node(name)
    except Exception:
        return ""
    return next((c["status"] for c in node["status"].get("conditions") or () if c["type"] == "Ready"), "")


def test_healthz_fails_while_the_provider_ping_fails_and_livez_does_not(
    tmp_path: Path,
    node_env: dict[str, str],
    http_api: HttpKubeClient,
    node_procs: Callable[..., NodeProcess],
) -> None:
    (tmp_path / "pingmod.py").write_text(PROVIDER)
    fails = tmp_path / "ping-fails"
    node_env["PING_FAILS"] = str(fails)
    port = _free_port()
    node = node_procs(
        "--name",
        "vn-1",
        "--provider",
        "pingmod:Pingable",
        "--healthz-port",
        str(port),
        "--bind-address",
        "127.0.0.1",
    )
    wait_for(lambda: _ready(http_api, "vn-1") == "True", what="vn-1 Ready")
    wait_for(lambda: _get(port, "/healthz")[0] == 200, what="/healthz 200")
    assert _get(port, "/readyz") == (200, "ok\n")

    fails.touch()
    wait_for(lambda: _ready(http_api, "vn-1") == "False", timeout=30, what="vn-1 NotReady")
    code, body = wait_for(
        lambda: (got := _get(port, "/healthz"))[0] == 503 and got, timeout=10, what="/healthz 503"
    )
    assert "vn-1: NotReady: provider is not healthy" in body and "back end unreachable" in body, body
    assert _get(port, "/readyz")[0] == 503
    assert _get(port, "/livez") == (200, "ok\n")  # the process itself is fine

    fails.unlink()
    wait_for(lambda: _ready(http_api, "vn-1") == "True", timeout=30, what="vn-1 Ready again")
    wait_for(lambda: _get(port, "/healthz")[0] == 200, timeout=10, what="/healthz 200 again")
    node.signal(signal.SIGTERM)
    code, _, _ = node.wait(30)
    assert code == 0, node.err()
