"""A provider with every kubelet API capability (for the kubelet API tests), and TLS helpers.

:class:`CapableProvider` is a :class:`FakeProvider` that also answers logs (plain and
followed), exec and attach (a few commands, sync and ``async def`` alike), port-forward
(an echo per port) and a stats summary. Client certificates for the callers are issued
by :func:`issue_client_cert`.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from podstatus.node.capabilities import ExecIO, LogOptions, PortStream
from podstatus.node.provider import FakeProvider


class CapableProvider(FakeProvider):
    """Logs are ``line 1`` .. ``line 5`` per container; a followed log then waits for
    :meth:`add_log_line` until :meth:`end_logs` (or the caller leaves)."""

    def __init__(self, node_name: str = "vn-1") -> None:
        super().__init__()
        self.node_name = node_name
        self.log_options: list[LogOptions] = []
        self.extra_lines: list[bytes] = []
        self._log_cond = threading.Condition()
        self._logs_ended = False
        self.follow_closed = threading.Event()
        self.exec_commands: list[list[str]] = []
        self.max_buffered = 0
        self.received: list[int] = []  # bytes the slow reader (port 82) got, per connection

    # -- logs (plain method: bytes, or a generator when following) ---------------------

    def add_log_line(self, line: str) -> None:
        with self._log_cond:
            self.extra_lines.append(line.encode() + b"\n")
            self._log_cond.notify_all()

    def end_logs(self) -> None:
        with self._log_cond:
            self._logs_ended = True
            self._log_cond.notify_all()

    def get_container_logs(
        self, namespace: str, pod: str, container: str, options: LogOptions
    ) -> bytes | Iterator[bytes]:
        self.log_options.append(options)
        if options.previous:
            raise ValueError(f'previous terminated container "{container}" in pod "{pod}" not found')
        lines = [f"{container} line {i}\n".encode() for i in range(1, 6)]
        if options.tail_lines is not None:
            lines = lines[len(lines) - options.tail_lines :] if options.tail_lines else []
        if not options.follow:
            return b"".join(lines)
        return self._follow(lines)

    def _follow(self, lines: list[bytes]) -> Iterator[bytes]:
        try:
            yield from lines
            sent = 0
            while True:
                with self._log_cond:
                    self._log_cond.wait_for(lambda n=sent: len(self.extra_lines) > n or self._logs_ended, 10)
                    new = self.extra_lines[sent:]
                    ended = self._logs_ended
                sent += len(new)
                yield from new
                if ended:
                    return
        finally:
            self.follow_closed.set()

    # -- exec (async def) and attach (plain) ----------------------------------------

    async def run_in_container(
        self, namespace: str, pod: str, container: str, command: list[str], io: ExecIO
    ) -> int:
        self.exec_commands.append(command)
        name, *args = command
        if name == "echo":
            assert io.stdout is not None
            io.stdout.write((" ".join(args) + "\n").encode())
            return 0
        if name == "fail":
            if io.stderr is not None:
                io.stderr.write(b"failing\n")
            return int(args[0])
        if name == "cat":
            assert io.stdin is not None and io.stdout is not None
            while chunk := await io.stdin.read():
                io.stdout.write(chunk)
            return 0
        if name == "size":
            size = await asyncio.wait_for(io.resizes.get(), 10)
            assert io.stdout is not None
            io.stdout.write(f"{size.width}x{size.height} tty={io.tty}\n".encode() if size else b"none\n")
            return 0
        if name == "sleep":
            while not io.closed.is_set():
                await asyncio.sleep(0.02)
            self.exec_commands.append(["sleep ended: the caller went away"])
            return 0
        raise RuntimeError(f"no such command: {name}")

    def attach_to_container(self, namespace: str, pod: str, container: str, io: ExecIO) -> int | None:
        # The container's "main process" reads lines and answers them, until stdin ends.
        assert io.stdin is not None and io.stdout is not None
        while chunk := io.stdin.read_blocking(1024, timeout=10):
            io.stdout.write(b"attached:" + chunk)
        return 7 if io.stdin.closed else None

    # -- port-forward (async def): an echo on port 80, refused elsewhere ---------------

    async def port_forward(self, namespace: str, pod: str, port: int, stream: PortStream) -> None:
        if port == 82:
            # A slow reader: what piles up before it reads is what the server buffered.
            await asyncio.sleep(0.5)
            total = 0
            while chunk := await stream.read(1 << 20):
                self.max_buffered = max(self.max_buffered, stream.inbound.buffered + len(chunk))
                total += len(chunk)
            self.received.append(total)
            return
        if port != 80:
            stream.error(f"connection refused on port {port}")
            return
        while chunk := await stream.read():
            stream.write(b"echo:" + chunk)

    # -- stats --------------------------------------------------------------------------

    def get_stats_summary(self) -> dict[str, Any]:
        now = "2026-12-05T12:00:00Z"
        pods = []
        for pod in self.running.values():
            pods.append(
                {
                    "podRef": {
                        "name": pod.metadata.name,
                        "namespace": pod.metadata.namespace,
                        "uid": pod.uid,
                    },
                    "startTime": now,
                    "cpu": {"time": now, "usageNanoCores": 5_000_000, "usageCoreNanoSeconds": 2_500_000_000},
                    "memory": {"time": now, "workingSetBytes": 4096, "usageBytes": 8192},
                    "containers": [
                        {
                            "name": c.name,
                            "startTime": now,
                            "cpu": {
                                "time": now,
                                "usageNanoCores": 5_000_000,
                                "usageCoreNanoSeconds": 2_500_000_000,
                            },
                            "memory": {"time": now, "workingSetBytes": 4096, "usageBytes": 8192},
                        }
                        for c in pod.spec.containers
                    ],
                }
            )
        return {
            "node": {
                "nodeName": self.node_name,
                "startTime": now,
                "cpu": {"time": now, "usageNanoCores": 10_000_000, "usageCoreNanoSeconds": 7_000_000_000},
                "memory": {"time": now, "workingSetBytes": 1_048_576, "usageBytes": 2_097_152},
            },
            "pods": pods,
        }


# --- TLS -------------------------------------------------------------------------------


def issue_client_cert(
    ca_pem: bytes, ca_key_pem: bytes, user: str, groups: tuple[str, ...] = ()
) -> tuple[bytes, bytes]:
    """A client certificate (CN ``user``, O ``groups``) signed by the CA: (cert PEM, key PEM)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    ca = x509.load_pem_x509_certificate(ca_pem)
    ca_key = serialization.load_pem_private_key(ca_key_pem, password=None)
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.UTC)
    subject = x509.Name(
        [x509.NameAttribute(NameOID.ORGANIZATION_NAME, g) for g in groups]
        + [x509.NameAttribute(NameOID.COMMON_NAME, user)]
    )
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    return (
        cert.public_bytes(serialization.Encoding.PEM),
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        ),
    )


def client_context(
    server_ca_pem: bytes, folder: Path, cert: tuple[bytes, bytes] | None = None
) -> ssl.SSLContext:
    """A TLS client context trusting the kubelet API's CA, presenting ``cert`` when given."""
    context = ssl.create_default_context(cadata=server_ca_pem.decode())
    # The trusted certificate may be the server's own (not a CA): trust it as it is.
    context.verify_flags |= ssl.VERIFY_X509_PARTIAL_CHAIN
    if cert is not None:
        crt, key = folder / "client.crt", folder / "client.key"
        crt.write_bytes(cert[0])
        key.write_bytes(cert[1])
        context.load_cert_chain(str(crt), str(key))
    return context


def status_of(frames: list[bytes]) -> dict[str, Any]:
    """The metav1.Status on the error channel (3) of remote command frames."""
    for frame in frames:
        if frame[:1] == b"\x03" and len(frame) > 1:
            result: dict[str, Any] = json.loads(frame[1:])
            return result
    raise AssertionError(f"no status on the error channel in {frames!r}")


# --- client-go's stream clients (tests/kubeletclient) ------------------------------------

CLIENT_SOURCE = Path(__file__).resolve().parents[1] / "kubeletclient"


def build_kubeletclient() -> Path:
    """tests/kubeletclient built once per source hash (cached; seconds with Go's build cache warm)."""
    import hashlib
    import os
    import shutil
    import subprocess

    go = shutil.which("/usr/local/go/bin/go") or shutil.which("go")
    if go is None:
        raise FileNotFoundError("Go is not installed: the client-go stream tests need it")
    digest = hashlib.sha256()
    for path in sorted(CLIENT_SOURCE.iterdir()):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    cache = Path(os.environ.get("PODSTATUS_CLIENTGO_CACHE", Path.home() / ".cache" / "podstatus-clientgo"))
    target = cache / f"kubeletclient-{digest.hexdigest()[:16]}"
    if not target.exists():
        cache.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f"{target.name}.tmp.{os.getpid()}")
        proc = subprocess.run(
            [go, "build", "-o", str(tmp), "."],
            cwd=CLIENT_SOURCE,
            env={**os.environ, "GOFLAGS": "-mod=mod"},
            capture_output=True,
            text=True,
            timeout=1500,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"go build of tests/kubeletclient failed:\n{proc.stderr}")
        tmp.replace(target)
    return target
