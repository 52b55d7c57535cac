"""The resize conditions the manager owns (v1.37: PodResizePending, PodResizeInProgress)."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import replace

from ..conditions import (
    POD_REASON_DEFERRED,
    POD_REASON_INFEASIBLE,
    POD_RESIZE_IN_PROGRESS,
    POD_RESIZE_PENDING,
)
from ..types import Pod, PodCondition
from .state import (
    ManagerState,
    _log,
    _ResizeConditions,
)


class ResizeConditions(ManagerState):
    """podResizeConditions of the kubelet's status manager: cached per pod, never synced on their own."""

    def get_pod_resize_conditions(self, pod_uid: str) -> list[PodCondition]:
        """The pod's cached resize conditions: ``PodResizePending``, then ``PodResizeInProgress``, when set."""
        with self._lock:
            held = self._resize.get(pod_uid)
            return held.as_list() if held is not None else []

    def set_pod_resize_pending_condition(
        self, pod_uid: str, reason: str, message: str = "", observed_generation: int = 0
    ) -> bool:
        """Cache ``PodResizePending`` (SetPodResizePendingCondition).

        Any reason but ``Infeasible`` is ``Deferred``. True when the condition
        is new or its reason or observedGeneration changed.
        """
        if reason != POD_REASON_INFEASIBLE:
            reason = POD_REASON_DEFERRED
        with self._lock:
            held = self._resize.get(pod_uid) or _ResizeConditions()
            previous = held.pending
            self._resize[pod_uid] = replace(
                held,
                pending=self._resize_condition(
                    POD_RESIZE_PENDING, previous, reason, message, observed_generation
                ),
            )
        if previous is None:
            return True
        return (previous.reason or "") != reason or (previous.observed_generation or 0) != observed_generation

    def set_pod_resize_in_progress_condition(
        self, pod_uid: str, reason: str = "", message: str = "", observed_generation: int = 0
    ) -> tuple[int, bool]:
        """Cache ``PodResizeInProgress`` (SetPodResizeInProgressCondition).

        An existing condition keeps its observedGeneration (clear it first to
        change that), and its reason and message when both given are empty.
        Returns the condition's observedGeneration and whether it changed
        (times aside).
        """
        with self._lock:
            held = self._resize.get(pod_uid) or _ResizeConditions()
            previous = held.in_progress
            if previous is not None:
                if not reason and not message:
                    reason, message = previous.reason or "", previous.message or ""
                observed_generation = previous.observed_generation or 0
            condition = self._resize_condition(
                POD_RESIZE_IN_PROGRESS, previous, reason, message, observed_generation
            )
            self._resize[pod_uid] = replace(held, in_progress=condition)
        if previous is None:
            return observed_generation, True
        same = previous.replace(last_probe_time=None, last_transition_time=None) == condition.replace(
            last_probe_time=None, last_transition_time=None
        )
        return observed_generation, not same

    def clear_pod_resize_pending_condition(self, pod_uid: str, resolution: str = "") -> None:
        """Drop ``PodResizePending`` (ClearPodResizePendingCondition); ``resolution`` is logged."""
        with self._lock:
            held = self._resize.get(pod_uid)
            if held is None or held.pending is None:
                return
            self._resize[pod_uid] = replace(held, pending=None)
        _log(logging.DEBUG, "Pod resize no longer pending", podUID=pod_uid, resolution=resolution)

    def clear_pod_resize_in_progress_condition(self, pod_uid: str) -> tuple[int, bool]:
        """Drop ``PodResizeInProgress``; its observedGeneration and True, or (0, False) when there was none."""
        with self._lock:
            held = self._resize.get(pod_uid)
            if held is None or held.in_progress is None:
                return 0, False
            self._resize[pod_uid] = replace(held, in_progress=None)
            return held.in_progress.observed_generation or 0, True

    def is_pod_resize_deferred(self, pod_uid: str) -> bool:
        with self._lock:
            held = self._resize.get(pod_uid)
            return (
                held is not None and held.pending is not None and held.pending.reason == POD_REASON_DEFERRED
            )

    def is_pod_resize_infeasible(self, pod_uid: str) -> bool:
        with self._lock:
            held = self._resize.get(pod_uid)
            return (
                held is not None and held.pending is not None and held.pending.reason == POD_REASON_INFEASIBLE
            )

    def backfill_pod_resize_conditions(self, pods: Iterable[Pod]) -> None:
        """Take the resize conditions the pods' statuses carry into the cache (BackfillPodResizeConditions).

        A node agent that restarts calls it with the pods it finds, so a resize
        in progress or pending is neither lost nor written anew. The times start afresh.
        """
        with self._lock:
            for pod in pods:
                for c in pod.status.conditions or ():
                    if c.type not in (POD_RESIZE_PENDING, POD_RESIZE_IN_PROGRESS):
                        continue
                    condition = self._resize_condition(
                        c.type, None, c.reason or "", c.message or "", c.observed_generation or 0
                    )
                    held = self._resize.get(pod.uid) or _ResizeConditions()
                    if c.type == POD_RESIZE_PENDING:
                        self._resize[pod.uid] = replace(held, pending=condition)
                    else:
                        self._resize[pod.uid] = replace(held, in_progress=condition)

    def _resize_condition(
        self,
        condition_type: str,
        old: PodCondition | None,
        reason: str,
        message: str,
        observed_generation: int,
    ) -> PodCondition:
        # updatedPodResizeCondition: probed now; the transition time moves with the reason.
        now = self._now()
        moved = old is None or (old.reason or "") != reason
        return PodCondition(
            type=condition_type,
            status="True",
            observed_generation=observed_generation or None,
            last_probe_time=now,
            last_transition_time=now if moved or old is None else old.last_transition_time,
            reason=reason or None,
            message=message or None,
        )
