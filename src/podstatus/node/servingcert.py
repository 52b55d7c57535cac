"""The kubelet API's serving certificate from a ``kubernetes.io/kubelet-serving`` CSR, rotated.

As the kubelet's ``--rotate-server-certificates``: a key of its own per node, a
CertificateSigningRequest (CN ``system:node:<name>``, O ``system:nodes``, the node's address and
name as SANs, usages digital signature + server auth) that someone approves (the kubelet-serving
signer is never auto-approved) and kube-controller-manager signs; the issued certificate goes
into the node's live TLS context (new connections use it at once), and a new request is made
when ``renew_fraction`` of its lifetime has passed. Until the first one is issued the node
serves its self-signed certificate (the kubelet would refuse TLS instead; serving lets logs of
already-trusting callers work and keeps the node's health endpoint up).
"""

from __future__ import annotations

import base64
import datetime as dt
import ipaddress
import json
import logging
import shutil
import ssl
import threading
from typing import Any

from ..tls import private_dir, write_private
from .logs import log_fields

__all__ = ["ServingCertRotator", "csr_for"]

log = logging.getLogger(__name__)

SIGNER = "kubernetes.io/kubelet-serving"
CSR_PATH = "/apis/certificates.k8s.io/v1/certificatesigningrequests"


def csr_for(node_name: str, address: str) -> tuple[bytes, bytes]:
    """A fresh EC key and a CSR for the node's serving certificate: (CSR PEM, key PEM)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    names: list[x509.GeneralName] = [x509.DNSName(node_name)]
    try:
        names.append(x509.IPAddress(ipaddress.ip_address(address)))
    except ValueError:
        names.append(x509.DNSName(address))
    request = (
        x509.CertificateSigningRequestBuilder()
        .subject_name(
            x509.Name(
                [
                    x509.NameAttribute(NameOID.ORGANIZATION_NAME, "system:nodes"),
                    x509.NameAttribute(NameOID.COMMON_NAME, f"system:node:{node_name}"),
                ]
            )
        )
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .sign(key, hashes.SHA256())
    )
    return (
        request.public_bytes(serialization.Encoding.PEM),
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        ),
    )


def _lifetime(cert_pem: bytes) -> tuple[dt.datetime, dt.datetime]:
    from cryptography import x509

    cert = x509.load_pem_x509_certificate(cert_pem)
    return cert.not_valid_before_utc, cert.not_valid_after_utc


def load_into(context: ssl.SSLContext, cert_pem: bytes, key_pem: bytes) -> None:
    """Replace the context's certificate (new handshakes use it; ssl loads keys from files only)."""
    folder = private_dir("podstatus-kubelet-serving-")
    try:
        cert, key = folder / "tls.crt", folder / "tls.key"
        write_private(cert, cert_pem)
        write_private(key, key_pem)
        context.load_cert_chain(cert, key)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


class ServingCertRotator:
    """Requests, installs and renews one node's serving certificate (a thread of its own)."""

    def __init__(
        self,
        client: Any,
        node_name: str,
        address: str,
        context: ssl.SSLContext,
        *,
        renew_fraction: float = 0.8,
        poll_interval: float = 1.0,
        expiration_seconds: int | None = None,
    ) -> None:
        if not 0 < renew_fraction < 1:
            raise ValueError("renew_fraction must be between 0 and 1")
        self.client = client
        self.node_name = node_name
        self.address = address
        self.context = context
        self.renew_fraction = renew_fraction
        self.poll_interval = poll_interval
        self.expiration_seconds = expiration_seconds
        self.issued: list[str] = []  # names of the CSRs whose certificates were installed
        self.current: bytes | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"serving-cert-{node_name}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                cert, key, name = self._request()
            except Exception as err:
                log_fields(log, logging.WARNING, "serving certificate request failed", node=self.node_name,
                           error=f"{type(err).__name__}: {err}")  # fmt: skip
                self._stop.wait(10)
                continue
            if cert is None:
                return  # stopped while waiting
            load_into(self.context, cert, key)
            self.current = cert
            self.issued.append(name)
            start, end = _lifetime(cert)
            renew_at = start + (end - start) * self.renew_fraction
            log_fields(log, logging.INFO, "serving certificate installed", node=self.node_name, csr=name,
                       expires=end.isoformat(), renew=renew_at.isoformat())  # fmt: skip
            wait = (renew_at - dt.datetime.now(dt.UTC)).total_seconds()
            self._stop.wait(max(1.0, wait))

    def _request(self) -> tuple[bytes | None, bytes, str]:
        request_pem, key_pem = csr_for(self.node_name, self.address)
        spec: dict[str, Any] = {
            "request": base64.b64encode(request_pem).decode(),
            "signerName": SIGNER,
            "usages": ["digital signature", "server auth"],
        }
        if self.expiration_seconds is not None:
            spec["expirationSeconds"] = self.expiration_seconds
        body = {
            "apiVersion": "certificates.k8s.io/v1",
            "kind": "CertificateSigningRequest",
            "metadata": {"generateName": f"csr-{self.node_name}-"},
            "spec": spec,
        }
        created = self.client._create_object(CSR_PATH, body)
        name = str(created["metadata"]["name"])
        log_fields(log, logging.INFO, "serving certificate requested", node=self.node_name, csr=name)
        while not self._stop.wait(self.poll_interval):
            resp = self.client._request("get", "GET", f"{CSR_PATH}/{name}")
            csr = json.loads(resp.data)
            status = csr.get("status") or {}
            for condition in status.get("conditions") or ():
                if condition.get("type") in ("Denied", "Failed") and condition.get("status") == "True":
                    raise RuntimeError(f"CSR {name} {condition['type']}: {condition.get('message', '')}")
            if status.get("certificate"):
                return base64.b64decode(status["certificate"]), key_pem, name
        return None, key_pem, name
