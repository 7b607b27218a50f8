"""Shared fixtures of the project's own tests."""

from __future__ import annotations

import os
from collections.abc import Callable

import pytest

#: Set by CI: a real part (containerd, cgroups, root) that is missing fails the run
#: instead of skipping the test.
REQUIRE_REAL = os.environ.get("KUBELET_KIT_REQUIRE_REAL") == "1"


def require_real_part(available: bool, what: str) -> None:
    """Skip the calling test when ``what`` is missing, or fail it under CI."""
    if available:
        return
    if REQUIRE_REAL:
        pytest.fail(f"{what} is required here (KUBELET_KIT_REQUIRE_REAL=1) but missing")
    pytest.skip(f"{what} not available")


@pytest.fixture
def require_real() -> Callable[[bool, str], None]:
    """``require_real(available, what)``: skip, or fail under CI, when a part is missing."""
    return require_real_part
