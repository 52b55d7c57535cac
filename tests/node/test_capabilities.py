"""The provider capability I/O objects: usable from a thread and from a coroutine alike."""

from __future__ import annotations

import asyncio
import threading

import pytest

from podstatus.node.capabilities import Channel, PortStream, TermSize, has_capability
from podstatus.node.provider import FakeProvider


def test_pipe_written_from_a_thread_is_read_by_a_coroutine_until_eof() -> None:
    stream = PortStream(80)

    def writer() -> None:
        for i in range(100):
            stream.write(f"{i},".encode())
        stream.close()

    async def reader() -> bytes:
        out = b""
        while True:
            chunk = await stream.outbound.read(7)
            if not chunk:
                return out
            assert len(chunk) <= 7
            out += chunk

    async def main() -> bytes:
        task = asyncio.create_task(reader())
        await asyncio.sleep(0)
        threading.Thread(target=writer).start()
        return await asyncio.wait_for(task, 10)

    assert asyncio.run(main()) == b"".join(f"{i},".encode() for i in range(100))
    assert stream.outbound.closed


def test_pipe_written_from_a_coroutine_is_read_by_a_blocked_thread() -> None:
    stream = PortStream(80)
    got: list[bytes] = []

    def reader() -> None:
        while chunk := stream.read_blocking(4, timeout=10):
            got.append(chunk)

    thread = threading.Thread(target=reader)
    thread.start()
    stream.inbound.write(b"hello world")
    stream.inbound.close()
    thread.join(10)
    assert b"".join(got) == b"hello world"
    # A timeout gives b"" without closing: told apart by `closed`.
    other = PortStream(81)
    assert other.read_blocking(4, timeout=0.01) == b"" and not other.inbound.closed


def test_channel_gives_items_then_none_when_closed() -> None:
    channel: Channel[TermSize] = Channel()

    async def main() -> list[TermSize | None]:
        channel.put(TermSize(80, 24))
        first = await channel.get()
        threading.Timer(0.05, lambda: (channel.put(TermSize(100, 40)), channel.close())).start()
        return [first, await channel.get(), await channel.get()]

    assert asyncio.run(main()) == [TermSize(80, 24), TermSize(100, 40), None]
    assert channel.get_blocking(0.01) is None


def test_has_capability_tells_the_fake_provider_lacks_them_and_names_are_checked() -> None:
    provider = FakeProvider()
    assert not has_capability(provider, "run_in_container")

    class Logs:
        def get_container_logs(self, *args: object) -> bytes:
            return b""

    assert has_capability(Logs(), "get_container_logs")
    with pytest.raises(ValueError, match="unknown capability"):
        has_capability(provider, "get_logs")
