"""The simulated provider: what it tells the agent, step by step."""

from __future__ import annotations

import threading
import time

from simkit import ZERO

from podstatus.node import SimulatedProvider, Timings
from podstatus.types import Pod, PodStatus


class Recorder:
    def __init__(self) -> None:
        self.statuses: list[PodStatus] = []
        self.events: list[str] = []
        self.lock = threading.Lock()

    def pod_status(self, pod_uid: str, status: PodStatus) -> None:
        with self.lock:
            self.statuses.append(status)

    def event(
        self, pod_uid: str, type: str, reason: str, message: str, field_path: str | None = None
    ) -> None:
        with self.lock:
            self.events.append(reason)


def _pod(name: str, behaviour: str, restart: str = "Always", init: bool = False) -> Pod:
    spec: dict[str, object] = {
        "restartPolicy": restart,
        "containers": [{"name": "app", "image": "nginx:1.27"}, {"name": "side", "image": "busybox:1"}],
    }
    if init:
        spec["initContainers"] = [{"name": "setup", "image": "busybox:1"}]
    return Pod.from_dict(
        {
            "metadata": {
                "name": name,
                "namespace": "default",
                "uid": f"uid-{name}",
                "annotations": {"podstatus.io/behaviour": behaviour},
            },
            "spec": spec,
        }
    )


def _provider(timings: Timings) -> tuple[SimulatedProvider, Recorder]:
    provider = SimulatedProvider(timings=timings)
    recorder = Recorder()
    provider.notify_pods(recorder)
    return provider, recorder


def test_instant_steps_are_one_status_like_one_relist() -> None:
    """With no time between them, pull, start and readiness are one change: one status, not four."""
    provider, recorder = _provider(ZERO)
    try:
        provider.create_pod(_pod("web", "serve", init=True))
        assert len(recorder.statuses) == 1
        status = recorder.statuses[0]
        assert status.phase == "Running"
        assert [c.ready for c in status.container_statuses or ()] == [True, True]
        init = (status.init_container_statuses or ())[0]
        assert init.state is not None and init.state.terminated is not None
        # Every step still happened, in order, and said so.
        assert recorder.events[:3] == ["Pulling", "Pulling", "Pulling"]
        assert recorder.events.count("Started") == 3
    finally:
        provider.close()


def test_steps_that_take_time_are_published_one_by_one() -> None:
    timings = Timings(
        image_pull=(0.01, 0.01), init_run=(0.01, 0.01), startup=(0.01, 0.01), readiness=(0.01, 0.01)
    )
    provider, recorder = _provider(timings)
    try:
        provider.create_pod(_pod("web", "serve"))
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            with recorder.lock:
                last = recorder.statuses[-1]
            if all(c.ready for c in last.container_statuses or ()):
                break
            time.sleep(0.01)
        phases = [s.phase for s in recorder.statuses]
        assert phases[0] == "Pending" and phases[-1] == "Running"
        assert len(recorder.statuses) >= 4  # pending, started, startup done, ready
    finally:
        provider.close()


def test_a_job_with_no_run_time_is_published_succeeded_at_once() -> None:
    provider, recorder = _provider(ZERO)
    try:
        provider.create_pod(_pod("job", "complete", restart="Never"))
        assert [s.phase for s in recorder.statuses] == ["Succeeded"]
    finally:
        provider.close()


def test_an_instant_crash_loop_goes_on_from_the_timer_without_holding_the_caller() -> None:
    """No run time and no back-off: the loop of steps is cut, its statuses keep coming."""
    provider, recorder = _provider(ZERO)
    try:
        started = time.monotonic()
        provider.create_pod(_pod("crash", "crash"))
        assert time.monotonic() - started < 2
        first = len(recorder.statuses)
        assert first == 1
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and len(recorder.statuses) < first + 3:
            time.sleep(0.01)
        assert len(recorder.statuses) >= first + 3
        restarts = [max(c.restart_count for c in s.container_statuses or ()) for s in recorder.statuses]
        assert restarts == sorted(restarts) and restarts[-1] > restarts[0]
    finally:
        provider.close()


def test_deleting_publishes_the_stopped_containers_once() -> None:
    provider, recorder = _provider(ZERO)
    try:
        pod = _pod("web", "serve")
        provider.create_pod(pod)
        provider.delete_pod(pod, 30)
        assert len(recorder.statuses) == 2
        stopped = recorder.statuses[-1]
        assert all(c.state is not None and c.state.terminated for c in stopped.container_statuses or ())
        assert provider.get_pod_status(pod) is None
    finally:
        provider.close()


def test_the_agent_keeps_the_providers_last_report_sharing_the_cached_status() -> None:
    """What the last report and the cached status have alike (container statuses, IPs) is one copy."""
    from nodekit import make_agent, pod_manifest, wait_for

    from podstatus.clients.embedded import EmbeddedClient
    from podstatus.server.http import EmbeddedApiServer

    with EmbeddedApiServer() as srv:
        client = EmbeddedClient(srv)
        agent = make_agent(client, SimulatedProvider(timings=ZERO), "vn-1")
        agent.start()
        try:
            pod = client.create_pod(pod_manifest("web"), "default")
            cached = wait_for(
                lambda: (
                    (s := agent.manager.get_pod_status(pod.uid)) is not None and s.phase == "Running" and s
                ),
                what="the pod running",
            )
            report = agent.pod_states()[pod.uid].last_report
            assert report is not None and report.container_statuses is not None
            assert report.container_statuses is cached.container_statuses
            assert report.pod_ips is cached.pod_ips
            assert report.conditions is None  # the provider's own report: no conditions of the agent's
        finally:
            agent.stop()
