"""A fake status manager, beside its protocol (the kubelet's ``fake_status_manager.go``).

A node agent is handed a :class:`~podstatus.protocols.StatusManager`; a test
of the agent hands it :class:`FakeStatusManager` instead and asserts what the
agent asked (STYLE 10: test the requests, not only the result), without a
sync loop or a server. It keeps no versions and sends nothing: it records
every call, and answers ``get_pod_status`` with the last status set.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Collection, Iterable
from datetime import UTC, datetime
from typing import Any

from .conditions import (
    POD_REASON_DEFERRED,
    POD_REASON_INFEASIBLE,
    POD_RESIZE_IN_PROGRESS,
    POD_RESIZE_PENDING,
)
from .podmanager import is_static_pod
from .protocols import StatusAcceptance
from .statusutil import terminated_status
from .types import ContainerID, Pod, PodCondition, PodStatus
from .validation import check_container_state_transition

__all__ = ["Call", "FakeStatusManager"]

log = logging.getLogger(__name__)

# (method name, positional arguments), e.g. ("set_pod_status", (pod, status)).
Call = tuple[str, tuple[Any, ...]]


class FakeStatusManager:
    """A :class:`~podstatus.protocols.StatusManager` that records calls and keeps the statuses set.

    - ``set_pod_status`` keeps the status under the pod's UID; ``get_pod_status``
      answers it (None when none was set). A status whose containers make an
      impossible transition from the kept one (or the pod's) is refused, as the
      real manager refuses it (SPEC 4.2); ``accept_pod_status`` answers what
      became of it (the kept status, whether it changed, why it was refused).
      ``terminate_pod`` keeps the terminated status the real manager would build
      from it.
    - ``set_container_readiness`` / ``set_container_startup`` change the kept
      container status with that ID (nothing when there is none).
    - ``remove_orphaned_statuses`` forgets every pod not named.
    - Statuses set since the last ``sync_batch`` are pending; ``sync_batch``
      "syncs" them (returns how many) and ``pending_count`` counts them.
    - The resize conditions are kept per pod as the real manager keeps them
      (any pending reason but ``Infeasible`` is ``Deferred``).

    Every call is recorded in :attr:`calls` in order; thread-safe.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.calls: list[Call] = []
        self.statuses: dict[str, PodStatus] = {}
        self.started = False
        self._pending: set[str] = set()
        self._resize: dict[str, dict[str, PodCondition]] = {}

    # -- what was asked ----------------------------------------------------------------

    def methods(self) -> list[str]:
        """The names of the methods called, in order."""
        with self._lock:
            return [name for name, _ in self.calls]

    def calls_of(self, method: str) -> list[tuple[Any, ...]]:
        """The arguments of every call of one method, in order."""
        with self._lock:
            return [args for name, args in self.calls if name == method]

    def clear_calls(self) -> None:
        with self._lock:
            self.calls.clear()

    def _record(self, method: str, *args: Any) -> None:
        # Caller holds the lock.
        self.calls.append((method, args))

    # -- lifecycle -----------------------------------------------------------------------

    def start(self) -> None:
        with self._lock:
            self._record("start")
            self.started = True

    def stop(self, timeout: float | None = None) -> None:
        with self._lock:
            self._record("stop", timeout)
            self.started = False

    # -- statuses ------------------------------------------------------------------------

    def get_pod_status(self, uid: str) -> PodStatus | None:
        with self._lock:
            self._record("get_pod_status", uid)
            return self.statuses.get(uid)

    def set_pod_status(self, pod: Pod, status: PodStatus) -> None:
        with self._lock:
            self._record("set_pod_status", pod, status)
            self._accept(pod, status)

    def accept_pod_status(self, pod: Pod, status: PodStatus) -> StatusAcceptance:
        with self._lock:
            self._record("accept_pod_status", pod, status)
            return self._accept(pod, status)

    def _accept(self, pod: Pod, status: PodStatus) -> StatusAcceptance:
        # Caller holds the lock.
        kept = self.statuses.get(pod.uid)
        problem = check_container_state_transition(kept if kept is not None else pod.status, status, pod.spec)
        if problem is not None:
            fields = {"pod": pod.key(), "podUID": pod.uid}
            log.error("Status update on pod aborted: %s", problem, extra={"podstatus": fields})
            return StatusAcceptance(kept, False, problem)
        return StatusAcceptance(status, self._keep(pod.uid, status))

    def terminate_pod(self, pod: Pod) -> None:
        with self._lock:
            self._record("terminate_pod", pod)
            base = self.statuses.get(pod.uid, pod.status)
            self._keep(pod.uid, terminated_status(pod, base, is_static=is_static_pod(pod)))

    def set_container_readiness(self, pod_uid: str, container_id: str | ContainerID, ready: bool) -> None:
        with self._lock:
            self._record("set_container_readiness", pod_uid, container_id, ready)
            self._set_container(pod_uid, str(container_id), ready=ready)

    def set_container_startup(self, pod_uid: str, container_id: str | ContainerID, started: bool) -> None:
        with self._lock:
            self._record("set_container_startup", pod_uid, container_id, started)
            self._set_container(pod_uid, str(container_id), started=started)

    def remove_orphaned_statuses(self, pod_uids: Collection[str] | Iterable[str]) -> None:
        keep = set(pod_uids)
        with self._lock:
            self._record("remove_orphaned_statuses", frozenset(keep))
            for uid in [u for u in self.statuses if u not in keep]:
                del self.statuses[uid]
                self._pending.discard(uid)
                self._resize.pop(uid, None)

    def sync_batch(self, all: bool = False) -> int:
        with self._lock:
            self._record("sync_batch", all)
            synced = len(self.statuses) if all else len(self._pending)
            self._pending.clear()
            return synced

    def pending_count(self) -> int:
        with self._lock:
            self._record("pending_count")
            return len(self._pending)

    def _keep(self, uid: str, status: PodStatus) -> bool:
        if self.statuses.get(uid) == status:
            return False
        self.statuses[uid] = status
        self._pending.add(uid)
        return True

    def _set_container(self, uid: str, cid: str, **change: bool) -> None:
        status = self.statuses.get(uid)
        if status is None:
            return
        for field in ("init_container_statuses", "container_statuses", "ephemeral_container_statuses"):
            items = list(getattr(status, field) or ())
            for i, cs in enumerate(items):
                if cs.container_id == cid:
                    items[i] = cs.replace(**change)
                    self._keep(uid, status.replace(**{field: tuple(items)}))
                    return

    # -- resize conditions ---------------------------------------------------------------

    def get_pod_resize_conditions(self, pod_uid: str) -> list[PodCondition]:
        with self._lock:
            self._record("get_pod_resize_conditions", pod_uid)
            held = self._resize.get(pod_uid, {})
            return [held[t] for t in (POD_RESIZE_PENDING, POD_RESIZE_IN_PROGRESS) if t in held]

    def set_pod_resize_pending_condition(
        self, pod_uid: str, reason: str, message: str = "", observed_generation: int = 0
    ) -> bool:
        if reason != POD_REASON_INFEASIBLE:
            reason = POD_REASON_DEFERRED
        with self._lock:
            self._record("set_pod_resize_pending_condition", pod_uid, reason, message, observed_generation)
            held = self._resize.setdefault(pod_uid, {})
            previous = held.get(POD_RESIZE_PENDING)
            held[POD_RESIZE_PENDING] = _condition(POD_RESIZE_PENDING, reason, message, observed_generation)
        if previous is None:
            return True
        return (previous.reason or "") != reason or (previous.observed_generation or 0) != observed_generation

    def set_pod_resize_in_progress_condition(
        self, pod_uid: str, reason: str = "", message: str = "", observed_generation: int = 0
    ) -> tuple[int, bool]:
        with self._lock:
            self._record(
                "set_pod_resize_in_progress_condition", pod_uid, reason, message, observed_generation
            )
            held = self._resize.setdefault(pod_uid, {})
            previous = held.get(POD_RESIZE_IN_PROGRESS)
            if previous is not None:
                if not reason and not message:
                    reason, message = previous.reason or "", previous.message or ""
                observed_generation = previous.observed_generation or 0
            condition = _condition(POD_RESIZE_IN_PROGRESS, reason, message, observed_generation)
            held[POD_RESIZE_IN_PROGRESS] = condition
        if previous is None:
            return observed_generation, True
        return observed_generation, (previous.reason, previous.message) != (
            condition.reason,
            condition.message,
        )

    def clear_pod_resize_pending_condition(self, pod_uid: str, resolution: str = "") -> None:
        with self._lock:
            self._record("clear_pod_resize_pending_condition", pod_uid, resolution)
            self._resize.get(pod_uid, {}).pop(POD_RESIZE_PENDING, None)

    def clear_pod_resize_in_progress_condition(self, pod_uid: str) -> tuple[int, bool]:
        with self._lock:
            self._record("clear_pod_resize_in_progress_condition", pod_uid)
            previous = self._resize.get(pod_uid, {}).pop(POD_RESIZE_IN_PROGRESS, None)
            if previous is None:
                return 0, False
            return previous.observed_generation or 0, True

    def is_pod_resize_deferred(self, pod_uid: str) -> bool:
        return self._pending_reason("is_pod_resize_deferred", pod_uid) == POD_REASON_DEFERRED

    def is_pod_resize_infeasible(self, pod_uid: str) -> bool:
        return self._pending_reason("is_pod_resize_infeasible", pod_uid) == POD_REASON_INFEASIBLE

    def _pending_reason(self, method: str, pod_uid: str) -> str | None:
        with self._lock:
            self._record(method, pod_uid)
            pending = self._resize.get(pod_uid, {}).get(POD_RESIZE_PENDING)
            return pending.reason if pending is not None else None

    def backfill_pod_resize_conditions(self, pods: Iterable[Pod]) -> None:
        pods = list(pods)
        with self._lock:
            self._record("backfill_pod_resize_conditions", tuple(pods))
            for pod in pods:
                for c in pod.status.conditions or ():
                    if c.type in (POD_RESIZE_PENDING, POD_RESIZE_IN_PROGRESS):
                        self._resize.setdefault(pod.uid, {})[c.type] = _condition(
                            c.type, c.reason or "", c.message or "", c.observed_generation or 0
                        )


def _condition(condition_type: str, reason: str, message: str, observed_generation: int) -> PodCondition:
    now = datetime.now(UTC).replace(microsecond=0)
    return PodCondition(
        type=condition_type,
        status="True",
        observed_generation=observed_generation or None,
        last_probe_time=now,
        last_transition_time=now,
        reason=reason or None,
        message=message or None,
    )
