"""What a provider reports that the API server could not take (issue 22.7), over HTTP on loopback.

A container in more than one state is refused (logged, a Warning Event, never cached or
written); a 10 MB message is cut as the kubelet cuts messages, so the PATCH fits the API
server's 3 MB request limit instead of being refused with 413 and retried for ever.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from nodekit import events_for, make_agent, pod_manifest, wait_for

from podstatus.clients.embedded import EmbeddedClient
from podstatus.clients.http import HttpKubeClient
from podstatus.errors import InvalidObjectError
from podstatus.node import FakeProvider, NodeAgent
from podstatus.server.http import EmbeddedApiServer
from podstatus.statusutil import MAX_POD_TERMINATION_MESSAGE_LOG_LENGTH
from podstatus.types import (
    ContainerState,
    ContainerStateRunning,
    ContainerStateTerminated,
    ContainerStateWaiting,
    ContainerStatus,
    PodStatus,
)
from podstatus.validation import validate_status

BIG = "é" * (5 * 1024 * 1024)  # 10 MB of UTF-8, two bytes a character


@pytest.fixture
def server() -> Iterator[EmbeddedApiServer]:
    with EmbeddedApiServer() as srv:
        yield srv


@pytest.fixture
def agent(server: EmbeddedApiServer) -> Iterator[tuple[NodeAgent, FakeProvider]]:
    client = HttpKubeClient(server.url, timeout=(2.0, 10.0))
    provider = FakeProvider()
    node = make_agent(client, provider)
    node.start()
    yield node, provider
    node.stop(timeout=2)
    client.close()


def _status(state: ContainerState, phase: str = "Pending", **pod: Any) -> PodStatus:
    return PodStatus(
        phase=phase,
        container_statuses=(ContainerStatus(name="app", image="nginx", ready=False, state=state),),
        **pod,
    )


def _on_server(server: EmbeddedApiServer) -> dict[str, Any]:
    return EmbeddedClient(server).get_pod("default", "web").to_dict()


def test_a_container_in_several_states_is_refused_and_never_written(
    server: EmbeddedApiServer,
    agent: tuple[NodeAgent, FakeProvider],
    caplog: pytest.LogCaptureFixture,
) -> None:
    node, provider = agent
    pod = EmbeddedClient(server).create_pod(pod_manifest("web"))
    wait_for(lambda: (_on_server(server)["status"].get("containerStatuses") or [{}])[0].get("state"))
    caplog.clear()
    every = ContainerState(
        waiting=ContainerStateWaiting(reason="ContainerCreating"),
        running=ContainerStateRunning(),
        terminated=ContainerStateTerminated(exit_code=0),
    )
    provider.set_status(pod.uid, _status(every, phase="Running"))
    assert "may not specify more than 1 container state (got waiting, running, terminated)" in caplog.text
    node.recorder.flush()
    refused = [e for e in events_for(EmbeddedClient(server), "web") if e["reason"] == "ProviderError"]
    assert refused and refused[0]["type"] == "Warning", refused
    assert "more than 1 container state" in refused[0]["message"]
    time.sleep(0.5)  # a sync that was going to write it has had its chance
    on_server = _on_server(server)
    assert on_server["status"]["phase"] == "Pending"
    assert all(len(cs["state"]) == 1 for cs in on_server["status"]["containerStatuses"]), on_server
    assert node.manager.get_pod_status(pod.uid).phase == "Pending"  # not cached either
    # The same rule for any caller of the status manager: validation refuses it by path.
    with pytest.raises(InvalidObjectError, match=r"containerStatuses\[0\]\.state"):
        validate_status(_status(every))


@pytest.mark.parametrize(
    ("where", "status"),
    [
        (
            "waiting",
            _status(ContainerState(waiting=ContainerStateWaiting(reason="ErrImagePull", message=BIG))),
        ),
        (
            "pod",
            _status(ContainerState(waiting=ContainerStateWaiting(reason="ErrImagePull")), message=BIG),
        ),
        (
            "terminated",
            _status(
                ContainerState(terminated=ContainerStateTerminated(exit_code=1, reason="Error", message=BIG)),
                phase="Failed",
            ),
        ),
    ],
)
def test_a_10_mb_message_is_cut_as_the_kubelet_cuts_messages_and_written(
    where: str, status: PodStatus, server: EmbeddedApiServer, agent: tuple[NodeAgent, FakeProvider]
) -> None:
    node, provider = agent
    pod = EmbeddedClient(server).create_pod(pod_manifest("web", restartPolicy="Never"))
    wait_for(lambda: pod.uid in provider.running, what="the pod created")
    provider.set_status(pod.uid, status)

    def message() -> str | None:
        got = _on_server(server)["status"]
        if where == "pod":
            return got.get("message")
        state = (got.get("containerStatuses") or [{}])[0].get("state") or {}
        return (state.get(where) or {}).get("message")

    cut = wait_for(message, timeout=15, what=f"the {where} message on the server")
    # One container: the whole 12288 bytes, cut between characters.
    assert len(cut.encode()) == MAX_POD_TERMINATION_MESSAGE_LOG_LENGTH
    assert BIG.startswith(cut)
    assert node.manager.pending_count() == 0  # written, nothing left to retry
