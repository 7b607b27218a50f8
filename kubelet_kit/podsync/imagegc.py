"""Image garbage collection: unused images removed when the image filesystem fills.

The kubelet's image GC (``image_gc_manager.go``, every five minutes): when the
image filesystem's usage reaches ``imageGCHighThresholdPercent`` (85), remove
images no container uses (running or not), least recently used first, until
usage is back at ``imageGCLowThresholdPercent`` (80). An image first seen less
than ``imageMinimumGCAge`` (2 minutes) ago stays, as do pinned images (a
runtime's sandbox image). On a runtime without an image service (one that
does not offer ``images``) there is nothing to collect: the collection is off,
and one line says so in the log.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import cast

import attrs

from kubelet_kit.clock import Clock, RealClock
from kubelet_kit.container.interfaces import (
    ContainerInfo,
    Image,
    ImageService,
    ImageSpec,
    RuntimeCore,
)
from kubelet_kit.container.optional import IMAGES, not_offered, runtime_capabilities
from kubelet_kit.errors import ConfigurationError, ContainerRuntimeError, KubeletKitError

__all__ = ["IMAGE_GC_PERIOD", "ImageGCError", "ImageGCManager", "ImageGCResult"]

log = logging.getLogger(__name__)

#: Seconds between collections (the kubelet's ImageGCPeriod).
IMAGE_GC_PERIOD = 300.0


class ImageGCError(KubeletKitError):
    """A collection could not free what the low threshold asks for."""


@attrs.frozen
class ImageGCResult:
    """What one collection found and did.

    Attributes:
        usage_percent: The image filesystem's usage before collecting.
        bytes_to_free: What the low threshold asked for (0 below the high one).
        freed_bytes: The sizes of the images removed.
        removed: Ids of the images removed, in order.
    """

    usage_percent: int
    bytes_to_free: int = 0
    freed_bytes: int = 0
    removed: tuple[str, ...] = ()


@attrs.define
class _Record:
    first_detected: float
    last_used: float
    size: int
    pinned: bool


class ImageGCManager:
    """Keeps the image filesystem under the kubelet's thresholds.

    Args:
        runtime: Lists and removes images, and lists the containers using them.
        fs_usage: Returns the image filesystem's ``(capacity, available)`` bytes.
        clock: Time for first-detected and last-used times.
        high_threshold_percent: Usage at which a collection starts removing.
        low_threshold_percent: Usage a collection frees down to.
        minimum_age: Seconds an image must have been known before it is removed.

    Raises:
        ConfigurationError: thresholds outside 0..100 or low above high.
    """

    def __init__(
        self,
        runtime: RuntimeCore,
        fs_usage: Callable[[], Awaitable[tuple[int, int]]],
        *,
        clock: Clock | None = None,
        high_threshold_percent: int = 85,
        low_threshold_percent: int = 80,
        minimum_age: float = 120.0,
    ) -> None:
        if not 0 <= high_threshold_percent <= 100:
            raise ConfigurationError(
                f"imageGCHighThresholdPercent: must be between 0 and 100, got "
                f"{high_threshold_percent}"
            )
        if not 0 <= low_threshold_percent <= 100:
            raise ConfigurationError(
                f"imageGCLowThresholdPercent: must be between 0 and 100, got "
                f"{low_threshold_percent}"
            )
        if low_threshold_percent > high_threshold_percent:
            raise ConfigurationError(
                f"imageGCLowThresholdPercent ({low_threshold_percent}) must not be greater "
                f"than imageGCHighThresholdPercent ({high_threshold_percent})"
            )
        self.runtime = runtime
        self._said_off = False
        self.fs_usage = fs_usage
        self.clock: Clock = clock or RealClock()
        self.high_threshold_percent = high_threshold_percent
        self.low_threshold_percent = low_threshold_percent
        self.minimum_age = minimum_age
        self._records: dict[str, _Record] = {}

    async def detect_images(self) -> set[str]:
        """Note new images, mark the ones in use as used now, forget removed ones.

        Returns:
            The ids of the images in use.
        """
        service = self._images()
        if service is None:
            return set()
        now = self.clock.now()
        images = await service.list_images()
        in_use = _images_in_use(images, await self.runtime.list_containers())
        present = set()
        for image in images:
            present.add(image.id)
            record = self._records.get(image.id)
            if record is None:
                record = self._records[image.id] = _Record(now, now, image.size, image.pinned)
            record.size, record.pinned = image.size, image.pinned
            if image.id in in_use:
                record.last_used = now
        for gone in set(self._records) - present:
            del self._records[gone]
        return in_use

    def _images(self) -> ImageService | None:
        """The runtime as an image service, or None (said once in the log)."""
        if IMAGES in runtime_capabilities(self.runtime):
            return cast(ImageService, self.runtime)
        if not self._said_off:
            self._said_off = True
            log.info("image garbage collection is off: %s", not_offered(self.runtime, IMAGES))
        return None

    async def garbage_collect(self) -> ImageGCResult:
        """One collection (see the module doc).

        Raises:
            ImageGCError: the image filesystem reports no capacity, or the images
                that may go do not free enough (the kubelet's messages).
        """
        if self._images() is None:
            return ImageGCResult(0)
        in_use = await self.detect_images()
        capacity, available = await self.fs_usage()
        if capacity <= 0:
            raise ImageGCError(f"invalid capacity {capacity} on image filesystem")
        available = min(available, capacity)
        usage = 100 - available * 100 // capacity
        if usage < self.high_threshold_percent:
            return ImageGCResult(usage)
        to_free = capacity * (100 - self.low_threshold_percent) // 100 - available
        log.info(
            "disk usage on image filesystem is at %d%% which is over the high threshold "
            "(%d%%); trying to free %d bytes down to the low threshold (%d%%)",
            usage,
            self.high_threshold_percent,
            to_free,
            self.low_threshold_percent,
        )
        freed, removed = await self._free_space(to_free, in_use)
        result = ImageGCResult(usage, to_free, freed, tuple(removed))
        if freed < to_free:
            raise ImageGCError(
                f"Failed to garbage collect required amount of images. Attempted to free "
                f"{to_free} bytes, but only found {freed} bytes eligible to free."
            )
        return result

    async def _free_space(self, to_free: int, in_use: set[str]) -> tuple[int, list[str]]:
        now = self.clock.now()
        candidates = sorted(
            (
                (image_id, r)
                for image_id, r in self._records.items()
                if image_id not in in_use and not r.pinned
            ),
            key=lambda item: (item[1].last_used, item[1].first_detected),
        )
        freed = 0
        removed: list[str] = []
        for image_id, record in candidates:
            if freed >= to_free:
                break
            if now - record.first_detected < self.minimum_age:
                continue  # too new to judge
            try:
                await cast(ImageService, self.runtime).remove_image(ImageSpec(image_id))
            except ContainerRuntimeError as exc:
                log.warning("image GC: removing image %s failed: %s", image_id, exc)
                continue
            del self._records[image_id]
            freed += record.size
            removed.append(image_id)
        return freed, removed


def _images_in_use(images: Iterable[Image], containers: Iterable[ContainerInfo]) -> set[str]:
    """Ids of the images any container (running or not) was made from."""
    by_name: dict[str, str] = {}
    for image in images:
        by_name[image.id] = image.id
        for name in (*image.repo_tags, *image.repo_digests):
            by_name[name] = image.id
    used: set[str] = set()
    for container in containers:
        for ref in (container.image_ref, container.image):
            if ref in by_name:
                used.add(by_name[ref])
    return used
