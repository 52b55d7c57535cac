"""``podstatus simulate`` keeps count of the world it made: lost pods and failed creates fail the run.

A run used to exit 0 with clean invariants after its API server restarted empty
(every pod and the node gone) or when a share of its creates failed (it then ran
only the pods that happened to be created). Now creates are retried with a
bounded back-off, the Node is registered again when it vanishes, and pods that
vanished without the simulation deleting them, or were never created, are
counted in the summary and make the exit code 1.
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from podstatus.clients.http import HttpKubeClient
from podstatus.errors import ApiError
from testkit import free_port, podstatus_env, serve_command, wait_for

NODE = "podstatus-node-1"


def _env() -> dict[str, str]:
    return podstatus_env(COLUMNS="140")


def _row(text: str, label: str) -> int:
    """The number in the summary row ``label`` (the first table cell that starts with it)."""
    m = re.search(rf"│ {re.escape(label)}\s*│\s*(\d+)", text)
    assert m is not None, f"no row {label!r} in:\n{text}"
    return int(m.group(1))


def _serve(port: int, kubeconfig: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        # Plain HTTP without a token: with the defaults a restarted server would also bring a
        # new token and CA, which the running simulation (its kubeconfig read once) would not have.
        serve_command(port, kubeconfig, "--no-token", "--no-tls"),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=_env(),
    )
    client = HttpKubeClient(f"http://127.0.0.1:{port}", timeout=2.0)
    deadline = time.monotonic() + 20
    try:
        while True:
            try:
                client.list_pods("default")
                return proc
            except ApiError:
                assert proc.poll() is None, proc.communicate()[0]
                assert time.monotonic() < deadline, "podstatus serve did not come up"
                time.sleep(0.1)
    finally:
        client.close()


def test_a_server_restarting_empty_fails_the_run_with_the_lost_pods_counted(tmp_path: Path) -> None:
    """The user's expectation: the pods the run made are gone, so the run did not test what it says.

    The node registers itself again and the pods created after the restart run to the end
    (the simulation recovers what a node agent can), but pods that vanished are counted as
    lost and the exit code is 1: a green run must mean every pod was run and accounted for.
    """
    port = free_port()
    kubeconfig = tmp_path / "serve.kubeconfig"
    first = _serve(port, kubeconfig)
    second: subprocess.Popen[str] | None = None
    client = HttpKubeClient(f"http://127.0.0.1:{port}", timeout=2.0)
    sim = subprocess.Popen(
        [sys.executable, "-m", "podstatus.cli", "simulate", "--kubeconfig", str(kubeconfig),
         "--pods", "30", "--duration", "40", "--no-progress", "--node", NODE],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(),
    )  # fmt: skip
    try:
        # Restart the server while the simulation is still creating its pods.
        wait_for(
            lambda: len(client.list_pods("default")[0]) >= 8,
            30,
            "the simulation created no pods",
            ignore=(ApiError,),
        )
        before = len(client.list_pods("default")[0])
        first.send_signal(signal.SIGKILL)
        first.wait(10)
        time.sleep(0.5)
        second = _serve(port, kubeconfig)
        # The node agent registers the Node again on the empty server.
        wait_for(
            lambda: client.get_node(NODE)["metadata"]["name"] == NODE,
            15,
            "node not registered again",
            ignore=(ApiError,),
        )
        out, err = sim.communicate(timeout=120)
    finally:
        if sim.poll() is None:
            sim.kill()
            sim.communicate()
        for proc in (first, second):
            if proc is None:
                continue
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
            proc.communicate(timeout=10)  # also closes its pipe
        client.close()
    assert sim.returncode == 1, out + err
    lost = _row(out, "lost (gone, not deleted)")
    assert lost >= before, out
    assert _row(out, "node registrations") == 2, out
    assert _row(out, "never created") == 0, out
    # Everything created after the restart ran: the run made all 30 (and one re-creation).
    assert _row(out, "created") >= 30, out
    assert f"FAILED: {lost} pods lost" in out
    # The title names the node (it used to print a request count there).
    assert f"podstatus simulate: node {NODE}," in out


def test_failed_creates_are_retried_until_every_pod_exists() -> None:
    faults = "error=0.3,reset=0.2,verbs=create,seed=7"
    proc = subprocess.run(
        [sys.executable, "-m", "podstatus.cli", "simulate", "--pods", "30", "--duration", "45",
         "--no-progress", "--faults", faults],
        capture_output=True, text=True, env=_env(), timeout=150,
    )  # fmt: skip
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr
    assert _row(out, "never created") == 0 and _row(out, "lost (gone, not deleted)") == 0, out
    assert _row(out, "created") >= 30, out  # 30, plus the one pod re-created under its name
    retries = _row(out, "create retries")
    assert retries > 0, out
    # A reset after the create was applied: the retry finds the pod and takes it as its own.
    assert _row(out, "  of which found already created") >= 1, out
    assert f"Recovered: {retries} create retries" in out


def test_a_clean_run_reports_nothing_lost() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "podstatus.cli", "simulate", "--pods", "10", "--duration", "30",
         "--no-progress"],
        capture_output=True, text=True, env=_env(), timeout=120,
    )  # fmt: skip
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr
    assert _row(out, "lost (gone, not deleted)") == 0 and _row(out, "never created") == 0
    assert _row(out, "create retries") == 0 and _row(out, "node registrations") == 1
    assert "FAILED" not in out and "Recovered" not in out
    # A healthy run spends almost nothing on watching for a vanished Node (one GET per 10 s at most).
    gets = _row(out, "get")
    assert gets <= 8, out
