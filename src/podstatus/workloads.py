"""Workloads for the simulated node: the built-in mix, and pods loaded from YAML files.

A workload is a pod manifest (a wire dict) plus the behaviour the simulated
containers follow, read from the annotation ``podstatus.io/behaviour``:
``serve`` (run until deleted), ``complete`` (run, then exit 0), ``fail``
(run, then exit 1) or ``crash`` (exit 1 again and again, with back-off).
Pods loaded from files default to ``complete`` when their restart policy is
``Never`` or ``OnFailure`` and to ``serve`` otherwise.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from .errors import InvalidObjectError

BEHAVIOUR_ANNOTATION = "podstatus.io/behaviour"
WORKLOAD_LABEL = "podstatus.io/workload"
BEHAVIOURS = ("serve", "complete", "fail", "crash")
READINESS_GATE = "podstatus.io/load-balancer-ready"

# Kinds of the built-in mix and their shares (they sum to 1).
MIX: tuple[tuple[str, float], ...] = (
    ("web", 0.30),  # long-running, readiness gate set by an outside controller
    ("batch", 0.25),  # runs to completion
    ("init", 0.15),  # two init containers, then serves
    ("sidecar", 0.15),  # a restartable init container (sidecar) next to a job that completes
    ("crashloop", 0.10),  # exits 1 over and over, restart count and back-off grow
    ("failing", 0.05),  # a batch pod whose container fails: phase Failed
)


def _container(name: str, image: str, **extra: Any) -> dict[str, Any]:
    c: dict[str, Any] = {
        "name": name,
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}},
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
    }
    c.update(extra)
    return c


def _pod(
    name: str,
    namespace: str,
    kind: str,
    behaviour: str,
    containers: list[dict[str, Any]],
    *,
    restart_policy: str,
    init_containers: list[dict[str, Any]] | None = None,
    readiness_gates: list[str] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": containers,
        "restartPolicy": restart_policy,
        "terminationGracePeriodSeconds": 2,
        "dnsPolicy": "ClusterFirst",
        "schedulerName": "default-scheduler",
    }
    if init_containers:
        spec["initContainers"] = init_containers
    if readiness_gates:
        spec["readinessGates"] = [{"conditionType": t} for t in readiness_gates]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {WORKLOAD_LABEL: kind, "app.kubernetes.io/name": kind},
            "annotations": {BEHAVIOUR_ANNOTATION: behaviour},
        },
        "spec": spec,
    }


def build_pod(kind: str, index: int, namespace: str = "default") -> dict[str, Any]:
    """One pod of the built-in mix."""
    name = f"{kind}-{index:05d}"
    probe = {"httpGet": {"path": "/healthz", "port": 8080}, "periodSeconds": 5}
    if kind == "web":
        return _pod(
            name,
            namespace,
            kind,
            "serve",
            [
                _container("app", "registry.example.com/web/app:1.4.2", readinessProbe=probe),
                _container("proxy", "registry.example.com/proxy/envoy:1.31.2"),
            ],
            restart_policy="Always",
            readiness_gates=[READINESS_GATE],
        )
    if kind == "batch":
        return _pod(
            name,
            namespace,
            kind,
            "complete",
            [_container("job", "registry.example.com/batch/report:7.0")],
            restart_policy="Never",
        )
    if kind == "init":
        return _pod(
            name,
            namespace,
            kind,
            "serve",
            [_container("app", "registry.example.com/shop/api:3.1", readinessProbe=probe)],
            restart_policy="Always",
            init_containers=[
                _container("migrate", "registry.example.com/shop/migrate:3.1"),
                _container("warm-cache", "registry.example.com/shop/warm:3.1"),
            ],
        )
    if kind == "sidecar":
        return _pod(
            name,
            namespace,
            kind,
            "complete",
            [_container("train", "registry.example.com/ml/train:0.9")],
            restart_policy="Never",
            init_containers=[
                _container(
                    "log-shipper",
                    "registry.example.com/obs/fluent-bit:3.2.0",
                    restartPolicy="Always",
                    startupProbe=probe,
                )
            ],
        )
    if kind == "crashloop":
        return _pod(
            name,
            namespace,
            kind,
            "crash",
            [_container("flaky", "registry.example.com/misc/flaky:0.1")],
            restart_policy="Always",
        )
    if kind == "failing":
        return _pod(
            name,
            namespace,
            kind,
            "fail",
            [_container("job", "registry.example.com/batch/etl:2.2")],
            restart_policy="Never",
        )
    raise ValueError(f"unknown workload kind {kind!r}; known: {', '.join(k for k, _ in MIX)}")


def builtin_mix(count: int, *, namespace: str = "default", seed: int = 1) -> list[dict[str, Any]]:
    """``count`` pods in the shares of :data:`MIX`, shuffled deterministically."""
    kinds: list[str] = []
    for kind, share in MIX:
        kinds.extend([kind] * round(count * share))
    while len(kinds) < count:
        kinds.append(MIX[len(kinds) % len(MIX)][0])
    kinds = kinds[:count]
    random.Random(seed).shuffle(kinds)
    counters: dict[str, int] = {}
    pods = []
    for kind in kinds:
        counters[kind] = counters.get(kind, 0) + 1
        pods.append(build_pod(kind, counters[kind], namespace))
    return pods


def default_behaviour(manifest: dict[str, Any]) -> str:
    policy = (manifest.get("spec") or {}).get("restartPolicy") or "Always"
    return "complete" if policy in ("Never", "OnFailure") else "serve"


def behaviour_of(annotations: dict[str, str] | None, restart_policy: str | None) -> str:
    behaviour = (annotations or {}).get(BEHAVIOUR_ANNOTATION)
    if behaviour in BEHAVIOURS:
        return behaviour
    return "complete" if (restart_policy or "Always") in ("Never", "OnFailure") else "serve"


def load_pod_files(paths: Iterable[str | Path], *, namespace: str = "default") -> list[dict[str, Any]]:
    """Pods from YAML or JSON files (multi-document files and ``kind: List`` allowed)."""
    pods: list[dict[str, Any]] = []
    for path in paths:
        text = Path(path).read_text(encoding="utf-8")
        try:
            documents = list(yaml.safe_load_all(text))
        except yaml.YAMLError as err:
            raise InvalidObjectError(f"{path}: not valid YAML: {err}") from None
        for i, doc in enumerate(documents):
            if doc is None:
                continue
            items = doc.get("items") if isinstance(doc, dict) and doc.get("kind") == "List" else [doc]
            for item in items or []:
                if not isinstance(item, dict) or item.get("kind", "Pod") != "Pod":
                    raise InvalidObjectError(f"{path}: document {i}: expected a Pod, got {item!r:.80}")
                meta = item.setdefault("metadata", {})
                if not meta.get("name") and not meta.get("generateName"):
                    raise InvalidObjectError(f"{path}: document {i}: metadata.name: Required value")
                meta.setdefault("namespace", namespace)
                item.setdefault("apiVersion", "v1")
                item.setdefault("kind", "Pod")
                spec = item.get("spec")
                if not isinstance(spec, dict) or not spec.get("containers"):
                    raise InvalidObjectError(f"{path}: document {i}: spec.containers: Required value")
                pods.append(item)
    return pods
