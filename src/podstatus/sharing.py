"""Equal parts held once: what many statuses have in common shares one object (SPEC 2.1).

A node reports the same conditions, times and container states over and
over, and 10,000 cached statuses would otherwise hold 10,000 copies of each.
:func:`share_equal_parts` takes from the cached status the parts a new one
equals (so they are not validated or normalised again);
:func:`compact_status` holds the rest once per :class:`ValuePool` (one per
manager, or one per process on a shared sync pool). Values are read-only, so
sharing them is safe. Pure functions, no I/O.
"""

from __future__ import annotations

import operator
import sys
from datetime import UTC, datetime
from typing import Any

import msgspec

from .types import (
    ContainerState,
    ContainerStatus,
    FrozenDict,
    FrozenList,
    HostIP,
    PodCondition,
    PodIP,
    PodStatus,
)

__all__ = ["ValuePool", "compact_status", "numbers_exact", "share_equal_parts"]


# --- sharing with the cached status -----------------------------------------------------------------


def _state_numbers_exact(state: Any) -> bool:
    term = state.terminated if state is not None else None
    if term is None:
        return True
    signal = term.signal
    return type(term.exit_code) is int and (signal is None or type(signal) is int)


def numbers_exact(x: Any) -> bool:
    """Whether ``x``'s numbers and flags have their exact types (``==`` takes ``1`` for ``True``)."""
    kind = type(x)
    if kind is ContainerStatus:
        started = x.started
        return (
            type(x.ready) is bool
            and type(x.restart_count) is int
            and (started is None or type(started) is bool)
            and _state_numbers_exact(x.state)
            and _state_numbers_exact(x.last_state)
        )
    if kind is PodCondition:
        generation = x.observed_generation
        return generation is None or type(generation) is int
    return kind is PodIP or kind is HostIP


def _share_items(items: Any, known: Any) -> Any:
    """``items`` with each element equal to ``known``'s at the same index replaced by that one."""
    if items is None or known is None or items is known:
        return items
    n = len(known)
    # The common case, all equal: one compare in C.
    if type(items) is tuple and len(items) == n and items == known and all(map(numbers_exact, items)):
        return known
    out = None
    for i, x in enumerate(items):
        if i < n:
            k = known[i]
            if x is not k and x == k and numbers_exact(x):
                if out is None:
                    out = list(items)
                out[i] = k
    if out is None:
        return items
    if type(items) is tuple:
        return known if len(out) == n and all(a is b for a, b in zip(out, known)) else tuple(out)
    return out


def share_equal_parts(status: PodStatus, known: PodStatus | None) -> PodStatus:
    """``status`` with the parts equal to ``known``'s (the cached status) replaced by them.

    Equal values, fewer objects: a status rebuilt from scratch by a node agent
    then costs only its changed parts in memory, and the parts it shares let
    validation, normalisation and comparison take their identity shortcuts.
    It runs before validation, on any input: a part is taken only when it
    equals the cached part (which is valid and normal) with numbers and flags
    of the same types (``==`` alone takes ``1`` for ``True``), so what it takes
    is what the status held, checked already; anything else is left for
    :func:`validate_status` to judge. Conditions are left to
    :func:`update_last_transition_times`, as the manager's times make them equal.
    """
    if known is None or status is known or type(status) is not PodStatus:
        return status
    changes: dict[str, Any] = {}
    try:
        for attr in _SHARED_LISTS:
            value = getattr(status, attr)
            shared = _share_items(value, getattr(known, attr))
            if shared is not value:
                changes[attr] = shared
        mine, theirs = _scalars(status), _scalars(known)
        for attr, value, cached in zip(_SCALARS, mine, theirs, strict=True):
            if value is not cached and type(value) is type(cached) and value == cached:
                changes[attr] = cached
    except Exception:  # hostile input (an __eq__ that raises...): validation names it
        return status
    return status.replace(**changes) if changes else status


_SHARED_LISTS = (
    "container_statuses",
    "init_container_statuses",
    "ephemeral_container_statuses",
    "pod_ips",
    "host_ips",
)
# Strings and times that repeat from one status of a pod to the next.
_SCALARS = ("phase", "reason", "message", "host_ip", "pod_ip", "qos_class", "start_time")
_scalars = operator.attrgetter(*_SCALARS)


# --- compaction: what many cached statuses hold in common, held once -----------------------------


def _frozen(value: Any) -> Any:
    """A read-only copy of a JSON value, or None when it holds anything but plain JSON types."""
    kind = type(value)
    if kind is dict or kind is FrozenDict:
        out = {}
        for k, v in value.items():
            if type(k) is not str:
                return None
            if v is None or type(v) in _JSON_SCALARS:
                out[k] = v
            else:
                fv = _frozen(v)
                if fv is None:
                    return None
                out[k] = fv
        return FrozenDict(out)
    if kind is list or kind is FrozenList:
        items = []
        for v in value:
            if v is None or type(v) in _JSON_SCALARS:
                items.append(v)
            else:
                fv = _frozen(v)
                if fv is None:
                    return None
                items.append(fv)
        return FrozenList(items)
    return None


_JSON_SCALARS = frozenset({str, int, float, bool})


class ValuePool:
    """One shared copy of each value many cached statuses hold (a node's statuses repeat a lot).

    Sharing is exact: pass-through JSON values are looked up by their JSON text,
    small structs by themselves and then checked against their JSON text (so ``1``,
    ``1.0`` and ``true`` never stand in for each other), timestamps by value (UTC
    datetimes only). Strings that repeat
    by nature (condition types, reasons, images) are ``sys.intern``-ed. The pool
    holds at most ``limit`` values; when full it starts afresh (the statuses
    keep what they share). Several threads may share one (the status managers of a
    sync pool): each step is one dict operation, and a race only misses a chance
    to share (values are immutable; an ``items`` tuple holds its items).
    """

    __slots__ = ("_limit", "_values")

    def __init__(self, limit: int = 16_384) -> None:
        self._limit = limit
        self._values: dict[Any, Any] = {}

    def __len__(self) -> int:
        return len(self._values)

    def share(self, key: Any, value: Any) -> Any:
        """The value held under ``key``, or ``value`` itself, now held."""
        found = self._values.get(key)
        return found if found is not None else self.keep(key, value)

    def keep(self, key: Any, value: Any) -> Any:
        """Hold ``value`` under ``key`` (a full pool starts afresh first); returns ``value``."""
        values = self._values
        if len(values) >= self._limit:
            values.clear()
        values[key] = value
        return value

    def json(self, value: Any) -> Any:
        """A pass-through value (``resources``, ``volumeMounts``...): shared and read-only when plain JSON."""
        kind = type(value)
        if kind is str:
            return sys.intern(value)
        if kind is not dict and kind is not list and kind is not FrozenDict and kind is not FrozenList:
            return value
        try:
            key = (_JSON_KEY, _json_encode(value))
        except (TypeError, ValueError, OverflowError, RecursionError):
            return value
        found = self._values.get(key)
        if found is not None:
            return found
        frozen = _frozen(value)
        return value if frozen is None else self.share(key, frozen)

    def time(self, value: Any) -> Any:
        if type(value) is datetime and value.tzinfo is UTC:
            return self.share(value, value)
        return value

    def items(self, value: tuple[Any, ...]) -> tuple[Any, ...]:
        """A tuple of pooled values, shared by the identities of its items (which the pool holds)."""
        key = (_ITEMS_KEY, *map(id, value))
        found = self._values.get(key)
        if found is not None:
            return found
        # The items themselves stay in the pool while their tuple does (they were added first).
        return self.keep(key, value)

    def struct(self, value: Any) -> Any:
        """A small immutable struct without unknown fields, shared with an equal one of the same JSON form.

        The struct is its own key (frozen structs hash and compare by type and fields): the
        pool holds no key beside it. Python equality is looser than JSON's (``1 == True``),
        so a twin found is shared only when both encode alike.
        """
        if value.extra is not None:
            return value
        values = self._values
        try:
            found = values.get(value)
        except TypeError:  # a field that cannot be hashed
            return value
        if found is None:
            return self.keep(value, value)
        if found is value:
            return value
        try:
            same = _json_encode(found) == _json_encode(value)
        except (TypeError, ValueError, OverflowError, RecursionError):
            return value
        return found if same else value


_JSON_KEY = "json"
_ITEMS_KEY = "items"
_json_encode = msgspec.json.encode


def _intern(value: Any) -> Any:
    return sys.intern(value) if type(value) is str else value


def _with(obj: Any, **values: Any) -> Any:
    """``obj`` with the values that are not the very objects it holds (itself when none)."""
    changes = {k: v for k, v in values.items() if v is not getattr(obj, k)}
    return obj.replace(**changes) if changes else obj


def _compact_condition(c: PodCondition, pool: ValuePool) -> PodCondition:
    c = _with(
        c,
        type=_intern(c.type),
        status=_intern(c.status),
        reason=_intern(c.reason),
        message=_intern(c.message),
        last_probe_time=pool.time(c.last_probe_time),
        last_transition_time=pool.time(c.last_transition_time),
    )
    return pool.struct(c)


def _compact_state(
    state: ContainerState | None, pool: ValuePool, container_id: str | None
) -> ContainerState | None:
    if state is None:
        return None
    running, terminated, waiting = state.running, state.terminated, state.waiting
    if running is not None:
        running = pool.struct(_with(running, started_at=pool.time(running.started_at)))
    if terminated is not None:
        t = terminated
        cid = t.container_id
        if cid is not None and cid == container_id:
            cid = container_id  # the container status's own ID again: one string for both
        message = t.message
        terminated = _with(
            t,
            reason=_intern(t.reason),
            message=_intern(message) if message is not None and len(message) <= 256 else message,
            started_at=pool.time(t.started_at),
            finished_at=pool.time(t.finished_at),
            container_id=cid,
        )
        terminated = pool.struct(terminated)
    if waiting is not None:
        waiting = pool.struct(
            _with(waiting, reason=_intern(waiting.reason), message=_intern(waiting.message))
        )
    return pool.struct(_with(state, running=running, terminated=terminated, waiting=waiting))


def _compact_container_status(cs: ContainerStatus, pool: ValuePool) -> ContainerStatus:
    return _with(
        cs,
        name=_intern(cs.name),
        image=_intern(cs.image),
        image_id=_intern(cs.image_id),
        state=_compact_state(cs.state, pool, cs.container_id),
        last_state=_compact_state(cs.last_state, pool, cs.container_id),
        allocated_resources=pool.json(cs.allocated_resources),
        resources=pool.json(cs.resources),
        volume_mounts=pool.json(cs.volume_mounts),
        user=pool.json(cs.user),
        allocated_resources_status=pool.json(cs.allocated_resources_status),
        stop_signal=_intern(cs.stop_signal),
    )


def _compact_shared_items(items: Any, known: Any, compact: Any, pool: ValuePool) -> Any:
    """:func:`_compact_items` for items that are all pooled: the tuple itself is pooled too."""
    out = _compact_items(items, known, compact, pool)
    if out is None or out is known:
        return out
    return pool.items(out)


def _compact_items(items: Any, known: Any, compact: Any, pool: ValuePool) -> Any:
    if items is None or items is known:
        return items
    n = len(known) if known else 0
    out = []
    changed = False
    for i, x in enumerate(items):
        if i < n and x is known[i]:
            out.append(x)  # compacted when it was cached
            continue
        y = compact(x, pool)
        changed = changed or y is not x
        out.append(y)
    return tuple(out) if changed or type(items) is not tuple else items


def compact_status(status: PodStatus, known: PodStatus | None, pool: ValuePool) -> PodStatus:
    """``status`` holding shared copies of what repeats between statuses (an equal value).

    Parts that are the very objects of ``known`` (compacted before) are kept as
    they are; so are the strings unique to a pod (IPs, container IDs). Call it
    on a valid, normal status, as the manager does before it caches one.
    """
    if status is known:
        return status
    changes: dict[str, Any] = {}
    for attr in ("phase", "reason", "message", "nominated_node_name", "host_ip", "qos_class", "resize"):
        value = getattr(status, attr)
        if value is not None and (known is None or value is not getattr(known, attr)):
            changes[attr] = _intern(value)
    if known is None or status.start_time is not known.start_time:
        changes["start_time"] = pool.time(status.start_time)
    conditions = _compact_shared_items(
        status.conditions, known.conditions if known else None, _compact_condition, pool
    )
    if conditions is not status.conditions:
        changes["conditions"] = conditions
    for attr in ("container_statuses", "init_container_statuses", "ephemeral_container_statuses"):
        value = getattr(status, attr)
        compacted = _compact_items(
            value, getattr(known, attr) if known else None, _compact_container_status, pool
        )
        if compacted is not value:
            changes[attr] = compacted
    host_ips = status.host_ips
    if host_ips and (known is None or host_ips is not known.host_ips):
        changes["host_ips"] = pool.items(tuple(pool.struct(_with(h, ip=_intern(h.ip))) for h in host_ips))
    pod_ips = status.pod_ips
    if (
        pod_ips
        and status.pod_ip is not None
        and pod_ips[0].ip == status.pod_ip
        and pod_ips[0].ip is not status.pod_ip
    ):
        # The first pod IP repeats ``podIP``: one string for both.
        changes["pod_ips"] = (pod_ips[0].replace(ip=status.pod_ip), *pod_ips[1:])
    for attr in (
        "resource_claim_statuses",
        "extended_resource_claim_status",
        "node_allocatable_resource_claim_statuses",
        "allocated_resources",
        "resources",
        "volume_health",
    ):
        value = getattr(status, attr)
        if value is not None and (known is None or value is not getattr(known, attr)):
            changes[attr] = pool.json(value)
    return status.replace(**changes) if changes else status
