"""Node-level reclaim through the Runtime: dead containers, then unused images.

Before evicting a pod for disk pressure the kubelet frees what no running pod
needs. Which signal may reclaim what (upstream ``buildSignalToNodeReclaimFuncs``):

* one filesystem for everything: every nodefs and imagefs signal deletes dead
  containers, then unused images;
* a dedicated imagefs: imagefs signals do both; nodefs signals reclaim nothing
  at node level (the kubelet would delete logs; kubelet-kit leaves them).

Memory and pid signals reclaim nothing. Only containers that carry the
kubelet's ``io.kubernetes.pod.uid`` label are touched: a runtime shared with
other users keeps their containers.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence

from kubelet_kit.container import labels
from kubelet_kit.container.interfaces import ContainerFilter, ContainerState, ImageSpec, Runtime
from kubelet_kit.container.optional import IMAGES, not_offered, runtime_capabilities
from kubelet_kit.errors import ContainerRuntimeError
from kubelet_kit.eviction.thresholds import (
    IMAGEFS_AVAILABLE,
    IMAGEFS_INODES_FREE,
    NODEFS_AVAILABLE,
    NODEFS_INODES_FREE,
)

__all__ = ["ReclaimFunc", "delete_dead_containers", "delete_unused_images", "reclaim_funcs"]

_log = logging.getLogger(__name__)

#: ``reclaim(runtime) -> number of objects removed``.
ReclaimFunc = Callable[[Runtime], Awaitable[int]]


async def delete_dead_containers(runtime: Runtime) -> int:
    """Remove every exited container that belongs to a pod; returns how many.

    A container that cannot be removed is logged and skipped.
    """
    removed = 0
    for c in await runtime.list_containers(ContainerFilter(state=ContainerState.EXITED)):
        if not labels.pod_uid_of(c.labels):
            continue
        try:
            await runtime.remove_container(c.id)
            removed += 1
        except ContainerRuntimeError as exc:
            _log.warning("eviction: cannot remove dead container %s: %s", c.id, exc)
    return removed


async def delete_unused_images(runtime: Runtime) -> int:
    """Remove every unpinned image no container (in any state) uses; returns how many
    (none, with a line in the log, on a runtime that does not offer ``images``)."""
    if IMAGES not in runtime_capabilities(runtime):
        _log.info("eviction: no images to delete: %s", not_offered(runtime, IMAGES))
        return 0
    used: set[str] = set()
    for c in await runtime.list_containers():
        used.update(x for x in (c.image, c.image_ref) if x)
    removed = 0
    for image in await runtime.list_images():
        if image.pinned:
            continue
        if image.id in used or used.intersection(image.repo_tags, image.repo_digests):
            continue
        try:
            await runtime.remove_image(ImageSpec(image.id))
            removed += 1
        except ContainerRuntimeError as exc:
            _log.warning("eviction: cannot remove unused image %s: %s", image.id, exc)
    return removed


def reclaim_funcs(signal: str, dedicated_image_fs: bool) -> Sequence[ReclaimFunc]:
    """The node-level reclaim steps for ``signal``, in order (may be empty)."""
    both = (delete_dead_containers, delete_unused_images)
    if signal in (IMAGEFS_AVAILABLE, IMAGEFS_INODES_FREE):
        return both
    if signal in (NODEFS_AVAILABLE, NODEFS_INODES_FREE):
        return () if dedicated_image_fs else both
    return ()
