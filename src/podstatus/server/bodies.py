"""Request bodies: which media types the embedded server reads, and how.

JSON is passed on as bytes (the store decodes it once); a protobuf body is decoded
to its JSON form (:mod:`.protobuf`); YAML is read as JSON-compatible data (no
aliases, no implicit timestamps). Anything else is 415, and the 415's message
lists exactly what this server reads, which is what kube-apiserver reads.
"""

from __future__ import annotations

import logging
from typing import Any

import msgspec
import yaml

from ..errors import ApiError, status_body
from . import protobuf
from .storage.errors import bad_request

__all__ = ["ACCEPTED", "decode_object", "decode_options"]

log = logging.getLogger(__name__)

_JSON = "application/json"
_YAML = "application/yaml"
# In kube-apiserver's order: its 415 lists them so.
ACCEPTED = (_JSON, _YAML, protobuf.PROTOBUF)


class _JsonYamlLoader(yaml.SafeLoader):
    """YAML as JSON-compatible data: timestamps stay strings, and aliases are refused
    (a few bytes of aliases expand to gigabytes once written out as JSON)."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            raise yaml.YAMLError("YAML aliases are not supported")
        return super().compose_node(parent, index)


_JsonYamlLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def _from_yaml(body: bytes) -> Any:
    try:
        return yaml.load(body, Loader=_JsonYamlLoader)  # a SafeLoader subclass
    except (yaml.YAMLError, RecursionError) as err:
        raise bad_request(f"the body of the request is not valid YAML: {err}") from None


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
    """An object body for create/update: JSON bytes (as sent, or from YAML), or a decoded protobuf body."""
    media = _media_type(content_type)
    if media in ("", _JSON, "*/*"):
        return body
    if media == _YAML:
        obj = _from_yaml(body)
        # The store reads JSON: one encode keeps its single path (and its errors) for both.
        try:
            return msgspec.json.encode(obj)
        except (TypeError, msgspec.EncodeError) as err:
            raise bad_request(f"the body of the request is not valid YAML for JSON: {err}") from None
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
