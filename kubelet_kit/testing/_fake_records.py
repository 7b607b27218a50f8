"""Values and inner records of :class:`~kubelet_kit.testing.FakeRuntime`.

What every part of the fake runtime shares: the names of the methods it records
calls of (and their parameters), the recorded :class:`Call` and pending
:class:`InjectedError` with the internal fault list they come from, the CRI log
line helpers, image reference normalisation, the exit codes of killed processes,
the handler types of the streaming methods, and the inner records of sandboxes,
containers and scripted exits.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
from collections.abc import Awaitable, Callable, Generator, Mapping, Sequence
from typing import Any

import attrs

from kubelet_kit.clock import TimerHandle
from kubelet_kit.container import labels as klabels
from kubelet_kit.container.images import normalize_image_ref as _normalize
from kubelet_kit.container.interfaces import (
    ContainerConfig,
    ContainerInfo,
    ContainerState,
    ContainerStatus,
    LinuxContainerResources,
    PodSandbox,
    PodSandboxConfig,
    PodSandboxState,
    PodSandboxStatus,
)
from kubelet_kit.container.logs import format_timestamp
from kubelet_kit.container.streams import ByteSink, ByteSource, StreamIO
from kubelet_kit.errors import ImagePullError
from kubelet_kit.testing._fake_fs import _ContainerFS

POD_UID_LABEL = klabels.POD_UID

#: Every method of the Runtime protocol, and those of the optional ImageFsReporter
#: and LogReopener; the names latency and faults accept.
RUNTIME_METHODS: frozenset[str] = frozenset(
    {
        "version",
        "status",
        "run_pod_sandbox",
        "stop_pod_sandbox",
        "remove_pod_sandbox",
        "pod_sandbox_status",
        "list_pod_sandboxes",
        "create_container",
        "start_container",
        "stop_container",
        "remove_container",
        "list_containers",
        "container_status",
        "exec_sync",
        "update_container_resources",
        "container_stats",
        "list_container_stats",
        "pod_sandbox_stats",
        "pull_image",
        "image_status",
        "list_images",
        "remove_image",
        "image_fs_info",
        "reopen_container_log",
        "get_container_events",
    }
)

#: The methods of the optional StreamingRuntime protocol, which latency and faults
#: also accept.
STREAMING_METHODS: frozenset[str] = frozenset(
    {"exec_stream", "attach_stream", "port_forward_stream"}
)

#: ``handler(container_id, cmd, io)`` of :meth:`FakeRuntime.set_exec_stream_handler`.
ExecStreamHandler = Callable[[str, Sequence[str], StreamIO], int | Awaitable[int] | None]
#: ``handler(container_id, io)`` of :meth:`FakeRuntime.set_attach_handler`.
AttachHandler = Callable[[str, StreamIO], Awaitable[None] | None]
#: ``handler(sandbox_id, port, source, sink)`` of :meth:`FakeRuntime.set_port_forward_handler`.
PortForwardHandler = Callable[[str, int, ByteSource, ByteSink], Awaitable[None] | None]

# States in which a container may still have processes to kill.
_ALIVE = frozenset({ContainerState.RUNNING, ContainerState.UNKNOWN})

#: Exit codes a shell reports for a process killed by a signal: 128 + signal number.
EXIT_SIGTERM = 128 + 15
EXIT_SIGKILL = 128 + 9


# --------------------------------------------------------------------------- values


@attrs.frozen
class Call:
    """One call made to a :class:`FakeRuntime`.

    Attributes:
        method: The Runtime method's name, e.g. ``"stop_container"``.
        args: Every argument, in the method's signature order, however it was passed.
        kwargs: The same arguments by parameter name.
    """

    method: str
    args: tuple[Any, ...]
    kwargs: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen
class InjectedError:
    """A fault still waiting to be raised (see :meth:`FakeRuntime.inject_error`).

    Attributes:
        method: The method it will be raised from.
        exc: The exception instance raised (the same instance every time).
        remaining: How many more calls it will fail.
        when: The predicate a call's arguments must satisfy, if any.
    """

    method: str
    exc: BaseException
    remaining: int
    when: Callable[..., bool] | None = None


@attrs.frozen
class LogLine:
    """One line a container wrote.

    Attributes:
        time: Wall-clock time (clock seconds) it was written.
        stream: ``"stdout"`` or ``"stderr"``.
        text: The line, without its newline.
    """

    time: float
    stream: str
    text: str


# ----------------------------------------------------------------------- formatting


def format_rfc3339_nano(t: float) -> str:
    """Format wall time ``t`` as Go's ``time.RFC3339Nano`` in UTC
    (``2026-01-01T00:00:00.5Z``), rounded to the microsecond a float of epoch
    seconds can hold."""
    return format_timestamp(round(t * 1e6) * 1000)


def format_cri_log_line(t: float, stream: str, text: str) -> str:
    """One full line of a CRI container log file, with its newline.

    The CRI log format is ``<RFC3339Nano time> <stdout|stderr> <F|P> <content>``;
    ``F`` marks a full line (``P`` a partial one, which the fake never writes).
    """
    return f"{format_rfc3339_nano(t)} {stream} F {text}\n"


def normalize_image_ref(ref: str) -> str:
    """Normalise an image reference the way container runtimes do
    (:func:`kubelet_kit.container.images.normalize_image_ref`): ``busybox`` becomes
    ``docker.io/library/busybox:latest``. The fake keeps an invalid reference as
    written, so a test can still script what pulling it does."""
    try:
        return _normalize(ref)
    except ImagePullError:
        return ref


@functools.lru_cache(maxsize=1024)
def _normalized(ref: str) -> str:
    """:func:`normalize_image_ref`, remembered: a node asks about the same few
    references over and over."""
    return normalize_image_ref(ref)


def _image_id(ref: str) -> str:
    return "sha256:" + hashlib.sha256(normalize_image_ref(ref).encode()).hexdigest()


# ------------------------------------------------------------------ inner records


@attrs.define
class _Sandbox:
    id: str
    config: PodSandboxConfig
    state: PodSandboxState
    created_at: float
    ip: str
    listed: PodSandbox | None = None  # what list_pod_sandboxes last built, reused
    status: PodSandboxStatus | None = None  # what pod_sandbox_status last built, reused


@attrs.define
class _ScriptRule:
    container_name: str
    exit_code: int | None
    after: float
    oom_killed: bool
    pod_uid: str | None
    times: int | None


@attrs.define
class _Container:
    id: str
    sandbox_id: str
    config: ContainerConfig
    created_at: float
    image: str  # as the container's status reports it
    image_ref: str
    log_path: str
    env: dict[str, str]
    state: ContainerState = ContainerState.CREATED
    started_at: float = 0.0
    finished_at: float = 0.0
    exit_code: int = 0
    reason: str = ""
    message: str = ""
    resources: LinuxContainerResources | None = None
    ignore_term: bool = False
    proc: Generator[Any, None, int] | None = None
    timer: TimerHandle | None = None
    # A program of its command that runs until stopped (a server such as httpd).
    serving: tuple[str, ...] = ()
    # The shell's ``cat`` waiting on the container's stdin, what was written to
    # that stdin before it read, and whether that stdin was closed.
    reading: Any = None
    stdin_buffer: list[bytes] = attrs.field(factory=list)
    stdin_ended: bool = False
    waiters: list[asyncio.Future[None]] = attrs.field(factory=list)
    # Its own files in memory, the host's beneath its mounts.
    fs: _ContainerFS = attrs.field(factory=_ContainerFS)
    cpu_ns: int = 0
    memory_working_set: int = 0
    memory_usage: int = 0
    writable_layer_bytes: int = 0
    writable_layer_inodes: int = 0
    listed: ContainerInfo | None = None  # what list_containers last built, reused
    status: ContainerStatus | None = None  # what container_status last built, reused


@attrs.define
class _Fault:
    method: str
    exc: BaseException
    remaining: int
    when: Callable[..., bool] | None
    seconds: float = 0.0


# Placeholder exception of injected delays (they raise nothing).
_DELAY = Exception("delay")


def _take(faults: list[_Fault], method: str, args: tuple[Any, ...]) -> _Fault | None:
    """The first fault of ``method`` matching ``args``, used once."""
    for fault in faults:
        if fault.method != method:
            continue
        if fault.when is not None and not fault.when(*args):
            continue
        fault.remaining -= 1
        if fault.remaining <= 0:
            faults.remove(fault)
        return fault
    return None


# Parameter names of each Runtime method, in signature order, for the call log.
_PARAMS: dict[str, tuple[str, ...]] = {
    "version": (),
    "status": (),
    "run_pod_sandbox": ("config",),
    "stop_pod_sandbox": ("pod_sandbox_id",),
    "remove_pod_sandbox": ("pod_sandbox_id",),
    "pod_sandbox_status": ("pod_sandbox_id",),
    "list_pod_sandboxes": ("filter",),
    "image_fs_info": (),
    "reopen_container_log": ("container_id",),
    "create_container": ("pod_sandbox_id", "config", "sandbox_config"),
    "start_container": ("container_id",),
    "stop_container": ("container_id", "timeout"),
    "remove_container": ("container_id",),
    "list_containers": ("filter",),
    "container_status": ("container_id",),
    "exec_sync": ("container_id", "cmd", "timeout"),
    "update_container_resources": ("container_id", "resources"),
    "container_stats": ("container_id",),
    "list_container_stats": ("filter",),
    "pod_sandbox_stats": ("pod_sandbox_id",),
    "pull_image": ("image", "sandbox_config", "auth"),
    "image_status": ("image",),
    "list_images": (),
    "remove_image": ("image",),
    "get_container_events": (),
    "exec_stream": ("container_id", "cmd", "io"),
    "attach_stream": ("container_id", "io"),
    "port_forward_stream": ("sandbox_id", "port", "source", "sink"),
}
