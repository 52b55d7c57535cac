"""Helpers of the control-plane suite: admin API access, kubectl, waiting, agent processes.

The suite runs etcd + kube-apiserver + kube-controller-manager + kube-scheduler
(``tests/apiserver/start --control-plane``) and ``podstatus node`` as subprocesses, and
reads every result from the API as a user would: the official ``kubernetes`` client
for polling, ``kubectl`` (the pinned one in the venv) where a user would type it.
"""

from __future__ import annotations

import functools
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import kubernetes
from kubernetes.client.rest import ApiException

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
BEHAVIOUR = "podstatus.io/behaviour"
# The agent's identity, as deploy/ declares it.
AGENT_NAMESPACE = "podstatus-system"
AGENT_SA = "podstatus-node"
AGENT_USER = f"system:serviceaccount:{AGENT_NAMESPACE}:{AGENT_SA}"
# Node names: the stable node is never stopped (the whole-session watcher reads it);
# the flaky one is paused and killed by the failure cases.
STABLE_NODE = "cp-stable-1"
FLAKY_NODE = "cp-flaky-1"
# Shortened from the upstream 50 s to keep the suite's wall time down (the agent renews
# its Lease every 10 s, so 30 s still tolerates two late renewals).
NODE_MONITOR_GRACE = 30
# A watcher sample this much later than its interval means the machine was paused, not the agent.
PAUSE_SLACK = 10.0
NODE_MONITOR_PERIOD = 2
GATE = "example.com/load-balancer-ready"
# `podstatus node` registers its nodes with this NoSchedule taint (as virtual-kubelet does), so
# only pods that tolerate it land there; every workload of the suite tolerates it.
VIRTUAL_NODE_TAINT = "podstatus.io/virtual-node"
TOLERATIONS = [{"key": VIRTUAL_NODE_TAINT, "operator": "Exists", "effect": "NoSchedule"}]


def bin_path(name: str) -> str:
    """A console script of the venv this interpreter belongs to (kubectl, podstatus)."""
    candidate = Path(sys.executable).parent / name
    return str(candidate) if candidate.exists() else name


def podstatus_bin() -> str:
    """The ``podstatus`` command the agents run: the venv's, or $PODSTATUS_BIN (another build of it)."""
    return os.environ.get("PODSTATUS_BIN") or bin_path("podstatus")


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def now() -> datetime:
    return datetime.now(UTC)


def parse_time(value: Any) -> datetime | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    text = str(value).replace("Z", "+00:00")
    return datetime.fromisoformat(text)


def dump(obj: Any, limit: int = 6000) -> str:
    """An object's state for a failure message (JSON, trimmed)."""
    text = json.dumps(obj, indent=1, default=str, sort_keys=True)
    return text if len(text) <= limit else text[:limit] + f"\n... ({len(text) - limit} more chars)"


def wait_until(
    check: Callable[[], Any],
    *,
    timeout: float,
    what: str,
    state: Callable[[], Any] | None = None,
    interval: float = 0.5,
) -> Any:
    """Poll ``check`` until it returns something truthy; on timeout fail with ``state()``."""
    deadline = time.monotonic() + timeout
    last_error: Exception | None = None
    while True:
        try:
            result = check()
            if result:
                return result
            last_error = None
        except ApiException as err:  # not there yet (404) and the like: keep polling
            last_error = err
        if time.monotonic() >= deadline:
            detail = ""
            if state is not None:
                try:
                    detail = dump(state())
                except Exception as err:  # the state itself may be gone
                    detail = f"<state unavailable: {err}>"
            tail = f"\nlast error: {last_error}" if last_error else ""
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}\nstate: {detail}{tail}")
        time.sleep(interval)


def when_condition(fetch: Callable[[], dict[str, Any]], kind: str, status: str = "True") -> Callable[[], Any]:
    """A check for :func:`wait_until`: the fetched object once its condition ``kind`` has ``status``."""

    def check() -> dict[str, Any] | None:
        obj = fetch()
        return obj if condition_status(obj, kind) == status else None

    return check


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any] | None:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == kind:
            return dict(c)
    return None


def condition_status(obj: dict[str, Any], kind: str) -> str | None:
    c = condition(obj, kind)
    return None if c is None else str(c.get("status"))


class Cluster:
    """Admin access to the control plane through the official client; objects come back as dicts."""

    def __init__(self, kubeconfig: str) -> None:
        self.kubeconfig = kubeconfig
        self.api = kubernetes.config.new_client_from_config(config_file=kubeconfig)
        self.core = kubernetes.client.CoreV1Api(self.api)
        self.apps = kubernetes.client.AppsV1Api(self.api)
        self.batch = kubernetes.client.BatchV1Api(self.api)
        self.discovery = kubernetes.client.DiscoveryV1Api(self.api)
        self.coordination = kubernetes.client.CoordinationV1Api(self.api)

    def close(self) -> None:
        self.api.close()

    def d(self, obj: Any) -> dict[str, Any]:
        result: dict[str, Any] = self.api.sanitize_for_serialization(obj)
        return result

    # --- reads as dicts -------------------------------------------------------------
    def node(self, name: str) -> dict[str, Any]:
        return self.d(self.core.read_node(name))

    def lease(self, name: str) -> dict[str, Any]:
        return self.d(self.coordination.read_namespaced_lease(name, "kube-node-lease"))

    def pod(self, ns: str, name: str) -> dict[str, Any]:
        return self.d(self.core.read_namespaced_pod(name, ns))

    def pods(self, ns: str, selector: str | None = None) -> list[dict[str, Any]]:
        items = self.core.list_namespaced_pod(ns, label_selector=selector).items
        return [self.d(p) for p in items]

    def deployment(self, ns: str, name: str) -> dict[str, Any]:
        return self.d(self.apps.read_namespaced_deployment(name, ns))

    def job(self, ns: str, name: str) -> dict[str, Any]:
        return self.d(self.batch.read_namespaced_job(name, ns))

    def endpoint_slices(self, ns: str, service: str) -> list[dict[str, Any]]:
        items = self.discovery.list_namespaced_endpoint_slice(
            ns, label_selector=f"kubernetes.io/service-name={service}"
        ).items
        return [self.d(s) for s in items]

    def events_for(self, ns: str, name: str) -> list[dict[str, Any]]:
        items = self.core.list_namespaced_event(ns, field_selector=f"involvedObject.name={name}").items
        return [self.d(e) for e in items]

    def pod_exists(self, ns: str, name: str) -> bool:
        try:
            self.core.read_namespaced_pod(name, ns)
        except ApiException as err:
            if err.status == 404:
                return False
            raise
        return True

    # --- writes -------------------------------------------------------------------------
    def set_pod_condition(self, ns: str, name: str, kind: str, status: str) -> None:
        """What another controller does for a readiness gate: patch one condition into pods/status."""
        stamp = now().strftime("%Y-%m-%dT%H:%M:%SZ")
        body = {"status": {"conditions": [{"type": kind, "status": status, "lastTransitionTime": stamp}]}}
        self.core.patch_namespaced_pod_status(name, ns, body)

    def create_namespace(self, name: str) -> None:
        self.core.create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
        # ServiceAccount admission rejects pods until the controller made the "default" account.
        wait_until(
            lambda: self.core.read_namespaced_service_account("default", name),
            timeout=60,
            what=f"ServiceAccount {name}/default",
        )


def kubectl_run(kubeconfig: str, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run the pinned kubectl (the venv's, v1.37) with this kubeconfig."""
    return subprocess.run(
        [bin_path("kubectl"), "--kubeconfig", kubeconfig, *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def kubectl(kubeconfig: str, *args: str, stdin: str | None = None, check: bool = True) -> str:
    """Run the pinned kubectl; answer stdout (fail with stderr when ``check`` and it exits non-zero)."""
    proc = kubectl_run(kubeconfig, *args, stdin=stdin)
    if check and proc.returncode != 0:
        raise AssertionError(
            f"kubectl {' '.join(args)} exited {proc.returncode}:\n{proc.stderr}{proc.stdout}"
        )
    return proc.stdout


def pod_manifest(
    name: str,
    *,
    behaviour: str = "serve",
    node: str | None = None,
    gates: Iterable[str] = (),
    restart_policy: str = "Always",
    grace: int = 2,
    labels: dict[str, str] | None = None,
    image: str = "registry.example.com/web/app:1.0",
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": [{"name": "app", "image": image}],
        "restartPolicy": restart_policy,
        "terminationGracePeriodSeconds": grace,
        "tolerations": TOLERATIONS,
    }
    if node:
        spec["nodeName"] = node
    if gates:
        spec["readinessGates"] = [{"conditionType": g} for g in gates]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels or {"app": name}, "annotations": {BEHAVIOUR: behaviour}},
        "spec": spec,
    }


def template(
    labels: dict[str, str],
    *,
    behaviour: str,
    restart_policy: str = "Always",
    image: str = "registry.example.com/web/app:1.0",
    gates: Iterable[str] = (),
) -> dict[str, Any]:
    """A pod template for a Deployment or Job; the simulated containers follow ``behaviour``."""
    spec: dict[str, Any] = {
        "containers": [{"name": "app", "image": image}],
        "restartPolicy": restart_policy,
        "terminationGracePeriodSeconds": 2,
        "tolerations": TOLERATIONS,
    }
    if gates:
        spec["readinessGates"] = [{"conditionType": g} for g in gates]
    return {"metadata": {"labels": labels, "annotations": {BEHAVIOUR: behaviour}}, "spec": spec}


def pod_ready(pod: dict[str, Any]) -> bool:
    return condition_status(pod, "Ready") == "True"


def restart_counts(pod: dict[str, Any]) -> dict[str, int]:
    return {
        c["name"]: int(c.get("restartCount") or 0)
        for c in (pod.get("status") or {}).get("containerStatuses") or []
    }


# The CA kube-apiserver's kubelet client certificate is signed by (the fixture's pki/ca.crt); set by
# conftest once the control plane runs. Every agent trusts it, as a kubelet trusts its --client-ca-file.
KUBELET_CLIENT_CA: list[Path] = []


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Agent:
    """One ``podstatus node`` process serving one virtual node, logging to a file (appended over restarts).

    Its kubelet API listens on a port of its own (kept over restarts, so the Node's
    daemonEndpoints stay right): several agents on one host cannot all have 10250.
    """

    def __init__(self, name: str, kubeconfig: str, log_path: Path, extra_args: Iterable[str] = ()) -> None:
        self.name = name
        self.kubeconfig = kubeconfig
        self.log_path = log_path
        self.extra_args = list(extra_args)
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self.kubelet_port: int | None = None
        if "--kubelet-port" not in self.extra_args and agent_supports("--kubelet-port"):
            self.kubelet_port = free_port()
            self.extra_args += ["--kubelet-port", str(self.kubelet_port)]
            if KUBELET_CLIENT_CA:
                self.extra_args += ["--kubelet-client-ca", str(KUBELET_CLIENT_CA[0])]

    def command(self, *, take_over: bool = False) -> list[str]:
        cmd = [
            podstatus_bin(),
            "node",
            "--kubeconfig",
            self.kubeconfig,
            "--name",
            self.name,
            # Off unless a test asks (extra_args): a fixed port 10250 would clash between tests.
            *(
                []
                if any(a.startswith("--kubelet-port") for a in self.extra_args)
                else ["--kubelet-port", "0"]
            ),
            *self.extra_args,
        ]
        if take_over:
            cmd.append("--take-over")
        return cmd

    def start(self, *, take_over: bool = False) -> None:
        assert self.proc is None or self.proc.poll() is not None, "agent already running"
        self.starts += 1
        with self.log_path.open("ab") as log:
            log.write(f"\n==== start {self.starts}: {' '.join(self.command(take_over=take_over))}\n".encode())
            log.flush()
            env = dict(os.environ, PYTHONUNBUFFERED="1")
            self.proc = subprocess.Popen(
                self.command(take_over=take_over),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
            )

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def signal(self, sig: signal.Signals) -> None:
        assert self.proc is not None and self.proc.poll() is None, f"agent {self.name} is not running"
        self.proc.send_signal(sig)

    def kill(self) -> None:
        self.signal(signal.SIGKILL)
        assert self.proc is not None
        self.proc.wait(timeout=30)

    def stop(self, timeout: float = 30) -> int | None:
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)  # a paused agent cannot handle SIGTERM
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        return self.proc.returncode

    def log_text(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace") if self.log_path.exists() else ""


class Agents:
    """The suite's two agents: ``stable`` is never disturbed, ``flaky`` is paused and killed."""

    def __init__(self, stable: Agent, flaky: Agent) -> None:
        self.stable = stable
        self.flaky = flaky

    def all(self) -> list[Agent]:
        return [self.stable, self.flaky]


def agent_supports(flag: str) -> bool:
    """Whether ``podstatus node --help`` lists ``flag``."""
    return flag in _node_help()


@functools.cache
def _node_help() -> str:
    proc = subprocess.run(
        [podstatus_bin(), "node", "--help"], capture_output=True, text=True, timeout=60, check=False
    )
    return proc.stdout


def is_condition_taint(taint: dict[str, Any]) -> bool:
    """A taint the node lifecycle controller sets for a node condition (not-ready, unreachable, ...)."""
    return str(taint.get("key", "")).startswith("node.kubernetes.io/")


class NodeWatcher:
    """Polls one node and its Lease for the whole session and records every moment it was not healthy.

    Healthy: condition Ready is True, no taint was added to the ones the node registered with
    (the first sample's), and the Lease was renewed within the controller's grace period.
    """

    def __init__(self, cluster: Cluster, node: str, *, interval: float = 2.0) -> None:
        self.cluster = cluster
        self.node = node
        self.interval = interval
        self.started = time.monotonic()
        self.samples = 0
        self.renewals: set[str] = set()
        self.max_lease_age = 0.0
        self.violations: list[str] = []
        self.baseline_taints: list[dict[str, Any]] | None = None
        # Spans (start, end) when the watcher itself did not run for far longer than its interval:
        # the whole machine was paused (a VM snapshot shows as "crng reseeded due to virtual machine
        # fork" in dmesg), so every clock jumped and no process, agent or not, could renew anything.
        self.pauses: list[tuple[datetime, datetime]] = []
        self._last_sample: datetime | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"watch-{node}", daemon=True)

    def start(self) -> None:
        self.started = time.monotonic()
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.sample()
            except Exception as err:  # one failed read is recorded, not fatal to the watcher
                self.violations.append(f"{now().isoformat()} read failed: {err}")
            self._stop.wait(self.interval)

    def paused_between(self, start: datetime, end: datetime) -> float:
        """Seconds of ``pauses`` within [start, end]."""
        return sum(max(0.0, (min(end, b) - max(start, a)).total_seconds()) for a, b in self.pauses)

    def sample(self) -> None:
        begun = now()
        if self._last_sample is not None:
            late = (begun - self._last_sample).total_seconds() - self.interval
            if late > PAUSE_SLACK:
                self.pauses.append((self._last_sample, begun))
        self._last_sample = begun
        node = self.cluster.node(self.node)
        lease = self.cluster.lease(self.node)
        stamp = now()
        self.samples += 1
        ready = condition(node, "Ready")
        if ready is None or ready.get("status") != "True":
            self.violations.append(f"{stamp.isoformat()} Ready={dump(ready, 400)}")
        taints = (node.get("spec") or {}).get("taints") or []
        if self.baseline_taints is None:
            self.baseline_taints = [t for t in taints if not is_condition_taint(t)]
        added = [t for t in taints if is_condition_taint(t) or t not in self.baseline_taints]
        if added:
            self.violations.append(f"{stamp.isoformat()} taints added: {added}")
        renew = parse_time((lease.get("spec") or {}).get("renewTime"))
        if renew is None:
            self.violations.append(f"{stamp.isoformat()} lease has no renewTime")
            return
        self.renewals.add(renew.isoformat())
        age = (stamp - renew).total_seconds()
        self.max_lease_age = max(self.max_lease_age, age)
        # Time the machine stood still is not time the agent failed to renew in.
        awake = age - self.paused_between(renew, stamp)
        if awake > NODE_MONITOR_GRACE:
            self.violations.append(f"{stamp.isoformat()} lease renewed {age:.1f} s ago")


class PodRecorder:
    """Watches a namespace's pods and keeps every state it saw, for 'never went back' checks."""

    def __init__(self, cluster: Cluster, ns: str) -> None:
        self.cluster = cluster
        self.ns = ns
        self.seen: list[tuple[str, str, dict[str, Any]]] = []  # (event type, pod name, pod)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"record-{ns}", daemon=True)

    def __enter__(self) -> PodRecorder:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=15)

    def _run(self) -> None:
        w = kubernetes.watch.Watch()
        rv = None
        while not self._stop.is_set():
            try:
                stream: Iterator[dict[str, Any]] = w.stream(
                    self.cluster.core.list_namespaced_pod, self.ns, resource_version=rv, timeout_seconds=5
                )
                for event in stream:
                    pod = self.cluster.d(event["object"])
                    rv = pod["metadata"].get("resourceVersion", rv)
                    self.seen.append((event["type"], pod["metadata"]["name"], pod))
                    if self._stop.is_set():
                        break
            except ApiException as err:
                if err.status == 410:
                    rv = None
                else:
                    time.sleep(0.5)
            except Exception:  # connection hiccups: start over from the last version
                time.sleep(0.5)

    def states(self, name: str) -> list[dict[str, Any]]:
        return [pod for _, n, pod in self.seen if n == name]


# --- the apiserver's audit log (Metadata level, the agent's ServiceAccount only) ----------


def agent_audit_events(path: Any, *, include_kubectl: bool = False) -> list[dict[str, Any]]:
    """The audit events of the agent's user; without ``include_kubectl``, only the agents' own requests.

    test_cp_rbac.py sends a forbidden request with the agent's token through kubectl, to
    prove a denial shows up; those requests are told apart by their user agent.
    """
    events = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line:
                events.append(json.loads(line))
    return [
        e
        for e in events
        if (e.get("user") or {}).get("username") == AGENT_USER
        and (include_kubectl or not str(e.get("userAgent", "")).startswith("kubectl"))
    ]


def denied_by_authorization(e: dict[str, Any]) -> bool:
    return (e.get("annotations") or {}).get("authorization.k8s.io/decision") == "forbid"


def namespace_terminating(e: dict[str, Any]) -> bool:
    """A 403 of NamespaceLifecycle admission: an Event for a pod whose namespace is being deleted.

    Every kubelet meets these when a namespace goes away under running pods; it is not a
    permission the role lacks (authorization allowed the request).
    """
    status = e.get("responseStatus") or {}
    causes = (status.get("details") or {}).get("causes") or []
    return not denied_by_authorization(e) and any(c.get("reason") == "NamespaceTerminating" for c in causes)
