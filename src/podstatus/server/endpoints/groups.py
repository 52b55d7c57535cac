"""The endpoints beside the core resources: metrics.k8s.io, the access reviews (``kubectl auth``),
and the subresources relayed to a node's kubelet (logs, exec, attach, port-forward, nodes/proxy)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from ...requestcount import RequestCounter
from .. import bodies, metricsapi, reviews
from ..proxy import KubeletProxy
from .wire import NOT_ALLOWED, NOT_FOUND, Request, Response, read_only, status_error

__all__ = ["KUBELET_PATH", "POD_STREAMS", "kubelet_subresource", "metrics_group", "review"]

# The subresources kube-apiserver relays to the pod's node, and the paths that reach them.
POD_STREAMS = frozenset({"log", "exec", "attach", "portforward"})
KUBELET_PATH = re.compile(
    r"^/api/v1/(namespaces/[^/]+/pods/[^/]+/(log|exec|attach|portforward)|nodes/[^/]+/proxy(/.*)?)$"
)


def metrics_group(metrics: metricsapi.MetricsApi, req: Request, parts: list[str]) -> Response:
    """``/apis/metrics.k8s.io[/v1beta1[/...]]``: what metrics-server would answer."""
    if not parts:
        return read_only(req, {"kind": "APIGroup", "apiVersion": "v1", **metricsapi.api_group()})
    if parts[0] != metricsapi.VERSION:
        return status_error(404, "NotFound", NOT_FOUND)
    if len(parts) == 1:
        return read_only(req, metricsapi.resource_list())
    code, body = metrics.handle(req.method, parts[1:], req.query)
    return Response.json(code, body)


def kubelet_subresource(
    kubelet: KubeletProxy, req: Request, resource: str, namespace: str | None, parts: list[str]
) -> Response:
    """pods/log, pods/exec|attach|portforward and nodes/NAME/proxy/...: relayed to the node."""
    name, sub = parts[1], parts[2]
    if resource == "nodes":
        # The path after .../proxy as sent, trailing slash and all.
        marker = f"/nodes/{name}/proxy"
        rest = req.path[req.path.index(marker) + len(marker) :]
        status, headers, relay = kubelet.node_proxy(
            req.method, name, rest, req.raw_query, req.headers, req.body
        )
        if not isinstance(relay, Iterator):
            return Response(status, takeover=relay)
        ctype = headers.pop("Content-Type", headers.pop("content-type", "text/plain"))
        return Response(status, content_type=ctype, headers=headers, stream=relay)
    if sub == "log":
        if req.method != "GET":
            return status_error(405, "MethodNotAllowed", NOT_ALLOWED)
        _, stream = kubelet.pod_log(namespace or "", name, req.query)
        return Response(200, content_type="text/plain", stream=stream)
    if req.method not in ("GET", "POST"):
        return status_error(405, "MethodNotAllowed", NOT_ALLOWED)
    takeover = kubelet.pod_stream(sub, req.method, namespace or "", name, req.raw_query, req.headers)
    return Response(101, takeover=takeover)


def review(
    counter: RequestCounter, user: dict[str, Any], req: Request, group: str, parts: list[str]
) -> Response:
    """``kubectl auth whoami`` / ``can-i``: a create that stores nothing (see :mod:`.reviews`)."""
    if len(parts) != 1:
        return status_error(404, "NotFound", NOT_FOUND)
    if req.method != "POST":
        return status_error(405, "MethodNotAllowed", NOT_ALLOWED)
    counter.inc("create")
    body = bodies.decode_object(req.header("content-type"), req.body)
    done = reviews.review(group, parts[0], body, req.headers, user)
    return Response.json(201, done)
