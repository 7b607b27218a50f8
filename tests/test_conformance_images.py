"""The kit's image checks (several references of one image, an image's user), the
fake's images behind them, and the user fields over the CRI."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs
import pytest

from kubelet_kit.container import Image, ImageSpec
from kubelet_kit.container.images import image_user
from kubelet_kit.cri import CRIRuntime, CRIServer
from kubelet_kit.cri._convert_images import image_from_pb, image_to_pb
from kubelet_kit.testing import FakeClock, FakeRuntime
from kubelet_kit.testing.conformance import run_conformance
from kubelet_kit.testing.fake_runtime import CONFORMANCE_SAME_IMAGE_REFS, CONFORMANCE_USER_IMAGES

IMAGES: dict[str, Any] = {
    "same_image_refs": CONFORMANCE_SAME_IMAGE_REFS,
    "user_images": CONFORMANCE_USER_IMAGES,
}
CHECKS = ["image_tags", "image_user"]


def fake(cls: type[FakeRuntime] = FakeRuntime) -> FakeRuntime:
    rt = cls(FakeClock())
    rt.add_conformance_images()
    return rt


@pytest.mark.parametrize(
    ("user", "fields"),
    [
        ("1002", (1002, "")),
        ("1003:1004", (1003, "")),
        ("0", (0, "")),
        ("www-data", (None, "www-data")),
        ("www-data:www-data", (None, "www-data")),
        ("", (None, "")),
    ],
)
def test_image_user_reads_a_config_user_as_the_cri_does(
    user: str, fields: tuple[int | None, str]
) -> None:
    assert image_user(user) == fields


@pytest.mark.parametrize(
    "image", [Image("a"), Image("a", uid=0), Image("a", uid=1002), Image("a", username="www")]
)
def test_an_images_user_crosses_the_wire(image: Image) -> None:
    msg = image_to_pb(image)
    assert image_from_pb(type(msg).FromString(msg.SerializeToString())) == image


# ---------------------------------------------------------------- the fake's images


async def test_the_references_of_one_image_share_it_on_the_node() -> None:
    rt = FakeRuntime(FakeClock())
    rt.add_image("example.test/app:1", aliases=["example.test/app:v1", "other.test/app:1"])
    await rt.pull_image(ImageSpec("example.test/app:1"))
    first = await rt.image_status(ImageSpec("example.test/app:1"))
    assert first is not None and first.repo_tags == ("example.test/app:1",)
    assert await rt.image_status(ImageSpec("other.test/app:1")) is None
    assert await rt.pull_image(ImageSpec("other.test/app:1")) == first.id
    both = await rt.image_status(ImageSpec("other.test/app:1"))
    assert both is not None and both.id == first.id
    assert both.repo_tags == ("example.test/app:1", "other.test/app:1")
    assert [i.id for i in await rt.list_images()] == [first.id]
    await rt.remove_image(ImageSpec("other.test/app:1"))
    assert await rt.list_images() == []
    assert await rt.image_status(ImageSpec("example.test/app:1")) is None


async def test_an_image_reports_the_user_of_its_config() -> None:
    rt = fake()
    for ref, user in CONFORMANCE_USER_IMAGES.items():
        await rt.pull_image(ImageSpec(ref))
        img = await rt.image_status(ImageSpec(ref))
        assert img is not None and (img.uid, img.username) == image_user(user)


async def test_the_fake_passes_the_image_checks_in_process_and_over_the_cri(
    tmp_path: Path,
) -> None:
    report = await run_conformance(fake(), log_root=tmp_path, checks=CHECKS, **IMAGES)
    assert [r.status for r in report.results] == ["passed", "passed"], report.summary()
    async with (
        CRIServer(fake(), tmp_path / "cri.sock") as server,
        CRIRuntime(server.endpoint) as client,
    ):
        report = await run_conformance(client, log_root=tmp_path, checks=CHECKS, **IMAGES)
    assert [r.status for r in report.results] == ["passed", "passed"], report.summary()


# ------------------------------------------------------------------ skips and misuse


async def test_without_images_the_checks_skip_saying_what_they_need(tmp_path: Path) -> None:
    report = await run_conformance(fake(), log_root=tmp_path, checks=CHECKS)
    assert [r.status for r in report.results] == ["skipped", "skipped"]
    assert "no same_image_refs given" in report.result("image_tags").message
    assert "no user_images given" in report.result("image_user").message


@pytest.mark.parametrize("refs", [("example.test/app:1",), "example.test/app:1"])
async def test_a_single_reference_is_refused(tmp_path: Path, refs: Any) -> None:
    with pytest.raises(ValueError, match="same_image_refs"):
        await run_conformance(fake(), log_root=tmp_path, same_image_refs=refs)


# --------------------------------------------------------- broken runtimes must fail


class ForgetsImageUsers(FakeRuntime):
    """Reports no user for any image."""

    async def image_status(self, image: ImageSpec) -> Image | None:
        found = await super().image_status(image)
        return attrs.evolve(found, uid=None, username="") if found else None


class RemovesOneTag(FakeRuntime):
    """Removes only the reference it is given, leaving the image's other tags."""

    async def remove_image(self, image: ImageSpec) -> None:
        from kubelet_kit.testing.fake_runtime import normalize_image_ref

        self._present.discard(normalize_image_ref(image.image))


class ListsEveryTag(FakeRuntime):
    """Lists an image once per reference it is held under."""

    async def list_images(self) -> list[Image]:
        listed = await super().list_images()
        return [attrs.evolve(i, repo_tags=(t,)) for i in listed for t in i.repo_tags]


@pytest.mark.parametrize(
    ("runtime_class", "failing", "message"),
    [
        (ForgetsImageUsers, "image_user", "uid: expected 1002, got None"),
        (RemovesOneTag, "image_tags", "image_status still finds the image under"),
        (ListsEveryTag, "image_tags", "in list_images: expected 1, got 3"),
    ],
)
async def test_a_broken_runtime_fails_an_image_check(
    tmp_path: Path, runtime_class: type[FakeRuntime], failing: str, message: str
) -> None:
    report = await run_conformance(fake(runtime_class), log_root=tmp_path, checks=CHECKS, **IMAGES)
    assert message in report.result(failing).message, report.summary()


async def test_references_of_different_images_fail_image_tags(tmp_path: Path) -> None:
    rt = FakeRuntime(FakeClock(), pull_any=True)  # every reference its own image
    report = await run_conformance(rt, log_root=tmp_path, checks=["image_tags"], **IMAGES)
    assert report.result("image_tags").status == "failed"
    assert "lack the pulled reference(s)" in report.result("image_tags").message
