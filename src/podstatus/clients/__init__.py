"""Kubernetes clients implementing the kube client protocol of SPEC 2.4."""

from typing import TYPE_CHECKING

from .base import (
    PATCH_CONTENT_TYPE,
    VERBS,
    KubeClient,
    NodeClient,
    RequestCounter,
    VersionedKubeClient,
)
from .fake import FakeKubeClient, FakeNodeClient

__all__ = [
    "PATCH_CONTENT_TYPE",
    "VERBS",
    "FakeKubeClient",
    "FakeNodeClient",
    "KubeClient",
    "NodeClient",
    "RequestCounter",
    "VersionedKubeClient",
]

if TYPE_CHECKING:
    from .embedded import EmbeddedClient
    from .http import HttpKubeClient

    def _implement_node_client(
        http: HttpKubeClient, embedded: EmbeddedClient, fake: FakeNodeClient
    ) -> tuple[NodeClient, NodeClient, NodeClient]:
        # mypy checks here that every client has the whole NodeClient protocol, signatures included.
        return http, embedded, fake
