"""The simulator's own checks: each invariant catches what it is meant to, and a broken one fails the run."""

from __future__ import annotations

import re
from typing import Any

import msgspec
import pytest
from rich.console import Console

from podstatus import cli
from podstatus.clients.embedded import EmbeddedClient
from podstatus.clients.fake import FakeNodeClient
from podstatus.errors import ConnectionFailedError, InternalServerError, ServiceUnavailableError
from podstatus.node.simpod import Timings
from podstatus.server import EmbeddedApiServer
from podstatus.simulator.invariants import Invariant, InvariantChecker
from podstatus.simulator.report import render_summary
from podstatus.simulator.result import NodeHeartbeat, SimulationResult
from podstatus.simulator.run import DEFAULT_NODE, RUN_LABEL, Simulation
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

    monkeypatch.setattr("podstatus.simulator.run.Simulation", FakeSimulation)
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


# --- the world the run made: lost pods, failed creates, the summary -----------------------


def _result(**kwargs: Any) -> SimulationResult:
    base: dict[str, Any] = {
        "pods_created": 3,
        "phases": {"Running": 3},
        "deleted": 0,
        "requests": {"get": 7, "patch": 5, "create": 3},
        "status_changes": 4,
        "latencies": [0.001],
        "invariants": [Invariant("no terminal phase undone on the server", checked=10)],
        "elapsed": 1.0,
        "settled": True,
        "watch_errors": 0,
    }
    return SimulationResult(**{**base, **kwargs})


def _text(result: SimulationResult, node: str = "edge-7") -> str:
    console = Console(record=True, width=140)
    console.print(render_summary(result, node, "fast path", 140))
    return console.export_text()


def test_the_summary_title_names_the_node() -> None:
    text = _text(_result())
    # It used to print get+patch requests (12) where the node's name belongs.
    assert "podstatus simulate: node edge-7, fast path" in text
    assert "node 12" not in text


def test_a_stale_or_missing_lease_fails_the_run_and_the_summary_lists_each_node() -> None:
    live = NodeHeartbeat("vn-1", pods=4, renewals=3, lease_age=0.4)
    unknown = NodeHeartbeat("vn-2", pods=4, renewals=1, lease_age=None, state="unknown")  # no Lease API
    assert _result(heartbeats=[live, unknown]).ok
    stale = NodeHeartbeat("vn-3", pods=4, renewals=1, lease_age=55.0, state="stale")
    missing = NodeHeartbeat("vn-4", pods=4, renewals=0, lease_age=None, state="missing")
    result = _result(heartbeats=[live, unknown, stale, missing])
    assert result.invariants_ok and not result.ok
    assert result.failures() == [
        "node vn-3: Lease stale (renewed 55 s ago, duration 40 s)",
        "node vn-4: no Lease on the server",
    ]
    console = Console(record=True, width=140)
    console.print(render_summary(result, ["vn-1", "vn-2", "vn-3", "vn-4"], "fast path", 140))
    text = console.export_text()
    assert "podstatus simulate: 4 nodes vn-1 .. vn-4 (one pod watch), fast path" in text
    assert "Node heartbeats (4 nodes, 2 stale)" in text
    assert re.search(r"│ vn-3\s*│\s*4\s*│\s*1\s*│\s*55.0 s\s*│ stale", text)
    assert re.search(r"│ vn-1\s*│\s*4\s*│\s*3\s*│\s*0.4 s\s*│ live", text)


def test_lost_and_never_created_pods_fail_the_run(monkeypatch: pytest.MonkeyPatch) -> None:
    clean = _result()
    assert clean.ok and clean.failures() == []
    lost = _result(lost=["default/web-00001", "default/web-00002"])
    missing = _result(not_created=["default/job-00001: boom (after 10 attempts)"])
    unknown = _result(final_state_known=False)
    for bad in (lost, missing, unknown):
        assert bad.invariants_ok and not bad.ok
    assert lost.failures() == ["2 pods lost (gone from the server without being deleted)"]
    assert missing.failures() == ["1 pods never created"]
    text = _text(lost)
    assert re.search(r"lost \(gone, not deleted\)\s*│\s*2", text) and "default/web-00001" in text

    current: list[SimulationResult] = [lost]

    class FakeSimulation:
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            self.on_progress = None

        def run(self) -> SimulationResult:
            return current[0]

    monkeypatch.setattr("podstatus.simulator.run.Simulation", FakeSimulation)
    args = ["simulate", "--pods", "1", "--in-process", "--no-progress"]
    for bad in (lost, missing, unknown):
        current[0] = bad
        assert cli.main(args) == 1
    current[0] = _result(create_retries=4, node_registrations=2)
    assert cli.main(args) == 0


class _AnswerLost:
    """Wraps a client: chosen creates are applied, but their answer never arrives."""

    def __init__(self, inner: FakeNodeClient, names: set[str]) -> None:
        self._inner = inner
        self._names = names

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def create_pod(self, pod: Any, namespace: str | None = None) -> Pod:
        created: Pod = self._inner.create_pod(pod, namespace)
        if created.name in self._names:
            self._names.discard(created.name)
            raise ConnectionFailedError("connection reset by peer")
        return created


def _sim(client: Any, manifests: list[dict[str, Any]], **kwargs: Any) -> Simulation:
    return Simulation(
        client,
        manifests,
        duration=8.0,
        delete_fraction=0.0,
        recreate=0,
        timings=FAST,
        manager_options={"fast_path": True},
        create_backoff=0.01,
        **kwargs,
    )


FAST = Timings(
    image_pull=(0.05, 0.1), init_run=(0.05, 0.1), startup=(0.05, 0.1), readiness=(0.05, 0.1),
    job_run=(0.1, 0.2), crash_run=(0.1, 0.2), crash_backoff=0.1, crash_backoff_max=0.2,
    stop=(0.05, 0.1), gate=(0.05, 0.1),
)  # fmt: skip


def test_transient_create_failures_are_retried_and_a_landed_create_is_adopted() -> None:
    manifests = [m for m in builtin_mix(6, seed=3) if not m["spec"].get("readinessGates")][:3]
    names = [m["metadata"]["name"] for m in manifests]
    fake = FakeNodeClient()
    failing = {"count": 0}

    def flaky(verb: str, namespace: str | None, name: str) -> None:
        # The first pod's create fails three times (server busy), then goes through.
        if verb == "create" and name == names[0] and failing["count"] < 3:
            failing["count"] += 1
            raise ServiceUnavailableError("the server is currently unable to handle the request")

    fake.before_request(flaky)
    sim = _sim(_AnswerLost(fake, {names[1]}), manifests)
    result = sim.run()
    assert result.not_created == [] and result.lost == [], result.failures()
    assert result.pods_created == 3 and result.ok
    assert result.create_retries == 3 + 1 and result.creates_adopted == 1
    pods, _ = fake.list_pods()
    assert sorted(p.name for p in pods) == sorted(names)  # each once: the adopted one was not made twice


def test_a_create_the_server_refuses_is_not_retried_and_fails_the_run() -> None:
    manifests = builtin_mix(2, seed=3)
    bad = msgspec.json.decode(msgspec.json.encode(manifests[0]))
    bad["spec"]["containers"][0]["image"] = ""  # refused: 422, retrying cannot help
    fake = FakeNodeClient()
    result = _sim(fake, [bad, manifests[1]], create_attempts=5).run()
    assert result.create_retries == 0
    assert len(result.not_created) == 1 and bad["metadata"]["name"] in result.not_created[0]
    assert "after 1 attempts" in result.not_created[0]
    assert not result.ok


def test_retries_are_bounded() -> None:
    manifests = builtin_mix(1, seed=3)
    fake = FakeNodeClient()
    fake.before_request(
        lambda verb, ns, name: (
            (_ for _ in ()).throw(InternalServerError("etcd down"))
            if verb == "create" and name == manifests[0]["metadata"]["name"]
            else None
        )
    )
    result = _sim(fake, manifests, create_attempts=4).run()
    assert result.create_retries == 3
    assert result.not_created and "after 4 attempts" in result.not_created[0]
    assert not result.ok


def test_simulate_events_flag_reaches_the_node_agent(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, Any] = {}
    real = Simulation

    class Spy(Simulation):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            seen["events"] = self.agent.agent.recorder.events

        def run(self) -> SimulationResult:
            raise KeyboardInterrupt  # built: that is all this test needs

    monkeypatch.setattr("podstatus.simulator.run.Simulation", Spy)
    assert (
        cli.main(["simulate", "--pods", "1", "--in-process", "--no-progress", "--events", "warning"]) == 130
    )
    assert seen["events"] == "warning"
    assert real(FakeNodeClient(), []).agent.agent.recorder.events == "all"  # the kubelet's by default


# --- issue 22: the run plays only with its own pods, counts each name once --------------------


class _DeleteLog:
    """The server's client, with every delete the simulation sends written down (then sent)."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.deletes: list[str] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def delete_pod(
        self, namespace: str, name: str, *, grace_period_seconds: int | None, uid: str | None
    ) -> None:
        self.deletes.append(name)
        self._inner.delete_pod(namespace, name, grace_period_seconds=grace_period_seconds, uid=uid)


def _serving(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"containers": [{"name": "app", "image": "nginx"}]},  # restartPolicy Always: serves
    }


def test_simulate_deletes_and_recreates_only_its_own_pods() -> None:
    with EmbeddedApiServer() as server:
        client = _DeleteLog(EmbeddedClient(server))
        # Someone else's pod, bound to the simulated node before the run: not the run's to delete.
        theirs = client.create_pod(
            {**_serving("theirs"), "spec": {**_serving("x")["spec"], "nodeName": DEFAULT_NODE}}
        )
        user = [_serving(f"mine-{i}") for i in range(3)]  # simulate -f: the user's pods, run as written
        sim = Simulation(
            client,
            builtin_mix(10, seed=2),
            user_manifests=user,
            duration=25.0,
            delete_fraction=1.0,  # every pod of its own that serves or crash-loops
            recreate=1,
            timings=FAST,
            manager_options={"fast_path": True},
        )
        result = sim.run()
        assert result.ok, result.failures()
        assert result.recreated == 1 and result.deleted >= 3  # it did play with its own pods
        assert not {"theirs", "mine-0", "mine-1", "mine-2"} & set(client.deletes), client.deletes
        still = client.get_pod("default", "theirs")
        assert still.uid == theirs.uid and still.metadata.deletion_timestamp is None
        for i in range(3):
            mine = client.get_pod("default", f"mine-{i}")
            assert mine.metadata.deletion_timestamp is None and mine.status.phase == "Running"
            assert mine.metadata.labels[RUN_LABEL] == sim.run_id  # what tells the run's pods apart
        assert RUN_LABEL not in (still.metadata.labels or {})


def test_a_recreated_pod_is_counted_once_in_the_phase_table() -> None:
    with EmbeddedApiServer() as server:
        sim = Simulation(
            EmbeddedClient(server),
            builtin_mix(10, seed=4),
            duration=25.0,
            delete_fraction=0.3,
            recreate=1,
            timings=FAST,
            manager_options={"fast_path": True},
        )
        result = sim.run()
    assert result.ok, result.failures()
    assert result.recreated == 1
    # Every name the run created is either on the server (in a phase) or deleted: once.
    assert sum(result.phases.values()) + result.deleted == result.pods_created == 10, (
        result.phases,
        result.deleted,
    )
