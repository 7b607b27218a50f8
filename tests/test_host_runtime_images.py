"""HostProcessRuntime's images: references normalised as docker does, records
that are stable across runtimes and roots."""

from __future__ import annotations

from collections.abc import Callable

import _host_runtime_helpers as helpers
import pytest

from kubelet_kit.container import ImageSpec
from kubelet_kit.errors import ImageNotFoundError, ImagePullError
from kubelet_kit.runtimes import HostProcessRuntime
from kubelet_kit.runtimes.host import normalize_image_ref

pytestmark = pytest.mark.timeout(30)

# The fixtures giving runtimes (their teardown kills and checks every process a
# test left).
roots, make_runtime, runtime = helpers.roots, helpers.make_runtime, helpers.runtime


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
