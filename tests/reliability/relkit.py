"""Helpers of the reliability tests: a server-side write observer, a store-backed client for the
node agent's watch, a manager whose setters can be frozen, and the convergence check.

The soak puts the pieces together like this::

    test thread (users: create, gate, delete, recreate)  ──store──┐
    NodeAgent (simulated containers) ──watch via StoreClient──────┤  EmbeddedApiServer
    status manager ──HttpKubeClient──> FaultPlan ──> WriteObserver ──> API logic ──> Store

Only the manager's requests go over HTTP, so only they meet the faults, and
the observer sees every request that reached the API logic.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import msgspec

from podstatus import Pod, PodStatus
from podstatus.conditions import is_terminal_phase
from podstatus.errors import ApiError
from podstatus.patch import (
    POD_MERGE_KEYS,
    PatchError,
    apply_strategic_merge_patch,
    diff_pod_status,
    has_changes,
)
from podstatus.protocols import StatusAcceptance
from podstatus.server.endpoints import Request, Response
from podstatus.server.http import EmbeddedApiServer
from podstatus.server.storage.objects import Stored
from podstatus.server.storage.store import Store
from podstatus.simulator.invariants import Invariant  # the simulator's counter serves here too
from podstatus.statusutil import merge_pod_status

_POD_PATH = re.compile(r"^/api/v1/namespaces/(?P<ns>[^/]+)/pods/(?P<name>[^/]+)(?:/(?P<sub>[^/]+))?/?$")
_decode = msgspec.json.decode

TERMINAL = ("Succeeded", "Failed")

_reports_lock = threading.Lock()
_reports: list[str] = []


def report(line: str) -> None:
    """A line for the end-of-run summary (printed even without ``-s``), and at once with ``-s``."""
    with _reports_lock:
        _reports.append(line)
    print(line)


def reports() -> list[str]:
    with _reports_lock:
        return list(_reports)


# --- invariants ---------------------------------------------------------------------------


def illegal_transitions(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """Containers that left the terminated state although the restart policy forbids it (SPEC 4.2)."""
    spec = before.get("spec") or {}
    policy = spec.get("restartPolicy") or "Always"
    if policy == "Always":
        return []
    sidecars = {c.get("name") for c in spec.get("initContainers") or () if c.get("restartPolicy") == "Always"}
    out: list[str] = []
    for key in ("containerStatuses", "initContainerStatuses"):
        new = {cs.get("name"): cs for cs in (after.get("status") or {}).get(key) or ()}
        for old in (before.get("status") or {}).get(key) or ():
            term = (old.get("state") or {}).get("terminated")
            if not term or old.get("name") in sidecars:
                continue
            if policy == "OnFailure" and term.get("exitCode") != 0:
                continue
            cs = new.get(old.get("name"))
            if cs is not None and not (cs.get("state") or {}).get("terminated"):
                out.append(f"{key}/{old.get('name')} terminated -> {sorted((cs.get('state') or {}).keys())}")
    return out


def _uid_tag(uid: str) -> str:
    # The NodeAgent's container IDs start with the pod UID (without dashes, 24 characters).
    return uid.replace("-", "")[:24]


# --- the observer -------------------------------------------------------------------------


class WriteObserver:
    """Wraps ``server.dispatch`` (install it before the fault plan, so it sits behind it):
    every pod request that reaches the API logic is checked against SPEC sections 4.6 and 7."""

    def __init__(
        self,
        server: EmbeddedApiServer,
        *,
        sync_period: float,
        containers_stopped: Callable[[str], bool],
    ) -> None:
        self.server = server
        self.store: Store = server.store
        self.sync_period = sync_period
        self._containers_stopped = containers_stopped
        self._lock = threading.Lock()
        self.wrong_uid = Invariant("no write to a pod whose UID differs from the status's pod")
        self.unguarded = Invariant("every status write carries the pod's UID as a precondition")
        self.terminal_undone = Invariant("no terminal phase undone")
        self.illegal_transition = Invariant("no illegal container transition")
        self.refused = Invariant("no status write refused as invalid (422)")
        self.early_delete = Invariant("no delete before the handshake of SPEC 4.6")
        self.storm = Invariant("no request storm for pods that are gone")
        self.writes = 0
        self.requests = 0
        self.uid_refusals = 0
        # (namespace, name) -> times of requests made while no such pod existed
        self._gone_requests: dict[tuple[str, str], list[float]] = {}
        self._inner: Callable[[Request], Response] | None = None

    def install(self) -> WriteObserver:
        self._inner = self.server.dispatch
        self.server.dispatch = self
        return self

    def invariants(self) -> list[Invariant]:
        return [
            self.wrong_uid,
            self.unguarded,
            self.terminal_undone,
            self.illegal_transition,
            self.refused,
            self.early_delete,
            self.storm,
        ]

    def violations(self) -> int:
        return sum(i.violations for i in self.invariants())

    def examples(self) -> list[str]:
        return [f"{i.name}: {e}" for i in self.invariants() for e in i.examples]

    def _get(self, ns: str, name: str) -> Stored | None:
        try:
            return self.store.get("pods", ns, name)
        except ApiError:
            return None

    def __call__(self, request: Request) -> Response:
        inner = self._inner
        assert inner is not None
        m = _POD_PATH.match(request.path)
        if m is None:
            return inner(request)
        ns, name, sub = m.group("ns"), m.group("name"), m.group("sub")
        key = (ns, name)
        with self._lock:
            self.requests += 1
        if request.method == "GET":
            if self._get(ns, name) is None:
                with self._lock:
                    self._gone_requests.setdefault(key, []).append(time.monotonic())
            return inner(request)
        # A write: hold the store's lock so that before / after are exactly around this request.
        with self.store._lock:
            before = self._get(ns, name)
            response = inner(request)
            after = self._get(ns, name)
        with self._lock:
            self.writes += 1
            if before is None:
                self._gone_requests.setdefault(key, []).append(time.monotonic())
                return response
            if request.method == "PATCH" and sub == "status":
                self._check_status_patch(key, request, response, before, after)
            elif request.method == "DELETE" and sub is None:
                self._check_delete(key, request, response, before)
        return response

    def _check_status_patch(
        self, key: tuple[str, str], request: Request, response: Response, before: Stored, after: Stored | None
    ) -> None:
        where = f"{key[0]}/{key[1]}"
        patch = _decode(request.body)
        precondition = (patch.get("metadata") or {}).get("uid")
        ok = 200 <= response.status < 300
        if response.status == 409 and precondition and precondition != before.uid:
            self.uid_refusals += 1  # the UID precondition did its job
        self.unguarded.check(bool(precondition), lambda: f"{where}: status patch without a UID precondition")
        try:
            attempted = apply_strategic_merge_patch(before.obj, patch, merge_keys=POD_MERGE_KEYS)
        except PatchError as err:
            problem = str(err)
            self.refused.check(False, lambda: f"{where}: unappliable patch: {problem}")
            return
        old_phase = (before.obj.get("status") or {}).get("phase")
        new_phase = (attempted.get("status") or {}).get("phase")
        if precondition == before.uid:
            self.terminal_undone.check(
                not (old_phase in TERMINAL and new_phase not in TERMINAL),
                lambda: f"{where}: phase {old_phase} -> {new_phase}",
            )
            problems = illegal_transitions(before.obj, attempted)
            self.illegal_transition.check(not problems, lambda: f"{where}: {problems}")
            self.refused.check(
                response.status != 422, lambda: f"{where}: {response.body[:300].decode(errors='replace')}"
            )
        if ok and after is not None:
            tag = _uid_tag(after.uid)
            status = after.obj.get("status") or {}
            foreign = [
                cs.get("containerID")
                for k in ("containerStatuses", "initContainerStatuses")
                for cs in status.get(k) or ()
                if cs.get("containerID") and not str(cs["containerID"]).split("://", 1)[-1].startswith(tag)
            ]
            self.wrong_uid.check(
                after.uid == before.uid and not foreign,
                lambda: f"{where}: pod {after.uid} got containers of another pod: {foreign}",
            )

    def _check_delete(
        self, key: tuple[str, str], request: Request, response: Response, before: Stored
    ) -> None:
        where = f"{key[0]}/{key[1]}"
        options = _decode(request.body) if request.body.strip() else {}
        grace = options.get("gracePeriodSeconds", request.query.get("gracePeriodSeconds"))
        uid = (options.get("preconditions") or {}).get("uid")
        phase = (before.obj.get("status") or {}).get("phase")
        marked = bool(before.metadata.get("deletionTimestamp"))
        stopped = self._containers_stopped(before.uid)
        if uid and uid != before.uid:
            # Meant for an earlier pod of this name (deleted and recreated since it was read):
            # the UID precondition must refuse it, and then nothing was deleted.
            self.wrong_uid.check(
                response.status == 409, lambda: f"{where}: delete for pod {uid} reached pod {before.uid}"
            )
            self.uid_refusals += 1
            return
        self.early_delete.check(
            str(grace) == "0" and uid == before.uid and marked and phase in TERMINAL and stopped,
            lambda: (
                f"{where}: delete grace={grace} uid={uid} (pod {before.uid}) deletionTimestamp={marked} "
                f"phase={phase} containersStopped={stopped} -> {response.status}"
            ),
        )

    def check_storm(self) -> dict[str, int]:
        """Requests for pods that did not exist: at most a few per full sync period, per pod."""
        with self._lock:
            worst = 0
            for key, times in self._gone_requests.items():
                span = times[-1] - times[0]
                allowed = 3 + 3 * int(span / self.sync_period + 1)
                worst = max(worst, len(times))
                self.storm.check(
                    len(times) <= allowed,
                    lambda key=key, times=times, allowed=allowed: (  # type: ignore[misc]
                        f"{key[0]}/{key[1]}: {len(times)} requests in {times[-1] - times[0]:.1f}s "
                        f"(allowed {allowed})"
                    ),
                )
            return {"gone_pods_asked": len(self._gone_requests), "most_requests_for_a_gone_pod": worst}


# --- the node agent's side door to the store (no HTTP, no faults) ------------------------------


class StoreClient:
    """What ``NodeAgent`` needs for its list/watch and node registration, straight from the store."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def get_pod(self, namespace: str, name: str) -> Pod:
        pod = self.store.get("pods", namespace, name).pod
        assert pod is not None
        return pod

    def patch_pod_status(self, namespace: str, name: str, patch: bytes, **kwargs: Any) -> Pod:
        pod = self.store.patch("pods", namespace, name, patch, subresource="status").pod
        assert pod is not None
        return pod

    def delete_pod(
        self, namespace: str, name: str, *, grace_period_seconds: int | None, uid: str | None
    ) -> None:
        self.store.delete("pods", namespace, name, grace_period_seconds=grace_period_seconds, uid=uid)

    def create_pod(self, pod: Any, namespace: str | None = None) -> Pod:
        body = pod.to_dict() if isinstance(pod, Pod) else pod
        created = self.store.create("pods", namespace or body["metadata"].get("namespace") or "default", body)
        assert created.pod is not None
        return created.pod

    def create_node(self, node: dict[str, Any]) -> dict[str, Any]:
        return _decode(self.store.create("nodes", None, node).raw)

    def list_pods(self, namespace: str | None = None, **kwargs: Any) -> tuple[list[Pod], str]:
        items, rv = self.store.list(
            "pods",
            namespace,
            field_selector=kwargs.get("field_selector"),
            label_selector=kwargs.get("label_selector"),
        )
        return [s.pod for s in items if s.pod is not None], str(rv)

    def watch_pods(self, namespace: str | None = None, **kwargs: Any) -> Iterator[tuple[str, Pod]]:
        stop: threading.Event = kwargs.get("stop_event") or threading.Event()
        deadline = time.monotonic() + float(kwargs.get("timeout_seconds") or 30)
        watch = self.store.watch(
            "pods",
            namespace,
            resource_version=kwargs.get("resource_version"),
            field_selector=kwargs.get("field_selector"),
            label_selector=kwargs.get("label_selector"),
        )
        with watch:
            while not stop.is_set() and time.monotonic() < deadline:
                event = watch.next(timeout=0.1)
                if event is None:
                    if watch.closed:
                        return
                    continue
                if event.stored.pod is not None:
                    yield event.type, event.stored.pod


class FreezableManager:
    """A manager proxy whose status setters can be switched off (the node "goes quiet")."""

    SETTERS = (
        "set_pod_status",
        "accept_pod_status",
        "set_container_readiness",
        "set_container_startup",
        "terminate_pod",
    )

    def __init__(self, manager: Any) -> None:
        self._manager = manager
        self.frozen = threading.Event()
        self.calls = 0

    def __getattr__(self, name: str) -> Any:
        target = getattr(self._manager, name)
        if name not in self.SETTERS:
            return target

        def setter(*args: Any, **kwargs: Any) -> Any:
            if self.frozen.is_set():
                if name == "accept_pod_status":  # ignored: the status cached stays, unchanged
                    return StatusAcceptance(self._manager.get_pod_status(args[0].uid), False)
                return None
            self.calls += 1
            return target(*args, **kwargs)

        return setter


# --- convergence ------------------------------------------------------------------------------


def unsynced_pods(manager: Any, pods: Any, store: Store, could_run: Callable[[Pod], bool]) -> list[str]:
    """Pods whose server status differs from what the manager would write (SPEC 4.7 merge applied)."""
    out: list[str] = []
    now = datetime.now(UTC).replace(microsecond=0)
    for uid in manager.cached_uids():
        cached: PodStatus | None = manager.get_pod_status(uid)
        pod = pods.get_pod_by_uid(uid)
        if cached is None or pod is None:
            continue
        try:
            stored = store.get("pods", pod.namespace, pod.name)
        except ApiError:
            continue  # gone: nothing to compare
        if stored.uid != uid or stored.pod is None:
            continue  # recreated: the old status must not go there
        server = stored.pod
        merged = merge_pod_status(server.status, cached, could_run(server), now)
        patch = diff_pod_status(server.status.to_dict(), merged.to_dict(), uid)
        if has_changes(patch):
            out.append(f"{pod.key()}: {json.dumps(patch)[:300]}")
    return out


def unfinished_handshakes(store: Store, containers_stopped: Callable[[str], bool]) -> list[str]:
    """Pods marked for deletion, terminal on the server, with their containers stopped, but not deleted."""
    items, _ = store.list("pods")
    return [
        f"{s.metadata.get('namespace')}/{s.name}"
        for s in items
        if s.metadata.get("deletionTimestamp")
        and (s.obj.get("status") or {}).get("phase") in TERMINAL
        and containers_stopped(s.uid)
    ]


def phase_counts(store: Store) -> dict[str, int]:
    items, _ = store.list("pods")
    out: dict[str, int] = {}
    for s in items:
        phase = (s.obj.get("status") or {}).get("phase") or "Pending"
        out[phase] = out.get(phase, 0) + 1
    return out


def is_terminal(phase: str | None) -> bool:
    return is_terminal_phase(phase)
