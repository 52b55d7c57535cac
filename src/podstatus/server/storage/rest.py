"""What the generic store does to every write before the kind's strategy (kube-apiserver's
rest.BeforeCreate and rest.BeforeUpdate): preconditions, the metadata only the server sets,
finalizers of an object being deleted, ObjectMeta validation. Pure functions over wire dicts.
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping
from typing import Any

from ...errors import ApiError, NotFoundError, status_body
from .errors import MODIFIED, FieldError, bad_request, conflict
from .meta import SERVER_META, check_labels
from .objects import Stored
from .strategy import ResourceInfo

__all__ = ["before_create", "before_update", "check_subresource", "generate_name", "registry_key"]

_GENERATE_CHARS = "bcdfghjklmnpqrstvwxz2456789"


def registry_key(info: ResourceInfo, ns: str, name: str) -> str:
    """Where kube-apiserver keeps the object in etcd (it shows in some error messages)."""
    resource = info.strategy.storage_path or info.name
    return f"/registry/{resource}/{ns}/{name}" if info.namespaced else f"/registry/{resource}/{name}"


def before_create(info: ResourceInfo, meta: dict[str, Any]) -> tuple[list[FieldError], Any]:
    """Validate the name and labels of a new object's metadata and drop what only the server
    sets (in place); returns the errors and the managedFields the request gave."""
    name = meta.get("name") or ""
    errors: list[FieldError] = []
    if not name and not meta.get("generateName"):
        errors.append(
            FieldError("metadata.name", "Required value", detail="name or generateName is required")
        )
    elif name:
        info.strategy.check_name(name, errors)
    check_labels(meta, errors)
    for key in ("uid", "resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds", "selfLink"):
        meta.pop(key, None)
    return errors, meta.pop("managedFields", None)


def before_update(
    info: ResourceInfo, ns: str, name: str, cur: dict[str, Any], new: dict[str, Any], *, patch: bool
) -> tuple[dict[str, Any], list[FieldError], Any]:
    """The metadata a replacement of ``cur`` by ``new`` keeps: preconditions checked (409/400),
    what the server owns taken from ``cur``; returns it with the errors so far and the
    managedFields the request gave. ``patch``: ``new`` is a patch's result (its UID is a
    validation error, not a storage precondition)."""
    cur_meta = cur["metadata"]
    given_meta = new.get("metadata")
    meta = dict(given_meta) if isinstance(given_meta, dict) else {}
    requested = meta.get("managedFields")
    uid = meta.get("uid")
    other_uid = bool(uid) and uid != cur_meta.get("uid")
    if other_uid and not patch:
        # The UID of a PUT body is a storage precondition (rest.DefaultUpdatedObjectInfo).
        raise conflict(
            info.key, name, f"StorageError: invalid object, Code: 4, Key: {registry_key(info, ns, name)}, "
            f"ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: UID in precondition: {uid}, "
            f"UID in object meta: {cur_meta.get('uid')}",
        )  # fmt: skip
    rv = meta.get("resourceVersion")
    if rv and rv != cur_meta.get("resourceVersion"):
        raise conflict(info.key, name, MODIFIED)
    if meta.get("name") and meta["name"] != name:
        raise bad_request(
            f"the name of the object ({meta['name']}) does not match the name on the URL ({name})"
        )
    if info.namespaced and meta.get("namespace") and meta["namespace"] != ns:
        raise bad_request(
            "the namespace of the provided object does not match the namespace sent on the request"
        )
    errors: list[FieldError] = []
    # A patch changing metadata.uid fails validation (the field is immutable).
    if other_uid:
        errors.append(FieldError("metadata.uid", "Invalid value", uid, "field is immutable"))
    # What the server owns is kept (rest.BeforeUpdate); the rest of the metadata (labels,
    # annotations, finalizers...) is taken from the request, for pods/status too.
    for key in SERVER_META:
        if key in cur_meta:
            meta[key] = cur_meta[key]
        else:
            meta.pop(key, None)
    meta.pop("selfLink", None)
    grace, old_grace = meta.get("deletionGracePeriodSeconds"), cur_meta.get("deletionGracePeriodSeconds")
    if grace is None:
        if old_grace is not None:
            meta["deletionGracePeriodSeconds"] = old_grace
    elif grace != old_grace:
        errors.append(
            FieldError("metadata.deletionGracePeriodSeconds", "Invalid value", grace, "field is immutable")
        )
    if isinstance(meta.get("finalizers"), list) and not meta["finalizers"]:
        del meta["finalizers"]
    if cur_meta.get("deletionTimestamp"):
        old_finalizers = cur_meta.get("finalizers") or ()
        added = sorted({f for f in meta.get("finalizers") or () if f not in old_finalizers})
        if added:
            found = ", ".join(json.dumps(f) for f in added)
            errors.append(FieldError("metadata.finalizers", "Forbidden", detail=(
                f"no new finalizers can be added if the object is being deleted, found new finalizers "
                f"[]string{{{found}}}"
            )))  # fmt: skip
    if meta.get("labels") != cur_meta.get("labels") or meta.get("annotations") != cur_meta.get("annotations"):
        check_labels(meta, errors)
    return meta, errors, requested


def check_subresource(info: ResourceInfo, subresource: str | None) -> None:
    """404 unless the resource serves ``subresource`` (status, or one its strategy writes)."""
    if subresource and subresource in info.strategy.subresources:
        return  # one the kind's strategy writes (pods/resize)
    if subresource not in (None, "", "status") or (not info.has_status and subresource):
        message = "the server could not find the requested resource"
        status = status_body(404, "NotFound", message)
        status["details"] = {}
        raise NotFoundError(message, status=status)


def generate_name(prefix: str, bucket: Mapping[str, Stored]) -> str:
    """``prefix`` and five random characters, a name not in ``bucket`` (generateName)."""
    prefix = prefix[: 253 - 5]
    for _ in range(100):
        name = prefix + "".join(random.choices(_GENERATE_CHARS, k=5))
        if name not in bucket:
            return name
    raise ApiError("could not generate a unique name", code=500, reason="InternalError")
