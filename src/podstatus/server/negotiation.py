"""Request parameters the embedded server reads as kube-apiserver does.

- ``Accept``: the server answers JSON only (tables are JSON too). An ``Accept`` that
  admits no JSON (``application/vnd.kubernetes.protobuf`` alone, ``text/html``...) gets
  406 NotAcceptable with the real server's ``Status``; ``application/json`` anywhere in
  the list (with any parameters, such as ``;as=Table``), ``application/*`` or ``*/*`` is
  enough. A media range with ``q=0`` does not count.
- Write options (``dryRun``, ``fieldValidation``): checked as ``ValidateCreateOptions``
  and its siblings check them (422 on ``CreateOptions.meta.k8s.io`` and so on).
- Integer query parameters: Go's ``strconv.ParseInt`` (no spaces, no underscores, int64
  range), with its error text in a 400.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ..errors import UnprocessableEntityError, status_body
from .store import FIELD_VALIDATION, FieldError, WriteOptions, bad_request

__all__ = ["SERVED_TYPES", "check_accept", "parse_int64", "write_options"]

# What this server can answer with (the real one also serves YAML and protobuf).
SERVED_TYPES = ("application/json",)
# Paths where the answer's media type is negotiated (health checks answer text whatever is asked).
_NEGOTIATED = ("/api", "/apis", "/openapi")


def _acceptable(media_range: str) -> bool:
    kind, _, params = media_range.partition(";")
    kind = kind.strip().lower()
    for param in params.split(";"):
        name, _, value = param.partition("=")
        if name.strip().lower() == "q":
            try:
                if float(value.strip()) <= 0:
                    return False
            except ValueError:
                return False
    return kind in ("*/*", "application/*", "application/json")


def check_accept(path: str, accept: str) -> dict[str, Any] | None:
    """None when the answer can be JSON; otherwise the 406 ``Status`` to send."""
    if not accept.strip() or not path.startswith(_NEGOTIATED):
        return None
    if any(_acceptable(r) for r in accept.split(",")):
        return None
    message = "only the following media types are accepted: " + ", ".join(SERVED_TYPES)
    return status_body(406, "NotAcceptable", message)


_INT = re.compile(r"[+-]?[0-9]+")


def parse_int64(text: str) -> int:
    """Go's ``strconv.ParseInt(text, 10, 64)``; a failure is the 400 the real server sends."""
    if not _INT.fullmatch(text):
        raise bad_request(f'strconv.ParseInt: parsing "{text}": invalid syntax')
    value = int(text)
    if not -(2**63) <= value < 2**63:
        raise bad_request(f'strconv.ParseInt: parsing "{text}": value out of range')
    return value


def write_options(query: Mapping[str, str], kind: str) -> WriteOptions:
    """``dryRun`` and ``fieldValidation`` of a create/update/patch (``kind``: CreateOptions,
    UpdateOptions, PatchOptions); without ``fieldValidation`` the real server warns."""
    errors: list[FieldError] = []
    dry = query.get("dryRun")
    if dry is not None and dry != "All":
        errors.append(FieldError("dryRun", "Unsupported value", [dry], 'supported values: "All"'))
    validation = query.get("fieldValidation", "")
    if validation not in ("", *FIELD_VALIDATION):
        supported = ", ".join(f'"{v}"' for v in sorted(("", *FIELD_VALIDATION)))
        errors.append(
            FieldError("fieldValidation", "Unsupported value", validation, f"supported values: {supported}")
        )
    if errors:
        raise invalid_options(kind, errors)
    return WriteOptions(field_validation=validation or "Warn", dry_run=dry == "All")


def invalid_options(kind: str, errors: list[FieldError]) -> UnprocessableEntityError:
    """422 for bad request options (the kind is meta.k8s.io's CreateOptions, DeleteOptions...)."""
    text = str(errors[0]) if len(errors) == 1 else "[" + ", ".join(str(e) for e in errors) + "]"
    message = f'{kind}.meta.k8s.io "" is invalid: {text}'
    body = status_body(
        422, "Invalid", message, group="meta.k8s.io", kind=kind, causes=[e.cause() for e in errors]
    )
    return UnprocessableEntityError(message, status=body)
