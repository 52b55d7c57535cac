"""The API logic: a :class:`Request` routed to its endpoint, a :class:`Response` back.

Transport-agnostic: the HTTP front (:mod:`podstatus.server.http`) turns bytes into a
``Request`` and a ``Response`` into bytes; tests call :meth:`ApiHandler.handle` directly.
Routing, discovery and OpenAPI live here; the resources in :mod:`.resources`, watches in
:mod:`.watches`, and metrics.k8s.io, reviews and the kubelet relay in :mod:`.groups`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from ...errors import ApiError
from ...requestcount import RequestCounter
from .. import discovery, metricsapi, negotiation, reviews
from ..proxy import KubeletClientConfig, KubeletProxy
from ..storage.store import Store
from .groups import KUBELET_PATH, metrics_group, review
from .resources import ResourceEndpoints
from .watches import POLL_SECONDS, WatchEndpoint
from .wire import NOT_ALLOWED, NOT_FOUND, Request, Response, as_yaml, encode, read_only, status_error

__all__ = ["ApiHandler"]

log = logging.getLogger(__name__)


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
        watch_poll_seconds: float = POLL_SECONDS,
    ) -> None:
        self.store = store
        # pods/log, exec, attach, portforward and nodes/proxy go to the nodes' kubelets.
        self.kubelet = KubeletProxy(store, kubelet_client)
        self.metrics = metricsapi.MetricsApi(store, self.kubelet)
        self.counter = counter if counter is not None else RequestCounter()
        self._server_address = server_address
        self._stopping = stopping if stopping is not None else threading.Event()
        self.watches = WatchEndpoint(
            store, self.counter, self._stopping, bookmark_interval=bookmark_interval,
            default_watch_timeout=default_watch_timeout, poll_seconds=watch_poll_seconds,
        )  # fmt: skip
        self.resources = ResourceEndpoints(store, self.counter, self.kubelet, self.watches)
        # Who a request was authenticated as (the server that checks tokens sets this).
        self.user_of: Callable[[Request], dict[str, Any]] = lambda request: reviews.ANONYMOUS

    def __call__(self, request: Request) -> Response:
        return self.handle(request)

    def handle(self, request: Request) -> Response:
        if KUBELET_PATH.match(request.path):
            # A kubelet's answer is whatever the kubelet sends: no JSON/YAML negotiation.
            return self._handle(request)
        media = negotiation.negotiate(request.path, request.header("accept"))
        if isinstance(media, dict):
            return Response(406, encode(media))
        response = self._handle(request)
        return as_yaml(response) if media == negotiation.YAML else response

    def _handle(self, request: Request) -> Response:
        try:
            return self._route(request)
        except ApiError as err:
            return Response.error(err)
        except Exception as err:
            log.exception("internal error serving %s %s", request.method, request.path)
            return status_error(500, "InternalError", f"Internal error occurred: {err}")

    def _route(self, req: Request) -> Response:
        parts = [p for p in req.path.split("/") if p]
        if not parts:
            return Response.json(
                200, {"paths": ["/api", "/api/v1", "/apis", "/openapi/v2", "/openapi/v3", "/version"]}
            )
        head = parts[0]
        if head == "api":
            if len(parts) == 1:
                return read_only(req, discovery.api_versions(self._server_address()))
            if parts[1] != "v1":
                return status_error(404, "NotFound", NOT_FOUND)
            if len(parts) == 2:
                return read_only(req, discovery.api_resource_list())
            return self.resources.serve(req, parts[2:])
        if head == "apis" and len(parts) == 1:
            return read_only(req, discovery.api_group_list())
        if head == "apis":
            return self._group(req, parts[1:])
        if head == "version" and len(parts) == 1:
            return read_only(req, discovery.version_info())
        if head in ("healthz", "livez", "readyz"):
            return Response(200, b"ok", content_type="text/plain; charset=utf-8")
        if head == "openapi" and parts[1:] == ["v2"]:
            return read_only(req, discovery.openapi_v2_document())
        if head == "openapi" and len(parts) >= 2 and parts[1] == "v3":
            if req.method != "GET":
                return status_error(405, "MethodNotAllowed", NOT_ALLOWED)
            if len(parts) == 2:
                return Response.json(200, discovery.openapi_v3_root())
            doc = discovery.openapi_v3_document_bytes("/".join(parts[2:]))
            if doc is not None:
                return Response(200, doc)
        return status_error(404, "NotFound", NOT_FOUND)

    def _group(self, req: Request, parts: list[str]) -> Response:
        """``/apis/GROUP[/VERSION[/...]]``: the API groups beside the core one."""
        group = parts[0]
        if group == metricsapi.GROUP:
            return metrics_group(self.metrics, req, parts[1:])
        if len(parts) == 1:
            found = discovery.api_group(group)
            return read_only(req, found) if found else status_error(404, "NotFound", NOT_FOUND)
        resources = discovery.group_resource_list(group, parts[1])
        if resources is None:
            return status_error(404, "NotFound", NOT_FOUND)
        if len(parts) == 2:
            return read_only(req, resources)
        if (group, parts[2]) in reviews.REVIEWS:
            return review(self.counter, self.user_of(req), req, group, parts[2:])
        return self.resources.serve(req, parts[2:], group)
