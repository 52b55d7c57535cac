"""Fault injection for the embedded API server: errors, latency, timeouts, resets, conflicts.

A :class:`FaultPlan` wraps ``EmbeddedApiServer.dispatch`` (every HTTP request goes
through it) and makes a share of the requests misbehave the way a loaded or
flaky real API server does:

* ``error``: answer 500, 503 or 429 (503 and 429 carry ``Retry-After`` and
  ``details.retryAfterSeconds``, as the real server's ``Status`` does);
* ``latency``: wait a while before answering (a range ``5ms..200ms`` or a value);
* ``timeout``: hold the request longer than the client waits (``hold`` seconds,
  default 35). Half of them are applied before the hold, so the client cannot
  know whether its write happened;
* ``reset``: drop the connection. Half before the request reaches the API
  logic (nothing applied, the connection is reset), half in the middle of the
  answer (applied, the body is cut off);
* ``conflict``: answer 409 "the object has been modified" to writes that carry
  a ``resourceVersion`` precondition (nothing applied).

``FaultPlan.parse("error=0.3,latency=5ms..200ms,conflict=0.1,reset=0.05,timeout=0.01,seed=7")``
builds one from the command line's ``--faults`` text; ``plan.install(server)``
puts it in front of the server, ``plan.uninstall()`` takes it out. By default
only pod requests (never discovery, health or watch) are hit. ``plan.enabled``
is a :class:`threading.Event`: clear it to stop the faults (held requests are
let go at once). ``plan.counts()`` tells how many faults of each kind were
injected.

Tests can also act at a chosen moment: ``plan.on_request(callback)`` calls
``callback(info)`` before every pod request (faults or not), with the pod's
namespace, name and how many requests that pod has had; :func:`recreate_pod`
deletes a pod and creates it again under the same name with a new UID.
"""

from __future__ import annotations

import logging
import random
import re
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import msgspec

from ..errors import status_body
from .endpoints import Request, Response
from .http import EmbeddedApiServer
from .storage.store import Store

__all__ = ["FAULT_KINDS", "FaultPlan", "RequestInfo", "recreate_pod"]

log = logging.getLogger(__name__)

FAULT_KINDS = ("error", "latency", "timeout", "reset", "conflict")
# The verbs of the API server that a plan may hit (watch only when asked for).
VERBS = frozenset({"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"})
DEFAULT_VERBS = frozenset({"get", "list", "create", "update", "patch", "delete", "deletecollection"})
ERROR_CODES = (500, 503, 429)

_POD_PATH = re.compile(
    r"^/api/v1/(?:namespaces/(?P<ns>[^/]+)/)?pods(?:/(?P<name>[^/]+)(?:/(?P<sub>[^/]+))?)?/?$"
)
_WATCH_PATH = re.compile(r"^/api/v1/watch/")
_DURATION = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*(ms|s|us|m)?\s*$")
_UNITS = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, None: 1.0}
_MODIFIED = "the object has been modified; please apply your changes to the latest version and try again"


def parse_duration(text: str) -> float:
    """Seconds from ``250ms``, ``1.5s``, ``2`` (seconds), ``100us`` or ``1m``."""
    m = _DURATION.match(text)
    if m is None:
        raise ValueError(f"invalid duration {text!r}: expected a number with an optional unit (us, ms, s, m)")
    return float(m.group(1)) * _UNITS[m.group(2)]


def parse_range(text: str) -> tuple[float, float]:
    """``5ms..200ms`` or one duration (low == high), in seconds."""
    low_text, sep, high_text = text.partition("..")
    low = parse_duration(low_text)
    high = parse_duration(high_text) if sep else low
    if high < low:
        raise ValueError(f"invalid range {text!r}: the upper bound is below the lower one")
    return low, high


def _rate(key: str, text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"invalid {key} rate {text!r}: expected a number between 0 and 1") from None
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"invalid {key} rate {text!r}: expected a number between 0 and 1")
    return value


@dataclass(frozen=True)
class RequestInfo:
    """A pod request as hooks see it."""

    method: str
    path: str
    verb: str
    namespace: str
    name: str
    subresource: str
    # How many requests this pod (namespace/name) has had so far, this one included.
    count: int
    request: Request


def _verb(method: str, name: str | None, watch: bool) -> str:
    if watch:
        return "watch"
    if method == "GET":
        return "get" if name else "list"
    if method == "POST":
        return "create"
    if method == "PUT":
        return "update"
    if method == "PATCH":
        return "patch"
    if method == "DELETE":
        return "delete" if name else "deletecollection"
    return method.lower()


def _body_resource_version(request: Request) -> str | None:
    """The resourceVersion precondition a write carries (in the object, the patch or DeleteOptions)."""
    if not request.body.strip():
        return None
    try:
        data = msgspec.json.decode(request.body)
    except msgspec.DecodeError:
        return None
    if not isinstance(data, dict):
        return None
    meta = data.get("metadata")
    if isinstance(meta, dict) and meta.get("resourceVersion"):
        return str(meta["resourceVersion"])
    pre = data.get("preconditions")
    if isinstance(pre, dict) and pre.get("resourceVersion"):
        return str(pre["resourceVersion"])
    return None


@dataclass
class FaultPlan:
    """What share of requests misbehave, and how. Rates are probabilities per request (0..1)."""

    error: float = 0.0
    error_codes: tuple[int, ...] = ERROR_CODES
    latency: tuple[float, float] = (0.0, 0.0)
    timeout: float = 0.0
    # How long a "timed out" request is held (longer than the client waits).
    hold: float = 35.0
    reset: float = 0.0
    conflict: float = 0.0
    seed: int | None = None
    verbs: frozenset[str] = DEFAULT_VERBS
    # Only requests whose User-Agent starts with one of these (None: every client).
    user_agents: tuple[str, ...] | None = None
    retry_after: int = 1
    enabled: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        for key in ("error", "timeout", "reset", "conflict"):
            value = getattr(self, key)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"invalid {key} rate {value!r}: expected a number between 0 and 1")
        if self.error + self.timeout + self.reset > 1.0:
            raise ValueError("error + timeout + reset rates add up to more than 1")
        bad = [c for c in self.error_codes if c not in ERROR_CODES]
        if bad or not self.error_codes:
            raise ValueError(f"invalid error codes {bad or '()'}: choose among 500, 503, 429")
        unknown = set(self.verbs) - VERBS
        if unknown:
            raise ValueError(
                f"unknown verbs {', '.join(sorted(unknown))}: choose among {', '.join(sorted(VERBS))}"
            )
        low, high = self.latency
        if low < 0 or high < low:
            raise ValueError(f"invalid latency range {self.latency!r}")
        if self.hold < 0:
            raise ValueError("hold must not be negative")
        self.verbs = frozenset(self.verbs)
        self._rng = random.Random(self.seed)
        self._lock = threading.Lock()
        self._counts: dict[str, int] = dict.fromkeys(FAULT_KINDS, 0)
        self._by_code: dict[int, int] = {}
        self._requests = 0
        self._per_pod: dict[tuple[str, str], int] = {}
        self._hooks: list[Callable[[RequestInfo], None]] = []
        self._server: EmbeddedApiServer | None = None
        self._inner: Callable[[Request], Response] | None = None
        # Set when held requests must be let go (faults stopped or plan uninstalled).
        self._release = threading.Event()
        self.enabled.set()

    # -- building ----------------------------------------------------------------------

    @classmethod
    def parse(cls, text: str) -> FaultPlan:
        """A plan from ``key=value`` pairs separated by commas.

        Keys: ``error``, ``timeout``, ``reset``, ``conflict`` (rates 0..1);
        ``latency`` (``5ms..200ms`` or ``10ms``); ``hold`` (a duration);
        ``codes`` (``500/503/429``); ``verbs`` (``get/patch/delete``);
        ``seed`` (an integer); ``retry-after`` (seconds).
        """
        kwargs: dict[str, Any] = {}
        for item in text.split(","):
            item = item.strip()
            if not item:
                continue
            key, sep, value = item.partition("=")
            key, value = key.strip().lower().replace("_", "-"), value.strip()
            if not sep or not value:
                raise ValueError(f"invalid fault {item!r}: expected key=value")
            if key in kwargs or (key == "codes" and "error_codes" in kwargs):
                raise ValueError(f"fault {key!r} given twice")
            if key in ("error", "timeout", "reset", "conflict"):
                kwargs[key] = _rate(key, value)
            elif key == "latency":
                kwargs["latency"] = parse_range(value)
            elif key == "hold":
                kwargs["hold"] = parse_duration(value)
            elif key == "codes":
                try:
                    kwargs["error_codes"] = tuple(int(c) for c in value.split("/"))
                except ValueError:
                    raise ValueError(f"invalid codes {value!r}: expected e.g. 500/503/429") from None
            elif key == "verbs":
                kwargs["verbs"] = frozenset(v.strip().lower() for v in value.split("/") if v.strip())
            elif key == "seed":
                try:
                    kwargs["seed"] = int(value)
                except ValueError:
                    raise ValueError(f"invalid seed {value!r}: expected an integer") from None
            elif key == "retry-after":
                try:
                    kwargs["retry_after"] = int(value)
                except ValueError:
                    raise ValueError(f"invalid retry-after {value!r}: expected whole seconds") from None
            else:
                raise ValueError(
                    f"unknown fault {key!r}: expected error, latency, timeout, hold, reset, conflict, "
                    "codes, verbs, seed or retry-after"
                )
        return cls(**kwargs)

    # -- switching ---------------------------------------------------------------------

    def install(self, server: EmbeddedApiServer) -> FaultPlan:
        """Put the plan in front of ``server.dispatch`` (again on the same server: no change)."""
        with self._lock:
            if self._server is server and server.dispatch == self._dispatch:
                return self
            if self._server is not None:
                raise RuntimeError("this fault plan is installed on another server: uninstall it first")
            self._inner = server.dispatch
            self._server = server
            self._release.clear()
            server.dispatch = self._dispatch
        return self

    def uninstall(self) -> None:
        """Take the plan out (held requests are let go); a no-op when not installed."""
        with self._lock:
            server, inner = self._server, self._inner
            self._server = None  # _inner stays: requests already inside still need it
            self._release.set()
        if server is not None and inner is not None and server.dispatch == self._dispatch:
            server.dispatch = inner

    def stop(self) -> None:
        """Stop injecting faults (hooks still run); held requests are let go."""
        self.enabled.clear()
        self._release.set()

    def resume(self) -> None:
        self._release.clear()
        self.enabled.set()

    def on_request(self, callback: Callable[[RequestInfo], None]) -> None:
        """Call ``callback(info)`` before every pod request, before any fault (from the server thread)."""
        with self._lock:
            self._hooks.append(callback)

    def on_nth_request(
        self,
        namespace: str,
        name: str,
        n: int,
        action: Callable[[RequestInfo], None],
        *,
        verb: str | None = None,
    ) -> None:
        """Run ``action`` once, on the ``n``-th request for pod ``namespace/name`` (of ``verb`` if given)."""
        fired = threading.Event()
        seen = [0]

        def hook(info: RequestInfo) -> None:
            if fired.is_set() or info.namespace != namespace or info.name != name:
                return
            if verb is not None and info.verb != verb:
                return
            seen[0] += 1
            if seen[0] == n:
                fired.set()
                action(info)

        self.on_request(hook)

    # -- reporting ---------------------------------------------------------------------

    def counts(self) -> dict[str, int]:
        """Faults injected by kind, plus ``requests`` (pod requests seen) and ``error_<code>``."""
        with self._lock:
            out = dict(self._counts)
            out["requests"] = self._requests
            for code, n in sorted(self._by_code.items()):
                out[f"error_{code}"] = n
            return out

    @property
    def total(self) -> int:
        """Faults injected, all kinds but latency."""
        with self._lock:
            return sum(n for k, n in self._counts.items() if k != "latency")

    # -- the wrapper -------------------------------------------------------------------

    def _classify(self, request: Request) -> tuple[str, str, str, str] | None:
        """(verb, namespace, name, subresource) of a pod request; None for anything else."""
        path = request.path
        watch = False
        if _WATCH_PATH.match(path):
            watch = True
            path = "/api/v1/" + path[len("/api/v1/watch/") :]
        m = _POD_PATH.match(path)
        if m is None:
            return None
        name = m.group("name")
        if not watch and request.method == "GET" and name is None:
            watch = request.query.get("watch", "").lower() in ("1", "true")
        return _verb(request.method, name, watch), m.group("ns") or "", name or "", m.group("sub") or ""

    def _dispatch(self, request: Request) -> Response:
        inner = self._inner
        if inner is None:
            raise RuntimeError("the fault plan is not installed on a server")
        where = self._classify(request)
        if where is None:
            return inner(request)
        verb, namespace, name, sub = where
        with self._lock:
            self._requests += 1
            count = 0
            if name:
                key = (namespace, name)
                count = self._per_pod[key] = self._per_pod.get(key, 0) + 1
            hooks = tuple(self._hooks)
        if hooks:
            info = RequestInfo(request.method, request.path, verb, namespace, name, sub, count, request)
            for hook in hooks:
                try:
                    hook(info)
                except Exception:
                    log.exception("fault plan hook failed for %s %s", request.method, request.path)
        if not self._applies(request, verb):
            return inner(request)
        return self._misbehave(request, inner, verb, name)

    def _applies(self, request: Request, verb: str) -> bool:
        if not self.enabled.is_set() or verb not in self.verbs:
            return False
        if self.user_agents is not None:
            agent = request.header("user-agent")
            return any(agent.startswith(prefix) for prefix in self.user_agents)
        return True

    def _draw(self) -> tuple[float, float, float, float, int]:
        with self._lock:
            rng = self._rng
            low, high = self.latency
            delay = rng.uniform(low, high) if high > 0 else 0.0
            return delay, rng.random(), rng.random(), rng.random(), rng.randrange(len(self.error_codes))

    def _count(self, kind: str, code: int | None = None) -> None:
        with self._lock:
            self._counts[kind] += 1
            if code is not None:
                self._by_code[code] = self._by_code.get(code, 0) + 1

    def _misbehave(
        self, request: Request, inner: Callable[[Request], Response], verb: str, name: str
    ) -> Response:
        delay, draw, conflict_draw, half, code_index = self._draw()
        if delay > 0:
            self._count("latency")
            self._release.wait(delay)
        if draw < self.error:
            code = self.error_codes[code_index]
            self._count("error", code)
            return self._error(code)
        draw -= self.error
        if draw < self.timeout:
            self._count("timeout")
            applied = inner(request) if half < 0.5 else None
            self._release.wait(self.hold)
            if applied is not None and self._release.is_set():
                return applied  # faults stopped meanwhile: the answer may still reach a patient client
            return Response(0, abort=True)
        draw -= self.timeout
        if draw < self.reset:
            self._count("reset")
            if half < 0.5:
                return Response(0, abort=True)
            return _cut_off(inner(request))
        if (
            self.conflict > 0
            and verb in ("update", "patch", "delete")
            and conflict_draw < self.conflict
            and _body_resource_version(request) is not None
        ):
            self._count("conflict")
            message = f'Operation cannot be fulfilled on pods "{name}": {_MODIFIED}'
            body = status_body(409, "Conflict", message, name=name, kind="pods")
            return Response(409, msgspec.json.encode(body))
        return inner(request)

    def _error(self, code: int) -> Response:
        if code == 429:
            message = "Too many requests, please try again later."
            body = status_body(
                429, "TooManyRequests", message,
                causes=[{"reason": "TooManyRequests", "message": message}],
                retryAfterSeconds=self.retry_after,
            )  # fmt: skip
        elif code == 503:
            message = "the server is currently unable to handle the request"
            body = status_body(503, "ServiceUnavailable", message, retryAfterSeconds=self.retry_after)
        else:
            message = "Internal error occurred: injected fault"
            body = status_body(500, "InternalError", message, causes=[{"message": "injected fault"}])
        headers = {"Retry-After": str(self.retry_after)} if code in (429, 503) else {}
        return Response(code, msgspec.json.encode(body), headers=headers)


def _cut_off(response: Response) -> Response:
    """The same answer, but the connection drops half way through the body."""
    if response.stream is not None or response.abort:
        return Response(0, abort=True)
    body = response.body
    half = body[: max(1, len(body) // 2)]

    def chunks() -> Iterator[bytes]:
        yield half
        raise ConnectionResetError("injected fault: connection dropped mid-response")

    return Response(
        response.status, content_type=response.content_type, headers=dict(response.headers), stream=chunks()
    )


def recreate_pod(store_or_server: Store | EmbeddedApiServer, namespace: str, name: str) -> str:
    """Delete pod ``namespace/name`` at once and create it again (same spec, labels, annotations).

    Returns the new UID. Raises :class:`~podstatus.errors.NotFoundError` when there is no such pod.
    """
    store = store_or_server.store if isinstance(store_or_server, EmbeddedApiServer) else store_or_server
    current = store.get("pods", namespace, name)
    meta = current.metadata
    manifest: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            k: v
            for k, v in meta.items()
            if k in ("name", "namespace", "labels", "annotations", "ownerReferences")
        },
        "spec": current.obj.get("spec") or {},
    }
    store.delete("pods", namespace, name, grace_period_seconds=0, uid=current.uid)
    created = store.create("pods", namespace, manifest)
    log.info("recreated pod %s/%s: UID %s -> %s", namespace, name, current.uid, created.uid)
    return created.uid
