"""pytest plugin (entry point ``kubelet_kit``): fixtures for node-policy tests.

Installed with kubelet-kit, so any project's tests can ask for ``fake_clock``,
``fake_runtime`` and the other fixtures below by name.
"""

from __future__ import annotations

import pytest

from kubelet_kit.testing.clock import FakeClock
from kubelet_kit.testing.fake_runtime import FakeRuntime


@pytest.fixture
def fake_clock() -> FakeClock:
    """A fresh :class:`FakeClock`."""
    return FakeClock()


@pytest.fixture
def fake_runtime(fake_clock: FakeClock) -> FakeRuntime:
    """A fresh :class:`FakeRuntime` on the test's ``fake_clock``, with events on."""
    return FakeRuntime(fake_clock, events=True)
