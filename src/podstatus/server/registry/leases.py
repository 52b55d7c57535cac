"""Leases (coordination.k8s.io/v1): their strategy, as kube-apiserver's pkg/registry/coordination/lease.

The MicroTime fields are parsed as Go's ``time.Parse`` with ``2006-01-02T15:04:05.000000Z07:00``
parses them (a malformed one is a 400, as from the real decoder) and stored in UTC;
``leaseDurationSeconds`` > 0 and ``leaseTransitions`` >= 0.
"""

from __future__ import annotations

from typing import Any

from ..selectors import FIELD_GETTERS
from ..storage.errors import FieldError
from ..storage.strategy import ResourceInfo, Strategy, register
from .wire import Decoder, meta_field

__all__ = ["LEASES", "LeaseStrategy"]

_LEASE_SPEC = (
    "holderIdentity", "leaseDurationSeconds", "acquireTime", "renewTime", "leaseTransitions",
    "strategy", "preferredHolder",
)  # fmt: skip


class LeaseStrategy(Strategy):
    """coordination.k8s.io/v1 Leases: decoding of the spec, ValidateLeaseSpec."""

    _dec = Decoder("Lease")

    def _canonical(
        self, obj: dict[str, Any], errors: list[FieldError], old: dict[str, Any] | None = None
    ) -> None:
        dec = self._dec
        spec = dec.struct(obj, "spec", "Lease", "spec", "v1.LeaseSpec")
        for key in ("holderIdentity", "strategy", "preferredHolder"):
            dec.string(spec, key, "LeaseSpec", f"spec.{key}")
        for key in ("leaseDurationSeconds", "leaseTransitions"):
            dec.int32(spec, key, "LeaseSpec", f"spec.{key}")
        for key in ("acquireTime", "renewTime"):
            if key in spec:
                dec.time(spec, key, micro=True)
        # Only the API's fields, in its order; pointers left out when unset.
        spec = {k: spec[k] for k in _LEASE_SPEC if spec.get(k) is not None}
        # strategy and preferredHolder belong to CoordinatedLeaderElection, off by default in
        # v1.37: dropped unless the stored Lease already has them (DropDisabledSpecFields).
        old_spec = (old or {}).get("spec") or {}
        for key in ("strategy", "preferredHolder"):
            if key in spec and not old_spec.get(key):
                del spec[key]
        obj["spec"] = spec
        obj.pop("status", None)
        duration = spec.get("leaseDurationSeconds")
        if duration is not None and duration <= 0:
            errors.append(
                FieldError("spec.leaseDurationSeconds", "Invalid value", duration, "must be greater than 0")
            )
        transitions = spec.get("leaseTransitions")
        if transitions is not None and transitions < 0:
            errors.append(FieldError(
                "spec.leaseTransitions", "Invalid value", transitions, "must be greater than or equal to 0"
            ))  # fmt: skip
        if spec.get("preferredHolder") and not spec.get("strategy"):
            errors.append(FieldError(
                "spec.preferredHolder", "Forbidden", detail="may only be specified if `strategy` is defined"
            ))  # fmt: skip

    def prepare_create(self, obj: dict[str, Any], errors: list[FieldError]) -> None:
        self._canonical(obj, errors)

    def prepare_update(
        self, old: dict[str, Any], obj: dict[str, Any], subresource: str | None, errors: list[FieldError]
    ) -> None:
        self._canonical(obj, errors, old)


# --- Events ---------------------------------------------------------------------------


LEASES = register(
    ResourceInfo(
        "leases", "Lease", namespaced=True, merge_keys={}, group="coordination.k8s.io",
        has_status=False, strategy=LeaseStrategy(),
    )
)  # fmt: skip
FIELD_GETTERS[LEASES.key] = {
    "metadata.name": meta_field("name"),
    "metadata.namespace": meta_field("namespace"),
}
