"""Parts of ``podstatus node`` that need no cluster: names, provider loading, JSON log lines."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Any

import pytest

from podstatus.cli import main
from podstatus.node import SimulatedProvider
from podstatus.node.command import VIRTUAL_NODE, JsonFormatter, load_provider, node_names
from podstatus.node.logs import log_fields


def test_node_names() -> None:
    # A name given for one node is used as given; the default is vn-1 (vn-1 .. vn-N for N).
    assert node_names("vn-bar", 1) == ["vn-bar"]
    assert node_names("vn-1", 1) == ["vn-1"]
    assert node_names(None, 1) == ["vn-1"]
    assert node_names("edge", 3) == ["edge-1", "edge-2", "edge-3"]
    assert node_names(None, 2) == ["vn-1", "vn-2"]


def test_default_provider_is_the_simulated_one_on_a_tainted_node() -> None:
    provider = load_provider(None, "vn-1", 0)
    assert isinstance(provider, SimulatedProvider)
    assert provider.node_description() is VIRTUAL_NODE
    assert VIRTUAL_NODE.taints[0]["effect"] == "NoSchedule"


def test_user_provider_gets_its_node_name_when_it_asks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "prov_a.py").write_text(
        "class Named:\n    def __init__(self, node_name):\n        self.node_name = node_name\n"
        "class Plain:\n    pass\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    assert load_provider("prov_a:Named", "vn-3", 2).node_name == "vn-3"
    assert type(load_provider("prov_a:Plain", "vn-3", 2)).__name__ == "Plain"
    with pytest.raises(ValueError, match="module:Class"):
        load_provider("prov_a.Named", "vn-1", 0)
    sys.modules.pop("prov_a", None)


def test_bad_input_is_a_clear_error(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["node", "--kubeconfig", "/nonexistent", "--provider", "nocolon"]) == 2
    assert "module:Class" in capsys.readouterr().err
    empty = tmp_path / "empty.kubeconfig"
    empty.write_text("")
    assert main(["node", "--kubeconfig", str(empty)]) == 2
    assert "configuration" in capsys.readouterr().err


def test_json_log_lines_carry_the_fields() -> None:
    records: list[logging.LogRecord] = []
    logger = logging.getLogger("podstatus.test.json")
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        log_fields(logger, logging.WARNING, "pod rejected at admission", pod="default/c", reason="OutOfpods")
    finally:
        logger.removeHandler(handler)
    line = json.loads(JsonFormatter().format(records[0]))
    assert line["level"] == "warning"
    assert line["msg"] == "pod rejected at admission pod=default/c reason=OutOfpods"
    assert line["pod"] == "default/c" and line["reason"] == "OutOfpods"


def test_health_endpoint_follows_the_agents() -> None:
    import urllib.error
    import urllib.request

    from podstatus.node.command import serve_endpoints

    healthy = [True]
    server = serve_endpoints("127.0.0.1", 0, lambda: healthy[0], lambda: b"podstatus_x 1\n")
    port = server.server_address[1]
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as answer:
            assert answer.status == 200
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as answer:
            assert b"podstatus_x" in answer.read()
        healthy[0] = False
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5)
        assert err.value.code == 503
        err.value.close()
    finally:
        server.shutdown()
        server.server_close()


def test_an_agent_that_lost_its_node_is_unhealthy() -> None:
    from podstatus.clients.fake import FakeNodeClient
    from podstatus.node import FakeProvider, NodeAgent
    from podstatus.node.config import NodeConfig

    agent = NodeAgent(
        FakeNodeClient(), FakeProvider(), NodeConfig(node_name="vn-1", housekeeping_interval=0.05)
    )
    assert not agent.healthy()  # not started
    agent.start()
    try:
        assert agent.healthy()
        agent.lost = True
        assert not agent.healthy()
    finally:
        agent.stop()


class _Stop(Exception):
    """Ends ``podstatus node`` once its agents are built (nothing is started)."""


def _agents_built_by(argv: list[str], monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    from podstatus.clients.fake import FakeNodeClient
    from podstatus.node import command

    built: list[Any] = []

    class Group:
        def __init__(self, client: Any, agents: list[Any], **options: Any) -> None:
            built.extend(agents)
            raise _Stop

    monkeypatch.setattr(
        command, "_client", lambda args, counter, pool_maxsize=16: FakeNodeClient(counter=counter)
    )
    monkeypatch.setattr(command, "NodeGroup", Group)
    with pytest.raises(_Stop):
        main([*argv, "--kubelet-port", "0"])  # the kubelet's port 10250 stays free
    return built


@pytest.mark.parametrize("flag", ["warning", "none", None])
def test_events_flag_reaches_every_agents_recorder(monkeypatch: pytest.MonkeyPatch, flag: str | None) -> None:
    argv = ["node", "--nodes", "2"] + (["--events", flag] if flag else [])
    agents = _agents_built_by(argv, monkeypatch)
    assert len(agents) == 2
    assert {a.recorder.events for a in agents} == {flag or "all"}


def test_events_flag_refuses_other_values(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["node", "--events", "normal"])
    assert "--events: invalid choice" in capsys.readouterr().err


def test_many_nodes_share_one_sync_pool_and_coalesce(monkeypatch: pytest.MonkeyPatch) -> None:
    agents = _agents_built_by(["node", "--nodes", "3", "--coalesce", "0.25"], monkeypatch)
    pools = {id(a.manager.options.sync_pool) for a in agents}
    assert len(pools) == 1 and agents[0].manager.options.sync_pool is not None
    assert agents[0].manager.options.sync_pool is agents[0].runtime.sync
    assert {a.manager.options.coalesce for a in agents} == {0.25}
    assert {a.manager.options.workers for a in agents} == {4}


def test_kubelet_mode_neither_coalesces_nor_runs_more_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    agents = _agents_built_by(["node", "--nodes", "2", "--kubelet-mode"], monkeypatch)
    assert {(a.manager.options.coalesce, a.manager.options.workers) for a in agents} == {(0.0, 1)}


def test_coalesce_out_of_range_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["node", "--kubeconfig", "/nonexistent", "--coalesce", "-1"]) == 2
    assert "--coalesce" in capsys.readouterr().err


def test_the_process_tunes_its_collector_and_callers_keep_theirs(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import gc

    before = gc.get_threshold()
    assert main(["node", "--kubeconfig", "/nonexistent", "--coalesce", "-1"]) == 2  # a caller's argv
    assert gc.get_threshold() == before
    capsys.readouterr()
    frozen = gc.get_freeze_count()
    try:
        # The console script: argv from the command line.
        monkeypatch.setattr(
            sys, "argv", ["podstatus", "node", "--kubeconfig", "/nonexistent", "--coalesce", "-1"]
        )
        assert main() == 2
        assert gc.get_threshold() == (50_000, 20, 10)
        assert gc.get_freeze_count() > frozen
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)


def test_pending_gauge_is_counted_when_metrics_are_read() -> None:
    from types import SimpleNamespace

    from prometheus_client import generate_latest

    from podstatus.metrics import Metrics
    from podstatus.node.command import report_pending

    counts = [2, 3]
    agents = [SimpleNamespace(manager=SimpleNamespace(pending_count=lambda i=i: counts[i])) for i in range(2)]
    metrics = Metrics()
    report_pending(metrics, agents)
    assert "podstatus_pod_status_pending 5.0" in generate_latest(metrics.registry).decode().splitlines()
    counts[0] = 0  # synced meanwhile: the next read says so, with no beat in between
    assert "podstatus_pod_status_pending 3.0" in generate_latest(metrics.registry).decode().splitlines()
