"""The node agent against a genuine kube-apiserver (and the embedded one, the same test).

Everything it writes must pass the real server's validation: the Node with its
four conditions and nodeInfo, the Lease, core/v1 Events created and patched
(count), pod status through the status manager, the final delete.
"""

from __future__ import annotations

from typing import Any

import pytest
from apisuite_kit import NS, Server, unique, wait_for

from podstatus.node import NodeAgent, NodeConfig, SimulatedProvider, Timings

pytestmark = pytest.mark.apiserver

FAST = Timings(
    image_pull=(0.1, 0.2),
    init_run=(0.1, 0.2),
    startup=(0.1, 0.2),
    readiness=(0.1, 0.2),
    job_run=(0.5, 1.0),
    crash_run=(0.2, 0.3),
    crash_backoff=0.2,
    crash_backoff_max=0.4,
    stop=(0.1, 0.2),
)


def _events(server: Server, name: str) -> list[dict[str, Any]]:
    # The server picks them: "default" also holds events this test did not make (some name no object).
    answer = server.raw.request(
        "GET", f"/api/v1/namespaces/{NS}/events", query=f"fieldSelector=involvedObject.name%3D{name}"
    )
    assert answer.code == 200, answer.body
    events: list[dict[str, Any]] = answer.body["items"]
    assert all(e["involvedObject"]["name"] == name for e in events), events
    return events


def test_node_agent_on_the_server(server: Server) -> None:
    client = server.client()
    node = unique("vn")
    agent = NodeAgent(
        client,
        SimulatedProvider(timings=FAST),
        NodeConfig(node_name=node, lease_renew_interval=0.5, housekeeping_interval=0.1),
        manager_options={"fast_path": True, "sync_period": 1.0},
    )
    agent.start()
    try:
        got = client.get_node(node)
        assert {c["type"]: c["status"] for c in got["status"]["conditions"]} == {
            "Ready": "True",
            "MemoryPressure": "False",
            "DiskPressure": "False",
            "PIDPressure": "False",
        }
        lease = client.get_lease("kube-node-lease", node)
        assert lease["spec"]["holderIdentity"] == node and lease["spec"]["leaseDurationSeconds"] == 40
        renewed = lease["spec"]["renewTime"]
        wait_for(
            lambda: client.get_lease("kube-node-lease", node)["spec"]["renewTime"] != renewed, timeout=10
        )

        web, crash = unique("web"), unique("crash")
        for name, behaviour in ((web, "serve"), (crash, "crash")):
            client.create_pod(
                {
                    "metadata": {
                        "name": name,
                        "namespace": NS,
                        "annotations": {"podstatus.io/behaviour": behaviour},
                    },
                    "spec": {"nodeName": node, "containers": [{"name": "app", "image": "nginx:1.27"}]},
                }
            )
        wait_for(lambda: client.get_pod(NS, web).status.phase == "Running", timeout=20)
        wait_for(
            lambda: any(
                c.status == "True"
                for c in client.get_pod(NS, web).status.conditions or ()
                if c.type == "Ready"
            ),
            timeout=20,
        )
        wait_for(
            lambda: (
                {"Pulling", "Pulled", "Created", "Started"} <= {e["reason"] for e in _events(server, web)}
            ),
            timeout=20,
        )
        # A crash loop repeats the same BackOff: one Event, its count patched up.
        wait_for(
            lambda: any(e["reason"] == "BackOff" and e["count"] >= 2 for e in _events(server, crash)),
            timeout=30,
        )
        uid = client.get_pod(NS, web).uid
        client.delete_pod(NS, web, grace_period_seconds=10, uid=uid)
        wait_for(lambda: not [p for p in client.list_pods(NS)[0] if p.name == web], timeout=30)
        assert "Killing" in {e["reason"] for e in _events(server, web)}
        client.delete_pod(NS, crash, grace_period_seconds=0, uid=client.get_pod(NS, crash).uid)
    finally:
        agent.stop(on_stop="cordon")
        client.close()
    assert server.client().get_node(node)["spec"].get("unschedulable") is True
