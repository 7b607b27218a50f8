"""Cgroup names, and the two ways the kubelet spells them (``cgroupDriver``).

A cgroup name is a tuple of parts, driver-neutral: ``("kubepods", "burstable",
"pod1234-abcd")``. The cgroupfs driver joins them as a path
(``/kubepods/burstable/pod1234-abcd``); the systemd driver turns ``-`` into ``_`` in
each part, joins the parts with ``-`` into one slice name and expands it to the slice
path systemd would use (``/kubepods.slice/kubepods-burstable.slice/
kubepods-burstable-pod1234_abcd.slice``). Upstream: ``cgroup_manager_linux.go``.
"""

from __future__ import annotations

from typing import Final, Literal

from kubelet_kit.api import Pod, qos_class
from kubelet_kit.container.cgroups import SLICE_SUFFIX, expand_slice

__all__ = [
    "KUBEPODS",
    "CgroupDriverName",
    "CgroupName",
    "cgroup_name_to_path",
    "expand_slice",
    "new_cgroup_name",
    "parse_cgroupfs",
    "parse_systemd",
    "pod_cgroup_name",
    "qos_cgroup_name",
    "root_cgroup_name",
    "to_cgroupfs",
    "to_systemd",
]

CgroupName = tuple[str, ...]
CgroupDriverName = Literal["cgroupfs", "systemd"]

KUBEPODS: Final = "kubepods"
_SLICE: Final = SLICE_SUFFIX


def new_cgroup_name(base: CgroupName, *parts: str) -> CgroupName:
    """``base`` with ``parts`` appended (upstream ``NewCgroupName``).

    Raises:
        ValueError: A part holds ``/`` or ``_`` (``_`` is kept free so the systemd
            spelling can be turned back into parts).
    """
    for part in parts:
        if "/" in part or "_" in part:
            raise ValueError(f"invalid character in component {part!r} of cgroup name")
    return (*base, *parts)


def to_systemd(name: CgroupName) -> str:
    """The expanded systemd slice path of ``name``; ``/`` for the root.

    Empty parts are skipped, as upstream does.
    """
    parts = [p.replace("-", "_") for p in name if p]
    if not parts:
        return "/"
    return expand_slice("-".join(parts) + _SLICE)


def to_cgroupfs(name: CgroupName) -> str:
    """The cgroupfs path of ``name``: ``"/" + "/".join(parts)`` (``/`` for the root)."""
    joined = "/".join(p for p in name if p)
    return "/" + joined


def parse_cgroupfs(path: str) -> CgroupName:
    """Parts of a cgroupfs path (upstream ``ParseCgroupfsToCgroupName``).

    ``"/a/"`` gives ``("a", "")`` as upstream does; ``"/"`` gives the root ``()``.
    """
    stripped = path[1:] if path.startswith("/") else path
    if stripped == "":
        return ()
    return tuple(stripped.split("/"))


def parse_systemd(path: str) -> CgroupName:
    """Parts of a systemd slice path: only its last element counts, ``_`` -> ``-``."""
    base = path.rstrip("/").rsplit("/", 1)[-1]
    if base.endswith(_SLICE):
        base = base[: -len(_SLICE)]
    return tuple(p.replace("_", "-") for p in base.split("-"))


def cgroup_name_to_path(name: CgroupName, driver: CgroupDriverName) -> str:
    """``name`` spelt for ``driver`` (``"cgroupfs"`` or ``"systemd"``)."""
    if driver == "systemd":
        return to_systemd(name)
    if driver == "cgroupfs":
        return to_cgroupfs(name)
    raise ValueError(f'cgroupDriver: Unsupported value: "{driver}"')


def root_cgroup_name(cgroup_root: str, driver: CgroupDriverName) -> CgroupName:
    """The name of the kubelet's ``cgroupRoot`` ("" or "/" is the root)."""
    if cgroup_root in ("", "/"):
        return ()
    if driver == "systemd":
        return parse_systemd(cgroup_root)
    return tuple(p for p in parse_cgroupfs(cgroup_root) if p)


def qos_cgroup_name(root: CgroupName, qos: str) -> CgroupName:
    """The cgroup of a QoS tier: ``kubepods`` for Guaranteed, else ``kubepods/<qos>``."""
    kubepods = (*root, KUBEPODS)
    if qos == "Guaranteed":
        return kubepods
    return (*kubepods, qos.lower())


def pod_cgroup_name(pod: Pod, root: CgroupName = ()) -> CgroupName:
    """The pod's cgroup: its QoS tier's cgroup plus ``pod<uid>``."""
    return (*qos_cgroup_name(root, qos_class(pod)), "pod" + pod.uid)
