"""FakeCgroupTree: an in-memory cgroup2 hierarchy that behaves like the kernel's.

For tests of code that drives cgroup v2 controllers a machine does not offer (cpu,
memory, pids, cpuset...). It implements :class:`kubelet_kit.cm.fs.CgroupFiles`, so
``CgroupV2Driver(files=FakeCgroupTree())`` runs unchanged on it. The kernel's rules
it keeps: interface files appear only for controllers enabled in the parent's
``cgroup.subtree_control``; only offered controllers can be enabled; a non-root
cgroup with processes cannot delegate domain controllers ("no internal
processes"); values are validated (``cpu.weight`` 1..10000, ``max``/numbers);
``rmdir`` fails with EBUSY while processes or children remain; writing a pid to
``cgroup.procs`` moves it; ``cgroup.kill`` empties the subtree; ``cgroup.freeze``
shows in ``cgroup.events``. Pids are plain numbers: no real process is touched.

Test hooks: :meth:`set_file` plants kernel-owned figures (``memory.events``,
``memory.current``...), :attr:`calls` logs every operation, :meth:`inject_error`
makes the next matching operation raise.
"""

from __future__ import annotations

import errno
import os

import attrs

__all__ = ["FakeCgroupTree"]

_DEFAULT_CONTROLLERS = ("cpuset", "cpu", "io", "memory", "hugetlb", "pids")
_CORE_FILES = (
    "cgroup.controllers",
    "cgroup.subtree_control",
    "cgroup.procs",
    "cgroup.events",
    "cgroup.freeze",
    "cgroup.kill",
    "cgroup.type",
    "cgroup.stat",
    "cgroup.max.depth",
    "cgroup.max.descendants",
    "cpu.stat",
    "cpu.pressure",
    "memory.pressure",
    "io.pressure",
)
_ROOT_ONLY_ABSENT = ("cgroup.freeze", "cgroup.kill", "cgroup.type", "cgroup.events")
_CONTROLLER_FILES: dict[str, dict[str, str]] = {
    "cpu": {"cpu.weight": "100", "cpu.weight.nice": "0", "cpu.max": "max 100000", "cpu.idle": "0"},
    "memory": {
        "memory.max": "max",
        "memory.high": "max",
        "memory.low": "0",
        "memory.min": "0",
        "memory.current": "0",
        "memory.swap.max": "max",
        "memory.events": "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\noom_group_kill 0\n",
        "memory.stat": "anon 0\nfile 0\nactive_file 0\ninactive_file 0\n",
    },
    "pids": {"pids.max": "max", "pids.current": "0", "pids.events": "max 0\n"},
    "cpuset": {
        "cpuset.cpus": "",
        "cpuset.mems": "",
        "cpuset.cpus.effective": "",
        "cpuset.mems.effective": "",
    },
    "io": {"io.max": "", "io.weight": "default 100\n", "io.stat": ""},
    "hugetlb": {"hugetlb.2MB.max": "max", "hugetlb.2MB.current": "0"},
}
_CPU_STAT = (
    "usage_usec 0\nuser_usec 0\nsystem_usec 0\nnr_periods 0\nnr_throttled 0\nthrottled_usec 0\n"
)
_PSI = (
    "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
    "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
)


@attrs.define
class _Node:
    parent: _Node | None
    children: dict[str, _Node] = attrs.field(factory=dict)
    subtree_control: set[str] = attrs.field(factory=set)
    procs: list[int] = attrs.field(factory=list)
    values: dict[str, str] = attrs.field(factory=dict)
    frozen: bool = False


def _err(code: int, where: str) -> OSError:
    return OSError(code, os.strerror(code), where)


class FakeCgroupTree:
    """An in-memory cgroup2 tree (see the module docstring).

    Args:
        controllers: Controllers the root offers (default: cpuset cpu io memory
            hugetlb pids).
        name: Shown in error messages as the tree's mount point.
    """

    def __init__(
        self, controllers: tuple[str, ...] = _DEFAULT_CONTROLLERS, *, name: str = "/fake/cgroup"
    ) -> None:
        self.root_controllers = tuple(controllers)
        self.name = name
        self.root = _Node(parent=None)
        self.calls: list[tuple[str, str, str]] = []
        self.killed: list[int] = []
        self._errors: dict[tuple[str, str], OSError] = {}

    # ------------------------------------------------------------------ test hooks

    def inject_error(self, op: str, exc: OSError, *, target: str = "") -> None:
        """Make the next ``op`` (mkdir, rmdir, read, write) on ``target`` raise ``exc``.

        ``target`` is ``cgroup`` or ``cgroup/file``; "" matches any.
        """
        self._errors[(op, target)] = exc

    def set_file(self, cgroup: str, name: str, text: str) -> None:
        """Set a file's content directly, as the kernel would (no validation)."""
        self._node(cgroup).values[name] = text

    def add_process(self, cgroup: str, pid: int) -> None:
        """Put ``pid`` into ``cgroup`` directly (a process forked there)."""
        self._detach(pid)
        self._node(cgroup).procs.append(pid)

    def paths(self) -> list[str]:
        """Every cgroup in the tree, parents first ("" is the root)."""
        out: list[str] = []

        def walk(node: _Node, here: str) -> None:
            out.append(here)
            for name, child in sorted(node.children.items()):
                walk(child, f"{here}/{name}" if here else name)

        walk(self.root, "")
        return out

    # ------------------------------------------------------------------ internals

    def _check(self, op: str, cgroup: str, name: str = "") -> None:
        self.calls.append((op, cgroup, name))
        target = f"{cgroup}/{name}" if name else cgroup
        for key in ((op, target), (op, "")):
            if key in self._errors:
                raise self._errors.pop(key)

    def _find(self, cgroup: str) -> _Node | None:
        node = self.root
        for part in [p for p in cgroup.split("/") if p]:
            child = node.children.get(part)
            if child is None:
                return None
            node = child
        return node

    def _node(self, cgroup: str) -> _Node:
        node = self._find(cgroup)
        if node is None:
            raise _err(errno.ENOENT, self.describe(cgroup))
        return node

    def _controllers(self, node: _Node) -> set[str]:
        if node.parent is None:
            return set(self.root_controllers)
        return set(node.parent.subtree_control)

    def _files(self, node: _Node) -> dict[str, str]:
        files = {n: "" for n in _CORE_FILES}
        if node.parent is None:
            for n in _ROOT_ONLY_ABSENT:
                files.pop(n)
        for ctl in self._controllers(node) if node.parent is not None else ():
            files.update(_CONTROLLER_FILES.get(ctl, {}))
        return files

    def _subtree(self, node: _Node) -> list[_Node]:
        out = [node]
        for child in node.children.values():
            out.extend(self._subtree(child))
        return out

    def _detach(self, pid: int) -> None:
        for node in self._subtree(self.root):
            if pid in node.procs:
                node.procs.remove(pid)

    # ------------------------------------------------------------------ CgroupFiles

    def describe(self, cgroup: str, name: str = "") -> str:
        """``<name>/<cgroup>/<file>``."""
        return "/".join(p for p in (self.name, cgroup, name) if p)

    def mkdir(self, cgroup: str) -> None:
        """Create a child cgroup."""
        self._check("mkdir", cgroup)
        parent_path, _, leaf = cgroup.rpartition("/")
        parent = self._find(parent_path)
        if parent is None or not leaf:
            raise _err(errno.ENOENT, self.describe(cgroup))
        if leaf in parent.children:
            raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), self.describe(cgroup))
        parent.children[leaf] = _Node(parent=parent)

    def rmdir(self, cgroup: str) -> None:
        """Remove an empty cgroup."""
        self._check("rmdir", cgroup)
        node = self._node(cgroup)
        if node.parent is None:
            raise _err(errno.EBUSY, self.describe(cgroup))
        if node.procs or node.children:
            raise _err(errno.EBUSY, self.describe(cgroup))
        leaf = cgroup.rstrip("/").rpartition("/")[2]
        del node.parent.children[leaf]

    def is_dir(self, cgroup: str) -> bool:
        """Whether the cgroup exists."""
        return self._find(cgroup) is not None

    def children(self, cgroup: str) -> list[str]:
        """Child names, sorted."""
        node = self._find(cgroup)
        return sorted(node.children) if node is not None else []

    def has_file(self, cgroup: str, name: str) -> bool:
        """Whether the interface file exists there now."""
        node = self._find(cgroup)
        return node is not None and name in self._files(node)

    def read(self, cgroup: str, name: str) -> str:
        """Read an interface file."""
        self._check("read", cgroup, name)
        node = self._node(cgroup)
        files = self._files(node)
        if name not in files:
            raise FileNotFoundError(
                errno.ENOENT, os.strerror(errno.ENOENT), self.describe(cgroup, name)
            )
        if name == "cgroup.controllers":
            return " ".join(sorted(self._controllers(node))) + "\n"
        if name == "cgroup.subtree_control":
            return " ".join(sorted(node.subtree_control)) + "\n"
        if name == "cgroup.procs":
            return "".join(f"{p}\n" for p in node.procs)
        if name == "cgroup.events":
            populated = any(n.procs for n in self._subtree(node))
            return f"populated {int(populated)}\nfrozen {int(node.frozen)}\n"
        if name == "cgroup.freeze":
            return f"{int(node.frozen)}\n"
        if name == "cgroup.kill":
            raise _err(errno.EINVAL, self.describe(cgroup, name))
        if name == "cpu.stat" and name not in node.values:
            return _CPU_STAT
        if name.endswith(".pressure") and name not in node.values:
            return _PSI
        if name == "pids.current" and name not in node.values:
            return f"{sum(len(n.procs) for n in self._subtree(node))}\n"
        value = node.values.get(name, files[name])
        return value if value.endswith("\n") or not value else value + "\n"

    def write(self, cgroup: str, name: str, value: str) -> None:
        """Write an interface file, with the kernel's checks."""
        self._check("write", cgroup, name)
        node = self._node(cgroup)
        where = self.describe(cgroup, name)
        if name not in self._files(node):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), where)
        text = value.strip()
        if name == "cgroup.subtree_control":
            self._write_subtree_control(node, text, where)
        elif name == "cgroup.procs":
            pid = self._int(text, where)
            if node.parent is not None and node.subtree_control:
                raise _err(errno.EBUSY, where)
            self.add_process(cgroup, pid)
        elif name == "cgroup.kill":
            if text != "1":
                raise _err(errno.EINVAL, where)
            for n in self._subtree(node):
                self.killed.extend(n.procs)
                n.procs.clear()
        elif name == "cgroup.freeze":
            if text not in ("0", "1"):
                raise _err(errno.EINVAL, where)
            for n in self._subtree(node):
                n.frozen = text == "1"
        elif name in (
            "cgroup.controllers",
            "cgroup.events",
            "cgroup.stat",
            "cpu.stat",
            "memory.current",
            "memory.events",
            "memory.stat",
            "pids.current",
        ):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), where)
        else:
            node.values[name] = self._validate(name, text, where)

    # ------------------------------------------------------------------ validation

    @staticmethod
    def _int(text: str, where: str) -> int:
        try:
            return int(text)
        except ValueError:
            raise _err(errno.EINVAL, where) from None

    def _validate(self, name: str, text: str, where: str) -> str:
        if name == "cpu.weight":
            weight = self._int(text, where)
            if not 1 <= weight <= 10000:
                raise _err(errno.ERANGE, where)
            return text
        if name == "cpu.max":
            parts = text.split()
            if not 1 <= len(parts) <= 2:
                raise _err(errno.EINVAL, where)
            if parts[0] != "max" and self._int(parts[0], where) < 1000:
                raise _err(errno.EINVAL, where)
            period = self._int(parts[1], where) if len(parts) == 2 else 100000
            return f"{parts[0]} {period}"
        if name in (
            "memory.max",
            "memory.high",
            "memory.low",
            "memory.min",
            "pids.max",
            "memory.swap.max",
        ) or name.startswith("hugetlb."):
            if text != "max" and self._int(text, where) < 0:
                raise _err(errno.EINVAL, where)
            return text
        return text

    def _write_subtree_control(self, node: _Node, text: str, where: str) -> None:
        offered = self._controllers(node)
        for token in text.split():
            sign, ctl = token[0], token[1:]
            if sign not in "+-" or ctl not in offered:
                raise _err(errno.ENOENT if sign in "+-" else errno.EINVAL, where)
            if sign == "+":
                if node.parent is not None and node.procs:
                    # The "no internal processes" rule for domain controllers.
                    raise _err(errno.EBUSY, where)
                node.subtree_control.add(ctl)
            else:
                if any(ctl in c.subtree_control for c in node.children.values()):
                    raise _err(errno.EBUSY, where)
                node.subtree_control.discard(ctl)
