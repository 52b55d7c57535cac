"""The ``podstatus`` command: ``serve`` an embedded API server, ``simulate`` a node, run virtual ``node``s.

``podstatus simulate`` is the main job: a node agent whose containers are
simulated and whose pod status goes through the real status manager to a
real API server (the embedded one, in this process, by default; any cluster
with ``--kubeconfig``). It ends with a summary and exits non-zero when an
invariant broke.
"""

from __future__ import annotations

import argparse
import gc
import logging
import signal
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .errors import ApiError, InvalidObjectError

# rich is imported where output is drawn: ``podstatus node`` (one process per node in
# some deployments) never draws and does not pay for importing it.
log = logging.getLogger("podstatus")

DEFAULT_PODS = 200


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="podstatus",
        description="The kubelet's pod status manager for Python: serve an embedded API server or simulate a node.",
    )
    parser.add_argument(
        "-v", "--verbose", action="count", default=0, help="more logging (-v info, -vv debug)"
    )
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser(
        "serve", help="run the embedded Kubernetes API server (pods, nodes, leases, events) on loopback"
    )
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=6443, help="port (0 picks a free one; default 6443)")
    serve.add_argument(
        "--kubeconfig", default="podstatus.kubeconfig", help="where to write a kubeconfig that points at it"
    )
    serve.add_argument(
        "--faults", default="", help="fault injection, e.g. error=0.1,latency=5ms..50ms,conflict=0.05"
    )
    serve.add_argument(
        "--token",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="require a bearer token, written into the kubeconfig (default: on)",
    )
    serve.add_argument(
        "--tls",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="serve HTTPS with the state folder's CA, written into the kubeconfig (default: on; --no-tls "
        "needs --no-token)",
    )
    serve.add_argument(
        "--state-dir",
        default=None,
        metavar="DIR",
        help="keep the CA, serving key and token here, so a restarted server is the one its clients "
        "trust (default: $XDG_STATE_HOME/podstatus/serve, else ~/.local/state/podstatus/serve)",
    )
    serve.add_argument(
        "--ephemeral",
        action="store_true",
        help="keep nothing: a new CA and token at every start (clients re-read the rewritten kubeconfig)",
    )
    serve.add_argument(
        "--max-connections",
        type=_positive_int,
        default=4096,
        help="connections served at once, each on a thread; more are closed at once (default 4096)",
    )
    serve.add_argument(
        "--header-timeout",
        type=float,
        default=32.0,
        metavar="SECONDS",
        help="time for the TLS handshake and each request's headers, as kube-apiserver's "
        "ReadHeaderTimeout (default 32)",
    )
    serve.add_argument(
        "--audit-log",
        default=None,
        metavar="PATH",
        help="append one JSON line per request here, as kube-apiserver's audit log at level Metadata",
    )
    serve.add_argument(
        "--kubelet-preferred-address-types",
        default=",".join(("InternalIP", "ExternalIP", "Hostname")),
        metavar="TYPES",
        help="which Node address reaches its kubelet for logs, exec, port-forward and top, first match "
        "wins (kube-apiserver's flag; default InternalIP,ExternalIP,Hostname, as kubeadm sets it)",
    )
    serve.add_argument(
        "--kube-like",
        action="store_true",
        help="answer as kube-apiserver with no kubelet: no stricter status checks, and a terminating pod "
        "stays until deleted with grace 0 (by default it goes when its grace period runs out)",
    )

    sim = sub.add_parser(
        "simulate",
        help="run simulated node agents (the main job)",
        description="Run simulated nodes (the Node, its Lease, pod status, Events) against the embedded "
        "API server (or a cluster, --kubeconfig), play the users around them, check invariants on every "
        "write and watch event, and print a summary. With --nodes N the nodes run as `podstatus node "
        "--nodes N` runs them: one process, one shared runtime and sync pool, one pod watch; the pods are "
        "spread over the nodes by spec.nodeName.",
    )
    sim.add_argument(
        "--pods", type=_positive_int, default=None, help=f"pods of the built-in mix (default {DEFAULT_PODS})"
    )
    sim.add_argument(
        "-f",
        "--filename",
        action="append",
        default=[],
        help="YAML/JSON file of pods (repeatable), run as written: never deleted or recreated midway",
    )
    sim.add_argument(
        "--kubeconfig",
        default=None,
        help="act as a virtual node of this cluster instead (its pods and Node are deleted at the end)",
    )
    sim.add_argument("--context", default=None, help="kubeconfig context")
    sim.add_argument(
        "--node",
        default=None,
        help="node name (default podstatus-node-1); with --nodes N: <node>-1 .. <node>-N "
        "(default podstatus-node-1 .. podstatus-node-N)",
    )
    sim.add_argument(
        "--nodes",
        type=_positive_int,
        default=1,
        help="simulated nodes in this process, sharing one pod watch and one runtime (default 1)",
    )
    sim.add_argument("--namespace", default="default")
    sim.add_argument("--duration", type=float, default=55.0, help="stop after this many seconds at most")
    sim.add_argument("--kubelet-mode", action="store_true", help="sync exactly as the kubelet (no fast path)")
    sim.add_argument("--workers", type=_positive_int, default=None, help="sync workers (fast path)")
    sim.add_argument("--in-process", action="store_true", help="talk to the embedded server without HTTP")
    sim.add_argument("--metrics-port", type=int, default=None, help="serve Prometheus metrics on this port")
    sim.add_argument("--faults", default="", help="fault injection in the embedded server")
    sim.add_argument(
        "--write-kubeconfig",
        default=None,
        help="write the embedded server's kubeconfig here (removed when the run ends and the server stops)",
    )
    sim.add_argument("--seed", type=int, default=1)
    sim.add_argument(
        "--delete-fraction",
        type=float,
        default=0.3,
        help="share of the built-in mix's long-running pods deleted midway",
    )
    sim.add_argument("--no-progress", action="store_true", help="no live progress display")

    from .node.events import EVENT_FILTERS

    sim.add_argument(
        "--events",
        choices=tuple(EVENT_FILTERS),
        default="all",
        help="which Events the node writes: all (the kubelet's, Normal and Warning), warning, or none",
    )

    from .node.command import add_parser as add_node_parser

    node = add_node_parser(sub)
    for command in (serve, sim, node):
        # Also after the command (`podstatus node -v`), added to any given before it.
        command.add_argument(
            "-v",
            "--verbose",
            dest="sub_verbose",
            action="count",
            default=0,
            help="more logging (-v info, -vv debug)",
        )
    return parser


def _setup_logging(verbose: int) -> None:
    level = logging.WARNING if verbose == 0 else logging.INFO if verbose == 1 else logging.DEBUG
    logging.basicConfig(
        level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr
    )


def tune_gc() -> None:
    """Collector settings for a process that caches many objects and allocates many short-lived ones.

    With CPython's defaults (a young collection every 700 allocations, a full one every
    100) a node process holding 10,000 pods spent most of its collector time walking the
    same long-lived objects: at 1,000 nodes × 10,000 pods on ``podstatus serve`` it took
    44.8 CPU-seconds and 32 s to all up; with these 30.5 s and 22 s (docs/design.md).
    What exists once the process is set up (modules, classes, parsers) is frozen out of
    every collection; collections are rarer, still often enough that cycles are reclaimed.
    """
    gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 20, 10)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    _setup_logging(args.verbose + args.sub_verbose)
    if argv is None:
        # The process itself (the console script), not a caller in a process of its own making.
        tune_gc()
    try:
        if args.command == "serve":
            return cmd_serve(args)
        if args.command == "node":
            from .node.command import run as cmd_node

            return cmd_node(args)
        return cmd_simulate(args)
    except (InvalidObjectError, ValueError, OSError) as err:
        _print_error(args, "error:", err)
        return 2
    except ApiError as err:
        _print_error(args, "API error:", err)
        return 2
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED


# Ctrl-C: the shell's 128 + SIGINT, as any command interrupted so.
EXIT_INTERRUPTED = 130


def _print_error(args: argparse.Namespace, label: str, err: BaseException) -> None:
    if getattr(args, "log_format", "text") == "json":
        from .node.command import say

        say(f"{label} {err}", json_lines=True, error=True)
        return
    from rich.console import Console
    from rich.markup import escape

    # Escaped, no emoji codes: a file name or a server's message ("[a-z0-9]", ":X:") is text, not markup.
    Console(stderr=True, soft_wrap=True, emoji=False).print(f"[bold red]{label}[/] {escape(str(err))}")


# --- serve ------------------------------------------------------------------------------


def _make_server(
    host: str,
    port: int,
    faults: str,
    *,
    token: str | None = None,
    tls: Any = False,
    audit_log: str | None = None,
    store: Any = None,
    **limits: Any,
) -> Any:
    from .server.http import EmbeddedApiServer

    server = EmbeddedApiServer(
        host=host, port=port, token=token, tls=tls, audit_log=audit_log, store=store, **limits
    )
    if faults:
        from .server.faults import FaultPlan

        # Parsed before anything starts, so a bad spec is a clear error, not a half-started server.
        FaultPlan.parse(faults).install(server)
    return server


def _allow_connections(wanted: int) -> int:
    """Raise the descriptor limit as Go programs do at start (soft to hard); the connections
    that fit under it, a margin kept for files and the server's own sockets."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError):
            pass
    fits = wanted if soft == resource.RLIM_INFINITY else min(wanted, max(1, soft - 64))
    if fits < wanted:
        logging.getLogger(__name__).warning(
            "at most %d connections: the descriptor limit is %d (ulimit -n)", fits, soft,
            extra={"wanted": wanted, "limit": soft},
        )  # fmt: skip
    return fits


def cmd_serve(args: argparse.Namespace) -> int:
    from rich.console import Console

    from .server import security
    from .tls import generate_ca, issue_serving_cert

    console = Console()
    loopback = security.is_loopback(args.host)
    # client-go (kubectl) reads a kubeconfig's credentials only for an https server: a token
    # over plain HTTP would never be sent, so the token brings TLS with it.
    tls = (args.token or not loopback) if args.tls is None else args.tls
    if args.token and not tls:
        raise ValueError("--no-tls needs --no-token: kubectl and client-go send a token only over https")
    if not args.header_timeout > 0:
        raise ValueError("--header-timeout must be positive")
    client: tuple[bytes, bytes] | None = None
    if args.ephemeral:
        token = security.generate_token() if args.token else None
        material: Any = tls
        if tls:
            # One fresh CA for the serving and the kubelet client certificate, as at a kept start.
            ca_pem, ca_key = generate_ca()
            material = issue_serving_cert(ca_pem, ca_key, [args.host])
            client = security.issue_client_cert(ca_pem, ca_key)
    else:
        state_dir = Path(args.state_dir) if args.state_dir else security.default_state_dir()
        kept = security.load_credentials(state_dir, [args.host], token=args.token, tls=tls)
        token, material, client = kept.token, kept.tls, kept.kubelet_client
    from .server.proxy import ADDRESS_TYPES, KubeletClientConfig

    wanted_types = [t.strip() for t in args.kubelet_preferred_address_types.split(",") if t.strip()]
    unknown = [t for t in wanted_types if t not in ADDRESS_TYPES]
    if unknown or not wanted_types:
        raise ValueError(
            f"--kubelet-preferred-address-types {args.kubelet_preferred_address_types!r}: "
            f"each must be one of {', '.join(ADDRESS_TYPES)}"
        )
    kubelet = KubeletClientConfig(
        cert_pem=client[0] if client else None,
        key_pem=client[1] if client else None,
        preferred_address_types=tuple(wanted_types),
    )
    max_connections = _allow_connections(args.max_connections)
    if not loopback:
        # Loud on purpose: the server's whole state is open to whoever can reach it.
        how = ", ".join(
            ["token required" if token else "NO authentication", "TLS" if tls else "NO TLS (plain HTTP)"]
        )
        Console(stderr=True).print(
            f"[bold yellow]warning:[/] --host {args.host} is not a loopback address: "
            f"other machines can reach this server ({how})"
        )
    from .server.storage.store import Store
    from .server.storage.tables import WATCH_CACHE_MAX_CHANGES, WATCH_CACHE_MIN_CHANGES, WATCH_CACHE_SECONDS

    # Watches resume from the window kube-apiserver's watch cache keeps; older ones get 410.
    store = Store(history_size=WATCH_CACHE_MIN_CHANGES, history_seconds=WATCH_CACHE_SECONDS,
                  max_history=WATCH_CACHE_MAX_CHANGES, strict_status=not args.kube_like,
                  reap_terminating=not args.kube_like)  # fmt: skip
    server = _make_server(
        args.host, args.port, args.faults, token=token, tls=material, audit_log=args.audit_log, store=store,
        max_connections=max_connections, header_timeout=args.header_timeout, kubelet_client=kubelet,
    )  # fmt: skip
    server.start()
    # absolute(), not resolve(): resolving would follow a planted symlink to its target.
    path = Path(args.kubeconfig).absolute()
    try:
        server.write_kubeconfig(path)
    except OSError:
        server.stop()
        raise
    console.print(f"podstatus API server listening on [bold]{server.url}[/]")
    console.print(f"kubeconfig written to [bold]{path}[/]")
    if not args.ephemeral:
        from rich.markup import escape

        console.print(f"CA, serving key and token kept in {escape(str(state_dir))} (a restart keeps them)")
        if client is not None:
            ca_file = escape(str(state_dir / security.KUBELET_CLIENT_CA_FILE))
            console.print(
                f"kubelet client CA (podstatus node --kubelet-client-ca, when not given this kubeconfig): {ca_file}"
            )
    console.print(f"try: kubectl --kubeconfig {path} get pods -o wide -w")
    stop = threading.Event()

    def _handler(signum: int, frame: Any) -> None:
        stop.set()

    signal.signal(signal.SIGINT, _handler)
    signal.signal(signal.SIGTERM, _handler)
    sys.stdout.flush()
    stop.wait()
    server.stop()
    console.print("stopped")
    return 0


# --- simulate -------------------------------------------------------------------------


def cmd_simulate(args: argparse.Namespace) -> int:
    import shutil

    from rich.console import Console
    from rich.live import Live
    from rich.markup import escape

    from .metrics import Metrics
    from .node.command import cluster_client, sync_connections
    from .requestcount import RequestCounter
    from .simulator.report import nodes_label, progress_line, progress_table, render_summary
    from .simulator.run import Simulation, simulated_node_names
    from .workloads import builtin_mix, load_pod_files

    console = Console(emoji=False)  # names and messages in it are text: ":x:" stays ":x:"
    names = simulated_node_names(args.node, args.nodes)
    # Many nodes' pod writes share one connection pool, sized to the shared sync pool.
    pool_maxsize = sync_connections(len(names))
    # The user's pods (-f) run as written; only the built-in mix's are deleted and recreated midway.
    user_manifests: list[dict[str, Any]] = []
    if args.filename:
        user_manifests = load_pod_files(args.filename, namespace=args.namespace)
        manifests = builtin_mix(args.pods, namespace=args.namespace, seed=args.seed) if args.pods else []
    else:
        manifests = builtin_mix(args.pods or DEFAULT_PODS, namespace=args.namespace, seed=args.seed)

    metrics = Metrics() if args.metrics_port is not None else None
    counter = RequestCounter()
    server = None
    client: Any
    if args.kubeconfig:
        client = cluster_client(args.kubeconfig, args.context, requests=counter, pool_maxsize=pool_maxsize)
        target = f"cluster from {escape(args.kubeconfig)}"
    if metrics is not None:
        counter.add_callback(metrics.count_request)
        metrics.serve(args.metrics_port)
        console.print(f"Prometheus metrics on http://127.0.0.1:{args.metrics_port}/metrics")

    # What this run writes for the embedded server goes when it stops: a kubeconfig left
    # behind would point at a server that is gone.
    written: Path | None = None
    temp_dir: Path | None = None
    if not args.kubeconfig:
        from .tls import private_dir

        server = _make_server("127.0.0.1", 0, args.faults)
        server.start()
        # Pods need their namespace (as on a real cluster, where it is created first).
        for ns in sorted(
            {
                str((m.get("metadata") or {}).get("namespace") or args.namespace)
                for m in [*user_manifests, *manifests]
            }
        ):
            server.store.ensure_namespace(ns)
        try:
            if args.write_kubeconfig:
                written = server.write_kubeconfig(args.write_kubeconfig)
            else:
                # A fresh private directory, not a predictable name in the shared temp folder.
                temp_dir = private_dir("podstatus-simulate-")
                written = server.write_kubeconfig(temp_dir / "kubeconfig")
        except OSError:
            server.stop()
            raise
        if args.in_process:
            from .clients.embedded import EmbeddedClient

            client = EmbeddedClient(server, counter=counter)
            target = f"embedded API server (in process; also at {server.url})"
        else:
            from .clients.http import HttpKubeClient

            client = HttpKubeClient(server.url, requests=counter, pool_maxsize=pool_maxsize)
            target = f"embedded API server at {server.url}"
        console.print(f"kubeconfig for kubectl, while this run lasts: [bold]{escape(str(written))}[/]")

    options: dict[str, Any] = {} if args.kubelet_mode else {"fast_path": True}
    if args.workers:
        options["workers"] = args.workers
    mode = "kubelet mode" if args.kubelet_mode else f"fast path, {options.get('workers', 4)} workers"
    console.print(
        f"Simulating {nodes_label([escape(n) for n in names], '[bold]', '[/]')} with "
        f"{len(manifests) + len(user_manifests)} pods against the {target} ({mode})"
    )

    sim = Simulation(
        client,
        manifests,
        user_manifests=user_manifests,
        nodes=names,
        duration=args.duration,
        delete_fraction=args.delete_fraction,
        seed=args.seed,
        manager_options=options,
        events=args.events,
        request_counter=counter,
        on_sync=metrics.observe_sync if metrics is not None else None,
    )

    def _interrupted(signum: int, frame: Any) -> None:
        # The first Ctrl-C ends the run early, with its summary; a second one ends it now.
        signal.signal(signal.SIGINT, signal.default_int_handler)
        sim.stop()

    # Only the main thread may set handlers (main() called from another thread keeps Python's).
    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGINT, _interrupted) if main_thread else None
    cleaned: tuple[int, int] | None = None
    try:
        if args.no_progress or not console.is_terminal:
            last: list[str] = []

            def _plain(p: dict[str, int]) -> None:
                line = progress_line(p)
                if not last or last[0] != line:
                    last[:] = [line]

            sim.on_progress = _plain
            result = sim.run()
        else:
            with Live(progress_table({}), console=console, refresh_per_second=4, transient=True) as live:
                sim.on_progress = lambda p: live.update(progress_table(p))
                result = sim.run()
    finally:
        if args.kubeconfig:
            # A cluster keeps what it is given: leave it as found, so the same command runs again.
            cleaned = sim.cleanup()
        if main_thread:
            signal.signal(signal.SIGINT, previous)
        if server is not None:
            server.stop()
            if temp_dir is not None:
                shutil.rmtree(temp_dir, ignore_errors=True)
            elif written is not None:
                written.unlink(missing_ok=True)
    console.print(render_summary(result, names, mode, console.width))
    if written is not None:
        console.print(f"The embedded server stopped: {escape(str(written))} was removed.")
    if cleaned is not None:
        console.print(f"Cleaned up: deleted the {cleaned[0]} pods and {cleaned[1]} Node(s) this run created.")
    if result.interrupted:
        console.print("[bold yellow]Interrupted:[/] the summary so far.")
        return EXIT_INTERRUPTED
    if not result.invariants_ok:
        console.print("[bold red]An invariant was broken: see above.[/]")
    for failure in result.failures():
        console.print(f"[bold red]FAILED:[/] {escape(failure)}")
    for reason in result.not_created[:3]:
        # Whole, on one line: the table's cell cuts a server's message into pieces.
        console.print(f"  never created: {escape(reason)}", soft_wrap=True)
    if not result.ok:
        return 1
    if result.node_registrations > len(names) or result.create_retries:
        console.print(
            f"[yellow]Recovered:[/] {result.create_retries} create retries, "
            f"node registered {result.node_registrations} times; every pod accounted for."
        )
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
