"""``podstatus serve`` in front of the nodes' kubelet APIs, as kube-apiserver is.

- ``pods/log`` (GET): the pod and container are checked here (kube-apiserver's
  ``LogLocation``), then ``/containerLogs/{ns}/{pod}/{container}`` on the pod's node is
  streamed back (``follow`` flushes as it comes).
- ``pods/exec``, ``pods/attach``, ``pods/portforward``: the upgrade request (WebSocket, or
  SPDY from an old client) goes to ``/exec``, ``/attach`` or ``/portForward`` on the node;
  the node's answer head is relayed and then bytes are spliced both ways, untouched, as
  kube-apiserver ≥ 1.36 does for a node that declares ``ExtendWebSocketsToKubelet``
  (the apiserver's ``UpgradeAwareHandler``). No stream is translated here.
- ``nodes/{name}/proxy/{path}``: any method, relayed to ``{path}`` on the node's kubelet.

The node's endpoint is picked as kube-apiserver picks it (``NodeConnectionInfoGetter``):
the first ``status.addresses`` entry of the preferred types, and
``status.daemonEndpoints.kubeletEndpoint.Port``. The connection is HTTPS with the kubelet
client certificate ``podstatus serve`` keeps (the apiserver's ``--kubelet-client-certificate``).
The kubelet's serving certificate is verified only when a CA is given, as kube-apiserver
without ``--kubelet-certificate-authority`` does not verify it either.

Errors read as kube-apiserver's: a node that cannot be reached is a 500 ``Status`` with Go's
words (``Get "https://...": dial tcp ...: connect: connection refused``); a node whose
Node says it has no kubelet port says that.
"""

from __future__ import annotations

import contextlib
import errno
import http.client
import logging
import queue
import select
import shutil
import socket
import ssl
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, BinaryIO
from urllib.parse import parse_qsl, quote, urlencode

from ..errors import ApiError, status_body
from .storage.errors import FieldError, bad_request, invalid
from .storage.store import Store

__all__ = [
    "ADDRESS_TYPES",
    "DEFAULT_ADDRESS_TYPES",
    "KubeletClientConfig",
    "KubeletError",
    "KubeletProxy",
    "Takeover",
    "node_endpoint",
]

log = logging.getLogger(__name__)

# kubeadm's kube-apiserver flag --kubelet-preferred-address-types=InternalIP,ExternalIP,Hostname:
# a podstatus node's Hostname is its name, which no resolver knows.
DEFAULT_ADDRESS_TYPES: tuple[str, ...] = ("InternalIP", "ExternalIP", "Hostname")
# The NodeAddressTypes there are.
ADDRESS_TYPES: tuple[str, ...] = ("Hostname", "InternalIP", "ExternalIP", "InternalDNS", "ExternalDNS")
# kube-apiserver's --kubelet-port default, for a Node that reports no port.
DEFAULT_KUBELET_PORT = 10250
# kube-apiserver's KubeletClientConfig.HTTPTimeout: dialing and waiting for the answer's head.
_DIAL_TIMEOUT = 5.0
# A streamed answer checks this often whether its client left.
_POLL_SECONDS = 1.0
_HEAD_LIMIT = 64 * 1024
_CHUNK = 64 * 1024
# Bytes queued towards one side of a spliced stream before reading from the other side pauses.
_SPLICE_BUFFER = 1 << 20
# Headers that describe one hop, never relayed (Go's httputil.ReverseProxy list), plus the
# caller's credentials: kube-apiserver drops Authorization once it has authenticated a request.
_HOP_HEADERS = frozenset(
    {
        "connection", "proxy-connection", "keep-alive", "proxy-authenticate", "proxy-authorization",
        "te", "trailer", "transfer-encoding", "upgrade", "authorization", "host", "content-length",
    }
)  # fmt: skip

# The server's connection is handed over: (socket, its buffered reader).
Takeover = Callable[[socket.socket, BinaryIO], None]


@dataclass(frozen=True, slots=True)
class KubeletClientConfig:
    """How ``serve`` reaches kubelets: its client certificate (PEM), optionally a CA that the
    kubelets' serving certificates must chain to, and the address types it prefers."""

    cert_pem: bytes | None = None
    key_pem: bytes | None = None
    ca_pem: bytes | None = None
    preferred_address_types: tuple[str, ...] = DEFAULT_ADDRESS_TYPES
    timeout: float = _DIAL_TIMEOUT

    def ssl_context(self) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        if self.ca_pem:
            context.load_verify_locations(cadata=self.ca_pem.decode())
            # Kubelet serving certificates name the node's addresses, not what we dial by.
            context.check_hostname = False
        else:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        if self.cert_pem and self.key_pem:
            from ..tls import private_dir, write_private

            folder = private_dir("podstatus-kubelet-client-")
            try:
                cert, key = folder / "client.crt", folder / "client.key"
                write_private(cert, self.cert_pem)
                write_private(key, self.key_pem)
                context.load_cert_chain(cert, key)
            finally:
                shutil.rmtree(folder, ignore_errors=True)
        return context


class KubeletError(ApiError):
    """A node's kubelet could not be reached: kube-apiserver's 500 with Go's error text."""

    default_code = 500


def _unknown_500(message: str) -> KubeletError:
    # kube-apiserver's ErrorToAPIStatus of an error that is no Status: 500, reason empty.
    body = status_body(500, "", message)
    del body["reason"]
    return KubeletError(message, status=body)


def node_endpoint(
    node: Mapping[str, Any], preferred: tuple[str, ...] = DEFAULT_ADDRESS_TYPES
) -> tuple[str, int]:
    """(host, port) of a Node's kubelet, as kube-apiserver's ``GetConnectionInfo`` picks them.

    A Node with no kubelet port is refused here instead of dialing the default port 10250,
    where another podstatus node's kubelet may listen: that would be the wrong node.
    """
    status = node.get("status") or {}
    name = (node.get("metadata") or {}).get("name", "")
    addresses = [a for a in status.get("addresses") or [] if isinstance(a, dict)]
    host = ""
    for kind in preferred:
        found = next((a.get("address") for a in addresses if a.get("type") == kind), None)
        if found:
            host = str(found)
            break
    if not host:
        known = " ".join("{" + f"{a.get('type', '')} {a.get('address', '')}" + "}" for a in addresses)
        raise _unknown_500(f"no preferred addresses found; known addresses: [{known}]")
    endpoints = status.get("daemonEndpoints") or {}
    port = ((endpoints.get("kubeletEndpoint") or {}).get("Port")) or 0
    if not isinstance(port, int) or port <= 0:
        raise _unknown_500(
            f'node "{name}" has no kubelet API: its status.daemonEndpoints.kubeletEndpoint.Port is not set '
            "(a podstatus node runs one unless started with --kubelet-port 0)"
        )
    return host, port


def _hostport(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _dial_text(host: str, port: int, err: BaseException) -> str:
    """Go's words for a failed dial or handshake (``dial tcp 127.0.0.1:1: connect: connection refused``)."""
    where = _hostport(host, port)
    if isinstance(err, ssl.SSLError):
        return f"remote error: tls: {getattr(err, 'reason', None) or err}".lower()
    if isinstance(err, TimeoutError | socket.timeout):
        return f"dial tcp {where}: i/o timeout"
    if isinstance(err, socket.gaierror):
        return f"dial tcp: lookup {host}: no such host"
    if isinstance(err, OSError) and err.errno is not None:
        text = errno.errorcode.get(err.errno, "")
        words = {
            "ECONNREFUSED": "connection refused",
            "EHOSTUNREACH": "no route to host",
            "ENETUNREACH": "network is unreachable",
            "ECONNRESET": "connection reset by peer",
        }.get(text, (err.strerror or str(err)).lower())
        return f"dial tcp {where}: connect: {words}"
    return f"dial tcp {where}: {err}"


class KubeletProxy:
    """Routes the kubelet subresources of :class:`.endpoints.ApiHandler` to the nodes."""

    def __init__(self, store: Store, config: KubeletClientConfig | None = None) -> None:
        self.store = store
        self.config = config if config is not None else KubeletClientConfig()
        self._context: ssl.SSLContext | None = None
        self._context_lock = threading.Lock()

    @property
    def context(self) -> ssl.SSLContext:
        with self._context_lock:
            if self._context is None:
                self._context = self.config.ssl_context()
            return self._context

    # -- where -----------------------------------------------------------------------------

    def endpoint(self, node_name: str) -> tuple[str, int]:
        node = self.store.get("nodes", None, node_name).obj
        return node_endpoint(node, self.config.preferred_address_types)

    def _pod(self, namespace: str, name: str) -> dict[str, Any]:
        return self.store.get("pods", namespace, name).obj

    @staticmethod
    def _container(pod: dict[str, Any], container: str) -> str:
        """kube-apiserver's ``validateContainer``: the one container, or the named one."""
        spec = pod.get("spec") or {}
        name = (pod.get("metadata") or {}).get("name", "")
        every = [
            str(c.get("name"))
            for key in ("initContainers", "containers", "ephemeralContainers")
            for c in spec.get(key) or []
            if isinstance(c, dict)
        ]
        if not container:
            main = [c for c in spec.get("containers") or [] if isinstance(c, dict)]
            if len(main) == 1:
                return str(main[0].get("name"))
            if not main:
                raise bad_request(f"a container name must be specified for pod {name}")
            raise bad_request(
                f"a container name must be specified for pod {name}, choose one of: [{' '.join(every)}]"
            )
        if container not in every:
            raise bad_request(f"container {container} is not valid for pod {name}")
        return container

    # -- pods/log ------------------------------------------------------------------------------

    def pod_log(
        self, namespace: str, name: str, query: Mapping[str, str]
    ) -> tuple[int, Iterator[bytes] | None]:
        """(status, stream) of ``pods/log``: the checks and parameters of ``LogREST.Get``."""
        from .negotiation import parse_int64

        def number(key: str) -> int | None:
            value = query.get(key)
            return None if value is None or value == "" else parse_int64(value)

        def flag(key: str) -> bool:
            return query.get(key, "").lower() in ("1", "true", "t")

        tail, limit, since = number("tailLines"), number("limitBytes"), number("sinceSeconds")
        since_time = query.get("sinceTime") or None
        errors: list[FieldError] = []
        if tail is not None and tail < 0:
            errors.append(
                FieldError("tailLines", "Invalid value", tail, "must be greater than or equal to 0")
            )
        if limit is not None and limit < 1:
            errors.append(FieldError("limitBytes", "Invalid value", limit, "must be greater than 0"))
        if since is not None and since_time is not None:
            errors.append(
                FieldError(
                    "", "Forbidden", None, "at most one of `sinceTime` or `sinceSeconds` may be specified"
                )
            )
        elif since is not None and since < 1:
            errors.append(FieldError("sinceSeconds", "Invalid value", since, "must be greater than 0"))
        if errors:
            raise invalid("PodLogOptions", name, errors)
        pod = self._pod(namespace, name)
        container = self._container(pod, query.get("container", ""))
        node = (pod.get("spec") or {}).get("nodeName")
        if not node:
            # kube-apiserver: an unscheduled pod has no location, and the answer is empty.
            return 200, None
        params: list[tuple[str, str]] = []
        for key in ("follow", "previous", "timestamps"):
            if flag(key):
                params.append((key, "true"))
        if since is not None:
            params.append(("sinceSeconds", str(since)))
        if since_time is not None:
            params.append(("sinceTime", since_time))
        for key, value in (("tailLines", tail), ("limitBytes", limit)):
            if value is not None:
                params.append((key, str(value)))
        path = "/containerLogs/" + "/".join(quote(p, safe="") for p in (namespace, name, container))
        if params:
            path += "?" + urlencode(params)
        host, port = self.endpoint(node)
        response, conn = self._request(host, port, "GET", path, {}, b"")
        if not 200 <= response.status <= 206:
            # kube-apiserver's GenericHttpResponseChecker: the kubelet's words, kept.
            text = response.read(4096).decode("utf-8", "replace")
            conn.close()
            raise _checked_error(response.status, text, name)
        return 200, _relay(response, conn)

    # -- nodes/{name}/proxy/{path} -------------------------------------------------------------

    def node_proxy(
        self, method: str, node_name: str, path: str, raw_query: str, headers: Mapping[str, str], body: bytes
    ) -> tuple[int, dict[str, str], Iterator[bytes] | Takeover]:
        """(status, headers, stream or takeover) of a request relayed to a node's kubelet."""
        scheme, name, port_text = _split_scheme_name_port(node_name)
        host, port = self.endpoint(name)
        if port_text and port_text != str(port):
            raise bad_request(
                f'invalid node request "{node_name}": this server proxies to the kubelet port {port} only'
            )
        del scheme
        target = (path or "/") + (f"?{raw_query}" if raw_query else "")
        if _is_upgrade(headers):
            return 101, {}, self._upgrade(host, port, method, target, headers)
        response, conn = self._request(host, port, method, target, _relayed(headers), body)
        out = {
            k: v
            for k, v in response.getheaders()
            if k.lower() not in _HOP_HEADERS and k.lower() not in ("date", "content-length")
        }
        return response.status, out, _relay(response, conn)

    # -- pods/exec, attach, portforward ------------------------------------------------------

    def pod_stream(
        self, kind: str, method: str, namespace: str, name: str, raw_query: str, headers: Mapping[str, str]
    ) -> Takeover:
        """The takeover of an exec, attach or port-forward upgrade (``kind``: its subresource)."""
        if not _is_upgrade(headers):
            raise bad_request("Upgrade request required")
        pairs = parse_qsl(raw_query, keep_blank_values=True)
        query = dict(pairs)
        pod = self._pod(namespace, name)
        params: list[tuple[str, str]] = []
        if kind == "portforward":
            ports = [v for k, v in pairs if k == "ports"]
            if ports:
                params.append(("port", ",".join(ports)))
            path = "/portForward/" + "/".join(quote(p, safe="") for p in (namespace, name))
        else:
            container = self._container(pod, query.get("container", ""))
            for key in ("stdin", "stdout", "stderr", "tty"):
                if query.get(key, "").lower() in ("1", "true", "t"):
                    params.append((key, "1"))
            if kind == "exec":
                params += [("command", v) for k, v in pairs if k == "command"]
            path = f"/{kind}/" + "/".join(quote(p, safe="") for p in (namespace, name, container))
        node = (pod.get("spec") or {}).get("nodeName")
        if not node:
            raise bad_request(f"pod {name} does not have a host assigned")
        host, port = self.endpoint(node)
        target = path + ("?" + urlencode(params) if params else "")
        return self._upgrade(host, port, method, target, headers)

    # -- the wire ------------------------------------------------------------------------------

    def _connect(self, host: str, port: int) -> ssl.SSLSocket:
        raw = socket.create_connection((host, port), timeout=self.config.timeout)
        try:
            raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            return self.context.wrap_socket(raw, server_hostname=host if self.config.ca_pem else None)
        except BaseException:
            raw.close()
            raise

    def _request(
        self, host: str, port: int, method: str, target: str, headers: Mapping[str, str], body: bytes
    ) -> tuple[http.client.HTTPResponse, http.client.HTTPSConnection]:
        url = f"https://{_hostport(host, port)}{target}"
        conn = http.client.HTTPSConnection(host, port, timeout=self.config.timeout, context=self.context)
        try:
            conn.request(method, target, body=body or None, headers=dict(headers))
            response = conn.getresponse()
        except (OSError, http.client.HTTPException) as err:
            conn.close()
            log.info("kubelet unreachable", extra={"url": url, "error": str(err)})
            verb = method.capitalize()
            raise _unknown_500(f'{verb} "{url}": {_dial_text(host, port, err)}') from None
        # The head came in time; the body may take as long as it takes (a followed log).
        if conn.sock is not None:
            conn.sock.settimeout(None)
        return response, conn

    def _upgrade(
        self, host: str, port: int, method: str, target: str, headers: Mapping[str, str]
    ) -> Takeover:
        """Dial, send the upgrade request and read the node's answer head; the takeover relays
        that head and then splices. A failed dial is kube-apiserver's ``error dialing backend``."""
        try:
            backend: socket.socket = self._connect(host, port)
        except OSError as err:
            log.info("kubelet unreachable", extra={"host": host, "port": port, "error": str(err)})
            raise _unknown_500(f"error dialing backend: {_dial_text(host, port, err)}") from None
        try:
            lines = [f"{method} {target} HTTP/1.1", f"Host: {_hostport(host, port)}"]
            lines += [f"{k}: {v}" for k, v in _relayed(headers).items()]
            lines += [
                f"Connection: {headers.get('connection', 'Upgrade')}",
                f"Upgrade: {headers.get('upgrade', '')}",
            ]
            backend.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
            head, extra = _read_head(backend)
        except (OSError, ValueError) as err:
            backend.close()
            raise _unknown_500(f"error sending request: {err}") from None
        status = _status_of(head)
        if status != 101 and status < 400:
            backend.close()
            raise _unknown_500(f"invalid upgrade response: status code {status}")
        backend.settimeout(None)

        def takeover(client: socket.socket, reader: BinaryIO) -> None:
            try:
                if status != 101:
                    # As kube-apiserver: the node's refusal goes to the client as it came.
                    client.sendall(head + extra + _rest_of_body(backend, head, len(extra)))
                    return
                client.sendall(head + extra)
                _splice(client, _buffered(client, reader), backend)
            except OSError as err:
                log.debug("spliced stream ended", extra={"error": str(err)})
            finally:
                with contextlib.suppress(OSError):
                    backend.close()

        return takeover


def _split_scheme_name_port(text: str) -> tuple[str, str, str]:
    """apimachinery's ``SplitSchemeNamePort``: ``name``, ``name:port`` or ``scheme:name:port``."""
    parts = text.split(":")
    if len(parts) == 1:
        return "", parts[0], ""
    if len(parts) == 2:
        return "", parts[0], parts[1]
    if len(parts) == 3 and parts[0] in ("http", "https"):
        return parts[0], parts[1], parts[2]
    raise bad_request(f'invalid node request "{text}"')


def _is_upgrade(headers: Mapping[str, str]) -> bool:
    connection = headers.get("connection", "").lower()
    return "upgrade" in [t.strip() for t in connection.split(",")] and bool(headers.get("upgrade"))


def _relayed(headers: Mapping[str, str]) -> dict[str, str]:
    named = {t.strip().lower() for t in headers.get("connection", "").split(",")}
    out = {k: v for k, v in headers.items() if k.lower() not in _HOP_HEADERS and k.lower() not in named}
    out["X-Forwarded-For"] = headers.get("x-forwarded-for", "127.0.0.1")
    out.pop("x-forwarded-for", None)
    return out


def _checked_error(code: int, text: str, name: str) -> ApiError:
    """kube-apiserver's ``GenericHttpResponseChecker`` of a kubelet's non-2xx answer to pods/log."""
    if code == 500:
        message = f"Internal error occurred: {text}"
        return ApiError(
            message, code=500, status=status_body(500, "InternalError", message, causes=[{"message": text}])
        )
    if code == 400:
        return ApiError(text, code=400, status=status_body(400, "BadRequest", text))
    reasons = {404: ("NotFound", "the server could not find the requested resource"),
               401: ("Unauthorized", "the server has asked for the client to provide credentials"),
               403: ("Forbidden", text)}  # fmt: skip
    reason, message = reasons.get(
        code,
        ("InternalError", f'an error on the server ("{text}") has prevented the request from succeeding')
        if code >= 500
        else ("", f"the server responded with the status code {code} but did not return more information"),
    )
    message = f"{message} ( pods/log {name})"
    body = status_body(code, reason, message, name=name, kind="pods/log")
    if not reason:
        del body["reason"]
    return ApiError(message, code=code, status=body)


def _relay(response: http.client.HTTPResponse, conn: http.client.HTTPSConnection) -> Iterator[bytes]:
    """The node's body as it comes, read on a thread so that a quiet follow still lets the
    server's writer look for a departed client (an empty chunk each second).

    Only the reading thread touches the response and closes the connection (http.client is
    not safe across threads); when the caller leaves, the socket is shut down under it,
    which ends its read, and a full queue is given up on.
    """
    chunks: queue.Queue[bytes | None] = queue.Queue(maxsize=16)
    stop = threading.Event()

    def put(item: bytes | None) -> bool:
        while True:
            try:
                chunks.put(item, timeout=_POLL_SECONDS)
                return True
            except queue.Full:
                if stop.is_set():
                    return False

    def pump() -> None:
        try:
            while not stop.is_set():
                data = response.read1(_CHUNK)
                if not data or not put(data):
                    break
        except Exception as err:  # the socket shut down under the read, or a broken stream
            if not stop.is_set():
                log.info("the kubelet's stream broke off", extra={"error": str(err)})
        finally:
            with contextlib.suppress(Exception):
                conn.close()
            put(None)

    thread = threading.Thread(target=pump, name="kubelet-relay", daemon=True)
    thread.start()
    try:
        while True:
            try:
                item = chunks.get(timeout=_POLL_SECONDS)
            except queue.Empty:
                yield b""
                continue
            if item is None:
                return
            yield item
    finally:
        stop.set()
        sock = conn.sock
        if sock is not None:
            with contextlib.suppress(OSError):
                socket.socket.shutdown(sock, socket.SHUT_RDWR)


def _read_head(sock: socket.socket) -> tuple[bytes, bytes]:
    """The answer's head (through the empty line) and the bytes read past it."""
    data = b""
    while b"\r\n\r\n" not in data:
        if len(data) > _HEAD_LIMIT:
            raise ValueError("the node's answer head is too long")
        got = sock.recv(_CHUNK)
        if not got:
            raise ValueError("the node closed the connection before answering")
        data += got
    end = data.index(b"\r\n\r\n") + 4
    return data[:end], data[end:]


def _status_of(head: bytes) -> int:
    try:
        return int(head.split(b" ", 2)[1])
    except (IndexError, ValueError):
        return 0


def _rest_of_body(sock: socket.socket, head: bytes, have: int) -> bytes:
    """The rest of a refusal's body, when its length is stated (at most 64 KiB)."""
    for line in head.split(b"\r\n"):
        key, _, value = line.partition(b":")
        if key.strip().lower() == b"content-length" and value.strip().isdigit():
            want = min(int(value), _HEAD_LIMIT) - have
            out = b""
            while len(out) < want:
                got = sock.recv(want - len(out))
                if not got:
                    break
                out += got
            return out
    return b""


def _buffered(client: socket.socket, reader: BinaryIO) -> bytes:
    """What the server's reader already holds past the request (a client that did not wait)."""
    client.setblocking(False)
    try:
        return reader.read1(_CHUNK) or b""  # type: ignore[attr-defined]
    except (OSError, ValueError):
        return b""


def _splice(client: socket.socket, to_backend: bytes, backend: socket.socket) -> None:
    """Copy bytes both ways on this one thread (a TLS socket is not to be read and written from
    two threads at once) until either side ends; then what is queued is flushed and both close."""
    pending: dict[socket.socket, bytearray] = {backend: bytearray(to_backend), client: bytearray()}
    peer = {client: backend, backend: client}
    for s in (client, backend):
        s.setblocking(False)
    ended = False
    ready: dict[int, int] = {}
    poller = select.poll()
    fds = {client.fileno(): client, backend.fileno(): backend}
    first = True
    while True:
        for s in (client, backend):
            if ended or len(pending[peer[s]]) >= _SPLICE_BUFFER:
                continue
            if not first and not ready.get(s.fileno(), 0) & (select.POLLIN | select.POLLHUP | select.POLLERR):
                continue
            if _drain(s, pending[peer[s]]):
                ended = True
        first = False
        for s in (client, backend):
            if pending[s]:
                _flush(s, pending[s])
        if ended and not any(pending.values()):
            return
        for fd, s in fds.items():
            mask = 0
            if not ended and len(pending[peer[s]]) < _SPLICE_BUFFER:
                mask |= select.POLLIN
            if pending[s]:
                mask |= select.POLLOUT
            poller.register(fd, mask or select.POLLHUP)
        events = poller.poll(30_000 if ended else None)
        if ended and not events:
            return  # a side that stopped reading: what is left is dropped
        ready = dict(events)
        for ev in ready.values():
            if ev & (select.POLLERR | select.POLLNVAL) and not ev & select.POLLIN:
                return


def _drain(s: socket.socket, into: bytearray) -> bool:
    """Read what is there (TLS records included); True at the end of the stream."""
    while len(into) < _SPLICE_BUFFER:
        try:
            data = s.recv(_CHUNK)
        except (ssl.SSLWantReadError, ssl.SSLWantWriteError, BlockingIOError, InterruptedError):
            return False
        except OSError:
            return True
        if not data:
            return True
        into += data
    return False


def _flush(s: socket.socket, data: bytearray) -> None:
    while data:
        try:
            sent = s.send(data[:_CHUNK])
        except (ssl.SSLWantReadError, ssl.SSLWantWriteError, BlockingIOError, InterruptedError):
            return
        del data[:sent]
