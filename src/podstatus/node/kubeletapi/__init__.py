"""The kubelet's HTTPS API for podstatus nodes: logs, exec, attach, port-forward, pods, stats.

Routes, parameters and status codes follow ``pkg/kubelet/server/server.go`` (v1.37). The
package by concept:

- :mod:`.server`: :class:`KubeletAPIServer`, the event loop, TLS and a listening socket per
  node of the process; every request through the authentication middleware.
- :mod:`.config`: :class:`KubeletAPIConfig`, how it listens and whom it lets in.
- :mod:`.auth`: client certificates, TokenReview, SubjectAccessReview on ``nodes/<sub>``.
- :mod:`.context`: the node a request came for, its pod and container, provider calls.
- :mod:`.routes`: ``/containerLogs``, ``/pods``, ``/runningpods/``, ``/healthz``,
  ``/stats/summary``, ``/metrics/resource``.
- :mod:`.streams`: ``/exec``, ``/attach``, ``/portForward`` over WebSocket (and SPDY
  tunnelled in WebSocket for port-forward).

A provider without a capability gets 501 Not Implemented with a message naming the node
and the capability: the kubelet's "not found" for a disabled streaming method would read
as "pod not found" to ``kubectl``.
"""

from .config import KubeletAPIConfig
from .routes import metrics_from_summary, parse_log_options
from .server import KubeletAPIServer

__all__ = [
    "KubeletAPIConfig",
    "KubeletAPIServer",
    "metrics_from_summary",
    "parse_log_options",
]
