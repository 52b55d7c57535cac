"""metrics-server for the control-plane suite: the upstream binary, built once from the Go module proxy.

``sigs.k8s.io/metrics-server`` v0.8.0 is built with ``go install`` (as bench/scale/kwok.py builds
KWOK) into ``${PODSTATUS_METRICS_SERVER_CACHE:-~/.cache/podstatus-metrics-server}/<version>/``,
under a lock so parallel runs wait for one build; nothing of metrics-server is kept in this
repository. ``python tests/controlplane_suite/metrics_server.py`` builds it (``make
test-apiserver`` does, so CI has it before the suite starts).

The suite runs it on loopback against the control plane and registers it with kube-apiserver's
aggregation layer. The route: an APIService whose service is a Service of type ExternalName
pointing at ``localhost``. kube-apiserver (``--enable-aggregator-routing=false``, the default)
resolves such a service to ``https://<externalName>:<port>`` without Endpoints or
EndpointSlices, which refuse loopback addresses; a ClusterIP service would need kube-proxy.
"""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

log = logging.getLogger("tests.controlplane_suite.metrics_server")

VERSION = "v0.8.0"
MODULE = "sigs.k8s.io/metrics-server"
NAMESPACE = "kube-system"
NAME = "metrics-server"
API_GROUP = "metrics.k8s.io"
API_VERSION = "v1beta1"
# metrics-server refuses a resolution under 10 s; CPU figures need two scrapes.
RESOLUTION_SECONDS = 10


def cache_dir(version: str = VERSION) -> Path:
    base = os.environ.get("PODSTATUS_METRICS_SERVER_CACHE") or str(
        Path.home() / ".cache" / "podstatus-metrics-server"
    )
    return Path(base) / version


def _go() -> str:
    found = shutil.which("go") or ("/usr/local/go/bin/go" if Path("/usr/local/go/bin/go").exists() else None)
    if not found:
        raise RuntimeError(
            "go is neither on PATH nor at /usr/local/go/bin/go: it is needed to build metrics-server"
        )
    return found


def ensure_metrics_server(version: str = VERSION) -> Path:
    """The metrics-server binary, built first when it is not in the cache."""
    directory = cache_dir(version)
    directory.mkdir(parents=True, exist_ok=True)
    binary = directory / "metrics-server"
    if binary.exists():
        return binary
    with open(directory / ".build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if binary.exists():  # another run built it while this one waited
            return binary
        log.warning("building metrics-server %s from the Go module proxy (takes minutes on 2 cores)", version)
        tmp = Path(tempfile.mkdtemp(prefix="gobin-", dir=directory))
        try:
            subprocess.run(
                ["nice", "-n", "10", _go(), "install", "-trimpath", f"{MODULE}/cmd/metrics-server@{version}"],
                check=True,
                cwd=tempfile.gettempdir(),
                env={**os.environ, "GOBIN": str(tmp), "GO111MODULE": "on"},
            )
            (tmp / "metrics-server").replace(binary)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return binary


def command(
    binary: Path,
    *,
    kubeconfig: str,
    port: int,
    cert_dir: Path,
    kubelet_client_cert: Path | None = None,
    kubelet_client_key: Path | None = None,
) -> list[str]:
    """metrics-server on 127.0.0.1:``port``, talking to the apiserver and the kubelets as a cluster's would.

    The kubelets are reached at their InternalIP and the port each Node advertises in
    ``status.daemonEndpoints`` (every podstatus node may listen on its own port); their
    serving certificates are self-signed, hence ``--kubelet-insecure-tls``, exactly what
    metrics-server's docs prescribe for such kubelets.
    """
    cmd = [
        str(binary),
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        "--bind-address=127.0.0.1",
        f"--secure-port={port}",
        f"--cert-dir={cert_dir}",
        "--kubelet-preferred-address-types=InternalIP",
        "--kubelet-use-node-status-port",
        "--kubelet-insecure-tls",
        f"--metric-resolution={RESOLUTION_SECONDS}s",
        # It must stay under the resolution (metrics-server refuses to start otherwise).
        "--kubelet-request-timeout=5s",
        "--v=2",
    ]
    if kubelet_client_cert is not None and kubelet_client_key is not None:
        cmd += [
            f"--kubelet-client-certificate={kubelet_client_cert}",
            f"--kubelet-client-key={kubelet_client_key}",
        ]
    return cmd


def manifests(port: int, service_account: str = NAME) -> list[dict[str, Any]]:
    """The objects metrics-server's own release manifest creates, minus its Deployment, plus the loopback route.

    RBAC as upstream's ``components.yaml`` (v0.8.0): read nodes/metrics, pods, nodes; delegate
    authentication and authorization to the apiserver; read the front proxy's CA. The Service
    is of type ExternalName (``localhost``) instead of a ClusterIP in front of a Deployment.
    """
    return [
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": service_account, "namespace": NAMESPACE},
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": "system:metrics-server"},
            "rules": [
                {"apiGroups": [""], "resources": ["nodes/metrics"], "verbs": ["get"]},
                {"apiGroups": [""], "resources": ["pods", "nodes"], "verbs": ["get", "list", "watch"]},
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": "metrics-server-auth-reader", "namespace": NAMESPACE},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "Role",
                "name": "extension-apiserver-authentication-reader",
            },
            "subjects": [{"kind": "ServiceAccount", "name": service_account, "namespace": NAMESPACE}],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "metrics-server:system:auth-delegator"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "system:auth-delegator",
            },
            "subjects": [{"kind": "ServiceAccount", "name": service_account, "namespace": NAMESPACE}],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "system:metrics-server"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "system:metrics-server",
            },
            "subjects": [{"kind": "ServiceAccount", "name": service_account, "namespace": NAMESPACE}],
        },
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": NAME, "namespace": NAMESPACE, "labels": {"k8s-app": NAME}},
            "spec": {
                "type": "ExternalName",
                "externalName": "localhost",
                "ports": [{"name": "https", "port": port, "protocol": "TCP"}],
            },
        },
        {
            "apiVersion": "apiregistration.k8s.io/v1",
            "kind": "APIService",
            "metadata": {"name": f"{API_VERSION}.{API_GROUP}", "labels": {"k8s-app": NAME}},
            "spec": {
                "group": API_GROUP,
                "version": API_VERSION,
                "service": {"name": NAME, "namespace": NAMESPACE, "port": port},
                # metrics-server serves a self-signed certificate for itself; upstream's
                # manifest skips verification the same way.
                "insecureSkipTLSVerify": True,
                "groupPriorityMinimum": 100,
                "versionPriority": 100,
            },
        },
    ]


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    print(ensure_metrics_server(), file=sys.stdout)
