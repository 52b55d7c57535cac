"""Which fields kube-apiserver knows for each served kind, and what it does with the rest.

The source of truth is ``podstatus/data/apischema.json``, derived from the Kubernetes
OpenAPI v3 documents of the pinned version by ``tests/apiserver/gen_schema.py`` (a test
checks that it is current). It gives, for every type reachable from a served kind, its
properties and each one's JSON type. Two things read it:

- field validation: the real server's decoder drops fields its Go types do not have;
  ``fieldValidation=Strict`` refuses them, ``Warn`` (the default) answers with a warning
  per field, ``Ignore`` drops them silently. :func:`prune` removes them and lists them.
- number ranges: a JSON number outside int32 (int64) for an int32 (int64) field fails
  decoding (:func:`prune` reports the first one in Go's words).

(``/openapi/v2`` and ``/openapi/v3`` serve Kubernetes' own documents: see :mod:`.discovery`.)
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

__all__ = ["Pruned", "duplicate_fields", "known_kind", "prune", "schema_data"]

_INT_RANGES = {
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
}


@functools.cache
def schema_data() -> dict[str, Any]:
    """The parsed schema file (read once)."""
    text = resources.files("podstatus").joinpath("data/apischema.json").read_text(encoding="utf-8")
    data: dict[str, Any] = json.loads(text)
    return data


def _root(kind_key: str) -> str | None:
    root: str | None = schema_data()["kinds"].get(kind_key)
    return root


def known_kind(kind_key: str) -> bool:
    """Whether ``kind_key`` (``"v1/Pod"``, ``"coordination.k8s.io/v1/Lease"``) has a schema."""
    return _root(kind_key) is not None


@dataclass(slots=True)
class Pruned:
    """What :func:`prune` found: unknown field paths (document order) and the first range error."""

    unknown: list[str] = field(default_factory=list)
    range_error: str | None = None


def prune(kind_key: str, obj: dict[str, Any], *, wrap: bool = False, patch: bool = False) -> Pruned:
    """Remove from ``obj`` (in place) every field the kind's schema does not know.

    Paths are written as the real server writes them (``spec.containers[0].foo``). The
    range error is Go's ``encoding/json`` message, e.g. ``json: cannot unmarshal number
    4294967296 into Go struct field ContainerStatus.status.containerStatuses.restartCount
    of type int32``. A kind without a schema is left alone.

    ``wrap``: instead of a range error, an out-of-range integer is converted as Go converts
    it (kube-apiserver's strategic merge patches go through such a conversion and store
    2^40 in an int32 field as 0).

    ``patch``: ``obj`` is a strategic merge or JSON merge patch, only looked at (nothing is
    removed): its directives (``$patch``, ``$setElementOrder/...``) and its nulls (deletions)
    are not fields. Checking the patch instead of the patched object is enough when the
    object it applies to holds known fields only, as every stored object does.
    """
    out = Pruned()
    root = _root(kind_key)
    if root is not None:
        _walk(obj, {"ref": root}, "", root.rsplit(".", 1)[-1], (), out, wrap, patch)
    return out


def _go_convert(value: int, kind: str) -> int:
    """Go's ``reflect.Value.Convert`` of a decoded JSON integer to ``kind`` on amd64: an int64 is
    truncated to the low bits; a larger number was decoded as a float64, which converts to the
    minimum value."""
    if not -(2**63) <= value < 2**63:
        return _INT_RANGES[kind][0]
    bits = 32 if kind == "int32" else 64
    low = value & ((1 << bits) - 1)
    return low - (1 << bits) if low >= 1 << (bits - 1) else low


def _walk(
    value: Any,
    spec: Any,
    path: str,
    struct: str,
    fields: tuple[str, ...],
    out: Pruned,
    wrap: bool,
    patch: bool,
) -> Any:
    """Walks ``value``; returns the value to keep (only ever different for a wrapped number)."""
    if isinstance(spec, str):
        bounds = _INT_RANGES.get(spec)
        if bounds is None:
            return value
        if (
            wrap
            and isinstance(value, int)
            and not isinstance(value, bool)
            and not bounds[0] <= value <= bounds[1]
        ):
            return _go_convert(value, spec)
        if out.range_error is None:
            _check_int(value, spec, bounds, struct, fields, out)
        return value
    if "ref" in spec:
        if not isinstance(value, dict):
            return value
        name: str = spec["ref"]
        props: dict[str, Any] = schema_data()["types"][name]["properties"]
        short = name.rsplit(".", 1)[-1]
        for key in list(value):
            sub = f"{path}.{key}" if path else key
            prop = props.get(key)
            if prop is None:
                if patch:
                    if not key.startswith("$") and value[key] is not None:
                        out.unknown.append(sub)
                    continue
                out.unknown.append(sub)
                del value[key]
                continue
            new = _walk(value[key], prop, sub, short, (*fields, key), out, wrap, patch)
            if not patch:
                value[key] = new
        return value
    if "array" in spec:
        if isinstance(value, list):
            for i, item in enumerate(value):
                new = _walk(item, spec["array"], f"{path}[{i}]", struct, fields, out, wrap, patch)
                if not patch:
                    value[i] = new
        return value
    if "map" in spec and isinstance(value, dict):
        for key, item in value.items():
            new = _walk(item, spec["map"], f"{path}[{key}]", struct, fields, out, wrap, patch)
            if not patch:
                value[key] = new
    return value


def _check_int(
    value: Any, kind: str, bounds: tuple[int, int], struct: str, fields: tuple[str, ...], out: Pruned
) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return
    if isinstance(value, float):
        if value.is_integer() and bounds[0] <= value <= bounds[1]:
            return
        text = repr(value)
    elif bounds[0] <= value <= bounds[1]:
        return
    else:
        text = str(value)
    where = ".".join(fields)
    out.range_error = (
        f"json: cannot unmarshal number {text} into Go struct field {struct}.{where} of type {kind}"
    )


# -- duplicate keys -----------------------------------------------------------------------

# A key in JSON text: a closing quote, then a colon. Strings holding `":` make the count too
# high, never too low, so an equal count proves there are no duplicates.
_KEY = re.compile(rb'"\s*:')


def _count_keys(value: Any) -> int:
    if isinstance(value, dict):
        return len(value) + sum(_count_keys(v) for v in value.values())
    if isinstance(value, list):
        return sum(_count_keys(v) for v in value)
    return 0


class _Pairs(dict[str, Any]):
    """A decoded JSON object that remembers which of its keys came more than once."""

    __slots__ = ("repeated",)

    def __init__(self, pairs: list[tuple[str, Any]]) -> None:
        super().__init__()
        self.repeated: list[str] = []
        for key, value in pairs:
            if key in self and key not in self.repeated:
                self.repeated.append(key)
            self[key] = value


def duplicate_fields(raw: bytes, decoded: Any) -> list[str]:
    """Paths of keys that occur twice in one JSON object of ``raw`` (``decoded`` is its decoding,
    for a quick count first: the slow scan runs only when the text has more keys than it)."""
    if len(_KEY.findall(raw)) <= _count_keys(decoded):
        return []
    try:
        tree = json.loads(raw, object_pairs_hook=_Pairs)
    except (ValueError, RecursionError):
        return []
    out: list[str] = []

    def walk(value: Any, path: str) -> None:
        if isinstance(value, _Pairs):
            out.extend(f"{path}.{k}" if path else k for k in value.repeated)
            for key, item in value.items():
                walk(item, f"{path}.{key}" if path else key)
        elif isinstance(value, list):
            for i, item in enumerate(value):
                walk(item, f"{path}[{i}]")

    walk(tree, "")
    return out
