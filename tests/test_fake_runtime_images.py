"""FakeRuntime's images: reference normalisation, pulls, status and removal; and the
resolv.conf a runtime writes for a DNS config."""

from __future__ import annotations

import asyncio
import string

import attrs
import pytest
from _fake_runtime_helpers import container_config, sandbox_config
from hypothesis import given
from hypothesis import strategies as st

from kubelet_kit.container import DNSConfig, ImageSpec
from kubelet_kit.errors import ImageNotFoundError, ImagePullError
from kubelet_kit.testing import FakeClock, FakeRuntime, normalize_image_ref


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


# ----------------------------------------------------------------------- images


def test_normalize_image_ref() -> None:
    assert normalize_image_ref("busybox") == "docker.io/library/busybox:latest"
    assert normalize_image_ref("busybox:1.36") == "docker.io/library/busybox:1.36"
    assert normalize_image_ref("me/app") == "docker.io/me/app:latest"
    assert normalize_image_ref("localhost:5000/app") == "localhost:5000/app:latest"
    assert normalize_image_ref("registry.k8s.io/pause:3.9") == "registry.k8s.io/pause:3.9"
    digest = "sha256:" + "ab" * 32
    assert normalize_image_ref(f"busybox@{digest}") == f"docker.io/library/busybox@{digest}"
    # Not a reference a runtime accepts (a digest is 32+ hex digits): kept as written.
    assert normalize_image_ref("busybox@sha256:ab") == "busybox@sha256:ab"


async def test_images_pull_status_remove(clock: FakeClock) -> None:
    rt = FakeRuntime(clock, images=["registry.k8s.io/pause:3.9"], pull_latency=4)
    rt.add_image("busybox")
    assert await rt.image_status(ImageSpec("busybox")) is None
    pull = asyncio.create_task(rt.pull_image(ImageSpec("busybox:latest")))
    await clock.run_for(3)
    assert not pull.done()
    await clock.run_for(1)
    ref = await pull
    assert ref.startswith("sha256:")
    img = await rt.image_status(ImageSpec("docker.io/library/busybox"))
    assert img is not None and img.id == ref
    assert await rt.image_status(ImageSpec(ref)) == img
    assert len(await rt.list_images()) == 2
    await rt.remove_image(ImageSpec("busybox"))
    assert await rt.image_status(ImageSpec("busybox")) is None

    missing = asyncio.create_task(rt.pull_image(ImageSpec("nope/missing")))
    await clock.run_for(4)
    with pytest.raises(ImageNotFoundError, match="missing"):
        await missing
    rt.fail_pull("busybox", ImagePullError("429 Too Many Requests"))
    failing = asyncio.create_task(rt.pull_image(ImageSpec("busybox")))
    await clock.run_for(4)
    with pytest.raises(ImagePullError, match="429"):
        await failing


_REF_PART = st.text(alphabet=string.ascii_lowercase + string.digits, min_size=1, max_size=6)


@given(
    host=st.sampled_from(["", "registry.k8s.io/", "localhost:5000/", "quay.io/"]),
    path=st.lists(_REF_PART, min_size=1, max_size=3),
    tag=st.one_of(st.just(""), _REF_PART.map(lambda t: ":" + t)),
)
def test_normalize_image_ref_is_idempotent_and_keeps_the_tag(
    host: str, path: list[str], tag: str
) -> None:
    ref = host + "/".join(path) + tag
    norm = normalize_image_ref(ref)
    assert normalize_image_ref(norm) == norm
    assert norm.endswith(tag or ":latest")
    assert norm.startswith(host or "docker.io/")


async def test_pull_any_knows_every_reference(clock: FakeClock) -> None:
    rt = FakeRuntime(clock, pull_any=True, image_fs="/images")
    image_id = await rt.pull_image(ImageSpec("example.test/app:1"))
    held = await rt.image_status(ImageSpec("example.test/app:1"))
    assert held is not None and held.id == image_id and held.size > 0
    # A real kubelet refuses an image of size 0; the filesystem counts it.
    [fs] = await rt.image_fs_info()
    assert fs.used_bytes == held.size
    # What was scripted still wins.
    rt.fail_pull("example.test/broken:1", ImagePullError("scripted"))
    with pytest.raises(ImagePullError, match="scripted"):
        await rt.pull_image(ImageSpec("example.test/broken:1"))
    with pytest.raises(ImageNotFoundError):
        await FakeRuntime(clock).pull_image(ImageSpec("example.test/app:1"))
    # A registry that can never resolve stays unpullable.
    with pytest.raises(ImageNotFoundError):
        await rt.pull_image(ImageSpec("registry.invalid/app:1"))
    with pytest.raises(ImageNotFoundError):
        await rt.pull_image(ImageSpec("registry.invalid:5000/app:1"))


async def test_container_created_by_image_id_reports_the_tag(clock: FakeClock) -> None:
    # A real kubelet creates containers with the id PullImage returned; the status
    # then names the image by its tag and the id as image_ref, as containerd does.
    rt = FakeRuntime(clock, pull_any=True)
    image_id = await rt.pull_image(ImageSpec("example.test/app:1"))
    sandbox = await rt.run_pod_sandbox(sandbox_config())
    by_id = attrs.evolve(container_config("by-id"), image=ImageSpec(image_id))
    by_name = attrs.evolve(container_config("by-name"), image=ImageSpec("example.test/app:1"))
    for config in (by_id, by_name):
        cid = await rt.create_container(sandbox, config, sandbox_config())
        status = await rt.container_status(cid)
        assert (status.image, status.image_ref) == ("example.test/app:1", image_id)
        [listed] = [c for c in await rt.list_containers() if c.id == cid]
        assert (listed.image, listed.image_ref) == ("example.test/app:1", image_id)


def test_resolv_conf_of_a_dns_config() -> None:
    # What containerd writes, line by line; nothing for an empty config (the
    # host's file then shows through).
    assert DNSConfig().resolv_conf() == ""
    assert DNSConfig(servers=("10.0.0.10",)).resolv_conf() == "nameserver 10.0.0.10\n"
    assert DNSConfig(searches=("a", "b"), options=("ndots:5",)).resolv_conf() == (
        "search a b\noptions ndots:5\n"
    )
