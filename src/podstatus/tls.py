"""TLS material and private files, for any podstatus server: the embedded API server and the
node agent's kubelet API both use them, so they live below both.

- :func:`generate_tls`: a CA and a serving certificate it signs for loopback plus given hosts;
  :func:`server_context` turns such material into an ``ssl.SSLContext``.
- :func:`write_private`: a file readable by its owner only (0600), made with
  O_EXCL|O_NOFOLLOW and renamed into place; a symlink at the target is refused.
"""

from __future__ import annotations

import datetime as dt
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
    "VALIDITY",
    "TlsMaterial",
    "generate_ca",
    "generate_tls",
    "issue_serving_cert",
    "private_dir",
    "server_context",
    "write_private",
]

log = logging.getLogger(__name__)

# Certificates outlive any test or demo run; short enough that a leaked one ages out.
VALIDITY = dt.timedelta(days=30)


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
        .not_valid_after(now + VALIDITY)
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
        .not_valid_after(now + VALIDITY)
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
