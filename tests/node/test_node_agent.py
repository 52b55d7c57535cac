"""NodeAgent against the embedded API server (in process): one test per rule of the agent."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec
import pytest
from nodekit import events_for, make_agent, pod_manifest, start, wait_for

from podstatus.clients.embedded import LEASES, EmbeddedClient
from podstatus.clients.fake import FakeNodeClient
from podstatus.errors import ConnectionFailedError, GoneError, NotFoundError
from podstatus.node import FakeProvider, LeaseHeldError, NodeAgent, NodeDescription, NodeGroup
from podstatus.node.heartbeat import AGENT_ANNOTATION, LEASE_NAMESPACE
from podstatus.server.http import EmbeddedApiServer
from podstatus.types import (
    ContainerState,
    ContainerStateRunning,
    ContainerStateTerminated,
    ContainerStatus,
    PodStatus,
)


def running(restarts: int = 0, ready: bool = True, phase: str = "Running") -> PodStatus:
    return PodStatus(
        phase=phase,
        pod_ip="10.244.0.9",
        container_statuses=(
            ContainerStatus(
                name="app",
                image="nginx",
                ready=ready,
                restart_count=restarts,
                container_id="containerd://abc",
                started=True,
                state=ContainerState(
                    running=ContainerStateRunning(started_at=datetime(2026, 1, 1, tzinfo=UTC))
                ),
            ),
        ),
    )


def condition(pod: Any, ctype: str) -> Any:
    return next((c for c in pod.status.conditions or () if c.type == ctype), None)


def node_condition(node: dict[str, Any], ctype: str) -> dict[str, Any]:
    return next(c for c in node["status"]["conditions"] if c["type"] == ctype)


# --- Node, Lease -------------------------------------------------------------------------


def test_registers_node_with_every_required_node_info_field(
    client: EmbeddedClient, agents: list[NodeAgent]
) -> None:
    start(agents, client, FakeProvider())
    node = client.get_node("vn-1")
    info = node["status"]["nodeInfo"]
    for key in (
        "machineID",
        "systemUUID",
        "bootID",
        "kernelVersion",
        "osImage",
        "containerRuntimeVersion",
        "kubeletVersion",
        "kubeProxyVersion",
        "operatingSystem",
        "architecture",
    ):
        assert key in info
    types = {c["type"] for c in node["status"]["conditions"]}
    assert types == {"Ready", "MemoryPressure", "DiskPressure", "PIDPressure"}
    assert node_condition(node, "Ready")["status"] == "True"


def test_lease_is_held_by_the_node_and_renewed(client: EmbeddedClient, agents: list[NodeAgent]) -> None:
    start(agents, client, FakeProvider())
    first = client.get_lease(LEASE_NAMESPACE, "vn-1")
    assert first["spec"]["holderIdentity"] == "vn-1"
    assert first["spec"]["leaseDurationSeconds"] == 40
    # Created before the Node was registered (one request, no GET that would answer 404):
    # as the kubelet's, its Node's ownerReference comes with the first renewal.
    assert "ownerReferences" not in first["metadata"]
    wait_for(
        lambda: client.get_lease(LEASE_NAMESPACE, "vn-1")["spec"]["renewTime"] != first["spec"]["renewTime"],
        what="lease renewal",
    )
    owner = client.get_lease(LEASE_NAMESPACE, "vn-1")["metadata"]["ownerReferences"][0]
    assert owner["kind"] == "Node" and owner["uid"] == client.get_node("vn-1")["metadata"]["uid"]


def test_a_hanging_provider_never_delays_the_lease(client: EmbeddedClient, agents: list[NodeAgent]) -> None:
    provider = FakeProvider()
    agent = start(agents, client, provider, provider_timeout=3.0)
    provider.hang("ping")  # the node status check now waits 3 s per try
    before = agent.lease.renewals
    time.sleep(1.5)
    assert agent.lease.renewals >= before + 4  # every 0.2 s all the same
    provider.release()


def _foreign_lease(client: EmbeddedClient, renewed: datetime) -> None:
    client.create_lease(
        LEASE_NAMESPACE,
        {
            "metadata": {
                "name": "vn-1",
                "namespace": LEASE_NAMESPACE,
                "annotations": {AGENT_ANNOTATION: "other"},
            },
            "spec": {
                "holderIdentity": "vn-1",
                "leaseDurationSeconds": 40,
                "renewTime": renewed.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
            },
        },
    )


def test_refuses_to_start_while_another_agent_holds_the_lease(client: EmbeddedClient) -> None:
    _foreign_lease(client, datetime.now(UTC))
    agent = make_agent(client, FakeProvider())
    with pytest.raises(LeaseHeldError, match="held by 'other'"):
        agent.start()
    with pytest.raises(NotFoundError):
        client.get_node("vn-1")  # nothing was written


def test_starts_when_the_other_lease_has_expired(client: EmbeddedClient, agents: list[NodeAgent]) -> None:
    _foreign_lease(client, datetime.now(UTC) - timedelta(seconds=41))
    agent = start(agents, client, FakeProvider())
    wait_for(
        lambda: (
            client.get_lease(LEASE_NAMESPACE, "vn-1")["metadata"]["annotations"][AGENT_ANNOTATION]
            == agent.identity
        )
    )


def test_take_over_wins_and_the_old_agent_stops_driving_the_node(
    client: EmbeddedClient, agents: list[NodeAgent]
) -> None:
    old = start(agents, client, FakeProvider())
    with pytest.raises(LeaseHeldError):
        make_agent(client, FakeProvider()).start()
    new = start(agents, client, FakeProvider(), take_over=True)
    wait_for(lambda: old.lost, what="the old agent to notice")
    assert not new.lost
    assert (
        client.get_lease(LEASE_NAMESPACE, "vn-1")["metadata"]["annotations"][AGENT_ANNOTATION] == new.identity
    )


def test_a_clean_stop_releases_the_lease_for_an_immediate_restart(client: EmbeddedClient) -> None:
    first = make_agent(client, FakeProvider())
    first.start()
    first.stop()
    second = make_agent(client, FakeProvider())
    second.start()  # no LeaseHeldError
    second.stop()


def test_node_status_posted_on_change_and_at_the_report_frequency(
    client: EmbeddedClient, agents: list[NodeAgent]
) -> None:
    provider = FakeProvider()
    agent = start(agents, client, provider, node_status_report_frequency=1.0)
    posts = lambda: agent.node_status.posts  # noqa: E731
    before = posts()
    time.sleep(0.6)
    assert posts() == before  # checked every 0.2 s, but nothing changed and 1 s has not passed
    wait_for(lambda: posts() > before, timeout=3, what="the periodic report")
    mid = posts()
    provider.description = NodeDescription(capacity={"cpu": "8", "memory": "1Gi", "pods": "10"})
    wait_for(lambda: client.get_node("vn-1")["status"]["capacity"]["pods"] == "10", timeout=1)
    assert posts() == mid + 1


def test_ping_failure_makes_the_node_not_ready_and_recovery_ready(
    client: EmbeddedClient, agents: list[NodeAgent]
) -> None:
    provider = FakeProvider()
    start(agents, client, provider)
    ready_since = node_condition(client.get_node("vn-1"), "Ready")["lastTransitionTime"]
    provider.healthy = False
    wait_for(lambda: node_condition(client.get_node("vn-1"), "Ready")["status"] == "False")
    ready = node_condition(client.get_node("vn-1"), "Ready")
    assert ready["reason"] == "KubeletNotReady" and "back end unreachable" in ready["message"]
    provider.healthy = True
    wait_for(lambda: node_condition(client.get_node("vn-1"), "Ready")["status"] == "True")
    assert node_condition(client.get_node("vn-1"), "Ready")["lastTransitionTime"] >= ready_since


def test_after_a_heartbeat_gap_the_node_is_posted_ready_over_the_controllers_unknown(
    client: EmbeddedClient, agents: list[NodeAgent]
) -> None:
    # Node status is due only every 5 minutes: nothing but the gap can make the agent post again.
    start(agents, client, FakeProvider())
    unreachable = threading.Event()
    original = client.update_lease

    def update_lease(namespace: str, name: str, lease: Any) -> Any:
        if unreachable.is_set():
            raise ConnectionFailedError("connection refused")
        return original(namespace, name, lease)

    client.update_lease = update_lease  # type: ignore[method-assign]
    unreachable.set()
    time.sleep(0.8)  # four renewals missed
    # Meanwhile the node lifecycle controller gives up on the node.
    marked = datetime.now(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")
    client.patch_node_status(
        "vn-1",
        msgspec.json.encode(
            {
                "status": {
                    "conditions": [
                        {
                            "type": "Ready",
                            "status": "Unknown",
                            "reason": "NodeStatusUnknown",
                            "message": "Kubelet stopped posting node status.",
                            "lastTransitionTime": marked,
                        }
                    ]
                }
            }
        ),
    )
    time.sleep(0.5)
    assert node_condition(client.get_node("vn-1"), "Ready")["status"] == "Unknown"  # no post while cut off
    unreachable.clear()
    wait_for(
        lambda: node_condition(client.get_node("vn-1"), "Ready")["status"] == "True",
        timeout=5,
        what="Ready posted again after the gap",
    )
    ready = node_condition(client.get_node("vn-1"), "Ready")
    assert ready["reason"] == "KubeletReady"
    assert ready["lastTransitionTime"] >= marked  # a transition from Unknown, not the old time


def test_a_deleted_node_is_registered_again(client: EmbeddedClient, agents: list[NodeAgent]) -> None:
    start(agents, client, FakeProvider(), node_status_report_frequency=0.3)
    client.delete_node("vn-1")
    wait_for(lambda: _exists(client, "vn-1"), what="re-registration")
    assert node_condition(client.get_node("vn-1"), "Ready")["status"] == "True"


def test_a_deleted_node_and_lease_are_noticed_at_the_next_renewal(
    client: EmbeddedClient, agents: list[NodeAgent]
) -> None:
    start(agents, client, FakeProvider())  # status due only every 5 minutes
    client.delete_node("vn-1")
    client.store.delete(LEASES, LEASE_NAMESPACE, "vn-1")  # what the garbage collector does
    wait_for(lambda: _exists(client, "vn-1"), timeout=3, what="re-registration")
    uid = client.get_node("vn-1")["metadata"]["uid"]
    wait_for(
        lambda: client.get_lease(LEASE_NAMESPACE, "vn-1")["metadata"]["ownerReferences"][0]["uid"] == uid,
        timeout=3,
        what="the Lease owned by the new Node",
    )


def _exists(client: EmbeddedClient, name: str) -> bool:
    try:
        client.get_node(name)
        return True
    except NotFoundError:
        return False


def test_stop_with_cordon_marks_the_node_unschedulable(client: EmbeddedClient) -> None:
    agent = make_agent(client, FakeProvider())
    agent.start()
    agent.stop(on_stop="cordon")
    assert client.get_node("vn-1")["spec"]["unschedulable"] is True


def test_stop_with_leave_leaves_node_and_pods(client: EmbeddedClient) -> None:
    provider = FakeProvider()
    agent = make_agent(client, provider)
    agent.start()
    pod = client.create_pod(pod_manifest("web"))
    wait_for(lambda: provider.called("create_pod"))
    provider.set_status(pod.uid, running())
    wait_for(lambda: client.get_pod("default", "web").status.phase == "Running")
    agent.stop(on_stop="leave")
    assert not client.get_node("vn-1")["spec"].get("unschedulable")
    assert client.get_pod("default", "web").status.phase == "Running"
    assert provider.called("delete_pod") == []


# --- pods ---------------------------------------------------------------------------------


def test_pod_runs_and_gets_the_kubelets_conditions(client: EmbeddedClient, agents: list[NodeAgent]) -> None:
    provider = FakeProvider()
    start(agents, client, provider)
    pod = client.create_pod(pod_manifest("web"))
    wait_for(lambda: client.get_pod("default", "web").status.phase == "Pending", what="Pending first")
    provider.set_status(pod.uid, running())
    wait_for(lambda: client.get_pod("default", "web").status.phase == "Running")
    got = client.get_pod("default", "web")
    for ctype in ("PodScheduled", "PodReadyToStartContainers", "Initialized", "ContainersReady", "Ready"):
        assert condition(got, ctype).status == "True", ctype
    assert got.status.host_ip == "10.20.0.1"
    assert got.status.qos_class == "BestEffort"


def test_admission_fails_a_pod_that_does_not_fit_as_out_of_pods(
    client: EmbeddedClient, agents: list[NodeAgent]
) -> None:
    provider = FakeProvider(NodeDescription(capacity={"cpu": "4", "memory": "1Gi", "pods": "2"}))
    agent = start(agents, client, provider)
    for name in ("a", "b"):
        client.create_pod(pod_manifest(name))
    wait_for(lambda: len(provider.called("create_pod")) == 2)
    client.create_pod(pod_manifest("c"))
    wait_for(lambda: client.get_pod("default", "c").status.phase == "Failed")
    status = client.get_pod("default", "c").status
    assert status.reason == "OutOfpods"
    assert status.message == (
        "Pod was rejected: Node didn't have enough resource: pods, requested: 1, used: 2, capacity: 2"
    )
    assert "default/c" not in provider.called("create_pod")
    agent.recorder.flush()
    events = events_for(client, "c")
    assert [(e["type"], e["reason"]) for e in events] == [("Warning", "OutOfpods")]


def test_deletion_stops_the_pod_with_its_grace_period_then_deletes_it(
    client: EmbeddedClient, agents: list[NodeAgent]
) -> None:
    provider = FakeProvider()
    grace: list[int] = []
    original = provider.delete_pod

    def delete_pod(pod: Any, grace_period_seconds: int) -> None:
        grace.append(grace_period_seconds)
        original(pod, grace_period_seconds)

    provider.delete_pod = delete_pod  # type: ignore[method-assign]
    agent = start(agents, client, provider)
    pod = client.create_pod(pod_manifest("web"))
    wait_for(lambda: provider.called("create_pod"))
    provider.set_status(pod.uid, running())
    wait_for(lambda: client.get_pod("default", "web").status.phase == "Running")
    client.delete_pod("default", "web", grace_period_seconds=17, uid=pod.uid)
    wait_for(lambda: not _pod_exists(client, "web"), what="the final delete")
    assert grace == [17]
    agent.recorder.flush()
    reasons = [e["reason"] for e in events_for(client, "web")]
    assert "Killing" in reasons


def _pod_exists(client: EmbeddedClient, name: str) -> bool:
    try:
        client.get_pod("default", name)
        return True
    except NotFoundError:
        return False


def test_no_final_delete_while_the_provider_still_stops_the_pod(
    client: EmbeddedClient, agents: list[NodeAgent]
) -> None:
    provider = FakeProvider()
    start(agents, client, provider, provider_timeout=5.0)
    pod = client.create_pod(pod_manifest("web", terminationGracePeriodSeconds=5))
    wait_for(lambda: provider.called("create_pod"))
    provider.set_status(pod.uid, running())
    wait_for(lambda: client.get_pod("default", "web").status.phase == "Running")
    provider.hang("delete_pod")
    client.delete_pod("default", "web", grace_period_seconds=5, uid=pod.uid)
    wait_for(lambda: provider.called("delete_pod"))
    time.sleep(1.5)  # three resync periods
    current = client.get_pod("default", "web")
    assert current.status.phase == "Running"  # not terminal, not deleted while it may still run
    provider.release()
    wait_for(lambda: not _pod_exists(client, "web"), what="the final delete")


def test_a_stopped_pod_is_not_deleted_before_the_provider_has_finished(
    client: EmbeddedClient, agents: list[NodeAgent]
) -> None:
    provider = FakeProvider()
    start(agents, client, provider, provider_timeout=5.0)
    pod = client.create_pod(pod_manifest("web", terminationGracePeriodSeconds=5))
    wait_for(lambda: provider.called("create_pod"))
    provider.set_status(pod.uid, running())
    wait_for(lambda: client.get_pod("default", "web").status.phase == "Running")
    provider.hang("delete_pod")  # stopping: the containers end first, then volumes, a VM...
    client.delete_pod("default", "web", grace_period_seconds=5, uid=pod.uid)
    wait_for(lambda: provider.called("delete_pod"))
    done = ContainerStatus(
        name="app",
        image="nginx",
        container_id="containerd://abc",
        state=ContainerState(terminated=ContainerStateTerminated(exit_code=0, reason="Completed")),
    )
    provider.set_status(pod.uid, PodStatus(phase="Succeeded", container_statuses=(done,)))
    wait_for(lambda: client.get_pod("default", "web").status.phase == "Succeeded")
    time.sleep(1.5)  # three resync periods: terminal on the server, but not reclaimed yet
    assert _pod_exists(client, "web")
    provider.release()
    wait_for(lambda: not _pod_exists(client, "web"), what="the final delete")


def test_restores_ready_after_the_node_controller_flipped_it(
    client: EmbeddedClient, agents: list[NodeAgent]
) -> None:
    provider = FakeProvider()
    agent = start(agents, client, provider)
    pod = client.create_pod(pod_manifest("web"))
    wait_for(lambda: provider.called("create_pod"))
    provider.set_status(pod.uid, running())
    wait_for(lambda: condition(client.get_pod("default", "web"), "Ready").status == "True")
    wait_for(lambda: agent.manager.pending_count() == 0)
    time.sleep(0.6)
    sent: list[str] = []
    patch_status, get_pod = client.patch_pod_status, client.get_pod

    def counting_patch(namespace: str, name: str, patch: bytes, **kwargs: Any) -> Any:
        sent.append(f"patch {patch.decode()}")
        return patch_status(namespace, name, patch, **kwargs)

    def counting_get(namespace: str, name: str) -> Any:
        sent.append(f"get {name}")
        return get_pod(namespace, name)

    client.patch_pod_status = counting_patch  # type: ignore[method-assign]
    client.get_pod = counting_get  # type: ignore[method-assign]
    time.sleep(1.2)  # two full resyncs of an idle node: the watch's copy agrees, nothing is sent
    assert sent == []
    # What the node lifecycle controller does to the pods of a node it thinks is gone.
    stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    flip = {
        "status": {
            "conditions": [
                {"type": "Ready", "status": "False", "reason": "NodeNotReady", "lastTransitionTime": stamp}
            ]
        }
    }
    client.patch_pod_status("default", "web", msgspec.json.encode(flip))
    assert condition(client.get_pod("default", "web"), "Ready").status == "False"
    wait_for(
        lambda: condition(client.get_pod("default", "web"), "Ready").status == "True", what="Ready restored"
    )


def test_relists_after_410_gone(server: EmbeddedApiServer, agents: list[NodeAgent]) -> None:
    class GoneOnce(EmbeddedClient):
        gone = 1

        def watch_pods(self, *args: Any, **kwargs: Any) -> Any:
            if self.gone:
                self.gone -= 1
                raise GoneError("too old resource version")
            return super().watch_pods(*args, **kwargs)

    client = GoneOnce(server)
    provider = FakeProvider()
    agent = start(agents, client, provider)
    client.create_pod(pod_manifest("web"))
    wait_for(lambda: provider.called("create_pod"))
    assert agent._watcher is not None and agent._watcher.relists >= 2


def test_node_group_shares_one_watch(client: EmbeddedClient) -> None:
    providers = [FakeProvider(), FakeProvider()]
    group_agents = [make_agent(client, p, f"vn-{i + 1}", watch=False) for i, p in enumerate(providers)]
    group = NodeGroup(client, group_agents)
    group.start()
    try:
        client.create_pod(pod_manifest("a", node="vn-1"))
        client.create_pod(pod_manifest("b", node="vn-2"))
        wait_for(lambda: providers[0].called("create_pod") == ["default/a"])
        wait_for(lambda: providers[1].called("create_pod") == ["default/b"])
        assert client.counter.get("watch") == 1
    finally:
        group.stop()


# --- adoption after a restart ---------------------------------------------------------------


def test_restart_adopts_running_pods_without_pending_or_lost_restarts(client: EmbeddedClient) -> None:
    provider = FakeProvider()
    agent = make_agent(client, provider)
    agent.start()
    web = client.create_pod(pod_manifest("web"))
    job = client.create_pod(pod_manifest("job", restartPolicy="Never"))
    wait_for(lambda: len(provider.called("create_pod")) == 2)
    provider.set_status(web.uid, running(restarts=3))
    done = ContainerStatus(
        name="app",
        image="nginx",
        ready=False,
        restart_count=0,
        container_id="containerd://def",
        state=ContainerState(terminated=ContainerStateTerminated(exit_code=0, reason="Completed")),
    )
    provider.set_status(job.uid, PodStatus(phase="Succeeded", container_statuses=(done,)))
    wait_for(lambda: client.get_pod("default", "web").status.phase == "Running")
    wait_for(lambda: client.get_pod("default", "job").status.phase == "Succeeded")
    agent.stop()

    # A new process: a provider that knows nothing and starts what it is given from scratch.
    patches: list[dict[str, Any]] = []
    original = client.patch_pod_status

    def recording(namespace: str, name: str, patch: bytes, **kwargs: Any) -> Any:
        patches.append({"name": name, **msgspec.json.decode(patch)})
        return original(namespace, name, patch, **kwargs)

    client.patch_pod_status = recording  # type: ignore[method-assign]
    fresh = FakeProvider()
    again = make_agent(client, fresh)
    again.start()
    try:
        wait_for(lambda: "default/web" in fresh.called("create_pod"))
        time.sleep(1.0)  # two resyncs
        got = client.get_pod("default", "web")
        assert got.status.phase == "Running"
        assert got.status.container_statuses[0].restart_count == 3
        assert client.get_pod("default", "job").status.phase == "Succeeded"
        assert "default/job" not in fresh.called("create_pod")  # a finished pod is not run again
        for patch in patches:
            status = patch.get("status", {})
            assert status.get("phase") != "Pending", patch
            for cs in status.get("containerStatuses") or ():
                assert cs.get("restartCount", 3) >= 3, patch
            assert patch["metadata"]["uid"] in (web.uid, job.uid)
    finally:
        again.stop()


def test_restart_never_writes_to_a_pod_recreated_under_the_same_name(client: EmbeddedClient) -> None:
    provider = FakeProvider()
    agent = make_agent(client, provider)
    agent.start()
    old = client.create_pod(pod_manifest("web"))
    wait_for(lambda: provider.called("create_pod"))
    provider.set_status(old.uid, running())
    wait_for(lambda: client.get_pod("default", "web").status.phase == "Running")
    agent.stop()
    client.delete_pod("default", "web", grace_period_seconds=0, uid=old.uid)
    new = client.create_pod(pod_manifest("web"))

    uids: list[str] = []
    original = client.patch_pod_status

    def recording(namespace: str, name: str, patch: bytes, **kwargs: Any) -> Any:
        uids.append(msgspec.json.decode(patch)["metadata"]["uid"])
        return original(namespace, name, patch, **kwargs)

    client.patch_pod_status = recording  # type: ignore[method-assign]
    provider.running = {old.uid: old}  # the provider still runs the old one
    again = make_agent(client, provider)
    again.start()
    try:
        wait_for(lambda: provider.called("delete_pod"), what="the orphan to be stopped")
        wait_for(lambda: new.uid in uids)
        assert set(uids) == {new.uid}
    finally:
        again.stop()


# --- the requests themselves (FakeNodeClient records them) -------------------------------------


def test_start_checks_the_lease_before_writing_anything_and_renewal_is_one_put() -> None:
    fake = FakeNodeClient()
    agent = make_agent(fake, FakeProvider(), lease_renew_interval=0.1, node_status_update_frequency=60)
    agent.start()
    try:
        calls = fake.calls()
        # Who holds the node? Before any other write: creating the Lease answers it (had someone
        # held it, the create would fail and the Lease be read).
        assert calls[0] == ("create", "leases")
        assert ("create", "nodes") in calls
        # Created with its whole status: no status post to follow.
        assert ("patch", "nodes/status") not in calls
        ready = [c for c in fake.get_node("vn-1")["status"]["conditions"] if c["type"] == "Ready"]
        assert ready and ready[0]["status"] == "True" and ready[0]["lastHeartbeatTime"]
        wait_for(lambda: fake.calls().count(("update", "leases")) >= 3)
        later = fake.calls()[len(calls) :]
        renewals = [c for c in later if c[1] == "leases"]
        assert set(renewals) == {("update", "leases")}  # no GET before each renewal
        assert ("patch", "nodes/status") not in later  # nothing changed, 5 minutes not over
    finally:
        agent.stop()


def test_a_fresh_node_writes_its_lease_once() -> None:
    fake = FakeNodeClient()
    agent = make_agent(fake, FakeProvider(), lease_renew_interval=60)
    agent.start()
    try:
        leases = [verb for verb, resource in fake.calls() if resource == "leases"]
        # No Lease: check() creates it, and the start renews nothing it just wrote.
        assert leases == ["create"]
    finally:
        agent.stop()


def test_a_lease_conflict_reads_again_and_renews() -> None:
    fake = FakeNodeClient()
    agent = make_agent(fake, FakeProvider(), lease_renew_interval=60)
    agent.start()
    try:
        lease = fake.get_lease(LEASE_NAMESPACE, "vn-1")
        lease["metadata"].setdefault("labels", {})["touched"] = "yes"
        fake.update_lease(LEASE_NAMESPACE, "vn-1", lease)  # someone else bumps the resourceVersion
        fake.clear_requests()
        assert agent.lease.renew()
        assert fake.calls() == [("update", "leases"), ("get", "leases"), ("update", "leases")]
    finally:
        agent.stop()


def test_a_hanging_events_api_never_delays_pod_status(
    client: EmbeddedClient, agents: list[NodeAgent]
) -> None:
    release = threading.Event()
    original = client.create_event

    def hanging(namespace: str, event: Any) -> Any:
        release.wait(30)
        return original(namespace, event)

    client.create_event = hanging  # type: ignore[method-assign]
    provider = FakeProvider()
    agent = start(agents, client, provider)
    pod = client.create_pod(pod_manifest("web"))
    wait_for(lambda: provider.notifier is not None and pod.uid in provider.running)
    assert provider.notifier is not None
    began = time.monotonic()
    for i in range(50):
        provider.notifier.event(pod.uid, "Normal", "Pulled", f"image {i}")
    provider.set_status(pod.uid, running())
    wait_for(lambda: client.get_pod("default", "web").status.phase == "Running", timeout=2)
    assert time.monotonic() - began < 2
    release.set()
    assert agent.recorder.flush(10)


def test_simulated_node_registers_again_when_asked_after_the_node_vanished(client: EmbeddedClient) -> None:
    from podstatus.simulator.agent import NodeAgent as SimulatedNode

    sim = SimulatedNode(client, "sim-1")
    sim.register_node()  # before start: start does it, after the Lease check
    with pytest.raises(NotFoundError):
        client.get_node("sim-1")
    sim.start()
    try:
        client.delete_node("sim-1")
        sim.register_node()
        assert client.get_node("sim-1")["metadata"]["name"] == "sim-1"
    finally:
        sim.stop()
