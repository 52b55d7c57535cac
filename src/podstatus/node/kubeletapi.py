"""The kubelet's HTTPS API for podstatus nodes: logs, exec, attach, port-forward, pods, stats.

One :class:`KubeletAPIServer` per process serves every node of it (``podstatus node
--nodes N``): one event loop thread, one aiohttp application, one listening socket per
node (its own port on a shared address; docs/design.md says why and what it costs).
A request is routed to its node by the local port it arrived on, so ``/stats/summary``
and ``/pods``, which name no node, answer for the right one.

Routes, parameters and status codes follow ``pkg/kubelet/server/server.go`` (v1.37):

- ``/containerLogs/{ns}/{pod}/{container}``: PodLogOptions as query (``follow``,
  ``tailLines`` / legacy ``tail``, ``sinceSeconds``, ``sinceTime``, ``timestamps``,
  ``previous``, ``limitBytes``); 400 on an undecodable query, 422 on an invalid one,
  404 for a pod or container not on this node.
- ``/exec``, ``/attach`` (``/{ns}/{pod}[/{uid}]/{container}``): WebSocket with
  ``v5.channel.k8s.io``, ``v4.channel.k8s.io`` (and the older channel protocols);
  query ``command`` (repeated), ``input``/``output``/``error``/``tty`` (kube-apiserver's
  names; ``stdin``/``stdout``/``stderr`` too), ``1`` or ``true``.
- ``/portForward/{ns}/{pod}[/{uid}]``: WebSocket, the kubelet's channel protocol
  (``?port=N`` repeated, a data and an error channel per port, each opened with the
  port as two little-endian bytes).
- ``/pods``, ``/runningpods/``, ``/healthz``, ``/stats/summary``, ``/metrics/resource``.

A provider without the capability gets 501 Not Implemented with a message naming the
node and the capability: the kubelet's "not found" for a disabled streaming method
would read as "pod not found" to ``kubectl``.

Authentication as the kubelet's (``--client-ca-file``, ``--authentication-token-webhook``,
``--authorization-mode``): a client certificate signed by the given CA, or a bearer
token checked with a TokenReview; nobody else (401). Authorization ``Webhook`` asks a
SubjectAccessReview for ``nodes/<subresource>`` as the kubelet maps paths (403 when
denied); ``AlwaysAllow`` lets every authenticated caller in.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import datetime as dt
import hashlib
import inspect
import json
import logging
import shutil
import ssl
import struct
import threading
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from aiohttp import WSMsgType, web

from ..tls import TlsMaterial, generate_tls, private_dir, server_context, write_private
from . import spdy
from .calls import DaemonPool
from .capabilities import CAPABILITIES, ExecIO, LogOptions, Pipe, PortStream, TermSize, has_capability
from .logs import log_fields
from .servingcert import ServingCertRotator

__all__ = [
    "KubeletAPIConfig",
    "KubeletAPIServer",
    "metrics_from_summary",
    "parse_log_options",
]

log = logging.getLogger(__name__)

# The kubelet's authorization caches (--authentication-token-webhook-cache-ttl and
# --authorization-webhook-cache-{authorized,unauthorized}-ttl defaults).
TOKEN_TTL = 120.0
ALLOWED_TTL = 300.0
DENIED_TTL = 30.0

# Channels of the remote command protocols (k8s.io/streaming remotecommand).
STDIN, STDOUT, STDERR, ERROR, RESIZE = 0, 1, 2, 3, 4
STREAM_CLOSE = 255

V5 = "v5.channel.k8s.io"
V4 = "v4.channel.k8s.io"
V4_BASE64 = "v4.base64.channel.k8s.io"
V1 = "channel.k8s.io"
V1_BASE64 = "base64.channel.k8s.io"
EXEC_PROTOCOLS = (V5, V4, V4_BASE64, V1, V1_BASE64, "")
# SPDY/3.1 tunnelled in WebSocket: what kubectl >= 1.31 asks for (see .spdy).
TUNNEL = "SPDY/3.1+portforward.k8s.io"
PORT_FORWARD_PROTOCOLS = (TUNNEL, V4, V4_BASE64, V1, V1_BASE64, "")
_BASE64 = {V4_BASE64, V1_BASE64}
_STATUS_ERRORS = {V5, V4, V4_BASE64}  # the error channel carries a metav1.Status (else text)
# Bytes a caller may send ahead of the provider (stdin, port-forward data) before its frames
# are no longer read: TCP then slows the caller down instead of memory growing.
INBOUND_LIMIT = 4 << 20


class HTTPFailure(Exception):
    """An answer other than 200: status, plain text (as the kubelet writes its errors)."""

    def __init__(self, status: int, text: str) -> None:
        super().__init__(text)
        self.status = status
        self.text = text


@dataclass(frozen=True)
class KubeletAPIConfig:
    """How the kubelet API of a process listens and whom it lets in.

    ``address``: where every node's socket listens. ``tls``: the serving certificate
    (None: a fresh self-signed one for ``address`` and the node names). ``client_ca_pem``:
    client certificates signed by it authenticate (CN the user, O the groups).
    ``token_webhook``: bearer tokens authenticate through a TokenReview. ``authorization``:
    ``"AlwaysAllow"`` or ``"Webhook"`` (SubjectAccessReview). ``reviewer``: the client the
    reviews (and certificate requests) are created with (the agent's).
    ``rotate_server_certificates``: each node asks for its serving certificate with a
    ``kubernetes.io/kubelet-serving`` CSR and renews it (:mod:`.servingcert`). ``stream_threads``: most provider calls (plain
    methods) running at once; each stream holds one for its length.
    """

    address: str = "127.0.0.1"
    tls: TlsMaterial | None = None
    client_ca_pem: bytes | None = None
    token_webhook: bool = False
    authorization: str = "AlwaysAllow"
    reviewer: Any = None
    stream_threads: int = 512
    rotate_server_certificates: bool = False
    csr_expiration_seconds: int | None = None
    csr_renew_fraction: float = 0.8

    def __post_init__(self) -> None:
        if self.authorization not in ("AlwaysAllow", "Webhook"):
            raise ValueError(f"authorization must be AlwaysAllow or Webhook, got {self.authorization!r}")
        if (
            self.token_webhook or self.authorization == "Webhook" or self.rotate_server_certificates
        ) and self.reviewer is None:
            raise ValueError("webhooks and certificate requests need a reviewer (an API client)")


@dataclass
class _Node:
    name: str
    port: int
    agent: Any = None
    site: Any = None
    address: str = ""


@dataclass
class _User:
    name: str
    groups: tuple[str, ...] = ()
    uid: str = ""
    extra: dict[str, list[str]] = field(default_factory=dict)


# --- query parsing ---------------------------------------------------------------------


def _bool(value: str) -> bool:
    # strconv.ParseBool, as DecodeParameters reads a bool.
    if value in ("1", "t", "T", "TRUE", "true", "True"):
        return True
    if value in ("0", "f", "F", "FALSE", "false", "False"):
        return False
    raise ValueError(value)


def _flag(query: Any, *names: str) -> bool:
    # remotecommand.NewOptions: a stream is on when its parameter is "1" (kubectl may say "true").
    return any(query.get(n) in ("1", "true", "True") for n in names)


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


# --- the server ------------------------------------------------------------------------


def _attributes(path: str, method: str) -> tuple[str, list[str]]:
    """The verb and the ``nodes`` subresources (any one allowed suffices) of a request,
    as the kubelet's nodeAuthorizerAttributesGetter (KubeletFineGrainedAuthz on)."""
    verb = {"POST": "create", "GET": "get", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}.get(
        method, ""
    )

    def under(prefix: str) -> bool:
        return path == prefix or path.startswith(prefix + "/")

    subresources = []
    if under("/pods") or under("/runningpods"):
        subresources.append("pods")
    elif under("/healthz"):
        subresources.append("healthz")
    if under("/stats"):
        subresources.append("stats")
    elif under("/metrics"):
        subresources.append("metrics")
    elif under("/logs"):
        subresources.append("log")
    else:
        subresources.append("proxy")
    return verb, subresources


class KubeletAPIServer:
    """The kubelet API of every node of a process: ``add_node`` binds a node's socket,
    ``set_agent`` hands it the node's :class:`~podstatus.node.agent.NodeAgent`."""

    def __init__(self, config: KubeletAPIConfig) -> None:
        self.config = config
        self._nodes: dict[int, _Node] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self._ssl: ssl.SSLContext | None = None
        self._pool = DaemonPool(max(1, config.stream_threads), "kubelet-api")
        self._token_cache: dict[str, tuple[float, _User | None]] = {}
        self._sar_cache: dict[tuple[Any, ...], tuple[float, bool]] = {}
        self.tls: TlsMaterial | None = None
        self.rotators: dict[str, ServingCertRotator] = {}
        self.requests = 0

    # -- lifecycle ------------------------------------------------------------------

    def start(self, node_names: Sequence[str] = (), addresses: Sequence[str] = ()) -> None:
        """Start the event loop; the serving certificate covers the addresses and ``node_names``."""
        if self._loop is not None:
            return
        hosts = list(dict.fromkeys([self.config.address, *addresses]))
        self.tls = self.config.tls or generate_tls([*hosts, *node_names])
        self._ssl = self._context()
        loop = asyncio.new_event_loop()
        ready = threading.Event()

        def run() -> None:
            asyncio.set_event_loop(loop)
            ready.set()
            loop.run_forever()

        self._loop = loop
        self._thread = threading.Thread(target=run, name="kubelet-api", daemon=True)
        self._thread.start()
        ready.wait()
        self._call_soon(self._setup()).result(30)

    def _context(self) -> ssl.SSLContext:
        assert self.tls is not None
        context = server_context(self.tls)
        if self.config.client_ca_pem:
            folder = private_dir("podstatus-kubelet-ca-")
            try:
                ca = folder / "ca.crt"
                write_private(ca, self.config.client_ca_pem)
                context.load_verify_locations(cafile=str(ca))
            finally:
                shutil.rmtree(folder, ignore_errors=True)
            # Optional: a caller with a token, or none, still gets its 401 as an HTTP answer.
            context.verify_mode = ssl.CERT_OPTIONAL
        return context

    def _call_soon(self, coro: Any) -> Any:
        assert self._loop is not None
        return asyncio.run_coroutine_threadsafe(coro, self._loop)

    async def _setup(self) -> None:
        app = web.Application(middlewares=[self._authenticate], client_max_size=1 << 20)
        for method in ("GET", "POST"):
            for path in (
                "/exec/{ns}/{pod}/{container}",
                "/exec/{ns}/{pod}/{uid}/{container}",
            ):
                app.router.add_route(method, path, self._exec)
            for path in ("/attach/{ns}/{pod}/{container}", "/attach/{ns}/{pod}/{uid}/{container}"):
                app.router.add_route(method, path, self._attach)
            for path in ("/portForward/{ns}/{pod}", "/portForward/{ns}/{pod}/{uid}"):
                app.router.add_route(method, path, self._port_forward)
        app.router.add_get("/containerLogs/{ns}/{pod}/{container}", self._logs)
        app.router.add_get("/pods", self._pods)
        app.router.add_get("/pods/", self._pods)
        app.router.add_get("/runningpods/", self._running_pods)
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/stats/summary", self._stats)
        app.router.add_get("/stats/summary/", self._stats)
        app.router.add_get("/metrics/resource", self._metrics)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=1.0)
        await self._runner.setup()

    def add_node(self, node_name: str, port: int = 0, address: str | None = None) -> tuple[str, int]:
        """Listen for ``node_name`` on ``address`` (default the configured one) and ``port`` (0: any
        free one); returns (address, port)."""
        result: tuple[str, int] = self._call_soon(
            self._add(node_name, port, address or self.config.address)
        ).result(30)
        return result

    async def _add(self, node_name: str, port: int, address: str) -> tuple[str, int]:
        assert self._runner is not None
        context = self._ssl
        if self.config.rotate_server_certificates:
            context = self._context()  # its own: the node's certificate goes into it
        site = web.TCPSite(self._runner, address, port, ssl_context=context, backlog=128, reuse_address=True)
        await site.start()
        server = site._server
        assert server is not None and server.sockets  # type: ignore[attr-defined]
        bound = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]
        self._nodes[bound] = _Node(node_name, bound, site=site, address=address)
        if self.config.rotate_server_certificates and context is not None:
            rotator = ServingCertRotator(
                self.config.reviewer,
                node_name,
                address,
                context,
                renew_fraction=self.config.csr_renew_fraction,
                expiration_seconds=self.config.csr_expiration_seconds,
            )
            self.rotators[node_name] = rotator
            rotator.start()
        log_fields(
            log,
            logging.INFO,
            "kubelet API listening",
            node=node_name,
            address=address,
            port=bound,
        )
        return address, bound

    def endpoints(self) -> list[tuple[str, int]]:
        """(address, port) of every node, in the order they were added."""
        return [(node.address or self.config.address, node.port) for node in self._nodes.values()]

    def set_agent(self, port: int, agent: Any) -> None:
        self._nodes[port].agent = agent

    def stop(self) -> None:
        loop = self._loop
        if loop is None:
            return
        for rotator in self.rotators.values():
            rotator.stop()
        with contextlib.suppress(Exception):
            self._call_soon(self._cleanup()).result(10)
        loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(5)
            if not self._thread.is_alive():
                loop.close()
        self._pool.shutdown()
        self._loop = None

    async def _cleanup(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    # -- authentication and authorization -------------------------------------------

    @web.middleware
    async def _authenticate(self, request: web.Request, handler: Callable[..., Any]) -> web.StreamResponse:
        self.requests += 1
        try:
            node = self._node_of(request)
            user = await self._user(request)
            if user is None:
                return web.Response(status=401, text="Unauthorized")
            if self.config.authorization == "Webhook":
                verb, subresources = _attributes(request.path, request.method)
                allowed = False
                for sub in subresources:
                    if await self._authorized(user, verb, sub, node.name, request.path):
                        allowed = True
                        break
                if not allowed:
                    log_fields(
                        log,
                        logging.INFO,
                        "kubelet API request forbidden",
                        node=node.name,
                        user=user.name,
                        verb=verb,
                        subresources=",".join(subresources),
                    )
                    return web.Response(
                        status=403,
                        text=f"Forbidden (user={user.name}, verb={verb}, resource=nodes, "
                        f"subresource(s)=[{' '.join(subresources)}])",
                    )
            response: web.StreamResponse = await handler(request)
            return response
        except HTTPFailure as failure:
            return web.Response(status=failure.status, text=failure.text)

    async def _user(self, request: web.Request) -> _User | None:
        cert = request.transport.get_extra_info("peercert") if request.transport is not None else None
        if cert and self.config.client_ca_pem:
            # Only a chain the CA verified fills peercert (CERT_OPTIONAL).
            name, groups = "", []
            for rdn in cert.get("subject", ()):
                for key, value in rdn:
                    if key == "commonName":
                        name = value
                    elif key == "organizationName":
                        groups.append(value)
            if name:
                return _User(name, (*groups, "system:authenticated"))
        header = request.headers.get("Authorization", "")
        scheme, _, token = header.partition(" ")
        if scheme.lower() == "bearer" and token.strip() and self.config.token_webhook:
            return await self._token_user(token.strip())
        return None

    async def _token_user(self, token: str) -> _User | None:
        now = time.monotonic()
        key = hashlib.sha256(token.encode()).hexdigest()  # the cache holds no token itself
        cached = self._token_cache.get(key)
        if cached is not None and cached[0] > now:
            return cached[1]
        review = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenReview",
            "spec": {"token": token},
        }
        try:
            answer = await self._review("/apis/authentication.k8s.io/v1/tokenreviews", review)
        except Exception as err:
            log_fields(log, logging.WARNING, "TokenReview failed", error=f"{type(err).__name__}: {err}")
            return None
        status = answer.get("status") or {}
        user: _User | None = None
        if status.get("authenticated"):
            info = status.get("user") or {}
            user = _User(
                str(info.get("username", "")),
                tuple(info.get("groups") or ()),
                str(info.get("uid", "")),
                dict(info.get("extra") or {}),
            )
        self._token_cache[key] = (now + (TOKEN_TTL if user else DENIED_TTL), user)
        if len(self._token_cache) > 4096:
            self._token_cache = {k: v for k, v in self._token_cache.items() if v[0] > now}
        return user

    async def _authorized(self, user: _User, verb: str, subresource: str, node: str, path: str) -> bool:
        key = (user.name, user.groups, verb, subresource, node)
        now = time.monotonic()
        cached = self._sar_cache.get(key)
        if cached is not None and cached[0] > now:
            return cached[1]
        review = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {
                "user": user.name,
                "groups": list(user.groups),
                "uid": user.uid,
                "extra": user.extra,
                "resourceAttributes": {
                    "verb": verb,
                    "version": "v1",
                    "resource": "nodes",
                    "subresource": subresource,
                    "name": node,
                },
            },
        }
        try:
            answer = await self._review("/apis/authorization.k8s.io/v1/subjectaccessreviews", review)
        except Exception as err:
            log_fields(
                log, logging.WARNING, "SubjectAccessReview failed", error=f"{type(err).__name__}: {err}"
            )
            return False
        allowed = bool((answer.get("status") or {}).get("allowed"))
        self._sar_cache[key] = (now + (ALLOWED_TTL if allowed else DENIED_TTL), allowed)
        if len(self._sar_cache) > 4096:
            self._sar_cache = {k: v for k, v in self._sar_cache.items() if v[0] > now}
        return allowed

    async def _review(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        create = self.config.reviewer._create_object
        result: dict[str, Any] = await asyncio.wrap_future(self._pool.submit(create, path, body))
        return result

    # -- helpers --------------------------------------------------------------------

    def _node_of(self, request: web.Request) -> _Node:
        sock = request.transport.get_extra_info("sockname") if request.transport is not None else None
        node = self._nodes.get(sock[1]) if sock else None
        if node is None or node.agent is None:
            raise HTTPFailure(503, "the node is not running yet")
        return node

    def _pod(self, node: _Node, request: web.Request) -> Any:
        ns, name = request.match_info["ns"], request.match_info["pod"]
        pod = node.agent.pods.get_pod_by_name(ns, name)
        uid = request.match_info.get("uid")
        if pod is None or (uid and pod.uid != uid):
            raise HTTPFailure(404, f'pod "{name}" does not exist on node "{node.name}" (namespace "{ns}")')
        return pod

    @staticmethod
    def _container(pod: Any, request: web.Request) -> str:
        container = request.match_info["container"]
        spec = pod.spec
        names = {
            c.name
            for c in (*spec.containers, *(spec.init_containers or ()), *(spec.ephemeral_containers or ()))
        }
        if container not in names:
            raise HTTPFailure(404, f'container "{container}" not found in pod "{pod.metadata.name}"')
        return container

    @staticmethod
    def _capability(node: _Node, method: str) -> Callable[..., Any]:
        provider = node.agent.provider
        if not has_capability(provider, method):
            raise HTTPFailure(
                501,
                f'node "{node.name}": the provider ({type(provider).__name__}) does not implement '
                f"{CAPABILITIES[method]} ({method})",
            )
        fn: Callable[..., Any] = getattr(provider, method)
        return fn

    async def _call(self, fn: Callable[..., Any], *args: Any) -> Any:
        """A provider method: a coroutine on this loop, a plain call on a thread of the pool."""
        if inspect.iscoroutinefunction(fn):
            return await fn(*args)
        result = await asyncio.wrap_future(self._pool.submit(fn, *args))
        if inspect.isawaitable(result):
            result = await result
        return result

    # -- plain routes ---------------------------------------------------------------

    async def _healthz(self, request: web.Request) -> web.Response:
        node = self._node_of(request)
        problems = node.agent.problems()
        if problems:
            return web.Response(
                status=500, text="".join(f"[-]{p}\n" for p in problems) + "healthz check failed\n"
            )
        return web.Response(text="ok")

    async def _pods(self, request: web.Request) -> web.Response:
        node = self._node_of(request)
        items = []
        for pod in node.agent.pods.get_pods():
            body = pod.to_dict()
            status = node.agent.manager.get_pod_status(pod.uid)
            if status is not None:
                body["status"] = status.to_dict()
            items.append(body)
        return web.json_response({"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": items})

    async def _running_pods(self, request: web.Request) -> web.Response:
        node = self._node_of(request)
        pods = await self._call(node.agent.provider.get_pods)
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

    async def _stats(self, request: web.Request) -> web.Response:
        node = self._node_of(request)
        fn = self._capability(node, "get_stats_summary")
        try:
            summary = await self._call(fn)
        except Exception as err:
            raise HTTPFailure(500, f'node "{node.name}": failed to get the stats summary: {err}') from err
        return web.json_response(summary)

    async def _metrics(self, request: web.Request) -> web.Response:
        node = self._node_of(request)
        provider = node.agent.provider
        if has_capability(provider, "get_metrics_resource"):
            text = await self._call(provider.get_metrics_resource)
        else:
            fn = self._capability(node, "get_stats_summary")
            try:
                summary = await self._call(fn)
            except Exception as err:
                log_fields(log, logging.WARNING, "stats summary failed", node=node.name, error=str(err))
                summary = None
            text = metrics_from_summary(summary)
        return web.Response(
            body=str(text).encode(), headers={"Content-Type": "text/plain; version=0.0.4; charset=utf-8"}
        )

    async def _logs(self, request: web.Request) -> web.StreamResponse:
        node = self._node_of(request)
        options = parse_log_options(request.query)
        pod = self._pod(node, request)
        container = self._container(pod, request)
        fn = self._capability(node, "get_container_logs")
        try:
            result = await self._call(fn, pod.metadata.namespace, pod.metadata.name, container, options)
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
                        chunk = await asyncio.wrap_future(self._pool.submit(next, iterator, end))
                        if chunk is end or not await send(bytes(chunk)):
                            break
                finally:
                    closer = getattr(iterator, "close", None)
                    if closer is not None:
                        with contextlib.suppress(Exception):
                            await asyncio.wrap_future(self._pool.submit(closer))
            await response.write_eof()
        except (ConnectionError, asyncio.CancelledError):
            log_fields(log, logging.DEBUG, "log stream caller went away", node=node.name, pod=pod.key())
        except Exception as err:
            # Headers are out: the kubelet also just ends the stream here; the log says why.
            log_fields(
                log, logging.WARNING, "log stream failed", node=node.name, pod=pod.key(), error=str(err)
            )
        return response

    # -- streams --------------------------------------------------------------------

    @staticmethod
    def _negotiate(request: web.Request, supported: Sequence[str]) -> str:
        if request.headers.get("Upgrade", "").lower() != "websocket":
            upgrade = request.headers.get("Upgrade", "")
            if upgrade.lower().startswith("spdy"):
                raise HTTPFailure(
                    400,
                    "SPDY is not served by this podstatus node: use a WebSocket protocol "
                    f"({', '.join(p for p in supported if p)}); kube-apiserver 1.36+ proxies them "
                    "to a node that declares ExtendWebSocketsToKubelet",
                )
            raise HTTPFailure(400, "Upgrade request required")
        header = request.headers.get("Sec-WebSocket-Protocol", "")
        offered = [p.strip() for p in header.split(",") if p.strip()] or [""]
        for protocol in offered:
            if protocol in supported:
                return protocol
        raise HTTPFailure(
            400,
            f"requested protocol(s) are not supported: {offered}; supports {[p for p in supported if p]}",
        )

    async def _exec(self, request: web.Request) -> web.StreamResponse:
        return await self._remote_command(request, "exec")

    async def _attach(self, request: web.Request) -> web.StreamResponse:
        return await self._remote_command(request, "attach")

    async def _remote_command(self, request: web.Request, kind: str) -> web.StreamResponse:
        node = self._node_of(request)
        query = request.query
        tty = _flag(query, "tty")
        stdin = _flag(query, "input", "stdin")
        stdout = _flag(query, "output", "stdout")
        stderr = _flag(query, "error", "stderr") and not tty  # a terminal merges stderr
        if not (stdin or stdout or stderr):
            raise HTTPFailure(400, "you must specify at least 1 of stdin, stdout, stderr")
        command = query.getall("command", [])
        if kind == "exec" and not command:
            raise HTTPFailure(400, "command is required: at least one command= parameter")
        pod = self._pod(node, request)
        container = self._container(pod, request)
        method = "run_in_container" if kind == "exec" else "attach_to_container"
        fn = self._capability(node, method)
        protocol = self._negotiate(request, EXEC_PROTOCOLS)
        ws = web.WebSocketResponse(protocols=[protocol] if protocol else (), max_msg_size=0, autoping=True)
        await ws.prepare(request)
        b64 = protocol in _BASE64
        io = ExecIO(
            stdin=Pipe() if stdin else None,
            stdout=Pipe() if stdout else None,
            stderr=Pipe() if stderr else None,
            tty=tty,
        )
        log_fields(
            log,
            logging.INFO,
            f"{kind} started",
            node=node.name,
            pod=pod.key(),
            container=container,
            protocol=protocol or "(none)",
            tty=tty,
            command=" ".join(command)[:200],
        )

        async def send(channel: int, data: bytes) -> None:
            if b64:
                await ws.send_str(chr(ord("0") + channel) + base64.b64encode(data).decode())
            else:
                await ws.send_bytes(bytes([channel]) + data)

        # The first (empty) frame on the lowest writable channel tells the client it is open.
        await send(STDOUT if stdout else STDERR if stderr else ERROR, b"")
        reader = asyncio.ensure_future(self._read_commands(ws, io, b64, protocol == V5))
        pumps = [
            asyncio.ensure_future(self._pump(pipe, channel, send))
            for pipe, channel in ((io.stdout, STDOUT), (io.stderr, STDERR))
            if pipe is not None
        ]
        ns, name = pod.metadata.namespace, pod.metadata.name
        args = (ns, name, container, list(command), io) if kind == "exec" else (ns, name, container, io)
        call = asyncio.ensure_future(self._call(fn, *args))
        status: dict[str, Any]
        try:
            done, _ = await asyncio.wait({call, reader}, return_when=asyncio.FIRST_COMPLETED)
            if call not in done:
                # The caller went away: tell the provider, give it a moment, and stop.
                io.closed.set()
                for pump in pumps:
                    pump.cancel()
                with contextlib.suppress(BaseException):
                    await asyncio.wait_for(asyncio.shield(call), 5)
                log_fields(log, logging.INFO, f"{kind} caller went away", node=node.name, pod=pod.key())
                return ws
            code = call.result()
            status = _exit_status(code, command if kind == "exec" else None, protocol)
        except Exception as err:
            status = {"metadata": {}, "status": "Failure", "message": f"{kind} failed: {err}"}
        finally:
            for pipe in (io.stdout, io.stderr, io.stdin):
                if pipe is not None:
                    pipe.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(asyncio.gather(*pumps), 10)
            if protocol in _STATUS_ERRORS:
                await send(ERROR, json.dumps(status).encode())
            elif status["status"] != "Success":
                await send(ERROR, str(status.get("message", "")).encode())
        io.closed.set()
        reader.cancel()
        await ws.close()
        log_fields(
            log,
            logging.INFO,
            f"{kind} ended",
            node=node.name,
            pod=pod.key(),
            status=status.get("message", "Success"),
        )
        return ws

    @staticmethod
    async def _pump(pipe: Pipe, channel: int, send: Callable[[int, bytes], Any]) -> None:
        while True:
            chunk = await pipe.read(32 * 1024)
            if not chunk:
                return
            await send(channel, chunk)

    @staticmethod
    async def _read_commands(ws: web.WebSocketResponse, io: ExecIO, b64: bool, v5: bool) -> None:
        """The caller's frames: stdin, terminal sizes, and (v5) the close of a stream."""
        try:
            async for msg in ws:
                if msg.type == WSMsgType.BINARY:
                    data: bytes = msg.data
                elif msg.type == WSMsgType.TEXT and b64:
                    text: str = msg.data
                    if not text:
                        continue
                    try:
                        data = bytes([ord(text[0]) - ord("0")]) + base64.b64decode(text[1:])
                    except (binascii.Error, ValueError):
                        continue
                else:
                    continue
                if not data:
                    continue
                if v5 and data[0] == STREAM_CLOSE and len(data) == 2:
                    if data[1] == STDIN and io.stdin is not None:
                        io.stdin.close()
                    continue
                if data[0] == STDIN and io.stdin is not None:
                    io.stdin.write(data[1:])
                    await io.stdin.wait_below(INBOUND_LIMIT)
                elif data[0] == RESIZE:
                    with contextlib.suppress(ValueError, TypeError, KeyError, AttributeError):
                        size = json.loads(data[1:])
                        io.resizes.put(TermSize(int(size["Width"]), int(size["Height"])))
        finally:
            if io.stdin is not None:
                io.stdin.close()
            io.resizes.close()

    async def _port_forward(self, request: web.Request) -> web.StreamResponse:
        node = self._node_of(request)
        ports: list[int] = []
        for value in request.query.getall("port", []):
            try:
                port = int(value)
            except ValueError:
                raise HTTPFailure(400, f'unable to parse "{value}" as a port: must be an integer') from None
            if not 0 < port <= 65535:
                raise HTTPFailure(400, f"port {port} must be > 0 and <= 65535")
            ports.append(port)
        tunnel = TUNNEL in request.headers.get("Sec-WebSocket-Protocol", "")
        if not ports and not tunnel and request.headers.get("Upgrade", "").lower() == "websocket":
            raise HTTPFailure(400, 'query parameter "port" is required')
        pod = self._pod(node, request)
        fn = self._capability(node, "port_forward")
        protocol = self._negotiate(request, PORT_FORWARD_PROTOCOLS)
        if protocol == TUNNEL:
            return await self._spdy_port_forward(request, node, pod, fn)
        ws = web.WebSocketResponse(protocols=[protocol] if protocol else (), max_msg_size=0)
        await ws.prepare(request)
        b64 = protocol in _BASE64
        streams = [PortStream(port) for port in ports]
        log_fields(
            log,
            logging.INFO,
            "port-forward started",
            node=node.name,
            pod=pod.key(),
            ports=",".join(map(str, ports)),
        )

        async def send(channel: int, data: bytes) -> None:
            if b64:
                await ws.send_str(chr(ord("0") + channel) + base64.b64encode(data).decode())
            else:
                await ws.send_bytes(bytes([channel]) + data)

        # Each channel opens with its port, two bytes little-endian (portforward/websocket.go).
        for i, port in enumerate(ports):
            await send(2 * i, struct.pack("<H", port))
            await send(2 * i + 1, struct.pack("<H", port))
        ns, name = pod.metadata.namespace, pod.metadata.name
        tasks = []
        for i, stream in enumerate(streams):
            tasks.append(asyncio.ensure_future(self._forward_one(fn, ns, name, stream, i, send)))
        try:
            async for msg in ws:
                if msg.type == WSMsgType.BINARY:
                    data: bytes = msg.data
                elif msg.type == WSMsgType.TEXT and b64 and msg.data:
                    try:
                        data = bytes([ord(msg.data[0]) - ord("0")]) + base64.b64decode(msg.data[1:])
                    except (binascii.Error, ValueError):
                        continue
                else:
                    continue
                if len(data) < 1 or data[0] % 2 or data[0] // 2 >= len(streams):
                    continue
                inbound = streams[data[0] // 2].inbound
                inbound.write(data[1:])
                await inbound.wait_below(INBOUND_LIMIT)
        finally:
            for stream in streams:
                stream.closed.set()
                stream.inbound.close()
            # What the caller sent before it left is still read: a moment for the provider.
            if tasks:
                await asyncio.wait(tasks, timeout=5)
            for task in tasks:
                task.cancel()
            await ws.close()
        log_fields(log, logging.INFO, "port-forward ended", node=node.name, pod=pod.key())
        return ws

    async def _spdy_port_forward(
        self, request: web.Request, node: _Node, pod: Any, fn: Callable[..., Any]
    ) -> web.StreamResponse:
        """port-forward over SPDY/3.1 in WebSocket: a stream pair (error, data) per connection."""
        ws = web.WebSocketResponse(protocols=[TUNNEL], max_msg_size=0)
        await ws.prepare(request)
        codec = spdy.HeaderCodec()
        reader = spdy.FrameReader(codec)
        lock = asyncio.Lock()
        ns, name = pod.metadata.namespace, pod.metadata.name
        inbound: dict[int, Pipe] = {}  # data stream id -> what the caller sends on it
        pairs: dict[str, dict[str, int]] = {}  # requestid -> streamtype -> stream id
        ports: dict[str, int] = {}
        tasks: list[asyncio.Future[Any]] = []
        log_fields(log, logging.INFO, "port-forward (SPDY tunnel) started", node=node.name, pod=pod.key())

        async def send(frame: bytes) -> None:
            async with lock:  # header compression and frame order are per connection
                await ws.send_bytes(frame)

        async def reply(stream_id: int) -> None:
            async with lock:
                block = codec.encode({})
                await ws.send_bytes(
                    spdy.control_frame(spdy.SYN_REPLY, 0, struct.pack(">I", stream_id) + block)
                )

        async def forward(request_id: str) -> None:
            pair, port = pairs[request_id], ports[request_id]
            data_id, error_id = pair["data"], pair["error"]
            stream = PortStream(port)
            stream.inbound = inbound[data_id]

            async def pump_out() -> None:
                while chunk := await stream.outbound.read(32 * 1024):
                    await send(spdy.data_frame(data_id, 0, chunk))

            async def pump_errors() -> None:
                while (message := await stream.errors.get()) is not None:
                    await send(spdy.data_frame(error_id, 0, message.encode()))

            out, errors = asyncio.ensure_future(pump_out()), asyncio.ensure_future(pump_errors())
            try:
                await self._call(fn, ns, name, port, stream)
            except Exception as err:
                stream.error(f"error forwarding port {port} to pod {ns}/{name}: {type(err).__name__}: {err}")
            finally:
                stream.close()
                stream.inbound.close()  # nobody reads it any more: a caller waiting to send goes on
                stream.errors.close()
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(asyncio.gather(out, errors), 10)
                    # Both streams end as the kubelet ends them: closed (FIN), not reset.
                    await send(spdy.data_frame(data_id, spdy.DATA_FIN, b""))
                    await send(spdy.data_frame(error_id, spdy.DATA_FIN, b""))

        try:
            async for msg in ws:
                if msg.type != WSMsgType.BINARY:
                    continue
                try:
                    frames = reader.feed(msg.data)
                except (ValueError, struct.error, zlib.error) as err:
                    log_fields(
                        log, logging.WARNING, "bad SPDY frame: closing", node=node.name, error=str(err)
                    )
                    break
                for frame in frames:
                    if frame.type == 0:
                        pipe = inbound.get(frame.stream_id)
                        if pipe is not None:
                            pipe.write(frame.payload)
                            if frame.flags & spdy.DATA_FIN:
                                pipe.close()
                            await pipe.wait_below(INBOUND_LIMIT)
                    elif frame.type == spdy.SYN_STREAM:
                        kind = frame.headers.get("streamtype", "")
                        request_id = frame.headers.get("requestid", "")
                        try:
                            port = int(frame.headers.get("port", ""))
                        except ValueError:
                            port = 0
                        if kind not in ("data", "error") or not 0 < port <= 65535:
                            await send(
                                spdy.control_frame(
                                    spdy.RST_STREAM,
                                    0,
                                    struct.pack(">II", frame.stream_id, spdy.PROTOCOL_ERROR),
                                )
                            )
                            continue
                        await reply(frame.stream_id)
                        if kind == "data":
                            inbound[frame.stream_id] = Pipe()
                        pairs.setdefault(request_id, {})[kind] = frame.stream_id
                        ports[request_id] = port
                        if len(pairs[request_id]) == 2:
                            tasks.append(asyncio.ensure_future(forward(request_id)))
                    elif frame.type == spdy.RST_STREAM:
                        pipe = inbound.get(frame.stream_id)
                        if pipe is not None:
                            pipe.close()
                    elif frame.type == spdy.PING:
                        await send(spdy.control_frame(spdy.PING, 0, frame.payload[:4]))
                    elif frame.type == spdy.GOAWAY:
                        break
        finally:
            for pipe in inbound.values():
                pipe.close()
            if tasks:
                await asyncio.wait(tasks, timeout=5)
            for task in tasks:
                task.cancel()
            await ws.close()
        log_fields(log, logging.INFO, "port-forward (SPDY tunnel) ended", node=node.name, pod=pod.key())
        return ws

    async def _forward_one(
        self,
        fn: Callable[..., Any],
        ns: str,
        name: str,
        stream: PortStream,
        index: int,
        send: Callable[..., Any],
    ) -> None:
        async def pump_out() -> None:
            while chunk := await stream.outbound.read(32 * 1024):
                await send(2 * index, chunk)

        async def pump_errors() -> None:
            while (message := await stream.errors.get()) is not None:
                await send(2 * index + 1, message.encode())

        out = asyncio.ensure_future(pump_out())
        errors = asyncio.ensure_future(pump_errors())
        try:
            await self._call(fn, ns, name, stream.port, stream)
        except Exception as err:
            stream.error(
                f"error forwarding port {stream.port} to pod {ns}/{name}, uid : {type(err).__name__}: {err}"
            )
        finally:
            stream.close()
            stream.inbound.close()  # nobody reads it any more: a caller waiting to send goes on
            stream.errors.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.gather(out, errors), 10)


def _exit_status(code: Any, command: list[str] | None, protocol: str) -> dict[str, Any]:
    """The error channel's metav1.Status: Success, or NonZeroExitCode with the code as cause."""
    if code is None or code == 0:
        return {"metadata": {}, "status": "Success"}
    what = (
        f"error executing command {command}, exit code {code}" if command is not None else f"exit code {code}"
    )
    return {
        "metadata": {},
        "status": "Failure",
        "message": f"command terminated with non-zero exit code: {what}",
        "reason": "NonZeroExitCode",
        "details": {"causes": [{"reason": "ExitCode", "message": str(int(code))}]},
    }
