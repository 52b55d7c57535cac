"""Hostile server-side apply bodies against a real `EmbeddedApiServer` on loopback.

kube-apiserver reads an apply body (``application/apply-patch+yaml``) with go-yaml, which
refuses alias bombs ("document contains excessive aliasing") and nesting past its depth
limit; both are 400 BadRequest "error encoding patch: yaml: ...". The embedded server does
the same before building anything (``server/yamlbounds.py``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
import urllib3

from podstatus.server import EmbeddedApiServer

APPLY = "application/apply-patch+yaml"
POD_PATH = "/api/v1/namespaces/default/pods/{name}?fieldManager=hostile"


@pytest.fixture(scope="module")
def server() -> Iterator[EmbeddedApiServer]:
    with EmbeddedApiServer() as srv:
        yield srv


def _apply(server: EmbeddedApiServer, name: str, body: bytes) -> tuple[int, dict[str, object]]:
    resp = urllib3.request(
        "PATCH", server.url + POD_PATH.format(name=name), body=body,
        headers={"Content-Type": APPLY}, retries=False, timeout=60,
    )  # fmt: skip
    return resp.status, json.loads(resp.data)


def _still_serving(server: EmbeddedApiServer) -> None:
    resp = urllib3.request("GET", server.url + "/api/v1/namespaces/default/pods", retries=False, timeout=30)
    assert resp.status == 200 and json.loads(resp.data)["kind"] == "PodList"


def _alias_bomb(levels: int) -> bytes:
    """The billion-laughs document: 10 leaves, then each level ten aliases of the one before."""
    lines = [
        "apiVersion: v1",
        "kind: Pod",
        "metadata: {name: bomb}",
        "a: &a [lol,lol,lol,lol,lol,lol,lol,lol,lol,lol]",
    ]
    prev = "a"
    for i in range(1, levels):
        name = chr(ord("a") + i)
        lines.append(f"{name}: &{name} [{','.join(['*' + prev] * 10)}]")
        prev = name
    return ("\n".join(lines) + "\n").encode()


def test_a_yaml_alias_bomb_in_an_apply_is_refused_with_400(server: EmbeddedApiServer) -> None:
    bomb = _alias_bomb(7)  # 10^7 leaves once expanded
    assert len(bomb) < 489
    code, status = _apply(server, "bomb", bomb)
    assert code == 400, status
    assert status["reason"] == "BadRequest"
    assert status["message"] == "error encoding patch: yaml: document contains excessive aliasing"
    _still_serving(server)
    # An alias that refers to itself is go-yaml's error too (not a recursive object).
    code, status = _apply(
        server, "loop", b"apiVersion: v1\nkind: Pod\nmetadata: &m {name: loop, labels: *m}\n"
    )
    assert (code, status["message"]) == (
        400,
        "error encoding patch: yaml: anchor 'm' value contains itself",
    )


def test_a_few_aliases_are_still_read(server: EmbeddedApiServer) -> None:
    """The bound is go-yaml's ratio, not "no aliases": a label set shared by reference applies."""
    body = (
        b"apiVersion: v1\nkind: Pod\nmetadata: {name: shared, labels: &l {app: web}, annotations: *l}\n"
        b"spec: {containers: [{name: c, image: busybox}]}\n"
    )
    code, pod = _apply(server, "shared", body)
    assert code == 201, pod
    meta = pod["metadata"]
    assert isinstance(meta, dict) and meta["labels"] == meta["annotations"] == {"app": "web"}


def _nested_json(depth: int) -> bytes:
    return (
        b'{"apiVersion":"v1","kind":"Pod","metadata":{"name":"deep","labels":'
        + b'{"a":' * depth
        + b'"x"'
        + b"}" * depth
        + b"}}"
    )


def _nested_yaml(depth: int) -> bytes:
    # Block style: compact nested sequences ("- - - x"), one level per "- ".
    return (
        b"apiVersion: v1\nkind: Pod\nmetadata:\n  name: deep\n  labels:\n    a:\n      "
        + b"- " * depth
        + b"x\n"
    )


@pytest.mark.parametrize("depth", [500, 10_000])
@pytest.mark.parametrize("form", ["json", "yaml"])
def test_deeply_nested_apply_bodies_are_400(server: EmbeddedApiServer, form: str, depth: int) -> None:
    body = _nested_json(depth) if form == "json" else _nested_yaml(depth)
    code, status = _apply(server, "deep", body)
    assert code == 400, status
    assert status["reason"] == "BadRequest"
    message = str(status["message"])
    assert message.startswith("error encoding patch: yaml: ") and "depth" in message, message
    _still_serving(server)
