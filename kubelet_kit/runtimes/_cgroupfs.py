"""Container cgroups on cgroupfs, as runc makes them, for the host runtime.

The container manager makes the pod cgroup and hands its name to the runtime as
the sandbox's ``cgroup_parent``; the runtime makes each container's cgroup below
it, limits it with the container's ``LinuxContainerResources``, puts the
container's processes in it, reads its OOM kills and removes it. This module is
that cgroupfs work, with no knowledge of the runtime's records.

Names follow containerd: ``<cgroup_parent>/<container id>`` under a cgroupfs
parent, ``<prefix>-<container id>.scope`` inside a systemd slice (the runtime's
own prefix, as containerd uses ``cri-containerd`` and CRI-O ``crio``). A
container gets its cgroup in every mounted hierarchy where the pod cgroup
exists, so it lands exactly where the manager prepared limits.

Limits, as runc writes them: on cgroup v2 ``cpu.weight`` from the shares
(``1 + (shares - 2) * 9999 / 262142``, the kubelet's and libcontainer's linear
conversion), ``cpu.max`` (``<quota> <period>``, ``max <period>`` without a
quota), ``memory.max``, ``cpuset.cpus``/``cpuset.mems``, and the ``unified``
files as given (``pids.max``, ``memory.oom.group``...), after enabling in the
pod cgroup's ``cgroup.subtree_control`` every controller it offers (a cgroup v2
rule: a cgroup holding processes cannot pass controllers down, so processes live
only in the leaves). On cgroup v1 ``cpu.shares``, ``cpu.cfs_period_us``,
``cpu.cfs_quota_us``, ``memory.limit_in_bytes`` and the cpuset files, in the
hierarchies that have them (a new cpuset cgroup first gets its parent's CPUs and
memory nodes, or no process could join it); ``unified`` is a v2 notion and does
not apply there. A value of 0 leaves its file as it is. On a hybrid machine a
cgroup2 hierarchy is not asked for the controllers bound to v1.

This is the runtime's own code, not the container manager's drivers: runtimes
never import the container manager (a runtime serves kubelets of any make), as
containerd keeps its cgroup code apart from the kubelet's.
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final, Protocol, runtime_checkable

import attrs

from kubelet_kit.container.cgroups import SLICE_SUFFIX, cgroup_parent_path
from kubelet_kit.container.interfaces import LinuxContainerResources

__all__ = [
    "CgroupError",
    "CgroupHierarchy",
    "CgroupTree",
    "ContainerCgroup",
    "HostCgroupTree",
    "InternalProcessesError",
    "container_cgroup_path",
    "create_container_cgroup",
    "host_hierarchies",
    "oom_kill_count",
    "parent_cgroup_path",
    "remove_container_cgroup",
    "resource_writes",
    "shares_to_weight",
    "update_container_cgroup",
]

#: The prefix of a container's scope inside a systemd slice.
SCOPE_PREFIX: Final = "kubelet-kit-host"
_MIN_SHARES: Final = 2
_MAX_SHARES: Final = 262144
#: The CFS period runc uses when only a quota is given.
_DEFAULT_PERIOD: Final = 100000
_KILL_POLL_SECONDS: Final = 0.01


@runtime_checkable
class CgroupTree(Protocol):
    """Synchronous access to one mounted hierarchy; ``cgroup`` is ``"/"``-separated,
    ``""`` the root. Errors are the kernel's ``OSError``s (EEXIST, ENOENT, EBUSY...).

    The same shape as the container manager's cgroup file access, so its fake tree
    serves tests of the runtime too.
    """

    def mkdir(self, cgroup: str) -> None:
        """Create a cgroup (EEXIST if present, ENOENT if the parent is missing)."""

    def rmdir(self, cgroup: str) -> None:
        """Remove an empty cgroup (EBUSY while it has processes or children)."""

    def is_dir(self, cgroup: str) -> bool:
        """Whether the cgroup exists."""

    def children(self, cgroup: str) -> list[str]:
        """Names of the child cgroups."""

    def has_file(self, cgroup: str, name: str) -> bool:
        """Whether the interface file exists in the cgroup."""

    def read(self, cgroup: str, name: str) -> str:
        """Read an interface file."""

    def write(self, cgroup: str, name: str, value: str) -> None:
        """Write an interface file (one write, as the kernel wants)."""


class HostCgroupTree:
    """:class:`CgroupTree` on a hierarchy mounted at ``mount``."""

    def __init__(self, mount: str) -> None:
        self.mount = mount

    def _path(self, cgroup: str, name: str = "") -> str:
        return os.path.join(self.mount, *(p for p in (cgroup, name) if p))

    def mkdir(self, cgroup: str) -> None:
        """``os.mkdir`` (the kernel fills in the interface files)."""
        os.mkdir(self._path(cgroup))

    def rmdir(self, cgroup: str) -> None:
        """``os.rmdir``."""
        os.rmdir(self._path(cgroup))

    def is_dir(self, cgroup: str) -> bool:
        """``os.path.isdir``."""
        return os.path.isdir(self._path(cgroup))

    def children(self, cgroup: str) -> list[str]:
        """Sub-directories, sorted."""
        try:
            with os.scandir(self._path(cgroup)) as it:
                return sorted(e.name for e in it if e.is_dir(follow_symlinks=False))
        except (FileNotFoundError, NotADirectoryError):
            return []

    def has_file(self, cgroup: str, name: str) -> bool:
        """``os.path.exists``."""
        return os.path.exists(self._path(cgroup, name))

    def read(self, cgroup: str, name: str) -> str:
        """The whole file."""
        with open(self._path(cgroup, name), encoding="ascii") as f:
            return f.read()

    def write(self, cgroup: str, name: str, value: str) -> None:
        """One write, without creating or truncating (cgroupfs files exist)."""
        fd = os.open(self._path(cgroup, name), os.O_WRONLY)
        try:
            os.write(fd, value.encode("ascii"))
        finally:
            os.close(fd)


def _host_tree(self: CgroupHierarchy) -> CgroupTree:
    return HostCgroupTree(self.mount)


@attrs.frozen
class CgroupHierarchy:
    """One mounted cgroup hierarchy where containers may get cgroups.

    Attributes:
        mount: Where it is mounted (``/sys/fs/cgroup``, ``/sys/fs/cgroup/memory``).
            A process joins a cgroup ``/a/b`` through ``<mount>/a/b/cgroup.procs``.
        version: 2 for cgroup2, 1 for a v1 hierarchy.
        tree: File access to it (default: the files under ``mount``).
    """

    mount: str
    version: int
    tree: CgroupTree = attrs.field(
        default=attrs.Factory(_host_tree, takes_self=True), eq=False, repr=False
    )


def host_hierarchies(mounts_file: str = "/proc/self/mounts") -> list[CgroupHierarchy]:
    """Every cgroup (v1) and cgroup2 hierarchy mounted on this machine, in mount order."""
    try:
        with open(mounts_file, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError:
        return []
    found: dict[str, CgroupHierarchy] = {}
    for line in lines:
        fields = line.split()
        if len(fields) >= 3 and fields[2] in ("cgroup", "cgroup2") and fields[1] not in found:
            found[fields[1]] = CgroupHierarchy(fields[1], 2 if fields[2] == "cgroup2" else 1)
    return list(found.values())


def parent_cgroup_path(cgroup_parent: str) -> str:
    """The path of a sandbox's ``cgroup_parent`` within a hierarchy.

    As :func:`~kubelet_kit.container.cgroups.cgroup_parent_path` reads it (a
    slice name expanded, a path as it is), made absolute.

    Raises:
        ValueError: A slice name that is not valid.
    """
    return "/" + cgroup_parent_path(cgroup_parent).strip("/")


def container_cgroup_path(parent: str, container_id: str) -> str:
    """The container's cgroup below the pod cgroup path ``parent``: a scope of its
    own inside a systemd slice, else a directory named by the id."""
    leaf = f"{SCOPE_PREFIX}-{container_id}.scope" if parent.endswith(SLICE_SUFFIX) else container_id
    return f"{parent.rstrip('/')}/{leaf}"


def _rel(path: str) -> str:
    return path.strip("/")


# ------------------------------------------------------------------ limits


def shares_to_weight(shares: int) -> int:
    """cgroup v2 ``cpu.weight`` for CFS shares: ``1 + (shares - 2) * 9999 / 262142``
    (integer), shares clamped to [2, 262144] first, so the result is in [1, 10000]."""
    shares = max(_MIN_SHARES, min(shares, _MAX_SHARES))
    return 1 + (shares - _MIN_SHARES) * 9999 // (_MAX_SHARES - _MIN_SHARES)


def _cpu_max(quota: int, period: int) -> str:
    """runc's ``cpu.max`` for a CFS quota and period ("" when neither is set)."""
    if quota <= 0 and period == 0:
        return ""
    period = period or _DEFAULT_PERIOD
    return f"{quota if quota > 0 else 'max'} {period}"


def resource_writes(version: int, resources: LinuxContainerResources) -> list[tuple[str, str]]:
    """The ``(file, value)`` writes that apply ``resources`` on cgroup ``version``,
    in runc's order. Fields of 0 or "" are left out (not set)."""
    r = resources
    writes: list[tuple[str, str]] = []
    if r.cpuset_cpus:
        writes.append(("cpuset.cpus", r.cpuset_cpus))
    if r.cpuset_mems:
        writes.append(("cpuset.mems", r.cpuset_mems))
    if version == 2:
        if r.cpu_shares:
            writes.append(("cpu.weight", str(shares_to_weight(r.cpu_shares))))
        cpu_max = _cpu_max(r.cpu_quota, r.cpu_period)
        if cpu_max:
            writes.append(("cpu.max", cpu_max))
        if r.memory_limit_in_bytes > 0:
            writes.append(("memory.max", str(r.memory_limit_in_bytes)))
        # As runc: the unified files come last and win over the fields above.
        writes.extend(sorted(r.unified.items()))
        return writes
    if r.cpu_shares:
        writes.append(("cpu.shares", str(r.cpu_shares)))
    if r.cpu_period:
        writes.append(("cpu.cfs_period_us", str(r.cpu_period)))
    if r.cpu_quota:
        writes.append(("cpu.cfs_quota_us", str(r.cpu_quota if r.cpu_quota > 0 else -1)))
    if r.memory_limit_in_bytes > 0:
        writes.append(("memory.limit_in_bytes", str(r.memory_limit_in_bytes)))
    return writes


# ------------------------------------------------------------------ the cgroup


@attrs.frozen
class ContainerCgroup:
    """A container's cgroup: its path and the hierarchies (by mount) it was made in.

    Attributes:
        path: The cgroup within each hierarchy (``/kubepods/pod1/<id>``).
        mounts: Mount points of the hierarchies holding it.
        oom_kills: Its OOM kill counter when it was made (the count to compare with).
    """

    path: str
    mounts: tuple[str, ...]
    oom_kills: int = 0

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready record."""
        return {"path": self.path, "mounts": list(self.mounts), "oom_kills": self.oom_kills}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ContainerCgroup:
        """The record :meth:`to_json` made."""
        return cls(str(data["path"]), tuple(data["mounts"]), int(data.get("oom_kills", 0)))

    def procs_files(self) -> list[str]:
        """The ``cgroup.procs`` files a process writes to join it."""
        return [os.path.join(m, _rel(self.path), "cgroup.procs") for m in self.mounts]


class CgroupError(Exception):
    """A container cgroup could not be made, limited or removed; the message names
    the file and the kernel's reason."""


class InternalProcessesError(CgroupError):
    """The pod cgroup on cgroup v2 holds processes, so it cannot pass controllers to
    a child cgroup (the "no internal processes" rule)."""


def _fail(what: str, where: str, exc: OSError) -> CgroupError:
    return CgroupError(f"{where}: cannot {what}: {os.strerror(exc.errno or 0)}")


def _where(h: CgroupHierarchy, cgroup: str, name: str = "") -> str:
    return os.path.join(h.mount, *(p for p in (cgroup, name) if p))


def _delegate(h: CgroupHierarchy, parent: str) -> None:
    """Enable in ``parent``'s ``cgroup.subtree_control`` every controller it offers."""
    offered = set(h.tree.read(parent, "cgroup.controllers").split())
    enabled = set(h.tree.read(parent, "cgroup.subtree_control").split())
    missing = sorted(offered - enabled)
    if not missing:
        return
    try:
        h.tree.write(parent, "cgroup.subtree_control", " ".join("+" + c for c in missing))
    except OSError as exc:
        if exc.errno == errno.EBUSY:
            raise InternalProcessesError(
                f"{_where(h, parent)} holds processes, so it cannot pass the controllers "
                f"{', '.join(missing)} to a container cgroup"
            ) from None
        where = _where(h, parent, "cgroup.subtree_control")
        raise _fail(f"enable {', '.join(missing)}", where, exc) from None


def _inherit_cpuset(h: CgroupHierarchy, parent: str, rel: str) -> None:
    """A new v1 cpuset cgroup is empty: give it the parent's CPUs and memory nodes."""
    if not h.tree.has_file(rel, "cpuset.cpus"):
        return
    for name in ("cpuset.cpus", "cpuset.mems"):
        if not h.tree.read(rel, name).strip():
            h.tree.write(rel, name, h.tree.read(parent, name).strip())


def _bound_elsewhere(h: CgroupHierarchy, controller: str) -> bool:
    """Whether ``controller`` is not this hierarchy's at all: a v1 hierarchy holds
    its own controllers only, and on a hybrid machine a cgroup2 hierarchy lacks
    those bound to v1."""
    if h.version == 1:
        return True
    try:
        return controller not in h.tree.read("", "cgroup.controllers").split()
    except OSError:
        return False


def _apply(h: CgroupHierarchy, rel: str, resources: LinuxContainerResources) -> None:
    for name, value in resource_writes(h.version, resources):
        if not h.tree.has_file(rel, name):
            if _bound_elsewhere(h, name.split(".")[0]):
                continue  # another hierarchy's file (or no hierarchy's)
            raise CgroupError(
                f"{_where(h, rel, name)}: the {name.split('.')[0]} controller is not "
                "available in this cgroup"
            )
        try:
            h.tree.write(rel, name, value)
        except OSError as exc:
            raise _fail(f"write {value!r}", _where(h, rel, name), exc) from None


def _oom_kills(h: CgroupHierarchy, rel: str) -> int | None:
    name = "memory.events" if h.version == 2 else "memory.oom_control"
    try:
        if not h.tree.has_file(rel, name):
            return None
        text = h.tree.read(rel, name)
    except OSError:
        return None
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if key == "oom_kill" and value.strip().isdigit():
            return int(value)
    return None


def oom_kill_count(hierarchies: Sequence[CgroupHierarchy], cgroup: ContainerCgroup) -> int | None:
    """The cgroup's OOM kill counter (v2 ``memory.events``, v1 ``memory.oom_control``
    ``oom_kill``), or None when no hierarchy holding it reports one (or it is gone)."""
    rel = _rel(cgroup.path)
    for h in _holding(hierarchies, cgroup):
        count = _oom_kills(h, rel)
        if count is not None:
            return count
    return None


def _holding(
    hierarchies: Iterable[CgroupHierarchy], cgroup: ContainerCgroup
) -> list[CgroupHierarchy]:
    # cgroup v2 first: on a hybrid machine its figures are the ones to read.
    held = [h for h in hierarchies if h.mount in cgroup.mounts]
    return sorted(held, key=lambda h: -h.version)


def create_container_cgroup(
    hierarchies: Sequence[CgroupHierarchy],
    parent: str,
    container_id: str,
    resources: LinuxContainerResources,
) -> ContainerCgroup | None:
    """Make the container's cgroup below the pod cgroup ``parent`` in every
    hierarchy holding that, limited by ``resources``.

    Returns:
        The cgroup, or None when no hierarchy holds the pod cgroup.

    Raises:
        InternalProcessesError: The pod cgroup on cgroup v2 holds processes (nothing
            is left made).
        CgroupError: A cgroup could not be made or limited (nothing is left made).
    """
    parent_rel = _rel(parent)
    path = container_cgroup_path(parent, container_id)
    rel = _rel(path)
    # cgroup v2 first: the hierarchy that may refuse (internal processes).
    targets = sorted(
        (h for h in hierarchies if parent_rel and h.tree.is_dir(parent_rel)),
        key=lambda h: -h.version,
    )
    if not targets:
        return None
    made: list[str] = []
    cgroup = ContainerCgroup(path, tuple(h.mount for h in targets))
    try:
        for h in targets:
            if h.version == 2:
                _delegate(h, parent_rel)
            try:
                h.tree.mkdir(rel)
            except FileExistsError:
                pass
            except OSError as exc:
                raise _fail("create cgroup", _where(h, rel), exc) from None
            made.append(h.mount)
            if h.version == 1:
                try:
                    _inherit_cpuset(h, parent_rel, rel)
                except OSError as exc:
                    raise _fail("initialise cpuset", _where(h, rel), exc) from None
            _apply(h, rel, resources)
    except (CgroupError, OSError):
        with contextlib.suppress(CgroupError, OSError):
            remove_container_cgroup(
                hierarchies, ContainerCgroup(path, tuple(made)), kill_timeout=1.0
            )
        raise
    return attrs.evolve(cgroup, oom_kills=oom_kill_count(hierarchies, cgroup) or 0)


def update_container_cgroup(
    hierarchies: Sequence[CgroupHierarchy],
    cgroup: ContainerCgroup,
    resources: LinuxContainerResources,
) -> None:
    """Apply ``resources`` to the container's live cgroup (fields of 0 untouched).

    Raises:
        CgroupError: A file could not be written (naming it).
    """
    rel = _rel(cgroup.path)
    for h in _holding(hierarchies, cgroup):
        if h.tree.is_dir(rel):
            _apply(h, rel, resources)


def _pids(h: CgroupHierarchy, rel: str) -> list[int]:
    pids: list[int] = []
    with contextlib.suppress(OSError):
        pids = [int(p) for p in h.tree.read(rel, "cgroup.procs").split()]
    for child in h.tree.children(rel):
        pids.extend(_pids(h, f"{rel}/{child}"))
    return pids


def _kill(h: CgroupHierarchy, rel: str) -> None:
    if h.version == 2 and h.tree.has_file(rel, "cgroup.kill"):
        h.tree.write(rel, "cgroup.kill", "1")
        return
    for pid in _pids(h, rel):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _rmdir_tree(h: CgroupHierarchy, rel: str) -> None:
    for child in h.tree.children(rel):
        _rmdir_tree(h, f"{rel}/{child}")
    try:
        h.tree.rmdir(rel)
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise _fail("remove cgroup", _where(h, rel), exc) from None


def remove_container_cgroup(
    hierarchies: Sequence[CgroupHierarchy], cgroup: ContainerCgroup, *, kill_timeout: float
) -> None:
    """Kill what still runs in the container's cgroup (an exec'd command, a process
    that left the container's process group), wait up to ``kill_timeout`` seconds
    for it to go, and remove the cgroup everywhere. Blocks (run it in a thread).
    Idempotent: a cgroup already gone is fine.

    Raises:
        CgroupError: It could not be removed (processes would not die, naming it).
    """
    rel = _rel(cgroup.path)
    for h in _holding(hierarchies, cgroup):
        if not h.tree.is_dir(rel):
            continue
        deadline = time.monotonic() + kill_timeout
        while _pids(h, rel):
            try:
                _kill(h, rel)
            except OSError as exc:
                raise _fail("kill", _where(h, rel, "cgroup.kill"), exc) from None
            if time.monotonic() > deadline:
                break  # rmdir says EBUSY, naming the cgroup
            time.sleep(_KILL_POLL_SECONDS)
        _rmdir_tree(h, rel)
