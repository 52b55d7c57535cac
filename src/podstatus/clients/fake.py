"""``FakeKubeClient``: an in-memory kube client that records every request.

For tests of the status manager (STYLE 10: test the requests, not only the
result). Pods are stored in their wire form, keyed by ``(namespace, name)``;
status patches go through the same strategic merge code as the embedded API
server, with the preconditions a real server checks.

Requests (``get_pod``, ``list_pods``, ``patch_pod_status``, ``delete_pod``)
are recorded in :attr:`FakeKubeClient.requests` and counted, failed ones too:
a request that failed was still sent. Setting pods up (``add_pod``,
``put_pod``, ``remove``, ``pod``) is not a request and is not recorded.
"""

from __future__ import annotations

import json
import logging
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from ..errors import (
    BadRequestError,
    ConflictError,
    InvalidObjectError,
    NotFoundError,
    UnprocessableEntityError,
)
from ..patch import PatchError, apply_strategic_merge_patch
from ..requestcount import RequestCounter
from ..server.storage.store import Store
from ..types import Pod
from ..validation import terminal_phase_errors
from .embedded import EmbeddedClient

__all__ = ["FakeKubeClient", "FakeNodeClient", "Request", "RequestHook"]

log = logging.getLogger(__name__)

# ("get", ns, name) | ("list", ns) | ("patch", ns, name, patch) | ("delete", ns, name, grace, uid)
Request = tuple[Any, ...]
# Called with (verb, namespace, name) before a request is served.
RequestHook = Callable[[str, str, str], None]
PodLike = Pod | Mapping[str, Any]

_DEFAULT_GRACE_SECONDS = 30


def _now() -> datetime:
    return datetime.now(UTC)


def _timestamp(value: datetime) -> str:
    # The API server keeps whole seconds.
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _not_found(name: str) -> NotFoundError:
    return NotFoundError(f'pods "{name}" not found')


def _uid_conflict(precondition: str, actual: str) -> ConflictError:
    # The real server's wording (apiserver's checkUID / rest.BeforeDelete).
    return ConflictError(
        f"Precondition failed: UID in precondition: {precondition}, UID in object meta: {actual}"
    )


def _version_conflict(name: str) -> ConflictError:
    return ConflictError(
        f'Operation cannot be fulfilled on pods "{name}": the object has been modified; '
        "please apply your changes to the latest version and try again"
    )


class _Recorder:
    """Request recording, counting, hooks and injected failures, shared by the fakes."""

    def __init__(self, counter: RequestCounter | None) -> None:
        self._lock = threading.RLock()
        self._failures: dict[str, list[list[Any]]] = {}
        self._hooks: list[RequestHook] = []
        self._in_hook = threading.local()
        self.requests: list[Request] = []
        self.counter = counter if counter is not None else RequestCounter()

    # --- fault injection ----------------------------------------------------------

    def fail_next(self, verb: str, exc: BaseException, times: int = 1) -> None:
        """The next ``times`` requests of ``verb`` raise ``exc`` instead of being served."""
        if times < 1:
            raise ValueError("times must be at least 1")
        with self._lock:
            self._failures.setdefault(verb, []).append([exc, times])

    def before_request(self, hook: RequestHook) -> None:
        """Run ``hook(verb, namespace, name)`` before serving each request (hooks run in order).

        An exception from a hook fails the request. Requests the hook itself
        makes do not run the hooks again.
        """
        with self._lock:
            self._hooks.append(hook)

    def clear_hooks(self) -> None:
        with self._lock:
            self._hooks.clear()

    def clear_failures(self) -> None:
        with self._lock:
            self._failures.clear()

    # --- what was asked -----------------------------------------------------------

    def verbs(self) -> list[str]:
        """The verbs of the recorded requests, in order: ``["get", "patch", "delete"]``."""
        with self._lock:
            return [request[0] for request in self.requests]

    def clear_requests(self) -> None:
        with self._lock:
            self.requests.clear()

    def _serve(self, request: Request, verb: str, namespace: str, name: str) -> None:
        """Record and count a request, run the hooks, then any injected failure."""
        with self._lock:
            self.requests.append(request)
            hooks = tuple(self._hooks)
        self.counter.inc(verb)
        if hooks and not getattr(self._in_hook, "active", False):
            self._in_hook.active = True
            try:
                for hook in hooks:
                    hook(verb, namespace, name)
            finally:
                self._in_hook.active = False
        with self._lock:
            queue = self._failures.get(verb)
            if not queue:
                return
            entry = queue[0]
            exc: BaseException = entry[0]
            entry[1] -= 1
            if entry[1] <= 0:
                queue.pop(0)
        log.debug("injected failure for %s %s/%s: %r", verb, namespace, name, exc)
        raise exc


class FakeKubeClient(_Recorder):
    """An in-memory :class:`~podstatus.protocols.VersionedKubeClient` for tests. Thread-safe.

    - ``patch_pod_status`` applies the strategic merge patch to ``status``
      only (the ``pods/status`` subresource ignores the rest), after checking
      the ``metadata.uid`` and ``metadata.resourceVersion`` preconditions the
      patch carries (:class:`ConflictError`). A patch that changes nothing
      does not bump the ``resourceVersion``, as on a real server. A terminal
      phase moving back to a non-terminal one is refused (422), as the real
      server's validation does.
    - ``delete_pod`` checks the UID precondition; a grace period of 0 removes
      the pod (unless it has finalizers), a longer one sets
      ``deletionTimestamp``. Unlike a real server, the grace period is not cut
      to 0 for unscheduled or terminated pods: tests say what they want.
    - ``resourceVersion`` is one counter for all pods, as on a real server.
    - ``fail_next(verb, exc)`` makes the next request(s) of that verb raise;
      ``before_request(hook)`` runs ``hook(verb, namespace, name)`` before each
      request is served, so a test can change the world between two requests
      (for example delete and recreate a pod between the GET and the PATCH).
    """

    def __init__(
        self,
        pods: Iterable[PodLike] = (),
        *,
        counter: RequestCounter | None = None,
        clock: Callable[[], datetime] = _now,
    ) -> None:
        super().__init__(counter)
        self._pods: dict[tuple[str, str], dict[str, Any]] = {}
        self._resource_version = 0
        self._clock = clock
        for pod in pods:
            self.add_pod(pod)

    # --- setting up (not requests) ------------------------------------------------

    def add_pod(self, pod: PodLike) -> Pod:
        """Create a pod; a missing UID is generated. ConflictError (AlreadyExists) if its name is taken."""
        data = self._normalise(pod)
        meta = data["metadata"]
        key = (meta.get("namespace") or "", meta.get("name") or "")
        with self._lock:
            if key in self._pods:
                raise ConflictError(f'pods "{key[1]}" already exists', reason="AlreadyExists")
            meta.setdefault("uid", str(uuid.uuid4()))
            if not meta.get("creationTimestamp"):
                meta["creationTimestamp"] = _timestamp(self._clock())
            return self._store(key, data)

    def put_pod(self, pod: PodLike) -> Pod:
        """Create or replace a pod. Replacing keeps the stored UID unless the pod has its own."""
        data = self._normalise(pod)
        meta = data["metadata"]
        key = (meta.get("namespace") or "", meta.get("name") or "")
        with self._lock:
            old = self._pods.get(key)
            if not meta.get("uid"):
                meta["uid"] = old["metadata"]["uid"] if old is not None else str(uuid.uuid4())
            if not meta.get("creationTimestamp"):
                meta["creationTimestamp"] = _timestamp(self._clock())
            return self._store(key, data)

    def remove(self, namespace: str, name: str) -> bool:
        """Forget a pod at once; True when there was one."""
        with self._lock:
            return self._pods.pop((namespace, name), None) is not None

    def pod(self, namespace: str, name: str) -> Pod | None:
        """The stored pod, or None."""
        with self._lock:
            data = self._pods.get((namespace, name))
            return Pod.from_dict(data) if data is not None else None

    def pods(self) -> list[Pod]:
        """Every stored pod."""
        with self._lock:
            return [Pod.from_dict(data) for data in self._pods.values()]

    @property
    def resource_version(self) -> str:
        """The last resourceVersion handed out."""
        with self._lock:
            return str(self._resource_version)

    # --- what was asked -----------------------------------------------------------

    def patches(self) -> list[dict[str, Any]]:
        """The decoded bodies of the recorded patch requests, in order."""
        with self._lock:
            return [r[3] for r in self.requests if r[0] == "patch" and isinstance(r[3], dict)]

    # --- requests -----------------------------------------------------------------

    def get_pod(self, namespace: str, name: str) -> Pod:
        self._begin(("get", namespace, name))
        with self._lock:
            data = self._pods.get((namespace, name))
            if data is None:
                raise _not_found(name)
            return Pod.from_dict(data)

    def list_pods(self, namespace: str | None = None) -> list[Pod]:
        """Every pod, or those of one namespace."""
        self._begin(("list", namespace or ""))
        with self._lock:
            return [
                Pod.from_dict(data)
                for (ns, _), data in self._pods.items()
                if namespace is None or ns == namespace
            ]

    def patch_pod_status(
        self,
        namespace: str,
        name: str,
        patch: bytes | str | Mapping[str, Any],
        *,
        resource_version: str | None = None,
    ) -> Pod:
        """Apply a strategic merge patch to the pod's status (see the class docstring)."""
        body, error = self._decode_patch(patch)
        if resource_version is not None and isinstance(body, dict):
            # The versioned client protocol: the precondition travels in the patch itself.
            meta = body.get("metadata")
            if not isinstance(meta, dict):
                meta = body["metadata"] = {}
            meta["resourceVersion"] = resource_version
        self._begin(("patch", namespace, name, body))
        if error is not None:
            raise BadRequestError(f"error decoding patch: {error}")
        if not isinstance(body, dict):
            raise BadRequestError("a strategic merge patch must be a JSON object")
        with self._lock:
            stored = self._pods.get((namespace, name))
            if stored is None:
                raise _not_found(name)
            self._check_preconditions(name, stored, body.get("metadata"))
            status_patch = body.get("status")
            if status_patch is None:
                return Pod.from_dict(stored)
            old_status = stored.get("status") or {}
            try:
                merged = apply_strategic_merge_patch({"status": old_status}, {"status": status_patch})
            except PatchError as exc:
                raise BadRequestError(f"invalid patch for pods/status: {exc}") from exc
            new_status = merged.get("status") or {}
            if new_status == old_status:
                return Pod.from_dict(stored)
            self._validate_status_update(name, old_status, new_status)
            candidate = {**stored, "status": new_status}
            candidate["metadata"] = dict(stored["metadata"])
            try:
                Pod.from_dict(candidate)
            except InvalidObjectError as exc:
                raise UnprocessableEntityError(f'Pod "{name}" is invalid: {exc}') from exc
            return self._store((namespace, name), candidate)

    def delete_pod(
        self,
        namespace: str,
        name: str,
        *,
        grace_period_seconds: int | None = None,
        uid: str | None = None,
    ) -> None:
        """Delete a pod, with the UID precondition (see the class docstring)."""
        self._begin(("delete", namespace, name, grace_period_seconds, uid))
        with self._lock:
            key = (namespace, name)
            stored = self._pods.get(key)
            if stored is None:
                raise _not_found(name)
            meta = stored["metadata"]
            if uid is not None and uid != meta.get("uid"):
                raise _uid_conflict(uid, meta.get("uid", ""))
            grace = grace_period_seconds
            if grace is None:
                spec_grace = (stored.get("spec") or {}).get("terminationGracePeriodSeconds")
                grace = spec_grace if spec_grace is not None else _DEFAULT_GRACE_SECONDS
            if grace <= 0 and not meta.get("finalizers"):
                del self._pods[key]
                return
            grace = max(grace, 0)
            current = meta.get("deletionGracePeriodSeconds")
            if meta.get("deletionTimestamp") and current is not None and current <= grace:
                return  # a graceful deletion may only be shortened
            updated = {**stored, "metadata": dict(meta)}
            updated["metadata"]["deletionTimestamp"] = _timestamp(self._clock() + timedelta(seconds=grace))
            updated["metadata"]["deletionGracePeriodSeconds"] = grace
            self._store(key, updated)

    # --- internals ----------------------------------------------------------------

    def _begin(self, request: Request) -> None:
        self._serve(request, request[0], request[1], request[2] if len(request) > 2 else "")

    def _store(self, key: tuple[str, str], data: dict[str, Any]) -> Pod:
        # Caller holds the lock.
        self._resource_version += 1
        data["metadata"]["resourceVersion"] = str(self._resource_version)
        self._pods[key] = data
        return Pod.from_dict(data)

    @staticmethod
    def _normalise(pod: PodLike) -> dict[str, Any]:
        # Through Pod: rejects what is not a pod; to_dict gives a fresh, private dict.
        obj = pod if isinstance(pod, Pod) else Pod.from_dict(dict(pod))
        data = obj.to_dict()
        data.setdefault("metadata", {})
        return data

    @staticmethod
    def _decode_patch(patch: bytes | str | Mapping[str, Any]) -> tuple[Any, str | None]:
        """The decoded body (a private copy), or the raw body and why it is not JSON."""
        if isinstance(patch, Mapping):
            return json.loads(json.dumps(patch)), None
        try:
            return json.loads(patch), None
        except ValueError as exc:
            return patch, str(exc)

    def _check_preconditions(self, name: str, stored: dict[str, Any], meta: Any) -> None:
        if meta is None:
            return
        if not isinstance(meta, dict):
            raise BadRequestError("metadata in a patch must be an object")
        stored_meta = stored["metadata"]
        want_uid = meta.get("uid")
        if want_uid is not None and want_uid != stored_meta.get("uid"):
            raise _uid_conflict(want_uid, stored_meta.get("uid", ""))
        want_version = meta.get("resourceVersion")
        if want_version is not None and want_version != stored_meta.get("resourceVersion"):
            raise _version_conflict(name)

    @staticmethod
    def _validate_status_update(name: str, old: dict[str, Any], new: dict[str, Any]) -> None:
        # The embedded API server's rule, from the one home of status validation.
        errors = terminal_phase_errors(old, new)
        if errors:
            raise UnprocessableEntityError(f'Pod "{name}" is invalid: {errors[0]}')


def _body(value: Any) -> Any:
    """A recorded body: decoded JSON (a private copy), or the raw value when it is not JSON."""
    if isinstance(value, Pod):
        return value.to_dict()
    if isinstance(value, bytes | bytearray | str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return json.loads(json.dumps(value)) if value is not None else None


class FakeNodeClient(_Recorder):
    """An in-memory :class:`~podstatus.protocols.NodeClient` that records every request.

    For tests of a node agent (STYLE 10). Requests are served by an
    embedded :class:`~podstatus.server.storage.store.Store` (``store``, made when not
    given), so they mean what they mean on the embedded API server:
    validation, resourceVersion preconditions, Event conversion, watch events.
    Each request is recorded in :attr:`requests` as ``(verb, resource,
    namespace, name, body)`` (resource ``pods``, ``pods/status``, ``nodes``,
    ``nodes/status``, ``leases`` or ``events``; the body decoded; failed
    requests too) and counted by verb. ``fail_next`` and ``before_request``
    work as on :class:`FakeKubeClient` (hooks get ``(verb, namespace, name)``).
    Setting the world up goes through :attr:`store` directly and is not recorded.
    """

    def __init__(self, store: Store | None = None, *, counter: RequestCounter | None = None) -> None:
        super().__init__(counter)
        self.store = store if store is not None else Store()
        # Serves the requests; it counts on a private counter (this fake counts its own).
        self._client = EmbeddedClient(self.store)

    def _record(self, verb: str, resource: str, namespace: str | None, name: str, body: Any = None) -> None:
        self._serve((verb, resource, namespace or "", name, _body(body)), verb, namespace or "", name)

    # --- what was asked -------------------------------------------------------------

    def calls(self) -> list[tuple[str, str]]:
        """``(verb, resource)`` of every recorded request, in order: ``[("get", "leases"), ...]``."""
        with self._lock:
            return [(r[0], r[1]) for r in self.requests]

    def bodies(self, verb: str, resource: str) -> list[Any]:
        """The recorded bodies of one kind of request, in order."""
        with self._lock:
            return [r[4] for r in self.requests if r[0] == verb and r[1] == resource]

    # --- pods -----------------------------------------------------------------------

    def get_pod(self, namespace: str, name: str) -> Pod:
        self._record("get", "pods", namespace, name)
        return self._client.get_pod(namespace, name)

    def patch_pod_status(
        self, namespace: str, name: str, patch: bytes, *, resource_version: str | None = None
    ) -> Pod:
        self._record("patch", "pods/status", namespace, name, patch)
        return self._client.patch_pod_status(namespace, name, patch, resource_version=resource_version)

    def delete_pod(
        self, namespace: str, name: str, *, grace_period_seconds: int | None = None, uid: str | None = None
    ) -> None:
        options = {"gracePeriodSeconds": grace_period_seconds, "uid": uid}
        self._record("delete", "pods", namespace, name, options)
        self._client.delete_pod(namespace, name, grace_period_seconds=grace_period_seconds, uid=uid)

    def create_pod(self, pod: PodLike, namespace: str | None = None) -> Pod:
        body = pod.to_dict() if isinstance(pod, Pod) else dict(pod)
        ns = namespace or (body.get("metadata") or {}).get("namespace") or "default"
        self._record("create", "pods", ns, (body.get("metadata") or {}).get("name") or "", body)
        return self._client.create_pod(body, ns)

    def list_pods(
        self,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int | None = None,
    ) -> tuple[list[Pod], str]:
        selectors = {"labelSelector": label_selector, "fieldSelector": field_selector, "limit": limit}
        self._record("list", "pods", namespace, "", selectors)
        return self._client.list_pods(namespace, label_selector=label_selector, field_selector=field_selector)

    def watch_pods(
        self,
        namespace: str | None = None,
        *,
        field_selector: str | None = None,
        label_selector: str | None = None,
        resource_version: str | None = None,
        timeout_seconds: int | None = None,
        stop_event: threading.Event | None = None,
    ) -> Iterator[tuple[str, Pod]]:
        options = {
            "labelSelector": label_selector,
            "fieldSelector": field_selector,
            "resourceVersion": resource_version,
            "timeoutSeconds": timeout_seconds,
        }
        self._record("watch", "pods", namespace, "", options)
        return self._client.watch_pods(
            namespace,
            field_selector=field_selector,
            label_selector=label_selector,
            resource_version=resource_version,
            timeout_seconds=timeout_seconds,
            stop_event=stop_event,
        )

    # --- nodes ----------------------------------------------------------------------

    def create_node(self, node: Mapping[str, Any]) -> dict[str, Any]:
        self._record("create", "nodes", None, (node.get("metadata") or {}).get("name") or "", node)
        return self._client.create_node(node)

    def get_node(self, name: str) -> dict[str, Any]:
        self._record("get", "nodes", None, name)
        return self._client.get_node(name)

    def list_nodes(
        self, *, label_selector: str | None = None, field_selector: str | None = None
    ) -> tuple[list[dict[str, Any]], str]:
        self._record(
            "list", "nodes", None, "", {"labelSelector": label_selector, "fieldSelector": field_selector}
        )
        return self._client.list_nodes(label_selector=label_selector, field_selector=field_selector)

    def patch_node(self, name: str, patch: bytes) -> dict[str, Any]:
        self._record("patch", "nodes", None, name, patch)
        return self._client.patch_node(name, patch)

    def patch_node_status(self, name: str, patch: bytes) -> dict[str, Any]:
        self._record("patch", "nodes/status", None, name, patch)
        return self._client.patch_node_status(name, patch)

    def delete_node(self, name: str) -> None:
        self._record("delete", "nodes", None, name)
        self._client.delete_node(name)

    # --- leases and events ----------------------------------------------------------

    def get_lease(self, namespace: str, name: str) -> dict[str, Any]:
        self._record("get", "leases", namespace, name)
        return self._client.get_lease(namespace, name)

    def create_lease(self, namespace: str, lease: Mapping[str, Any]) -> dict[str, Any]:
        self._record("create", "leases", namespace, (lease.get("metadata") or {}).get("name") or "", lease)
        return self._client.create_lease(namespace, lease)

    def update_lease(self, namespace: str, name: str, lease: Mapping[str, Any]) -> dict[str, Any]:
        self._record("update", "leases", namespace, name, lease)
        return self._client.update_lease(namespace, name, lease)

    def create_event(self, namespace: str, event: Mapping[str, Any]) -> dict[str, Any]:
        self._record("create", "events", namespace, (event.get("metadata") or {}).get("name") or "", event)
        return self._client.create_event(namespace, event)

    def patch_event(self, namespace: str, name: str, patch: bytes) -> dict[str, Any]:
        self._record("patch", "events", namespace, name, patch)
        return self._client.patch_event(namespace, name, patch)
