"""The SPDY/3 wire format: frame layout, status codes and header blocks.

What a :class:`~kubelet_kit.streams.spdy.SpdySession` puts on and reads from the
connection, without any session state: the constants and enums of SPDY/3.1, the
encoders of control and data frames, the SPDY/3 zlib dictionary, and
:class:`HeaderCodec`, the per-direction compression contexts of the name/value
header blocks. :class:`SpdyProtocolError` is what a malformed frame raises.
"""

from __future__ import annotations

import enum
import struct
import zlib
from collections.abc import Mapping
from typing import Final

from kubelet_kit.errors import KubeletKitError

#: The SPDY version in every control frame.
VERSION: Final = 3
#: Initial window of every stream and of the session (SPDY/3.1).
DEFAULT_WINDOW: Final = 65536

FLAG_FIN: Final = 0x01
FLAG_UNIDIRECTIONAL: Final = 0x02
SETTINGS_INITIAL_WINDOW_SIZE: Final = 7
MAX_WINDOW: Final = 0x7FFFFFFF
# A decompressed header block larger than this is refused (zlib bombs).
MAX_HEADER_BLOCK: Final = 1 << 20


class FrameType(enum.IntEnum):
    """Control frame types of SPDY/3."""

    SYN_STREAM = 1
    SYN_REPLY = 2
    RST_STREAM = 3
    SETTINGS = 4
    PING = 6
    GOAWAY = 7
    HEADERS = 8
    WINDOW_UPDATE = 9


class RstStatus(enum.IntEnum):
    """Status codes of RST_STREAM."""

    PROTOCOL_ERROR = 1
    INVALID_STREAM = 2
    REFUSED_STREAM = 3
    UNSUPPORTED_VERSION = 4
    CANCEL = 5
    INTERNAL_ERROR = 6
    FLOW_CONTROL_ERROR = 7
    STREAM_IN_USE = 8
    STREAM_ALREADY_CLOSED = 9
    INVALID_CREDENTIALS = 10
    FRAME_TOO_LARGE = 11


class GoAwayStatus(enum.IntEnum):
    """Status codes of GOAWAY."""

    OK = 0
    PROTOCOL_ERROR = 1
    INTERNAL_ERROR = 2


_DICTIONARY_WORDS: Final = (
    "options head post put delete trace accept accept-charset accept-encoding "
    "accept-language accept-ranges age allow authorization cache-control "
    "connection content-base content-encoding content-language content-length "
    "content-location content-md5 content-range content-type date etag expect "
    "expires from host if-match if-modified-since if-none-match if-range "
    "if-unmodified-since last-modified location max-forwards pragma "
    "proxy-authenticate proxy-authorization range referer retry-after server te "
    "trailer transfer-encoding upgrade user-agent vary via warning "
    "www-authenticate method get status"
)


def _build_dictionary() -> bytes:
    # The SPDY/3 draft's header dictionary: length-prefixed words, then a tail of
    # common values without prefixes. Written out this way to be checkable.
    words = [
        *_DICTIONARY_WORDS.split(),
        "200 OK",
        "version",
        "HTTP/1.1",
        "url",
        "public",
        "set-cookie",
        "keep-alive",
        "origin",
    ]
    tail = (
        "100101201202205206300302303304305306307402405406407408409410411412413414415"
        "416417502504505203 Non-Authoritative Information204 No Content301 Moved "
        "Permanently400 Bad Request401 Unauthorized403 Forbidden404 Not Found500 "
        "Internal Server Error501 Not Implemented503 Service UnavailableJan Feb Mar "
        "Apr May Jun Jul Aug Sept Oct Nov Dec 00:00:00 Mon, Tue, Wed, Thu, Fri, Sat, "
        "Sun, GMTchunked,text/html,image/png,image/jpg,image/gif,application/xml,"
        "application/xhtml+xml,text/plain,text/javascript,publicprivatemax-age=gzip,"
        "deflate,sdchcharset=utf-8charset=iso-8859-1,utf-,*,enq=0."
    )
    out = bytearray()
    for word in words:
        out += struct.pack(">I", len(word)) + word.encode()
    return bytes(out + tail.encode())


#: The zlib dictionary of SPDY/3 header blocks (1423 bytes).
HEADER_DICTIONARY: Final = _build_dictionary()


class SpdyProtocolError(KubeletKitError, ConnectionError):
    """The peer sent something that is not SPDY/3 (a malformed or unsupported
    frame); the session is over. The message names the frame and what is wrong."""


def control_frame(ftype: FrameType, flags: int, payload: bytes) -> bytes:
    return struct.pack(">HHI", 0x8000 | VERSION, ftype, (flags << 24) | len(payload)) + payload


def data_frame(stream_id: int, flags: int, data: bytes | memoryview) -> bytes:
    return struct.pack(">II", stream_id, (flags << 24) | len(data)) + bytes(data)


class HeaderCodec:
    """The header blocks of one session: one zlib context per direction, kept for
    the whole session (each block ends with a sync flush), with the SPDY/3
    dictionary."""

    def __init__(self) -> None:
        self._compressor = zlib.compressobj(
            zlib.Z_DEFAULT_COMPRESSION, zlib.DEFLATED, 15, 9, zdict=HEADER_DICTIONARY
        )
        self._decompressor = zlib.decompressobj(zdict=HEADER_DICTIONARY)

    def encode(self, headers: Mapping[str, str]) -> bytes:
        """The compressed name/value block of ``headers`` (names lower case).

        Raises:
            ValueError: A header name is empty or repeated.
        """
        parts = [struct.pack(">I", len(headers))]
        seen: set[str] = set()
        for name, value in headers.items():
            lower = name.lower()
            if not lower or lower in seen:
                raise ValueError(f"SPDY headers: name {name!r} is empty or repeated")
            seen.add(lower)
            raw_name, raw_value = lower.encode(), value.encode()
            parts += [
                struct.pack(">I", len(raw_name)),
                raw_name,
                struct.pack(">I", len(raw_value)),
                raw_value,
            ]
        block = b"".join(parts)
        return self._compressor.compress(block) + self._compressor.flush(zlib.Z_SYNC_FLUSH)

    def decode(self, what: str, data: bytes) -> dict[str, str]:
        """The headers of a compressed name/value block; ``what`` names the
        frame in the error.

        Raises:
            SpdyProtocolError: The block is malformed.
        """
        try:
            raw = self._decompressor.decompress(data, MAX_HEADER_BLOCK)
        except zlib.error as exc:
            raise SpdyProtocolError(f"{what}: header block does not decompress: {exc}") from None
        if self._decompressor.unconsumed_tail:
            raise SpdyProtocolError(f"{what}: header block larger than {MAX_HEADER_BLOCK} bytes")
        headers: dict[str, str] = {}
        pos = 0

        def take(size: int) -> bytes:
            nonlocal pos
            if pos + size > len(raw):
                raise SpdyProtocolError(f"{what}: header block truncated at byte {pos}")
            chunk = raw[pos : pos + size]
            pos += size
            return chunk

        (count,) = struct.unpack(">I", take(4))
        for _ in range(count):
            (name_len,) = struct.unpack(">I", take(4))
            name = take(name_len).decode("utf-8", "replace")
            (value_len,) = struct.unpack(">I", take(4))
            value = take(value_len).decode("utf-8", "replace")
            if not name:
                raise SpdyProtocolError(f"{what}: empty header name")
            if name != name.lower():
                raise SpdyProtocolError(f"{what}: header name {name!r} is not lower case")
            if name in headers:
                raise SpdyProtocolError(f"{what}: header {name!r} repeated")
            headers[name] = value
        if pos != len(raw):
            raise SpdyProtocolError(f"{what}: {len(raw) - pos} bytes after the header block")
        return headers
