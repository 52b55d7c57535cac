"""Request parameters the embedded server reads as kube-apiserver does.

- ``Accept``: the server answers JSON (tables are JSON too) or, under ``/api`` and
  ``/apis``, YAML (``application/yaml``: objects, lists and errors, as kube-apiserver
  serves them; a watch streams JSON only). The media ranges are taken by ``q`` (highest
  first, then in the client's order) and the first this server serves wins; ``*/*`` and
  ``application/*`` mean JSON. An ``Accept`` that admits neither
  (``application/vnd.kubernetes.protobuf`` alone, ``text/html``...) gets 406
  NotAcceptable with the real server's ``Status``. A media range with ``q=0`` does not count.
- Write options (``dryRun``, ``fieldValidation``): checked as ``ValidateCreateOptions``
  and its siblings check them (422 on ``CreateOptions.meta.k8s.io`` and so on).
- Integer query parameters: Go's ``strconv.ParseInt`` (no spaces, no underscores, int64
  range), with its error text in a 400.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import msgspec
import yaml

from ..errors import UnprocessableEntityError, status_body
from .storage.errors import FieldError, bad_request
from .storage.objects import FIELD_VALIDATION, WriteOptions

__all__ = [
    "JSON",
    "SERVED_TYPES",
    "YAML",
    "check_accept",
    "negotiate",
    "parse_int64",
    "to_yaml",
    "write_options",
]

JSON = "application/json"
YAML = "application/yaml"
# What this server can answer with (the real one also serves protobuf).
SERVED_TYPES = (JSON, YAML)
# Paths where the answer's media type is negotiated (health checks answer text whatever is asked).
_NEGOTIATED = ("/api", "/apis", "/openapi")
# Paths whose answers may be YAML (kube-apiserver's OpenAPI handlers serve JSON and protobuf only).
_YAML_PATHS = ("/api/", "/apis/")


def _ranges(accept: str) -> list[tuple[str, float]]:
    """The media ranges of an ``Accept`` header with their ``q``, highest first (stable)."""
    out: list[tuple[str, float]] = []
    for media_range in accept.split(","):
        kind, _, params = media_range.partition(";")
        quality = 1.0
        for param in params.split(";"):
            name, _, value = param.partition("=")
            if name.strip().lower() == "q":
                try:
                    quality = float(value.strip())
                except ValueError:
                    quality = 0.0
        if quality > 0 and kind.strip():
            out.append((kind.strip().lower(), quality))
    out.sort(key=lambda item: -item[1])
    return out


def negotiate(path: str, accept: str) -> str | dict[str, Any]:
    """The media type to answer with (``JSON`` or ``YAML``), or the 406 ``Status`` to send."""
    if not accept.strip() or not path.startswith(_NEGOTIATED):
        return JSON
    yaml_ok = path.startswith(_YAML_PATHS) or path in ("/api", "/apis")
    for kind, _ in _ranges(accept):
        if kind in ("*/*", "application/*", JSON):
            return JSON
        if kind == YAML and yaml_ok:
            return YAML
    served = SERVED_TYPES if yaml_ok else (JSON,)
    return status_body(
        406, "NotAcceptable", "only the following media types are accepted: " + ", ".join(served)
    )


def check_accept(path: str, accept: str) -> dict[str, Any] | None:
    """None when the answer can be JSON or YAML; otherwise the 406 ``Status`` to send."""
    chosen = negotiate(path, accept)
    return chosen if isinstance(chosen, dict) else None


class _GoYamlDumper(yaml.SafeDumper):
    """YAML laid out as Go's sigs.k8s.io/yaml writes it: block style, sorted keys, lists flush with
    their key, lines folded at 80 columns, single quotes where a plain scalar cannot be written and
    double quotes for a string that would read as another type (a timestamp, a number)."""

    def choose_scalar_style(self) -> Any:
        style = super().choose_scalar_style()
        event = self.event
        if style == "'" and isinstance(event, yaml.ScalarEvent) and not event.implicit[0]:
            return '"'
        return style


def _str_presenter(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    # Multi-line strings as literal blocks, as go-yaml writes them (PyYAML falls back to quotes
    # where a block cannot hold the value).
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|" if "\n" in value else None)


_GoYamlDumper.add_representer(str, _str_presenter)


def to_yaml(body: bytes) -> bytes:
    """A JSON document as YAML (kube-apiserver's YAML serializer converts its JSON likewise)."""
    data = msgspec.json.decode(body)
    text = yaml.dump(data, Dumper=_GoYamlDumper, default_flow_style=False, sort_keys=True, allow_unicode=True)
    return text.encode()


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
