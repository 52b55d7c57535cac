"""The core and group resources of the store: create, get, list, update, patch, apply, delete,
deletecollection, and the pods' binding and eviction subresources (watches: :mod:`.watches`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...errors import ApiError, status_body
from ...requestcount import RequestCounter
from .. import bodies, discovery, negotiation
from ..fieldmanager import options as fieldoptions
from ..fieldmanager import schema
from ..proxy import KubeletProxy
from ..registry.pods import bind, evict, eviction_options
from ..storage.errors import FieldError, bad_request
from ..storage.objects import Stored
from ..storage.store import Store
from ..storage.strategy import RESOURCES
from .groups import POD_STREAMS, kubelet_subresource
from .watches import WatchEndpoint, wait_for_resource_version
from .wire import (
    NOT_ALLOWED,
    NOT_FOUND,
    TABLE_TYPE,
    Request,
    Response,
    encode,
    flag,
    int_param,
    is_apply,
    status_error,
    wants_table,
)

__all__ = ["ResourceEndpoints"]


class ResourceEndpoints:
    """``/api/v1/...`` and ``/apis/GROUP/VERSION/...`` of the kinds in the store's registry."""

    def __init__(
        self, store: Store, counter: RequestCounter, kubelet: KubeletProxy, watches: WatchEndpoint
    ) -> None:
        self.store = store
        self.counter = counter
        self.kubelet = kubelet
        self.watches = watches

    def serve(self, req: Request, parts: list[str], group: str = "") -> Response:
        watch_path = False
        if parts[0] == "watch":
            watch_path = True
            parts = parts[1:]
        namespace: str | None = None
        if len(parts) >= 3 and parts[0] == "namespaces":
            namespace = parts[1]
            parts = parts[2:]
        resource = (f"{parts[0]}.{group}" if group else parts[0]) if parts else ""
        if (
            not group
            and len(parts) >= 3
            and ((resource == "pods" and namespace is not None and len(parts) == 3 and parts[2] in POD_STREAMS)
                 or (resource == "nodes" and namespace is None and parts[2] == "proxy"))
        ):  # fmt: skip
            return kubelet_subresource(self.kubelet, req, resource, namespace, parts)
        if resource not in RESOURCES or len(parts) > 3:
            return status_error(404, "NotFound", NOT_FOUND)
        info = RESOURCES[resource]
        if info.namespaced and namespace is None and len(parts) > 1:
            return status_error(404, "NotFound", NOT_FOUND)
        if not info.namespaced and namespace is not None:
            return status_error(404, "NotFound", NOT_FOUND)
        name = parts[1] if len(parts) > 1 else None
        sub = parts[2] if len(parts) > 2 else None
        method = req.method
        applying = method == "PATCH" and is_apply(req)
        manager: str | None = None
        if method in ("POST", "PUT", "PATCH"):
            given = req.query.get("fieldManager")
            fieldoptions.validate_field_manager(method, given, apply=applying, force=req.query.get("force"))
            manager = fieldoptions.manager_or_user_agent(given, req.header("user-agent"))
        if watch_path or (name is None and method == "GET" and flag(req.query.get("watch"))):
            if method != "GET":
                return status_error(405, "MethodNotAllowed", NOT_ALLOWED)
            if name is not None:
                # /watch/.../pods/NAME: a watch of one object.
                req.query["fieldSelector"] = ",".join(
                    s for s in (req.query.get("fieldSelector"), f"metadata.name={name}") if s
                )
            return self.watches.serve(req, resource, namespace)
        if name is None:
            if method == "GET":
                return self._list(req, resource, namespace)
            if method == "POST" and info.namespaced == (namespace is not None):
                self.counter.inc("create")
                options = negotiation.write_options(req.query, "CreateOptions")
                stored = self.store.create(
                    resource, namespace, self._json_body(req), options=options, field_manager=manager
                )
                return Response(201, stored.raw, warnings=options.warnings)
            if method == "DELETE" and resource != "namespaces":
                return self._delete_collection(req, resource, namespace)
            return status_error(405, "MethodNotAllowed", NOT_ALLOWED)
        if sub is not None:
            if sub == "binding" and resource == "pods" and method == "POST":
                return self._bind(req, namespace or "", name)
            if sub == "eviction" and resource == "pods" and method == "POST":
                return self._evict(req, namespace or "", name)
            if (sub != "status" or not info.has_status) and not (sub == "resize" and resource == "pods"):
                # As kube-apiserver answers for a subresource it does not serve (empty details).
                body = status_body(404, "NotFound", NOT_FOUND)
                body["details"] = {}
                return Response.json(404, body)
            if method not in ("GET", "PUT", "PATCH"):
                return status_error(405, "MethodNotAllowed", NOT_ALLOWED)
        if method == "GET":
            self.counter.inc("get")
            stored = self.store.get(resource, namespace, name)
            return self._object(req, resource, stored)
        if method == "PUT":
            self.counter.inc("update")
            options = negotiation.write_options(req.query, "UpdateOptions")
            stored = self.store.update(
                resource, namespace, name, self._json_body(req), subresource=sub, options=options,
                field_manager=manager,
            )  # fmt: skip
            return Response(200, stored.raw, warnings=options.warnings)
        if method == "PATCH":
            self.counter.inc("patch")
            if applying:
                options = negotiation.write_options(req.query, "PatchOptions")
                stored, created = self.store.apply(
                    resource, namespace, name, req.body, field_manager=manager, subresource=sub,
                    force=bool(flag(req.query.get("force"))), options=options,
                )  # fmt: skip
                return Response(201 if created else 200, stored.raw, warnings=options.warnings)
            ctype = req.header("content-type") or "application/strategic-merge-patch+json"
            options = negotiation.write_options(req.query, "PatchOptions")
            stored = self.store.patch(
                resource, namespace, name, req.body, ctype, subresource=sub, options=options,
                field_manager=manager,
            )  # fmt: skip
            return Response(200, stored.raw, warnings=options.warnings)
        if method == "DELETE":
            self.counter.inc("delete")
            return self._delete(req, resource, namespace, name)
        return status_error(405, "MethodNotAllowed", NOT_ALLOWED)

    @staticmethod
    def _json_body(req: Request) -> Any:
        """The request's object: JSON bytes as sent, or a protobuf body decoded to its JSON form."""
        return bodies.decode_object(req.header("content-type"), req.body)

    def _object(self, req: Request, resource: str, stored: Stored) -> Response:
        if wants_table(req, resource):
            data = discovery.table(
                resource, [stored], stored.rv, include_object=req.query.get("includeObject", ""),
                now=self.store.now(),
            )  # fmt: skip
            return Response(200, encode(data), content_type=TABLE_TYPE)
        return Response(200, stored.raw)

    def _list(self, req: Request, resource: str, namespace: str | None) -> Response:
        self.counter.inc("list")
        q = req.query
        limit = int_param(q, "limit")
        token = q.get("continue") or None
        if token and q.get("resourceVersion") not in (None, "", "0"):
            raise bad_request("specifying resource version is not allowed when using continue")
        exact: int | None = None
        if not token:
            wait_for_resource_version(self.store, q.get("resourceVersion"))
            # An exact read: asked for, or (the legacy form) a limit with a resourceVersion.
            wanted, match = q.get("resourceVersion"), q.get("resourceVersionMatch")
            if wanted not in (None, "", "0") and (match == "Exact" or (not match and limit and limit > 0)):
                exact = int(str(wanted))
        page = self.store.list_page(
            resource,
            namespace,
            label_selector=q.get("labelSelector"),
            field_selector=q.get("fieldSelector"),
            limit=limit,
            continue_token=token,
            exact_resource_version=exact,
        )
        items, rv = page.items, page.rv
        if wants_table(req, resource):
            data = discovery.table(
                resource, items, rv, include_object=req.query.get("includeObject", ""), now=self.store.now()
            )
            if page.continue_token:
                data["metadata"]["continue"] = page.continue_token
                if page.remaining is not None:
                    data["metadata"]["remainingItemCount"] = page.remaining
            return Response(200, encode(data), content_type=TABLE_TYPE)
        info = RESOURCES[resource]
        # Items are stored encoded: the list is a join, not a re-encode.
        body = b"".join(
            (
                b'{"kind":"',
                info.list_kind.encode(),
                b'","apiVersion":"',
                info.api_version.encode(),
                b'","metadata":{"resourceVersion":"',
                str(rv).encode(),
                b'"',
                _list_meta_extra(page.continue_token, page.remaining),
                b'},"items":[',
                b",".join(s.raw for s in items),
                b"]}",
            )
        )
        return Response(200, body)

    @staticmethod
    def _delete_options(req: Request) -> tuple[int | None, str | None, str | None, bool]:
        """Grace period, preconditions and dry run: from the body (JSON, YAML or protobuf) when
        there is one, else from the query (the real server reads one or the other, never both)."""
        opts = bodies.decode_options(req.header("content-type"), req.body, "DeleteOptions")
        if opts is None:
            dry = req.query.get("dryRun")
            if dry is not None and dry != "All":
                raise _bad_dry_run([dry])
            return int_param(req.query, "gracePeriodSeconds"), None, None, dry == "All"
        found = schema.prune("v1/DeleteOptions", dict(opts))
        if found.range_error:
            raise bad_request(found.range_error)
        dry_run = opts.get("dryRun") or []
        if not isinstance(dry_run, list) or any(v != "All" for v in dry_run):
            raise _bad_dry_run(dry_run)
        return (*_parse_delete_options(opts, None), bool(dry_run))

    def _delete(self, req: Request, resource: str, namespace: str | None, name: str) -> Response:
        grace, uid, rv, dry_run = self._delete_options(req)
        stored, gone = self.store.delete(
            resource,
            namespace,
            name,
            grace_period_seconds=grace,
            uid=uid,
            resource_version=rv,
            dry_run=dry_run,
        )
        info = RESOURCES[resource]
        if gone and info.name != "pods":
            # kube-apiserver answers the removal of anything but a pod with a Status, not the object.
            details = {"name": name, "group": info.group, "kind": info.name, "uid": stored.uid}
            if not info.group:
                del details["group"]
            ok = {
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Success",
                "details": details,
            }
            return Response.json(200, ok)
        return Response(200, stored.raw)

    def _delete_collection(self, req: Request, resource: str, namespace: str | None) -> Response:
        self.counter.inc("deletecollection")
        grace, _, _, dry_run = self._delete_options(req)
        items, rv = self.store.list(
            resource,
            namespace,
            label_selector=req.query.get("labelSelector"),
            field_selector=req.query.get("fieldSelector"),
        )
        out: list[bytes] = []
        for item in items:
            ns = item.namespace or None
            try:
                stored, _ = self.store.delete(
                    resource, ns, item.name, grace_period_seconds=grace, dry_run=dry_run
                )
            except ApiError as err:
                if err.code == 404:
                    continue
                raise
            out.append(stored.raw)
        info = RESOURCES[resource]
        head = (
            f'{{"kind":"{info.list_kind}","apiVersion":"{info.api_version}",'
            f'"metadata":{{"resourceVersion":"{rv}"}},"items":['
        )
        return Response(200, head.encode() + b",".join(out) + b"]}")

    def _bind(self, req: Request, namespace: str, name: str) -> Response:
        self.counter.inc("create")
        body = bodies.decode_options(req.header("content-type"), req.body, "Binding") or {}
        target = body.get("target")
        node = target.get("name") if isinstance(target, dict) else None
        if not isinstance(node, str) or not node:
            raise bad_request("invalid Binding: target.name is required")
        bind(self.store, namespace, name, node)
        return Response.json(201, _SUCCESS_201)

    def _evict(self, req: Request, namespace: str, name: str) -> Response:
        """policy/v1 Eviction: DisruptionTarget=True, then a delete with the eviction's DeleteOptions.

        This server has no PodDisruptionBudgets, so every eviction is allowed, as in a
        cluster with none.
        """
        self.counter.inc("create")
        body = bodies.decode_options(req.header("content-type"), req.body, "Eviction") or {}
        grace, uid, rv = _parse_delete_options(eviction_options(body, namespace, name), None)
        evict(self.store, namespace, name, grace_period_seconds=grace, uid=uid, resource_version=rv)
        return Response.json(201, _SUCCESS_201)


_SUCCESS_201 = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}


def _bad_dry_run(value: Any) -> ApiError:
    return negotiation.invalid_options(
        "DeleteOptions", [FieldError("dryRun", "Unsupported value", value, 'supported values: "All"')]
    )


def _parse_delete_options(
    opts: Mapping[str, Any] | None, grace: int | None
) -> tuple[int | None, str | None, str | None]:
    """(gracePeriodSeconds, preconditions.uid, preconditions.resourceVersion) from DeleteOptions.

    The body's grace period wins over the query's, as in kube-apiserver.
    """
    uid = rv = None
    if opts is None:
        return grace, uid, rv
    if opts.get("gracePeriodSeconds") is not None:
        if not isinstance(opts["gracePeriodSeconds"], int) or isinstance(opts["gracePeriodSeconds"], bool):
            raise bad_request("invalid DeleteOptions: gracePeriodSeconds must be an integer")
        grace = opts["gracePeriodSeconds"]
    pre = opts.get("preconditions") or {}
    if isinstance(pre, dict):
        uid = pre.get("uid")
        rv = pre.get("resourceVersion")
    return grace, uid, rv


def _list_meta_extra(continue_token: str, remaining: int | None) -> bytes:
    """``,"continue":...,"remainingItemCount":N`` of a list's metadata (empty on the last page)."""
    if not continue_token:
        return b""
    out = b',"continue":' + encode(continue_token)
    if remaining is not None:
        out += b',"remainingItemCount":' + str(remaining).encode()
    return out
