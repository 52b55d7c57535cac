"""What the real server's decoder does to a write's body: the object's own copy, its kind and
version, numbers out of range, unknown and duplicate fields (``fieldValidation``), and the
patch types. Nothing here knows a kind: the field manager's schema does.
"""

from __future__ import annotations

import builtins
import json
from typing import Any

import msgspec

from ...errors import BadRequestError, UnprocessableEntityError, status_body
from ..fieldmanager import schema
from .errors import FieldError, bad_request
from .objects import WriteOptions
from .strategy import ResourceInfo

__all__ = [
    "APPLY_PATCH",
    "JSON_MERGE_PATCH",
    "JSON_PATCH",
    "PATCH_TYPES",
    "STRATEGIC_MERGE_PATCH",
    "check_namespace",
    "decode_body",
    "decode_error",
    "decode_patched",
    "kind_key",
    "mentions_managed_fields",
    "private_copy",
]

_encode = msgspec.json.encode
_decode = msgspec.json.decode

STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
JSON_MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"
PATCH_TYPES = {
    STRATEGIC_MERGE_PATCH: STRATEGIC_MERGE_PATCH,
    "strategic": STRATEGIC_MERGE_PATCH,
    JSON_MERGE_PATCH: JSON_MERGE_PATCH,
    "merge": JSON_MERGE_PATCH,
    JSON_PATCH: JSON_PATCH,
    "json": JSON_PATCH,
}


def decode_error(err: Exception) -> str:
    # msgspec gives up on deeply nested JSON with a RecursionError (Go's decoder has a depth limit too).
    return "exceeded max depth" if isinstance(err, RecursionError) else str(err)


def mentions_managed_fields(patch: Any) -> bool:
    meta = patch.get("metadata") if isinstance(patch, dict) else None
    return isinstance(meta, dict) and "managedFields" in meta


def kind_key(info: ResourceInfo) -> str:
    return f"{getattr(info, 'api_version', 'v1')}/{info.kind}"


def _cannot_handle(info: ResourceInfo, why: str) -> BadRequestError:
    api_version = getattr(info, "api_version", "v1")
    version = api_version.rsplit("/", 1)[-1]
    return bad_request(f'{info.kind} in version "{version}" cannot be handled as a {info.kind}: {why}')


def _strict_message(problems: builtins.list[str]) -> str:
    return "strict decoding error: " + ", ".join(problems)


def _strict_problems(raw: Any, unknown: builtins.list[str], options: WriteOptions) -> builtins.list[str]:
    """The strict decoding errors (keys given twice in the raw JSON first, then unknown fields)."""
    if options.field_validation == "Ignore":
        return []
    problems = []
    if isinstance(raw, bytes | bytearray | memoryview | str):
        data = raw.encode() if isinstance(raw, str) else bytes(raw)
        try:
            # A fresh decoding: the one the caller holds may have been changed since.
            decoded = _decode(data)
        except (msgspec.DecodeError, RecursionError):
            decoded = None
        if decoded is not None:
            problems = [f'duplicate field "{p}"' for p in schema.duplicate_fields(data, decoded)]
    return problems + [f'unknown field "{p}"' for p in unknown]


def decode_body(info: ResourceInfo, obj: dict[str, Any], options: WriteOptions, raw: Any = None) -> None:
    """What the real server's decoder does to a create or update body (in place): a number out
    of its field's range is a 400; unknown fields are dropped and, like keys given twice in the
    ``raw`` JSON, refused or warned about as ``options.field_validation`` says."""
    found = schema.prune(kind_key(info), obj)
    if found.range_error:
        raise _cannot_handle(info, found.range_error)
    problems = _strict_problems(raw, found.unknown, options)
    if problems:
        if options.field_validation == "Strict":
            raise _cannot_handle(info, _strict_message(problems))
        options.warnings.extend(problems)


def _go_repr(value: Any) -> str:
    """Go's ``%+v`` of a decoded JSON value (how the real server quotes a strategic merge patch)."""
    if isinstance(value, dict):
        return "map[" + " ".join(f"{k}:{_go_repr(value[k])}" for k in sorted(value)) + "]"
    if isinstance(value, list):
        return "[" + " ".join(_go_repr(v) for v in value) + "]"
    if value is None:
        return "<nil>"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _invalid_patch(detail: str, quoted: str) -> UnprocessableEntityError:
    """The real server's answer to a patch whose result does not decode (no kind, no name)."""
    err = FieldError("patch", "Invalid value", quoted, detail)
    message = f' "" is invalid: {err}'
    body = status_body(422, "Invalid", message, causes=[err.cause()])
    return UnprocessableEntityError(message, status=body)


def decode_patched(
    info: ResourceInfo,
    result: dict[str, Any],
    patch: Any,
    kind: str,
    options: WriteOptions,
    *,
    wrap: bool,
    raw: Any = None,
) -> None:
    """As :func:`decode_body`, for the result of a patch: failures are 422s on the field ``patch``
    (quoting the patch for a strategic merge patch, the patched object otherwise). ``wrap``:
    out-of-range integers of a strategic merge patch are converted as the real server does
    (silently, see schema.prune) instead of refused."""
    # Keys given twice in the patch itself (the real server decodes it strictly first).
    duplicates = _strict_problems(raw, [], options)
    if kind != JSON_PATCH and isinstance(patch, dict):
        # Stored objects hold known fields only: when the patch brings no unknown field and no
        # out-of-range number, neither does the result (and the whole object need not be walked).
        probe = schema.prune(kind_key(info), patch, patch=True)
        if not probe.unknown and probe.range_error is None and not duplicates:
            return
    found = schema.prune(kind_key(info), result, wrap=wrap and kind == STRATEGIC_MERGE_PATCH)
    problems = duplicates + _strict_problems(None, found.unknown, options)
    if not found.range_error and (not problems or options.field_validation != "Strict"):
        options.warnings.extend(problems)
        return
    quoted = _go_repr(patch) if kind == STRATEGIC_MERGE_PATCH else json.dumps(result, separators=(",", ":"))
    raise _invalid_patch(found.range_error or _strict_message(problems), quoted)


# --- the store -----------------------------------------------------------------------


# kube-apiserver v1.37.2's watch cache (k8s.io/apiserver pkg/storage/cacher): a resource keeps at


def private_copy(body: Any, info: ResourceInfo) -> dict[str, Any]:
    if isinstance(body, bytes | bytearray | memoryview | str):
        try:
            body = _decode(body)
        except (msgspec.DecodeError, RecursionError) as err:
            raise bad_request(f"the body of the request is not valid JSON: {decode_error(err)}") from None
        obj = body
    elif callable(getattr(body, "to_dict", None)):
        # A typed object (a Pod): its wire dict, freshly made.
        obj = body.to_dict()
    elif isinstance(body, dict):
        # Our own copy: the caller's dict is never changed or kept.
        try:
            obj = _decode(_encode(body))
        except RecursionError as err:
            raise bad_request(f"the body of the request is not valid JSON: {decode_error(err)}") from None
    else:
        obj = body
    if not isinstance(obj, dict):
        raise bad_request(f"the body of the request must be a JSON object, not {type(obj).__name__}")
    kind = obj.get("kind")
    if kind not in (None, "", info.kind):
        raise bad_request(
            f'{info.kind} in version "{info.version}" cannot be handled as a {info.kind}: wrong kind {kind!r}'
        )
    api_version = obj.get("apiVersion")
    if api_version not in (None, "", info.api_version):
        raise bad_request(
            f'{info.kind} in version "{info.version}" cannot be handled as a {info.kind}: '
            f"unsupported apiVersion {api_version!r}"
        )
    obj["kind"] = info.kind
    obj["apiVersion"] = info.api_version
    meta = obj.get("metadata")
    if meta is None:
        meta = obj["metadata"] = {}
    if not isinstance(meta, dict):
        raise bad_request(
            f'{info.kind} in version "v1" cannot be handled as a {info.kind}: metadata must be an object'
        )
    return obj


def check_namespace(info: ResourceInfo, namespace: str | None, meta: dict[str, Any]) -> None:
    if info.namespaced:
        given = meta.get("namespace")
        if given and given != namespace:
            raise bad_request(
                "the namespace of the provided object does not match the namespace sent on the request"
            )
        meta["namespace"] = namespace
    else:
        meta.pop("namespace", None)
