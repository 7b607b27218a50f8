"""Local ephemeral-storage limits: which pods use more disk than they were allowed.

The kubelet checks these every eviction round, before and apart from the node's
thresholds (upstream ``localStorageEviction``, on while
``localStorageCapacityIsolation`` is). A pod is evicted at once, whatever the
node's free space, for the first of:

1. an ``emptyDir`` on disk holding more than its ``sizeLimit`` (a limit of 0 or
   none is no limit): ``Usage of EmptyDir volume "data" exceeds the limit "1Mi". ``;
2. the pod's whole use (its containers' writable layers and logs, and its
   volumes on the node's disk) above the pod's ``ephemeral-storage`` limit, the
   sum of its containers' limits (:func:`~kubelet_kit.api.resources.pod_limits`):
   ``Pod ephemeral local storage usage exceeds the total limit of containers 2Mi. ``;
3. a container's logs, and its writable layer unless images have a filesystem of
   their own, above its ``ephemeral-storage`` limit:
   ``Container app exceeded its local ephemeral storage limit "1Mi". ``.

The three signals name the eviction in the ``evictions`` metric. Pure functions;
the manager acts on what they find.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

import attrs

from kubelet_kit.api import Pod
from kubelet_kit.api.resources import pod_limits
from kubelet_kit.eviction.ranking import FS_LOCAL_VOLUMES, FS_LOGS, FS_ROOT, pod_disk_usage
from kubelet_kit.eviction.stats import PodUsage
from kubelet_kit.eviction.thresholds import RESOURCE_EPHEMERAL_STORAGE

__all__ = [
    "SIGNAL_EMPTY_DIR_FS_LIMIT",
    "SIGNAL_EPHEMERAL_CONTAINER_FS_LIMIT",
    "SIGNAL_EPHEMERAL_POD_FS_LIMIT",
    "LocalStorageViolation",
    "local_storage_violation",
    "local_storage_violations",
]

#: The ``evictions`` metric's signal for an emptyDir over its sizeLimit.
SIGNAL_EMPTY_DIR_FS_LIMIT: Final = "emptydirfs.limit"
#: ... for a pod over its ephemeral-storage limit.
SIGNAL_EPHEMERAL_POD_FS_LIMIT: Final = "ephemeralpodfs.limit"
#: ... for a container over its ephemeral-storage limit.
SIGNAL_EPHEMERAL_CONTAINER_FS_LIMIT: Final = "ephemeralcontainerfs.limit"

_POD_TOTAL: Final = frozenset({FS_ROOT, FS_LOGS, FS_LOCAL_VOLUMES})


@attrs.frozen
class LocalStorageViolation:
    """A pod over one of its local-storage limits.

    Attributes:
        pod: The pod.
        signal: Which limit (``emptydirfs.limit``, ``ephemeralpodfs.limit``,
            ``ephemeralcontainerfs.limit``).
        message: The kubelet's eviction message, for the pod's status and event.
    """

    pod: Pod
    signal: str
    message: str


def _quoted(text: str) -> str:
    """``text`` as Go's ``%q`` writes it (the names and quantities here need no
    escapes beyond quotes and backslashes)."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def local_storage_violation(
    pod: Pod, usage: PodUsage, *, dedicated_image_fs: bool
) -> LocalStorageViolation | None:
    """The first local-storage limit ``pod`` is over, by ``usage``; None when
    it is within them all (or they cannot be measured)."""
    for volume in pod.spec.volumes:
        source = volume.empty_dir
        if source is None or source.size_limit is None or source.size_limit.amount <= 0:
            continue
        used = usage.volumes.get(volume.name)
        if used is not None and used.used_bytes > source.size_limit.amount:
            return LocalStorageViolation(
                pod,
                SIGNAL_EMPTY_DIR_FS_LIMIT,
                f"Usage of EmptyDir volume {_quoted(volume.name)} exceeds the limit "
                f"{_quoted(str(source.size_limit))}. ",
            )
    pod_limit = pod_limits(pod).get(RESOURCE_EPHEMERAL_STORAGE)
    if pod_limit is not None:
        total, _ = pod_disk_usage(pod, usage, _POD_TOTAL)
        if total > pod_limit.amount:
            return LocalStorageViolation(
                pod,
                SIGNAL_EPHEMERAL_POD_FS_LIMIT,
                "Pod ephemeral local storage usage exceeds the total limit of containers "
                f"{pod_limit}. ",
            )
    limits = {
        c.name: qty
        for c in pod.spec.containers
        if (qty := c.resources.limits.get(RESOURCE_EPHEMERAL_STORAGE)) is not None
        and qty.value() != 0
    }
    for stats in usage.containers:
        limit = limits.get(stats.name)
        if limit is None:
            continue
        used_bytes = stats.logs_used_bytes or 0
        if not dedicated_image_fs:
            used_bytes += stats.rootfs_used_bytes or 0
        if used_bytes > limit.amount:
            return LocalStorageViolation(
                pod,
                SIGNAL_EPHEMERAL_CONTAINER_FS_LIMIT,
                f"Container {stats.name} exceeded its local ephemeral storage limit "
                f"{_quoted(str(limit))}. ",
            )
    return None


def local_storage_violations(
    pods: Sequence[Pod], usage: Mapping[str, PodUsage], *, dedicated_image_fs: bool
) -> list[LocalStorageViolation]:
    """Every pod of ``pods`` over a local-storage limit, in ``pods``' order; pods
    without usage in ``usage`` (by uid) are skipped."""
    found = []
    for pod in pods:
        measured = usage.get(pod.uid)
        if measured is None:
            continue
        violation = local_storage_violation(pod, measured, dedicated_image_fs=dedicated_image_fs)
        if violation is not None:
            found.append(violation)
    return found
