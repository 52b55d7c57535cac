"""A ``get_pod_status`` that raises or hangs gives a Warning Event, not only log lines (issue 22.8).

The agent (over HTTP on loopback to the embedded API server) polls a provider that cannot
push; the Event is the kubelet's ``FailedSync`` "error determining status", at most one per
``status_error_event_interval`` for a pod, not one per poll.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from nodekit import events_for, make_agent, pod_manifest, wait_for

from podstatus.clients.embedded import EmbeddedClient
from podstatus.clients.http import HttpKubeClient
from podstatus.node import FakeProvider
from podstatus.server.http import EmbeddedApiServer


@pytest.fixture
def server() -> Iterator[EmbeddedApiServer]:
    with EmbeddedApiServer() as srv:
        yield srv


@pytest.fixture
def http(server: EmbeddedApiServer) -> Iterator[HttpKubeClient]:
    client = HttpKubeClient(server.url, timeout=(2.0, 10.0))
    yield client
    client.close()


def _failed_sync(server: EmbeddedApiServer, name: str) -> list[dict[str, Any]]:
    return [e for e in events_for(EmbeddedClient(server), name) if e["reason"] == "FailedSync"]


@pytest.mark.parametrize("trouble", ["raises", "hangs"])
def test_a_failing_status_poll_gives_one_warning_event_per_interval(
    trouble: str, server: EmbeddedApiServer, http: HttpKubeClient
) -> None:
    provider = FakeProvider(notify=False)  # polled every 0.2 s
    agent = make_agent(http, provider, provider_timeout=0.3, status_error_event_interval=60.0)
    agent.start()
    try:
        pod = EmbeddedClient(server).create_pod(pod_manifest("web"))
        wait_for(lambda: pod.uid in provider.running, what="the pod created")
        if trouble == "raises":
            provider.fail("get_pod_status", RuntimeError("backend lost the pod"))
        else:
            provider.hang("get_pod_status")
        polls = len(provider.called("get_pod_status"))
        wait_for(lambda: _failed_sync(server, "web"), what="a FailedSync Event")
        wait_for(lambda: len(provider.called("get_pod_status")) >= polls + 4, what="more failed polls")
        agent.recorder.flush()
        time.sleep(0.3)
        (event,) = _failed_sync(server, "web")
        assert event["type"] == "Warning"
        assert event["involvedObject"]["uid"] == pod.uid
        assert event["message"].startswith("error determining status: provider get_pod_status: ")
        assert ("backend lost the pod" if trouble == "raises" else "did not return within 0.3 s") in event[
            "message"
        ]
        assert event.get("count", 1) == 1  # several polls failed: still one Event, written once
    finally:
        provider.release()
        agent.stop(timeout=2)
