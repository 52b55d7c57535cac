"""Kubernetes clients implementing the kube client protocol of SPEC 2.4."""

from .base import PATCH_CONTENT_TYPE, VERBS, KubeClient, RequestCounter, VersionedKubeClient
from .fake import FakeKubeClient

__all__ = [
    "PATCH_CONTENT_TYPE",
    "VERBS",
    "FakeKubeClient",
    "KubeClient",
    "RequestCounter",
    "VersionedKubeClient",
]
