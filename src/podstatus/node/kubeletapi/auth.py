"""Who may call the kubelet API, as the kubelet decides it.

Authentication (``--client-ca-file``, ``--authentication-token-webhook``): a client
certificate signed by the given CA, or a bearer token checked with a TokenReview; nobody
else (401). Authorization ``Webhook`` asks a SubjectAccessReview for ``nodes/<subresource>``
as the kubelet maps paths (403 when denied); ``AlwaysAllow`` lets every authenticated
caller in. Answers are cached for the kubelet's default times.
"""

from __future__ import annotations

import hashlib
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from ..logs import log_fields
from .config import KubeletAPIConfig
from .context import NodeContext, NodeEntry

__all__ = ["Gatekeeper", "User", "attributes"]

log = logging.getLogger(__name__)

# The kubelet's authorization caches (--authentication-token-webhook-cache-ttl and
# --authorization-webhook-cache-{authorized,unauthorized}-ttl defaults).
TOKEN_TTL = 120.0
ALLOWED_TTL = 300.0
DENIED_TTL = 30.0
# Entries kept before the expired ones are swept out.
CACHE_SWEEP = 4096


@dataclass
class User:
    name: str
    groups: tuple[str, ...] = ()
    uid: str = ""
    extra: dict[str, list[str]] = field(default_factory=dict)


def attributes(path: str, method: str) -> tuple[str, list[str]]:
    """The verb and the ``nodes`` subresources (any one allowed suffices) of a request,
    as the kubelet's nodeAuthorizerAttributesGetter (KubeletFineGrainedAuthz on)."""
    verb = {"POST": "create", "GET": "get", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}.get(
        method, ""
    )

    def under(prefix: str) -> bool:
        return path == prefix or path.startswith(prefix + "/")

    subresources = []
    if under("/pods") or under("/runningpods"):
        subresources.append("pods")
    elif under("/healthz"):
        subresources.append("healthz")
    if under("/stats"):
        subresources.append("stats")
    elif under("/metrics"):
        subresources.append("metrics")
    elif under("/logs"):
        subresources.append("log")
    else:
        subresources.append("proxy")
    return verb, subresources


class Gatekeeper:
    """Authenticates and authorizes each request of a process's kubelet API."""

    def __init__(self, config: KubeletAPIConfig, context: NodeContext) -> None:
        self.config = config
        self.context = context
        self._token_cache: dict[str, tuple[float, User | None]] = {}
        self._sar_cache: dict[tuple[Any, ...], tuple[float, bool]] = {}

    async def refusal(self, request: web.Request, node: NodeEntry) -> web.Response | None:
        """401 or 403 for a caller who may not make this request; None lets it through."""
        user = await self.user(request)
        if user is None:
            return web.Response(status=401, text="Unauthorized")
        if self.config.authorization != "Webhook":
            return None
        verb, subresources = attributes(request.path, request.method)
        for sub in subresources:
            if await self._authorized(user, verb, sub, node.name):
                return None
        log_fields(
            log,
            logging.INFO,
            "kubelet API request forbidden",
            node=node.name,
            user=user.name,
            verb=verb,
            subresources=",".join(subresources),
        )
        return web.Response(
            status=403,
            text=f"Forbidden (user={user.name}, verb={verb}, resource=nodes, "
            f"subresource(s)=[{' '.join(subresources)}])",
        )

    async def user(self, request: web.Request) -> User | None:
        cert = request.transport.get_extra_info("peercert") if request.transport is not None else None
        if cert and self.config.client_ca_pem:
            # Only a chain the CA verified fills peercert (CERT_OPTIONAL).
            name, groups = "", []
            for rdn in cert.get("subject", ()):
                for key, value in rdn:
                    if key == "commonName":
                        name = value
                    elif key == "organizationName":
                        groups.append(value)
            if name:
                return User(name, (*groups, "system:authenticated"))
        header = request.headers.get("Authorization", "")
        scheme, _, token = header.partition(" ")
        if scheme.lower() == "bearer" and token.strip() and self.config.token_webhook:
            return await self._token_user(token.strip())
        return None

    async def _token_user(self, token: str) -> User | None:
        now = time.monotonic()
        key = hashlib.sha256(token.encode()).hexdigest()  # the cache holds no token itself
        cached = self._token_cache.get(key)
        if cached is not None and cached[0] > now:
            return cached[1]
        review = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenReview",
            "spec": {"token": token},
        }
        try:
            answer = await self._review("/apis/authentication.k8s.io/v1/tokenreviews", review)
        except Exception as err:
            log_fields(log, logging.WARNING, "TokenReview failed", error=f"{type(err).__name__}: {err}")
            return None
        status = answer.get("status") or {}
        user: User | None = None
        if status.get("authenticated"):
            info = status.get("user") or {}
            user = User(
                str(info.get("username", "")),
                tuple(info.get("groups") or ()),
                str(info.get("uid", "")),
                dict(info.get("extra") or {}),
            )
        self._token_cache[key] = (now + (TOKEN_TTL if user else DENIED_TTL), user)
        if len(self._token_cache) > CACHE_SWEEP:
            self._token_cache = {k: v for k, v in self._token_cache.items() if v[0] > now}
        return user

    async def _authorized(self, user: User, verb: str, subresource: str, node: str) -> bool:
        key = (user.name, user.groups, verb, subresource, node)
        now = time.monotonic()
        cached = self._sar_cache.get(key)
        if cached is not None and cached[0] > now:
            return cached[1]
        review = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {
                "user": user.name,
                "groups": list(user.groups),
                "uid": user.uid,
                "extra": user.extra,
                "resourceAttributes": {
                    "verb": verb,
                    "version": "v1",
                    "resource": "nodes",
                    "subresource": subresource,
                    "name": node,
                },
            },
        }
        try:
            answer = await self._review("/apis/authorization.k8s.io/v1/subjectaccessreviews", review)
        except Exception as err:
            log_fields(
                log, logging.WARNING, "SubjectAccessReview failed", error=f"{type(err).__name__}: {err}"
            )
            return False
        allowed = bool((answer.get("status") or {}).get("allowed"))
        self._sar_cache[key] = (now + (ALLOWED_TTL if allowed else DENIED_TTL), allowed)
        if len(self._sar_cache) > CACHE_SWEEP:
            self._sar_cache = {k: v for k, v in self._sar_cache.items() if v[0] > now}
        return allowed

    async def _review(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        result: dict[str, Any] = await self.context.in_pool(self.config.reviewer._create_object, path, body)
        return result
