"""Helpers of the real kube-apiserver suite: raw HTTP access, pod manifests, normalisation.

Imported by the test modules of ``tests/apiserver_suite`` (and by its conftest). The
raw client answers ``(status code, decoded JSON body)`` for any request, so a test can
send byte-for-byte the same request to the real server and to the embedded one and
compare the answers.
"""

from __future__ import annotations

import copy
import json
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import urllib3

from podstatus.clients.http import HttpKubeClient
from podstatus.clients.kubeconfig import (
    authorization_from_configuration,
    load_kubeconfig_configuration,
    settings_from_configuration,
)

NS = "default"
NODE = "node-1"
IMAGE = "registry.k8s.io/pause:3.10"
STRATEGIC = "application/strategic-merge-patch+json"
MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
JSON = "application/json"


def unique(prefix: str = "p") -> str:
    """A fresh DNS-1123 pod name (the real server validates names)."""
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def container(name: str = "c", **extra: Any) -> dict[str, Any]:
    return {"name": name, "image": IMAGE, **extra}


def pod_manifest(
    name: str | None = None,
    *,
    containers: Iterable[str] = ("c",),
    init_containers: Iterable[str] = (),
    readiness_gates: Iterable[str] = (),
    restart_policy: str | None = None,
    node: str | None = NODE,
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A pod the real server accepts: DNS name, containers with name + image, bound to ``node``."""
    spec: dict[str, Any] = {"containers": [container(c) for c in containers]}
    inits = [container(c) for c in init_containers]
    if inits:
        spec["initContainers"] = inits
    gates = [{"conditionType": g} for g in readiness_gates]
    if gates:
        spec["readinessGates"] = gates
    if restart_policy:
        spec["restartPolicy"] = restart_policy
    if node:
        spec["nodeName"] = node
    meta: dict[str, Any] = {"name": name or unique(), "namespace": NS}
    if labels:
        meta["labels"] = labels
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def node_manifest(name: str = NODE) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"podstatus/test": "true"}},
    }


@dataclass
class Answer:
    """One HTTP answer: status code and the decoded JSON body (``None`` when not JSON)."""

    code: int
    body: Any
    raw: bytes = b""
    # The Warning headers (fieldValidation=Warn), in order.
    warnings: list[str] = field(default_factory=list)

    @property
    def status(self) -> dict[str, Any]:
        """The ``Status`` object of an error answer, with the fields compared between servers."""
        b = self.body if isinstance(self.body, dict) else {}
        return {k: b.get(k) for k in ("kind", "status", "reason", "code", "message")}


@dataclass
class RawApi:
    """Plain HTTP to one API server with the kubeconfig's URL, CA and token."""

    base_url: str
    authorization: str | None
    ca_cert: str | None
    _pool: urllib3.PoolManager = field(init=False, repr=False)

    def __post_init__(self) -> None:
        kw: dict[str, Any] = {"retries": False, "timeout": urllib3.Timeout(connect=5, read=30)}
        if self.base_url.startswith("https:"):
            kw["cert_reqs"] = "CERT_REQUIRED"
            if self.ca_cert:
                kw["ca_certs"] = self.ca_cert
        self._pool = urllib3.PoolManager(**kw)

    @classmethod
    def from_kubeconfig(cls, path: str | Path) -> RawApi:
        cfg = load_kubeconfig_configuration(str(path), None)
        settings = settings_from_configuration(cfg)
        return cls(settings.base_url.rstrip("/"), authorization_from_configuration(cfg), settings.ca_cert)

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        content_type: str = JSON,
        query: str = "",
        accept: str = JSON,
    ) -> Answer:
        headers = {"Accept": accept}
        if self.authorization:
            headers["Authorization"] = self.authorization
        data: bytes | None = None
        if body is not None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            headers["Content-Type"] = content_type
        url = self.base_url + path + (f"?{query}" if query else "")
        resp = self._pool.request(method, url, body=data, headers=headers, redirect=False)
        try:
            decoded = json.loads(resp.data) if resp.data else None
        except ValueError:
            decoded = None
        return Answer(resp.status, decoded, resp.data, resp.headers.getlist("Warning"))

    # Shorthands for pods in the test namespace.
    def pods_path(self, name: str = "", sub: str = "", ns: str = NS) -> str:
        path = f"/api/v1/namespaces/{ns}/pods"
        if name:
            path += f"/{name}"
        if sub:
            path += f"/{sub}"
        return path

    def create_pod(self, manifest: dict[str, Any]) -> Answer:
        return self.request("POST", self.pods_path(ns=manifest["metadata"].get("namespace", NS)), manifest)

    def get_pod(self, name: str) -> Answer:
        return self.request("GET", self.pods_path(name))

    def patch_status(self, name: str, patch: Any, content_type: str = STRATEGIC) -> Answer:
        return self.request("PATCH", self.pods_path(name, "status"), patch, content_type=content_type)

    def delete_pod(self, name: str, options: dict[str, Any] | None = None) -> Answer:
        body = {"kind": "DeleteOptions", "apiVersion": "v1", **(options or {})}
        return self.request("DELETE", self.pods_path(name), body)

    def ensure_node(self, name: str = NODE) -> None:
        ans = self.request("POST", "/api/v1/nodes", node_manifest(name))
        if ans.code not in (200, 201, 409):
            raise RuntimeError(f"cannot create node {name}: HTTP {ans.code} {ans.body}")

    def ensure_namespace(self, name: str) -> None:
        ans = self.request(
            "POST",
            "/api/v1/namespaces",
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}},
        )
        if ans.code not in (200, 201, 409):
            raise RuntimeError(f"cannot create namespace {name}: HTTP {ans.code} {ans.body}")

    def close(self) -> None:
        self._pool.clear()


@dataclass
class Server:
    """One API server under test (``kind`` is ``"real"`` or ``"embedded"``)."""

    kind: str
    kubeconfig: str
    raw: RawApi

    def client(self, **kwargs: Any) -> HttpKubeClient:
        return HttpKubeClient.from_kubeconfig(self.kubeconfig, **kwargs)


# -- normalisation of volatile fields ------------------------------------------------------

_VOLATILE_META = (
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "managedFields",
    "deletionTimestamp",
    "generation",
)
_TIME_KEYS = {
    "lastTransitionTime",
    "lastProbeTime",
    "startTime",
    "startedAt",
    "finishedAt",
    "lastHeartbeatTime",
}


def normalise(obj: Any) -> Any:
    """A deep copy with uids, resourceVersions, timestamps and managedFields replaced by markers."""
    obj = copy.deepcopy(obj)

    def walk(x: Any) -> Any:
        if isinstance(x, dict):
            out = {}
            for k, v in x.items():
                if k in _TIME_KEYS and v is not None:
                    out[k] = "<time>"
                elif k == "metadata" and isinstance(v, dict):
                    meta = {}
                    for mk, mv in v.items():
                        if mk == "managedFields":
                            continue
                        meta[mk] = f"<{mk}>" if mk in _VOLATILE_META and mv is not None else walk(mv)
                    out[k] = meta
                else:
                    out[k] = walk(v)
            return out
        if isinstance(x, list):
            return [walk(v) for v in x]
        return x

    return walk(obj)


def scrub(text: str, *values: str) -> str:
    """``text`` with each of ``values`` (uids, names, resourceVersions) replaced by ``<v>``."""
    for v in values:
        if v:
            text = text.replace(v, "<v>")
    return text


def wait_for(predicate: Callable[[], Any], timeout: float = 10.0, interval: float = 0.05) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout} s")
        time.sleep(interval)
