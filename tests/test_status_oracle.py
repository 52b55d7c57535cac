"""Differential test: podstatus's Manager against the status manager of k8s.io/kubernetes v1.37.2.

Random operation sequences (statusoracle_harness.py) run through both; the requests each sends
(verb, and the patch, parsed) and the cached statuses must be the same after every operation. The
upstream side is tests/statusoracle (built once per source hash, statusoracle_build.py; ~5 min cold,
seconds warm). The allowed differences (docs/design.md, "The status oracle") are kept out of the
sequences by the generator; anything else fails with the shrunk sequence.

`make test` runs a few hundred sequences; `make test-apiserver` thousands (the `apiserver` mark).
The differences the oracle found before issue 21's manager landed are minimal sequences in
tests/statusoracle/differences/ (docs/status-oracle.md), each run here so none comes back. A new
difference that podstatus cannot fix at once: add its minimal sequence there with an xfail
(strict) naming it in ``KNOWN``, and a ``Features`` flag the random runs leave off until it is fixed.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from clientgo_build import go_binary
from statusoracle_build import SOURCE, build
from statusoracle_harness import ALL_FEATURES, Features, GoOracle, first_difference, operations, sequence

pytestmark = [
    pytest.mark.timeout(3600),
    pytest.mark.skipif(
        go_binary() is None, reason="needs Go (/usr/local/go/bin/go) to build tests/statusoracle"
    ),
]

# What the generator may do: everything (statusoracle_harness.Features names the kinds of
# difference found on the way; a new one found is turned off here and listed in KNOWN until fixed).
MATCHED = ALL_FEATURES

DIFFERENCES = SOURCE / "differences"
# Minimal sequences of the differences found on main before issue 21's manager (docs/status-oracle.md),
# with what differed then.
FOUND: dict[str, str] = {
    "observed-generation": "status.observedGeneration was not set from metadata.generation",
    "resize-conditions": "the resize-condition methods (Set/Clear/Is/Backfill) were missing",
    "disruption-target-place": "a merged DisruptionTarget was appended instead of keeping its place",
    "subsecond-times-copied": "times taken from the old status were not normalised after copying",
    "condition-count": "'equal as the kubelet sees it' ignored a differing number of conditions",
    "condition-count-setter": "a status with fewer kubelet-owned conditions was ignored as equal",
    "claims-resync-get": "resourceClaimStatuses on the server made every full resync GET",
    "ephemeral-sorted": "ephemeral container statuses were not sorted by name",
    "mirror-recreated-pass": "a pass without all skipped newer statuses not changed since the last pass",
    "static-removed-mirror-kept": (
        "BasicPodManager dropped a mirror pod's UID translation when its static pod was removed "
        "(upstream keeps it until the mirror pod goes), so a pass sent a GET and dropped the status"
    ),
}
# Differences known and not fixed yet: name -> reason (each an xfail, strict, until fixed).
KNOWN: dict[str, str] = {}

# Differences SPEC requires (docs/status-oracle.md): the generator keeps them out, and each minimal
# sequence here must still show exactly that difference (so neither side drifts unnoticed).
ALLOWED = SOURCE / "allowed"


@pytest.fixture(scope="module")
def oracle() -> Iterator[GoOracle]:
    binary, _seconds = build()
    # The managers log every refused or ignored change; thousands of sequences make a lot of them.
    previous = logging.root.manager.disable
    logging.disable(logging.CRITICAL)
    go = GoOracle(binary)
    try:
        yield go
    finally:
        go.close()
        logging.disable(previous)


def _check(oracle: GoOracle, features: Features, abstract: list[tuple[Any, ...]]) -> None:
    ops = operations(features, abstract)
    diff = first_difference(oracle, ops)
    if diff is not None:
        lines = "\n".join(json.dumps(op) for op in ops[: diff.step + 1])
        pytest.fail(f"podstatus differs from upstream v1.37.2 after these operations:\n{lines}\n{diff}")


_SETTINGS = settings(deadline=None, database=None, suppress_health_check=list(HealthCheck))


@settings(_SETTINGS, max_examples=300)
@given(abstract=sequence(MATCHED))
def test_random_sequences_match_upstream(oracle: GoOracle, abstract: list[tuple[Any, ...]]) -> None:
    _check(oracle, MATCHED, abstract)


@pytest.mark.apiserver
@settings(_SETTINGS, max_examples=4000)
@given(abstract=sequence(MATCHED))
def test_random_sequences_match_upstream_thousands(oracle: GoOracle, abstract: list[tuple[Any, ...]]) -> None:
    _check(oracle, MATCHED, abstract)


def _case(name: str) -> Any:
    if name in KNOWN:
        return pytest.param(name, marks=pytest.mark.xfail(strict=True, reason=KNOWN[name]), id=name)
    return pytest.param(name, id=name)


@pytest.mark.parametrize("name", [_case(name) for name in {**FOUND, **KNOWN}])
def test_difference_found_stays_fixed(oracle: GoOracle, name: str) -> None:
    ops = [
        json.loads(line) for line in (DIFFERENCES / f"{name}.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    diff = first_difference(oracle, ops)
    assert diff is None, f"{FOUND.get(name) or KNOWN[name]}:\n{diff}"


def test_allowed_difference_plain_pod_stale_mirror(oracle: GoOracle) -> None:
    """SPEC 4.2.1: the old status of a pod that is not static is its own, even while the pod manager
    still holds a mirror pod of its name (a static pod removed, its newer mirror pod never learnt).
    Upstream takes that mirror pod's status (GetMirrorPodByPod for every pod), so its
    ``terminate_pod`` keeps the mirror's PodScheduled time, podstatus the pod's own."""
    ops = [
        json.loads(line)
        for line in (ALLOWED / "plain-pod-stale-mirror.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    pod = ops[-2]["pod"]
    assert pod["metadata"]["uid"] == "uid-p0-2" and "annotations" not in pod["metadata"]
    diff = first_difference(oracle, ops)
    assert diff is not None, "podstatus now follows upstream here: drop the allowed difference"
    assert (diff.step, diff.what) == (len(ops) - 1, "cached statuses of uid-p0-2")

    def scheduled(status: dict[str, Any]) -> str:
        (condition,) = [c for c in status["conditions"] if c["type"] == "PodScheduled"]
        return str(condition["lastTransitionTime"])

    assert scheduled(diff.go) == "2020-01-01T00:00:00Z"  # the stale mirror pod's
    assert scheduled(diff.py) == "2020-01-01T00:00:05Z"  # the pod's own, cut to whole seconds
    assert {k: v for k, v in diff.go.items() if k != "conditions"} == {
        k: v for k, v in diff.py.items() if k != "conditions"
    }


def test_every_difference_file_is_listed() -> None:
    assert {p.stem for p in DIFFERENCES.glob("*.jsonl")} == set(FOUND) | set(KNOWN)


def test_oracle_reports_what_upstream_sends(oracle: GoOracle) -> None:
    """The oracle itself: a status set and synced is one GET and one PATCH carrying it, and the
    cached status normalised as upstream does (containers sorted, times as given or "now")."""
    abstract: list[tuple[Any, ...]] = [("add", 0, "plain", False)]
    ops = operations(Features(), abstract)  # a plain pod: no sub-second times, no generation
    oracle.reset()
    for op in ops:
        oracle.step(op)
    status = {
        "phase": "Running",
        "startTime": "2020-01-01T00:00:05Z",
        "containerStatuses": [
            {
                "name": n,
                "ready": True,
                "restartCount": 0,
                "image": "i",
                "imageID": "",
                "state": {"running": {}},
            }
            for n in ("b", "a")
        ],
        "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2020-01-01T00:00:00Z"}],
    }
    answer = oracle.step({"op": "set_pod_status", "uid": "uid-p0-1", "status": status})
    cached = answer["statuses"]["uid-p0-1"]
    assert [c["name"] for c in cached["containerStatuses"]] == ["a", "b"]
    assert cached["startTime"] == "2020-01-01T00:00:05Z"
    synced = oracle.step({"op": "sync", "all": False})
    assert synced["ret"] == 1
    assert [r["verb"] for r in synced["requests"]] == ["get", "patch"]
    patch = json.loads(json.dumps(synced["requests"][1]["patch"]))
    assert patch["metadata"] == {"uid": "uid-p0-1"}
    assert patch["status"]["phase"] == "Running"
    # The pod manager still holds the pod as created: the full resync reconciles (a GET), and the
    # server already has the status, so no PATCH.
    again = oracle.step({"op": "sync", "all": True})
    assert again["ret"] == 1
    assert again["requests"] == [{"verb": "get", "namespace": "oracle", "name": "p0"}]


def test_oracle_rejects_bad_input(oracle: GoOracle) -> None:
    oracle.reset()
    answer = oracle.step({"op": "no-such-op"})
    assert "unknown op" in answer["error"]
    answer = oracle.step({"op": "set_pod_status", "uid": "nobody", "status": {}})
    assert "unknown pod UID" in answer["error"]


def test_difference_files_are_operations() -> None:
    for path in sorted([*Path(DIFFERENCES).glob("*.jsonl"), *Path(ALLOWED).glob("*.jsonl")]):
        for line in path.read_text(encoding="utf-8").splitlines():
            assert "op" in json.loads(line), path.name
