"""The CRI's ``cgroup_parent`` as a path: systemd slice names expanded.

A runtime places a sandbox under the ``cgroup_parent`` the kubelet hands it,
either a cgroupfs path (``/kubepods/burstable/pod<uid>``) or, with the systemd
cgroup driver, a slice name (``kubepods-burstable-pod<uid>.slice``) that systemd
nests by its dashes. Both the container manager, which names the cgroups, and the
runtimes, which put processes in them, read the name the same way here.
"""

from __future__ import annotations

from typing import Final

__all__ = ["SLICE_SUFFIX", "cgroup_parent_path", "expand_slice"]

#: The suffix of a systemd slice unit.
SLICE_SUFFIX: Final = ".slice"


def expand_slice(slice_name: str) -> str:
    """Expand a systemd slice name to its path: ``a-b.slice`` -> ``/a.slice/a-b.slice``.

    Raises:
        ValueError: Not a valid slice name (no ``.slice`` suffix, a ``/``, or an
            empty ``-``-separated component).
    """
    if not slice_name.endswith(SLICE_SUFFIX) or "/" in slice_name:
        raise ValueError(f"invalid slice name: {slice_name}")
    stem = slice_name[: -len(SLICE_SUFFIX)]
    if stem == "-":
        return "/"
    path, prefix = "", ""
    for component in stem.split("-"):
        if not component:
            raise ValueError(f"invalid slice name: {slice_name}")
        path += f"/{prefix}{component}{SLICE_SUFFIX}"
        prefix += component + "-"
    return path


def cgroup_parent_path(cgroup_parent: str) -> str:
    """The path under a hierarchy's root of a ``cgroup_parent``: a slice name
    expanded, a path as it is.

    With the systemd driver the kubelet hands runtimes the slice's expanded path
    (``/kubepods.slice/kubepods-burstable.slice/...pod<uid>.slice``), of which
    containerd keeps the base name; a bare slice name is expanded here.

    Raises:
        ValueError: A slice name that is not valid.
    """
    if cgroup_parent.endswith(SLICE_SUFFIX):
        if "/" in cgroup_parent:
            expand_slice(cgroup_parent.rsplit("/", 1)[1])  # its base must be a slice
            return cgroup_parent
        return expand_slice(cgroup_parent)
    return cgroup_parent
