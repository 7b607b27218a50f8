"""pytest plugin (entry point ``kubelet_kit``): fixtures for node-policy tests.

Installed with kubelet-kit, so any project's tests can ask for ``fake_clock`` and
the other fixtures below by name.
"""

from __future__ import annotations

import pytest

from kubelet_kit.testing.clock import FakeClock


@pytest.fixture
def fake_clock() -> FakeClock:
    """A fresh :class:`FakeClock`."""
    return FakeClock()
