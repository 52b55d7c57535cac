"""Access to ``podstatus serve``: a bearer token, optional TLS, and a private kubeconfig file.

- The token is random (``secrets``), compared in constant time; a request without it
  gets kube-apiserver's 401 ``Status``.
- TLS material: a CA, and a serving certificate it signs for 127.0.0.1, ::1, localhost
  and the listen host. The CA goes into the kubeconfig as ``certificate-authority-data``.
  ``EmbeddedApiServer(tls=True)`` makes it fresh and writes nothing but the kubeconfig;
  ``podstatus serve`` keeps it, with the token, in a state folder (:func:`load_credentials`)
  so a restarted server is the one its clients trust.
- The kubeconfig holds the token, so it is written 0600, into a fresh file created with
  O_EXCL|O_NOFOLLOW and renamed into place; a symlink at the target is refused.
"""

from __future__ import annotations

import datetime as dt
import hmac
import ipaddress
import json
import logging
import os
import secrets
import shutil
import ssl
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "KUBELET_CLIENT_CA_FILE",
    "STATE_FILE",
    "Credentials",
    "TlsMaterial",
    "bearer_ok",
    "default_state_dir",
    "generate_ca",
    "generate_tls",
    "generate_token",
    "is_loopback",
    "issue_client_cert",
    "issue_serving_cert",
    "load_credentials",
    "private_dir",
    "server_context",
    "write_private",
]

log = logging.getLogger(__name__)

# Certificates outlive any test or demo run; short enough that a leaked one ages out.
_VALIDITY = dt.timedelta(days=30)


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


@dataclass(frozen=True, slots=True)
class TlsMaterial:
    """PEM bytes: the CA certificate clients trust, and the server's certificate and key."""

    ca_pem: bytes
    cert_pem: bytes
    key_pem: bytes


def generate_tls(hosts: Sequence[str] = ()) -> TlsMaterial:
    """A fresh CA and a serving certificate for loopback plus ``hosts`` (IPs or DNS names)."""
    ca_pem, ca_key_pem = generate_ca()
    return issue_serving_cert(ca_pem, ca_key_pem, hosts)


def generate_ca() -> tuple[bytes, bytes]:
    """A fresh CA: its certificate and its private key, PEM."""
    # Imported here: only servers with TLS pay for loading it.
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = dt.datetime.now(dt.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"podstatus-ca-{secrets.token_hex(4)}")])
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + _VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    key_pem = ca_key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return ca_cert.public_bytes(serialization.Encoding.PEM), key_pem


def issue_serving_cert(ca_pem: bytes, ca_key_pem: bytes, hosts: Sequence[str] = ()) -> TlsMaterial:
    """A new serving certificate for loopback plus ``hosts``, signed by the given CA."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = dt.datetime.now(dt.UTC)
    ca_cert = x509.load_pem_x509_certificate(ca_pem)
    ca_key = serialization.load_pem_private_key(ca_key_pem, password=None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise ValueError("the CA key is not an EC key")
    ca_name = ca_cert.subject
    names: list[x509.GeneralName] = [x509.DNSName("localhost")]
    ips = {ipaddress.ip_address("127.0.0.1"), ipaddress.ip_address("::1")}
    for host in hosts:
        try:
            ips.add(ipaddress.ip_address(host.strip("[]")))
        except ValueError:
            if host and host != "localhost":
                names.append(x509.DNSName(host))
    names += [x509.IPAddress(ip) for ip in sorted(ips, key=lambda ip: (ip.version, int(ip)))]
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "podstatus-apiserver")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + _VALIDITY)
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    return TlsMaterial(
        ca_pem=ca_pem,
        cert_pem=cert.public_bytes(serialization.Encoding.PEM),
        key_pem=key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        ),
    )


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
        .not_valid_after(now + _VALIDITY)
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


def server_context(material: TlsMaterial) -> ssl.SSLContext:
    """A server-side TLS context (TLS 1.2+) holding ``material``'s certificate and key."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    # ssl loads keys from files only: a private directory that lives for this call.
    folder = private_dir("podstatus-tls-")
    try:
        cert, key = folder / "tls.crt", folder / "tls.key"
        write_private(cert, material.cert_pem)
        write_private(key, material.key_pem)
        context.load_cert_chain(cert, key)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return context


def private_dir(prefix: str = "podstatus-") -> Path:
    """A fresh directory only this user can enter (``mkdtemp``: 0700, unpredictable name)."""
    return Path(tempfile.mkdtemp(prefix=prefix))


def write_private(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write ``data`` to ``path`` readable by its owner only (0600), never through a symlink.

    The bytes go to a new file made with O_CREAT|O_EXCL|O_NOFOLLOW next to the target,
    then renamed over it: no reader ever sees a partial file or a wider mode, and a
    planted symlink or file at the temporary name makes this fail instead of writing
    somewhere else. A symlink at ``path`` itself is refused.
    """
    target = Path(path)
    if target.is_symlink():
        raise PermissionError(f"refusing to write {target}: it is a symbolic link")
    target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{secrets.token_hex(8)}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(tmp, flags, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    log.debug("wrote private file", extra={"path": str(target), "bytes": len(data)})
    return target


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
