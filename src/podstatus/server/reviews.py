"""Who am I, and what may I do: the reviews behind ``kubectl auth whoami`` and ``kubectl auth can-i``.

- ``SelfSubjectReview`` (authentication.k8s.io/v1): the user the request was authenticated as.
- ``SelfSubjectAccessReview`` (authorization.k8s.io/v1): whether that user may do one thing.
- ``SelfSubjectRulesReview`` (authorization.k8s.io/v1): what that user may do (``can-i --list``).

The embedded server has one credential and no RBAC. With a token (``podstatus serve``), a request
that reaches these endpoints carries it: its user is ``podstatus`` in ``system:masters`` (the name
the audit log records) and may do everything, as a member of ``system:masters`` may on
kube-apiserver. Without a token every request is the anonymous user's and is allowed everything.
The answers say exactly that. A review asked with ``Impersonate-*`` headers (``kubectl --as``) is
refused with 403: with no RBAC this server cannot say what another user may do, and answering for
the caller instead would mislead.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import msgspec

from ..errors import ForbiddenError, UnprocessableEntityError, status_body
from .storage.errors import FieldError, bad_request

__all__ = ["ANONYMOUS", "GROUPS", "REVIEWS", "TOKEN_USER", "review"]

# The identities, as kube-apiserver's SelfSubjectReview and audit log show them.
TOKEN_USER: dict[str, Any] = {"username": "podstatus", "groups": ["system:masters", "system:authenticated"]}
ANONYMOUS: dict[str, Any] = {"username": "system:anonymous", "groups": ["system:unauthenticated"]}

# (group, plural) -> kind; all are create-only and cluster-scoped.
REVIEWS = {
    ("authentication.k8s.io", "selfsubjectreviews"): "SelfSubjectReview",
    ("authorization.k8s.io", "selfsubjectaccessreviews"): "SelfSubjectAccessReview",
    ("authorization.k8s.io", "selfsubjectrulesreviews"): "SelfSubjectRulesReview",
}


def _discovery(group: str) -> list[dict[str, Any]]:
    return [
        {
            "name": plural,
            "singularName": plural[:-1],
            "namespaced": False,
            "kind": kind,
            "verbs": ["create"],
        }
        for (g, plural), kind in sorted(REVIEWS.items())
        if g == group
    ]


# The discovery entries of the two groups (kube-apiserver lists more resources in them).
GROUPS = {group: _discovery(group) for group in sorted({g for g, _ in REVIEWS})}


def _impersonating(headers: Mapping[str, str]) -> str:
    for name, value in headers.items():
        if name.lower().startswith("impersonate-"):
            return value
    return ""


def review(group: str, plural: str, body: bytes | dict[str, Any], headers: Mapping[str, str],
           user: dict[str, Any]) -> dict[str, Any]:  # fmt: skip
    """The created review (its ``status`` filled in), or an :class:`ApiError` raised."""
    kind = REVIEWS[(group, plural)]
    who = _impersonating(headers)
    if who:
        message = (
            f'impersonation is not supported by this server: it has no RBAC to say what "{who}" may do '
            "(ask a kube-apiserver, such as the control plane of tests/apiserver/start --control-plane)"
        )
        raise ForbiddenError(message, status=status_body(403, "Forbidden", message))
    obj = body if isinstance(body, dict) else _decode(body, kind)
    if not isinstance(obj, dict):
        raise bad_request(f"not a {kind}: the body is not an object")
    api_version = f"{group}/v1"
    if obj.get("kind", kind) != kind or obj.get("apiVersion", api_version) != api_version:
        raise bad_request(f"not a {kind}: kind {obj.get('kind')!r}, apiVersion {obj.get('apiVersion')!r}")
    spec = obj.get("spec") or {}
    if not isinstance(spec, dict):
        raise bad_request(f"not a {kind}: spec must be an object")
    out: dict[str, Any] = {"kind": kind, "apiVersion": api_version, "metadata": {}}
    if kind == "SelfSubjectReview":
        out["metadata"] = {"creationTimestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        out["status"] = {"userInfo": dict(user)}
        return out
    if kind == "SelfSubjectAccessReview":
        has_resource, has_other = (
            spec.get("resourceAttributes") is not None,
            spec.get("nonResourceAttributes") is not None,
        )
        if has_resource == has_other:
            # ValidateSelfSubjectAccessReviewSpec's check and wording.
            error = FieldError(
                "spec", "Invalid value", spec.get("nonResourceAttributes"),
                "exactly one of nonResourceAttributes or resourceAttributes must be specified",
            )  # fmt: skip
            # As kube-apiserver words it: the decoded review has lost its kind, and has no name.
            message = f'.{group} "" is invalid: {error}'
            body = status_body(422, "Invalid", message, group=group, causes=[error.cause()])
            raise UnprocessableEntityError(message, status=body)
        # Every request this server lets through is allowed: it has no finer authorization.
        return {**out, "spec": spec, "status": {"allowed": True}}
    # SelfSubjectRulesReview: everything, as kube-apiserver lists it for system:masters.
    rules = {
        "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
        "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
        "incomplete": False,
    }
    return {**out, "spec": {}, "status": rules}


def _decode(body: bytes, kind: str) -> Any:
    try:
        return msgspec.json.decode(body)
    except (msgspec.DecodeError, RecursionError) as err:
        raise bad_request(f"not a {kind}: {err}") from None
