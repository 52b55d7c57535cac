"""Bad input: malformed pods and statuses for ``from_dict``, the setters and the embedded server.

The promise (SPEC 2.1 and 7, and the issue): ``InvalidObjectError`` from the
library, a 400/422 ``Status`` from the server; never another exception, never
a changed cache or store, never a crashed sync loop.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import msgspec
import pytest
import urllib3
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from podstatus import (
    BasicPodManager,
    ContainerState,
    ContainerStatus,
    InvalidObjectError,
    Pod,
    PodCondition,
    PodStatus,
    new_manager,
)
from podstatus.clients.fake import FakeKubeClient
from podstatus.deletion import FakePodDeletionSafety
from podstatus.server.endpoints import MAX_BODY_BYTES, ApiHandler, Request
from podstatus.server.http import EmbeddedApiServer
from podstatus.server.storage.store import Store
from podstatus.types import (
    Container,
    ContainerStateTerminated,
    HostIP,
    ObjectMeta,
    PodIP,
    PodSpec,
)

pytestmark = pytest.mark.timeout(120)

FAST = settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)

VALID_POD: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "p", "namespace": "default", "uid": "uid-1", "labels": {"a": "b"}},
    "spec": {
        "nodeName": "n1",
        "restartPolicy": "Never",
        "initContainers": [{"name": "init", "image": "busybox"}],
        "containers": [{"name": "a", "image": "busybox"}, {"name": "b", "image": "busybox"}],
        "readinessGates": [{"conditionType": "example.com/gate"}],
    },
    "status": {
        "phase": "Running",
        "startTime": "2024-05-01T11:00:00Z",
        "podIP": "10.0.0.1",
        "podIPs": [{"ip": "10.0.0.1"}],
        "conditions": [
            {
                "type": "Ready",
                "status": "False",
                "lastTransitionTime": "2024-05-01T11:00:00Z",
                "lastProbeTime": None,
            },
            {"type": "Initialized", "status": "True", "lastTransitionTime": "2024-05-01T11:00:00Z"},
        ],
        "initContainerStatuses": [
            {
                "name": "init",
                "ready": True,
                "restartCount": 0,
                "image": "busybox",
                "imageID": "",
                "state": {
                    "terminated": {"exitCode": 0, "reason": "Completed", "finishedAt": "2024-05-01T11:00:00Z"}
                },
                "lastState": {},
            }
        ],
        "containerStatuses": [
            {
                "name": "a",
                "ready": False,
                "restartCount": 0,
                "image": "busybox",
                "imageID": "",
                "containerID": "containerd://aaa",
                "state": {"running": {"startedAt": "2024-05-01T11:00:00Z"}},
                "lastState": {},
            },
            {
                "name": "b",
                "ready": False,
                "restartCount": 0,
                "image": "busybox",
                "imageID": "",
                "containerID": "containerd://bbb",
                "state": {"running": {"startedAt": "2024-05-01T11:00:00Z"}},
                "lastState": {},
            },
        ],
    },
}

# --- strategies -----------------------------------------------------------------------------

BAD_TIMES = st.sampled_from(
    ["yesterday", "2024-13-01T00:00:00Z", "2024-02-30T00:00:00Z", "", "0", "2024-05-01 11:00", "T", "9" * 40]
)
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
    | st.sampled_from(["x" * 100_000, "Maybe", "Bogus", "ünïcödé ✓" * 500, "True", "Running"])
    | BAD_TIMES
)
JSON = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=12,
)


def deep(depth: int, leaf: Any = 1) -> Any:
    value = leaf
    for i in range(depth):
        value = {"x": value} if i % 2 else [value]
    return value


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield prefix
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _paths(v, (*prefix, i))


def _set(doc: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    target = doc
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value
    return doc


def _delete(doc: Any, path: tuple[Any, ...]) -> Any:
    if not path:
        return doc
    target = doc
    for step in path[:-1]:
        target = target[step]
    del target[path[-1]]
    return doc


@st.composite
def mutated(draw: st.DrawFn, base: dict[str, Any], *, depths: tuple[int, ...] = (3, 50, 400)) -> Any:
    """``base`` with one to three changes: a value replaced (wrong type, unknown enum, huge,
    invalid time, deep nesting), a key removed, or a list entry duplicated."""
    doc = copy.deepcopy(base)
    for _ in range(draw(st.integers(1, 3))):
        paths = list(_paths(doc))
        path = draw(st.sampled_from(paths))
        action = draw(st.sampled_from(["replace", "replace", "delete", "duplicate", "deep", "time"]))
        if action == "replace":
            doc = _set(doc, path, draw(JSON))
        elif action == "time":
            doc = _set(doc, path, draw(BAD_TIMES))
        elif action == "deep":
            # A placeholder: the nesting itself is put in last (see materialize / encode_deep).
            doc = _set(doc, path, f"@@DEEP{draw(st.sampled_from(depths))}@@")
        elif action == "delete" and path:
            doc = _delete(doc, path)
        elif action == "duplicate" and path and isinstance(_get(doc, path[:-1]), list):
            _get(doc, path[:-1]).append(copy.deepcopy(_get(doc, path)))
    return doc


_DEEP = re.compile(r"^@@DEEP(\d+)@@$")
_DEEP_BYTES = re.compile(rb'"@@DEEP(\d+)@@"')


def materialize(doc: Any) -> Any:
    """The document with its deep-nesting placeholders replaced by the nesting."""
    if isinstance(doc, str):
        m = _DEEP.match(doc)
        return deep(int(m.group(1))) if m else doc
    if isinstance(doc, dict):
        return {k: materialize(v) for k, v in doc.items()}
    if isinstance(doc, list):
        return [materialize(v) for v in doc]
    return doc


def encode_deep(doc: Any) -> bytes:
    """JSON of the document, its placeholders replaced by nested arrays (text, so any depth works)."""
    raw = msgspec.json.encode(doc)
    return _DEEP_BYTES.sub(lambda m: b"[" * int(m.group(1)) + b"]" * int(m.group(1)), raw)


def _get(doc: Any, path: tuple[Any, ...]) -> Any:
    for step in path:
        doc = doc[step]
    return doc


# --- from_dict ----------------------------------------------------------------------------------

TYPES = [Pod, PodStatus, ContainerStatus, PodCondition, ObjectMeta, PodSpec, Container, ContainerState]


@FAST
@given(doc=mutated(VALID_POD))
def test_pod_from_dict_never_raises_anything_else(doc: Any) -> None:
    _decode_or_invalid(Pod, materialize(doc))


@FAST
@given(cls=st.sampled_from(TYPES), doc=JSON)
def test_any_json_value_for_any_type(cls: type[Any], doc: Any) -> None:
    _decode_or_invalid(cls, doc)


def _decode_or_invalid(cls: type[Any], doc: Any) -> None:
    try:
        obj = cls.from_dict(doc)
    except InvalidObjectError as err:
        assert str(err)
        return
    # What was accepted goes back out and in again unchanged (and with UTC timestamps only).
    again = cls.from_dict(obj.to_dict())
    assert again == obj


@pytest.mark.parametrize("depth", [2000, 5000])
def test_deep_nesting_is_an_invalid_object(depth: int) -> None:
    """BUG (types.py K8sObject.from_dict / _attach_extras): a deeply nested unknown field raises
    RecursionError (from msgspec encoding the extras) instead of InvalidObjectError."""
    doc = copy.deepcopy(VALID_POD)
    doc["extraField"] = deep(depth)
    with pytest.raises(InvalidObjectError):
        Pod.from_dict(doc)


@pytest.mark.parametrize("text", ["2024-05-01T11:00:00", "2024-05-01T13:00:00+02:00"])
def test_timestamps_come_out_in_utc(text: str) -> None:
    """SPEC 2.1: timestamps are timezone-aware UTC datetimes. BUG (types.py from_dict): a timestamp
    without an offset gives a naive datetime, one with +02:00 keeps that offset."""
    try:
        status = PodStatus.from_dict({"startTime": text})
    except InvalidObjectError:
        return  # refusing a timestamp without an offset (as Go's RFC 3339 parser does) is fine too
    assert status.start_time is not None
    assert status.start_time.tzinfo is UTC, status.start_time


@pytest.mark.parametrize(
    ("doc", "path"),
    [
        ({"status": {"conditions": [{"type": "Ready", "status": 1}]}}, "status.conditions[0].status"),
        ({"status": {"startTime": "yesterday"}}, "status.startTime"),
        ({"status": {"containerStatuses": [{"ready": True}]}}, "status.containerStatuses[0]"),
        ({"spec": {"containers": [{"image": "x"}]}}, "spec.containers[0]"),
        ({"status": {"conditions": {"type": "Ready"}}}, "status.conditions"),
        ({"metadata": {"labels": {"a": 1}}}, "metadata.labels"),
    ],
)
def test_error_names_the_field(doc: dict[str, Any], path: str) -> None:
    with pytest.raises(InvalidObjectError) as info:
        Pod.from_dict(doc)
    assert path in str(info.value)
    assert info.value.path.startswith(path.split("[")[0])


# --- the setters ---------------------------------------------------------------------------------


class _World:
    def __init__(self) -> None:
        self.client = FakeKubeClient()
        self.pods = BasicPodManager()
        self.safety = FakePodDeletionSafety()
        self.pod = Pod.from_dict(VALID_POD)
        self.client.add_pod(self.pod)
        self.pods.add_pod(self.pod)
        self.manager = new_manager(self.client, self.pods, self.safety)
        self.manager.set_pod_status(self.pod, self.pod.status)
        self.manager.sync_batch(all=True)

    def snapshot(self) -> tuple[PodStatus | None, int]:
        return self.manager.get_pod_status(self.pod.uid), self.manager.get_status_version(self.pod.uid)


@pytest.fixture(scope="module")
def world() -> _World:
    return _World()


def _expect_invalid_or_ok(world: _World, call: Any) -> None:
    before = world.snapshot()
    try:
        call()
    except InvalidObjectError:
        after = world.snapshot()
        assert after[1] == before[1] and after[0] is before[0], (
            "the cache changed although the input was refused"
        )
    # Whatever happened, the loop's pass must not blow up, and the cache must still be readable.
    world.manager.sync_batch(all=True)
    status = world.manager.get_pod_status(world.pod.uid)
    assert status is None or isinstance(status, PodStatus)


@FAST
@given(doc=mutated(VALID_POD["status"]))
def test_set_pod_status_with_malformed_status(world: _World, doc: Any) -> None:
    try:
        status = PodStatus.from_dict(materialize(doc))
    except InvalidObjectError:
        return
    _expect_invalid_or_ok(world, lambda: world.manager.set_pod_status(world.pod, status))


ATTRS = {
    "phase": JSON,
    "conditions": JSON,
    "start_time": JSON,
    "pod_ips": JSON,
    "host_ips": JSON,
    "message": JSON,
    "container_statuses": JSON,
    "init_container_statuses": JSON,
}


@st.composite
def wrong_typed_status(draw: st.DrawFn) -> PodStatus:
    """Statuses built in Python with wrong types (the constructors do not validate)."""
    base = PodStatus.from_dict(VALID_POD["status"])
    kind = draw(st.sampled_from(["top", "condition", "container", "state", "ip"]))
    value = draw(JSON | st.sampled_from([datetime(2024, 1, 1), object(), b"bytes", ("tuple",)]))
    if kind == "top":
        return base.replace(**{draw(st.sampled_from(sorted(ATTRS))): value})
    if kind == "condition":
        field = draw(st.sampled_from(["type", "status", "reason", "message", "last_transition_time"]))
        cond = PodCondition(type="Ready", status="True").replace(**{field: value})
        return base.replace(conditions=(cond,))
    if kind == "container":
        field = draw(
            st.sampled_from(
                ["name", "ready", "restart_count", "state", "last_state", "started", "container_id"]
            )
        )
        cs = base.container_statuses[0].replace(**{field: value})  # type: ignore[index]
        return base.replace(container_statuses=(cs, *base.container_statuses[1:]))  # type: ignore[index]
    if kind == "state":
        field = draw(st.sampled_from(["exit_code", "message", "reason", "started_at", "finished_at"]))
        term = ContainerStateTerminated(exit_code=1).replace(**{field: value})
        cs = base.container_statuses[0].replace(state=ContainerState(terminated=term))  # type: ignore[index]
        return base.replace(container_statuses=(cs, *base.container_statuses[1:]))  # type: ignore[index]
    cls = draw(st.sampled_from([PodIP, HostIP]))
    attr = "pod_ips" if cls is PodIP else "host_ips"
    return base.replace(**{attr: (cls(ip=value),)})


@FAST
@given(status=wrong_typed_status())
def test_set_pod_status_with_wrong_python_types(world: _World, status: PodStatus) -> None:
    _expect_invalid_or_ok(world, lambda: world.manager.set_pod_status(world.pod, status))


@FAST
@given(cid=JSON, value=JSON, which=st.sampled_from(["readiness", "startup"]))
def test_container_setters_with_junk(world: _World, cid: Any, value: Any, which: str) -> None:
    setter = (
        world.manager.set_container_readiness if which == "readiness" else world.manager.set_container_startup
    )
    _expect_invalid_or_ok(world, lambda: setter(world.pod.uid, cid, value))
    _expect_invalid_or_ok(world, lambda: setter(world.pod.uid, "containerd://aaa", value))


@FAST
@given(doc=mutated(VALID_POD))
def test_terminate_and_orphans_with_malformed_pods(doc: Any) -> None:
    w = _World()
    try:
        pod = Pod.from_dict(materialize(doc))
    except InvalidObjectError:
        return
    _expect_invalid_or_ok(w, lambda: w.manager.terminate_pod(pod))
    _expect_invalid_or_ok(w, lambda: w.manager.remove_orphaned_statuses({pod.uid, "x"}))


def test_duplicate_and_missing_container_names_are_refused(world: _World) -> None:
    base = PodStatus.from_dict(VALID_POD["status"])
    a = base.container_statuses[0]  # type: ignore[index]
    for bad in (
        base.replace(container_statuses=(a, a)),
        base.replace(container_statuses=(a.replace(name=""),)),
        base.replace(conditions=(PodCondition(type="Ready", status="Maybe"),)),
    ):
        before = world.snapshot()
        with pytest.raises(InvalidObjectError):
            world.manager.set_pod_status(world.pod, bad)
        assert world.snapshot()[1] == before[1]


# --- the embedded server ------------------------------------------------------------------------

_SERVER_POD = {k: v for k, v in VALID_POD.items() if k != "status"}
_SERVER_POD = {**_SERVER_POD, "metadata": {"name": "p", "labels": {"a": "b"}}}


@pytest.fixture(scope="module")
def api() -> ApiHandler:
    handler = ApiHandler(Store())
    response = handler.handle(
        Request("POST", "/api/v1/namespaces/default/pods", {}, {}, msgspec.json.encode(_SERVER_POD))
    )
    assert response.status == 201
    return handler


def _call(api: ApiHandler, method: str, path: str, body: bytes, ctype: str = "application/json") -> Any:
    rv = api.store.resource_version
    response = api.handle(Request(method, path, {}, {"content-type": ctype}, body))
    if response.status >= 300:
        data = json.loads(response.body)
        assert data["kind"] == "Status" and data["code"] == response.status
        assert api.store.resource_version == rv, "a refused request changed the store"
    return response


def _name_it(doc: Any, name: str) -> Any:
    if isinstance(doc, dict) and isinstance(doc.get("metadata"), dict) and "name" in doc["metadata"]:
        doc["metadata"]["name"] = name
    return doc


@FAST
@given(doc=mutated(_SERVER_POD, depths=(3, 50, 400, 3000)), n=st.integers(0, 10**9))
def test_server_create_with_malformed_pods(api: ApiHandler, doc: Any, n: int) -> None:
    body = encode_deep(_name_it(doc, f"q{n}"))
    response = _call(api, "POST", "/api/v1/namespaces/default/pods", body)
    assert response.status in (201, 400, 409, 422), response.body[:300]


@FAST
@given(doc=mutated({"metadata": {"uid": "x"}, "status": VALID_POD["status"]}, depths=(3, 50, 400, 3000)))
def test_server_status_patch_with_malformed_statuses(api: ApiHandler, doc: Any) -> None:
    if isinstance(doc, dict) and isinstance(doc.get("metadata"), dict) and doc["metadata"].get("uid") == "x":
        doc["metadata"].pop("uid")
    body = encode_deep(doc)
    response = _call(
        api,
        "PATCH",
        "/api/v1/namespaces/default/pods/p/status",
        body,
        "application/strategic-merge-patch+json",
    )
    assert response.status in (200, 400, 409, 422), response.body[:300]


@FAST
@given(raw=st.binary(max_size=200) | st.text(max_size=200).map(str.encode))
def test_server_with_junk_bytes(api: ApiHandler, raw: bytes) -> None:
    for method, path, ctype in (
        ("POST", "/api/v1/namespaces/default/pods", "application/json"),
        ("PATCH", "/api/v1/namespaces/default/pods/p/status", "application/strategic-merge-patch+json"),
        ("PATCH", "/api/v1/namespaces/default/pods/p", "application/merge-patch+json"),
        ("PATCH", "/api/v1/namespaces/default/pods/p", "application/json-patch+json"),
        ("PUT", "/api/v1/namespaces/default/pods/p/status", "application/json"),
        ("DELETE", "/api/v1/namespaces/default/pods/nope", "application/json"),
    ):
        response = _call(api, method, path, raw, ctype)
        assert response.status in (200, 201, 400, 404, 409, 415, 422), (method, path, response.body[:300])


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"containers": [{"name": "c", "image": "i", "resources": "x"}]}, "store._qos_class: 'str'.get"),
        ({"containers": [{"name": "c", "image": "i", "resources": ["x"]}]}, "store._qos_class: 'list'.get"),
    ],
)
def test_server_create_with_wrong_typed_resources_is_400(
    api: ApiHandler, change: dict[str, Any], why: str
) -> None:
    """BUG (server/store.py Store.create -> _qos_class): a non-object ``resources`` answers 500."""
    body = {"metadata": {"name": "res"}, "spec": {"nodeName": "n1", **change}}
    response = _call(api, "POST", "/api/v1/namespaces/default/pods", msgspec.json.encode(body))
    assert response.status == 400, (why, response.body[:200])


def test_server_create_with_non_string_generate_name_is_400(api: ApiHandler) -> None:
    """BUG (server/store.py Store.create -> _generate_name): ``generateName: 5`` answers 500."""
    body = {"metadata": {"generateName": 5}, "spec": {"containers": [{"name": "c", "image": "i"}]}}
    response = _call(api, "POST", "/api/v1/namespaces/default/pods", msgspec.json.encode(body))
    assert response.status in (400, 422), response.body[:200]


@pytest.mark.parametrize("where", ["create", "patch"])
def test_server_deeply_nested_body_is_not_a_500(api: ApiHandler, where: str) -> None:
    """BUG (server/store.py Store._private_copy and Store.patch): JSON nested a few thousand levels
    raises RecursionError in msgspec's decoder, answered as 500 InternalError (the real server
    answers 400 beyond its depth limit, and accepts and drops an unknown field below it)."""
    nested = b"[" * 5000 + b"]" * 5000
    if where == "create":
        body = (
            b'{"metadata":{"name":"deep"},"spec":{"containers":[{"name":"c","image":"i"}]},"x":'
            + nested
            + b"}"
        )
        response = _call(api, "POST", "/api/v1/namespaces/default/pods", body)
    else:
        body = b'{"status":{"x":' + nested + b"}}"
        response = _call(
            api,
            "PATCH",
            "/api/v1/namespaces/default/pods/p/status",
            body,
            "application/strategic-merge-patch+json",
        )
    assert response.status in (200, 201, 400, 422), response.body[:200]


# --- over HTTP: body size limit and malformed JSON ------------------------------------------


@pytest.fixture(scope="module")
def http_server() -> Iterator[EmbeddedApiServer]:
    with EmbeddedApiServer() as srv:
        yield srv


def test_body_over_the_limit_is_413(http_server: EmbeddedApiServer) -> None:
    body = b'{"metadata":{"name":"big"},"x":"' + b"a" * MAX_BODY_BYTES + b'"}'
    r = urllib3.request(
        "POST", f"{http_server.url}/api/v1/namespaces/default/pods", body=body,
        headers={"Content-Type": "application/json"}, retries=False,
    )  # fmt: skip
    assert r.status == 413
    data = json.loads(r.data)
    assert (data["kind"], data["reason"], data["code"]) == ("Status", "RequestEntityTooLarge", 413)
    assert urllib3.request("GET", f"{http_server.url}/api/v1/pods", retries=False).status == 200


@pytest.mark.parametrize(
    ("method", "path", "ctype"),
    [
        ("POST", "/api/v1/namespaces/default/pods", "application/json"),
        ("PATCH", "/api/v1/namespaces/default/pods/p/status", "application/strategic-merge-patch+json"),
        ("PATCH", "/api/v1/namespaces/default/pods/p", "application/merge-patch+json"),
    ],
)
def test_malformed_json_is_400(http_server: EmbeddedApiServer, method: str, path: str, ctype: str) -> None:
    http_server.store.create("pods", "default", _SERVER_POD) if not _exists(http_server.store) else None
    r = urllib3.request(
        method, http_server.url + path, body=b'{"metadata": {', headers={"Content-Type": ctype}
    )
    assert r.status == 400
    data = json.loads(r.data)
    assert (data["kind"], data["status"], data["reason"]) == ("Status", "Failure", "BadRequest")


def _exists(store: Store) -> bool:
    try:
        store.get("pods", "default", "p")
        return True
    except Exception:
        return False


def test_loop_survives_a_server_that_answers_garbage() -> None:
    """An invalid pod from the server (a broken proxy, a buggy server) is logged, never fatal."""
    with EmbeddedApiServer() as srv:
        from podstatus.clients.http import HttpKubeClient
        from podstatus.server.endpoints import Response

        created = srv.store.create("pods", "default", _SERVER_POD)
        pod = created.pod
        assert pod is not None
        inner = srv.dispatch
        broken = {"on": True}

        def garbage(request: Request) -> Response:
            if broken["on"] and request.method == "GET" and "/pods/" in request.path:
                return Response(200, b'{"kind":"Pod","metadata":{"name":5},"status":{"phase":[]}}')
            return inner(request)

        srv.dispatch = garbage
        pods = BasicPodManager()
        pods.add_pod(pod)
        manager = new_manager(
            HttpKubeClient(srv.url, timeout=2.0), pods, FakePodDeletionSafety(), sync_period=0.2
        )
        status = PodStatus.from_dict(
            {"phase": "Running", "conditions": [{"type": "Ready", "status": "False"}]}
        )
        with manager:
            manager.set_pod_status(pod, status)
            manager.sync_batch()
            assert srv.store.get("pods", "default", "p").obj["status"]["phase"] == "Pending"
            broken["on"] = False
            deadline = datetime.now(UTC).timestamp() + 3
            while datetime.now(UTC).timestamp() < deadline and manager.pending_count():
                manager.sync_batch()
            assert srv.store.get("pods", "default", "p").obj["status"]["phase"] == "Running"
