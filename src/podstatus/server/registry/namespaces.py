"""Namespaces: their strategy, as kube-apiserver's pkg/registry/core/namespace serves them here.

A namespace's name is a DNS label; it is created with the ``kubernetes`` finalizer, phase
``Active`` and the ``kubernetes.io/metadata.name`` label (kept on every update). The four
namespaces of a new cluster exist from the start. This server does not delete namespaces (405):
nothing here finalizes their contents, so a namespace, once made, stays.
"""

from __future__ import annotations

import builtins
from typing import Any

from ..storage.errors import FieldError
from ..storage.meta import check_label_name
from ..storage.strategy import ResourceInfo, Strategy, register

__all__ = ["DEFAULT_NAMESPACES", "NAMESPACES", "NamespaceStrategy"]

DEFAULT_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
NAME_LABEL = "kubernetes.io/metadata.name"


class NamespaceStrategy(Strategy):
    """namespaceStrategy of kube-apiserver v1.37.2 (creates and updates; no deletion here)."""

    holds_namespaces = True
    seeds = DEFAULT_NAMESPACES
    name_limit = 63
    # kube-apiserver tracks them; this server never did for a create (kept as it was).
    track_create = False
    deletable = False
    apply_existing = False

    def check_name(self, name: str, errors: builtins.list[FieldError]) -> None:
        check_label_name(name, "metadata.name", errors)

    def prepare_create(self, obj: dict[str, Any], errors: builtins.list[FieldError]) -> None:
        spec = dict(obj.get("spec") or {})
        spec.setdefault("finalizers", ["kubernetes"])
        obj["spec"] = spec
        obj["status"] = {"phase": "Active"}

    def canonicalize(self, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        meta["labels"] = {**(meta.get("labels") or {}), NAME_LABEL: meta["name"]}

    def prepare_update(
        self,
        old: dict[str, Any],
        obj: dict[str, Any],
        subresource: str | None,
        errors: builtins.list[FieldError],
    ) -> None:
        # The name label stays whatever the write says.
        self.canonicalize(obj)


NAMESPACES = register(
    ResourceInfo("namespaces", "Namespace", namespaced=False, merge_keys={}, has_status=False,
                 strategy=NamespaceStrategy())
)  # fmt: skip
