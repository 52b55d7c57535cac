"""Fixtures of the real kube-apiserver suite (``make test-apiserver``).

``real_apiserver`` (session) starts etcd + kube-apiserver v1.37.2 on loopback with
``tests/apiserver/start`` (TLS, a bearer token; see tests/apiserver/README.md) and yields
the kubeconfig path; ``embedded_apiserver`` (session) does the same for podstatus's
embedded server. ``server`` is parametrized over both (``"real"``, ``"embedded"``) for
the comparison tests. One real server per session: it is shared by every test, so
tests use unique pod names (``apisuite_kit.unique``).

The first build of the apiserver binary takes ~7-10 minutes on 2 cores. It is done
once, before the first test runs (``start --build-only`` from
``pytest_collection_finish``, only when tests of this directory were selected), so
the build is not cut by the per-test timeout; its progress goes to stderr.
"""

from __future__ import annotations

import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from apisuite_kit import NODE, RawApi, Server

REPO = Path(__file__).resolve().parents[2]
START = REPO / "tests" / "apiserver" / "start"
HERE = Path(__file__).resolve().parent
# The first build can take ~10 minutes on a fresh 2-core machine (plus module downloads).
BUILD_TIMEOUT = 1500.0
START_TIMEOUT = 1500.0

_build_error: list[str] = []


def _go_env() -> dict[str, str]:
    """The environment for ``start``: Go's usual install dir is added to PATH when go is not on it."""
    env = dict(os.environ)
    if shutil.which("go") is None:
        for candidate in ("/usr/local/go/bin", str(Path.home() / "go" / "bin"), "/usr/lib/go/bin"):
            if Path(candidate, "go").exists():
                env["PATH"] = f"{candidate}{os.pathsep}{env.get('PATH', '')}"
                break
    return env


def _missing_go_message() -> str:
    return (
        "The real kube-apiserver suite needs the Go toolchain (Go >= 1.26) to build "
        "tests/apiserver (etcd + kube-apiserver v1.37.2), and `go` is not on PATH "
        "(nor in /usr/local/go/bin). Install Go, then run `make test-apiserver` again."
    )


def pytest_collection_finish(session: pytest.Session) -> None:
    """Build the apiserver binary (cached) before any test of this suite runs."""
    if not any(Path(str(item.fspath)).resolve().parent == HERE for item in session.items):
        return
    env = _go_env()
    if shutil.which("go", path=env.get("PATH")) is None:
        _build_error.append(_missing_go_message())
        return
    capture = session.config.pluginmanager.getplugin("capturemanager")
    started = time.monotonic()
    with capture.global_and_fixture_disabled() if capture is not None else _nullcontext():
        try:
            proc = subprocess.run(
                [str(START), "--build-only"],
                stdout=sys.stderr,
                stderr=sys.stderr,
                stdin=subprocess.DEVNULL,
                env=env,
                timeout=BUILD_TIMEOUT,
                check=False,
            )
        except subprocess.TimeoutExpired:
            _build_error.append(f"building the kube-apiserver binary took more than {BUILD_TIMEOUT:.0f} s")
            return
    if proc.returncode == 3:
        _build_error.append(
            "`tests/apiserver/start --build-only` failed (exit 3: go missing or the build failed); "
            "its output is above on stderr"
        )
    elif proc.returncode != 0:
        _build_error.append(f"`tests/apiserver/start --build-only` exited with {proc.returncode}")
    elif time.monotonic() - started > 5:
        sys.stderr.write(f"[apiserver-suite] apiserver binary built in {time.monotonic() - started:.0f} s\n")


class _nullcontext:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def _read_lines(stream: Any, out: queue.Queue[str | None]) -> None:
    for line in stream:
        out.put(line)
    out.put(None)


@pytest.fixture(scope="session")
def real_apiserver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A genuine etcd + kube-apiserver on loopback (TLS + token); yields the kubeconfig path."""
    if _build_error:
        pytest.fail(_build_error[0], pytrace=False)
    env = _go_env()
    if shutil.which("go", path=env.get("PATH")) is None:
        pytest.fail(_missing_go_message(), pytrace=False)
    kubeconfig = tmp_path_factory.mktemp("real-apiserver") / "kubeconfig"
    proc = subprocess.Popen(
        [str(START), "--kubeconfig", str(kubeconfig)],
        stdout=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        env=env,
    )  # stderr inherited: build progress and startup logs stay visible
    lines: queue.Queue[str | None] = queue.Queue()
    reader = threading.Thread(target=_read_lines, args=(proc.stdout, lines), daemon=True)
    reader.start()
    info: dict[str, str] = {}
    deadline = time.monotonic() + START_TIMEOUT
    try:
        while "KUBECONFIG" not in info:
            try:
                line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                pytest.fail(f"kube-apiserver was not ready within {START_TIMEOUT:.0f} s", pytrace=False)
            if line is None:
                code = proc.wait(timeout=30)
                hint = " (go missing or the build failed)" if code == 3 else ""
                pytest.fail(f"tests/apiserver/start exited with {code}{hint}; see stderr", pytrace=False)
            key, _, value = line.rstrip("\n").partition("=")
            info[key] = value
        raw = RawApi.from_kubeconfig(info["KUBECONFIG"])
        raw.ensure_node(NODE)
        raw.close()
    except BaseException:
        _stop(proc)
        raise
    try:
        yield info["KUBECONFIG"]
    finally:
        _stop(proc)
        reader.join(timeout=5)
        if proc.stdout is not None:
            proc.stdout.close()


def _stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


@pytest.fixture(scope="session")
def embedded_apiserver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """podstatus's embedded API server on a free loopback port; yields its kubeconfig path."""
    from podstatus.server.http import EmbeddedApiServer

    server = EmbeddedApiServer("127.0.0.1", 0)
    server.start()
    try:
        path = server.write_kubeconfig(tmp_path_factory.mktemp("embedded-apiserver") / "kubeconfig")
        raw = RawApi.from_kubeconfig(path)
        raw.ensure_node(NODE)
        raw.close()
        yield str(path)
    finally:
        server.stop()


@pytest.fixture(scope="session")
def real_server(real_apiserver: str) -> Iterator[Server]:
    raw = RawApi.from_kubeconfig(real_apiserver)
    yield Server("real", real_apiserver, raw)
    raw.close()


@pytest.fixture(scope="session")
def embedded_server(embedded_apiserver: str) -> Iterator[Server]:
    raw = RawApi.from_kubeconfig(embedded_apiserver)
    yield Server("embedded", embedded_apiserver, raw)
    raw.close()


@pytest.fixture(params=["real", "embedded"])
def server(request: pytest.FixtureRequest) -> Server:
    """Each comparison test runs once against the real server and once against the embedded one."""
    srv: Server = request.getfixturevalue(f"{request.param}_server")
    return srv


@pytest.fixture
def real_client(real_apiserver: str) -> Iterator[Any]:
    from podstatus.clients.http import HttpKubeClient

    client = HttpKubeClient.from_kubeconfig(real_apiserver)
    yield client
    client.close()


@pytest.fixture
def other_client(real_apiserver: str) -> Iterator[Any]:
    """A second, independent client: 'another component' writing to the same pods."""
    from podstatus.clients.http import HttpKubeClient

    client = HttpKubeClient.from_kubeconfig(real_apiserver, user_agent="other-controller/1.0")
    yield client
    client.close()
