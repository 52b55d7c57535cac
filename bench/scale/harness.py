"""The scale benchmark: the same workload for KWOK and for ``podstatus node``, each on a fresh kube-apiserver.

For every size (N nodes, M pods) and every contender in turn:

1. a fresh real kube-apiserver + etcd (``tests/apiserver/start``) with an audit log;
2. the contender starts and N nodes come up (KWOK: the driver creates N Nodes with
   KWOK's annotation and KWOK takes them over; podstatus: ``podstatus node --nodes N``
   registers its own), timed until every one is Ready;
3. the driver creates M pods spread over the nodes by ``spec.nodeName`` (about a tenth
   are batch pods: ``restartPolicy: Never``, owned by a Job), timed until every
   long-running pod is Running and Ready and every batch pod Succeeded;
4. it deletes them all (a deletecollection per 1,000 pods, four at a time) and times until
   every one is gone;
5. all along it watches the nodes: a node whose Ready condition is not True, or whose
   Lease is older than its ``leaseDurationSeconds`` (what the node lifecycle
   controller would turn into Unknown), is a missed heartbeat.

Measured per contender: the phases' wall times, the driver's creation rate, the
contender's CPU-seconds and peak RSS (``/proc``), the API requests it made by verb
and resource (from the apiserver's audit log, by user agent: ``apiserver_request_total``
has no user-agent label), and the CPU-seconds of kube-apiserver and etcd over the run.

``run_podstatus_embedded`` runs the podstatus path against the in-process
EmbeddedApiServer (the test smoke of ``make test``); there the requests are the
server's own count by verb minus the driver's.

``--embedded-sizes`` runs podstatus alone on ``podstatus serve`` (the embedded API server as
a process of its own, ``PodstatusServe``) instead of kube-apiserver + etcd: its CPU is
reported where kube-apiserver's goes, its requests counted from its ``--audit-log`` with the
same parser as kube-apiserver's audit log.

Usage: ``python -m bench.scale.harness --sizes 10x100,100x1000 --write docs/scale.md``;
``python -m bench.scale.harness --embedded-sizes 1000x100000 --hold 30 --max-wait 900``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import platform
import random
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

ROOT = Path(__file__).resolve().parents[2]
try:  # an installed (or PYTHONPATH) podstatus first; this tree's otherwise
    import podstatus  # noqa: F401
except ImportError:
    sys.path.insert(0, str(ROOT / "src"))

from podstatus.clients.http import HttpKubeClient  # noqa: E402
from podstatus.errors import (  # noqa: E402
    ApiError,
    ConnectionFailedError,
    GoneError,
    RequestTimeoutError,
    ServerTimeoutError,
)
from podstatus.requestcount import RequestCounter  # noqa: E402

from . import kwok  # noqa: E402

log = logging.getLogger("bench.scale")

DRIVER_AGENT = "podstatus-scale-driver/0.1"
DRIVER_TIMEOUT = (5.0, 300.0)  # (connect, read) seconds
NAMESPACE = "default"
LABEL = "podstatus.io/scale-bench"
# Pods are deleted by chunks of this many, a deletecollection each: kube-apiserver marks the
# pods of one deletecollection one after another, and a single one for 100,000 pods outlasts
# its 60 s request timeout; every resend then walks all that are left again.
CHUNK_LABEL = "podstatus.io/scale-chunk"
DELETE_CHUNK = 1000
DELETE_PARALLEL = 4
NODE_PREFIX = "node"
BATCH_EVERY = 10  # every 10th pod is a batch pod
CONTENDERS = ("kwok", "podstatus")
# podstatus node --events: KWOK writes no Events, so by default podstatus writes only the Warning ones
# (like for like); "all" measures the kubelet's full Event trail.
PODSTATUS_EVENTS = ("all", "warning", "none")
DEFAULT_PODSTATUS_EVENTS = "warning"
# The apiserver fixture; another copy of it may be named (a tree whose fixture has other options).
START = Path(os.environ.get("PODSTATUS_APISERVER_START") or ROOT / "tests" / "apiserver" / "start")
CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


# --- processes ---------------------------------------------------------------------------


def proc_cpu_seconds(pid: int) -> float:
    """User + system CPU-seconds of one process (not its children), from /proc."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def proc_peak_rss(pid: int) -> int:
    """Peak resident set size in bytes (VmHWM)."""
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def descendants(pid: int) -> list[tuple[int, str]]:
    """(pid, command line) of every process below ``pid``."""
    children: dict[int, list[int]] = {}
    cmdlines: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry}/cmdline", "rb") as fb:
                cmdlines[int(entry)] = fb.read().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    out: list[tuple[int, str]] = []
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), ()):
            out.append((child, cmdlines.get(child, "")))
            todo.append(child)
    return out


def _stop_process(proc: subprocess.Popen[Any], timeout: float = 20.0) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


# --- the driver's client -------------------------------------------------------------------


class DriverClient(HttpKubeClient):
    """The workload driver's client: the project's HttpKubeClient plus two calls it lacks."""

    def list_leases(self, namespace: str) -> list[dict[str, Any]]:
        items, _ = self._list_objects(f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases", {})
        return items

    def wait_for_service_account(self, namespace: str, timeout: float = 60.0) -> None:
        """With ServiceAccount admission a pod needs ``default`` there; a controller creates it."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                self._request("get", "GET", f"/api/v1/namespaces/{namespace}/serviceaccounts/default")
                return
            except ApiError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)

    def delete_pods_collection(self, namespace: str, label_selector: str, timeout: float = 600.0) -> None:
        """One deletecollection; again while the API server answers 504 (it deleted a part of them)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                self._request(
                    "deletecollection",
                    "DELETE",
                    f"/api/v1/namespaces/{namespace}/pods",
                    query={"labelSelector": label_selector},
                )
                return
            except (ServerTimeoutError, ConnectionFailedError, RequestTimeoutError) as err:
                # A busy server times the request out, drops it, or outlasts our read timeout
                # (100,000 pods) while it goes on deleting: what is left is asked for again.
                if time.monotonic() > deadline:
                    raise
                log.warning("deletecollection did not complete; again: %s", err)
                time.sleep(1.0)

    def delete_pods_in_chunks(
        self, namespace: str, pods: int, timeout: float, parallel: int = DELETE_PARALLEL
    ) -> None:
        """Every pod of the workload: one deletecollection per ``DELETE_CHUNK`` of them, ``parallel`` at a time."""
        deadline = time.monotonic() + timeout
        chunks = range((pods + DELETE_CHUNK - 1) // DELETE_CHUNK)

        def delete(chunk: int) -> None:
            self.delete_pods_collection(
                namespace, f"{LABEL}=1,{CHUNK_LABEL}={chunk}", timeout=max(0.0, deadline - time.monotonic())
            )

        with ThreadPoolExecutor(max(1, min(parallel, len(chunks)))) as pool:
            # list() re-raises the first chunk's error, after every chunk was tried.
            list(pool.map(delete, chunks))


# --- servers ---------------------------------------------------------------------------------


class Server(Protocol):
    kubeconfig: str

    def driver(self) -> DriverClient: ...

    def cpu(self) -> dict[str, float]: ...

    def contender_requests(
        self, driver: DriverClient, agent: str
    ) -> tuple[Counter[str], Counter[str], list[str], Counter[str]]:
        """By verb, by verb and resource, the user agents counted, and the answers not 2xx (by verb,
        resource and code) of the contender's requests."""
        ...

    def stop(self) -> None: ...


AUDIT_POLICY = """apiVersion: audit.k8s.io/v1
kind: Policy
# One event per request (a watch also gets ResponseStarted; requests are counted by auditID).
omitStages: ["RequestReceived"]
rules:
- level: Metadata
"""


def count_audit_log(path: Path, agent: str) -> tuple[Counter[str], Counter[str], list[str], Counter[str]]:
    """The requests of user agents starting with ``agent`` in a JSON audit log (kube-apiserver's, or
    ``podstatus serve --audit-log``'s): by verb, by verb and resource, the agents, the answers not 2xx."""
    seen: set[str] = set()
    by_verb: Counter[str] = Counter()
    by_resource: Counter[str] = Counter()
    agents: Counter[str] = Counter()
    errors: Counter[str] = Counter()
    with open(path, encoding="utf-8") as f:
        for line in f:
            event = json.loads(line)
            user_agent = event.get("userAgent") or ""
            if not user_agent.startswith(agent) or event["auditID"] in seen:
                continue
            seen.add(event["auditID"])
            ref = event.get("objectRef") or {}
            resource = ref.get("resource") or event.get("requestURI", "").split("?")[0]
            if ref.get("subresource"):
                resource += "/" + ref["subresource"]
            by_verb[event["verb"]] += 1
            by_resource[f"{event['verb']} {resource}"] += 1
            agents[user_agent.split(" ")[0]] += 1
            code = (event.get("responseStatus") or {}).get("code") or 0
            if not 200 <= code < 300:
                errors[f"{event['verb']} {resource} {code}"] += 1
    return by_verb, by_resource, sorted(agents), errors


def kubeconfig_driver(kubeconfig: str) -> DriverClient:
    """The driver's client for a server out of this process, from the kubeconfig it wrote."""
    return DriverClient.from_kubeconfig(
        kubeconfig,
        requests=RequestCounter(),
        user_agent=DRIVER_AGENT,
        pool_maxsize=32,
        # A deletecollection of 10,000 pods answers only when every one is marked.
        timeout=DRIVER_TIMEOUT,
    )


class RealApiServer:
    """A fresh kube-apiserver + etcd from ``tests/apiserver/start``, with an audit log of every request."""

    def __init__(self, workdir: Path, *, control_plane: bool = False) -> None:
        self.workdir = workdir
        self.control_plane = control_plane
        workdir.mkdir(parents=True, exist_ok=True)
        self.kubeconfig = str(workdir / "kubeconfig")
        self.audit_log = workdir / "audit.log"
        policy = workdir / "audit-policy.yaml"
        policy.write_text(AUDIT_POLICY, encoding="utf-8")
        self._stderr = open(workdir / "fixture.log", "w")  # noqa: SIM115 (closed in stop)
        options = []
        if control_plane:
            # The scheduler places the pods. The garbage collector would delete the batch pods at
            # once (their Job is named, never created), so it is off; every other controller runs.
            options = ["--control-plane", "--controller-manager-arg=--controllers=*,-garbagecollector"]
        self.proc = subprocess.Popen(
            [
                str(START),
                "--kubeconfig",
                self.kubeconfig,
                *options,
                "--",
                f"--audit-policy-file={policy}",
                f"--audit-log-path={self.audit_log}",
                "--audit-log-format=json",
                "--audit-log-maxsize=0",
            ],
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
        )
        self.info: dict[str, str] = {}
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            key, _, value = line.rstrip("\n").partition("=")
            self.info[key] = value
            if key == "KUBECONFIG":
                break
        else:
            code = self.proc.wait()
            raise RuntimeError(f"kube-apiserver fixture failed (exit {code}); see {workdir / 'fixture.log'}")
        self.pids: dict[str, int] = {}
        for pid, cmd in descendants(self.proc.pid):
            for name in ("kube-apiserver", "etcd", "kube-controller-manager", "kube-scheduler"):
                if f"podstatus-test-apiserver {name}" in cmd:
                    self.pids[name] = pid

    def driver(self) -> DriverClient:
        return kubeconfig_driver(self.kubeconfig)

    def cpu(self) -> dict[str, float]:
        out = {}
        for name, pid in self.pids.items():
            with contextlib.suppress(OSError):
                out[name] = proc_cpu_seconds(pid)
        return out

    def contender_requests(
        self, driver: DriverClient, agent: str
    ) -> tuple[Counter[str], Counter[str], list[str], Counter[str]]:
        time.sleep(1.0)  # the last watch's ResponseComplete
        return count_audit_log(self.audit_log, agent)

    def stop(self) -> None:
        _stop_process(self.proc, timeout=60)
        self._stderr.close()


class EmbeddedServer:
    """podstatus's EmbeddedApiServer in this process: requests are its count by verb minus the driver's."""

    def __init__(self, workdir: Path) -> None:
        from podstatus.server.http import EmbeddedApiServer

        workdir.mkdir(parents=True, exist_ok=True)
        self.server = EmbeddedApiServer(host="127.0.0.1", port=0)
        self.server.start()
        self.kubeconfig = str(workdir / "kubeconfig")
        self.server.write_kubeconfig(self.kubeconfig)

    def driver(self) -> DriverClient:
        return DriverClient(
            self.server.url, requests=RequestCounter(), user_agent=DRIVER_AGENT, timeout=DRIVER_TIMEOUT
        )

    def cpu(self) -> dict[str, float]:
        return {}  # in this process: not separable from the driver's

    def contender_requests(
        self, driver: DriverClient, agent: str
    ) -> tuple[Counter[str], Counter[str], list[str], Counter[str]]:
        # Only the driver and the contender talk to it: the contender's are the rest.
        time.sleep(0.5)
        total = Counter(self.server.counter.snapshot())
        total.subtract(driver.requests.snapshot())
        by_verb = Counter({verb: n for verb, n in total.items() if n > 0})
        return by_verb, Counter(), [], Counter()

    def stop(self) -> None:
        self.server.stop()


SERVE = "podstatus serve"


class PodstatusServe:
    """``podstatus serve`` (the embedded API server) as a process of its own, with an audit log.

    Plain HTTP, no token, a free port; ready once its kubeconfig is written (it is written after
    the server listens, and renamed into place whole). ``--kube-like``: as on kube-apiserver, a
    deleted pod stays until the node agent deletes it with grace 0 (by default the embedded server
    would remove it when its grace period runs out, doing the agent's work). Its CPU goes where kube-apiserver's goes,
    under the name ``podstatus serve``; the contender's requests are counted from its audit log,
    as on kube-apiserver.
    """

    def __init__(self, workdir: Path, *, start_timeout: float = 60.0) -> None:
        import podstatus

        self.workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        self.kubeconfig = str(workdir / "kubeconfig")
        self.audit_log = workdir / "audit.log"
        for stale in (Path(self.kubeconfig), self.audit_log):
            stale.unlink(missing_ok=True)
        env = dict(os.environ)
        # The podstatus this harness imported (an installed one, or this tree's src/).
        here = str(Path(podstatus.__file__).resolve().parents[1])
        env["PYTHONPATH"] = os.pathsep.join([*filter(None, [env.get("PYTHONPATH")]), here])
        self._log = open(workdir / "serve.log", "wb")  # noqa: SIM115 (closed in stop)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "podstatus.cli", "serve", "--port", "0", "--no-tls", "--no-token",
             "--kubeconfig", self.kubeconfig, "--audit-log", str(self.audit_log), "--kube-like"],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=env,
        )  # fmt: skip
        deadline = time.monotonic() + start_timeout
        while not os.path.exists(self.kubeconfig):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"podstatus serve did not start; see {workdir / 'serve.log'}")
            time.sleep(0.05)

    def driver(self) -> DriverClient:
        return kubeconfig_driver(self.kubeconfig)

    def cpu(self) -> dict[str, float]:
        with contextlib.suppress(OSError):
            return {SERVE: proc_cpu_seconds(self.proc.pid)}
        return {}

    def peak_rss(self) -> int | None:
        with contextlib.suppress(OSError):
            return proc_peak_rss(self.proc.pid)
        return None

    def contender_requests(
        self, driver: DriverClient, agent: str
    ) -> tuple[Counter[str], Counter[str], list[str], Counter[str]]:
        # A watch is logged when it ends: the server notices a departed client within its 1 s
        # poll, and the log is flushed every 0.25 s.
        time.sleep(2.0)
        return count_audit_log(self.audit_log, agent)

    def stop(self) -> None:
        _stop_process(self.proc, timeout=60)
        self._log.close()


# --- contenders --------------------------------------------------------------------------------


def node_names(count: int) -> list[str]:
    return [f"{NODE_PREFIX}-{i}" for i in range(1, count + 1)]


class Contender:
    name = ""
    agent = ""  # how its requests' User-Agent starts
    registers_nodes = True

    def start(self, kubeconfig: str, nodes: int, workdir: Path) -> subprocess.Popen[bytes]:
        raise NotImplementedError

    def prepare_nodes(self, driver: DriverClient, names: list[str]) -> None:
        """Nodes the driver creates for the contender (KWOK takes over existing Nodes)."""


class KwokContender(Contender):
    name = "kwok"
    agent = "kwok/"
    registers_nodes = False

    def __init__(self) -> None:
        self.binary, self.stages = kwok.ensure_kwok()

    def start(self, kubeconfig: str, nodes: int, workdir: Path) -> subprocess.Popen[bytes]:
        with open(workdir / "kwok.log", "wb") as out:
            return subprocess.Popen(
                kwok.kwok_command(self.binary, self.stages, kubeconfig), stdout=out, stderr=subprocess.STDOUT
            )

    def prepare_nodes(self, driver: DriverClient, names: list[str]) -> None:
        def create(i: int) -> None:
            driver.create_node(kwok.node_manifest(names[i], i))

        with ThreadPoolExecutor(8) as pool:
            list(pool.map(create, range(len(names))))


class PodstatusContender(Contender):
    name = "podstatus"
    agent = "podstatus/"

    def __init__(
        self,
        provider: str | None = "bench.scale.provider:InstantProvider",
        events: str = DEFAULT_PODSTATUS_EVENTS,
        kubelet_api: bool = True,
    ) -> None:
        self.provider = provider
        self.events = events
        self.kubelet_api = kubelet_api

    @staticmethod
    def available() -> bool:
        try:
            import podstatus.node.command  # noqa: F401
        except ImportError:
            return False
        return True

    def command(self, kubeconfig: str, nodes: int) -> list[str]:
        cmd = [sys.executable, "-m", "podstatus.cli", "node", "--kubeconfig", kubeconfig]
        # One node is named as given: its name then carries the -1 that node_names() expects.
        name = NODE_PREFIX if nodes > 1 else f"{NODE_PREFIX}-1"
        cmd += ["--nodes", str(nodes), "--name", name, "--events", self.events]
        # The kubelet API stays on (its cost is part of the run), on ports free on this machine
        # rather than 10250.. which another run or a test may hold.
        cmd += ["--kubelet-port", str(free_port_range(nodes)) if self.kubelet_api else "0"]
        if self.provider:
            cmd += ["--provider", self.provider]
        return cmd

    def start(self, kubeconfig: str, nodes: int, workdir: Path) -> subprocess.Popen[bytes]:
        env = dict(os.environ)
        # The repository root for bench.scale.provider; a PYTHONPATH already set comes first.
        env["PYTHONPATH"] = os.pathsep.join([*filter(None, [env.get("PYTHONPATH")]), str(ROOT)])
        with open(workdir / "podstatus-node.log", "wb") as out:
            return subprocess.Popen(
                self.command(kubeconfig, nodes), stdout=out, stderr=subprocess.STDOUT, env=env
            )


def free_port_range(count: int, *, low: int = 20000, high: int = 60000, tries: int = 50) -> int:
    """The first of ``count`` consecutive loopback ports that are free now (random bases, checked)."""
    rng = random.Random()
    for _ in range(tries):
        base = rng.randrange(low, high - count)
        held: list[socket.socket] = []
        try:
            for port in range(base, base + count):
                sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                held.append(sock)
                sock.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
        finally:
            for sock in held:
                sock.close()
    raise RuntimeError(f"no {count} consecutive free ports between {low} and {high}")


# --- the workload ---------------------------------------------------------------------------------


def pod_manifest(i: int, node: str | None) -> dict[str, Any]:
    """Pod ``i``: bound to ``node``, or (None) left to the scheduler: the only nodes are the contender's."""
    batch = i % BATCH_EVERY == BATCH_EVERY - 1
    meta: dict[str, Any] = {
        "name": f"scale-{i:06d}",
        "namespace": NAMESPACE,
        "labels": {LABEL: "1", CHUNK_LABEL: str(i // DELETE_CHUNK), "kind": "batch" if batch else "serve"},
        # podstatus's simulated provider reads what the containers do from here.
        "annotations": {"podstatus.io/behaviour": "complete" if batch else "serve"},
    }
    if batch:
        # KWOK completes only pods owned by a Job (its pod-complete stage); no Job controller runs,
        # so the owner is named but not there: both contenders get the same pod.
        meta["ownerReferences"] = [
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "name": f"batch-{i:06d}",
                "uid": str(uuid.uuid5(uuid.NAMESPACE_OID, f"scale-job-{i}")),
                "controller": True,
            }
        ]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {
            **({"nodeName": node} if node else {}),
            "restartPolicy": "Never" if batch else "Always",
            "terminationGracePeriodSeconds": 30,
            "tolerations": [{"operator": "Exists"}],
            "containers": [
                {
                    "name": "main",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}},
                }
            ],
        },
    }


@dataclass
class PodTracker:
    """The pods as the driver's watch sees them: when each reached its goal, and when each was gone."""

    expected: int
    lock: threading.Lock = field(default_factory=threading.Lock)
    ready: set[str] = field(default_factory=set)  # long-running pods Running and Ready
    succeeded: set[str] = field(default_factory=set)
    failed: set[str] = field(default_factory=set)
    ever_ready: set[str] = field(default_factory=set)
    seen: set[str] = field(default_factory=set)
    gone: set[str] = field(default_factory=set)
    events: int = 0
    created_at: dict[str, float] = field(default_factory=dict)  # when the driver's create was answered
    goal_at: dict[str, float] = field(default_factory=dict)  # first seen Running+Ready, or Succeeded
    changed: threading.Condition = field(init=False)

    def __post_init__(self) -> None:
        self.changed = threading.Condition(self.lock)

    def observe(self, kind: str, pod: Any) -> None:
        name = pod.metadata.name
        with self.lock:
            self.events += 1
            if kind == "DELETED":
                self.gone.add(name)
                self.ready.discard(name)
            else:
                self.seen.add(name)
                phase = pod.status.phase
                is_ready = phase == "Running" and any(
                    c.type == "Ready" and c.status == "True" for c in pod.status.conditions or ()
                )
                if is_ready:
                    self.ever_ready.add(name)
                serve = (pod.metadata.labels or {}).get("kind") == "serve"
                if is_ready and serve:
                    self.ready.add(name)
                else:
                    self.ready.discard(name)
                if (is_ready and serve) or phase == "Succeeded":
                    self.goal_at.setdefault(name, time.monotonic())
                if phase == "Succeeded":
                    self.succeeded.add(name)
                elif phase == "Failed":
                    self.failed.add(name)
            self.changed.notify_all()

    def latencies(self) -> list[float]:
        """Seconds from each pod's create to its goal (an event may beat the create's answer: 0)."""
        with self.lock:
            return sorted(
                max(0.0, self.goal_at[n] - t) for n, t in self.created_at.items() if n in self.goal_at
            )

    def wait(
        self, predicate: Callable[[], bool], deadline: float, alive: Callable[[], bool] = lambda: True
    ) -> bool:
        """Until ``predicate()`` holds (True), or the deadline passes or ``alive()`` turns False (False)."""
        with self.lock:
            while not predicate():
                left = deadline - time.monotonic()
                if left <= 0 or not alive():
                    return False
                self.changed.wait(min(left, 1.0))
            return True


@dataclass
class Creates:
    """What ``bench.scale.creator`` did: ``time.monotonic()`` times, one clock for every process."""

    started: float
    finished: float
    created: dict[str, float]  # when each create was answered
    failures: list[str]
    requests: dict[str, int]


class PodCreator:
    """The driver's creates in a process of their own (``bench.scale.creator``, which says why).

    Started ahead: ``run`` only tells it to go, so its start-up is never timed.
    """

    def __init__(
        self,
        kubeconfig: str,
        manifests: list[dict[str, Any]],
        workers: int,
        workdir: Path,
        start_timeout: float = 60.0,
    ) -> None:
        path = workdir / "manifests.json"
        path.write_text(json.dumps(manifests), encoding="utf-8")
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([*filter(None, [env.get("PYTHONPATH")]), str(ROOT)])
        with open(workdir / "creator.log", "wb") as log_file:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "bench.scale.creator", kubeconfig, str(path), str(workers)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log_file,
                env=env,
                cwd=ROOT,
                text=True,
            )
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], start_timeout)
        line = self.proc.stdout.readline() if ready else ""
        if not line.strip() or not json.loads(line).get("ready"):
            self.close()
            raise RuntimeError(f"the pod creator did not start; see {workdir / 'creator.log'}")

    def run(self, timeout: float) -> Creates:
        out, _ = self.proc.communicate("go\n", timeout=timeout)
        if self.proc.returncode != 0 or not out.strip():
            raise RuntimeError(f"the pod creator failed (exit {self.proc.returncode})")
        return Creates(**json.loads(out.strip().splitlines()[-1]))

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def __enter__(self) -> PodCreator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def watch_pods(
    driver: DriverClient, tracker: PodTracker, stop: threading.Event, started: threading.Event
) -> None:
    selector = f"{LABEL}=1"
    rv: str | None = None
    while not stop.is_set():
        try:
            if rv is None:
                pods, rv = driver.list_pods(NAMESPACE, label_selector=selector)
                for pod in pods:
                    tracker.observe("MODIFIED", pod)
                started.set()
            stream = driver.watch_pods(
                NAMESPACE, label_selector=selector, resource_version=rv, timeout_seconds=60, stop_event=stop
            )
            for kind, pod in stream:
                if kind in ("ADDED", "MODIFIED", "DELETED"):
                    tracker.observe(kind, pod)
            rv = getattr(stream, "resource_version", None) or rv
        except GoneError:
            rv = None
        except ApiError as err:
            log.warning("driver watch: %s", err)
            stop.wait(0.5)
            rv = None


@dataclass
class HeartbeatWatch:
    """Samples every node's Ready condition and Lease: a sample failing either is a missed heartbeat."""

    names: list[str]
    interval: float = 5.0
    samples: int = 0
    not_ready: int = 0  # node-samples with Ready not True (Unknown, False or missing)
    stale_lease: int = 0  # node-samples with the Lease older than its leaseDurationSeconds
    max_lease_age: float = 0.0
    unknown_nodes: set[str] = field(default_factory=set)

    def sample(self, driver: DriverClient) -> None:
        nodes, _ = driver.list_nodes()
        leases = {lease["metadata"]["name"]: lease for lease in driver.list_leases("kube-node-lease")}
        by_name = {n["metadata"]["name"]: n for n in nodes}
        now = datetime.now(UTC)
        self.samples += 1
        for name in self.names:
            node = by_name.get(name) or {}
            ready = [
                c for c in (node.get("status") or {}).get("conditions") or () if c.get("type") == "Ready"
            ]
            if not ready or ready[0].get("status") != "True":
                self.not_ready += 1
                self.unknown_nodes.add(name)
            spec = (leases.get(name) or {}).get("spec") or {}
            renew = spec.get("renewTime")
            if not renew:
                self.stale_lease += 1
                self.unknown_nodes.add(name)
                continue
            age = (now - datetime.fromisoformat(renew.replace("Z", "+00:00"))).total_seconds()
            self.max_lease_age = max(self.max_lease_age, age)
            if age > float(spec.get("leaseDurationSeconds") or 40):
                self.stale_lease += 1
                self.unknown_nodes.add(name)

    def run(self, driver: DriverClient, stop: threading.Event) -> None:
        while not stop.wait(self.interval):
            try:
                self.sample(driver)
            except ApiError as err:
                log.warning("heartbeat sample: %s", err)


# --- one run --------------------------------------------------------------------------------------


@dataclass
class RunResult:
    contender: str
    nodes: int
    pods: int
    scheduled: bool = False  # placed by kube-scheduler, not bound by the driver
    server: str = ""  # the API server when it is not kube-apiserver: "podstatus serve"
    load: float = 0.0  # the machine's 1-minute load average when the run started
    completed: bool = False
    note: str = ""
    nodes_up_s: float | None = None
    create_s: float | None = None
    create_rate: float | None = None
    ready_s: float | None = None  # create start -> every long-running pod Running+Ready, every batch pod done
    pod_p50_ms: float | None = None  # one pod's create (answered) -> its goal, median
    pod_p99_ms: float | None = None
    ready_pods: int = 0
    batch_succeeded: int = 0
    batch_expected: int = 0
    failed: int = 0
    gone_s: float | None = None  # deletecollection -> every pod gone
    gone_pods: int = 0
    cpu_s: float | None = None
    start_cpu_s: float | None = None  # the contender's CPU-seconds until every node was Ready
    up_cpu_s: float | None = None  # ... until every pod was up (create phase = up - start)
    server_up_cpu: dict[str, float] = field(default_factory=dict)  # the servers' CPU in the create phase
    hold_s: float = 0.0
    hold_cpu_s: float | None = None  # the contender's CPU-seconds while everything was up and idle
    peak_rss: int | None = None
    requests: dict[str, int] = field(default_factory=dict)
    requests_by_resource: dict[str, int] = field(default_factory=dict)
    errors: dict[str, int] = field(default_factory=dict)  # answers not 2xx, by verb, resource and code
    agents: list[str] = field(default_factory=list)
    server_cpu: dict[str, float] = field(default_factory=dict)
    heartbeat_samples: int = 0
    not_ready_samples: int = 0
    stale_lease_samples: int = 0
    max_lease_age: float = 0.0
    wall_s: float = 0.0
    # podstatus node --events of the run ("" for KWOK, and for podstatus runs before the flag: "all").
    events: str = ""

    @property
    def total_requests(self) -> int:
        return sum(self.requests.values())


def run_once(
    contender: Contender,
    server: Server,
    nodes: int,
    pods: int,
    workdir: Path,
    *,
    hold: float = 0.0,
    heartbeat_interval: float = 5.0,
    create_workers: int = 8,
    scheduled: bool = False,
    max_wait: float | None = None,
) -> RunResult:
    """One contender, one size, on ``server`` (fresh): nodes up, pods up, pods gone.

    ``scheduled``: the pods name no node and a kube-scheduler (``--control-plane``) places them.
    """
    result = RunResult(contender.name, nodes, pods, batch_expected=pods // BATCH_EVERY, scheduled=scheduled)
    result.events = str(getattr(contender, "events", ""))
    result.load = os.getloadavg()[0]
    names = node_names(nodes)
    driver = server.driver()
    tracker = PodTracker(pods)
    heartbeat = HeartbeatWatch(names, interval=heartbeat_interval)
    stop = threading.Event()
    watch_started = threading.Event()
    threads = [
        threading.Thread(target=watch_pods, args=(driver, tracker, stop, watch_started), daemon=True),
    ]
    # Generous limits: a run that misses them is reported as incomplete, never as a number.
    limit = 120.0 + pods * 0.05 if max_wait is None else max_wait
    cpu0 = server.cpu()
    t0 = time.monotonic()
    proc = contender.start(server.kubeconfig, nodes, workdir)
    try:
        contender.prepare_nodes(driver, names)
        deadline = t0 + 60.0 + nodes * 0.5
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"{contender.name} exited with {proc.returncode} (log in {workdir})")
            listed, _ = driver.list_nodes()
            up = {
                n["metadata"]["name"]
                for n in listed
                if any(
                    c.get("type") == "Ready" and c.get("status") == "True"
                    for c in (n.get("status") or {}).get("conditions") or ()
                )
            }
            if up >= set(names):
                break
            if time.monotonic() > deadline:
                result.note = f"only {len(up & set(names))}/{nodes} nodes Ready"
                return result
            time.sleep(0.5)
        result.nodes_up_s = time.monotonic() - t0
        result.start_cpu_s = proc_cpu_seconds(proc.pid)
        heartbeat.sample(driver)
        threads.append(threading.Thread(target=heartbeat.run, args=(driver, stop), daemon=True))
        for t in threads:
            t.start()
        watch_started.wait(30)

        if scheduled:
            driver.wait_for_service_account(NAMESPACE)
        # Pods: created in parallel by the driver, spread round-robin over the nodes, from a
        # process of their own (started before the clock: its start-up is not the contender's).
        manifests = [pod_manifest(i, None if scheduled else names[i % nodes]) for i in range(pods)]
        with PodCreator(server.kubeconfig, manifests, create_workers, workdir) as creator:
            cpu_create = server.cpu()
            creates = creator.run(limit)
        t_create = creates.started
        failures = creates.failures
        with tracker.lock:
            tracker.created_at.update(creates.created)
        for verb, n in creates.requests.items():
            driver.requests.inc(verb, n)
        result.create_s = creates.finished - creates.started
        result.create_rate = pods / result.create_s if result.create_s > 0 else None
        if failures:
            result.note = f"{len(failures)} creates failed, e.g. {failures[0]}"
        serve_count = pods - result.batch_expected

        def all_up() -> bool:
            return len(tracker.ready) >= serve_count and len(tracker.succeeded) >= result.batch_expected

        def alive() -> bool:
            return proc.poll() is None

        reached = tracker.wait(all_up, t_create + limit, alive)
        with tracker.lock:
            result.ready_pods = len(tracker.ready)
            result.batch_succeeded = len(tracker.succeeded)
            result.failed = len(tracker.failed)
        if not reached:
            result.note = (
                (f"{result.note}; " if result.note else "")
                + ("" if alive() else f"{contender.name} exited with {proc.returncode}; ")
                + f"not all up after {time.monotonic() - t_create:.0f}s: {result.ready_pods}/{serve_count} Running+Ready, "
                f"{result.batch_succeeded}/{result.batch_expected} Succeeded"
            )
            return result
        result.ready_s = time.monotonic() - t_create
        result.up_cpu_s = proc_cpu_seconds(proc.pid)
        cpu_up = server.cpu()
        result.server_up_cpu = {k: round(cpu_up[k] - cpu_create.get(k, 0.0), 2) for k in cpu_up}
        lat = tracker.latencies()
        if lat:
            result.pod_p50_ms = lat[len(lat) // 2] * 1000
            result.pod_p99_ms = lat[min(len(lat) - 1, int(len(lat) * 0.99))] * 1000
        if hold > 0:
            # Everything up and nothing to do but heartbeats: what the contender costs at rest.
            cpu_hold = proc_cpu_seconds(proc.pid)
            time.sleep(hold)
            result.hold_cpu_s = proc_cpu_seconds(proc.pid) - cpu_hold
            result.hold_s = hold

        t_delete = time.monotonic()
        try:
            # The retries of a deletecollection the server times out share the phase's own limit.
            driver.delete_pods_in_chunks(NAMESPACE, pods, timeout=limit)
        except ApiError as err:
            result.note = f"the deletecollection failed: {err}"
            return result
        gone = tracker.wait(lambda: len(tracker.gone) >= pods, t_delete + limit, alive)
        with tracker.lock:
            result.gone_pods = len(tracker.gone)
        if not gone:
            result.note = ("" if alive() else f"{contender.name} exited with {proc.returncode}; ") + (
                f"only {result.gone_pods}/{pods} pods gone after {time.monotonic() - t_delete:.0f}s"
            )
            return result
        result.gone_s = time.monotonic() - t_delete
        heartbeat.sample(driver)
        result.completed = True
        return result
    finally:
        stop.set()
        if proc.poll() is None:
            try:
                result.cpu_s = proc_cpu_seconds(proc.pid)
                result.peak_rss = proc_peak_rss(proc.pid)
            except OSError:
                pass
        cpu1 = server.cpu()
        result.wall_s = time.monotonic() - t0
        _stop_process(proc)
        result.server_cpu = {k: round(cpu1[k] - cpu0.get(k, 0.0), 2) for k in cpu1}
        by_verb, by_resource, agents, errors = server.contender_requests(driver, contender.agent)
        result.errors = dict(errors)
        result.requests = dict(by_verb)
        result.requests_by_resource = dict(by_resource)
        result.agents = agents
        result.heartbeat_samples = heartbeat.samples
        result.not_ready_samples = heartbeat.not_ready
        result.stale_lease_samples = heartbeat.stale_lease
        result.max_lease_age = round(heartbeat.max_lease_age, 1)
        for t in threads:
            t.join(5)
        driver.close()


def run_podstatus_embedded(
    nodes: int,
    pods: int,
    workdir: Path,
    *,
    heartbeat_interval: float = 1.0,
    hold: float = 0.0,
    events: str = DEFAULT_PODSTATUS_EVENTS,
) -> RunResult:
    """The podstatus path against the in-process EmbeddedApiServer (the smoke of ``make test``)."""
    server = EmbeddedServer(workdir)
    try:
        return run_once(
            PodstatusContender(events=events),
            server,
            nodes,
            pods,
            workdir,
            hold=hold,
            heartbeat_interval=heartbeat_interval,
        )
    finally:
        server.stop()


def run_on_serve(
    nodes: int,
    pods: int,
    base: Path,
    *,
    hold: float = 0.0,
    max_wait: float | None = None,
    provider: str | None = "bench.scale.provider:InstantProvider",
    heartbeat_interval: float = 5.0,
) -> tuple[RunResult, str]:
    """podstatus alone on ``podstatus serve``: the result, and a note with the server's peak RSS."""
    if not PodstatusContender.available():
        result = RunResult("podstatus", nodes, pods, server=SERVE)
        return result, "not run, `podstatus node` is not in this tree"
    workdir = base / f"{nodes}x{pods}-serve-podstatus"
    workdir.mkdir(parents=True, exist_ok=True)
    log.info("run: %s (logs in %s)", _label(nodes, pods, False, "podstatus", SERVE), workdir)
    try:
        server = PodstatusServe(workdir / "serve")
    except Exception as err:
        log.exception("podstatus serve did not start")
        return RunResult("podstatus", nodes, pods, server=SERVE, note=f"failed: {err}"), ""
    note = ""
    try:
        result = run_once(
            PodstatusContender(provider or None),
            server,
            nodes,
            pods,
            workdir,
            hold=hold,
            max_wait=max_wait,
            heartbeat_interval=heartbeat_interval,
        )
    except Exception as err:
        log.exception("run failed")
        result = RunResult("podstatus", nodes, pods, note=f"failed: {err}")
    finally:
        rss = server.peak_rss()
        alive = server.proc.poll() is None
        server.stop()
    result.server = SERVE
    if rss:
        note = f"{SERVE}: peak RSS {rss / 2**20:.0f} MiB"
    if not alive:
        note += (
            f"{'; ' if note else ''}{SERVE} exited with {server.proc.returncode} (log in {workdir / 'serve'})"
        )
    log.info("result: %s (%s)", row(result), note)
    return result, note


# --- the table ------------------------------------------------------------------------------------


def _fmt(value: float | None, digits: int = 1) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def _ratio(a: float | None, b: float | None) -> str:
    if a is None or b is None or b == 0:
        return "—"
    return f"{a / b:.2f}×"


COLUMNS = (
    "size",
    "contender",
    "nodes up (s)",
    "create rate (pods/s)",
    "create → all up (s)",
    "per pod p50 / p99 (ms)",
    "delete → all gone (s)",
    "contender CPU (s)",
    "of which start-up (s)",
    "CPU at rest (s/min)",
    "peak RSS (MiB)",
    "API requests",
    "of which Events",
    "pod requests per pod",
    "apiserver CPU (s)",
    "etcd CPU (s)",
    "missed heartbeats",
    "load at start",
)


def _events(r: RunResult) -> int:
    return sum(n for k, n in r.requests_by_resource.items() if k.split(" ")[-1] == "events")


def pod_requests_per_pod(r: RunResult) -> float | None:
    """Requests on pods (create excepted: the driver's) per pod: the cost of one pod's lifecycle."""
    if not r.requests_by_resource or not r.pods:
        return None
    n = sum(
        count
        for key, count in r.requests_by_resource.items()
        if key.split(" ")[-1].split("/")[0] == "pods" and not key.startswith("create ")
    )
    return n / r.pods


def cpu_after_start(r: RunResult) -> float | None:
    """CPU-seconds from every node Ready to the end: the pods' share, the process's start-up apart."""
    if r.cpu_s is None or r.start_cpu_s is None:
        return None
    return r.cpu_s - r.start_cpu_s


def _per_minute(r: RunResult) -> float | None:
    return None if r.hold_cpu_s is None or not r.hold_s else r.hold_cpu_s / r.hold_s * 60


def _size(r: RunResult) -> str:
    return (
        f"{r.nodes} × {r.pods}"
        + (" via kube-scheduler" if r.scheduled else "")
        + (f" on {r.server}" if r.server else "")
    )


def row(r: RunResult) -> list[str]:
    missed = r.not_ready_samples + r.stale_lease_samples
    return [
        _size(r),
        r.contender + ("" if r.completed else f" (incomplete: {r.note})" if r.note else ""),
        _fmt(r.nodes_up_s),
        _fmt(r.create_rate, 0),
        _fmt(r.ready_s),
        f"{_fmt(r.pod_p50_ms, 0)} / {_fmt(r.pod_p99_ms, 0)}",
        _fmt(r.gone_s),
        _fmt(r.cpu_s),
        _fmt(r.start_cpu_s, 2),
        _fmt(_per_minute(r), 2),
        _fmt(r.peak_rss / 2**20 if r.peak_rss else None, 0),
        str(r.total_requests) if r.requests else "—",
        str(_events(r)) if r.requests_by_resource else "—",
        _fmt(pod_requests_per_pod(r), 2),
        _fmt(r.server_cpu.get("kube-apiserver", r.server_cpu.get(SERVE))),
        _fmt(r.server_cpu.get("etcd")),
        f"{missed} of {r.heartbeat_samples * r.nodes}",
        f"{r.load:.1f}",
    ]


def ratio_row(ps: RunResult, kw: RunResult) -> list[str]:
    def rss(r: RunResult) -> float | None:
        return float(r.peak_rss) if r.peak_rss else None

    without_events = _ratio(
        (ps.total_requests - _events(ps)) or None, (kw.total_requests - _events(kw)) or None
    )
    return [
        _size(ps),
        "**podstatus / KWOK**",
        _ratio(ps.nodes_up_s, kw.nodes_up_s),
        "",
        _ratio(ps.ready_s, kw.ready_s),
        f"{_ratio(ps.pod_p50_ms, kw.pod_p50_ms)} / {_ratio(ps.pod_p99_ms, kw.pod_p99_ms)}",
        _ratio(ps.gone_s, kw.gone_s),
        _ratio(ps.cpu_s, kw.cpu_s),
        f"w/o: {_ratio(cpu_after_start(ps), cpu_after_start(kw))}",
        _ratio(_per_minute(ps), _per_minute(kw)),
        _ratio(rss(ps), rss(kw)),
        _ratio(ps.total_requests or None, kw.total_requests or None),
        f"w/o Events: {without_events}",
        _ratio(pod_requests_per_pod(ps), pod_requests_per_pod(kw)),
        _ratio(ps.server_cpu.get("kube-apiserver"), kw.server_cpu.get("kube-apiserver")),
        _ratio(ps.server_cpu.get("etcd"), kw.server_cpu.get("etcd")),
        "",
        "",
    ]


def markdown_table(header: tuple[str, ...] | list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in r) + " |" for r in rows]
    return "\n".join(lines)


def table_rows(results: list[RunResult]) -> list[list[str]]:
    out: list[list[str]] = []
    sizes: dict[tuple[int, int, bool, str], dict[str, RunResult]] = {}
    for r in results:
        sizes.setdefault((r.nodes, r.pods, r.scheduled, r.server), {})[r.contender] = r
    for _size, by_name in sizes.items():
        for name in CONTENDERS:
            if name in by_name:
                out.append(row(by_name[name]))
        ps, kw = by_name.get("podstatus"), by_name.get("kwok")
        if ps is not None and kw is not None and ps.completed and kw.completed:
            out.append(ratio_row(ps, kw))
    return out


def requests_detail(results: list[RunResult], attribute: str = "requests_by_resource") -> str:
    counts = [getattr(r, attribute) for r in results]
    keys = sorted({k for c in counts for k in c})
    if not keys:
        return ""
    first = "verb resource" + (" code" if attribute == "errors" else "")
    header = [first, *[f"{r.contender} {_size(r)}" for r in results]]
    rows = [[k, *[str(c.get(k, 0)) for c in counts]] for k in keys]
    return markdown_table(header, rows)


def events_note(results: list[RunResult]) -> str:
    """Which Events the podstatus rows wrote (``podstatus node --events``), for the page."""
    modes: dict[str, list[str]] = {}
    for r in results:
        if r.contender == "podstatus":
            # Runs from before the flag wrote every Event, as --events all does.
            modes.setdefault(r.events or "all", []).append(_size(r))
    if not modes:
        return "No podstatus row on this page."
    what = {
        "all": "the kubelet's full Event trail, Normal and Warning",
        "warning": "Warning Events only",
        "none": "no Events",
    }
    if len(modes) == 1:
        mode = next(iter(modes))
        return f"podstatus ran with `--podstatus-events {mode}` (`podstatus node --events {mode}`): {what.get(mode, mode)}."
    parts = "; ".join(
        f"{', '.join(sizes)}: `{mode}` ({what.get(mode, mode)})" for mode, sizes in modes.items()
    )
    return f"podstatus rows ran with different `--podstatus-events` (`podstatus node --events`): {parts}."


def git_commit() -> str:
    try:
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def machine() -> str:
    mem = ""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            mem = f"{int(f.readline().split()[1]) / 2**20:.0f} GiB"
    except OSError:
        pass
    load = " ".join(f"{x:.1f}" for x in os.getloadavg())
    return f"{os.cpu_count()} cores, {mem}, {platform.python_implementation()} {platform.python_version()}, load average at start {load}"


def _label(nodes: int, pods: int, scheduled: bool, name: str, server: str = "") -> str:
    return f"{nodes} × {pods}{' via kube-scheduler' if scheduled else ''}{f' on {server}' if server else ''} {name}"


def _key(r: RunResult) -> str:
    return _label(r.nodes, r.pods, r.scheduled, r.contender, r.server)


def save(
    path: Path,
    results: list[RunResult],
    notes: list[tuple[str, str]],
    invocation: dict[str, str],
    *,
    add: bool,
) -> None:
    """Write ``path`` (markdown) and its ``.json`` twin; ``add`` keeps the earlier runs of other sizes."""
    twin = path.with_suffix(".json")
    invocations = [invocation]
    if add and twin.exists():
        old = json.loads(twin.read_text(encoding="utf-8"))
        fresh = {_key(r) for r in results} | {label for label, _ in notes}
        results = [RunResult(**d) for d in old["results"] if _key(RunResult(**d)) not in fresh] + results
        notes = [(label, text) for label, text in old["notes"] if label not in fresh] + notes
        invocations = old["invocations"] + invocations
    order = {name: i for i, name in enumerate(CONTENDERS)}
    results.sort(key=lambda r: (r.scheduled, r.server, r.nodes, r.pods, order.get(r.contender, 9)))
    twin.write_text(
        json.dumps(
            {"invocations": invocations, "notes": notes, "results": [r.__dict__ for r in results]}, indent=1
        )
        + "\n",
        encoding="utf-8",
    )
    text = DOC_TEMPLATE.format(
        written="\n".join(
            f"- `{i['command']}` (started {i['started']}, commit {i['commit']}; {i['machine']})"
            for i in invocations
        ),
        json_name=twin.name,
        table=markdown_table(COLUMNS, table_rows(results)),
        detail=requests_detail(results) or "(no per-resource counts)",
        errors=requests_detail(results, "errors") or "(none)",
        notes="\n".join(f"- {label}: {text}" for label, text in notes) or "- none",
        events=events_note(results),
    )
    path.write_text(text, encoding="utf-8")


DOC_TEMPLATE = """# Scale: podstatus node against KWOK on the same kube-apiserver

Written by these invocations, in order (a later one replaces the rows of the sizes and contenders it
ran; the raw figures are in `{json_name}`):

{written}

The machine is shared with other jobs: figures move with the neighbours' load (see *load at start*).

Each contender gets its own fresh kube-apiserver v1.37.2 + etcd (`tests/apiserver/start`, no
scheduler, no controller-manager) and the same workload from one Python driver (the project's
`HttpKubeClient`, 8 threads creating): N nodes brought up and kept alive, M pods created with
`spec.nodeName` spread round-robin over the nodes (every 10th a batch pod: `restartPolicy: Never`,
owned by a Job), every long-running pod Running and Ready and every batch pod Succeeded, then a
deletecollection per 1,000 pods (four at a time; runs before commit 87cfbee sent one for all)
and every pod gone. Rows *via kube-scheduler* run the fixture with `--control-plane`
(kube-scheduler and kube-controller-manager with every default controller but the garbage collector,
which would delete the batch pods: their Job is named, never created) and the pods name no node:
the scheduler places them, and the node lifecycle controller watches the heartbeats. The contenders:

- **KWOK v0.8.0** (`kwok`, built by `go install sigs.k8s.io/kwok/cmd/kwok@v0.8.0`), with the stages
  kwokctl gives it by default (node-initialize, node-heartbeat-with-lease, pod-ready, pod-complete,
  pod-delete; read from the module at build time), managing the Nodes the driver creates with the
  annotation `kwok.x-k8s.io/node=fake`. Lease duration 40 s. Its pod-complete stage finishes only
  Job-owned pods, which is why the batch pods name a Job; its pod-delete stage deletes a pod as soon
  as it has a deletionTimestamp, without a grace period.
- **podstatus** `podstatus node --nodes N` (Node, Lease heartbeats every 10 s with a 40 s duration,
  one shared pod watch, every status through the status manager), with the simulated provider's
  durations all zero (`bench/scale/provider.py`) to match KWOK's fast stages. The batch pods run to
  Succeeded (`podstatus.io/behaviour: complete`); a deleted pod's containers are stopped and the
  agent deletes it with grace 0 once its status is terminal, as a kubelet does.

Events: {events} KWOK writes no Events, so by default the harness runs podstatus with
`--podstatus-events warning`, a like-for-like comparison; `--podstatus-events all` measures the
kubelet's full Event trail (Pulling, Pulled, Created, Started, Killing...).

Rows *on podstatus serve* run podstatus alone with `podstatus serve` (the project's embedded API
server, plain HTTP, no token, `--audit-log`, `--kube-like`: a deleted pod stays until the agent
deletes it) as its own process in place of kube-apiserver + etcd:
the same driver and workload, the contender's requests counted from its audit log (kube-apiserver's
format), its CPU in the *apiserver CPU* column (no etcd), its peak RSS in the notes.

Columns: *nodes up*: contender start to every Node Ready (for KWOK this includes the driver creating
the Nodes). *create rate*: the driver's pod creates per second. *create → all up*: first create to
the last pod at its goal, seen through the driver's watch. *per pod*: from a pod's create (its answer
to the driver) to that pod at its goal, median and 99th percentile. *delete → all gone*: the first deletecollection
to the last DELETED event. *contender CPU*, *peak RSS*: of the contender's process over the whole run
(`/proc/PID/stat`, `VmHWM`); *of which start-up*: its CPU from its start until every node was Ready
(for podstatus mostly the interpreter and its imports, the `kubernetes` package's for the kubeconfig
among them), and the ratio row gives the CPU without it (*w/o*), which is what the pods cost. *CPU at rest*: its CPU while every pod was up and nothing changed
(`--hold` seconds: heartbeats and resyncs only), per minute. *API requests*: every request the
contender made, counted from the apiserver's audit log by user agent (`apiserver_request_total` in
v1.37 has no user-agent label, so it cannot tell the contender from the driver); *of which Events*:
the Events podstatus wrote (all of the kubelet's, or only the Warning ones: see *Events* above) and
KWOK does not write, so the ratio row gives the requests without them too. *pod requests per pod*: the
contender's requests on pods and their subresources (status writes, deletes, gets, the list and the
watch), per pod: what one pod's lifecycle costs, without the heartbeats (Leases, Node status), which
grow with the nodes and the length of the run, not with the pods. *apiserver / etcd CPU*: their CPU-seconds over the
run, the driver's requests included (the same for both). *missed heartbeats*: node samples (every
5 s, every node) whose Ready condition was not True or whose Lease was older than its
`leaseDurationSeconds`, which a node lifecycle controller would turn into Unknown. *load at start*:
the machine's 1-minute load average as the run began (2 cores: above 2, others were waiting for CPU).

{table}

Requests by verb and resource (from the audit log):

{detail}

Answers other than 2xx to the contenders (a 404 is a delete of a pod already gone, a 409 a write
on a stale resourceVersion):

{errors}

Notes:

{notes}
"""


# --- the command ---------------------------------------------------------------------------------


def control_plane_available() -> bool:
    """Whether this tree's apiserver fixture can run kube-scheduler and kube-controller-manager too."""
    return "--control-plane" in START.read_text(encoding="utf-8")


def parse_sizes(text: str) -> list[tuple[int, int]]:
    sizes = []
    for part in filter(None, text.split(",")):
        nodes, _, pods = part.strip().partition("x")
        sizes.append((int(nodes), int(pods)))
    return sizes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sizes",
        default=None,
        help="NODESxPODS,... (default 10x100,100x1000, none when --embedded-sizes is given)",
    )
    parser.add_argument(
        "--embedded-sizes",
        default="",
        help="NODESxPODS,... to run podstatus alone on `podstatus serve` (a process of its own)",
    )
    parser.add_argument("--contenders", default="kwok,podstatus")
    parser.add_argument("--hold", type=float, default=0.0, help="seconds to keep all pods up before deleting")
    parser.add_argument("--write", default=None, help="write the results page here (docs/scale.md)")
    parser.add_argument(
        "--max-wait",
        type=float,
        default=None,
        help="seconds to wait for all pods up, and for all gone (default 120 + 0.05 per pod)",
    )
    parser.add_argument(
        "--add",
        action="store_true",
        help="keep the runs of other sizes already in the --write page (its .json twin)",
    )
    parser.add_argument("--workdir", default=None, help="keep logs here (default: a temporary folder)")
    parser.add_argument(
        "--podstatus-provider",
        default="bench.scale.provider:InstantProvider",
        help="--provider for podstatus node ('' for its default simulated timings)",
    )
    parser.add_argument(
        "--podstatus-events",
        choices=PODSTATUS_EVENTS,
        default=DEFAULT_PODSTATUS_EVENTS,
        help="--events for podstatus node (default warning: KWOK writes no Events; "
        "all measures the kubelet's full Event trail)",
    )
    parser.add_argument(
        "--podstatus-kubelet-api",
        choices=("on", "off"),
        default="on",
        help="serve the kubelet API on every node (on, the default) or not (off: what it costs, side by side)",
    )
    parser.add_argument(
        "--scheduled-sizes",
        default="",
        help="NODESxPODS,... to run once more with kube-scheduler placing the pods (start --control-plane)",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s", stream=sys.stderr)
    started = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    load_at_start = machine()
    base = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="podstatus-scale-"))
    names = [n.strip() for n in args.contenders.split(",") if n.strip()]
    results: list[RunResult] = []
    notes: list[tuple[str, str]] = []
    sizes = args.sizes if args.sizes is not None else "" if args.embedded_sizes else "10x100,100x1000"
    plan = [(n, p, False) for n, p in parse_sizes(sizes)]
    if args.scheduled_sizes:
        if control_plane_available():
            plan += [(n, p, True) for n, p in parse_sizes(args.scheduled_sizes)]
        else:
            for nodes, pods in parse_sizes(args.scheduled_sizes):
                for name in names:
                    notes.append(
                        (
                            _label(nodes, pods, True, name),
                            "not run, tests/apiserver/start has no --control-plane here",
                        )
                    )
    for nodes, pods, scheduled in plan:
        for name in names:
            label = _label(nodes, pods, scheduled, name)
            if name == "podstatus" and not PodstatusContender.available():
                notes.append((label, "not run, `podstatus node` is not in this tree"))
                continue
            try:
                contender: Contender = (
                    KwokContender()
                    if name == "kwok"
                    else PodstatusContender(
                        args.podstatus_provider or None,
                        args.podstatus_events,
                        kubelet_api=args.podstatus_kubelet_api == "on",
                    )
                )
            except (RuntimeError, OSError, subprocess.CalledProcessError) as err:
                notes.append((label, f"not run, {err}"))
                continue
            workdir = base / f"{nodes}x{pods}{'-scheduled' if scheduled else ''}-{name}"
            workdir.mkdir(parents=True, exist_ok=True)
            log.info("run: %s (logs in %s)", label, workdir)
            try:
                server = RealApiServer(workdir / "apiserver", control_plane=scheduled)
            except Exception as err:
                log.exception("the API server did not start")
                results.append(RunResult(name, nodes, pods, scheduled=scheduled, note=f"failed: {err}"))
                continue
            try:
                result = run_once(
                    contender,
                    server,
                    nodes,
                    pods,
                    workdir,
                    hold=args.hold,
                    scheduled=scheduled,
                    max_wait=args.max_wait,
                )
            except Exception as err:
                log.exception("run failed")
                result = RunResult(name, nodes, pods, scheduled=scheduled, note=f"failed: {err}")
            finally:
                server.stop()
            results.append(result)
            log.info("result: %s", row(result))
    for nodes, pods in parse_sizes(args.embedded_sizes):
        result, note = run_on_serve(
            nodes, pods, base, hold=args.hold, max_wait=args.max_wait, provider=args.podstatus_provider
        )
        results.append(result)
        if note:
            notes.append((_key(result), note))
    table = markdown_table(COLUMNS, table_rows(results))
    print(table)
    for label, text in notes:
        print(f"{label}: {text}")
    if args.write:
        command = "python -m bench.scale.harness " + " ".join(argv if argv is not None else sys.argv[1:])
        invocation = {
            "command": command.strip(),
            "started": started,
            "commit": git_commit(),
            "machine": load_at_start,
        }
        save(Path(args.write), results, notes, invocation, add=args.add)
    return 0 if all(r.completed for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
