"""The embedded API server's HTTP front end (stdlib ``ThreadingHTTPServer``, HTTP/1.1 keep-alive).

Every request becomes a :class:`Request` and goes through one callable,
``EmbeddedApiServer.dispatch`` (by default :meth:`ApiHandler.handle`), which
returns a :class:`Response`. A fault-injection layer can replace ``dispatch`` with
a wrapper that delays, fails, answers with a conflict or asks for a connection
reset (``Response(abort=True)``), without touching the API logic.
"""

from __future__ import annotations

import base64
import contextlib
import heapq
import io
import itertools
import logging
import re
import select
import signal
import socket
import ssl
import struct
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, cast
from urllib.parse import parse_qsl, urlsplit

import msgspec

from ..errors import ApiError, GoneError, status_body
from ..requestcount import RequestCounter
from ..tls import TlsMaterial, generate_tls, server_context, write_private
from . import bodies, discovery, metricsapi, negotiation, reviews, security
from .audit import AuditLog
from .fieldmanager import options as fieldoptions
from .fieldmanager import schema
from .proxy import KubeletClientConfig, KubeletProxy, Takeover
from .registry.pods import bind, evict, eviction_options
from .storage.errors import FieldError, bad_request
from .storage.objects import Event, Stored
from .storage.store import Store
from .storage.strategy import RESOURCES
from .storage.watch import Watch

__all__ = [
    "MAX_BODY_BYTES",
    "ApiHandler",
    "EmbeddedApiServer",
    "Request",
    "Response",
    "serve",
]

log = logging.getLogger(__name__)

_encode = msgspec.json.encode

# What anyone may GET without a token (kube-apiserver's ClusterRole system:public-info-viewer).
PUBLIC_PATHS = frozenset({"/healthz", "/livez", "/readyz", "/version", "/version/"})
# The real API server's limit on request bodies.
MAX_BODY_BYTES = 3 * 1024 * 1024
_JSON = "application/json"
# How often an idle watch checks whether its client left or the server is stopping.
_POLL_SECONDS = 1.0
# Connection limits. kube-apiserver's http.Server: ReadHeaderTimeout 32 s (TLS handshake and
# request headers), IdleTimeout 90 s (between keep-alive requests). It has no cap on
# connections (Go's goroutines are cheap); here each connection holds a thread, so there is one.
DEFAULT_MAX_CONNECTIONS = 4096
DEFAULT_HEADER_TIMEOUT = 32.0
DEFAULT_IDLE_TIMEOUT = 90.0


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
    content_type: str = _JSON
    headers: dict[str, str] = field(default_factory=dict)
    stream: Iterator[bytes] | None = None
    abort: bool = False
    # One ``Warning: 299 - "..."`` header each (unknown fields under fieldValidation=Warn).
    warnings: list[str] = field(default_factory=list)
    # The connection is handed to this after dispatch (an upgraded stream relayed to a kubelet).
    takeover: Takeover | None = None

    @classmethod
    def json(cls, status: int, data: Any) -> Response:
        return cls(status, _encode(data))

    @classmethod
    def error(cls, err: ApiError) -> Response:
        body = err.status or status_body(err.code, err.reason, err.message)
        return cls(err.code or 500, _encode(body))


def _status_error(code: int, reason: str, message: str) -> Response:
    return Response(code, _encode(status_body(code, reason, message)))


def _as_yaml(response: Response) -> Response:
    """The answer in YAML (objects, lists, errors); a watch has no YAML stream: 406 (in YAML), as
    kube-apiserver answers, naming the stream types it has."""
    if response.stream is not None:
        close = getattr(response.stream, "close", None)
        if close is not None:
            close()
        response = _status_error(406, "NotAcceptable", _WATCH_TYPES)
    if response.abort or response.content_type != _JSON or not response.body:
        return response
    response.body = negotiation.to_yaml(response.body)
    response.content_type = negotiation.YAML
    return response


# The subresources kube-apiserver relays to the pod's node, and the paths that reach them.
_POD_STREAMS = frozenset({"log", "exec", "attach", "portforward"})
_KUBELET_PATH = re.compile(
    r"^/api/v1/(namespaces/[^/]+/pods/[^/]+/(log|exec|attach|portforward)|nodes/[^/]+/proxy(/.*)?)$"
)
_WATCH_TYPES = "only the following media types are accepted: application/json;stream=watch"
_NOT_FOUND = "the server could not find the requested resource"
_NOT_ALLOWED = "the server does not allow this method on the requested resource"


def _flag(value: str | None) -> bool | None:
    if value is None:
        return None
    return value.lower() in ("1", "true", "yes")


def _is_apply(req: Request) -> bool:
    return req.header("content-type").split(";")[0].strip().lower() == "application/apply-patch+yaml"


def _int_param(query: Mapping[str, str], name: str) -> int | None:
    """An int64 query parameter, parsed as the real server parses it (Go's strconv.ParseInt)."""
    value = query.get(name)
    if value is None or value == "":
        return None
    return negotiation.parse_int64(value)


class ApiHandler:
    """The API logic: routes a :class:`Request` to the store and renders the answer."""

    def __init__(
        self,
        store: Store,
        *,
        server_address: Callable[[], str] = lambda: "127.0.0.1:0",
        counter: RequestCounter | None = None,
        stopping: threading.Event | None = None,
        bookmark_interval: float = 60.0,
        default_watch_timeout: float = 1800.0,
        kubelet_client: KubeletClientConfig | None = None,
    ) -> None:
        self.store = store
        # pods/log, exec, attach, portforward and nodes/proxy go to the nodes' kubelets.
        self.kubelet = KubeletProxy(store, kubelet_client)
        self.metrics = metricsapi.MetricsApi(store, self.kubelet)
        self.counter = counter if counter is not None else RequestCounter()
        self._server_address = server_address
        self._stopping = stopping if stopping is not None else threading.Event()
        self.bookmark_interval = bookmark_interval
        self.default_watch_timeout = default_watch_timeout
        # Who a request was authenticated as (the server that checks tokens sets this).
        self.user_of: Callable[[Request], dict[str, Any]] = lambda request: reviews.ANONYMOUS

    def __call__(self, request: Request) -> Response:
        return self.handle(request)

    def handle(self, request: Request) -> Response:
        if _KUBELET_PATH.match(request.path):
            # A kubelet's answer is whatever the kubelet sends: no JSON/YAML negotiation.
            return self._handle(request)
        media = negotiation.negotiate(request.path, request.header("accept"))
        if isinstance(media, dict):
            return Response(406, _encode(media))
        response = self._handle(request)
        return _as_yaml(response) if media == negotiation.YAML else response

    def _handle(self, request: Request) -> Response:
        try:
            return self._route(request)
        except ApiError as err:
            return Response.error(err)
        except Exception as err:
            log.exception("internal error serving %s %s", request.method, request.path)
            return _status_error(500, "InternalError", f"Internal error occurred: {err}")

    # -- routing -----------------------------------------------------------------------

    def _route(self, req: Request) -> Response:
        parts = [p for p in req.path.split("/") if p]
        if not parts:
            return Response.json(
                200, {"paths": ["/api", "/api/v1", "/apis", "/openapi/v2", "/openapi/v3", "/version"]}
            )
        head = parts[0]
        if head == "api":
            if len(parts) == 1:
                return self._read_only(req, discovery.api_versions(self._server_address()))
            if parts[1] != "v1":
                return _status_error(404, "NotFound", _NOT_FOUND)
            if len(parts) == 2:
                return self._read_only(req, discovery.api_resource_list())
            return self._resource(req, parts[2:])
        if head == "apis" and len(parts) == 1:
            return self._read_only(req, discovery.api_group_list())
        if head == "apis":
            return self._group(req, parts[1:])
        if head == "version" and len(parts) == 1:
            return self._read_only(req, discovery.version_info())
        if head in ("healthz", "livez", "readyz"):
            return Response(200, b"ok", content_type="text/plain; charset=utf-8")
        if head == "openapi" and parts[1:] == ["v2"]:
            return self._read_only(req, discovery.openapi_v2_document())
        if head == "openapi" and len(parts) >= 2 and parts[1] == "v3":
            if req.method != "GET":
                return _status_error(405, "MethodNotAllowed", _NOT_ALLOWED)
            if len(parts) == 2:
                return Response.json(200, discovery.openapi_v3_root())
            doc = discovery.openapi_v3_document_bytes("/".join(parts[2:]))
            if doc is not None:
                return Response(200, doc)
        return _status_error(404, "NotFound", _NOT_FOUND)

    @staticmethod
    def _read_only(req: Request, data: Any) -> Response:
        if req.method != "GET":
            return _status_error(405, "MethodNotAllowed", _NOT_ALLOWED)
        return Response.json(200, data)

    def _group(self, req: Request, parts: list[str]) -> Response:
        """``/apis/GROUP[/VERSION[/...]]``: the API groups beside the core one."""
        group = parts[0]
        if group == metricsapi.GROUP:
            return self._metrics(req, parts[1:])
        if len(parts) == 1:
            found = discovery.api_group(group)
            return self._read_only(req, found) if found else _status_error(404, "NotFound", _NOT_FOUND)
        resources = discovery.group_resource_list(group, parts[1])
        if resources is None:
            return _status_error(404, "NotFound", _NOT_FOUND)
        if len(parts) == 2:
            return self._read_only(req, resources)
        if (group, parts[2]) in reviews.REVIEWS:
            return self._review(req, group, parts[2:])
        return self._resource(req, parts[2:], group)

    def _metrics(self, req: Request, parts: list[str]) -> Response:
        """``/apis/metrics.k8s.io[/v1beta1[/...]]``: what metrics-server would answer."""
        if not parts:
            return self._read_only(req, {"kind": "APIGroup", "apiVersion": "v1", **metricsapi.api_group()})
        if parts[0] != metricsapi.VERSION:
            return _status_error(404, "NotFound", _NOT_FOUND)
        if len(parts) == 1:
            return self._read_only(req, metricsapi.resource_list())
        code, body = self.metrics.handle(req.method, parts[1:], req.query)
        return Response.json(code, body)

    def _kubelet(self, req: Request, resource: str, namespace: str | None, parts: list[str]) -> Response:
        """pods/log, pods/exec|attach|portforward and nodes/NAME/proxy/...: relayed to the node."""
        name, sub = parts[1], parts[2]
        if resource == "nodes":
            # The path after .../proxy as sent, trailing slash and all.
            marker = f"/nodes/{name}/proxy"
            rest = req.path[req.path.index(marker) + len(marker) :]
            status, headers, relay = self.kubelet.node_proxy(
                req.method, name, rest, req.raw_query, req.headers, req.body
            )
            if not isinstance(relay, Iterator):
                return Response(status, takeover=relay)
            ctype = headers.pop("Content-Type", headers.pop("content-type", "text/plain"))
            return Response(status, content_type=ctype, headers=headers, stream=relay)
        if sub == "log":
            if req.method != "GET":
                return _status_error(405, "MethodNotAllowed", _NOT_ALLOWED)
            _, stream = self.kubelet.pod_log(namespace or "", name, req.query)
            return Response(200, content_type="text/plain", stream=stream)
        if req.method not in ("GET", "POST"):
            return _status_error(405, "MethodNotAllowed", _NOT_ALLOWED)
        takeover = self.kubelet.pod_stream(sub, req.method, namespace or "", name, req.raw_query, req.headers)
        return Response(101, takeover=takeover)

    def _review(self, req: Request, group: str, parts: list[str]) -> Response:
        """``kubectl auth whoami`` / ``can-i``: a create that stores nothing (see :mod:`.reviews`)."""
        if len(parts) != 1:
            return _status_error(404, "NotFound", _NOT_FOUND)
        if req.method != "POST":
            return _status_error(405, "MethodNotAllowed", _NOT_ALLOWED)
        self.counter.inc("create")
        body = bodies.decode_object(req.header("content-type"), req.body)
        done = reviews.review(group, parts[0], body, req.headers, self.user_of(req))
        return Response.json(201, done)

    def _resource(self, req: Request, parts: list[str], group: str = "") -> Response:
        watch_path = False
        if parts[0] == "watch":
            watch_path = True
            parts = parts[1:]
        namespace: str | None = None
        if len(parts) >= 3 and parts[0] == "namespaces":
            namespace = parts[1]
            parts = parts[2:]
        resource = (f"{parts[0]}.{group}" if group else parts[0]) if parts else ""
        if (
            not group
            and len(parts) >= 3
            and ((resource == "pods" and namespace is not None and len(parts) == 3 and parts[2] in _POD_STREAMS)
                 or (resource == "nodes" and namespace is None and parts[2] == "proxy"))
        ):  # fmt: skip
            return self._kubelet(req, resource, namespace, parts)
        if resource not in RESOURCES or len(parts) > 3:
            return _status_error(404, "NotFound", _NOT_FOUND)
        info = RESOURCES[resource]
        if info.namespaced and namespace is None and len(parts) > 1:
            return _status_error(404, "NotFound", _NOT_FOUND)
        if not info.namespaced and namespace is not None:
            return _status_error(404, "NotFound", _NOT_FOUND)
        name = parts[1] if len(parts) > 1 else None
        sub = parts[2] if len(parts) > 2 else None
        method = req.method
        applying = method == "PATCH" and _is_apply(req)
        manager: str | None = None
        if method in ("POST", "PUT", "PATCH"):
            given = req.query.get("fieldManager")
            fieldoptions.validate_field_manager(method, given, apply=applying, force=req.query.get("force"))
            manager = fieldoptions.manager_or_user_agent(given, req.header("user-agent"))
        if watch_path or (name is None and method == "GET" and _flag(req.query.get("watch"))):
            if method != "GET":
                return _status_error(405, "MethodNotAllowed", _NOT_ALLOWED)
            if name is not None:
                # /watch/.../pods/NAME: a watch of one object.
                req.query["fieldSelector"] = ",".join(
                    s for s in (req.query.get("fieldSelector"), f"metadata.name={name}") if s
                )
            return self._watch(req, resource, namespace)
        if name is None:
            if method == "GET":
                return self._list(req, resource, namespace)
            if method == "POST" and info.namespaced == (namespace is not None):
                self.counter.inc("create")
                options = negotiation.write_options(req.query, "CreateOptions")
                stored = self.store.create(
                    resource, namespace, self._json_body(req), options=options, field_manager=manager
                )
                return Response(201, stored.raw, warnings=options.warnings)
            if method == "DELETE" and resource != "namespaces":
                return self._delete_collection(req, resource, namespace)
            return _status_error(405, "MethodNotAllowed", _NOT_ALLOWED)
        if sub is not None:
            if sub == "binding" and resource == "pods" and method == "POST":
                return self._bind(req, namespace or "", name)
            if sub == "eviction" and resource == "pods" and method == "POST":
                return self._evict(req, namespace or "", name)
            if (sub != "status" or not info.has_status) and not (sub == "resize" and resource == "pods"):
                # As kube-apiserver answers for a subresource it does not serve (empty details).
                body = status_body(404, "NotFound", _NOT_FOUND)
                body["details"] = {}
                return Response.json(404, body)
            if method not in ("GET", "PUT", "PATCH"):
                return _status_error(405, "MethodNotAllowed", _NOT_ALLOWED)
        if method == "GET":
            self.counter.inc("get")
            stored = self.store.get(resource, namespace, name)
            return self._object(req, resource, stored)
        if method == "PUT":
            self.counter.inc("update")
            options = negotiation.write_options(req.query, "UpdateOptions")
            stored = self.store.update(
                resource, namespace, name, self._json_body(req), subresource=sub, options=options,
                field_manager=manager,
            )  # fmt: skip
            return Response(200, stored.raw, warnings=options.warnings)
        if method == "PATCH":
            self.counter.inc("patch")
            if applying:
                options = negotiation.write_options(req.query, "PatchOptions")
                stored, created = self.store.apply(
                    resource, namespace, name, req.body, field_manager=manager, subresource=sub,
                    force=bool(_flag(req.query.get("force"))), options=options,
                )  # fmt: skip
                return Response(201 if created else 200, stored.raw, warnings=options.warnings)
            ctype = req.header("content-type") or "application/strategic-merge-patch+json"
            options = negotiation.write_options(req.query, "PatchOptions")
            stored = self.store.patch(
                resource, namespace, name, req.body, ctype, subresource=sub, options=options,
                field_manager=manager,
            )  # fmt: skip
            return Response(200, stored.raw, warnings=options.warnings)
        if method == "DELETE":
            self.counter.inc("delete")
            return self._delete(req, resource, namespace, name)
        return _status_error(405, "MethodNotAllowed", _NOT_ALLOWED)

    @staticmethod
    def _json_body(req: Request) -> Any:
        """The request's object: JSON bytes as sent, or a protobuf body decoded to its JSON form."""
        return bodies.decode_object(req.header("content-type"), req.body)

    # -- reads -------------------------------------------------------------------------

    @staticmethod
    def _wants_table(req: Request, resource: str) -> bool:
        accept = req.header("accept")
        return "as=Table" in accept and discovery.has_table(resource)

    def _object(self, req: Request, resource: str, stored: Stored) -> Response:
        if self._wants_table(req, resource):
            data = discovery.table(
                resource, [stored], stored.rv, include_object=req.query.get("includeObject", ""),
                now=self.store.now(),
            )  # fmt: skip
            return Response(200, _encode(data), content_type=_TABLE_TYPE)
        return Response(200, stored.raw)

    def _list(self, req: Request, resource: str, namespace: str | None) -> Response:
        self.counter.inc("list")
        q = req.query
        limit = _int_param(q, "limit")
        token = q.get("continue") or None
        if token and q.get("resourceVersion") not in (None, "", "0"):
            raise bad_request("specifying resource version is not allowed when using continue")
        exact: int | None = None
        if not token:
            self._wait_for_resource_version(q.get("resourceVersion"))
            # An exact read: asked for, or (the legacy form) a limit with a resourceVersion.
            wanted, match = q.get("resourceVersion"), q.get("resourceVersionMatch")
            if wanted not in (None, "", "0") and (match == "Exact" or (not match and limit and limit > 0)):
                exact = int(str(wanted))
        page = self.store.list_page(
            resource,
            namespace,
            label_selector=q.get("labelSelector"),
            field_selector=q.get("fieldSelector"),
            limit=limit,
            continue_token=token,
            exact_resource_version=exact,
        )
        items, rv = page.items, page.rv
        if self._wants_table(req, resource):
            data = discovery.table(
                resource, items, rv, include_object=req.query.get("includeObject", ""), now=self.store.now()
            )
            if page.continue_token:
                data["metadata"]["continue"] = page.continue_token
                if page.remaining is not None:
                    data["metadata"]["remainingItemCount"] = page.remaining
            return Response(200, _encode(data), content_type=_TABLE_TYPE)
        info = RESOURCES[resource]
        # Items are stored encoded: the list is a join, not a re-encode.
        body = b"".join(
            (
                b'{"kind":"',
                info.list_kind.encode(),
                b'","apiVersion":"',
                info.api_version.encode(),
                b'","metadata":{"resourceVersion":"',
                str(rv).encode(),
                b'"',
                _list_meta_extra(page.continue_token, page.remaining),
                b'},"items":[',
                b",".join(s.raw for s in items),
                b"]}",
            )
        )
        return Response(200, body)

    def _wait_for_resource_version(self, value: str | None) -> None:
        """A read at a resourceVersion newer than the store's waits for it up to 3 s (the watch
        cache's blockTimeout), then answers 504 "Too large resource version"."""
        if value in (None, "", "0"):
            return
        try:
            wanted = int(str(value))
        except ValueError:
            raise bad_request(f'invalid resource version "{value}"') from None
        if not self.store.wait_for_resource_version(wanted, _TOO_NEW_WAIT_SECONDS):
            raise _too_large_resource_version(wanted, self.store.resource_version)

    def _watch(self, req: Request, resource: str, namespace: str | None) -> Response:
        self.counter.inc("watch")
        q = req.query
        if _flag(q.get("sendInitialEvents")):
            # A watch-list waits for the store to reach its resourceVersion; past the wait the
            # stream carries one ERROR event. A plain watch from a future resourceVersion just
            # waits for the events after it, as on the real server.
            try:
                self._wait_for_resource_version(q.get("resourceVersion"))
            except ApiError as err:
                if err.code != 504:
                    raise
                line = b'{"type":"ERROR","object":' + _encode(err.status) + b"}\n"
                return Response(200, stream=iter([line]))
        try:
            watch = self.store.watch(
                resource,
                namespace,
                resource_version=q.get("resourceVersion"),
                label_selector=q.get("labelSelector"),
                field_selector=q.get("fieldSelector"),
                send_initial_events=_flag(q.get("sendInitialEvents")),
            )
        except GoneError as err:
            # As kube-apiserver's watch cache (newErrWatcher): 200, one ERROR event, the end.
            body = err.status or status_body(410, "Expired", err.message)
            return Response(200, stream=iter([b'{"type":"ERROR","object":' + _encode(body) + b"}\n"]))
        timeout = _int_param(q, "timeoutSeconds")
        table = self._wants_table(req, resource)
        stream = self._watch_stream(
            watch,
            resource,
            timeout=float(timeout) if timeout is not None else self.default_watch_timeout,
            bookmarks=bool(_flag(q.get("allowWatchBookmarks"))),
            table=table,
            include_object=q.get("includeObject", ""),
        )
        return Response(200, content_type=_TABLE_TYPE if table else _JSON, stream=stream)

    def _watch_stream(
        self,
        watch: Watch,
        resource: str,
        *,
        timeout: float,
        bookmarks: bool,
        table: bool,
        include_object: str,
    ) -> Iterator[bytes]:
        """Event lines; an empty chunk now and then lets the writer notice a departed client."""
        deadline = time.monotonic() + timeout
        last_bookmark = time.monotonic()
        first = True
        kind = RESOURCES[resource].kind
        api_version = RESOURCES[resource].api_version
        try:
            while True:
                if watch.initial_events_end_pending and not watch.in_initial_events:
                    watch.initial_events_end_pending = False
                    if bookmarks:
                        yield self._bookmark(
                            kind, watch.resource_version, initial_end=True, api_version=api_version
                        )
                        last_bookmark = time.monotonic()
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self._stopping.is_set():
                    return
                try:
                    event = watch.next(timeout=min(remaining, _POLL_SECONDS))
                except GoneError as err:
                    body = err.status or status_body(410, "Expired", err.message)
                    yield b'{"type":"ERROR","object":' + _encode(body) + b"}\n"
                    return
                if event is None:
                    if self.store.closed:
                        return
                    if bookmarks and time.monotonic() - last_bookmark >= self.bookmark_interval:
                        yield self._bookmark(kind, watch.resource_version, api_version=api_version)
                        last_bookmark = time.monotonic()
                    else:
                        yield b""
                    continue
                yield self._event_line(event, resource, table, include_object, first)
                first = False
        finally:
            watch.close()

    def _event_line(
        self, event: Event, resource: str, table: bool, include_object: str, first: bool
    ) -> bytes:
        if table:
            data = discovery.table(
                resource, [event.stored], event.rv, include_object=include_object or "PartialObjectMetadata",
                now=self.store.now(), with_columns=first,
            )  # fmt: skip
            obj = _encode(data)
        else:
            obj = event.stored.raw
        return b'{"type":"' + event.type.encode() + b'","object":' + obj + b"}\n"

    @staticmethod
    def _bookmark(kind: str, rv: int, *, initial_end: bool = False, api_version: str = "v1") -> bytes:
        meta: dict[str, Any] = {"resourceVersion": str(rv), "creationTimestamp": None}
        if initial_end:
            meta["annotations"] = {"k8s.io/initial-events-end": "true"}
        obj = {"kind": kind, "apiVersion": api_version, "metadata": meta}
        return _encode({"type": "BOOKMARK", "object": obj}) + b"\n"

    # -- deletes -----------------------------------------------------------------------

    @staticmethod
    def _delete_options(req: Request) -> tuple[int | None, str | None, str | None, bool]:
        """Grace period, preconditions and dry run: from the body (JSON, YAML or protobuf) when
        there is one, else from the query (the real server reads one or the other, never both)."""
        opts = bodies.decode_options(req.header("content-type"), req.body, "DeleteOptions")
        if opts is None:
            dry = req.query.get("dryRun")
            if dry is not None and dry != "All":
                raise _bad_dry_run([dry])
            return _int_param(req.query, "gracePeriodSeconds"), None, None, dry == "All"
        found = schema.prune("v1/DeleteOptions", dict(opts))
        if found.range_error:
            raise bad_request(found.range_error)
        dry_run = opts.get("dryRun") or []
        if not isinstance(dry_run, list) or any(v != "All" for v in dry_run):
            raise _bad_dry_run(dry_run)
        return (*_parse_delete_options(opts, None), bool(dry_run))

    def _delete(self, req: Request, resource: str, namespace: str | None, name: str) -> Response:
        grace, uid, rv, dry_run = self._delete_options(req)
        stored, gone = self.store.delete(
            resource,
            namespace,
            name,
            grace_period_seconds=grace,
            uid=uid,
            resource_version=rv,
            dry_run=dry_run,
        )
        info = RESOURCES[resource]
        if gone and info.name != "pods":
            # kube-apiserver answers the removal of anything but a pod with a Status, not the object.
            details = {"name": name, "group": info.group, "kind": info.name, "uid": stored.uid}
            if not info.group:
                del details["group"]
            ok = {
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Success",
                "details": details,
            }
            return Response.json(200, ok)
        return Response(200, stored.raw)

    def _delete_collection(self, req: Request, resource: str, namespace: str | None) -> Response:
        self.counter.inc("deletecollection")
        grace, _, _, dry_run = self._delete_options(req)
        items, rv = self.store.list(
            resource,
            namespace,
            label_selector=req.query.get("labelSelector"),
            field_selector=req.query.get("fieldSelector"),
        )
        out: list[bytes] = []
        for item in items:
            ns = item.namespace or None
            try:
                stored, _ = self.store.delete(
                    resource, ns, item.name, grace_period_seconds=grace, dry_run=dry_run
                )
            except ApiError as err:
                if err.code == 404:
                    continue
                raise
            out.append(stored.raw)
        info = RESOURCES[resource]
        head = (
            f'{{"kind":"{info.list_kind}","apiVersion":"{info.api_version}",'
            f'"metadata":{{"resourceVersion":"{rv}"}},"items":['
        )
        return Response(200, head.encode() + b",".join(out) + b"]}")

    def _bind(self, req: Request, namespace: str, name: str) -> Response:
        self.counter.inc("create")
        body = bodies.decode_options(req.header("content-type"), req.body, "Binding") or {}
        target = body.get("target")
        node = target.get("name") if isinstance(target, dict) else None
        if not isinstance(node, str) or not node:
            raise bad_request("invalid Binding: target.name is required")
        bind(self.store, namespace, name, node)
        return Response.json(201, _SUCCESS_201)

    def _evict(self, req: Request, namespace: str, name: str) -> Response:
        """policy/v1 Eviction: DisruptionTarget=True, then a delete with the eviction's DeleteOptions.

        This server has no PodDisruptionBudgets, so every eviction is allowed, as in a
        cluster with none.
        """
        self.counter.inc("create")
        body = bodies.decode_options(req.header("content-type"), req.body, "Eviction") or {}
        grace, uid, rv = _parse_delete_options(eviction_options(body, namespace, name), None)
        evict(self.store, namespace, name, grace_period_seconds=grace, uid=uid, resource_version=rv)
        return Response.json(201, _SUCCESS_201)


_SUCCESS_201 = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}


def _bad_dry_run(value: Any) -> ApiError:
    return negotiation.invalid_options(
        "DeleteOptions", [FieldError("dryRun", "Unsupported value", value, 'supported values: "All"')]
    )


def _parse_delete_options(
    opts: Mapping[str, Any] | None, grace: int | None
) -> tuple[int | None, str | None, str | None]:
    """(gracePeriodSeconds, preconditions.uid, preconditions.resourceVersion) from DeleteOptions.

    The body's grace period wins over the query's, as in kube-apiserver.
    """
    uid = rv = None
    if opts is None:
        return grace, uid, rv
    if opts.get("gracePeriodSeconds") is not None:
        if not isinstance(opts["gracePeriodSeconds"], int) or isinstance(opts["gracePeriodSeconds"], bool):
            raise bad_request("invalid DeleteOptions: gracePeriodSeconds must be an integer")
        grace = opts["gracePeriodSeconds"]
    pre = opts.get("preconditions") or {}
    if isinstance(pre, dict):
        uid = pre.get("uid")
        rv = pre.get("resourceVersion")
    return grace, uid, rv


_TABLE_TYPE = "application/json;as=Table;v=v1;g=meta.k8s.io"
# How long a read waits for a resourceVersion the store has not reached (the real watch cache's 3 s).
_TOO_NEW_WAIT_SECONDS = 3.0


def _too_large_resource_version(wanted: int, current: int) -> ApiError:
    message = f"Timeout: Too large resource version: {wanted}, current: {current}"
    status = status_body(
        504, "Timeout", message,
        causes=[{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
        retryAfterSeconds=1,
    )  # fmt: skip
    return ApiError(message, code=504, reason="Timeout", status=status)


def _list_meta_extra(continue_token: str, remaining: int | None) -> bytes:
    """``,"continue":...,"remainingItemCount":N`` of a list's metadata (empty on the last page)."""
    if not continue_token:
        return b""
    out = b',"continue":' + _encode(continue_token)
    if remaining is not None:
        out += b',"remainingItemCount":' + str(remaining).encode()
    return out


def _warning_value(text: str) -> str:
    """A ``Warning`` header value as the real server writes it (code 299, agent ``-``)."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    # Header values are latin-1 and single-line; anything else is escaped away.
    safe = (
        escaped.encode("latin-1", "backslashreplace").decode("latin-1").replace("\r", " ").replace("\n", " ")
    )
    return f'299 - "{safe}"'


# --- the HTTP server -----------------------------------------------------------------


_DIGITS = re.compile(r"[0-9]{1,19}")
_CHUNK_SIZE = re.compile(rb"[0-9a-fA-F]{1,16}")
_MAX_CHUNK_LINE = 4096
_MAX_TRAILERS = 64
# A body over the limit is read and dropped up to this many times the limit, then the connection closes.
_DRAIN_FACTOR = 16


class _FramingError(ValueError):
    """A request whose body framing is broken: answered with ``code`` and the connection closed."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


class _Deadlines:
    """One thread that shuts down connections still reading request headers past their deadline.

    A socket timeout bounds each read, not the whole: a slowloris client that sends a
    byte now and then never trips it. A deadline does, whatever the client trickles;
    shutting the socket down ends the handler's read, and its thread goes back.
    """

    def __init__(self, name: str) -> None:
        self._heap: list[tuple[float, int]] = []
        self._live: dict[int, socket.socket] = {}
        self._tokens = itertools.count()
        self._cond = threading.Condition()
        self._stopped = False
        self.expired = 0
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def add(self, sock: socket.socket, seconds: float) -> int:
        token = next(self._tokens)
        with self._cond:
            self._live[token] = sock
            heapq.heappush(self._heap, (time.monotonic() + seconds, token))
            if self._heap[0][1] == token:
                self._cond.notify()
        return token

    def cancel(self, token: int) -> None:
        with self._cond:
            self._live.pop(token, None)

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        while True:
            with self._cond:
                while True:
                    if self._stopped:
                        return
                    # Entries cancelled in time are dropped when they come to the top.
                    while self._heap and self._heap[0][1] not in self._live:
                        heapq.heappop(self._heap)
                    if not self._heap:
                        self._cond.wait()
                        continue
                    wait = self._heap[0][0] - time.monotonic()
                    if wait <= 0:
                        break
                    self._cond.wait(wait)
                _, token = heapq.heappop(self._heap)
                sock = self._live.pop(token)
                self.expired += 1
            try:
                peer = sock.getpeername()
                # The plain socket's shutdown: an SSLSocket's would drop its TLS state under the reader.
                socket.socket.shutdown(sock, socket.SHUT_RDWR)
            except OSError:
                continue
            log.info(
                "closed a connection that sent no complete request headers in time",
                extra={"peer": str(peer)},
            )


class _HttpServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    # The listen backlog (the kernel caps it at somaxconn): a burst of clients is queued, not dropped.
    request_queue_size = 4096
    owner: EmbeddedApiServer
    open_connections = 0
    refused_connections = 0
    _count_lock: threading.Lock
    active: set[socket.socket]
    _refusal_logged = 0.0

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._count_lock:
            full = self.open_connections >= self.owner.max_connections
            if full:
                self.refused_connections += 1
                refused = self.refused_connections
            else:
                self.open_connections += 1
                self.active.add(request)
        if full:
            self.shutdown_request(request)
            now = time.monotonic()
            if now - self._refusal_logged >= 10.0:
                self._refusal_logged = now
                log.warning(
                    "connection refused: %d connections open (--max-connections)",
                    self.owner.max_connections,
                    extra={"peer": str(client_address), "refused": refused},
                )
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._closed_one(request)  # no thread started: nobody else counts it down
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._closed_one(request)

    def _closed_one(self, request: Any) -> None:
        with self._count_lock:
            self.open_connections -= 1
            self.active.discard(request)

    def close_connections(self) -> None:
        """End every open connection (a stopped server answers nothing more, keep-alive or not)."""
        with self._count_lock:
            active = list(self.active)
        for sock in active:
            with contextlib.suppress(OSError):
                socket.socket.shutdown(sock, socket.SHUT_RDWR)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """One log line for what peers do (a refused TLS handshake, a reset); a traceback for bugs."""
        err = sys.exc_info()[1]
        if isinstance(err, ssl.SSLError):
            log.warning(
                "TLS handshake with %s failed: %s",
                client_address[0],
                getattr(err, "reason", None) or err,
                extra={"peer": str(client_address), "error": str(err)},
            )
        elif isinstance(err, OSError):
            log.info(
                "connection from %s ended: %s", client_address[0], err, extra={"peer": str(client_address)}
            )
        else:
            log.error("error serving a connection from %s", client_address[0], exc_info=err)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "podstatus-embedded-apiserver"
    sys_version = ""
    # Each read or write waits this long at most (then set to the server's idle timeout).
    timeout = DEFAULT_IDLE_TIMEOUT
    server: _HttpServer
    _deadline: int | None = None

    def setup(self) -> None:
        super().setup()
        self.connection.settimeout(self.server.owner.idle_timeout)
        # Small request/response pairs on keep-alive connections: never wait for Nagle.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._first = True
        # The TLS handshake and the first request's headers get the header timeout, in all.
        self._header_phase()
        if isinstance(self.connection, ssl.SSLSocket):
            try:
                self.connection.do_handshake()  # a refusal is one log line (_HttpServer.handle_error)
            except BaseException:
                self._end_header_phase()  # finish() is not called when setup() fails
                raise

    def finish(self) -> None:
        self._end_header_phase()
        super().finish()

    def _header_phase(self) -> None:
        owner = self.server.owner
        if owner.deadlines is not None:
            self._deadline = owner.deadlines.add(self.connection, owner.header_timeout)

    def _end_header_phase(self) -> None:
        owner = self.server.owner
        if self._deadline is not None and owner.deadlines is not None:
            owner.deadlines.cancel(self._deadline)
        self._deadline = None

    def handle_one_request(self) -> None:
        if not self._first:
            # Keep-alive: the next request may come within the idle timeout (the socket's);
            # once it starts, its headers get the header timeout.
            try:
                if not cast(io.BufferedReader, self.rfile).peek(1):
                    self.close_connection = True
                    return
            except OSError:
                self.close_connection = True
                return
            self._header_phase()
        self._first = False
        try:
            super().handle_one_request()
        finally:
            self._end_header_phase()

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s " + format, self.client_address[0], *args)

    def do_GET(self) -> None:
        self._serve()

    do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = do_GET

    def _read_body(self, limit: int) -> bytes | None:
        """The request body, or None when it is larger than ``limit``; ValueError for bad framing.

        Framing is parsed strictly, as Go's net/http does: a chunk size is 1 to 16 hex digits
        (no sign, no spaces), each chunk ends in CRLF, a Content-Length is digits only, and
        both together are refused. The size is checked before anything is read, so no
        framing trick reads more than ``limit`` bytes of body.
        """
        te = self.headers.get("Transfer-Encoding")
        cl = self.headers.get("Content-Length")
        if te is not None:
            if te.strip().lower() != "chunked":
                raise _FramingError(501, f"unsupported transfer encoding: {te!r}")
            if cl is not None:
                raise _FramingError(400, "Transfer-Encoding and Content-Length cannot be sent together")
            return self._read_chunked(limit)
        if cl is None or cl.strip() == "":
            return b""
        if not _DIGITS.fullmatch(cl.strip()):
            raise _FramingError(400, f"bad Content-Length {cl!r}")
        length = int(cl.strip())
        if length > limit:
            # Drain a moderately large body so the client reads our 413 instead of a reset.
            left = length if length <= _DRAIN_FACTOR * limit else 0
            while left > 0:
                got = self.rfile.read(min(left, 1 << 20))
                if not got:
                    break
                left -= len(got)
            return None
        body = self.rfile.read(length) if length > 0 else b""
        if len(body) != length:
            raise _FramingError(400, "unexpected EOF reading the body")
        return body

    def _read_chunked(self, limit: int) -> bytes | None:
        chunks: list[bytes] = []
        size = 0
        while True:
            line = self.rfile.readline(_MAX_CHUNK_LINE + 1)
            if not line.endswith(b"\n") or len(line) > _MAX_CHUNK_LINE:
                raise _FramingError(400, "malformed chunked encoding")
            token = line.rstrip(b"\r\n").split(b";", 1)[0]
            if not _CHUNK_SIZE.fullmatch(token):
                raise _FramingError(400, "malformed chunked encoding: invalid chunk size")
            n = int(token, 16)
            if n == 0:
                # Trailers, bounded, up to the empty line.
                for _ in range(_MAX_TRAILERS + 1):
                    trailer = self.rfile.readline(_MAX_CHUNK_LINE + 1)
                    if trailer in (b"\r\n", b"\n"):
                        return b"".join(chunks) if size <= limit else None
                    if not trailer.endswith(b"\n"):
                        break
                raise _FramingError(400, "malformed chunked encoding: bad trailer")
            size += n
            if size > limit:
                # Too large: the rest is read and dropped (up to a bound, chunk by chunk, never held)
                # so the client reads the 413 instead of a reset; past the bound the connection goes.
                if size > _DRAIN_FACTOR * limit:
                    return None
                chunks = []
            data = self.rfile.read(n)
            if len(data) != n or self.rfile.read(2) != b"\r\n":
                raise _FramingError(400, "malformed chunked encoding: bad chunk data")
            if size <= limit:
                chunks.append(data)

    def _serve(self) -> None:
        self._end_header_phase()
        owner = self.server.owner
        audit = owner.audit
        if audit is None:
            self._answer(owner, None)
            return
        received = time.time()
        done: list[Any] = [None, None]  # the Request, the Response
        try:
            self._answer(owner, done)
        finally:
            self._audit(audit, owner, received, done[0], done[1])

    def _audit(
        self, audit: AuditLog, owner: EmbeddedApiServer, received: float, request: Request | None,
        response: Response | None,
    ) -> None:  # fmt: skip
        if request is None:
            split = urlsplit(self.path)
            path, query = split.path, dict(parse_qsl(split.query, keep_blank_values=True))
        else:
            path, query = request.path, request.query
        code = 500 if response is None or response.abort else response.status
        audit.record(
            method=self.command,
            uri=self.path,
            path=path,
            query=query,
            user_agent=self.headers.get("User-Agent", ""),
            source_ip=str(self.client_address[0]),
            code=code,
            received=received,
            # A public path answered without a token was the anonymous user's.
            authenticated=owner.token is not None and code != 401 and "Authorization" in self.headers,
            body=b"" if response is None or response.stream is not None else response.body,
            content_type="" if response is None else response.content_type,
            audit_id=self.headers.get("Audit-ID", ""),
        )

    def _answer(self, owner: EmbeddedApiServer, done: list[Any] | None) -> None:
        """Read, dispatch, write; ``done`` (the audit's) gets the Request and the Response."""
        started = time.perf_counter()
        try:
            body = self._read_body(owner.max_body_bytes)
        except _FramingError as err:
            # The rest of the stream cannot be trusted: answer and close.
            self.close_connection = True
            reason = "BadRequest" if err.code == 400 else "NotImplemented"
            response = _status_error(err.code, reason, str(err))
            if done is not None:
                done[1] = response
            self._write(response)
            return
        if body is None:
            # The rest of the body is never read: the connection cannot be reused.
            self.close_connection = True
            response = _status_error(
                413, "RequestEntityTooLarge", f"Request entity too large: limit is {owner.max_body_bytes}"
            )
        else:
            split = urlsplit(self.path)
            request = Request(
                method=self.command,
                path=split.path,
                query=dict(parse_qsl(split.query, keep_blank_values=True)),
                headers={k.lower(): v for k, v in self.headers.items()},
                body=body,
                raw_query=split.query,
            )
            if done is not None:
                done[0] = request
            response = owner.authenticate(request) or owner.dispatch(request)
        if done is not None:
            done[1] = response
        if response.abort:
            self._reset()
            return
        if response.takeover is not None:
            # The connection is the stream's now; it closes when the stream ends.
            self.close_connection = True
            response.takeover(self.connection, cast(Any, self.rfile))
            return
        self._write(response)
        if log.isEnabledFor(logging.DEBUG):
            log.debug(
                "%s %s -> %d (%.1f ms)", self.command, self.path, response.status,
                (time.perf_counter() - started) * 1000,
            )  # fmt: skip

    def _reset(self) -> None:
        # SO_LINGER 0: close sends RST, as a crashed or overloaded server would.
        self.close_connection = True
        try:
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.connection.close()
        except OSError:
            pass

    def _head(self, response: Response, extra: list[tuple[str, str]]) -> bytes:
        reason = self.responses.get(response.status, ("",))[0]
        lines = [
            f"HTTP/1.1 {response.status} {reason}",
            f"Content-Type: {response.content_type}",
            "Cache-Control: no-cache, private",
            f"Date: {self.date_time_string()}",
        ]
        lines += [f"{k}: {v}" for k, v in response.headers.items()]
        lines += [f"{k}: {v}" for k, v in extra]
        lines += [f"Warning: {_warning_value(w)}" for w in response.warnings]
        if self.close_connection:
            lines.append("Connection: close")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    def _write(self, response: Response) -> None:
        if response.stream is None:
            body = b"" if self.command == "HEAD" else response.body
            head = self._head(response, [("Content-Length", str(len(response.body)))])
            self.wfile.write(head + body)
            return
        stream = response.stream
        try:
            self.wfile.write(self._head(response, [("Transfer-Encoding", "chunked")]))
            for chunk in stream:
                if not chunk:
                    if self._client_gone():
                        self.close_connection = True
                        return
                    continue
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            self.wfile.write(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError, OSError):
            self.close_connection = True
        finally:
            close = getattr(stream, "close", None)
            if close is not None:
                close()

    def _client_gone(self) -> bool:
        try:
            # poll, not select: select() cannot take descriptors past 1023.
            poller = select.poll()
            poller.register(self.connection, select.POLLIN)
            if not poller.poll(0):
                return False
            if isinstance(self.connection, ssl.SSLSocket):
                # No peeking through TLS; a client sends nothing while it reads a watch, so
                # anything readable is its close_notify or its FIN.
                return True
            return self.connection.recv(1, socket.MSG_PEEK) == b""
        except OSError:
            return True


class EmbeddedApiServer:
    """An in-memory Kubernetes API server for pods and nodes, on loopback HTTP.

    ``EmbeddedApiServer(host="127.0.0.1", port=0, store=None)``; ``port=0`` picks a
    free port. ``start()`` / ``stop()`` or ``with EmbeddedApiServer() as server:``;
    ``server.url`` is the base URL, ``server.store`` the :class:`Store`,
    ``server.counter`` counts requests by verb. Every request goes through
    ``server.dispatch`` (a ``Request -> Response`` callable that can be wrapped).

    ``strict_status`` and ``reap_terminating`` configure the :class:`Store` the
    server makes (both default to ``True``: podstatus's stricter status
    validation, and terminating pods removed when their grace period runs out);
    ``False`` for both behaves as kube-apiserver v1.37.2 with no kubelet. With
    a ``store`` given they default to the store's settings and must agree with them.

    ``token``: when set, every request must carry ``Authorization: Bearer <token>``
    (else 401); ``tls``: serve HTTPS with this material, or ``True`` for fresh material
    for loopback and ``host`` (see :mod:`.security`). Both default to off, for tests and
    in-process use; ``podstatus serve`` turns both on. Both go into :meth:`kubeconfig`;
    note that client-go and kubectl use a kubeconfig's token only with an https server.

    ``audit_log``: append one line per request to this file, as kube-apiserver's audit log
    at level Metadata (see :mod:`.audit`).

    Connections: at most ``max_connections`` at once (each holds a thread; more are closed
    at once, logged); the TLS handshake and each request's headers must arrive within
    ``header_timeout`` seconds, and a keep-alive connection may idle ``idle_timeout``
    seconds between requests (kube-apiserver's ReadHeaderTimeout and IdleTimeout).
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        store: Store | None = None,
        max_body_bytes: int = MAX_BODY_BYTES,
        reap_interval: float = 1.0,
        bookmark_interval: float = 60.0,
        strict_status: bool | None = None,
        reap_terminating: bool | None = None,
        token: str | None = None,
        tls: TlsMaterial | bool = False,
        audit_log: str | Path | None = None,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        header_timeout: float = DEFAULT_HEADER_TIMEOUT,
        idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
        kubelet_client: KubeletClientConfig | None = None,
    ) -> None:
        if max_connections < 1 or not header_timeout > 0 or not idle_timeout > 0:
            raise ValueError("max_connections, header_timeout and idle_timeout must be positive")
        self.max_connections = max_connections
        self.header_timeout = header_timeout
        self.idle_timeout = idle_timeout
        # Running while the server runs.
        self.deadlines: _Deadlines | None = None
        self.host = host
        self.audit_log = audit_log
        # Open while the server runs (see audit.py).
        self.audit: AuditLog | None = None
        if token is not None and not token:
            raise ValueError("token must not be empty")
        self.token = token
        self.tls: TlsMaterial | None = (
            generate_tls([host]) if tls is True else tls if isinstance(tls, TlsMaterial) else None
        )
        self.port = port
        if store is None:
            store = Store(
                strict_status=True if strict_status is None else strict_status,
                reap_terminating=True if reap_terminating is None else reap_terminating,
            )
        elif strict_status not in (None, store.strict_status) or reap_terminating not in (
            None,
            store.reap_terminating,
        ):
            raise ValueError("strict_status and reap_terminating disagree with the given store's settings")
        self.store = store
        self.max_body_bytes = max_body_bytes
        self.reap_interval = reap_interval
        self.counter = RequestCounter()
        self._stopping = threading.Event()
        self.api = ApiHandler(
            self.store,
            server_address=lambda: f"{self.host}:{self.port}",
            counter=self.counter,
            stopping=self._stopping,
            bookmark_interval=bookmark_interval,
            kubelet_client=kubelet_client,
        )
        self.api.user_of = self.user_of
        self.dispatch: Callable[[Request], Response] = self.api.handle
        self._httpd: _HttpServer | None = None
        self._threads: list[threading.Thread] = []

    @property
    def open_connections(self) -> int:
        """Connections being served now (each holds a thread)."""
        return self._httpd.open_connections if self._httpd is not None else 0

    @property
    def url(self) -> str:
        if self._httpd is None:
            raise RuntimeError("the server is not started")
        host = self.host if ":" not in self.host else f"[{self.host}]"
        scheme = "https" if self.tls is not None else "http"
        return f"{scheme}://{host}:{self.port}"

    def user_of(self, request: Request) -> dict[str, Any]:
        """The user a request is served as: the token's, or the anonymous user."""
        if self.token is not None and security.bearer_ok(request.header("authorization"), self.token):
            return reviews.TOKEN_USER
        return reviews.ANONYMOUS

    def authenticate(self, request: Request) -> Response | None:
        """None when the request may go on; else kube-apiserver's 401.

        A request with no credentials at all may GET the health checks and ``/version``, as
        kube-apiserver's default RBAC (``system:public-info-viewer``) lets the anonymous user;
        a wrong token is refused there too, as kube-apiserver refuses it before authorizing."""
        authorization = request.header("authorization")
        if self.token is None or security.bearer_ok(authorization, self.token):
            return None
        if not authorization and request.method in ("GET", "HEAD") and request.path in PUBLIC_PATHS:
            return None
        log.info("unauthenticated request refused", extra={"method": request.method, "path": request.path})
        return _status_error(401, "Unauthorized", "Unauthorized")

    def start(self) -> EmbeddedApiServer:
        if self._httpd is not None:
            return self
        self._stopping.clear()
        if self.audit_log is not None and self.audit is None:
            self.audit = AuditLog(self.audit_log)
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        server_class = type("_Server", (_HttpServer,), {"address_family": family})
        try:
            httpd = server_class((self.host, self.port), _Handler)
        except OSError:
            if self.audit is not None:
                self.audit.close()
                self.audit = None
            raise
        if self.tls is not None:
            # The handshake happens on the handler's thread, at its first read, so a slow
            # client never holds up accept().
            context = server_context(self.tls)
            httpd.socket = context.wrap_socket(httpd.socket, server_side=True, do_handshake_on_connect=False)
        httpd.owner = self
        httpd._count_lock = threading.Lock()
        httpd.active = set()
        self.port = httpd.server_address[1]
        self.deadlines = _Deadlines(f"apiserver-deadlines-{self.port}")
        self._httpd = httpd
        serve = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.2},
                                 name=f"apiserver-{self.port}", daemon=True)  # fmt: skip
        reaper = threading.Thread(target=self._reap_loop, name=f"apiserver-reaper-{self.port}", daemon=True)
        self._threads = [serve, reaper]
        for t in self._threads:
            t.start()
        log.info("embedded API server listening on %s", self.url)
        if not security.is_loopback(self.host):
            log.warning(
                "the embedded API server listens on %s, reachable from other machines%s",
                self.host,
                "" if self.token else ", with NO authentication",
                extra={"host": self.host, "token": self.token is not None, "tls": self.tls is not None},
            )
        return self

    def stop(self) -> None:
        httpd = self._httpd
        if httpd is None:
            return
        self._stopping.set()
        httpd.shutdown()
        httpd.server_close()
        httpd.close_connections()
        if self.deadlines is not None:
            self.deadlines.stop()
            self.deadlines = None
        self.api.metrics.close()
        for t in self._threads:
            t.join(timeout=5)
        if self.audit is not None:
            self.audit.close()
            self.audit = None
        self._httpd = None
        self._threads = []
        log.info("embedded API server on port %d stopped", self.port)

    def __enter__(self) -> EmbeddedApiServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _reap_loop(self) -> None:
        # Graceful deletions run out even when nobody touches the store.
        while not self._stopping.wait(self.reap_interval):
            try:
                self.store.reap()
            except Exception:
                log.exception("reaping terminating pods failed")

    def kubeconfig(self, *, namespace: str = "default") -> dict[str, Any]:
        """A kubeconfig (as a dict) pointing at this server, with its CA and token when it has them."""
        cluster: dict[str, Any] = {"server": self.url}
        if self.tls is not None:
            cluster["certificate-authority-data"] = base64.b64encode(self.tls.ca_pem).decode("ascii")
        user: dict[str, Any] = {"token": self.token} if self.token else {}
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "podstatus", "cluster": cluster}],
            "users": [{"name": "podstatus", "user": user}],
            "contexts": [
                {
                    "name": "podstatus",
                    "context": {"cluster": "podstatus", "user": "podstatus", "namespace": namespace},
                }
            ],
            "current-context": "podstatus",
            "preferences": {},
        }

    def write_kubeconfig(self, path: str | Path, *, namespace: str = "default") -> Path:
        """Write :meth:`kubeconfig` to ``path`` (JSON is valid YAML); returns the path.

        Mode 0600, never through a symlink (:func:`podstatus.tls.write_private`): it may hold a token.
        """
        data = msgspec.json.format(_encode(self.kubeconfig(namespace=namespace))) + b"\n"
        return write_private(path, data)


def serve(
    host: str = "127.0.0.1",
    port: int = 0,
    kubeconfig_path: str | Path | None = None,
    *,
    store: Store | None = None,
    ready: Callable[[EmbeddedApiServer], None] | None = None,
    token: str | None = None,
    tls: TlsMaterial | bool = False,
) -> None:
    """Run a server until SIGINT or SIGTERM (call from the main thread).

    Writes the kubeconfig when a path is given, logs the URL, and calls
    ``ready(server)`` once it listens (the CLI prints the address there).
    """
    done = threading.Event()

    def on_signal(signum: int, frame: Any) -> None:
        done.set()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        with EmbeddedApiServer(host, port, store=store, token=token, tls=tls) as server:
            if kubeconfig_path is not None:
                server.write_kubeconfig(kubeconfig_path)
            log.info("serving the Kubernetes API on %s", server.url)
            if ready is not None:
                ready(server)
            while not done.wait(0.5):
                pass
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
