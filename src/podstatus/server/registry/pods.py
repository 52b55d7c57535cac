"""Pods: their strategy (create, update, status, resize), graceful deletion, binding and eviction.

As kube-apiserver's pkg/registry/core/pod (strategy.go, storage/storage.go): pods are typed
(:class:`~podstatus.types.Pod`) and stored as the API server prints them; a create starts them
Pending with their QoS class; an update may change only what ``ValidatePodUpdate`` allows;
``pods/status`` keeps the spec and validates as ``ValidatePodStatusUpdate``; ``pods/resize``
is :mod:`.podresize`; a bound, unfinished pod is deleted gracefully. The rules themselves are
the pure functions of :mod:`.podrules`.
"""

from __future__ import annotations

import builtins
from typing import Any

import msgspec

from ...errors import ForbiddenError, status_body
from ...patch import POD_MERGE_KEYS
from ...types import InvalidObjectError, Pod
from ..storage.decoding import STRATEGIC_MERGE_PATCH
from ..storage.errors import FieldError, bad_request, conflict, invalid
from ..storage.meta import rfc3339
from ..storage.objects import Stored
from ..storage.store import Store
from ..storage.strategy import Lookup, ResourceInfo, Strategy, register
from . import podresize, podrules

__all__ = ["PODS", "PodStrategy", "bind", "evict", "eviction_options"]

_decode = msgspec.json.decode


class PodStrategy(Strategy):
    """podStrategy, podStatusStrategy and podResizeStrategy of kube-apiserver v1.37.2."""

    subresources = ("resize",)
    graceful = True

    def admitted_fields(self, obj: dict[str, Any]) -> tuple[str, ...]:
        spec = obj.get("spec")
        if not isinstance(spec, dict):
            return ()
        return tuple(k for k in podrules.ADMITTED_SPEC if k not in spec)

    def prepare_create(self, obj: dict[str, Any], errors: builtins.list[FieldError]) -> None:
        spec = obj.setdefault("spec", {})
        if isinstance(spec, dict):
            podrules.default_pod_spec(spec)
            podrules.default_tolerations(spec)
        # The real server starts every pod Pending; a status in the body is dropped.
        obj["status"] = {"phase": "Pending"}
        self.decode(obj, 400)
        obj["status"]["qosClass"] = podrules.qos_class(spec)
        podrules.validate_pod_spec(spec, errors)
        obj["metadata"]["generation"] = 1

    def prepare_update(
        self,
        old: dict[str, Any],
        obj: dict[str, Any],
        subresource: str | None,
        errors: builtins.list[FieldError],
    ) -> None:
        meta = obj["metadata"]
        if subresource == "status":
            # podStatusStrategy: ownerReferences stay too, the QoS class is backfilled.
            old_meta = old["metadata"]
            if "ownerReferences" in old_meta:
                meta["ownerReferences"] = old_meta["ownerReferences"]
            else:
                meta.pop("ownerReferences", None)
            status = obj.get("status")
            if isinstance(status, dict):
                status = obj["status"] = dict(status)
                old_qos = (old.get("status") or {}).get("qosClass")
                if not status.get("qosClass") and old_qos:
                    status["qosClass"] = old_qos
                podrules.convert_pod_ips(status)
                podrules.default_conditions(status)
        elif not subresource:
            spec = obj.get("spec")
            spec = obj["spec"] = dict(spec) if isinstance(spec, dict) else {}
            podrules.default_pod_spec(spec)
            podrules.default_tolerations(spec)
            podrules.check_spec_update(spec, old.get("spec") or {}, meta, errors)

    def prepare_subresource(
        self,
        subresource: str,
        old: dict[str, Any],
        new: dict[str, Any],
        meta: dict[str, Any],
        errors: builtins.list[FieldError],
    ) -> dict[str, Any]:
        spec = new.get("spec")
        if isinstance(spec, dict):
            spec = dict(spec)
            podrules.default_pod_spec(spec)
            new = dict(new, spec=spec)
        obj = podresize.prepare(old, new, meta)
        errors.extend(FieldError(*e) for e in podresize.validate(old, obj))
        return obj

    def decode(self, obj: dict[str, Any], bad: int) -> Pod:
        """The pod typed as the API declares it; ``bad`` is the code for a failure."""
        try:
            return Pod.from_dict(obj)
        except InvalidObjectError as err:
            if bad == 400:
                raise bad_request(f'Pod in version "v1" cannot be handled as a Pod: {err}') from None
            name = str(obj["metadata"].get("name", ""))
            raise invalid(
                "Pod", name, [FieldError(err.path or "<root>", "Invalid value", None, str(err))]
            ) from None

    def validate_update(
        self,
        old: dict[str, Any],
        obj: dict[str, Any],
        subresource: str | None,
        errors: builtins.list[FieldError],
        *,
        strict: bool,
    ) -> None:
        if subresource == "status":
            podrules.validate_pod_status(old, obj, errors, strict=strict)

    def admit_update(
        self, name: str, old: dict[str, Any], obj: dict[str, Any], subresource: str | None, lookup: Lookup
    ) -> None:
        if subresource == "resize":
            _admit_resize(name, old, obj, lookup)

    def printed(self, obj: dict[str, Any], typed: Any, live: dict[str, Any] | None) -> dict[str, Any]:
        """The pod as it will be stored (printed from its decoded form, as the real server prints
        it). Parts equal to the live object's are taken from it: only changed parts are printed."""
        out: dict[str, Any] = {}
        for key, value in obj.items():
            old = live.get(key) if live is not None else None
            if old is not None and (old is value or old == value):
                out[key] = old
            elif key in ("metadata", "spec", "status"):
                out[key] = _decode(getattr(typed, key).to_json())
            else:
                out[key] = value
        return out

    def with_managed_fields(self, typed: Any, entries: builtins.list[Any]) -> Any:
        pod: Pod = typed
        return pod.replace(metadata=pod.metadata.replace(managed_fields=entries or None))

    def encode(self, typed: Any, rv: int) -> bytes:
        pod: Pod = typed
        return pod.replace(metadata=pod.metadata.replace(resource_version=str(rv))).to_json()

    def unchanged(self, typed: Any, current: Stored, obj: dict[str, Any], old: dict[str, Any]) -> bool:
        # The stored JSON is this same printing of the stored pod (whose resourceVersion the
        # update kept): comparing the printings costs an encode, where comparing Pods cost a decode.
        pod: Pod = typed
        return pod.to_json() == current.raw

    def grace_period(self, obj: dict[str, Any], requested: int | None) -> int:
        """CheckGracefulDelete: the requested or the spec's period; unscheduled or finished pods go at once."""
        spec = obj.get("spec") or {}
        if requested is not None:
            period = requested
        else:
            period = int(spec.get("terminationGracePeriodSeconds", 30) or 0)
        if not spec.get("nodeName") or (obj.get("status") or {}).get("phase") in podrules.TERMINAL:
            period = 0
        return period if period >= 0 else 1


def _admit_resize(name: str, old: dict[str, Any], obj: dict[str, Any], lookup: Lookup) -> None:
    """The validating admission kube-apiserver runs on a resize: 403 as it words it."""
    node_name = (obj.get("spec") or {}).get("nodeName")
    node = lookup(NODES_KEY, node_name) if isinstance(node_name, str) else None
    refused = podresize.admission_error(old, obj, node)
    if refused is None:
        return
    why, cause = refused
    message = f'pods "{name}" is forbidden: {why}'
    details: dict[str, Any] = {"name": name, "kind": "pods"}
    if cause:
        details["causes"] = [{"reason": cause}]
    raise ForbiddenError(message, status=status_body(403, "Forbidden", message, **details))


# The resource a resize's admission reads the node from.
NODES_KEY = "nodes"

PODS = register(
    ResourceInfo("pods", "Pod", namespaced=True, merge_keys=POD_MERGE_KEYS, strategy=PodStrategy())
)


def bind(store: Store, namespace: str, name: str, node_name: str) -> Stored:
    """Set ``spec.nodeName`` of an unbound pod (the ``pods/binding`` subresource, BindingREST)."""

    def assign(obj: dict[str, Any]) -> None:
        spec = obj.get("spec") or {}
        if spec.get("nodeName"):
            raise conflict(
                "pods/binding", name, f'pod {name} is already assigned to node "{spec["nodeName"]}"'
            )
        obj["spec"] = dict(spec, nodeName=node_name)

    return store.guaranteed_update(PODS.key, namespace, name, assign)


# --- eviction (policy/v1 Eviction, EvictionREST) ------------------------------------------


def eviction_options(body: dict[str, Any], namespace: str, name: str) -> dict[str, Any] | None:
    """Check a decoded Eviction for the pod ``namespace/name`` (400 when it is not one, or names
    another pod); returns its DeleteOptions (None when it gives none)."""
    if body.get("kind", "Eviction") != "Eviction" or body.get("apiVersion", "policy/v1") not in (
        "policy/v1",
        "policy/v1beta1",
    ):
        raise bad_request(
            f"invalid Eviction: kind {body.get('kind')!r} apiVersion {body.get('apiVersion')!r}"
        )
    meta = body.get("metadata") or {}
    if not isinstance(meta, dict):
        raise bad_request("invalid Eviction: metadata must be an object")
    if meta.get("name") not in (None, "", name):
        raise bad_request("name in URL does not match name in Eviction object")
    if meta.get("namespace") not in (None, "", namespace):
        raise bad_request("namespace in URL does not match namespace in Eviction object")
    opts = body.get("deleteOptions")
    if opts is not None and not isinstance(opts, dict):
        raise bad_request("invalid Eviction: deleteOptions must be an object")
    if opts and opts.get("dryRun"):
        # Refuse rather than evict for real what the client meant as a rehearsal.
        raise bad_request("dryRun is not supported by this server")
    return opts


def evict(
    store: Store,
    namespace: str,
    name: str,
    *,
    grace_period_seconds: int | None = None,
    uid: str | None = None,
    resource_version: str | None = None,
) -> None:
    """Evict a pod: ``DisruptionTarget=True``, then a delete with the eviction's DeleteOptions.

    This server has no PodDisruptionBudgets, so every eviction is allowed, as in a cluster with
    none. ``uid`` and ``resource_version`` are the eviction's preconditions (409 when they miss).
    """
    new_rv = _mark_disruption_target(store, namespace, name, uid, resource_version)
    store.delete(
        PODS.key,
        namespace,
        name,
        grace_period_seconds=grace_period_seconds,
        uid=uid,
        resource_version=new_rv if resource_version else None,
    )


def _mark_disruption_target(store: Store, namespace: str, name: str, uid: str | None, rv: str | None) -> str:
    """kube-apiserver's first step of an eviction: the pod gets ``DisruptionTarget=True``.

    The eviction's preconditions are checked against the pod first (the same 409s as a
    delete's); the status write is pinned to the version read. Returns the new version.
    """
    current = store.get(PODS.key, namespace, name)
    obj = current.obj
    meta = obj["metadata"]
    if uid and uid != meta.get("uid"):
        raise conflict(
            "Pod", name, f"the UID in the precondition ({uid}) does not match the UID in record "
            f"({meta.get('uid')}). The object might have been deleted and then recreated",
        )  # fmt: skip
    if rv and rv != meta.get("resourceVersion"):
        raise conflict(
            "Pod", name, f"the ResourceVersion in the precondition ({rv}) does not match the "
            f"ResourceVersion in record ({meta.get('resourceVersion')}). The object might have been modified",
        )  # fmt: skip
    conditions = (obj.get("status") or {}).get("conditions") or []
    old = next((c for c in conditions if c.get("type") == "DisruptionTarget"), None)
    # As UpdatePodCondition: the transition time moves only when the status does.
    since = old.get("lastTransitionTime") if old is not None and old.get("status") == "True" else None
    condition = {
        "type": "DisruptionTarget",
        "status": "True",
        "reason": "EvictionByEvictionAPI",
        "message": "Eviction API: evicting",
        "lastTransitionTime": since or rfc3339(store.now()),
    }
    patch = {
        "metadata": {"resourceVersion": meta.get("resourceVersion")},
        "status": {"conditions": [condition]},
    }
    updated = store.patch(PODS.key, namespace, name, patch, STRATEGIC_MERGE_PATCH, subresource="status")
    return str(updated.metadata.get("resourceVersion"))
