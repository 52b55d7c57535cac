"""mypy's proof that every implementation the library ships has its whole protocol.

Nothing here runs: each function's return statement hands implementations
where their protocol is expected, so ``make typecheck`` fails when one drifts
from :mod:`podstatus.protocols` (a parameter renamed, a default dropped, a
type widened). No ``cast``, no ``Any``: an implementation that does not fit
is a type error here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .clients.embedded import EmbeddedClient
    from .clients.fake import FakeKubeClient, FakeNodeClient
    from .clients.http import HttpKubeClient
    from .deletion import FakePodDeletionSafety, StatusBasedDeletionSafety
    from .fakes import FakeStatusManager
    from .manager import Manager
    from .podmanager import BasicPodManager
    from .protocols import (
        KubeClient,
        NodeClient,
        PodDeletionSafety,
        PodManager,
        StatusManager,
        VersionedKubeClient,
    )

__all__: list[str] = []


def _kube_clients(
    http: HttpKubeClient, embedded: EmbeddedClient, fake: FakeKubeClient, fake_node: FakeNodeClient
) -> tuple[KubeClient, KubeClient, KubeClient, KubeClient]:
    return http, embedded, fake, fake_node


def _versioned_kube_clients(
    http: HttpKubeClient, embedded: EmbeddedClient, fake: FakeKubeClient, fake_node: FakeNodeClient
) -> tuple[VersionedKubeClient, VersionedKubeClient, VersionedKubeClient, VersionedKubeClient]:
    return http, embedded, fake, fake_node


def _node_clients(
    http: HttpKubeClient, embedded: EmbeddedClient, fake: FakeNodeClient
) -> tuple[NodeClient, NodeClient, NodeClient]:
    return http, embedded, fake


def _pod_managers(basic: BasicPodManager) -> PodManager:
    return basic


def _deletion_safeties(
    fake: FakePodDeletionSafety, by_status: StatusBasedDeletionSafety
) -> tuple[PodDeletionSafety, PodDeletionSafety]:
    return fake, by_status


def _status_managers(manager: Manager, fake: FakeStatusManager) -> tuple[StatusManager, StatusManager]:
    return manager, fake
