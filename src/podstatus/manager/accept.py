"""Accepting a status (SPEC 4.2, 4.3): the setters, the cache, notifiers and volume health."""

from __future__ import annotations

import logging
import time
from collections.abc import Collection, Iterable
from datetime import UTC
from typing import Any

from ..conditions import (
    CONTAINERS_READY,
    POD_READY,
    calculate_pod_status_observed_generation,
    generate_containers_ready_condition,
    generate_pod_ready_condition,
    is_terminal_phase,
)
from ..errors import InvalidObjectError
from ..podmanager import is_static_pod
from ..protocols import PodUpdateNotifier, StatusAcceptance
from ..sharing import compact_status, share_equal_parts
from ..statusutil import (
    find_container_status,
    get_condition,
    is_pod_status_by_kubelet_equal,
    normalize_status,
    normalize_time,
    replace_or_append_condition,
    terminated_status,
    update_last_transition_times,
    with_container_status,
)
from ..types import ContainerID, ContainerStatus, Pod, PodStatus
from ..validation import check_container_state_transition, validate_status
from .state import (
    ManagerState,
    SetPodStatusResult,
    _Entry,
    _fields,
    _log,
    _Note,
    log,
)


def volume_health_condition_sets_equal(a: Iterable[Any] | None, b: Iterable[Any] | None) -> bool:
    """Whether two lists of volume health conditions hold the same (status, reason) pairs.

    volumeutil.VolumeHealthConditionSetsEqual: messages and order do not count.
    Conditions are the wire dicts (``{"status": ..., "reason": ..., "message": ...}``).
    """

    def pairs(conditions: Iterable[Any] | None) -> set[tuple[Any, Any]]:
        return {(c.get("status") or "", c.get("reason") or "") for c in conditions or ()}

    return pairs(a) == pairs(b)


def _check_volume_health_conditions(conditions: Any) -> list[dict[str, Any]]:
    if not isinstance(conditions, list | tuple):
        raise InvalidObjectError(
            f"invalid volume health at healthConditions: expected a list, got {type(conditions).__name__}",
            path="healthConditions",
        )
    out: list[dict[str, Any]] = []
    for i, c in enumerate(conditions):
        path = f"healthConditions[{i}]"
        if not isinstance(c, dict):
            raise InvalidObjectError(f"invalid volume health at {path}: expected an object", path=path)
        for key in ("status", "reason"):
            if not isinstance(c.get(key), str) or not c.get(key):
                raise InvalidObjectError(
                    f"invalid volume health at {path}.{key}: Required value", path=f"{path}.{key}"
                )
        if c.get("message") is not None and not isinstance(c.get("message"), str):
            raise InvalidObjectError(
                f"invalid volume health at {path}.message: expected a string", path=f"{path}.message"
            )
        out.append({k: v for k, v in c.items() if v is not None})
    return out


class StatusAccepting(ManagerState):
    """The setters: each validates, normalises and versions a status, then marks it owed."""

    # -- setters -----------------------------------------------------------------------

    def set_pod_status(self, pod: Pod, status: PodStatus) -> None:
        self._set_pod_status(pod, status, None)

    def set_pod_status_result(self, pod: Pod, status: PodStatus) -> SetPodStatusResult:
        """:meth:`set_pod_status`, answering what upstream's SetPodStatus returns.

        The status now cached for the pod (None when there is none: the change
        was refused and nothing was cached before) and whether this call
        changed it.
        """
        accepted = self.accept_pod_status(pod, status)
        return SetPodStatusResult(accepted.status, accepted.changed)

    def accept_pod_status(self, pod: Pod, status: PodStatus) -> StatusAcceptance:
        """:meth:`set_pod_status`, answering the status now cached, whether it changed, and why
        it was refused (None: it was not).

        The node's pod controller sets a provider's report with it: the manager's check of
        the container state transitions is then the only one on a report's path.
        """
        answers: list[StatusAcceptance] = []
        self._set_pod_status(pod, status, answers)
        return answers[0]

    def _set_pod_status(self, pod: Pod, status: PodStatus, answers: list[StatusAcceptance] | None) -> None:
        """The one path of every status set (``answers``: where to put what became of it)."""
        # The kubelet reports which generation of the pod it has seen (KEP-5067).
        generation = calculate_pod_status_observed_generation(pod)
        if type(status) is PodStatus and status.observed_generation != generation:
            status = status.replace(observed_generation=generation)
        notes: list[_Note] | None = [] if self._notifiers else None
        refusals: list[str] | None = None if answers is None else []
        # A pod being deleted must get its final status out, even if it looks unchanged.
        force = pod.metadata.deletion_timestamp is not None
        with self._lock:
            changed = self._update_status(
                pod, status, force, pod_is_finished=False, notes=notes, refusals=refusals
            )
            if answers is not None:
                entry = self._statuses.get(pod.uid)
                cached = entry.status if entry is not None else None
                answers.append(StatusAcceptance(cached, changed, refusals[0] if refusals else None))
        if notes:
            self._send_notes(notes)

    def set_container_readiness(self, pod_uid: str, container_id: str | ContainerID, ready: bool) -> None:
        notes: list[_Note] | None = [] if self._notifiers else None
        with self._lock:
            self._set_container_readiness(pod_uid, container_id, ready, notes)
        self._send_notes(notes)

    def _set_container_readiness(
        self, pod_uid: str, container_id: str | ContainerID, ready: bool, notes: list[_Note] | None
    ) -> None:
        found = self._locate_container(pod_uid, str(container_id), "readiness")
        if found is None:
            return
        pod, entry, where, cs = found
        if cs.ready == ready:
            _log(logging.DEBUG, "Container readiness unchanged", **_fields(pod.key(), pod.uid, ready=ready))
            return
        status = with_container_status(entry.status, where, cs.replace(ready=ready))
        every = [*(status.init_container_statuses or ()), *(status.container_statuses or ())]
        phase = status.phase or ""
        conditions = status.conditions or ()
        old = entry.status
        conditions = _update_condition(
            conditions,
            generate_pod_ready_condition(pod.spec, conditions, every, phase, pod=pod, old_status=old),
        )
        conditions = _update_condition(
            conditions,
            generate_containers_ready_condition(pod.spec, every, phase, pod=pod, old_status=old),
        )
        self._update_status(
            pod, status.replace(conditions=conditions), False, pod_is_finished=False, notes=notes
        )

    def set_container_startup(self, pod_uid: str, container_id: str | ContainerID, started: bool) -> None:
        notes: list[_Note] | None = [] if self._notifiers else None
        with self._lock:
            self._set_container_startup(pod_uid, container_id, started, notes)
        self._send_notes(notes)

    def _set_container_startup(
        self, pod_uid: str, container_id: str | ContainerID, started: bool, notes: list[_Note] | None
    ) -> None:
        found = self._locate_container(pod_uid, str(container_id), "startup")
        if found is None:
            return
        pod, entry, where, cs = found
        # An unset ``started`` differs from both True and False.
        if cs.started is not None and cs.started == started:
            _log(logging.DEBUG, "Container startup unchanged", **_fields(pod.key(), pod.uid))
            return
        status = with_container_status(entry.status, where, cs.replace(started=started))
        self._update_status(pod, status, False, pod_is_finished=False, notes=notes)

    def _locate_container(
        self, pod_uid: str, cid: str, what: str
    ) -> tuple[Pod, _Entry, tuple[str, int], ContainerStatus] | None:
        """The guards shared by the container setters (SPEC 4.3); None (logged) when one fails."""
        pod = self._pods.get_pod_by_uid(pod_uid)
        if pod is None:
            _log(logging.DEBUG, f"Pod has been deleted, no need to update {what}", podUID=pod_uid)
            return None
        entry = self._statuses.get(pod.uid)
        if entry is None:
            _log(
                logging.WARNING,
                f"Container {what} changed before pod has synced",
                **_fields(pod.key(), pod.uid, containerID=cid),
            )
            return None
        where = find_container_status(entry.status, cid)
        if where is None:
            _log(
                logging.WARNING,
                f"Container {what} changed for unknown container",
                **_fields(pod.key(), pod.uid, entry.version, containerID=cid),
            )
            return None
        return pod, entry, where, getattr(entry.status, where[0])[where[1]]

    def terminate_pod(self, pod: Pod) -> None:
        notes: list[_Note] | None = [] if self._notifiers else None
        with self._lock:
            entry = self._statuses.get(pod.uid)
            base = entry.status if entry is not None else pod.status
            if not is_static_pod(pod) and entry is not None and base.phase == "Running":
                _log(
                    logging.INFO,
                    "Terminal running pod should have already been marked as failed",
                    **_fields(pod.key(), pod.uid),
                )
            status = terminated_status(pod, base, is_static=is_static_pod(pod))
            self._update_status(pod, status, True, pod_is_finished=True, notes=notes)
        self._send_notes(notes)

    def remove_orphaned_statuses(self, pod_uids: Collection[str] | Iterable[str]) -> None:
        keep: Collection[str] = pod_uids if isinstance(pod_uids, set | frozenset | dict) else set(pod_uids)
        with self._lock:
            for uid in [u for u in self._statuses if u not in keep]:
                entry = self._statuses.pop(uid)
                self._sync_state.pop(uid, None)
                self._dirty.pop(uid, None)
                self._consistent.pop(uid, None)
                self._resize.pop(uid, None)
                _log(
                    logging.DEBUG,
                    "Removing pod from status map",
                    **_fields(f"{entry.namespace}/{entry.name}", uid, entry.version),
                )

    # -- accepting a status (SPEC 4.2) -------------------------------------------------

    def _update_status(
        self,
        pod: Pod,
        status: PodStatus,
        force: bool,
        *,
        pod_is_finished: bool,
        notes: list[_Note] | None = None,
        refusals: list[str] | None = None,
    ) -> bool:
        """Accept ``status`` for ``pod`` (SPEC 4.2); True when the cached status changed.

        A refused transition is logged, and its reason appended to ``refusals`` when given.
        """
        uid = pod.uid
        entry = self._statuses.get(uid)
        if entry is not None and not force and (status is entry.status or status == entry.status):
            # Equal to what we hold (which is valid and normal): nothing can differ.
            if log.isEnabledFor(logging.DEBUG):
                _log(logging.DEBUG, "Ignoring same status for pod", **_fields(pod.key(), uid, entry.version))
            return False
        # Parts shared with the cached status (built with replace) were checked and normalised then.
        known = entry.status if entry is not None else None
        if known is not None:
            # A status rebuilt from scratch: take the cached parts it equals (valid and normal).
            status = share_equal_parts(status, known)
        validate_status(status, known)
        if known is not None:
            old = known
        else:
            mirror = self._pods.get_mirror_pod_by_pod(pod) if is_static_pod(pod) else None
            old = mirror.status if mirror is not None else pod.status
        spec = pod.spec
        status = normalize_status(spec, status, known)

        problem = check_container_state_transition(old, status, spec)
        if problem is not None:
            _log(logging.ERROR, "Status update on pod aborted: " + problem, **_fields(pod.key(), uid))
            if refusals is not None:
                refusals.append(problem)
            return False

        if is_terminal_phase(old.phase) and not is_terminal_phase(status.phase):
            _log(
                logging.ERROR,
                "Refusing to move pod out of a terminal phase",
                **_fields(pod.key(), uid, oldPhase=old.phase, newPhase=status.phase),
            )
            status = status.replace(phase=old.phase, reason=old.reason, message=old.message)

        now = self._now()
        status = update_last_transition_times(old, status, now)
        start = old.start_time
        if start is not None:
            # Normalised after it is copied: the old status may be a pod object's, with
            # sub-second times the server would cut (upstream normalises after copying).
            if start.microsecond or start.tzinfo is not UTC:
                start = normalize_time(start)
        elif status.start_time is not None:
            start = status.start_time
        else:
            start = now
        if start != status.start_time:
            status = status.replace(start_time=start)
        # Volume health is set on its own (set_pod_volume_health): a status without it keeps it.
        if old.volume_health and not status.volume_health:
            status = status.replace(volume_health=old.volume_health)
        # Never report an older generation than the one reported (no needless patches).
        old_generation = old.observed_generation
        if old_generation is not None and old_generation > (status.observed_generation or 0):
            status = status.replace(observed_generation=old_generation)

        if entry is not None and not force and is_pod_status_by_kubelet_equal(entry.status, status):
            if log.isEnabledFor(logging.DEBUG):
                _log(logging.DEBUG, "Ignoring same status for pod", **_fields(pod.key(), uid, entry.version))
            return False

        if entry is not None:
            version = entry.version + 1
            changed_at = entry.changed_at if entry.changed_at is not None else time.monotonic()
            urgent = entry.urgent or _is_urgent(old, status)
            pod_is_finished = pod_is_finished or entry.pod_is_finished
        else:
            version = 1
            changed_at = time.monotonic()
            urgent = _is_urgent(old, status)
        # Held once, whatever many cached statuses have in common (SPEC 2.1: equal values, read-only).
        status = compact_status(status, known, self._pool)
        self._statuses[uid] = _Entry(
            version=version,
            namespace=pod.namespace,
            name=pod.name,
            status=status,
            changed_at=changed_at,
            pod_is_finished=pod_is_finished,
            urgent=urgent,
        )
        if log.isEnabledFor(logging.DEBUG):
            _log(logging.DEBUG, "Pod status accepted", **_fields(pod.key(), uid, version, phase=status.phase))
        self._notify(uid)
        if notes is not None:
            notes.append(
                _Note(
                    pod=pod.replace(status=status),
                    status=status,
                    is_added=entry is None and pod.metadata.deletion_timestamp is None,
                    pod_is_finished=pod_is_finished,
                )
            )
        return True

    # -- notifiers, volume health, resize conditions (v1.37) --------------------------------

    def add_pod_update_notifier(self, notifier: PodUpdateNotifier) -> None:
        """Tell ``notifier`` of every status accepted from now on (AddPodUpdateNotifier).

        ``on_pod_removed(pod)`` for the status of a finished pod (terminate_pod),
        ``on_pod_updated(pod, status, is_added)`` for any other; ``is_added``
        when the pod had no cached status and is not being deleted.
        """
        with self._lock:
            self._notifiers = [*self._notifiers, notifier]

    def _send_notes(self, notes: list[_Note] | None) -> None:
        if not notes:
            return
        for note in notes:
            for notifier in self._notifiers:
                try:
                    if note.pod_is_finished:
                        notifier.on_pod_removed(note.pod)
                    else:
                        notifier.on_pod_updated(note.pod, note.status, note.is_added)
                except Exception:
                    log.exception("Pod update notifier failed podUID=%s", note.pod.uid)

    def set_pod_volume_health(self, pod_uid: str, volume_name: str, conditions: Iterable[Any]) -> bool:
        """Cache the health of one of the pod's volumes (SetPodVolumeHealth); True when the status changed.

        ``conditions`` is the whole set for that volume, as wire dicts
        (``{"status": "Degraded", "reason": "...", "message": "..."}``); empty
        means healthy. Only a change of the (status, reason) pairs is a change:
        a new message alone is not written.
        """
        # Any iterable of conditions will do, but not a string or a single object.
        given: Any = conditions
        if not isinstance(given, list | tuple | str | bytes | dict) and isinstance(given, Iterable):
            given = list(given)
        checked = _check_volume_health_conditions(given)
        notes: list[_Note] | None = [] if self._notifiers else None
        with self._lock:
            changed = self._set_pod_volume_health(pod_uid, volume_name, checked, notes)
        self._send_notes(notes)
        return changed

    def _set_pod_volume_health(
        self, pod_uid: str, volume_name: str, conditions: list[dict[str, Any]], notes: list[_Note] | None
    ) -> bool:
        pod = self._pods.get_pod_by_uid(pod_uid)
        if pod is None:
            _log(logging.DEBUG, "Pod has been deleted, no need to update volume health", podUID=pod_uid)
            return False
        entry = self._statuses.get(pod.uid)
        if entry is None:
            _log(
                logging.INFO,
                "Volume health changed before pod has synced",
                **_fields(pod.key(), pod.uid, volumeName=volume_name),
            )
            return False
        entries = list(entry.status.volume_health or ())
        index = next(
            (i for i, v in enumerate(entries) if isinstance(v, dict) and v.get("name") == volume_name), -1
        )
        existing = entries[index].get("healthConditions") if index >= 0 else None
        if volume_health_condition_sets_equal(existing, conditions):
            _log(
                logging.DEBUG,
                "Volume health unchanged",
                **_fields(pod.key(), pod.uid, volumeName=volume_name),
            )
            return False
        stamp = self._now().strftime("%Y-%m-%dT%H:%M:%SZ")
        health: dict[str, Any] = {"name": volume_name}
        if conditions:
            health["healthConditions"] = conditions
        health["lastTransitionTime"] = stamp
        if index >= 0:
            entries[index] = health
        else:
            entries.append(health)
        status = entry.status.replace(volume_health=entries)
        return self._update_status(pod, status, False, pod_is_finished=False, notes=notes)


def _update_condition(conditions: tuple[Any, ...] | Any, condition: Any) -> tuple[Any, ...]:
    if get_condition(conditions, condition.type) is None:
        log.debug("PodStatus missing condition type %s", condition.type)
    return replace_or_append_condition(tuple(conditions), condition)


def _ready_status(status: PodStatus) -> str | None:
    c = get_condition(status.conditions, POD_READY)
    return c.status if c is not None else None


def _is_urgent(old: PodStatus, new: PodStatus) -> bool:
    """A transition users wait on: the pod (or its containers) became ready or stopped being ready,
    or the pod finished. A condition appearing as False (a pod starting up) is not one."""
    if (_ready_status(old) == "True") != (_ready_status(new) == "True"):
        return True
    old_cr = get_condition(old.conditions, CONTAINERS_READY)
    new_cr = get_condition(new.conditions, CONTAINERS_READY)
    if (old_cr is not None and old_cr.status == "True") != (new_cr is not None and new_cr.status == "True"):
        return True
    return is_terminal_phase(new.phase) and not is_terminal_phase(old.phase)
