"""SPDY/3.1 framing for port-forward tunnelled in a WebSocket (``SPDY/3.1+portforward.k8s.io``).

kubectl (client-go ≥ 1.31) asks for port-forward as SPDY inside WebSocket binary messages,
and kube-apiserver ≥ 1.36 passes that straight to a node that declares
``ExtendWebSocketsToKubelet``. No maintained Python SPDY library exists; this is the part of
SPDY/3.1 that client-go's ``moby/spdystream`` speaks here (it has no flow control, so neither
has this): SYN_STREAM / SYN_REPLY with zlib-compressed header blocks (one compression
context per direction, the SPDY/3 dictionary), DATA with FIN, RST_STREAM, PING (echoed),
GOAWAY; SETTINGS, WINDOW_UPDATE and HEADERS are read and ignored. The WebSocket itself is
aiohttp's.

The port-forward protocol on top (``portforward.k8s.io``, the kubelet's
``portforward/httpstream.go``): the client opens, per connection, an ``error`` stream and a
``data`` stream sharing a ``requestid`` header and naming the ``port``; the server replies to
each, forwards the data stream, writes a failure on the error stream, and closes both.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field

__all__ = [
    "DATA_FIN",
    "HEADER_DICTIONARY",
    "Frame",
    "FrameReader",
    "HeaderCodec",
    "control_frame",
    "data_frame",
]

VERSION = 3
SYN_STREAM, SYN_REPLY, RST_STREAM, SETTINGS, PING, GOAWAY, HEADERS, WINDOW_UPDATE = 1, 2, 3, 4, 6, 7, 8, 9
DATA_FIN = CONTROL_FIN = 0x01
MAX_LENGTH = 0xFFFFFF
# RST_STREAM status codes used here.
PROTOCOL_ERROR, REFUSED_STREAM, CANCEL = 1, 3, 5

# The SPDY/3 header compression dictionary (the SPDY/3 draft, section 2.6.10.1), as moby/spdystream has it.
HEADER_DICTIONARY = bytes.fromhex(
    "000000076f7074696f6e73000000046865616400000004706f7374000000037075740000000664656c65746500000005"
    "7472616365000000066163636570740000000e6163636570742d636861727365740000000f6163636570742d656e636f"
    "64696e670000000f6163636570742d6c616e67756167650000000d6163636570742d72616e6765730000000361676500"
    "000005616c6c6f770000000d617574686f72697a6174696f6e0000000d63616368652d636f6e74726f6c0000000a636f"
    "6e6e656374696f6e0000000c636f6e74656e742d6261736500000010636f6e74656e742d656e636f64696e6700000010"
    "636f6e74656e742d6c616e67756167650000000e636f6e74656e742d6c656e67746800000010636f6e74656e742d6c6f"
    "636174696f6e0000000b636f6e74656e742d6d64350000000d636f6e74656e742d72616e67650000000c636f6e74656e"
    "742d74797065000000046461746500000004657461670000000665787065637400000007657870697265730000000466"
    "726f6d00000004686f73740000000869662d6d617463680000001169662d6d6f6469666965642d73696e63650000000d"
    "69662d6e6f6e652d6d617463680000000869662d72616e67650000001369662d756e6d6f6469666965642d73696e6365"
    "0000000d6c6173742d6d6f646966696564000000086c6f636174696f6e0000000c6d61782d666f727761726473000000"
    "06707261676d610000001270726f78792d61757468656e7469636174650000001370726f78792d617574686f72697a61"
    "74696f6e0000000572616e676500000007726566657265720000000b72657472792d6166746572000000067365727665"
    "7200000002746500000007747261696c6572000000117472616e736665722d656e636f64696e67000000077570677261"
    "64650000000a757365722d6167656e74000000047661727900000003766961000000077761726e696e67000000107777"
    "772d61757468656e746963617465000000066d6574686f64000000036765740000000673746174757300000006323030"
    "204f4b0000000776657273696f6e00000008485454502f312e310000000375726c000000067075626c69630000000a73"
    "65742d636f6f6b69650000000a6b6565702d616c697665000000066f726967696e313030313031323031323032323035"
    "323036333030333032333033333034333035333036333037343032343035343036343037343038343039343130343131"
    "343132343133343134343135343136343137353032353034353035323033204e6f6e2d417574686f7269746174697665"
    "20496e666f726d6174696f6e323034204e6f20436f6e74656e74333031204d6f766564205065726d616e656e746c7934"
    "303020426164205265717565737434303120556e617574686f72697a656434303320466f7262696464656e343034204e"
    "6f7420466f756e6435303020496e7465726e616c20536572766572204572726f72353031204e6f7420496d706c656d65"
    "6e746564353033205365727669636520556e617661696c61626c654a616e20466562204d617220417072204d6179204a"
    "756e204a756c204175672053657074204f6374204e6f76204465632030303a30303a3030204d6f6e2c205475652c2057"
    "65642c205468752c204672692c205361742c2053756e2c20474d546368756e6b65642c746578742f68746d6c2c696d61"
    "67652f706e672c696d6167652f6a70672c696d6167652f6769662c6170706c69636174696f6e2f786d6c2c6170706c69"
    "636174696f6e2f7868746d6c2b786d6c2c746578742f706c61696e2c746578742f6a6176617363726970742c7075626c"
    "6963707269766174656d61782d6167653d677a69702c6465666c6174652c73646368636861727365743d7574662d3863"
    "6861727365743d69736f2d383835392d312c7574662d2c2a2c656e713d302e"
)


@dataclass
class Frame:
    """A parsed frame: ``control`` type (0 for DATA), flags, stream id, payload after the ids."""

    type: int
    flags: int
    stream_id: int
    payload: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)


class HeaderCodec:
    """The two zlib contexts of one connection (each direction keeps its own for its life)."""

    def __init__(self) -> None:
        self._out = zlib.compressobj(9, zlib.DEFLATED, 15, 8, zlib.Z_DEFAULT_STRATEGY, HEADER_DICTIONARY)
        self._in = zlib.decompressobj(zdict=HEADER_DICTIONARY)

    def encode(self, headers: dict[str, str]) -> bytes:
        block = bytearray(struct.pack(">I", len(headers)))
        for name, value in headers.items():
            raw_name, raw_value = name.lower().encode(), value.encode()
            block += (
                struct.pack(">I", len(raw_name)) + raw_name + struct.pack(">I", len(raw_value)) + raw_value
            )
        return self._out.compress(bytes(block)) + self._out.flush(zlib.Z_SYNC_FLUSH)

    def decode(self, compressed: bytes) -> dict[str, str]:
        # Bounded: a header block of a port-forward stream is tiny; refuse a zlib bomb.
        block = self._in.decompress(compressed, 1 << 20)
        if self._in.unconsumed_tail:
            raise ValueError("SPDY header block over 1 MiB")
        (count,) = struct.unpack_from(">I", block, 0)
        offset, headers = 4, {}
        for _ in range(count):
            (n,) = struct.unpack_from(">I", block, offset)
            name = block[offset + 4 : offset + 4 + n].decode()
            offset += 4 + n
            (n,) = struct.unpack_from(">I", block, offset)
            value = block[offset + 4 : offset + 4 + n].decode()
            offset += 4 + n
            if offset > len(block):
                raise ValueError("truncated SPDY header block")
            headers[name] = value.split("\x00")[0]
        return headers


def control_frame(kind: int, flags: int, payload: bytes) -> bytes:
    return struct.pack(">HHI", 0x8000 | VERSION, kind, (flags << 24) | len(payload)) + payload


def data_frame(stream_id: int, flags: int, data: bytes) -> bytes:
    return struct.pack(">II", stream_id & 0x7FFFFFFF, (flags << 24) | len(data)) + data


class FrameReader:
    """Frames out of a byte stream that arrives in pieces (WebSocket messages)."""

    def __init__(self, codec: HeaderCodec) -> None:
        self._buffer = bytearray()
        self._codec = codec

    def feed(self, data: bytes) -> list[Frame]:
        self._buffer += data
        frames = []
        while len(self._buffer) >= 8:
            first, second = struct.unpack_from(">II", self._buffer, 0)
            flags, length = second >> 24, second & 0xFFFFFF
            if len(self._buffer) < 8 + length:
                break
            body = bytes(self._buffer[8 : 8 + length])
            del self._buffer[: 8 + length]
            if not first & 0x80000000:
                frames.append(Frame(0, flags, first & 0x7FFFFFFF, body))
                continue
            version, kind = (first >> 16) & 0x7FFF, first & 0xFFFF
            if version != VERSION:
                raise ValueError(f"SPDY version {version} is not served (3 is)")
            if kind == SYN_STREAM:
                (stream_id,) = struct.unpack_from(">I", body, 0)
                headers = self._codec.decode(body[10:])
                frames.append(Frame(kind, flags, stream_id & 0x7FFFFFFF, headers=headers))
            elif kind in (SYN_REPLY, HEADERS):
                (stream_id,) = struct.unpack_from(">I", body, 0)
                self._codec.decode(body[4:])  # keeps the zlib context in step
                frames.append(Frame(kind, flags, stream_id & 0x7FFFFFFF))
            elif kind in (RST_STREAM, WINDOW_UPDATE, PING, GOAWAY):
                (ident,) = struct.unpack_from(">I", body, 0)
                frames.append(Frame(kind, flags, ident & 0x7FFFFFFF, body))
            else:
                frames.append(Frame(kind, flags, 0, body))  # SETTINGS and the unknown: ignored
        return frames
