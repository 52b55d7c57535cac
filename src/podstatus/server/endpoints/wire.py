"""What every endpoint speaks: :class:`Request` and :class:`Response`, the Status errors, and the
small parsers of a request's query (the HTTP front turns bytes into these and back)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import msgspec

from ...errors import ApiError, status_body
from .. import discovery, negotiation
from ..proxy import Takeover

__all__ = [
    "JSON",
    "MAX_BODY_BYTES",
    "NOT_ALLOWED",
    "NOT_FOUND",
    "PUBLIC_PATHS",
    "TABLE_TYPE",
    "Request",
    "Response",
    "as_yaml",
    "flag",
    "int_param",
    "is_apply",
    "read_only",
    "status_error",
    "wants_table",
    "warning_value",
]

encode = msgspec.json.encode

# What anyone may GET without a token (kube-apiserver's ClusterRole system:public-info-viewer).
PUBLIC_PATHS = frozenset({"/healthz", "/livez", "/readyz", "/version", "/version/"})
# The real API server's limit on request bodies.
MAX_BODY_BYTES = 3 * 1024 * 1024
JSON = "application/json"
TABLE_TYPE = "application/json;as=Table;v=v1;g=meta.k8s.io"
WATCH_TYPES = "only the following media types are accepted: application/json;stream=watch"
NOT_FOUND = "the server could not find the requested resource"
NOT_ALLOWED = "the server does not allow this method on the requested resource"


@dataclass(slots=True)
class Request:
    """One HTTP request, as the API logic sees it."""

    method: str
    path: str
    query: dict[str, str] = field(default_factory=dict)
    # Header names in lower case.
    headers: Mapping[str, str] = field(default_factory=dict)
    body: bytes = b""
    # The query as sent (``query`` keeps one value per name; exec's ``command`` has several).
    raw_query: str = ""

    def header(self, name: str, default: str = "") -> str:
        return self.headers.get(name.lower(), default)


@dataclass(slots=True)
class Response:
    """What to answer. ``stream`` makes a chunked body (watch); ``abort`` resets the connection."""

    status: int
    body: bytes = b""
    content_type: str = JSON
    headers: dict[str, str] = field(default_factory=dict)
    stream: Iterator[bytes] | None = None
    abort: bool = False
    # One ``Warning: 299 - "..."`` header each (unknown fields under fieldValidation=Warn).
    warnings: list[str] = field(default_factory=list)
    # The connection is handed to this after dispatch (an upgraded stream relayed to a kubelet).
    takeover: Takeover | None = None
    # The stream never blocks: an empty chunk means "nothing now", and the front asks again
    # once the store changed (a watch served on an event loop); else each step may block.
    stream_polls: bool = False

    @classmethod
    def json(cls, status: int, data: Any) -> Response:
        return cls(status, encode(data))

    @classmethod
    def error(cls, err: ApiError) -> Response:
        body = err.status or status_body(err.code, err.reason, err.message)
        return cls(err.code or 500, encode(body))


def status_error(code: int, reason: str, message: str) -> Response:
    return Response(code, encode(status_body(code, reason, message)))


def as_yaml(response: Response) -> Response:
    """The answer in YAML (objects, lists, errors); a watch has no YAML stream: 406 (in YAML), as
    kube-apiserver answers, naming the stream types it has."""
    if response.stream is not None:
        close = getattr(response.stream, "close", None)
        if close is not None:
            close()
        response = status_error(406, "NotAcceptable", WATCH_TYPES)
    if response.abort or response.content_type != JSON or not response.body:
        return response
    response.body = negotiation.to_yaml(response.body)
    response.content_type = negotiation.YAML
    return response


def flag(value: str | None) -> bool | None:
    if value is None:
        return None
    return value.lower() in ("1", "true", "yes")


def is_apply(req: Request) -> bool:
    return req.header("content-type").split(";")[0].strip().lower() == "application/apply-patch+yaml"


def int_param(query: Mapping[str, str], name: str) -> int | None:
    """An int64 query parameter, parsed as the real server parses it (Go's strconv.ParseInt)."""
    value = query.get(name)
    if value is None or value == "":
        return None
    return negotiation.parse_int64(value)


def warning_value(text: str) -> str:
    """A ``Warning`` header value as the real server writes it (code 299, agent ``-``)."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    # Header values are latin-1 and single-line; anything else is escaped away.
    safe = (
        escaped.encode("latin-1", "backslashreplace").decode("latin-1").replace("\r", " ").replace("\n", " ")
    )
    return f'299 - "{safe}"'


def read_only(req: Request, data: Any) -> Response:
    """``data`` to a GET; 405 to any other method."""
    if req.method != "GET":
        return status_error(405, "MethodNotAllowed", NOT_ALLOWED)
    return Response.json(200, data)


def wants_table(req: Request, resource: str) -> bool:
    """Whether the client asked for a Table (``kubectl get``) of a resource that has columns."""
    accept = req.header("accept")
    return "as=Table" in accept and discovery.has_table(resource)
