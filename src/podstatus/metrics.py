"""Prometheus metrics for a node agent built on podstatus.

The names follow the kubelet's where there is one
(``kubelet_pod_status_sync_duration_seconds`` becomes
``podstatus_pod_status_sync_duration_seconds``). Each :class:`Metrics` has its
own registry, so several agents (or tests) in one process do not collide.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from .manager import SyncRecord

# From 1 ms to about 2 minutes: fast-path writes land in milliseconds, a stalled kubelet takes minutes.
SYNC_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)


class Metrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self.sync_duration = Histogram(
            "podstatus_pod_status_sync_duration_seconds",
            "Time from a pod status change being accepted to it being on the API server.",
            buckets=SYNC_BUCKETS,
            registry=self.registry,
        )
        self.requests = Counter(
            "podstatus_api_requests_total",
            "Requests sent to the Kubernetes API server, by verb.",
            ["verb"],
            registry=self.registry,
        )
        self.syncs = Counter(
            "podstatus_pod_status_syncs_total",
            "Pod status syncs that reached the API server, by outcome.",
            ["outcome"],
            registry=self.registry,
        )
        self.pending = Gauge(
            "podstatus_pod_status_pending",
            "Pods whose newest status is not yet known to be on the API server.",
            registry=self.registry,
        )

    def observe_sync(self, record: SyncRecord) -> None:
        if record.patched and record.changed_at is not None:
            self.sync_duration.observe(max(0.0, record.synced_at - record.changed_at))
        self.syncs.labels("deleted" if record.deleted else "patched" if record.patched else "unchanged").inc()

    def count_request(self, verb: str) -> None:
        self.requests.labels(verb).inc()

    def serve(self, port: int, addr: str = "127.0.0.1") -> None:
        """Serve ``/metrics`` on ``addr:port`` from a daemon thread."""
        start_http_server(port, addr=addr, registry=self.registry)
