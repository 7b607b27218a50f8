"""FakeRuntime: a complete in-memory :class:`kubelet_kit.container.Runtime`.

Everything happens on an injected :class:`~kubelet_kit.clock.Clock` (a
:class:`~kubelet_kit.testing.FakeClock` by default), so a test drives container
lifetimes, stop grace periods, exec timeouts and call latencies with
``clock.advance()``/``clock.run_for()`` and never sleeps.

Containers run a tiny shell, so most tests need no scripting at all
(see :class:`FakeRuntime` for the language). Everything the runtime does is
deterministic: ids are derived from counters, timers fire in deadline order.

Deliberate simplifications, each documented where it applies:

* creating a container does not require its image to have been pulled;
* the stats of a container are whatever the test set (zero otherwise);
* log files are written only when the joined log path is absolute;
* a stopped container that does not ignore SIGTERM exits at once with 143, while a
  real ``sleep`` running as a container's PID 1 ignores SIGTERM (the kernel drops
  signals PID 1 has no handler for) and is killed after the timeout with 137; use
  :meth:`FakeRuntime.ignore_sigterm` to get the latter.

:class:`FakeRuntime` is composed here from one mixin per part of the CRI, each in
a private module beside this one: ``_fake_calls`` (call log, latency, faults),
``_fake_sandboxes``, ``_fake_containers`` and ``_fake_streams`` (all three built on
``_fake_process``, how a container's command runs), ``_fake_images`` and
``_fake_usage`` (stats), over the state declared in ``_fake_base``. The shell is in
``_fake_shell``, the records and values in ``_fake_records``; the event stream is
defined here.
"""

from __future__ import annotations

import asyncio
import itertools
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Literal

import attrs

from kubelet_kit.clock import Clock
from kubelet_kit.container.interfaces import (
    ContainerEvent,
    ExecResult,
    Image,
    PodSandboxMetadata,
    RuntimeCondition,
)
from kubelet_kit.container.streams import TerminalSize
from kubelet_kit.errors import RuntimeUnavailableError, UnimplementedError
from kubelet_kit.testing._fake_calls import _CallsPart
from kubelet_kit.testing._fake_containers import _ContainerPart
from kubelet_kit.testing._fake_images import (
    CONFORMANCE_SAME_IMAGE_REFS,
    CONFORMANCE_USER_IMAGES,
    _ImagePart,
)
from kubelet_kit.testing._fake_records import (
    EXIT_SIGKILL,  # noqa: F401 (importable from here)
    EXIT_SIGTERM,  # noqa: F401 (importable from here)
    POD_UID_LABEL,  # noqa: F401 (importable from here)
    RUNTIME_METHODS,
    STREAMING_METHODS,
    AttachHandler,
    Call,
    ExecStreamHandler,
    InjectedError,
    LogLine,
    PortForwardHandler,
    _Container,
    _Fault,
    _Sandbox,
    _ScriptRule,
    format_cri_log_line,
    format_rfc3339_nano,
    normalize_image_ref,
)
from kubelet_kit.testing._fake_sandboxes import _SandboxPart
from kubelet_kit.testing._fake_streams import _StreamPart
from kubelet_kit.testing._fake_usage import _UsagePart
from kubelet_kit.testing.clock import FakeClock

__all__ = [
    "CONFORMANCE_SAME_IMAGE_REFS",
    "CONFORMANCE_USER_IMAGES",
    "EVENT_QUEUE_SIZE",
    "RUNTIME_METHODS",
    "STREAMING_METHODS",
    "Call",
    "FakeRuntime",
    "InjectedError",
    "LogLine",
    "format_cri_log_line",
    "format_rfc3339_nano",
    "normalize_image_ref",
]

#: Capacity of each event subscriber's queue (the kubelet's event channel size).
#: Read from this module each time a stream is made, so it can be patched here.
EVENT_QUEUE_SIZE = 1000


@attrs.define(eq=False)
class _EventStream:
    """One subscriber of :meth:`FakeRuntime.get_container_events` (single consumer)."""

    runtime: FakeRuntime
    queue: asyncio.Queue[ContainerEvent] = attrs.field(
        factory=lambda: asyncio.Queue(EVENT_QUEUE_SIZE)
    )
    error: BaseException | None = None
    started: bool = False
    closed: bool = False
    wakeup: asyncio.Event = attrs.field(factory=asyncio.Event)

    def __aiter__(self) -> _EventStream:
        return self

    async def __anext__(self) -> ContainerEvent:
        if self.closed:
            raise StopAsyncIteration
        if not self.started:
            self.started = True
            try:
                await self.runtime._enter("get_container_events", ())
                if not self.runtime._events_enabled:
                    raise UnimplementedError(
                        "get_container_events: the runtime has no event stream"
                    )
            except BaseException:
                # A stream that failed to start is over; it receives nothing more.
                self.closed = True
                self.runtime._streams.discard(self)
                raise
        while True:
            if not self.queue.empty():
                return self.queue.get_nowait()
            if self.error is not None:
                # Queued events were delivered first; now the stream ends with the error.
                err, self.error = self.error, None
                self.closed = True
                self.runtime._streams.discard(self)
                raise err.with_traceback(None)
            self.wakeup.clear()
            await self.wakeup.wait()

    async def aclose(self) -> None:
        """Stop receiving events. Idempotent."""
        self.closed = True
        self.runtime._streams.discard(self)

    def offer(self, event: ContainerEvent) -> bool:
        if self.closed or self.error is not None:
            return False
        try:
            self.queue.put_nowait(event)
        except asyncio.QueueFull:
            return False
        self.wakeup.set()
        return True

    def fail(self, exc: BaseException) -> None:
        if not self.closed:
            self.error = exc
            self.wakeup.set()


# -------------------------------------------------------------------- FakeRuntime


class FakeRuntime(_CallsPart, _SandboxPart, _ContainerPart, _StreamPart, _ImagePart, _UsagePart):
    """An in-memory container runtime on an injected clock.

    Implements every method of :class:`kubelet_kit.container.Runtime` with the CRI's
    semantics and the typed errors of :mod:`kubelet_kit.errors`: ``NotFoundError`` for
    an unknown id (except removals, which succeed, as in the CRI), idempotent
    stop/remove, ``AlreadyExistsError`` for a second sandbox with the same name,
    namespace, uid and attempt or a second container with the same name and attempt
    in a sandbox, ``ContainerStartError`` for starting a container that is not
    CREATED or creating one in a sandbox that is not READY. ``exec_sync`` in a
    container that is not running raises :class:`ContainerRuntimeError` (the CRI
    reports "container is in CONTAINER_EXITED state" with no more specific code).

    **The shell.** A container's ``command + args`` of the form ``sh -c SCRIPT``
    (also ``/bin/sh``, ``ash``, ``bash``) runs SCRIPT; any other argv runs as a
    single statement; an empty argv (the image's default) runs until stopped.
    Statements are separated by ``;`` or newlines; words honour single and double
    quotes and backslashes, and ``$VAR``/``${VAR}``/``$?`` expand from the
    container's env (and the last status); ``a && b`` and ``a || b`` run ``b``
    only after ``a`` succeeded (failed). Known statements:

    * ``echo WORDS``: one line to stdout;
    * ``sleep N``: N seconds of clock time (``s``/``m``/``h``/``d`` suffixes,
      ``infinity``);
    * ``exit [N]``, ``true``, ``false``, ``:``, ``exec CMD`` (runs CMD, then exits);
    * ``cat FILE``, ``touch FILE``, ``rm [-f] FILE``, ``test``/``[ ]`` (``-e``,
      ``-f``, ``-s``, ``-n``, ``-z``, ``=``, ``!=``, ``-eq``...): on a per-container
      in-memory file system shared with ``exec_sync`` (see :meth:`files`,
      :meth:`write_file`), enough for the classic ``cat /tmp/healthy`` probe;
      beneath a mount's ``container_path`` they read and write the host's files
      for real, as a bind mount would (``readonly`` refused; PRIVATE propagation
      hides host mounts made under the volume after the start, HOST_TO_CONTAINER
      sees them; BIDIRECTIONAL is declined with UnimplementedError, as the
      fake's containers cannot mount; see :mod:`kubelet_kit.testing._fake_fs`);
    * ``pwd``: the container's ``working_dir`` (``/`` by default), where relative
      paths start;
    * ``trap '' TERM``: ignore SIGTERM (``trap - TERM`` restores it).

    Redirections: ``>&2`` (stdout to stderr), ``> FILE``/``>> FILE``,
    ``>/dev/null``; ``2>...`` is accepted and ignored. Anything else (other
    programs, loops, pipes) runs until the container is stopped; in ``exec_sync`` it
    fails with 127, ``sh: NAME: not found``. A script that ends without ``exit``
    exits with the status of its last statement, as sh does (0 unless that failed).
    An exit sets EXITED, ``exit_code``, ``finished_at`` and the reason ``Completed``
    (0) or ``Error`` (anything else), as containerd does.

    **Stopping.** ``stop_container(id, timeout)`` sends SIGTERM: a container that does
    not ignore it exits at once with 143; one that does (``ignore_sigterm(name)`` or
    ``trap '' TERM``) is killed after ``timeout`` clock seconds with 137, unless it
    exits by itself first. ``timeout <= 0`` kills at once (137), as do
    ``stop_pod_sandbox`` and removing a running container.

    **Logs.** Every line is kept in memory (:meth:`logs`); when the sandbox has a
    ``log_directory`` and the container a ``log_path`` it is also appended to that
    file in the CRI format (:func:`format_cri_log_line`).

    **Scripting.** :meth:`script` makes containers of a name exit after a delay with
    a chosen code (or ``OOMKilled``); :meth:`exit_container` ends one now;
    :meth:`mark_unknown` puts one in CONTAINER_UNKNOWN; :meth:`set_exec_handler`
    answers ``exec_sync`` calls. An exec'd command still running when its container
    exits ends with 137.

    **Streams.** The fake is a :class:`~kubelet_kit.container.streams.StreamingRuntime`
    (exec, attach and port-forward on the client's streams, in memory, with the
    host runtime's typed errors). ``exec_stream`` echoes the client's stdin to
    stdout (as ``cat``), or without stdin runs the command as ``exec_sync`` does;
    ``attach_stream`` streams the lines the container writes from then on (and
    echoes stdin for a container with ``stdin``); ``port_forward_stream`` echoes
    the connection's bytes. :meth:`set_exec_stream_handler`,
    :meth:`set_attach_handler` and :meth:`set_port_forward_handler` script them;
    :meth:`terminal_sizes` and :meth:`stdin_closed` tell what the sessions did.
    Their names (:data:`STREAMING_METHODS`) take latency and faults too.

    **Images.** The registry knows the references given to ``images`` or
    :meth:`add_image`; pulling one puts it on the node, pulling anything else raises
    ``ImageNotFoundError`` (or what :meth:`fail_pull` scripted), unless
    ``pull_any`` makes the registry know every reference but those of a
    registry under the reserved ``.invalid`` domain (``registry.invalid/...``),
    which stay unpullable as they would be anywhere. References are
    normalised as runtimes do (``busybox`` is ``docker.io/library/busybox:latest``).
    :meth:`add_image` can teach one image under several references (``aliases``:
    one id, and ``repo_tags`` the references the node holds) and the ``user`` of
    its config; :meth:`add_conformance_images` teaches the images the
    conformance kit's image checks take (:data:`CONFORMANCE_SAME_IMAGE_REFS`,
    :data:`CONFORMANCE_USER_IMAGES`).

    **Events.** With ``events=True`` every sandbox and container create, start,
    stop and delete is sent to each open :meth:`get_container_events` stream, with
    the sandbox's status and the statuses of its containers attached, as the CRI
    does; a sandbox's own events carry its id as ``container_id``.

    **Latency and faults.** Each call first records itself in :attr:`calls`, raises
    ``RuntimeUnavailableError`` if :meth:`set_unavailable` is on, waits its latency
    (plus any :meth:`inject_latency` delay) on the clock, then raises a pending
    :meth:`inject_error` fault if one matches. A call cancelled during its latency
    consumes no fault, so injected faults are never lost.

    Args:
        clock: The clock everything runs on; a fresh :class:`FakeClock` if omitted
            (reachable as :attr:`clock`).
        latency: Seconds of clock time every call takes, or a mapping from method
            name (``"*"`` for the rest) to seconds. A huge value makes calls hang.
        events: Whether :meth:`get_container_events` works (otherwise iterating it
            raises ``UnimplementedError``).
        images: Image references the registry knows *and* the node already holds.
        pull_latency: Clock seconds every successful or failed pull takes, on top of
            the ``pull_image`` latency.
        image_fs: A directory standing for the filesystem the images are on, which
            :meth:`image_fs_info` reports (with the present images' sizes as used).
        pull_any: Whether the registry knows every reference: a pull of one it
            was not taught adds it (as :meth:`add_image` with its defaults), as a
            runtime served to a real kubelet needs; a registry host ending in
            ``.invalid`` still cannot be pulled from.
        call_history: Keep at least this many of the latest :attr:`calls` and drop
            older ones (None: keep every call), so a long-running fake stays small.
        host_ports: What a sandbox's port mapping to a host port gets. ``"record"``
            (the default): it is accepted and kept in the sandbox's config, as a
            node-policy test of a ``hostPort`` pod wants, though nothing listens
            on the host. ``"decline"``: ``run_pod_sandbox`` raises
            UnimplementedError naming the mapping, as a runtime that cannot
            publish it should (the served fake, and the conformance kit, whose
            ``port_mappings`` check connects to the host port for real).
    """

    def __init__(
        self,
        clock: Clock | None = None,
        *,
        latency: float | Mapping[str, float] = 0.0,
        events: bool = False,
        images: Iterable[str] = (),
        pull_latency: float = 0.0,
        image_fs: str | None = None,
        pull_any: bool = False,
        call_history: int | None = None,
        host_ports: Literal["record", "decline"] = "record",
    ) -> None:
        if host_ports not in ("record", "decline"):
            raise ValueError(f"host_ports: {host_ports!r} is neither 'record' nor 'decline'")
        self.clock: Clock = clock if clock is not None else FakeClock()
        self.host_ports = host_ports
        self.calls: list[Call] = []
        self.dropped_events = 0
        self.pull_latency = pull_latency
        self.image_fs = image_fs
        self.pull_any = pull_any
        self._call_history = call_history
        self._default_latency = 0.0
        self._latency: dict[str, float] = {}
        if isinstance(latency, Mapping):
            for method, seconds in latency.items():
                if method == "*":
                    self._default_latency = float(seconds)
                else:
                    self.set_latency(method, seconds)
        else:
            self._default_latency = float(latency)
        self._events_enabled = events
        self._streams: weakref.WeakSet[_EventStream] = weakref.WeakSet()
        self._faults: list[_Fault] = []
        self._delays: list[_Fault] = []
        self._unavailable = False
        self._conditions: dict[str, RuntimeCondition] = {
            "RuntimeReady": RuntimeCondition("RuntimeReady", True),
            "NetworkReady": RuntimeCondition("NetworkReady", True),
        }
        self._sandboxes: dict[str, _Sandbox] = {}
        self._containers: dict[str, _Container] = {}
        # Indexes, so a node of thousands of containers lists and checks in
        # time proportional to what is asked for (the composer's benchmark runs
        # on this fake): sandbox by identity, containers by sandbox, and both by
        # the kubelet's pod uid label.
        self._sandbox_by_metadata: dict[PodSandboxMetadata, str] = {}
        self._containers_by_sandbox: dict[str, dict[str, _Container]] = {}
        self._sandboxes_by_pod: dict[str, dict[str, None]] = {}  # ordered sets
        self._containers_by_pod: dict[str, dict[str, None]] = {}
        self._logs: dict[str, list[LogLine]] = {}
        self._ids = itertools.count(1)
        self._ips = itertools.count(2)
        self._registry: dict[str, Image] = {}
        # Image id -> the first registry image of that id (None: none), until the
        # registry changes.
        self._image_by_id: dict[str, Image | None] = {}
        self._present: set[str] = set()  # normalised refs held on the node
        self._pull_failures: dict[str, BaseException] = {}
        # Private images: normalised ref -> the (username, password) pairs the
        # registry accepts for it.
        self._private: dict[str, set[tuple[str, str]]] = {}
        self._scripts: list[_ScriptRule] = []
        self._ignore_term: set[str] = set()
        self._exec_handler: (
            Callable[[str, Sequence[str]], ExecResult | Awaitable[ExecResult] | None] | None
        ) = None
        self._exec_stream_handler: ExecStreamHandler | None = None
        self._attach_handler: AttachHandler | None = None
        self._port_forward_handler: PortForwardHandler | None = None
        self._attached: dict[str, list[asyncio.Queue[tuple[str, str]]]] = {}
        self._sizes: dict[str, list[TerminalSize]] = {}
        self._stdin_closed: set[str] = set()
        for ref in images:
            self.add_image(ref, present=True)

    # ======================================================================= events

    def enable_events(self, enabled: bool = True) -> None:
        """Turn the event stream on or off; turning it off ends current streams
        with UnimplementedError."""
        self._events_enabled = enabled
        if not enabled:
            for stream in list(self._streams):
                stream.fail(UnimplementedError("get_container_events: event stream disabled"))

    def break_event_stream(self, exc: BaseException | None = None) -> None:
        """End every current event stream with ``exc`` (RuntimeUnavailableError by
        default) once its already queued events have been read. New streams work."""
        err = exc if exc is not None else RuntimeUnavailableError("event stream broken")
        for stream in list(self._streams):
            stream.fail(err)

    @property
    def event_subscribers(self) -> int:
        """Number of open event streams."""
        return sum(1 for s in self._streams if not s.closed)

    def get_container_events(self) -> AsyncIterator[ContainerEvent]:
        """A new event stream (single consumer). Subscribed from this call on, so
        events of operations done before the first ``__anext__`` are delivered.

        Iteration raises UnimplementedError when events are off, and ends with the
        error given to :meth:`break_event_stream`. Each stream buffers up to
        :data:`EVENT_QUEUE_SIZE` events; further events are dropped for it and
        counted in :attr:`dropped_events`.
        """
        stream = _EventStream(self)
        self._streams.add(stream)
        return stream
