"""pods/resize: the same requests against kube-apiserver v1.37.2 and the embedded server.

As test_compare.py: each scenario runs on the real server and on both configurations of
the embedded one, and the answers (status codes, Status messages, the resized pod) must
be the same.
"""

from __future__ import annotations

from typing import Any

import pytest
from apisuite_kit import IMAGE, JSON_PATCH, STRATEGIC, Answer, Server, unique
from test_compare import Ctx, kube_like_server, same_as_real, server

__all__ = ["kube_like_server", "server"]  # fixtures, used by name

pytestmark = pytest.mark.apiserver


RESIZE_NODE = "resize-node-1"


def _node(ctx: Ctx) -> None:
    """The pods' node, with an allocatable: kube-apiserver's resize admission reads it."""
    body = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": RESIZE_NODE, "labels": {"kubernetes.io/os": "linux"}},
        "status": {"capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"},
                   "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}},
    }  # fmt: skip
    ans = ctx.raw.request("POST", "/api/v1/nodes", body)
    assert ans.code in (201, 409), ans.body


def _pod(
    ctx: Ctx, *, limits: bool = False, annotations: dict[str, str] | None = None, node: str = RESIZE_NODE
) -> str:
    _node(ctx)
    name = unique("rs")
    resources: dict[str, Any] = {"requests": {"cpu": "100m", "memory": "64Mi"}}
    if limits:
        resources["limits"] = {"cpu": "500m", "memory": "64Mi"}
    manifest = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "rs"}, "annotations": annotations or {}},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": IMAGE, "resources": resources}]},
    }
    ans = ctx.raw.create_pod(manifest)
    assert ans.code == 201, ans.body
    n = len(ctx.secrets) // 2
    ctx.secrets[name] = f"<name{n}>"
    ctx.secrets[ans.body["metadata"]["uid"]] = f"<uid{n}>"
    return name


def _resize(ctx: Ctx, name: str, patch: Any, content_type: str = STRATEGIC) -> Answer:
    return ctx.raw.request("PATCH", ctx.raw.pods_path(name, "resize"), patch, content_type=content_type)


def _requests(cpu: str, **more: Any) -> dict[str, Any]:
    return {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}, **more}]}}


def _summary(ans: Answer) -> dict[str, Any]:
    if ans.code != 200:
        return {
            "code": ans.code,
            "message": (ans.body or {}).get("message") if isinstance(ans.body, dict) else None,
        }
    body = ans.body
    c = body["spec"]["containers"][0]
    return {
        "code": ans.code,
        "generation": body["metadata"]["generation"],
        "labels": body["metadata"].get("labels"),
        "image": c["image"],
        "resources": c.get("resources"),
    }


def test_resize_takes_only_resources_and_bumps_the_generation(
    server: Server, real_server: Server, request: pytest.FixtureRequest
) -> None:
    def scenario(ctx: Ctx) -> Any:
        name = _pod(ctx)
        patch = _requests("300m", image="registry.k8s.io/pause:9")
        patch["metadata"] = {"labels": {"app": "other"}}
        first = _summary(_resize(ctx, name, patch))
        again = _summary(_resize(ctx, name, _requests("0.3")))  # the same quantity, written another way
        got = ctx.raw.request("GET", ctx.raw.pods_path(name, "resize"))
        return [first, again, got.code, got.body.get("kind")]

    got = same_as_real(server, real_server, request, scenario)
    assert got[0]["generation"] == 2 and got[0]["labels"] == {"app": "rs"} and got[0]["image"] == IMAGE


def test_resize_validation_errors(
    server: Server, real_server: Server, request: pytest.FixtureRequest
) -> None:
    def scenario(ctx: Ctx) -> Any:
        name = _pod(ctx, limits=True)
        plain = _pod(ctx)
        return [
            ctx.error(_resize(ctx, name, _requests("1"))),  # above the limit
            ctx.error(
                _resize(
                    ctx,
                    name,
                    [{"op": "remove", "path": "/spec/containers/0/resources/limits/memory"}],
                    JSON_PATCH,
                )
            ),
            ctx.error(
                _resize(
                    ctx,
                    plain,
                    [{"op": "remove", "path": "/spec/containers/0/resources/requests/memory"}],
                    JSON_PATCH,
                )
            ),
            ctx.error(
                _resize(
                    ctx,
                    plain,
                    [
                        {
                            "op": "add",
                            "path": "/spec/containers/0/resources/requests/ephemeral-storage",
                            "value": "1Gi",
                        }
                    ],
                    JSON_PATCH,
                )
            ),
            ctx.error(
                _resize(
                    ctx,
                    plain,
                    {
                        "spec": {
                            "containers": [
                                {
                                    "name": "c",
                                    "resizePolicy": [
                                        {"resourceName": "cpu", "restartPolicy": "RestartContainer"}
                                    ],
                                }
                            ]
                        }
                    },
                )
            ),
            ctx.error(
                _resize(
                    ctx,
                    name,
                    {
                        "spec": {
                            "containers": [
                                {
                                    "name": "c",
                                    "resources": {
                                        "requests": {"cpu": "500m", "memory": "64Mi"},
                                        "limits": {"cpu": "500m", "memory": "64Mi"},
                                    },
                                }
                            ]
                        }
                    },
                )
            ),
            ctx.error(
                _resize(
                    ctx,
                    plain,
                    [{"op": "replace", "path": "/spec/containers/0/name", "value": "x"}],
                    JSON_PATCH,
                )
            ),
            ctx.error(
                _resize(
                    ctx,
                    plain,
                    [{"op": "add", "path": "/spec/containers/-", "value": {"name": "d", "image": IMAGE}}],
                    JSON_PATCH,
                )
            ),
        ]

    got = same_as_real(server, real_server, request, scenario)
    assert all(g["code"] == 422 for g in got), got


def test_resize_of_a_pod_on_a_node_without_resize_support(
    server: Server, real_server: Server, request: pytest.FixtureRequest
) -> None:
    """A running container whose status has no resources: the node is too old to resize."""

    def scenario(ctx: Ctx) -> Any:
        name = _pod(ctx)
        running = {"status": {"phase": "Running", "containerStatuses": [{
            "name": "c", "image": IMAGE, "imageID": "", "ready": True, "restartCount": 0,
            "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}}]}}  # fmt: skip
        assert ctx.raw.patch_status(name, running).code == 200
        refused = ctx.error(_resize(ctx, name, _requests("200m")))
        running["status"]["containerStatuses"][0]["resources"] = {
            "requests": {"cpu": "100m", "memory": "64Mi"}
        }
        assert ctx.raw.patch_status(name, running).code == 200
        return [refused, _summary(_resize(ctx, name, _requests("200m")))]

    got = same_as_real(server, real_server, request, scenario)
    assert got[0]["code"] == 422 and got[1]["code"] == 200


def test_static_pods_cannot_be_resized(
    server: Server, real_server: Server, request: pytest.FixtureRequest
) -> None:
    def scenario(ctx: Ctx) -> Any:
        name = _pod(ctx, annotations={"kubernetes.io/config.mirror": "abc"})
        return ctx.error(_resize(ctx, name, _requests("200m")))

    got = same_as_real(server, real_server, request, scenario)
    assert got["code"] == 422


def test_discovery_lists_pods_resize(
    server: Server, real_server: Server, request: pytest.FixtureRequest
) -> None:
    def scenario(ctx: Ctx) -> Any:
        resources = ctx.raw.request("GET", "/api/v1").body["resources"]
        return [r for r in resources if r["name"] in ("pods/resize", "pods/status")]

    same_as_real(server, real_server, request, scenario)


def test_resize_admission_against_the_node(
    server: Server, real_server: Server, request: pytest.FixtureRequest
) -> None:
    """PodResizeValidator and NodeDeclaredFeatureValidator: 403s from the pod's node."""

    def scenario(ctx: Ctx) -> Any:
        name = _pod(ctx)
        lost = _pod(ctx, node="node-that-is-not-there")
        return [
            ctx.error(
                _resize(
                    ctx,
                    name,
                    {
                        "spec": {
                            "containers": [
                                {"name": "c", "resources": {"requests": {"cpu": "5", "memory": "9Gi"}}}
                            ]
                        }
                    },
                )
            ),
            _summary(
                _resize(
                    ctx,
                    name,
                    {
                        "spec": {
                            "containers": [
                                {"name": "c", "resources": {"requests": {"cpu": "4", "memory": "8Gi"}}}
                            ]
                        }
                    },
                )
            ),
            ctx.error(_resize(ctx, lost, _requests("200m"))),
        ]

    got = same_as_real(server, real_server, request, scenario)
    assert [g["code"] for g in got] == [403, 200, 403]
