"""HostProcessRuntime's images: references normalised as docker does, records
that are stable across runtimes and roots."""

from __future__ import annotations

from collections.abc import Callable

import _host_runtime_helpers as helpers
import attrs
import pytest

from kubelet_kit.container import ImageSpec, PodSandboxConfig
from kubelet_kit.errors import ImageNotFoundError, ImagePullError
from kubelet_kit.runtimes import HostProcessRuntime
from kubelet_kit.runtimes.host import normalize_image_ref

pytestmark = pytest.mark.timeout(30)

# The fixtures giving runtimes (their teardown kills and checks every process a
# test left).
roots, make_runtime, runtime = helpers.roots, helpers.make_runtime, helpers.runtime
sandbox, sandbox_config = helpers.sandbox, helpers.sandbox_config


# ---------------------------------------------------------------- images


@pytest.mark.parametrize(
    ("ref", "normalized"),
    [
        ("busybox", "docker.io/library/busybox:latest"),
        ("busybox:1.36", "docker.io/library/busybox:1.36"),
        ("library/busybox", "docker.io/library/busybox:latest"),
        ("user/app", "docker.io/user/app:latest"),
        ("quay.io/org/app", "quay.io/org/app:latest"),
        ("localhost/app:dev", "localhost/app:dev"),
        ("registry:5000/app", "registry:5000/app:latest"),
        # An upper-case first component can only be a host name.
        ("UPPER/case", "UPPER/case:latest"),
        ("busybox@sha256:" + "a" * 64, "docker.io/library/busybox@sha256:" + "a" * 64),
    ],
)
def test_image_refs_normalise_like_docker(ref: str, normalized: str) -> None:
    assert normalize_image_ref(ref) == normalized


@pytest.mark.parametrize(
    "ref", ["", "Upper", "docker.io/Upper", "a b", "busybox:", ":tag", "x@sha256:12"]
)
def test_invalid_image_refs_are_pull_errors(ref: str) -> None:
    with pytest.raises(ImagePullError, match="invalid reference format"):
        normalize_image_ref(ref)


async def test_images_are_recorded(
    runtime: HostProcessRuntime, make_runtime: Callable[..., HostProcessRuntime]
) -> None:
    assert await runtime.image_status(ImageSpec("busybox")) is None
    image_id = await runtime.pull_image(ImageSpec("busybox"))
    assert image_id.startswith("sha256:") and len(image_id) == 71
    assert await runtime.pull_image(ImageSpec("docker.io/library/busybox:latest")) == image_id
    image = await runtime.image_status(ImageSpec("busybox:latest"))
    assert image is not None
    assert image.id == image_id
    assert image.repo_tags == ("docker.io/library/busybox:latest",)
    assert await runtime.image_status(ImageSpec(image_id)) == image
    # Stable across runtimes and roots: the id is derived from the reference.
    assert await make_runtime(name="other").pull_image(ImageSpec("busybox")) == image_id
    await runtime.pull_image(ImageSpec("quay.io/org/app:1"))
    assert len(await runtime.list_images()) == 2
    with pytest.raises(ImagePullError):
        await runtime.pull_image(ImageSpec("Not A Ref"))
    with pytest.raises(ImageNotFoundError):
        await runtime.pull_image(ImageSpec("registry.invalid/no/such:0"))
    assert await runtime.image_status(ImageSpec("registry.invalid/no/such:0")) is None
    await runtime.remove_image(ImageSpec("busybox"))
    await runtime.remove_image(ImageSpec("busybox"))
    assert [i.repo_tags for i in await runtime.list_images()] == [("quay.io/org/app:1",)]


async def test_images_have_a_size_and_a_filesystem(runtime: HostProcessRuntime) -> None:
    # A kubelet refuses an image whose size is 0 and asks where images are kept.
    [empty] = await runtime.image_fs_info()
    assert (empty.used_bytes, empty.inodes_used) == (0, 0)
    await runtime.pull_image(ImageSpec("busybox"))
    await runtime.pull_image(ImageSpec("quay.io/org/app:1"))
    images = await runtime.list_images()
    assert all(i.size > 0 for i in images)
    held = await runtime.image_status(ImageSpec("busybox"))
    assert held is not None and held.size > 0
    [fs] = await runtime.image_fs_info()
    assert fs.mountpoint == str(runtime.root_dir)
    assert (fs.used_bytes, fs.inodes_used) == (sum(i.size for i in images), 2)
    assert fs.timestamp > 0


async def test_a_container_made_by_image_id_reports_the_image_by_tag(
    runtime: HostProcessRuntime, sandbox: str, sandbox_config: PodSandboxConfig
) -> None:
    # A kubelet creates containers by the id its pull returned; as containerd, the
    # status names the image by its tag and its id as image_ref, and listing keeps
    # the image as given.
    image_id = await runtime.pull_image(ImageSpec("example.test/app:1"))
    config = attrs.evolve(helpers.container("main", "true"), image=ImageSpec(image_id))
    cid = await runtime.create_container(sandbox, config, sandbox_config)
    status = await runtime.container_status(cid)
    assert (status.image, status.image_ref) == ("example.test/app:1", image_id)
    [info] = await runtime.list_containers()
    assert (info.image, info.image_ref) == (image_id, image_id)
    by_tag = await runtime.create_container(
        sandbox, helpers.container("tagged", "true", attempt=0), sandbox_config
    )
    # By a reference never pulled: its would-be id, the image as given.
    assert (await runtime.container_status(by_tag)).image == "busybox"
