"""podstatus.tls: the TLS material and private files both servers use (the embedded API server
and the node agent's kubelet API), below both so node/ never imports server/."""

from __future__ import annotations

import socket
import ssl
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from podstatus.tls import generate_tls, private_dir, server_context, write_private


def test_a_client_trusting_the_ca_completes_a_handshake_on_loopback() -> None:
    material = generate_tls(["127.0.0.1"])
    context = server_context(material)
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
        served: list[bytes] = []

        def serve_one() -> None:
            conn, _ = listener.accept()
            with context.wrap_socket(conn, server_side=True) as tls_conn:
                served.append(tls_conn.recv(5))
                tls_conn.sendall(b"pong")

        thread = threading.Thread(target=serve_one)
        thread.start()
        client = ssl.create_default_context(cadata=material.ca_pem.decode())
        with (
            socket.create_connection(("127.0.0.1", port), timeout=10) as raw,
            client.wrap_socket(raw, server_hostname="127.0.0.1") as tls_conn,
        ):
            assert tls_conn.version() in ("TLSv1.2", "TLSv1.3")
            tls_conn.sendall(b"ping!")
            assert tls_conn.recv(4) == b"pong"
        thread.join(10)
    assert served == [b"ping!"]


def test_a_client_with_another_ca_is_refused() -> None:
    material, other = generate_tls(), generate_tls()
    context = server_context(material)
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]

        def serve_one() -> None:
            conn, _ = listener.accept()
            try:
                context.wrap_socket(conn, server_side=True).close()
            except (ssl.SSLError, OSError):
                conn.close()

        thread = threading.Thread(target=serve_one)
        thread.start()
        client = ssl.create_default_context(cadata=other.ca_pem.decode())
        with (
            socket.create_connection(("127.0.0.1", port), timeout=10) as raw,
            pytest.raises(ssl.SSLCertVerificationError),
        ):
            client.wrap_socket(raw, server_hostname="127.0.0.1")
        thread.join(10)


def test_private_files_are_owner_only_and_never_written_through_a_symlink(tmp_path: Path) -> None:
    folder = private_dir()
    try:
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700
        written = write_private(folder / "key", b"secret")
        assert written.read_bytes() == b"secret"
        assert stat.S_IMODE(written.stat().st_mode) == 0o600
        (folder / "link").symlink_to(tmp_path / "elsewhere")
        with pytest.raises(PermissionError):
            write_private(folder / "link", b"x")
        assert not (tmp_path / "elsewhere").exists()
    finally:
        for p in folder.iterdir():
            p.unlink()
        folder.rmdir()


def test_the_node_agent_loads_without_the_api_server_package() -> None:
    # node/ used to import its TLS helpers from server/security.py.
    code = (
        "import sys, podstatus.node.agent, podstatus.node.command, podstatus.node.kubeletapi, "
        "podstatus.node.servingcert; print(sorted(m for m in sys.modules if m.startswith('podstatus.server')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
