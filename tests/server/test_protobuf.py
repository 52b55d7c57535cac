"""Protobuf request bodies: the decoder on hand-built wire bytes, and the handler's use of it.

The round trip against bytes made by client-go itself is tests/integration/test_clientgo.py.
"""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from podstatus.server import protobuf
from podstatus.server.endpoints import ApiHandler, Request
from podstatus.server.storage.store import Store

PB = protobuf.PROTOBUF


# A tiny encoder, for building test bodies only.
def _varint(n: int) -> bytes:
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _len(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _int(number: int, value: int) -> bytes:
    return _varint(number << 3) + _varint(value)


def _str(number: int, text: str) -> bytes:
    return _len(number, text.encode())


def _envelope(api_version: str, kind: str, raw: bytes) -> bytes:
    type_meta = _str(1, api_version) + _str(2, kind)
    return protobuf.MAGIC + _len(1, type_meta) + _len(2, raw)


def _pod(name: str, *, grace: int | None = None) -> bytes:
    meta = _str(1, name) + _len(11, _str(1, "app") + _str(2, "web"))  # labels map entry
    container = _str(1, "app") + _str(2, "nginx:1.27")
    spec = _len(2, container) + _str(10, "n1")  # containers, nodeName
    if grace is not None:
        spec += _int(4, grace)  # terminationGracePeriodSeconds (a pointer)
    return _envelope("v1", "Pod", _len(1, meta) + _len(2, spec))


def test_decodes_a_pod_to_its_json_form() -> None:
    obj = protobuf.decode(_pod("web", grace=0))
    assert obj["kind"] == "Pod" and obj["apiVersion"] == "v1"
    assert obj["metadata"] == {"name": "web", "labels": {"app": "web"}}
    assert obj["spec"]["nodeName"] == "n1"
    assert obj["spec"]["containers"] == [{"name": "app", "image": "nginx:1.27"}]
    # A pointer set to zero is kept (JSON would show it); an omitempty zero would not be.
    assert obj["spec"]["terminationGracePeriodSeconds"] == 0


def test_negative_ints_and_times() -> None:
    # DeleteOptions.gracePeriodSeconds = -1 (sign-extended varint); preconditions.uid.
    raw = _int(1, -1) + _len(2, _str(1, "u-1"))
    assert protobuf.decode(_envelope("v1", "DeleteOptions", raw)) == {
        "kind": "DeleteOptions",
        "apiVersion": "v1",
        "gracePeriodSeconds": -1,
        "preconditions": {"uid": "u-1"},
    }
    # Lease.spec.renewTime (MicroTime) and creationTimestamp (Time).
    micro = _int(1, 1_772_600_767) + _int(2, 123_456_000)
    lease = _len(1, _len(8, _int(1, 1_772_600_767))) + _len(2, _len(4, micro))
    obj = protobuf.decode(_envelope("coordination.k8s.io/v1", "Lease", lease))
    assert obj["metadata"]["creationTimestamp"] == "2026-03-04T05:06:07Z"
    assert obj["spec"]["renewTime"] == "2026-03-04T05:06:07.123456Z"


@pytest.mark.parametrize(
    "body, words",
    [
        (b"{}", "magic"),
        (protobuf.MAGIC + b"\x0a\x05\x0a", "truncated"),
        (_envelope("v1", "Secret", b""), "no kind 'Secret'"),
        (_envelope("v1", "Pod", _len(1, _len(1, b"\xff\xfe"))), "UTF-8"),
        (_envelope("v1", "Pod", b"\x0b"), "wire type 3"),
    ],
)
def test_refuses_bad_bodies(body: bytes, words: str) -> None:
    with pytest.raises(protobuf.ProtobufError, match=words):
        protobuf.decode(body)


def _call(api: ApiHandler, method: str, path: str, body: bytes, ctype: str) -> tuple[int, Any]:
    resp = api.handle(Request(method, path, {}, {"content-type": ctype}, body))
    return resp.status, msgspec.json.decode(resp.body)


def test_handler_creates_updates_and_deletes_with_protobuf() -> None:
    api = ApiHandler(Store())
    code, pod = _call(api, "POST", "/api/v1/namespaces/default/pods", _pod("web"), PB)
    assert code == 201 and pod["metadata"]["labels"] == {"app": "web"}
    uid = pod["metadata"]["uid"]
    wrong = _envelope("v1", "DeleteOptions", _len(2, _str(1, "not-" + uid)))
    code, status = _call(api, "DELETE", "/api/v1/namespaces/default/pods/web", wrong, PB)
    assert code == 409, status
    right = _envelope("v1", "DeleteOptions", _int(1, 0) + _len(2, _str(1, uid)))
    code, _ = _call(api, "DELETE", "/api/v1/namespaces/default/pods/web", right, PB)
    assert code == 200


def test_handler_evicts_with_a_protobuf_eviction() -> None:
    api = ApiHandler(Store())
    _call(api, "POST", "/api/v1/namespaces/default/pods", _pod("web"), PB)
    opts = _int(1, 0)
    eviction = _envelope("policy/v1", "Eviction", _len(1, _str(1, "web")) + _len(2, opts))
    code, status = _call(api, "POST", "/api/v1/namespaces/default/pods/web/eviction", eviction, PB)
    assert (code, status["status"], status["code"]) == (201, "Success", 201)
    code, _ = _call(api, "POST", "/api/v1/namespaces/default/pods/gone/eviction", eviction, PB)
    assert code == 400  # the name in the body is not the URL's
    # With a grace period the bound pod stays a while, marked as kube-apiserver marks it.
    _call(api, "POST", "/api/v1/namespaces/default/pods", _pod("slow"), PB)
    slow = _envelope("policy/v1", "Eviction", _len(1, _str(1, "slow")) + _len(2, _int(1, 30)))
    code, _ = _call(api, "POST", "/api/v1/namespaces/default/pods/slow/eviction", slow, PB)
    pod = msgspec.json.decode(api.store.get("pods", "default", "slow").raw)
    assert code == 201 and pod["metadata"]["deletionGracePeriodSeconds"] == 30
    [target] = [c for c in pod["status"]["conditions"] if c["type"] == "DisruptionTarget"]
    assert (target["status"], target["reason"]) == ("True", "EvictionByEvictionAPI")
    missing = _envelope("policy/v1", "Eviction", _len(1, _str(1, "gone")))
    code, status = _call(api, "POST", "/api/v1/namespaces/default/pods/gone/eviction", missing, PB)
    assert code == 404 and status["reason"] == "NotFound"


def test_undecodable_protobuf_is_400_and_unknown_media_type_415_lists_only_what_is_read() -> None:
    api = ApiHandler(Store())
    code, status = _call(api, "POST", "/api/v1/namespaces/default/pods", b"k8s\x00\xff", PB)
    assert code == 400 and status["reason"] == "BadRequest"
    code, status = _call(api, "POST", "/api/v1/namespaces/default/pods", b"a: b", "text/plain")
    assert code == 415 and status["reason"] == "UnsupportedMediaType"
    # kube-apiserver's list, and true here: each of them is read.
    assert status["message"].endswith(
        "accepted media types include: application/json, application/yaml, " + PB
    )
    code, status = _call(api, "DELETE", "/api/v1/namespaces/default/pods/x", b"a: b", "application/cbor")
    assert code == 415


YAML_POD = b"""\
apiVersion: v1
kind: Pod
metadata:
  name: from-yaml
  annotations: {when: 2026-03-04T05:06:07Z, flag: "yes"}
spec:
  nodeName: n1
  containers: [{name: app, image: "nginx:1.27"}]
"""


def test_yaml_bodies_are_read_as_json_without_aliases() -> None:
    api = ApiHandler(Store())
    code, pod = _call(api, "POST", "/api/v1/namespaces/default/pods", YAML_POD, "application/yaml")
    assert code == 201, pod
    # A timestamp-looking scalar stays the string it was (the API has no YAML dates).
    assert pod["metadata"]["annotations"] == {"when": "2026-03-04T05:06:07Z", "flag": "yes"}
    bomb = b"a: &a [x, x]\nb: &b [*a, *a]\nc: [*b, *b]\n"
    code, status = _call(api, "POST", "/api/v1/namespaces/default/pods", bomb, "application/yaml")
    assert code == 400 and "aliases" in status["message"]
    code, status = _call(api, "POST", "/api/v1/namespaces/default/pods", b"a: [", "application/yaml")
    assert code == 400 and "not valid YAML" in status["message"]
