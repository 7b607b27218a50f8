"""The container manager's own tests on a pure cgroup v2 kernel: the real v2
driver tests and the container manager kit against the real v2 driver, which skip
on a machine whose cgroup2 hierarchy delegates no controllers (one with the v1
controllers, as CI's), run here instead."""

from __future__ import annotations

import re

import pytest

from .vm import REPO, boot_vm

pytestmark = pytest.mark.timeout(600)

#: What the real-v2 kit says when it cannot run (tests/test_cm_kit.py).
_KIT_SKIP = "a cgroup2 hierarchy delegating cpu, memory and pids"


def test_container_manager_tests_on_pure_cgroup_v2() -> None:
    python = str(REPO / ".venv" / "bin" / "python")
    # Inside, a check that needs what the VM lacks (cgroup v1) skips as on any
    # machine without it: the real-part requirement is this test's to make.
    command = (
        "KUBELET_KIT_REQUIRE_REAL= "
        f"{python} -m pytest -q -rs -p no:cacheprovider "
        "tests/test_cm_cgroup_v2.py tests/test_cm_kit.py"
    )
    boot = boot_vm(command, cgroup="v2", timeout=540)
    print(boot.output)
    assert boot.exit_code == 0, boot.output
    assert _KIT_SKIP not in boot.output  # the real-v2 kit ran
    assert "writable cgroup2 hierarchy" not in boot.output  # the real-v2 driver tests ran
    passed = re.search(r"(\d+) passed", boot.output)
    assert passed is not None and int(passed.group(1)) >= 50, boot.output
