"""StubVolumeManager: for agents whose pods use no volumes."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Mapping

    from kubelet_kit.api import Container, Pod
    from kubelet_kit.container import Mount

__all__ = ["StubVolumeManager"]


class StubVolumeManager:
    """A VolumeManager that mounts nothing: every wait returns at once and no
    container gets a mount. Pods that need shared or projected files need the
    reference VolumeManager."""

    def __init__(self) -> None:
        self._stopped = asyncio.Event()

    async def run(self) -> None:
        """Wait until stopped."""
        await self._stopped.wait()

    async def stop(self) -> None:
        """Stop :meth:`run`."""
        self._stopped.set()

    def add_pod(self, pod: Pod) -> None:
        """Nothing to mount."""

    def remove_pod(self, pod: Pod) -> None:
        """Nothing to unmount."""

    async def wait_for_mounts(self, pod: Pod, timeout: float) -> None:
        """Returns at once."""

    async def wait_for_unmount(self, pod: Pod, timeout: float) -> None:
        """Returns at once."""

    def container_mounts(
        self, pod: Pod, container: Container, env: Mapping[str, str] | None = None
    ) -> list[Mount]:
        """No mounts."""
        return []
