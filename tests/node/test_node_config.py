"""``NodeConfig``: the node agent's settings, checked when built (a bad value names its field),
and ``podstatus node`` building one per node from its flags."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import pytest
from test_node_command_parts import _agents_built_by

from podstatus.cli import main
from podstatus.node.config import NODE_SETTINGS, NodeConfig
from podstatus.node.network import NodeNetwork


def test_the_defaults_are_the_kubelets() -> None:
    config = NodeConfig(node_name="vn-1")
    assert (config.lease_duration, config.lease_renew_interval) == (40, 10.0)
    assert (config.node_status_update_frequency, config.node_status_report_frequency) == (10.0, 300.0)
    assert config.events == "all" and config.cpu_manager_policy == "none" and config.watch
    assert config.identity  # made up when not given: host and a random part
    assert NodeConfig(node_name="vn-1").identity != config.identity


def test_it_is_frozen() -> None:
    config = NodeConfig(node_name="vn-1")
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.node_name = "vn-2"  # type: ignore[misc]


def test_node_settings_name_every_field() -> None:
    assert {f.name for f in dataclasses.fields(NodeConfig)} == NODE_SETTINGS


BAD: list[tuple[str, Any]] = [
    ("node_name", ""),
    ("node_name", "Upper"),
    ("node_name", "under_score"),
    ("node_name", "-leading"),
    ("node_name", "trailing."),
    ("node_name", "x" * 254),
    ("node_name", "ünïcode"),
    ("node_name", 7),
    ("identity", ""),
    ("take_over", "yes"),
    ("watch", 1),
    ("lease_duration", 0),
    ("lease_duration", 40.5),
    ("lease_duration", True),
    ("lease_duration", 86401),
    ("lease_renew_interval", 0),
    ("lease_renew_interval", -1.0),
    ("lease_renew_interval", math.nan),
    ("lease_renew_interval", math.inf),
    ("lease_renew_interval", "10"),
    ("node_status_update_frequency", 0),
    ("node_status_report_frequency", -5),
    ("provider_timeout", 0),
    ("status_poll_interval", 0.0),
    ("create_retry_max", -0.5),
    ("housekeeping_interval", 0),
    ("watch_timeout", None),
    ("status_error_event_interval", -1),
    ("event_component", ""),
    ("events", "normal"),
    ("cpu_manager_policy", "dynamic"),
    ("network", "10.0.0.1"),
    ("kubelet_endpoint", ("127.0.0.1",)),
    ("kubelet_endpoint", ("127.0.0.1", 0)),
    ("kubelet_endpoint", ("127.0.0.1", 70000)),
    ("kubelet_endpoint", ("", 10250)),
    ("kubelet_endpoint", ["127.0.0.1", 10250]),
]


@pytest.mark.parametrize(("field", "value"), BAD, ids=[f"{f}={v!r}"[:40] for f, v in BAD])
def test_a_bad_value_is_a_value_error_naming_its_field(field: str, value: Any) -> None:
    settings: dict[str, Any] = {"node_name": "vn-1", field: value}
    with pytest.raises(ValueError, match=rf"^{field} must be"):
        NodeConfig(**settings)


GOOD: list[tuple[str, Any]] = [
    ("node_name", "node-1.example.com"),
    ("node_name", "a" * 253),
    ("status_error_event_interval", 0),  # an Event for every failure
    ("lease_renew_interval", 60),  # tests renew seldom on purpose: not checked against the duration
    ("events", "none"),
    ("cpu_manager_policy", "static"),
    ("network", NodeNetwork.for_index(3)),
    ("kubelet_endpoint", ("127.0.0.2", 10250)),
]


@pytest.mark.parametrize(("field", "value"), GOOD, ids=[f"{f}={v!r}"[:40] for f, v in GOOD])
def test_good_values_are_kept(field: str, value: Any) -> None:
    settings: dict[str, Any] = {"node_name": "vn-1", field: value}
    assert getattr(NodeConfig(**settings), field) == value


def test_the_command_builds_each_nodes_config_from_its_flags(monkeypatch: pytest.MonkeyPatch) -> None:
    argv = ["node", "--name", "edge", "--nodes", "2", "--take-over", "--events", "warning"]
    agents = _agents_built_by([*argv, "--cpu-manager-policy", "static"], monkeypatch)
    configs = [a.config for a in agents]
    assert [c.node_name for c in configs] == ["edge-1", "edge-2"]
    assert all(c.take_over and c.events == "warning" and c.cpu_manager_policy == "static" for c in configs)
    # One watch for the process, each node its own network.
    assert not any(c.watch for c in configs)
    assert configs[0].network != configs[1].network


def test_a_bad_node_name_from_the_flags_is_refused_naming_the_field(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["node", "--name", "Bad_Name", "--kubelet-port", "0"]) == 2
    assert "node_name must be a DNS subdomain" in capsys.readouterr().err
