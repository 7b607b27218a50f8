"""The VolumeManager protocol: a pod's volumes mounted before its containers start."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from collections.abc import Mapping

    from kubelet_kit.api import Container, Pod
    from kubelet_kit.container import Mount

__all__ = ["VolumeManager"]


@runtime_checkable
class VolumeManager(Protocol):
    """Keeps the volumes the pods want mounted, and unmounts the rest.

    The composer calls :meth:`add_pod` when a pod is accepted,
    :meth:`wait_for_mounts` before creating its containers, passes
    :meth:`container_mounts` to the runtime, and :meth:`remove_pod` once the
    pod's containers are stopped.
    """

    async def run(self) -> None:
        """Reconcile until :meth:`stop`; raises only on a fatal error."""

    async def stop(self) -> None:
        """Stop reconciling. Idempotent. Mounted volumes stay."""

    def add_pod(self, pod: Pod) -> None:
        """Want ``pod``'s volumes mounted. Never blocks; idempotent."""

    def remove_pod(self, pod: Pod) -> None:
        """No longer want ``pod``'s volumes. Never blocks; idempotent."""

    async def wait_for_mounts(self, pod: Pod, timeout: float) -> None:
        """Block until every volume of ``pod`` is mounted. Raises TimeoutError
        naming the volumes still unmounted after ``timeout`` seconds."""

    async def wait_for_unmount(self, pod: Pod, timeout: float) -> None:
        """Block until every volume of a removed pod is unmounted and its volume
        directories are gone. Raises TimeoutError naming what remains."""

    def container_mounts(
        self, pod: Pod, container: Container, env: Mapping[str, str] | None = None
    ) -> list[Mount]:
        """The runtime mounts for ``container``'s volumeMounts; raises
        ValidationError naming the field for an unusable mount. May block briefly
        (the reference implementation walks and bind-mounts each ``subPath``), so
        it must not wait on anything slow.

        ``env`` is the container's resolved environment (downward API and
        ConfigMap/Secret values included), which ``subPathExpr`` expands
        against; without it, only the literal values in ``container.env``."""
