"""Errors as kube-apiserver words them: each carries the ``Status`` body the real server sends.

Shared by the generic store, the per-kind registries, the field manager and the HTTP front, so
the in-process client and the HTTP one see one vocabulary. A leaf module: it imports no store.
"""

from __future__ import annotations

import json
from typing import Any

from ...errors import BadRequestError, ConflictError, NotFoundError, UnprocessableEntityError, status_body

# Pod status validation words field errors too: one FieldError for both (podstatus.validation).
from ...validation import FieldError

__all__ = [
    "MODIFIED",
    "FieldError",
    "already_exists",
    "bad_request",
    "conflict",
    "delete_conflict",
    "go_json_type",
    "invalid",
    "not_found",
    "unsupported",
]


def _details(resource: str, name: str) -> dict[str, Any]:
    # "leases.coordination.k8s.io": the details name the group apart (none for the core group).
    plural, _, group = resource.partition(".")
    return {"name": name, "group": group, "kind": plural} if group else {"name": name, "kind": plural}


def not_found(resource: str, name: str) -> NotFoundError:
    message = f'{resource} "{name}" not found'
    return NotFoundError(message, status=status_body(404, "NotFound", message, **_details(resource, name)))


def already_exists(resource: str, name: str) -> ConflictError:
    message = f'{resource} "{name}" already exists'
    return ConflictError(
        message,
        reason="AlreadyExists",
        status=status_body(409, "AlreadyExists", message, **_details(resource, name)),
    )


def conflict(resource: str, name: str, why: str) -> ConflictError:
    message = f'Operation cannot be fulfilled on {resource} "{name}": {why}'
    return ConflictError(message, status=status_body(409, "Conflict", message, **_details(resource, name)))


MODIFIED = "the object has been modified; please apply your changes to the latest version and try again"


def bad_request(message: str) -> BadRequestError:
    return BadRequestError(message, status=status_body(400, "BadRequest", message))


def invalid(kind: str, name: str, errors: list[FieldError], group: str = "") -> UnprocessableEntityError:
    text = str(errors[0]) if len(errors) == 1 else "[" + ", ".join(str(e) for e in errors) + "]"
    qualified = f"{kind}.{group}" if group else kind
    message = f'{qualified} "{name}" is invalid: {text}'
    where = {"name": name, "group": group, "kind": kind} if group else {"name": name, "kind": kind}
    body = status_body(422, "Invalid", message, **where, causes=[e.cause() for e in errors])
    return UnprocessableEntityError(message, status=body)


def delete_conflict(kind: str, name: str, why: str) -> ConflictError:
    """A failed delete precondition (rest.BeforeDelete names the kind, not the resource)."""
    message = f'Operation cannot be fulfilled on {kind} "{name}": {why}'
    return ConflictError(message, status=status_body(409, "Conflict", message, name=name, kind=kind))


def unsupported(field: str, value: Any, supported: tuple[str, ...]) -> FieldError:
    """A ``field.NotSupported`` error listing the supported values."""
    values = ", ".join(json.dumps(s) for s in supported)
    return FieldError(field, "Unsupported value", value, f"supported values: {values}")


def go_json_type(value: Any) -> str:
    """The JSON type Go's decoder names in a type error."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"
