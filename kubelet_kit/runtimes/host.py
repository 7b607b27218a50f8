"""HostProcessRuntime: a Runtime whose containers are plain host processes.

For any Linux machine without a container daemon. It keeps the CRI's shapes and
containerd's observable behaviour where a host process can have them, and says
plainly where it cannot.

State
    Everything lives under ``root_dir``: ``sandboxes/<id>/sandbox.json``,
    ``containers/<id>/{container.json,spec.json,start.json,exit.json,shim.log}``
    and ``images.json``, each JSON file written to a temporary file and renamed.
    Nothing is kept only in memory, so a new runtime over the same directory (an
    agent that restarted) sees every sandbox and container, with their true
    states, and can stop, exec into and read the logs of what is still running.

Sandboxes
    A sandbox is a record: there are no namespaces, every container shares the
    host's network, PID, IPC and mount namespaces. Its ``ip`` is the host's
    primary IPv4 address (the one of the default route's interface), or
    127.0.0.1 when there is none, or the ``host_ip`` given to the constructor.
    A sandbox is READY until stopped; stopping it stops its containers, removing
    it removes them (stopping first).

    CNI networking (``network=CNINetwork(conf_dir, bin_dirs)``, used only when
    the agent runs as root): a sandbox whose config does not ask for the host's
    network gets a named network namespace of its own and is added to the CNI
    network (ADD of the first configuration list in ``conf_dir``); its ``ip``
    and ``additional_ips`` are the addresses the plugins put on ``eth0``, and
    its namespace options say it does not share the host's network. Each
    container's process, and each command exec'd into it, joins that namespace
    before it runs (PID, IPC and the file system stay the host's). Stopping the
    sandbox runs CNI DEL and removes the namespace (so does removing it, if the
    stop did not); a failure there is an error and is retried by the next stop
    or remove. At start-up (the first list or run of sandboxes) the runtime
    releases what an earlier agent left behind: stopped sandboxes still holding
    a namespace, ready ones whose namespace is gone (after a reboot; they are
    marked NOTREADY), and namespaces of its own without a sandbox.

Containers
    The process is ``command + args`` (``args`` alone when there is no command,
    as with an image that has no entrypoint; there is no image to supply one, so
    neither is a ContainerStartError at create time). Its environment is exactly:
    a default ``PATH`` (containerd's), ``HOSTNAME`` (the sandbox's hostname, else
    the host's), the config's ``envs`` in order (later ones win), and ``HOME``
    (the user's home directory) if the envs did not set it. Nothing is inherited
    from the agent. The working directory defaults to ``/`` and is created if
    missing, as runc does; it must be absolute. ``run_as_user``,
    ``run_as_group`` and ``supplemental_groups`` are applied (an agent that is
    not root can only use its own ids). Devices and per-container resources are
    recorded and reported but not applied, and there is no OOMKilled reason. The
    pod's limits still hold: when the sandbox names a ``cgroup_parent`` (the pod
    cgroup a ContainerManager made), each container's process, and each command
    exec'd into it, joins that cgroup in every hierarchy where it exists before
    it runs.

    Mounts are applied when the runtime may mount (``apply_mounts``, by default
    when the agent holds CAP_SYS_ADMIN, i.e. runs as root): a container with
    mounts runs in a mount namespace of its own, where every host mount is made
    private (a slave of the host's when a mount asks for HostToContainer or
    Bidirectional propagation; Bidirectional is otherwise only recorded), and
    each ``host_path`` is bind-mounted onto its ``container_path``, read-only
    when asked. The container still shares the host's root file system: a
    missing target is created on the host (a directory or an empty file, as runc
    does), and everything not shadowed by a mount is the host's. A source that
    does not exist fails the start (StartError, runc's "error mounting"
    message). Without the privilege mounts are recorded and reported only; a
    process that opens a ``container_path`` then sees whatever the host has
    there, so such workloads should be given host paths (e.g. through env).

    ``start_container`` runs a shim (``python -m kubelet_kit.runtimes._shim``,
    detached in a new session so it outlives the agent) which starts the process
    in its own process group, copies its stdout and stderr into the CRI log file
    ``<sandbox log_directory>/<log_path>`` and records the exit. When the main
    process exits, the rest of its process group is killed, as the processes of
    a PID namespace die with its init. Exit codes are 128 + signal for a process
    killed by a signal (SIGKILL: 137), reasons ``Completed`` (0) and ``Error``.
    A process that cannot be started (no such executable, a working directory
    that cannot be made) fails ``start_container`` with ContainerStartError and
    is recorded as exited with code 128 and reason ``StartError``, as with runc.
    A container whose shim and process are both gone without a recorded exit is
    reported EXITED with code 255 and reason ``Unknown``, as containerd does
    when it finds a running container's task gone.

    The shims themselves stay in the agent's cgroup: under systemd, run the agent with
    ``KillMode=process`` if containers are to survive a restart of the agent.

    ``remove_container`` keeps the log file: the kubelet owns the pod's log
    directory and deletes container logs itself, as with containerd.

Images
    Images are records only: ``pull_image`` checks the reference's syntax,
    normalises it (``busybox`` -> ``docker.io/library/busybox:latest``) and
    records it (a registry under the reserved ``.invalid`` domain is reported
    not found, as any real pull would be); the image id is ``sha256:`` + the
    SHA-256 of the normalised reference, stable across agents.
    ``create_container`` does not require a pulled image.

Exec
    ``exec_sync`` runs the command as a new process (its own session) with the
    container's environment, working directory and user, inside the
    container's mount namespace when it has one (through the shim's exec helper,
    which enters it with ``setns``), so probes and hooks see the same files. A command that cannot
    be executed returns exit code 127 (not found) or 126 (not executable) with
    the reason on stderr, as a shell would. ``timeout`` of None or 0 means no
    limit; past it the command's session is killed and DeadlineExceededError
    raised.

Streams
    The runtime is a :class:`~kubelet_kit.container.streams.StreamingRuntime`
    (plumbing in :mod:`kubelet_kit.runtimes.streams`). ``exec_stream`` starts
    the command exactly as ``exec_sync`` does, on pipes or, with ``tty``, on a
    pseudo-terminal that becomes its controlling terminal; the client's sizes
    are applied to it. ``port_forward_stream`` connects to ``localhost:PORT``
    inside the sandbox's network namespace (a short-lived thread joins it to
    make the socket) or the host's, and copies both ways.

    A container with ``stdin`` gets a pipe as its stdin, held open by its shim,
    so it waits for input instead of reading end of file; with ``tty`` the shim
    owns a pseudo-terminal that is the process's stdin, stdout, stderr and
    controlling terminal, and whose output goes to the log as stdout.
    ``attach_stream`` reaches the container through its shim's attach socket
    (``attach.sock`` in its state directory; see
    :mod:`kubelet_kit.runtimes._attach`), so it survives agent restarts like the
    shim: the client's stdin goes to the container, the container's output
    from then on (of any container, stdin or not; the log still gets all of it)
    to the client, and sizes to the terminal. With ``stdin_once`` the first
    attach's end of stdin closes the container's stdin (EOT on a terminal);
    otherwise an attach ends with its stdin and the container's stays open.
    Containers started by a shim without attach support raise
    ContainerRuntimeError on attach.

Stats come from ``/proc``: CPU is utime + stime of the container's process
group and descendants, memory working set and usage are their summed RSS.
Events: :meth:`HostProcessRuntime.get_container_events` streams the changes
this runtime makes and every container exit (seen when the container's shim
ends), so an evented PLEG can use it; relists remain the truth.
"""

from __future__ import annotations

import asyncio
import collections.abc
import contextlib
import enum
import fcntl
import hashlib
import json
import os
import pwd
import shutil
import signal
import socket
import struct
import sys
import time
import types
import typing
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import attrs

from kubelet_kit._version import __version__
from kubelet_kit.clock import Clock, RealClock, wait_for
from kubelet_kit.cni.types import CNIError
from kubelet_kit.container.cgroups import cgroup_parent_path
from kubelet_kit.container.images import IMAGE_ID_RE as _IMAGE_ID_RE
from kubelet_kit.container.images import normalize_image_ref
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
    Image,
    ImageSpec,
    LinuxContainerResources,
    NamespaceOptions,
    PodSandbox,
    PodSandboxConfig,
    PodSandboxFilter,
    PodSandboxState,
    PodSandboxStats,
    PodSandboxStatus,
    RuntimeCondition,
    RuntimeStatus,
    VersionInfo,
)
from kubelet_kit.container.logs import DEFAULT_MAX_LINE_SIZE
from kubelet_kit.container.streams import ByteSink, ByteSource, StreamIO
from kubelet_kit.errors import (
    AlreadyExistsError,
    ContainerRuntimeError,
    ContainerStartError,
    DeadlineExceededError,
    ImageNotFoundError,
    ImagePullError,
    InvalidArgumentError,
    NotFoundError,
)
from kubelet_kit.network import CNINetwork, PodRef, is_netns, port_mappings_arg
from kubelet_kit.runtimes._shim import (
    EXIT_FILE,
    SPEC_FILE,
    START_FILE,
    process_start_ticks,
    write_json_atomic,
)
from kubelet_kit.runtimes.streams import (
    attach_session,
    exec_session,
    forward_port,
    take_controlling_tty,
)

__all__ = ["DEFAULT_PATH", "RUNTIME_NAME", "HostProcessRuntime", "normalize_image_ref"]

# Re-exported: the runtime normalises references with the shared rules.

RUNTIME_NAME = "kubelet-kit-host"
#: The PATH containerd gives a container whose image sets none.
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

#: containerd's exit code and reason for a running container whose task vanished.
UNKNOWN_EXIT_CODE = 255
UNKNOWN_EXIT_REASON = "Unknown"

_SANDBOX_FILE = "sandbox.json"
_CONTAINER_FILE = "container.json"
_START_LOCK = "start.lock"
_SHIM_LOG = "shim.log"
_IMAGES_FILE = "images.json"

T = TypeVar("T")


# ------------------------------------------------------------- attrs <-> JSON


def _unstructure(value: Any) -> Any:
    """Turn attrs values (with enums, tuples, mappings) into JSON-ready data."""
    if attrs.has(type(value)):
        return {f.name: _unstructure(getattr(value, f.name)) for f in attrs.fields(type(value))}
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, Mapping):
        return {str(k): _unstructure(v) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return [_unstructure(v) for v in value]
    return value


def _structure(tp: Any, data: Any) -> Any:
    """Rebuild a value of type ``tp`` from :func:`_unstructure`'s output."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if data is None:
            return None
        return _structure(args[0], data)
    if isinstance(tp, type) and attrs.has(tp):
        hints = typing.get_type_hints(tp)
        kwargs = {
            f.name: _structure(hints[f.name], data[f.name])
            for f in attrs.fields(tp)
            if f.name in data
        }
        return tp(**kwargs)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return tp(data)
    if origin is tuple:
        item = typing.get_args(tp)[0]
        return tuple(_structure(item, v) for v in data)
    if origin in (collections.abc.Mapping, dict):
        return dict(data)
    return data


def _from_json(cls: type[T], data: Any) -> T:
    value: T = _structure(cls, data)
    return value


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        with open(path, encoding="utf-8") as f:
            data: dict[str, Any] = json.load(f)
    except (FileNotFoundError, NotADirectoryError):
        return None
    return data


# ------------------------------------------------------------------ images

def _image_id(normalized: str) -> str:
    return "sha256:" + hashlib.sha256(normalized.encode()).hexdigest()


# -------------------------------------------------------------------- host


def _host_primary_ip() -> str:
    """IPv4 address of the default route's interface, or 127.0.0.1."""
    try:
        with open("/proc/net/route", encoding="ascii") as f:
            next(f)
            iface = next(
                (p[0] for p in (line.split() for line in f) if len(p) > 2 and p[1] == "00000000"),
                None,
            )
        if iface is None:
            return "127.0.0.1"
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            siocgifaddr = 0x8915
            packed = fcntl.ioctl(s.fileno(), siocgifaddr, struct.pack("256s", iface[:15].encode()))
        return socket.inet_ntoa(packed[20:24])
    except (OSError, StopIteration):
        return "127.0.0.1"


def _shim_env() -> dict[str, str]:
    env = dict(os.environ)
    # The shim runs from "/", so make sure it imports this very kubelet_kit.
    # The directory holding the kubelet_kit package (runtimes/host.py is two below).
    pkg_root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (pkg_root, env.get("PYTHONPATH")) if p)
    return env


def _has_cap_sys_admin() -> bool:
    """Whether this process may mount (CAP_SYS_ADMIN in its effective set)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("CapEff:"):
                    return bool(int(line.split()[1], 16) & (1 << 21))
    except OSError:
        pass
    return os.geteuid() == 0


@attrs.frozen
class _Proc:
    pid: int
    ppid: int
    pgid: int
    cpu_ticks: int
    rss_pages: int


def _scan_procs() -> list[_Proc]:
    procs = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2 :].split()
        if fields[0] in (b"Z", b"X"):
            continue
        procs.append(
            _Proc(
                int(entry),
                int(fields[1]),
                int(fields[2]),
                int(fields[11]) + int(fields[12]),
                int(fields[21]),
            )
        )
    return procs


def _tree_usage(root_pid: int, procs: list[_Proc]) -> tuple[int, int, int]:
    """(cpu ns, rss bytes, process count) of ``root_pid``'s group and descendants."""
    children: dict[int, list[_Proc]] = {}
    for p in procs:
        children.setdefault(p.ppid, []).append(p)
    members = {p.pid: p for p in procs if p.pgid == root_pid or p.pid == root_pid}
    stack = list(members.values())
    while stack:
        for child in children.get(stack.pop().pid, ()):
            if child.pid not in members:
                members[child.pid] = child
                stack.append(child)
    ticks = os.sysconf("SC_CLK_TCK")
    page = os.sysconf("SC_PAGE_SIZE")
    cpu = sum(p.cpu_ticks for p in members.values()) * 1_000_000_000 // ticks
    rss = sum(p.rss_pages for p in members.values()) * page
    return cpu, rss, len(members)


# -------------------------------------------------------------- observations


@attrs.frozen
class _Observed:
    """A container's run state as read from its state directory and /proc."""

    state: ContainerState
    started_at: float = 0.0
    finished_at: float = 0.0
    exit_code: int = 0
    reason: str = ""
    message: str = ""
    pid: int = 0
    shim_pid: int = 0
    shim_alive: bool = False


@attrs.frozen
class _ContainerRecord:
    id: str
    pod_sandbox_id: str
    config: ContainerConfig
    created_at: float
    image_ref: str
    log_path: str


@attrs.frozen
class _SandboxRecord:
    id: str
    config: PodSandboxConfig
    created_at: float
    state: PodSandboxState
    ip: str
    #: The sandbox's network namespace while it has one (CNI networking).
    netns: str = ""
    additional_ips: tuple[str, ...] = ()


def _pod_ref(config: PodSandboxConfig) -> PodRef:
    md = config.metadata
    return PodRef(md.name, md.namespace, md.uid)


def _container_record_to_json(rec: _ContainerRecord) -> dict[str, Any]:
    data: dict[str, Any] = _unstructure(rec)
    return data


# ------------------------------------------------------------------ runtime


def cgroup_procs_files(cgroup_parent: str, mounts_file: str = "/proc/self/mounts") -> list[str]:
    """The ``cgroup.procs`` files that put a process into ``cgroup_parent``.

    ``cgroup_parent`` is what the ContainerManager gave the sandbox: a cgroupfs path
    (``/kubepods/burstable/pod<uid>``) or a systemd slice name
    (``kubepods-burstable-pod<uid>.slice``, expanded as systemd does). Every mounted
    hierarchy (each cgroup v1 controller, and cgroup v2) where that cgroup exists
    contributes its file; hierarchies where the manager made nothing are left out,
    so a process lands exactly where the manager prepared limits for it.
    """
    if not cgroup_parent:
        return []
    path = cgroup_parent_path(cgroup_parent)
    try:
        with open(mounts_file, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError:
        return []
    hierarchies: list[str] = []
    for line in lines:
        fields = line.split()
        if len(fields) >= 3 and fields[2] in ("cgroup", "cgroup2") and fields[1] not in hierarchies:
            hierarchies.append(fields[1])
    files = []
    for mount in hierarchies:
        procs = os.path.join(mount + path, "cgroup.procs")
        if os.path.exists(procs):
            files.append(procs)
    return files


class HostProcessRuntime:
    """A :class:`~kubelet_kit.container.Runtime` running containers as host processes.

    See the module documentation for what is and is not isolated. Safe to create
    several instances over one ``root_dir`` in turn (an agent restart); two agents
    using one directory at the same time are not coordinated beyond never
    starting a container twice.

    Args:
        root_dir: Directory holding all state; created if missing.
        clock: Source of timestamps (``created_at``) and of the deadlines of stop,
            exec and start. Process start and finish times are read by the shim
            from the machine's clock.
        host_ip: The address sandboxes report; default the host's primary IPv4.
        python: Interpreter that runs the shim.
        max_log_line_size: Longest log record before a line is split
            (containerd's ``max_container_log_line_size``).
        start_timeout: How long ``start_container`` waits for the shim's report:
            the kubelet's runtimeRequestTimeout (2 minutes) by default, since a
            Python shim's start on a loaded small machine can take many seconds.
        kill_timeout: How long to wait for a container to exit after SIGKILL.
        event_buffer: Events held for a slow :meth:`get_container_events`
            consumer; past that, new events are dropped for it (a PLEG relists).
        apply_mounts: Apply containers' mounts in a mount namespace (see the
            module doc); default: when this process holds CAP_SYS_ADMIN.
        network: CNI networking for sandboxes that do not ask for the host's
            network (see the module doc); used only when the agent runs as
            root. Without it every sandbox shares the host's network.
    """

    def __init__(
        self,
        root_dir: str | Path,
        *,
        clock: Clock | None = None,
        host_ip: str | None = None,
        python: str = sys.executable,
        max_log_line_size: int = DEFAULT_MAX_LINE_SIZE,
        start_timeout: float = 120.0,
        kill_timeout: float = 10.0,
        event_buffer: int = 1000,
        apply_mounts: bool | None = None,
        network: CNINetwork | None = None,
    ) -> None:
        self._root = Path(root_dir).absolute()
        self._apply_mounts = _has_cap_sys_admin() if apply_mounts is None else apply_mounts
        self._clock: Clock = clock if clock is not None else RealClock()
        self._host_ip = host_ip
        self._python = python
        self._max_line = max_log_line_size
        self._start_timeout = start_timeout
        self._kill_timeout = kill_timeout
        self._locks: dict[str, asyncio.Lock] = {}
        self._event_buffer = event_buffer
        self._subscribers: list[asyncio.Queue[ContainerEvent]] = []
        # Running containers whose end is being watched for subscribers: id -> pidfd.
        self._watched: dict[str, int] = {}
        self._stop_reported: set[str] = set()
        # Namespaces need root; without it every sandbox shares the host's network.
        self._network = network if network is not None and os.geteuid() == 0 else None
        self._networks_recovered = False
        for sub in ("sandboxes", "containers"):
            (self._root / sub).mkdir(parents=True, exist_ok=True)

    @property
    def root_dir(self) -> Path:
        """The directory holding this runtime's state."""
        return self._root

    @property
    def start_timeout(self) -> float:
        """Seconds ``start_container`` waits for a container's shim to report."""
        return self._start_timeout

    # ------------------------------------------------------------ plumbing

    def _lock(self, key: str) -> asyncio.Lock:
        return self._locks.setdefault(key, asyncio.Lock())

    def _sandbox_dir(self, sandbox_id: str) -> Path:
        return self._root / "sandboxes" / sandbox_id

    def _container_dir(self, container_id: str) -> Path:
        return self._root / "containers" / container_id

    @staticmethod
    def _check_id(kind: str, value: str) -> None:
        # Ids become directory names: refuse anything that could leave the root.
        if not value or "/" in value or value in (".", ".."):
            raise NotFoundError(f"{kind} {value!r} not found")

    def _load_sandbox(self, sandbox_id: str) -> _SandboxRecord:
        self._check_id("sandbox", sandbox_id)
        data = _read_json(self._sandbox_dir(sandbox_id) / _SANDBOX_FILE)
        if data is None:
            raise NotFoundError(f'sandbox "{sandbox_id}" not found')
        return _from_json(_SandboxRecord, data)

    def _save_sandbox(self, rec: _SandboxRecord) -> None:
        write_json_atomic(self._sandbox_dir(rec.id) / _SANDBOX_FILE, _unstructure(rec))

    def _load_container(self, container_id: str) -> _ContainerRecord:
        self._check_id("container", container_id)
        data = _read_json(self._container_dir(container_id) / _CONTAINER_FILE)
        if data is None:
            raise NotFoundError(f'container "{container_id}" not found')
        return _from_json(_ContainerRecord, data)

    def _sandbox_ids(self) -> list[str]:
        return sorted(p.name for p in (self._root / "sandboxes").iterdir() if p.is_dir())

    def _container_records(self) -> list[_ContainerRecord]:
        records = []
        for p in (self._root / "containers").iterdir():
            data = _read_json(p / _CONTAINER_FILE)
            if data is not None:  # a directory half made or half removed is skipped
                records.append(_from_json(_ContainerRecord, data))
        records.sort(key=lambda r: (r.created_at, r.id))
        return records

    def _observe(self, container_id: str) -> _Observed:
        """Read a container's state from its files and /proc (never blocks for long)."""
        cdir = self._container_dir(container_id)
        exit_ = _read_json(cdir / EXIT_FILE)
        start = _read_json(cdir / START_FILE)
        started_at = float(start["started_at"]) if start else 0.0
        if exit_ is not None:
            return _Observed(
                ContainerState.EXITED,
                started_at=started_at or float(exit_.get("started_at", 0.0)),
                finished_at=float(exit_["finished_at"]),
                exit_code=int(exit_["exit_code"]),
                reason=str(exit_.get("reason", "")),
                message=str(exit_.get("message", "")),
                pid=int(start["pid"]) if start else 0,
            )
        if start is None:
            # Not started, or a start still under way: containerd says CREATED too.
            return _Observed(ContainerState.CREATED)
        pid, shim_pid = int(start["pid"]), int(start["shim_pid"])
        main_alive = (
            start["pid_start"] is not None and process_start_ticks(pid) == start["pid_start"]
        )
        shim_alive = (
            start["shim_start"] is not None and process_start_ticks(shim_pid) == start["shim_start"]
        )
        if main_alive or shim_alive:
            return _Observed(
                ContainerState.RUNNING,
                started_at=started_at,
                pid=pid,
                shim_pid=shim_pid,
                shim_alive=shim_alive,
            )
        exit_ = _read_json(cdir / EXIT_FILE)  # the shim may have finished just now
        if exit_ is None:
            exit_ = {
                "exit_code": UNKNOWN_EXIT_CODE,
                "reason": UNKNOWN_EXIT_REASON,
                "message": "the container's shim exited without recording its exit status",
                "started_at": started_at,
                "finished_at": self._clock.now(),
            }
            with contextlib.suppress(FileNotFoundError):  # removed meanwhile
                write_json_atomic(cdir / EXIT_FILE, exit_)
        return _Observed(
            ContainerState.EXITED,
            started_at=started_at,
            finished_at=float(exit_["finished_at"]),
            exit_code=int(exit_["exit_code"]),
            reason=str(exit_.get("reason", "")),
            message=str(exit_.get("message", "")),
            pid=pid,
        )

    async def _wait_exited(self, container_id: str) -> None:
        """Return once the container has exited (its shim, or its process, is gone)."""
        loop = asyncio.get_running_loop()
        while True:
            obs = self._observe(container_id)
            if obs.state is not ContainerState.RUNNING:
                return
            # The shim records the exit and then ends, so its end is the moment to
            # look again; without a shim, the process's own end is.
            watched = obs.shim_pid if obs.shim_alive else obs.pid
            try:
                pidfd = os.pidfd_open(watched)
            except ProcessLookupError:
                continue
            except OSError:
                # No pidfd support: poll the process table. This is real time, not
                # a duration of the injected clock, so it does not use the clock.
                await asyncio.sleep(0.02)
                continue
            exited: asyncio.Future[None] = loop.create_future()

            def wake(fut: asyncio.Future[None] = exited) -> None:
                if not fut.done():
                    fut.set_result(None)

            loop.add_reader(pidfd, wake)
            try:
                # Look again after registering: the process may have ended between
                # the observation and pidfd_open.
                if self._observe(container_id).state is ContainerState.RUNNING:
                    await exited
            finally:
                loop.remove_reader(pidfd)
                os.close(pidfd)

    # ------------------------------------------------------------ identity

    async def version(self) -> VersionInfo:
        """Name and version of this runtime. Never blocks; raises nothing."""
        return VersionInfo(
            runtime_name=RUNTIME_NAME,
            runtime_version=__version__,
            runtime_api_version="v1",
            version="0.1.0",
        )

    async def status(self) -> RuntimeStatus:
        """RuntimeReady (the state directory is writable) and NetworkReady (always
        ready with the host network; with CNI networking, ready when the
        configuration loads and its plugins are there, else NetworkPluginNotReady).
        Never blocks for long (a 1.1 configuration's STATUS runs its plugins);
        raises nothing."""
        writable = os.access(self._root, os.W_OK)
        return RuntimeStatus(
            conditions=(
                RuntimeCondition(
                    "RuntimeReady",
                    writable,
                    "" if writable else "StateDirNotWritable",
                    "" if writable else f"{self._root} is not writable",
                ),
                await self._network_condition(),
            )
        )

    async def _network_condition(self) -> RuntimeCondition:
        if self._network is None:
            return RuntimeCondition("NetworkReady", True)
        problem = await self._network.ready()
        if not problem:
            return RuntimeCondition("NetworkReady", True)
        # containerd's reason and message for a CNI that is not set up.
        return RuntimeCondition(
            "NetworkReady",
            False,
            "NetworkPluginNotReady",
            f"Network plugin returns error: cni plugin not initialized: {problem}",
        )

    # ----------------------------------------------------------- sandboxes

    async def run_pod_sandbox(self, config: PodSandboxConfig) -> str:
        """Record a READY sandbox; returns its id. Not idempotent. With CNI
        networking and a config that does not ask for the host's network, the
        sandbox gets a network namespace and the address the CNI plugins gave it
        (failures leave nothing behind).

        Raises:
            AlreadyExistsError: a sandbox with the same name, namespace, uid and
                attempt exists (containerd reserves that name too).
            ContainerRuntimeError: the network could not be set up (the message
                names the plugin and its error).
        """
        await self._recover_networks()
        md = config.metadata
        for sid in self._sandbox_ids():
            with contextlib.suppress(NotFoundError):
                other = self._load_sandbox(sid).config.metadata
                if other == md:
                    raise AlreadyExistsError(
                        f'sandbox name "{md.name}_{md.namespace}_{md.uid}_{md.attempt}" '
                        f'is reserved for "{sid}"'
                    )
        sandbox_id = uuid.uuid4().hex + uuid.uuid4().hex
        own_network = self._network is not None and not config.namespace_options.host_network
        # The host's PID and IPC namespaces are shared whatever the config asked
        # for; the network too unless CNI networking gives the sandbox its own.
        config = attrs.evolve(
            config,
            namespace_options=NamespaceOptions(
                host_network=not own_network, host_pid=True, host_ipc=True
            ),
        )
        netns = ""
        extra_ips: tuple[str, ...] = ()
        if own_network:
            assert self._network is not None
            try:
                net = await self._network.setup(
                    sandbox_id,
                    _pod_ref(config),
                    capability_args=port_mappings_arg(config.port_mappings),
                )
            except (CNIError, OSError) as exc:
                raise ContainerRuntimeError(
                    f'failed to setup network for sandbox "{sandbox_id}": {exc}'
                ) from exc
            ip, netns, extra_ips = net.ip, net.netns, net.additional_ips
        else:
            ip = self._host_ip if self._host_ip is not None else _host_primary_ip()
        rec = _SandboxRecord(
            sandbox_id, config, self._clock.now(), PodSandboxState.READY, ip, netns, extra_ips
        )
        self._sandbox_dir(sandbox_id).mkdir(parents=True)
        self._save_sandbox(rec)
        self._emit_sandbox(sandbox_id, ContainerEventType.CREATED)
        self._emit_sandbox(sandbox_id, ContainerEventType.STARTED)
        return sandbox_id

    async def stop_pod_sandbox(self, pod_sandbox_id: str) -> None:
        """Stop every container of the sandbox (SIGKILL at once, as containerd does
        when the kubelet has already stopped them gracefully) and mark it NOTREADY.
        Idempotent. Raises NotFoundError for an unknown id."""
        rec = self._load_sandbox(pod_sandbox_id)
        for c in self._container_records():
            if c.pod_sandbox_id == pod_sandbox_id:
                await self.stop_container(c.id, 0)
        if rec.state is not PodSandboxState.NOTREADY:
            rec = attrs.evolve(rec, state=PodSandboxState.NOTREADY)
            self._save_sandbox(rec)
            self._emit_sandbox(pod_sandbox_id, ContainerEventType.STOPPED)
        await self._teardown_network(rec)

    async def _teardown_network(self, rec: _SandboxRecord) -> None:
        """CNI DEL and namespace removal, once; the record forgets the namespace
        only after both succeeded, so a failure is retried by the next stop,
        remove or start-up."""
        if not rec.netns or self._network is None:
            return
        try:
            await self._network.teardown(
                rec.id,
                _pod_ref(rec.config),
                capability_args=port_mappings_arg(rec.config.port_mappings),
            )
        except (CNIError, OSError) as exc:
            raise ContainerRuntimeError(
                f'failed to destroy network for sandbox "{rec.id}": {exc}'
            ) from exc
        with contextlib.suppress(FileNotFoundError):  # removed meanwhile
            self._save_sandbox(attrs.evolve(rec, netns=""))

    async def _recover_networks(self) -> None:
        """Once per runtime: release the networks of sandboxes left behind by an
        agent that stopped mid-way. A stopped sandbox still holding a namespace,
        a ready one whose namespace is gone (a reboot: it is marked NOTREADY, its
        containers being gone too), and a namespace of ours with no sandbox at
        all are each given a CNI DEL and their namespace removed. Failures are
        retried at the next start-up (or stop/remove of that sandbox)."""
        if self._networks_recovered or self._network is None:
            return
        self._networks_recovered = True
        known = set()
        for sid in self._sandbox_ids():
            try:
                rec = self._load_sandbox(sid)
            except NotFoundError:
                continue
            known.add(sid)
            if not rec.netns:
                continue
            if rec.state is PodSandboxState.READY and is_netns(rec.netns):
                continue
            if rec.state is PodSandboxState.READY:
                rec = attrs.evolve(rec, state=PodSandboxState.NOTREADY)
                self._save_sandbox(rec)
            with contextlib.suppress(ContainerRuntimeError):
                await self._teardown_network(rec)
        for sid in self._network.leftover_sandbox_ids():
            if sid not in known:
                with contextlib.suppress(CNIError, OSError):
                    await self._network.teardown(sid)

    async def remove_pod_sandbox(self, pod_sandbox_id: str) -> None:
        """Stop and remove the sandbox and its containers. Idempotent: an unknown
        id succeeds."""
        try:
            self._check_id("sandbox", pod_sandbox_id)
        except NotFoundError:
            return
        try:
            status = self._sandbox_status(self._load_sandbox(pod_sandbox_id))
        except NotFoundError:
            status = None
        for c in self._container_records():
            if c.pod_sandbox_id == pod_sandbox_id:
                await self.remove_container(c.id)
        with contextlib.suppress(NotFoundError):
            await self._teardown_network(self._load_sandbox(pod_sandbox_id))
        shutil.rmtree(self._sandbox_dir(pod_sandbox_id), ignore_errors=True)
        if status is not None:
            self._emit(pod_sandbox_id, ContainerEventType.DELETED, status, ())

    async def pod_sandbox_status(self, pod_sandbox_id: str) -> PodSandboxStatus:
        """Status of one sandbox. Raises NotFoundError for an unknown id."""
        return self._sandbox_status(self._load_sandbox(pod_sandbox_id))

    @staticmethod
    def _sandbox_status(rec: _SandboxRecord) -> PodSandboxStatus:
        c = rec.config
        return PodSandboxStatus(
            id=rec.id,
            metadata=c.metadata,
            state=rec.state,
            created_at=rec.created_at,
            ip=rec.ip,
            additional_ips=rec.additional_ips,
            namespace_options=c.namespace_options,
            labels=c.labels,
            annotations=c.annotations,
            runtime_handler=c.runtime_handler,
        )

    async def list_pod_sandboxes(self, filter: PodSandboxFilter | None = None) -> list[PodSandbox]:
        """Every sandbox matching ``filter``, oldest first. Raises nothing. (The
        first call of a runtime with CNI networking first releases the networks
        of sandboxes left behind.)"""
        await self._recover_networks()
        result = []
        for sid in self._sandbox_ids():
            try:
                rec = self._load_sandbox(sid)
            except NotFoundError:
                continue
            sb = PodSandbox(
                id=rec.id,
                metadata=rec.config.metadata,
                state=rec.state,
                created_at=rec.created_at,
                labels=rec.config.labels,
                annotations=rec.config.annotations,
                runtime_handler=rec.config.runtime_handler,
            )
            if filter is None or filter.matches(sb):
                result.append(sb)
        result.sort(key=lambda s: (s.created_at, s.id))
        return result

    # ---------------------------------------------------------- containers

    def _build_spec(
        self, name: str, config: ContainerConfig, sandbox: PodSandboxConfig, netns: str = ""
    ) -> dict[str, Any]:
        argv = [*config.command, *config.args]
        if not argv:
            raise ContainerStartError(
                f'container "{name}": no command specified (command and args are both '
                "empty, and the host runtime has no image to supply a default)"
            )
        cwd = config.working_dir or "/"
        if not cwd.startswith("/"):
            raise ContainerStartError(
                f'container "{name}": workingDir {cwd!r} must be an absolute path'
            )
        sc = config.security_context
        uid = sc.run_as_user if sc is not None and sc.run_as_user is not None else os.getuid()
        try:
            home = pwd.getpwuid(uid).pw_dir
        except KeyError:
            home = "/"  # runc's default for a user without a passwd entry
        env: dict[str, str] = {
            "PATH": DEFAULT_PATH,
            "HOSTNAME": sandbox.hostname or socket.gethostname(),
        }
        for kv in config.envs:
            env[kv.key] = kv.value
        env.setdefault("HOME", home)
        spec: dict[str, Any] = {
            "name": name,
            "argv": argv,
            "env": env,
            "cwd": cwd,
            "max_line_size": self._max_line,
            # Read by the shim: a stdin pipe it holds open, a terminal it owns.
            "stdin": config.stdin,
            "stdin_once": config.stdin_once,
            "tty": config.tty,
        }
        if config.mounts:
            spec["mounts"] = [
                {
                    "container_path": m.container_path,
                    "host_path": m.host_path,
                    "readonly": m.readonly,
                    "propagation": m.propagation.value,
                }
                for m in config.mounts
            ]
            spec["apply_mounts"] = self._apply_mounts
        if sc is not None:
            spec["user"] = sc.run_as_user
            spec["group"] = sc.run_as_group
            spec["extra_groups"] = list(sc.supplemental_groups) or None
        procs = cgroup_procs_files(sandbox.cgroup_parent)
        if procs:
            spec["cgroup_procs"] = procs
        if netns:
            spec["netns"] = netns
        return spec

    async def create_container(
        self, pod_sandbox_id: str, config: ContainerConfig, sandbox_config: PodSandboxConfig
    ) -> str:
        """Record a container in a sandbox; returns its id. Not idempotent; does not
        block.

        Raises:
            NotFoundError: unknown sandbox.
            AlreadyExistsError: a container with this name and attempt exists in it.
            ContainerStartError: the sandbox is not ready, or the config cannot run
                (no command, relative working directory).
        """
        sandbox = self._load_sandbox(pod_sandbox_id)
        name = config.metadata.name
        if sandbox.state is not PodSandboxState.READY:
            raise ContainerStartError(
                f'container "{name}": sandbox "{pod_sandbox_id}" is not ready'
            )
        for other in self._container_records():
            if other.pod_sandbox_id == pod_sandbox_id and other.config.metadata == config.metadata:
                raise AlreadyExistsError(
                    f'container name "{name}" (attempt {config.metadata.attempt}) in sandbox '
                    f'"{pod_sandbox_id}" is reserved for "{other.id}"'
                )
        spec = self._build_spec(name, config, sandbox.config, sandbox.netns)
        # As containerd: the log path is relative to the log directory of the
        # sandbox config in this request. Without a directory only an absolute
        # path names a file; otherwise the output is discarded.
        log_dir = sandbox_config.log_directory or sandbox.config.log_directory
        log_path = ""
        if config.log_path and (log_dir or config.log_path.startswith("/")):
            log_path = str(Path(log_dir or "/") / config.log_path)
        spec["log_path"] = log_path
        try:
            image_ref = _image_id(normalize_image_ref(config.image.image))
        except ImagePullError:
            image_ref = ""
        container_id = uuid.uuid4().hex + uuid.uuid4().hex
        rec = _ContainerRecord(
            container_id, pod_sandbox_id, config, self._clock.now(), image_ref, log_path
        )
        cdir = self._container_dir(container_id)
        cdir.mkdir(parents=True)
        write_json_atomic(cdir / SPEC_FILE, spec)
        # container.json last: a directory without it is not (yet) a container.
        write_json_atomic(cdir / _CONTAINER_FILE, _container_record_to_json(rec))
        self._emit_container(container_id, ContainerEventType.CREATED)
        return container_id

    async def start_container(self, container_id: str) -> None:
        """Start a created container and return once its process runs.

        Waits for the shim's report (at most ``start_timeout`` on the clock). A
        container is started at most once, even by two runtimes over one root.

        Raises:
            NotFoundError: unknown id.
            ContainerStartError: not in CREATED state, sandbox not ready, or the
                process could not be started (recorded as exit 128 StartError).
            DeadlineExceededError: the shim did not report in time.
        """
        rec = self._load_container(container_id)
        name = rec.config.metadata.name
        async with self._lock(container_id):
            try:
                sandbox = self._load_sandbox(rec.pod_sandbox_id)
            except NotFoundError:
                raise ContainerStartError(
                    f'container "{name}" ({container_id}): sandbox "{rec.pod_sandbox_id}" not found'
                ) from None
            if sandbox.state is not PodSandboxState.READY:
                raise ContainerStartError(
                    f'container "{name}" ({container_id}): sandbox "{rec.pod_sandbox_id}" '
                    "is not ready"
                )
            cdir = self._container_dir(container_id)
            try:
                os.close(os.open(cdir / _START_LOCK, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            except FileExistsError:
                state = self._observe(container_id).state
                raise ContainerStartError(
                    f'container "{name}" ({container_id}) is in {state.value} state; '
                    "only a created container can be started"
                ) from None
            try:
                report = await wait_for(self._clock, self._launch_shim(cdir), self._start_timeout)
            except TimeoutError:
                raise DeadlineExceededError(
                    f'container "{name}" ({container_id}): the shim did not report within '
                    f"{self._start_timeout:g}s"
                ) from None
            if "error" not in report:
                self._emit_container(container_id, ContainerEventType.STARTED)
                self._watch(container_id)
            else:
                if _read_json(cdir / EXIT_FILE) is None and _read_json(cdir / START_FILE) is None:
                    # The shim died before it could record anything: record the
                    # failed start ourselves, so the container is not CREATED forever.
                    write_json_atomic(
                        cdir / EXIT_FILE,
                        {
                            "exit_code": 128,
                            "reason": "StartError",
                            "message": report["error"],
                            "started_at": 0.0,
                            "finished_at": self._clock.now(),
                        },
                    )
                self._report_stopped(container_id)
                raise ContainerStartError(
                    f'failed to start container "{name}" ({container_id}): {report["error"]}'
                )

    async def _launch_shim(self, cdir: Path) -> dict[str, Any]:
        env = _shim_env()
        with open(cdir / _SHIM_LOG, "ab") as shim_log:
            proc = await asyncio.create_subprocess_exec(
                self._python,
                "-m",
                "kubelet_kit.runtimes._shim",
                str(cdir),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=shim_log,
                start_new_session=True,
                cwd="/",
                env=env,
            )
        out, _ = await proc.communicate()
        line = out.decode(errors="replace").strip()
        if not line:
            try:
                tail = (cdir / _SHIM_LOG).read_text(errors="replace")[-2000:].strip()
            except OSError:
                tail = ""
            return {"error": f"the shim exited without reporting: {tail or 'no output'}"}
        report: dict[str, Any] = json.loads(line.splitlines()[-1])
        return report

    def _signal_group(self, obs: _Observed, sig: signal.Signals) -> None:
        if obs.pid <= 0:
            return
        # The process leads its own group; signalling the group reaches its children.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(obs.pid, sig)

    async def stop_container(self, container_id: str, timeout: float) -> None:
        """Stop a running container: SIGTERM to its process group, SIGKILL after
        ``timeout`` seconds (at once when ``timeout <= 0``); returns once it has
        exited. Idempotent: a created or exited container is left as it is.

        Raises:
            NotFoundError: unknown id.
            DeadlineExceededError: still running ``kill_timeout`` after SIGKILL.
        """
        self._load_container(container_id)
        async with self._lock(container_id):
            obs = self._observe(container_id)
            if obs.state is not ContainerState.RUNNING:
                return
            try:
                await self._stop_running(container_id, obs, timeout)
            finally:
                if self._observe(container_id).state is ContainerState.EXITED:
                    self._report_stopped(container_id)

    async def _stop_running(self, container_id: str, obs: _Observed, timeout: float) -> None:
        if timeout > 0:
            self._signal_group(obs, signal.SIGTERM)
            with contextlib.suppress(TimeoutError):
                await wait_for(self._clock, self._wait_exited(container_id), timeout)
                return
        obs = self._observe(container_id)
        if obs.state is not ContainerState.RUNNING:
            return
        self._signal_group(obs, signal.SIGKILL)
        try:
            await wait_for(self._clock, self._wait_exited(container_id), self._kill_timeout)
        except TimeoutError:
            raise DeadlineExceededError(
                f'container "{container_id}" still running {self._kill_timeout:g}s after SIGKILL'
            ) from None

    async def remove_container(self, container_id: str) -> None:
        """Kill the container if it runs, then delete its state. The log file is
        kept (the kubelet removes it). Idempotent: an unknown id succeeds."""
        try:
            self._load_container(container_id)
        except NotFoundError:
            return
        await self.stop_container(container_id, 0)
        async with self._lock(container_id):
            status = self._container_status(container_id)
            sandbox_id = self._load_container(container_id).pod_sandbox_id
            self._unwatch(container_id)
            shutil.rmtree(self._container_dir(container_id), ignore_errors=True)
        self._locks.pop(container_id, None)
        self._stop_reported.discard(container_id)
        self._emit(
            container_id,
            ContainerEventType.DELETED,
            self._try_sandbox_status(sandbox_id),
            (status,),
        )

    def _info(self, rec: _ContainerRecord, state: ContainerState) -> ContainerInfo:
        c = rec.config
        return ContainerInfo(
            id=rec.id,
            pod_sandbox_id=rec.pod_sandbox_id,
            metadata=c.metadata,
            image=c.image.image,
            image_ref=rec.image_ref,
            state=state,
            created_at=rec.created_at,
            labels=c.labels,
            annotations=c.annotations,
        )

    async def list_containers(self, filter: ContainerFilter | None = None) -> list[ContainerInfo]:
        """Every container matching ``filter``, oldest first. Raises nothing."""
        result = []
        for rec in self._container_records():
            if filter is not None and filter.id is not None and rec.id != filter.id:
                continue
            info = self._info(rec, self._observe(rec.id).state)
            if filter is None or filter.matches(info):
                result.append(info)
        return result

    async def container_status(self, container_id: str) -> ContainerStatus:
        """Status of one container. Raises NotFoundError for an unknown id."""
        return self._container_status(container_id)

    def _container_status(self, container_id: str) -> ContainerStatus:
        rec = self._load_container(container_id)
        obs = self._observe(container_id)
        c = rec.config
        return ContainerStatus(
            id=rec.id,
            metadata=c.metadata,
            state=obs.state,
            created_at=rec.created_at,
            image=c.image.image,
            image_ref=rec.image_ref,
            started_at=obs.started_at,
            finished_at=obs.finished_at,
            exit_code=obs.exit_code,
            reason=obs.reason,
            message=obs.message,
            labels=c.labels,
            annotations=c.annotations,
            mounts=c.mounts,
            log_path=rec.log_path,
            resources=c.resources,
        )

    async def reopen_container_log(self, container_id: str) -> None:
        """Make the container's shim open its log path again (a new file, after log
        rotation renamed the old one); returns once the new file is there.

        Raises:
            NotFoundError: unknown container.
            ContainerRuntimeError: it is not running (or has no log), or its shim
                did not open the new file within 5 seconds.
        """
        rec = self._load_container(container_id)
        obs = self._observe(container_id)
        if obs.state is not ContainerState.RUNNING or not obs.shim_alive:
            raise ContainerRuntimeError(
                f"reopen_container_log: container {container_id} is not running")
        if not rec.log_path:
            raise ContainerRuntimeError(
                f"reopen_container_log: container {container_id} has no log file")
        try:
            os.kill(obs.shim_pid, signal.SIGUSR1)
        except ProcessLookupError:
            raise ContainerRuntimeError(
                f"reopen_container_log: container {container_id} is not running") from None
        # The shim is another process: wait on real time, briefly.
        deadline = time.monotonic() + 5.0
        while not os.path.exists(rec.log_path):
            if time.monotonic() > deadline:
                raise ContainerRuntimeError(
                    f"reopen_container_log: container {container_id}: no new log file at "
                    f"{rec.log_path} after 5s")
            await asyncio.sleep(0.01)

    def _running_record(self, container_id: str, what: str) -> _ContainerRecord:
        """The record of a running container.

        Raises:
            NotFoundError: unknown id.
            ContainerRuntimeError: the container is not running.
        """
        rec = self._load_container(container_id)
        state = self._observe(container_id).state
        if state is not ContainerState.RUNNING:
            # No more specific code in the CRI either (containerd: "container is in
            # CONTAINER_EXITED state"), hence the base class.
            raise ContainerRuntimeError(
                f'container "{container_id}" ({rec.config.metadata.name}) is in {state.value} '
                f"state; {what} needs a running container"
            )
        return rec

    def _check_exec(self, container_id: str, cmd: Sequence[str]) -> None:
        """Raise what an exec of ``cmd`` in the container raises before it runs."""
        self._load_container(container_id)
        if not cmd:
            raise InvalidArgumentError(f'exec in container "{container_id}": cmd is empty')
        self._running_record(container_id, "exec")

    async def _spawn_exec(
        self,
        container_id: str,
        cmd: Sequence[str],
        stdin: int,
        stdout: int,
        stderr: int,
        tty: bool = False,
    ) -> asyncio.subprocess.Process:
        """Start ``cmd`` as the container's processes run: its environment, working
        directory and user, its mount and network namespaces and cgroups when it has
        them, in a session of its own (with ``tty``, on the terminal given as its
        stdio, made its controlling terminal). The one path of every exec.

        Raises:
            OSError: the command could not be started.
        """
        cdir = self._container_dir(container_id)
        spec = _read_json(cdir / SPEC_FILE) or {}
        pid = self._observe(container_id).pid
        in_namespace = bool(spec.get("apply_mounts") and spec.get("mounts"))
        in_namespace = in_namespace or bool(spec.get("netns"))
        if (in_namespace or spec.get("cgroup_procs") or tty) and pid > 0:
            # The command must see the container's mounts and count against its
            # cgroups: the shim's exec helper joins them, then becomes the command.
            # On a terminal the helper also takes it as its controlling terminal: a
            # preexec_fn here would run Python in a fork of this process, whose gRPC
            # fork handlers then write to the child's stderr, the user's terminal.
            return await asyncio.create_subprocess_exec(
                self._python,
                "-m",
                "kubelet_kit.runtimes._shim",
                "--exec",
                str(cdir),
                str(pid),
                "--",
                *cmd,
                env=_shim_env(),
                cwd="/",
                stdin=stdin,
                stdout=stdout,
                stderr=stderr,
                start_new_session=True,
            )
        return await asyncio.create_subprocess_exec(
            *cmd,
            env=spec.get("env", {}),
            cwd=spec.get("cwd") or "/",
            stdin=stdin,
            stdout=stdout,
            stderr=stderr,
            start_new_session=True,
            user=spec.get("user"),
            group=spec.get("group"),
            extra_groups=spec.get("extra_groups"),
            preexec_fn=take_controlling_tty if tty else None,
        )

    async def exec_sync(
        self, container_id: str, cmd: Sequence[str], timeout: float | None = None
    ) -> ExecResult:
        """Run ``cmd`` with the container's environment, working directory and user;
        wait for it and return its exit code and output. Not idempotent.

        Raises:
            NotFoundError: unknown id.
            InvalidArgumentError: ``cmd`` is empty.
            ContainerRuntimeError: the container is not running.
            DeadlineExceededError: it ran longer than ``timeout`` seconds (None or
                0: no limit); the command and its children are killed.
        """
        self._check_exec(container_id, cmd)
        devnull, pipe = asyncio.subprocess.DEVNULL, asyncio.subprocess.PIPE
        try:
            proc = await self._spawn_exec(container_id, cmd, devnull, pipe, pipe)
        except OSError as exc:
            # What a shell says and returns for a command it cannot run.
            code = 127 if isinstance(exc, FileNotFoundError) else 126
            return ExecResult(exit_code=code, stderr=f"{cmd[0]}: {exc.strerror}\n".encode())
        try:
            out, err = await wait_for(self._clock, proc.communicate(), timeout if timeout else None)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            await proc.wait()
            raise DeadlineExceededError(
                f'exec {list(cmd)!r} in container "{container_id}" timed out after {timeout:g}s'
            ) from None
        except BaseException:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            raise
        return ExecResult(exit_code=proc.returncode or 0, stdout=out, stderr=err)

    # ------------------------------------------------------------- streams

    async def exec_stream(self, container_id: str, cmd: Sequence[str], io: StreamIO) -> int:
        """Run ``cmd`` as :meth:`exec_sync` does, wired to the client's streams; return
        its exit code (128 + N when killed by signal N) once its output is written.
        Blocks for the whole session; not idempotent. See
        :mod:`kubelet_kit.runtimes.streams` for pipes, terminals and stdin's end.
        Closes ``io.stdout`` and ``io.stderr``; cancelling kills the command.

        Raises:
            NotFoundError: unknown id.
            InvalidArgumentError: ``cmd`` is empty.
            ContainerRuntimeError: the container is not running.
        """
        self._check_exec(container_id, cmd)

        async def spawn(
            stdin: int, stdout: int, stderr: int, tty: bool
        ) -> asyncio.subprocess.Process:
            return await self._spawn_exec(container_id, cmd, stdin, stdout, stderr, tty)

        return await exec_session(spawn, cmd[0], io)

    async def attach_stream(self, container_id: str, io: StreamIO) -> None:
        """Wire ``io`` to the container's own stdin and output (or terminal) through
        its shim, until the container exits, the client's stdin ends and the
        output goes quiet (with ``stdin_once``: the container's stdin is closed
        then, and the output keeps coming until it exits) or the call is
        cancelled. The container's ``stdin``
        and ``tty`` settings decide what flows (the client's stdin is dropped for a
        container without stdin; a terminal has no stderr). Output is streamed from
        the moment of attaching, for any container; everything also goes to the
        log. Blocks for the whole session. Closes ``io.stdout`` and ``io.stderr``.

        Raises:
            NotFoundError: unknown id.
            ContainerRuntimeError: the container is not running, or its shim was
                started by a runtime without attach support.
        """
        rec = self._running_record(container_id, "attach")
        c = rec.config
        await attach_session(
            self._container_dir(container_id),
            io,
            stdin=c.stdin,
            stdin_once=c.stdin_once,
            tty=c.tty,
            where=f'container "{container_id}" ({c.metadata.name})',
        )

    async def port_forward_stream(
        self, sandbox_id: str, port: int, source: ByteSource, sink: ByteSink
    ) -> None:
        """Connect to ``localhost:port`` in the sandbox's network (its own
        namespace with CNI networking, else the host's) and copy bytes both ways
        until the server closes or either side fails; the client's end of input
        half-closes the connection. Blocks for the whole session. Closes ``sink``.

        Raises:
            NotFoundError: unknown sandbox.
            InvalidArgumentError: ``port`` is not a TCP port number.
            ContainerRuntimeError: the sandbox is not ready, or nothing accepts
                connections on that port.
        """
        rec = self._load_sandbox(sandbox_id)
        if not 0 < port < 65536:
            raise InvalidArgumentError(
                f'port-forward in sandbox "{sandbox_id}": port {port} is not in 1-65535'
            )
        if rec.state is not PodSandboxState.READY:
            raise ContainerRuntimeError(
                f'sandbox "{sandbox_id}" ({rec.config.metadata.name}) is not ready; '
                "port-forward needs a ready sandbox"
            )
        await forward_port(
            rec.netns, port, source, sink,
            where=f'sandbox "{sandbox_id}" ({rec.config.metadata.name})',
        )

    async def update_container_resources(
        self, container_id: str, resources: LinuxContainerResources
    ) -> None:
        """Record new resources (reported by container_status; not enforced: the
        host runtime applies no cgroup limits).

        Raises:
            NotFoundError: unknown id.
            ContainerRuntimeError: the container has exited.
        """
        async with self._lock(container_id):
            rec = self._load_container(container_id)
            state = self._observe(container_id).state
            if state not in (ContainerState.CREATED, ContainerState.RUNNING):
                raise ContainerRuntimeError(
                    f'container "{container_id}" is in {state.value} state; only a created '
                    "or running container's resources can be updated"
                )
            rec = attrs.evolve(rec, config=attrs.evolve(rec.config, resources=resources))
            write_json_atomic(
                self._container_dir(container_id) / _CONTAINER_FILE, _container_record_to_json(rec)
            )

    # --------------------------------------------------------------- stats

    def _stats(self, rec: _ContainerRecord, procs: list[_Proc]) -> tuple[ContainerStats, int]:
        obs = self._observe(rec.id)
        now = self._clock.now()
        if obs.state is not ContainerState.RUNNING or obs.pid <= 0:
            return ContainerStats(container_id=rec.id, timestamp=now), 0
        cpu, rss, count = _tree_usage(obs.pid, procs)
        return ContainerStats(
            container_id=rec.id,
            timestamp=now,
            cpu_usage_core_nanoseconds=cpu,
            memory_working_set_bytes=rss,
            memory_usage_bytes=rss,
        ), count

    async def container_stats(self, container_id: str) -> ContainerStats:
        """Usage of one container from /proc; usage fields are None unless it runs.
        Raises NotFoundError."""
        rec = self._load_container(container_id)
        return self._stats(rec, await asyncio.to_thread(_scan_procs))[0]

    async def list_container_stats(
        self, filter: ContainerFilter | None = None
    ) -> list[ContainerStats]:
        """Usage of every container matching ``filter``. Raises nothing."""
        infos = await self.list_containers(filter)
        wanted = {i.id for i in infos}
        procs = await asyncio.to_thread(_scan_procs)
        return [self._stats(r, procs)[0] for r in self._container_records() if r.id in wanted]

    async def pod_sandbox_stats(self, pod_sandbox_id: str) -> PodSandboxStats:
        """Summed usage of the sandbox's running containers. Raises NotFoundError."""
        self._load_sandbox(pod_sandbox_id)
        procs = await asyncio.to_thread(_scan_procs)
        stats, count = [], 0
        for rec in self._container_records():
            if rec.pod_sandbox_id == pod_sandbox_id:
                s, n = self._stats(rec, procs)
                stats.append(s)
                count += n
        return PodSandboxStats(
            pod_sandbox_id=pod_sandbox_id,
            timestamp=self._clock.now(),
            cpu_usage_core_nanoseconds=sum(s.cpu_usage_core_nanoseconds or 0 for s in stats),
            memory_working_set_bytes=sum(s.memory_working_set_bytes or 0 for s in stats),
            process_count=count,
            containers=tuple(stats),
        )

    # -------------------------------------------------------------- images

    def _load_images(self) -> dict[str, dict[str, Any]]:
        data = _read_json(self._root / _IMAGES_FILE)
        return dict(data or {})

    def _find_image(self, images: dict[str, dict[str, Any]], ref: str) -> str | None:
        if _IMAGE_ID_RE.match(ref):
            image_id = ref if ref.startswith("sha256:") else f"sha256:{ref}"
            return image_id if image_id in images else None
        try:
            normalized = normalize_image_ref(ref)
        except ImagePullError:
            return None
        return next(
            (
                i
                for i, img in images.items()
                if normalized in img["repo_tags"] or normalized in img["repo_digests"]
            ),
            None,
        )

    async def pull_image(
        self,
        image: ImageSpec,
        sandbox_config: PodSandboxConfig | None = None,
        auth: AuthConfig | None = None,
    ) -> str:
        """Record the image as present; returns its stable id (``sha256:...``).
        Idempotent; does not block. ``auth`` is accepted and ignored: host
        processes fetch nothing from a registry, so there is nothing to log into.

        Raises:
            ImagePullError: the reference is not a valid image reference.
            ImageNotFoundError: the registry is under the reserved ``.invalid``
                domain (RFC 6761), which no real runtime could ever pull from.
        """
        normalized = normalize_image_ref(image.image)
        registry = normalized.split("/", 1)[0].rsplit(":", 1)[0].lower()
        if registry == "invalid" or registry.endswith(".invalid"):
            raise ImageNotFoundError(
                f'failed to pull image "{image.image}": registry "{registry}" is under the '
                "reserved .invalid domain: not found"
            )
        image_id = _image_id(normalized)
        images = self._load_images()
        if image_id not in images:
            digest = "@" in normalized
            images[image_id] = {
                "repo_tags": [] if digest else [normalized],
                "repo_digests": [normalized] if digest else [],
            }
            write_json_atomic(self._root / _IMAGES_FILE, images)
        return image_id

    async def image_status(self, image: ImageSpec) -> Image | None:
        """The image if it was pulled (looked up by reference or id), else None."""
        images = self._load_images()
        image_id = self._find_image(images, image.image)
        if image_id is None:
            return None
        img = images[image_id]
        return Image(
            id=image_id, repo_tags=tuple(img["repo_tags"]), repo_digests=tuple(img["repo_digests"])
        )

    async def list_images(self) -> list[Image]:
        """Every recorded image, by id."""
        return [
            Image(id=i, repo_tags=tuple(v["repo_tags"]), repo_digests=tuple(v["repo_digests"]))
            for i, v in sorted(self._load_images().items())
        ]

    async def remove_image(self, image: ImageSpec) -> None:
        """Forget an image (by reference or id). Idempotent."""
        images = self._load_images()
        image_id = self._find_image(images, image.image)
        if image_id is not None:
            del images[image_id]
            write_json_atomic(self._root / _IMAGES_FILE, images)

    # -------------------------------------------------------------- events

    def _try_sandbox_status(self, sandbox_id: str) -> PodSandboxStatus | None:
        try:
            return self._sandbox_status(self._load_sandbox(sandbox_id))
        except NotFoundError:
            return None

    def _emit(
        self,
        object_id: str,
        type_: ContainerEventType,
        sandbox: PodSandboxStatus | None,
        statuses: tuple[ContainerStatus, ...],
    ) -> None:
        if not self._subscribers:
            return
        event = ContainerEvent(
            container_id=object_id,
            type=type_,
            created_at=self._clock.now(),
            pod_sandbox_status=sandbox,
            containers_statuses=statuses,
        )
        for queue in self._subscribers:
            # A consumer that fell this far behind loses events, and relists.
            with contextlib.suppress(asyncio.QueueFull):
                queue.put_nowait(event)

    def _sandbox_containers(self, sandbox_id: str) -> tuple[ContainerStatus, ...]:
        statuses = []
        for rec in self._container_records():
            if rec.pod_sandbox_id == sandbox_id:
                with contextlib.suppress(NotFoundError):
                    statuses.append(self._container_status(rec.id))
        return tuple(statuses)

    def _emit_sandbox(self, sandbox_id: str, type_: ContainerEventType) -> None:
        if self._subscribers:
            self._emit(
                sandbox_id,
                type_,
                self._try_sandbox_status(sandbox_id),
                self._sandbox_containers(sandbox_id),
            )

    def _emit_container(self, container_id: str, type_: ContainerEventType) -> None:
        if not self._subscribers:
            return
        try:
            sandbox_id = self._load_container(container_id).pod_sandbox_id
        except NotFoundError:
            return
        # As containerd: the event carries the statuses of the pod's containers.
        self._emit(
            container_id,
            type_,
            self._try_sandbox_status(sandbox_id),
            self._sandbox_containers(sandbox_id),
        )

    def _report_stopped(self, container_id: str) -> None:
        """Send STOPPED once per container, whoever notices the exit first."""
        if container_id in self._stop_reported:
            return
        self._stop_reported.add(container_id)
        self._unwatch(container_id)
        self._emit_container(container_id, ContainerEventType.STOPPED)

    def _watch(self, container_id: str, *, report_exited: bool = True) -> None:
        """While someone listens, learn of the container's exit from its shim's end.

        ``report_exited=False`` (a new subscription looking at old containers)
        sends nothing for a container that had already exited.
        """
        if not self._subscribers or container_id in self._watched:
            return
        try:
            self._load_container(container_id)
        except NotFoundError:
            return
        obs = self._observe(container_id)
        if obs.state is ContainerState.EXITED:
            if report_exited:
                self._report_stopped(container_id)
            return
        if obs.state is not ContainerState.RUNNING:
            return
        try:
            pidfd = os.pidfd_open(obs.shim_pid if obs.shim_alive else obs.pid)
        except ProcessLookupError:
            # Ended between the look and the open: look again (it is EXITED now, or
            # the shim is gone and the process is watched instead).
            asyncio.get_running_loop().call_soon(self._on_watched_exit, container_id)
            return
        except OSError:
            return  # no pidfd support: exits are seen only by stop or a relist
        self._watched[container_id] = pidfd
        asyncio.get_running_loop().add_reader(pidfd, self._on_watched_exit, container_id)

    def _unwatch(self, container_id: str) -> None:
        pidfd = self._watched.pop(container_id, None)
        if pidfd is not None:
            with contextlib.suppress(RuntimeError):  # the loop may be closed already
                asyncio.get_running_loop().remove_reader(pidfd)
            os.close(pidfd)

    def _on_watched_exit(self, container_id: str) -> None:
        self._unwatch(container_id)
        self._watch(container_id)

    async def get_container_events(self) -> AsyncIterator[ContainerEvent]:
        """Stream of sandbox and container events, from the moment iteration starts.

        Events: CREATED and STARTED (a sandbox's id for its own), STOPPED when a
        container exits (by itself, by a stop, or failing to start) or a sandbox
        is stopped, DELETED on removal; each carries the sandbox's status and the
        statuses of its containers. Exits are seen through each running
        container's shim (a pidfd), without polling; other changes are reported
        when this runtime instance makes them, so a second agent's actions on the
        same root are seen only at a relist. Single consumer per call; a consumer
        more than ``event_buffer`` events behind loses the newest ones. Blocks
        until the next event; cancel or ``aclose()`` to stop.
        """
        queue: asyncio.Queue[ContainerEvent] = asyncio.Queue(maxsize=self._event_buffer)
        self._subscribers.append(queue)
        try:
            for rec in self._container_records():
                self._watch(rec.id, report_exited=False)
            while True:
                yield await queue.get()
        finally:
            self._subscribers.remove(queue)
            if not self._subscribers:
                for container_id in list(self._watched):
                    self._unwatch(container_id)
