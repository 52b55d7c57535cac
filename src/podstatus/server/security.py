"""Access to ``podstatus serve``: a bearer token, optional TLS, and a private kubeconfig file.

- The token is random (``secrets``), compared in constant time; a request without it
  gets kube-apiserver's 401 ``Status``.
- TLS material (made by :mod:`podstatus.tls`): a CA, and a serving certificate it signs for
  127.0.0.1, ::1, localhost and the listen host. The CA goes into the kubeconfig as
  ``certificate-authority-data``.
  ``EmbeddedApiServer(tls=True)`` makes it fresh and writes nothing but the kubeconfig;
  ``podstatus serve`` keeps it, with the token, in a state folder (:func:`load_credentials`)
  so a restarted server is the one its clients trust.
- The kubeconfig holds the token, so it is written 0600 (:func:`podstatus.tls.write_private`).
"""

from __future__ import annotations

import datetime as dt
import hmac
import ipaddress
import json
import logging
import os
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..tls import VALIDITY, TlsMaterial, generate_ca, issue_serving_cert, write_private

__all__ = [
    "KUBELET_CLIENT_CA_FILE",
    "STATE_FILE",
    "Credentials",
    "bearer_ok",
    "default_state_dir",
    "generate_token",
    "is_loopback",
    "issue_client_cert",
    "load_credentials",
]

log = logging.getLogger(__name__)


def generate_token() -> str:
    return secrets.token_urlsafe(32)


def bearer_ok(authorization: str | None, token: str) -> bool:
    """Whether an ``Authorization`` header carries ``token`` (constant-time comparison)."""
    if not authorization:
        return False
    scheme, _, value = authorization.strip().partition(" ")
    if scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(value.strip().encode(), token.encode())


def is_loopback(host: str) -> bool:
    """True for addresses only this machine reaches (127.0.0.0/8, ::1, localhost)."""
    if host.lower() in ("localhost", "localhost."):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


# The identity kube-apiserver presents to kubelets in a kubeadm cluster (its
# --kubelet-client-certificate); system:masters so that a kubelet that authorizes callers
# through SubjectAccessReview lets it through as it lets kube-apiserver.
KUBELET_CLIENT_NAME = "kube-apiserver-kubelet-client"
KUBELET_CLIENT_GROUP = "system:masters"


def issue_client_cert(
    ca_pem: bytes, ca_key_pem: bytes, common_name: str = KUBELET_CLIENT_NAME,
    organization: str = KUBELET_CLIENT_GROUP,
) -> tuple[bytes, bytes]:  # fmt: skip
    """A client certificate (clientAuth only) and its key, PEM, signed by the given CA."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = dt.datetime.now(dt.UTC)
    ca_cert = x509.load_pem_x509_certificate(ca_pem)
    ca_key = serialization.load_pem_private_key(ca_key_pem, password=None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise ValueError("the CA key is not an EC key")
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization),
            x509.NameAttribute(NameOID.COMMON_NAME, common_name),
        ]
    )
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + VALIDITY)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return cert.public_bytes(serialization.Encoding.PEM), key_pem


# --- credentials kept across restarts -------------------------------------------------------

STATE_FILE = "serve-state.json"
# The CA that signed serve's kubelet client certificate, for `podstatus node --kubelet-client-ca`
# (the same CA as the kubeconfig's: kubeadm's kubelets trust the cluster CA for clients too).
KUBELET_CLIENT_CA_FILE = "kubelet-client-ca.crt"
# Material this close to its end is made anew at start (clients re-read the kubeconfig).
_RENEW_BEFORE = dt.timedelta(days=1)


def default_state_dir() -> Path:
    """Where ``podstatus serve`` keeps its CA, serving key and token: ``$XDG_STATE_HOME/podstatus/serve``
    (``~/.local/state/podstatus/serve`` without it)."""
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "podstatus" / "serve"


@dataclass(frozen=True, slots=True)
class Credentials:
    """What a server uses: its token and TLS material (None when off), and what was made anew."""

    token: str | None
    tls: TlsMaterial | None
    made: tuple[str, ...] = ()
    # The kubelet client certificate and key (PEM), with TLS.
    kubelet_client: tuple[bytes, bytes] | None = None


def load_credentials(
    state_dir: str | os.PathLike[str], hosts: Sequence[str], *, token: bool, tls: bool
) -> Credentials:
    """The token and TLS material kept in ``state_dir``, made (and kept) when missing or due.

    The same folder gives the same CA, serving certificate and token at every start, so a
    restarted server's clients keep working. The serving certificate is issued again (by
    the same CA) when ``hosts`` change or it nears its end; the CA is made again only near
    its own end. One file, ``serve-state.json``, mode 0600 in a 0700 folder, written whole
    (:func:`write_private`) under a lock, so two servers starting at once agree. A file that
    cannot be read is an error naming it: nothing is overwritten.
    """
    import fcntl

    folder = Path(state_dir)
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = folder / STATE_FILE
    lock_fd = os.open(
        folder / ".lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), 0o600
    )
    try:
        fcntl.flock(lock_fd, fcntl.LOCK_EX)
        state = _read_state(path)
        made: list[str] = []
        want_hosts = sorted({h for h in hosts if h})
        if token and not state.get("token"):
            state["token"] = generate_token()
            made.append("token")
        material: TlsMaterial | None = None
        client: tuple[bytes, bytes] | None = None
        if tls:
            now = dt.datetime.now(dt.UTC)
            if not state.get("caCert") or _expires(state["caCert"]) - now < _RENEW_BEFORE:
                state["caCert"], state["caKey"] = (pem.decode() for pem in generate_ca())
                state.pop("cert", None)
                made.append("CA")
            if (
                not state.get("cert")
                or state.get("hosts") != want_hosts
                or _expires(state["cert"]) - now < _RENEW_BEFORE
            ):
                issued = issue_serving_cert(state["caCert"].encode(), state["caKey"].encode(), want_hosts)
                state["cert"], state["key"] = issued.cert_pem.decode(), issued.key_pem.decode()
                state["hosts"] = want_hosts
                made.append("serving certificate")
            material = TlsMaterial(state["caCert"].encode(), state["cert"].encode(), state["key"].encode())
            if (
                "CA" in made
                or not state.get("kubeletClientCert")
                or _expires(state["kubeletClientCert"]) - now < _RENEW_BEFORE
            ):
                cert, key = issue_client_cert(state["caCert"].encode(), state["caKey"].encode())
                state["kubeletClientCert"], state["kubeletClientKey"] = cert.decode(), key.decode()
                made.append("kubelet client certificate")
            client = (state["kubeletClientCert"].encode(), state["kubeletClientKey"].encode())
            ca_file = folder / KUBELET_CLIENT_CA_FILE
            if "CA" in made or not ca_file.exists():
                write_private(ca_file, state["caCert"].encode())
        if made:
            write_private(path, json.dumps(state, indent=1).encode() + b"\n")
            log.info("server credentials made", extra={"path": str(path), "made": ", ".join(made)})
        return Credentials(
            token=state.get("token") if token else None, tls=material, made=tuple(made),
            kubelet_client=client if tls else None,
        )  # fmt: skip
    finally:
        os.close(lock_fd)


def _read_state(path: Path) -> dict[str, Any]:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return {}
    except OSError as err:
        raise ValueError(f"cannot read {path}: {err.strerror}") from None
    with os.fdopen(fd, "rb") as f:
        raw = f.read()
    try:
        state = json.loads(raw)
        if not isinstance(state, dict):
            raise ValueError("not a JSON object")
        for key in ("token", "caCert", "caKey", "cert", "key", "kubeletClientCert", "kubeletClientKey"):
            if key in state and not isinstance(state[key], str):
                raise ValueError(f"{key} is not a string")
        for key in ("caCert", "cert", "kubeletClientCert"):
            if state.get(key):
                _expires(state[key])
    except ValueError as err:
        raise ValueError(
            f"{path} is not a podstatus serve state file ({err}); remove it to start with new credentials"
        ) from None
    return state


def _expires(cert_pem: str) -> dt.datetime:
    from cryptography import x509

    return x509.load_pem_x509_certificate(cert_pem.encode()).not_valid_after_utc
