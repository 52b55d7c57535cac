"""Label and field selectors."""

from __future__ import annotations

import pytest

from podstatus.server.selectors import FieldSelector, LabelSelector, SelectorError

LABELS = {"app": "web", "tier": "front", "example.com/team": "a"}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", True),
        ("app=web", True),
        ("app==web", True),
        ("app!=web", False),
        ("app!=db", True),
        ("missing!=x", True),
        ("app in (web, db)", True),
        ("app in (db)", False),
        ("app notin (db,cache)", True),
        ("missing notin (db)", True),
        ("app", True),
        ("missing", False),
        ("!missing", True),
        ("!app", False),
        ("app=web,tier=front", True),
        ("app=web,tier=back", False),
        ("example.com/team=a", True),
        ("app in (web),!missing,tier", True),
    ],
)
def test_label_selector(text: str, expected: bool) -> None:
    assert LabelSelector.parse(text).matches(LABELS) is expected


def test_label_selector_without_labels() -> None:
    assert LabelSelector.parse("app!=x").matches(None)
    assert not LabelSelector.parse("app").matches(None)


@pytest.mark.parametrize("text", ["app in (a", "a b c", "=x", "app=has space", "app in ()"])
def test_label_selector_errors(text: str) -> None:
    with pytest.raises(SelectorError):
        LabelSelector.parse(text)


POD = {
    "metadata": {"name": "p1", "namespace": "ns"},
    "spec": {"nodeName": "n1"},
    "status": {"phase": "Running"},
}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("metadata.name=p1", True),
        ("metadata.name==p1", True),
        ("metadata.name!=p1", False),
        ("metadata.namespace=ns,spec.nodeName=n1", True),
        ("spec.nodeName=n2", False),
        ("spec.nodeName=", False),
        ("status.phase!=Failed,status.phase!=Succeeded", True),
        ("status.phase=Running", True),
    ],
)
def test_field_selector(text: str, expected: bool) -> None:
    assert FieldSelector.parse(text, "pods").matches(POD) is expected


def test_field_selector_unset_field_is_empty() -> None:
    assert FieldSelector.parse("spec.nodeName=", "pods").matches({"metadata": {}, "spec": {}})


def test_field_selector_unsupported_field() -> None:
    with pytest.raises(SelectorError, match=r"^field label not supported: spec\.foo$"):
        FieldSelector.parse("spec.foo=x", "pods")
    with pytest.raises(SelectorError):
        FieldSelector.parse("spec.nodeName=x", "nodes")
    with pytest.raises(SelectorError):
        FieldSelector.parse("nonsense", "pods")
