"""Go's decoding of wire fields, for the kinds whose strategies type-check their bodies by hand
(nodes, leases, events): Go's ``time.Parse`` of Time and MicroTime, the JSON decoder's type
errors (answered with 400), object references, and field-selector getters.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from ..storage.errors import bad_request, go_json_type

__all__ = [
    "MICRO_FORMAT",
    "MICRO_LAYOUT",
    "REF_FIELDS",
    "Decoder",
    "TimeError",
    "format_micro_time",
    "meta_field",
    "nested_field",
    "reference",
    "source",
    "top_field",
]

# metav1.RFC3339Micro, as Go's layout and as strftime.
MICRO_LAYOUT = "2006-01-02T15:04:05.000000Z07:00"
MICRO_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"
_TIME_LAYOUT = "2006-01-02T15:04:05Z07:00"

# --- Go's time.Parse, for the two layouts the API uses ------------------------------

# (layout element, digits) in order; digits 0 means a literal.
_ELEMENTS = (
    ("2006", 4), ("-", 0), ("01", 2), ("-", 0), ("02", 2), ("T", 0),
    ("15", 2), (":", 0), ("04", 2), (":", 0), ("05", 2),
)  # fmt: skip
_ZONE = re.compile(r"^(Z|[+-]\d\d:\d\d)")


class TimeError(ValueError):
    pass


def parse_go_time(value: str, *, micro: bool) -> datetime:
    """``time.Parse(layout, value)`` for RFC3339 (``micro`` False) or RFC3339Micro, with Go's
    error text (``parsing time "..." as "...": cannot parse "..." as "..."``)."""
    layout = MICRO_LAYOUT if micro else _TIME_LAYOUT
    rest = value

    def fail(elem: str) -> TimeError:
        return TimeError(f'parsing time "{value}" as "{layout}": cannot parse "{rest}" as "{elem}"')

    numbers: list[int] = []
    for elem, digits in _ELEMENTS:
        if digits:
            chunk = rest[:digits]
            if len(chunk) < digits or not chunk.isdigit():
                raise fail(elem)
            numbers.append(int(chunk))
            rest = rest[digits:]
        else:
            if not rest.startswith(elem):
                raise fail(elem)
            rest = rest[len(elem) :]
    micros = 0
    if micro:
        # A fixed ".000000" takes exactly six digits.
        chunk = rest[:7]
        if len(chunk) < 7 or chunk[0] != "." or not chunk[1:].isdigit():
            raise fail(".000000")
        micros = int(chunk[1:])
        rest = rest[7:]
    elif rest.startswith(".") or rest.startswith(","):
        # Go accepts a fraction after the seconds even when the layout has none.
        end = 1
        while end < len(rest) and rest[end].isdigit():
            end += 1
        if end > 1:
            micros = int((rest[1:end] + "000000")[:6])
            rest = rest[end:]
    zone = _ZONE.match(rest)
    if zone is None:
        raise fail("Z07:00")
    tz = zone.group(1)
    if rest[len(tz) :]:
        raise TimeError(f'parsing time "{value}": extra text: "{rest[len(tz) :]}"')
    year, month, day, hour, minute, second = numbers
    try:
        when = datetime(year, month, day, hour, minute, second, micros, tzinfo=UTC)
    except ValueError:
        what = "month" if not 1 <= month <= 12 else "day"
        raise TimeError(f'parsing time "{value}": {what} out of range') from None
    if tz != "Z":
        sign = 1 if tz[0] == "+" else -1
        when -= sign * timedelta(hours=int(tz[1:3]), minutes=int(tz[4:6]))
    return when


def format_micro_time(when: datetime) -> str:
    """A MicroTime as the server prints it (UTC, six fraction digits)."""
    return when.astimezone(UTC).strftime(MICRO_FORMAT)


def format_time(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# --- decoding checks (the real server answers these with 400) ------------------------


class Decoder:
    """Type checks of a body as Go's JSON decoder does them, for one kind."""

    def __init__(self, kind: str) -> None:
        self.kind = kind

    def fail(self, message: str) -> Exception:
        return bad_request(f'{self.kind} in version "v1" cannot be handled as a {self.kind}: {message}')

    def type_error(self, value: Any, struct: str, path: str, go_type: str) -> Exception:
        return self.fail(
            f"json: cannot unmarshal {go_json_type(value)} into Go struct field "
            f"{struct}.{path} of type {go_type}"
        )

    def string(self, obj: dict[str, Any], key: str, struct: str, path: str) -> None:
        value = obj.get(key)
        if value is not None and not isinstance(value, str):
            raise self.type_error(value, struct, path, "string")

    def int32(self, obj: dict[str, Any], key: str, struct: str, path: str) -> None:
        value = obj.get(key)
        if value is None:
            return
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.type_error(value, struct, path, "int32")
        if isinstance(value, float) and not value.is_integer():
            raise self.fail(
                f"json: cannot unmarshal number {value} into Go struct field {struct}.{path} of type int32"
            )
        if not -(2**31) <= value < 2**31:
            raise self.fail(
                f"json: cannot unmarshal number {int(value)} into Go struct field {struct}.{path} "
                "of type int32"
            )
        obj[key] = int(value)

    def time(self, obj: dict[str, Any], key: str, *, micro: bool) -> None:
        """Parse and normalise a Time (whole seconds) or MicroTime field in place."""
        value = obj.get(key)
        if value is None:
            obj[key] = None
            return
        if not isinstance(value, str):
            go_type = "v1.MicroTime" if micro else "v1.Time"
            raise self.fail(f"json: cannot unmarshal {go_json_type(value)} into Go value of type {go_type}")
        try:
            when = parse_go_time(value, micro=micro)
        except TimeError as err:
            raise self.fail(str(err)) from None
        obj[key] = format_micro_time(when) if micro else format_time(when)

    def struct(self, obj: dict[str, Any], key: str, struct: str, path: str, go_type: str) -> dict[str, Any]:
        value = obj.get(key)
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise self.type_error(value, struct, path, go_type)
        return dict(value)


REF_FIELDS = ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath")


def reference(dec: Decoder, value: dict[str, Any], path: str) -> dict[str, Any]:
    for key in REF_FIELDS:
        dec.string(value, key, "ObjectReference", f"{path}.{key}")
    return {k: value[k] for k in REF_FIELDS if value.get(k)}


def source(dec: Decoder, value: dict[str, Any], path: str) -> dict[str, Any]:
    for key in ("component", "host"):
        dec.string(value, key, "EventSource", f"{path}.{key}")
    return {k: value[k] for k in ("component", "host") if value.get(k)}


# --- field selectors ---------------------------------------------------------------------


def top_field(key: str) -> Callable[[Any], str]:
    def get(obj: Any) -> str:
        value = obj.get(key)
        return "" if value is None else str(value)

    return get


def nested_field(section: str, key: str) -> Callable[[Any], str]:
    def get(obj: Any) -> str:
        sub = obj.get(section)
        value = sub.get(key) if isinstance(sub, dict) else None
        return "" if value is None else str(value)

    return get


def meta_field(key: str) -> Callable[[Any], str]:
    return nested_field("metadata", key)
