"""May a pod be deleted from the API server yet? (SPEC 2.4 ``pod_deletion_safety``)

The kubelet asks its pod workers, volume manager and cgroup manager; a node
agent written with this library knows its own runtime. Three providers:

- :class:`~podstatus.protocols.PodDeletionSafety`, the protocol the status manager is given
  (declared with the others);
- :class:`FakePodDeletionSafety`, a configurable fake for tests (it records calls);
- :class:`StatusBasedDeletionSafety`, a real provider for agents that have no
  better source of truth: it judges from container statuses alone.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable

from .types import ContainerStatus, Pod, PodStatus

__all__ = [
    "FakePodDeletionSafety",
    "StatusBasedDeletionSafety",
]

log = logging.getLogger(__name__)


class FakePodDeletionSafety:
    """A :class:`~podstatus.protocols.PodDeletionSafety` whose answers tests set (the kubelet's fake provider).

    The defaults, resources reclaimed and nothing running, let the status
    manager delete pods as soon as the other conditions hold. Answers can be
    set per pod UID; every call is recorded in :attr:`calls` as
    ``(method name, pod UID)``.
    """

    def __init__(self, reclaimed: bool = True, could_have_running_containers: bool = False) -> None:
        self._lock = threading.Lock()
        self.reclaimed = reclaimed
        self.could_have_running_containers = could_have_running_containers
        self.reclaimed_by_uid: dict[str, bool] = {}
        self.running_by_uid: dict[str, bool] = {}
        self.calls: list[tuple[str, str]] = []

    def set_reclaimed(self, uid: str, reclaimed: bool | None) -> None:
        """Override the answer for one pod; ``None`` goes back to the default."""
        with self._lock:
            if reclaimed is None:
                self.reclaimed_by_uid.pop(uid, None)
            else:
                self.reclaimed_by_uid[uid] = reclaimed

    def set_could_have_running_containers(self, uid: str, running: bool | None) -> None:
        """Override the answer for one pod; ``None`` goes back to the default."""
        with self._lock:
            if running is None:
                self.running_by_uid.pop(uid, None)
            else:
                self.running_by_uid[uid] = running

    def pod_resources_are_reclaimed(self, pod: Pod, status: PodStatus) -> bool:
        with self._lock:
            self.calls.append(("pod_resources_are_reclaimed", pod.uid))
            return self.reclaimed_by_uid.get(pod.uid, self.reclaimed)

    def pod_could_have_running_containers(self, pod: Pod) -> bool:
        with self._lock:
            self.calls.append(("pod_could_have_running_containers", pod.uid))
            return self.running_by_uid.get(pod.uid, self.could_have_running_containers)

    def calls_for(self, uid: str) -> list[str]:
        """The methods called for one pod, in order."""
        with self._lock:
            return [method for method, called_uid in self.calls if called_uid == uid]

    def reset_calls(self) -> None:
        with self._lock:
            self.calls.clear()


def _all_statuses(status: PodStatus) -> Iterable[ContainerStatus]:
    yield from status.init_container_statuses or ()
    yield from status.container_statuses or ()
    yield from status.ephemeral_container_statuses or ()


def _is_done(status: ContainerStatus) -> bool:
    state = status.state
    if state.terminated is not None:
        return True
    # Waiting without a container ID: never created, so nothing to reclaim. Waiting with
    # one (a crash loop's back-off) means a container exists and may start again.
    return state.running is None and not status.container_id


class StatusBasedDeletionSafety:
    """A :class:`~podstatus.protocols.PodDeletionSafety` that judges from container statuses.

    - A pod *could have running containers* while any container status (init,
      regular or ephemeral) of its current status is running. The current
      status comes from ``status_provider(pod.uid)`` when given (for example
      the status manager's ``get_pod_status``, which has the node's latest
      word and translates mirror pod UIDs), else from ``pod.status``.
    - Its resources *are reclaimed* when it could not have running containers
      and every container status of the status being judged is terminated or
      was never started (waiting without a container ID).

    Agents that hold volumes, cgroups or devices beyond containers should
    write their own provider; this one only knows about containers.
    """

    def __init__(self, status_provider: Callable[[str], PodStatus | None] | None = None) -> None:
        self._status_provider = status_provider

    def _current_status(self, pod: Pod) -> PodStatus:
        if self._status_provider is not None:
            status = self._status_provider(pod.uid)
            if status is not None:
                return status
        return pod.status

    def pod_could_have_running_containers(self, pod: Pod) -> bool:
        status = self._current_status(pod)
        return any(s.state.running is not None for s in _all_statuses(status))

    def pod_resources_are_reclaimed(self, pod: Pod, status: PodStatus) -> bool:
        if self.pod_could_have_running_containers(pod):
            log.debug("pod %s is terminated, but some containers are still running", pod.key())
            return False
        pending = [s.name for s in _all_statuses(status) if not _is_done(s)]
        if pending:
            log.debug("pod %s: containers %s have not terminated", pod.key(), pending)
            return False
        return True
