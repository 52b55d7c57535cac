"""deploy/ against the real apiserver: every manifest is accepted, and the agent's role is least privilege.

That the role is *sufficient* is proven at the end of the session
(``test_cp_zz_session.py``): the agents of every case run with this ServiceAccount's
token, and the audit log must hold no 403 for it.
"""

from __future__ import annotations

import pytest
import yaml
from cpkit import (
    AGENT_NAMESPACE,
    AGENT_USER,
    DEPLOY,
    agent_audit_events,
    denied_by_authorization,
    kubectl,
    kubectl_run,
    wait_until,
)

pytestmark = pytest.mark.apiserver

# (verb, resource, namespace or None) the agent needs: each must be allowed.
MUST = [
    ("create", "nodes", None),
    ("get", "nodes", None),
    ("patch", "nodes", None),
    ("patch", "nodes/status", None),
    ("list", "pods", None),
    ("watch", "pods", None),
    ("get", "pods", "default"),
    ("delete", "pods", "default"),
    ("patch", "pods/status", "default"),
    ("create", "events", "default"),
    ("patch", "events", "default"),
    ("get", "leases.coordination.k8s.io", "kube-node-lease"),
    ("create", "leases.coordination.k8s.io", "kube-node-lease"),
    ("update", "leases.coordination.k8s.io", "kube-node-lease"),
    # The kubelet API's token webhook and Webhook authorization.
    ("create", "tokenreviews.authentication.k8s.io", None),
    ("create", "subjectaccessreviews.authorization.k8s.io", None),
]

# What the agent must NOT be able to do: a node agent that could do these would be a
# cluster-wide risk if its token leaked.
MUST_NOT = [
    ("delete", "nodes", None),
    ("update", "nodes", None),
    ("get", "secrets", "default"),
    ("list", "secrets", None),
    ("get", "configmaps", "default"),
    ("create", "pods", "default"),
    ("update", "pods", "default"),
    ("patch", "pods", "default"),
    ("create", "pods/eviction", "default"),
    ("create", "pods/exec", "default"),
    ("update", "pods/status", "default"),
    ("delete", "events", "default"),
    ("list", "nodes", None),
    ("create", "deployments.apps", "default"),
    ("create", "serviceaccounts/token", AGENT_NAMESPACE),
    ("update", "leases.coordination.k8s.io", "kube-system"),
    ("create", "leases.coordination.k8s.io", "default"),
    ("delete", "leases.coordination.k8s.io", "kube-node-lease"),
    ("escalate", "clusterroles.rbac.authorization.k8s.io", None),
    ("bind", "clusterroles.rbac.authorization.k8s.io", None),
    ("impersonate", "users", None),
    ("approve", "certificatesigningrequests.certificates.k8s.io", None),
]


def _can_i(kubeconfig: str, verb: str, resource: str, namespace: str | None) -> str:
    resource, _, sub = resource.partition("/")
    args = ["auth", "can-i", verb, resource, f"--as={AGENT_USER}"]
    if sub:  # "pods/status" alone would read as the pod named "status"
        args.append(f"--subresource={sub}")
    args += ["-n", namespace] if namespace else ["--all-namespaces"]
    return kubectl(kubeconfig, *args, check=False).strip()


def test_every_manifest_passes_a_server_side_dry_run(deploy_applied: str) -> None:
    """kubectl apply --dry-run=server over deploy/: the real apiserver validates and admits each object."""
    want = [
        "serviceaccount/podstatus-node",
        "clusterrole.rbac.authorization.k8s.io/podstatus-node",
        "clusterrolebinding.rbac.authorization.k8s.io/podstatus-node",
        "role.rbac.authorization.k8s.io/podstatus-node-lease",
        "rolebinding.rbac.authorization.k8s.io/podstatus-node-lease",
        "deployment.apps/podstatus-node",
    ]
    missing = [w for w in want if w not in deploy_applied]
    assert not missing, f"not in the dry-run output: {missing}\n{deploy_applied}"
    assert "(server dry run)" in deploy_applied, deploy_applied


def test_the_deployment_runs_as_the_service_account(deploy_applied: str) -> None:
    """The Deployment's pods would run `podstatus node` with deploy/'s ServiceAccount, in-cluster."""
    manifest = yaml.safe_load((DEPLOY / "deployment.yaml").read_text(encoding="utf-8"))
    spec = manifest["spec"]["template"]["spec"]
    assert spec["serviceAccountName"] == "podstatus-node"
    assert manifest["metadata"]["namespace"] == AGENT_NAMESPACE
    assert spec["containers"][0]["args"][0] == "node"
    assert "--kubeconfig" not in spec["containers"][0]["args"]


@pytest.mark.parametrize(("verb", "resource", "namespace"), MUST, ids=lambda v: str(v))
def test_the_agent_may(
    control_plane, deploy_applied: str, verb: str, resource: str, namespace: str | None
) -> None:
    answer = _can_i(control_plane.kubeconfig, verb, resource, namespace)
    assert answer == "yes", (
        f"{AGENT_USER} cannot {verb} {resource} in {namespace or 'all namespaces'}: {answer}"
    )


@pytest.mark.parametrize(("verb", "resource", "namespace"), MUST_NOT, ids=lambda v: str(v))
def test_the_agent_may_not(
    control_plane, deploy_applied: str, verb: str, resource: str, namespace: str | None
) -> None:
    answer = _can_i(control_plane.kubeconfig, verb, resource, namespace)
    assert answer == "no", f"{AGENT_USER} CAN {verb} {resource} in {namespace or 'all namespaces'}: {answer}"


def test_a_request_the_role_denies_shows_in_the_audit_log(control_plane, agent_kubeconfig: str) -> None:
    """The negative control of the session's no-403 check: a denial with the agent's token is caught."""
    proc = kubectl_run(agent_kubeconfig, "get", "secrets", "-n", "default")
    assert proc.returncode != 0 and "forbidden" in proc.stderr, (proc.returncode, proc.stdout, proc.stderr)

    def denial() -> list[dict]:
        return [
            e
            for e in agent_audit_events(control_plane.audit_log, include_kubectl=True)
            if (e.get("objectRef") or {}).get("resource") == "secrets"
            and (e.get("responseStatus") or {}).get("code") == 403
            and denied_by_authorization(e)
        ]

    found = wait_until(denial, timeout=20, what="the denied list of secrets in the audit log")
    assert found[0]["user"]["username"] == AGENT_USER
    # The session check reads the agents' own requests only: kubectl's probes are left out.
    assert not any(
        e.get("objectRef", {}).get("resource") == "secrets"
        for e in agent_audit_events(control_plane.audit_log)
    )
