"""The generic store serves a kind it has never heard of: a strategy registered from outside.

This is the promise of server/storage/: adding a kind is a registry module, never an edit of
the store. The generic modules name no kind (checked on their source below).
"""

from __future__ import annotations

import builtins
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from podstatus.errors import ConflictError, MethodNotAllowedError, UnprocessableEntityError
from podstatus.server.storage.deletion import KEEP, MARK, REMOVE, check_preconditions, plan_delete
from podstatus.server.storage.errors import FieldError
from podstatus.server.storage.store import Store
from podstatus.server.storage.strategy import RESOURCES, ResourceInfo, Strategy, register

STORAGE = Path(__file__).resolve().parents[3] / "src" / "podstatus" / "server" / "storage"


class WidgetStrategy(Strategy):
    """A made-up kind: ``spec.size`` is required and may only grow; deletes wait 10 s."""

    graceful = True

    def prepare_create(self, obj: dict[str, Any], errors: builtins.list[FieldError]) -> None:
        super().prepare_create(obj, errors)
        if not isinstance(obj["spec"].get("size"), int):
            errors.append(FieldError("spec.size", "Required value"))

    def prepare_update(
        self,
        old: dict[str, Any],
        obj: dict[str, Any],
        subresource: str | None,
        errors: builtins.list[FieldError],
    ) -> None:
        if subresource is None and (obj.get("spec") or {}).get("size", 0) < old["spec"]["size"]:
            errors.append(FieldError("spec.size", "Forbidden", detail="may only grow"))

    def grace_period(self, obj: dict[str, Any], requested: int | None) -> int:
        return 10 if requested is None else requested


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def widgets() -> Iterator[ResourceInfo]:
    info = register(
        ResourceInfo("widgets", "Widget", namespaced=True, merge_keys={}, group="example.com",
                     strategy=WidgetStrategy())
    )  # fmt: skip
    try:
        yield info
    finally:
        del RESOURCES[info.key]


def _widget(size: Any) -> dict[str, Any]:
    return {"metadata": {"name": "w"}, "spec": {"size": size}}


def test_create_update_and_preconditions(widgets: ResourceInfo) -> None:
    store = Store()
    created = store.create(widgets.key, "default", _widget(1))
    assert created.obj["apiVersion"] == "example.com/v1" and created.obj["status"] == {}
    grown = store.patch(widgets.key, "default", "w", {"spec": {"size": 2}}, "merge")
    assert grown.rv == created.rv + 1
    with pytest.raises(
        UnprocessableEntityError, match=r'Widget.example.com "w" is invalid: spec.size: Forbidden'
    ):
        store.patch(widgets.key, "default", "w", {"spec": {"size": 1}}, "merge")
    stale = dict(_widget(3), metadata={"name": "w", "resourceVersion": str(created.rv)})
    with pytest.raises(ConflictError, match="the object has been modified"):
        store.update(widgets.key, "default", "w", stale)
    with pytest.raises(UnprocessableEntityError, match=r"spec\.size: Required value"):
        store.create(widgets.key, "default", {"metadata": {"name": "v"}, "spec": {}})


def test_graceful_delete_and_reap(widgets: ResourceInfo) -> None:
    clock = Clock()
    store = Store(clock=clock)
    store.create(widgets.key, "default", _widget(1))
    marked, gone = store.delete(widgets.key, "default", "w")
    assert not gone and marked.obj["metadata"]["deletionGracePeriodSeconds"] == 10
    clock.now += 11
    assert store.reap() == 1
    assert store.list(widgets.key, "default")[0] == []


def test_watch_sees_the_new_kind(widgets: ResourceInfo) -> None:
    store = Store()
    with store.watch(widgets.key, "default", resource_version="0") as watch:
        store.create(widgets.key, "default", _widget(1))
        event = watch.next(timeout=5)
    assert event is not None and event.type == "ADDED" and event.stored.name == "w"


def test_a_strategy_can_refuse_deletes(widgets: ResourceInfo) -> None:
    class Undeletable(WidgetStrategy):
        deletable = False

    widgets.strategy = Undeletable()
    store = Store()
    store.create(widgets.key, "default", _widget(1))
    with pytest.raises(MethodNotAllowedError, match=r"widgets\.example\.com cannot be deleted"):
        store.delete(widgets.key, "default", "w")


def test_generic_modules_name_no_kind() -> None:
    kinds = re.compile(r'"(pods|namespaces|nodes|leases|minions)"')
    for path in sorted(STORAGE.glob("*.py")):
        found = [line for line in path.read_text().splitlines() if kinds.search(line)]
        assert found == [], (path.name, found)


# --- deletion, decided apart from doing it (storage/deletion.py) ---------------------------

_STAMP = "2023-11-14T22:13:20Z"  # 1_700_000_000

PLANS = [
    # (graceful, metadata, requested) -> (action, period, deadline, bump_generation, then_remove)
    (False, {}, None, (REMOVE, 0, None, False, False)),
    (False, {"finalizers": ["f"]}, None, (MARK, 0, None, False, False)),
    (False, {"finalizers": ["f"], "deletionTimestamp": _STAMP}, None, (KEEP, 0, None, False, False)),
    (True, {}, None, (MARK, 10, None, True, False)),
    (True, {}, 0, (MARK, 0, None, True, True)),
    (True, {"finalizers": ["f"]}, 0, (MARK, 0, None, True, False)),
    (True, {}, -5, (MARK, 1, None, True, False)),
    (True, {"deletionTimestamp": _STAMP, "deletionGracePeriodSeconds": 30}, None, (KEEP, 0, None, False, False)),
    (True, {"deletionTimestamp": _STAMP, "deletionGracePeriodSeconds": 30}, 40, (KEEP, 0, None, False, False)),
    (True, {"deletionTimestamp": _STAMP, "deletionGracePeriodSeconds": 30}, 5,
     (MARK, 5, 1_700_000_000.0 - 25, False, False)),
    (True, {"deletionTimestamp": _STAMP, "deletionGracePeriodSeconds": 30}, 0,
     (MARK, 0, 1_700_000_000.0 - 30, False, True)),
    (True, {"deletionTimestamp": _STAMP, "deletionGracePeriodSeconds": 0}, None, (REMOVE, 0, None, False, False)),
    (True, {"deletionTimestamp": _STAMP, "deletionGracePeriodSeconds": 0, "finalizers": ["f"]}, None,
     (KEEP, 0, None, False, False)),
]  # fmt: skip


@pytest.mark.parametrize(("graceful", "meta", "requested", "expected"), PLANS)
def test_delete_plan(
    graceful: bool, meta: dict[str, Any], requested: int | None, expected: tuple[Any, ...]
) -> None:
    strategy = WidgetStrategy() if graceful else Strategy()
    plan = plan_delete(strategy, {"metadata": meta, "spec": {"size": 1}}, requested)
    assert (plan.action, plan.period, plan.deadline, plan.bump_generation, plan.then_remove) == expected


def test_delete_preconditions() -> None:
    meta = {"uid": "u1", "resourceVersion": "7"}
    check_preconditions("Widget", "w", meta, "u1", "7")
    with pytest.raises(ConflictError, match=r"the UID in the precondition \(u2\) does not match"):
        check_preconditions("Widget", "w", meta, "u2", None)
    with pytest.raises(ConflictError, match=r"the ResourceVersion in the precondition \(6\) does not match"):
        check_preconditions("Widget", "w", meta, None, "6")
