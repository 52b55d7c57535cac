"""The QoS class of a pod (podstatus.qos), by the kubelet's rule.

The API server sets ``status.qosClass`` at creation and refuses any change, so a
node agent that computes another class than the server's has every status write
refused (422 "field is immutable"). These tests pin the rule.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from podstatus.qos import (
    BEST_EFFORT,
    BURSTABLE,
    GUARANTEED,
    compute_pod_qos,
    parse_quantity,
    pod_qos_class,
)


def container(name: str = "c", requests: Any = None, limits: Any = None) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    if requests is not None:
        resources["requests"] = requests
    if limits is not None:
        resources["limits"] = limits
    return {"name": name, "image": "nginx", "resources": resources}


FULL = {"cpu": "500m", "memory": "128Mi"}


# --- quantities -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("100m", Decimal("0.1")),
        ("0.1", Decimal("0.1")),
        ("1", Decimal(1)),
        ("1k", Decimal(1000)),
        ("1Ki", Decimal(1024)),
        ("1Mi", Decimal(2**20)),
        ("1Gi", Decimal(2**30)),
        ("1e3", Decimal(1000)),
        ("1E3", Decimal(1000)),
        ("1.5Gi", Decimal(3 * 2**29)),
        ("250n", Decimal("0.00000025")),
        (".5", Decimal("0.5")),
        ("+2", Decimal(2)),
        (" 3 ", Decimal(3)),
        (2, Decimal(2)),
        (0.25, Decimal("0.25")),
    ],
)
def test_parse_quantity(text: Any, expected: Decimal) -> None:
    assert parse_quantity(text) == expected


def test_equal_quantities_in_different_notations() -> None:
    assert parse_quantity("100m") == parse_quantity("0.1")
    assert parse_quantity("1Gi") == parse_quantity("1024Mi")
    assert parse_quantity("1G") != parse_quantity("1Gi")
    assert parse_quantity("1000m") == parse_quantity("1")


@pytest.mark.parametrize(
    "bad", ["", "abc", "1.2.3", "1 Gi", "1GI", "1mi", "Gi", "1e", "--1", None, True, [1], {}]
)
def test_bad_quantities_are_refused(bad: Any) -> None:
    with pytest.raises(ValueError):
        parse_quantity(bad)


# --- classes ----------------------------------------------------------------------------


def test_no_resources_is_best_effort() -> None:
    # `kubectl run nginx --image=nginx`: no resources at all.
    assert compute_pod_qos({"containers": [{"name": "nginx", "image": "nginx"}]}) == BEST_EFFORT
    assert compute_pod_qos({"containers": [container()]}) == BEST_EFFORT
    assert compute_pod_qos({}) == BEST_EFFORT


def test_zero_quantities_count_as_unset() -> None:
    zero = {"cpu": "0", "memory": "0Mi"}
    assert compute_pod_qos({"containers": [container(requests=zero, limits=zero)]}) == BEST_EFFORT
    # A zero limit does not make the limits complete: requests then count alone.
    spec = {"containers": [container(requests=FULL, limits={"cpu": "500m", "memory": "0"})]}
    assert compute_pod_qos(spec) == BURSTABLE


def test_requests_equal_limits_for_cpu_and_memory_is_guaranteed() -> None:
    assert compute_pod_qos({"containers": [container(requests=FULL, limits=FULL)]}) == GUARANTEED
    # The same amounts in other notations are equal.
    same = {"cpu": "0.5", "memory": "131072Ki"}
    assert compute_pod_qos({"containers": [container(requests=same, limits=FULL)]}) == GUARANTEED
    # Other resources do not decide the class.
    with_storage = {**FULL, "ephemeral-storage": "1Gi"}
    assert compute_pod_qos({"containers": [container(requests=FULL, limits=with_storage)]}) == GUARANTEED


def test_limits_only_is_guaranteed_once_the_server_defaulted_requests() -> None:
    # The API server copies limits into missing requests before the class is computed.
    assert compute_pod_qos({"containers": [container(requests=FULL, limits=FULL)]}) == GUARANTEED
    # Without that defaulting, limits alone leave the requests empty: not Guaranteed.
    assert compute_pod_qos({"containers": [container(limits=FULL)]}) != GUARANTEED


@pytest.mark.parametrize(
    ("requests", "limits"),
    [
        ({"cpu": "100m"}, None),  # requests only
        (FULL, {"cpu": "1", "memory": "128Mi"}),  # cpu request below the limit
        ({"cpu": "500m"}, {"cpu": "500m"}),  # no memory limit
        (None, {"cpu": "500m"}),  # a limit on one resource only
        ({"memory": "1Gi"}, {"cpu": "1", "memory": "1Gi"}),  # limits on more than requested
    ],
)
def test_anything_else_with_resources_is_burstable(requests: Any, limits: Any) -> None:
    assert compute_pod_qos({"containers": [container(requests=requests, limits=limits)]}) == BURSTABLE


def test_every_container_must_be_guaranteed() -> None:
    spec = {"containers": [container("a", FULL, FULL), container("b")]}
    assert compute_pod_qos(spec) == BURSTABLE
    spec = {"containers": [container("a", FULL, FULL), container("b", FULL, FULL)]}
    assert compute_pod_qos(spec) == GUARANTEED


def test_init_containers_count_too() -> None:
    guaranteed = [container("app", FULL, FULL)]
    # An init container without resources makes a Guaranteed pod Burstable.
    spec = {"containers": guaranteed, "initContainers": [container("init")]}
    assert compute_pod_qos(spec) == BURSTABLE
    spec = {"containers": guaranteed, "initContainers": [container("init", FULL, FULL)]}
    assert compute_pod_qos(spec) == GUARANTEED
    # Resources on an init container alone make a best-effort pod Burstable.
    spec = {"containers": [container("app")], "initContainers": [container("init", {"cpu": "1"})]}
    assert compute_pod_qos(spec) == BURSTABLE
    # A sidecar (restartable init container) is an init container here.
    sidecar = {**container("side"), "restartPolicy": "Always"}
    assert compute_pod_qos({"containers": guaranteed, "initContainers": [sidecar]}) == BURSTABLE


def test_pod_level_resources_decide_alone() -> None:
    no_container_resources = [container("a"), container("b")]
    spec = {"resources": {"requests": FULL, "limits": FULL}, "containers": no_container_resources}
    assert compute_pod_qos(spec) == GUARANTEED
    spec = {"resources": {"requests": {"cpu": "1"}}, "containers": no_container_resources}
    assert compute_pod_qos(spec) == BURSTABLE
    spec = {"resources": {"limits": {"cpu": "1"}}, "containers": [container("a", FULL, FULL)]}
    assert compute_pod_qos(spec) == BURSTABLE
    # Empty pod-level resources are as if unset: containers decide.
    spec = {"resources": {}, "containers": [container("a", FULL, FULL)]}
    assert compute_pod_qos(spec) == GUARANTEED


def test_bad_quantities_and_shapes_do_not_crash() -> None:
    # The server refuses such pods; the computation only must not raise.
    spec = {"containers": [container(requests={"cpu": "lots"}, limits={"cpu": "many"})]}
    assert compute_pod_qos(spec) == BEST_EFFORT
    assert compute_pod_qos({"containers": [{"name": "c", "resources": "x"}]}) == BEST_EFFORT
    assert compute_pod_qos({"containers": ["not a container"]}) == BEST_EFFORT


def test_the_class_the_pod_has_wins() -> None:
    spec = {"containers": [container(requests=FULL, limits=FULL)]}
    # The server's class is immutable: report it even if the spec would say otherwise.
    assert pod_qos_class({"spec": spec, "status": {"qosClass": BURSTABLE}}) == BURSTABLE
    assert pod_qos_class({"spec": spec, "status": {}}) == GUARANTEED
    assert pod_qos_class({"spec": spec, "status": {"qosClass": ""}}) == GUARANTEED
    assert pod_qos_class({"spec": spec}) == GUARANTEED
    assert pod_qos_class({}) == BEST_EFFORT
