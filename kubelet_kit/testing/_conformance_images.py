"""The conformance checks of the image service.

``images``: pulling, inspecting and listing an image, the typed error for an
image that cannot be pulled, and removing a missing image being a no-op.
``image_tags``: several references (tags) of one image share its id and are all
its ``repo_tags``, it is listed once, and removing it by one reference removes
it. ``image_user``: an image reports the user its config names as the CRI does
(``uid`` for a number, ``username`` for a name). The last two need images
given to the kit (``same_image_refs``, ``user_images``) and skip without them;
they remove their images afterwards.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

from kubelet_kit.container.images import image_user, normalize_image_ref
from kubelet_kit.container.interfaces import ImageSpec
from kubelet_kit.errors import ImagePullError
from kubelet_kit.testing._conformance_context import _Ctx, _Skip


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


async def _check_image_tags(ctx: _Ctx) -> None:
    """Several references of one image: one id, all of them its ``repo_tags``,
    listed once, and removed together by removing it under one of them."""
    refs = ctx.same_image_refs
    if not refs:
        raise _Skip(
            "no same_image_refs given: this check needs two or more references "
            "(tags) the runtime can pull that name one image"
        )
    rt = ctx.runtime
    wanted = {ref: normalize_image_ref(ref) for ref in refs}
    try:
        for ref in refs:
            ctx.at(f"pull_image({ref!r})")
            await rt.pull_image(ImageSpec(ref))
        ids = {}
        for ref in refs:
            ctx.at(f"image_status({ref!r})")
            img = await rt.image_status(ImageSpec(ref))
            if img is None:
                ctx.fail("image_status of a pulled image returned None")
                return
            ids[ref] = img.id
            missing = [r for r in refs if wanted[r] not in img.repo_tags]
            ctx.expect(
                not missing,
                f"repo_tags {list(img.repo_tags)} lack the pulled reference(s) {missing}",
            )
        ctx.at("image_status: one image id for every reference")
        ctx.expect(len(set(ids.values())) == 1, f"the references name different ids: {ids}")
        image_id = ids[refs[0]]
        ctx.at("list_images")
        listed = [i for i in await rt.list_images() if i.id == image_id]
        ctx.expect_eq(f"entries of image {image_id} in list_images", len(listed), 1)
        missing = [r for r in refs if wanted[r] not in listed[0].repo_tags]
        ctx.expect(
            not missing,
            f"list_images: repo_tags {list(listed[0].repo_tags)} lack {missing}",
        )
        ctx.at(f"remove_image({refs[-1]!r}) removes the image under every reference")
        await rt.remove_image(ImageSpec(refs[-1]))
        left = [r for r in refs if await rt.image_status(ImageSpec(r)) is not None]
        ctx.expect(not left, f"image_status still finds the image under {left}")
        ctx.expect(
            image_id not in [i.id for i in await rt.list_images()],
            f"list_images still holds {image_id}",
        )
    finally:
        await _forget(ctx, refs)


async def _check_image_user(ctx: _Ctx) -> None:
    """The user of an image's config: a numeric ``User`` (with or without a group)
    is its ``uid``, a name its ``username``, never both."""
    if not ctx.user_images:
        raise _Skip(
            "no user_images given: this check needs images the runtime can pull, "
            "each with the User its config names"
        )
    rt = ctx.runtime
    try:
        for ref, user in ctx.user_images.items():
            want_uid, want_name = image_user(user)
            ctx.at(f"pull_image({ref!r})")
            await rt.pull_image(ImageSpec(ref))
            ctx.at(f"image_status({ref!r}) of an image with User {user!r}")
            img = await rt.image_status(ImageSpec(ref))
            if img is None:
                ctx.fail("image_status of a pulled image returned None")
                return
            ctx.expect_eq("uid", img.uid, want_uid)
            ctx.expect_eq("username", img.username, want_name)
    finally:
        await _forget(ctx, list(ctx.user_images))


async def _forget(ctx: _Ctx, refs: Sequence[str]) -> None:
    """Remove the check's images, best effort (the check's result stands)."""
    for ref in refs:
        with contextlib.suppress(Exception):
            await ctx.runtime.remove_image(ImageSpec(ref))
