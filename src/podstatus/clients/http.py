"""``HttpKubeClient``: the kube client for real clusters (any Kubernetes API server).

The hot path (get, patch, delete of one pod) is a keep-alive ``urllib3`` connection
pool shared by all threads and msgspec decoding: no ``kubernetes`` models. The
``kubernetes`` package is used for one thing only: loading configuration
(:mod:`podstatus.clients.kubeconfig`), so kubeconfig files, in-cluster service
accounts, exec credential plugins and expiring tokens work as they do for kubectl.

Errors: every failure is a :class:`podstatus.errors.ApiError` subclass. HTTP errors
are built from the server's ``Status`` body (``api_error_from_status``), with
``Retry-After`` parsed; timeouts are :class:`RequestTimeoutError`; refused or reset
connections, DNS and TLS failures are :class:`ConnectionFailedError`. The urllib3
exception is chained, never leaked. urllib3 never retries on its own: the status
manager owns the retry policy. The one exception is a 401 when the credentials can
be refreshed (exec plugins, rotated tokens): the request is sent again once with the
new credentials.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import Any, Self
from urllib.parse import urlencode, urlsplit

import msgspec
import urllib3

from ..errors import (
    ApiError,
    ConnectionFailedError,
    InvalidObjectError,
)
from ..protocols import PATCH_CONTENT_TYPE
from ..requestcount import RequestCounter
from ..types import Pod
from .kubeconfig import (
    ConfigAuth,
    Configuration,
    ConnectionSettings,
    kubeconfig_files,
    kubernetes_config,
    load_in_cluster_configuration,
    load_kubeconfig_configuration,
    settings_from_configuration,
)
from .transport import ConnectionPool, Response
from .watch import PodWatch
from .wire import (
    connection_error,
    decode_object,
    decode_pod,
    event_path,
    http_error,
    lease_path,
    never_sent,
    node_path,
    pod_path,
    pods_path,
    with_resource_version,
)

__all__ = ["DEFAULT_TIMEOUT", "HttpKubeClient"]

logger = logging.getLogger(__name__)

# (connect, read) seconds.
DEFAULT_TIMEOUT: tuple[float, float] = (5.0, 30.0)
USER_AGENT = "podstatus/0.1"
STRATEGIC_MERGE_PATCH = PATCH_CONTENT_TYPE
JSON = "application/json"

_json_decode = msgspec.json.decode
_json_encode = msgspec.json.encode
_DEBUG = logging.DEBUG


class _Pools:
    """The connections of one set of connection settings (replaced whole when they change)."""

    __slots__ = ("base_url", "lean", "manager", "prefix", "watch_manager")

    def __init__(
        self, settings: ConnectionSettings, timeout: urllib3.Timeout, maxsize: int, pool_timeout: float
    ) -> None:
        self.base_url = settings.base_url
        self.prefix = urlsplit(settings.base_url).path.rstrip("/")
        self.manager = _pool_manager(settings, timeout, maxsize, block=True)
        # Watches hold a connection for minutes: they get their own pool so they never
        # starve the workers' requests.
        self.watch_manager = _pool_manager(settings, timeout, maxsize, block=False)
        # Without a proxy, short requests go over the lean keep-alive transport (transport.py):
        # at scale, urllib3's work around each request cost more CPU than the request itself.
        self.lean: ConnectionPool | None = (
            None
            if settings.proxy
            else ConnectionPool(
                settings,
                maxsize=maxsize,
                connect_timeout=_seconds(timeout.connect_timeout, 5.0),
                pool_timeout=pool_timeout,
            )
        )

    def clear(self) -> None:
        self.manager.clear()
        self.watch_manager.clear()
        if self.lean is not None:
            self.lean.clear()


def _pool_manager(
    settings: ConnectionSettings, timeout: urllib3.Timeout, maxsize: int, *, block: bool
) -> urllib3.PoolManager:
    kw: dict[str, Any] = {
        "num_pools": 4,
        "maxsize": maxsize,
        "block": block,
        "retries": False,
        "timeout": timeout,
    }
    if settings.base_url.startswith("https:"):
        kw["cert_reqs"] = "CERT_REQUIRED" if settings.verify else "CERT_NONE"
        if settings.verify:
            if settings.ca_cert:
                kw["ca_certs"] = settings.ca_cert
        else:
            kw["assert_hostname"] = False
        if settings.client_cert:
            kw["cert_file"] = settings.client_cert
            kw["key_file"] = settings.client_key
        if settings.tls_server_name:
            kw["server_hostname"] = settings.tls_server_name
    if not settings.proxy:
        return urllib3.PoolManager(**kw)
    if settings.proxy.startswith("socks"):
        try:
            from urllib3.contrib.socks import SOCKSProxyManager
        except ImportError as exc:  # PySocks missing
            raise ConnectionFailedError(f"SOCKS proxy {settings.proxy} needs PySocks installed") from exc
        return SOCKSProxyManager(settings.proxy, **kw)
    return urllib3.ProxyManager(settings.proxy, proxy_headers=settings.proxy_headers, **kw)


def _timeout(timeout: float | tuple[float, float] | urllib3.Timeout) -> urllib3.Timeout:
    if isinstance(timeout, urllib3.Timeout):
        return timeout
    if isinstance(timeout, tuple):
        connect, read = timeout
        return urllib3.Timeout(connect=connect, read=read)
    return urllib3.Timeout(connect=timeout, read=timeout)


def _seconds(value: Any, default: float) -> float:
    return float(value) if isinstance(value, int | float) else default


class HttpKubeClient:
    """A Kubernetes API client for pods (and nodes), for several threads at once.

    Build one from a kubeconfig (:meth:`from_kubeconfig`), the pod's service account
    (:meth:`in_cluster`), whichever is there (:meth:`from_config`), or directly from a
    URL and credentials. ``timeout`` is seconds for both connecting and reading, or a
    ``(connect, read)`` pair. ``requests`` counts requests by verb.
    """

    def __init__(
        self,
        base_url: str,
        *,
        token: str | None = None,
        ca_cert: str | None = None,
        client_cert: str | None = None,
        client_key: str | None = None,
        verify: bool = True,
        timeout: float | tuple[float, float] | urllib3.Timeout = DEFAULT_TIMEOUT,
        tls_server_name: str | None = None,
        proxy: str | None = None,
        proxy_headers: Mapping[str, str] | None = None,
        pool_maxsize: int = 16,
        auth: ConfigAuth | None = None,
        requests: RequestCounter | None = None,
        user_agent: str = USER_AGENT,
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url must be an http:// or https:// URL, not {base_url!r}")
        self._settings = ConnectionSettings(
            base_url=base_url.rstrip("/"),
            ca_cert=ca_cert,
            client_cert=client_cert,
            client_key=client_key,
            verify=verify,
            tls_server_name=tls_server_name,
            proxy=proxy,
            proxy_headers=dict(proxy_headers) if proxy_headers else None,
        )
        self._timeout = _timeout(timeout)
        # How long a request waits for a free pooled connection before it is a RequestTimeoutError.
        self._pool_timeout = 1 + int(
            _seconds(self._timeout.connect_timeout, 5.0) + _seconds(self._timeout.read_timeout, 30.0)
        )
        self._pool_maxsize = pool_maxsize
        self._pools = _Pools(self._settings, self._timeout, pool_maxsize, self._pool_timeout)
        self._pools_lock = threading.Lock()
        self._token = f"Bearer {token}" if token else None
        self._auth = auth
        if auth is not None:
            auth.settings_changed = self._replace_settings
        self._headers: dict[str, str] = {"Accept": JSON, "User-Agent": user_agent}
        self.requests: RequestCounter = requests if requests is not None else RequestCounter()

    # -- construction from configuration ---------------------------------------------

    @classmethod
    def from_configuration(
        cls,
        cfg: Configuration,
        *,
        reload: Callable[[], Configuration] | None = None,
        files: Sequence[str | os.PathLike[str]] = (),
        **kwargs: Any,
    ) -> HttpKubeClient:
        """From a loaded ``kubernetes.client.Configuration``; ``reload()`` gives a fresh one after a
        401, or after a failed connection when one of ``files`` (where it came from) changed."""
        settings = settings_from_configuration(cfg)
        auth = ConfigAuth(cfg, reload=reload, files=files)
        return cls(
            settings.base_url,
            ca_cert=settings.ca_cert,
            client_cert=settings.client_cert,
            client_key=settings.client_key,
            verify=settings.verify,
            tls_server_name=settings.tls_server_name,
            proxy=settings.proxy,
            proxy_headers=settings.proxy_headers,
            auth=auth,
            **kwargs,
        )

    @classmethod
    def from_kubeconfig(
        cls, path: str | os.PathLike[str] | None = None, context: str | None = None, **kwargs: Any
    ) -> HttpKubeClient:
        """From a kubeconfig: ``path``, else ``$KUBECONFIG``, else ``~/.kube/config``.

        The file is read again when it changes and a connection fails (a server restarted
        with a new address, CA or token), and after a 401.
        """
        files = kubeconfig_files(path)
        cfg = load_kubeconfig_configuration(path, context)
        return cls.from_configuration(
            cfg, reload=lambda: load_kubeconfig_configuration(path, context), files=files, **kwargs
        )

    @classmethod
    def in_cluster(cls, **kwargs: Any) -> HttpKubeClient:
        """From the pod's service account (token file re-read as it rotates)."""
        cfg = load_in_cluster_configuration()
        return cls.from_configuration(cfg, reload=load_in_cluster_configuration, **kwargs)

    @classmethod
    def from_config(
        cls, path: str | os.PathLike[str] | None = None, context: str | None = None, **kwargs: Any
    ) -> HttpKubeClient:
        """In-cluster when running in a pod (and no ``path`` is given), else from a kubeconfig."""
        if path is None and context is None:
            try:
                return cls.in_cluster(**kwargs)
            except kubernetes_config().ConfigException as exc:
                logger.debug("not in a cluster (%s); using a kubeconfig", exc)
        return cls.from_kubeconfig(path, context, **kwargs)

    # -- lifecycle -------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        return self._settings.base_url

    def close(self) -> None:
        """Close idle connections (the client stays usable)."""
        self._pools.clear()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._settings.base_url!r})"

    def _replace_settings(self, settings: ConnectionSettings) -> None:
        """New TLS material (from an exec plugin, after a 401): new pools for new connections."""
        with self._pools_lock:
            old = self._pools
            self._settings = settings
            self._pools = _Pools(settings, self._timeout, self._pool_maxsize, self._pool_timeout)
        old.clear()

    # -- the request core ------------------------------------------------------------

    def _authorization(self) -> str | None:
        if self._auth is not None:
            return self._auth.header()
        return self._token

    def _send(
        self,
        method: str,
        url: str,
        body: bytes | None,
        headers: dict[str, str],
        *,
        stream: bool = False,
        timeout: urllib3.Timeout | None = None,
    ) -> urllib3.BaseHTTPResponse | Response:
        pools = self._pools
        timeout = timeout or self._timeout
        if stream:
            return pools.watch_manager.urlopen(
                method,
                pools.base_url + url,
                body=body,
                headers=headers,
                retries=False,
                redirect=False,
                timeout=timeout,
                preload_content=False,
            )
        if pools.lean is not None:
            return pools.lean.request(
                method, pools.prefix + url, headers, body, _seconds(timeout.read_timeout, 30.0)
            )
        return pools.manager.urlopen(
            method,
            pools.base_url + url,
            body=body,
            headers=headers,
            retries=False,
            redirect=False,
            timeout=timeout,
        )

    def _request(
        self,
        verb: str,
        method: str,
        path: str,
        *,
        query: Mapping[str, str | int] | None = None,
        body: bytes | None = None,
        content_type: str | None = None,
        stream: bool = False,
        timeout: urllib3.Timeout | None = None,
    ) -> urllib3.BaseHTTPResponse | Response:
        """Send one request; returns a 2xx response (with its body read unless ``stream``) or raises."""
        url = f"{path}?{urlencode(query)}" if query else path
        headers = dict(self._headers)
        if content_type is not None:
            headers["Content-Type"] = content_type
        authorization = self._authorization()
        retried = False
        while True:
            if authorization:
                headers["Authorization"] = authorization
            else:
                headers.pop("Authorization", None)
            self.requests.inc(verb)
            start = time.perf_counter()
            try:
                resp = self._send(method, url, body, headers, stream=stream, timeout=timeout)
            except (urllib3.exceptions.HTTPError, OSError) as exc:
                error = connection_error(exc, method, path)
                if logger.isEnabledFor(_DEBUG):
                    _log(verb, method, path, 0, start, error=type(exc).__name__)
                if (
                    self._auth is not None
                    and not retried
                    and never_sent(exc)
                    and self._auth.after_connection_failure()
                ):
                    # The kubeconfig was rewritten (a restarted server): once more, with it.
                    retried = True
                    authorization = self._auth.header()
                    continue
                raise error from exc
            status = resp.status
            if logger.isEnabledFor(_DEBUG):
                _log(verb, method, path, status, start)
            if 200 <= status < 300:
                return resp
            data = self._read_error_body(resp, stream, method, path)
            if status == 401 and self._auth is not None and not retried:
                retry, authorization = self._auth.after_unauthorized(authorization)
                if retry:
                    retried = True
                    continue
            raise http_error(status, resp.reason, resp.headers, data, method, path)

    @staticmethod
    def _read_error_body(
        resp: urllib3.BaseHTTPResponse | Response, stream: bool, method: str, path: str
    ) -> bytes:
        if not isinstance(resp, urllib3.BaseHTTPResponse):
            return resp.data
        if not stream:
            return resp.data or b""
        try:
            return resp.read(64 * 1024)
        except (urllib3.exceptions.HTTPError, OSError):
            return b""
        finally:
            resp.close()
            resp.release_conn()

    # -- pods ------------------------------------------------------------------------

    def get_pod(self, namespace: str, name: str) -> Pod:
        """The pod; :class:`NotFoundError` when there is none."""
        path = pod_path(namespace, name)
        resp = self._request("get", "GET", path)
        return decode_pod(resp.data, "GET", path, resp.status)

    def patch_pod_status(
        self, namespace: str, name: str, patch: bytes, *, resource_version: str | None = None
    ) -> Pod:
        """Apply a strategic merge patch to ``pods/status``; returns the pod after it.

        With ``resource_version``, ``metadata.resourceVersion`` is put into the patch: the
        server then refuses (:class:`ConflictError`) when the pod changed since.
        """
        if resource_version is not None:
            patch = with_resource_version(patch, resource_version)
        path = pod_path(namespace, name) + "/status"
        resp = self._request("patch", "PATCH", path, body=patch, content_type=STRATEGIC_MERGE_PATCH)
        return decode_pod(resp.data, "PATCH", path, resp.status)

    def patch_pod(
        self, namespace: str, name: str, patch: bytes, *, content_type: str = STRATEGIC_MERGE_PATCH
    ) -> Pod:
        """Patch the pod itself (labels, annotations, finalizers...)."""
        path = pod_path(namespace, name)
        resp = self._request("patch", "PATCH", path, body=patch, content_type=content_type)
        return decode_pod(resp.data, "PATCH", path, resp.status)

    def delete_pod(
        self, namespace: str, name: str, *, grace_period_seconds: int | None = None, uid: str | None = None
    ) -> None:
        """Delete the pod; ``uid`` is a precondition (:class:`ConflictError` when the pod's differs)."""
        options: dict[str, Any] = {"kind": "DeleteOptions", "apiVersion": "v1"}
        if grace_period_seconds is not None:
            options["gracePeriodSeconds"] = grace_period_seconds
        if uid:
            options["preconditions"] = {"uid": uid}
        self._request(
            "delete", "DELETE", pod_path(namespace, name), body=_json_encode(options), content_type=JSON
        )

    def create_pod(self, pod: Pod | Mapping[str, Any], namespace: str | None = None) -> Pod:
        """Create a pod (in ``namespace``, else its own, else ``default``); returns it as created."""
        if isinstance(pod, Pod):
            body = pod.to_json()
            namespace = namespace or pod.metadata.namespace
        else:
            body = _json_encode(pod)
            meta = pod.get("metadata") or {}
            namespace = namespace or meta.get("namespace")
        path = pods_path(namespace or "default")
        resp = self._request("create", "POST", path, body=body, content_type=JSON)
        return decode_pod(resp.data, "POST", path, resp.status)

    def list_pods(
        self,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int | None = None,
    ) -> tuple[list[Pod], str]:
        """Pods (of all namespaces when ``namespace`` is None) and the list's resourceVersion.

        With ``limit``, the list is fetched in pages of that size (one request per page).
        """
        path = pods_path(namespace)
        query: dict[str, str | int] = {}
        if label_selector:
            query["labelSelector"] = label_selector
        if field_selector:
            query["fieldSelector"] = field_selector
        if limit:
            query["limit"] = limit
        pods: list[Pod] = []
        while True:
            resp = self._request("list", "GET", path, query=query)
            body = decode_object(resp.data, "GET", path, resp.status)
            meta = body.get("metadata") or {}
            try:
                pods.extend(Pod.from_dict(item) for item in body.get("items") or ())
            except InvalidObjectError as exc:
                raise ApiError(
                    f"GET {path}: invalid pod in the list: {exc}", code=resp.status, reason="InvalidResponse"
                ) from exc
            token = meta.get("continue")
            if not token:
                return pods, str(meta.get("resourceVersion") or "")
            query["continue"] = token

    def watch_pods(
        self,
        namespace: str | None = None,
        *,
        field_selector: str | None = None,
        label_selector: str | None = None,
        resource_version: str | None = None,
        timeout_seconds: int | None = None,
        stop_event: threading.Event | None = None,
    ) -> PodWatch:
        """Watch pods: an iterator of ``(event type, pod)``: ADDED, MODIFIED, DELETED.

        Bookmarks are asked for and consumed (they advance ``resource_version`` of the
        returned :class:`PodWatch`, the value to resume from). The iterator ends when the
        server ends the watch (``timeout_seconds``) or ``stop_event`` is set; it raises
        :class:`GoneError` when ``resource_version`` is too old (relist, then watch again).
        """
        path = pods_path(namespace)
        query: dict[str, str | int] = {"watch": "true", "allowWatchBookmarks": "true"}
        if label_selector:
            query["labelSelector"] = label_selector
        if field_selector:
            query["fieldSelector"] = field_selector
        if resource_version is not None:
            query["resourceVersion"] = resource_version
        if timeout_seconds is not None:
            query["timeoutSeconds"] = timeout_seconds
        read = (
            None if timeout_seconds is None else timeout_seconds + _seconds(self._timeout.read_timeout, 30.0)
        )
        timeout = urllib3.Timeout(connect=self._timeout.connect_timeout, read=read)
        resp = self._request("watch", "GET", path, query=query, stream=True, timeout=timeout)
        assert isinstance(resp, urllib3.BaseHTTPResponse)  # streams are urllib3's
        return PodWatch(resp, path, resource_version, stop_event)

    # -- nodes -----------------------------------------------------------------------

    def create_node(self, node: Mapping[str, Any]) -> dict[str, Any]:
        return self._create_object("/api/v1/nodes", node)

    def get_node(self, name: str) -> dict[str, Any]:
        path = node_path(name)
        resp = self._request("get", "GET", path)
        return decode_object(resp.data, "GET", path, resp.status)

    def list_nodes(
        self, *, label_selector: str | None = None, field_selector: str | None = None
    ) -> tuple[list[dict[str, Any]], str]:
        """The nodes and the list's resourceVersion."""
        query: dict[str, str | int] = {}
        if label_selector:
            query["labelSelector"] = label_selector
        if field_selector:
            query["fieldSelector"] = field_selector
        return self._list_objects("/api/v1/nodes", query)

    def patch_node(self, name: str, patch: bytes) -> dict[str, Any]:
        """Apply a strategic merge patch to the Node (labels, ``spec.taints``, ``spec.unschedulable``)."""
        return self._patch_object(node_path(name), patch)

    def patch_node_status(self, name: str, patch: bytes) -> dict[str, Any]:
        """Apply a strategic merge patch to ``nodes/status`` (heartbeats, conditions, capacity)."""
        return self._patch_object(node_path(name) + "/status", patch)

    def delete_node(self, name: str) -> None:
        self._request("delete", "DELETE", node_path(name))

    # -- leases and events -------------------------------------------------------------

    def get_lease(self, namespace: str, name: str) -> dict[str, Any]:
        path = lease_path(namespace, name)
        resp = self._request("get", "GET", path)
        return decode_object(resp.data, "GET", path, resp.status)

    def create_lease(self, namespace: str, lease: Mapping[str, Any]) -> dict[str, Any]:
        return self._create_object(lease_path(namespace), lease)

    def update_lease(self, namespace: str, name: str, lease: Mapping[str, Any]) -> dict[str, Any]:
        """PUT the Lease; its ``metadata.resourceVersion`` is a precondition (:class:`ConflictError`)."""
        path = lease_path(namespace, name)
        resp = self._request("update", "PUT", path, body=_json_encode(lease), content_type=JSON)
        return decode_object(resp.data, "PUT", path, resp.status)

    def create_event(self, namespace: str, event: Mapping[str, Any]) -> dict[str, Any]:
        """Create a core/v1 Event (the kubelet's recorder writes these)."""
        return self._create_object(event_path(namespace), event)

    def patch_event(self, namespace: str, name: str, patch: bytes) -> dict[str, Any]:
        """Strategic merge patch of a core/v1 Event (a repeat: ``count``, ``lastTimestamp``, ``series``)."""
        return self._patch_object(event_path(namespace, name), patch)

    def _create_object(self, path: str, obj: Mapping[str, Any]) -> dict[str, Any]:
        resp = self._request("create", "POST", path, body=_json_encode(obj), content_type=JSON)
        return decode_object(resp.data, "POST", path, resp.status)

    def _patch_object(self, path: str, patch: bytes) -> dict[str, Any]:
        resp = self._request("patch", "PATCH", path, body=patch, content_type=STRATEGIC_MERGE_PATCH)
        return decode_object(resp.data, "PATCH", path, resp.status)

    def _list_objects(self, path: str, query: dict[str, str | int]) -> tuple[list[dict[str, Any]], str]:
        items: list[dict[str, Any]] = []
        while True:
            resp = self._request("list", "GET", path, query=query)
            body = decode_object(resp.data, "GET", path, resp.status)
            meta = body.get("metadata") or {}
            items.extend(item for item in body.get("items") or () if isinstance(item, dict))
            token = meta.get("continue")
            if not token:
                return items, str(meta.get("resourceVersion") or "")
            query["continue"] = token


def _log(verb: str, method: str, path: str, code: int, start: float, *, error: str | None = None) -> None:
    duration_ms = (time.perf_counter() - start) * 1000.0
    extra: dict[str, Any] = {
        "verb": verb,
        "method": method,
        "path": path,
        "code": code,
        "duration_ms": duration_ms,
    }
    if error is None:
        logger.debug("%s %s -> %d (%.1f ms)", method, path, code, duration_ms, extra=extra)
    else:
        extra["error"] = error
        logger.debug("%s %s -> %s (%.1f ms)", method, path, error, duration_ms, extra=extra)
