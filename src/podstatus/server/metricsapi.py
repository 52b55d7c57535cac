"""``metrics.k8s.io/v1beta1`` in ``podstatus serve``, answered as metrics-server answers it.

``kubectl top pod`` and ``kubectl top node`` read NodeMetrics and PodMetrics. metrics-server
scrapes every kubelet on a timer; here the nodes a request needs are scraped when it comes
(``/stats/summary`` through :class:`.proxy.KubeletProxy`, several nodes at once) and each
node's answer is kept for a few seconds, so a burst of requests costs one scrape per node
and an idle server scrapes nothing. The summary's ``usageNanoCores`` is already a rate, so
one scrape gives figures (metrics-server, reading cumulative ``/metrics/resource``, needs two).

As in metrics-server: a node that cannot be scraped is left out (logged once per scrape),
a pod is listed only when every one of its containers has figures, and objects carry the
labels of their Node or Pod so label selectors work.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

from ..errors import ApiError, status_body
from .proxy import KubeletProxy
from .storage.objects import Stored
from .storage.store import Store

__all__ = ["GROUP", "VERSION", "MetricsApi", "api_group", "resource_list"]

log = logging.getLogger(__name__)

GROUP = "metrics.k8s.io"
VERSION = "v1beta1"
_GV = f"{GROUP}/{VERSION}"
# How long one node's scrape is reused (metrics-server's --metric-resolution default is 15 s).
CACHE_SECONDS = 10.0
# What a NodeMetrics' window says: the figures are the kubelet's own short-term rates.
_WINDOW = "10s"
_SCRAPE_WORKERS = 16


def api_group() -> dict[str, Any]:
    """The APIGroup as metrics-server's APIService makes kube-apiserver list it."""
    version = {"groupVersion": _GV, "version": VERSION}
    return {"name": GROUP, "versions": [version], "preferredVersion": version}


def resource_list() -> dict[str, Any]:
    def res(name: str, kind: str, namespaced: bool) -> dict[str, Any]:
        return {
            "name": name,
            "singularName": "",
            "namespaced": namespaced,
            "kind": kind,
            "verbs": ["get", "list"],
        }

    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": _GV,
        "resources": [res("nodes", "NodeMetrics", False), res("pods", "PodMetrics", True)],
    }


def _not_found(resource: str, name: str) -> ApiError:
    message = f'{resource}.{GROUP} "{name}" not found'
    body = status_body(404, "NotFound", message, name=name, group=GROUP, kind=resource)
    return ApiError(message, code=404, reason="NotFound", status=body)


def _cpu(nanocores: Any) -> str:
    return f"{int(nanocores)}n"


def _memory(count: Any) -> str:
    value = int(count)
    return f"{value // 1024}Ki" if value and value % 1024 == 0 else str(value)


def _rfc3339(ts: float) -> str:
    return datetime.fromtimestamp(int(ts), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class MetricsApi:
    """NodeMetrics and PodMetrics from the nodes' stats summaries (see the module's docstring)."""

    def __init__(self, store: Store, kubelet: KubeletProxy, *, cache_seconds: float = CACHE_SECONDS) -> None:
        self.store = store
        self.kubelet = kubelet
        self.cache_seconds = cache_seconds
        self._cache: dict[str, tuple[float, dict[str, Any] | None]] = {}
        self._lock = threading.Lock()
        # Made at the first scrape, dropped at close (a server can be started again).
        self._pool: ThreadPoolExecutor | None = None
        self.scrapes = 0

    # -- scraping ------------------------------------------------------------------------------

    def _scrape(self, node: str) -> dict[str, Any] | None:
        try:
            status, _, stream = self.kubelet.node_proxy("GET", node, "/stats/summary", "", {}, b"")
            if not isinstance(stream, Iterable):
                return None
            body = b"".join(stream)
            if status != 200:
                raise ValueError(f"status {status}: {body[:200].decode('utf-8', 'replace')}")
            data = json.loads(body)
            if not isinstance(data, dict):
                raise ValueError("the summary is not a JSON object")
            return data
        except (ApiError, OSError, ValueError) as err:
            log.warning("failed to scrape node", extra={"node": node, "error": str(err)})
            return None
        finally:
            self.scrapes += 1

    def summaries(self, nodes: Iterable[str]) -> dict[str, dict[str, Any]]:
        """Each node's summary (fresh enough, else scraped now, in parallel); unscrapable ones left out."""
        now = time.monotonic()
        wanted = sorted(set(nodes))
        out: dict[str, dict[str, Any]] = {}
        stale: list[str] = []
        with self._lock:
            for node in wanted:
                kept = self._cache.get(node)
                if kept is not None and now - kept[0] < self.cache_seconds:
                    if kept[1] is not None:
                        out[node] = kept[1]
                else:
                    stale.append(node)
        if stale:
            with self._lock:
                if self._pool is None:
                    self._pool = ThreadPoolExecutor(
                        max_workers=_SCRAPE_WORKERS, thread_name_prefix="metrics-scrape"
                    )
                pool = self._pool
            got = list(pool.map(self._scrape, stale))
            with self._lock:
                for node, data in zip(stale, got, strict=True):
                    self._cache[node] = (time.monotonic(), data)
                    if data is not None:
                        out[node] = data
        return out

    # -- answers -------------------------------------------------------------------------------

    def handle(self, method: str, parts: list[str], query: Mapping[str, str]) -> tuple[int, dict[str, Any]]:
        """``/apis/metrics.k8s.io/v1beta1/...`` below the version: (status, body)."""
        if method != "GET":
            msg = "the server does not allow this method on the requested resource"
            return 405, status_body(405, "MethodNotAllowed", msg)
        namespace: str | None = None
        if len(parts) >= 3 and parts[0] == "namespaces":
            namespace, parts = parts[1], parts[2:]
        if (
            not parts
            or len(parts) > 2
            or parts[0] not in ("nodes", "pods")
            or (parts[0] == "nodes" and namespace is not None)
        ):
            return 404, status_body(404, "NotFound", "the server could not find the requested resource")
        name = parts[1] if len(parts) == 2 else None
        labels = query.get("labelSelector") or None
        fields = query.get("fieldSelector") or None
        if parts[0] == "nodes":
            return 200, self._nodes(name, labels, fields)
        if name is not None and namespace is None:
            return 404, status_body(404, "NotFound", "the server could not find the requested resource")
        return 200, self._pods(namespace, name, labels, fields)

    def _nodes(self, name: str | None, labels: str | None, fields: str | None) -> dict[str, Any]:
        if name is not None:
            try:
                nodes = [self.store.get("nodes", None, name)]
            except ApiError as err:
                if err.code == 404:
                    raise _not_found("nodes", name) from None
                raise
        else:
            nodes, _ = self.store.list("nodes", None, label_selector=labels, field_selector=fields)
        summaries = self.summaries(n.name for n in nodes)
        items = [m for n in nodes if (m := self._node_metrics(n, summaries.get(n.name))) is not None]
        if name is not None:
            if not items:
                raise _not_found("nodes", name)
            return items[0]
        return {"kind": "NodeMetricsList", "apiVersion": _GV, "metadata": {}, "items": items}

    @staticmethod
    def _node_metrics(node: Stored, summary: dict[str, Any] | None) -> dict[str, Any] | None:
        stats = (summary or {}).get("node") or {}
        cpu, memory = stats.get("cpu") or {}, stats.get("memory") or {}
        if cpu.get("usageNanoCores") is None or memory.get("workingSetBytes") is None:
            return None
        meta = node.metadata
        return {
            "kind": "NodeMetrics",
            "apiVersion": _GV,
            "metadata": {
                "name": node.name,
                "creationTimestamp": _rfc3339(time.time()),
                "labels": meta.get("labels") or {},
            },
            "timestamp": cpu.get("time") or _rfc3339(time.time()),
            "window": _WINDOW,
            "usage": {"cpu": _cpu(cpu["usageNanoCores"]), "memory": _memory(memory["workingSetBytes"])},
        }

    def _pods(
        self, namespace: str | None, name: str | None, labels: str | None, fields: str | None
    ) -> dict[str, Any]:
        if name is not None:
            pods = [self.store.get("pods", namespace, name)] if self._exists(namespace, name) else []
        else:
            pods, _ = self.store.list("pods", namespace, label_selector=labels, field_selector=fields)
        on_node: dict[tuple[str, str], str] = {}
        for pod in pods:
            node = (pod.obj.get("spec") or {}).get("nodeName")
            if node:
                on_node[(pod.namespace, pod.name)] = node
        summaries = self.summaries(on_node.values())
        found: dict[tuple[str, str, str], dict[str, Any]] = {}
        for summary in summaries.values():
            for stats in summary.get("pods") or []:
                ref = stats.get("podRef") or {}
                found[(ref.get("namespace", ""), ref.get("name", ""), ref.get("uid", ""))] = stats
        items = []
        for pod in pods:
            stats = found.get((pod.namespace, pod.name, pod.uid)) or found.get((pod.namespace, pod.name, ""))
            if stats is None:
                continue
            item = self._pod_metrics(pod, stats)
            if item is not None:
                items.append(item)
        if name is not None:
            if not items:
                raise _not_found("pods", name)
            return items[0]
        return {"kind": "PodMetricsList", "apiVersion": _GV, "metadata": {}, "items": items}

    def _exists(self, namespace: str | None, name: str) -> bool:
        try:
            self.store.get("pods", namespace, name)
        except ApiError as err:
            if err.code == 404:
                return False
            raise
        return True

    @staticmethod
    def _pod_metrics(pod: Stored, stats: dict[str, Any]) -> dict[str, Any] | None:
        containers = []
        stamp = ""
        for c in stats.get("containers") or []:
            cpu, memory = c.get("cpu") or {}, c.get("memory") or {}
            if cpu.get("usageNanoCores") is None or memory.get("workingSetBytes") is None:
                return None  # metrics-server drops a pod with any container lacking figures
            stamp = stamp or cpu.get("time") or ""
            usage = {"cpu": _cpu(cpu["usageNanoCores"]), "memory": _memory(memory["workingSetBytes"])}
            containers.append({"name": c.get("name", ""), "usage": usage})
        if not containers:
            return None
        meta = pod.metadata
        return {
            "kind": "PodMetrics",
            "apiVersion": _GV,
            "metadata": {
                "name": pod.name,
                "namespace": pod.namespace,
                "creationTimestamp": _rfc3339(time.time()),
                "labels": meta.get("labels") or {},
            },
            "timestamp": stamp or _rfc3339(time.time()),
            "window": _WINDOW,
            "containers": containers,
        }

    def close(self) -> None:
        with self._lock:
            pool, self._pool = self._pool, None
            self._cache.clear()
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
