"""The strategy registry: what each served resource adds to the store's generic handling.

As kube-apiserver's REST strategies (pkg/registry/core/pod/strategy.go and its peers) beside
the generic store (apiserver/pkg/registry/generic/registry/store.go): a :class:`ResourceInfo`
names a resource and carries its :class:`Strategy`; :func:`register` serves it. The per-kind
strategies live in :mod:`podstatus.server.registry`; the store calls their hooks and never
names a kind, so adding a kind never edits the store.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Mapping
from typing import Any

import msgspec

from .errors import FieldError
from .meta import check_subdomain
from .objects import Stored

__all__ = ["RESOURCES", "Lookup", "ResourceInfo", "Strategy", "register"]

_encode = msgspec.json.encode

# How a strategy reads another stored object (resource key, name; cluster-scoped): its wire dict or None.
Lookup = Callable[[str, str], dict[str, Any] | None]


class Strategy:
    """What a resource adds to the store's generic handling (kube-apiserver's REST strategy).

    The base class is a plain resource with ``spec`` and ``status``; the registries subclass it.
    Hooks work on private copies and append to ``errors`` (answered with 422 Invalid); a
    malformed body raises :class:`~podstatus.errors.BadRequestError` (400) itself. Hooks that
    take a ``typed`` object get what :meth:`decode` returned (None for kinds kept as dicts).
    """

    # True when the wire form differs from the stored one (from_storage/to_storage convert).
    converts = False
    # Seconds an object lives after its last write (None: for ever).
    ttl: float | None = None
    # Subresources written through prepare_subresource (besides status, which every kind with one has).
    subresources: tuple[str, ...] = ()
    # The resource's name in etcd keys, when it differs from the resource (kube-apiserver keeps nodes as minions).
    storage_path = ""
    # Whether this resource holds the namespaces that namespaced objects must be created in.
    holds_namespaces = False
    # Objects every store starts with (names; created without an event, as part of the world).
    seeds: tuple[str, ...] = ()
    # The longest name a generated one may have.
    name_limit = 253
    # Whether a create names its field manager in managedFields.
    track_create = True
    # Whether DELETE is served (a 405 otherwise).
    deletable = True
    # Whether a delete is graceful (deletionTimestamp now + grace_period, removed when it ran out).
    graceful = False
    # Whether server-side apply may change an existing object (it may only create otherwise).
    apply_existing = True

    def to_storage(self, obj: dict[str, Any]) -> dict[str, Any]:
        """A request body (already checked to be this kind) in the stored form."""
        return obj

    def from_storage(self, obj: dict[str, Any]) -> dict[str, Any]:
        """A stored object in this resource's wire form (a new dict)."""
        return obj

    def check_name(self, name: str, errors: builtins.list[FieldError]) -> None:
        """Validate ``metadata.name`` of a new object (a DNS subdomain unless the kind says otherwise)."""
        check_subdomain(name, "metadata.name", errors)

    def admitted_fields(self, obj: dict[str, Any]) -> tuple[str, ...]:
        """Spec fields an admission plugin will set on this new object (they are nobody's fields)."""
        return ()

    def prepare_create(self, obj: dict[str, Any], errors: builtins.list[FieldError]) -> None:
        """Default and validate a new object (stored form)."""
        obj.setdefault("spec", {})
        obj.setdefault("status", {})

    def canonicalize(self, obj: dict[str, Any]) -> None:
        """Last touches of a new object once it has its name (kube-apiserver's Canonicalize)."""

    def prepare_update(
        self,
        old: dict[str, Any],
        obj: dict[str, Any],
        subresource: str | None,
        errors: builtins.list[FieldError],
    ) -> None:
        """Default and validate a replacement (stored form; server-owned metadata already kept)."""

    def prepare_subresource(
        self,
        subresource: str,
        old: dict[str, Any],
        new: dict[str, Any],
        meta: dict[str, Any],
        errors: builtins.list[FieldError],
    ) -> dict[str, Any]:
        """The object a write to one of :attr:`subresources` stores (``meta``: the metadata to keep)."""
        raise NotImplementedError(subresource)

    def decode(self, obj: dict[str, Any], bad: int) -> Any:
        """The object decoded to its typed form (None: the kind is kept as a dict); a failure
        is answered with ``bad`` (400 or 422)."""
        return None

    def validate_update(
        self,
        old: dict[str, Any],
        obj: dict[str, Any],
        subresource: str | None,
        errors: builtins.list[FieldError],
        *,
        strict: bool,
    ) -> None:
        """Checks that trust the types (after :meth:`decode`); ``strict``: the store's strict_status."""

    def admit_update(
        self, name: str, old: dict[str, Any], obj: dict[str, Any], subresource: str | None, lookup: Lookup
    ) -> None:
        """Validating admission of a valid update (raises the error it answers with)."""

    def printed(self, obj: dict[str, Any], typed: Any, live: dict[str, Any] | None) -> dict[str, Any]:
        """The object as it will be stored, for the field manager to compare (``obj`` when untyped)."""
        return obj

    def with_managed_fields(self, typed: Any, entries: builtins.list[Any]) -> Any:
        """``typed`` with these managedFields entries."""
        return typed

    def encode(self, typed: Any, rv: int) -> bytes:
        """The stored JSON of a typed object at resourceVersion ``rv``."""
        raise NotImplementedError

    def unchanged(self, typed: Any, current: Stored, obj: dict[str, Any], old: dict[str, Any]) -> bool:
        """Whether an update changes nothing (then it gets no new resourceVersion, no event)."""
        return obj == old

    def grace_period(self, obj: dict[str, Any], requested: int | None) -> int:
        """The seconds a graceful delete waits (CheckGracefulDelete); 0 deletes at once."""
        return 0


class ResourceInfo:
    """Static facts about a served resource.

    ``key`` names it in :data:`RESOURCES` and in :class:`~podstatus.server.storage.store.Store`
    calls: the resource for the core group (``pods``), ``resource.group`` otherwise
    (``leases.coordination.k8s.io``), as kube-apiserver names it in its messages.
    ``storage`` is the key of the objects it serves: two resources may share one
    storage (``events`` and ``events.events.k8s.io``), the ``strategy`` of each
    converting between its wire form and the stored one.
    """

    __slots__ = (
        "api_version", "group", "has_status", "key", "kind", "kind_group", "list_kind", "merge_keys", "name",
        "namespaced", "singular", "storage", "strategy", "version",
    )  # fmt: skip

    def __init__(
        self,
        name: str,
        kind: str,
        *,
        namespaced: bool,
        merge_keys: Mapping[tuple[str, ...], str],
        group: str = "",
        version: str = "v1",
        storage: str | None = None,
        has_status: bool = True,
        strategy: Strategy | None = None,
    ) -> None:
        self.name = name
        self.kind = kind
        self.list_kind = kind + "List"
        self.singular = kind.lower()
        self.namespaced = namespaced
        self.merge_keys = merge_keys
        self.group = group
        self.version = version
        self.api_version = f"{group}/{version}" if group else version
        self.key = f"{name}.{group}" if group else name
        self.storage = storage or self.key
        self.has_status = has_status
        self.strategy = strategy if strategy is not None else Strategy()
        # The group of the kind validation errors name: the storage's (events.k8s.io's are core Events).
        self.kind_group = group if storage is None else ""

    def view(self, stored: Stored) -> Stored:
        """``stored`` in this resource's wire form (the same object unless the strategy converts)."""
        strategy = self.strategy
        if not strategy.converts:
            return stored
        obj = strategy.from_storage(stored.obj)
        return Stored(obj, _encode(obj), None, stored.rv)


# Filled by podstatus.server.registry when the server package is imported, in discovery's order.
RESOURCES: dict[str, ResourceInfo] = {}


def register(info: ResourceInfo) -> ResourceInfo:
    """Serve one more resource (or replace one)."""
    RESOURCES[info.key] = info
    return info
