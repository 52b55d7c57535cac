"""Patches as kube-apiserver applies them: the patch types, the patch's own decoding, and the
patch engines (:mod:`podstatus.patch`) run on the object's wire form."""

from __future__ import annotations

from typing import Any

import msgspec

from ...errors import UnprocessableEntityError, UnsupportedMediaTypeError, status_body
from ...patch import PatchError, apply_json_merge_patch, apply_json_patch, apply_strategic_merge_patch
from .decoding import (
    APPLY_PATCH,
    JSON_MERGE_PATCH,
    JSON_PATCH,
    PATCH_TYPES,
    STRATEGIC_MERGE_PATCH,
    decode_error,
    mentions_managed_fields,
)
from .errors import bad_request
from .strategy import ResourceInfo

__all__ = ["decode_patch", "patch_kind", "patched"]

_decode = msgspec.json.decode


def patch_kind(patch_type: str) -> str:
    """The patch type a content type (or strategic/merge/json/apply) names; 415 when none."""
    given = patch_type.split(";")[0].strip().lower()
    kind = PATCH_TYPES.get(given)
    if kind is not None:
        return kind
    if given in (APPLY_PATCH, "apply"):
        return APPLY_PATCH
    if patch_type.startswith(APPLY_PATCH):
        message = "server-side apply (application/apply-patch+yaml) is not supported by this server"
        status = status_body(415, "UnsupportedMediaType", message)
    else:
        # As kube-apiserver words it for a patch type it does not know (with empty details).
        message = "415: Unsupported Media Type"
        status = status_body(415, "UnsupportedMediaType", message)
        status["details"] = {}
    raise UnsupportedMediaTypeError(message, status=status)


def decode_patch(patch: Any) -> Any:
    """The patch document (JSON bytes or text decoded; a dict or list as given); 400 when malformed."""
    if isinstance(patch, bytes | bytearray | memoryview | str):
        try:
            return _decode(patch)
        except (msgspec.DecodeError, RecursionError) as err:
            raise bad_request(f"error decoding patch: {decode_error(err)}") from None
    return patch


def patched(
    info: ResourceInfo, base: dict[str, Any], data: Any, kind: str, subresource: str | None
) -> dict[str, Any]:
    """``base`` (a wire dict, not changed) with the patch ``data`` of type ``kind`` applied;
    422 when the patch cannot apply or its result is not an object with metadata."""
    if subresource == "status" and kind != JSON_PATCH:
        # Only metadata and status of the result are used: the patch engine need not
        # copy the spec (the status strategy keeps the stored one).
        base = {k: v for k, v in base.items() if k != "spec"}
    if kind != JSON_PATCH and "managedFields" in base["metadata"] and not mentions_managed_fields(data):
        # Nor the managed fields, which the write keeps (or recomputes) anyway.
        meta = {k: v for k, v in base["metadata"].items() if k != "managedFields"}
        base = dict(base, metadata=meta)
    try:
        if kind == STRATEGIC_MERGE_PATCH:
            if not isinstance(data, dict):
                raise PatchError("a strategic merge patch must be a JSON object")
            result = apply_strategic_merge_patch(base, data, merge_keys=info.merge_keys)
        elif kind == JSON_MERGE_PATCH:
            if not isinstance(data, dict):
                raise PatchError("a JSON merge patch must be a JSON object")
            result = apply_json_merge_patch(base, data)
        else:
            result = apply_json_patch(base, data)
    except PatchError as err:
        message = str(err)
        raise UnprocessableEntityError(message, status=status_body(422, "Invalid", message)) from None
    if not isinstance(result, dict) or not isinstance(result.get("metadata", {}), dict):
        message = "the patched object is not a JSON object with metadata"
        raise UnprocessableEntityError(message, status=status_body(422, "Invalid", message))
    result.setdefault("metadata", {})
    return result
