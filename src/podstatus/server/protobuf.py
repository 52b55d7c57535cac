"""Decoding of Kubernetes protobuf request bodies (``application/vnd.kubernetes.protobuf``).

client-go's clientsets send built-in objects as protobuf and never fall back to JSON
(see docs/design.md, "Protobuf request bodies"), so the embedded server reads them.

The wire form: the 4-byte magic ``k8s\\0``, then a ``runtime.Unknown`` message
(1: typeMeta {1: apiVersion, 2: kind}, 2: raw, 3: contentEncoding, 4: contentType)
whose ``raw`` is the object's generated message. The decoder is driven by a schema,
``podstatus/data/protobuf_schema.json``: per message type, field number ->
``[number, jsonName, kind, flags]``, read from k8s.io/api v0.37.2 by
``tests/clientgo`` (``clientgo schema``; a test keeps the copy current). The result is
the JSON form client-go would have sent (``omitempty`` zero values left out, pointers
kept even when zero, inline structs merged, times as RFC 3339 strings), so the rest of
the server sees one representation.
"""

from __future__ import annotations

import base64
import json
import struct
from collections.abc import Callable
from datetime import UTC, datetime
from functools import cache
from importlib import resources
from typing import Any

import msgspec

__all__ = ["MAGIC", "PROTOBUF", "ProtobufError", "decode", "decode_message"]

PROTOBUF = "application/vnd.kubernetes.protobuf"
MAGIC = b"k8s\x00"
# The served types do not recurse; this guards a recursive type added to the schema later.
_MAX_DEPTH = 64

_VARINT, _FIXED64, _LEN, _FIXED32 = 0, 1, 2, 5
_SCALAR_ZERO: dict[str, Any] = {
    "string": "",
    "int": 0,
    "uint": 0,
    "bool": False,
    "float32": 0.0,
    "float64": 0.0,
}


class ProtobufError(ValueError):
    """The body is not a protobuf-encoded object of a kind this server reads."""


@cache
def _schema() -> dict[str, Any]:
    text = resources.files("podstatus").joinpath("data/protobuf_schema.json").read_text()
    data: dict[str, Any] = json.loads(text)
    return data


# -- the wire ------------------------------------------------------------------------


def _varint(buf: memoryview, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(buf):
            raise ProtobufError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift >= 70:
            raise ProtobufError("varint too long")


def _fields(buf: memoryview) -> list[tuple[int, int, Any]]:
    """(field number, wire type, value) in wire order; LEN values as memoryviews."""
    out: list[tuple[int, int, Any]] = []
    pos, end = 0, len(buf)
    while pos < end:
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        value: Any
        if number == 0:
            raise ProtobufError("field number 0")
        if wire == _VARINT:
            value, pos = _varint(buf, pos)
        elif wire == _FIXED64:
            if pos + 8 > end:
                raise ProtobufError("truncated fixed64")
            value, pos = buf[pos : pos + 8], pos + 8
        elif wire == _LEN:
            size, pos = _varint(buf, pos)
            if pos + size > end:
                raise ProtobufError("truncated length-delimited field")
            value, pos = buf[pos : pos + size], pos + size
        elif wire == _FIXED32:
            if pos + 4 > end:
                raise ProtobufError("truncated fixed32")
            value, pos = buf[pos : pos + 4], pos + 4
        else:
            raise ProtobufError(f"unsupported wire type {wire}")
        out.append((number, wire, value))
    return out


def _signed(value: int) -> int:
    # int32/int64 are two's complement in 64 bits (negative int32s are sign-extended).
    value &= (1 << 64) - 1
    return value - (1 << 64) if value >= 1 << 63 else value


def _text(value: Any) -> str:
    try:
        return bytes(value).decode("utf-8")
    except UnicodeDecodeError:
        raise ProtobufError("a string field is not valid UTF-8") from None


# -- scalar and special values --------------------------------------------------------


def _scalar(kind: str, wire: int, value: Any) -> Any:
    if kind == "string":
        _want(wire, _LEN, kind)
        return _text(value)
    if kind == "int":
        _want(wire, _VARINT, kind)
        return _signed(value)
    if kind == "uint":
        _want(wire, _VARINT, kind)
        return value
    if kind == "bool":
        _want(wire, _VARINT, kind)
        return value != 0
    if kind == "float64":
        _want(wire, _FIXED64, kind)
        return struct.unpack("<d", value)[0]
    if kind == "float32":
        _want(wire, _FIXED32, kind)
        return struct.unpack("<f", value)[0]
    if kind == "bytes":
        _want(wire, _LEN, kind)
        return base64.b64encode(bytes(value)).decode("ascii")
    raise ProtobufError(f"unsupported field kind {kind}")


def _want(wire: int, expected: int, kind: str) -> None:
    if wire != expected:
        raise ProtobufError(f"wire type {wire} for a {kind} field")


def _submessage(buf: memoryview) -> dict[int, Any]:
    # Last one wins, as protobuf merges repeated singular fields.
    return {n: v for n, _w, v in _fields(buf)}


def _time(buf: memoryview, *, micro: bool) -> str | None:
    f = _submessage(buf)
    seconds, nanos = _signed(f.get(1, 0)), _signed(f.get(2, 0))
    if seconds == 0 and nanos == 0:
        return None  # Go's zero time: JSON null
    try:
        when = datetime.fromtimestamp(seconds, UTC)
    except (OverflowError, OSError, ValueError):
        raise ProtobufError(f"timestamp out of range: {seconds}") from None
    if micro:
        return when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{nanos // 1000:06d}Z"
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def _go_duration(nanos: int) -> str:
    """Go's time.Duration.String() form, which metav1.Duration uses in JSON."""
    if nanos == 0:
        return "0s"
    sign = "-" if nanos < 0 else ""
    n = abs(nanos)
    if n < 1_000_000_000:
        for unit, size in (("ms", 1_000_000), ("µs", 1_000), ("ns", 1)):
            if n >= size:
                return sign + _trim(n, size) + unit
    hours, rest = divmod(n, 3_600_000_000_000)
    minutes, rest = divmod(rest, 60_000_000_000)
    text = _trim(rest, 1_000_000_000) + "s"
    if hours or minutes:
        text = f"{minutes}m" + text
    if hours:
        text = f"{hours}h" + text
    return sign + text


def _trim(n: int, unit: int) -> str:
    whole, frac = divmod(n, unit)
    if not frac:
        return str(whole)
    digits = len(str(unit)) - 1
    return f"{whole}." + f"{frac:0{digits}d}".rstrip("0")


def _special(rule: str, wire: int, value: Any) -> Any:
    _want(wire, _LEN, rule)
    if rule == "time":
        return _time(value, micro=False)
    if rule == "microtime":
        return _time(value, micro=True)
    f = _submessage(value)
    if rule == "quantity":
        return _text(f.get(1, b""))
    if rule == "intorstring":
        if f.get(1, 0) == 1:
            return _text(f.get(3, b""))
        return _signed(f.get(2, 0))
    if rule == "duration":
        return _go_duration(_signed(f.get(1, 0)))
    if rule == "rawjson":
        raw = bytes(f.get(1, b""))
        if not raw:
            return None
        try:
            return msgspec.json.decode(raw)
        except (msgspec.DecodeError, RecursionError):
            raise ProtobufError("an embedded raw object is not JSON") from None
    raise ProtobufError(f"unsupported special type {rule}")


# -- messages ------------------------------------------------------------------------


def _value(kind: str, wire: int, value: Any, depth: int) -> Any:
    if kind.startswith("msg:"):
        _want(wire, _LEN, "message")
        return decode_message(kind[4:], value, depth + 1)
    if kind.startswith("special:"):
        return _special(kind[8:], wire, value)
    if kind.startswith("map:"):
        raise ProtobufError("a map inside a map")
    return _scalar(kind, wire, value)


def _map_entry(kind: str, value: Any, depth: int) -> tuple[Any, Any]:
    _, key_kind, value_kind = kind.split(":", 2)
    key: Any = _SCALAR_ZERO.get(key_kind)
    item: Any = _SCALAR_ZERO.get(value_kind)
    for n, w, v in _fields(value):
        if n == 1:
            key = _scalar(key_kind, w, v)
        elif n == 2:
            item = _value(value_kind, w, v, depth)
    if value_kind.startswith("msg:") and item is None:
        item = {}
    return key, item


def _packed(kind: str, buf: memoryview) -> list[Any]:
    out: list[Any] = []
    pos = 0
    if kind in ("int", "uint", "bool"):
        while pos < len(buf):
            v, pos = _varint(buf, pos)
            out.append(_scalar(kind, _VARINT, v))
        return out
    size, wire = (8, _FIXED64) if kind == "float64" else (4, _FIXED32)
    if len(buf) % size:
        raise ProtobufError("truncated packed field")
    return [_scalar(kind, wire, buf[i : i + size]) for i in range(0, len(buf), size)]


def _is_zero(value: Any) -> bool:
    return value is None or value == "" or value == [] or value == {} or value is False or value == 0


def decode_message(type_name: str, buf: memoryview | bytes, depth: int = 0) -> dict[str, Any]:
    """One message of ``type_name`` (a schema type) as its JSON form."""
    if depth > _MAX_DEPTH:
        raise ProtobufError("objects nested too deeply")
    schema = _schema()["types"].get(type_name)
    if schema is None:
        raise ProtobufError(f"no schema for {type_name}")
    view = buf if isinstance(buf, memoryview) else memoryview(buf)
    present: dict[int, Any] = {}
    for number, wire, value in _fields(view):
        spec = schema.get(str(number))
        if spec is None:
            continue  # an unknown field, as Go's decoder skips it
        _num, _name, kind, flags = spec
        if kind == "unsupported":
            raise ProtobufError(f"{type_name} field {number} is not supported")
        if kind.startswith("map:"):
            _want(wire, _LEN, "map entry")
            entries = present.setdefault(number, {})
            key, item = _map_entry(kind, value, depth)
            entries[key] = item
        elif "list" in flags:
            items = present.setdefault(number, [])
            if wire == _LEN and kind in ("int", "uint", "bool", "float32", "float64"):
                items.extend(_packed(kind, value))
            else:
                items.append(_value(kind, wire, value, depth))
        else:
            present[number] = _value(kind, wire, value, depth)
    out: dict[str, Any] = {}
    for number, name, kind, flags in schema.values():
        if number in present:
            value = present[number]
        elif "ptr" in flags or "list" in flags or "omitempty" in flags or kind not in _SCALAR_ZERO:
            continue
        else:
            # Go writes every non-pointer scalar; another encoder may not: Go's JSON would show the zero.
            value = _SCALAR_ZERO[kind]
        if "inline" in flags:
            if isinstance(value, dict):
                out.update(value)
            continue
        if value is None:
            continue
        if "omitempty" in flags and "ptr" not in flags and not kind.startswith("msg:") and _is_zero(value):
            continue
        out[name] = value
    return out


def decode(body: bytes, *, kind_check: Callable[[str, str], None] | None = None) -> dict[str, Any]:
    """A whole request body: magic, ``runtime.Unknown``, object. Raises :class:`ProtobufError`.

    The result carries ``apiVersion`` and ``kind`` from the envelope, first, as JSON does.
    ``kind_check(api_version, kind)`` may refuse the kind before the object is decoded.
    """
    if not body.startswith(MAGIC):
        raise ProtobufError("the body does not start with the Kubernetes protobuf magic")
    envelope = _submessage(memoryview(body)[len(MAGIC) :])
    type_meta = _submessage(envelope.get(1, memoryview(b"")))
    api_version = _text(type_meta.get(1, b""))
    kind = _text(type_meta.get(2, b""))
    if envelope.get(3) and _text(envelope[3]):
        raise ProtobufError(f"content encoding {_text(envelope[3])!r} is not supported")
    if kind_check is not None:
        kind_check(api_version, kind)
    roots = _schema()["roots"]
    type_name = roots.get(f"{api_version}/{kind}")
    if type_name is None and kind == "DeleteOptions":
        # DeleteOptions is registered in every group version; its message is the same.
        type_name = roots["v1/DeleteOptions"]
    if type_name is None:
        raise ProtobufError(f"no kind {kind!r} is registered for version {api_version!r} in this server")
    obj = decode_message(type_name, envelope.get(2, memoryview(b"")))
    return {"kind": kind, "apiVersion": api_version, **obj}
