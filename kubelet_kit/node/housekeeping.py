"""Housekeeping: the agent's periodic clean-up (the kubelet's ``HandlePodCleanups``
every two seconds, and the garbage collectors it starts beside it).

Each round stops runtime pods that no source wants and that still run (once
every source has spoken), forgets finished workers and the statuses of pods that
are gone, removes orphaned pod cgroups, and runs what is due on its own period: container GC (a
minute; it also removes what pods no source wants left behind), log rotation
(10 s) and image GC (five minutes). The policies themselves live in
:mod:`kubelet_kit.podsync` (``gc``, ``logrotate``, ``imagegc``); this module only
decides when.

A pod that has ended keeps its final phase: its worker is forgotten once its
source drops it, and what it left in the runtime (exited containers, a stopped
sandbox) is removed by the container GC, never stopped again as an orphan, which
would give the pod a new status (as the kubelet, which kills only the orphaned
runtime pods that still run: ``HandlePodCleanups`` over ``GetPods(false)``, and
leaves the dead containers of deleted pods to its container GC).
"""

from __future__ import annotations

import contextlib
import glob
import logging
import os
from collections.abc import Mapping
from typing import Any

from kubelet_kit.api import ObjectMeta, Pod, PodSpec
from kubelet_kit.clock import Clock
from kubelet_kit.cm import ContainerManager
from kubelet_kit.config import PodConfig
from kubelet_kit.container import PodSandboxState, Runtime, labels
from kubelet_kit.container.pods import RuntimePod, get_pods
from kubelet_kit.errors import ContainerRuntimeError, NotFoundError
from kubelet_kit.node.podworkers import PodWorkers, UpdateType
from kubelet_kit.node.transitions import pod_name
from kubelet_kit.podsync.gc import CONTAINER_GC_PERIOD, collect_dead_containers
from kubelet_kit.podsync.imagegc import IMAGE_GC_PERIOD, ImageGCError, ImageGCManager
from kubelet_kit.podsync.logrotate import LOG_MONITOR_PERIOD, ContainerLogManager
from kubelet_kit.podsync.syncer import RuntimePodSyncer
from kubelet_kit.status import StatusManager

__all__ = ["HOUSEKEEPING_PERIOD", "Housekeeping", "is_running", "orphan_pod", "remove_dead_pod"]

log = logging.getLogger("kubelet_kit")

#: The kubelet's housekeeping period.
HOUSEKEEPING_PERIOD = 2.0


def orphan_pod(runtime_pod: Any) -> Pod:
    """A minimal Pod for a runtime pod no source knows, enough to stop it (with the
    grace period its containers were started with, default 30 s)."""
    grace = 30
    for container in runtime_pod.containers:
        value = container.annotations.get(labels.POD_TERMINATION_GRACE_PERIOD)
        if value and value.isdigit():
            grace = int(value)
            break
    meta = ObjectMeta(name=runtime_pod.name, namespace=runtime_pod.namespace, uid=runtime_pod.uid)
    return Pod(metadata=meta, spec=PodSpec(termination_grace_period_seconds=grace))


def is_running(runtime_pod: RuntimePod) -> bool:
    """Whether a runtime pod still runs: a running container or a ready sandbox
    (what the kubelet's ``GetPods(false)`` lists)."""
    return bool(runtime_pod.running_containers()) or any(
        s.state is PodSandboxState.READY for s in runtime_pod.sandboxes
    )


async def remove_dead_pod(runtime: Runtime, runtime_pod: RuntimePod) -> None:
    """Remove the exited containers (with their log files) and stopped sandboxes of a
    pod that no source wants (the kubelet's container GC of deleted pods). Its
    status is left alone. Errors are logged; the next collection tries again."""
    log.info(
        "pod %s/%s: removing what it left in the runtime", runtime_pod.namespace, runtime_pod.name
    )
    try:
        for container in runtime_pod.containers:
            with contextlib.suppress(NotFoundError):
                log_path = (await runtime.container_status(container.id)).log_path
                # The log file and its rotated ones go with the container.
                logs = (log_path, *glob.glob(glob.escape(log_path) + ".*")) if log_path else ()
                for path in logs:
                    with contextlib.suppress(FileNotFoundError):
                        os.remove(path)
                await runtime.remove_container(container.id)
        for sandbox in runtime_pod.sandboxes:
            with contextlib.suppress(NotFoundError):
                await runtime.remove_pod_sandbox(sandbox.id)
    except (ContainerRuntimeError, OSError) as exc:
        log.warning(
            "pod %s/%s: removing its containers failed: %s",
            runtime_pod.namespace,
            runtime_pod.name,
            exc,
        )


class Housekeeping:
    """One agent's housekeeping rounds.

    Args:
        runtime: The container runtime.
        clock: When each periodic task last ran, and is due again.
        pod_config: The merged pod sources (whether every source has spoken).
        status_manager: Statuses of pods that are gone are forgotten.
        container_manager: Orphaned pod cgroups are removed.
        container_gc_period: Seconds between container collections.
        image_gc: Removes unused images (None: never).
        image_gc_period: Seconds between image collections.
        container_log_manager: Rotates container logs (None: never).
    """

    def __init__(
        self,
        *,
        runtime: Runtime,
        clock: Clock,
        pod_config: PodConfig,
        status_manager: StatusManager,
        container_manager: ContainerManager,
        container_gc_period: float = CONTAINER_GC_PERIOD,
        image_gc: ImageGCManager | None = None,
        image_gc_period: float = IMAGE_GC_PERIOD,
        container_log_manager: ContainerLogManager | None = None,
    ) -> None:
        self.runtime = runtime
        self.clock = clock
        self.pod_config = pod_config
        self.status_manager = status_manager
        self.container_manager = container_manager
        self.container_gc_period = container_gc_period
        self.image_gc = image_gc
        self.image_gc_period = image_gc_period
        self.container_log_manager = container_log_manager
        # When each periodic task last ran, by name.
        self._last_run: dict[str, float] = {}

    async def run_once(
        self,
        pods: Mapping[str, Pod],
        workers: PodWorkers,
        syncer: RuntimePodSyncer | None = None,
    ) -> None:
        """One round over the pods the sources want (``pods``, by uid)."""
        dead: list[RuntimePod] = []  # left by pods no source wants, nothing running
        if self.pod_config.sources_ready():
            for runtime_pod in await get_pods(self.runtime):
                uid = runtime_pod.uid
                if uid in pods or workers.phase(uid) is not None:
                    continue
                if not is_running(runtime_pod):
                    dead.append(runtime_pod)
                    continue
                orphan = orphan_pod(runtime_pod)
                log.info(
                    "pod %s: found in the runtime but wanted by no source, stopping",
                    pod_name(orphan),
                )
                workers.update_pod(orphan, UpdateType.KILL)
        workers.sync_known_pods(pods)
        known = set(pods) | set(workers.known_pods())
        # The kubelet's RemoveOrphanedStatuses: a pod gone from its source and from
        # the workers (a pod rejected at admission never had one) keeps no status.
        for uid in [u for u in self.status_manager.all_statuses() if u not in known]:
            self.status_manager.remove(uid)
        if self.pod_config.sources_ready():
            await self.container_manager.remove_orphaned_pod_cgroups(known)
        if syncer is not None:
            syncer.gc()
        if self._due("container_gc", self.container_gc_period):
            await collect_dead_containers(self.runtime)
            for runtime_pod in dead:
                await remove_dead_pod(self.runtime, runtime_pod)
                if syncer is not None:
                    # The pod's directory goes with it (the kubelet's
                    # cleanupOrphanedPodDirs): its hosts and termination files.
                    syncer.remove_pod_files(runtime_pod.uid)
        if self.container_log_manager is not None and self._due("log_rotation", LOG_MONITOR_PERIOD):
            await self.container_log_manager.rotate_logs()
        if self.image_gc is not None:
            first = "image_gc" not in self._last_run
            if self._due("image_gc", self.image_gc_period):
                if first:
                    await self.image_gc.detect_images()  # first-seen times start now
                else:
                    try:
                        await self.image_gc.garbage_collect()
                    except ImageGCError as exc:
                        log.warning("image garbage collection failed: %s", exc)

    def _due(self, task: str, period: float) -> bool:
        """Whether ``task`` is due (never run, or ``period`` seconds since); if so,
        it counts as run now."""
        now = self.clock.monotonic()
        last = self._last_run.get(task)
        if last is not None and now - last < period:
            return False
        self._last_run[task] = now
        return True
