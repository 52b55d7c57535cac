"""The differential run: podstatus's Manager and the upstream status manager, side by side.

A sequence of operations (JSON objects, the input language of tests/statusoracle/main.go) runs
through both, one operation at a time: the Go oracle (the real ``pkg/kubelet/status`` manager of
k8s.io/kubernetes v1.37.2, a fake clientset, the kubelet's basic pod manager) and podstatus's
Manager in kubelet mode (default options) with a :class:`FakeKubeClient` and a
:class:`BasicPodManager`. After each operation both report the requests they sent (verb, and the
patch body, parsed) and the cached status of every (non-mirror) pod UID seen so far;
:func:`compare` says where they differ. Times the managers take from the clock are "now" on both
sides (:func:`canonical`), a pass's per-pod request chains are compared as a set (upstream walks a
Go map), and :func:`first_difference` counts a difference only when three runs show it (a run
across a second boundary can make one side send a time the other does not).

The allowed differences (SPEC names them; docs/design.md lists them) are kept out of the
sequences by the generator rather than waved through in the comparison:

- *terminal phase kept in the manager* (SPEC 4.2.3): once a pod's status had a terminal phase, the
  generator only gives it terminal phases again (until it is recreated), so the manager never
  sees a terminal phase go back;
- *deletion criterion* (SPEC 4.6, ``pod_resources_are_reclaimed``): the harness's deletion safety
  answers what upstream's ``podIsFinished`` is (the pod's status came from ``terminate_pod`` and
  is still cached);
- *a DELETE answered NotFound drops the cached status* (SPEC 4.5.6; upstream keeps it): no 404 is
  injected on DELETE;
- *old status of a pod that is not static* (SPEC 4.2.1: its own; upstream takes a mirror pod of
  its name when the pod manager holds one): removing a static pod from the node removes every
  mirror pod of it the node may hold, so no stale mirror pod outlives it;
- *fast-path options* (SPEC 6): not used; the Manager runs with the kubelet's defaults.

``python tests/statusoracle_harness.py --help``: explore or replay from the command line.
"""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

import podstatus
from podstatus.clients.fake import FakeKubeClient
from podstatus.errors import error_class_for_code
from podstatus.podmanager import is_mirror_pod

NS = "oracle"
# Times the sequences carry: 2020. Times a manager takes from its clock are later, and both
# sides' are written as "<now>" before comparing.
TIMES = ("2020-01-01T00:00:00Z", "2020-01-01T00:00:05Z", "2020-01-01T00:01:00Z")
SUBSECOND_TIMES = ("2020-01-01T00:00:00.250000Z", "2020-01-01T00:00:05.750000Z")
_TIMESTAMP = re.compile(r"^(\d{4})-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$")
SOURCE_ANNOTATION = "kubernetes.io/config.source"
HASH_ANNOTATION = "kubernetes.io/config.hash"
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
GATE = "example.com/gate"

# Pod spec templates: container names are not in alphabetical order, so sorting shows.
SPECS: dict[str, dict[str, Any]] = {
    "plain": {
        "restartPolicy": "Always",
        "containers": [{"name": "b", "image": "i"}, {"name": "a", "image": "i"}],
    },
    "job": {"restartPolicy": "Never", "containers": [{"name": "a", "image": "i"}]},
    "onfailure": {
        "restartPolicy": "OnFailure",
        "initContainers": [{"name": "init", "image": "i"}],
        "containers": [{"name": "b", "image": "i"}, {"name": "a", "image": "i"}],
    },
    "sidecar": {
        "restartPolicy": "Always",
        "initContainers": [{"name": "side", "image": "i", "restartPolicy": "Always"}],
        "containers": [{"name": "a", "image": "i"}],
        "readinessGates": [{"conditionType": GATE}],
    },
}
OWNED = ("PodScheduled", "PodReadyToStartContainers", "Initialized", "ContainersReady", "Ready")


@dataclass(frozen=True)
class Features:
    """What the generator may use. Each flag names a kind of difference podstatus had with v1.37
    before issue 21's manager (docs/status-oracle.md); a flag stays off while its difference is
    known and not fixed, so the random runs find other things.
    """

    # metadata.generation on pods (observedGeneration, KEP-5067).
    generation: bool = False
    # The resize-condition methods (KEP-1287).
    resize: bool = False
    # Sub-second times on the pod objects and statuses given.
    subsecond: bool = False
    # DisruptionTarget in statuses and on the server.
    disruption: bool = False
    # Statuses whose kubelet-owned condition set varies (not always all five).
    varied_conditions: bool = False
    # resourceClaimStatuses set on the server.
    claims: bool = False
    # Ephemeral container statuses.
    ephemeral: bool = False
    # The node's pod manager loses a static pod's mirror pod or learns a new one (a new UID): the
    # cached status's API version is then kept under another UID.
    mirror_changes: bool = False
    # A static pod removed from the pod manager before its mirror pod.
    static_removal_window: bool = False


ALL_FEATURES = Features(**{name: True for name in Features.__dataclass_fields__})


# --- the two sides ------------------------------------------------------------------------


class GoOracle:
    """The Go oracle as a subprocess, one JSON line in and one out per operation."""

    def __init__(self, binary: Path) -> None:
        self._proc = subprocess.Popen(
            [str(binary)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            bufsize=1,
        )

    def step(self, op: dict[str, Any]) -> dict[str, Any]:
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._proc.stdin.write(json.dumps(op) + "\n")
        self._proc.stdin.flush()
        line = self._proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the Go oracle exited (code {self._proc.poll()}) on {op}")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def reset(self) -> None:
        self.step({"op": "reset"})

    def close(self) -> None:
        if self._proc.stdin is not None:
            self._proc.stdin.close()
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        if self._proc.stdout is not None:
            self._proc.stdout.close()


class _Safety:
    """Deletion safety with upstream's answers: containers may run until told otherwise; resources
    are reclaimed once the pod's cached status came from ``terminate_pod`` (upstream's
    ``podIsFinished``), which the harness tracks in ``finished``."""

    def __init__(self) -> None:
        self.stopped: set[tuple[str, str]] = set()
        self.finished: set[str] = set()

    def pod_could_have_running_containers(self, pod: podstatus.Pod) -> bool:
        return (pod.namespace, pod.name) not in self.stopped

    def pod_resources_are_reclaimed(self, pod: podstatus.Pod, status: podstatus.PodStatus) -> bool:
        return pod.uid in self.finished


class PySide:
    """podstatus's Manager, kubelet mode, with the same world as the oracle's."""

    def __init__(self) -> None:
        self.client = FakeKubeClient()
        self.pods = podstatus.BasicPodManager()
        self.safety = _Safety()
        self.manager = podstatus.new_manager(self.client, self.pods, self.safety)
        self.seen: set[str] = set()
        self.last_pod: dict[str, podstatus.Pod] = {}
        self.failures: dict[tuple[str, str], list[int]] = {}
        self.client.before_request(self._inject)

    def _inject(self, verb: str, namespace: str, name: str) -> None:
        codes = self.failures.get((verb, name))
        if codes:
            raise error_class_for_code(codes.pop(0))("injected")

    def _pod(self, uid: str) -> podstatus.Pod:
        pod = self.pods.get_pod_by_uid(uid)
        return pod if pod is not None else self.last_pod[uid]

    def _remember(self, pod: podstatus.Pod) -> None:
        # Statuses are reported for the node's own UIDs (a mirror pod's is its static pod's).
        if not is_mirror_pod(pod):
            self.seen.add(pod.uid)
        self.last_pod[pod.uid] = pod

    def _learn(self, pod: podstatus.Pod) -> None:
        """As the kubelet's pod sources do: a pod of the same name (and kind) with another UID was
        deleted first."""
        if is_mirror_pod(pod):
            held = self.pods.get_mirror_pod_by_pod(pod)
        else:
            held = self.pods.get_pod_by_name(pod.namespace, pod.name)
        if held is not None and held.uid != pod.uid:
            self.pods.remove_pod(held)
        self.pods.update_pod(pod)

    def step(self, op: dict[str, Any]) -> dict[str, Any]:
        ret = self._apply(op)
        for uid in list(self.safety.finished):
            if self.manager.get_pod_status(uid) is None:
                self.safety.finished.discard(uid)
        requests = [_py_request(r) for r in self.client.requests]
        self.client.clear_requests()
        statuses: dict[str, Any] = {}
        resize: dict[str, Any] = {}
        for uid in sorted(self.seen):
            status = self.manager.get_pod_status(uid)
            statuses[uid] = status.to_dict() if status is not None else None
            getter = getattr(self.manager, "get_pod_resize_conditions", None)
            if getter is not None:
                conditions = getter(uid)
                if conditions:
                    resize[uid] = [c.to_dict() for c in conditions]
        answer: dict[str, Any] = {"requests": requests, "ret": ret, "statuses": statuses}
        if resize:
            answer["resize"] = resize
        return answer

    def _apply(self, op: dict[str, Any]) -> Any:
        kind = op["op"]
        m: Any = self.manager
        if kind in ("add_pod", "update_pod"):
            pod = podstatus.Pod.from_dict(op["pod"])
            self._remember(pod)
            if op.get("server", True):
                self.client.put_pod(op["pod"])
            if op.get("node", True):
                self._learn(pod)
            return None
        if kind == "remove_pod":
            if op.get("server", True):
                self.client.remove(op["namespace"], op["name"])
            if op.get("node", True) and op["uid"] in self.last_pod:
                # Only a pod the pod manager holds: the kubelet's sources remove what they added.
                given = self.last_pod[op["uid"]]
                if is_mirror_pod(given):
                    held = self.pods.get_mirror_pod_by_pod(given)
                else:
                    held = self.pods.get_pod_by_name(given.namespace, given.name)
                if held is not None and held.uid == given.uid:
                    self.pods.remove_pod(held)
            return None
        if kind == "watch":
            served = self.client.pod(op["namespace"], op["name"])
            if served is not None:
                self._remember(served)
                self._learn(served)
            return None
        if kind == "api_update":
            return self._api_update(op)
        if kind == "set_pod_status":
            self.manager.set_pod_status(self._pod(op["uid"]), podstatus.PodStatus.from_dict(op["status"]))
            return None
        if kind == "set_container_readiness":
            self.manager.set_container_readiness(op["uid"], op["container_id"], op.get("value", False))
            return None
        if kind == "set_container_startup":
            self.manager.set_container_startup(op["uid"], op["container_id"], op.get("value", False))
            return None
        if kind == "terminate_pod":
            before = self.manager.get_status_version(op["uid"])
            self.manager.terminate_pod(self._pod(op["uid"]))
            if self.manager.get_status_version(op["uid"]) > before:
                self.safety.finished.add(op["uid"])
            return None
        if kind == "remove_orphaned_statuses":
            self.manager.remove_orphaned_statuses(op.get("uids") or [])
            return None
        if kind == "sync":
            return self.manager.sync_batch(all=op.get("all", False))
        if kind == "fail":
            self.failures.setdefault((op["verb"], op["name"]), []).append(op["code"])
            return None
        if kind == "set_could_have_running":
            key = (op["namespace"], op["name"])
            if op.get("value", False):
                self.safety.stopped.discard(key)
            else:
                self.safety.stopped.add(key)
            return None
        if kind in RESIZE_OPS and not hasattr(m, "set_pod_resize_pending_condition"):
            raise NotImplementedError("podstatus's Manager has no resize-condition methods yet (issue 21)")
        if kind == "set_resize_pending":
            return m.set_pod_resize_pending_condition(
                op["uid"], op.get("reason", ""), op.get("message", ""), op.get("generation", 0)
            )
        if kind == "set_resize_in_progress":
            return list(
                m.set_pod_resize_in_progress_condition(
                    op["uid"], op.get("reason", ""), op.get("message", ""), op.get("generation", 0)
                )
            )
        if kind == "clear_resize_pending":
            m.clear_pod_resize_pending_condition(op["uid"])
            return None
        if kind == "clear_resize_in_progress":
            return list(m.clear_pod_resize_in_progress_condition(op["uid"]))
        if kind == "backfill_resize":
            m.backfill_pod_resize_conditions(
                [self._pod(u) for u in op.get("uids") or [] if u in self.last_pod]
            )
            return None
        if kind == "resize_state":
            return {
                "deferred": m.is_pod_resize_deferred(op["uid"]),
                "infeasible": m.is_pod_resize_infeasible(op["uid"]),
            }
        raise ValueError(f"unknown op {kind!r}")

    def _api_update(self, op: dict[str, Any]) -> None:
        pod = self.client.pod(op["namespace"], op["name"])
        if pod is None:
            return None
        data = pod.to_dict()
        apply_api_update(data, op["what"])
        self.client.put_pod(data)
        if op.get("node", True):
            stored = self.client.pod(op["namespace"], op["name"])
            assert stored is not None
            self._remember(stored)
            self._learn(stored)
        return None


def apply_api_update(pod: dict[str, Any], what: str) -> None:
    """What another API client does to a pod (the same in main.go's apiUpdate)."""
    meta = pod.setdefault("metadata", {})
    status = pod.setdefault("status", {})
    if what == "delete":
        meta["deletionTimestamp"] = TIMES[2]
        meta["deletionGracePeriodSeconds"] = 30
    elif what == "disruption":
        condition = {
            "type": "DisruptionTarget",
            "status": "True",
            "reason": "EvictionByEvictionAPI",
            "message": "Eviction API: evicting",
            "lastProbeTime": None,
            "lastTransitionTime": TIMES[1],
        }
        conditions = [c for c in status.get("conditions") or [] if c.get("type") != "DisruptionTarget"]
        status["conditions"] = [condition, *conditions]
    elif what == "generation":
        meta["generation"] = int(meta.get("generation") or 0) + 1
    elif what == "claims":
        status["resourceClaimStatuses"] = [{"name": "claim", "resourceClaimName": "claim-1"}]
    elif what == "label":
        meta["labels"] = {**(meta.get("labels") or {}), "touched": "yes"}
    else:
        raise ValueError(f"unknown api update {what!r}")


def _py_request(request: tuple[Any, ...]) -> dict[str, Any]:
    verb, namespace, name = request[0], request[1], request[2] if len(request) > 2 else ""
    out: dict[str, Any] = {"verb": verb, "namespace": namespace, "name": name}
    if verb == "patch":
        out["patch"] = request[3]
    elif verb == "delete":
        out["grace"], out["uid"] = request[3], request[4]
    return out


# --- comparing ----------------------------------------------------------------------------


def canonical(value: Any, *, empty_lists: bool = True) -> Any:
    """Times after 2020 (taken from a clock) become "<now>".

    In a status (not in a patch, ``empty_lists=False``), a key holding an empty list is dropped:
    Go's encoding omits empty lists (``omitempty``), so the oracle cannot tell one from an absent
    list. Nothing else changes.
    """
    if isinstance(value, dict):
        return {k: canonical(v, empty_lists=empty_lists) for k, v in value.items() if empty_lists or v != []}
    if isinstance(value, list):
        return [canonical(v, empty_lists=empty_lists) for v in value]
    if isinstance(value, str):
        match = _TIMESTAMP.match(value)
        if match and int(match.group(1)) > 2020:
            return "<now>"
    return value


def _request_view(request: dict[str, Any]) -> dict[str, Any]:
    view = {k: request.get(k) for k in ("verb", "namespace", "name")}
    if request["verb"] == "patch":
        patch = request.get("patch")
        view["patch"] = canonical(
            json.loads(patch) if isinstance(patch, (str, bytes)) else patch, empty_lists=True
        )
    if request["verb"] == "delete":
        view["grace"] = request.get("grace")
        view["uid"] = request.get("uid") or None
    return view


def _by_pod(requests: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The requests as per-pod chains (each starts at a GET: one pod's sync), in a fixed order.

    Upstream's pass walks a Go map, so the order in which it syncs its pods is not defined; a
    pass is compared as the set of its syncs, each sync's requests in order.
    """
    chains: list[list[dict[str, Any]]] = []
    for request in requests:
        view = _request_view(request)
        if view["verb"] == "get" or not chains:
            chains.append([view])
        else:
            chains[-1].append(view)
    return sorted(chains, key=lambda chain: json.dumps(chain, sort_keys=True))


@dataclass
class Difference:
    step: int
    op: dict[str, Any]
    what: str
    go: Any
    py: Any

    def __str__(self) -> str:
        return (
            f"step {self.step} {json.dumps(self.op)}: {self.what} differ\n"
            f"  upstream:  {json.dumps(self.go, sort_keys=True)}\n"
            f"  podstatus: {json.dumps(self.py, sort_keys=True)}"
        )


def compare(step: int, op: dict[str, Any], go: dict[str, Any], py: dict[str, Any]) -> Difference | None:
    if go.get("error"):
        raise RuntimeError(f"the Go oracle refused step {step} {op}: {go['error']}")
    go_requests = _by_pod(go["requests"])
    py_requests = _by_pod(py["requests"])
    if go_requests != py_requests:
        return Difference(step, op, "requests", go_requests, py_requests)
    if op["op"] in RETURNING_OPS and go.get("ret") != py.get("ret"):
        return Difference(step, op, "return values", go.get("ret"), py.get("ret"))
    for uid in sorted(set(go["statuses"]) | set(py["statuses"])):
        g = canonical(go["statuses"].get(uid), empty_lists=False)
        p = canonical(py["statuses"].get(uid), empty_lists=False)
        if g != p:
            return Difference(step, op, f"cached statuses of {uid}", g, p)
    g_resize, p_resize = canonical(go.get("resize") or {}), canonical(py.get("resize") or {})
    if g_resize != p_resize:
        return Difference(step, op, "resize conditions", g_resize, p_resize)
    return None


RESIZE_OPS = frozenset(
    {
        "set_resize_pending",
        "set_resize_in_progress",
        "clear_resize_pending",
        "clear_resize_in_progress",
        "backfill_resize",
        "resize_state",
    }
)
RETURNING_OPS = frozenset(
    {"sync", "set_resize_pending", "set_resize_in_progress", "clear_resize_in_progress", "resize_state"}
)


def run_both(oracle: GoOracle, ops: list[dict[str, Any]]) -> tuple[Difference | None, int]:
    """Run ``ops`` through a fresh upstream manager and a fresh podstatus one; the first difference."""
    oracle.reset()
    side = PySide()
    for i, op in enumerate(ops):
        go = oracle.step(op)
        py = side.step(op)
        diff = compare(i, op, go, py)
        if diff is not None:
            return diff, i + 1
    return None, len(ops)


def first_difference(oracle: GoOracle, ops: list[dict[str, Any]], attempts: int = 3) -> Difference | None:
    """The difference a sequence shows on every one of ``attempts`` runs, or None.

    Both managers take "now" from the wall clock (upstream's cannot be pinned), so a run that
    straddles a second boundary can see a time differ that would not otherwise: a field sent by
    one side and not by the other. Such a run passes when repeated; a real difference does not.
    """
    diff: Difference | None = None
    for _ in range(attempts):
        diff, _steps = run_both(oracle, ops)
        if diff is None:
            return None
    return diff


# --- generating sequences ------------------------------------------------------------------


@dataclass
class _PodModel:
    index: int
    template: str
    static: bool
    incarnation: int = 1
    mirror_incarnation: int = 1
    present: bool = False
    terminal: bool = False
    # An earlier incarnation's status may still be cached under this name: a pass may then sync
    # two statuses of one name, in an order upstream does not define, so which of them an
    # injected failure hits is not defined either. No failures are injected until the orphans
    # are dropped.
    ambiguous: bool = False

    @property
    def name(self) -> str:
        return f"p{self.index}"

    @property
    def uid(self) -> str:
        # The node's UID: the static pod's own for a static pod.
        return f"{'static' if self.static else 'uid'}-{self.name}-{self.incarnation}"

    @property
    def mirror_uid(self) -> str:
        return f"mirror-{self.name}-{self.incarnation}-{self.mirror_incarnation}"


@dataclass
class World:
    """Turns abstract steps into the operations both sides run, keeping the generator's rules."""

    features: Features
    pods: dict[int, _PodModel] = field(default_factory=dict)

    def pod_dict(self, model: _PodModel, *, mirror: bool, generation: int | None = None) -> dict[str, Any]:
        meta: dict[str, Any] = {
            "name": model.name,
            "namespace": NS,
            "uid": model.mirror_uid if mirror else model.uid,
            "creationTimestamp": TIMES[0],
        }
        if self.features.generation:
            meta["generation"] = generation or 1
        if model.static:
            meta["annotations"] = {SOURCE_ANNOTATION: "file", HASH_ANNOTATION: f"hash-{model.name}"}
            if mirror:
                meta["annotations"][MIRROR_ANNOTATION] = f"hash-{model.name}"
        spec = json.loads(json.dumps(SPECS[model.template]))
        spec["nodeName"] = "node-1"
        status = {
            "phase": "Pending",
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "True",
                    "lastProbeTime": None,
                    "lastTransitionTime": TIMES[0],
                }
            ],
        }
        return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status}

    def concretize(self, step: tuple[Any, ...]) -> list[dict[str, Any]]:
        kind, index = step[0], step[1]
        model = self.pods.get(index)
        if kind == "add":
            if model is not None and model.present:
                return []
            template, static = step[2], step[3]
            if model is None:
                model = self.pods[index] = _PodModel(index, template, static)
            else:
                model.incarnation += 1
                model.ambiguous = True
                model.template, model.static, model.terminal = template, static, False
            model.present = True
            return self._create(model)
        # Any other step acts on a pod the node has: the index picks one of them.
        present = [i for i, m in sorted(self.pods.items()) if m.present]
        if not present:
            return []
        model = self.pods[present[index % len(present)]]
        if kind == "status":
            status = build_status(model, step[2], self.features)
            if model.terminal and status["phase"] not in ("Succeeded", "Failed"):
                status["phase"] = "Failed"  # allowed difference: the terminal phase is kept
            if status["phase"] in ("Succeeded", "Failed"):
                model.terminal = True
            return [{"op": "set_pod_status", "uid": model.uid, "status": status}]
        if kind in ("ready", "startup"):
            containers = _containers(model.template)
            name = containers[step[2] % len(containers)]
            op = "set_container_readiness" if kind == "ready" else "set_container_startup"
            return [{"op": op, "uid": model.uid, "container_id": f"containerd://{name}", "value": step[3]}]
        if kind == "terminate":
            if model.static and model.terminal:
                # terminate_pod leaves a static pod's phase as its pod object has it (upstream's
                # TODO #116484), which may not be terminal: the allowed difference again.
                return []
            if not model.static:
                model.terminal = True
            return [{"op": "terminate_pod", "uid": model.uid}]
        if kind == "orphans":
            for m in self.pods.values():
                m.ambiguous = False  # every earlier incarnation's status goes
            keep = [m.uid for i, m in sorted(self.pods.items()) if m.present and i not in step[2]]
            return [{"op": "remove_orphaned_statuses", "uids": keep}]
        if kind == "fail":
            if model.ambiguous:
                return []
            verb, code = step[2], step[3]
            if verb == "delete" and code == 404:
                # SPEC 4.5.6: a DELETE answered NotFound drops the cached status (upstream keeps it
                # and retries): an allowed difference, kept out.
                code = 500
            return [{"op": "fail", "verb": verb, "namespace": NS, "name": model.name, "code": code}]
        if kind == "stopped":
            return [
                {"op": "set_could_have_running", "namespace": NS, "name": model.name, "value": not step[2]}
            ]
        if kind == "watch":
            return [{"op": "watch", "namespace": NS, "name": model.name}]
        if kind == "api":
            what = step[2]
            if (
                (what == "generation" and not self.features.generation)
                or (what == "claims" and not self.features.claims)
                or (what == "disruption" and not self.features.disruption)
            ):
                what = "label"
            return [{"op": "api_update", "namespace": NS, "name": model.name, "what": what, "node": step[3]}]
        if kind == "remove":
            server, node = step[2]
            ops: list[dict[str, Any]] = []
            if server:
                server_uid = model.mirror_uid if model.static else model.uid
                ops.append(
                    {
                        "op": "remove_pod",
                        "namespace": NS,
                        "name": model.name,
                        "uid": server_uid,
                        "node": False,
                    }
                )
            if node and model.static and not self.features.mirror_changes:
                node = False
            if node:
                node_ops = [
                    {
                        "op": "remove_pod",
                        "namespace": NS,
                        "name": model.name,
                        "uid": model.uid,
                        "server": False,
                    }
                ]
                if model.static:
                    # Every mirror pod the node may hold goes (one it never learnt is no-op): a
                    # stale mirror left behind would make a later non-static pod of this name
                    # take the mirror's status as its old one on upstream only (the allowed
                    # difference of SPEC 4.2.1, tests/statusoracle/allowed/).
                    mirrors = [
                        {
                            "op": "remove_pod",
                            "namespace": NS,
                            "name": model.name,
                            "uid": f"mirror-{model.name}-{model.incarnation}-{k}",
                            "server": False,
                        }
                        for k in range(1, model.mirror_incarnation + 1)
                    ]
                    # The pod managers differ while a static pod is gone and its mirror pod is not
                    # (upstream still translates the mirror's UID): kept apart unless asked for.
                    node_ops = (
                        [*node_ops, *mirrors]
                        if self.features.static_removal_window
                        else [*mirrors, *node_ops]
                    )
                ops.extend(node_ops)
                model.present = False
            return ops
        if kind == "recreate":
            node_learns = step[2]
            if model.static:
                if not self.features.mirror_changes:
                    return []
                old_mirror = model.mirror_uid
                model.mirror_incarnation += 1
                ops = [{"op": "add_pod", "pod": self.pod_dict(model, mirror=True), "node": False}]
                if node_learns:
                    ops.insert(
                        0,
                        {
                            "op": "remove_pod",
                            "namespace": NS,
                            "name": model.name,
                            "uid": old_mirror,
                            "server": False,
                        },
                    )
                    ops[-1] = {"op": "add_pod", "pod": self.pod_dict(model, mirror=True)}
                return ops
            old_uid = model.uid
            model.incarnation += 1
            model.ambiguous = True
            model.terminal = False
            ops = [{"op": "add_pod", "pod": self.pod_dict(model, mirror=False), "node": False}]
            if node_learns:
                ops.insert(
                    0,
                    {
                        "op": "remove_pod",
                        "namespace": NS,
                        "name": model.name,
                        "uid": old_uid,
                        "server": False,
                    },
                )
                ops[-1] = {"op": "add_pod", "pod": self.pod_dict(model, mirror=False)}
            return ops
        if kind.startswith("resize_"):
            if not self.features.resize:
                return []
            return [resize_op(kind, model.uid, step[2:])]
        raise ValueError(f"unknown step {kind!r}")

    def _create(self, model: _PodModel) -> list[dict[str, Any]]:
        if self.features.subsecond:
            # The node's pod object carries sub-second times (a pod made on the node); the API
            # server keeps whole seconds, as a real one does.
            node = self.pod_dict(model, mirror=False)
            node["status"]["startTime"] = SUBSECOND_TIMES[0]
            node["status"]["conditions"][0]["lastTransitionTime"] = SUBSECOND_TIMES[1]
            if not model.static:
                server = self.pod_dict(model, mirror=False)
                server["status"]["startTime"] = TIMES[0]
                server["status"]["conditions"][0]["lastTransitionTime"] = TIMES[1]
                return [
                    {"op": "add_pod", "pod": server, "node": False},
                    {"op": "add_pod", "pod": node, "server": False},
                ]
            return [
                {"op": "add_pod", "pod": node, "server": False},
                {"op": "add_pod", "pod": self.pod_dict(model, mirror=True)},
            ]
        if not model.static:
            return [{"op": "add_pod", "pod": self.pod_dict(model, mirror=False)}]
        return [
            {"op": "add_pod", "pod": self.pod_dict(model, mirror=False), "server": False},
            {"op": "add_pod", "pod": self.pod_dict(model, mirror=True)},
        ]


def resize_op(kind: str, uid: str, args: tuple[Any, ...]) -> dict[str, Any]:
    reason, generation = args
    if kind == "resize_pending":
        return {
            "op": "set_resize_pending",
            "uid": uid,
            "reason": reason,
            "message": "m",
            "generation": generation,
        }
    if kind == "resize_progress":
        return {
            "op": "set_resize_in_progress",
            "uid": uid,
            "reason": reason,
            "message": "",
            "generation": generation,
        }
    if kind == "resize_clear_pending":
        return {"op": "clear_resize_pending", "uid": uid}
    if kind == "resize_clear_progress":
        return {"op": "clear_resize_in_progress", "uid": uid}
    if kind == "resize_backfill":
        return {"op": "backfill_resize", "uids": [uid]}
    return {"op": "resize_state", "uid": uid}


def _containers(template: str) -> list[str]:
    spec = SPECS[template]
    return [c["name"] for c in spec.get("initContainers", [])] + [c["name"] for c in spec["containers"]]


def build_status(model: _PodModel, params: dict[str, Any], features: Features) -> dict[str, Any]:
    """A status for the pod's spec from drawn parameters."""
    times = TIMES + (SUBSECOND_TIMES if features.subsecond else ())
    spec = SPECS[model.template]

    def container(name: str, p: dict[str, Any]) -> dict[str, Any]:
        state_kind = p["state"]
        t = times[p["time"] % len(times)]
        if state_kind == "waiting":
            state: dict[str, Any] = {"waiting": {"reason": "ContainerCreating"}}
        elif state_kind == "running":
            state = {"running": {"startedAt": t}}
        else:
            state = {
                "terminated": {
                    "exitCode": p["exit"],
                    "reason": "Completed" if p["exit"] == 0 else "Error",
                    "startedAt": TIMES[0],
                    "finishedAt": t,
                }
            }
        cs: dict[str, Any] = {
            "name": name,
            "state": state,
            "lastState": {},
            "ready": p["ready"],
            "restartCount": p["restarts"],
            "image": "i",
            "imageID": "",
            "containerID": f"containerd://{name}",
        }
        if p["started"] is not None:
            cs["started"] = p["started"]
        return cs

    init_names = [c["name"] for c in spec.get("initContainers", [])]
    names = [c["name"] for c in spec["containers"]]
    containers = params["containers"]
    init_statuses = [container(n, containers[i % len(containers)]) for i, n in enumerate(init_names)]
    statuses = [
        container(n, containers[(i + len(init_names)) % len(containers)]) for i, n in enumerate(names)
    ]
    if params["shuffle"]:
        statuses.reverse()
    if params["drop"] and len(statuses) > 1:
        statuses = statuses[1:]
    status: dict[str, Any] = {"phase": params["phase"], "containerStatuses": statuses}
    if init_statuses:
        status["initContainerStatuses"] = init_statuses
    if features.ephemeral and params["ephemeral"]:
        status["ephemeralContainerStatuses"] = [
            container("z-debug", containers[0]),
            container("debug", containers[-1]),
        ]
    conditions = []
    for i, ctype in enumerate(OWNED):
        if features.varied_conditions and not params["owned"][i]:
            continue
        value = params["values"][i]
        c: dict[str, Any] = {
            "type": ctype,
            "status": "True" if value else "False",
            "lastProbeTime": None,
            "lastTransitionTime": times[params["ltt"] % len(times)],
        }
        if not value and ctype in ("Ready", "ContainersReady"):
            c["reason"] = "ContainersNotReady"
        conditions.append(c)
    if features.disruption and params["disruption"]:
        conditions.insert(
            params["disruption_at"] % (len(conditions) + 1),
            {
                "type": "DisruptionTarget",
                "status": "True",
                "reason": "TerminationByKubelet",
                "message": "node shutdown",
                "lastProbeTime": None,
                "lastTransitionTime": times[0],
            },
        )
    if params["gate"] is not None and spec.get("readinessGates"):
        conditions.append(
            {
                "type": GATE,
                "status": "True" if params["gate"] else "False",
                "lastProbeTime": None,
                "lastTransitionTime": TIMES[0],
            }
        )
    status["conditions"] = conditions
    if params["start"] is not None:
        status["startTime"] = times[params["start"] % len(times)]
    if params["ip"]:
        status["podIP"] = "10.0.0.1"
        status["podIPs"] = [{"ip": "10.0.0.1"}]
        status["hostIP"] = "192.168.0.1"
    return status


_container_params = st.fixed_dictionaries(
    {
        "state": st.sampled_from(["waiting", "running", "terminated"]),
        "exit": st.sampled_from([0, 1]),
        "ready": st.booleans(),
        "started": st.sampled_from([None, True, False]),
        "restarts": st.sampled_from([0, 1]),
        "time": st.integers(0, 4),
    }
)
_status_params = st.fixed_dictionaries(
    {
        "phase": st.sampled_from(["Pending", "Running", "Running", "Succeeded", "Failed"]),
        "containers": st.lists(_container_params, min_size=1, max_size=3),
        "shuffle": st.booleans(),
        "drop": st.booleans(),
        "ephemeral": st.booleans(),
        "owned": st.tuples(*[st.booleans()] * len(OWNED)),
        "values": st.tuples(*[st.booleans()] * len(OWNED)),
        "ltt": st.integers(0, 4),
        "disruption": st.booleans(),
        "disruption_at": st.integers(0, 5),
        "gate": st.sampled_from([None, True, False]),
        "start": st.sampled_from([None, 0, 1, 3]),
        "ip": st.booleans(),
    }
)
_index = st.integers(0, 2)


def steps(features: Features) -> st.SearchStrategy[tuple[Any, ...]]:
    """One abstract step (World.concretize makes operations of it)."""
    choices = [
        st.tuples(st.just("add"), _index, st.sampled_from(sorted(SPECS)), st.booleans()),
        *[st.tuples(st.just("status"), _index, _status_params)] * 4,
        st.tuples(st.just("ready"), _index, st.integers(0, 2), st.booleans()),
        st.tuples(st.just("startup"), _index, st.integers(0, 2), st.booleans()),
        *[st.tuples(st.just("terminate"), _index)] * 2,
        st.tuples(st.just("orphans"), _index, st.frozensets(_index, max_size=2)),
        *[st.tuples(st.just("sync"), _index, st.booleans())] * 4,
        st.tuples(
            st.just("fail"),
            _index,
            st.sampled_from(["get", "patch", "delete"]),
            st.sampled_from([404, 409, 500]),
        ),
        *[st.tuples(st.just("stopped"), _index, st.booleans())] * 2,
        *[st.tuples(st.just("api"), _index, st.just("delete"), st.just(True))] * 2,
        *[st.tuples(st.just("watch"), _index)] * 2,
        st.tuples(
            st.just("api"),
            _index,
            st.sampled_from(["delete", "disruption", "generation", "claims", "label"]),
            st.booleans(),
        ),
        st.tuples(st.just("remove"), _index, st.sampled_from([(True, False), (False, True), (True, True)])),
        st.tuples(st.just("recreate"), _index, st.booleans()),
    ]
    if features.resize:
        reasons = st.sampled_from(["", "Deferred", "Infeasible", "Error"])
        generations = st.integers(0, 3)
        for kind in (
            "resize_pending",
            "resize_progress",
            "resize_clear_pending",
            "resize_clear_progress",
            "resize_backfill",
            "resize_state",
        ):
            choices.append(st.tuples(st.just(kind), _index, reasons, generations))
    # sampled_from over a list with repeats: one_of would take each distinct strategy once.
    return st.sampled_from(choices).flatmap(lambda chosen: chosen)


def sequence(features: Features, max_steps: int = 40) -> st.SearchStrategy[list[tuple[Any, ...]]]:
    """Pods first (one to three), then steps."""
    adds = st.lists(
        st.tuples(st.just("add"), _index, st.sampled_from(sorted(SPECS)), st.booleans()),
        min_size=1,
        max_size=3,
    )
    return st.tuples(adds, st.lists(steps(features), min_size=min(8, max_steps), max_size=max_steps)).map(
        lambda parts: parts[0] + parts[1]
    )


def operations(features: Features, abstract: list[tuple[Any, ...]]) -> list[dict[str, Any]]:
    """The operations of an abstract sequence; sync steps are global (their index is unused)."""
    world = World(features)
    ops: list[dict[str, Any]] = []
    for step in abstract:
        if step[0] == "sync":
            ops.append({"op": "sync", "all": step[2]})
        else:
            ops.extend(world.concretize(step))
    return ops


def main(argv: list[str] | None = None) -> int:
    """Run random sequences and print the first difference, shrunk (or that there was none).

    ``python tests/statusoracle_harness.py --examples 2000 --features all`` explores every kind of
    difference; ``--replay FILE.jsonl`` runs one sequence (tests/statusoracle/differences/).
    """
    import argparse
    import logging

    from hypothesis import HealthCheck, given, settings

    from statusoracle_build import build

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--examples", type=int, default=1000)
    parser.add_argument("--features", default="", help="comma-separated Features flags, or 'all'")
    parser.add_argument("--replay", type=Path, nargs="*", default=[])
    args = parser.parse_args(argv)
    flags = (
        set(Features.__dataclass_fields__)
        if args.features == "all"
        else set(filter(None, args.features.split(",")))
    )
    unknown = flags - set(Features.__dataclass_fields__)
    if unknown:
        parser.error(f"unknown features: {', '.join(sorted(unknown))}")
    features = Features(**dict.fromkeys(flags, True))
    logging.disable(logging.CRITICAL)
    binary, _seconds = build()
    oracle = GoOracle(binary)
    try:
        if args.replay:
            failed = 0
            for path in args.replay:
                ops = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
                try:
                    diff = first_difference(oracle, ops)
                except NotImplementedError as exc:
                    failed += 1
                    print(f"{path}: {exc}")
                    continue
                failed += diff is not None
                print(f"{path}: {'same as upstream' if diff is None else diff}")
            return 1 if failed else 0
        found: list[str] = []

        @settings(
            max_examples=args.examples, deadline=None, database=None, suppress_health_check=list(HealthCheck)
        )
        @given(sequence(features))
        def explore(abstract: list[tuple[Any, ...]]) -> None:
            ops = operations(features, abstract)
            diff = first_difference(oracle, ops)
            if diff is not None:
                found[:] = [*(json.dumps(op) for op in ops[: diff.step + 1]), str(diff)]
                raise AssertionError(str(diff))

        try:
            explore()
        except AssertionError:
            print("\n".join(found))
            return 1
        print(f"{args.examples} sequences, features {sorted(flags) or 'none'}: no difference from upstream")
        return 0
    finally:
        oracle.close()


if __name__ == "__main__":
    raise SystemExit(main())
