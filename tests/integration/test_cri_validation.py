"""The CRI validation suite as a user runs it, ``pytest -p
kubelet_kit.testing.cri_validation --cri-endpoint ...``, in a pytest of its own
against the private containerd: one test per check, skips reported as skips."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from kubelet_kit.testing.conformance import CHECKS

from .containerd import BUSYBOX_IMAGE, REGISTRY_HOST, SAME_IMAGE_REFS, USER_IMAGES, Containerd
from .cri_validation_run import run_suite
from .test_cri_conformance import KNOWN_QUIRKS

pytestmark = pytest.mark.integration


def _args(containerd: Containerd, *, images: bool) -> list[str]:
    args = [
        "--cri-image",
        BUSYBOX_IMAGE,
        "--cri-missing-image",
        f"{REGISTRY_HOST}/no-such-image:0",
        "--cri-log-root",
        str(containerd.logs),
        "--cri-cgroup-parent",
        f"{containerd.cgroup_parent}/validation",
        "--cri-host-network",
    ]
    if images:
        for ref in SAME_IMAGE_REFS:
            args += ["--cri-same-image-ref", ref]
        for ref, user in USER_IMAGES.items():
            args += ["--cri-user-image", f"{ref}={user}"]
    return args


async def test_the_suite_validates_containerd(containerd: Containerd, tmp_path: Path) -> None:
    work = tmp_path
    outcomes = await asyncio.to_thread(
        run_suite, containerd.endpoint, work, *_args(containerd, images=True)
    )
    assert sorted(outcomes) == sorted(CHECKS)
    failed = {
        check: outcome
        for check, outcome in outcomes.items()
        if outcome.startswith("failed") and KNOWN_QUIRKS.get(check, "\0") not in outcome
    }
    assert not failed, outcomes
    skipped = {c: o for c, o in outcomes.items() if o.startswith("skipped")}
    # containerd 1.6 serves no GetContainerEvents; other skips are what this node
    # lacks, each with its reason.
    assert "events" in skipped, outcomes
    assert all(o.removeprefix("skipped: ") for o in skipped.values()), skipped
    assert outcomes["image_tags"] == outcomes["image_user"] == "passed"
    counts = {"passed": 0, "skipped": 0, "failed": 0}
    for outcome in outcomes.values():
        counts[outcome.split(":", 1)[0]] += 1
    assert counts["passed"] == len(CHECKS) - len(skipped) - counts["failed"], counts
    print(f"containerd through the pytest entry: {counts}; skipped: {sorted(skipped)}")

    # Without the images they need, the image checks are skips, saying so.
    outcomes = await asyncio.to_thread(
        run_suite,
        containerd.endpoint,
        work,
        "-k",
        "image_tags or image_user",
        *_args(containerd, images=False),
    )
    assert outcomes.keys() == {"image_tags", "image_user"}
    assert outcomes["image_tags"].startswith("skipped: no same_image_refs given")
    assert outcomes["image_user"].startswith("skipped: no user_images given")
