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
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import itertools
import math
import os
import re
import weakref
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Generator,
    Iterable,
    Mapping,
    Sequence,
)
from pathlib import Path
from typing import Any, TypeVar

import attrs

from kubelet_kit.clock import Clock, TimerHandle, wait_for
from kubelet_kit.container import labels as klabels
from kubelet_kit.container.images import normalize_image_ref as _normalize
from kubelet_kit.container.interfaces import (
    AuthConfig,
    ContainerConfig,
    ContainerEvent,
    ContainerEventType,
    ContainerFilter,
    ContainerInfo,
    ContainerState,
    ContainerStats,
    ContainerStatus,
    ExecResult,
    FilesystemUsage,
    Image,
    ImageSpec,
    LinuxContainerResources,
    PodSandbox,
    PodSandboxConfig,
    PodSandboxFilter,
    PodSandboxMetadata,
    PodSandboxState,
    PodSandboxStats,
    PodSandboxStatus,
    RuntimeCondition,
    RuntimeStatus,
    VersionInfo,
)
from kubelet_kit.container.logs import format_timestamp
from kubelet_kit.container.streams import ByteSink, ByteSource, StreamIO, TerminalSize
from kubelet_kit.errors import (
    AlreadyExistsError,
    ContainerRuntimeError,
    ContainerStartError,
    DeadlineExceededError,
    ImageNotFoundError,
    ImagePullError,
    InvalidArgumentError,
    NotFoundError,
    RuntimeUnavailableError,
    UnimplementedError,
)
from kubelet_kit.testing.clock import FakeClock

POD_UID_LABEL = klabels.POD_UID
_R = TypeVar("_R", "_Sandbox", "_Container")

__all__ = [
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

#: Capacity of each event subscriber's queue (the kubelet's event channel size).
EVENT_QUEUE_SIZE = 1000

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


def _image_id(ref: str) -> str:
    return "sha256:" + hashlib.sha256(normalize_image_ref(ref).encode()).hexdigest()


# ---------------------------------------------------------------- the tiny shell


class _ShellSyntaxError(Exception):
    pass


# A word is a sequence of parts: ("lit", text) or ("var", name), expanded at run time
# (so ``$?`` sees the status of the statement before it).
_Part = tuple[str, str]


@attrs.frozen
class _Word:
    parts: tuple[_Part, ...]
    quoted: bool


@attrs.frozen
class _Statement:
    """Words of one simple command; ``cond`` is "and" after ``&&``, "or" after ``||``."""

    words: tuple[_Word, ...]
    cond: str = ""


def _parse_script(script: str) -> list[_Statement]:
    """Split a script into statements of words, honouring quotes and ``$VAR``."""
    statements: list[_Statement] = []
    words: list[_Word] = []
    parts: list[_Part] = []
    in_word = False
    quoted = False
    cond = ""
    i, n = 0, len(script)

    def end_word() -> None:
        nonlocal parts, in_word, quoted
        if in_word:
            words.append(_Word(tuple(parts), quoted))
        parts, in_word, quoted = [], False, False

    def end_statement(next_cond: str) -> None:
        nonlocal words, cond
        end_word()
        if words:
            statements.append(_Statement(tuple(words), cond))
        elif next_cond:
            raise _ShellSyntaxError(f"unexpected {'&&' if next_cond == 'and' else '||'}")
        words = []
        cond = next_cond

    def parse_var(i: int) -> tuple[_Part, int]:
        # ``i`` points at "$".
        if i + 1 < n and script[i + 1] == "{":
            j = script.find("}", i + 2)
            if j < 0:
                raise _ShellSyntaxError("bad substitution")
            return ("var", script[i + 2 : j]), j + 1
        if i + 1 < n and script[i + 1] == "?":
            return ("var", "?"), i + 2
        j = i + 1
        while j < n and (script[j].isalnum() or script[j] == "_"):
            j += 1
        if j == i + 1:
            return ("lit", "$"), i + 1
        return ("var", script[i + 1 : j]), j

    while i < n:
        c = script[i]
        if c in " \t":
            end_word()
            i += 1
        elif c in ";\n":
            end_statement("")
            i += 1
        elif script.startswith("&&", i):
            end_statement("and")
            i += 2
        elif script.startswith("||", i):
            end_statement("or")
            i += 2
        elif c == "#" and not in_word:
            while i < n and script[i] != "\n":
                i += 1
        elif c == "'":
            j = script.find("'", i + 1)
            if j < 0:
                raise _ShellSyntaxError("unterminated quoted string")
            parts.append(("lit", script[i + 1 : j]))
            in_word = quoted = True
            i = j + 1
        elif c == '"':
            in_word = quoted = True
            i += 1
            while True:
                if i >= n:
                    raise _ShellSyntaxError("unterminated quoted string")
                c = script[i]
                if c == '"':
                    i += 1
                    break
                if c == "\\" and i + 1 < n and script[i + 1] in '\\"$`':
                    parts.append(("lit", script[i + 1]))
                    i += 2
                elif c == "$":
                    part, i = parse_var(i)
                    parts.append(part)
                else:
                    parts.append(("lit", c))
                    i += 1
        elif c == "\\":
            if i + 1 < n and script[i + 1] != "\n":
                parts.append(("lit", script[i + 1]))
                in_word = True
            i += 2
        elif c == "$":
            part, i = parse_var(i)
            parts.append(part)
            in_word = True
        else:
            parts.append(("lit", c))
            in_word = True
            i += 1
    end_word()
    if cond and not words:
        raise _ShellSyntaxError("unexpected end of file")
    end_statement("")
    return statements


def _literal_statement(argv: Sequence[str]) -> list[_Statement]:
    """A single statement whose words are taken verbatim (no expansion)."""
    return [_Statement(tuple(_Word((("lit", a),), True) for a in argv))]


def _parse_command(argv: Sequence[str]) -> list[_Statement] | None:
    """The statements ``argv`` runs, or None when the fake cannot run it.

    ``sh -c SCRIPT`` (any path ending in sh, ash or bash) runs SCRIPT; any other
    non-empty argv is run as one statement; an empty one has nothing to run.
    """
    if not argv:
        return None
    if len(argv) >= 3 and os.path.basename(argv[0]) in ("sh", "ash", "bash") and argv[1] == "-c":
        return _parse_script(argv[2])
    return _literal_statement(argv)


@attrs.frozen
class _Command:
    """An expanded statement: argv and where its stdout goes."""

    argv: tuple[str, ...]
    stdout: str = "stdout"  # "stdout", "stderr", "null" or "file"
    path: str = ""
    append: bool = False


_STDOUT_REDIRECT = re.compile(r"1?(>>|>)(.*)")
_STDERR_REDIRECT = re.compile(r"2>>?(.*)")


def _expand(statement: _Statement, env: Mapping[str, str], status: int) -> _Command:
    """Expand a statement's words and take its redirections out of argv."""
    texts = [
        (
            "".join(
                (str(status) if value == "?" else env.get(value, "")) if kind == "var" else value
                for kind, value in word.parts
            ),
            word.quoted,
        )
        for word in statement.words
    ]
    argv: list[str] = []
    stdout, path, append = "stdout", "", False
    i = 0
    while i < len(texts):
        text, quoted = texts[i]
        i += 1
        if quoted:
            argv.append(text)
            continue
        if text in (">&2", "1>&2"):
            stdout = "stderr"
            continue
        if text == "2>&1":
            continue  # stderr already goes where the fake sends it
        m = _STDERR_REDIRECT.fullmatch(text)
        if m:
            # The fake's commands write errors to stderr only; dropping the target
            # is the closest it gets.
            if not m[1] and i < len(texts):
                i += 1
            continue
        m = _STDOUT_REDIRECT.fullmatch(text)
        if m:
            target = m[2]
            if not target and i < len(texts):
                target = texts[i][0]
                i += 1
            if target == "/dev/null":
                stdout = "null"
            elif target == "/dev/stderr":
                stdout = "stderr"
            elif target != "/dev/stdout":
                stdout, path, append = "file", target, m[1] == ">>"
            continue
        if text == "":
            continue  # an unquoted empty expansion vanishes, as in sh
        argv.append(text)
    return _Command(tuple(argv), stdout, path, append)


_SLEEP_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def _parse_sleep(arg: str) -> float | None:
    if arg in ("inf", "infinity"):
        return math.inf
    mult = 1.0
    if arg and arg[-1] in _SLEEP_UNITS:
        mult = _SLEEP_UNITS[arg[-1]]
        arg = arg[:-1]
    try:
        value = float(arg)
    except ValueError:
        return None
    if value < 0 or math.isnan(value):
        return None
    return value * mult


def _test(args: Sequence[str], fs: Mapping[str, str]) -> int:
    """``test``/``[``: file tests against the fake file system, strings, integers."""
    try:
        if len(args) == 0:
            return 1
        if len(args) == 1:
            return 0 if args[0] else 1
        if len(args) == 2 and args[0] == "!":
            return 1 - _test(args[1:], fs)
        if len(args) == 2:
            op, arg = args
            if op in ("-e", "-f"):
                return 0 if arg in fs else 1
            if op == "-s":
                return 0 if fs.get(arg) else 1
            if op == "-n":
                return 0 if arg else 1
            if op == "-z":
                return 0 if not arg else 1
        if len(args) == 3:
            a, op, b = args
            if op in ("=", "=="):
                return 0 if a == b else 1
            if op == "!=":
                return 0 if a != b else 1
            ops = {
                "-eq": int.__eq__,
                "-ne": int.__ne__,
                "-lt": int.__lt__,
                "-le": int.__le__,
                "-gt": int.__gt__,
                "-ge": int.__ge__,
            }
            if op in ops:
                return 0 if ops[op](int(a), int(b)) else 1
    except ValueError:
        return 2
    return 2


def _run_statements(
    statements: list[_Statement],
    env: Mapping[str, str],
    emit: Callable[[str, str], None],
    fs: dict[str, str],
    *,
    unknown_blocks: bool,
    on_trap_term: Callable[[bool], None],
) -> Generator[float, None, int]:
    """Run statements; yields seconds to sleep (``inf``: until killed), returns the exit code.

    ``emit(stream, line)`` receives output lines; ``fs`` maps paths to file contents
    and is shared by a container and the commands exec'd in it.
    """
    status = 0
    for statement in statements:
        if (statement.cond == "and" and status != 0) or (statement.cond == "or" and status == 0):
            continue
        cmd = _expand(statement, env, status)
        argv = list(cmd.argv)
        exec_ = False
        while argv and argv[0] == "exec":
            argv, exec_ = argv[1:], True
        if not argv:
            continue
        if cmd.stdout == "file":
            if cmd.append:
                fs.setdefault(cmd.path, "")
            else:
                fs[cmd.path] = ""

        def out(line: str, cmd: _Command = cmd) -> None:
            if cmd.stdout == "file":
                fs[cmd.path] += line + "\n"
            elif cmd.stdout != "null":
                emit(cmd.stdout, line)

        name = os.path.basename(argv[0])
        args = argv[1:]
        if name == "echo":
            out(" ".join(args[1:] if args[:1] == ["-n"] else args))
            status = 0
        elif name == "sleep":
            secs = _parse_sleep(args[0]) if args else None
            if secs is None:
                emit("stderr", f"sleep: invalid number '{args[0] if args else ''}'")
                status = 1
            else:
                yield secs
                status = 0
        elif name == "exit":
            if not args:
                return status
            try:
                return int(args[0]) & 0xFF
            except ValueError:
                emit("stderr", f"sh: exit: Illegal number: {args[0]}")
                return 2
        elif name in ("true", ":"):
            status = 0
        elif name == "false":
            status = 1
        elif name == "cat":
            status = 0
            for path in args:
                if path not in fs:
                    emit("stderr", f"cat: can't open '{path}': No such file or directory")
                    status = 1
                    continue
                for line in fs[path].splitlines():
                    out(line)
        elif name == "touch":
            for path in args:
                fs.setdefault(path, "")
            status = 0
        elif name == "rm":
            force = any(a.startswith("-") and "f" in a for a in args)
            status = 0
            for path in (a for a in args if not a.startswith("-")):
                if path in fs:
                    del fs[path]
                elif not force:
                    emit("stderr", f"rm: can't remove '{path}': No such file or directory")
                    status = 1
        elif name in ("test", "["):
            if name == "[":
                if not args or args[-1] != "]":
                    emit("stderr", "sh: [: missing ]")
                    status = 2
                    continue
                args = args[:-1]
            status = _test(args, fs)
        elif name == "trap":
            # Only what the fake needs: ``trap '' TERM`` ignores SIGTERM,
            # ``trap - TERM`` restores it.
            signals = {s.upper().removeprefix("SIG") for s in args[1:]}
            if len(args) >= 2 and signals & {"TERM", "15"}:
                on_trap_term(args[0] == "")
            status = 0
        elif unknown_blocks:
            # A program the fake does not know: it behaves like a server that runs
            # until it is stopped.
            yield math.inf
        else:
            emit("stderr", f"sh: {argv[0]}: not found")
            status = 127
        if exec_:
            return status
    return status


# ------------------------------------------------------------------ inner records


@attrs.define
class _Sandbox:
    id: str
    config: PodSandboxConfig
    state: PodSandboxState
    created_at: float
    ip: str
    listed: PodSandbox | None = None  # what list_pod_sandboxes last built, reused


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
    proc: Generator[float, None, int] | None = None
    timer: TimerHandle | None = None
    waiters: list[asyncio.Future[None]] = attrs.field(factory=list)
    fs: dict[str, str] = attrs.field(factory=dict)
    cpu_ns: int = 0
    memory_working_set: int = 0
    memory_usage: int = 0
    writable_layer_bytes: int = 0
    writable_layer_inodes: int = 0
    listed: ContainerInfo | None = None  # what list_containers last built, reused


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


class FakeRuntime:
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
    ``ImageNotFoundError`` (or what :meth:`fail_pull` scripted). References are
    normalised as runtimes do (``busybox`` is ``docker.io/library/busybox:latest``).

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
    ) -> None:
        self.clock: Clock = clock if clock is not None else FakeClock()
        self.calls: list[Call] = []
        self.dropped_events = 0
        self.pull_latency = pull_latency
        self.image_fs = image_fs
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

    # ================================================================ test controls

    def set_latency(self, method: str, seconds: float) -> None:
        """Make every later call of ``method`` take ``seconds`` of clock time.

        ``method`` ``"*"`` sets the default for methods without their own latency.

        Raises:
            ValueError: ``method`` is not a Runtime method.
        """
        if method == "*":
            self._default_latency = float(seconds)
            return
        self._check_method(method)
        self._latency[method] = float(seconds)

    def latency_of(self, method: str) -> float:
        """The latency currently applied to ``method``."""
        return self._latency.get(method, self._default_latency)

    def inject_error(
        self,
        method: str,
        exc: BaseException,
        times: int = 1,
        *,
        when: Callable[..., bool] | None = None,
    ) -> None:
        """Make the next ``times`` calls of ``method`` raise ``exc``.

        The same exception instance is raised each time (with a fresh traceback),
        so a test may check ``excinfo.value is exc``. Faults for one method are
        used in the order they were injected; a fault with ``when`` applies only to
        calls for which ``when(*args)`` is true (``args`` in signature order, as in
        :class:`Call`). The fault is raised after the call's latency.

        Raises:
            ValueError: ``method`` is not a Runtime method, or ``times < 1``.
        """
        self._check_method(method)
        if times < 1:
            raise ValueError(f"inject_error: times must be >= 1, got {times}")
        self._faults.append(_Fault(method, exc, times, when))

    def inject_latency(
        self,
        method: str,
        seconds: float,
        times: int = 1,
        *,
        when: Callable[..., bool] | None = None,
    ) -> None:
        """Make the next ``times`` calls of ``method`` (those for which
        ``when(*args)`` is true, if given) take ``seconds`` more clock time.

        Unlike :meth:`set_latency` this hits chosen calls only, e.g. one container's
        ``container_status`` hanging while the others answer. A delay is used up
        when the call starts, even if the call is then cancelled.

        Raises:
            ValueError: ``method`` is not a Runtime method, or ``times < 1``.
        """
        self._check_method(method)
        if times < 1:
            raise ValueError(f"inject_latency: times must be >= 1, got {times}")
        self._delays.append(_Fault(method, _DELAY, times, when, seconds))

    def pending_errors(self, method: str | None = None) -> list[InjectedError]:
        """Injected faults not yet raised (all of them, or those of ``method``)."""
        return [
            InjectedError(f.method, f.exc, f.remaining, f.when)
            for f in self._faults
            if method is None or f.method == method
        ]

    def clear_errors(self) -> None:
        """Drop every pending injected fault."""
        self._faults.clear()

    def calls_to(self, method: str) -> list[Call]:
        """The recorded calls of ``method``, oldest first."""
        return [c for c in self.calls if c.method == method]

    def clear_calls(self) -> None:
        """Forget the recorded calls."""
        self.calls.clear()

    def set_unavailable(self, unavailable: bool = True) -> None:
        """While on, every call raises RuntimeUnavailableError (a dead runtime)."""
        self._unavailable = unavailable
        if unavailable:
            for stream in list(self._streams):
                stream.fail(RuntimeUnavailableError("the runtime went away"))

    def set_condition(self, type: str, status: bool, reason: str = "", message: str = "") -> None:
        """Set a runtime condition reported by :meth:`status`."""
        self._conditions[type] = RuntimeCondition(type, status, reason, message)

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

    def add_image(
        self, ref: str, *, present: bool = False, size: int = 1_048_576, pinned: bool = False
    ) -> Image:
        """Teach the registry ``ref`` (so pulling it succeeds); ``present`` also puts
        it on the node; ``pinned`` marks it as one image GC must keep (a sandbox
        image). Returns the image."""
        norm = normalize_image_ref(ref)
        image = Image(id=_image_id(norm), repo_tags=(norm,), size=size, pinned=pinned)
        self._registry[norm] = image
        self._pull_failures.pop(norm, None)
        if present:
            self._present.add(norm)
        return image

    def fail_pull(self, ref: str, exc: BaseException) -> None:
        """Make every pull of ``ref`` raise ``exc`` until :meth:`add_image` is called."""
        self._pull_failures[normalize_image_ref(ref)] = exc

    def require_auth(self, ref: str, username: str, password: str) -> None:
        """Make ``ref`` private: a pull succeeds only with an
        :class:`~kubelet_kit.container.AuthConfig` carrying ``username`` and
        ``password`` (directly or as the base64 ``auth`` form); any other pull
        raises ImagePullError, as a registry answering "unauthorized" does.
        Calling it again adds another accepted pair. The image must still be
        known (:meth:`add_image`)."""
        self._private.setdefault(normalize_image_ref(ref), set()).add((username, password))

    def script(
        self,
        container_name: str,
        *,
        exit_code: int | None = None,
        after: float = 0.0,
        oom_killed: bool = False,
        pod_uid: str | None = None,
        times: int | None = None,
    ) -> None:
        """Script how containers named ``container_name`` behave once started.

        Instead of running its command, a matching container exits ``after`` clock
        seconds after it starts, with ``exit_code`` (0 when None; 137 and reason
        ``OOMKilled`` with ``oom_killed``). ``pod_uid`` limits the rule to one pod
        (by the ``io.kubernetes.pod.uid`` label, else the sandbox's uid); ``times``
        limits how many starts it applies to (None: all). Rules are tried in the
        order they were added; the first with starts left wins.
        """
        self._scripts.append(
            _ScriptRule(container_name, exit_code, after, oom_killed, pod_uid, times)
        )

    def ignore_sigterm(self, container_name: str) -> None:
        """Containers named ``container_name`` ignore SIGTERM from now on, so a stop
        waits its full timeout and then kills them (exit 137)."""
        self._ignore_term.add(container_name)

    def exit_container(
        self, container_id: str, exit_code: int = 0, *, reason: str | None = None
    ) -> None:
        """End a running container now (reason ``Completed``/``Error`` by default).

        Raises:
            NotFoundError: no such container.
            ValueError: it is not running.
        """
        c = self._container(container_id)
        if c.state != ContainerState.RUNNING:
            raise ValueError(f"exit_container: container {container_id} is {c.state.value}")
        self._finish(c, exit_code, reason=reason)

    def mark_unknown(self, container_id: str) -> None:
        """Put a container in CONTAINER_UNKNOWN (the runtime lost track of it).

        Its command stops running; ``stop_container``/``remove_container`` then kill
        it (exit 137) as they would a running one. No event is sent.

        Raises:
            NotFoundError: no such container.
        """
        c = self._container(container_id)
        self._halt(c)
        c.state = ContainerState.UNKNOWN

    def files(self, container_id: str) -> dict[str, str]:
        """A copy of the container's file system (path -> content) as its shell and
        exec'd commands left it (``echo x > f``, ``touch``, ``rm``).

        Raises:
            NotFoundError: no such container.
        """
        return dict(self._container(container_id).fs)

    def write_file(self, container_id: str, path: str, content: str) -> None:
        """Create or replace a file in the container's file system (for ``cat``,
        ``test -f`` in commands and exec probes).

        Raises:
            NotFoundError: no such container.
        """
        self._container(container_id).fs[path] = content

    def remove_file(self, container_id: str, path: str) -> None:
        """Remove a file from the container's file system if it is there.

        Raises:
            NotFoundError: no such container.
        """
        self._container(container_id).fs.pop(path, None)

    def set_exec_handler(
        self,
        handler: Callable[[str, Sequence[str]], ExecResult | Awaitable[ExecResult] | None] | None,
    ) -> None:
        """Script ``exec_sync``: ``handler(container_id, cmd)`` returns the result
        (or an awaitable of it), or None to let the shell run the command."""
        self._exec_handler = handler

    def set_exec_stream_handler(self, handler: ExecStreamHandler | None) -> None:
        """Script :meth:`exec_stream`: ``handler(container_id, cmd, io)`` runs the
        session on ``io`` and returns the exit code (or an awaitable of it), or
        None to let the default behaviour run. The fake closes ``io.stdout`` and
        ``io.stderr`` afterwards either way."""
        self._exec_stream_handler = handler

    def set_attach_handler(self, handler: AttachHandler | None) -> None:
        """Script :meth:`attach_stream`: ``handler(container_id, io)`` returns an
        awaitable that runs the session, or None to let the default behaviour run.
        The fake closes ``io.stdout`` and ``io.stderr`` afterwards either way."""
        self._attach_handler = handler

    def set_port_forward_handler(self, handler: PortForwardHandler | None) -> None:
        """Script :meth:`port_forward_stream`: ``handler(sandbox_id, port, source,
        sink)`` returns an awaitable that serves the connection (it may raise
        ContainerRuntimeError, as for a port nothing listens on), or None to let
        the default echo run. The fake closes ``sink`` afterwards either way."""
        self._port_forward_handler = handler

    def terminal_sizes(self, container_id: str) -> list[TerminalSize]:
        """Every terminal size the exec and attach sessions of a container were
        sent, oldest first (what the client's ``resize`` stream carried)."""
        return list(self._sizes.get(container_id, ()))

    def stdin_closed(self, container_id: str) -> bool:
        """Whether the container's stdin was closed by the end of the first attach's
        stdin (a container with ``stdin_once``)."""
        return container_id in self._stdin_closed

    def set_stats(
        self,
        container_id: str,
        *,
        cpu_ns: int | None = None,
        memory_working_set: int | None = None,
        memory_usage: int | None = None,
        writable_layer_bytes: int | None = None,
        writable_layer_inodes: int | None = None,
    ) -> None:
        """Set the resource usage reported for a container (unset fields keep theirs).

        Raises:
            NotFoundError: no such container.
        """
        c = self._container(container_id)
        if cpu_ns is not None:
            c.cpu_ns = cpu_ns
        if memory_working_set is not None:
            c.memory_working_set = memory_working_set
        if memory_usage is not None:
            c.memory_usage = memory_usage
        if writable_layer_bytes is not None:
            c.writable_layer_bytes = writable_layer_bytes
        if writable_layer_inodes is not None:
            c.writable_layer_inodes = writable_layer_inodes

    def logs(self, container_id: str, stream: str | None = None) -> list[LogLine]:
        """Lines a container wrote (kept after removal), optionally of one stream.

        Raises:
            NotFoundError: the runtime never had such a container.
        """
        if container_id not in self._logs:
            raise NotFoundError(f"container {container_id!r} not found")
        return [ln for ln in self._logs[container_id] if stream is None or ln.stream == stream]

    # ================================================================ Runtime: info

    async def version(self) -> VersionInfo:
        """Name and version of the fake runtime. Never blocks beyond its latency."""
        await self._enter("version", ())
        return VersionInfo(runtime_name="fake", runtime_version="0.1.0", runtime_api_version="v1")

    async def status(self) -> RuntimeStatus:
        """RuntimeReady and NetworkReady (true unless :meth:`set_condition` says not)."""
        await self._enter("status", ())
        return RuntimeStatus(conditions=tuple(self._conditions.values()))

    # =========================================================== Runtime: sandboxes

    async def run_pod_sandbox(self, config: PodSandboxConfig) -> str:
        """Create a READY sandbox. Raises AlreadyExistsError for a duplicate
        name/namespace/uid/attempt. Not idempotent."""
        await self._enter("run_pod_sandbox", (config,))
        md = config.metadata
        taken = self._sandbox_by_metadata.get(md)
        if taken is not None:
            raise AlreadyExistsError(
                f"run_pod_sandbox: sandbox name {_sandbox_name(config)!r} is reserved "
                f"for {taken}"
            )
        sid = self._new_id("sandbox")
        ip = "" if config.namespace_options.host_network else f"10.88.{next(self._ips)}.1"
        self._sandboxes[sid] = _Sandbox(sid, config, PodSandboxState.READY, self.clock.now(), ip)
        self._sandbox_by_metadata[md] = sid
        self._containers_by_sandbox[sid] = {}
        self._sandboxes_by_pod.setdefault(config.labels.get(POD_UID_LABEL, ""), {})[sid] = None
        self._emit(sid, ContainerEventType.CREATED, sid)
        self._emit(sid, ContainerEventType.STARTED, sid)
        return sid

    async def stop_pod_sandbox(self, pod_sandbox_id: str) -> None:
        """Kill every running container in the sandbox and mark it NOTREADY.
        Idempotent; NotFoundError for an unknown id."""
        await self._enter("stop_pod_sandbox", (pod_sandbox_id,))
        sb = self._sandbox(pod_sandbox_id)
        self._stop_sandbox(sb)

    async def remove_pod_sandbox(self, pod_sandbox_id: str) -> None:
        """Stop the sandbox, remove it and its containers. Idempotent (unknown id
        succeeds)."""
        await self._enter("remove_pod_sandbox", (pod_sandbox_id,))
        sb = self._sandboxes.get(pod_sandbox_id)
        if sb is None:
            return
        self._stop_sandbox(sb)
        for c in list(self._containers_by_sandbox.get(sb.id, {}).values()):
            self._remove_container(c)
        del self._sandboxes[sb.id]
        self._sandbox_by_metadata.pop(sb.config.metadata, None)
        self._containers_by_sandbox.pop(sb.id, None)
        self._sandboxes_by_pod.get(sb.config.labels.get(POD_UID_LABEL, ""), {}).pop(sb.id, None)
        self._emit(sb.id, ContainerEventType.DELETED, sb.id, sandbox_status=self._sb_status(sb))

    async def pod_sandbox_status(self, pod_sandbox_id: str) -> PodSandboxStatus:
        """Status of one sandbox. Raises NotFoundError for an unknown id."""
        await self._enter("pod_sandbox_status", (pod_sandbox_id,))
        return self._sb_status(self._sandbox(pod_sandbox_id))

    async def list_pod_sandboxes(self, filter: PodSandboxFilter | None = None) -> list[PodSandbox]:
        """Every sandbox matching ``filter``, oldest first."""
        await self._enter("list_pod_sandboxes", (filter,))
        out = []
        for sb in self._candidates(self._sandboxes, self._sandboxes_by_pod, filter):
            if sb.listed is not None and sb.listed.state is sb.state:
                if filter is None or filter.matches(sb.listed):
                    out.append(sb.listed)
                continue
            item = sb.listed = PodSandbox(
                id=sb.id,
                metadata=sb.config.metadata,
                state=sb.state,
                created_at=sb.created_at,
                labels=sb.config.labels,
                annotations=sb.config.annotations,
                runtime_handler=sb.config.runtime_handler,
            )
            if filter is None or filter.matches(item):
                out.append(item)
        return out

    # ========================================================== Runtime: containers

    async def create_container(
        self, pod_sandbox_id: str, config: ContainerConfig, sandbox_config: PodSandboxConfig
    ) -> str:
        """Create a container in a READY sandbox.

        Raises:
            NotFoundError: unknown sandbox.
            ContainerStartError: the sandbox is not READY.
            AlreadyExistsError: the sandbox has a container of that name and attempt.
        """
        await self._enter("create_container", (pod_sandbox_id, config, sandbox_config))
        sb = self._sandbox(pod_sandbox_id)
        if sb.state != PodSandboxState.READY:
            raise ContainerStartError(
                f"create_container: sandbox {pod_sandbox_id} is in {sb.state.value} state"
            )
        for other in self._containers_by_sandbox.get(sb.id, {}).values():
            if other.config.metadata == config.metadata:
                raise AlreadyExistsError(
                    f"create_container: container name {config.metadata.name!r} attempt "
                    f"{config.metadata.attempt} is reserved for {other.id}"
                )
        cid = self._new_id("container")
        log_dir = sb.config.log_directory or sandbox_config.log_directory
        log_path = ""
        if config.log_path:
            log_path = os.path.join(log_dir, config.log_path) if log_dir else config.log_path
        norm = normalize_image_ref(config.image.image)
        image = self._registry.get(norm)
        c = _Container(
            id=cid,
            sandbox_id=sb.id,
            config=config,
            created_at=self.clock.now(),
            image_ref=image.id if image is not None else _image_id(norm),
            log_path=log_path,
            env={kv.key: kv.value for kv in config.envs},
            resources=config.resources,
            ignore_term=config.metadata.name in self._ignore_term,
        )
        self._containers[cid] = c
        self._containers_by_sandbox.setdefault(sb.id, {})[cid] = c
        self._containers_by_pod.setdefault(config.labels.get(POD_UID_LABEL, ""), {})[cid] = None
        self._logs[cid] = []
        self._emit(cid, ContainerEventType.CREATED, sb.id)
        return cid

    async def start_container(self, container_id: str) -> None:
        """Start a CREATED container.

        Raises:
            NotFoundError: unknown container.
            ContainerStartError: the container is not CREATED (already started,
                exited) or its sandbox is not READY.
        """
        await self._enter("start_container", (container_id,))
        c = self._container(container_id)
        if c.state != ContainerState.CREATED:
            raise ContainerStartError(
                f"start_container: container {container_id} is in {c.state.value} state, "
                "not CONTAINER_CREATED"
            )
        sb = self._sandboxes[c.sandbox_id]
        if sb.state != PodSandboxState.READY:
            raise ContainerStartError(
                f"start_container: sandbox {sb.id} is in {sb.state.value} state"
            )
        c.state = ContainerState.RUNNING
        c.started_at = self.clock.now()
        if self._names_ignoring_term(c):
            c.ignore_term = True
        self._emit(c.id, ContainerEventType.STARTED, c.sandbox_id)
        rule = self._take_script(c, sb)
        if rule is not None:
            code = rule.exit_code
            if code is None:
                code = EXIT_SIGKILL if rule.oom_killed else 0
            reason = "OOMKilled" if rule.oom_killed else None
            if rule.after <= 0:
                self._finish(c, code, reason=reason)
            else:
                c.timer = self.clock.call_later(
                    rule.after, lambda: self._finish_if_running(c, code, reason)
                )
            return
        statements = self._statements_for(c)
        if isinstance(statements, str):
            # A script the shell cannot parse: sh reports it and exits 2.
            self._write_log(c, "stderr", f"sh: syntax error: {statements}")
            self._finish(c, 2)
            return
        if statements is None:
            return  # nothing to run: runs until stopped
        c.proc = _run_statements(
            statements,
            c.env,
            lambda stream, text: self._write_log(c, stream, text),
            c.fs,
            unknown_blocks=True,
            on_trap_term=lambda ignore: setattr(c, "ignore_term", ignore),
        )
        self._step(c)

    async def stop_container(self, container_id: str, timeout: float) -> None:
        """SIGTERM the container, SIGKILL it after ``timeout`` clock seconds; returns
        once it has exited. Idempotent (a container not running is left as it is).

        Raises:
            NotFoundError: unknown container.
        """
        await self._enter("stop_container", (container_id, timeout))
        c = self._container(container_id)
        if c.state == ContainerState.UNKNOWN:
            self._finish(c, EXIT_SIGKILL)
            return
        if c.state != ContainerState.RUNNING:
            return
        if timeout <= 0:
            self._finish(c, EXIT_SIGKILL)
            return
        if not c.ignore_term:
            self._finish(c, EXIT_SIGTERM)
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        c.waiters.append(fut)
        try:
            await wait_for(self.clock, asyncio.shield(fut), timeout)
        except TimeoutError:
            if c.state == ContainerState.RUNNING:
                self._finish(c, EXIT_SIGKILL)

    async def remove_container(self, container_id: str) -> None:
        """Remove a container, killing it first if it runs. Idempotent (unknown id
        succeeds)."""
        await self._enter("remove_container", (container_id,))
        c = self._containers.get(container_id)
        if c is not None:
            self._remove_container(c)

    async def list_containers(self, filter: ContainerFilter | None = None) -> list[ContainerInfo]:
        """Every container matching ``filter``, oldest first."""
        await self._enter("list_containers", (filter,))
        out = []
        for c in self._candidates(self._containers, self._containers_by_pod, filter):
            if c.listed is not None and c.listed.state is c.state:
                if filter is None or filter.matches(c.listed):
                    out.append(c.listed)
                continue
            info = c.listed = ContainerInfo(
                id=c.id,
                pod_sandbox_id=c.sandbox_id,
                metadata=c.config.metadata,
                image=c.config.image.image,
                image_ref=c.image_ref,
                state=c.state,
                created_at=c.created_at,
                labels=c.config.labels,
                annotations=c.config.annotations,
            )
            if filter is None or filter.matches(info):
                out.append(info)
        return out

    async def container_status(self, container_id: str) -> ContainerStatus:
        """Status of one container. Raises NotFoundError for an unknown id."""
        await self._enter("container_status", (container_id,))
        return self._c_status(self._container(container_id))

    async def exec_sync(
        self, container_id: str, cmd: Sequence[str], timeout: float | None = None
    ) -> ExecResult:
        """Run ``cmd`` with the shell (or the exec handler) in a running container.

        ``timeout`` None or ``<= 0`` means no limit, as in the CRI.

        Raises:
            NotFoundError: unknown container.
            ContainerRuntimeError: the container is not running.
            DeadlineExceededError: it ran longer than ``timeout`` clock seconds.
        """
        await self._enter("exec_sync", (container_id, tuple(cmd), timeout))
        c = self._container(container_id)
        if c.state != ContainerState.RUNNING:
            raise ContainerRuntimeError(
                f"exec_sync: container {container_id} is in {c.state.value} state"
            )
        limit = timeout if timeout is not None and timeout > 0 else None
        try:
            return await wait_for(self.clock, self._exec(c, cmd), limit)
        except TimeoutError:
            raise DeadlineExceededError(
                f"exec_sync: command {list(cmd)!r} in container {container_id} timed out "
                f"after {timeout:g}s"
            ) from None

    # ====================================================== StreamingRuntime

    async def exec_stream(self, container_id: str, cmd: Sequence[str], io: StreamIO) -> int:
        """Run an exec session on ``io`` in a running container; return its exit code.

        With :meth:`set_exec_stream_handler` the handler runs it. Otherwise a client
        with stdin gets it echoed back on stdout (as ``cat`` would) until its end,
        and the exit code is 0; a client without stdin gets ``cmd`` run as
        :meth:`exec_sync` runs it (its exec handler, or the shell), its output
        written to stdout and stderr (both to stdout with ``tty``) and its exit
        code returned. Sizes from ``io.resize`` are recorded
        (:meth:`terminal_sizes`). Closes ``io.stdout`` and ``io.stderr``.

        Raises:
            NotFoundError: unknown container.
            InvalidArgumentError: ``cmd`` is empty.
            ContainerRuntimeError: the container is not running.
        """
        await self._enter("exec_stream", (container_id, tuple(cmd), io))
        c = self._container(container_id)
        if not cmd:
            raise InvalidArgumentError(f"exec_stream: container {container_id}: cmd is empty")
        self._check_running(c, "exec_stream")
        sizes = self._record_sizes(c.id, io)
        try:
            if self._exec_stream_handler is not None:
                result = self._exec_stream_handler(c.id, tuple(cmd), io)
                if isinstance(result, Awaitable):
                    result = await result
                if result is not None:
                    return result
            if io.stdin is not None:
                await _echo(io.stdin, io.stdout)
                return 0
            res = await self._exec(c, cmd)
            await _send(io.stdout, res.stdout)
            await _send(io.stdout if io.tty else io.stderr, res.stderr)
            return res.exit_code
        finally:
            await _stop(sizes)
            await _close(io.stdout)
            await _close(io.stderr)

    async def attach_stream(self, container_id: str, io: StreamIO) -> None:
        """Attach ``io`` to a running container until it exits, the client's stdin
        ends, or the call is cancelled.

        With :meth:`set_attach_handler` the handler runs the session. Otherwise
        each line the container writes from now on goes to ``io.stdout`` (stderr
        lines to ``io.stderr``; to stdout when the container has ``tty``), and a
        container with ``stdin`` echoes the client's stdin to stdout. When the
        client's stdin ends the attach ends, except for a container with
        ``stdin_once``: its stdin is closed (:meth:`stdin_closed`) and the attach
        lasts until it exits. Sizes are recorded (:meth:`terminal_sizes`).
        Closes ``io.stdout`` and ``io.stderr``.

        Raises:
            NotFoundError: unknown container.
            ContainerRuntimeError: the container is not running.
        """
        await self._enter("attach_stream", (container_id, io))
        c = self._container(container_id)
        self._check_running(c, "attach_stream")
        sizes = self._record_sizes(c.id, io)
        queue: asyncio.Queue[tuple[str, str]] = asyncio.Queue()
        self._attached.setdefault(c.id, []).append(queue)
        tasks: list[asyncio.Future[Any]] = []
        try:
            if self._attach_handler is not None:
                result = self._attach_handler(c.id, io)
                if isinstance(result, Awaitable):
                    await result
                    return
            tty = c.config.tty

            async def lines() -> None:
                while True:
                    stream, text = await queue.get()
                    sink = io.stdout if stream == "stdout" or tty else io.stderr
                    await _send(sink, (text + "\n").encode())

            async def stdin() -> None:
                assert io.stdin is not None
                await _echo(io.stdin, io.stdout)
                if c.config.stdin_once:
                    self._stdin_closed.add(c.id)
                    await self._sleep_while_running(c, math.inf)

            tasks.append(asyncio.ensure_future(lines()))
            ends: set[asyncio.Future[Any]] = {
                asyncio.ensure_future(self._sleep_while_running(c, math.inf))
            }
            if c.config.stdin and io.stdin is not None:
                ends.add(asyncio.ensure_future(stdin()))
            tasks.extend(ends)
            await asyncio.wait(ends, return_when=asyncio.FIRST_COMPLETED)
            # Lines written before the end still reach the client.
            while not queue.empty():
                stream, text = queue.get_nowait()
                await _send(io.stdout if stream == "stdout" or tty else io.stderr,
                            (text + "\n").encode())
        finally:
            listeners = self._attached[c.id]
            listeners.remove(queue)
            if not listeners:
                del self._attached[c.id]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await _stop(sizes)
            await _close(io.stdout)
            await _close(io.stderr)

    async def port_forward_stream(
        self, sandbox_id: str, port: int, source: ByteSource, sink: ByteSink
    ) -> None:
        """Serve one forwarded connection to ``port`` of a ready sandbox.

        With :meth:`set_port_forward_handler` the handler serves it; otherwise
        every byte from ``source`` is echoed to ``sink`` until ``source`` ends.
        Closes ``sink``.

        Raises:
            NotFoundError: unknown sandbox.
            InvalidArgumentError: ``port`` is not in 1-65535.
            ContainerRuntimeError: the sandbox is not ready (or what the handler
                raised, e.g. for a port nothing listens on).
        """
        await self._enter("port_forward_stream", (sandbox_id, port, source, sink))
        sb = self._sandbox(sandbox_id)
        if not 0 < port < 65536:
            raise InvalidArgumentError(f"port_forward_stream: port {port} is not in 1-65535")
        if sb.state != PodSandboxState.READY:
            raise ContainerRuntimeError(
                f"port_forward_stream: pod sandbox {sandbox_id} is {sb.state.value}, not ready"
            )
        try:
            if self._port_forward_handler is not None:
                result = self._port_forward_handler(sb.id, port, source, sink)
                if isinstance(result, Awaitable):
                    await result
                    return
            await _echo(source, sink)
        finally:
            await _close(sink)

    def _check_running(self, c: _Container, method: str) -> None:
        if c.state != ContainerState.RUNNING:
            raise ContainerRuntimeError(
                f"{method}: container {c.id} is in {c.state.value} state"
            )

    def _record_sizes(self, container_id: str, io: StreamIO) -> asyncio.Future[None] | None:
        """Start recording the session's terminal sizes; the task to stop."""
        if io.resize is None:
            return None
        sizes = io.resize
        record = self._sizes.setdefault(container_id, [])

        async def follow() -> None:
            async for size in sizes:
                record.append(size)

        return asyncio.ensure_future(follow())

    async def update_container_resources(
        self, container_id: str, resources: LinuxContainerResources
    ) -> None:
        """Record new resources for a created or running container.

        Raises:
            NotFoundError: unknown container.
            ContainerRuntimeError: the container has exited.
        """
        await self._enter("update_container_resources", (container_id, resources))
        c = self._container(container_id)
        if c.state not in (ContainerState.CREATED, ContainerState.RUNNING):
            raise ContainerRuntimeError(
                f"update_container_resources: container {container_id} is in {c.state.value} state"
            )
        c.resources = resources

    async def container_stats(self, container_id: str) -> ContainerStats:
        """The stats set by :meth:`set_stats` (zero otherwise). NotFoundError if unknown."""
        await self._enter("container_stats", (container_id,))
        return self._c_stats(self._container(container_id))

    async def list_container_stats(
        self, filter: ContainerFilter | None = None
    ) -> list[ContainerStats]:
        """Stats of every container matching ``filter``."""
        await self._enter("list_container_stats", (filter,))
        return [
            self._c_stats(c)
            for c in self._containers.values()
            if filter is None or filter.matches(self._c_info(c))
        ]

    async def pod_sandbox_stats(self, pod_sandbox_id: str) -> PodSandboxStats:
        """Sums of the sandbox's containers' stats; ``process_count`` is the number of
        running containers. NotFoundError if unknown."""
        await self._enter("pod_sandbox_stats", (pod_sandbox_id,))
        sb = self._sandbox(pod_sandbox_id)
        members = [c for c in self._containers.values() if c.sandbox_id == sb.id]
        return PodSandboxStats(
            pod_sandbox_id=sb.id,
            timestamp=self.clock.now(),
            cpu_usage_core_nanoseconds=sum(c.cpu_ns for c in members),
            memory_working_set_bytes=sum(c.memory_working_set for c in members),
            process_count=sum(1 for c in members if c.state == ContainerState.RUNNING),
            containers=tuple(self._c_stats(c) for c in members),
        )

    # ============================================================== Runtime: images

    async def pull_image(
        self,
        image: ImageSpec,
        sandbox_config: PodSandboxConfig | None = None,
        auth: AuthConfig | None = None,
    ) -> str:
        """Pull an image the registry knows; returns its id (``sha256:...``).

        Takes ``pull_latency`` extra clock seconds. ``auth`` is recorded with the
        call (``calls_to("pull_image")[i].kwargs["auth"]``) and checked only for
        images made private by :meth:`require_auth`.

        Raises:
            ImageNotFoundError: the registry does not know the reference.
            ImagePullError: a private image pulled without accepted credentials.
            ImagePullError: (or whatever :meth:`fail_pull` scripted).
        """
        await self._enter("pull_image", (image, sandbox_config, auth))
        if self.pull_latency > 0:
            await self.clock.sleep(self.pull_latency)
        norm = normalize_image_ref(image.image)
        failure = self._pull_failures.get(norm)
        if failure is not None:
            raise failure.with_traceback(None)
        accepted = self._private.get(norm)
        if accepted is not None and _credentials(auth) not in accepted:
            raise ImagePullError(
                f"pull_image: {image.image!r} ({norm}): unauthorized: authentication required"
            )
        known = self._registry.get(norm)
        if known is None:
            raise ImageNotFoundError(
                f"pull_image: {image.image!r} ({norm}): not found in the registry"
            )
        self._present.add(norm)
        return known.id

    async def image_status(self, image: ImageSpec) -> Image | None:
        """The image if the node holds it (by reference or id), else None."""
        await self._enter("image_status", (image,))
        return self._find_present(image.image)

    async def list_images(self) -> list[Image]:
        """Every image the node holds."""
        await self._enter("list_images", ())
        return [self._registry[ref] for ref in sorted(self._present)]

    async def reopen_container_log(self, container_id: str) -> None:
        """Start a new, empty log file at the container's log path (the fake opens
        the file for every line anyway, so later output lands in it).

        Raises:
            NotFoundError: unknown container.
            ContainerRuntimeError: the container is not running.
        """
        await self._enter("reopen_container_log", (container_id,))
        c = self._container(container_id)
        if c.state != ContainerState.RUNNING:
            raise ContainerRuntimeError(
                f"reopen_container_log: container {container_id} is {c.state.value}, "
                "not running")
        if c.log_path and os.path.isabs(c.log_path):
            Path(c.log_path).parent.mkdir(parents=True, exist_ok=True)
            Path(c.log_path).touch()

    async def image_fs_info(self) -> list[FilesystemUsage]:
        """The image filesystem given as ``image_fs`` (a directory of the test's),
        using the present images' sizes; empty without one."""
        await self._enter("image_fs_info", ())
        if self.image_fs is None:
            return []
        used = sum(self._registry[ref].size for ref in self._present)
        return [FilesystemUsage(self.image_fs, used_bytes=used,
                                inodes_used=len(self._present), timestamp=self.clock.now())]

    async def remove_image(self, image: ImageSpec) -> None:
        """Remove an image from the node (the registry still knows it). Idempotent."""
        await self._enter("remove_image", (image,))
        found = self._find_present(image.image)
        if found is not None:
            self._present.discard(found.repo_tags[0])

    # ============================================================== Runtime: events

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

    # ================================================================== internals

    @staticmethod
    def _candidates(
        records: Mapping[str, _R],
        by_pod: Mapping[str, Mapping[str, None]],
        filter: ContainerFilter | PodSandboxFilter | None,
    ) -> list[_R]:
        """The records a filter can match, oldest first: only the pod's own when the
        filter selects by the pod uid label (what the kubelet's lists do), and the
        one record when it selects by id."""
        if filter is not None and filter.id is not None:
            record = records.get(filter.id)
            return [record] if record is not None else []
        uid = filter.label_selector.get(POD_UID_LABEL) if filter is not None else None
        if uid is None:
            return list(records.values())
        # The index is insertion-ordered, as the records are: still oldest first.
        return [records[i] for i in by_pod.get(uid, {}) if i in records]

    def _check_method(self, method: str) -> None:
        if method not in RUNTIME_METHODS and method not in STREAMING_METHODS:
            raise ValueError(
                f"{method!r} is not a Runtime method; expected one of "
                f"{', '.join(sorted(RUNTIME_METHODS | STREAMING_METHODS))}"
            )

    async def _enter(self, method: str, args: tuple[Any, ...]) -> None:
        """Record a call, apply unavailability, latency and injected faults."""
        names = _PARAMS[method]
        self.calls.append(Call(method, args, dict(zip(names, args, strict=True))))
        if self._unavailable:
            raise RuntimeUnavailableError(f"{method}: the runtime is unavailable")
        delay = self.latency_of(method)
        extra = _take(self._delays, method, args)
        if extra is not None:
            delay += extra.seconds
        if delay > 0:
            await self.clock.sleep(delay)
            if self._unavailable:
                raise RuntimeUnavailableError(f"{method}: the runtime is unavailable")
        fault = _take(self._faults, method, args)
        if fault is not None:
            raise fault.exc.with_traceback(None)

    def _new_id(self, kind: str) -> str:
        return hashlib.sha256(f"{kind}-{next(self._ids)}".encode()).hexdigest()

    def _sandbox(self, sandbox_id: str) -> _Sandbox:
        sb = self._sandboxes.get(sandbox_id)
        if sb is None:
            raise NotFoundError(f"pod sandbox {sandbox_id!r} not found")
        return sb

    def _container(self, container_id: str) -> _Container:
        c = self._containers.get(container_id)
        if c is None:
            raise NotFoundError(f"container {container_id!r} not found")
        return c

    def _names_ignoring_term(self, c: _Container) -> bool:
        return c.config.metadata.name in self._ignore_term

    def _take_script(self, c: _Container, sb: _Sandbox) -> _ScriptRule | None:
        uid = c.config.labels.get(klabels.POD_UID) or sb.config.metadata.uid
        for rule in self._scripts:
            if rule.container_name != c.config.metadata.name:
                continue
            if rule.pod_uid is not None and rule.pod_uid != uid:
                continue
            if rule.times is not None:
                if rule.times <= 0:
                    continue
                rule.times -= 1
            return rule
        return None

    def _statements_for(self, c: _Container) -> list[_Statement] | str | None:
        try:
            return _parse_command(tuple(c.config.command) + tuple(c.config.args))
        except _ShellSyntaxError as exc:
            return str(exc)

    def _step(self, c: _Container) -> None:
        """Run the container's shell until it sleeps or exits."""
        c.timer = None
        proc = c.proc
        if proc is None or c.state != ContainerState.RUNNING:
            return
        while True:
            try:
                delay = next(proc)
            except StopIteration as stop:
                self._finish(c, int(stop.value))
                return
            if delay == math.inf:
                return  # runs until stopped
            if delay > 0:
                c.timer = self.clock.call_later(delay, lambda: self._step(c))
                return

    def _finish_if_running(self, c: _Container, code: int, reason: str | None) -> None:
        if c.state == ContainerState.RUNNING:
            self._finish(c, code, reason=reason)

    def _halt(self, c: _Container) -> None:
        """Stop the container's command: cancel its timer, close its shell."""
        if c.timer is not None:
            c.timer.cancel()
            c.timer = None
        if c.proc is not None:
            c.proc.close()
            c.proc = None

    def _finish(self, c: _Container, code: int, *, reason: str | None = None) -> None:
        """Mark a running container exited, wake its stoppers, emit STOPPED."""
        self._halt(c)
        c.state = ContainerState.EXITED
        c.exit_code = code
        c.finished_at = self.clock.now()
        c.reason = reason if reason is not None else ("Completed" if code == 0 else "Error")
        for fut in c.waiters:
            if not fut.done():
                fut.set_result(None)
        c.waiters.clear()
        self._emit(c.id, ContainerEventType.STOPPED, c.sandbox_id)

    def _stop_sandbox(self, sb: _Sandbox) -> None:
        for c in list(self._containers_by_sandbox.get(sb.id, {}).values()):
            if c.state in _ALIVE:
                self._finish(c, EXIT_SIGKILL)
        if sb.state != PodSandboxState.NOTREADY:
            sb.state = PodSandboxState.NOTREADY
            self._emit(sb.id, ContainerEventType.STOPPED, sb.id)

    def _remove_container(self, c: _Container) -> None:
        if c.state in _ALIVE:
            self._finish(c, EXIT_SIGKILL)
        del self._containers[c.id]
        self._containers_by_sandbox.get(c.sandbox_id, {}).pop(c.id, None)
        self._containers_by_pod.get(c.config.labels.get(POD_UID_LABEL, ""), {}).pop(c.id, None)
        self._emit(c.id, ContainerEventType.DELETED, c.sandbox_id)

    def _write_log(self, c: _Container, stream: str, text: str) -> None:
        now = self.clock.now()
        self._logs[c.id].append(LogLine(now, stream, text))
        for queue in self._attached.get(c.id, ()):
            queue.put_nowait((stream, text))
        if c.log_path and os.path.isabs(c.log_path):
            path = Path(c.log_path)
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("a", encoding="utf-8") as f:
                f.write(format_cri_log_line(now, stream, text))

    async def _exec(self, c: _Container, cmd: Sequence[str]) -> ExecResult:
        if self._exec_handler is not None:
            result = self._exec_handler(c.id, tuple(cmd))
            if isinstance(result, Awaitable):
                result = await result
            if result is not None:
                return result
        out: dict[str, list[str]] = {"stdout": [], "stderr": []}

        def emit(stream: str, text: str) -> None:
            out[stream].append(text + "\n")

        try:
            statements = _parse_command(tuple(cmd))
        except _ShellSyntaxError as exc:
            return ExecResult(2, b"", f"sh: syntax error: {exc}\n".encode())
        if statements is None:
            raise ContainerRuntimeError("exec_sync: empty command")
        proc = _run_statements(
            statements, c.env, emit, c.fs, unknown_blocks=False, on_trap_term=lambda _: None
        )
        try:
            while True:
                delay = next(proc)
                if not await self._sleep_while_running(c, delay):
                    # The container died under the command: its processes were
                    # killed with it.
                    code = EXIT_SIGKILL
                    break
        except StopIteration as stop:
            code = int(stop.value)
        finally:
            proc.close()
        return ExecResult(code, "".join(out["stdout"]).encode(), "".join(out["stderr"]).encode())

    async def _sleep_while_running(self, c: _Container, delay: float) -> bool:
        """Sleep ``delay`` clock seconds (``inf``: forever); False if the container
        stopped running first."""
        if c.state != ContainerState.RUNNING:
            return False
        loop = asyncio.get_running_loop()
        exited: asyncio.Future[None] = loop.create_future()
        c.waiters.append(exited)
        sleeper: asyncio.Future[None] = (
            loop.create_future()
            if delay == math.inf
            else asyncio.ensure_future(self.clock.sleep(delay))
        )
        try:
            await asyncio.wait({sleeper, exited}, return_when=asyncio.FIRST_COMPLETED)
            return not exited.done()
        finally:
            sleeper.cancel()
            if exited in c.waiters:
                c.waiters.remove(exited)
            await asyncio.gather(sleeper, return_exceptions=True)

    def _find_present(self, ref: str) -> Image | None:
        norm = normalize_image_ref(ref) if not ref.startswith("sha256:") else ref
        for held in self._present:
            image = self._registry[held]
            if held == norm or image.id == ref:
                return image
        return None

    def _sb_status(self, sb: _Sandbox) -> PodSandboxStatus:
        return PodSandboxStatus(
            id=sb.id,
            metadata=sb.config.metadata,
            state=sb.state,
            created_at=sb.created_at,
            ip=sb.ip,
            namespace_options=sb.config.namespace_options,
            labels=sb.config.labels,
            annotations=sb.config.annotations,
            runtime_handler=sb.config.runtime_handler,
        )

    def _c_info(self, c: _Container) -> ContainerInfo:
        return ContainerInfo(
            id=c.id,
            pod_sandbox_id=c.sandbox_id,
            metadata=c.config.metadata,
            image=c.config.image.image,
            image_ref=c.image_ref,
            state=c.state,
            created_at=c.created_at,
            labels=c.config.labels,
            annotations=c.config.annotations,
        )

    def _c_status(self, c: _Container) -> ContainerStatus:
        return ContainerStatus(
            id=c.id,
            metadata=c.config.metadata,
            state=c.state,
            created_at=c.created_at,
            image=c.config.image.image,
            image_ref=c.image_ref,
            started_at=c.started_at,
            finished_at=c.finished_at,
            exit_code=c.exit_code,
            reason=c.reason,
            message=c.message,
            labels=c.config.labels,
            annotations=c.config.annotations,
            mounts=c.config.mounts,
            log_path=c.log_path,
            resources=c.resources,
        )

    def _c_stats(self, c: _Container) -> ContainerStats:
        return ContainerStats(
            container_id=c.id,
            timestamp=self.clock.now(),
            cpu_usage_core_nanoseconds=c.cpu_ns,
            memory_working_set_bytes=c.memory_working_set,
            memory_usage_bytes=c.memory_usage,
            writable_layer_bytes=c.writable_layer_bytes,
            writable_layer_inodes=c.writable_layer_inodes,
        )

    def _emit(
        self,
        container_id: str,
        type: ContainerEventType,
        sandbox_id: str,
        *,
        sandbox_status: PodSandboxStatus | None = None,
    ) -> None:
        """Queue an event, with the sandbox's status and its containers' statuses."""
        if not self._events_enabled or not self._streams:
            return
        sb = self._sandboxes.get(sandbox_id)
        if sandbox_status is None and sb is not None:
            sandbox_status = self._sb_status(sb)
        event = ContainerEvent(
            container_id=container_id,
            type=type,
            created_at=self.clock.now(),
            pod_sandbox_status=sandbox_status,
            containers_statuses=tuple(
                self._c_status(c) for c in self._containers.values() if c.sandbox_id == sandbox_id
            ),
        )
        for stream in list(self._streams):
            if not stream.offer(event) and not stream.closed and stream.error is None:
                self.dropped_events += 1


async def _send(sink: ByteSink | None, data: bytes) -> None:
    if sink is not None and data:
        await sink.write(data)


async def _close(sink: ByteSink | None) -> None:
    if sink is not None:
        await sink.close()


async def _echo(source: ByteSource, sink: ByteSink | None) -> None:
    """Copy ``source`` to ``sink`` until the source ends."""
    while data := await source.read(65536):
        await _send(sink, data)


async def _stop(task: asyncio.Future[None] | None) -> None:
    if task is not None:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def _sandbox_name(config: PodSandboxConfig) -> str:
    md = config.metadata
    return f"{md.name}_{md.namespace}_{md.uid}_{md.attempt}"


# Parameter names of each Runtime method, in signature order, for the call log.
def _credentials(auth: AuthConfig | None) -> tuple[str, str] | None:
    """The (username, password) an AuthConfig carries, from its fields or, as a
    registry would accept it, from the base64 ``user:password`` ``auth`` form."""
    if auth is None:
        return None
    if auth.username or auth.password:
        return (auth.username, auth.password)
    if auth.auth:
        try:
            user, sep, password = base64.b64decode(auth.auth).decode().partition(":")
        except (ValueError, UnicodeDecodeError):
            return None
        if sep:
            return (user, password)
    return None


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
