"""What goes over the wire to an API server: its paths, its answers decoded, its errors mapped.

Shared by :mod:`~podstatus.clients.http` (requests) and
:mod:`~podstatus.clients.watch` (watch streams); every failure becomes a
:class:`podstatus.ApiError` subclass, the library's exception chained (STYLE 5).
"""

from __future__ import annotations

import email.utils
import ssl
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

import msgspec
from urllib3.exceptions import (
    ConnectTimeoutError,
    EmptyPoolError,
    NewConnectionError,
    ReadTimeoutError,
    SSLError,
)

from ..errors import (
    ApiError,
    ConnectionFailedError,
    InvalidObjectError,
    RequestTimeoutError,
    api_error_from_status,
)
from ..types import Pod
from .transport import CannotConnectError, NoFreeConnectionError

__all__ = [
    "connection_error",
    "decode_object",
    "decode_pod",
    "event_path",
    "http_error",
    "lease_path",
    "never_sent",
    "node_path",
    "parse_retry_after",
    "pod_path",
    "pods_path",
    "with_resource_version",
]

_json_decode = msgspec.json.decode
_json_encode = msgspec.json.encode


def _q(segment: str) -> str:
    return quote(segment, safe="")


def pod_path(namespace: str, name: str) -> str:
    return f"/api/v1/namespaces/{_q(namespace)}/pods/{_q(name)}"


def pods_path(namespace: str | None) -> str:
    return "/api/v1/pods" if namespace is None else f"/api/v1/namespaces/{_q(namespace)}/pods"


def node_path(name: str) -> str:
    return f"/api/v1/nodes/{_q(name)}"


def lease_path(namespace: str, name: str | None = None) -> str:
    path = f"/apis/coordination.k8s.io/v1/namespaces/{_q(namespace)}/leases"
    return path if name is None else f"{path}/{_q(name)}"


def event_path(namespace: str, name: str | None = None) -> str:
    path = f"/api/v1/namespaces/{_q(namespace)}/events"
    return path if name is None else f"{path}/{_q(name)}"


def parse_retry_after(value: str | None) -> float | None:
    """Seconds from a ``Retry-After`` header (delta seconds or an HTTP date); ``None`` if absent or bad."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def connection_error(exc: BaseException, method: str, path: str) -> ApiError:
    """The podstatus error for a transport, urllib3 or socket failure (the caller chains ``exc``)."""
    where = f"{method} {path}"
    if isinstance(exc, NewConnectionError | CannotConnectError):
        return ConnectionFailedError(f"{where}: cannot connect: {exc}")
    if isinstance(exc, EmptyPoolError | NoFreeConnectionError):
        return RequestTimeoutError(f"{where}: no free connection in the pool: {exc}")
    if isinstance(exc, ReadTimeoutError | ConnectTimeoutError | TimeoutError):
        return RequestTimeoutError(f"{where}: timed out: {exc}")
    if isinstance(exc, SSLError | ssl.SSLError):
        return ConnectionFailedError(f"{where}: TLS error: {exc}")
    return ConnectionFailedError(f"{where}: connection failed: {exc}")


def never_sent(exc: BaseException) -> bool:
    """A failure before the request left: no connection, or a server certificate not trusted.

    Only these are retried after a kubeconfig reload; a reset may come after the server
    acted, and the caller owns that retry.
    """
    if isinstance(exc, NewConnectionError | CannotConnectError | ssl.SSLCertVerificationError):
        return True
    if isinstance(exc, SSLError):
        cause = exc.args[0] if exc.args else None
        return isinstance(cause, ssl.SSLCertVerificationError) or "CERTIFICATE_VERIFY_FAILED" in str(exc)
    return False


def http_error(
    status: int, reason: str | None, headers: Any, data: bytes, method: str, path: str
) -> ApiError:
    """The podstatus error for a non-2xx answer, from its ``Status`` body when it has one."""
    content_type = str(headers.get("Content-Type", ""))
    body: Any = None
    if "json" in content_type and data:
        try:
            body = _json_decode(data)
        except msgspec.DecodeError:
            body = None
    message = f"{method} {path}: HTTP {status} {reason or ''}".rstrip()
    if not isinstance(body, dict) and data:
        text = data[:200].decode("utf-8", "replace").strip()
        if text:
            message = f"{message}: {text}"
    return api_error_from_status(
        status, body, retry_after=parse_retry_after(headers.get("Retry-After")), default_message=message
    )


def decode_pod(data: bytes, method: str, path: str, status: int) -> Pod:
    try:
        return Pod.from_json(data)
    except InvalidObjectError as exc:
        raise ApiError(
            f"{method} {path}: invalid pod in the answer: {exc}", code=status, reason="InvalidResponse"
        ) from exc


def decode_object(data: bytes, method: str, path: str, status: int) -> dict[str, Any]:
    try:
        obj = _json_decode(data)
    except msgspec.DecodeError as exc:
        raise ApiError(
            f"{method} {path}: malformed JSON in the answer: {exc}", code=status, reason="InvalidResponse"
        ) from exc
    if not isinstance(obj, dict):
        raise ApiError(
            f"{method} {path}: expected a JSON object in the answer", code=status, reason="InvalidResponse"
        )
    return obj


def with_resource_version(patch: bytes, resource_version: str) -> bytes:
    """The patch with ``metadata.resourceVersion`` set (an optimistic-concurrency precondition)."""
    try:
        doc = _json_decode(patch)
    except msgspec.DecodeError as exc:
        raise InvalidObjectError(f"invalid patch: malformed JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise InvalidObjectError("invalid patch: expected a JSON object")
    meta = doc.get("metadata")
    if meta is None:
        doc["metadata"] = {"resourceVersion": resource_version}
    elif isinstance(meta, dict):
        meta["resourceVersion"] = resource_version
    else:
        raise InvalidObjectError("invalid patch: metadata must be an object", path="metadata")
    return _json_encode(doc)
