"""Image GC: unused images go, least recently used first, when the image
filesystem is over the high threshold, down to the low one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kubelet_kit.container import (
    ContainerConfig,
    ContainerMetadata,
    ImageSpec,
    PodSandboxConfig,
    PodSandboxMetadata,
)
from kubelet_kit.errors import ConfigurationError
from kubelet_kit.podsync.imagegc import ImageGCError, ImageGCManager
from kubelet_kit.testing import FakeClock, FakeRuntime

MB = 1 << 20


class Disk:
    """An image filesystem whose fill level the test sets."""

    def __init__(self, capacity: int, available: int) -> None:
        self.capacity, self.available = capacity, available

    async def __call__(self) -> tuple[int, int]:
        return self.capacity, self.available


async def _setup() -> tuple[FakeClock, FakeRuntime, dict[str, str]]:
    clock = FakeClock()
    rt = FakeRuntime(clock)
    ids = {}
    for name in ("used", "old", "newer"):
        ids[name] = rt.add_image(f"example.com/{name}:1", present=True, size=6 * MB).id
    config = PodSandboxConfig(metadata=PodSandboxMetadata("p", "default", "u1"))
    sandbox = await rt.run_pod_sandbox(config)
    cid = await rt.create_container(
        sandbox,
        ContainerConfig(metadata=ContainerMetadata("c"), image=ImageSpec("example.com/used:1")),
        config,
    )
    await rt.start_container(cid)
    rt.exit_container(cid, 0)  # an exited container still holds its image
    return clock, rt, ids


async def test_below_the_high_threshold_nothing_goes() -> None:
    clock, rt, _ = await _setup()
    gc = ImageGCManager(rt, Disk(100 * MB, 20 * MB), clock=clock)
    clock.advance(600)
    result = await gc.garbage_collect()
    assert (result.usage_percent, result.removed) == (80, ())
    assert len(await rt.list_images()) == 3


async def test_over_the_high_threshold_unused_images_go_least_recently_used_first() -> None:
    clock, rt, ids = await _setup()
    disk = Disk(100 * MB, 10 * MB)
    gc = ImageGCManager(rt, disk, clock=clock, minimum_age=120)
    await gc.detect_images()
    clock.advance(600)
    result = await gc.garbage_collect()
    assert result.usage_percent == 90
    assert result.bytes_to_free == 100 * MB * 20 // 100 - 10 * MB  # down to 80 %
    # 10 MiB to free: both unused images (6 MiB each) go; the used one stays.
    assert set(result.removed) == {ids["old"], ids["newer"]}
    assert result.freed_bytes == 12 * MB
    assert [i.id for i in await rt.list_images()] == [ids["used"]]


async def test_least_recently_used_goes_first_and_only_as_much_as_needed() -> None:
    clock, rt, ids = await _setup()
    gc = ImageGCManager(rt, Disk(100 * MB, 14 * MB), clock=clock, minimum_age=0)
    await gc.detect_images()
    clock.advance(60)
    # "newer" gets used (and its container removed again): it was used more recently.
    config = PodSandboxConfig(metadata=PodSandboxMetadata("q", "default", "u2"))
    sandbox = await rt.run_pod_sandbox(config)
    cid = await rt.create_container(
        sandbox,
        ContainerConfig(metadata=ContainerMetadata("c"), image=ImageSpec("example.com/newer:1")),
        config,
    )
    await gc.detect_images()
    await rt.remove_container(cid)
    clock.advance(60)
    result = await gc.garbage_collect()  # 86 % used: 6 MiB to free
    assert result.removed == (ids["old"],)


async def test_images_younger_than_the_minimum_age_stay_and_the_shortfall_is_an_error() -> None:
    clock, rt, _ = await _setup()
    gc = ImageGCManager(rt, Disk(100 * MB, 1 * MB), clock=clock, minimum_age=120)
    clock.advance(60)
    with pytest.raises(
        ImageGCError,
        match=r"Failed to garbage collect required amount of "
        r"images\. Attempted to free \d+ bytes, but only "
        r"found 0 bytes eligible to free\.",
    ):
        await gc.garbage_collect()
    assert len(await rt.list_images()) == 3


async def test_pinned_images_stay() -> None:
    clock = FakeClock()
    rt = FakeRuntime(clock)
    image = rt.add_image("registry.k8s.io/pause:3.10", present=True, size=MB, pinned=True)
    gc = ImageGCManager(rt, Disk(100 * MB, 0), clock=clock, minimum_age=0)
    with pytest.raises(ImageGCError):
        await gc.garbage_collect()
    assert [i.id for i in await rt.list_images()] == [image.id]


async def test_a_filesystem_without_capacity_is_an_error() -> None:
    rt = FakeRuntime()
    with pytest.raises(ImageGCError, match="invalid capacity 0 on image filesystem"):
        await ImageGCManager(rt, Disk(0, 0)).garbage_collect()


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"high_threshold_percent": 101}, "imageGCHighThresholdPercent"),
        ({"low_threshold_percent": -1}, "imageGCLowThresholdPercent"),
        ({"high_threshold_percent": 70, "low_threshold_percent": 80}, "imageGCLowThresholdPercent"),
    ],
)
def test_bad_thresholds_are_refused_naming_the_field(kwargs: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigurationError, match=field):
        ImageGCManager(FakeRuntime(), Disk(1, 1), **kwargs)


def test_from_config_makes_image_gc_from_the_imagegc_fields(tmp_path: Path) -> None:
    from kubelet_kit.api.kubeletconfig import KubeletConfiguration
    from kubelet_kit.kubelet import Kubelet

    config = KubeletConfiguration(
        image_gc_high_threshold_percent=90,
        image_gc_low_threshold_percent=70,
        image_minimum_gc_age="5m",
        cgroups_per_qos=False,
    )
    kubelet = Kubelet.from_config(config, node_name="n1", root_dir=tmp_path, runtime=FakeRuntime())
    gc = kubelet.housekeeper.image_gc
    assert gc is not None
    assert (gc.high_threshold_percent, gc.low_threshold_percent, gc.minimum_age) == (90, 70, 300.0)


async def test_the_agent_collects_images_every_period() -> None:
    from kubelet_kit.testing import KubeletEnv

    clock = FakeClock()
    rt = FakeRuntime(clock)
    unused = rt.add_image("example.com/unused:1", present=True, size=30 * MB)
    gc = ImageGCManager(rt, Disk(100 * MB, 5 * MB), clock=clock)
    async with KubeletEnv(clock=clock, runtime=rt, image_gc=gc) as env:
        env.add_pod(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "web"},
                "spec": {
                    "containers": [{"name": "c", "image": "busybox", "command": ["sleep", "3600"]}]
                },
            }
        )
        await env.sleep(200)
        assert unused.id in {i.id for i in await rt.list_images()}  # not yet: first period
        await env.sleep(200)
        images = {i.id for i in await rt.list_images()}
    assert unused.id not in images
    assert len(images) == 1  # busybox, in use by the running pod
