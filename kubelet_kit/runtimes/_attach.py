"""The attach socket between a container's shim and the host-process runtime.

Each shim listens on a unix socket, ``attach.sock`` in the container's state
directory, for as long as its process runs. The runtime's ``attach_stream``
connects to it; several clients may be attached at once. Both directions carry
frames: one byte of kind, four bytes of payload length (big-endian), the payload.

Client to shim:
    ``HELLO`` (first; payload one byte of flags, bit 0: the client sends stdin),
    ``STDIN`` (bytes for the container's stdin), ``STDIN_EOF`` (this client's
    stdin ended), ``RESIZE`` (width and height, two big-endian 16-bit numbers).
Shim to client:
    ``STDOUT`` and ``STDERR`` (the container's output from the moment the client
    attached; a terminal's output is all ``STDOUT``). The shim closes the
    connection once the container has exited and its exit is recorded.

Socket paths are limited to 108 bytes and state directories can be deeper than
that, so both ends reach the socket through ``/proc/self/fd/<dir fd>/``, a short
path that resolves to the directory opened as ``dir fd``.

This module is imported by the shim, which starts for every container: it must
stay free of imports beyond the standard library.
"""

from __future__ import annotations

import struct

ATTACH_SOCKET = "attach.sock"

HELLO = 0
STDIN = 1
STDOUT = 2
STDERR = 3
STDIN_EOF = 4
RESIZE = 5

#: HELLO flag: the client will send stdin (and its end counts for ``stdinOnce``).
HELLO_STDIN = 1

#: Longest payload accepted; a longer frame is a broken peer, which is dropped.
MAX_PAYLOAD = 1 << 20

_HEADER = struct.Struct(">BI")
_SIZE = struct.Struct(">HH")


class FrameError(Exception):
    """The peer sent something that is not a frame of this protocol."""


def frame(kind: int, payload: bytes = b"") -> bytes:
    """One frame of ``kind`` carrying ``payload``."""
    return _HEADER.pack(kind, len(payload)) + payload


def resize_frame(width: int, height: int) -> bytes:
    """A RESIZE frame (sizes are clamped to what a terminal can have)."""
    return frame(RESIZE, _SIZE.pack(max(0, min(width, 0xFFFF)), max(0, min(height, 0xFFFF))))


def parse_resize(payload: bytes) -> tuple[int, int]:
    """(width, height) of a RESIZE payload.

    Raises:
        FrameError: the payload is not four bytes.
    """
    if len(payload) != _SIZE.size:
        raise FrameError(f"resize payload of {len(payload)} bytes, expected {_SIZE.size}")
    width, height = _SIZE.unpack(payload)
    return width, height


def header_size() -> int:
    """Bytes in a frame's header."""
    return _HEADER.size


def parse_header(header: bytes) -> tuple[int, int]:
    """(kind, payload length) of a frame header.

    Raises:
        FrameError: the length is over :data:`MAX_PAYLOAD`.
    """
    kind, length = _HEADER.unpack(header)
    if length > MAX_PAYLOAD:
        raise FrameError(f"frame of {length} bytes is over the {MAX_PAYLOAD} byte limit")
    return kind, length


class FrameReader:
    """Splits a byte stream into frames (for a non-blocking reader)."""

    def __init__(self) -> None:
        self._buf = bytearray()

    def feed(self, data: bytes) -> list[tuple[int, bytes]]:
        """Add received bytes; return the frames now complete, in order.

        Raises:
            FrameError: a frame is over :data:`MAX_PAYLOAD`.
        """
        self._buf += data
        frames = []
        while len(self._buf) >= _HEADER.size:
            kind, length = parse_header(bytes(self._buf[: _HEADER.size]))
            end = _HEADER.size + length
            if len(self._buf) < end:
                break
            frames.append((kind, bytes(self._buf[_HEADER.size : end])))
            del self._buf[:end]
        return frames


def socket_path(dir_fd: int) -> str:
    """The attach socket's path through an open descriptor of its directory."""
    return f"/proc/self/fd/{dir_fd}/{ATTACH_SOCKET}"
