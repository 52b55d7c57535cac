"""Decoded JSON values as Go's apimachinery sees them: copies, kinds, equality, ``%v`` strings.

Strategic merge patch compares and sorts values the way Go does after decoding JSON into
``interface{}``, so ``True != 1`` and ``1 != 1.0`` here, unlike in Python.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from decimal import Decimal
from typing import Any

try:  # msgspec is a project dependency; the fallback only keeps this module importable alone.
    import msgspec as _msgspec
except ImportError:  # pragma: no cover
    _msgspec = None  # type: ignore[assignment]

JSON = Any


class PatchError(ValueError):
    """A patch is malformed or cannot be applied; the API server maps it to 400/422."""


def clone(v: JSON) -> JSON:
    # Much faster than copy.deepcopy for JSON trees, which is all we ever hold.
    if isinstance(v, dict):
        return {k: clone(x) for k, x in v.items()}
    if isinstance(v, list):
        return [clone(x) for x in v]
    return v


def kind_of(v: JSON, *, go: bool = True) -> str:
    # apimachinery decodes JSON into nil/bool/int64/float64/string/map/slice (integral
    # literals become int64, others float64) and compares with reflect; Python's bool is
    # an int, so classify explicitly. go=False gives plain JSON kinds (1 == 1.0).
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, int):
        return "int" if go else "number"
    if isinstance(v, float):
        return "float" if go else "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, dict):
        return "object"
    if isinstance(v, list):
        return "array"
    return type(v).__name__


def json_equal(a: JSON, b: JSON, *, go: bool = True) -> bool:
    """Deep equality: Go's reflect.DeepEqual on decoded JSON (True != 1, and 1 != 1.0
    unless ``go`` is false, which gives RFC 6902's numeric equality)."""
    ka = kind_of(a, go=go)
    if ka != kind_of(b, go=go):
        return False
    if ka == "object":
        return a.keys() == b.keys() and all(json_equal(a[k], b[k], go=go) for k in a)
    if ka == "array":
        return len(a) == len(b) and all(json_equal(x, y, go=go) for x, y in zip(a, b))
    return bool(a == b)


def go_string(v: JSON) -> str:
    """``fmt.Sprintf("%v", v)`` for decoded JSON scalars: the diff sorts merge keys by it."""
    if isinstance(v, str):
        return v
    if v is None:
        return "<nil>"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)  # decoded as int64
    if isinstance(v, float):
        return _go_float(v)
    return json.dumps(v, sort_keys=True)


def _go_float(f: float) -> str:
    # %v of a float64 is strconv's shortest 'g' with exponent threshold 6 (1e+06, 123456).
    if f == 0:
        return "0"
    sign, digits, exp = Decimal(repr(f)).normalize().as_tuple()
    if not isinstance(exp, int):  # inf/nan: not JSON, any stable string will do
        return repr(f)
    ds = "".join(map(str, digits))
    e10 = len(ds) + exp - 1
    neg = "-" if sign else ""
    if e10 < -4 or e10 >= 6:
        mant = ds[0] + ("." + ds[1:] if len(ds) > 1 else "")
        return f"{neg}{mant}e{'-' if e10 < 0 else '+'}{abs(e10):02d}"
    return neg + format(Decimal(repr(abs(f))).normalize(), "f")


_encode: Callable[[Any], bytes]
if _msgspec is not None:
    _encode = _msgspec.json.encode
else:  # pragma: no cover

    def _encode(obj: Any) -> bytes:
        return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


def encode_patch(patch: dict[str, Any]) -> bytes:
    """Compact JSON bytes of a patch (request body)."""
    return _encode(patch)
