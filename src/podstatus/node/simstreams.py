"""Exec, attach and port-forward of the simulated provider.

- exec (only when the node was started with ``--sim-exec``): the command runs on
  this machine, in a folder of its own per container, with the container's
  environment; its exit code is the answer; with a terminal it runs on a pty
  and follows the caller's resizes.
- attach: the container's output from now on (its log, see :mod:`.simlogs`);
  what the caller types is printed by the container, as one running ``cat``
  would. It ends with the container's exit code, or when the caller leaves.
- port-forward: every declared ``containerPort`` has a responder in this
  process (no socket): HTTP requests get ``200`` and a body naming the pod,
  container and port; anything else is echoed back.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
import signal
import struct
import sys
import termios
from collections.abc import Mapping
from pathlib import Path

from .capabilities import ExecIO, Pipe, PortStream, TermSize
from .simlogs import ContainerLog

__all__ = ["SimulatedError", "attach", "exec_locally", "respond"]

log = logging.getLogger(__name__)

# Requests whose first word is one of these get the HTTP responder; anything else, the echo.
_HTTP_METHODS = (b"GET ", b"HEAD ", b"POST ", b"PUT ", b"DELETE ", b"PATCH ", b"OPTIONS ")
_MAX_HEAD = 64 * 1024


# Run in a new session on the pty: take it as the controlling terminal, then become the command.
_CONTROLLING_TTY = """\
import fcntl, os, sys, termios
fcntl.ioctl(0, termios.TIOCSCTTY, 0)
try:
    os.execvp(sys.argv[1], sys.argv[1:])
except OSError as err:
    sys.stderr.write(
        "OCI runtime exec failed: exec failed: unable to start container process: "
        f'exec: "{sys.argv[1]}": {err.strerror}: unknown\\r\\n'
    )
    sys.exit(126)
"""


class SimulatedError(Exception):
    """An answer of the simulated node's kubelet API other than success: ``status`` is the HTTP
    code the kubelet gives for it (404 no such pod, 400 not possible now, 501 not supported)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


# -- exec -------------------------------------------------------------------------------------


async def exec_locally(command: list[str], folder: Path, env: Mapping[str, str], io: ExecIO) -> int:
    """Run ``command`` in ``folder`` with ``env``; stream it through ``io``; its exit code."""
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    if io.tty:
        return await _exec_tty(command, folder, env, io)
    try:
        proc = await asyncio.create_subprocess_exec(
            *command,
            cwd=folder,
            env=dict(env),
            stdin=asyncio.subprocess.PIPE if io.stdin is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,  # its own process group: stopping it stops its children
        )
    except OSError as err:
        return _not_started(command, err, io)
    tasks = [
        asyncio.ensure_future(_pump_out(proc.stdout, io.stdout)),
        asyncio.ensure_future(_pump_out(proc.stderr, io.stderr)),
    ]
    if io.stdin is not None and proc.stdin is not None:
        tasks.append(asyncio.ensure_future(_pump_in(io, proc.stdin)))
    code = await _wait(proc, io)
    for t in tasks:
        if not t.done():
            with contextlib.suppress(asyncio.TimeoutError, TimeoutError):
                await asyncio.wait_for(asyncio.shield(t), 1.0)
        t.cancel()
    return code


def _not_started(command: list[str], err: OSError, io: ExecIO) -> int:
    """What containerd says when the command is not there (exit 126), on the error stream."""
    text = (
        f"OCI runtime exec failed: exec failed: unable to start container process: "
        f'exec: "{command[0]}": {err.strerror or err}: unknown\r\n'
    ).encode()
    out = io.stderr if io.stderr is not None else io.stdout
    if out is not None:
        out.write(text)
    return 126


async def _pump_out(reader: asyncio.StreamReader | None, pipe: Pipe | None) -> None:
    if reader is None:
        return
    while True:
        data = await reader.read(65536)
        if not data:
            return
        if pipe is not None:
            pipe.write(data)


async def _pump_in(io: ExecIO, writer: asyncio.StreamWriter) -> None:
    assert io.stdin is not None
    try:
        while data := await io.stdin.read(65536):
            writer.write(data)
            await writer.drain()
    except (BrokenPipeError, ConnectionResetError):
        return  # the command stopped reading
    finally:
        with contextlib.suppress(OSError, RuntimeError):
            writer.close()


async def _wait(proc: asyncio.subprocess.Process, io: ExecIO) -> int:
    """The exit code; when the caller goes away first, the command's process group is stopped."""
    while True:
        try:
            code = await asyncio.wait_for(asyncio.shield(proc.wait()), 0.25)
            break
        except TimeoutError:
            if io.closed.is_set():
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, signal.SIGKILL)
    # As a shell reports it: killed by a signal N is 128 + N.
    return code if code >= 0 else 128 - code


async def _exec_tty(command: list[str], folder: Path, env: Mapping[str, str], io: ExecIO) -> int:
    import pty

    master, slave = pty.openpty()
    first = io.resizes.get_blocking(0)  # kubectl sends the size first: start at it
    if first is not None:
        _set_size(master, first)
    try:
        # Through a shim that makes the pty its controlling terminal (subprocess cannot, short of
        # preexec_fn, unsafe with threads): then Ctrl-C typed by the caller interrupts it.
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-I",  # the container's PYTHON* variables do not reach the shim
            "-S",
            "-c",
            _CONTROLLING_TTY,
            *command,
            cwd=folder,
            env={"TERM": "xterm", **env},
            stdin=slave,
            stdout=slave,
            stderr=slave,
            start_new_session=True,
        )
    except OSError as err:
        os.close(master)
        os.close(slave)
        return _not_started(command, err, io)
    os.close(slave)  # the child has its copy: EOF on the master once it exits
    os.set_blocking(master, False)
    loop = asyncio.get_running_loop()
    done = loop.create_future()

    def readable() -> None:
        try:
            data = os.read(master, 65536)
        except BlockingIOError:
            return
        except OSError:
            data = b""  # EIO: the terminal's other side is closed
        if data and io.stdout is not None:
            io.stdout.write(data)
        if not data:
            loop.remove_reader(master)
            if not done.done():
                done.set_result(None)

    loop.add_reader(master, readable)

    async def typing() -> None:
        if io.stdin is None:
            return
        while data := await io.stdin.read(65536):
            view = memoryview(data)
            while view:
                try:
                    n = os.write(master, view)
                    view = view[n:]
                except BlockingIOError:
                    await asyncio.sleep(0.01)
                except OSError:
                    return

    async def resizing() -> None:
        while (size := await io.resizes.get()) is not None:
            _set_size(master, size)

    tasks = [asyncio.ensure_future(typing()), asyncio.ensure_future(resizing())]
    try:
        code = await _wait(proc, io)
        with contextlib.suppress(TimeoutError, asyncio.TimeoutError):
            await asyncio.wait_for(done, 1.0)  # what it printed last
    finally:
        for t in tasks:
            t.cancel()
        loop.remove_reader(master)
        os.close(master)
    return code


def _set_size(fd: int, size: TermSize) -> None:
    with contextlib.suppress(OSError):
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", size.height, size.width, 0, 0))


# -- attach -----------------------------------------------------------------------------------


async def attach(container_log: ContainerLog, io: ExecIO) -> int | None:
    """The container's output from now on; what is typed is printed back. The exit code when
    the container ends, None when the caller leaves first."""
    _, seq, closed = container_log.snapshot()
    if closed:
        return container_log.exit_code
    out = io.stdout if io.stdout is not None else io.stderr

    async def typing() -> None:
        if io.stdin is None:
            return
        pending = b""
        while data := await io.stdin.read(65536):
            if io.tty and out is not None:
                out.write(data.replace(b"\r", b"\r\n"))  # the terminal's echo
            pending += data.replace(b"\r", b"\n")
            *whole, pending = pending.split(b"\n")
            for line in whole:
                container_log.write(line.decode("utf-8", "replace"))
        if pending:
            container_log.write(pending.decode("utf-8", "replace"))

    async def caller_gone() -> None:
        while not io.closed.is_set():
            await asyncio.sleep(0.25)

    async def output() -> None:
        async for batch in container_log.follow(seq):
            if out is not None:
                eol = b"\r\n" if io.tty else b"\n"
                out.write(b"".join(text + eol for _, text in batch))

    typing_task = asyncio.ensure_future(typing())
    gone = asyncio.ensure_future(caller_gone())
    follow = asyncio.ensure_future(output())
    try:
        await asyncio.wait({follow, gone}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for t in (typing_task, gone, follow):
            t.cancel()
    if follow.done() and not follow.cancelled() and container_log.closed:
        return container_log.exit_code
    return None


# -- port-forward -----------------------------------------------------------------------------


async def respond(stream: PortStream, banner: str) -> None:
    """The responder of one declared port: HTTP gets ``200 banner``, anything else an echo."""
    buffered = await stream.read()
    if not buffered:
        stream.close()
        return
    if not buffered.startswith(_HTTP_METHODS):
        while buffered:
            stream.write(buffered)
            buffered = await stream.read()
        stream.close()
        return
    body = (banner + "\n").encode()
    while True:
        while b"\r\n\r\n" not in buffered:
            if len(buffered) > _MAX_HEAD:
                stream.write(b"HTTP/1.1 431 Request Header Fields Too Large\r\nConnection: close\r\n\r\n")
                stream.close()
                return
            more = await stream.read()
            if not more:
                stream.close()
                return
            buffered += more
        head, _, buffered = buffered.partition(b"\r\n\r\n")
        request_line, *header_lines = head.split(b"\r\n")
        headers = {}
        for h in header_lines:
            name, _, value = h.partition(b":")
            headers[name.strip().lower()] = value.strip()
        raw_length = headers.get(b"content-length", b"0")
        length = int(raw_length) if raw_length.isdigit() else 0
        while len(buffered) < length:
            more = await stream.read()
            if not more:
                break
            buffered += more
        buffered = buffered[length:]  # the request's body is read and dropped
        method = request_line.split(b" ", 1)[0]
        version = request_line.rsplit(b" ", 1)[-1]
        close = headers.get(b"connection", b"").lower() == b"close" or version == b"HTTP/1.0"
        response = (
            b"HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\n"
            + f"Content-Length: {len(body)}\r\n".encode()
            + (b"Connection: close\r\n" if close else b"")
            + b"\r\n"
            + (body if method != b"HEAD" else b"")
        )
        stream.write(response)
        if close:
            stream.close()
            return
        if not buffered:
            more = await stream.read()
            if not more:
                stream.close()
                return
            buffered = more
