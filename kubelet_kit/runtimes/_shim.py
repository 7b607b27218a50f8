"""The per-container shim of :class:`~kubelet_kit.runtimes.host.HostProcessRuntime`.

Run as ``python -m kubelet_kit.runtimes._shim <container state dir>``. It plays
the part containerd's shim plays for a real container, for one host process:

1. It forks and the parent exits at once, so the shim is nobody's child but
   init's and outlives the agent that started it (the agent started it in a new
   session, so no terminal signal reaches it either).
2. It reads ``spec.json`` from the state directory. When the spec asks for its
   mounts to be applied (``apply_mounts``, set by a runtime with CAP_SYS_ADMIN),
   the shim moves into a mount namespace of its own (``unshare(CLONE_NEWNS)``),
   makes every mount in it private (a slave of the host's when a mount asks for
   HostToContainer or Bidirectional propagation, so host mounts still reach the
   container), and bind-mounts each ``host_path`` onto its ``container_path``
   (parents first), creating a missing target directory or file as runc does,
   with the propagation the mount asks for (private; a slave of the host's
   mount; or, for Bidirectional, a peer of it: a copy of the source taken with
   ``open_tree`` before leaving the host's namespace, attached with
   ``move_mount``, so mounts made under it in the container reach the host),
   and remounting it read-only when asked. As containerd, it refuses a
   Bidirectional source whose host mount is not shared, and a HostToContainer
   one whose host mount is neither shared nor a slave. (Before that, when the
   spec names a ``netns``, the shim joins that network namespace: the sandbox's,
   made by CNI networking.) The container process inherits that namespace; the
   host's mount table is never changed, but for the mounts a container makes
   under a Bidirectional mount (and a created target is created in the host's
   file system, which the container shares). It then creates the working
   directory if missing (as runc does), opens the CRI log file and starts the
   container's process in a process group of its own, with exactly the
   environment in the spec; before exec the process joins the cgroups whose
   ``cgroup.procs`` files the spec lists (the container's own, or its pod's)
   and takes the spec's ``oom_score_adj``.
3. It records ``start.json`` (process id and start time, its own too), then
   writes one JSON line to its standard output, the pipe the runtime is reading,
   and closes that pipe. A process that could not start is reported there
   instead, and recorded as an exit with code 128 and reason ``StartError``.
4. It copies the process's stdout and stderr into the log file as CRI records.
   SIGUSR1 makes it open the log at its path again (the runtime's
   ReopenContainerLog, once log rotation has renamed the file). The process's
   stdin is /dev/null, or with the spec's ``stdin`` a pipe whose write end the
   shim holds (the process waits for input); with ``tty`` the shim owns a
   pseudo-terminal that is the process's stdin, stdout and stderr and its
   controlling terminal (a session of its own), and the terminal's output is
   logged as stdout. Before entering any namespace it listens on the attach
   socket (``attach.sock`` in the state directory,
   :mod:`kubelet_kit.runtimes._attach`): attached clients receive the output
   from then on, and send stdin and terminal sizes (the I/O loop is
   :mod:`kubelet_kit.runtimes._shim_io`). With ``stdin_once``, the first
   attached client's end of stdin closes the process's stdin (EOT on a
   terminal).
5. When the process exits it kills what is left of its process group (a
   container's processes die with its main process, as in a PID namespace),
   and records ``exit.json``: the exit code (128 + signal number when killed by
   a signal, as a shell or containerd reports it), reason ``Completed`` for 0 and
   ``Error`` otherwise, and the finish time. Only then are attached clients
   disconnected and the attach socket removed.

Run as ``python -m kubelet_kit.runtimes._shim --exec STATE_DIR PID -- CMD...``
it is the runtime's exec helper for a container with its own mount namespace,
cgroups or security context: it joins the container's cgroups and takes its
``oom_score_adj``, enters the sandbox's network namespace (when the spec names
one) and the mount namespace of process PID (``setns``), changes to the
container's working directory, takes its user and groups, and replaces itself
with CMD in the container's environment (exit 127 or 126 with a shell-like
message when CMD cannot be executed).

Every record is written to a temporary file and renamed into place, so a reader
sees either nothing or a whole record. The shim's own diagnostics go to its
standard error, which the runtime points at ``shim.log`` in the state directory.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import errno
import fcntl
import json
import os
import re
import signal
import subprocess
import sys
import termios
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from kubelet_kit.container.logs import DEFAULT_MAX_LINE_SIZE, LogStream
from kubelet_kit.runtimes import _attach
from kubelet_kit.runtimes._attach import ATTACH_SOCKET
from kubelet_kit.runtimes._shim_io import ProcessIO, Supervisor, kill_group, listen, open_log
from kubelet_kit.runtimes._shim_security import apply_security

SPEC_FILE = "spec.json"
START_FILE = "start.json"
EXIT_FILE = "exit.json"

#: runc's exit code for a container whose process could not be started.
START_ERROR_EXIT_CODE = 128

_READ_SIZE = 65536


def write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    """Write ``data`` as JSON to ``path`` through a temporary file and a rename."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def process_start_ticks(pid: int) -> int | None:
    """The start time of ``pid`` in clock ticks since boot, or None if it is gone.

    Together with the pid it names one process for good: a reused pid has a
    later start time. A zombie counts as gone.
    """
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    # The command name is in parentheses and may itself hold spaces or ")".
    fields = stat[stat.rfind(b")") + 2 :].split()
    if fields[0] in (b"Z", b"X"):
        return None
    return int(fields[19])


def describe_start_error(exc: OSError, argv: list[str]) -> str:
    """A runc-like message for a process that could not be executed."""
    if isinstance(exc, FileNotFoundError) and exc.filename == argv[0]:
        if "/" not in argv[0]:
            return f'exec: "{argv[0]}": executable file not found in $PATH'
        return f'exec: "{argv[0]}": no such file or directory'
    if isinstance(exc, PermissionError) and exc.filename == argv[0]:
        return f'exec: "{argv[0]}": permission denied'
    return _os_error_text(exc)


def _os_error_text(exc: OSError) -> str:
    reason = (exc.strerror or str(exc)).lower()
    return f'{reason}: "{exc.filename}"' if exc.filename else reason


class _StartFailure(Exception):
    """The process could not be started; the message says why, runc-style."""


def _report(data: dict[str, Any]) -> None:
    """Send the one-line report to the runtime and close the pipe it reads."""
    # If the runtime gave up waiting, the state files still tell the story.
    with contextlib.suppress(OSError):
        os.write(1, (json.dumps(data) + "\n").encode())
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.close(devnull)


#: Set by SIGUSR1: open the log file at its path again (the runtime's
#: ReopenContainerLog, after the kubelet's log rotation renamed the file).
_reopen_requested = False


def _on_reopen_signal(signum: int, frame: Any) -> None:
    global _reopen_requested
    _reopen_requested = True


def _take_reopen_request() -> bool:
    global _reopen_requested
    requested, _reopen_requested = _reopen_requested, False
    return requested


# --------------------------------------------------------------- mount namespace

_CLONE_NEWNS = 0x00020000
_CLONE_NEWNET = 0x40000000
_MS_RDONLY = 1
_MS_NOSUID = 2
_MS_NODEV = 4
_MS_NOEXEC = 8
_MS_REMOUNT = 32
_MS_BIND = 4096
_MS_REC = 16384
_MS_PRIVATE = 1 << 18
_MS_SLAVE = 1 << 19
_AT_FDCWD = -100
_AT_RECURSIVE = 0x8000
_OPEN_TREE_CLONE = 1
_OPEN_TREE_CLOEXEC = os.O_CLOEXEC
_MOVE_MOUNT_F_EMPTY_PATH = 0x4
#: System call numbers of open_tree(2) and move_mount(2) (the same on every
#: architecture with the unified table: x86-64, arm64...).
_SYS_OPEN_TREE = 428
_SYS_MOVE_MOUNT = 429
_PRIVATE = "PROPAGATION_PRIVATE"
_HOST_TO_CONTAINER = "PROPAGATION_HOST_TO_CONTAINER"
_BIDIRECTIONAL = "PROPAGATION_BIDIRECTIONAL"
#: Propagation values (the CRI's names) that need host mounts to reach the container.
_FROM_HOST = (_HOST_TO_CONTAINER, _BIDIRECTIONAL)


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def _check(rc: int, what: str) -> None:
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _mount(libc: ctypes.CDLL, source: str | None, target: str, flags: int) -> None:
    _check(
        libc.mount(
            source.encode() if source else None, target.encode(), None, ctypes.c_ulong(flags), None
        ),
        f'mount "{source or target}" to "{target}"',
    )


def _make_target(source: str, target: str) -> None:
    """Create a missing mount target of the source's kind, as runc does."""
    if os.path.lexists(target):
        return
    if os.path.isdir(source):
        os.makedirs(target, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(target) or "/", exist_ok=True)
        os.close(os.open(target, os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC, 0o644))


def _host_mount_of(path: str) -> tuple[str, list[str]]:
    """The mount point of this namespace holding ``path``, and its propagation
    fields (``shared:N``, ``master:N``... of ``/proc/self/mountinfo``)."""
    real = os.path.realpath(path)
    best, fields = "/", []
    with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as f:
        for line in f:
            parts = line.split()
            point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m[1], 8)), parts[4])
            inside = real == point or real.startswith(point.rstrip("/") + "/")
            if inside and len(point) >= len(best):
                # The last of equal mount points is the one on top.
                best, fields = point, parts[6 : parts.index("-")]
    return best, fields


def _check_source_propagation(source: str, propagation: str) -> None:
    """Refuse a source whose host mount cannot carry the propagation asked for,
    as containerd does: Bidirectional needs a shared mount, HostToContainer a
    shared or slave one."""
    if propagation not in _FROM_HOST:
        return
    point, fields = _host_mount_of(source)
    shared = any(f.startswith("shared:") for f in fields)
    slave = any(f.startswith("master:") for f in fields)
    if propagation == _BIDIRECTIONAL and not shared:
        raise OSError(
            errno.EINVAL,
            f'Bidirectional propagation needs a shared mount: "{source}" is on "{point}", '
            "which is not shared",
        )
    if propagation == _HOST_TO_CONTAINER and not (shared or slave):
        raise OSError(
            errno.EINVAL,
            f'HostToContainer propagation needs a shared or slave mount: "{source}" is on '
            f'"{point}", which is neither',
        )


def _clone_tree(libc: ctypes.CDLL, source: str) -> int:
    """A detached copy of the mounts at ``source`` (open_tree), still a peer of
    the source's shared mount wherever it is attached later."""
    fd = int(
        libc.syscall(
            ctypes.c_long(_SYS_OPEN_TREE),
            ctypes.c_int(_AT_FDCWD),
            source.encode(),
            ctypes.c_uint(_OPEN_TREE_CLONE | _OPEN_TREE_CLOEXEC | _AT_RECURSIVE),
        )
    )
    _check(0 if fd >= 0 else -1, f'open_tree "{source}"')
    return fd


def _attach_tree(libc: ctypes.CDLL, fd: int, target: str) -> None:
    _check(
        int(
            libc.syscall(
                ctypes.c_long(_SYS_MOVE_MOUNT),
                ctypes.c_int(fd),
                b"",
                ctypes.c_int(_AT_FDCWD),
                target.encode(),
                ctypes.c_uint(_MOVE_MOUNT_F_EMPTY_PATH),
            )
        ),
        f'move_mount to "{target}"',
    )


def apply_mounts(mounts: list[dict[str, Any]]) -> None:
    """Enter a new mount namespace and bind the mounts into it (see the module doc).

    Each mount gets the propagation it asks for: a private copy (PRIVATE), a
    slave of the host's mount (HOST_TO_CONTAINER), or a peer of it
    (BIDIRECTIONAL: a copy taken in the host's namespace before leaving it, so
    mounts made under it in the container reach the host). The source's host
    mount must be shared (Bidirectional) or shared or slave (HostToContainer).

    Raises:
        _StartFailure: a step failed; the message names the mount, as runc's does.
    """
    libc = _libc()
    trees: dict[int, int] = {}
    for i, m in enumerate(mounts):
        source = m["host_path"]
        try:
            if os.path.exists(source):
                _check_source_propagation(source, m.get("propagation", _PRIVATE))
                if m.get("propagation") == _BIDIRECTIONAL:
                    trees[i] = _clone_tree(libc, source)
        except OSError as exc:
            for fd in trees.values():
                os.close(fd)
            raise _StartFailure(
                f'error mounting "{source}" to rootfs at "{m["container_path"]}": '
                f"{exc.strerror or exc}"
            ) from None
    try:
        _check(libc.unshare(_CLONE_NEWNS), "unshare mount namespace")
        root = (
            _MS_SLAVE if any(m.get("propagation") in _FROM_HOST for m in mounts) else (_MS_PRIVATE)
        )
        # Nothing done in this namespace may propagate back to the host.
        _mount(libc, None, "/", _MS_REC | root)
    except OSError as exc:
        raise _StartFailure(f"mount namespace: {exc.strerror}") from None
    order = sorted(
        range(len(mounts)), key=lambda i: os.path.normpath(mounts[i]["container_path"]).count("/")
    )
    for i in order:
        m = mounts[i]
        source, target = m["host_path"], os.path.normpath(m["container_path"])
        try:
            if not os.path.exists(source):
                raise OSError(errno.ENOENT, f'mount source "{source}": no such file or directory')
            _make_target(source, target)
            if i in trees:
                fd = trees.pop(i)
                try:
                    _attach_tree(libc, fd, target)
                finally:
                    os.close(fd)
            else:
                _mount(libc, source, target, _MS_BIND | _MS_REC)
                # The copy follows the host's mount (slave) or not at all (private).
                follow = m.get("propagation") == _HOST_TO_CONTAINER
                _mount(libc, None, target, _MS_REC | (_MS_SLAVE if follow else _MS_PRIVATE))
            if m.get("readonly"):
                # A read-only bind remount must repeat the flags it keeps locked.
                kept = os.statvfs(target).f_flag & (_MS_NOSUID | _MS_NODEV | _MS_NOEXEC)
                _mount(libc, None, target, _MS_REMOUNT | _MS_BIND | _MS_RDONLY | kept)
        except OSError as exc:
            raise _StartFailure(
                f'error mounting "{source}" to rootfs at "{target}": {exc.strerror or exc}'
            ) from None


def enter_netns(path: str) -> None:
    """Join the network namespace bind-mounted at ``path`` (the sandbox's).

    Raises:
        OSError: the namespace could not be opened or entered.
    """
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        _check(_libc().setns(fd, _CLONE_NEWNET), f'setns "{path}"')
    finally:
        os.close(fd)


def exec_in(state_dir: Path, pid: int, argv: list[str]) -> int:
    """Join the container's cgroups, enter the mount namespace of ``pid`` (when the
    container has one), and exec ``argv`` as the container's process would run
    (environment, working directory, user); on a terminal, take it as the
    controlling terminal of the session this helper leads. Returns only on
    failure, with a shell's exit code."""
    spec = json.loads((state_dir / SPEC_FILE).read_text(encoding="utf-8"))
    if os.isatty(0) and os.getsid(0) == os.getpid():
        # An exec on a terminal: the helper leads the command's new session, and
        # the terminal it was given as stdin becomes the session's controlling one.
        try:
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)
        except OSError as exc:
            sys.stderr.write(f"take the terminal as controlling terminal: {exc.strerror}\n")
            return 126
    try:
        join_cgroups(spec.get("cgroup_procs") or ())
        set_oom_score_adj(spec.get("oom_score_adj"))
    except OSError as exc:
        sys.stderr.write(f"join the container's cgroups and oom_score_adj: {exc.strerror}\n")
        return 126
    if spec.get("netns"):
        try:
            enter_netns(spec["netns"])
        except OSError as exc:
            sys.stderr.write(f"enter the sandbox's network namespace: {exc.strerror}\n")
            return 126
    security = spec.get("security")
    readonly = bool(security and security.get("readonly_rootfs"))
    if (spec.get("apply_mounts") and spec.get("mounts")) or readonly:
        libc = _libc()
        try:
            fd = os.open(f"/proc/{pid}/ns/mnt", os.O_RDONLY | os.O_CLOEXEC)
            try:
                _check(libc.setns(fd, _CLONE_NEWNS), "setns")
            finally:
                os.close(fd)
        except OSError as exc:
            sys.stderr.write(f"enter the container's mount namespace: {exc.strerror}\n")
            return 126
    try:
        os.chdir(spec.get("cwd") or "/")
        if security is not None:
            apply_security(
                security,
                spec.get("user"),
                spec.get("group"),
                spec.get("extra_groups"),
                readonly_root=False,
            )
        elif spec.get("extra_groups") is not None:
            os.setgroups(spec["extra_groups"])
        if spec.get("group") is not None:
            os.setgid(spec["group"])
        if spec.get("user") is not None:
            os.setuid(spec["user"])
        os.execvpe(argv[0], argv, spec.get("env", {}))
    except OSError as exc:
        sys.stderr.write(f"{argv[0]}: {exc.strerror}\n")
        return 127 if isinstance(exc, FileNotFoundError) else 126
    return 126  # not reached: exec replaced the process


def join_cgroups(procs_files: Sequence[str]) -> None:
    """Move the calling process into the cgroups whose ``cgroup.procs`` files are
    given (writing ``0`` means "me"), as runc puts a container's init into its
    cgroup before exec. A cgroup removed meanwhile is skipped."""
    for procs in procs_files:
        try:
            with open(procs, "w", encoding="ascii") as f:
                f.write("0")
        except FileNotFoundError:
            continue


def set_oom_score_adj(value: int | None) -> None:
    """Give the calling process the container's ``oom_score_adj`` (None: keep it),
    as runc does before exec; children and exec'd commands inherit it.

    Lowering the score needs CAP_SYS_RESOURCE. Without it (an agent in a
    container, or not root) a lower value leaves the process at the agent's own
    score, as containerd's ``restrict_oom_score_adj`` clamps it; the kubelet asks
    for -997 for critical pods and -998 for Guaranteed ones, which such an agent
    could otherwise never start.
    """
    if value is None:
        return
    try:
        with open("/proc/self/oom_score_adj", "w", encoding="ascii") as f:
            f.write(str(value))
    except PermissionError:
        with open("/proc/self/oom_score_adj", encoding="ascii") as f:
            current = int(f.read())
        if value >= current:
            raise


def _child_setup(
    procs_files: Sequence[str], tty: bool, spec: dict[str, Any] | None = None
) -> Callable[[], None] | None:
    """A ``preexec_fn`` joining the container's cgroups in the child, setting its
    ``oom_score_adj``, on a terminal making it the controlling one of the child's
    new session, and applying the spec's security context and identity
    (:mod:`kubelet_kit.runtimes._shim_security`, while still root); or None."""
    files = list(procs_files)
    security = spec.get("security") if spec is not None else None
    oom_score_adj = spec.get("oom_score_adj") if spec is not None else None
    if not files and not tty and security is None and oom_score_adj is None:
        return None

    def setup() -> None:
        if files:
            join_cgroups(files)
        set_oom_score_adj(oom_score_adj)
        if tty:
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)
        if security is not None and spec is not None:
            apply_security(security, spec.get("user"), spec.get("group"), spec.get("extra_groups"))

    return setup


def _start(
    spec: dict[str, Any], argv: list[str], cwd: str, env: dict[str, str]
) -> tuple[subprocess.Popen[bytes], ProcessIO, int | None]:
    """Make the working directory, open the log, start the process.

    Returns the process, the descriptors the shim keeps for it (its output, its
    stdin, its terminal) and the log file descriptor (None without a log).

    Raises:
        _StartFailure: any step failed; the message names the step and the path.
    """
    if spec.get("netns"):
        # The sandbox's network namespace is joined first, while its path is
        # certainly visible: the process inherits it, as containers share a pod's.
        try:
            enter_netns(spec["netns"])
        except OSError as exc:
            raise _StartFailure(
                f'enter network namespace "{spec["netns"]}": {exc.strerror or exc}'
            ) from None
    if spec.get("apply_mounts") and spec.get("mounts"):
        apply_mounts(spec["mounts"])
    try:
        # runc creates a missing working directory; so do we.
        Path(cwd).mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise _StartFailure(f'mkdir working directory "{cwd}": {_os_error_text(exc)}') from None
    log_path = spec.get("log_path", "")
    try:
        log_fd = open_log(log_path)
    except OSError as exc:
        raise _StartFailure(f'open log file "{log_path}": {_os_error_text(exc)}') from None
    tty = bool(spec.get("tty"))
    ours: list[int] = []  # the shim's ends, closed if the start fails
    theirs: list[int] = []  # the process's ends, closed here once it has them
    stdin: int = subprocess.DEVNULL
    if tty:
        # A terminal of the shim's own: the process's stdin, stdout and stderr,
        # and its controlling terminal in a session of its own (as runc's console).
        master, slave = os.openpty()
        ours.append(master)
        theirs.append(slave)
        stdin = stdout = stderr = slave
        pio = ProcessIO(
            {master: (LogStream.STDOUT, _attach.STDOUT)},
            master if spec.get("stdin") else None,
            master,
        )
    else:
        out_r, out_w = os.pipe2(os.O_CLOEXEC)
        err_r, err_w = os.pipe2(os.O_CLOEXEC)
        ours += [out_r, err_r]
        theirs += [out_w, err_w]
        stdout, stderr = out_w, err_w
        stdin_w = None
        if spec.get("stdin"):
            # The shim holds the write end, so the process waits for input (from an
            # attach) instead of reading the end of /dev/null.
            stdin, stdin_w = os.pipe2(os.O_CLOEXEC)
            ours.append(stdin_w)
            theirs.append(stdin)
        pio = ProcessIO(
            {out_r: (LogStream.STDOUT, _attach.STDOUT), err_r: (LogStream.STDERR, _attach.STDERR)},
            stdin_w,
            None,
        )
    secured = spec.get("security") is not None
    try:
        proc = subprocess.Popen(
            argv,
            env=env,
            cwd=cwd,
            stdin=stdin,
            stdout=stdout,
            stderr=stderr,
            preexec_fn=_child_setup(spec.get("cgroup_procs") or (), tty, spec),
            # With a security context the identity is taken in preexec_fn, after
            # the steps that need root.
            user=None if secured else spec.get("user"),
            group=None if secured else spec.get("group"),
            extra_groups=None if secured else spec.get("extra_groups"),
            start_new_session=tty,
            process_group=None if tty else 0,
        )
    except OSError as exc:
        for fd in (*ours, log_fd):
            if fd is not None:
                os.close(fd)
        if exc.filename == cwd and exc.filename != argv[0]:
            message = f'chdir to cwd "{cwd}": {_os_error_text(exc)}'
        else:
            message = describe_start_error(exc, argv)
        raise _StartFailure(message) from None
    except subprocess.SubprocessError as exc:
        # preexec_fn failed: the security context could not be applied.
        for fd in (*ours, log_fd):
            if fd is not None:
                os.close(fd)
        raise _StartFailure(f"apply the security context: {exc}") from None
    finally:
        for fd in theirs:
            os.close(fd)
    return proc, pio, log_fd


def run(state_dir: Path) -> int:
    """Start and supervise the process described in ``state_dir``; see the module doc."""
    # Before anything else (and so before start.json tells the runtime this shim
    # is there to signal): SIGUSR1 reopens the log, where by default it would kill.
    wake_r, wake_w = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGUSR1, _on_reopen_signal)
    spec = json.loads((state_dir / SPEC_FILE).read_text(encoding="utf-8"))
    argv: list[str] = spec["argv"]
    cwd: str = spec["cwd"] or "/"
    env: dict[str, str] = spec["env"]
    # Made before any namespace is entered, so it is the host's file system's.
    listener = listen(state_dir)
    try:
        proc, pio, log_fd = _start(spec, argv, cwd, env)
    except _StartFailure as exc:
        if listener is not None:
            listener.close()
            with contextlib.suppress(OSError):
                (state_dir / ATTACH_SOCKET).unlink()
        message = str(exc)
        write_json_atomic(
            state_dir / EXIT_FILE,
            {
                "exit_code": START_ERROR_EXIT_CODE,
                "reason": "StartError",
                "message": message,
                "started_at": 0.0,
                "finished_at": time.time(),
            },
        )
        _report({"error": message})
        return 1
    started_at = time.time()
    start = {
        "pid": proc.pid,
        "pid_start": process_start_ticks(proc.pid),
        "shim_pid": os.getpid(),
        "shim_start": process_start_ticks(os.getpid()),
        "started_at": started_at,
    }
    write_json_atomic(state_dir / START_FILE, start)
    _report(start)
    supervisor = Supervisor(
        proc,
        pio,
        log_fd=log_fd,
        log_path=spec.get("log_path", ""),
        max_line=int(spec.get("max_line_size", DEFAULT_MAX_LINE_SIZE)),
        wakeup_fd=wake_r,
        take_reopen=_take_reopen_request,
        listener=listener,
        stdin_once=bool(spec.get("stdin_once")),
    )
    supervisor.run()
    # Wait without reaping, so the pid (and with it the process group id) cannot
    # be reused while what is left of the group is killed.
    with contextlib.suppress(ChildProcessError):
        os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)
    kill_group(proc.pid)
    code = proc.wait()
    finished_at = time.time()
    # Popen gives -N for death by signal N; a shell and containerd say 128 + N.
    exit_code = 128 - code if code < 0 else code
    write_json_atomic(
        state_dir / EXIT_FILE,
        {
            "exit_code": exit_code,
            "reason": "Completed" if exit_code == 0 else "Error",
            "message": "",
            "started_at": started_at,
            "finished_at": finished_at,
        },
    )
    # Attached clients see their end only now, when the exit is on record.
    supervisor.close(state_dir)
    return 0


def main(args: list[str]) -> int:
    """Entry point: detach, then :func:`run` the container in ``args[0]``."""
    if len(args) >= 5 and args[0] == "--exec" and args[3] == "--":
        return exec_in(Path(args[1]), int(args[2]), args[4:])
    if len(args) != 1:
        print(
            "usage: python -m kubelet_kit.runtimes._shim STATE_DIR\n"
            "       python -m kubelet_kit.runtimes._shim --exec STATE_DIR PID -- CMD...",
            file=sys.stderr,
        )
        return 2
    state_dir = Path(args[0])
    if os.fork() != 0:
        # The parent's only job was to let the runtime see a quick exit; the
        # child (now an orphan) keeps the report pipe open until it has started.
        os._exit(0)
    try:
        return run(state_dir)
    except Exception as exc:
        print(f"shim failed: {exc!r}", file=sys.stderr)
        _report({"error": f"shim failed: {exc}"})
        raise


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
