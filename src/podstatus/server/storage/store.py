"""The embedded API server's generic storage: kube-apiserver's generic registry store, in memory.

It does for every served resource what apiserver/pkg/registry/generic/registry/store.go does:
create, get, list, update, patch and delete with resourceVersion concurrency, UID and
resourceVersion preconditions, dry runs, graceful deletion and finalizers, TTLs, and a
watchable history of changes. What a kind adds (defaulting, validation, its subresources, how
it is deleted) is its :class:`~.strategy.Strategy`, registered in :data:`~.strategy.RESOURCES`
by :mod:`podstatus.server.registry`: this module names no kind. Errors are the
:mod:`podstatus.errors` classes, each carrying the ``Status`` body the real server would send.

Objects are kept as their encoded JSON (:class:`~.objects.Stored`). A stored version is never
changed after it is stored: every write builds a new one. Writes are serialised by one lock;
every write bumps one global resourceVersion and appends one event to its storage's history,
which watchers read at their own pace.
"""

from __future__ import annotations

import builtins
import heapq
import logging
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any

import msgspec

from ...errors import (
    MethodNotAllowedError,
    NotFoundError,
    UnsupportedMediaTypeError,
    status_body,
)
from ..fieldmanager import apply as _apply
from ..fieldmanager import options as fieldoptions
from ..fieldmanager import schema
from ..selectors import FieldSelector, LabelSelector
from .decoding import (
    APPLY_PATCH,
    STRATEGIC_MERGE_PATCH,
    check_namespace,
    decode_body,
    decode_patched,
    kind_key,
    private_copy,
)
from .deletion import KEEP, REMOVE, check_preconditions, plan_delete
from .errors import (
    FieldError,
    already_exists,
    bad_request,
    invalid,
    not_found,
)
from .listing import (
    ListPage,
    continue_expired,
    decode_continue,
    encode_continue,
    expired,
    list_expired,
    list_key,
)
from .meta import MAX_TIMESTAMP, parse_rfc3339, rfc3339
from .objects import Stored, WriteOptions
from .patching import decode_patch, patch_kind, patched
from .rest import before_create, before_update, check_subresource, generate_name
from .strategy import RESOURCES, ResourceInfo
from .tables import Tables
from .watch import Watch, matches, parse_selectors

__all__ = [
    "Store",
]

log = logging.getLogger(__name__)

_encode = msgspec.json.encode
_decode = msgspec.json.decode


def _dry_run_result(stored: Stored, rv: int) -> Stored:
    """What a dry-run create answers: the object as it would be stored, without a resourceVersion."""
    obj = stored.obj
    obj["metadata"].pop("resourceVersion", None)
    return Stored(obj, _encode(obj), stored.is_pod, rv)


class Store(Tables):
    """The served resources' verbs, each kind's rules from its strategy, over :class:`~.tables.Tables`.

    The history is kept as :class:`~.tables.Tables` says (``history_size``, ``history_seconds``,
    ``max_history``, ``clock``; kube-apiserver keeps 75 s). With ``reap_terminating`` (the
    default), an object whose graceful deletion ran out (a pod) is removed on the next store
    access (or :meth:`reap` call), like a kubelet that finished it would; without it, it stays
    until deleted with grace 0, as on a real server with no kubelet.

    ``strict_status`` (the default) adds podstatus's own checks to the real
    server's validation of pod status writes: a terminal phase may not move
    back to a non-terminal one and a condition's status must be ``True``,
    ``False`` or ``Unknown`` (SPEC section 5; they catch node agent bugs
    early). With ``strict_status=False`` status writes are validated exactly
    as kube-apiserver v1.37.2 does, which accepts both.

    Writes that name a field manager (every write over HTTP) keep
    ``metadata.managedFields`` as kube-apiserver does, and :meth:`apply` is
    server-side apply (:mod:`podstatus.server.fieldmanager.apply`). ``managed_fields=False``
    stops tracking updates (about 0.1 ms per write in-process); apply still works.
    """

    def __init__(
        self,
        *,
        history_size: int = 10000,
        history_seconds: float = 0.0,
        max_history: int = 100 * 1024,
        clock: Callable[[], float] = time.time,
        reap_terminating: bool = True,
        strict_status: bool = True,
        managed_fields: bool = True,
    ) -> None:
        super().__init__(
            history_size=history_size, history_seconds=history_seconds, max_history=max_history, clock=clock
        )
        self._reap_terminating = reap_terminating
        self._strict_status = strict_status
        self._managed_fields = managed_fields
        # (deadline, storage, namespace, name, uid) of objects being deleted gracefully
        self._deadlines: list[tuple[float, str, str, str, str]] = []
        # The resource whose objects are the namespaces (None: nothing is namespaced-checked).
        self._scope = next((i for i in RESOURCES.values() if i.strategy.holds_namespaces), None)
        for info in RESOURCES.values():
            for name in info.strategy.seeds:
                self._seed(info, name)

    # -- basics ------------------------------------------------------------------------

    @property
    def strict_status(self) -> bool:
        """Whether pod status writes get podstatus's stricter checks (see the class docstring)."""
        return self._strict_status

    @property
    def reap_terminating(self) -> bool:
        """Whether pods whose graceful deletion ran out are removed (a simulated kubelet)."""
        return self._reap_terminating

    def _info(self, resource: str) -> ResourceInfo:
        info = RESOURCES.get(resource)
        if info is None:
            message = "the server could not find the requested resource"
            raise NotFoundError(message, status=status_body(404, "NotFound", message))
        return info

    def _check_namespace_exists(self, namespace: str | None) -> None:
        """404 unless a namespaced object may be created in ``namespace`` (NamespaceLifecycle admission)."""
        scope = self._scope
        if scope is not None and (namespace or "") not in self._bucket(scope, None):
            raise not_found(scope.key, namespace or "")

    def _seed(self, info: ResourceInfo, name: str) -> Stored:
        """The cluster-scoped object ``name``, made as a create would make it when it does not exist
        yet, but as part of the world as it is: at the current resourceVersion, with no event."""
        bucket = self._bucket(info, None)
        found = bucket.get(name)
        if found is not None:
            return found
        obj: dict[str, Any] = {"kind": info.kind, "apiVersion": info.api_version, "metadata": {"name": name}}
        errors: builtins.list[FieldError] = []
        info.strategy.prepare_create(obj, errors)
        info.strategy.canonicalize(obj)
        meta = obj["metadata"]
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = rfc3339(self._clock())
        stored = bucket[name] = self._stored(info, obj, info.strategy.decode(obj, 422), self._rv)
        return stored

    # -- reads -------------------------------------------------------------------------

    def get(self, resource: str, namespace: str | None, name: str) -> Stored:
        """The current version; raises NotFoundError."""
        info = self._info(resource)
        with self._lock:
            self._maybe_reap()
            found = self._bucket(info, namespace).get(name)
            if found is None:
                raise not_found(info.key, name)
            return info.view(found)

    def list(
        self,
        resource: str,
        namespace: str | None = None,
        *,
        label_selector: str | LabelSelector | None = None,
        field_selector: str | FieldSelector | None = None,
    ) -> tuple[builtins.list[Stored], int]:
        """Matching objects (sorted by namespace and name) and the list's resourceVersion."""
        info = self._info(resource)
        ls, fs = parse_selectors(info.key, label_selector, field_selector)
        with self._lock:
            self._maybe_reap()
            items = self._snapshot(info, namespace)
            rv = self._rv
        if ls is not None or fs is not None:
            items = [s for s in items if matches(s.sel, ls, fs)]
        if info.strategy.converts:
            items = [info.view(s) for s in items]
        return items, rv

    def list_page(
        self,
        resource: str,
        namespace: str | None = None,
        *,
        label_selector: str | LabelSelector | None = None,
        field_selector: str | FieldSelector | None = None,
        limit: int | None = None,
        continue_token: str | None = None,
        exact_resource_version: int | None = None,
    ) -> ListPage:
        """One page of a list, as kube-apiserver pages: at most ``limit`` items (none or <= 0:
        all), and a ``continue`` token when more match. Every page of a list shows the objects
        as they were at the first page's resourceVersion; a token older than the history
        answers 410 Expired with a token that goes on at the current state instead.
        ``exact_resource_version``: the objects as they were then (``resourceVersionMatch=Exact``,
        or a limit with a resourceVersion); 410 Expired when older than the history."""
        info = self._info(resource)
        ls, fs = parse_selectors(info.key, label_selector, field_selector)
        start: tuple[str, str] | None = None
        at: int | None = None
        if continue_token:
            start, token_rv = decode_continue(continue_token, info, namespace)
            at = token_rv if token_rv > 0 else None
        elif exact_resource_version is not None:
            at = exact_resource_version
        with self._lock:
            self._maybe_reap()
            dropped = self._dropped(info)
            if at is not None and start is None and at < dropped:
                raise list_expired()
            if at is None:
                items, rv = self._snapshot(info, namespace), self._rv
            else:
                if at < dropped and start is not None:
                    raise continue_expired(info, namespace, start)
                items, rv = self._state_at(info, namespace, at, start), at
        if ls is not None or fs is not None:
            items = [s for s in items if matches(s.sel, ls, fs)]
        if start is not None:
            items = [s for s in items if list_key(info, s) >= start]
        if info.strategy.converts:
            items = [info.view(s) for s in items]
        if limit is None or limit <= 0 or len(items) <= limit:
            return ListPage(items, rv)
        page = items[:limit]
        last = list_key(info, page[-1])
        token = encode_continue(info, namespace, (last[0], last[1] + "\x00"), rv)
        remaining = len(items) - limit if ls is None and fs is None else None
        return ListPage(page, rv, token, remaining)

    # -- writes ------------------------------------------------------------------------

    def create(
        self,
        resource: str,
        namespace: str | None,
        body: Any,
        *,
        options: WriteOptions | None = None,
        field_manager: str | None = None,
        tracker: _apply.Tracker | None = None,
    ) -> Stored:
        """Create an object (``generateName`` honoured); returns what was stored.

        A namespaced object needs its namespace to exist (404 otherwise, as kube-apiserver's
        NamespaceLifecycle admission answers); ``default``, ``kube-system``, ``kube-public``
        and ``kube-node-lease`` always do, others are created as ``namespaces``.

        With ``field_manager`` the object gets its ``managedFields`` entry, as over HTTP
        (``tracker`` is how an apply creates).
        """
        info = self._info(resource)
        opts = options if options is not None else WriteOptions(field_validation="Ignore")
        obj = private_copy(body, info)
        decode_body(info, obj, opts, raw=body)
        strategy = info.strategy
        obj = strategy.to_storage(obj)
        meta = obj["metadata"]
        check_namespace(info, namespace, meta)
        name = meta.get("name") or ""
        generate = meta.get("generateName") or ""
        errors, requested = before_create(info, meta)
        if not strategy.track_create:
            tracker = None
        elif tracker is None and field_manager is not None and self._managed_fields:
            tracker = _apply.UpdateTracker(field_manager, now=self._clock(), create=True)
        # Admission plugins (not defaulting) set these: they are nobody's fields.
        admitted = strategy.admitted_fields(obj)
        strategy.prepare_create(obj, errors)
        if errors:
            raise invalid(info.kind, name or generate, errors, info.kind_group)
        with self._lock:
            self._maybe_reap()
            bucket = self._bucket(info, namespace)
            if not name:
                name = generate_name(generate[: strategy.name_limit - 5], bucket)
                meta["name"] = name
                check: builtins.list[FieldError] = []
                strategy.check_name(name, check)
                if check:
                    raise invalid(info.kind, name, check, info.kind_group)
            if info.namespaced:
                self._check_namespace_exists(namespace)
            if name in bucket:
                raise already_exists(info.key, name)
            strategy.canonicalize(obj)
            rv = self._rv + 1
            meta["uid"] = str(uuid.uuid4())
            meta["resourceVersion"] = str(rv)
            meta["creationTimestamp"] = rfc3339(self._clock())
            typed = strategy.decode(obj, 400)
            obj, typed = self._track(info, None, obj, typed, tracker, requested, admitted)
            if opts.dry_run:
                # As it would be stored, less the resourceVersion only storage hands out.
                return info.view(_dry_run_result(self._stored(info, obj, typed, rv), self._rv))
            stored = self._stored(info, obj, typed, rv)
            bucket[name] = stored
            self._record("ADDED", info, namespace or "", stored, None)
            return info.view(stored)

    def ensure_namespace(self, name: str) -> Stored:
        """The namespace ``name``, made when it does not exist yet: for in-process users that
        set up a world (tests, ``podstatus simulate``). Like the default namespaces it
        is part of the world as it is (no new resourceVersion, no watch event); clients
        create namespaces through the API (``kubectl create namespace``)."""
        if self._scope is None:
            raise RuntimeError("no served resource holds namespaces")
        with self._lock:
            return self._seed(self._scope, name)

    def update(
        self,
        resource: str,
        namespace: str | None,
        name: str,
        body: Any,
        *,
        subresource: str | None = None,
        options: WriteOptions | None = None,
        field_manager: str | None = None,
    ) -> Stored:
        """Replace an object (PUT); with ``subresource="status"`` only its status changes.
        ``field_manager`` tracks the write in ``managedFields``."""
        info = self._info(resource)
        check_subresource(info, subresource)
        opts = options if options is not None else WriteOptions(field_validation="Ignore")
        obj = private_copy(body, info)
        decode_body(info, obj, opts, raw=body)
        obj = info.strategy.to_storage(obj)
        meta = obj["metadata"]
        check_namespace(info, namespace, meta)
        if meta.get("name") and meta["name"] != name:
            raise bad_request(
                f"the name of the object ({meta['name']}) does not match the name on the URL ({name})"
            )
        with self._lock:
            self._maybe_reap()
            current = self._current(info, namespace, name)
            with self._dry(opts):
                return info.view(
                    self._write(
                        info, namespace or "", current, obj, subresource, bad=400,
                        tracker=self._update_tracker(field_manager, subresource),
                    )
                )  # fmt: skip

    def patch(
        self,
        resource: str,
        namespace: str | None,
        name: str,
        patch: bytes | dict[str, Any] | builtins.list[Any],
        patch_type: str = STRATEGIC_MERGE_PATCH,
        *,
        subresource: str | None = None,
        options: WriteOptions | None = None,
        field_manager: str | None = None,
        force: bool = False,
    ) -> Stored:
        """Patch an object (``patch_type``: a patch content type, or strategic/merge/json/apply).

        ``metadata.uid`` and ``metadata.resourceVersion`` in the patch act as
        preconditions, as on the real server. ``field_manager`` tracks the write in
        ``managedFields``; an apply patch needs it (see :meth:`apply`).
        """
        info = self._info(resource)
        check_subresource(info, subresource)
        kind = patch_kind(patch_type)
        if kind == APPLY_PATCH:
            if isinstance(patch, list):
                raise bad_request("an apply patch must be an object")
            return self.apply(
                resource,
                namespace,
                name,
                patch,
                field_manager=field_manager,
                force=force,
                subresource=subresource,
                options=options,
            )[0]
        data = decode_patch(patch)
        with self._lock:
            self._maybe_reap()
            current = self._current(info, namespace, name)
            # Decoded once for the whole write: the patch engine copies what it changes.
            cur = current.obj
            # The patch is written against this resource's wire form.
            base = info.view(current).obj if info.strategy.converts else cur
            result = patched(info, base, data, kind, subresource)
            opts = options if options is not None else WriteOptions(field_validation="Ignore")
            # podstatus refuses what kube-apiserver would store wrapped (2^40 as 0); kube-like stores it.
            decode_patched(info, result, data, kind, opts, wrap=not self._strict_status, raw=patch)
            result = info.strategy.to_storage(result)
            with self._dry(opts):
                written = self._write(
                    info, namespace or "", current, result, subresource, bad=422, patch=True,
                    tracker=self._update_tracker(field_manager, subresource), cur=cur,
                )  # fmt: skip
            return info.view(written)

    def apply(
        self,
        resource: str,
        namespace: str | None,
        name: str,
        body: bytes | str | Mapping[str, Any],
        *,
        field_manager: str | None,
        force: bool = False,
        subresource: str | None = None,
        options: WriteOptions | None = None,
    ) -> tuple[Stored, bool]:
        """Server-side apply of a YAML or JSON configuration; returns (the result, whether it was created).

        The configuration is merged into the object (created when absent, in an existing
        namespace), ``field_manager`` owns its fields from then on, and a field another
        manager owns with another value is a 409 Conflict unless ``force``. See
        :mod:`podstatus.server.fieldmanager.apply`.
        """
        info = self._info(resource)
        check_subresource(info, subresource)
        if info.strategy.converts:
            # Stored in another version's form: apply would have to merge and own fields in both.
            message = f"server-side apply is not supported for {info.key} by this server"
            raise UnsupportedMediaTypeError(message, status=status_body(415, "UnsupportedMediaType", message))
        fieldoptions.validate_field_manager("PATCH", field_manager, apply=True, force=None)
        manager = field_manager or ""
        opts = options if options is not None else WriteOptions(field_validation="Ignore")
        config = _apply.parse_apply_body(body)
        _apply.check_type(config, info.kind, info.api_version)
        original = _decode(_encode(config))
        found = schema.prune(kind_key(info), config)
        if found.unknown:
            # Whatever fieldValidation says: the field manager cannot type the configuration.
            raise _apply.undeclared_fields(original, found.unknown, kind=info.kind, api_version=info.api_version,
                                           schema=self._schema(info))  # fmt: skip
        decode_body(info, config, opts)  # numbers out of range
        with self._lock:
            self._maybe_reap()
            current = self._bucket(info, namespace).get(name)
            if not info.strategy.apply_existing:
                # Apply may only create these: 404 when absent, and the create answers 409 when present.
                self._current(info, namespace, name)
                current = None
            if current is None:
                if subresource:
                    self._current(info, namespace, name)  # 404
                if info.namespaced:
                    self._check_namespace_exists(namespace)
            merged, tracker = _apply.prepare_apply(
                kind=info.kind, api_version=info.api_version, schema=self._schema(info),
                live=current.obj if current is not None else None, config=config, manager=manager,
                subresource=subresource or "", force=force, now=self._clock(),
            )  # fmt: skip
            meta = merged.setdefault("metadata", {})
            if meta.get("name") and meta["name"] != name:
                raise bad_request(
                    f"the name of the object ({meta['name']}) does not match the name on the URL ({name})"
                )
            if current is None:
                meta["name"] = name
                return self.create(resource, namespace, merged, options=opts, tracker=tracker), True
            with self._dry(opts):
                written = self._write(
                    info, namespace or "", current, merged, subresource, bad=422, patch=True, tracker=tracker
                )
            return info.view(written), False

    def guaranteed_update(
        self, resource: str, namespace: str | None, name: str, mutate: Callable[[dict[str, Any]], None]
    ) -> Stored:
        """Change the current object with ``mutate`` (it gets a private copy of the wire dict and
        may raise to refuse) and store the result, all under the write lock (kube-apiserver's
        GuaranteedUpdate): what a registry's own subresources (a pod's binding) are built on."""
        info = self._info(resource)
        with self._lock:
            self._maybe_reap()
            current = self._current(info, namespace, name)
            obj = current.obj
            mutate(obj)
            return self._commit(info, namespace or "", current, obj)

    def delete(
        self,
        resource: str,
        namespace: str | None,
        name: str,
        *,
        grace_period_seconds: int | None = None,
        uid: str | None = None,
        resource_version: str | None = None,
        dry_run: bool = False,
    ) -> tuple[Stored, bool]:
        """Delete an object; returns (its last version, whether it is gone).

        As kube-apiserver v1.37.2: an object whose strategy is graceful (a pod bound to a
        node and not in a terminal phase) is deleted gracefully: it gets ``deletionTimestamp`` and
        ``deletionGracePeriodSeconds`` and stays (second value ``False``) until
        deleted with grace 0 or (with ``reap_terminating``) its grace runs out;
        a second delete may only shorten the grace period. A pod deleted at
        once is first written with ``deletionTimestamp`` and grace 0 (a
        MODIFIED event), then removed; the answer is that last version.
        ``uid`` and ``resource_version`` are preconditions (409 Conflict). With
        ``dry_run`` nothing changes: the answer is the object as the delete would leave it
        (unchanged when it would go at once).
        """
        info = self._info(resource)
        if not info.strategy.deletable:
            message = f"{info.key} cannot be deleted from this server"
            raise MethodNotAllowedError(message, status=status_body(405, "MethodNotAllowed", message))
        ns = namespace or ""
        with self._lock, self._dry(WriteOptions(dry_run=dry_run)):
            self._maybe_reap()
            current = self._current(info, namespace, name)
            cur = current.obj
            check_preconditions(info.kind, name, cur["metadata"], uid, resource_version)
            plan = plan_delete(info.strategy, cur, grace_period_seconds)
            if plan.action == KEEP:
                return info.view(current), False
            if plan.action == REMOVE:
                return info.view(self._remove(info, ns, current)), True
            stored = self._mark_deleted(info, ns, current, plan.period, plan.deadline,
                                        bump_generation=plan.bump_generation, obj=cur)  # fmt: skip
            if plan.then_remove:
                return info.view(self._remove(info, ns, stored)), True
            return info.view(stored), False

    # -- write helpers -----------------------------------------------------------------

    def _mark_deleted(
        self,
        info: ResourceInfo,
        ns: str,
        current: Stored,
        period: int,
        deadline: float | None = None,
        *,
        bump_generation: bool = True,
        obj: dict[str, Any] | None = None,
    ) -> Stored:
        """Write ``deletionTimestamp`` (now + ``period`` unless ``deadline``) and the grace period.
        ``obj``: ``current.obj`` when the caller decoded it already (it is changed)."""
        if deadline is None:
            deadline = self._clock() + period
        # A grace period of centuries (any int64 is accepted) ends at the last representable second.
        deadline = min(max(deadline, 0.0), MAX_TIMESTAMP)
        if obj is None:
            obj = current.obj
        new_meta = obj["metadata"]
        new_meta["deletionTimestamp"] = rfc3339(deadline)
        new_meta["deletionGracePeriodSeconds"] = period
        if bump_generation and new_meta.get("generation"):
            new_meta["generation"] = int(new_meta["generation"]) + 1
        stored = self._commit(info, ns, current, obj)
        if period > 0 and self._reap_terminating and not self._dry_run:
            heapq.heappush(self._deadlines, (deadline, info.storage, ns, stored.name, stored.uid))
        return stored

    def _current(self, info: ResourceInfo, namespace: str | None, name: str) -> Stored:
        current = self._bucket(info, namespace).get(name)
        if current is None:
            raise not_found(info.key, name)
        return current

    def _write(
        self,
        info: ResourceInfo,
        ns: str,
        current: Stored,
        new: dict[str, Any],
        subresource: str | None,
        *,
        bad: int,
        patch: bool = False,
        tracker: _apply.Tracker | None = None,
        cur: dict[str, Any] | None = None,
    ) -> Stored:
        """Shared by update and patch: preconditions, strategy, validation, commit (lock held).
        ``cur``: ``current.obj`` when the caller decoded it already (it is not changed)."""
        name = current.name
        if cur is None:
            cur = current.obj
        meta, errors, requested = before_update(info, ns, name, cur, new, patch=patch)
        strategy = info.strategy
        if subresource == "status":
            # The status strategy: the rest of the object stays as it was.
            obj = dict(cur)
            obj["metadata"] = meta
            status = new.get("status")
            obj["status"] = status if status is not None else {}
        elif subresource:
            obj = strategy.prepare_subresource(subresource, cur, new, meta, errors)
        else:
            obj = dict(new)
            obj["kind"] = cur.get("kind", info.kind)
            obj["apiVersion"] = cur.get("apiVersion", info.api_version)
            obj["metadata"] = meta
            # Writes to the main resource leave the status alone, as the real server does.
            if "status" in cur:
                obj["status"] = cur["status"]
            else:
                obj.pop("status", None)
        strategy.prepare_update(cur, obj, subresource, errors)
        # Types first: the semantic checks below may then trust them.
        typed = strategy.decode(obj, bad)
        strategy.validate_update(cur, obj, subresource, errors, strict=self._strict_status)
        # Managed fields before validation: an apply's conflicts come first, as on the real server.
        obj, typed = self._track(info, cur, obj, typed, tracker, requested)
        if errors:
            raise invalid(info.kind, name, errors, info.kind_group)
        strategy.admit_update(name, cur, obj, subresource, self._lookup)
        if strategy.unchanged(typed, current, obj, cur):
            return current  # nothing changed: no new resourceVersion, no event (as the real server)
        if (
            meta.get("deletionTimestamp")
            and not meta.get("finalizers")
            and meta.get("deletionGracePeriodSeconds") == 0
        ):
            # The last finalizer of an object deleted with grace 0 is gone: it goes now.
            return self._remove(info, ns, current)
        return self._commit(info, ns, current, obj, typed)

    def _lookup(self, resource: str, name: str) -> dict[str, Any] | None:
        """A cluster-scoped object's wire dict for a strategy's admission (lock held), None when absent."""
        found = self._bucket(self._info(resource), None).get(name)
        return found.obj if found is not None else None

    def _update_tracker(self, field_manager: str | None, subresource: str | None) -> _apply.Tracker | None:
        if field_manager is None or not self._managed_fields:
            return None  # an untracked write keeps the managed fields as they are
        return _apply.UpdateTracker(field_manager, subresource=subresource or "", now=self._clock())

    @staticmethod
    def _schema(info: ResourceInfo) -> _apply.Schema:
        return _apply.schema_for(info.kind, info.api_version, info.merge_keys)

    def _track(
        self,
        info: ResourceInfo,
        live: dict[str, Any] | None,
        obj: dict[str, Any],
        typed: Any,
        tracker: _apply.Tracker | None,
        requested: Any,
        hidden: tuple[str, ...] = (),
    ) -> tuple[dict[str, Any], Any]:
        """Set the ``managedFields`` of a write (the field manager's hook; lock held).

        The tracker compares the objects in their stored wire form (a typed object printed as
        the real server prints it), as the real field manager compares typed objects. ``hidden``
        spec fields (set by admission, not by the writer) are nobody's.
        """
        if tracker is None:
            return obj, typed
        new = obj if typed is None else info.strategy.printed(obj, typed, live)
        if hidden and isinstance(new.get("spec"), dict):
            new = dict(new, spec={k: v for k, v in new["spec"].items() if k not in hidden})
        entries = tracker.managed_fields(
            info.kind, str(obj.get("apiVersion") or "v1"), self._schema(info), live, new, requested
        )
        if entries == (obj["metadata"].get("managedFields") or []):
            return obj, typed
        if entries:
            obj["metadata"]["managedFields"] = entries
        else:
            obj["metadata"].pop("managedFields", None)
        if typed is not None:
            typed = info.strategy.with_managed_fields(typed, entries)
        return obj, typed

    def _commit(
        self, info: ResourceInfo, ns: str, current: Stored, obj: dict[str, Any], typed: Any = None
    ) -> Stored:
        if typed is None:
            typed = info.strategy.decode(obj, 422)
        if self._dry_run:
            # Validated and answered, never stored: the resourceVersion stays the current one.
            return self._stored(info, obj, typed, current.rv)
        stored = self._stored(info, obj, typed, self._rv + 1)
        self._bucket(info, ns)[current.name] = stored
        self._record("MODIFIED", info, ns, stored, current)
        return stored

    @staticmethod
    def _stored(info: ResourceInfo, obj: dict[str, Any], typed: Any, rv: int) -> Stored:
        """A new version at ``rv``. A typed object is stored in its canonical wire form, printed
        as the API server prints it (a pod's null times, ``{}`` states...)."""
        if typed is None:
            obj["metadata"]["resourceVersion"] = str(rv)
            return Stored(obj, _encode(obj), None, rv)
        return Stored.from_json(info.kind, info.strategy.encode(typed, rv), True, rv)

    # -- graceful deletion deadlines ---------------------------------------------------

    def _maybe_reap(self) -> None:
        if self._deadlines and self._deadlines[0][0] <= self._clock():
            self._reap_locked()
        if self._expiries and self._expiries[0][0] <= self._clock():
            self._expire_locked()

    def reap(self) -> int:
        """Remove pods whose graceful deletion ran out (and expired Events); returns how many pods went."""
        with self._lock:
            self._expire_locked()
            return self._reap_locked()

    def _reap_locked(self) -> int:
        count = 0
        now = self._clock()
        while self._deadlines and self._deadlines[0][0] <= now:
            _, storage, ns, name, uid = heapq.heappop(self._deadlines)
            info = RESOURCES[storage]
            current = (self._objects.get(storage) or {}).get(ns, {}).get(name)
            if current is None or current.uid != uid:
                continue
            meta = current.metadata
            if meta.get("finalizers"):
                continue
            stamp = meta.get("deletionTimestamp")
            if not stamp or parse_rfc3339(stamp) > now:
                continue
            self._remove(info, ns, current)
            count += 1
        return count

    # -- watch -------------------------------------------------------------------------

    def watch(
        self,
        resource: str,
        namespace: str | None = None,
        *,
        resource_version: str | None = None,
        label_selector: str | LabelSelector | None = None,
        field_selector: str | FieldSelector | None = None,
        send_initial_events: bool | None = None,
    ) -> Watch:
        """Start a watch. Without a resourceVersion (or with "0") the current objects
        come first as ADDED events; with one, the changes after it (410 Expired when
        it is older than the history)."""
        info = self._info(resource)
        ls, fs = parse_selectors(info.key, label_selector, field_selector)
        start: int | None = None
        if resource_version not in (None, "", "0"):
            try:
                start = int(str(resource_version))
            except ValueError:
                raise bad_request(f'invalid resource version "{resource_version}"') from None
        with self._lock:
            self._maybe_reap()
            initial: builtins.list[Stored] = []
            if start is None:
                if send_initial_events is not False:
                    initial = [s for s in self._snapshot(info, namespace) if matches(s.sel, ls, fs)]
                start = self._rv
            else:
                dropped = self._dropped(info)
                if start < dropped:
                    raise expired(start, dropped)
            return Watch(self, info, namespace, ls, fs, start, initial, send_initial_events is True)
