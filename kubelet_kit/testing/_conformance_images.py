"""The conformance check of the image service.

Pulling, inspecting and listing an image, the typed error for an image that
cannot be pulled, and removing a missing image being a no-op.
"""

from __future__ import annotations

from kubelet_kit.container.interfaces import ImageSpec
from kubelet_kit.errors import ImagePullError
from kubelet_kit.testing._conformance_context import _Ctx


async def _check_images(ctx: _Ctx) -> None:
    rt = ctx.runtime
    ctx.at(f"pull_image({ctx.image!r})")
    ref = await rt.pull_image(ImageSpec(ctx.image))
    ctx.expect(bool(ref), "pull_image returned an empty reference")
    ctx.at(f"image_status({ctx.image!r})")
    img = await rt.image_status(ImageSpec(ctx.image))
    ctx.expect(img is not None, "image_status of a pulled image returned None")
    assert img is not None
    ctx.at("list_images")
    ids = [i.id for i in await rt.list_images()]
    ctx.expect(img.id in ids, f"list_images does not hold the pulled image {img.id!r}")

    ctx.at(f"pull_image({ctx.missing_image!r})")
    try:
        await ctx.run_while_waiting(
            "pull of a missing image", rt.pull_image(ImageSpec(ctx.missing_image)), ctx.timeout
        )
    except ImagePullError:
        pass
    except Exception as exc:
        ctx.fail(f"expected ImagePullError, got {type(exc).__name__}: {exc}")
    else:
        ctx.fail("pulling a missing image succeeded")
    ctx.at(f"image_status({ctx.missing_image!r})")
    ctx.expect(
        await rt.image_status(ImageSpec(ctx.missing_image)) is None,
        "image_status of a missing image is not None",
    )
    ctx.at("remove_image(missing: idempotent)")
    await rt.remove_image(ImageSpec(ctx.missing_image))
