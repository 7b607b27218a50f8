"""pytest plugin (entry point ``kubelet_kit``): fixtures for node-policy tests.

Installed with kubelet-kit, so any project's tests can ask for ``fake_clock``,
``fake_runtime``, ``fake_stats`` and ``kubelet_env`` by name::

    async def test_crash_loop(kubelet_env):
        kubelet_env.add_pod(CRASHING_POD)
        await kubelet_env.sleep(600)
        ...

``kubelet_env`` is an async fixture and needs pytest-asyncio; without it the
plugin offers only the other two.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

import pytest

from kubelet_kit.testing.clock import FakeClock
from kubelet_kit.testing.fake_runtime import FakeRuntime
from kubelet_kit.testing.fake_stats import FakeStatsProvider

if TYPE_CHECKING:
    from kubelet_kit.testing.env import KubeletEnv


@pytest.fixture
def fake_clock() -> FakeClock:
    """A fresh :class:`FakeClock`."""
    return FakeClock()


@pytest.fixture
def fake_runtime(fake_clock: FakeClock) -> FakeRuntime:
    """A fresh :class:`FakeRuntime` on the test's ``fake_clock``, with events on."""
    return FakeRuntime(fake_clock, events=True)


@pytest.fixture
def fake_stats(fake_clock: FakeClock) -> FakeStatsProvider:
    """A fresh :class:`FakeStatsProvider` on the test's ``fake_clock``."""
    return FakeStatsProvider(clock=fake_clock)


try:
    import pytest_asyncio
except ImportError:  # pragma: no cover - the fixture needs pytest-asyncio
    pass
else:

    @pytest_asyncio.fixture
    async def kubelet_env(
        fake_clock: FakeClock, fake_runtime: FakeRuntime
    ) -> AsyncIterator[KubeletEnv]:
        """A running :class:`kubelet_kit.testing.env.KubeletEnv` on ``fake_clock`` and
        ``fake_runtime``, stopped after the test."""
        # Imported here: the agent pulls in every subsystem, which tests that only
        # want a fake runtime should not pay for.
        from kubelet_kit.testing.env import KubeletEnv

        async with KubeletEnv(clock=fake_clock, runtime=fake_runtime) as env:
            yield env
