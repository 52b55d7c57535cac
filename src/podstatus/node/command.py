"""``podstatus node``: long-running virtual nodes of any cluster, until SIGTERM or SIGINT.

The parser part is added to the ``podstatus`` command by :func:`add_parser`;
:func:`run` does the work. With ``--nodes N`` the agents share one pod watch
(:class:`~podstatus.node.agent.NodeGroup`); each has its own Node, Lease and
status manager.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import inspect
import ipaddress
import json
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from .agent import ON_STOP, NodeAgent, NodeGroup
from .calls import ProviderCaller, log_running_call
from .config import NodeConfig
from .events import EVENT_FILTERS
from .heartbeat import LeaseHeldError
from .logs import log_fields
from .network import NodeNetwork
from .provider import NodeDescription
from .runtime import NodeRuntime
from .simulated import SimulatedProvider

__all__ = [
    "JsonFormatter",
    "add_parser",
    "cluster_client",
    "heartbeat_lanes",
    "load_provider",
    "node_names",
    "run",
    "say",
    "shared_runtime",
    "sync_connections",
]

log = logging.getLogger("podstatus.node")

EXIT_LEASE_HELD = 3
# The stop was cut short (--stop-timeout passed, or a second signal).
EXIT_STOP_FORCED = 1
# Under Kubernetes' default terminationGracePeriodSeconds (30), so the process ends before SIGKILL.
DEFAULT_STOP_TIMEOUT = 20.0

# The simulated provider's node in a real cluster: tainted, so the scheduler places only pods that
# tolerate it (or name the node) there, never a real workload by accident.
VIRTUAL_NODE = NodeDescription(
    capacity={"cpu": "64", "memory": "256Gi", "pods": "110"},
    labels={"type": "podstatus-virtual"},
    taints=({"key": "podstatus.io/virtual-node", "effect": "NoSchedule"},),
)


def add_parser(sub: Any) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = sub.add_parser(
        "node",
        help="run virtual nodes in a cluster until SIGTERM (the Node, its Lease, pod status, Events)",
        description="Run virtual nodes of a cluster until SIGTERM/SIGINT. Without --kubeconfig, the "
        "cluster comes from $KUBECONFIG, ~/.kube/config, or the pod's service account, as kubectl does.",
    )
    p.add_argument("--kubeconfig", default=None, help="kubeconfig file")
    p.add_argument("--context", default=None, help="kubeconfig context")
    p.add_argument(
        "--name",
        default=None,
        help="node name, used as given for one node (default vn-1); with --nodes N the nodes are "
        "<name>-1 .. <name>-N (default vn-1 .. vn-N)",
    )
    p.add_argument(
        "--nodes",
        type=int,
        default=1,
        help="virtual nodes in this process (one shared pod watch), named <name>-1 .. <name>-N",
    )
    p.add_argument(
        "--provider",
        default=None,
        help="module:Class of the provider (default: the simulated one, podstatus.node.simulated)",
    )
    p.add_argument(
        "--sim-exec",
        action="store_true",
        help="simulated provider: run `kubectl exec` commands on this machine, in a folder per "
        "container with its env (remote code execution for whoever may exec; off by default)",
    )
    p.add_argument(
        "--take-over", action="store_true", help="start even if another live agent holds the Lease"
    )
    p.add_argument(
        "--on-stop",
        choices=ON_STOP,
        default="leave",
        help="on SIGTERM: leave pods as they are, or cordon first",
    )
    p.add_argument(
        "--stop-timeout",
        type=float,
        default=DEFAULT_STOP_TIMEOUT,
        metavar="SECONDS",
        help="after SIGTERM/SIGINT, exit within this many seconds whatever a provider does (default "
        f"{DEFAULT_STOP_TIMEOUT:g}; provider calls still running are logged as abandoned, exit code 1 when "
        "the stop had to be cut short); a second signal exits at once",
    )
    p.add_argument(
        "--metrics-port",
        type=int,
        default=None,
        help="serve /metrics and the health endpoints (see --healthz-port) on this port",
    )
    p.add_argument(
        "--healthz-port",
        type=int,
        default=None,
        help="serve /livez (the agent's loops run), /readyz and /healthz (that, and every node Ready: "
        "its provider's ping answers) on this port; 503 otherwise",
    )
    p.add_argument("--bind-address", default="0.0.0.0", help="address of the metrics and health endpoints")
    p.add_argument("--kubelet-mode", action="store_true", help="sync exactly as the kubelet (no fast path)")
    p.add_argument(
        "--coalesce",
        type=float,
        default=0.1,
        metavar="SECONDS",
        help="hold a pod's status change this long so the changes that follow go out in the same "
        "write (default 0.1; 0 writes at once; ignored with --kubelet-mode)",
    )
    p.add_argument(
        "--events",
        choices=tuple(EVENT_FILTERS),
        default="all",
        help="which Events to write: all (the kubelet's, Normal and Warning), warning, or none; "
        "simulators of many nodes that do not need the kubelet's Normal events write only warnings",
    )
    p.add_argument(
        "--cpu-manager-policy",
        choices=("none", "static"),
        default="none",
        help="the kubelet's CPU manager policy the node acts by: with static, an in-place resize of a "
        "Guaranteed pod's cpu is Infeasible (default none)",
    )
    p.add_argument("--log-format", choices=("text", "json"), default="text", help="log line format")
    k = p.add_argument_group("kubelet API (logs, exec, attach, port-forward, stats; HTTPS)")
    k.add_argument(
        "--kubelet-port",
        type=int,
        default=10250,
        help="port of the kubelet API (default 10250; 0 turns it off); with --nodes N, node i (0-based) "
        "listens on this port + i",
    )
    k.add_argument(
        "--address",
        default=None,
        help="address the kubelet API listens on, and the Nodes' InternalIP (default: the address this "
        "host reaches the cluster from)",
    )
    k.add_argument(
        "--client-ca-file",
        "--kubelet-client-ca",
        dest="client_ca_file",
        default=None,
        help="client certificates signed by this CA authenticate (kube-apiserver's "
        "--kubelet-client-certificate); CN is the user, O the groups",
    )
    k.add_argument(
        "--authentication-token-webhook",
        action="store_true",
        help="bearer tokens authenticate through a TokenReview",
    )
    k.add_argument(
        "--authorization-mode",
        choices=("AlwaysAllow", "Webhook"),
        default=None,
        help="Webhook: a SubjectAccessReview on nodes/proxy, nodes/log, nodes/stats ... per request "
        "(default with --authentication-token-webhook); AlwaysAllow: every authenticated caller",
    )
    k.add_argument("--tls-cert-file", default=None, help="serving certificate (default: self-signed)")
    k.add_argument(
        "--rotate-server-certificates",
        action="store_true",
        help="request each node's serving certificate with a kubernetes.io/kubelet-serving CSR (someone "
        "approves it) and renew it before it expires; self-signed until the first is issued",
    )
    k.add_argument("--tls-private-key-file", default=None, help="key of --tls-cert-file")
    return p


def reach_address(base_url: str) -> str:
    """The local address this host reaches ``base_url``'s host from (no packet is sent)."""
    import socket
    from urllib.parse import urlsplit

    parts = urlsplit(base_url)
    host = parts.hostname or "127.0.0.1"
    port = parts.port or 443
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_DGRAM)
        family, _, _, _, target = infos[0]
        with socket.socket(family, socket.SOCK_DGRAM) as probe:
            probe.connect(target)
            return str(probe.getsockname()[0])
    except OSError:
        return "127.0.0.1"


def serve_client_ca(kubeconfig: str | None, context: str | None) -> bytes | None:
    """The kubeconfig's cluster CA when it is a ``podstatus serve`` CA, else None.

    ``serve`` signs nothing with its CA but its own serving certificate and the kubelet
    client certificate it presents to nodes (docs/design.md), so trusting it for clients
    lets ``serve`` in and nobody else: ``podstatus node`` against ``serve`` needs no
    ``--kubelet-client-ca``. A real cluster's CA (which also signs its users' certificates)
    is never taken this way.
    """
    try:
        from cryptography import x509
        from cryptography.x509.oid import NameOID

        from ..clients.kubeconfig import load_kubeconfig_configuration

        path = load_kubeconfig_configuration(kubeconfig, context).ssl_ca_cert
        if not path:
            return None
        pem = Path(path).read_bytes()
        names = x509.load_pem_x509_certificate(pem).subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    except Exception:  # no kubeconfig, no CA, not PEM: the flags decide, as before
        return None
    if names and str(names[0].value).startswith("podstatus-ca-"):
        log.info("kubelet API: clients signed by the podstatus serve CA of the kubeconfig are trusted")
        return pem
    return None


def _enough_descriptors(wanted: int) -> None:
    """Raise the soft open-files limit toward ``wanted`` (a socket per node; 1,024 is a common default)."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        target = wanted if hard == resource.RLIM_INFINITY else min(hard, wanted)
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))


def kubelet_api(args: argparse.Namespace, names: Sequence[str], base_url: str, reviewer: Any) -> Any:
    """The kubelet API server of this process with a socket per node, or None (--kubelet-port 0)."""
    if args.kubelet_port == 0:
        return None
    if not 0 < args.kubelet_port <= 65535 or args.kubelet_port + len(names) - 1 > 65535:
        raise ValueError(f"--kubelet-port {args.kubelet_port}: the nodes' ports must be within 1..65535")
    from ..tls import TlsMaterial
    from .kubeletapi import KubeletAPIConfig, KubeletAPIServer

    tls = None
    if args.tls_cert_file or args.tls_private_key_file:
        if not (args.tls_cert_file and args.tls_private_key_file):
            raise ValueError("--tls-cert-file and --tls-private-key-file go together")
        cert = Path(args.tls_cert_file).read_bytes()
        tls = TlsMaterial(ca_pem=cert, cert_pem=cert, key_pem=Path(args.tls_private_key_file).read_bytes())
    client_ca = Path(args.client_ca_file).read_bytes() if args.client_ca_file else None
    if client_ca is None and not args.authentication_token_webhook:
        client_ca = serve_client_ca(args.kubeconfig, args.context)
    authorization = args.authorization_mode or (
        "Webhook" if args.authentication_token_webhook else "AlwaysAllow"
    )
    if client_ca is None and not args.authentication_token_webhook:
        log.warning(
            "kubelet API: neither --client-ca-file nor --authentication-token-webhook: every request gets 401"
        )
    config = KubeletAPIConfig(
        address=args.address or reach_address(base_url),
        tls=tls,
        client_ca_pem=client_ca,
        token_webhook=args.authentication_token_webhook,
        authorization=authorization,
        reviewer=reviewer
        if (
            args.authentication_token_webhook or authorization == "Webhook" or args.rotate_server_certificates
        )
        else None,
        rotate_server_certificates=args.rotate_server_certificates,
    )
    _enough_descriptors(len(names) + 1024)
    addresses = node_addresses(config.address, len(names))
    server = KubeletAPIServer(config)
    server.start(names, addresses)
    try:
        for i, name in enumerate(names):
            server.add_node(name, args.kubelet_port + i, addresses[i])
    except OSError as err:
        server.stop()
        raise ValueError(f"kubelet API: cannot listen on {config.address}: {err}") from err
    return server


def node_addresses(address: str, count: int) -> list[str]:
    """Each node's address: on IPv4 loopback its own (127.0.0.1, .2, ... every one of 127/8 answers
    on Linux), so no two nodes of a process share an InternalIP; any other address is this host's
    one, shared, the nodes told apart by their ports."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return [address] * count
    if (
        ip.version == 4
        and ip.is_loopback
        and int(ip) + count - 1 <= int(ipaddress.IPv4Address("127.255.255.254"))
    ):
        return [str(ip + i) for i in range(count)]
    return [address] * count


DEFAULT_NAME = "vn"


def node_names(name: str | None, count: int) -> list[str]:
    """One node: ``name`` as given (default ``vn-1``); N nodes: ``<name>-1`` .. ``<name>-N``.

    A name given for one node is never changed: pods bound to ``vn-bar`` must find ``vn-bar``.
    """
    if count == 1:
        return [name or f"{DEFAULT_NAME}-1"]
    return [f"{name or DEFAULT_NAME}-{i}" for i in range(1, count + 1)]


def heartbeat_lanes(nodes: int) -> int:
    """Lease renewal threads for ``nodes`` agents of one process (each with its connection).

    Renewals of N nodes every 10 s, each answered in a few ms when the API server is idle
    and in hundreds when it is busy: one lane thread (and connection) per 50 nodes.
    """
    return max(4, min(32, nodes // 50))


def sync_connections(nodes: int) -> int:
    """Pod-write connections (and sync pool workers) for ``nodes`` agents of one process."""
    return 32 if nodes > 1 else 16


def shared_runtime(nodes: int) -> NodeRuntime:
    """The timer and pools that ``nodes`` agents of one process share (``podstatus node``, ``simulate``).

    Their status managers' syncs go to its sync pool, as many workers as the pod client
    has connections (:func:`sync_connections`).
    """
    return NodeRuntime(heartbeat_workers=heartbeat_lanes(nodes), sync_workers=sync_connections(nodes))


def report_pending(metrics: Any, agents: Sequence[Any]) -> None:
    """The pending gauge sums every agent's pending statuses when /metrics is read, not on a
    beat: counting walks every cached status (100,000 at scale)."""
    metrics.pending.set_function(lambda: sum(a.manager.pending_count() for a in agents))


def load_provider(spec: str | None, node_name: str, index: int, *, sim_exec: bool = False) -> Any:
    """A provider instance for one node: ``module:Class`` (given ``node_name=`` when it takes one)."""
    if spec is None:
        return SimulatedProvider(
            seed=index + 1, description=VIRTUAL_NODE, node_name=node_name, exec_locally=sim_exec
        )
    if sim_exec:
        raise ValueError("--sim-exec is for the simulated provider; drop it or --provider")
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"--provider must be module:Class, got {spec!r}")
    # As with `python -m`, a module in the current folder is found (the console script's path
    # starts at its own bin folder instead). Appended, so it shadows no installed module.
    if os.getcwd() not in sys.path:
        sys.path.append(os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except Exception as err:  # not found, or the module itself failed while loading
        raise ValueError(
            f"--provider {spec}: cannot import {module_name}: {type(err).__name__}: {err}"
        ) from err
    cls = getattr(module, attr, None)
    if cls is None:
        raise ValueError(f"--provider {spec}: module {module_name} has no attribute {attr}")
    try:
        params = inspect.signature(cls).parameters
    except (TypeError, ValueError):
        params = {}  # type: ignore[assignment]
    try:
        return cls(node_name=node_name) if "node_name" in params else cls()
    except Exception as err:
        raise ValueError(
            f"--provider {spec}: creating the provider failed: {type(err).__name__}: {err}"
        ) from err


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, and the record's structured fields."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
            "thread": record.threadName,
        }
        fields = getattr(record, "podstatus", None)
        if isinstance(fields, dict):
            out.update({k: str(v) for k, v in fields.items()})
        if record.exc_info:
            out["error"] = self.formatException(record.exc_info)
        return json.dumps(out)


def say(message: str, *, json_lines: bool, error: bool = False, **fields: Any) -> None:
    """A line for the operator (started, stopped, why it gave up): plain, or with
    ``--log-format json`` one JSON object as the log lines are, so every line parses."""
    if json_lines:
        level = logging.ERROR if error else logging.INFO
        record = logging.LogRecord(log.name, level, __file__, 0, message, None, None)
        record.podstatus = fields
        message = JsonFormatter().format(record)
    print(message, file=sys.stderr if error else sys.stdout, flush=True)


def cluster_client(kubeconfig: str | None, context: str | None, **kwargs: Any) -> Any:
    """A client as kubectl finds its cluster: ``kubeconfig``, ``$KUBECONFIG``, ``~/.kube/config``,
    else the pod's service account. Every mistake is a ``ValueError`` saying what was tried."""
    from ..clients.http import HttpKubeClient

    home = Path.home() / ".kube" / "config"
    env = os.environ.get("KUBECONFIG")
    if kubeconfig is not None and not Path(kubeconfig).is_file():
        raise ValueError(f"--kubeconfig {kubeconfig}: no such file")
    try:
        if kubeconfig or context or env or home.exists():
            return HttpKubeClient.from_kubeconfig(kubeconfig, context=context, **kwargs)
        return HttpKubeClient.in_cluster(**kwargs)
    except (ValueError, OSError):
        raise
    except Exception as err:  # kubernetes.config's ConfigException and friends
        if kubeconfig or context or env or home.exists():
            where = kubeconfig or env or home
            raise ValueError(f"cannot load the cluster's configuration from {where}: {err}") from err
        raise ValueError(
            "no cluster to talk to: give --kubeconfig, set KUBECONFIG, or write ~/.kube/config "
            f"(in a pod: its service account, with KUBERNETES_SERVICE_HOST and _PORT set): {err}"
        ) from err


def _client(args: argparse.Namespace, counter: Any, pool_maxsize: int = 16) -> Any:
    return cluster_client(args.kubeconfig, args.context, requests=counter, pool_maxsize=pool_maxsize)


class _Endpoints(BaseHTTPRequestHandler):
    """``/livez``: the agents' loops run. ``/readyz`` and ``/healthz``: that, and every node Ready
    (its provider's ping answers); 503 with one line per problem otherwise."""

    health: Callable[[], bool] = staticmethod(lambda: True)
    problems: Callable[[], list[str]] = staticmethod(lambda: [])
    metrics: Callable[[], bytes] | None = None

    def log_message(self, format: str, *args: Any) -> None:
        return None

    def do_GET(self) -> None:
        path = self.path.split("?")[0]
        if path in ("/healthz", "/livez", "/readyz"):
            problems = [] if type(self).health() else ["the node agents' loops are not running"]
            if path != "/livez":
                problems += [p for p in type(self).problems() if p not in problems]
            body = ("ok\n" if not problems else "".join(f"[-] {p}\n" for p in problems)).encode()
            code, ctype = (200 if not problems else 503), "text/plain; charset=utf-8"
        elif self.path.split("?")[0] == "/metrics" and type(self).metrics is not None:
            metrics = type(self).metrics
            assert metrics is not None
            body, code, ctype = metrics(), 200, "text/plain; version=0.0.4; charset=utf-8"
        else:
            body, code, ctype = b"not found\n", 404, "text/plain"
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def serve_endpoints(
    addr: str,
    port: int,
    health: Callable[[], bool],
    metrics: Callable[[], bytes] | None,
    problems: Callable[[], list[str]] | None = None,
) -> ThreadingHTTPServer:
    """``health``: liveness (``/livez``); ``problems``: what else keeps ``/readyz`` and ``/healthz`` at 503."""
    handler = type(
        "Endpoints",
        (_Endpoints,),
        {
            "health": staticmethod(health),
            "problems": staticmethod(problems or (lambda: [])),
            "metrics": staticmethod(metrics) if metrics else None,
        },
    )
    server = ThreadingHTTPServer((addr, port), handler)
    threading.Thread(target=server.serve_forever, name=f"endpoints-{port}", daemon=True).start()
    return server


STOP_SIGNALS = frozenset({signal.SIGINT, signal.SIGTERM})


class StopGuard:
    """Ends the process within ``bound`` seconds of the first signal, or at once on a second one.

    A provider call that never returns (on a pool thread, or on the agent's own thread for a
    ``blocking = False`` provider, even the main thread during start) cannot hold the process
    up: this daemon thread logs what was abandoned and leaves with ``os._exit``.

    ``sigwait``: SIGINT and SIGTERM are blocked in every thread and this one takes them
    with ``sigtimedwait``. Python runs a signal handler only on the main thread, between
    bytecodes: a signal the kernel gave another thread while the main thread sat in a
    provider's ``time.sleep`` was never handled at all. Without it (no such call on the
    platform), :meth:`signal` is called from the handler and the flags are polled.
    """

    def __init__(self, bound: float, *, sigwait: bool) -> None:
        self.bound = bound
        self.stopping = threading.Event()  # the command's loop stops when it is set
        self.calls: ProviderCaller | None = None  # what to list as abandoned
        self._sigwait = sigwait
        self._second = threading.Event()
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._run, name="podstatus-stop-guard", daemon=True)
        self._thread.start()

    def signal(self, signum: int) -> None:
        """A stop signal (from a handler: events only, no locks held across I/O)."""
        if self.stopping.is_set():
            self._second.set()
            return
        self.stopping.set()
        log.info(
            "signal received, stopping signal=%s bound=%gs (a second signal exits at once)",
            signal.Signals(signum).name if signum in STOP_SIGNALS else signum,
            self.bound,
        )

    def close(self) -> None:
        """The command returned: stop taking signals (a caller's own handlers get them again)."""
        self._closed.set()
        self._thread.join(2)

    def _run(self) -> None:
        deadline: float | None = None
        while not self._closed.is_set():
            wait = 0.2 if deadline is None else max(0.0, min(0.2, deadline - time.monotonic()))
            if self._sigwait:
                # A blocking sigtimedwait interrupted by SIGSTOP/SIGCONT can answer a siginfo of
                # garbage (CPython retries it and returns the interrupted call's struct), even a
                # stale SIGTERM read as a second signal. So never block in it: poll what is
                # pending, and take a pending stop signal, which returns at once.
                pending = signal.sigpending() & STOP_SIGNALS
                if pending:
                    self.signal(signal.sigwait(pending))
                else:
                    self._closed.wait(wait)
            else:
                self._closed.wait(wait)
            if self.stopping.is_set() and deadline is None:
                deadline = time.monotonic() + self.bound
            if self._closed.is_set():
                return
            if self._second.is_set():
                self._exit("a second signal")
            if deadline is not None and time.monotonic() >= deadline:
                self._exit(f"the stop did not finish within {self.bound:g} s (--stop-timeout)")

    def _exit(self, why: str) -> None:
        now = time.monotonic()
        for call in self.calls.running() if self.calls is not None else ():
            log_running_call(
                logging.WARNING, "abandoned a provider call that had not returned at stop", call, now
            )
        log_fields(log, logging.ERROR, "exiting now without a clean stop", reason=why)
        for handler in logging.getLogger().handlers:
            handler.flush()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(EXIT_STOP_FORCED)


def run(args: argparse.Namespace) -> int:
    """``podstatus node``: SIGINT/SIGTERM go to a :class:`StopGuard` while it runs."""
    sigwait = (
        hasattr(signal, "pthread_sigmask")
        and hasattr(signal, "sigtimedwait")
        and threading.current_thread() is threading.main_thread()
    )
    # Blocked before any thread starts, so every thread of the command inherits it.
    old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS) if sigwait else None
    handlers = {signum: signal.getsignal(signum) for signum in STOP_SIGNALS}
    guard = StopGuard(args.stop_timeout, sigwait=sigwait)
    try:
        return _run(args, guard)
    finally:
        guard.close()
        if threading.current_thread() is threading.main_thread():
            for signum, handler in handlers.items():
                if handler is not None:
                    signal.signal(signum, handler)
        if old_mask is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)


def node_config(args: argparse.Namespace, name: str, index: int) -> NodeConfig:
    """The checked settings of the ``index``-th node from the flags (a bad one: ValueError naming it).

    Its kubelet API's endpoint is known once the API listens: ``dataclasses.replace`` adds it.
    """
    return NodeConfig(
        node_name=name,
        take_over=args.take_over,
        events=args.events,
        # One pod watch for the process (NodeGroup): not one per node.
        watch=False,
        cpu_manager_policy=args.cpu_manager_policy,
        # Each node its own InternalIP and pod CIDR (pod IPs from it): none shared in a process.
        network=NodeNetwork.for_index(index),
    )


def _run(args: argparse.Namespace, guard: StopGuard) -> int:
    json_lines = args.log_format == "json"
    if json_lines:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(JsonFormatter())
        root = logging.getLogger()
        root.handlers[:] = [handler]
        if root.level > logging.INFO:
            root.setLevel(logging.INFO)
    if args.nodes < 1:
        raise ValueError("--nodes must be at least 1")
    if not 0 <= args.coalesce < 10:
        raise ValueError("--coalesce must be at least 0 and under 10 seconds")
    if not 0 < args.stop_timeout <= 3600:
        raise ValueError("--stop-timeout must be over 0 and at most 3600 seconds")
    from prometheus_client import generate_latest

    from ..metrics import Metrics
    from ..requestcount import RequestCounter

    metrics = Metrics()
    counter = RequestCounter(metrics.count_request)
    names = node_names(args.name, args.nodes)
    # The settings first: a bad one (a name that is no DNS subdomain) is said before anything runs.
    configs = [node_config(args, name, i) for i, name in enumerate(names)]
    # Providers first: a typo in --provider is reported before anything touches the cluster.
    providers = [
        load_provider(args.provider, name, i, sim_exec=args.sim_exec) for i, name in enumerate(names)
    ]
    heartbeat_workers = heartbeat_lanes(args.nodes)
    try:
        # Pod writes of every node share one pool; the heartbeats (Leases, node status) have
        # connections of their own, as the kubelet's heartbeat client does.
        client = _client(args, counter, pool_maxsize=sync_connections(args.nodes))
        heartbeat_client = _client(args, counter, pool_maxsize=heartbeat_workers)
    except Exception as err:  # kubernetes.config's ConfigException and friends
        if isinstance(err, ValueError | OSError):
            raise
        raise ValueError(f"cannot load the cluster's configuration: {err}") from err
    options: dict[str, Any] = {} if args.kubelet_mode else {"fast_path": True}
    if args.nodes > 1 and not args.kubelet_mode:
        # Many nodes in one process: their managers share the runtime's sync workers (as many
        # as the client has connections); at most 4 pods of one node in flight at a time.
        options["workers"] = 4
    if not args.kubelet_mode:
        options["coalesce"] = args.coalesce
    runtime = shared_runtime(args.nodes)
    api = kubelet_api(args, names, getattr(client, "base_url", ""), client)
    endpoints = api.endpoints() if api is not None else [None] * len(names)
    try:
        agents = [
            NodeAgent(
                client,
                providers[i],
                dataclasses.replace(configs[i], kubelet_endpoint=endpoints[i]),
                manager_options={**options, "on_sync": metrics.observe_sync},
                runtime=runtime,
                heartbeat_client=heartbeat_client,
            )
            for i, name in enumerate(names)
        ]
        if api is not None:
            for agent, (_, port) in zip(agents, api.endpoints()):
                api.set_agent(port, agent)
        group = NodeGroup(client, agents, runtime=runtime)
    except BaseException:
        if api is not None:
            api.stop()
        raise
    stop = guard.stopping
    guard.calls = runtime.calls

    def _handler(signum: int, frame: Any) -> None:
        guard.signal(signum)

    signal.signal(signal.SIGINT, _handler)
    signal.signal(signal.SIGTERM, _handler)

    servers = []
    if args.metrics_port is not None:
        servers.append(
            serve_endpoints(
                args.bind_address,
                args.metrics_port,
                group.healthy,
                lambda: generate_latest(metrics.registry),
                group.problems,
            )
        )
    if args.healthz_port is not None:
        servers.append(
            serve_endpoints(args.bind_address, args.healthz_port, group.healthy, None, group.problems)
        )
    try:
        group.start_agents()
        group.watcher.start()
    except LeaseHeldError as err:
        say(f"error: {err}", json_lines=json_lines, error=True)
        runtime.close()
        if api is not None:
            api.stop()
        return EXIT_LEASE_HELD
    say(
        f"podstatus node: {len(names)} node(s) {', '.join(names[:5])}{' ...' if len(names) > 5 else ''} "
        f"running against {client.base_url} (on stop: {args.on_stop})",
        json_lines=json_lines,
        nodes=len(names),
        server=client.base_url,
        onStop=args.on_stop,
    )
    report_pending(metrics, agents)
    try:
        while not stop.wait(1.0):
            if all(a.lost for a in agents):
                say("error: every node was taken over by another agent", json_lines=json_lines, error=True)
                break
    finally:
        group.stop(args.on_stop)
        if api is not None:
            api.stop()
        for server in servers:
            server.shutdown()
        client.close()
        heartbeat_client.close()
    say("podstatus node: stopped", json_lines=json_lines)
    return 0
