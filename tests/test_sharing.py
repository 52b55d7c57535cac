"""What cached statuses share: equal parts taken from the cached status, pooled values, read-only JSON.

The memory rules (one copy of what many statuses hold in common) must never
change a value: interning keeps distinct values apart (``1``, ``1.0`` and
``true`` stay themselves), every compacted status equals and prints like the
status handed in, and shared values cannot be changed through a status handed
out. The setter's speed-ups (the quick validity check, taking equal parts)
must never let through what the precise check refuses.
"""

from __future__ import annotations

import copy
import json
import pickle
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from podstatus import BasicPodManager, InvalidObjectError, new_manager
from podstatus.deletion import FakePodDeletionSafety
from podstatus.sharing import ValuePool, compact_status, share_equal_parts
from podstatus.statusutil import update_last_transition_times
from podstatus.types import (
    ContainerState,
    ContainerStateRunning,
    ContainerStateTerminated,
    ContainerStatus,
    FrozenDict,
    FrozenList,
    Pod,
    PodCondition,
    PodIP,
    PodStatus,
)
from podstatus.validation import _looks_valid, _validate_status, validate_status

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "pod-running.json"
T0 = datetime(2026, 1, 1, 8, 0, 0, tzinfo=UTC)
TIMED = {"ContainersReady", "Ready", "Initialized", "PodReadyToStartContainers", "PodScheduled"}


def fixture_pod() -> Pod:
    return Pod.from_json(FIXTURE.read_bytes())


def rebuilt(status: PodStatus) -> PodStatus:
    """The same status built afresh (no part shared), times of the manager's conditions left unset."""
    d = status.to_dict()
    for c in d.get("conditions") or ():
        if c["type"] in TIMED:
            c.pop("lastTransitionTime", None)
    return PodStatus.from_dict(d)


def manager_with(pod: Pod) -> Any:
    return new_manager(None, BasicPodManager([pod]), FakePodDeletionSafety())


# --- the quick validity check -----------------------------------------------------------------

_any_value = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**40), max_value=2**40),
    st.floats(allow_nan=False, width=32),
    st.text(max_size=3),
    st.just(T0),
    st.just(datetime(2026, 1, 1)),  # naive
    st.just(["x"]),
)


@settings(max_examples=300, deadline=None)
@given(
    ready=_any_value,
    restart_count=_any_value,
    started=_any_value,
    image=_any_value,
    exit_code=_any_value,
    started_at=_any_value,
    cond_status=st.one_of(_any_value, st.sampled_from(["True", "False", "Unknown"])),
    cond_reason=_any_value,
    cond_time=_any_value,
    phase=_any_value,
    name=st.one_of(st.just("a"), _any_value),
)
def test_quick_check_never_accepts_what_the_precise_check_refuses(**v: Any) -> None:
    status = PodStatus(
        phase=v["phase"],
        conditions=(
            PodCondition(
                type="Ready",
                status=v["cond_status"],
                reason=v["cond_reason"],
                last_transition_time=v["cond_time"],
            ),
        ),
        container_statuses=(
            ContainerStatus(
                name=v["name"],
                ready=v["ready"],
                restart_count=v["restart_count"],
                started=v["started"],
                image=v["image"],
                state=ContainerState(
                    terminated=ContainerStateTerminated(exit_code=v["exit_code"], started_at=v["started_at"])
                ),
            ),
        ),
    )
    if _looks_valid(status, None):
        _validate_status(status, None)  # must not raise


def test_quick_check_takes_every_ordinary_status() -> None:
    # The fast path must actually be the common path.
    pod = fixture_pod()
    assert _looks_valid(pod.status, None)
    assert _looks_valid(rebuilt(pod.status), pod.status)
    assert _looks_valid(PodStatus(), None)


# --- taking the cached status's equal parts ------------------------------------------------------


def test_equal_parts_are_taken_from_the_cached_status() -> None:
    cached = fixture_pod().status
    fresh = PodStatus.from_dict(cached.to_dict())
    assert fresh.container_statuses is not cached.container_statuses
    shared = share_equal_parts(fresh, cached)
    assert shared == fresh
    assert shared.container_statuses is cached.container_statuses
    assert shared.init_container_statuses is cached.init_container_statuses
    assert shared.pod_ips is cached.pod_ips
    assert shared.phase is cached.phase


def test_only_the_equal_parts_are_taken() -> None:
    cached = fixture_pod().status
    statuses = list(PodStatus.from_dict(cached.to_dict()).container_statuses or ())
    statuses[1] = statuses[1].replace(restart_count=statuses[1].restart_count + 1)
    shared = share_equal_parts(cached.replace(container_statuses=tuple(statuses)), cached)
    assert shared.container_statuses is not None and cached.container_statuses is not None
    assert shared.container_statuses[0] is cached.container_statuses[0]
    assert shared.container_statuses[1] is statuses[1]
    assert shared.container_statuses[1] != cached.container_statuses[1]


@pytest.mark.parametrize(
    "change",
    [
        lambda cs: {"ready": int(cs.ready)},  # == True, but not a bool: validation must see (and refuse) it
        lambda cs: {"restart_count": float(cs.restart_count)},
        lambda cs: {"started": int(bool(cs.started))},
    ],
)
def test_an_equal_part_with_other_number_types_is_not_taken_and_is_refused(change: Any) -> None:
    pod = fixture_pod()
    manager = manager_with(pod)
    manager.set_pod_status(pod, pod.status)
    cached = manager.get_pod_status(pod.uid)
    first = cached.container_statuses[0]
    bad = first.replace(**change(first))
    assert bad == first  # equal by ==, yet not valid
    status = cached.replace(container_statuses=(bad, *cached.container_statuses[1:]), phase="Failed")
    assert share_equal_parts(status, cached).container_statuses[0] is bad
    with pytest.raises(InvalidObjectError):
        manager.set_pod_status(pod, status)
    assert manager.get_pod_status(pod.uid) is cached
    assert manager.get_status_version(pod.uid) == 1


def test_a_part_whose_equality_raises_is_left_to_validation() -> None:
    class Hostile:
        def __eq__(self, other: object) -> bool:
            raise RuntimeError("no")

    cached = fixture_pod().status
    status = cached.replace(container_statuses=(Hostile(),))  # type: ignore[arg-type]
    assert share_equal_parts(status, cached) is status
    with pytest.raises(InvalidObjectError):
        validate_status(status, cached)


def test_transition_times_take_the_old_condition_when_equal() -> None:
    old = fixture_pod().status
    new = rebuilt(old)
    out = update_last_transition_times(old, new, T0 + timedelta(days=1))
    assert out.conditions is old.conditions  # every condition equal again: the very tuple
    flipped = [c.replace(status="False") if c.type == "Ready" else c for c in new.conditions or ()]
    out = update_last_transition_times(old, new.replace(conditions=tuple(flipped)), T0)
    assert out.conditions is not None and old.conditions is not None
    for c, oc in zip(out.conditions, old.conditions, strict=True):
        assert (c is oc) == (c.type != "Ready")


def test_a_condition_equal_but_for_a_bool_generation_is_not_taken() -> None:
    old = PodStatus(conditions=(PodCondition(type="X", status="True", observed_generation=1),))
    new = PodStatus(conditions=(PodCondition(type="X", status="True", observed_generation=True),))
    out = update_last_transition_times(old, new, T0)
    assert out.conditions is not None
    assert out.conditions[0].observed_generation is True


# --- the manager with statuses built afresh ------------------------------------------------------


def test_a_fresh_status_equal_to_the_cached_one_writes_nothing() -> None:
    pod = fixture_pod()
    manager = manager_with(pod)
    manager.set_pod_status(pod, pod.status)
    cached = manager.get_pod_status(pod.uid)
    for _ in range(3):
        manager.set_pod_status(pod, rebuilt(cached))
    assert manager.get_status_version(pod.uid) == 1
    assert manager.get_pod_status(pod.uid) is cached


def test_a_fresh_status_with_one_change_shares_the_rest_with_the_cached_one() -> None:
    pod = fixture_pod()
    manager = manager_with(pod)
    manager.set_pod_status(pod, pod.status)
    cached = manager.get_pod_status(pod.uid)
    fresh = rebuilt(cached)
    conditions = tuple(c.replace(status="False") if c.type == "Ready" else c for c in fresh.conditions or ())
    manager.set_pod_status(pod, fresh.replace(conditions=conditions))
    now = manager.get_pod_status(pod.uid)
    assert manager.get_status_version(pod.uid) == 2
    assert now.container_statuses is cached.container_statuses
    assert now.init_container_statuses is cached.init_container_statuses
    ready = next(c for c in now.conditions if c.type == "Ready")
    assert ready.status == "False" and ready.last_transition_time is not None
    for c in now.conditions:
        if c.type != "Ready":
            assert any(c is oc for oc in cached.conditions)


def test_pass_through_values_handed_out_cannot_be_changed() -> None:
    # SPEC 2.1: a status handed out cannot be used to corrupt the cache.
    pod = fixture_pod()
    manager = manager_with(pod)
    manager.set_pod_status(pod, pod.status)
    got = manager.get_pod_status(pod.uid)
    resources = got.container_statuses[0].resources
    assert isinstance(resources, FrozenDict)
    with pytest.raises(TypeError):
        resources["limits"] = {}
    with pytest.raises(TypeError):
        resources["limits"].clear()
    mounts = got.container_statuses[0].volume_mounts
    with pytest.raises(TypeError):
        mounts.append({"name": "x"})
    # The manager adds the generation it saw (v1.37's observedGeneration).
    want = pod.status.replace(observed_generation=pod.metadata.generation).to_dict()
    assert manager.get_pod_status(pod.uid).to_dict() == want
    # to_dict gives fresh, changeable containers.
    out = got.to_dict()
    out["containerStatuses"][0]["resources"]["limits"] = {}
    assert manager.get_pod_status(pod.uid).to_dict() == want


def test_pods_with_equal_values_share_them_and_others_do_not() -> None:
    base = fixture_pod()
    pods = [base.replace(metadata=base.metadata.replace(uid=f"uid-{i}", name=f"p{i}")) for i in range(3)]
    manager = new_manager(None, BasicPodManager(pods), FakePodDeletionSafety())
    for i, pod in enumerate(pods):
        d = pod.status.to_dict()
        if i == 2:
            d["containerStatuses"][0]["resources"]["limits"]["memory"] = "1Gi"
        manager.set_pod_status(pod, PodStatus.from_dict(d))
    a, b, c = (manager.get_pod_status(p.uid) for p in pods)
    assert a.container_statuses[0].resources is b.container_statuses[0].resources
    assert a.container_statuses[0].resources is not c.container_statuses[0].resources
    assert c.container_statuses[0].resources["limits"]["memory"] == "1Gi"
    assert a.conditions[0].type is b.conditions[0].type
    assert a.container_statuses[0].image is b.container_statuses[0].image


# --- the pool ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "values",
    [
        [{"cpu": 1}, {"cpu": 1.0}, {"cpu": True}],
        [{"a": 1, "b": 2}, {"b": 2, "a": 1}],
        [[1, 2], [1.0, 2], [True, 2]],
        [{"x": None}, {"x": 0}, {"x": False}, {"x": ""}],
    ],
)
def test_pooled_values_never_stand_in_for_distinct_ones(values: list[Any]) -> None:
    pool = ValuePool()
    pooled = [pool.json(copy.deepcopy(v)) for v in values]
    for v, p in zip(values, pooled, strict=True):
        assert msgspec.json.encode(p) == msgspec.json.encode(v)  # same JSON, keys in the same order
        assert json.dumps(p) == json.dumps(v)
    assert len({id(p) for p in pooled}) == len(values)
    again = [pool.json(copy.deepcopy(v)) for v in values]
    assert all(a is b for a, b in zip(again, pooled, strict=True))


def test_conditions_that_differ_only_in_number_types_are_pooled_apart() -> None:
    pool = ValuePool()
    one = PodCondition(type="X", status="True", observed_generation=1, last_transition_time=T0)
    true = PodCondition(type="X", status="True", observed_generation=True, last_transition_time=T0)
    a = compact_status(PodStatus(conditions=(one,)), None, pool)
    b = compact_status(PodStatus(conditions=(true,)), None, pool)
    assert a.conditions is not None and b.conditions is not None
    assert a.conditions[0].observed_generation is not True
    assert b.conditions[0].observed_generation is True
    assert a.to_json() != b.to_json()  # (as dicts they compare equal: True == 1)


def test_values_that_are_not_plain_json_are_left_as_they_are() -> None:
    pool = ValuePool()
    odd = {"a": (1, 2)}
    assert pool.json(odd) is odd
    assert pool.json({1: "x"}) == {1: "x"}


def test_a_full_pool_starts_afresh_and_values_stay_equal() -> None:
    pool = ValuePool(limit=4)
    statuses = [
        PodStatus(
            conditions=(PodCondition(type="Ready", status="True", last_transition_time=T0 + timedelta(i)),)
        )
        for i in range(10)
    ]
    out = [compact_status(s, None, pool) for s in statuses]
    assert out == statuses
    assert len(pool) <= 4


def test_compacted_status_equals_and_prints_like_the_one_handed_in() -> None:
    pool = ValuePool()
    for status in (fixture_pod().status, rebuilt(fixture_pod().status), PodStatus()):
        out = compact_status(status, None, pool)
        assert out == status
        assert out.to_json() == status.to_json()
        assert out.to_dict() == status.to_dict()


def test_timestamps_are_shared_by_value() -> None:
    pool = ValuePool()
    a = compact_status(PodStatus(start_time=datetime(2026, 1, 1, tzinfo=UTC)), None, pool)
    b = compact_status(PodStatus(start_time=datetime(2026, 1, 1, tzinfo=UTC)), None, pool)
    assert a.start_time is b.start_time


def test_pod_ip_strings_are_shared_within_a_status() -> None:
    status = PodStatus(pod_ip="10.0.0." + str(7), pod_ips=(PodIP(ip="10.0.0." + str(7)),))
    assert status.pod_ips is not None and status.pod_ips[0].ip is not status.pod_ip
    out = compact_status(status, None, ValuePool())
    assert out.pod_ips is not None and out.pod_ips[0].ip is out.pod_ip


def test_compaction_keeps_what_a_status_already_shares() -> None:
    # A status built with replace from a template keeps the template's parts (no copies per pod).
    template = compact_status(fixture_pod().status, None, pool := ValuePool())
    built = template.replace(pod_ip="10.9.9.9")
    out = compact_status(built, None, pool)
    assert out.init_container_statuses is not None and template.init_container_statuses is not None
    assert out.init_container_statuses[0] is template.init_container_statuses[0]
    assert out.conditions is template.conditions


# --- the read-only JSON types --------------------------------------------------------------------


def test_frozen_json_behaves_like_plain_json_but_cannot_change() -> None:
    d = FrozenDict({"a": FrozenList([1, FrozenDict({"b": 2})])})
    assert d == {"a": [1, {"b": 2}]}
    assert msgspec.json.encode(d) == b'{"a":[1,{"b":2}]}'
    assert copy.copy(d) is d and copy.deepcopy(d) is d
    back = pickle.loads(pickle.dumps(d))
    assert back == d and type(back) is FrozenDict and type(back["a"]) is FrozenList
    for change in (
        lambda: d.__setitem__("x", 1),
        lambda: d.pop("a"),
        lambda: d.update(x=1),
        lambda: d.setdefault("x", 1),
        lambda: d["a"].append(3),
        lambda: d["a"].sort(),
        lambda: d["a"].__setitem__(0, 5),
    ):
        with pytest.raises(TypeError):
            change()
    assert d == {"a": [1, {"b": 2}]}


def test_a_cached_status_deep_copies_and_pickles() -> None:
    pod = fixture_pod()
    manager = manager_with(pod)
    manager.set_pod_status(pod, pod.status)
    got = manager.get_pod_status(pod.uid)
    assert copy.deepcopy(got) == got
    assert pickle.loads(pickle.dumps(got)) == got


# --- from_dict's one-pass decode ---------------------------------------------------------------


def test_from_dict_converts_offsets_to_utc_on_the_fast_path() -> None:
    d = fixture_pod().to_dict()
    d["status"]["startTime"] = "2026-01-01T10:00:00+02:00"
    pod = Pod.from_dict(d)
    assert pod.status.start_time == datetime(2026, 1, 1, 8, tzinfo=UTC)
    assert pod.status.start_time is not None and pod.status.start_time.tzinfo is UTC


def test_from_dict_keeps_a_key_named_like_the_extra_field_as_an_unknown_field() -> None:
    d = {"phase": "Running", "$podstatus.extra": {"x": 1}}
    status = PodStatus.from_dict(d)
    assert status.to_dict() == d
    # Never taken as raw JSON to splice into the output.
    smuggled = PodStatus.from_dict({"phase": "Running", "$podstatus.extra": b'{"injected": true}'})
    assert "injected" not in smuggled.to_dict()


def test_from_dict_still_names_the_bad_field() -> None:
    d = fixture_pod().to_dict()
    d["status"]["containerStatuses"][1]["ready"] = "yes"
    with pytest.raises(InvalidObjectError) as info:
        Pod.from_dict(d)
    assert info.value.path == "status.containerStatuses[1].ready"


def test_statuses_with_a_running_state_round_trip() -> None:
    s = PodStatus(
        container_statuses=(
            ContainerStatus(name="a", state=ContainerState(running=ContainerStateRunning(started_at=T0))),
        )
    )
    assert PodStatus.from_dict(s.to_dict()) == s


@pytest.mark.parametrize(
    "where",
    [
        ("metadata", "creationTimestamp"),
        ("status", "conditions", 1, "lastTransitionTime"),
        ("status", "containerStatuses", 0, "state", "running", "startedAt"),
        ("status", "containerStatuses", 0, "lastState", "terminated", "finishedAt"),
        ("status", "initContainerStatuses", 0, "state", "terminated", "startedAt"),
    ],
)
def test_from_dict_finds_an_offset_anywhere(where: tuple[Any, ...]) -> None:
    d = fixture_pod().to_dict()
    node = d
    for key in where[:-1]:
        node = node[key]
    node[where[-1]] = "2026-01-01T10:00:00-03:00"
    pod = Pod.from_dict(d)
    value: Any = pod
    names = {"creationTimestamp": "creation_timestamp", "lastTransitionTime": "last_transition_time"}
    names |= {"containerStatuses": "container_statuses", "initContainerStatuses": "init_container_statuses"}
    names |= {"startedAt": "started_at", "finishedAt": "finished_at", "lastState": "last_state"}
    for key in where:
        value = value[key] if isinstance(key, int) else getattr(value, names.get(key, key))
    assert value == datetime(2026, 1, 1, 13, tzinfo=UTC)
    assert value.tzinfo is UTC


@pytest.mark.parametrize(
    "where",
    [
        ("metadata", "creationTimestamp"),
        ("status", "startTime"),
        ("status", "conditions", 1, "lastTransitionTime"),
        ("status", "containerStatuses", 0, "state", "running", "startedAt"),
        ("status", "containerStatuses", 0, "lastState", "terminated", "finishedAt"),
        ("status", "initContainerStatuses", 0, "state", "terminated", "startedAt"),
    ],
)
@pytest.mark.parametrize("text", ["2026-01-01T10:00:00-03:00", "2026-01-01t10:00:00.000-03:00"])
@pytest.mark.parametrize("as_str", [False, True])
def test_from_json_finds_an_offset_anywhere(where: tuple[Any, ...], text: str, as_str: bool) -> None:
    d = fixture_pod().to_dict()
    node = d
    for key in where[:-1]:
        node = node[key]
    node[where[-1]] = text
    raw = json.dumps(d)
    pod = Pod.from_json(raw if as_str else raw.encode())
    names = {"creationTimestamp": "creation_timestamp", "lastTransitionTime": "last_transition_time"}
    names |= {"containerStatuses": "container_statuses", "initContainerStatuses": "init_container_statuses"}
    names |= {"startedAt": "started_at", "finishedAt": "finished_at", "lastState": "last_state"}
    names |= {"startTime": "start_time"}
    value: Any = pod
    for key in where:
        value = value[key] if isinstance(key, int) else getattr(value, names.get(key, key))
    assert value == datetime(2026, 1, 1, 13, tzinfo=UTC)
    assert value.tzinfo is UTC
    assert Pod.from_json(pod.to_json()) == pod


def test_from_json_leaves_time_like_text_in_pass_through_values_alone() -> None:
    d = fixture_pod().to_dict()
    d["metadata"]["annotations"] = {"note": "2026-01-01T10:00:00+02:00"}
    pod = Pod.from_json(json.dumps(d).encode())
    assert pod.metadata.annotations == {"note": "2026-01-01T10:00:00+02:00"}
    assert pod == Pod.from_dict(d)
