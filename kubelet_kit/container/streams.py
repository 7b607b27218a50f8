"""Streaming into containers (exec, attach, port-forward): the two optional runtime
protocols and the value types they share.

A runtime offers streams one of two ways, as the kubelet's runtimes do:

* :class:`StreamingRuntime` serves them itself, in this process: it is handed the
  client's byte streams and runs the command on them (the kubelet's
  ``streaming.Runtime``, which a CRI runtime's own streaming server calls). The
  embedded host-process runtime and the fake runtime are such runtimes; the node
  API (and the CRI server) speak the wire protocols for them.
* :class:`StreamURLRuntime` hands out a URL where its own streaming server waits
  (CRI ``Exec``/``Attach``/``PortForward``): containerd through the CRI client.
  The node API proxies the client's upgraded connection to that URL.

Both are optional beside :class:`~kubelet_kit.container.Runtime`: a runtime with
neither has no exec, attach or port-forward (the node API answers 501).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any, Literal, Protocol, runtime_checkable

import attrs

__all__ = [
    "ByteSink",
    "ByteSource",
    "StreamIO",
    "StreamURLRuntime",
    "StreamingRuntime",
    "TerminalSize",
    "stream_mode",
]


@attrs.frozen
class TerminalSize:
    """A terminal's size in characters (the ``resize`` stream's message)."""

    width: int
    height: int


class ByteSource(Protocol):
    """Bytes coming from the client (stdin, or a forwarded connection's data)."""

    async def read(self, n: int = 65536) -> bytes:
        """Up to ``n`` bytes; ``b""`` once the client closed its side. Blocks until
        some bytes arrive."""


class ByteSink(Protocol):
    """Bytes going to the client (stdout, stderr, or a forwarded connection's data)."""

    async def write(self, data: bytes) -> None:
        """Send ``data``; may wait while the client is slow. Raises OSError (or
        ConnectionError) once the client is gone."""

    async def close(self) -> None:
        """No more bytes on this stream (the client sees its end). Idempotent."""


@attrs.define(kw_only=True)
class StreamIO:
    """The client's side of one exec or attach.

    Attributes:
        stdin: The client's input (None: the client sends none).
        stdout: Where the output goes (None: discarded).
        stderr: Where error output goes (None: discarded; with ``tty`` there is
            none, the terminal carries both).
        tty: Run on a pseudo-terminal.
        resize: Terminal sizes as the client sends them (tty only; None: never
            resized). The first may arrive before the process starts.
    """

    stdin: ByteSource | None = None
    stdout: ByteSink | None = None
    stderr: ByteSink | None = None
    tty: bool = False
    resize: AsyncIterator[TerminalSize] | None = None


@runtime_checkable
class StreamingRuntime(Protocol):
    """A runtime that runs exec, attach and port-forward on streams it is handed.

    Each call blocks until the session ends. Raises NotFoundError for an unknown
    container or sandbox and ContainerRuntimeError when the container is not running.
    """

    async def exec_stream(self, container_id: str, cmd: Sequence[str], io: StreamIO) -> int:
        """Run ``cmd`` in the container wired to ``io`` and return its exit code once
        it exits and its output is written. Closes ``io.stdout``/``io.stderr``."""

    async def attach_stream(self, container_id: str, io: StreamIO) -> None:
        """Wire ``io`` to the container's own stdin/stdout/stderr (or terminal) until
        the container exits or the client goes (stdin at its end). Needs a
        container started with ``stdin`` (and ``tty`` to match)."""

    async def port_forward_stream(
        self, sandbox_id: str, port: int, source: ByteSource, sink: ByteSink
    ) -> None:
        """Connect to ``port`` inside the sandbox's network and copy bytes both
        ways until either side closes. Raises ContainerRuntimeError when nothing
        listens there."""


@runtime_checkable
class StreamURLRuntime(Protocol):
    """A runtime whose own streaming server serves exec, attach and port-forward at
    a URL it hands out (CRI ``Exec``, ``Attach``, ``PortForward``)."""

    async def get_exec_url(
        self,
        container_id: str,
        cmd: Sequence[str],
        *,
        tty: bool,
        stdin: bool,
        stdout: bool,
        stderr: bool,
    ) -> str:
        """The URL of one exec session (single use, short-lived)."""

    async def get_attach_url(
        self, container_id: str, *, tty: bool, stdin: bool, stdout: bool, stderr: bool
    ) -> str:
        """The URL of one attach session (single use, short-lived)."""

    async def get_port_forward_url(self, sandbox_id: str, ports: Sequence[int]) -> str:
        """The URL of one port-forward session (single use, short-lived)."""


def stream_mode(runtime: Any) -> Literal["direct", "url"] | None:
    """How ``runtime`` offers streams: ``"direct"`` (:class:`StreamingRuntime`),
    ``"url"`` (:class:`StreamURLRuntime`) or None. A wrapper runtime (one that
    forwards to another, such as the agent's metrics wrapper) names the runtime it
    wraps as ``inner``; it is looked through, since a wrapper forwards both kinds.
    A runtime whose ``capabilities`` declaration (see
    :mod:`kubelet_kit.container.optional`) leaves ``streams`` out offers none."""
    seen = 0
    while getattr(runtime, "inner", None) is not None and seen < 8:
        runtime, seen = runtime.inner, seen + 1
    declared = getattr(runtime, "capabilities", None)
    if declared is not None and "streams" not in declared:
        return None
    if isinstance(runtime, StreamingRuntime):
        return "direct"
    if isinstance(runtime, StreamURLRuntime):
        return "url"
    return None
