"""Validate any CRI endpoint with the Runtime conformance kit, as a pytest suite.

A pytest plugin that runs every check of
:data:`~kubelet_kit.testing.conformance.CHECKS` against a CRI runtime (containerd,
CRI-O, ``kubelet-kit cri-server``, your own) through
:class:`~kubelet_kit.cri.CRIRuntime`, one test per check::

    pytest -p kubelet_kit.testing.cri_validation \\
        --cri-endpoint unix:///run/containerd/containerd.sock \\
        --cri-image registry.example/busybox:1.36 \\
        --cri-cgroup-parent /kubelet-kit-validation --cri-host-network \\
        --cri-same-image-ref registry.example/app:1 \\
        --cri-same-image-ref registry.example/app:v1 \\
        --cri-user-image registry.example/uid:1=1002 \\
        --cri-user-image registry.example/name:1=www-data

gives ``test_check[version_and_status]``, ``test_check[images]``... A check the
runtime cannot run (an optional call it does not offer, a field it declines,
images the check needs but was not given) is reported as a skip with the reason;
``-k`` picks checks as usual. With ``--cri-endpoint`` and no paths on the command
line, only these tests are collected; with paths, they run beside the tests there.
The options:

- ``--cri-endpoint``: ``unix:///path``, ``/path`` or ``tcp://host:port``
  (without it the plugin adds nothing);
- ``--cri-image``: a busybox-compatible image the runtime can pull (``busybox``);
- ``--cri-missing-image``: a reference that cannot be pulled;
- ``--cri-log-root``: a directory the runtime writes container logs under and
  this process can read (default: each test's ``tmp_path``);
- ``--cri-cgroup-parent``: the cgroup parent of every sandbox, as the kubelet
  always gives one (some runtimes measure sandbox stats through it);
- ``--cri-host-network``: run the sandboxes in the host's network namespace (for a
  runtime without a CNI network);
- ``--cri-same-image-ref`` (repeated, two or more): references of one image, for
  ``image_tags``;
- ``--cri-user-image REF=USER`` (repeated): an image and the ``User`` its config
  names, for ``image_user``;
- ``--cri-timeout``: the most seconds any wait of a check takes (30), and the
  deadline of each CRI call (twice that).

The same from Python, as a report (:func:`validate_cri`) or as a parametrised
test of a test module of your own (:func:`cri_conformance_test`)::

    report = await validate_cri("unix:///run/containerd/containerd.sock",
                                log_root="/tmp/kk-logs", host_network=True)
    print(report.summary())

    test_my_cri = cri_conformance_test("unix:///run/my-runtime.sock", image="busybox:1.36")

The checks create sandboxes in the namespace
``kubelet-kit-conformance`` and remove them afterwards; the image checks remove
the images they were given.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any

import pytest

from kubelet_kit.container.interfaces import (
    NamespaceOptions,
    PodSandboxConfig,
    PodSandboxMetadata,
)
from kubelet_kit.testing.conformance import (
    CHECKS,
    ConformanceReport,
    _pytest_outcome,
    _run_one,
    conformance_test,
    run_conformance,
)

__all__ = ["cri_conformance_test", "sandbox_template", "validate_cri"]

_GROUP = "cri-validation"


# ----------------------------------------------------------------------- Python


def sandbox_template(*, cgroup_parent: str = "", host_network: bool = False) -> PodSandboxConfig:
    """The sandbox config every check's sandbox starts from (the kit sets its
    metadata, labels and log directory).

    Args:
        cgroup_parent: The sandboxes' cgroup parent ("" leaves it to the runtime).
        host_network: Run the sandboxes in the host's network namespace.
    """
    return PodSandboxConfig(
        metadata=PodSandboxMetadata("template", "template", "template"),
        namespace_options=NamespaceOptions(host_network=host_network),
        cgroup_parent=cgroup_parent,
    )


def _cri_runtime(endpoint: str, timeout: float) -> Any:
    # Imported here: gRPC is paid for only when a CRI endpoint is validated.
    from kubelet_kit.cri import CRIRuntime

    return CRIRuntime(endpoint, timeout=timeout)


async def validate_cri(
    endpoint: str,
    *,
    log_root: str | os.PathLike[str],
    cgroup_parent: str = "",
    host_network: bool = False,
    timeout: float = 30.0,
    **options: Any,
) -> ConformanceReport:
    """Run the conformance kit against the CRI runtime at ``endpoint``.

    Never raises for a failed check (``report.raise_for_failures()`` does).

    Args:
        endpoint: ``unix:///path``, ``/path`` or ``tcp://host:port``.
        log_root: A directory the runtime writes container logs under and this
            process can read.
        cgroup_parent: The sandboxes' cgroup parent (see :func:`sandbox_template`).
        host_network: Run the sandboxes in the host's network namespace.
        timeout: The most seconds any wait takes; each CRI call's deadline is
            twice that.
        **options: Further arguments of
            :func:`~kubelet_kit.testing.conformance.run_conformance` (``image``,
            ``same_image_refs``, ``user_images``, ``checks``...).
    """
    runtime = _cri_runtime(endpoint, 2 * timeout)
    try:
        return await run_conformance(
            runtime,
            log_root=log_root,
            timeout=timeout,
            sandbox_template=sandbox_template(
                cgroup_parent=cgroup_parent, host_network=host_network
            ),
            **options,
        )
    finally:
        await runtime.close()


def cri_conformance_test(
    endpoint: str,
    *,
    cgroup_parent: str = "",
    host_network: bool = False,
    timeout: float = 30.0,
    **options: Any,
) -> Callable[..., Coroutine[Any, Any, None]]:
    """A pytest test, one parametrised case per check, against the CRI runtime at
    ``endpoint`` (:func:`~kubelet_kit.testing.conformance.conformance_test` over a
    :class:`~kubelet_kit.cri.CRIRuntime`; ``async``, so it needs pytest-asyncio).

    The arguments are those of :func:`validate_cri`, without ``log_root`` (each
    case logs under its ``tmp_path``).
    """
    return conformance_test(
        lambda: _cri_runtime(endpoint, 2 * timeout),
        timeout=timeout,
        sandbox_template=sandbox_template(cgroup_parent=cgroup_parent, host_network=host_network),
        **options,
    )


# ------------------------------------------------------------------ the plugin


def pytest_addoption(parser: pytest.Parser) -> None:
    """The ``--cri-*`` options (see the module docstring)."""
    group = parser.getgroup(_GROUP, "CRI validation (kubelet-kit conformance kit)")
    group.addoption("--cri-endpoint", metavar="ENDPOINT", help="the CRI endpoint to validate")
    group.addoption(
        "--cri-image", default="busybox", metavar="REF", help="a busybox-compatible image"
    )
    group.addoption(
        "--cri-missing-image",
        default="registry.invalid/kubelet-kit/no-such-image:0",
        metavar="REF",
        help="a reference that cannot be pulled",
    )
    group.addoption(
        "--cri-log-root", metavar="DIR", help="where container logs go (default: tmp_path)"
    )
    group.addoption("--cri-cgroup-parent", default="", metavar="CGROUP", help="sandboxes' parent")
    group.addoption(
        "--cri-host-network", action="store_true", help="run sandboxes on the host network"
    )
    group.addoption(
        "--cri-same-image-ref",
        action="append",
        default=[],
        metavar="REF",
        help="a reference of one image (give two or more), for image_tags",
    )
    group.addoption(
        "--cri-user-image",
        action="append",
        default=[],
        metavar="REF=USER",
        help="an image and the User its config names, for image_user",
    )
    group.addoption(
        "--cri-timeout", type=float, default=30.0, metavar="SECONDS", help="longest wait"
    )


def pytest_configure(config: pytest.Config) -> None:
    """Collect this module's tests when ``--cri-endpoint`` is given: alone when
    no paths are on the command line, else beside the tests there."""
    if not config.getoption("cri_endpoint", default=None):
        return
    if config.args_source is not pytest.Config.ArgsSource.ARGS:
        config.args[:] = []
    if __file__ not in config.args:
        config.args.append(__file__)


def _user_images(given: Sequence[str]) -> dict[str, str]:
    images = {}
    for item in given:
        ref, sep, user = item.rpartition("=")
        if not sep or not ref:
            raise pytest.UsageError(f"--cri-user-image: {item!r} is not REF=USER")
        images[ref] = user
    return images


def _settings(config: pytest.Config) -> tuple[str, str | None, float, dict[str, Any]]:
    """The endpoint, log root, timeout and run_conformance options the command
    line gives."""
    get = config.getoption
    refs = list(get("cri_same_image_ref"))
    if len(refs) == 1:
        raise pytest.UsageError("--cri-same-image-ref: give two or more references of one image")
    options: dict[str, Any] = {
        "image": get("cri_image"),
        "missing_image": get("cri_missing_image"),
        "same_image_refs": refs,
        "user_images": _user_images(get("cri_user_image")),
        "timeout": get("cri_timeout"),
        "sandbox_template": sandbox_template(
            cgroup_parent=get("cri_cgroup_parent"), host_network=get("cri_host_network")
        ),
    }
    return get("cri_endpoint"), get("cri_log_root"), get("cri_timeout"), options


@pytest.mark.parametrize("check", list(CHECKS))
def test_check(check: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    """One check of the kit against the ``--cri-endpoint`` runtime."""
    if not request.config.getoption("cri_endpoint", default=None):
        pytest.skip("no --cri-endpoint given (run with -p kubelet_kit.testing.cri_validation)")
    endpoint, log_root, timeout, options = _settings(request.config)
    report = asyncio.run(
        _run_one(
            lambda: _cri_runtime(endpoint, 2 * timeout),
            check,
            log_root or tmp_path,
            options,
        )
    )
    _pytest_outcome(report, check)
