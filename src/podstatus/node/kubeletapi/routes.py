"""The kubelet API's plain routes: ``/containerLogs``, ``/pods``, ``/runningpods/``,
``/healthz``, ``/stats/summary`` and ``/metrics/resource``, with the kubelet's query
parameters and status codes (``pkg/kubelet/server/server.go``, v1.37).

``/containerLogs/{ns}/{pod}/{container}`` takes PodLogOptions as query (``follow``,
``tailLines`` / legacy ``tail``, ``sinceSeconds``, ``sinceTime``, ``timestamps``,
``previous``, ``limitBytes``): 400 on an undecodable query, 422 on an invalid one, 404
for a pod or container not on this node. ``/metrics/resource`` is the kubelet's
Prometheus text, from the provider's own or built from its stats Summary.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
from collections.abc import Callable
from typing import Any

from aiohttp import web

from ..capabilities import LogOptions, has_capability
from ..logs import log_fields
from .context import HTTPFailure, NodeContext

__all__ = ["PlainRoutes", "metrics_from_summary", "parse_log_options"]

log = logging.getLogger(__name__)


# --- query parsing ---------------------------------------------------------------------


def _bool(value: str) -> bool:
    # strconv.ParseBool, as DecodeParameters reads a bool.
    if value in ("1", "t", "T", "TRUE", "true", "True"):
        return True
    if value in ("0", "f", "F", "FALSE", "false", "False"):
        return False
    raise ValueError(value)


def parse_log_options(query: Any) -> LogOptions:
    """PodLogOptions from a kubelet ``/containerLogs`` query; :class:`HTTPFailure` 400/422 when bad."""
    values = {k: query.getall(k) if hasattr(query, "getall") else [query[k]] for k in query}
    tail = values.get("tail")
    if tail:
        # The kubelet's backwards-compatible "tail"; "all" is no limit.
        values.pop("tailLines", None)
        if tail[0] != "all":
            values["tailLines"] = [tail[0]]
    try:

        def one(name: str, convert: Callable[[str], Any]) -> Any:
            got = values.get(name)
            return convert(got[0]) if got else None

        since_time = one("sinceTime", _rfc3339)
        options = LogOptions(
            follow=bool(one("follow", _bool)),
            tail_lines=one("tailLines", int),
            since_seconds=one("sinceSeconds", int),
            since_time=since_time,
            timestamps=bool(one("timestamps", _bool)),
            previous=bool(one("previous", _bool)),
            limit_bytes=one("limitBytes", int),
        )
        stream = one("stream", str)
    except (ValueError, TypeError):
        raise HTTPFailure(400, '{"message": "Unable to decode query."}') from None
    invalid = (
        (options.tail_lines is not None and options.tail_lines < 0)
        or (options.limit_bytes is not None and options.limit_bytes < 1)
        or (options.since_seconds is not None and options.since_seconds < 1)
        or (options.since_seconds is not None and options.since_time is not None)
        or stream not in (None, "All", "Stdout", "Stderr")
        or (stream not in (None, "All") and options.tail_lines is not None)
    )
    if invalid:
        raise HTTPFailure(422, '{"message": "Invalid request."}')
    if stream not in (None, "All"):
        # A provider gives one log per container: stdout and stderr are not kept apart.
        raise HTTPFailure(
            400, f"unable to return the given log stream: {stream!r}: the provider keeps one log"
        )
    return options


def _rfc3339(text: str) -> dt.datetime:
    when = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    if when.tzinfo is None:
        raise ValueError("sinceTime needs a time zone")
    return when.astimezone(dt.UTC)


# --- metrics ---------------------------------------------------------------------------

_METRICS_HELP = (
    (
        "container_cpu_usage_seconds_total",
        "counter",
        "Cumulative cpu time consumed by the container in core-seconds",
    ),
    ("container_memory_working_set_bytes", "gauge", "Current working set of the container in bytes"),
    ("container_start_time_seconds", "gauge", "Start time of the container since unix epoch in seconds"),
    ("node_cpu_usage_seconds_total", "counter", "Cumulative cpu time consumed by the node in core-seconds"),
    ("node_memory_working_set_bytes", "gauge", "Current working set of the node in bytes"),
    ("pod_cpu_usage_seconds_total", "counter", "Cumulative cpu time consumed by the pod in core-seconds"),
    ("pod_memory_working_set_bytes", "gauge", "Current working set of the pod in bytes"),
    (
        "resource_scrape_error",
        "gauge",
        "1 if there was an error while getting container metrics, 0 otherwise",
    ),
)


def _millis(stamp: Any) -> str:
    if not stamp:
        return ""
    try:
        return " " + str(int(_rfc3339(str(stamp)).timestamp() * 1000))
    except ValueError:
        return ""


def _label(value: Any) -> str:
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _num(value: float) -> str:
    return repr(float(value)) if value != int(value) else str(int(value))


def metrics_from_summary(summary: dict[str, Any] | None) -> str:
    """``/metrics/resource`` in the kubelet's Prometheus text, from a stats/v1alpha1 Summary.

    ``None`` (no summary to be had) gives ``resource_scrape_error 1`` alone, as the kubelet
    does when its stats provider fails.
    """
    samples: dict[str, list[str]] = {name: [] for name, _, _ in _METRICS_HELP}
    error = summary is None

    def usage(prefix: str, labels: str, stats: dict[str, Any]) -> dict[str, Any]:
        """The cpu and working-set samples of one node, pod or container; its cpu stats back."""
        cpu, mem = stats.get("cpu") or {}, stats.get("memory") or {}
        series = f"{{{labels}}}" if labels else ""
        if "usageCoreNanoSeconds" in cpu:
            samples[f"{prefix}_cpu_usage_seconds_total"].append(
                f"{prefix}_cpu_usage_seconds_total{series} "
                f"{_num(cpu['usageCoreNanoSeconds'] / 1e9)}{_millis(cpu.get('time'))}"
            )
        if "workingSetBytes" in mem:
            samples[f"{prefix}_memory_working_set_bytes"].append(
                f"{prefix}_memory_working_set_bytes{series} "
                f"{_num(mem['workingSetBytes'])}{_millis(mem.get('time'))}"
            )
        return cpu

    usage("node", "", (summary or {}).get("node") or {})
    for pod in (summary or {}).get("pods") or ():
        ref = pod.get("podRef") or {}
        pod_labels = f'namespace="{_label(ref.get("namespace", ""))}",pod="{_label(ref.get("name", ""))}"'
        usage("pod", pod_labels, pod)
        for c in pod.get("containers") or ():
            labels = f'container="{_label(c.get("name", ""))}",{pod_labels}'
            ccpu = usage("container", labels, c)
            if c.get("startTime"):
                with contextlib.suppress(ValueError):
                    start = _rfc3339(str(c["startTime"])).timestamp()
                    samples["container_start_time_seconds"].append(
                        f"container_start_time_seconds{{{labels}}} {_num(start)}{_millis(ccpu.get('time'))}"
                    )
    samples["resource_scrape_error"].append(f"resource_scrape_error {1 if error else 0}")
    out = []
    for name, kind, text in _METRICS_HELP:
        if samples[name]:
            out.append(f"# HELP {name} [STABLE] {text}")
            out.append(f"# TYPE {name} {kind}")
            out.extend(samples[name])
    return "\n".join(out) + "\n"


# --- the routes ------------------------------------------------------------------------


class PlainRoutes:
    """The handlers of the routes that are not streams (logs are chunked HTTP, not WebSocket)."""

    def __init__(self, context: NodeContext) -> None:
        self.context = context

    async def healthz(self, request: web.Request) -> web.Response:
        node = self.context.node_of(request)
        problems = node.agent.problems()
        if problems:
            return web.Response(
                status=500, text="".join(f"[-]{p}\n" for p in problems) + "healthz check failed\n"
            )
        return web.Response(text="ok")

    async def pods(self, request: web.Request) -> web.Response:
        node = self.context.node_of(request)
        items = []
        for pod in node.agent.pods.get_pods():
            body = pod.to_dict()
            status = node.agent.manager.get_pod_status(pod.uid)
            if status is not None:
                body["status"] = status.to_dict()
            items.append(body)
        return web.json_response({"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": items})

    async def running_pods(self, request: web.Request) -> web.Response:
        node = self.context.node_of(request)
        pods = await self.context.call(node.agent.provider.get_pods)
        items = []
        for pod in pods or ():
            # As the kubelet's runtime pods: identity and containers, nothing the runtime does not know.
            items.append(
                {
                    "metadata": {
                        "name": pod.metadata.name,
                        "namespace": pod.metadata.namespace,
                        "uid": pod.uid,
                        "creationTimestamp": None,
                    },
                    "spec": {
                        "containers": [{"name": c.name, "image": c.image or ""} for c in pod.spec.containers]
                    },
                    "status": {},
                }
            )
        return web.json_response({"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": items})

    async def stats(self, request: web.Request) -> web.Response:
        node = self.context.node_of(request)
        fn = self.context.capability(node, "get_stats_summary")
        try:
            summary = await self.context.call(fn)
        except Exception as err:
            raise HTTPFailure(500, f'node "{node.name}": failed to get the stats summary: {err}') from err
        return web.json_response(summary)

    async def metrics(self, request: web.Request) -> web.Response:
        node = self.context.node_of(request)
        provider = node.agent.provider
        if has_capability(provider, "get_metrics_resource"):
            text = await self.context.call(provider.get_metrics_resource)
        else:
            fn = self.context.capability(node, "get_stats_summary")
            try:
                summary = await self.context.call(fn)
            except Exception as err:
                log_fields(log, logging.WARNING, "stats summary failed", node=node.name, error=str(err))
                summary = None
            text = metrics_from_summary(summary)
        return web.Response(
            body=str(text).encode(), headers={"Content-Type": "text/plain; version=0.0.4; charset=utf-8"}
        )

    async def logs(self, request: web.Request) -> web.StreamResponse:
        node = self.context.node_of(request)
        options = parse_log_options(request.query)
        pod = self.context.pod(node, request)
        container = self.context.container(pod, request)
        fn = self.context.capability(node, "get_container_logs")
        try:
            result = await self.context.call(
                fn, pod.metadata.namespace, pod.metadata.name, container, options
            )
        except Exception as err:
            # The kubelet answers a runtime's log error with 400 and its text.
            raise HTTPFailure(400, str(err) or type(err).__name__) from err
        response = web.StreamResponse(headers={"Content-Type": "text/plain"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        remaining = options.limit_bytes

        async def send(chunk: bytes) -> bool:
            nonlocal remaining
            if remaining is not None:
                chunk = chunk[:remaining]
                remaining -= len(chunk)
            if chunk:
                await response.write(chunk)
            return remaining is None or remaining > 0

        try:
            if isinstance(result, bytes | bytearray | memoryview):
                await send(bytes(result))
            elif hasattr(result, "__aiter__"):
                iterator = result.__aiter__()
                try:
                    async for chunk in iterator:
                        if not await send(bytes(chunk)):
                            break
                finally:
                    closer = getattr(iterator, "aclose", None)
                    if closer is not None:
                        with contextlib.suppress(Exception):
                            await closer()
            elif result is not None:
                iterator = iter(result)
                end = object()
                try:
                    while True:
                        chunk = await self.context.in_pool(next, iterator, end)
                        if chunk is end or not await send(bytes(chunk)):
                            break
                finally:
                    closer = getattr(iterator, "close", None)
                    if closer is not None:
                        with contextlib.suppress(Exception):
                            await self.context.in_pool(closer)
            await response.write_eof()
        except (ConnectionError, asyncio.CancelledError):
            log_fields(log, logging.DEBUG, "log stream caller went away", node=node.name, pod=pod.key())
        except Exception as err:
            # Headers are out: the kubelet also just ends the stream here; the log says why.
            log_fields(
                log, logging.WARNING, "log stream failed", node=node.name, pod=pod.key(), error=str(err)
            )
        return response
