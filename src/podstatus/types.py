"""Kubernetes core/v1 wire types that the status manager touches.

Every type is an immutable ``msgspec.Struct``: values, not records. The cache
can hand them out without copying, equality is a C-level field compare, and
decoding and validation run in C (``msgspec.convert``).

Fields a type does not model are never lost: ``from_dict`` keeps them as
compact JSON bytes in ``extra_json`` and ``to_dict`` puts them back. Bytes are
immutable, cheap to compare and small to keep, which matters with 100,000
cached statuses.

Required fields of the API (a container status's ``ready``, ``restartCount``,
``image``...) are always written by ``to_dict``, and the ``metav1.Time``
fields the API server prints as ``null`` when unset are printed the same way,
so an object read from a server comes back out exactly as it came in.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Self, cast

import msgspec
from msgspec import field

from .errors import InvalidObjectError

__all__ = [
    "Container",
    "ContainerID",
    "ContainerState",
    "ContainerStateRunning",
    "ContainerStateTerminated",
    "ContainerStateWaiting",
    "ContainerStatus",
    "FrozenDict",
    "FrozenList",
    "HostIP",
    "ObjectMeta",
    "Pod",
    "PodCondition",
    "PodIP",
    "PodReadinessGate",
    "PodSpec",
    "PodStatus",
]

# RFC 3339 requires an offset; the API server refuses a timestamp without one, and so do we.
Time = Annotated[datetime, msgspec.Meta(tz=True)]

_EXTRA_WIRE = "$podstatus.extra"
_json_encode = msgspec.json.encode
_json_decode = msgspec.json.decode
# Always printed, as ``null`` when unset (Go's non-pointer metav1.Time), or as the zero value.
_NULL: Any = field(default_factory=type(None))


class Extra:
    """Fields a type does not model, kept as compact JSON of an object (immutable)."""

    __slots__ = ("json",)

    def __init__(self, json: bytes) -> None:
        self.json = json

    def __eq__(self, other: object) -> bool:
        return type(other) is Extra and other.json == self.json

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Extra({self.json.decode()!r})"

    def as_dict(self) -> dict[str, Any]:
        result: dict[str, Any] = _json_decode(self.json)
        return result


def _read_only(self: Any, *args: Any, **kwargs: Any) -> Any:
    raise TypeError(f"{type(self).__name__} is read-only: it may be shared by many cached statuses")


class FrozenDict(dict[str, Any]):
    """A read-only JSON object: a pass-through value the status manager shares between statuses.

    Equal to the plain dict with the same items, and encoded like one. Copies are itself
    (it cannot change); pickling gives it back.
    """

    __slots__ = ()

    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = __ior__ = _read_only

    def __copy__(self) -> Self:
        return self

    def __deepcopy__(self, memo: Any) -> Self:
        return self

    def __reduce__(self) -> Any:
        return (type(self), (dict(self),))


class FrozenList(list[Any]):
    """A read-only JSON array (see :class:`FrozenDict`)."""

    __slots__ = ()

    __setitem__ = __delitem__ = append = extend = insert = pop = remove = clear = _read_only
    sort = reverse = __iadd__ = __imul__ = _read_only

    def __copy__(self) -> Self:
        return self

    def __deepcopy__(self, memo: Any) -> Self:
        return self

    def __reduce__(self) -> Any:
        return (type(self), (list(self),))


class _Meta:
    """Per-type facts computed once from the struct's fields."""

    __slots__ = ("children", "has_times", "known", "time_children", "time_fields", "time_wires")

    def __init__(self, cls: type[K8sObject]) -> None:
        info = msgspec.inspect.type_info(cls)
        assert isinstance(info, msgspec.inspect.StructType)
        self.known: frozenset[str] = frozenset(f.encode_name for f in info.fields if f.name != "extra")
        children: list[tuple[str, str, bool, _Meta]] = []
        for f in info.fields:
            child = _struct_type_of(f.type)
            if child is not None:
                child_cls, is_list = child
                children.append((f.name, f.encode_name, is_list, _meta(child_cls)))
        self.children = tuple(children)
        self.time_fields = tuple(f.name for f in info.fields if _is_datetime(f.type))
        self.time_wires = tuple(f.encode_name for f in info.fields if _is_datetime(f.type))
        # Only the children that can hold a timestamp somewhere below (for _to_utc).
        self.time_children = tuple(c for c in self.children if c[3].has_times)
        self.has_times: bool = bool(self.time_fields or self.time_children)


def _unwrap_optional(t: msgspec.inspect.Type) -> msgspec.inspect.Type:
    if isinstance(t, msgspec.inspect.UnionType):
        rest = [x for x in t.types if not isinstance(x, msgspec.inspect.NoneType)]
        if len(rest) == 1:
            return rest[0]
    return t


def _struct_type_of(t: msgspec.inspect.Type) -> tuple[type[K8sObject], bool] | None:
    t = _unwrap_optional(t)
    if isinstance(t, msgspec.inspect.StructType):
        return cast("type[K8sObject]", t.cls), False
    if isinstance(t, msgspec.inspect.VarTupleType | msgspec.inspect.ListType):
        item = _unwrap_optional(t.item_type)
        if isinstance(item, msgspec.inspect.StructType):
            return cast("type[K8sObject]", item.cls), True
    return None


def _is_datetime(t: msgspec.inspect.Type) -> bool:
    t = _unwrap_optional(t)
    return isinstance(t, msgspec.inspect.DateTimeType)


def _path_of(err: msgspec.ValidationError) -> tuple[str, str]:
    text = str(err)
    message, sep, where = text.rpartition(" - at `")
    if not sep:
        return text, ""
    path = where.rstrip("`")
    path = path.removeprefix("$").removeprefix(".")
    return message, path


class _HasExtra(Exception):
    """Raised by the fast encoder on an object that kept unknown fields (rare)."""


def _fast_enc_hook(value: Any) -> Any:
    if type(value) is Extra:
        raise _HasExtra
    raise NotImplementedError(f"cannot encode {type(value).__name__}")


def _extra_enc_hook(value: Any) -> Any:
    if type(value) is Extra:
        return msgspec.Raw(value.json)
    raise NotImplementedError(f"cannot encode {type(value).__name__}")


# Reused for every call (msgspec's advice: a top-level ``encode`` sets up its state each time).
_fast_encoder = msgspec.json.Encoder(enc_hook=_fast_enc_hook)
_extra_encoder = msgspec.json.Encoder(enc_hook=_extra_enc_hook)


class K8sObject(
    msgspec.Struct,
    frozen=True,
    kw_only=True,
    omit_defaults=True,
    rename="camel",
    gc=False,
    repr_omit_defaults=True,
    # Decoding refuses unknown fields, so JSON without any (every pod of today's API) decodes in
    # one pass in C; only when that fails do we walk the data and set the unknown ones aside.
    forbid_unknown_fields=True,
):
    """Base of the wire types: ``from_dict`` / ``to_dict`` and unknown-field keeping.

    Objects are immutable; lists are tuples. Build changed copies with
    :meth:`replace`. Pass-through values typed ``Any`` (a container's
    ``resources``, a pod's ``managedFields``...) are plain JSON values shared
    between copies: treat them as read-only (in statuses the manager caches
    they are :class:`FrozenDict` / :class:`FrozenList`, shared between pods,
    and refuse changes). ``to_dict`` always returns fresh containers, so its
    result can be changed freely.
    """

    # Fields this type does not model (None when there were none).
    extra: Extra | None = field(default=None, name=_EXTRA_WIRE)

    # -- wire form -------------------------------------------------------------

    @classmethod
    def from_dict(cls, data: Any) -> Self:
        """Decode the Kubernetes JSON wire form; raises :class:`InvalidObjectError` naming the field."""
        if not isinstance(data, dict):
            raise InvalidObjectError(
                f"invalid {cls.__name__}: expected an object, got {type(data).__name__}", path=""
            )
        meta = _meta(cls)
        try:
            # Fast path, all in C: no unknown fields (refused by the types), no smuggled extra key.
            obj = msgspec.convert(data, cls, dec_hook=_refuse_hook)
        except Exception:  # whatever it was, the careful path below decides and names it
            pass
        else:
            if meta.has_times and _offset_check(cls)(obj):
                _to_utc(obj, meta)
            return obj
        try:
            offsets: list[bool] = []
            prepared = _set_aside_extras(data, meta, offsets)
            obj = msgspec.convert(prepared, cls, dec_hook=_extra_dec_hook)
            if offsets:
                _to_utc(obj, meta)
        except msgspec.ValidationError as err:
            raise _invalid(cls, err) from None
        except (RecursionError, TypeError) as err:
            # Nesting deeper than JSON can sensibly hold, or values that are not JSON at all.
            raise InvalidObjectError(f"invalid {cls.__name__}: {type(err).__name__}: {err}") from None
        return obj

    @classmethod
    def from_json(cls, data: bytes | str) -> Self:
        """Decode JSON text (as the API server sends it)."""
        try:
            obj = _decoder(cls).decode(data)
        except msgspec.ValidationError as err:
            if "unknown field" not in str(err):
                raise _invalid(cls, err) from None
            # Fields this version does not model: decode generically and keep them.
            try:
                raw = _json_decode(data)
            except msgspec.DecodeError as derr:  # pragma: no cover - the typed decode parsed it
                raise InvalidObjectError(f"invalid {cls.__name__}: malformed JSON: {derr}") from None
            return cls.from_dict(raw)
        except msgspec.DecodeError as err:
            raise InvalidObjectError(f"invalid {cls.__name__}: malformed JSON: {err}") from None
        except RecursionError as err:
            raise InvalidObjectError(f"invalid {cls.__name__}: {err}") from None
        # Timestamps are UTC nearly always: one flat check of the typed time fields (about 1 µs;
        # a regular expression over the text took a third of the whole decode).
        meta = _meta(cls)
        if meta.has_times and _offset_check(cls)(obj):
            _to_utc(obj, meta)
        return obj

    def to_dict(self) -> dict[str, Any]:
        """The Kubernetes JSON wire form, as the API server prints it (a fresh dict)."""
        result: dict[str, Any] = _json_decode(self.to_json())
        return result

    def to_json(self) -> bytes:
        """Compact JSON of :meth:`to_dict`."""
        try:
            try:
                return _fast_encoder.encode(self)
            except _HasExtra:
                pass
            # Rare: some object kept unknown fields. Put them back where they were.
            data = _json_decode(_extra_encoder.encode(self))
            _merge_extras(data)
            return _json_encode(data)
        except (RecursionError, NotImplementedError, TypeError) as err:
            raise InvalidObjectError(f"cannot encode {type(self).__name__}: {err}") from None

    # -- values ----------------------------------------------------------------

    def replace(self, **changes: Any) -> Self:
        """A copy with some fields changed (the object itself is immutable)."""
        return msgspec.structs.replace(self, **changes)


_METAS: dict[type, _Meta] = {}


def _meta(cls: type[K8sObject]) -> _Meta:
    meta = _METAS.get(cls)
    if meta is None:
        meta = _METAS[cls] = _Meta(cls)
    return meta


def _set_aside_extras(data: dict[str, Any], meta: _Meta, offsets: list[bool]) -> dict[str, Any]:
    """``data`` with unknown fields moved under the extra key (as JSON), copied only where needed.

    Also notes (in ``offsets``) a timestamp that is not in UTC, so the caller knows to convert.
    """
    out = data
    if not data.keys() <= meta.known:
        known = meta.known
        out = {k: v for k, v in data.items() if k in known}
        out[_EXTRA_WIRE] = _json_encode({k: v for k, v in data.items() if k not in known})
    for wire in meta.time_wires:
        value = data.get(wire)
        if type(value) is str and not value.endswith("Z"):
            offsets.append(True)
    for _attr, wire, is_list, child_meta in meta.children:
        sub = data.get(wire)
        if not sub:
            continue
        new: Any
        if is_list:
            if type(sub) is not list:
                continue  # let the decoder name the error
            new = [_set_aside_extras(x, child_meta, offsets) if type(x) is dict else x for x in sub]
            if all(a is b for a, b in zip(new, sub)):
                continue
        elif type(sub) is dict:
            new = _set_aside_extras(sub, child_meta, offsets)
            if new is sub:
                continue
        else:
            continue
        if out is data:
            out = dict(data)
        out[wire] = new
    return out


_CHECKS: dict[type, Any] = {}
_DECODERS: dict[type, msgspec.json.Decoder[Any]] = {}


def _decoder(cls: type[K8sObject]) -> msgspec.json.Decoder[Any]:
    """The JSON decoder of ``cls`` (built once, reused)."""
    dec = _DECODERS.get(cls)
    if dec is None:
        dec = _DECODERS[cls] = msgspec.json.Decoder(cls, dec_hook=_extra_dec_hook)
    return dec


def _offset_check(cls: type[K8sObject]) -> Any:
    """A function telling whether an object of ``cls`` holds a timestamp not in UTC (built once).

    The API server sends UTC ("Z"), so this answers False nearly always; it is
    generated as one flat function over the fields that can hold a time (the
    attribute names are the types' own), which is several times faster than a
    generic walk with ``getattr``.
    """
    check = _CHECKS.get(cls)
    if check is None:
        lines = ["def check(o0):"]
        _check_lines(_meta(cls), "o0", 1, lines, [0])
        lines.append("    return False")
        namespace: dict[str, Any] = {"UTC": UTC}
        exec("\n".join(lines), namespace)  # code built from our own field names only
        check = _CHECKS[cls] = namespace["check"]
    return check


def _check_lines(meta: _Meta, var: str, depth: int, lines: list[str], counter: list[int]) -> None:
    pad = "    " * depth
    for name in meta.time_fields:
        lines.append(f"{pad}t = {var}.{name}")
        lines.append(f"{pad}if t is not None and t.tzinfo is not UTC: return True")
    for attr, _wire, is_list, child in meta.time_children:
        counter[0] += 1
        sub = f"o{counter[0]}"
        if is_list:
            lines.append(f"{pad}for {sub} in {var}.{attr} or ():")
        else:
            lines.append(f"{pad}{sub} = {var}.{attr}")
            lines.append(f"{pad}if {sub} is not None:")
        before = len(lines)
        _check_lines(child, sub, depth + 1, lines, counter)
        if len(lines) == before:
            lines.append(f"{pad}    pass")


def _to_utc(obj: K8sObject, meta: _Meta) -> None:
    """Timestamps are UTC (SPEC 2.1), whatever offset the text had: convert in place (rare)."""
    for name in meta.time_fields:
        value = getattr(obj, name)
        if value is not None and value.tzinfo is not UTC:
            msgspec.structs.force_setattr(obj, name, value.astimezone(UTC))
    for attr, _wire, is_list, child_meta in meta.time_children:
        value = getattr(obj, attr)
        if value is None:
            continue
        if is_list:
            for item in value:
                _to_utc(item, child_meta)
        else:
            _to_utc(value, child_meta)


def _refuse_hook(type_: type, obj: Any) -> Any:
    raise NotImplementedError


def _extra_dec_hook(type_: type, obj: Any) -> Any:
    if type_ is Extra and type(obj) is bytes:
        return Extra(obj)
    raise NotImplementedError


def _invalid(cls: type, err: msgspec.ValidationError) -> InvalidObjectError:
    message, path = _path_of(err)
    where = f" at {path}" if path else ""
    return InvalidObjectError(f"invalid {cls.__name__}{where}: {message}", path=path)


def _merge_extras(data: Any) -> None:
    if type(data) is dict:
        extra = data.pop(_EXTRA_WIRE, None)
        for value in data.values():
            _merge_extras(value)
        if extra:
            data.update(extra)
    elif type(data) is list:
        for value in data:
            _merge_extras(value)


# --- metadata -------------------------------------------------------------------


class ObjectMeta(K8sObject, frozen=True, kw_only=True):
    name: str | None = None
    generate_name: str | None = None
    namespace: str | None = None
    self_link: str | None = None
    uid: str | None = None
    resource_version: str | None = None
    generation: int | None = None
    creation_timestamp: Time | None = _NULL
    deletion_timestamp: Time | None = None
    deletion_grace_period_seconds: int | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    owner_references: Any = None
    finalizers: tuple[str, ...] | None = None
    managed_fields: Any = None


# --- spec -----------------------------------------------------------------------


class Container(K8sObject, frozen=True, kw_only=True):
    """A container of ``spec.containers``, ``spec.initContainers`` or ``spec.ephemeralContainers``."""

    name: str
    image: str | None = None
    command: Any = None
    args: Any = None
    working_dir: str | None = None
    ports: Any = None
    env_from: Any = None
    env: Any = None
    resources: Any = None
    resize_policy: Any = None
    # Only init containers have one: ``Always`` makes a restartable init container (a sidecar).
    restart_policy: str | None = None
    restart_policy_rules: Any = None
    volume_mounts: Any = None
    volume_devices: Any = None
    liveness_probe: Any = None
    readiness_probe: Any = None
    startup_probe: Any = None
    lifecycle: Any = None
    termination_message_path: str | None = None
    termination_message_policy: str | None = None
    image_pull_policy: str | None = None
    security_context: Any = None
    stdin: bool | None = None
    stdin_once: bool | None = None
    tty: bool | None = None
    target_container_name: str | None = None


class PodReadinessGate(K8sObject, frozen=True, kw_only=True):
    condition_type: str


class PodSpec(K8sObject, frozen=True, kw_only=True):
    volumes: Any = None
    init_containers: tuple[Container, ...] | None = None
    containers: tuple[Container, ...] = field(default_factory=tuple)
    ephemeral_containers: tuple[Container, ...] | None = None
    restart_policy: str | None = None
    termination_grace_period_seconds: int | None = None
    active_deadline_seconds: int | None = None
    dns_policy: str | None = None
    node_selector: dict[str, str] | None = None
    service_account_name: str | None = None
    service_account: str | None = None
    automount_service_account_token: bool | None = None
    node_name: str | None = None
    host_network: bool | None = None
    host_pid: bool | None = field(default=None, name="hostPID")
    host_ipc: bool | None = field(default=None, name="hostIPC")
    share_process_namespace: bool | None = None
    security_context: Any = None
    image_pull_secrets: Any = None
    hostname: str | None = None
    subdomain: str | None = None
    affinity: Any = None
    scheduler_name: str | None = None
    tolerations: Any = None
    host_aliases: Any = None
    priority_class_name: str | None = None
    priority: int | None = None
    dns_config: Any = None
    readiness_gates: tuple[PodReadinessGate, ...] | None = None
    runtime_class_name: str | None = None
    enable_service_links: bool | None = None
    preemption_policy: str | None = None
    overhead: Any = None
    topology_spread_constraints: Any = None
    set_hostname_as_fqdn: bool | None = field(default=None, name="setHostnameAsFQDN")
    os: Any = None
    host_users: bool | None = None
    scheduling_gates: Any = None
    resource_claims: Any = None
    resources: Any = None
    hostname_override: str | None = None


# --- status ---------------------------------------------------------------------


class PodCondition(K8sObject, frozen=True, kw_only=True):
    type: str
    status: str
    observed_generation: int | None = None
    last_probe_time: Time | None = _NULL
    last_transition_time: Time | None = _NULL
    reason: str | None = None
    message: str | None = None


class ContainerStateWaiting(K8sObject, frozen=True, kw_only=True):
    reason: str | None = None
    message: str | None = None


class ContainerStateRunning(K8sObject, frozen=True, kw_only=True):
    started_at: Time | None = _NULL


class ContainerStateTerminated(K8sObject, frozen=True, kw_only=True):
    exit_code: int = field(default_factory=int)
    signal: int | None = None
    reason: str | None = None
    message: str | None = None
    started_at: Time | None = _NULL
    finished_at: Time | None = _NULL
    container_id: str | None = field(default=None, name="containerID")


class ContainerState(K8sObject, frozen=True, kw_only=True):
    """At most one of ``waiting``, ``running``, ``terminated`` is set; none means waiting."""

    waiting: ContainerStateWaiting | None = None
    running: ContainerStateRunning | None = None
    terminated: ContainerStateTerminated | None = None


_EMPTY_STATE: ContainerState


def _empty_state() -> ContainerState:
    return _EMPTY_STATE


class ContainerStatus(K8sObject, frozen=True, kw_only=True):
    name: str
    # Go's non-pointer ContainerState: the API server always prints it, as {} when empty.
    state: ContainerState = field(default_factory=_empty_state)
    last_state: ContainerState = field(default_factory=_empty_state)
    ready: bool = field(default_factory=bool)
    restart_count: int = field(default_factory=int)
    image: str = field(default_factory=str)
    image_id: str = field(default_factory=str, name="imageID")
    container_id: str | None = field(default=None, name="containerID")
    started: bool | None = None
    allocated_resources: Any = None
    resources: Any = None
    volume_mounts: Any = None
    user: Any = None
    allocated_resources_status: Any = None
    stop_signal: str | None = None


class PodIP(K8sObject, frozen=True, kw_only=True):
    ip: str


class HostIP(K8sObject, frozen=True, kw_only=True):
    ip: str


class PodStatus(K8sObject, frozen=True, kw_only=True):
    observed_generation: int | None = None
    phase: str | None = None
    conditions: tuple[PodCondition, ...] | None = None
    message: str | None = None
    reason: str | None = None
    nominated_node_name: str | None = None
    host_ip: str | None = field(default=None, name="hostIP")
    host_ips: tuple[HostIP, ...] | None = field(default=None, name="hostIPs")
    pod_ip: str | None = field(default=None, name="podIP")
    pod_ips: tuple[PodIP, ...] | None = field(default=None, name="podIPs")
    start_time: Time | None = None
    init_container_statuses: tuple[ContainerStatus, ...] | None = None
    container_statuses: tuple[ContainerStatus, ...] | None = None
    qos_class: str | None = field(default=None, name="qosClass")
    ephemeral_container_statuses: tuple[ContainerStatus, ...] | None = None
    resize: str | None = None
    resource_claim_statuses: Any = None
    extended_resource_claim_status: Any = None
    # v1.37: the pod-level resources the kubelet allocated and applied (KEP-1287 with pod-level
    # resources), claims on node-allocatable resources (not the kubelet's), volume health.
    allocated_resources: Any = None
    resources: Any = None
    node_allocatable_resource_claim_statuses: Any = None
    volume_health: Any = None


class Pod(K8sObject, frozen=True, kw_only=True):
    api_version: str = field(default_factory=lambda: "v1")
    kind: str = field(default_factory=lambda: "Pod")
    metadata: ObjectMeta = field(default_factory=ObjectMeta)
    spec: PodSpec = field(default_factory=PodSpec)
    status: PodStatus = field(default_factory=PodStatus)

    # Shortcuts used all over the manager and by node agents.
    @property
    def uid(self) -> str:
        return self.metadata.uid or ""

    @property
    def namespace(self) -> str:
        return self.metadata.namespace or ""

    @property
    def name(self) -> str:
        return self.metadata.name or ""

    def key(self) -> str:
        """``namespace/name``, for logs."""
        return f"{self.metadata.namespace or ''}/{self.metadata.name or ''}"


# --- container IDs --------------------------------------------------------------


class ContainerID(msgspec.Struct, frozen=True, gc=False):
    """A container runtime's ID of a container: ``type://id``."""

    type: str
    id: str

    @classmethod
    def parse(cls, text: str) -> ContainerID:
        kind, sep, ident = text.partition("://")
        if not sep or not kind or not ident:
            raise ValueError(f"invalid container ID {text!r}: expected type://id")
        return cls(kind, ident)

    def __str__(self) -> str:
        return f"{self.type}://{self.id}"


_EMPTY_STATE = ContainerState()
