"""A tiny run of the scale benchmark's podstatus path, so `make bench-scale` cannot rot.

2 virtual nodes (``podstatus node --nodes 2``, a real subprocess) and 10 pods on the
embedded API server over HTTP: the harness's own driver, pod watch, heartbeat sampler
and request count. The real figures, against KWOK on kube-apiserver, come from
`make bench-scale` (docs/scale.md).
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.scale import harness  # noqa: E402

needs_node = pytest.mark.skipif(
    not harness.PodstatusContender.available(), reason="podstatus node is not in this tree"
)


@needs_node
def test_scale_smoke_on_the_embedded_server(tmp_path: Path) -> None:
    result = harness.run_podstatus_embedded(2, 10, tmp_path, heartbeat_interval=0.5, hold=1.5)
    assert result.completed, result.note
    # Every long-running pod Running+Ready, every batch pod Succeeded, then every pod gone.
    assert result.batch_expected == 1
    assert result.ready_pods == 9
    assert result.batch_succeeded == 1
    assert result.failed == 0
    assert result.gone_pods == 10
    assert result.ready_s is not None and result.gone_s is not None and result.nodes_up_s is not None
    assert result.pod_p50_ms is not None and result.pod_p99_ms is not None
    assert 0 <= result.pod_p50_ms <= result.pod_p99_ms <= result.ready_s * 1000
    # The contender's requests: its pod watch, a status patch per pod at least, its Nodes and Leases.
    assert result.requests.get("watch", 0) >= 1
    assert result.requests.get("patch", 0) >= 10
    assert result.requests.get("create", 0) >= 2 + 2  # two Nodes and two Leases, Events besides
    assert result.total_requests > 0
    # Heartbeats: sampled several times, no node ever not Ready or with a stale Lease.
    assert result.heartbeat_samples >= 3
    assert result.not_ready_samples == 0 and result.stale_lease_samples == 0
    assert result.cpu_s is not None and result.cpu_s > 0
    assert result.peak_rss is not None and result.peak_rss > 10 * 2**20
    # The hold: its length and the contender's CPU over it (no follow phase here).
    assert result.hold_s == 1.5 and result.hold_cpu_s is not None
    assert result.follow_streams == 0


@needs_node
def test_follow_phase_holds_kubectl_logs_f_through_the_api_server(tmp_path: Path) -> None:
    """The follow phase: real `kubectl logs -f` through the embedded server to the nodes' kubelet API."""
    result = harness.run_podstatus_embedded(
        2, 10, tmp_path, heartbeat_interval=0.5, hold=1.0, follow=3, follow_hold=11.0
    )
    assert result.completed, result.note
    assert result.kubelet_api is True
    assert result.follow_streams == 3
    assert result.follow_opened == 3, result.follow_note
    assert result.follow_open_at_end == 3, result.follow_note
    # A serving container prints a probe line every 10 s: each stream got one in 11 s.
    assert result.follow_receiving == 3
    assert result.follow_lines >= 3
    assert result.follow_s >= 11.0 and result.follow_cpu_s is not None
    row = dict(zip(harness.FOLLOW_COLUMNS, harness.follow_rows([result])[0]))
    assert (row["streams"], row["opened"], row["open at the end"], row["receiving lines in the hold"]) == (
        "3",
        "3",
        "3",
        "3",
    )


def test_requests_in_a_window_are_counted_from_the_audit_log(tmp_path: Path) -> None:
    import json

    def event(audit_id: str, agent: str, at: str, verb: str, resource: str, sub: str = "") -> str:
        ref = {"resource": resource, **({"subresource": sub} if sub else {})}
        body = {"auditID": audit_id, "userAgent": agent, "requestReceivedTimestamp": at, "verb": verb}
        return json.dumps({**body, "objectRef": ref})

    log = tmp_path / "audit.log"
    lines = [
        event("1", "podstatus/0.1", "2026-12-05T10:00:00.5Z", "update", "leases"),
        event("1", "podstatus/0.1", "2026-12-05T10:00:00.5Z", "update", "leases"),  # its second stage
        event("2", "podstatus/0.1", "2026-12-05T10:00:01Z", "patch", "pods", "status"),
        event("3", "kubectl/v1.37", "2026-12-05T10:00:01Z", "get", "pods", "log"),
        event("4", "podstatus/0.1", "2026-12-05T10:00:09Z", "update", "leases"),  # after the window
    ]
    log.write_text("\n".join(lines) + "\n")
    counts = harness.count_audit_window(log, "podstatus/", "2026-12-05T10:00:00Z", "2026-12-05T10:00:05Z")
    assert counts == {"update leases": 1, "patch pods/status": 1}
    at_rest = harness.RunResult("podstatus", 1, 1, hold_s=30.0, hold_requests={"update leases": 3})
    assert harness.requests_at_rest(at_rest) == 6.0


def test_the_nodes_trust_the_api_servers_kubelet_client_ca() -> None:
    contender = harness.PodstatusContender()
    contender.kubelet_client_ca = Path("/pki/ca.crt")
    cmd = contender.command("k.conf", 3)
    assert cmd[cmd.index("--kubelet-client-ca") + 1] == "/pki/ca.crt"
    off = harness.PodstatusContender(kubelet_api=False)
    off.kubelet_client_ca = Path("/pki/ca.crt")
    cmd = off.command("k.conf", 3)
    assert cmd[cmd.index("--kubelet-port") + 1] == "0" and "--kubelet-client-ca" not in cmd


def test_kubelet_api_on_and_off_are_rows_of_their_own_with_a_ratio() -> None:
    """Lease renewals grow with the run's length: the on/off row compares the requests without them."""
    done = {"completed": True, "nodes_up_s": 1.0, "ready_s": 2.0, "gone_s": 1.0, "cpu_s": 4.0}
    by_resource = {"create nodes": 10, "patch pods/status": 190, "update leases": 60}
    on = harness.RunResult(
        "podstatus", 10, 100, kubelet_api=True, wall_s=60.0, hold_s=30.0, hold_cpu_s=1.1, **done,
        requests={"create": 10, "patch": 190, "update": 60}, requests_by_resource=by_resource,
    )  # fmt: skip
    off = harness.RunResult(
        "podstatus", 10, 100, kubelet_api=False, wall_s=50.0, hold_s=30.0, hold_cpu_s=1.0, **done,
        requests={"create": 10, "patch": 190, "update": 50},
        requests_by_resource={**by_resource, "update leases": 50},
    )  # fmt: skip
    rows = harness.table_rows([off, on])
    assert [r[1] for r in rows] == ["podstatus", "podstatus (kubelet API off)", "**kubelet API on / off**"]
    ratio = dict(zip(harness.COLUMNS, rows[2]))
    assert ratio["CPU at rest (s/min)"] == "1.10×"
    assert ratio["API requests"] == "w/o Lease renewals: 200 / 200"
    assert ratio["missed heartbeats"] == "renewals/node/min: 6.00 / 6.00"
    assert ratio["of which Events"] == "at rest, per min: — / —"  # no audit log: no window counts
    # Both are kept on the page: their keys differ.
    assert harness._key(on) != harness._key(off)
    header = harness.requests_detail([on, off]).splitlines()[0]
    assert "| podstatus 10 × 100 | podstatus (kubelet API off) 10 × 100 |" in header


@needs_node
def test_scale_smoke_on_podstatus_serve(tmp_path: Path) -> None:
    """The same on `podstatus serve` as a process of its own: its CPU, and requests from its audit log."""
    result, note = harness.run_on_serve(2, 10, tmp_path, heartbeat_interval=0.5, hold=1.0)
    assert result.completed, result.note
    assert result.server == "podstatus serve"
    assert (result.ready_pods, result.batch_succeeded, result.gone_pods) == (9, 1, 10)
    assert result.server_cpu["podstatus serve"] > 0
    assert note.startswith("podstatus serve: peak RSS ")
    # Counted from the audit log, by resource as on kube-apiserver; the driver's are not among them.
    assert result.agents == ["podstatus/0.1"]
    # The hold's window, and what the contender sent in it: heartbeats at most.
    assert len(result.hold_window) == 2 and result.hold_window[0] <= result.hold_window[1]
    assert set(result.hold_requests) <= {"update leases", "patch nodes/status"}, result.hold_requests
    assert result.requests_by_resource["create nodes"] == 2
    assert result.requests_by_resource["create leases"] == 2
    assert result.requests_by_resource["patch pods/status"] >= 10
    assert result.requests_by_resource["watch pods"] >= 1
    assert "create pods" not in result.requests_by_resource
    assert result.not_ready_samples == 0 and result.stale_lease_samples == 0
    row = dict(zip(harness.COLUMNS, harness.row(result)))
    assert row["size"] == "2 × 10 on podstatus serve"
    assert float(row["pod requests per pod"]) >= 1.0  # at least its status write per pod
    assert row["apiserver CPU (s)"] != "—" and row["etcd CPU (s)"] == "—"


def test_rows_on_podstatus_serve_are_their_own_size() -> None:
    done = {"completed": True, "ready_s": 2.0}
    real = harness.RunResult("podstatus", 10, 100, **done)
    serve = harness.RunResult("podstatus", 10, 100, server="podstatus serve", **done)
    kw = harness.RunResult("kwok", 10, 100, **done)
    rows = harness.table_rows([kw, real, serve])
    assert [(r[0], r[1]) for r in rows] == [
        ("10 × 100", "kwok"),
        ("10 × 100", "podstatus"),
        ("10 × 100", "**podstatus / KWOK**"),
        ("10 × 100 on podstatus serve", "podstatus"),
    ]


def test_table_has_a_row_and_a_ratio_per_size() -> None:
    done = {"completed": True, "nodes_up_s": 1.0, "ready_s": 2.0, "gone_s": 1.0, "cpu_s": 4.0}
    ps = harness.RunResult("podstatus", 10, 100, peak_rss=2 * 2**20, requests={"patch": 30}, **done)
    kw = harness.RunResult("kwok", 10, 100, peak_rss=2**20, requests={"patch": 10}, **done)
    kw.cpu_s = 2.0
    rows = harness.table_rows([kw, ps])
    assert [r[1] for r in rows] == ["kwok", "podstatus", "**podstatus / KWOK**"]
    ratio = dict(zip(harness.COLUMNS, rows[2]))
    assert ratio["contender CPU (s)"] == "2.00×"
    assert ratio["of which start-up (s)"] == "w/o: —"  # no start-up figure: no ratio without it
    ps.start_cpu_s, kw.start_cpu_s = 2.0, 1.5
    ratio = dict(zip(harness.COLUMNS, harness.table_rows([kw, ps])[2]))
    assert ratio["of which start-up (s)"] == "w/o: 4.00×"  # (4 - 2) / (2 - 1.5)
    assert ratio["peak RSS (MiB)"] == "2.00×"
    assert ratio["API requests"] == "3.00×"


def test_pod_requests_per_pod_count_the_pod_lifecycle_only() -> None:
    """Status writes, deletes, gets, list and watch of pods, per pod; not Leases, Nodes or creates."""
    done = {"completed": True, "ready_s": 2.0}
    ps = harness.RunResult(
        "podstatus",
        10,
        100,
        requests_by_resource={
            "patch pods/status": 190,
            "delete pods": 90,
            "list pods": 1,
            "watch pods": 1,
            "update leases": 500,
            "create nodes": 10,
            "create pods": 7,
        },
        **done,
    )
    kw = harness.RunResult(
        "kwok",
        10,
        100,
        requests_by_resource={"patch pods/status": 110, "delete pods": 190, "update leases": 40},
        **done,
    )
    rows = harness.table_rows([kw, ps])
    assert dict(zip(harness.COLUMNS, rows[1]))["pod requests per pod"] == "2.82"
    assert dict(zip(harness.COLUMNS, rows[0]))["pod requests per pod"] == "3.00"
    assert dict(zip(harness.COLUMNS, rows[2]))["pod requests per pod"] == "0.94×"


def test_an_incomplete_run_gets_no_ratio() -> None:
    ps = harness.RunResult("podstatus", 10, 100, note="only 3/10 nodes Ready")
    kw = harness.RunResult("kwok", 10, 100, completed=True, ready_s=1.0)
    rows = harness.table_rows([kw, ps])
    assert len(rows) == 2
    assert "incomplete: only 3/10 nodes Ready" in rows[1][1]
    assert rows[1][4] == "—"


def test_podstatus_writes_only_warning_events_by_default() -> None:
    # KWOK writes no Events: like for like unless --podstatus-events all asks for the kubelet's trail.
    assert harness.DEFAULT_PODSTATUS_EVENTS == "warning"
    cmd = harness.PodstatusContender().command("k.conf", 3)
    assert cmd[cmd.index("--events") + 1] == "warning"
    cmd = harness.PodstatusContender(events="all").command("k.conf", 3)
    assert cmd[cmd.index("--events") + 1] == "all"


def test_the_page_says_which_events_podstatus_wrote(tmp_path: Path) -> None:
    done = {"completed": True, "nodes_up_s": 1.0, "ready_s": 2.0, "gone_s": 1.0, "cpu_s": 4.0}
    kw = harness.RunResult("kwok", 10, 100, requests={"patch": 10}, **done)
    ps = harness.RunResult("podstatus", 10, 100, requests={"patch": 30}, events="warning", **done)
    page = tmp_path / "scale.md"
    invocation = {"command": "c", "started": "s", "commit": "x", "machine": "m"}
    harness.save(page, [kw, ps], [], invocation, add=False)
    text = " ".join(page.read_text(encoding="utf-8").split())
    assert "podstatus ran with `--podstatus-events warning`" in text
    assert "`--podstatus-events all` measures the kubelet's full Event trail" in text
    # A run of another size with every Event (or one from before the flag) is told apart.
    old = harness.RunResult("podstatus", 100, 1000, **done)
    note = harness.events_note([kw, ps, old])
    assert "10 × 100: `warning`" in note and "100 × 1000: `all`" in note


@pytest.mark.parametrize("error", ["server", "connection", "client-timeout"])
def test_a_deletecollection_the_server_outlasts_is_sent_again(
    monkeypatch: pytest.MonkeyPatch, error: str
) -> None:
    from podstatus.errors import ConnectionFailedError, RequestTimeoutError, ServerTimeoutError

    raised = {
        "server": ServerTimeoutError("504"),
        "connection": ConnectionFailedError("reset"),
        "client-timeout": RequestTimeoutError("read timed out"),
    }[error]
    driver = harness.DriverClient("http://127.0.0.1:1")
    calls: list[str] = []

    def request(verb: str, *args: object, **kwargs: object) -> None:
        calls.append(verb)
        if len(calls) == 1:
            raise raised

    monkeypatch.setattr(driver, "_request", request)
    monkeypatch.setattr(harness.time, "sleep", lambda s: None)
    driver.delete_pods_collection("default", "scale=1")
    assert calls == ["deletecollection", "deletecollection"]


def test_the_pods_are_deleted_by_chunks_of_their_label(monkeypatch: pytest.MonkeyPatch) -> None:
    assert harness.pod_manifest(0, "n")["metadata"]["labels"][harness.CHUNK_LABEL] == "0"
    last = harness.pod_manifest(2 * harness.DELETE_CHUNK, "n")["metadata"]["labels"]
    assert last[harness.CHUNK_LABEL] == "2" and last[harness.LABEL] == "1"
    driver = harness.DriverClient("http://127.0.0.1:1")
    selectors: list[str] = []
    lock = threading.Lock()

    def collection(namespace: str, label_selector: str, timeout: float = 600.0) -> None:
        assert namespace == "default" and 0 < timeout <= 60
        with lock:
            selectors.append(label_selector)

    monkeypatch.setattr(driver, "delete_pods_collection", collection)
    # 2,001 pods: chunks 0, 1 and 2 (the last holds one pod), each asked for once.
    driver.delete_pods_in_chunks("default", 2 * harness.DELETE_CHUNK + 1, timeout=60)
    assert sorted(selectors) == [f"{harness.LABEL}=1,{harness.CHUNK_LABEL}={k}" for k in range(3)]


def test_a_chunk_that_fails_fails_the_delete_phase(monkeypatch: pytest.MonkeyPatch) -> None:
    from podstatus.errors import ServerTimeoutError

    driver = harness.DriverClient("http://127.0.0.1:1")
    tried: list[str] = []

    def collection(namespace: str, label_selector: str, timeout: float = 600.0) -> None:
        tried.append(label_selector)
        if label_selector.endswith("=1"):
            raise ServerTimeoutError("504")

    monkeypatch.setattr(driver, "delete_pods_collection", collection)
    with pytest.raises(ServerTimeoutError):
        driver.delete_pods_in_chunks("default", 3 * harness.DELETE_CHUNK, timeout=60, parallel=1)
    assert len(tried) == 3  # the other chunks were still asked for


def test_podstatus_kubelet_api_listens_on_free_ports_not_10250() -> None:
    # Each node of the run serves the kubelet API on base + i: all of them free when chosen.
    cmd = harness.PodstatusContender().command("k.conf", 5)
    base = int(cmd[cmd.index("--kubelet-port") + 1])
    assert 20000 <= base <= 60000 - 5
    import socket

    for port in range(base, base + 5):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))


def test_the_kubelet_api_can_be_left_off_to_measure_its_cost() -> None:
    cmd = harness.PodstatusContender(kubelet_api=False).command("k.conf", 5)
    assert cmd[cmd.index("--kubelet-port") + 1] == "0"
