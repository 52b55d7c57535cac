"""What a DELETE does, decided apart from doing it (kube-apiserver's rest.BeforeDelete and the
generic store's graceful deletion): preconditions, finalizers, grace periods that may only
shorten. Pure functions over the current object's wire dict; the store carries the plan out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .errors import delete_conflict
from .meta import parse_rfc3339
from .strategy import Strategy

__all__ = ["KEEP", "MARK", "REMOVE", "DeletePlan", "check_preconditions", "plan_delete"]

KEEP = "keep"  # nothing changes (already going at least as fast, or finalizers hold it)
MARK = "mark"  # write deletionTimestamp and deletionGracePeriodSeconds
REMOVE = "remove"  # gone now


@dataclass(frozen=True, slots=True)
class DeletePlan:
    """``action``; for MARK the grace ``period``, its ``deadline`` (None: now + period), whether
    the generation goes up, and whether the object then goes at once (grace 0, no finalizers)."""

    action: str
    period: int = 0
    deadline: float | None = None
    bump_generation: bool = False
    then_remove: bool = False


def check_preconditions(kind: str, name: str, meta: dict[str, Any], uid: str | None, rv: str | None) -> None:
    """The UID and resourceVersion preconditions of DeleteOptions: 409 Conflict when they miss."""
    if uid is not None and uid != meta.get("uid"):
        raise delete_conflict(
            kind, name, f"the UID in the precondition ({uid}) does not match the UID in record "
            f"({meta.get('uid')}). The object might have been deleted and then recreated",
        )  # fmt: skip
    if rv is not None and rv != meta.get("resourceVersion"):
        raise delete_conflict(
            kind, name, f"the ResourceVersion in the precondition ({rv}) does not "
            f"match the ResourceVersion in record ({meta.get('resourceVersion')}). "
            "The object might have been modified",
        )  # fmt: skip


def plan_delete(strategy: Strategy, obj: dict[str, Any], requested: int | None) -> DeletePlan:
    """What deleting ``obj`` with ``gracePeriodSeconds`` ``requested`` (None: not given) does."""
    meta = obj["metadata"]
    finalizers = bool(meta.get("finalizers"))
    if not strategy.graceful:
        if not finalizers:
            return DeletePlan(REMOVE)
        # Finalizers hold it: it is marked (once) and goes when the last one is removed.
        return DeletePlan(KEEP) if meta.get("deletionTimestamp") else DeletePlan(MARK)
    if requested is not None and requested < 0:
        requested = 1
    if meta.get("deletionTimestamp"):
        old_period = meta.get("deletionGracePeriodSeconds")
        if not old_period:
            # Already going with grace 0 (or none): only finalizers keep it.
            return DeletePlan(KEEP) if finalizers else DeletePlan(REMOVE)
        if requested is None or requested >= old_period:
            return DeletePlan(KEEP)  # a second delete may only shorten the grace period
        deadline = parse_rfc3339(meta["deletionTimestamp"]) - old_period + requested
        return DeletePlan(MARK, requested, deadline, then_remove=requested == 0 and not finalizers)
    period = strategy.grace_period(obj, requested)
    return DeletePlan(MARK, period, bump_generation=True, then_remove=period == 0 and not finalizers)
