"""The SPDY/3.1 framing of the port-forward tunnel: header blocks round-trip through the shared
zlib contexts, frames split across WebSocket messages are put back together, and bad input
(another SPDY version, a header block that inflates past 1 MiB) is refused."""

from __future__ import annotations

import struct
import zlib

import pytest

from podstatus.node import spdy


def syn_stream(codec: spdy.HeaderCodec, stream_id: int, headers: dict[str, str]) -> bytes:
    body = struct.pack(">IIBB", stream_id, 0, 0, 0) + codec.encode(headers)
    return spdy.control_frame(spdy.SYN_STREAM, 0, body)


def test_frames_split_anywhere_are_read_back_with_their_headers() -> None:
    client, server = spdy.HeaderCodec(), spdy.HeaderCodec()
    wire = (
        syn_stream(client, 1, {"streamtype": "error", "port": "80", "requestid": "0"})
        + syn_stream(client, 3, {"streamtype": "data", "port": "80", "requestid": "0"})
        + spdy.data_frame(3, spdy.DATA_FIN, b"hello")
        + spdy.control_frame(spdy.PING, 0, struct.pack(">I", 7))
    )
    reader = spdy.FrameReader(server)
    frames = []
    for i in range(0, len(wire), 5):  # five bytes per "WebSocket message"
        frames += reader.feed(wire[i : i + 5])
    assert [(f.type, f.stream_id) for f in frames] == [(1, 1), (1, 3), (0, 3), (6, 7)]
    assert frames[1].headers == {"streamtype": "data", "port": "80", "requestid": "0"}
    assert frames[2].payload == b"hello" and frames[2].flags == spdy.DATA_FIN


def test_another_version_and_a_header_bomb_are_refused() -> None:
    reader = spdy.FrameReader(spdy.HeaderCodec())
    with pytest.raises(ValueError, match="version 2"):
        reader.feed(struct.pack(">HHI", 0x8000 | 2, spdy.SYN_STREAM, 0))
    bomb = zlib.compressobj(9, zlib.DEFLATED, 15, 8, zlib.Z_DEFAULT_STRATEGY, spdy.HEADER_DICTIONARY)
    block = bomb.compress(struct.pack(">I", 1) + struct.pack(">I", 1) + b"a" + struct.pack(">I", 1 << 21))
    block += bomb.compress(b"x" * (1 << 21)) + bomb.flush(zlib.Z_SYNC_FLUSH)
    frame = spdy.control_frame(spdy.SYN_STREAM, 0, struct.pack(">IIBB", 1, 0, 0, 0) + block)
    with pytest.raises(ValueError, match="over 1 MiB"):
        spdy.FrameReader(spdy.HeaderCodec()).feed(frame)
