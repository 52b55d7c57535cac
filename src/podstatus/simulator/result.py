"""What a simulation did: its counts, the invariants, each node's heartbeat, and why it failed."""

from __future__ import annotations

from dataclasses import dataclass, field

from .invariants import Invariant


@dataclass
class NodeHeartbeat:
    """One node's heartbeat at the end of the run (before the agents stop), as the API server has it."""

    node: str
    pods: int  # pods the run placed on this node (names: a pod re-created under its name counts once)
    renewals: int  # the agent's Lease writes (the first one creates it)
    lease_age: float | None  # seconds since the Lease's renewTime; None: not known (see ``state``)
    lease_duration: int = 40
    state: str = "live"  # live | stale | missing (no Lease on the server) | unknown (could not read it)

    @property
    def ok(self) -> bool:
        return self.state in ("live", "unknown")


@dataclass
class SimulationResult:
    pods_created: int
    phases: dict[str, int]
    deleted: int
    requests: dict[str, int]
    status_changes: int
    latencies: list[float]
    invariants: list[Invariant]
    elapsed: float
    settled: bool
    watch_errors: int
    controller_writes: int = 0
    # The world the run made, and what became of it (see docs/design.md, "simulate keeps count").
    lost: list[str] = field(default_factory=list)  # created, then gone without the simulation deleting them
    not_created: list[str] = field(default_factory=list)  # never created, with why
    create_retries: int = 0  # create attempts repeated after a transient failure
    creates_adopted: int = 0  # a retry found the earlier, unanswered attempt had landed
    node_registrations: int = 1  # 1: registered once; more: the Node vanished and was registered again
    node_checks: int = 0  # GETs of the Node made to notice it vanished
    final_state_known: bool = True  # the final list of the node's pods succeeded
    heartbeats: list[NodeHeartbeat] = field(default_factory=list)  # one per node, in node order
    interrupted: bool = False  # stop() (Ctrl-C) ended the run early: the summary so far
    recreated: int = 0  # pods deleted and created again under their name (counted once, as the new one)

    @property
    def invariants_ok(self) -> bool:
        return all(i.violations == 0 for i in self.invariants)

    def failures(self) -> list[str]:
        """Why the run failed, one line each; empty when it did what it claims."""
        out = [f"{i.name}: {i.violations} violations" for i in self.invariants if i.violations]
        if self.lost:
            out.append(f"{len(self.lost)} pods lost (gone from the server without being deleted)")
        if self.not_created:
            out.append(f"{len(self.not_created)} pods never created")
        if not self.final_state_known:
            out.append("the node's pods could not be listed at the end")
        for beat in self.heartbeats:
            if beat.state == "missing":
                out.append(f"node {beat.node}: no Lease on the server")
            elif beat.state == "stale":
                age = "never renewed" if beat.lease_age is None else f"renewed {beat.lease_age:.0f} s ago"
                out.append(f"node {beat.node}: Lease stale ({age}, duration {beat.lease_duration} s)")
        return out

    @property
    def ok(self) -> bool:
        return not self.failures()

    def percentile(self, q: float) -> float | None:
        if not self.latencies:
            return None
        data = sorted(self.latencies)
        k = min(len(data) - 1, max(0, round(q / 100 * (len(data) - 1))))
        return data[k]
