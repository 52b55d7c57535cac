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

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from apisuite_kit import NODE, RawApi, Server

from apiserver_fixture import build_before_tests, running

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
# The first build can take ~10 minutes on a fresh 2-core machine (plus module downloads).
BUILD_TIMEOUT = 1500.0
START_TIMEOUT = 1500.0

_build_error: list[str] = []


def pytest_collection_finish(session: pytest.Session) -> None:
    """Build the apiserver binary (cached) before any test of this suite runs."""
    build_before_tests(session, HERE, "apiserver-suite", _build_error, timeout=BUILD_TIMEOUT)


@pytest.fixture(scope="session")
def real_apiserver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A genuine etcd + kube-apiserver on loopback (TLS + token); yields the kubeconfig path."""
    if _build_error:
        pytest.fail(_build_error[0], pytrace=False)
    kubeconfig = tmp_path_factory.mktemp("real-apiserver") / "kubeconfig"
    with running(
        ["--kubeconfig", str(kubeconfig)], what="kube-apiserver", start_timeout=START_TIMEOUT, stop_timeout=60
    ) as info:
        raw = RawApi.from_kubeconfig(info["KUBECONFIG"])
        raw.ensure_node(NODE)
        raw.close()
        yield info["KUBECONFIG"]


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
