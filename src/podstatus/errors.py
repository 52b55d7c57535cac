"""Errors podstatus owns.

API errors are keyed by HTTP status code and built from the server's ``Status``
body (see :func:`api_error_from_status`); the HTTP library's own exceptions are
chained, never leaked.
"""

from __future__ import annotations

from typing import Any


class InvalidObjectError(ValueError):
    """An object does not have the Kubernetes wire form; the message names the field path."""

    def __init__(self, message: str, *, path: str = "") -> None:
        super().__init__(message)
        self.path = path


class ApiError(Exception):
    """An error answered by (or on the way to) a Kubernetes API server."""

    default_code: int = 500
    default_reason: str = ""

    def __init__(
        self,
        message: str,
        *,
        code: int | None = None,
        reason: str | None = None,
        retry_after: float | None = None,
        status: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = self.default_code if code is None else code
        self.reason = self.default_reason if reason is None else reason
        # Seconds the server asked us to wait (Retry-After header or Status details).
        self.retry_after = retry_after
        # The server's Status body, when there was one.
        self.status = status

    def __str__(self) -> str:
        if self.reason:
            return f"{self.message} (code {self.code}, reason {self.reason})"
        return f"{self.message} (code {self.code})"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r}, code={self.code}, reason={self.reason!r})"


class ClientError(ApiError):
    """A 4xx answer."""

    default_code = 400
    default_reason = "BadRequest"


class ServerError(ApiError):
    """A 5xx answer."""

    default_code = 500
    default_reason = "InternalError"


class BadRequestError(ClientError):
    default_code = 400
    default_reason = "BadRequest"


class UnauthorizedError(ClientError):
    default_code = 401
    default_reason = "Unauthorized"


class ForbiddenError(ClientError):
    default_code = 403
    default_reason = "Forbidden"


class NotFoundError(ClientError):
    default_code = 404
    default_reason = "NotFound"

    def __init__(self, message: str, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)


class MethodNotAllowedError(ClientError):
    default_code = 405
    default_reason = "MethodNotAllowed"


class ConflictError(ClientError):
    default_code = 409
    default_reason = "Conflict"

    def __init__(self, message: str, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)


class GoneError(ClientError):
    """410: a watch's resourceVersion is too old."""

    default_code = 410
    default_reason = "Expired"


class RequestEntityTooLargeError(ClientError):
    default_code = 413
    default_reason = "RequestEntityTooLarge"


class UnsupportedMediaTypeError(ClientError):
    default_code = 415
    default_reason = "UnsupportedMediaType"


class UnprocessableEntityError(ClientError):
    default_code = 422
    default_reason = "Invalid"


class TooManyRequestsError(ClientError):
    default_code = 429
    default_reason = "TooManyRequests"


class InternalServerError(ServerError):
    default_code = 500
    default_reason = "InternalError"


class ServiceUnavailableError(ServerError):
    default_code = 503
    default_reason = "ServiceUnavailable"


class ServerTimeoutError(ServerError):
    default_code = 504
    default_reason = "Timeout"


class ConnectionFailedError(ApiError):
    """The request never got an answer: connection refused or reset, DNS, TLS."""

    default_code = 0
    default_reason = "ConnectionFailed"


class RequestTimeoutError(ApiError):
    """The client gave up waiting for an answer."""

    default_code = 0
    default_reason = "Timeout"


_BY_CODE: dict[int, type[ApiError]] = {
    400: BadRequestError,
    401: UnauthorizedError,
    403: ForbiddenError,
    404: NotFoundError,
    405: MethodNotAllowedError,
    409: ConflictError,
    410: GoneError,
    413: RequestEntityTooLargeError,
    415: UnsupportedMediaTypeError,
    422: UnprocessableEntityError,
    429: TooManyRequestsError,
    500: InternalServerError,
    503: ServiceUnavailableError,
    504: ServerTimeoutError,
}


def error_class_for_code(code: int) -> type[ApiError]:
    cls = _BY_CODE.get(code)
    if cls is not None:
        return cls
    if 400 <= code < 500:
        return ClientError
    if code >= 500:
        return ServerError
    return ApiError


def api_error_from_status(
    code: int, body: Any, *, retry_after: float | None = None, default_message: str = ""
) -> ApiError:
    """Build the matching :class:`ApiError` from an HTTP code and a decoded ``Status`` body."""
    message = default_message or f"HTTP {code}"
    reason = None
    status: dict[str, Any] | None = None
    if isinstance(body, dict) and body.get("kind") == "Status":
        status = body
        message = str(body.get("message") or message)
        reason = body.get("reason") or None
        code = int(body.get("code") or code)
        details = body.get("details")
        if retry_after is None and isinstance(details, dict) and details.get("retryAfterSeconds"):
            retry_after = float(details["retryAfterSeconds"])
    cls = error_class_for_code(code)
    return cls(message, code=code, reason=reason, retry_after=retry_after, status=status)


def status_body(code: int, reason: str, message: str, **details: Any) -> dict[str, Any]:
    """A ``Status`` object as the API server sends it with an error."""
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if details:
        body["details"] = details
    return body
