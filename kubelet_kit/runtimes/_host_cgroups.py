"""The per-container cgroups of :class:`~kubelet_kit.runtimes.host.HostProcessRuntime`.

When a sandbox names a ``cgroup_parent`` (the pod cgroup a container manager
made) and the runtime manages cgroups (as root, by default), each container
gets a cgroup of its own below it at start, limited by its resources (the
cgroupfs work is in :mod:`kubelet_kit.runtimes._cgroupfs`); the shim puts the
container's process in it before exec, and exec'd commands join it too. Its
record, ``cgroup.json`` in the container's state directory, keeps its path, the
hierarchies holding it and its OOM kill counter at creation; a container whose
process died of SIGKILL while that counter went up exited ``OOMKilled``. The
cgroup is removed with the container (and at once when the start fails).
"""

from __future__ import annotations

import asyncio
import contextlib

from kubelet_kit.container.interfaces import LinuxContainerResources
from kubelet_kit.errors import ContainerRuntimeError, ContainerStartError
from kubelet_kit.runtimes._cgroupfs import (
    CgroupError,
    ContainerCgroup,
    InternalProcessesError,
    create_container_cgroup,
    parent_cgroup_path,
    remove_container_cgroup,
    update_container_cgroup,
)
from kubelet_kit.runtimes._host_base import _HostRuntimeBase
from kubelet_kit.runtimes._host_records import _CGROUP_FILE, _ContainerRecord, _read_json
from kubelet_kit.runtimes._shim import SPEC_FILE, write_json_atomic


class _HostCgroups(_HostRuntimeBase):
    """Making, limiting and removing containers' own cgroups."""

    def _load_cgroup(self, container_id: str) -> ContainerCgroup | None:
        data = _read_json(self._container_dir(container_id) / _CGROUP_FILE)
        return ContainerCgroup.from_json(data) if data is not None else None

    async def _make_cgroup(
        self, rec: _ContainerRecord, cgroup_parent: str
    ) -> ContainerCgroup | None:
        """Make the container's cgroup below ``cgroup_parent`` and point its spec
        (hence its shim and exec helper) at it; None when the runtime makes none
        (no parent, no hierarchy holding it, or a v2 pod cgroup holding processes,
        which the container then joins as before).

        Raises:
            ContainerStartError: The cgroup could not be made or limited.
        """
        if not self._cgroups or not cgroup_parent:
            return None
        name = rec.config.metadata.name
        try:
            parent = parent_cgroup_path(cgroup_parent)
        except ValueError as exc:
            raise ContainerStartError(f'container "{name}": cgroup_parent: {exc}') from None
        try:
            cgroup = await asyncio.to_thread(
                create_container_cgroup,
                self._cgroups,
                parent,
                rec.id,
                rec.config.resources or LinuxContainerResources(),
            )
        except InternalProcessesError:
            return None
        except CgroupError as exc:
            raise ContainerStartError(
                f'failed to create the cgroup of container "{name}" ({rec.id}): {exc}'
            ) from None
        if cgroup is None:
            return None
        cdir = self._container_dir(rec.id)
        write_json_atomic(cdir / _CGROUP_FILE, cgroup.to_json())
        spec = _read_json(cdir / SPEC_FILE) or {}
        spec["cgroup_procs"] = cgroup.procs_files()
        write_json_atomic(cdir / SPEC_FILE, spec)
        return cgroup

    async def _remove_cgroup(self, container_id: str) -> None:
        """Kill what is left in the container's cgroup and remove it. Idempotent.

        Raises:
            ContainerRuntimeError: It could not be removed (its record is kept, so
                a later removal tries again).
        """
        cgroup = self._load_cgroup(container_id)
        if cgroup is None:
            return
        try:
            await asyncio.to_thread(
                remove_container_cgroup, self._cgroups, cgroup, kill_timeout=self._kill_timeout
            )
        except CgroupError as exc:
            raise ContainerRuntimeError(
                f'failed to remove the cgroup of container "{container_id}": {exc}'
            ) from None
        with contextlib.suppress(FileNotFoundError):
            (self._container_dir(container_id) / _CGROUP_FILE).unlink()

    async def _update_cgroup(self, container_id: str, resources: LinuxContainerResources) -> None:
        """Apply ``resources`` to the container's live cgroup, if it has one.

        Raises:
            ContainerRuntimeError: A limit could not be written (naming the file).
        """
        cgroup = self._load_cgroup(container_id)
        if cgroup is None:
            return
        try:
            await asyncio.to_thread(update_container_cgroup, self._cgroups, cgroup, resources)
        except CgroupError as exc:
            raise ContainerRuntimeError(
                f'failed to update the resources of container "{container_id}": {exc}'
            ) from None
