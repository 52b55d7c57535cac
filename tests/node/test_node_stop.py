"""SIGTERM/SIGINT end ``podstatus node`` within ``--stop-timeout`` even when a provider hangs (issue 22.2).

Each case runs the real command against the embedded API server (HTTP on loopback) with a
provider module that hangs in one method, sends the signal(s), and checks that the process
exits within the bound and says which provider call it abandoned.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from nodeproc import NodeProcess, pod_body, wait_for

from podstatus.clients.http import HttpKubeClient

# Each method that hangs first appends its name to $HANG_MARK, so the test knows it is stuck there.
HANGING = """
import asyncio
import os
import time

from podstatus.node import NodeDescription
from podstatus.node.provider import pending_status


def _mark(method):
    with open(os.environ["HANG_MARK"], "a") as f:
        f.write(method + "\\n")


class Base:
    def __init__(self, node_name):
        self.pods = {}

    def create_pod(self, pod):
        self.pods[pod.uid] = pod

    def update_pod(self, pod):
        pass

    def delete_pod(self, pod, grace_period_seconds):
        self.pods.pop(pod.uid, None)

    def get_pod_status(self, pod):
        return pending_status(pod) if pod.uid in self.pods else None

    def get_pods(self):
        return []

    def ping(self):
        pass

    def node_description(self):
        return NodeDescription()


class DeleteHangs(Base):
    def delete_pod(self, pod, grace_period_seconds):
        _mark("delete_pod")
        time.sleep(10**6)


class StatusHangs(Base):
    def get_pod_status(self, pod):
        _mark("get_pod_status")
        time.sleep(10**6)


class InlineStatusHangs(StatusHangs):
    blocking = False  # says it never blocks, and does


class InlineAsyncDeleteHangs(Base):
    blocking = False

    async def delete_pod(self, pod, grace_period_seconds):
        _mark("delete_pod")
        await asyncio.sleep(10**6)


class InlinePingHangs(Base):
    blocking = False

    def ping(self):
        _mark("ping")
        time.sleep(10**6)
"""

DEFAULT_STOP_TIMEOUT = 20.0  # as --help and README say
BOUND = 8.0  # --stop-timeout of the runs that give one
SLACK = 6.0  # interpreter start-up and a busy CI machine


@pytest.fixture
def hang_mark(tmp_path: Path, node_env: dict[str, str]) -> Path:
    (tmp_path / "hangmod.py").write_text(HANGING)
    mark = tmp_path / "hang.mark"
    node_env["HANG_MARK"] = str(mark)
    return mark


def _marked(mark: Path, method: str) -> bool:
    return mark.exists() and method in mark.read_text().split()


def _agent_reported(api: HttpKubeClient, name: str) -> bool:
    status = api.get_pod("default", name).status
    return status.phase == "Pending" and any(c.type == "Initialized" for c in status.conditions or ())


@pytest.mark.parametrize(
    ("provider", "method", "delete"),
    [
        ("DeleteHangs", "delete_pod", True),
        ("StatusHangs", "get_pod_status", False),
        ("InlineStatusHangs", "get_pod_status", False),
        ("InlineAsyncDeleteHangs", "delete_pod", True),
    ],
)
def test_sigterm_ends_the_node_within_the_bound_when_a_provider_call_hangs(
    provider: str,
    method: str,
    delete: bool,
    hang_mark: Path,
    http_api: HttpKubeClient,
    node_procs: Callable[..., NodeProcess],
) -> None:
    # The default bound (--stop-timeout 20): a stop that only leaves provider calls behind is
    # a clean one, well inside it.
    node = node_procs("--name", "vn-1", "--provider", f"hangmod:{provider}")
    wait_for(lambda: "vn-1" in str(http_api.list_nodes()), what="node vn-1 registered")
    http_api.create_pod(pod_body("stuck", "vn-1"))
    if delete:
        # The agent's own status (its Initialized condition), not the server's default Pending: a
        # pod deleted before the agent saw it was never given to the provider, so nothing to hang.
        wait_for(lambda: _agent_reported(http_api, "stuck"), what="the agent's status of stuck")
        http_api.delete_pod("default", "stuck", grace_period_seconds=5)
    wait_for(lambda: _marked(hang_mark, method), what=f"the provider stuck in {method}")
    node.signal(signal.SIGTERM)
    code, out, _ = node.wait(DEFAULT_STOP_TIMEOUT + SLACK)
    err = node.err()
    assert "abandoned a provider call" in err, err
    abandoned = next(line for line in err.splitlines() if "abandoned a provider call" in line)
    assert f"method={method}" in abandoned and "pod=default/stuck" in abandoned and "node=vn-1" in abandoned
    assert code == 0, err  # the stop itself finished: only the provider's thread was left behind
    assert "podstatus node: stopped" in out


def test_a_blocking_false_provider_that_hangs_is_logged_while_it_runs(
    hang_mark: Path, http_api: HttpKubeClient, node_procs: Callable[..., NodeProcess]
) -> None:
    # Called on the agent's own thread without a timeout: the log line is all the user gets.
    node = node_procs(
        "--name", "vn-1", "--provider", "hangmod:InlineStatusHangs", "--stop-timeout", str(BOUND)
    )
    wait_for(lambda: "vn-1" in str(http_api.list_nodes()), what="node vn-1 registered")
    http_api.create_pod(pod_body("stuck", "vn-1"))
    wait_for(lambda: _marked(hang_mark, "get_pod_status"), what="the provider stuck")
    err = node.wait_log("runs past its timeout", timeout=30)  # the default provider timeout is 10 s
    line = next(line for line in err.splitlines() if "runs past its timeout" in line)
    assert "method=get_pod_status" in line and "pod=default/stuck" in line, line
    node.signal(signal.SIGINT)
    code, _, _ = node.wait(BOUND + SLACK)
    assert code == 0, node.err()


@pytest.mark.parametrize("second", [None, signal.SIGINT])
def test_a_provider_that_wedges_the_start_is_cut_at_the_bound_or_by_a_second_signal(
    second: int | None, hang_mark: Path, node_procs: Callable[..., NodeProcess]
) -> None:
    # ping runs on the main thread during start (blocking = False): nothing returns to the
    # command's loop, so only the stop guard can end the process.
    node = node_procs("--name", "vn-1", "--provider", "hangmod:InlinePingHangs", "--stop-timeout", str(BOUND))
    wait_for(lambda: _marked(hang_mark, "ping"), what="the provider stuck in ping")
    node.signal(signal.SIGTERM)
    if second is not None:
        node.signal(second)
        code, _, took = node.wait(SLACK)  # at once, not after the bound
    else:
        code, _, took = node.wait(BOUND + SLACK)
        assert took >= BOUND - 1.0  # it did wait for a clean stop first
    err = node.err()
    assert code == 1, err
    assert "exiting now without a clean stop" in err, err
    assert ("second signal" in err) == (second is not None), err
    abandoned = next(line for line in err.splitlines() if "abandoned a provider call" in line)
    assert "method=ping" in abandoned and "node=vn-1" in abandoned, abandoned


def test_the_bound_is_stated_in_help(capsys: pytest.CaptureFixture[str]) -> None:
    from podstatus.cli import main

    with pytest.raises(SystemExit):
        main(["node", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--stop-timeout SECONDS" in text
    assert f"(default {DEFAULT_STOP_TIMEOUT:g};" in text and "a second signal exits at once" in text


def test_a_paused_and_resumed_node_keeps_running(
    http_api: HttpKubeClient, node_procs: Callable[..., NodeProcess]
) -> None:
    # SIGSTOP/SIGCONT (a paused machine, a debugger, the control-plane suite's withheld
    # heartbeats) is no stop signal: the guard once took the wake-up for one and stopped the node.
    node = node_procs("--name", "vn-1")
    wait_for(lambda: "vn-1" in str(http_api.list_nodes()), what="node vn-1 registered")
    for _ in range(3):
        node.signal(signal.SIGSTOP)
        time.sleep(0.5)
        node.signal(signal.SIGCONT)
        time.sleep(0.5)
    time.sleep(2.0)
    assert node.proc.poll() is None, node.err()
    assert "Traceback" not in node.err(), node.err()
    http_api.create_pod(pod_body("after", "vn-1"))
    wait_for(lambda: http_api.get_pod("default", "after").status.phase == "Running", what="a pod Running")
    node.signal(signal.SIGTERM)
    code, _, _ = node.wait(DEFAULT_STOP_TIMEOUT + SLACK)
    assert code == 0, node.err()
