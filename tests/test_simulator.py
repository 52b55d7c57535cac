"""The simulator's own checks: each invariant catches what it is meant to, and a broken one fails the run."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from podstatus import cli
from podstatus.simulator import Invariant, InvariantChecker, SimulationResult
from podstatus.types import Pod
from podstatus.workloads import MIX, builtin_mix, load_pod_files


def _pod(
    uid: str, phase: str, *, policy: str = "Never", state: dict[str, Any] | None = None, rv: str = "1"
) -> Pod:
    return Pod.from_dict(
        {
            "metadata": {"name": "p", "namespace": "ns", "uid": uid, "resourceVersion": rv},
            "spec": {"restartPolicy": policy, "containers": [{"name": "c", "image": "i"}]},
            "status": {
                "phase": phase,
                "containerStatuses": [
                    {
                        "name": "c",
                        "image": "i",
                        "imageID": "",
                        "ready": False,
                        "restartCount": 0,
                        "state": state or {},
                    }
                ],
            },
        }
    )


RUNNING = {"running": {"startedAt": "2026-01-01T00:00:00Z"}}
DONE = {"terminated": {"exitCode": 0, "startedAt": None, "finishedAt": None}}


def test_terminal_phase_undone_is_caught() -> None:
    checker = InvariantChecker()
    checker.observe_event("MODIFIED", _pod("u", "Succeeded", state=DONE, rv="1"))
    checker.observe_event("MODIFIED", _pod("u", "Running", state=DONE, rv="2"))
    assert checker.terminal_undone.violations == 1
    assert not checker.ok()


def test_an_older_copy_is_not_taken_for_a_regression() -> None:
    checker = InvariantChecker()
    checker.observe_event("MODIFIED", _pod("u", "Succeeded", state=DONE, rv="5"))
    checker.observe_event("MODIFIED", _pod("u", "Running", state=RUNNING, rv="4"))
    assert checker.ok()


@pytest.mark.parametrize(("policy", "violations"), [("Never", 1), ("OnFailure", 1), ("Always", 0)])
def test_illegal_container_transition_is_caught(policy: str, violations: int) -> None:
    checker = InvariantChecker()
    checker.observe_event("MODIFIED", _pod("u", "Running", policy=policy, state=DONE, rv="1"))
    checker.observe_event("MODIFIED", _pod("u", "Running", policy=policy, state=RUNNING, rv="2"))
    assert checker.illegal_transition.violations == violations


def test_write_to_another_uid_is_caught() -> None:
    checker = InvariantChecker()
    patch = msgspec.json.encode({"metadata": {"uid": "old"}, "status": {"phase": "Running"}})
    checker.observe_write("ns", "p", patch, _pod("new", "Running"))
    assert checker.wrong_uid.violations == 1
    checker.observe_write(
        "ns", "p", msgspec.json.encode({"metadata": {"uid": "new"}}), _pod("new", "Running", rv="2")
    )
    assert checker.wrong_uid.checked == 2 and checker.wrong_uid.violations == 1


def test_delete_before_terminal_is_caught() -> None:
    checker = InvariantChecker()
    checker.observe_event("MODIFIED", _pod("u", "Running", state=RUNNING))
    checker.observe_delete("ns", "p", "u")
    assert checker.early_delete.violations == 1
    checker.observe_event("MODIFIED", _pod("v", "Failed", state=DONE))
    checker.observe_delete("ns", "p", "v")
    assert checker.early_delete.checked == 2 and checker.early_delete.violations == 1


def test_a_broken_invariant_makes_simulate_exit_non_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    broken = Invariant(
        "no terminal phase undone on the server", checked=10, violations=1, examples=["ns/p: x"]
    )
    result = SimulationResult(
        pods_created=1,
        phases={"Running": 1},
        deleted=0,
        requests={"get": 1, "patch": 1},
        status_changes=1,
        latencies=[0.001],
        invariants=[broken],
        elapsed=1.0,
        settled=True,
        watch_errors=0,
    )

    class FakeSimulation:
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            self.on_progress = None

        def run(self) -> SimulationResult:
            return result

    monkeypatch.setattr("podstatus.simulator.Simulation", FakeSimulation)
    assert cli.main(["simulate", "--pods", "1", "--in-process", "--no-progress"]) == 1
    result.invariants[0] = Invariant("no terminal phase undone on the server", checked=10)
    assert cli.main(["simulate", "--pods", "1", "--in-process", "--no-progress"]) == 0


def test_builtin_mix_has_every_kind_in_its_share() -> None:
    pods = builtin_mix(200)
    assert len(pods) == 200
    kinds = [p["metadata"]["labels"]["podstatus.io/workload"] for p in pods]
    for kind, share in MIX:
        assert kinds.count(kind) == round(200 * share)
    names = [p["metadata"]["name"] for p in pods]
    assert len(set(names)) == 200


def test_pod_files_are_loaded_and_checked(tmp_path: Any) -> None:
    good = tmp_path / "pods.yaml"
    good.write_text(
        "apiVersion: v1\nkind: List\nitems:\n"
        "- metadata: {name: a}\n  spec: {containers: [{name: c, image: i}]}\n"
        "---\nkind: Pod\nmetadata: {name: b}\nspec: {restartPolicy: Never, containers: [{name: c, image: i}]}\n"
    )
    pods = load_pod_files([good], namespace="team")
    assert [p["metadata"]["name"] for p in pods] == ["a", "b"]
    assert all(p["metadata"]["namespace"] == "team" for p in pods)
    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: Pod\nmetadata: {}\nspec: {containers: [{name: c}]}\n")
    with pytest.raises(ValueError, match=r"metadata\.name"):
        load_pod_files([bad])
