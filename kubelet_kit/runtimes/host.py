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
    not root can only use its own ids). As root, the process gets containerd's
    capability set (all of the agent's when privileged; ``capabilities_add`` and
    ``capabilities_drop`` as containerd applies them, ``ALL`` included) as its
    bounding, effective and permitted sets, and ``readonly_rootfs`` remounts
    ``/`` read-only in a mount namespace of its own (mounts beneath it keep their
    flags); ``no_new_privs`` is set as asked. Seccomp and AppArmor profiles other
    than Unconfined, sandbox sysctls (they would change the host's), and without
    root a read-only root or added capabilities, are declined with
    UnimplementedError naming the field. Devices are recorded and reported but
    not applied.

    Cgroups and resources: when the sandbox names a ``cgroup_parent`` (the pod
    cgroup a ContainerManager made) and the runtime manages cgroups (as root, by
    default; see ``cgroup_hierarchies``), each container gets a cgroup of its
    own below it at start, in every mounted hierarchy where the pod cgroup
    exists, as containerd and runc make them: ``<cgroup_parent>/<container id>``,
    or ``kubelet-kit-host-<container id>.scope`` inside a systemd slice. Its
    resources are written there (cgroup v2: ``cpu.weight`` from the shares by
    the kubelet's linear conversion, ``cpu.max``, ``memory.max``, cpusets and
    the ``unified`` files such as ``pids.max``; cgroup v1: ``cpu.shares``, the
    CFS period and quota, ``memory.limit_in_bytes`` and cpusets), after every
    controller the pod cgroup offers is enabled for its children (on cgroup v2
    processes live only in the leaves). The container's process joins it
    before exec, and so does each command exec'd into it;
    ``update_container_resources`` writes the new limits to it; removing the
    container kills what is left in it and removes it (a failed start removes
    it at once). A container whose process dies of SIGKILL while its cgroup's
    OOM kill counter went up (``memory.events`` on v2, ``memory.oom_control``
    on v1) is reported exited with reason ``OOMKilled`` and code 137. Without
    a cgroup of its own (no ``cgroup_parent``, a runtime that manages none, or
    a cgroup v2 pod cgroup already holding processes, which cannot have children with controllers),
    the container's process joins the pod cgroup itself, where it exists, and
    its own resources are recorded and reported only. As root, the process (and
    each exec'd command) also gets the resources' ``oom_score_adj``.

    Mounts are applied when the runtime may mount (``apply_mounts``, by default
    when the agent holds CAP_SYS_ADMIN, i.e. runs as root): a container with
    mounts runs in a mount namespace of its own, where every host mount is made
    private (a slave of the host's when a mount asks for HostToContainer or
    Bidirectional propagation), and each ``host_path`` is bind-mounted onto its
    ``container_path``, read-only when asked, with the propagation asked for:
    a private copy (Private: later host mounts under it are not seen), a slave
    of the host's mount (HostToContainer: they are), or a peer of it
    (Bidirectional: mounts the container makes under it appear on the host
    too, and must be unmounted by whoever made them). As with containerd, the
    source's host mount must be shared for Bidirectional and shared or a slave
    for HostToContainer, or the start fails. The container still shares the
    host's root file system: a missing target is created on the host (a
    directory or an empty file, as runc does), and everything not shadowed by a
    mount is the host's. A source that
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
    killed by a signal (SIGKILL: 137), reasons ``Completed`` (0) and ``Error``
    (``OOMKilled`` for a kernel OOM kill, as above).
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

import os
import sys
from collections.abc import Sequence
from pathlib import Path

from kubelet_kit._version import __version__
from kubelet_kit.clock import Clock, RealClock
from kubelet_kit.container.images import normalize_image_ref
from kubelet_kit.container.interfaces import RuntimeCondition, RuntimeStatus, VersionInfo
from kubelet_kit.container.logs import DEFAULT_MAX_LINE_SIZE
from kubelet_kit.network import CNINetwork
from kubelet_kit.runtimes._cgroupfs import CgroupHierarchy, host_hierarchies
from kubelet_kit.runtimes._host_base import UNKNOWN_EXIT_CODE as UNKNOWN_EXIT_CODE
from kubelet_kit.runtimes._host_base import UNKNOWN_EXIT_REASON as UNKNOWN_EXIT_REASON
from kubelet_kit.runtimes._host_containers import DEFAULT_PATH, _HostContainers
from kubelet_kit.runtimes._host_exec import _HostExec
from kubelet_kit.runtimes._host_images import _HostImages
from kubelet_kit.runtimes._host_sandboxes import _HostSandboxes
from kubelet_kit.runtimes._host_stats import _HostStats
from kubelet_kit.runtimes._host_system import _has_cap_sys_admin
from kubelet_kit.runtimes._host_system import cgroup_procs_files as cgroup_procs_files

__all__ = [
    "DEFAULT_PATH",
    "RUNTIME_NAME",
    "CgroupHierarchy",
    "HostProcessRuntime",
    "normalize_image_ref",
]

# Re-exported: the runtime normalises references with the shared rules, and
# CgroupHierarchy names where containers get cgroups.

RUNTIME_NAME = "kubelet-kit-host"


class HostProcessRuntime(_HostSandboxes, _HostContainers, _HostExec, _HostStats, _HostImages):
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
        cgroup_hierarchies: Where containers get cgroups of their own (see the
            module doc): by default every cgroup hierarchy mounted on this
            machine when the agent runs as root, none otherwise; ``()`` turns
            per-container cgroups off.
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
        cgroup_hierarchies: Sequence[CgroupHierarchy] | None = None,
    ) -> None:
        self._root = Path(root_dir).absolute()
        self._apply_mounts = _has_cap_sys_admin() if apply_mounts is None else apply_mounts
        self._clock: Clock = clock if clock is not None else RealClock()
        self._host_ip = host_ip
        self._python = python
        self._max_line = max_log_line_size
        self._start_timeout = start_timeout
        self._kill_timeout = kill_timeout
        self._locks = {}
        self._event_buffer = event_buffer
        self._subscribers = []
        # Running containers whose end is being watched for subscribers: id -> pidfd.
        self._watched: dict[str, int] = {}
        self._stop_reported: set[str] = set()
        # Namespaces need root; without it every sandbox shares the host's network.
        self._network = network if network is not None and os.geteuid() == 0 else None
        self._networks_recovered = False
        if cgroup_hierarchies is None:
            cgroup_hierarchies = host_hierarchies() if os.geteuid() == 0 else ()
        self._cgroups = tuple(cgroup_hierarchies)
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
