"""Helpers of the simulated provider's capability tests: pods, providers, waiting."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from podstatus.node import SimulatedProvider, Timings
from podstatus.types import Pod, PodStatus

ZERO = Timings(
    image_pull=(0.0, 0.0),
    init_run=(0.0, 0.0),
    startup=(0.0, 0.0),
    readiness=(0.0, 0.0),
    job_run=(0.0, 0.0),
    crash_run=(0.0, 0.0),
    crash_backoff=0.0,
    crash_backoff_max=0.0,
    stop=(0.0, 0.0),
)


class Recorder:
    def __init__(self) -> None:
        self.statuses: list[PodStatus] = []

    def pod_status(self, pod_uid: str, status: PodStatus) -> None:
        self.statuses.append(status)

    def event(
        self, pod_uid: str, type: str, reason: str, message: str, field_path: str | None = None
    ) -> None:
        return None


def pod(
    name: str,
    behaviour: str = "serve",
    *,
    restart: str = "Always",
    ports: list[int] | None = None,
    env: list[dict[str, Any]] | None = None,
    resources: dict[str, Any] | None = None,
) -> Pod:
    app: dict[str, Any] = {"name": "app", "image": "nginx:1.27"}
    if ports:
        app["ports"] = [{"containerPort": p} for p in ports]
    if env:
        app["env"] = env
    if resources:
        app["resources"] = resources
    return Pod.from_dict(
        {
            "metadata": {
                "name": name,
                "namespace": "default",
                "uid": f"uid-{name}",
                "annotations": {"podstatus.io/behaviour": behaviour},
            },
            "spec": {"restartPolicy": restart, "containers": [app]},
        }
    )


def provider(timings: Timings = ZERO, **kwargs: Any) -> SimulatedProvider:
    p = SimulatedProvider(timings=timings, node_name="vn-1", **kwargs)
    p.notify_pods(Recorder())
    return p


def wait_for(check: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.02)
