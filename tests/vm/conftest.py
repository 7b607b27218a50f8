"""The VM tests run only when ``KUBELET_KIT_VM=1`` asks for them: each boots a VM
under qemu's TCG, which takes seconds to minutes.

Asked for, they need what ``scripts/test-vm`` needs: root, and apt-get to install
qemu and the static busybox and to fetch the kernel (a Debian machine). Where
that is missing they skip, or fail under ``KUBELET_KIT_REQUIRE_REAL=1`` (as CI
sets it); a VM that does not boot or does not run its command fails its test.
"""

from __future__ import annotations

import functools
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from .vm import VM_TESTS_ENABLED

_HERE = Path(__file__).parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    skip = pytest.mark.skip(reason="boots a VM: set KUBELET_KIT_VM=1 (docs/vm-tests.md)")
    for item in items:
        if _HERE in item.path.parents:
            item.add_marker(pytest.mark.vm)
            if not VM_TESTS_ENABLED:
                item.add_marker(skip)


@functools.cache
def vm_missing_parts() -> tuple[str, ...]:
    """What this machine lacks to boot a test VM (empty when it can)."""
    missing = []
    if os.geteuid() != 0:
        missing.append("root")
    if shutil.which("apt-get") is None:
        missing.append("apt-get")
    return tuple(missing)


@pytest.fixture(autouse=True)
def _vm_host(require_real: Callable[[bool, str], None]) -> None:
    """Skip (or fail under CI) a VM test where no VM can boot."""
    missing = vm_missing_parts()
    if missing:
        require_real(False, " and ".join(missing) + " (to boot a test VM)")
