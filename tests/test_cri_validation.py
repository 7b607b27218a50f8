"""The CRI validation suite (``pytest -p kubelet_kit.testing.cri_validation``) and
its Python form, against the project's CRIServer serving a fake on the real clock."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import pytest
from integration.cri_validation_run import run_suite

from kubelet_kit.clock import RealClock
from kubelet_kit.cri import CRIServer
from kubelet_kit.testing import FakeRuntime
from kubelet_kit.testing.conformance import CHECKS
from kubelet_kit.testing.cri_validation import validate_cri
from kubelet_kit.testing.fake_runtime import CONFORMANCE_SAME_IMAGE_REFS, CONFORMANCE_USER_IMAGES


def image_args() -> list[str]:
    """The command line's image options for the fake's conformance images."""
    args = []
    for ref in CONFORMANCE_SAME_IMAGE_REFS:
        args += ["--cri-same-image-ref", ref]
    for ref, user in CONFORMANCE_USER_IMAGES.items():
        args += ["--cri-user-image", f"{ref}={user}"]
    return args


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[str]:
    """The endpoint of a CRIServer serving a fake on the real clock that knows the
    kit's images (as ``kubelet-kit cri-server --runtime fake`` does)."""
    runtime = FakeRuntime(RealClock(), events=True, pull_any=True, host_ports="decline")
    runtime.add_conformance_images()
    async with CRIServer(runtime, tmp_path / "cri.sock") as server:
        yield server.endpoint


async def test_the_suite_collects_one_test_per_check_and_reports_skips(
    served: str, tmp_path: Path
) -> None:
    work = tmp_path / "run"
    work.mkdir()
    picked = "image or version_and_status or unknown_ids"
    outcomes = await asyncio.to_thread(run_suite, served, work, "-k", picked, *image_args())
    assert outcomes == dict.fromkeys(
        ["version_and_status", "unknown_ids", "images", "image_tags", "image_user"], "passed"
    )
    # Without the images they need, the image checks are skips.
    outcomes = await asyncio.to_thread(run_suite, served, work, "-k", "image_tags or image_user")
    assert outcomes.keys() == {"image_tags", "image_user"}
    assert outcomes["image_tags"].startswith("skipped: no same_image_refs given")
    assert outcomes["image_user"].startswith("skipped: no user_images given")


def test_the_suite_alone_is_collected_and_names_every_check(tmp_path: Path) -> None:
    (tmp_path / "test_other.py").write_text("def test_other():\n    pass\n")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "kubelet_kit.testing.cri_validation",
            "-p",
            "no:cacheprovider",
            "--cri-endpoint",
            "unix:///nonexistent.sock",
            "--collect-only",
            "-q",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    ids = [line for line in done.stdout.splitlines() if "::" in line]
    assert [i.rsplit("::", 1)[1] for i in ids] == [f"test_check[{c}]" for c in CHECKS]


@pytest.mark.parametrize("bad", [["--cri-same-image-ref", "a:1"], ["--cri-user-image", "a:1"]])
def test_misused_image_options_are_usage_errors(tmp_path: Path, bad: Sequence[str]) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "kubelet_kit.testing.cri_validation",
            "-p",
            "no:cacheprovider",
            "--cri-endpoint",
            "unix:///nonexistent.sock",
            "-k",
            "version_and_status",
            *bad,
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0
    assert bad[0] in done.stdout + done.stderr


async def test_validate_cri_reports_like_run_conformance(served: str, tmp_path: Path) -> None:
    report = await validate_cri(
        served,
        log_root=tmp_path / "logs",
        checks=["images", "image_tags", "image_user"],
        same_image_refs=CONFORMANCE_SAME_IMAGE_REFS,
        user_images=CONFORMANCE_USER_IMAGES,
    )
    assert [r.status for r in report.results] == ["passed"] * 3, report.summary()
