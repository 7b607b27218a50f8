"""The VM tests run only when ``KUBELET_KIT_VM=1`` asks for them: each boots a VM
under qemu's TCG, which takes seconds to minutes."""

from __future__ import annotations

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
