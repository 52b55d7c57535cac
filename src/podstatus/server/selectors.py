"""Label and field selectors, parsed the way the API server parses them.

Label selectors: ``k=v``, ``k==v``, ``k!=v``, ``k in (a,b)``, ``k notin (a,b)``,
``k`` (exists) and ``!k`` (does not exist), joined by commas (AND).
Field selectors: ``path=v``, ``path==v``, ``path!=v`` over a small per-resource
set of fields, as the real server supports them (others are refused).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

__all__ = [
    "FIELD_GETTERS",
    "SELECTED_FIELDS",
    "FieldSelector",
    "LabelSelector",
    "SelectorError",
]


class SelectorError(ValueError):
    """A selector cannot be parsed or names an unsupported field (the server answers 400)."""


# A label key may carry a DNS-subdomain prefix: ``example.com/name``.
_KEY_RE = re.compile(r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_VALUE_RE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")


def _check_key(key: str, text: str) -> str:
    if not key or len(key) > 317 or not _KEY_RE.match(key):
        raise SelectorError(f"unable to parse requirement: invalid label key {key!r} in {text!r}")
    return key


def _check_value(value: str, text: str) -> str:
    if len(value) > 63 or not _VALUE_RE.match(value):
        raise SelectorError(f"unable to parse requirement: invalid label value {value!r} in {text!r}")
    return value


def _split_top(text: str) -> list[str]:
    """Split on commas that are not inside ``( )``."""
    parts: list[str] = []
    depth = 0
    start = 0
    for i, ch in enumerate(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth < 0:
                raise SelectorError(f"unbalanced parentheses in selector {text!r}")
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    if depth:
        raise SelectorError(f"unbalanced parentheses in selector {text!r}")
    parts.append(text[start:])
    return parts


_SET_RE = re.compile(r"^\s*(\S+?)\s+(in|notin)\s*\((.*)\)\s*$")


class LabelSelector:
    """A parsed label selector; ``matches(labels)`` tests a ``metadata.labels`` dict."""

    __slots__ = ("_reqs", "text")

    def __init__(self, requirements: list[tuple[str, str, frozenset[str]]], text: str = "") -> None:
        # Each requirement: (key, operator, values); operators: = != in notin exists !exists.
        self._reqs = tuple(requirements)
        self.text = text

    @classmethod
    def parse(cls, text: str | None) -> LabelSelector:
        text = (text or "").strip()
        reqs: list[tuple[str, str, frozenset[str]]] = []
        if not text:
            return cls(reqs, "")
        for raw in _split_top(text):
            part = raw.strip()
            if not part:
                raise SelectorError(f"unable to parse requirement: empty requirement in {text!r}")
            m = _SET_RE.match(part)
            if m:
                key, op, inner = m.group(1), m.group(2), m.group(3)
                values = [v.strip() for v in inner.split(",")] if inner.strip() else []
                if not values and op == "in":
                    raise SelectorError(f"unable to parse requirement: {part!r}: values cannot be empty")
                reqs.append((_check_key(key, text), op, frozenset(_check_value(v, text) for v in values)))
                continue
            if "!=" in part:
                key, _, value = part.partition("!=")
                op = "!="
            elif "==" in part:
                key, _, value = part.partition("==")
                op = "="
            elif "=" in part:
                key, _, value = part.partition("=")
                op = "="
            elif part.startswith("!"):
                reqs.append((_check_key(part[1:].strip(), text), "!exists", frozenset()))
                continue
            else:
                if " " in part or "(" in part or ")" in part:
                    raise SelectorError(f"unable to parse requirement: {part!r}")
                reqs.append((_check_key(part, text), "exists", frozenset()))
                continue
            key, value = key.strip(), value.strip()
            reqs.append((_check_key(key, text), op, frozenset({_check_value(value, text)})))
        return cls(reqs, text)

    @property
    def empty(self) -> bool:
        return not self._reqs

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        labels = labels or {}
        for key, op, values in self._reqs:
            present = key in labels
            if op == "=" or op == "in":
                if not present or labels[key] not in values:
                    return False
            elif op == "!=" or op == "notin":
                # The API server's semantics: a missing label satisfies != and notin.
                if present and labels[key] in values:
                    return False
            elif op == "exists":
                if not present:
                    return False
            elif present:  # !exists
                return False
        return True

    def __repr__(self) -> str:
        return f"LabelSelector({self.text!r})"


def _get(obj: Mapping[str, Any], section: str, name: str) -> str:
    sub = obj.get(section)
    if not isinstance(sub, dict):
        return ""
    value = sub.get(name)
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _getter(section: str, name: str) -> Callable[[Mapping[str, Any]], str]:
    def get(obj: Mapping[str, Any]) -> str:
        return _get(obj, section, name)

    return get


# The fields each resource can be selected by (the real server's field label conversions).
FIELD_GETTERS: dict[str, dict[str, Callable[[Mapping[str, Any]], str]]] = {
    "pods": {
        "metadata.name": _getter("metadata", "name"),
        "metadata.namespace": _getter("metadata", "namespace"),
        "spec.nodeName": _getter("spec", "nodeName"),
        "spec.restartPolicy": _getter("spec", "restartPolicy"),
        "spec.schedulerName": _getter("spec", "schedulerName"),
        "spec.serviceAccountName": _getter("spec", "serviceAccountName"),
        "spec.hostNetwork": lambda o: _get(o, "spec", "hostNetwork") or "false",
        "status.phase": _getter("status", "phase"),
        "status.podIP": _getter("status", "podIP"),
        "status.nominatedNodeName": _getter("status", "nominatedNodeName"),
    },
    "nodes": {
        "metadata.name": _getter("metadata", "name"),
        "spec.unschedulable": lambda o: _get(o, "spec", "unschedulable") or "false",
    },
    "namespaces": {
        "metadata.name": _getter("metadata", "name"),
        "status.phase": _getter("status", "phase"),
    },
}


# What the field selectors of each kind read beyond the metadata's name, namespace and labels:
# top-level keys, with the keys kept below each (None: the value itself). The store keeps only
# this of an object besides its JSON (store.Stored.sel), so a getter above must read nothing else.
SELECTED_FIELDS: dict[str, dict[str, tuple[str, ...] | None]] = {
    "Pod": {
        "spec": ("nodeName", "restartPolicy", "schedulerName", "serviceAccountName", "hostNetwork"),
        "status": ("phase", "podIP", "nominatedNodeName"),
    },
    "Node": {"spec": ("unschedulable",)},
    "Namespace": {"status": ("phase",)},
}


class FieldSelector:
    """A parsed field selector for one resource; ``matches(obj)`` tests a wire dict."""

    __slots__ = ("_reqs", "text")

    def __init__(
        self, requirements: list[tuple[Callable[[Mapping[str, Any]], str], bool, str]], text: str = ""
    ) -> None:
        # Each requirement: (getter, must_equal, value).
        self._reqs = tuple(requirements)
        self.text = text

    @classmethod
    def parse(cls, text: str | None, resource: str = "pods") -> FieldSelector:
        text = (text or "").strip()
        reqs: list[tuple[Callable[[Mapping[str, Any]], str], bool, str]] = []
        if not text:
            return cls(reqs, "")
        getters = FIELD_GETTERS.get(resource, {"metadata.name": _getter("metadata", "name")})
        for raw in text.split(","):
            part = raw.strip()
            if "!=" in part:
                field, _, value = part.partition("!=")
                equal = False
            elif "==" in part:
                field, _, value = part.partition("==")
                equal = True
            elif "=" in part:
                field, _, value = part.partition("=")
                equal = True
            else:
                raise SelectorError(f"invalid selector: {text!r}; can't understand {part!r}")
            field = field.strip()
            getter = getters.get(field)
            if getter is None:
                raise SelectorError(f"field label not supported: {field}")
            reqs.append((getter, equal, value.strip()))
        return cls(reqs, text)

    @property
    def empty(self) -> bool:
        return not self._reqs

    def matches(self, obj: Mapping[str, Any]) -> bool:
        return all((getter(obj) == value) == equal for getter, equal, value in self._reqs)

    def value_of(self, field_getter: Callable[[Mapping[str, Any]], str]) -> str | None:
        """The value an equality requirement pins for a getter, if any (for indexed lookups)."""
        for getter, equal, value in self._reqs:
            if getter is field_getter and equal:
                return value
        return None

    def __repr__(self) -> str:
        return f"FieldSelector({self.text!r})"
