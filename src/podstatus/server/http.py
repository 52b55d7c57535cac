"""The embedded API server: :class:`EmbeddedApiServer` (start, stop, url, kubeconfig) and
:func:`serve` (``podstatus serve``'s loop).

Every request becomes a :class:`~.endpoints.Request` and goes through one callable,
``EmbeddedApiServer.dispatch`` (by default :meth:`~.endpoints.ApiHandler.handle`), which
returns a :class:`~.endpoints.Response`. A fault-injection layer can replace ``dispatch`` with
a wrapper that delays, fails, answers with a conflict or asks for a connection reset
(``Response(abort=True)``), without touching the API logic. The bytes on the wire are the
front's (:mod:`.front`).
"""

from __future__ import annotations

import base64
import logging
import signal
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

from ..requestcount import RequestCounter
from ..tls import TlsMaterial, generate_tls, server_context, write_private
from . import reviews, security
from .audit import AuditLog
from .endpoints import ApiHandler, Request, Response
from .endpoints.groups import KUBELET_PATH
from .endpoints.wire import MAX_BODY_BYTES, PUBLIC_PATHS, status_error
from .front import DEFAULT_HEADER_TIMEOUT, DEFAULT_IDLE_TIMEOUT, DEFAULT_MAX_CONNECTIONS, AioFront
from .proxy import KubeletClientConfig
from .storage.store import Store

__all__ = ["EmbeddedApiServer", "serve"]

log = logging.getLogger(__name__)

_encode = msgspec.json.encode


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
            # The front waits on the store's changes for its watches (a step never blocks).
            watch_poll_seconds=0.0,
        )
        self.api.user_of = self.user_of
        self.dispatch: Callable[[Request], Response] = self.api.handle
        self._front: AioFront | None = None
        self._threads: list[threading.Thread] = []

    @property
    def open_connections(self) -> int:
        """Connections being served now (each holds a thread)."""
        return self._front.open_connections if self._front is not None else 0

    @property
    def open_streams(self) -> int:
        """Responses being streamed now (watches, followed logs)."""
        return self._front.open_streams if self._front is not None else 0

    @property
    def url(self) -> str:
        if self._front is None:
            raise RuntimeError("the server is not started")
        host = self.host if ":" not in self.host else f"[{self.host}]"
        scheme = "https" if self.tls is not None else "http"
        return f"{scheme}://{host}:{self.port}"

    def user_of(self, request: Request) -> dict[str, Any]:
        """The user a request is served as: the token's, or the anonymous user."""
        if self.token is not None and security.bearer_ok(request.header("authorization"), self.token):
            return reviews.TOKEN_USER
        return reviews.ANONYMOUS

    def may_block(self, request: Request) -> bool:
        """Whether serving ``request`` may wait (the front then serves it on a thread): behind
        a dispatch wrapper (fault injection sleeps), a kubelet's or metrics-server's answer, or a
        read at a resourceVersion the store has not reached. The rest is quick store work."""
        if self.dispatch != self.api.handle:
            return True
        path = request.path
        if path.startswith("/apis/metrics.k8s.io") or KUBELET_PATH.match(path):
            return True
        wanted = request.query.get("resourceVersion")
        if not wanted or wanted == "0":
            return False
        try:
            return int(wanted) > self.store.resource_version
        except ValueError:
            return False  # answered at once: 400

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
        return status_error(401, "Unauthorized", "Unauthorized")

    def start(self) -> EmbeddedApiServer:
        if self._front is not None:
            return self
        self._stopping.clear()
        if self.audit_log is not None and self.audit is None:
            self.audit = AuditLog(self.audit_log)
        # The handshake runs on the loop (bounded by header_timeout), never in accept().
        context = server_context(self.tls) if self.tls is not None else None
        try:
            front = AioFront(self, self.host, self.port, context)
        except OSError:
            if self.audit is not None:
                self.audit.close()
                self.audit = None
            raise
        self.port = front.port
        self._front = front
        front.start()
        reaper = threading.Thread(target=self._reap_loop, name=f"apiserver-reaper-{self.port}", daemon=True)
        self._threads = [reaper]
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
        front = self._front
        if front is None:
            return
        self._stopping.set()
        front.stop()
        self.api.metrics.close()
        for t in self._threads:
            t.join(timeout=5)
        if self.audit is not None:
            self.audit.close()
            self.audit = None
        self._front = None
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
