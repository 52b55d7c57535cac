"""Bad input for the node agent's resources: Leases, Events (both groups) and Nodes.

The promise: any JSON body gets a 2xx or a 4xx ``Status``, never a 5xx; and
whatever was accepted can still be read, listed, printed as a Table and
converted to the other Event group afterwards.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from podstatus.server.endpoints import ApiHandler, Request
from podstatus.server.storage.store import Store

PATHS = {
    "events": "/api/v1/namespaces/default/events",
    "events.k8s.io": "/apis/events.k8s.io/v1/namespaces/default/events",
    "leases": "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases",
    "nodes": "/api/v1/nodes",
}
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"
KEYS = [
    "involvedObject", "regarding", "reason", "message", "note", "source", "deprecatedSource", "count",
    "deprecatedCount", "firstTimestamp", "lastTimestamp", "eventTime", "series", "related", "type", "action",
    "reportingComponent", "reportingController", "reportingInstance", "spec", "status",
]  # fmt: skip
INNER = [
    "holderIdentity", "leaseDurationSeconds", "renewTime", "acquireTime", "leaseTransitions", "taints",
    "unschedulable", "providerID", "conditions", "nodeInfo", "capacity", "kind", "name", "namespace", "count",
    "lastObservedTime", "key", "effect",
]  # fmt: skip

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**40), max_value=2**40),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from(["", "x", "Normal", "NoSchedule", "2026-01-02T03:04:05.123456Z", "2026-01-02T03:04:05Z"]),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(INNER), inner, max_size=4)
    ),
    max_leaves=8,
)
bodies = st.dictionaries(st.sampled_from(KEYS), values, max_size=6)

_api = ApiHandler(Store())
_count = iter(range(10**9))


def _call(method: str, path: str, body: Any = None, **headers: str) -> tuple[int, Any]:
    raw = json.dumps(body).encode() if body is not None else b""
    resp = _api.handle(Request(method, path, {}, {"content-type": "application/json", **headers}, raw))
    return resp.status, (json.loads(resp.body) if resp.body else None)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kind=st.sampled_from(sorted(PATHS)), body=bodies, patch=bodies)
def test_no_body_breaks_the_server(kind: str, body: dict[str, Any], patch: dict[str, Any]) -> None:
    path = PATHS[kind]
    name = f"fuzz-{next(_count)}"
    code, created = _call("POST", path, {"metadata": {"name": name}, **body})
    assert code < 500, created
    if code != 201:
        assert created["kind"] == "Status"
        return
    code, answer = _call("PATCH", f"{path}/{name}", patch, **{"content-type": "application/merge-patch+json"})
    assert code < 500, answer
    # Everything stored can still be read in every form.
    for other in PATHS.values():
        code, answer = _call("GET", other, accept=TABLE)
        assert code == 200, answer
        code, answer = _call("GET", other)
        assert code == 200, answer
