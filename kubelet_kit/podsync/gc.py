"""Container garbage collection: the dead containers and sandboxes a pod leaves.

Every restart of a container leaves the exited one behind, and every new sandbox
the old one; without collection a crash-looping pod fills the runtime (and the log
directory) without end. The kubelet's container GC (``kuberuntime_gc.go``, every
minute, policy ``MinAge 0, MaxPerPodContainer 1, MaxContainers -1``) keeps, per
pod and container name, the newest exited container (whose exit code and log
``kubectl logs --previous`` shows, and whose attempt the restart count continues
from) and removes the older ones with their log files; and per pod, the newest
sandbox, removing older sandboxes that are not ready and hold no container.

Pods no source wants any more are not this module's business: the composer stops
them and removes all they left (``RuntimePodSyncer.sync_terminated_pod``).
"""

from __future__ import annotations

import contextlib
import glob
import logging
import os
from collections import defaultdict

import attrs

from kubelet_kit.container import labels as kl
from kubelet_kit.container.interfaces import (
    ContainerInfo,
    ContainerState,
    PodSandbox,
    PodSandboxState,
    Runtime,
)
from kubelet_kit.errors import ContainerRuntimeError, NotFoundError

__all__ = ["CONTAINER_GC_PERIOD", "GCResult", "collect_dead_containers"]

log = logging.getLogger(__name__)

#: Seconds between collections (the kubelet's ContainerGCPeriod).
CONTAINER_GC_PERIOD = 60.0


@attrs.frozen
class GCResult:
    """What one collection removed (ids)."""

    containers: tuple[str, ...] = ()
    sandboxes: tuple[str, ...] = ()


async def collect_dead_containers(runtime: Runtime, *, max_per_pod_container: int = 1) -> GCResult:
    """Remove the dead containers and sandboxes beyond what the kubelet keeps.

    Only objects with the kubelet's pod uid label are touched. A container or
    sandbox that is gone by the time it is removed counts as removed; other
    runtime errors are logged and the rest is still collected.

    Args:
        runtime: The runtime to collect in.
        max_per_pod_container: Exited containers kept per pod and container name.
    """
    units: dict[tuple[str, str], list[ContainerInfo]] = defaultdict(list)
    holding: set[str] = set()
    for container in await runtime.list_containers():
        uid = container.labels.get(kl.POD_UID)
        if not uid:
            continue
        if container.state is ContainerState.RUNNING:
            holding.add(container.pod_sandbox_id)
            continue
        name = container.labels.get(kl.CONTAINER_NAME) or container.metadata.name
        units[(uid, name)].append(container)

    removed: list[str] = []
    for dead in units.values():
        dead.sort(key=lambda c: c.created_at, reverse=True)
        for container in dead[:max_per_pod_container]:
            holding.add(container.pod_sandbox_id)
        for container in dead[max_per_pod_container:]:
            if await _remove_container(runtime, container.id):
                removed.append(container.id)

    by_pod: dict[str, list[PodSandbox]] = defaultdict(list)
    for sandbox in await runtime.list_pod_sandboxes():
        uid = sandbox.labels.get(kl.POD_UID)
        if uid:
            by_pod[uid].append(sandbox)
    removed_sandboxes: list[str] = []
    for sandboxes in by_pod.values():
        sandboxes.sort(key=lambda s: s.created_at, reverse=True)
        for sandbox in sandboxes[1:]:  # the newest stays, whatever its state
            if sandbox.state is PodSandboxState.READY or sandbox.id in holding:
                continue
            try:
                await runtime.remove_pod_sandbox(sandbox.id)
            except NotFoundError:
                pass
            except ContainerRuntimeError as exc:
                log.warning("container GC: removing sandbox %s failed: %s", sandbox.id, exc)
                continue
            removed_sandboxes.append(sandbox.id)
    return GCResult(tuple(removed), tuple(removed_sandboxes))


async def _remove_container(runtime: Runtime, container_id: str) -> bool:
    """Remove the container and its log files, rotated ones included (as the
    kubelet's removeContainer)."""
    try:
        status = await runtime.container_status(container_id)
        if status.log_path:
            for path in (status.log_path, *glob.glob(glob.escape(status.log_path) + ".*")):
                with contextlib.suppress(FileNotFoundError):
                    os.remove(path)
        await runtime.remove_container(container_id)
    except NotFoundError:
        return True
    except (ContainerRuntimeError, OSError) as exc:
        log.warning("container GC: removing container %s failed: %s", container_id, exc)
        return False
    return True
