"""Request bodies: which media types the embedded server reads, and how.

JSON is passed on as bytes (the store decodes it once); a protobuf body is decoded
to its JSON form (:mod:`.protobuf`). Anything else is 415, and the 415's message
lists exactly what this server reads — client-go and kubectl show it to people.
"""

from __future__ import annotations

import logging
from typing import Any

import msgspec

from ..errors import ApiError, status_body
from . import protobuf
from .store import bad_request

__all__ = ["ACCEPTED", "decode_object", "decode_options"]

log = logging.getLogger(__name__)

_JSON = "application/json"
ACCEPTED = (_JSON, protobuf.PROTOBUF)


def _media_type(content_type: str) -> str:
    return content_type.split(";")[0].strip().lower()


def _unsupported() -> ApiError:
    # kube-apiserver's wording, with this server's list.
    message = "the body of the request was in an unknown format - accepted media types include: " + ", ".join(
        ACCEPTED
    )
    return ApiError(message, code=415, reason="UnsupportedMediaType",
                    status=status_body(415, "UnsupportedMediaType", message))  # fmt: skip


def decode_object(content_type: str, body: bytes) -> bytes | dict[str, Any]:
    """An object body for create/update: JSON bytes as sent, or a decoded protobuf body."""
    media = _media_type(content_type)
    if media in ("", _JSON, "*/*"):
        return body
    if media == protobuf.PROTOBUF:
        try:
            return protobuf.decode(body)
        except protobuf.ProtobufError as err:
            log.debug("undecodable protobuf body", extra={"error": str(err), "size": len(body)})
            raise bad_request(f"the body of the request is not a valid protobuf object: {err}") from None
    raise _unsupported()


def decode_options(content_type: str, body: bytes, what: str) -> dict[str, Any] | None:
    """An options-like body (DeleteOptions, Eviction, Binding) as a dict; None when empty."""
    if not body.strip():
        return None
    decoded = decode_object(content_type, body)
    if isinstance(decoded, dict):
        return decoded
    try:
        obj = msgspec.json.decode(decoded)
    except (msgspec.DecodeError, RecursionError) as err:
        raise bad_request(f"invalid {what}: {err}") from None
    if not isinstance(obj, dict):
        raise bad_request(f"invalid {what}: not a JSON object")
    return obj
