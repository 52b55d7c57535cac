"""Server-side apply and ``metadata.managedFields`` for the embedded API server.

kube-apiserver keeps, on every object, who set which field: one ``managedFields``
entry per (manager, operation, subresource) with the field set it owns. This module
does the same, with the rules of k8s.io/apimachinery's field manager (v0.37) and
sigs.k8s.io/structured-merge-diff (see :mod:`podstatus.server.fieldmanager.fieldsets`):

- An **update** (create, PUT, any patch) gives its manager the fields it added or
  changed, compared with the live object, and takes them from every other manager; a
  field it removed is removed from every set. The manager's entry gets a new ``time``
  only when the write changed something it now owns. An object whose ``managedFields``
  were emptied (a write carrying ``managedFields: []`` or ``[{}]``) stays untracked
  until the next apply.
- An **apply** (PATCH ``application/apply-patch+yaml``) merges the configuration into
  the live object (or an empty one: create-on-apply); the applier owns exactly the
  configuration's fields from then on. Fields it set last time and no longer sends are
  removed unless another manager owns them. A field another manager owns with a
  different value is a conflict (409) unless ``force``, which takes it over.
- What the strategy resets is never owned: a pod's or node's ``status`` on the main
  resource, ``spec`` (and a pod's ``deletionTimestamp``/``ownerReferences``) on ``status``;
  nor are the metadata only the server sets (name, uid, resourceVersion...).
- At most ten update entries are kept; older ones merge into ``ancient-changes``.

The store calls in through two small hooks: a *tracker* (:class:`UpdateTracker`,
:class:`ApplyTracker`) that turns (live object, new object) into the new entries, and
:func:`prepare_apply`, which builds the object an apply writes.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import yaml

from ...errors import ApiError, BadRequestError, ConflictError, status_body
from .. import yamlbounds
from . import fieldschema
from . import fieldsets as fs
from .fieldsets import FieldSetError, Node, Schema

__all__ = [
    "ANCIENT_CHANGES",
    "BEFORE_FIRST_APPLY",
    "MAX_UPDATE_MANAGERS",
    "ApplyTracker",
    "ManagerEntry",
    "Schema",
    "Tracker",
    "UpdateTracker",
    "check_type",
    "decode_managed_fields",
    "encode_managed_fields",
    "parse_apply_body",
    "prepare_apply",
    "schema_for",
    "undeclared_fields",
]

log = logging.getLogger(__name__)

MAX_UPDATE_MANAGERS = 10
ANCIENT_CHANGES = "ancient-changes"
BEFORE_FIRST_APPLY = "before-first-apply"
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"

# Metadata only the server sets: never anyone's (the field manager's stripMeta).
_STRIPPED_META = frozenset((
    "name", "namespace", "creationTimestamp", "selfLink", "uid", "clusterName", "generation",
    "managedFields", "resourceVersion",
))  # fmt: skip

# What each strategy resets, by (kind, subresource): never owned by a writer of that endpoint.
_RESET: dict[tuple[str, str], tuple[tuple[str, ...], ...]] = {
    ("Pod", ""): (("status",),),
    ("Pod", "status"): (("spec",), ("metadata", "deletionTimestamp"), ("metadata", "ownerReferences")),
    # podResizeStrategy keeps only containers' resources and resizePolicy: the rest is the stored pod.
    ("Pod", "resize"): (("status",),),
    ("Node", ""): (("status",),),
    ("Node", "status"): (("spec",),),
    ("Namespace", ""): (("status",),),
    ("Namespace", "status"): (("spec",),),
}

# Go's zero value of each kind as the API server prints it: the "live object" of a create.
_EMPTY: dict[str, dict[str, Any]] = {
    "Pod": {"metadata": {"creationTimestamp": None}, "spec": {"containers": None}, "status": {}},
    "Node": {"metadata": {"creationTimestamp": None}, "spec": {}, "status": {}},
    "Namespace": {"metadata": {"creationTimestamp": None}, "spec": {}, "status": {}},
    "Lease": {"metadata": {"creationTimestamp": None}, "spec": {}},
    "Event": {
        "metadata": {"creationTimestamp": None}, "involvedObject": {}, "source": {},
        "firstTimestamp": None, "lastTimestamp": None, "eventTime": None,
        "reportingComponent": "", "reportingInstance": "",
    },
}  # fmt: skip


_RESET_NODES: dict[tuple[str, str], Node] = {}


def _reset_node(kind: str, subresource: str) -> Node:
    node = _RESET_NODES.get((kind, subresource))
    if node is None:
        paths = _RESET.get((kind, subresource))
        if paths is None:
            paths = (("status",),) if not subresource else (("spec",),)
        node = _RESET_NODES[(kind, subresource)] = fs.from_paths(
            *(tuple("f:" + p for p in path) for path in paths)
        )
    return node


_SCHEMAS: dict[tuple[str, str], Schema] = {}


def schema_for(
    kind: str, api_version: str = "v1", merge_keys: Mapping[tuple[str, ...], str] | None = None
) -> Schema:
    """The apply schema of a kind: generated from the OpenAPI documents, else from its merge keys."""
    group = api_version.rpartition("/")[0]
    key = (kind, group)
    schema = _SCHEMAS.get(key)
    if schema is None:
        name = f"{group}/{kind}" if group else kind
        lists = fieldschema.LISTS.get(name)
        if lists is not None:
            schema = Schema(lists, fieldschema.ATOMIC.get(name, frozenset()))
        else:
            schema = Schema.from_merge_keys(merge_keys or {})
        _SCHEMAS[key] = schema
    return schema


# --- managers ------------------------------------------------------------------------------


@dataclass(slots=True)
class ManagerEntry:
    """One ``managedFields`` entry, its field set decoded."""

    manager: str
    operation: str
    api_version: str
    fields: Node
    time: str | None = None
    subresource: str = ""
    wire: dict[str, Any] | None = None  # the entry as read, reused while nothing in it changes

    @property
    def key(self) -> tuple[str, str, str, str]:
        # An applier is the same manager whatever apiVersion it applied with.
        version = "" if self.operation == "Apply" else self.api_version
        return (self.manager, self.operation, self.subresource, version)

    def describe(self) -> str:
        """As a conflict names it: ``"m" with subresource "status" using v1``."""
        text = json.dumps(self.manager)
        if self.subresource:
            text += f" with subresource {json.dumps(self.subresource)}"
        if self.operation == "Update":
            text += f" using {self.api_version}"
        return text

    def to_wire(self) -> dict[str, Any]:
        if self.wire is not None:
            return self.wire
        out: dict[str, Any] = {
            "manager": self.manager,
            "operation": self.operation,
            "apiVersion": self.api_version,
        }
        if self.time is not None:
            out["time"] = self.time
        out["fieldsType"] = "FieldsV1"
        out["fieldsV1"] = fs.encode(self.fields)
        if self.subresource:
            out["subresource"] = self.subresource
        return out


Managers = dict[tuple[str, str, str, str], ManagerEntry]


def decode_managed_fields(entries: Any, *, check: bool = True) -> Managers:
    """The entries of ``metadata.managedFields``; raises ValueError when they are malformed.
    ``check=False`` trusts the field sets (entries this server stored itself)."""
    out: Managers = {}
    if entries is None:
        return out
    if not isinstance(entries, list):
        raise ValueError("managedFields must be a list")
    for raw in entries:
        if not isinstance(raw, dict):
            raise ValueError("a managedFields entry must be an object")
        if raw.get("fieldsType") != "FieldsV1":
            raise ValueError(f"invalid fieldsType {raw.get('fieldsType')!r}")
        operation = raw.get("operation")
        if operation not in ("Apply", "Update"):
            raise ValueError(f"invalid operation {operation!r}")
        fields = raw.get("fieldsV1") or {}
        if check:
            try:
                fs.decode(fields)
            except FieldSetError as err:
                raise ValueError(str(err)) from None
        entry = ManagerEntry(
            manager=str(raw.get("manager") or ""),
            operation=operation,
            api_version=str(raw.get("apiVersion") or ""),
            fields=fields,
            time=raw.get("time") if isinstance(raw.get("time"), str) else None,
            subresource=str(raw.get("subresource") or ""),
            wire=raw if not check else None,
        )
        if entry.key in out:
            raise ValueError(f"duplicate managedFields entry for {entry.manager!r}")
        out[entry.key] = entry
    return out


@functools.lru_cache(maxsize=1024)
def _seconds(stamp: str | None) -> int:
    if not stamp:
        return 0
    try:
        return int(datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp())
    except ValueError:
        return 0


def encode_managed_fields(managers: Managers) -> list[dict[str, Any]]:
    """Entries in the real server's order: Apply before Update, then by time, manager, version, subresource."""
    ordered = sorted(
        managers.values(),
        key=lambda e: (e.operation, _seconds(e.time), e.manager, e.api_version, e.subresource),
    )
    return [e.to_wire() for e in ordered if e.fields]


def _is_reset(entries: Any) -> bool:
    """``managedFields: []`` or ``[{}]`` in a write: the client asks to forget them."""
    return isinstance(entries, list) and (entries == [] or entries == [{}])


def _cap_updates(managers: Managers) -> None:
    """Keep at most MAX_UPDATE_MANAGERS update entries: the oldest merge into ``ancient-changes``."""
    updaters = [k for k, e in managers.items() if e.operation == "Update"]
    if len(updaters) <= MAX_UPDATE_MANAGERS:
        return
    updaters.sort(key=lambda k: (_seconds(managers[k].time), json.dumps(managers[k].to_wire()["manager"])))
    length = len(updaters)
    first_of_version: dict[str, tuple[str, str, str, str]] = {}
    for k in updaters:
        if length <= MAX_UPDATE_MANAGERS:
            break
        entry = managers[k]
        bucket = (ANCIENT_CHANGES, "Update", "", entry.api_version)
        first = first_of_version.get(entry.api_version)
        if first is None:
            first_of_version[entry.api_version] = k
            continue
        if bucket not in managers:
            # The first of this version becomes the bucket.
            old = managers.pop(first)
            managers[bucket] = ManagerEntry(
                ANCIENT_CHANGES, "Update", entry.api_version, old.fields, old.time
            )
        merged = managers[bucket]
        managers[bucket] = ManagerEntry(
            ANCIENT_CHANGES, "Update", entry.api_version, fs.union(entry.fields, merged.fields), entry.time
        )
        del managers[k]
        length -= 1


# --- comparing objects ----------------------------------------------------------------------


def _stripped(obj: Mapping[str, Any]) -> dict[str, Any]:
    """The object as the field manager compares it: no apiVersion/kind, no server-set metadata."""
    out = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        out["metadata"] = {k: v for k, v in meta.items() if k not in _STRIPPED_META}
    return out


def _strip_set(node: Node) -> Node:
    """A set without the server-set metadata and the top-level type fields."""
    out = {k: v for k, v in node.items() if k not in ("f:apiVersion", "f:kind")}
    meta = out.get("f:metadata")
    if meta is not None:
        meta = {k: v for k, v in meta.items() if k[2:] not in _STRIPPED_META and k != "."}
        if meta:
            out["f:metadata"] = meta
        else:
            del out["f:metadata"]
    return out


def _changed_besides_managers(live: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    return _stripped(live) != _stripped(new)


def _update(
    managers: Managers,
    live: Mapping[str, Any],
    new: Mapping[str, Any],
    schema: Schema,
    reset: Node,
    skip: tuple[str, str, str, str] | None,
    *,
    force: bool,
    own: tuple[str, str, str, str] | None = None,
) -> tuple[Managers, fs.Comparison, dict[tuple[str, str, str, str], Node]]:
    """structured-merge-diff's update step: take changed fields from, and drop removed fields
    of, every manager but ``skip``. Returns the conflicts found (taken away when ``force``).
    ``own`` is the updater's entry: it only loses removed fields, as it gets every changed
    field back at once (the result is the same, the work is less)."""
    comparison = fs.compare(_stripped(live), _stripped(new), schema).exclude(reset)
    changed = comparison.changed()
    conflicts: dict[tuple[str, str, str, str], Node] = {}
    out: Managers = {}
    for key, entry in managers.items():
        if key == skip:
            out[key] = entry
            continue
        owned = entry.fields
        if key == own:
            # The writer's own fields: what it changed it keeps (the caller adds it back).
            clash: Node = {}
        else:
            clash = fs.intersection(owned, changed) if changed else {}
        if clash:
            conflicts[key] = clash
        if force or not clash:
            owned = fs.subtract(owned, clash) if clash else owned
            owned = fs.subtract(owned, comparison.removed) if comparison.removed else owned
        if owned is entry.fields:
            out[key] = entry
        elif owned:
            out[key] = ManagerEntry(entry.manager, entry.operation, entry.api_version, owned, entry.time,
                                    entry.subresource)  # fmt: skip
    return out, comparison, conflicts


def _now(clock_seconds: float) -> str:
    return datetime.fromtimestamp(int(clock_seconds), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _update_as(
    managers: Managers,
    live: Mapping[str, Any],
    new: Mapping[str, Any],
    *,
    manager: str,
    subresource: str,
    api_version: str,
    schema: Schema,
    reset: Node,
    now: str,
) -> Managers:
    """An Update operation by ``manager`` (the field manager's managedFieldsUpdater + Updater.Update)."""
    key = (manager, "Update", subresource, api_version)
    managers, comparison, _ = _update(managers, live, new, schema, reset, None, force=True, own=key)
    mine = _strip_set(comparison.changed())
    if mine:
        previous = managers.get(key)
        fields = fs.union(mine, previous.fields) if previous is not None else mine
        managers[key] = ManagerEntry(manager, "Update", api_version, fields, now, subresource)
    _cap_updates(managers)
    return managers


# --- trackers: the store's hook ---------------------------------------------------------------


class UpdateTracker:
    """Managed fields of a create, update or patch by ``manager`` (``subresource`` "" or "status")."""

    def __init__(self, manager: str, *, subresource: str = "", now: float, create: bool = False) -> None:
        self.manager = manager
        self.subresource = subresource or ""
        self.now = _now(now)
        self.create = create

    def managed_fields(
        self, kind: str, api_version: str, schema: Schema, live: Mapping[str, Any] | None, new: Mapping[str, Any],
        requested: Any,
    ) -> list[dict[str, Any]]:  # fmt: skip
        """The entries of the written object. ``live`` is None for a create; ``requested`` is
        the ``managedFields`` the request itself carried (None when it had none)."""
        live_meta = (live or {}).get("metadata") or {}
        base = live_meta.get("managedFields")
        if not self.subresource and requested is not None:
            # A client may write managedFields directly; an empty list resets them.
            if _is_reset(requested):
                base = []
            else:
                try:
                    if decode_managed_fields(requested):
                        base = requested
                except ValueError:
                    pass
        try:
            managers = decode_managed_fields(base, check=base is requested)
        except ValueError:
            log.debug("ignoring malformed managedFields of %s", kind)
            managers = {}
        if not managers and not self.create:
            # An existing object without managed fields stays untracked until applied to.
            return []
        start = live if live is not None else _EMPTY.get(kind, {"metadata": {"creationTimestamp": None}})
        managers = _update_as(
            managers, start, new, manager=self.manager, subresource=self.subresource, api_version=api_version,
            schema=schema, reset=_reset_node(kind, self.subresource), now=self.now,
        )  # fmt: skip
        return encode_managed_fields(managers)


@dataclass(slots=True)
class ApplyTracker:
    """Managed fields of an apply: what :func:`prepare_apply` worked out, finished once the
    written object (defaulted, through the strategy) is known; raises the 409 of a conflict."""

    manager: str
    subresource: str
    now: str
    force: bool
    managers: Managers
    applied: Node  # the configuration's fields, stripped and filtered: what the applier owns
    last_applied: str | None = None  # the new last-applied annotation, for kubectl
    allowed_conflicts: Node | None = None
    previous_time: str | None = None
    # kubectl's last-applied annotation is rewritten after the merge (as the real server's
    # lastAppliedUpdater does): the comparison sees the live value, so nobody gains or loses it.
    live_last_applied: str | None = None

    def managed_fields(
        self, kind: str, api_version: str, schema: Schema, live: Mapping[str, Any] | None, new: Mapping[str, Any],
        requested: Any,
    ) -> list[dict[str, Any]]:  # fmt: skip
        key = (self.manager, "Apply", self.subresource, "")
        start = live if live is not None else _EMPTY.get(kind, {"metadata": {"creationTimestamp": None}})
        reset = _reset_node(kind, self.subresource)
        if self.live_last_applied is not None:
            new = _with_annotation(new, LAST_APPLIED, self.live_last_applied)
        managers, _, conflicts = _update(self.managers, start, new, schema, reset, key, force=self.force)
        if conflicts and not self.force:
            if self.allowed_conflicts is not None and all(
                not fs.subtract(c, self.allowed_conflicts) for c in conflicts.values()
            ):
                # kubectl moving from client-side to server-side apply: its own old fields do not conflict.
                managers, _, _ = _update(self.managers, start, new, schema, reset, key, force=True)
            else:
                raise _conflict_error(self.managers, conflicts)
        changed = _changed_besides_managers(start, new)
        time = self.now if changed else self.previous_time
        if self.applied:
            managers[key] = ManagerEntry(
                self.manager, "Apply", api_version, self.applied, time, self.subresource
            )
        else:
            managers.pop(key, None)
        _cap_updates(managers)
        return encode_managed_fields(managers)


Tracker = UpdateTracker | ApplyTracker


def _with_annotation(obj: Mapping[str, Any], name: str, value: str) -> dict[str, Any]:
    meta = dict(obj.get("metadata") or {})
    meta["annotations"] = dict(meta.get("annotations") or {}, **{name: value})
    return dict(obj, metadata=meta)


def _conflict_error(managers: Managers, conflicts: Mapping[tuple[str, str, str, str], Node]) -> ConflictError:
    found: list[tuple[str, str]] = []  # (manager description, path)
    for key in sorted(conflicts, key=lambda k: json.dumps(k)):
        who = managers[key].describe()
        for elements in fs.paths(conflicts[key]):
            found.append((who, fs.render_path(elements)))
    if len(found) == 1:
        message = f"Apply failed with 1 conflict: conflict with {found[0][0]}: {found[0][1]}"
    else:
        lines: list[str] = []
        last = None
        for who, text in found:
            if who != last:
                lines.append(f"conflicts with {who}:")
                last = who
            lines.append(f"- {text}")
        message = f"Apply failed with {len(found)} conflicts: " + "\n".join(lines)
    causes = [
        {"reason": "FieldManagerConflict", "message": f"conflict with {who}", "field": path}
        for who, path in found
    ]
    body = status_body(409, "Conflict", message)
    body["details"] = {"causes": causes}
    return ConflictError(message, reason="Conflict", status=body)


# --- the apply request ---------------------------------------------------------------------------


def _bad_request(message: str) -> Exception:
    # Worded here, not imported from the store's errors: the store calls the field manager.
    return BadRequestError(message, status=status_body(400, "BadRequest", message))


def parse_apply_body(body: bytes | str | Mapping[str, Any]) -> dict[str, Any]:
    """The applied configuration (YAML or JSON); 400 when it is not an object."""
    if isinstance(body, Mapping):
        return json.loads(json.dumps(body))
    try:
        # Bounded as kube-apiserver's go-yaml: no alias bombs, no nesting deep enough to recurse on.
        text = body if isinstance(body, str) else bytes(body).decode("utf-8")
        data = yamlbounds.load(text)
    except yaml.MarkedYAMLError as err:
        # The real server's words around its own YAML parser's message: libyaml's, which
        # go-yaml ports, placed as go-yaml places them.
        raise _bad_request(f"error encoding patch: yaml: {_go_yaml_where(err)}{err.problem}") from None
    except (yaml.YAMLError, UnicodeDecodeError) as err:
        raise _bad_request(f"error encoding patch: yaml: {err}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise _bad_request(
            f"error decoding patch: error unmarshaling JSON: while decoding JSON: json: cannot unmarshal "
            f"{_go_type(data)} into Go value of type map[string]interface {{}}"
        )
    # YAML may give non-JSON scalars (dates); the wire form is JSON.
    result: dict[str, Any] = json.loads(json.dumps(data, default=str))
    return result


def _go_yaml_where(err: yaml.MarkedYAMLError) -> str:
    """``line N: `` as go-yaml's ``parser.fail`` words it (nothing for line 0)."""
    line = 0
    if err.problem_mark is not None and err.problem_mark.line:
        # go-yaml counts lines from 0 but adds one for a scanner's error only.
        line = err.problem_mark.line + (1 if isinstance(err, yaml.scanner.ScannerError) else 0)
    elif err.context_mark is not None and err.context_mark.line:
        line = err.context_mark.line
    return f"line {line}: " if line else ""


def _go_type(value: Any) -> str:
    if isinstance(value, list):
        return "array"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    return "string"


def undeclared_fields(
    config: Mapping[str, Any], paths: list[str], *, kind: str, api_version: str, schema: Schema
) -> Exception:
    """The 500 the real server answers when an applied configuration has fields its kind does
    not declare (whatever ``fieldValidation`` says). ``paths`` are decoder-style
    (``spec.containers[0].nope``); the answer names them as structured-merge-diff does."""
    lines = [f"{_smd_path(config, p, schema)}: field not declared in schema" for p in paths]
    text = lines[0] if len(lines) == 1 else "errors:\n" + "\n".join("  " + line for line in lines)
    return _internal(f"failed to create typed patch object ({_where(config, kind, api_version)}): {text}")


def _where(config: Mapping[str, Any], kind: str, api_version: str) -> str:
    meta = config.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    return (
        f"{meta.get('namespace') or ''}/{meta.get('name') or ''}; {group_version(api_version)}, Kind={kind}"
    )


def _smd_path(config: Mapping[str, Any], path: str, schema: Schema) -> str:
    """``spec.containers[0].nope`` as ``.spec.containers[name="c"].nope``: list items by key."""
    out = []
    value: Any = config
    spath: tuple[str, ...] = ()
    for part in path.replace("[", ".[").split("."):
        if not part:
            continue
        if part.startswith("["):
            index = int(part[1:-1])
            item = value[index] if isinstance(value, list) and index < len(value) else None
            lt = schema.list_type(spath)
            try:
                out.append(
                    fs.render_path((fs.item_element(item, lt, spath),)) if lt.kind != "atomic" else part
                )
            except FieldSetError:
                out.append(part)
            value = item
        else:
            out.append("." + part)
            spath = (*spath, part)
            value = value.get(part) if isinstance(value, dict) else None
    return "".join(out)


def check_type(config: Mapping[str, Any], kind: str, api_version: str) -> None:
    """400 unless the configuration is of the endpoint's kind and version (versionCheckManager)."""
    gvk = (str(config.get("apiVersion") or ""), str(config.get("kind") or ""))
    if gvk != (api_version, kind):
        group, _, version = gvk[0].rpartition("/")
        raise _bad_request(f"invalid object type: {group}/{version}, Kind={gvk[1]}")


def prepare_apply(
    *,
    kind: str,
    api_version: str,
    schema: Schema,
    live: Mapping[str, Any] | None,
    config: Mapping[str, Any],
    manager: str,
    subresource: str,
    force: bool,
    now: float,
) -> tuple[dict[str, Any], ApplyTracker]:
    """The object an apply writes (the configuration merged into ``live``, or into an empty
    object when ``live`` is None, minus what the applier gave up) and the tracker that
    finishes its managed fields. Raises the 400s of a malformed configuration."""
    check_type(config, kind, api_version)
    meta = config.get("metadata")
    if meta is not None and not isinstance(meta, dict):
        raise _bad_request("metadata must be an object")
    if isinstance(meta, dict) and meta.get("managedFields") is not None:
        raise _bad_request("metadata.managedFields must be nil")
    key = (manager, "Apply", subresource, "")
    try:
        managers = decode_managed_fields(
            ((live or {}).get("metadata") or {}).get("managedFields"), check=False
        )
    except ValueError:
        managers = {}
    reset = _reset_node(kind, subresource)
    stamp = _now(now)
    if live is not None and not managers:
        # Fields set before anyone applied belong to a stand-in manager, so an apply can conflict with them.
        managers = _update_as(
            {}, _EMPTY.get(kind, {"metadata": {}}), live, manager=BEFORE_FIRST_APPLY, subresource=subresource,
            api_version=api_version, schema=schema, reset=reset, now=stamp,
        )  # fmt: skip
    try:
        full = fs.to_field_set(config, schema)
    except FieldSetError as err:
        raise _internal(
            f"failed to create typed patch object ({_where(config, kind, api_version)}): {err}"
        ) from None
    applied = _strip_set(fs.exclude(full, reset))
    base = live if live is not None else {"apiVersion": api_version, "kind": kind, "metadata": {}}
    try:
        merged = fs.merge(base, config, schema)
    except FieldSetError as err:
        raise _internal(f"failed to merge config: {err}") from None  # a live object the schema refuses
    previous = managers.get(key)
    if previous is not None and previous.fields:
        owned: Node = full
        for k, entry in managers.items():
            if k != key:
                owned = fs.union(owned, entry.fields)
        merged = fs.prune(merged, previous.fields, owned, schema)
    tracker = ApplyTracker(
        manager=manager, subresource=subresource, now=stamp, force=force, managers=managers, applied=applied,
        previous_time=previous.time if previous is not None else None,
    )  # fmt: skip
    if manager == "kubectl" and live is not None:
        _kubectl_last_applied(tracker, merged, live, config, schema)
    return merged, tracker


def _kubectl_last_applied(
    tracker: ApplyTracker,
    merged: dict[str, Any],
    live: Mapping[str, Any],
    config: Mapping[str, Any],
    schema: Schema,
) -> None:
    """kubectl's move from client-side apply: what its last-applied annotation names does not
    conflict, and the annotation follows the applied configuration."""
    annotations = (live.get("metadata") or {}).get("annotations") or {}
    text = annotations.get(LAST_APPLIED) if isinstance(annotations, dict) else None
    if not text:
        return
    try:
        last = json.loads(text)
        if isinstance(last, dict) and last.get("apiVersion") == live.get("apiVersion"):
            allowed = fs.to_field_set(last, schema)
            comparison = fs.compare(last, dict(live), schema)
            for part in (comparison.modified, comparison.added, comparison.removed):
                allowed = fs.subtract(allowed, part)
            tracker.allowed_conflicts = allowed
    except (ValueError, FieldSetError):
        pass
    tracker.live_last_applied = text
    copy = json.loads(json.dumps(config))
    cmeta = copy.get("metadata") if isinstance(copy.get("metadata"), dict) else None
    if cmeta is not None and isinstance(cmeta.get("annotations"), dict):
        cmeta["annotations"].pop(LAST_APPLIED, None)
        if not cmeta["annotations"]:
            del cmeta["annotations"]
    meta = merged["metadata"] = dict(merged.get("metadata") or {})
    meta["annotations"] = dict(meta.get("annotations") or {})
    meta["annotations"][LAST_APPLIED] = json.dumps(copy, separators=(",", ":"), sort_keys=True) + "\n"


def group_version(api_version: str) -> str:
    """As Go prints a GroupVersion: ``/v1`` for the core group."""
    return api_version if "/" in api_version else "/" + api_version


def _internal(message: str) -> Exception:
    """A 500 as the real server answers an error the field manager did not type: no reason."""
    body = status_body(500, "", message)
    del body["reason"]
    return ApiError(message, code=500, reason="", status=body)
