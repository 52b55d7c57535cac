"""An audit log of every request, in the shape of kube-apiserver's (level Metadata, stage ResponseComplete).

``EmbeddedApiServer(audit_log=PATH)`` (``podstatus serve --audit-log PATH``) appends one JSON
line per request once its answer is written (a watch: when it ends), as kube-apiserver does
with ``--audit-log-format=json`` and a policy of ``level: Metadata``::

    {"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"...",
     "stage":"ResponseComplete","requestURI":"/api/v1/namespaces/default/pods?watch=true",
     "verb":"watch","user":{"username":"system:anonymous","groups":["system:unauthenticated"]},
     "sourceIPs":["127.0.0.1"],"userAgent":"podstatus/0.1",
     "objectRef":{"resource":"pods","namespace":"default","apiVersion":"v1"},
     "responseStatus":{"metadata":{},"code":200},
     "requestReceivedTimestamp":"2026-12-03T10:00:00.000000Z","stageTimestamp":"..."}

The verb and ``objectRef`` are resolved from the URL as kube-apiserver's ``RequestInfo``
resolves them (``get``/``list``/``watch``/``create``/``update``/``patch``/``delete``/
``deletecollection``; a path outside ``/api`` and ``/apis`` is a non-resource request whose
verb is the method in lower case, without ``objectRef``). Lines are encoded outside the
lock, written to a buffer under it, and flushed every ``flush_interval`` seconds by a
thread of their own and on close. Off (the default), a request costs one ``None`` check.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any, BinaryIO

import msgspec

__all__ = ["AuditLog", "request_attributes"]

_encode = msgspec.json.encode
_decode = msgspec.json.decode

_METHOD_VERBS = {
    "POST": "create",
    "GET": "get",
    "HEAD": "get",
    "PUT": "update",
    "PATCH": "patch",
    "DELETE": "delete",
}
# Below /namespaces/NAME, these are the namespace's own subresources, not resources.
_NAMESPACE_SUBRESOURCES = ("status", "finalize")
_ANONYMOUS = {"username": "system:anonymous", "groups": ["system:unauthenticated"]}
# The holder of `podstatus serve`'s token may do anything.
_TOKEN_USER = {"username": "podstatus", "groups": ["system:masters", "system:authenticated"]}


def _watch_flag(query: Mapping[str, str]) -> bool:
    value = query.get("watch")
    return value is not None and value.lower() in ("1", "true", "yes")


def request_attributes(method: str, path: str, query: Mapping[str, str]) -> tuple[str, dict[str, str] | None]:
    """``(verb, objectRef)`` of a request, as kube-apiserver's RequestInfo resolves them.

    ``objectRef`` is None for a non-resource request (``/version``, ``/healthz``, ``/api``,
    ``/apis/GROUP``...), whose verb is the method in lower case.
    """
    parts = [p for p in path.split("/") if p]
    verb = method.lower()
    if len(parts) < 3 or parts[0] not in ("api", "apis"):
        return verb, None
    group = ""
    rest = parts[1:]
    if parts[0] == "apis":
        if len(rest) < 3:
            return verb, None
        group, rest = rest[0], rest[1:]
    version, rest = rest[0], rest[1:]
    if rest[0] == "watch":
        if len(rest) < 2:
            return verb, None
        verb, rest = "watch", rest[1:]
    else:
        verb = _METHOD_VERBS.get(method, "")
    namespace = ""
    if rest[0] == "namespaces" and len(rest) > 1:
        namespace = rest[1]
        if len(rest) > 2 and rest[2] not in _NAMESPACE_SUBRESOURCES:
            rest = rest[2:]
    ref = {"resource": rest[0]}
    if namespace:
        ref["namespace"] = namespace
    name = rest[1] if len(rest) > 1 else ""
    if len(rest) > 2:
        ref["subresource"] = rest[2]
    if not name and verb == "get":
        verb = "watch" if _watch_flag(query) else "list"
        # A list or watch of one object by its name (kubectl get pod X -w).
        for requirement in (query.get("fieldSelector") or "").split(","):
            key, op, value = requirement.partition("=")
            if key.strip() == "metadata.name" and op and value and not value.startswith("="):
                name = value.strip()
    if not name and verb == "delete":
        verb = "deletecollection"
    if name:
        ref["name"] = name
    if group:
        ref["apiGroup"] = group
    ref["apiVersion"] = version
    return verb, ref


def _micro_time(ts: float) -> str:
    """RFC 3339 with microseconds, UTC (metav1.MicroTime as kube-apiserver prints it)."""
    micros = int(ts * 1_000_000)
    seconds, micros = divmod(micros, 1_000_000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{micros:06d}Z"


def _response_status(code: int, body: bytes, content_type: str) -> dict[str, Any]:
    """The answer's Status at level Metadata: the code, and for a failure its reason and message."""
    status: dict[str, Any] = {"metadata": {}}
    if not 200 <= code < 300 and body and content_type.startswith("application/json"):
        try:
            data = _decode(body)
        except msgspec.DecodeError:
            data = None
        if isinstance(data, dict) and data.get("kind") == "Status":
            for key in ("status", "message", "reason", "details"):
                if data.get(key):
                    status[key] = data[key]
    status["code"] = code
    return status


class AuditLog:
    """Appends audit events to ``path``; thread-safe. :meth:`close` flushes and closes."""

    def __init__(self, path: str | Path, *, flush_interval: float = 0.25) -> None:
        self.path = Path(path)
        self._file: BinaryIO | None = open(self.path, "ab", buffering=1 << 16)  # noqa: SIM115
        self._lock = threading.Lock()
        self._dirty = False
        self._closed = threading.Event()
        self._flush_interval = flush_interval
        self._flusher = threading.Thread(target=self._flush_loop, name="audit-log-flush", daemon=True)
        self._flusher.start()

    def record(
        self,
        *,
        method: str,
        uri: str,
        path: str,
        query: Mapping[str, str],
        user_agent: str,
        source_ip: str,
        code: int,
        received: float,
        authenticated: bool,
        body: bytes = b"",
        content_type: str = "",
        audit_id: str = "",
    ) -> None:
        """One request, answered with ``code`` (``received``: its ``time.time()`` on arrival)."""
        verb, ref = request_attributes(method, path, query)
        event: dict[str, Any] = {
            "kind": "Event",
            "apiVersion": "audit.k8s.io/v1",
            "level": "Metadata",
            "auditID": audit_id or str(uuid.uuid4()),
            "stage": "ResponseComplete",
            "requestURI": uri,
            "verb": verb,
            "user": _TOKEN_USER if authenticated else _ANONYMOUS,
            "sourceIPs": [source_ip],
        }
        if user_agent:
            event["userAgent"] = user_agent
        if ref is not None:
            event["objectRef"] = ref
        event["responseStatus"] = _response_status(code, body, content_type)
        event["requestReceivedTimestamp"] = _micro_time(received)
        event["stageTimestamp"] = _micro_time(time.time())
        line = _encode(event) + b"\n"
        with self._lock:
            if self._file is None:
                return
            self._file.write(line)
            self._dirty = True

    def flush(self) -> None:
        with self._lock:
            if self._file is not None and self._dirty:
                self._file.flush()
                self._dirty = False

    def close(self) -> None:
        self._closed.set()
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None
        if threading.current_thread() is not self._flusher:
            self._flusher.join(timeout=5)

    def _flush_loop(self) -> None:
        while not self._closed.wait(self._flush_interval):
            self.flush()
