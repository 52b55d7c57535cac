"""The ``podstatus`` command as a user runs it: serve, simulate (the main job), metrics."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from podstatus.cli import main
from podstatus.clients.embedded import EmbeddedClient
from podstatus.errors import NotFoundError
from podstatus.manager import SyncRecord
from podstatus.metrics import Metrics
from podstatus.server import EmbeddedApiServer
from podstatus.simulator.run import RUN_LABEL
from testkit import free_port, kubectl_path, podstatus_env, serve_command, wait_for


def _env() -> dict[str, str]:
    return podstatus_env(COLUMNS="140")


def _kubectl() -> str:
    return kubectl_path()


def _invariant_rows(text: str) -> list[tuple[str, int, int]]:
    rows = []
    for line in text.splitlines():
        m = re.search(r"│\s*(no [^│]+?)\s*│\s*(\d+)\s*│\s*(\d+)\s*│", line)
        if m:
            rows.append((m.group(1), int(m.group(2)), int(m.group(3))))
    return rows


def test_simulate_runs_the_main_job_and_reports(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "sim.kubeconfig"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "podstatus.cli",
            "simulate",
            "--pods",
            "24",
            "--duration",
            "40",
            "--no-progress",
            "--write-kubeconfig",
            str(kubeconfig),
        ],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "Pods by phase" in out and "Requests by verb" in out and "Status propagation latency" in out
    for q in ("p50", "p95", "p99"):
        assert re.search(rf"│ {q}\s+│\s+[\d.]+ ms", out), f"{q} latency printed"
    rows = _invariant_rows(out)
    assert len(rows) == 4
    for name, checked, violations in rows:
        assert violations == 0, name
        assert checked > 0, f"{name} was actually checked"
    assert re.search(r"│ patch\s+│\s+\d+", out)
    # It pointed at the embedded server, stopped now: not left behind.
    assert not kubeconfig.exists() and f"{kubeconfig} was removed" in " ".join(out.split())


def test_simulate_kubelet_mode_sends_a_get_before_every_patch() -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "podstatus.cli",
            "simulate",
            "--pods",
            "12",
            "--duration",
            "40",
            "--no-progress",
            "--kubelet-mode",
            "--in-process",
            "--delete-fraction",
            "0.2",
        ],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    gets = int(re.search(r"│ get\s+│\s+(\d+)", proc.stdout).group(1))  # type: ignore[union-attr]
    patches = int(re.search(r"│ patch\s+│\s+(\d+)", proc.stdout).group(1))  # type: ignore[union-attr]
    # The kubelet reads before it writes: at least one GET per status PATCH the node sent.
    assert gets >= patches * 0.8


def test_serve_writes_a_kubeconfig_kubectl_can_use(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "serve.kubeconfig"
    port = free_port()
    proc = subprocess.Popen(
        serve_command(port, kubeconfig),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=_env(),
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        assert f"https://127.0.0.1:{port}" in first  # token and TLS by default
        deadline = time.monotonic() + 20
        while not kubeconfig.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        manifest = tmp_path / "pod.json"
        manifest.write_text(
            json.dumps(
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {"name": "hello", "namespace": "default"},
                    "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "busybox"}]},
                }
            )
        )
        kubectl = [_kubectl(), "--kubeconfig", str(kubeconfig)]
        subprocess.run([*kubectl, "apply", "-f", str(manifest)], check=True, capture_output=True, timeout=60)
        got = subprocess.run(
            [*kubectl, "get", "pods", "-o", "wide"], check=True, capture_output=True, text=True, timeout=60
        )
        assert re.search(r"hello\s+0/1\s+Pending", got.stdout), got.stdout
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=20)
        if proc.stdout is not None:
            proc.stdout.close()
    assert proc.returncode == 0


def test_bad_arguments_give_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: Pod\nmetadata: {name: x}\nspec: {}\n")
    assert main(["simulate", "-f", str(bad), "--no-progress"]) == 2
    assert "spec.containers" in capsys.readouterr().err
    assert main(["simulate", "--faults", "error=lots", "--no-progress"]) == 2


def test_metrics_record_syncs_and_requests() -> None:
    metrics = Metrics()
    metrics.count_request("patch")
    metrics.count_request("patch")
    metrics.observe_sync(
        SyncRecord(
            pod_uid="u",
            namespace="ns",
            name="n",
            version=3,
            changed_at=10.0,
            synced_at=10.25,
            patched=True,
            deleted=False,
            requests=1,
        )
    )
    port = free_port()
    metrics.serve(port)
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    assert 'podstatus_api_requests_total{verb="patch"} 2.0' in text
    assert "podstatus_pod_status_sync_duration_seconds_count 1.0" in text
    assert 'podstatus_pod_status_sync_duration_seconds_bucket{le="0.25"} 1.0' in text
    assert 'podstatus_pod_status_sync_duration_seconds_bucket{le="0.1"} 0.0' in text


# --- issue 22: what a newcomer hits first --------------------------------------------------------

README = Path(__file__).resolve().parents[2] / "README.md"


def _console_script() -> str:
    """The installed ``podstatus`` (not ``python -m``, which puts the current folder on sys.path itself)."""
    script = Path(sys.executable).with_name("podstatus")
    assert script.exists(), f"{script}: the console script comes with make install"
    return str(script)


def _bare_env(home: Path) -> dict[str, str]:
    """No cluster configured: an empty HOME, no KUBECONFIG, not in a pod; no PYTHONPATH to the test folder."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("KUBECONFIG", "PYTHONPATH") and not k.startswith("KUBERNETES_")
    }
    env.update(HOME=str(home), COLUMNS="400")
    return env


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[EmbeddedApiServer, Path]]:
    """The embedded API server on loopback and a kubeconfig for it."""
    with EmbeddedApiServer() as server:
        yield server, server.write_kubeconfig(tmp_path / "cluster.kubeconfig")


def _node_exists(client: EmbeddedClient, name: str) -> bool:
    try:
        client.get_node(name)
    except NotFoundError:
        return False
    return True


def _phase(client: EmbeddedClient, name: str) -> str | None:
    try:
        return client.get_pod("default", name).status.phase
    except NotFoundError:
        return None


def _stop(proc: subprocess.Popen[str], sig: int = signal.SIGTERM) -> tuple[int, str, str]:
    if proc.poll() is None:
        proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    return proc.returncode, out, err


def test_a_node_name_given_for_one_node_is_used_as_given(
    cluster: tuple[EmbeddedApiServer, Path], tmp_path: Path
) -> None:
    server, kubeconfig = cluster
    client = EmbeddedClient(server)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "podstatus.cli",
            "node",
            "--name",
            "vn-bar",
            "--kubeconfig",
            str(kubeconfig),
            "--kubelet-port",
            "0",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
    )
    try:
        wait_for(lambda: _node_exists(client, "vn-bar"), 30.0, what="Node vn-bar registered")
        assert not _node_exists(client, "vn-bar-1")
        client.create_pod(
            {
                "metadata": {"name": "web", "namespace": "default"},
                "spec": {"nodeName": "vn-bar", "containers": [{"name": "app", "image": "nginx"}]},
            }
        )
        wait_for(lambda: _phase(client, "web") == "Running", 30.0, what="the pod bound to vn-bar Running")
    finally:
        code, _, err = _stop(proc)
    assert code == 0, err
    usage = subprocess.run(
        [sys.executable, "-m", "podstatus.cli", "node", "--help"], capture_output=True, text=True, env=_env()
    ).stdout
    assert "used as given" in usage and "<name>-1 .. <name>-N" in " ".join(usage.split())


def _readme_provider() -> str:
    """The README's provider example, as a user saves it: its imports and the provider class."""
    text = README.read_text()
    block = text[text.index("```python\nimport time") + len("```python\n") :]
    return block[: block.index("\nserver = EmbeddedApiServer()")]


def test_a_provider_module_in_the_current_folder_and_bad_providers(
    cluster: tuple[EmbeddedApiServer, Path], tmp_path: Path
) -> None:
    server, kubeconfig = cluster
    client = EmbeddedClient(server)
    work = tmp_path / "work"
    work.mkdir()
    (work / "mymod.py").write_text(_readme_provider())
    (work / "badmod.py").write_text(
        "class Broken:\n    def __init__(self):\n        raise RuntimeError('no device at /dev/x')\n"
    )
    env = _bare_env(tmp_path)
    script = _console_script()
    proc = subprocess.Popen(
        [
            script,
            "node",
            "--kubelet-port",
            "0",
            "--name",
            "vn-mine",
            "--kubeconfig",
            str(kubeconfig),
            "--provider",
            "mymod:InstantProvider",
        ],
        cwd=work,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        wait_for(
            lambda: _node_exists(client, "vn-mine"),
            30.0,
            what="Node vn-mine registered with the user's provider",
        )
        # The README's provider says 20 pods: it is that provider that runs the node.
        assert client.get_node("vn-mine")["status"]["capacity"]["pods"] == "20"
    finally:
        code, _, err = _stop(proc)
    assert code == 0, err
    for provider, says in (
        ("nomod:Provider", "No module named 'nomod'"),
        ("badmod:Broken", "RuntimeError: no device at /dev/x"),
        ("mymod:Missing", "has no attribute Missing"),
    ):
        bad = subprocess.run(
            [script, "node", "--kubeconfig", str(kubeconfig), "--provider", provider],
            cwd=work, capture_output=True, text=True, env=env, timeout=60,
        )  # fmt: skip
        assert bad.returncode == 2, bad.stderr
        lines = bad.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"error: --provider {provider}"), bad.stderr
        assert says in lines[0] and "Traceback" not in bad.stderr


def test_a_missing_kubeconfig_is_one_clear_error(tmp_path: Path) -> None:
    env = _bare_env(tmp_path)
    script = _console_script()
    missing = tmp_path / "missing.kubeconfig"
    sim = subprocess.run(
        [script, "simulate", "--kubeconfig", str(missing), "--no-progress"],
        capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip
    assert sim.returncode == 2 and "Traceback" not in sim.stderr, sim.stderr
    assert sim.stderr.strip() == f"error: --kubeconfig {missing}: no such file"
    # No kubeconfig at all: the message names every place the configuration could come from.
    node = subprocess.run([script, "node"], capture_output=True, text=True, env=env, timeout=60)
    assert node.returncode == 2 and "Traceback" not in node.stderr, node.stderr
    for place in ("--kubeconfig", "KUBECONFIG", "~/.kube/config", "KUBERNETES_SERVICE_HOST"):
        assert place in node.stderr, node.stderr


def test_error_text_is_printed_as_text_not_rich_markup(tmp_path: Path) -> None:
    env = _bare_env(tmp_path)
    script = _console_script()
    for name in ("[/x].yaml", "[red]x.yaml", "a:x:b.yaml"):
        proc = subprocess.run(
            [script, "simulate", "-f", name, "--no-progress"],
            cwd=tmp_path, capture_output=True, text=True, env=env, timeout=60,
        )  # fmt: skip
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
        assert f"No such file or directory: '{name}'" in proc.stderr, proc.stderr
    # A server's validation message keeps its regex.
    (tmp_path / "badname.yaml").write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: Bad_Name}\nspec:\n  containers: [{name: c, image: nginx}]\n"
    )
    proc = subprocess.run(
        [script, "simulate", "-f", "badname.yaml", "--no-progress", "--duration", "5"],
        cwd=tmp_path, capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?" in proc.stdout, proc.stdout


def test_verbose_after_the_command_and_every_json_line_is_json(
    cluster: tuple[EmbeddedApiServer, Path],
) -> None:
    server, kubeconfig = cluster
    client = EmbeddedClient(server)
    proc = subprocess.Popen(
        [
            sys.executable, "-m", "podstatus.cli", "node", "-v", "--name", "vn-json",
            "--kubeconfig", str(kubeconfig), "--log-format", "json", "--kubelet-port", "0",
        ],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(),
    )  # fmt: skip
    try:
        wait_for(lambda: _node_exists(client, "vn-json"), 30.0, what="Node vn-json registered")
    finally:
        code, out, err = _stop(proc)
    assert code == 0, err
    lines = [json.loads(line) for line in (out + err).splitlines() if line.strip()]  # each one JSON
    messages = [line["msg"] for line in lines]
    assert any("running against" in m for m in messages), messages
    assert "podstatus node: stopped" in messages
    # -v after the command: info lines are there.
    assert any(line["level"] == "info" and line["msg"].startswith("node agent started") for line in lines)


def test_ctrl_c_during_simulate_prints_the_summary_so_far(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "podstatus.cli", "simulate", "--pods", "30", "--duration", "90", "--no-progress"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(),
    )  # fmt: skip
    assert proc.stdout is not None
    first = proc.stdout.readline()
    kubeconfig = Path(re.findall(r"/\S+kubeconfig", first)[0])
    proc.stdout.readline()  # "Simulating ..."
    # While the run lasts, its kubeconfig reaches its server.
    got = subprocess.run(
        [_kubectl(), "--kubeconfig", str(kubeconfig), "get", "pods"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert got.returncode == 0, got.stderr
    time.sleep(2)
    code, out, err = _stop(proc, signal.SIGINT)
    assert code == 130, err
    assert "Pods by phase" in out and "interrupted: the summary so far" in out, out + err
    assert "Traceback" not in err
    # Its server stopped, the folder it made for the kubeconfig is gone.
    assert not kubeconfig.parent.exists()


def _run_label_pods(client: EmbeddedClient) -> list[Any]:
    pods, _ = client.list_pods(label_selector=RUN_LABEL)
    return pods


def test_simulate_against_a_cluster_leaves_it_as_found_and_runs_twice(
    cluster: tuple[EmbeddedApiServer, Path],
) -> None:
    server, kubeconfig = cluster
    client = EmbeddedClient(server)
    for run in (1, 2):
        proc = subprocess.run(
            [
                sys.executable, "-m", "podstatus.cli", "simulate", "--kubeconfig", str(kubeconfig),
                "--pods", "8", "--duration", "30", "--no-progress",
            ],
            capture_output=True, text=True, env=_env(), timeout=180,
        )  # fmt: skip
        assert proc.returncode == 0, f"run {run}: {proc.stdout}{proc.stderr}"
        assert re.search(r"never created\s+│\s+0 │", proc.stdout) and "FAILED" not in proc.stdout, proc.stdout
        # What is still there at the end (the pods deleted midway are gone already).
        assert re.search(r"Cleaned up: deleted the [1-8] pods and 1 Node\(s\)", proc.stdout), proc.stdout
        assert _run_label_pods(client) == []
        assert not _node_exists(client, "podstatus-node-1")
