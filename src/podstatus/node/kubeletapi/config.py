"""How a process's kubelet API listens and whom it lets in."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...tls import TlsMaterial

__all__ = ["KubeletAPIConfig"]


@dataclass(frozen=True)
class KubeletAPIConfig:
    """How the kubelet API of a process listens and whom it lets in.

    ``address``: where every node's socket listens. ``tls``: the serving certificate
    (None: a fresh self-signed one for ``address`` and the node names). ``client_ca_pem``:
    client certificates signed by it authenticate (CN the user, O the groups).
    ``token_webhook``: bearer tokens authenticate through a TokenReview. ``authorization``:
    ``"AlwaysAllow"`` or ``"Webhook"`` (SubjectAccessReview). ``reviewer``: the client the
    reviews (and certificate requests) are created with (the agent's).
    ``rotate_server_certificates``: each node asks for its serving certificate with a
    ``kubernetes.io/kubelet-serving`` CSR and renews it (:mod:`..servingcert`). ``stream_threads``: most provider calls (plain
    methods) running at once; each stream holds one for its length.
    """

    address: str = "127.0.0.1"
    tls: TlsMaterial | None = None
    client_ca_pem: bytes | None = None
    token_webhook: bool = False
    authorization: str = "AlwaysAllow"
    reviewer: Any = None
    stream_threads: int = 512
    rotate_server_certificates: bool = False
    csr_expiration_seconds: int | None = None
    csr_renew_fraction: float = 0.8

    def __post_init__(self) -> None:
        if self.authorization not in ("AlwaysAllow", "Webhook"):
            raise ValueError(f"authorization must be AlwaysAllow or Webhook, got {self.authorization!r}")
        if (
            self.token_webhook or self.authorization == "Webhook" or self.rotate_server_certificates
        ) and self.reviewer is None:
            raise ValueError("webhooks and certificate requests need a reviewer (an API client)")
