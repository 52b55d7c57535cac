"""Kubernetes clients implementing the kube client protocol of SPEC 2.4."""

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
