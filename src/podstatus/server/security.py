"""Access to ``podstatus serve``: a bearer token, optional TLS, and a private kubeconfig file.

- The token is random (``secrets``), compared in constant time; a request without it
  gets kube-apiserver's 401 ``Status``.
- TLS material is made fresh per server: a CA, and a serving certificate it signs for
  127.0.0.1, ::1, localhost and the listen host. The CA goes into the kubeconfig as
  ``certificate-authority-data``; nothing is written to disk but the kubeconfig.
- The kubeconfig holds the token, so it is written 0600, into a fresh file created with
  O_EXCL|O_NOFOLLOW and renamed into place; a symlink at the target is refused.
"""

from __future__ import annotations

import datetime as dt
import hmac
import ipaddress
import logging
import os
import secrets
import shutil
import ssl
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "TlsMaterial",
    "bearer_ok",
    "generate_tls",
    "generate_token",
    "is_loopback",
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
    # Imported here: only servers with TLS pay for loading it.
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

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
        ca_pem=ca_cert.public_bytes(serialization.Encoding.PEM),
        cert_pem=cert.public_bytes(serialization.Encoding.PEM),
        key_pem=key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        ),
    )


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
