"""pytest plugin (entry point ``kubelet_kit``): fixtures for node-policy tests.

Installed with kubelet-kit, so any project's tests can ask for ``fake_clock``,
``fake_runtime``, ``fake_stats`` and ``kubelet_env`` by name::

    async def test_crash_loop(kubelet_env):
        kubelet_env.add_pod(CRASHING_POD)
        await kubelet_env.sleep(600)
        ...

``kubelet_env`` is an async fixture and needs pytest-asyncio (installed with
``kubelet-kit[test]``); without it the plugin offers only the other three.

An ``async def`` test that asks for one of these fixtures runs on its own
event loop with no configuration in the user's project: the plugin marks it
``asyncio`` for pytest-asyncio (as ``asyncio_mode = "auto"`` would, for these
tests only). Tests that use none of the fixtures, and tests already marked,
are left exactly as the project's configuration has them.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import pytest

from kubelet_kit.testing.clock import FakeClock
from kubelet_kit.testing.fake_runtime import FakeRuntime
from kubelet_kit.testing.fake_stats import FakeStatsProvider

if TYPE_CHECKING:
    from kubelet_kit.testing.env import KubeletEnv


#: The fixtures this plugin provides, by name.
FIXTURES = frozenset({"fake_clock", "fake_runtime", "fake_stats", "kubelet_env"})


def _wants_our_fixtures(obj: Any) -> bool:
    try:
        parameters = inspect.signature(obj).parameters
    except (TypeError, ValueError):
        return False
    return not FIXTURES.isdisjoint(parameters)


@pytest.hookimpl(tryfirst=True)
def pytest_pycollect_makeitem(
    collector: pytest.Class | pytest.Module, name: str, obj: object
) -> None:
    """Mark ``async def`` tests that use this plugin's fixtures ``asyncio``.

    Runs before pytest-asyncio looks at the function, so its strict mode (the
    default) takes the test as its own; returns None so collection goes on as
    usual.
    """
    if not (inspect.iscoroutinefunction(obj) and collector.funcnamefilter(name)):
        return
    if not _wants_our_fixtures(obj) or _asyncio_marked(obj):
        return
    try:
        import pytest_asyncio  # noqa: F401
    except ImportError:  # pragma: no cover - without it the test fails as before
        return
    pytest.mark.asyncio(obj)


def _asyncio_marked(obj: object) -> bool:
    marks = getattr(obj, "pytestmark", [])
    return any(getattr(m, "name", None) == "asyncio" for m in marks)


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
