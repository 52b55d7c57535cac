"""The same requests against the real kube-apiserver and the embedded server, answers compared.

Each test is parametrized over ``server`` = ``"real"``, ``"embedded"`` (the embedded
server as podstatus ships it) and ``"embedded-kube-like"`` (the embedded server with
``strict_status=False, reap_terminating=False``). It runs its scenario (a few raw HTTP
requests) against that server and against the real one, and asserts that both give the
same answer: status code, the ``Status`` object of an error (reason, message, details)
or the relevant part of the object returned. Names, UIDs, resourceVersions, timestamps
and managedFields are normalised away first. The real server is right: a failure of an
``[embedded*]`` variant is a difference the embedded server has to fix (docs/design.md,
"The embedded server and the real one"). Three differences are deliberate defaults of
the embedded server (a terminal phase never moves back, condition statuses are
validated, terminating pods are reaped when their grace runs out): there the
``[embedded]`` variant asserts the documented answer and ``[embedded-kube-like]`` must
agree with the real server. The ``[real]`` variant checks the facts each test documents
about the real server (kube-apiserver v1.37.2), so a Kubernetes update that changes them
shows up here.
"""

from __future__ import annotations

import difflib
import json
import re
import subprocess
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import yaml
from apisuite_kit import (
    IMAGE,
    JSON,
    JSON_PATCH,
    MERGE,
    NODE,
    NS,
    STRATEGIC,
    Answer,
    RawApi,
    Server,
    normalise,
    pod_manifest,
    unique,
)

pytestmark = pytest.mark.apiserver

ZERO_UID = "00000000-0000-0000-0000-000000000000"
KUBE_LIKE = "embedded-kube-like"


@pytest.fixture(scope="module")
def kube_like_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """The embedded server configured as kube-apiserver with no kubelet (no podstatus extras)."""
    from podstatus.server.http import EmbeddedApiServer

    srv = EmbeddedApiServer("127.0.0.1", 0, strict_status=False, reap_terminating=False)
    srv.start()
    try:
        path = srv.write_kubeconfig(tmp_path_factory.mktemp("embedded-kube-like") / "kubeconfig")
        raw = RawApi.from_kubeconfig(path)
        raw.ensure_node(NODE)
        yield Server(KUBE_LIKE, str(path), raw)
        raw.close()
    finally:
        srv.stop()


@pytest.fixture(params=["real", "embedded", KUBE_LIKE])
def server(request: pytest.FixtureRequest) -> Server:
    """Each comparison test runs against the real server and both configurations of the embedded one."""
    fixture = {"real": "real_server", "embedded": "embedded_server", KUBE_LIKE: "kube_like_server"}
    srv: Server = request.getfixturevalue(fixture[request.param])
    return srv


class Ctx:
    """One run of a scenario against one server; remembers names and UIDs to scrub."""

    def __init__(self, raw: RawApi) -> None:
        self.raw = raw
        self.secrets: dict[str, str] = {}

    def pod(self, **kw: Any) -> tuple[str, str]:
        name = unique("cmp")
        ans = self.raw.create_pod(pod_manifest(name, **kw))
        assert ans.code == 201, ans.body
        uid = ans.body["metadata"]["uid"]
        n = len(self.secrets) // 2
        self.secrets[name] = f"<name{n}>"
        self.secrets[uid] = f"<uid{n}>"
        return name, uid

    def scrub(self, value: Any) -> Any:
        if isinstance(value, str):
            for secret, marker in self.secrets.items():
                value = value.replace(secret, marker)
            return value
        if isinstance(value, dict):
            return {k: self.scrub(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.scrub(v) for v in value]
        return value

    def error(self, ans: Answer) -> dict[str, Any]:
        """Code and Status body of an answer (the pod's status instead when it succeeded)."""
        if 200 <= ans.code < 300 and isinstance(ans.body, dict) and ans.body.get("kind") == "Pod":
            return {"code": ans.code, "status": semantic(ans.body.get("status"))}
        body = ans.body if isinstance(ans.body, dict) else {"raw": ans.raw[:200].decode("utf-8", "replace")}
        keep = {
            k: body.get(k) for k in ("kind", "status", "reason", "code", "message", "details") if k in body
        }
        return {"code": ans.code, "body": self.scrub(keep)}

    def pod_summary(self, ans: Answer) -> dict[str, Any]:
        """Code and the parts of a returned pod the status manager cares about."""
        if not (isinstance(ans.body, dict) and ans.body.get("kind") == "Pod"):
            return self.error(ans)
        meta = ans.body.get("metadata") or {}
        return {
            "code": ans.code,
            "deletionTimestamp": meta.get("deletionTimestamp") is not None,
            "deletionGracePeriodSeconds": meta.get("deletionGracePeriodSeconds"),
            "labels": meta.get("labels"),
            "annotations": meta.get("annotations"),
            "status": semantic(ans.body.get("status")),
        }


def semantic(value: Any) -> Any:
    """Normalised, without nulls and empty objects (how they are printed is compared separately)."""
    value = normalise(value)

    def strip(x: Any) -> Any:
        if isinstance(x, dict):
            out = {k: strip(v) for k, v in x.items() if v is not None}
            return {k: v for k, v in out.items() if v != {}}
        if isinstance(x, list):
            return [strip(v) for v in x]
        return x

    return strip(value)


_real_answers: dict[str, Any] = {}


def same_as_real(
    server: Server, real_server: Server, request: pytest.FixtureRequest, scenario: Callable[[Ctx], Any]
) -> Any:
    """Run ``scenario`` on ``server``; assert the real server answers the same. Returns the answer."""
    key = request.node.originalname
    got = scenario(Ctx(server.raw))
    if server.kind == "real":
        _real_answers[key] = got
        return got
    if key not in _real_answers:
        _real_answers[key] = scenario(Ctx(real_server.raw))
    expected = _real_answers[key]
    if got != expected:
        diff = "\n".join(
            difflib.unified_diff(
                json.dumps(expected, indent=1, sort_keys=True).splitlines(),
                json.dumps(got, indent=1, sort_keys=True).splitlines(),
                "kube-apiserver",
                "embedded",
                lineterm="",
            )
        )
        pytest.fail(f"the embedded server differs from kube-apiserver in {key}:\n{diff}", pytrace=False)
    return got


def invalid_status(name: str, *causes: tuple[str, str, str]) -> dict[str, Any]:
    """What ``Ctx.error`` gives for a 422 Invalid with ``causes`` = (field, reason, message)."""
    text = [f"{f}: {m}" for f, _, m in causes]
    joined = text[0] if len(text) == 1 else "[" + ", ".join(text) + "]"
    return {
        "code": 422,
        "body": {
            "kind": "Status",
            "status": "Failure",
            "reason": "Invalid",
            "code": 422,
            "message": f'Pod "{name}" is invalid: {joined}',
            "details": {
                "name": name,
                "kind": "Pod",
                "causes": [{"field": f, "reason": r, "message": m} for f, r, m in causes],
            },
        },
    }


def status_patch(
    ctx: Ctx, name: str, patch: Any, content_type: str = "application/strategic-merge-patch+json"
) -> Answer:
    return ctx.raw.patch_status(name, patch, content_type=content_type)


def cstatus(name: str, state: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "ready": False,
        "restartCount": 0,
        "image": IMAGE,
        "imageID": "",
        "state": state,
        **extra,
    }


# -- strategic merge patches of pods/status -------------------------------------------------


def test_strategic_merge_of_conditions_and_container_statuses(
    server: Server, real_server: Server, request: pytest.FixtureRequest
) -> None:
    """Conditions merge by type with $setElementOrder and $patch: delete; containerStatuses are replaced."""

    def scenario(ctx: Ctx) -> Any:
        name, uid = ctx.pod(containers=("a", "b"), readiness_gates=("example.com/gate",))
        first = status_patch(ctx, name, {"status": {
            "phase": "Running",
            "conditions": [
                {"type": "PodScheduled", "status": "True"},
                {"type": "Initialized", "status": "True"},
                {"type": "Ready", "status": "False", "reason": "ContainersNotReady", "message": "m"},
            ],
            "containerStatuses": [
                cstatus("a", {"running": {"startedAt": "2026-01-01T00:00:00Z"}}),
                cstatus("b", {"waiting": {"reason": "ContainerCreating"}}),
            ],
        }})  # fmt: skip
        second = status_patch(ctx, name, {"metadata": {"uid": uid}, "status": {
            "$setElementOrder/conditions": [{"type": "PodScheduled"}, {"type": "Ready"}, {"type": "example.com/gate"}],
            "conditions": [
                {"type": "Initialized", "$patch": "delete"},
                {"type": "Ready", "status": "True", "reason": None, "message": None},
                {"type": "example.com/gate", "status": "True"},
            ],
            "containerStatuses": [cstatus("b", {"running": {"startedAt": "2026-01-01T00:00:01Z"}}, ready=True, restartCount=1)],
        }})  # fmt: skip
        return [ctx.error(first), ctx.error(second)]

    got = same_as_real(server, real_server, request, scenario)
    status = got[1]["status"]
    assert [c["type"] for c in status["conditions"]] == ["PodScheduled", "Ready", "example.com/gate"]
    assert [c["name"] for c in status["containerStatuses"]] == ["b"]


def test_json_merge_patch_replaces_conditions(
    server: Server, real_server: Server, request: pytest.FixtureRequest
) -> None:
    def scenario(ctx: Ctx) -> Any:
        name, _ = ctx.pod()
        status_patch(
            ctx,
            name,
            {"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}},
            MERGE,
        )
        return ctx.error(
            status_patch(
                ctx, name, {"status": {"conditions": [{"type": "PodScheduled", "status": "True"}]}}, MERGE
            )
        )

    got = same_as_real(server, real_server, request, scenario)
    assert [c["type"] for c in got["status"]["conditions"]] == ["PodScheduled"]


def test_wire_form_of_conditions_and_container_statuses(
    server: Server, real_server: Server, request: pytest.FixtureRequest
) -> None:
    """How a pod's status is printed: the real server prints Go zero values (null times, {} states)."""

    def scenario(ctx: Ctx) -> Any:
        name, _ = ctx.pod()
        ans = status_patch(ctx, name, {"status": {
            "conditions": [{"type": "Ready", "status": "False"}],
            "containerStatuses": [cstatus("c", {"waiting": {"reason": "ContainerCreating"}})],
        }})  # fmt: skip
        return {"code": ans.code, "status": normalise(ans.body["status"])}

    got = same_as_real(server, real_server, request, scenario)
    assert got["status"]["conditions"] == [
        {"type": "Ready", "status": "False", "lastProbeTime": None, "lastTransitionTime": None}
    ]
    assert got["status"]["containerStatuses"][0]["lastState"] == {}


def test_terminal_phase_moving_back(
    server: Server, real_server: Server, request: pytest.FixtureRequest
) -> None:
    """kube-apiserver v1.37.2 does not refuse a terminal phase moving back (no such validation):
    keeping a terminal phase is the kubelet's (and podstatus's) job alone."""

    def scenario(ctx: Ctx) -> Any:
        out = []
        for terminal, back in (("Failed", "Running"), ("Succeeded", "Pending")):
            name, _ = ctx.pod()
            status_patch(ctx, name, {"status": {"phase": terminal, "reason": "Done"}})
            out.append(ctx.error(status_patch(ctx, name, {"status": {"phase": back}})))
        return out

    if server.kind == "embedded":
        # Deliberate (strict_status=True, the default): SPEC section 5 asks the embedded server
        # to refuse this, to catch node agent bugs early.
        forbidden = (
            "status.phase",
            "FieldValueForbidden",
            "Forbidden: cannot transition from a terminal phase",
        )
        assert scenario(Ctx(server.raw)) == [invalid_status(f"<name{i}>", forbidden) for i in (0, 1)]
        return
    got = same_as_real(server, real_server, request, scenario)
    assert [g["code"] for g in got] == [200, 200]
    assert got[0]["status"]["phase"] == "Running"


def test_invalid_condition_status(
    server: Server, real_server: Server, request: pytest.FixtureRequest
) -> None:
    """The real server does not validate a condition's status value ("Maybe" is stored)."""

    def scenario(ctx: Ctx) -> Any:
        out = []
        for cond in ({"type": "Ready", "status": "Maybe"}, {"type": "Ready"}):
            name, _ = ctx.pod()
            out.append(ctx.error(status_patch(ctx, name, {"status": {"conditions": [cond]}})))
        return out

    if server.kind == "embedded":
        # Deliberate (strict_status=True, the default): only True, False and Unknown.
        supported = 'supported values: "False", "True", "Unknown"'
        assert scenario(Ctx(server.raw)) == [
            invalid_status(f"<name{i}>", ("status.conditions[0].status", "FieldValueNotSupported",
                                          f"Unsupported value: {value}: {supported}"))
            for i, value in ((0, '"Maybe"'), (1, '""'))
        ]  # fmt: skip
        return
    got = same_as_real(server, real_server, request, scenario)
    assert [g["code"] for g in got] == [200, 200]
    # A condition without status is stored with an empty one (Go's zero value).
    assert [g["status"]["conditions"][0]["status"] for g in got] == ["Maybe", ""]


def test_invalid_condition_type(server: Server, real_server: Server, request: pytest.FixtureRequest) -> None:
    """Condition types other than PodScheduled, Ready, Initialized must be qualified names."""

    def scenario(ctx: Ctx) -> Any:
        name, _ = ctx.pod()
        bad = {
            "status": {
                "conditions": [
                    {"type": "example.com/ok", "status": "True"},
                    {"type": "bad type!", "status": "True"},
                ]
            }
        }
        return ctx.error(status_patch(ctx, name, bad))

    got = same_as_real(server, real_server, request, scenario)
    assert got["code"] == 422
    assert got["body"]["reason"] == "Invalid"


def test_condition_without_type(server: Server, real_server: Server, request: pytest.FixtureRequest) -> None:
    def scenario(ctx: Ctx) -> Any:
        name, _ = ctx.pod()
        return ctx.error(status_patch(ctx, name, {"status": {"conditions": [{"status": "True"}]}}))

    got = same_as_real(server, real_server, request, scenario)
    assert got["code"] == 422


def test_container_leaving_terminated_state(
    server: Server, real_server: Server, request: pytest.FixtureRequest
) -> None:
    def scenario(ctx: Ctx) -> Any:
        out = []
        for policy, exit_code in (("Never", 1), ("OnFailure", 0), ("OnFailure", 1), ("Always", 0)):
            name, _ = ctx.pod(restart_policy=policy)
            status_patch(
                ctx,
                name,
                {"status": {"containerStatuses": [cstatus("c", {"terminated": {"exitCode": exit_code}})]}},
            )
            again = {
                "status": {
                    "containerStatuses": [cstatus("c", {"running": {"startedAt": "2026-01-01T00:00:00Z"}})]
                }
            }
            out.append(ctx.error(status_patch(ctx, name, again)))
        return out

    got = same_as_real(server, real_server, request, scenario)
    assert [g["code"] for g in got] == [422, 422, 200, 200]


def test_pod_ips(server: Server, real_server: Server, request: pytest.FixtureRequest) -> None:
    def scenario(ctx: Ctx) -> Any:
        name, _ = ctx.pod()
        bad_ip = ctx.error(status_patch(ctx, name, {"status": {"podIPs": [{"ip": "10.0.0.300"}]}}))
        ok = ctx.error(
            status_patch(ctx, name, {"status": {"podIP": "10.1.0.5", "podIPs": [{"ip": "10.1.0.5"}]}})
        )
        # Merged by ip: the list becomes two IPv4 addresses.
        two_v4 = ctx.error(
            status_patch(ctx, name, {"status": {"podIP": "10.1.0.6", "podIPs": [{"ip": "10.1.0.6"}]}})
        )
        replaced = ctx.error(status_patch(ctx, name, {"status": {
            "podIP": "10.1.0.6",
            "$setElementOrder/podIPs": [{"ip": "10.1.0.6"}],
            "podIPs": [{"ip": "10.1.0.6"}, {"ip": "10.1.0.5", "$patch": "delete"}],
        }}))  # fmt: skip
        return [bad_ip, ok, two_v4, replaced]

    got = same_as_real(server, real_server, request, scenario)
    assert [g["code"] for g in got] == [422, 200, 422, 200]


def test_host_ips(server: Server, real_server: Server, request: pytest.FixtureRequest) -> None:
    """hostIPs[0] must equal hostIP; valid IPs, at most one per family."""

    def scenario(ctx: Ctx) -> Any:
        name, _ = ctx.pod()
        return [
            ctx.error(status_patch(ctx, name, {"status": {"hostIPs": [{"ip": "10.0.0.300"}]}})),
            ctx.error(status_patch(ctx, name, {"status": {"hostIP": "10.0.0.4", "hostIPs": [{"ip": "10.0.0.3"}]}})),
            ctx.error(status_patch(ctx, name, {"status": {
                "hostIP": "10.0.0.5", "hostIPs": [{"ip": "10.0.0.5"}, {"ip": "10.0.0.6"}]}})),
            ctx.error(status_patch(ctx, name, {"status": {
                "hostIP": "10.0.0.5", "hostIPs": [{"ip": "10.0.0.5"}, {"ip": "fd00::5"}]}})),
            ctx.error(status_patch(ctx, name, {"status": {"hostIP": "10.0.0.300"}})),
        ]  # fmt: skip

    got = same_as_real(server, real_server, request, scenario)
    # The last: hostIP is not validated itself, but hostIPs[0] (stored) must now equal it.
    assert [g["code"] for g in got] == [422, 422, 422, 200, 422]


def test_pod_ip_and_pod_ips_are_kept_in_step(
    server: Server, real_server: Server, request: pytest.FixtureRequest
) -> None:
    """podIP is podIPs[0]; when both are sent and differ, podIP wins (the v1 conversion)."""

    def scenario(ctx: Ctx) -> Any:
        name, _ = ctx.pod()
        return [
            ctx.error(status_patch(ctx, name, {"status": {"podIPs": [{"ip": "10.1.0.5"}]}})),
            ctx.error(status_patch(ctx, name, {"status": {"podIP": "10.1.0.7", "podIPs": [{"ip": "10.1.0.5"}]}})),
            ctx.error(status_patch(ctx, name, {"status": {"podIP": "10.1.0.300"}})),
            ctx.error(status_patch(ctx, name, {"status": {"podIP": "10.1.0.8", "podIPs": None}})),
        ]  # fmt: skip

    got = same_as_real(server, real_server, request, scenario)
    assert [g["code"] for g in got] == [200, 200, 422, 200]
    assert got[1]["status"]["podIPs"] == [{"ip": "10.1.0.7"}]


def test_qos_class_is_kept_and_immutable(
    server: Server, real_server: Server, request: pytest.FixtureRequest
) -> None:
    """A status patch removing qosClass keeps the server's value; changing it is refused."""

    def scenario(ctx: Ctx) -> Any:
        name, _ = ctx.pod()
        removed = ctx.error(status_patch(ctx, name, {"status": {"qosClass": None, "phase": "Running"}}))
        changed = ctx.error(status_patch(ctx, name, {"status": {"qosClass": "Guaranteed"}}))
        return [removed, changed]

    got = same_as_real(server, real_server, request, scenario)
    assert [g["code"] for g in got] == [200, 422]
    assert got[0]["status"] == {"phase": "Running", "qosClass": "BestEffort"}


def test_metadata_through_the_status_subresource(
    server: Server, real_server: Server, request: pytest.FixtureRequest
) -> None:
    """Labels and annotations in a pods/status patch are applied; spec changes are ignored."""

    def scenario(ctx: Ctx) -> Any:
        name, _ = ctx.pod()
        a = ctx.pod_summary(
            status_patch(
                ctx,
                name,
                {"metadata": {"labels": {"x": "y"}, "annotations": {"a": "b"}}, "status": {"message": "m"}},
            )
        )
        b = status_patch(ctx, name, {"spec": {"activeDeadlineSeconds": 5}, "status": {"message": "n"}})
        return [a, b.code, (b.body.get("spec") or {}).get("activeDeadlineSeconds")]

    got = same_as_real(server, real_server, request, scenario)
    assert got[0]["labels"] == {"x": "y"}
    assert got[1:] == [200, None]


def test_more_metadata_through_the_status_subresource(
    server: Server, real_server: Server, request: pytest.FixtureRequest
) -> None:
    """finalizers and generateName are applied too; ownerReferences, creationTimestamp,
    generation and deletionTimestamp are not; deletionGracePeriodSeconds is immutable;
    label and annotation keys are validated."""

    def scenario(ctx: Ctx) -> Any:
        name, _ = ctx.pod()
        owner = {
            "apiVersion": "v1",
            "kind": "Node",
            "name": NODE,
            "uid": "11111111-1111-1111-1111-111111111111",
        }
        ans = status_patch(ctx, name, {"metadata": {
            "finalizers": ["example.com/f"], "ownerReferences": [owner], "generateName": "zz-",
            "creationTimestamp": "2020-01-01T00:00:00Z", "generation": 7,
            "deletionTimestamp": "2030-01-01T00:00:00Z"}, "status": {"message": "q"}})  # fmt: skip
        meta = ans.body["metadata"]
        kept = {k: meta.get(k) for k in ("finalizers", "ownerReferences", "generateName", "generation")}
        kept["creationTimestamp"] = meta["creationTimestamp"] != "2020-01-01T00:00:00Z"
        kept["deletionTimestamp"] = meta.get("deletionTimestamp")
        return [
            ans.code,
            kept,
            ctx.error(status_patch(ctx, name, {"metadata": {"deletionGracePeriodSeconds": 5}, "status": {}})),
            # One bad label per request: the real server reports them in Go's (random) map order.
            ctx.error(status_patch(ctx, name, {"metadata": {
                "labels": {"a/b/c": "x"}, "annotations": {"Bad Key": "x"}}, "status": {}})),
            ctx.error(status_patch(ctx, name, {"metadata": {"labels": {"ok": "bad value!"}}, "status": {}})),
            ctx.pod_summary(ctx.raw.delete_pod(name, {"gracePeriodSeconds": 0})),  # the finalizer keeps it
            ctx.error(status_patch(ctx, name, {"metadata": {"finalizers": ["example.com/f", "example.com/g"]},
                                               "status": {}})),
            ctx.pod_summary(status_patch(ctx, name, {"metadata": {"finalizers": None}, "status": {}})),
            ctx.raw.get_pod(name).code,
        ]  # fmt: skip

    got = same_as_real(server, real_server, request, scenario)
    assert got[0] == 200
    assert got[1] == {"finalizers": ["example.com/f"], "ownerReferences": None, "generateName": "zz-",
                      "generation": 1, "creationTimestamp": True, "deletionTimestamp": None}  # fmt: skip
    assert [got[2]["code"], got[3]["code"], got[4]["code"], got[6]["code"], got[-1]] == [
        422,
        422,
        422,
        422,
        404,
    ]


def test_qualified_names(server: Server, real_server: Server, request: pytest.FixtureRequest) -> None:
    """The messages of the qualified-name check (condition types), case by case."""

    def scenario(ctx: Ctx) -> Any:
        name, _ = ctx.pod()
        out = []
        for kind in ("a/b/c", "/x", "Example.com/x", "x" * 64, "example.com/", "-x", "ContainersReady",
                     "a" * 254 + "/x", "example.com/" + "y" * 63):  # fmt: skip
            ans = status_patch(ctx, name, {"status": {"conditions": [{"type": kind, "status": "True"}]}})
            out.append(ctx.error(ans))
            if ans.code == 200:
                status_patch(ctx, name, {"status": {"conditions": [{"type": kind, "$patch": "delete"}]}})
        return out

    got = same_as_real(server, real_server, request, scenario)
    assert [g["code"] for g in got] == [422, 422, 422, 422, 422, 422, 200, 422, 200]


# -- preconditions ------------------------------------------------------------------------


def test_status_patch_with_wrong_uid(
    server: Server, real_server: Server, request: pytest.FixtureRequest
) -> None:
    """The manager's "precondition" metadata.uid in a status patch: a mismatch is a 422 (immutable field)."""

    def scenario(ctx: Ctx) -> Any:
        name, _ = ctx.pod()
        return ctx.error(
            status_patch(ctx, name, {"metadata": {"uid": ZERO_UID}, "status": {"phase": "Running"}})
        )

    got = same_as_real(server, real_server, request, scenario)
    assert got["code"] == 422
    assert got["body"]["reason"] == "Invalid"
    assert (
        got["body"]["message"]
        == f'Pod "<name0>" is invalid: metadata.uid: Invalid value: "{ZERO_UID}": field is immutable'
    )


def test_status_patch_with_stale_resource_version(
    server: Server, real_server: Server, request: pytest.FixtureRequest
) -> None:
    def scenario(ctx: Ctx) -> Any:
        name, _ = ctx.pod()
        rv = ctx.raw.get_pod(name).body["metadata"]["resourceVersion"]
        status_patch(ctx, name, {"status": {"phase": "Running"}})
        stale = status_patch(ctx, name, {"metadata": {"resourceVersion": rv}, "status": {"message": "late"}})
        return ctx.error(stale)

    got = same_as_real(server, real_server, request, scenario)
    assert got["code"] == 409
    assert got["body"]["message"] == (
        'Operation cannot be fulfilled on pods "<name0>": the object has been modified; '
        "please apply your changes to the latest version and try again"
    )


def test_delete_with_wrong_uid_precondition(
    server: Server, real_server: Server, request: pytest.FixtureRequest
) -> None:
    def scenario(ctx: Ctx) -> Any:
        name, _ = ctx.pod()
        ans = ctx.raw.delete_pod(name, {"gracePeriodSeconds": 0, "preconditions": {"uid": ZERO_UID}})
        return [ctx.error(ans), ctx.raw.get_pod(name).code]

    got = same_as_real(server, real_server, request, scenario)
    assert got[0]["code"] == 409 and got[0]["body"]["reason"] == "Conflict"
    assert got[1] == 200


def test_delete_with_wrong_resource_version_precondition(
    server: Server, real_server: Server, request: pytest.FixtureRequest
) -> None:
    def scenario(ctx: Ctx) -> Any:
        name, _ = ctx.pod()
        rv = ctx.raw.get_pod(name).body["metadata"]["resourceVersion"]
        ctx.secrets[rv] = "<rv>"
        ans = ctx.raw.delete_pod(name, {"gracePeriodSeconds": 0, "preconditions": {"resourceVersion": "1"}})
        return ctx.error(ans)

    got = same_as_real(server, real_server, request, scenario)
    assert got["code"] == 409
    assert got["body"]["message"] == (
        'Operation cannot be fulfilled on Pod "<name0>": the ResourceVersion in the precondition (1) does '
        "not match the ResourceVersion in record (<rv>). The object might have been modified"
    )


def test_put_with_wrong_uid(server: Server, real_server: Server, request: pytest.FixtureRequest) -> None:
    """Unlike a patch, the UID in a PUT body is a storage precondition: 409 Conflict."""

    def scenario(ctx: Ctx) -> Any:
        name, _ = ctx.pod()
        out = []
        for sub in ("status", ""):
            body = ctx.raw.get_pod(name).body
            body["metadata"]["uid"] = ZERO_UID
            out.append(ctx.error(ctx.raw.request("PUT", ctx.raw.pods_path(name, sub), body)))
        return out

    got = same_as_real(server, real_server, request, scenario)
    assert [g["code"] for g in got] == [409, 409]


# -- errors of plain requests -------------------------------------------------------------


def test_get_missing_pod(server: Server, real_server: Server, request: pytest.FixtureRequest) -> None:
    def scenario(ctx: Ctx) -> Any:
        return [
            ctx.error(ctx.raw.get_pod("no-such-pod-x1")),
            ctx.error(status_patch(ctx, "no-such-pod-x1", {"status": {"phase": "Running"}})),
        ]

    got = same_as_real(server, real_server, request, scenario)
    assert got[0]["body"] == {
        "kind": "Status",
        "status": "Failure",
        "reason": "NotFound",
        "code": 404,
        "message": 'pods "no-such-pod-x1" not found',
        "details": {"name": "no-such-pod-x1", "kind": "pods"},
    }


def test_create_duplicate(server: Server, real_server: Server, request: pytest.FixtureRequest) -> None:
    def scenario(ctx: Ctx) -> Any:
        name, _ = ctx.pod()
        return ctx.error(ctx.raw.create_pod(pod_manifest(name)))

    got = same_as_real(server, real_server, request, scenario)
    assert got["code"] == 409 and got["body"]["reason"] == "AlreadyExists"
    assert got["body"]["message"] == 'pods "<name0>" already exists'


def test_create_invalid_pods(server: Server, real_server: Server, request: pytest.FixtureRequest) -> None:
    def scenario(ctx: Ctx) -> Any:
        no_image = pod_manifest(unique())
        del no_image["spec"]["containers"][0]["image"]
        ctx.secrets[no_image["metadata"]["name"]] = "<noimage>"
        return [
            ctx.error(ctx.raw.create_pod(pod_manifest("Bad_Name"))),
            ctx.error(ctx.raw.create_pod(no_image)),
        ]

    got = same_as_real(server, real_server, request, scenario)
    assert [g["code"] for g in got] == [422, 422]
    assert got[0]["body"]["reason"] == "Invalid"


def test_created_pod_defaults(server: Server, real_server: Server, request: pytest.FixtureRequest) -> None:
    """What the server adds to a new pod (defaults and admission)."""

    def scenario(ctx: Ctx) -> Any:
        ans = ctx.raw.create_pod(pod_manifest(unique()))
        return {"code": ans.code, "spec": semantic(ans.body["spec"]), "status": semantic(ans.body["status"])}

    got = same_as_real(server, real_server, request, scenario)
    assert got["status"] == {"phase": "Pending", "qosClass": "BestEffort"}


def test_unsupported_media_type(server: Server, real_server: Server, request: pytest.FixtureRequest) -> None:
    def scenario(ctx: Ctx) -> Any:
        name, _ = ctx.pod()
        ans = status_patch(ctx, name, {"status": {"phase": "Running"}}, JSON)
        return {"code": ans.code, "reason": ans.body.get("reason") if isinstance(ans.body, dict) else None}

    got = same_as_real(server, real_server, request, scenario)
    assert got == {"code": 415, "reason": "UnsupportedMediaType"}


def test_unsupported_media_type_messages(
    server: Server, real_server: Server, request: pytest.FixtureRequest
) -> None:
    def scenario(ctx: Ctx) -> Any:
        name, _ = ctx.pod()
        return [
            ctx.error(status_patch(ctx, name, {"status": {"phase": "Running"}}, JSON)),
            ctx.error(status_patch(ctx, name, {"status": {"phase": "Running"}}, "text/plain")),
            ctx.error(ctx.raw.request("POST", ctx.raw.pods_path(), pod_manifest(unique()), content_type="text/plain")),
        ]  # fmt: skip

    got = same_as_real(server, real_server, request, scenario)
    assert got[0]["body"]["message"] == "415: Unsupported Media Type"


# -- deletion -------------------------------------------------------------------------------


def test_graceful_delete_of_a_bound_pod(
    server: Server, real_server: Server, request: pytest.FixtureRequest
) -> None:
    """A bound pod deleted with grace stays, with deletionTimestamp, until deleted with grace 0."""

    def scenario(ctx: Ctx) -> Any:
        name, uid = ctx.pod()
        out = [ctx.pod_summary(ctx.raw.delete_pod(name, {"gracePeriodSeconds": 30}))]
        out.append(ctx.pod_summary(ctx.raw.delete_pod(name, {"gracePeriodSeconds": 10})))  # shortened
        out.append(ctx.pod_summary(ctx.raw.delete_pod(name, {"gracePeriodSeconds": 60})))  # not extended
        out.append(ctx.pod_summary(ctx.raw.get_pod(name)))
        out.append(
            ctx.pod_summary(
                ctx.raw.delete_pod(name, {"gracePeriodSeconds": 0, "preconditions": {"uid": uid}})
            )
        )
        out.append(ctx.raw.get_pod(name).code)
        return out

    got = same_as_real(server, real_server, request, scenario)
    assert [(g["deletionTimestamp"], g["deletionGracePeriodSeconds"]) for g in got[:4]] == [
        (True, 30), (True, 10), (True, 10), (True, 10)
    ]  # fmt: skip
    assert got[-1] == 404


def test_immediate_deletions(server: Server, real_server: Server, request: pytest.FixtureRequest) -> None:
    """Unbound pods, terminal pods and grace 0 go at once; the answer is the pod as deleted."""

    def scenario(ctx: Ctx) -> Any:
        unbound, _ = ctx.pod(node=None)
        bound, _ = ctx.pod()
        done, _ = ctx.pod()
        status_patch(ctx, done, {"status": {"phase": "Succeeded"}})
        answers = [
            ctx.raw.delete_pod(unbound, {"gracePeriodSeconds": 30}),
            ctx.raw.delete_pod(bound, {"gracePeriodSeconds": 0}),
            ctx.raw.delete_pod(done, {"gracePeriodSeconds": 30}),
        ]
        gone = [ctx.raw.get_pod(n).code for n in (unbound, bound, done)]
        return [ctx.pod_summary(a) for a in answers] + [gone]

    got = same_as_real(server, real_server, request, scenario)
    assert got[-1] == [404, 404, 404]
    assert [(g["deletionTimestamp"], g["deletionGracePeriodSeconds"]) for g in got[:3]] == [(True, 0)] * 3


def test_terminating_pod_stays_after_its_grace_period(
    server: Server, real_server: Server, request: pytest.FixtureRequest
) -> None:
    """Without a kubelet nothing removes a terminating pod when its grace period is over."""

    def scenario(ctx: Ctx) -> Any:
        name, _ = ctx.pod()
        ctx.raw.delete_pod(name, {"gracePeriodSeconds": 1})
        time.sleep(3.0)
        return ctx.pod_summary(ctx.raw.get_pod(name))

    if server.kind == "embedded":
        # Deliberate (reap_terminating=True, the default): the embedded server stands in for
        # the kubelet that would finish the deletion, so the pod is gone.
        got = scenario(Ctx(server.raw))
        assert got["code"] == 404 and got["body"]["message"] == 'pods "<name0>" not found'
        return
    got = same_as_real(server, real_server, request, scenario)
    assert got["code"] == 200 and got["deletionTimestamp"] is True


def test_watch_of_an_immediate_deletion(
    server: Server, real_server: Server, request: pytest.FixtureRequest
) -> None:
    """A pod deleted at once is first written with deletionTimestamp and grace 0, then removed."""

    def scenario(ctx: Ctx) -> Any:
        name, _ = ctx.pod()
        rv = ctx.raw.get_pod(name).body["metadata"]["resourceVersion"]
        ctx.raw.delete_pod(name, {"gracePeriodSeconds": 0})
        query = f"watch=1&resourceVersion={rv}&fieldSelector=metadata.name%3D{name}&timeoutSeconds=1"
        ans = ctx.raw.request("GET", ctx.raw.pods_path(), query=query)
        events = [json.loads(line) for line in ans.raw.splitlines() if line.strip()]
        return [
            (e["type"], (m := e["object"]["metadata"]).get("deletionTimestamp") is not None,
             m.get("deletionGracePeriodSeconds"), m.get("generation"))
            for e in events
        ]  # fmt: skip

    got = same_as_real(server, real_server, request, scenario)
    assert got == [("MODIFIED", True, 0, 2), ("DELETED", True, 0, 2)]


# -- lists ----------------------------------------------------------------------------------


def test_field_selectors(server: Server, real_server: Server, request: pytest.FixtureRequest) -> None:
    def scenario(ctx: Ctx) -> Any:
        failed, _ = ctx.pod()
        running, _ = ctx.pod()
        status_patch(ctx, failed, {"status": {"phase": "Failed"}})
        status_patch(ctx, running, {"status": {"phase": "Running"}})
        mine = {failed, running}

        def names(query: str) -> Any:
            ans = ctx.raw.request("GET", ctx.raw.pods_path(), query=query)
            if ans.code != 200:
                return ctx.error(ans)
            return sorted(
                ctx.scrub(p["metadata"]["name"]) for p in ans.body["items"] if p["metadata"]["name"] in mine
            )

        return {
            "phase=Failed": names("fieldSelector=status.phase%3DFailed"),
            "phase!=Failed": names("fieldSelector=status.phase!%3DFailed"),
            "nodeName,phase": names(f"fieldSelector=spec.nodeName%3D{NODE},status.phase%3DRunning"),
            "unsupported": names("fieldSelector=status.bogus%3Dx"),
        }

    got = same_as_real(server, real_server, request, scenario)
    assert got["phase=Failed"] == ["<name0>"]
    assert got["phase!=Failed"] == ["<name1>"]
    assert got["nodeName,phase"] == ["<name1>"]
    assert got["unsupported"]["code"] == 400


# -- request handling and hostile input (fieldValidation, dryRun, paging, namespaces...) -----------

PODS_PATH = "/api/v1/namespaces/default/pods"


def _numbers_scrubbed(answer: Any) -> Any:
    """resourceVersions in messages differ between servers: numbers in strings become N."""
    import re

    if isinstance(answer, str):
        return re.sub(r"\d+", "N", answer)
    if isinstance(answer, dict):
        return {k: _numbers_scrubbed(v) for k, v in answer.items()}
    if isinstance(answer, list):
        return [_numbers_scrubbed(v) for v in answer]
    return answer


def _in_namespace(manifest: dict[str, Any]) -> dict[str, Any]:
    """The manifest without its namespace (the URL gives it)."""
    manifest["metadata"].pop("namespace", None)
    return manifest


def test_strict_field_validation_on_create(
    server: Server, real_server: Server, request: pytest.FixtureRequest
) -> None:
    def scenario(ctx: Ctx) -> Any:
        body = pod_manifest(unique())
        ctx.secrets[body["metadata"]["name"]] = "<name>"
        body["spec"]["containers"][0]["bogus"] = 1
        body["spec"]["alsoBogus"] = {"x": 1}
        body["status"] = {"nope": True}
        strict = ctx.raw.request("POST", PODS_PATH, body, query="fieldValidation=Strict")
        warn = ctx.raw.request("POST", PODS_PATH, body, query="fieldValidation=Warn")
        del body["metadata"]["name"]
        body["metadata"]["generateName"] = "ignored-"
        ignore = ctx.raw.request("POST", PODS_PATH, body, query="fieldValidation=Ignore")
        default = ctx.raw.request("POST", PODS_PATH, body)
        return {
            "strict": ctx.error(strict),
            "warn": [warn.code, warn.warnings, "bogus" in json.dumps(warn.body)],
            "ignore": [ignore.code, ignore.warnings],
            "default": [default.code, default.warnings],
        }

    got = same_as_real(server, real_server, request, scenario)
    assert got["strict"]["code"] == 400
    assert got["warn"][1] == [
        '299 - "unknown field \\"spec.containers[0].bogus\\""',
        '299 - "unknown field \\"spec.alsoBogus\\""',
        '299 - "unknown field \\"status.nope\\""',
    ]


def test_strict_field_validation_on_patches(
    server: Server, real_server: Server, request: pytest.FixtureRequest
) -> None:
    def scenario(ctx: Ctx) -> Any:
        name, _ = ctx.pod()
        smp = ctx.raw.request(
            "PATCH", ctx.raw.pods_path(name, "status"), {"status": {"bogus": "x"}},
            content_type="application/strategic-merge-patch+json", query="fieldValidation=Strict",
        )  # fmt: skip
        merge = ctx.raw.request(
            "PATCH", ctx.raw.pods_path(name), {"spec": {"bogus": 1}},
            content_type=MERGE, query="fieldValidation=Strict",
        )  # fmt: skip
        warn = ctx.raw.request(
            "PATCH", ctx.raw.pods_path(name), {"metadata": {"bogus": 1}},
            content_type=MERGE, query="fieldValidation=Warn",
        )  # fmt: skip
        merge_err = ctx.error(merge)
        # The merge patch's error quotes the whole patched object (encoded differently): the tail only.
        message = merge_err["body"]["message"]
        merge_err["body"]["message"] = message[message.index("strict decoding error") :]
        del merge_err["body"]["details"]
        return {"smp": ctx.error(smp), "merge": merge_err, "warn": [warn.code, warn.warnings]}

    got = same_as_real(server, real_server, request, scenario)
    assert got["smp"]["code"] == 422
    assert got["smp"]["body"]["message"] == (
        ' "" is invalid: patch: Invalid value: "map[status:map[bogus:x]]": '
        'strict decoding error: unknown field "status.bogus"'
    )


def test_dry_run(server: Server, real_server: Server, request: pytest.FixtureRequest) -> None:
    def scenario(ctx: Ctx) -> Any:
        name, _ = ctx.pod()
        ghost = pod_manifest(unique())
        ctx.secrets[ghost["metadata"]["name"]] = "<ghost>"
        created = ctx.raw.request("POST", PODS_PATH, ghost, query="dryRun=All")
        patched = ctx.raw.request(
            "PATCH", ctx.raw.pods_path(name), {"metadata": {"labels": {"a": "b"}}},
            content_type=MERGE, query="dryRun=All",
        )  # fmt: skip
        before = ctx.raw.get_pod(name).body
        deleted = ctx.raw.request("DELETE", ctx.raw.pods_path(name), query="dryRun=All")
        after = ctx.raw.get_pod(name).body
        bad = ctx.raw.request("POST", PODS_PATH, ghost, query="dryRun=Maybe")
        meta = created.body["metadata"]
        return {
            "create": [created.code, "resourceVersion" in meta, bool(meta.get("uid"))],
            "stored": ctx.raw.get_pod(ghost["metadata"]["name"]).code,
            "patch": [patched.code, patched.body["metadata"].get("labels"),
                      patched.body["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]],
            "delete": [deleted.code, deleted.body["metadata"].get("deletionTimestamp") is not None,
                       deleted.body["metadata"].get("deletionGracePeriodSeconds")],
            "unchanged": after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
            and "labels" not in after["metadata"],
            "bad": ctx.error(bad),
        }  # fmt: skip

    got = same_as_real(server, real_server, request, scenario)
    assert got["stored"] == 404 and got["unchanged"] is True


def test_paging(server: Server, real_server: Server, request: pytest.FixtureRequest) -> None:
    def scenario(ctx: Ctx) -> Any:
        ns = unique("page")
        ctx.raw.ensure_namespace(ns)
        path = f"/api/v1/namespaces/{ns}/pods"
        for i in range(5):
            assert ctx.raw.request("POST", path, _in_namespace(pod_manifest(f"p{i}"))).code == 201
        first = ctx.raw.request("GET", path, query="limit=2").body
        ctx.raw.request("POST", path, _in_namespace(pod_manifest("p2a")))
        token = first["metadata"]["continue"]
        second = ctx.raw.request("GET", path, query=f"limit=2&continue={token}").body
        last = ctx.raw.request("GET", path, query=f"limit=2&continue={second['metadata']['continue']}").body
        labelled = ctx.raw.request("GET", path, query="limit=2&labelSelector=app%21%3Dx").body
        pages = [first, second, last]
        return {
            "names": [[p["metadata"]["name"] for p in page["items"]] for page in pages],
            "remaining": [page["metadata"].get("remainingItemCount") for page in pages],
            "continue": [bool(page["metadata"].get("continue")) for page in pages],
            "same_rv": len({page["metadata"]["resourceVersion"] for page in pages}) == 1,
            "selector": [len(labelled["items"]), labelled["metadata"].get("remainingItemCount"),
                         bool(labelled["metadata"].get("continue"))],
            "bogus": ctx.error(ctx.raw.request("GET", path, query="limit=1&continue=bogus")),
            "with_rv": ctx.error(ctx.raw.request("GET", path, query=f"limit=1&continue={token}&resourceVersion=1")),
        }  # fmt: skip

    got = same_as_real(server, real_server, request, scenario)
    assert got["names"] == [["p0", "p1"], ["p2", "p3"], ["p4"]]


def test_missing_and_created_namespaces(
    server: Server, real_server: Server, request: pytest.FixtureRequest
) -> None:
    def scenario(ctx: Ctx) -> Any:
        ns = unique("ns")
        ctx.secrets[ns] = "<ns>"
        missing = ctx.raw.request(
            "POST", f"/api/v1/namespaces/{ns}/pods", _in_namespace(pod_manifest(unique()))
        )
        made = ctx.raw.request("POST", "/api/v1/namespaces", {"metadata": {"name": ns}})
        again = ctx.raw.request("POST", "/api/v1/namespaces", {"metadata": {"name": ns}})
        bad = ctx.raw.request("POST", "/api/v1/namespaces", {"metadata": {"name": "Not.A.Label"}})
        then = ctx.raw.request("POST", f"/api/v1/namespaces/{ns}/pods", _in_namespace(pod_manifest(unique())))
        return {
            "missing": ctx.error(missing),
            "made": [made.code, ctx.scrub(made.body["metadata"].get("labels")), made.body.get("spec"),
                     made.body.get("status")],
            "again": ctx.error(again),
            "bad": ctx.error(bad),
            "then": then.code,
        }  # fmt: skip

    got = same_as_real(server, real_server, request, scenario)
    assert got["missing"]["code"] == 404 and got["then"] == 201


def test_not_acceptable(server: Server, real_server: Server, request: pytest.FixtureRequest) -> None:
    def scenario(ctx: Ctx) -> Any:
        html = ctx.raw.request("GET", PODS_PATH, accept="text/html")
        both = ctx.raw.request(
            "GET", PODS_PATH, accept="application/vnd.kubernetes.protobuf, application/json"
        )
        table = ctx.raw.request("GET", PODS_PATH, accept="application/json;as=Table;v=v1;g=meta.k8s.io")
        return {
            "html": [html.code, html.body.get("reason")],
            "both": both.code,
            "table": [table.code, table.body.get("kind")],
            "v2": ctx.raw.request("GET", "/openapi/v2").code,
        }

    got = same_as_real(server, real_server, request, scenario)
    assert got["html"] == [406, "NotAcceptable"]


def test_annotations_size(server: Server, real_server: Server, request: pytest.FixtureRequest) -> None:
    def scenario(ctx: Ctx) -> Any:
        body = pod_manifest(unique())
        ctx.secrets[body["metadata"]["name"]] = "<name>"
        body["metadata"]["annotations"] = {"a": "x" * (256 * 1024)}
        return ctx.error(ctx.raw.create_pod(body))

    got = same_as_real(server, real_server, request, scenario)
    assert got["code"] == 422


def test_number_ranges(server: Server, real_server: Server, request: pytest.FixtureRequest) -> None:
    def scenario(ctx: Ctx) -> Any:
        body = pod_manifest(unique())
        ctx.secrets[body["metadata"]["name"]] = "<name>"
        body["spec"]["containers"][0]["ports"] = [{"containerPort": 2**40}]
        too_big = ctx.error(ctx.raw.create_pod(body))
        body["spec"]["containers"][0]["ports"] = [{"containerPort": 99999}]
        bad_port = ctx.error(ctx.raw.create_pod(body))
        body["spec"]["containers"][0]["ports"] = []
        body["spec"]["terminationGracePeriodSeconds"] = 2**64
        grace = ctx.error(ctx.raw.create_pod(body))
        name, _ = ctx.pod()
        status = {"status": {"containerStatuses": [cstatus("c", {"running": {}}, restartCount=2**40)]}}
        merge = ctx.error(status_patch(ctx, name, status, MERGE))
        message = merge["body"]["message"]
        merge["body"]["message"] = message[message.index("json: cannot") :]
        merge["body"].pop("details", None)
        return {"too_big": too_big, "bad_port": bad_port, "grace": grace, "merge": merge}

    got = same_as_real(server, real_server, request, scenario)
    assert got["too_big"]["code"] == 400 and got["bad_port"]["code"] == 422


def test_int32_overflow_in_a_strategic_merge_patch(
    server: Server, real_server: Server, request: pytest.FixtureRequest
) -> None:
    """kube-apiserver v1.37.2 converts a strategic merge patch's numbers without range checks:
    restartCount 2^40 is stored as 0 (2^40 + 5 as 5)."""

    def scenario(ctx: Ctx) -> Any:
        name, _ = ctx.pod()
        status = {"status": {"containerStatuses": [cstatus("c", {"running": {}}, restartCount=2**40 + 5)]}}
        ans = status_patch(ctx, name, status)
        if ans.code != 200:
            return ctx.error(ans)
        return [ans.code, ans.body["status"]["containerStatuses"][0]["restartCount"]]

    if server.kind == "embedded":
        # Deliberate (strict_status=True, the default): the number is refused, never stored wrapped.
        got = scenario(Ctx(server.raw))
        assert got["code"] == 422
        assert got["body"]["message"].endswith(
            "json: cannot unmarshal number 1099511627781 into Go struct field "
            "ContainerStatus.status.containerStatuses.restartCount of type int32"
        )
        return
    assert same_as_real(server, real_server, request, scenario) == [200, 5]


def test_grace_period_out_of_range(
    server: Server, real_server: Server, request: pytest.FixtureRequest
) -> None:
    def scenario(ctx: Ctx) -> Any:
        name, _ = ctx.pod()
        query = ctx.error(
            ctx.raw.request("DELETE", ctx.raw.pods_path(name), query=f"gracePeriodSeconds={2**70}")
        )
        body = ctx.error(ctx.raw.delete_pod(name, {"gracePeriodSeconds": 2**64}))
        long = pod_manifest(unique())
        ctx.secrets[long["metadata"]["name"]] = "<long>"
        long["spec"]["terminationGracePeriodSeconds"] = 2**62
        assert ctx.raw.create_pod(long).code == 201
        deleted = ctx.raw.delete_pod(long["metadata"]["name"])
        forced = ctx.raw.delete_pod(long["metadata"]["name"], {"gracePeriodSeconds": 0})
        return {
            "query": query,
            "body": body,
            "long": [deleted.code, deleted.body["metadata"].get("deletionGracePeriodSeconds")],
            "forced": forced.code,
            "gone": ctx.raw.get_pod(long["metadata"]["name"]).code,
        }  # fmt: skip

    got = same_as_real(server, real_server, request, scenario)
    assert got["query"]["code"] == 400 and got["long"][0] == 200


def test_reads_at_a_future_resource_version(
    server: Server, real_server: Server, request: pytest.FixtureRequest
) -> None:
    def scenario(ctx: Ctx) -> Any:
        listed = ctx.raw.request("GET", PODS_PATH).body
        future = int(listed["metadata"]["resourceVersion"]) + 100000
        plain = ctx.raw.request("GET", PODS_PATH, query=f"resourceVersion={future}")
        watch = ctx.raw.request(
            "GET", PODS_PATH, query=f"watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan"
            f"&allowWatchBookmarks=true&resourceVersion={future}&timeoutSeconds=10",
        )  # fmt: skip
        first = json.loads(watch.raw.splitlines()[0]) if watch.raw else None
        # A plain watch from there is accepted and waits for the events after it (none come).
        waiting = ctx.raw.request(
            "GET", PODS_PATH, query=f"watch=1&resourceVersion={future}&timeoutSeconds=2"
        )
        return _numbers_scrubbed(
            {
                "list": ctx.error(plain),
                "watch": [watch.code, first],
                "plain_watch": [waiting.code, waiting.raw.decode()],
            }
        )

    got = same_as_real(server, real_server, request, scenario)
    assert got["list"]["code"] == 504


# -- Leases, Events and Node rules (the node agent's resources) ---------------------------

LEASES_PATH = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"
CORE_EVENTS = f"/api/v1/namespaces/{NS}/events"
V1_EVENTS = f"/apis/events.k8s.io/v1/namespaces/{NS}/events"
MICRO = "2026-01-02T03:04:05.123456Z"
SMP = "application/strategic-merge-patch+json"


def _named(ctx: Ctx, prefix: str) -> str:
    name = unique(prefix)
    ctx.secrets[name] = f"<{prefix}{len(ctx.secrets)}>"
    return name


def _object(ctx: Ctx, ans: Answer) -> dict[str, Any]:
    """Code and the object (volatile metadata normalised), or the error."""
    if not 200 <= ans.code < 300 or not isinstance(ans.body, dict) or ans.body.get("kind") == "Status":
        return ctx.error(ans)
    return {"code": ans.code, "object": ctx.scrub(normalise(ans.body))}


def test_lease_validation_and_micro_time(
    server: Server, real_server: Server, request: pytest.FixtureRequest
) -> None:
    def scenario(ctx: Ctx) -> Any:
        def create(**spec: Any) -> Answer:
            return ctx.raw.request(
                "POST", LEASES_PATH, {"metadata": {"name": _named(ctx, "lease")}, "spec": spec}
            )

        return [
            ctx.error(create(holderIdentity="n", leaseDurationSeconds=0, leaseTransitions=-1)),
            ctx.error(create(renewTime="2026-01-02T03:04:05Z")),
            ctx.error(create(renewTime="2026-01-02T03:04:05.123Z")),
            ctx.error(create(renewTime="yesterday")),
            ctx.error(create(leaseDurationSeconds="40")),
            _object(ctx, create(holderIdentity="n", leaseDurationSeconds=40,
                                acquireTime="2026-01-02T04:04:05.000001+01:00", renewTime=MICRO)),
            _object(ctx, create(holderIdentity="n", preferredHolder="m")),
            _object(ctx, create(holderIdentity="n", strategy="OldestEmulationVersion", preferredHolder="m")),
            _object(ctx, create(holderIdentity="n", strategy="Newest")),
        ]  # fmt: skip

    got = same_as_real(server, real_server, request, scenario)
    assert got[0]["code"] == 422
    assert got[0]["body"]["message"].startswith('Lease.coordination.k8s.io "<lease0>" is invalid: [')
    assert [g["code"] for g in got[1:5]] == [400, 400, 400, 400]
    assert got[5]["object"]["spec"]["acquireTime"] == "2026-01-02T03:04:05.000001Z"


def test_lease_update_conflict(server: Server, real_server: Server, request: pytest.FixtureRequest) -> None:
    def scenario(ctx: Ctx) -> Any:
        name = _named(ctx, "lease")
        spec = {"holderIdentity": "n", "leaseDurationSeconds": 40, "renewTime": MICRO}
        created = ctx.raw.request("POST", LEASES_PATH, {"metadata": {"name": name}, "spec": spec})
        body = created.body
        renewed = dict(body, spec=dict(spec, renewTime="2026-01-02T03:04:15.000000Z"))
        first = ctx.raw.request("PUT", f"{LEASES_PATH}/{name}", renewed)
        stale = ctx.raw.request("PUT", f"{LEASES_PATH}/{name}", renewed)  # the old resourceVersion again
        return [
            _object(ctx, first),
            ctx.error(stale),
            ctx.error(ctx.raw.request("GET", f"{LEASES_PATH}/no-such-lease")),
            ctx.error(ctx.raw.request("PATCH", f"{LEASES_PATH}/{name}/status", {"spec": {}}, content_type=SMP)),
            _object(ctx, ctx.raw.request("PATCH", f"{LEASES_PATH}/{name}", {"spec": {"leaseTransitions": 1}},
                                         content_type=SMP)),
        ]  # fmt: skip

    got = same_as_real(server, real_server, request, scenario)
    assert got[0]["code"] == 200
    assert got[1]["code"] == 409
    assert got[1]["body"]["message"] == (
        'Operation cannot be fulfilled on leases.coordination.k8s.io "<lease0>": the object has been '
        "modified; please apply your changes to the latest version and try again"
    )
    assert got[2]["body"]["message"] == 'leases.coordination.k8s.io "no-such-lease" not found'
    assert got[4]["object"]["spec"]["leaseTransitions"] == 1


def _core_event(name: str, pod: str, uid: str, **extra: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "involvedObject": {"kind": "Pod", "name": pod, "namespace": NS, "uid": uid, "apiVersion": "v1"},
        "reason": "Started",
        "message": "Started container c",
        "source": {"component": "kubelet", "host": NODE},
        "firstTimestamp": "2026-01-02T03:04:05Z",
        "lastTimestamp": "2026-01-02T03:04:06Z",
        "count": 2,
        "type": "Normal",
        **extra,
    }


def _v1_event(name: str, pod: str, uid: str, **extra: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "eventTime": MICRO,
        "reportingController": "kubelet",
        "reportingInstance": NODE,
        "action": "Pull",
        "reason": "Pulled",
        "regarding": {"kind": "Pod", "name": pod, "namespace": NS, "uid": uid},
        "note": "Pulled image",
        "type": "Normal",
        **extra,
    }


def test_event_conversion_between_groups(
    server: Server, real_server: Server, request: pytest.FixtureRequest
) -> None:
    def scenario(ctx: Ctx) -> Any:
        pod, uid = ctx.pod()
        core, v1 = _named(ctx, "ev"), _named(ctx, "ev")
        made = [
            _object(ctx, ctx.raw.request("POST", CORE_EVENTS, _core_event(core, pod, uid, unknown=1))),
            _object(ctx, ctx.raw.request("POST", V1_EVENTS, _v1_event(v1, pod, uid))),
        ]
        read = [
            _object(ctx, ctx.raw.request("GET", f"{path}/{name}"))
            for name in (core, v1)
            for path in (CORE_EVENTS, V1_EVENTS)
        ]
        series = {"series": {"count": 2, "lastObservedTime": "2026-01-02T03:05:05.000000Z"}}
        patched = [
            _object(ctx, ctx.raw.request("PATCH", f"{V1_EVENTS}/{v1}", series, content_type=SMP)),
            _object(ctx, ctx.raw.request("GET", f"{CORE_EVENTS}/{v1}")),
            _object(ctx, ctx.raw.request("PATCH", f"{CORE_EVENTS}/{core}", {"count": 3}, content_type=SMP)),
        ]
        return made + read + patched

    got = same_as_real(server, real_server, request, scenario)
    assert got[3]["object"]["note"] == "Started container c"
    assert got[4]["object"]["message"] == "Pulled image"


def test_event_validation(server: Server, real_server: Server, request: pytest.FixtureRequest) -> None:
    def scenario(ctx: Ctx) -> Any:
        pod, uid = ctx.pod()
        elsewhere = _core_event(_named(ctx, "ev"), pod, uid)
        elsewhere["involvedObject"]["namespace"] = "kube-system"
        loose = _v1_event(_named(ctx, "ev"), pod, uid, type="Bad", deprecatedCount=3)
        del loose["eventTime"]
        unnamed = _v1_event(_named(ctx, "ev"), pod, uid, reportingController="not a name",
                            reportingInstance="x" * 129, action="")  # fmt: skip
        good = _named(ctx, "ev")
        ctx.raw.request("POST", V1_EVENTS, _v1_event(good, pod, uid))
        return [
            ctx.error(ctx.raw.request("POST", CORE_EVENTS, elsewhere)),
            ctx.error(ctx.raw.request("POST", V1_EVENTS, loose)),
            ctx.error(ctx.raw.request("POST", V1_EVENTS, unnamed)),
            ctx.error(ctx.raw.request("PATCH", f"{V1_EVENTS}/{good}", {"note": "other"}, content_type=SMP)),
            ctx.error(
                ctx.raw.request("PATCH", f"{V1_EVENTS}/{good}", {"series": {"count": 1}}, content_type=SMP)
            ),
        ]

    got = same_as_real(server, real_server, request, scenario)
    assert [g["code"] for g in got] == [422] * 5
    assert got[0]["body"]["message"].startswith('Event "<ev')


def test_event_field_selectors(server: Server, real_server: Server, request: pytest.FixtureRequest) -> None:
    def scenario(ctx: Ctx) -> Any:
        pod, uid = ctx.pod()
        other, other_uid = ctx.pod()
        first, second, third = _named(ctx, "ev"), _named(ctx, "ev"), _named(ctx, "ev")
        mine = {first, second, third}
        ctx.raw.request("POST", CORE_EVENTS, _core_event(first, pod, uid))
        ctx.raw.request(
            "POST", CORE_EVENTS, _core_event(second, other, other_uid, type="Warning", reason="Failed")
        )
        ctx.raw.request("POST", V1_EVENTS, _v1_event(third, pod, uid))

        def names(path: str, selector: str) -> Any:
            ans = ctx.raw.request("GET", path, query="fieldSelector=" + selector.replace("=", "%3D"))
            if ans.code != 200:
                return ctx.error(ans)
            return sorted(
                ctx.scrub(e["metadata"]["name"]) for e in ans.body["items"] if e["metadata"]["name"] in mine
            )

        # kubectl describe pod's own selector first.
        describe = f"involvedObject.name={pod},involvedObject.namespace={NS},involvedObject.uid={uid}"
        return {
            "describe": names(CORE_EVENTS, describe),
            "kind": names(CORE_EVENTS, "involvedObject.kind=Pod,type=Warning"),
            "reason": names(CORE_EVENTS, "reason=Pulled"),
            "source": names(CORE_EVENTS, "source=kubelet"),
            "reportingComponent": names(CORE_EVENTS, "reportingComponent=kubelet"),
            "regarding": names(V1_EVENTS, f"regarding.name={pod}"),
            "reportingController": names(V1_EVENTS, "reportingController=kubelet"),
            "core-unsupported": names(CORE_EVENTS, f"regarding.name={pod}"),
            "v1-unsupported": names(V1_EVENTS, f"involvedObject.name={pod}"),
        }

    got = same_as_real(server, real_server, request, scenario)
    assert len(got["describe"]) == 2
    assert got["core-unsupported"]["code"] == 400


def test_node_taint_validation(server: Server, real_server: Server, request: pytest.FixtureRequest) -> None:
    def scenario(ctx: Ctx) -> Any:
        name = _named(ctx, "node")
        taints = [
            {"key": "a", "effect": "NoSchedule"},
            {"key": "a", "effect": "NoSchedule"},
            {"key": "b", "effect": "Sometimes"},
            {"key": "c"},
            {"key": "bad key", "value": "v", "effect": "NoExecute"},
        ]
        bad = ctx.raw.request(
            "POST", "/api/v1/nodes", {"metadata": {"name": name}, "spec": {"taints": taints}}
        )
        ctx.raw.request("POST", "/api/v1/nodes", {"metadata": {"name": name}, "spec": {}})
        try:
            cordon = ctx.raw.request("PATCH", f"/api/v1/nodes/{name}", {"spec": {"unschedulable": True}},
                                     content_type=SMP)  # fmt: skip
            retaint = ctx.raw.request("PATCH", f"/api/v1/nodes/{name}", {"spec": {"taints": taints[:2]}},
                                      content_type=SMP)  # fmt: skip
            status = {"status": {"conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
                                 "capacity": {"cpu": "2", "pods": "110"}, "allocatable": {"cpu": "2"}}}  # fmt: skip
            beat = ctx.raw.request("PATCH", f"/api/v1/nodes/{name}/status", status, content_type=SMP)
            return [
                ctx.error(bad),
                _without_not_ready(_object(ctx, cordon)["object"]["spec"]),
                ctx.error(retaint),
                _object(ctx, beat)["object"]["status"],
            ]
        finally:
            ctx.raw.request("DELETE", f"/api/v1/nodes/{name}")

    got = same_as_real(server, real_server, request, scenario)
    assert got[0]["code"] == 422
    assert got[1] == {"unschedulable": True}
    assert got[2]["code"] == 422


def _without_not_ready(spec: dict[str, Any]) -> dict[str, Any]:
    """The spec without the not-ready taint kube-apiserver's admission adds to a new Node.

    The embedded server has no node lifecycle controller to take it off again, so it does
    not add it (docs/design.md, "Leases, Events and Node updates").
    """
    taints = [t for t in spec.get("taints") or () if t.get("key") != "node.kubernetes.io/not-ready"]
    out = {k: v for k, v in spec.items() if k != "taints"}
    if taints:
        out["taints"] = taints
    return out


def _events_section(text: str) -> list[str]:
    """The Events table of ``kubectl describe``, ages replaced (they depend on the clock)."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Events:"))
    # Column widths follow the ages' lengths: compare words, not spacing.
    return [" ".join(re.sub(r"\b\d+[smhd](\d+[smh])?\b", "<age>", line).split()) for line in lines[start:]]


def test_describe_pod_shows_its_events(
    server: Server, real_server: Server, request: pytest.FixtureRequest
) -> None:
    from testkit import kubectl_path

    kubectl = kubectl_path()
    if kubectl is None:
        pytest.skip("no kubectl")

    def scenario(ctx: Ctx) -> Any:
        pod, uid = ctx.pod()
        now = time.time()

        def stamp(ago: float, micro: bool = False) -> str:
            fmt = "%Y-%m-%dT%H:%M:%S.%fZ" if micro else "%Y-%m-%dT%H:%M:%SZ"
            return time.strftime(fmt.replace(".%f", ".000000"), time.gmtime(now - ago))

        ctx.raw.request("POST", CORE_EVENTS, _core_event(
            _named(ctx, "ev"), pod, uid, firstTimestamp=stamp(600), lastTimestamp=stamp(300), count=3))  # fmt: skip
        ctx.raw.request("POST", CORE_EVENTS, _core_event(
            _named(ctx, "ev"), pod, uid, type="Warning", reason="BackOff", message="Back-off restarting",
            firstTimestamp=stamp(200), lastTimestamp=stamp(200), count=1))  # fmt: skip
        ctx.raw.request("POST", V1_EVENTS, _v1_event(_named(ctx, "ev"), pod, uid, eventTime=stamp(100, True)))
        proc = subprocess.run(
            [kubectl, "--kubeconfig", server_of[ctx.raw.base_url], "describe", "pod", "-n", NS, pod],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        return _events_section(proc.stdout)

    server_of = {s.raw.base_url: s.kubeconfig for s in (server, real_server)}
    got = same_as_real(server, real_server, request, scenario)
    assert got[0] == "Events:"
    assert any("BackOff" in line and "Back-off restarting" in line for line in got)
    assert any("(x3 over <age>)" in line for line in got)


# -- managedFields and server-side apply ---------------------------------------------------

APPLY = "application/apply-patch+yaml"


def managed_fields(ans: Answer) -> Any:
    """The managedFields of an answer, times replaced by a marker (or the error). Entries are
    sorted by operation and manager: their order also depends on the second each write fell in."""
    if not (isinstance(ans.body, dict) and ans.body.get("kind") == "Pod"):
        return {"code": ans.code, "body": ans.body}
    entries = ans.body["metadata"].get("managedFields") or []
    entries = sorted(entries, key=lambda e: (e.get("operation"), e.get("manager"), e.get("subresource", "")))
    return [{k: ("<time>" if k == "time" else v) for k, v in e.items()} for e in entries]


def apply(ctx: Ctx, name: str, config: dict[str, Any], query: str, sub: str = "") -> Answer:
    return ctx.raw.request("PATCH", ctx.raw.pods_path(name, sub), json.dumps(config).encode(),
                           content_type=APPLY, query=query)  # fmt: skip


def apply_config(name: str, image: str = IMAGE, labels: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if labels is not None:
        meta["labels"] = labels
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "spec": {"containers": [{"name": "c", "image": image}], "nodeName": NODE}}  # fmt: skip


def conflict_summary(ctx: Ctx, ans: Answer) -> Any:
    """A 409's message and its causes (the real server lists them in map order: sorted here)."""
    body = ans.body if isinstance(ans.body, dict) else {}
    causes = sorted(
        ((body.get("details") or {}).get("causes") or []),
        key=lambda c: (c.get("field", ""), c.get("message", "")),
    )
    return {"code": ans.code, "reason": body.get("reason"), "message": ctx.scrub(body.get("message", "")),
            "causes": causes}  # fmt: skip


def test_managed_fields_of_create_status_and_label_updates(
    server: Server, real_server: Server, request: pytest.FixtureRequest
) -> None:
    """Who owns what after a create (kubectl's field manager, and the user agent's when none is
    given), a status update by another manager and a label change by a third."""

    def scenario(ctx: Ctx) -> Any:
        name = unique("mf")
        ctx.secrets[name] = "<name>"
        manifest = pod_manifest(name, labels={"app": "web"})
        manifest["spec"]["containers"][0]["ports"] = [{"containerPort": 80}]
        manifest["spec"]["containers"][0]["env"] = [{"name": "X", "value": "1"}]
        created = ctx.raw.request("POST", ctx.raw.pods_path(), manifest, query="fieldManager=kubectl-create")
        status = ctx.raw.request("PATCH", ctx.raw.pods_path(name, "status"), {"status": {
            "phase": "Running", "podIP": "10.1.2.3",
            "conditions": [{"type": "Ready", "status": "True"}, {"type": "PodScheduled", "status": "True"}],
            "containerStatuses": [cstatus("c", {"running": {"startedAt": "2026-01-01T00:00:00Z"}})],
        }}, content_type=STRATEGIC, query="fieldManager=kubelet")  # fmt: skip
        label = ctx.raw.request("PATCH", ctx.raw.pods_path(name), {"metadata": {"labels": {"app": "db", "x": "y"}}},
                                content_type=MERGE, query="fieldManager=labeller")  # fmt: skip
        other = unique("mf")
        ctx.secrets[other] = "<other>"
        by_agent = ctx.raw.create_pod(pod_manifest(other))
        return [managed_fields(a) for a in (created, status, label, by_agent)]

    got = same_as_real(server, real_server, request, scenario)
    assert got[0][0]["manager"] == "kubectl-create" and got[1][1]["subresource"] == "status"
    assert got[3][0]["manager"] == "python-urllib3"  # the user agent up to its first "/"


def test_apply_create_change_prune_and_dry_run(
    server: Server, real_server: Server, request: pytest.FixtureRequest
) -> None:
    """Create-on-apply (201), a second apply that changes a field and drops a label, a dry run."""

    def scenario(ctx: Ctx) -> Any:
        name = unique("ssa")
        ctx.secrets[name] = "<name>"
        first = apply(ctx, name, apply_config(name, labels={"a": "1", "b": "2"}), "fieldManager=ssa")
        second = apply(ctx, name, apply_config(name, labels={"a": "1"}), "fieldManager=ssa")
        dry = apply(ctx, name, apply_config(name, image="registry.k8s.io/pause:3.9", labels={"a": "1"}),
                    "fieldManager=ssa&dryRun=All")  # fmt: skip
        after = ctx.raw.get_pod(name)
        out = []
        for ans in (first, second, dry, after):
            body = ans.body if isinstance(ans.body, dict) else {}
            out.append({
                "code": ans.code,
                "managedFields": managed_fields(ans),
                "labels": (body.get("metadata") or {}).get("labels"),
                "image": ((body.get("spec") or {}).get("containers") or [{}])[0].get("image"),
                "same version": (body.get("metadata") or {}).get("resourceVersion")
                == (second.body.get("metadata") or {}).get("resourceVersion"),
            })  # fmt: skip
        return out

    got = same_as_real(server, real_server, request, scenario)
    assert [g["code"] for g in got] == [201, 200, 200, 200]
    assert got[1]["labels"] == {"a": "1"} and got[2]["image"] != got[3]["image"]


def test_apply_conflicts_and_force(
    server: Server, real_server: Server, request: pytest.FixtureRequest
) -> None:
    """The 409 of one conflict and of several (grouped by manager), then ``force=true``."""

    def scenario(ctx: Ctx) -> Any:
        name = unique("ssa")
        ctx.secrets[name] = "<name>"
        created = ctx.raw.request("POST", ctx.raw.pods_path(), pod_manifest(name, labels={"a": "1"}),
                                  query="fieldManager=kubectl-client-side-apply")  # fmt: skip
        assert created.code == 201, created.body
        one = apply(ctx, name, apply_config(name, image="registry.k8s.io/pause:3.9"), "fieldManager=ssa")
        apply(ctx, name, apply_config(name, labels={"a": "1", "b": "2"}), "fieldManager=ssa")
        ctx.raw.request("PATCH", ctx.raw.pods_path(name, "status"), {"status": {"phase": "Running"}},
                        content_type=STRATEGIC, query="fieldManager=kubelet")  # fmt: skip
        config = apply_config(name, image="registry.k8s.io/pause:3.8", labels={"a": "9", "b": "9"})
        config["status"] = {"phase": "Pending"}
        several = apply(ctx, name, config, "fieldManager=other", "status")
        del config["status"]
        several_main = apply(ctx, name, config, "fieldManager=other")
        forced = apply(ctx, name, config, "fieldManager=other&force=true")
        return [conflict_summary(ctx, one), conflict_summary(ctx, several), conflict_summary(ctx, several_main),
                managed_fields(forced)]  # fmt: skip

    got = same_as_real(server, real_server, request, scenario)
    assert got[0]["message"] == (
        'Apply failed with 1 conflict: conflict with "kubectl-client-side-apply" using v1: '
        '.spec.containers[name="c"].image'
    )
    # Conflicts with an applier name it alone; an updater with its subresource and version.
    assert got[2]["message"].startswith(
        'Apply failed with 5 conflicts: conflicts with "kubectl-client-side-apply" using v1:\n'
    )
    assert 'conflict with "kubelet" with subresource "status" using v1' in [
        c["message"] for c in got[1]["causes"]
    ]


def test_apply_request_errors(server: Server, real_server: Server, request: pytest.FixtureRequest) -> None:
    """What an apply (and fieldManager) the real server refuses gets."""

    def scenario(ctx: Ctx) -> Any:
        name, _ = ctx.pod()
        gone = unique("gone")
        ctx.secrets[gone] = "<gone>"
        config = apply_config(name)
        bad_kind = dict(config, kind="Node")
        with_mf = {**config, "metadata": {"name": name, "managedFields": []}}
        answers = {
            "no fieldManager": apply(ctx, name, config, ""),
            "wrong kind": apply(ctx, name, bad_kind, "fieldManager=x"),
            "managedFields given": apply(ctx, name, with_mf, "fieldManager=x"),
            "name mismatch": apply(ctx, name, apply_config("other-name"), "fieldManager=x"),
            "missing namespace": ctx.raw.request(
                "PATCH", ctx.raw.pods_path(name, ns="no-such-namespace"), json.dumps(config).encode(),
                content_type=APPLY, query="fieldManager=x",
            ),
            "missing pod status": apply(ctx, gone, apply_config(gone), "fieldManager=x", "status"),
            "force on merge patch": ctx.raw.request("PATCH", ctx.raw.pods_path(name), {}, content_type=MERGE,
                                                    query="force=true"),
            "long fieldManager": ctx.raw.request("POST", ctx.raw.pods_path(), pod_manifest(),
                                                 query="fieldManager=" + "m" * 129),
            "unprintable fieldManager": apply(ctx, name, config, "fieldManager=a%07b"),
            "stale resourceVersion": apply(ctx, name, {**config, "metadata": {"name": name,
                                                                              "resourceVersion": "999999999"}},
                                           "fieldManager=x"),
            "other uid": apply(ctx, name, {**config, "metadata": {"name": name, "uid": ZERO_UID}}, "fieldManager=x"),
            "other namespace": apply(ctx, name, {**config, "metadata": {"name": name, "namespace": "kube-system"}},
                                     "fieldManager=x"),
            "not an object": ctx.raw.request("PATCH", ctx.raw.pods_path(name), b"- 1\n", content_type=APPLY,
                                             query="fieldManager=x"),
            "duplicate keys": apply(ctx, gone, {**apply_config(gone), "spec": {"containers": [
                {"name": "c", "image": IMAGE}, {"name": "c", "image": IMAGE}]}}, "fieldManager=x"),
            "conflict and invalid": apply(ctx, name, {**config, "spec": {"nodeName": NODE, "containers": [
                {"name": "c", "image": "registry.k8s.io/pause:3.9"}, {"name": "d", "image": IMAGE}]}},
                "fieldManager=x"),
            "a container added": apply(ctx, name, {**config, "spec": {"nodeName": NODE, "containers": [
                {"name": "c", "image": IMAGE}, {"name": "d", "image": IMAGE}]}}, "fieldManager=x"),
        }  # fmt: skip
        return {k: ctx.error(v) for k, v in answers.items()}

    got = same_as_real(server, real_server, request, scenario)
    assert got["no fieldManager"]["code"] == 422 and got["missing namespace"]["code"] == 404
    assert got["conflict and invalid"]["code"] == 409  # conflicts are found before validation


def test_apply_yaml_bounds(server: Server, real_server: Server, request: pytest.FixtureRequest) -> None:
    """Hostile apply bodies: go-yaml's alias bound and its words; past 10,000 levels both
    servers answer 400 (the depth message differs: podstatus stops at 200 levels)."""
    lols = "a: &a [lol,lol,lol,lol,lol,lol,lol,lol,lol,lol]\n" + "".join(
        f"{n}: &{n} [{','.join(['*' + p] * 10)}]\n" for p, n in zip("abcdef", "bcdefg", strict=True)
    )

    def scenario(ctx: Ctx) -> Any:
        name = unique("bounds")
        ctx.secrets[name] = "<name>"
        head = f"apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\n"

        def send(body: str | bytes) -> Answer:
            data = body.encode() if isinstance(body, str) else body
            return ctx.raw.request("PATCH", ctx.raw.pods_path(name), data, content_type=APPLY,
                                   query="fieldManager=x")  # fmt: skip

        deep = b'{"apiVersion":"v1","kind":"Pod","metadata":{"name":"%s","labels":' % name.encode()
        deep += b'{"a":' * 10_000 + b'"x"' + b"}" * 10_000 + b"}}"
        answers = {
            "alias bomb": ctx.error(send(head + lols)),
            "alias in its own anchor": ctx.error(
                send(f"apiVersion: v1\nkind: Pod\nmetadata: &m {{name: {name}, labels: *m}}\n")
            ),
            "unclosed flow sequence": ctx.error(send("[1, 2")),
            "mapping in a plain scalar": ctx.error(send("a: b: c")),
        }
        code = send(deep).code
        shared = send(head.replace("}", ", labels: &l {app: web}, annotations: *l}") +
                      "spec: {containers: [{name: c, image: busybox}]}\n")  # fmt: skip
        meta = shared.body["metadata"] if isinstance(shared.body, dict) else {}
        return {**answers, "10,000 levels": code, "shared labels": (shared.code, meta.get("annotations"))}

    got = same_as_real(server, real_server, request, scenario)
    assert got["alias bomb"]["code"] == 400 and got["10,000 levels"] == 400


def test_managed_fields_reset_then_first_apply(
    server: Server, real_server: Server, request: pytest.FixtureRequest
) -> None:
    """``managedFields: [{}]`` forgets them; updates then stay untracked, and the next apply
    conflicts with the stand-in owner of every existing field, ``before-first-apply``."""

    def scenario(ctx: Ctx) -> Any:
        name = unique("mf")
        ctx.secrets[name] = "<name>"
        ctx.raw.request("POST", ctx.raw.pods_path(), pod_manifest(name, labels={"a": "1"}),
                        query="fieldManager=creator")  # fmt: skip
        reset = ctx.raw.request("PATCH", ctx.raw.pods_path(name),
                                [{"op": "replace", "path": "/metadata/managedFields", "value": [{}]}],
                                content_type=JSON_PATCH)  # fmt: skip
        later = ctx.raw.request("PATCH", ctx.raw.pods_path(name), {"metadata": {"labels": {"b": "2"}}},
                                content_type=MERGE, query="fieldManager=later")  # fmt: skip
        first = apply(ctx, name, apply_config(name, labels={"a": "9"}), "fieldManager=ssa")
        forced = apply(ctx, name, apply_config(name, labels={"a": "9"}), "fieldManager=ssa&force=true")
        return [
            managed_fields(reset),
            managed_fields(later),
            conflict_summary(ctx, first),
            managed_fields(forced),
        ]

    got = same_as_real(server, real_server, request, scenario)
    assert got[0] == [] and got[1] == [] and "before-first-apply" in got[2]["message"]


def test_managed_fields_of_lease_apply_event_create_and_node_status(
    server: Server, real_server: Server, request: pytest.FixtureRequest
) -> None:
    """A node agent's other writes: its Lease by apply, an Event by create, the Node's status by patch."""

    def scenario(ctx: Ctx) -> Any:
        lease = unique("lease")
        ctx.secrets[lease] = "<lease>"
        config = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                  "metadata": {"name": lease, "namespace": "kube-node-lease"},
                  "spec": {"holderIdentity": lease, "leaseDurationSeconds": 40}}  # fmt: skip
        applied = ctx.raw.request("PATCH", f"{LEASES_PATH}/{lease}", json.dumps(config).encode(),
                                  content_type=APPLY, query="fieldManager=kubelet")  # fmt: skip
        event = unique("ev")
        ctx.secrets[event] = "<event>"
        created = ctx.raw.request("POST", f"/api/v1/namespaces/{NS}/events", {
            "metadata": {"name": event}, "involvedObject": {"kind": "Pod", "name": "x", "namespace": NS},
            "reason": "Started", "message": "m", "type": "Normal", "count": 1,
            "source": {"component": "kubelet", "host": NODE},
        }, query="fieldManager=kubelet")  # fmt: skip
        node = unique("node")
        ctx.secrets[node] = "<node>"
        ctx.raw.request("POST", "/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": node}},
                        query="fieldManager=kubelet")  # fmt: skip
        status = ctx.raw.request("PATCH", f"/api/v1/nodes/{node}/status", {"status": {
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
            "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}],
        }}, content_type=STRATEGIC, query="fieldManager=kubelet")  # fmt: skip
        ctx.raw.request("DELETE", f"/api/v1/nodes/{node}")
        out = []
        for ans in (applied, created, status):
            body = ans.body if isinstance(ans.body, dict) else {}
            entries = (body.get("metadata") or {}).get("managedFields")
            out.append({"code": ans.code,
                        "managedFields": [{k: ("<time>" if k == "time" else v) for k, v in e.items()}
                                          for e in entries or []]})  # fmt: skip
        return out

    got = same_as_real(server, real_server, request, scenario)
    assert got[0]["code"] == 201 and got[0]["managedFields"][0]["apiVersion"] == "coordination.k8s.io/v1"


def test_exact_list(server: Server, real_server: Server, request: pytest.FixtureRequest) -> None:
    def scenario(ctx: Ctx) -> Any:
        ns = unique("exact")
        ctx.raw.ensure_namespace(ns)
        path = f"/api/v1/namespaces/{ns}/pods"
        assert ctx.raw.request("POST", path, _in_namespace(pod_manifest("a", node=None))).code == 201
        rv = ctx.raw.request("GET", path).body["metadata"]["resourceVersion"]
        assert ctx.raw.request("POST", path, _in_namespace(pod_manifest("b", node=None))).code == 201
        assert ctx.raw.request("DELETE", f"{path}/a").code == 200
        names = {}
        for query in (f"resourceVersion={rv}&resourceVersionMatch=Exact", f"resourceVersion={rv}&limit=5",
                      f"resourceVersion={rv}", f"resourceVersion={rv}&resourceVersionMatch=NotOlderThan"):  # fmt: skip
            body = ctx.raw.request("GET", path, query=query).body
            names[query.replace(rv, "RV")] = [p["metadata"]["name"] for p in body["items"]]
        return names

    got = same_as_real(server, real_server, request, scenario)
    assert got["resourceVersion=RV&resourceVersionMatch=Exact"] == ["a"]


def test_event_and_lease_tables(server: Server, real_server: Server, request: pytest.FixtureRequest) -> None:
    """The Table kubectl asks for: columns (names, priorities) and the cells of our rows."""

    def scenario(ctx: Ctx) -> Any:
        pod, uid = ctx.pod()
        core, v1, lease = _named(ctx, "ev"), _named(ctx, "ev"), _named(ctx, "lease")
        ctx.raw.request("POST", CORE_EVENTS, _core_event(core, pod, uid, reportingComponent="", count=5))
        ctx.raw.request(
            "POST", V1_EVENTS, _v1_event(v1, pod, uid, series={"count": 3, "lastObservedTime": MICRO})
        )
        ctx.raw.request("POST", LEASES_PATH, {"metadata": {"name": lease}, "spec": {"holderIdentity": "h"}})
        table = "application/json;as=Table;v=v1;g=meta.k8s.io"

        def rows(path: str, names: set[str]) -> Any:
            ans = ctx.raw.request("GET", path, accept=table)
            if ans.code != 200:
                return ctx.error(ans)
            columns = [
                (c["name"], c["type"], c.get("format", ""), c.get("priority", 0))
                for c in ans.body["columnDefinitions"]
            ]
            cells = [
                ctx.scrub(
                    [
                        re.sub(r"^\d+[smhdy](\d+[smhd])?$", "<age>", c) if isinstance(c, str) else c
                        for c in r["cells"]
                    ]
                )
                for r in ans.body["rows"]
                if r["object"]["metadata"]["name"] in names
            ]
            return {"columns": columns, "cells": sorted(cells, key=json.dumps)}

        return {
            "core": rows(CORE_EVENTS, {core, v1}),
            "v1": rows(V1_EVENTS, {core, v1}),
            "leases": rows(LEASES_PATH, {lease}),
        }

    got = same_as_real(server, real_server, request, scenario)
    assert [c[0] for c in got["core"]["columns"]][:4] == ["Last Seen", "Type", "Reason", "Object"]
    assert [c[0] for c in got["leases"]["columns"]] == ["Name", "Holder", "Age"]


def test_missing_duplicate_and_deleted_events_and_leases(
    server: Server, real_server: Server, request: pytest.FixtureRequest
) -> None:
    def scenario(ctx: Ctx) -> Any:
        pod, uid = ctx.pod()
        event, lease = _named(ctx, "ev"), _named(ctx, "lease")
        out = [
            ctx.error(ctx.raw.request("GET", f"{CORE_EVENTS}/no-such-event")),
            ctx.error(ctx.raw.request("GET", f"{V1_EVENTS}/no-such-event")),
        ]
        ctx.raw.request("POST", CORE_EVENTS, _core_event(event, pod, uid))
        ctx.raw.request("POST", LEASES_PATH, {"metadata": {"name": lease}, "spec": {}})
        node = _named(ctx, "node")
        ctx.raw.request("POST", "/api/v1/nodes", {"metadata": {"name": node}})
        out += [
            ctx.error(ctx.raw.request("POST", V1_EVENTS, _v1_event(event, pod, uid))),
            ctx.error(ctx.raw.request("POST", LEASES_PATH, {"metadata": {"name": lease}, "spec": {}})),
        ]
        for path in (f"{V1_EVENTS}/{event}", f"{LEASES_PATH}/{lease}", f"/api/v1/nodes/{node}"):
            gone = ctx.raw.request("DELETE", path)
            body = gone.body if isinstance(gone.body, dict) else {}
            details = {k: v for k, v in (body.get("details") or {}).items() if k != "uid"}
            out.append({"code": gone.code, "kind": body.get("kind"), "status": body.get("status"),
                        "apiVersion": body.get("apiVersion"), "details": ctx.scrub(details)})  # fmt: skip
        return out

    got = same_as_real(server, real_server, request, scenario)
    assert got[1]["body"]["message"] == 'events.events.k8s.io "no-such-event" not found'
    assert got[2]["code"] == got[3]["code"] == 409


# -- pods/eviction and protobuf request bodies ------------------------------------------------


def _evict(ctx: Ctx, name: str, body_name: str | None = None, **options: Any) -> Answer:
    eviction: dict[str, Any] = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": body_name or name, "namespace": NS},
    }
    if options:
        eviction["deleteOptions"] = options
    return ctx.raw.request("POST", ctx.raw.pods_path(name, "eviction"), eviction)


def test_eviction(server: Server, real_server: Server, request: pytest.FixtureRequest) -> None:
    """No PodDisruptionBudget: an eviction is a graceful delete with its DeleteOptions."""

    def scenario(ctx: Ctx) -> Any:
        name, uid = ctx.pod()
        other, _ = ctx.pod()
        missing = unique("missing")
        ctx.secrets[missing] = "<missing>"
        return [
            ctx.error(_evict(ctx, name, preconditions={"uid": ZERO_UID})),
            ctx.error(_evict(ctx, name, body_name=other)),
            ctx.error(_evict(ctx, name, gracePeriodSeconds=20, preconditions={"uid": uid})),
            ctx.pod_summary(ctx.raw.get_pod(name)),
            ctx.error(_evict(ctx, missing)),
        ]

    got = same_as_real(server, real_server, request, scenario)
    assert got[0]["code"] == 409
    assert got[1]["code"] == 400
    assert got[2] == {"code": 201, "body": {"kind": "Status", "status": "Success", "code": 201}}
    assert (got[3]["deletionTimestamp"], got[3]["deletionGracePeriodSeconds"]) == (True, 20)
    assert got[4]["code"] == 404


def _pb_varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b, n = n & 0x7F, n >> 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _pb(number: int, payload: bytes) -> bytes:
    return _pb_varint(number << 3 | 2) + _pb_varint(len(payload)) + payload


def test_protobuf_request_bodies(server: Server, real_server: Server, request: pytest.FixtureRequest) -> None:
    """A protobuf Pod and protobuf DeleteOptions (what client-go sends) are read; garbage is a 400."""
    pb = "application/vnd.kubernetes.protobuf"

    def scenario(ctx: Ctx) -> Any:
        name = unique("cmp")
        ctx.secrets[name] = "<name0>"
        container = _pb(1, b"app") + _pb(2, IMAGE.encode())
        spec = _pb(2, container) + _pb(10, NODE.encode())
        meta = _pb(1, name.encode()) + _pb(3, NS.encode()) + _pb(11, _pb(1, b"app") + _pb(2, b"pb"))
        body = b"k8s\x00" + _pb(1, _pb(1, b"v1") + _pb(2, b"Pod")) + _pb(2, _pb(1, meta) + _pb(2, spec))
        created = ctx.raw.request("POST", ctx.raw.pods_path(), body, content_type=pb)
        labels = created.body.get("metadata", {}).get("labels") if isinstance(created.body, dict) else None
        # DeleteOptions: gracePeriodSeconds = 0 (field 1, a varint).
        opts = b"k8s\x00" + _pb(1, _pb(1, b"v1") + _pb(2, b"DeleteOptions")) + _pb(2, b"\x08\x00")
        deleted = ctx.raw.request("DELETE", ctx.raw.pods_path(name), opts, content_type=pb)
        garbage = ctx.raw.request("POST", ctx.raw.pods_path(), b"k8s\x00\xff\xff", content_type=pb)
        return [created.code, labels, deleted.code, ctx.raw.get_pod(name).code, garbage.code]

    got = same_as_real(server, real_server, request, scenario)
    assert got == [201, {"app": "pb"}, 200, 404, 400]


def test_duplicate_fields(server: Server, real_server: Server, request: pytest.FixtureRequest) -> None:
    def scenario(ctx: Ctx) -> Any:
        name = unique()
        ctx.secrets[name] = "<name>"
        text = json.dumps(pod_manifest(name))
        # The same label twice, and the same container field twice, in raw JSON.
        raw = text.replace('"metadata": {', '"metadata": {"labels": {"a": "1", "a": "2"}, ', 1).replace(
            '"image":', '"imagePullPolicy": "Always", "imagePullPolicy": "Never", "image":', 1
        )
        strict = ctx.raw.request("POST", PODS_PATH, raw.encode(), query="fieldValidation=Strict")
        warn = ctx.raw.request("POST", PODS_PATH, raw.encode(), query="fieldValidation=Warn")
        patch = b'{"metadata": {"labels": {"b": "1"}, "labels": {"c": "2"}}}'
        smp = ctx.raw.request(
            "PATCH", ctx.raw.pods_path(name), patch, content_type="application/strategic-merge-patch+json",
            query="fieldValidation=Strict",
        )  # fmt: skip
        return {
            "strict": ctx.error(strict),
            "warn": [warn.code, warn.warnings, warn.body["metadata"]["labels"] if warn.code == 201 else None],
            "smp": ctx.error(smp),
        }

    got = same_as_real(server, real_server, request, scenario)
    assert got["strict"]["body"]["message"] == (
        'Pod in version "v1" cannot be handled as a Pod: strict decoding error: '
        'duplicate field "metadata.labels.a", duplicate field "spec.containers[0].imagePullPolicy"'
    )
    assert got["warn"][1] == [
        '299 - "duplicate field \\"metadata.labels.a\\""',
        '299 - "duplicate field \\"spec.containers[0].imagePullPolicy\\""',
    ]
    assert got["smp"]["code"] == 422 and got["smp"]["body"]["message"].endswith(
        'strict decoding error: duplicate field "metadata.labels"'
    )


def test_apply_with_undeclared_fields(
    server: Server, real_server: Server, request: pytest.FixtureRequest
) -> None:
    """An applied configuration with fields its kind does not declare is a 500 from the field
    manager, whatever fieldValidation says (the lines come in map order: sorted here)."""

    def scenario(ctx: Ctx) -> Any:
        name = unique("ssa")
        ctx.secrets[name] = "<name>"
        config = apply_config(name)
        config["metadata"]["bogus"] = 1
        config["spec"]["containers"][0]["nope"] = True
        one = {**apply_config(name), "extra": {}}
        out = {}
        for validation in ("Strict", "Warn", "Ignore"):
            ans = apply(ctx, name, config, f"fieldManager=x&fieldValidation={validation}")
            body = ans.body if isinstance(ans.body, dict) else {}
            lines = ctx.scrub(body.get("message", "")).split("\n")
            out[validation] = {
                "code": ans.code,
                "reason": body.get("reason"),
                "lines": lines[:1] + sorted(lines[1:]),
            }
        ans = apply(ctx, name, one, "fieldManager=x")
        out["one field"] = {"code": ans.code, "message": ctx.scrub(ans.body.get("message", ""))}
        out["exists"] = ctx.raw.get_pod(name).code
        return out

    got = same_as_real(server, real_server, request, scenario)
    assert got["Strict"]["code"] == 500 and got["exists"] == 404


# -- issue 22, item 14 -----------------------------------------------------------------------------


def test_negative_observed_generations(
    server: Server, real_server: Server, request: pytest.FixtureRequest
) -> None:
    """ValidatePodStatusUpdate refuses a negative observedGeneration, of the status or of a condition."""

    def scenario(ctx: Ctx) -> Any:
        out = []
        for patch in (
            {"status": {"observedGeneration": -1}},
            {"status": {"conditions": [{"type": "Ready", "status": "True", "observedGeneration": -5}]}},
        ):
            name, _ = ctx.pod()
            out.append(ctx.error(status_patch(ctx, name, patch)))
        return out

    got = same_as_real(server, real_server, request, scenario)
    assert [g["code"] for g in got] == [422, 422]


def test_negative_restart_count(server: Server, real_server: Server, request: pytest.FixtureRequest) -> None:
    """kube-apiserver v1.37.2 stores restartCount -1 (it has no check); podstatus refuses it by default."""

    def scenario(ctx: Ctx) -> Any:
        name, _ = ctx.pod()
        status = {"containerStatuses": [cstatus("c", {"running": {"startedAt": "2026-01-01T00:00:00Z"}},
                                                restartCount=-1)]}  # fmt: skip
        return ctx.error(status_patch(ctx, name, {"status": status}))

    if server.kind == "embedded":
        # Deliberate (strict_status=True, the default): the API documents the count as never negative.
        assert scenario(Ctx(server.raw)) == invalid_status(
            "<name0>", ("status.containerStatuses[0].restartCount", "FieldValueInvalid",
                        "Invalid value: -1: must be greater than or equal to 0"),
        )  # fmt: skip
        return
    got = same_as_real(server, real_server, request, scenario)
    assert got["code"] == 200 and got["status"]["containerStatuses"][0]["restartCount"] == -1


def test_yaml_answers(server: Server, real_server: Server, request: pytest.FixtureRequest) -> None:
    """``Accept: application/yaml``: objects, lists and errors in YAML, byte for byte as Go writes them."""

    def scenario(ctx: Ctx) -> Any:
        missing = ctx.raw.request("GET", PODS_PATH + "/no-such-pod-in-yaml", accept="application/yaml")
        listing = ctx.raw.request("GET", PODS_PATH, query="limit=1", accept="application/yaml")
        watch = ctx.raw.request("GET", PODS_PATH, query="watch=1&timeoutSeconds=1", accept="application/yaml")
        return {
            "missing": [missing.code, missing.raw.decode()],
            "list": [listing.code, list(yaml.safe_load(listing.raw))],
            "watch": [watch.code, yaml.safe_load(watch.raw)["reason"]],
        }

    got = same_as_real(server, real_server, request, scenario)
    assert got["missing"][0] == 404 and got["missing"][1].startswith("apiVersion: v1\ncode: 404\n")


def test_self_subject_access_review(
    server: Server, real_server: Server, request: pytest.FixtureRequest
) -> None:
    """What kubectl auth can-i sends; the user (admin in system:masters, or this server's
    anonymous user) may do everything on both."""

    def scenario(ctx: Ctx) -> Any:
        path = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
        spec = {"resourceAttributes": {"verb": "patch", "resource": "pods", "subresource": "status",
                                       "namespace": NS}}  # fmt: skip
        made = ctx.raw.request("POST", path, {"kind": "SelfSubjectAccessReview",
                                              "apiVersion": "authorization.k8s.io/v1", "spec": spec})  # fmt: skip
        bad = ctx.raw.request("POST", path, {"kind": "SelfSubjectAccessReview",
                                             "apiVersion": "authorization.k8s.io/v1", "spec": {}})  # fmt: skip
        return {
            "made": [made.code, made.body["kind"], made.body["spec"], made.body["status"]],
            "bad": ctx.error(bad),
        }

    got = same_as_real(server, real_server, request, scenario)
    assert got["made"][0] == 201 and got["made"][3] == {"allowed": True}
