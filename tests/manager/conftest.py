"""Fixtures of the status manager tests; the factories live in ``mgrkit`` (imported by the tests)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from mgrkit import MODES, Clock, World

from podstatus import BasicPodManager
from podstatus.clients.fake import FakeKubeClient
from podstatus.deletion import FakePodDeletionSafety


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def world(clock: Clock) -> Iterator[World]:
    w = World(
        client=FakeKubeClient(clock=clock),
        pods=BasicPodManager(),
        safety=FakePodDeletionSafety(),
        clock=clock,
    )
    yield w
    for m in w.managers:
        m.stop(timeout=2)


@pytest.fixture(params=list(MODES))
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)
