"""Checks over the whole session; this module runs last (its name sorts last).

* The stable node stayed Ready, untainted, with its Lease renewed, for at least 3 minutes
  (sampled every 2 s by ``stable_watch`` while every other case ran: no extra wall time
  unless the session was shorter).
* deploy/'s role is sufficient: the apiserver's audit log holds no request of the agent's
  ServiceAccount that authorization denied, nor any other 403 (except Events refused by
  NamespaceLifecycle admission in a namespace being deleted), and the agents logged none.
* ... and not wider than needed: every permission it grants was used in the session, or
  is listed below with the reason it is kept.
"""

from __future__ import annotations

import json
import re
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import yaml
from cpkit import (
    AGENT_USER,
    DEPLOY,
    NODE_MONITOR_GRACE,
    VIRTUAL_NODE_TAINT,
    Agents,
    NodeWatcher,
    agent_audit_events,
    denied_by_authorization,
    namespace_terminating,
)

pytestmark = pytest.mark.apiserver

MIN_HEALTHY = 180.0

# Grants the session may not exercise, and why they stay.
MAY_BE_UNUSED: dict[tuple[str, str, str], str] = {}


def test_stable_node_stayed_ready_with_its_lease_renewed(stable_watch: NodeWatcher) -> None:
    remaining = MIN_HEALTHY - stable_watch.elapsed()
    if remaining > 0:
        time.sleep(remaining + 2)
    stable_watch.stop()
    assert stable_watch.elapsed() >= MIN_HEALTHY
    assert not stable_watch.violations, "\n".join(stable_watch.violations[:40])
    # The only taint is the one the agent registers its nodes with; no node.kubernetes.io/* ever.
    assert all(t["key"] == VIRTUAL_NODE_TAINT for t in stable_watch.baseline_taints or []), (
        stable_watch.baseline_taints
    )
    # Sampled all along (every ~2 s), and the Lease moved every ~10 s.
    assert stable_watch.samples >= MIN_HEALTHY / 4, stable_watch.samples
    assert len(stable_watch.renewals) >= MIN_HEALTHY / 15, sorted(stable_watch.renewals)


def test_the_agent_was_never_forbidden(control_plane: Any, agents: Agents) -> None:
    events = agent_audit_events(control_plane.audit_log)
    assert len(events) > 50, f"only {len(events)} audit events for {AGENT_USER}: is the audit log on?"
    allowed = [
        e for e in events if (e.get("annotations") or {}).get("authorization.k8s.io/decision") == "allow"
    ]
    assert len(allowed) > 50, "the audit log holds no authorization decisions"
    forbidden = [
        {k: e.get(k) for k in ("verb", "requestURI", "objectRef", "responseStatus", "annotations")}
        for e in events
        if denied_by_authorization(e)
        or ((e.get("responseStatus") or {}).get("code") == 403 and not namespace_terminating(e))
    ]
    assert not forbidden, f"{len(forbidden)} requests of the agent were forbidden:\n" + "\n".join(
        json.dumps(f) for f in forbidden[:20]
    )
    for agent in agents.all():
        bad = [line for line in agent.log_text().splitlines() if logs_a_403(line)]
        assert not bad, f"{agent.name} logged a 403:\n" + "\n".join(bad[:20])


# The log format starts with "%(asctime)s", whose milliseconds can read ",403": the
# timestamp is cut off before looking for a status code.
_TIMESTAMP = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} ")
_CODE_403 = re.compile(r"(?<![\d.,])403(?![\d.])|[Ff]orbidden")


def logs_a_403(line: str) -> bool:
    message = _TIMESTAMP.sub("", line)
    return bool(_CODE_403.search(message)) and "being terminated" not in message


def test_the_403_finder_reads_messages_not_timestamps() -> None:
    assert not logs_a_403(
        "2026-12-04 23:52:02,403 WARNING podstatus.node.agent: heartbeats resumed gap_seconds=32.5"
    )
    assert logs_a_403("2026-12-04 23:52:02,117 WARNING podstatus.sync: status write failed code=403 pod=a/b")
    assert logs_a_403("2026-12-04 23:52:02,117 ERROR podstatus.node: HTTP 403 Forbidden: pods is forbidden")
    assert logs_a_403("kubernetes.client.exceptions.ApiException: (403)")
    assert not logs_a_403("2026-12-04 23:52:02,403 INFO podstatus: namespace x is being terminated: 403")


def test_the_watcher_does_not_blame_the_agent_for_a_paused_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    import cpkit

    clock = [datetime(2026, 12, 5, 7, 39, 30, tzinfo=UTC)]
    renewed = [clock[0]]

    class Cluster:
        def node(self, name: str) -> dict[str, Any]:
            return {"status": {"conditions": [{"type": "Ready", "status": "True"}]}, "spec": {}}

        def lease(self, name: str) -> dict[str, Any]:
            return {"spec": {"renewTime": renewed[0].isoformat()}}

    monkeypatch.setattr(cpkit, "now", lambda: clock[0])
    watcher = NodeWatcher(Cluster(), "n", interval=2.0)  # type: ignore[arg-type]

    def step(w: NodeWatcher, seconds: float) -> None:
        clock[0] += timedelta(seconds=seconds)
        w.sample()

    step(watcher, 0)
    step(watcher, 2)
    step(watcher, 41)  # the machine stood still for 41 s: the agent could not renew either
    assert watcher.violations == [] and len(watcher.pauses) == 1
    step(watcher, 2)
    step(watcher, 2)
    assert watcher.violations == []
    # Awake and not renewed for over the grace period: that is the agent's fault, pause or not.
    for _ in range(NODE_MONITOR_GRACE // 2):
        step(watcher, 2)
    assert watcher.violations and "lease renewed" in watcher.violations[-1]
    # The same silence with no pause at all is caught as early as before.
    renewed[0] = clock[0]
    quiet = NodeWatcher(Cluster(), "n", interval=2.0)  # type: ignore[arg-type]
    for _ in range(NODE_MONITOR_GRACE // 2 + 1):
        step(quiet, 2)
    assert quiet.pauses == [] and "lease renewed 32.0 s ago" in quiet.violations[0]


def _grants() -> set[tuple[str, str, str]]:
    grants: set[tuple[str, str, str]] = set()
    for doc in yaml.safe_load_all((DEPLOY / "rbac.yaml").read_text(encoding="utf-8")):
        if doc and doc["kind"] in ("ClusterRole", "Role"):
            for rule in doc["rules"]:
                for group in rule["apiGroups"]:
                    for resource in rule["resources"]:
                        for verb in rule["verbs"]:
                            grants.add((group, resource, verb))
    return grants


def test_every_permission_of_the_role_was_used(control_plane: Any, agents: Agents) -> None:
    used: set[tuple[str, str, str]] = set()
    for e in agent_audit_events(control_plane.audit_log):
        ref = e.get("objectRef") or {}
        resource = ref.get("resource", "")
        if ref.get("subresource"):
            resource += "/" + ref["subresource"]
        used.add((ref.get("apiGroup", ""), resource, e.get("verb", "")))
    unused = sorted(_grants() - used - set(MAY_BE_UNUSED))
    assert not unused, (
        f"granted but never used by the agent (drop them from deploy/rbac.yaml): {unused}\nused: {sorted(used)}"
    )
