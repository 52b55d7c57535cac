"""Exec, attach and port-forward of the simulated provider, driven through the capability I/O objects."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest
from simkit import pod, provider

from podstatus.node import Timings
from podstatus.node.capabilities import Channel, ExecIO, LogOptions, Pipe, PortStream, TermSize
from podstatus.node.simstreams import SimulatedError


def _io(stdin: bytes | None = None, *, tty: bool = False, size: TermSize | None = None) -> ExecIO:
    io = ExecIO(stdout=Pipe(), stderr=None if tty else Pipe(), tty=tty, resizes=Channel())
    if stdin is not None:
        io.stdin = Pipe()
        io.stdin.write(stdin)
        io.stdin.close()
    if size is not None:
        io.resizes.put(size)
    return io


def _drain(pipe: Pipe | None) -> bytes:
    assert pipe is not None
    out = b""
    while pipe.buffered:
        out += pipe.read_blocking(65536, 0)
    return out


def test_exec_is_refused_clearly_unless_the_node_runs_commands_locally() -> None:
    p = provider()
    try:
        p.create_pod(pod("web"))
        with pytest.raises(SimulatedError) as err:
            asyncio.run(p.run_in_container("default", "web", "app", ["ls"], _io()))
        assert err.value.status == 501
        assert "exec is not supported by the simulated provider of node vn-1" in str(err.value)
        assert "--sim-exec" in str(err.value)
        with pytest.raises(SimulatedError) as err:
            asyncio.run(p.run_in_container("default", "ghost", "app", ["ls"], _io()))
        assert err.value.status == 404
    finally:
        p.close()


def test_exec_runs_locally_in_the_containers_folder_with_its_env_and_exit_code(tmp_path: Path) -> None:
    p = provider(exec_locally=True, exec_root=str(tmp_path))
    env = [
        {"name": "GREETING", "value": "hello from the pod"},
        {"name": "MY_POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
    ]
    try:
        p.create_pod(pod("web", env=env))
        io = _io()
        code = asyncio.run(
            p.run_in_container(
                "default",
                "web",
                "app",
                ["sh", "-c", 'echo "$GREETING $MY_POD"; pwd; echo "$HOME"; echo oops >&2; exit 3'],
                io,
            )
        )
        assert code == 3
        out = _drain(io.stdout).decode().splitlines()
        assert out[0] == "hello from the pod web"
        assert Path(out[1]) == tmp_path / "vn-1" / "default" / "web" / "app"
        assert Path(out[2]) == Path(out[1])  # HOME is the container's folder as well
        assert _drain(io.stderr) == b"oops\n"
    finally:
        p.close()


def test_exec_passes_stdin_and_reports_a_missing_command_as_containerd_does(tmp_path: Path) -> None:
    p = provider(exec_locally=True, exec_root=str(tmp_path))
    try:
        p.create_pod(pod("web"))
        io = _io(b"line one\nline two\n")
        assert asyncio.run(p.run_in_container("default", "web", "app", ["cat"], io)) == 0
        assert _drain(io.stdout) == b"line one\nline two\n"
        io = _io()
        assert asyncio.run(p.run_in_container("default", "web", "app", ["no-such-command-here"], io)) == 126
        assert b'exec: "no-such-command-here"' in _drain(io.stderr)
    finally:
        p.close()


def test_exec_with_a_terminal_runs_on_a_pty_of_the_callers_size(tmp_path: Path) -> None:
    p = provider(exec_locally=True, exec_root=str(tmp_path))
    try:
        p.create_pod(pod("web"))
        io = _io(tty=True, size=TermSize(width=101, height=33))
        code = asyncio.run(
            p.run_in_container("default", "web", "app", ["sh", "-c", "stty size; tty; exit 5"], io)
        )
        assert code == 5
        out = _drain(io.stdout).decode()
        assert "33 101" in out
        assert "/dev/pts/" in out
    finally:
        p.close()


def test_exec_stops_the_command_when_the_caller_goes_away(tmp_path: Path) -> None:
    p = provider(exec_locally=True, exec_root=str(tmp_path))
    try:
        p.create_pod(pod("web"))
        io = _io()
        threading.Timer(0.3, io.closed.set).start()
        code = asyncio.run(
            asyncio.wait_for(p.run_in_container("default", "web", "app", ["sleep", "30"], io), 10)
        )
        assert code == 128 + 9  # killed
    finally:
        p.close()


def test_attach_streams_the_output_and_prints_what_is_typed() -> None:
    p = provider()
    try:
        p.create_pod(pod("web"))
        io = _io(b"hello there\n")

        async def session() -> int | None:
            task = asyncio.ensure_future(p.attach_to_container("default", "web", "app", io))
            await asyncio.sleep(0.3)
            io.closed.set()  # the caller detaches
            return await asyncio.wait_for(task, 5)

        assert asyncio.run(session()) is None
        assert _drain(io.stdout) == b"hello there\n"
        logs = p.get_container_logs("default", "web", "app", LogOptions())
        assert isinstance(logs, bytes) and logs.endswith(b"hello there\n")
    finally:
        p.close()


def test_attach_ends_with_the_containers_exit_code() -> None:
    timings = Timings(
        image_pull=(0.0, 0.0),
        init_run=(0.0, 0.0),
        startup=(0.0, 0.0),
        readiness=(0.0, 0.0),
        job_run=(0.5, 0.5),
        stop=(0.0, 0.0),
    )
    p = provider(timings)
    try:
        p.create_pod(pod("job", "fail", restart="Never"))
        io = _io()
        code = asyncio.run(asyncio.wait_for(p.attach_to_container("default", "job", "app", io), 10))
        assert code == 1
        assert _drain(io.stdout).endswith(b"error: simulated failure; exit code 1\n")
    finally:
        p.close()


async def _forward(p: object, port: int, send: bytes) -> tuple[bytes, list[str]]:
    stream = PortStream(port)
    stream.inbound.write(send)
    stream.inbound.close()
    await asyncio.wait_for(p.port_forward("default", "web", port, stream), 10)  # type: ignore[attr-defined]
    out = b""
    while (chunk := await stream.outbound.read()) != b"":
        out += chunk
    errors = []
    stream.errors.close()
    while (e := await stream.errors.get()) is not None:
        errors.append(e)
    return out, errors


def test_port_forward_answers_http_on_a_declared_port_and_echoes_anything_else() -> None:
    p = provider()
    try:
        p.create_pod(pod("web", ports=[8080]))
        request = (
            b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n" + b"HEAD /x HTTP/1.1\r\nConnection: close\r\n\r\n"
        )
        out, errors = asyncio.run(_forward(p, 8080, request))
        assert errors == []
        body = b"podstatus simulated pod default/web container app port 8080\n"
        first, _, rest = out.partition(b"\r\n\r\n")
        assert first.startswith(b"HTTP/1.1 200 OK") and f"Content-Length: {len(body)}".encode() in first
        assert rest.startswith(body + b"HTTP/1.1 200 OK")  # keep-alive: the second request answered too
        assert rest.endswith(b"Connection: close\r\n\r\n")  # HEAD: no body
        out, errors = asyncio.run(_forward(p, 8080, b"\x00\x01not http\n"))
        assert out == b"\x00\x01not http\n" and errors == []
    finally:
        p.close()


def test_port_forward_to_an_undeclared_port_fails_as_connection_refused() -> None:
    p = provider()
    try:
        p.create_pod(pod("web", ports=[8080]))
        out, errors = asyncio.run(_forward(p, 9999, b"GET / HTTP/1.1\r\n\r\n"))
        assert out == b""
        assert len(errors) == 1 and "failed to connect to localhost:9999" in errors[0]
        assert "connection refused" in errors[0]
    finally:
        p.close()


def test_the_node_command_turns_local_exec_on_only_when_asked() -> None:
    from podstatus.node.command import load_provider

    off = load_provider(None, "vn-3", 2)
    on = load_provider(None, "vn-3", 2, sim_exec=True)
    try:
        assert off.exec_locally is False and on.exec_locally is True
        assert on.node_name == "vn-3"
        with pytest.raises(ValueError, match="--sim-exec is for the simulated provider"):
            load_provider("podstatus.node.provider:FakeProvider", "vn-3", 2, sim_exec=True)
    finally:
        off.close()
        on.close()


def test_local_exec_is_said_loudly_once_per_process(caplog: pytest.LogCaptureFixture, tmp_path: Path) -> None:
    import logging

    from podstatus.node import simulated

    simulated._exec_warned = False  # as in a fresh process
    caplog.set_level(logging.DEBUG, logger="podstatus.node.simulated")
    quiet = provider()
    loud = [provider(exec_locally=True, exec_root=str(tmp_path)) for _ in range(3)]
    try:
        said = [r for r in caplog.records if "runs commands locally" in r.getMessage()]
        assert [r.levelno for r in said] == [logging.WARNING, logging.DEBUG, logging.DEBUG]
        assert str(tmp_path) in said[0].getMessage()
    finally:
        for p in (quiet, *loud):
            p.close()


def test_ctrl_c_typed_on_the_terminal_interrupts_the_command(tmp_path: Path) -> None:
    p = provider(exec_locally=True, exec_root=str(tmp_path))
    try:
        p.create_pod(pod("web"))
        io = ExecIO(stdin=Pipe(), stdout=Pipe(), tty=True, resizes=Channel())
        assert io.stdin is not None

        async def session() -> int:
            task = asyncio.ensure_future(p.run_in_container("default", "web", "app", ["sleep", "30"], io))
            await asyncio.sleep(0.5)  # the command is running on the terminal
            io.stdin.write(b"\x03")
            return await asyncio.wait_for(task, 10)

        assert asyncio.run(session()) == 128 + 2  # SIGINT, sent by the terminal to its foreground job
        io = _io(tty=True)
        assert asyncio.run(p.run_in_container("default", "web", "app", ["no-such-command-here"], io)) == 126
        assert b'exec: "no-such-command-here"' in _drain(io.stdout)
    finally:
        p.close()
