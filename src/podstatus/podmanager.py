"""The pods a node runs, as the status manager sees them (SPEC 2.4).

:class:`~podstatus.protocols.PodManager` is the narrow protocol the status manager is given;
:class:`BasicPodManager` is a thread-safe in-memory implementation that mirrors
the kubelet's ``pkg/kubelet/pod/pod_manager.go``.

Static pods come from files or URLs on the node; the API server only knows
their *mirror* pods, which have the same namespace and name but another UID.
The node keeps a static pod's status under the static pod's UID and writes it
to the mirror pod, so the manager needs the UID translations kept here.
"""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Iterable
from typing import Any

import msgspec

from .sharing import ValuePool
from .types import Pod, PodSpec, PodStatus

__all__ = [
    "API_SOURCE",
    "CONFIG_MIRROR_ANNOTATION_KEY",
    "CONFIG_SOURCE_ANNOTATION_KEY",
    "BasicPodManager",
    "SharedParts",
    "is_mirror_pod",
    "is_static_pod",
    "lean_pod",
    "pod_full_name",
]

log = logging.getLogger(__name__)

CONFIG_SOURCE_ANNOTATION_KEY = "kubernetes.io/config.source"
CONFIG_MIRROR_ANNOTATION_KEY = "kubernetes.io/config.mirror"
# The source of pods that came from the API server (not static).
API_SOURCE = "api"


def is_mirror_pod(pod: Pod) -> bool:
    """True for the API server's copy of a static pod."""
    annotations = pod.metadata.annotations
    return annotations is not None and CONFIG_MIRROR_ANNOTATION_KEY in annotations


def is_static_pod(pod: Pod) -> bool:
    """True for a pod that came from the node (file or URL), not from the API server.

    As in the kubelet, a mirror pod also passes (it carries its static pod's
    source annotation); check :func:`is_mirror_pod` first where it matters.
    """
    annotations = pod.metadata.annotations
    if annotations is None:
        return False
    source = annotations.get(CONFIG_SOURCE_ANNOTATION_KEY)
    return source is not None and source != API_SOURCE


def pod_full_name(pod: Pod) -> tuple[str, str]:
    """``(namespace, name)``: what a static pod and its mirror pod share."""
    return (pod.namespace, pod.name)


class SharedParts:
    """Parts many pods hold alike, held once per process: their template's spec, labels, owners.

    Pods of one template (a Deployment's, a Job's) have equal containers, tolerations,
    labels and annotations; across a thousand nodes those were a thousand copies of the
    same values. A part is looked up by its field and exact JSON text (so ``1`` and
    ``true`` never stand in for each other) and the first copy is kept. At most
    ``limit`` parts are held; when full, the table starts afresh (the pods keep what
    they share). Safe from several threads: a lookup that races another only misses a
    chance to share.
    """

    __slots__ = ("_table",)

    def __init__(self, limit: int = 8192) -> None:
        self._table = ValuePool(limit)

    def __len__(self) -> int:
        return len(self._table)

    def get(self, name: str, value: Any) -> Any:
        """The held copy of ``value`` (the part ``name`` of a pod), or ``value`` itself, now held."""
        if value is None or type(value) in _SCALARS:
            return value
        try:
            key = (name, _json_encode(value))
        except (TypeError, ValueError, OverflowError, RecursionError):
            return value
        return self._table.share(key, value)

    def spec(self, spec: PodSpec) -> PodSpec:
        """``spec`` held once, its parts shared with other specs (a pod's own node name aside)."""
        try:
            key = ("spec", _json_encode(spec))
        except (TypeError, ValueError, OverflowError, RecursionError):
            return spec
        found: PodSpec = self._table.share(key, spec)
        if found is not spec:
            return found
        changes: dict[str, Any] = {}
        for name in _SPEC_PARTS:
            value = getattr(spec, name)
            if value is not None:
                shared = self.get(name, value)
                if shared is not value:
                    changes[name] = shared
        for name in _SPEC_WORDS:
            value = getattr(spec, name)
            if type(value) is str and (word := sys.intern(value)) is not value:
                changes[name] = word
        if not changes:
            return spec
        held: PodSpec = self._table.keep(key, spec.replace(**changes))
        return held


_SCALARS = frozenset({str, int, float, bool})
_json_encode = msgspec.json.encode
# Parts of a spec that pods of one template have alike (not the node name, not the hostname).
_SPEC_PARTS = (
    "volumes",
    "init_containers",
    "containers",
    "node_selector",
    "security_context",
    "image_pull_secrets",
    "affinity",
    "tolerations",
    "host_aliases",
    "dns_config",
    "readiness_gates",
    "overhead",
    "topology_spread_constraints",
    "os",
    "scheduling_gates",
    "resource_claims",
    "resources",
)
# Words many specs repeat (policies, names of shared things, the node).
_SPEC_WORDS = (
    "restart_policy",
    "dns_policy",
    "service_account_name",
    "service_account",
    "node_name",
    "scheduler_name",
    "priority_class_name",
    "runtime_class_name",
    "preemption_policy",
)
_META_PARTS = ("labels", "annotations", "owner_references")
# What the copies of one pod have alike (taken from the earlier copy: held once).
_META_SAME = ("name", "generate_name", "namespace", "uid", "creation_timestamp", *_META_PARTS)

# The process's table of shared pod parts (lean_pod's).
shared_parts = SharedParts()


def lean_pod(pod: Pod, like: Pod | None = None, status: PodStatus | None = None) -> Pod:
    """``pod`` as a cache should hold it: no ``managedFields``, and the parts it shares held once.

    A node's caches hold one or two copies of every pod (the watch's, the last write's
    answer). ``managedFields`` (who set which field) is the larger part of a pod as the API
    server sends it, and nothing a node reads it (kube-controller-manager's informers
    drop it likewise). The spec, labels, annotations and owners equal to those of ``like``
    (an earlier copy of the same pod), and a status equal to ``status`` (the one the status
    manager caches), are taken from them: held once, not once per copy. A pod seen for the
    first time shares its spec's parts, labels, annotations and owners with other pods
    (:class:`SharedParts`): pods of one template hold them once between them.
    """
    changes: dict[str, Any] = {}
    meta = pod.metadata
    meta_changes: dict[str, Any] = {}
    if meta.managed_fields is not None:
        meta_changes["managed_fields"] = None
    if like is not None and like.metadata.uid == meta.uid:
        if like.spec is not pod.spec and like.spec == pod.spec:
            changes["spec"] = like.spec
        old = like.metadata
        for name in _META_SAME:
            mine, theirs = getattr(meta, name), getattr(old, name)
            if mine is not theirs and mine is not None and mine == theirs:
                meta_changes[name] = theirs
    else:
        spec = shared_parts.spec(pod.spec)
        if spec is not pod.spec:
            changes["spec"] = spec
        for name in _META_PARTS:
            mine = getattr(meta, name)
            shared = shared_parts.get(name, mine)
            if shared is not mine:
                meta_changes[name] = shared
        if type(meta.namespace) is str and (namespace := sys.intern(meta.namespace)) is not meta.namespace:
            meta_changes["namespace"] = namespace
    if meta_changes:
        changes["metadata"] = meta.replace(**meta_changes)
    if status is not None and pod.status is not status and pod.status == status:
        changes["status"] = status
    return pod.replace(**changes) if changes else pod


class BasicPodManager:
    """A thread-safe in-memory :class:`~podstatus.protocols.PodManager` with the kubelet's pod manager methods.

    Mirror pods (annotation ``kubernetes.io/config.mirror``) are added like any
    pod; they are kept apart from the others and matched to static pods by
    namespace and name, whichever of the two arrives first.
    """

    def __init__(self, pods: Iterable[Pod] = ()) -> None:
        self._lock = threading.Lock()
        # Non-mirror pods, by UID and by (namespace, name).
        self._pods: dict[str, Pod] = {}
        self._pod_by_name: dict[tuple[str, str], Pod] = {}
        # Mirror pods, likewise.
        self._mirrors: dict[str, Pod] = {}
        self._mirror_by_name: dict[tuple[str, str], Pod] = {}
        # Mirror pod UID -> static pod UID, for static pods that have a mirror pod.
        self._translation: dict[str, str] = {}
        # UIDs of the static pods: the sync loop asks for the translations on every pass,
        # so they must cost O(static pods), not O(pods).
        self._static: set[str] = set()
        if pods:
            self.set_pods(pods)

    # --- changes ----------------------------------------------------------------

    def set_pods(self, pods: Iterable[Pod]) -> None:
        """Replace every pod (mirror pods included) with these."""
        with self._lock:
            self._pods.clear()
            self._pod_by_name.clear()
            self._mirrors.clear()
            self._mirror_by_name.clear()
            self._translation.clear()
            self._static.clear()
            for pod in pods:
                self._add(pod)

    def add_pod(self, pod: Pod) -> None:
        """Add a pod, or replace the one with its UID."""
        with self._lock:
            self._add(pod)

    def update_pod(self, pod: Pod) -> None:
        """Same as :meth:`add_pod` (the kubelet does not tell them apart either)."""
        with self._lock:
            self._add(pod)

    def remove_pod(self, pod: Pod) -> None:
        """Forget a pod (by its UID); its mirror or static counterpart, and their translation, stay."""
        with self._lock:
            uid = pod.uid
            full_name = pod_full_name(pod)
            if is_mirror_pod(pod):
                old = self._mirrors.pop(uid, None)
                self._translation.pop(uid, None)
                by_name = self._mirror_by_name.get(full_name)
                if by_name is not None and by_name.uid == uid:
                    del self._mirror_by_name[full_name]
                if old is None:
                    log.debug("removing unknown mirror pod %s (uid %s)", pod.key(), uid)
            else:
                old = self._pods.pop(uid, None)
                self._static.discard(uid)
                by_name = self._pod_by_name.get(full_name)
                if by_name is not None and by_name.uid == uid:
                    del self._pod_by_name[full_name]
                # The mirror's translation stays until the mirror pod goes, as upstream's basic
                # pod manager keeps it: the cached status stays under the static pod's UID, and
                # the sync loop neither syncs it nor takes the mirror for a recreated pod.
                if old is None:
                    log.debug("removing unknown pod %s (uid %s)", pod.key(), uid)

    def _add(self, pod: Pod) -> None:
        uid = pod.uid
        full_name = pod_full_name(pod)
        if is_mirror_pod(pod):
            previous = self._mirror_by_name.get(full_name)
            if previous is not None and previous.uid != uid:
                # A recreated mirror pod supersedes the old one: one mirror per static pod.
                self._translation.pop(previous.uid, None)
            self._mirrors[uid] = pod
            self._mirror_by_name[full_name] = pod
            static = self._pod_by_name.get(full_name)
            if static is not None and is_static_pod(static):
                self._translation[uid] = static.uid
            else:
                self._translation.pop(uid, None)
        else:
            self._pods[uid] = pod
            self._pod_by_name[full_name] = pod
            if is_static_pod(pod):
                self._static.add(uid)
            else:
                self._static.discard(uid)
            mirror = self._mirror_by_name.get(full_name)
            if mirror is not None:
                if is_static_pod(pod):
                    self._translation[mirror.uid] = uid
                elif self._translation.get(mirror.uid) == uid:
                    del self._translation[mirror.uid]

    # --- queries ----------------------------------------------------------------

    def get_pods(self) -> list[Pod]:
        """Every pod except mirror pods."""
        with self._lock:
            return list(self._pods.values())

    def get_mirror_pods(self) -> list[Pod]:
        """Every mirror pod."""
        with self._lock:
            return list(self._mirrors.values())

    def get_pod_by_uid(self, uid: str) -> Pod | None:
        """The non-mirror pod with that UID."""
        with self._lock:
            return self._pods.get(uid)

    def get_pod_by_name(self, namespace: str, name: str) -> Pod | None:
        """The non-mirror pod with that namespace and name."""
        with self._lock:
            return self._pod_by_name.get((namespace, name))

    def get_mirror_pod_by_pod(self, pod: Pod) -> Pod | None:
        """The mirror pod with the pod's namespace and name."""
        with self._lock:
            return self._mirror_by_name.get(pod_full_name(pod))

    def get_pod_by_mirror_pod(self, mirror: Pod) -> Pod | None:
        """The (static) pod with the mirror pod's namespace and name."""
        with self._lock:
            return self._pod_by_name.get(pod_full_name(mirror))

    def translate_pod_uid(self, uid: str) -> str:
        """A mirror pod's UID becomes its static pod's UID; any other UID is returned unchanged."""
        with self._lock:
            return self._translation.get(uid, uid)

    def get_uid_translations(self) -> tuple[dict[str, str], dict[str, str]]:
        """``(pod_to_mirror, mirror_to_pod)``; a static pod without a mirror pod maps to ``""``.

        Fresh dicts: the caller may change them.
        """
        with self._lock:
            # "" tells the caller that the static pod has no mirror pod yet, which is
            # different from "not a static pod" (absent).
            pod_to_mirror = dict.fromkeys(self._static, "")
            mirror_to_pod: dict[str, str] = {}
            for mirror_uid, pod_uid in self._translation.items():
                mirror_to_pod[mirror_uid] = pod_uid
                pod_to_mirror[pod_uid] = mirror_uid
            return pod_to_mirror, mirror_to_pod
