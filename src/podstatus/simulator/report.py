"""What ``podstatus simulate`` draws: the progress while it runs and the summary at the end (rich).

Only ``podstatus simulate`` imports this module: ``podstatus node`` never draws and does not pay
for importing rich.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.markup import escape
from rich.table import Table

from .result import NodeHeartbeat, SimulationResult


def progress_line(p: dict[str, int]) -> str:
    return " ".join(f"{k}={v}" for k, v in p.items())


def progress_table(p: dict[str, int]) -> Table:
    table = Table(title="podstatus simulate", show_header=True, header_style="bold")
    keys = ("created", "running", "succeeded", "failed", "deleted", "lost", "synced", "pending_sync")
    for key in keys:
        table.add_column(key.replace("_", " "), justify="right")
    table.add_row(*(str(p.get(k, 0)) for k in keys))
    return table


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value * 1000:.1f} ms"


def nodes_label(names: str | Sequence[str], bold: str = "", end: str = "") -> str:
    """``node X`` for one node; ``3 nodes X-1 .. X-3 (one pod watch)`` for several."""
    if isinstance(names, str):
        names = [names]
    if len(names) == 1:
        return f"node {bold}{names[0]}{end}"
    return f"{len(names)} nodes {bold}{names[0]} .. {names[-1]}{end} (one pod watch)"


# A run of many nodes lists the stale ones, then the first others, up to this many rows.
HEARTBEAT_ROWS = 10


def _heartbeat_table(heartbeats: Sequence[NodeHeartbeat]) -> Table:
    stale = sum(1 for b in heartbeats if not b.ok)
    table = Table(
        title=f"Node heartbeats ({len(heartbeats)} node{'s' if len(heartbeats) != 1 else ''}, {stale} stale)",
        header_style="bold",
    )
    table.add_column("node")
    table.add_column("pods", justify="right")
    table.add_column("lease renewals", justify="right")
    table.add_column("lease age", justify="right")
    table.add_column("lease")
    shown = sorted(heartbeats, key=lambda b: b.ok)[:HEARTBEAT_ROWS]  # the stale ones first
    for beat in sorted(shown, key=heartbeats.index):
        age = "-" if beat.lease_age is None else f"{beat.lease_age:.1f} s"
        style = "green" if beat.state == "live" else "yellow" if beat.ok else "bold red"
        table.add_row(beat.node, str(beat.pods), str(beat.renewals), age, f"[{style}]{beat.state}[/]")
    if len(heartbeats) > len(shown):
        table.add_row(f"... {len(heartbeats) - len(shown)} more", "", "", "", "")
    return table


def render_summary(result: SimulationResult, node: str | Sequence[str], mode: str, width: int = 120) -> Table:
    """The end of ``podstatus simulate``: pods by phase, requests, latency, invariants, heartbeats."""
    outer = Table.grid(padding=(0, 2))
    phases = Table(title="Pods by phase (on the server)", header_style="bold")
    phases.add_column("phase")
    phases.add_column("pods", justify="right")
    for phase, count in sorted(result.phases.items()):
        phases.add_row(phase, str(count))
    phases.add_row("deleted (gone)", str(result.deleted))
    phases.add_row("[bold]created[/]", f"[bold]{result.pods_created}[/]")
    if getattr(result, "recreated", 0):
        phases.add_row("  of which recreated (once each)", str(result.recreated))
    # What became of the world the run made: anything here but zeros is a failed run.
    lost_style = "bold red" if result.lost else "green"
    phases.add_row("lost (gone, not deleted)", f"[{lost_style}]{len(result.lost)}[/]")
    missing_style = "bold red" if result.not_created else "green"
    phases.add_row("never created", f"[{missing_style}]{len(result.not_created)}[/]")
    for example in [*result.lost[:3], *result.not_created[:3]]:
        phases.add_row(f"  [red]{escape(example)}[/]", "")
    phases.add_row("create retries", str(result.create_retries))
    if result.creates_adopted:
        phases.add_row("  of which found already created", str(result.creates_adopted))
    phases.add_row("node registrations", str(result.node_registrations))
    if not result.final_state_known:
        phases.add_row("[bold red]final list failed[/]", "")

    requests = Table(title="Requests by verb", header_style="bold")
    requests.add_column("verb")
    requests.add_column("requests", justify="right")
    total = 0
    for verb, count in sorted(result.requests.items()):
        if count:
            requests.add_row(verb, str(count))
            total += count
    requests.add_row("[bold]total[/]", f"[bold]{total}[/]")
    if result.controller_writes:
        requests.add_row("  of which readiness gate writes", str(result.controller_writes))
    # The node's requests for pod status: not the gate controller's writes, not the Node checks.
    node_requests = (
        result.requests.get("get", 0)
        + result.requests.get("patch", 0)
        - result.controller_writes
        - result.node_checks
    )
    if result.status_changes:
        requests.add_row("node get+patch per synced change", f"{node_requests / result.status_changes:.2f}")

    latency = Table(title="Status propagation latency", header_style="bold")
    latency.add_column("percentile")
    latency.add_column("change → on server", justify="right")
    for q in (50, 95, 99):
        latency.add_row(f"p{q}", _ms(result.percentile(q)))
    latency.add_row("max", _ms(max(result.latencies) if result.latencies else None))
    latency.add_row("changes synced", str(result.status_changes))

    invariants = Table(title="Invariants", header_style="bold")
    invariants.add_column("invariant")
    invariants.add_column("checked", justify="right")
    invariants.add_column("violations", justify="right")
    for inv in result.invariants:
        style = "green" if inv.violations == 0 else "bold red"
        invariants.add_row(inv.name, str(inv.checked), f"[{style}]{inv.violations}[/]")
        for example in inv.examples:
            invariants.add_row(f"  [red]{escape(example)}[/]", "", "")

    tables = [phases, requests, latency, invariants]
    if result.heartbeats:
        tables.append(_heartbeat_table(result.heartbeats))
    if width >= 110:
        for i in range(0, len(tables), 2):
            outer.add_row(*tables[i : i + 2])
    else:
        for table in tables:
            outer.add_row(table)
    wrapper = Table(
        title=f"podstatus simulate: {escape(nodes_label(node))}, {mode}, {result.elapsed:.1f} s"
        + (
            " (interrupted: the summary so far)"
            if getattr(result, "interrupted", False)
            else ""
            if result.settled
            else " (stopped at --duration before settling)"
        ),
        show_header=False,
        box=None,
    )
    wrapper.add_row(outer)
    return wrapper
