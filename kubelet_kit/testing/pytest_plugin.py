"""pytest plugin (entry point ``kubelet_kit``): fixtures for node-policy tests.

Installed with kubelet-kit, so any project's tests can ask for these fixtures by
name, with no conftest and no configuration::

    async def test_crash_loop_backs_off(node, pod, advance):
        node.add_pod(pod("crasher", command=["sh", "-c", "exit 1"]))
        await advance(300)                      # five minutes of loops, instantly
        waiting = node.status("crasher").container_statuses[0].state.waiting
        assert waiting.reason == "CrashLoopBackOff"

Every fixture is fresh for each test, and every fake that keeps time is on the
test's one ``fake_clock``:

``fake_clock``
    A :class:`~kubelet_kit.testing.FakeClock`.
``fake_runtime``
    A :class:`~kubelet_kit.testing.FakeRuntime` on ``fake_clock``, with events on.
``fake_stats``
    A :class:`~kubelet_kit.testing.FakeStatsProvider` on ``fake_clock``.
``node`` (also ``kubelet_env``)
    A running :class:`~kubelet_kit.testing.KubeletEnv`: the real agent
    (pod workers, PLEG, prober, status, back-off) over ``fake_runtime`` on
    ``fake_clock``, stopped after the test. ``node`` and ``kubelet_env`` are two
    names of one fixture: a test asking for both gets one object. Async, so it
    needs pytest-asyncio (installed with ``kubelet-kit[test]``); without it the
    plugin offers the other fixtures only.
``pod``
    :func:`kubelet_kit.testing.make_pod`, a builder of one-container pods:
    ``pod("web", image="nginx", command=[...], restart_policy="Always",
    liveness=[...], requests={...}, limits={...}, host_port=8080)``, which
    ``node.add_pod`` and the fakes take. Outside pytest, call ``make_pod``.
``advance``
    An async callable: ``await advance(600)`` lets ten minutes pass. With a
    ``node`` in the test it is ``node.sleep`` (every loop of the agent runs
    through the interval as it would in real time, and an agent that failed
    fails the test); without, ``fake_clock.run_for``. A synchronous test moves
    time with ``fake_clock.advance(seconds)``.
``fake_pleg``
    A :class:`~kubelet_kit.testing.FakePLEG` following ``fake_runtime`` on
    ``fake_clock`` (it relists while it runs; events can also be emitted by hand).
``fake_probes``
    A :class:`~kubelet_kit.testing.FakeProbeManager` on ``fake_clock``: scripted
    probe results, and exec probes without a script run in ``fake_runtime``.
``fake_eviction``
    A :class:`~kubelet_kit.testing.FakeEvictionManager` on ``fake_clock`` reading
    ``fake_stats`` (the kubelet's default thresholds; pressure can be scripted).
``fake_cm``
    A :class:`~kubelet_kit.testing.FakeContainerManager` (the default capacity).
``fake_volumes``
    A :class:`~kubelet_kit.testing.FakeVolumeManager` on ``fake_clock``.
``fake_events``
    A :class:`~kubelet_kit.testing.FakeEventRecorder` on ``fake_clock``.

A test that asks for ``node`` and for some of the last six gets a node built
with them, in place of the reference PLEG and prober, the stub eviction,
container and volume managers, and the agent's own event log::

    async def test_evicted_under_memory_pressure(node, pod, fake_eviction, advance):
        hog = node.add_pod(pod("hog"))
        await advance(5)
        fake_eviction.set_pressure("MemoryPressure")
        await advance(10)                       # the next eviction round
        assert node.phase("hog") == "Failed"

(A fixture the test uses only through another fixture counts too.) Override any
of them in a ``conftest.py`` to change what they are, e.g. a ``fake_cm`` of
another capacity or a ``fake_runtime`` that declines host ports; ``node`` is then
built with yours.

An ``async def`` test that asks for one of these fixtures runs on its own
event loop with no configuration in the user's project: the plugin marks it
``asyncio`` for pytest-asyncio (as ``asyncio_mode = "auto"`` would, for these
tests only). Tests that use none of the fixtures, tests whose fixture of the
same name is the project's own (a ``node`` fixture in a conftest, a
parametrized ``pod``), and tests already marked ``asyncio``, ``anyio`` or
``trio`` are left exactly as the project's configuration has them.

Importing the plugin (pytest does in every run where kubelet-kit is installed)
loads none of the fakes: each fixture imports what it needs when a test asks for it.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from kubelet_kit.api import Pod
    from kubelet_kit.testing.clock import FakeClock
    from kubelet_kit.testing.env import KubeletEnv
    from kubelet_kit.testing.fake_cm import FakeContainerManager
    from kubelet_kit.testing.fake_events import FakeEventRecorder
    from kubelet_kit.testing.fake_eviction import FakeEvictionManager
    from kubelet_kit.testing.fake_pleg import FakePLEG
    from kubelet_kit.testing.fake_prober import FakeProbeManager
    from kubelet_kit.testing.fake_runtime import FakeRuntime
    from kubelet_kit.testing.fake_stats import FakeStatsProvider
    from kubelet_kit.testing.fake_volume import FakeVolumeManager


#: The fixtures this plugin provides, by name.
FIXTURES = frozenset(
    {
        "advance",
        "fake_clock",
        "fake_cm",
        "fake_events",
        "fake_eviction",
        "fake_pleg",
        "fake_probes",
        "fake_runtime",
        "fake_stats",
        "fake_volumes",
        "kubelet_env",
        "node",
        "pod",
    }
)

#: The fakes a node is built with when the test asks for them: fixture -> the
#: :class:`kubelet_kit.Kubelet` argument it is given as.
NODE_PARTS = {
    "fake_cm": "container_manager",
    "fake_events": "events",
    "fake_eviction": "eviction_manager",
    "fake_pleg": "pleg",
    "fake_probes": "probe_manager",
    "fake_volumes": "volume_manager",
}

#: Marks of async test runners; a test carrying one is its runner's, not ours.
_ASYNC_MARKS = frozenset({"asyncio", "anyio", "trio"})

#: An ``await advance(seconds)`` callable.
Advance = Callable[[float], Awaitable[None]]


# -- collection: mark the async tests that use our fixtures ----------------------------


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
    if _async_marked(collector, obj) or not _uses_our_fixtures(collector, obj):
        return
    try:
        import pytest_asyncio  # noqa: F401
    except ImportError:  # pragma: no cover - without it the test fails as before
        return
    pytest.mark.asyncio(obj)


def _uses_our_fixtures(collector: pytest.Collector, obj: object) -> bool:
    """Whether ``obj`` asks for a fixture that resolves to one of this module's."""
    try:
        parameters = inspect.signature(obj).parameters  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return False
    names = (FIXTURES & set(parameters)) - _parametrized(obj)
    if not names:
        return False
    manager = getattr(collector.session, "_fixturemanager", None)
    for name in sorted(names):
        try:
            defs = manager.getfixturedefs(name, collector)  # type: ignore[union-attr]
        except Exception:  # pragma: no cover - a pytest without the look-up: assume ours
            return True
        # The last definition is the one the test gets (a conftest's overrides ours).
        if defs and getattr(defs[-1].func, "__module__", None) == __name__:
            return True
    return False


def _parametrized(obj: object) -> set[str]:
    """Argument names a ``parametrize`` mark on ``obj`` gives directly."""
    names: set[str] = set()
    for mark in getattr(obj, "pytestmark", []):
        if getattr(mark, "name", None) == "parametrize" and mark.args:
            argnames = mark.args[0]
            if isinstance(argnames, str):
                argnames = argnames.split(",")
            names.update(str(n).strip() for n in argnames)
    return names


def _async_marked(collector: pytest.Collector, obj: object) -> bool:
    marks: Iterable[Any] = [*getattr(obj, "pytestmark", []), *collector.iter_markers()]
    return any(getattr(m, "name", None) in _ASYNC_MARKS for m in marks)


# -- fixtures ------------------------------------------------------------------------
# Each imports its fake when a test asks for it: the plugin is imported by every
# pytest run of a project that installed kubelet-kit, most of which use none.


@pytest.fixture
def fake_clock() -> FakeClock:
    """A fresh :class:`FakeClock`."""
    from kubelet_kit.testing.clock import FakeClock

    return FakeClock()


@pytest.fixture
def fake_runtime(fake_clock: FakeClock) -> FakeRuntime:
    """A fresh :class:`FakeRuntime` on the test's ``fake_clock``, with events on."""
    from kubelet_kit.testing.fake_runtime import FakeRuntime

    return FakeRuntime(fake_clock, events=True)


@pytest.fixture
def fake_stats(fake_clock: FakeClock) -> FakeStatsProvider:
    """A fresh :class:`FakeStatsProvider` on the test's ``fake_clock``."""
    from kubelet_kit.testing.fake_stats import FakeStatsProvider

    return FakeStatsProvider(clock=fake_clock)


@pytest.fixture
def fake_pleg(fake_clock: FakeClock, fake_runtime: FakeRuntime) -> FakePLEG:
    """A :class:`FakePLEG` following ``fake_runtime`` on ``fake_clock``."""
    from kubelet_kit.testing.fake_pleg import FakePLEG

    return FakePLEG.following(fake_runtime, fake_clock)


@pytest.fixture
def fake_probes(fake_clock: FakeClock, fake_runtime: FakeRuntime) -> FakeProbeManager:
    """A :class:`FakeProbeManager` on ``fake_clock``; unscripted exec probes run
    in ``fake_runtime``."""
    from kubelet_kit.testing.fake_prober import FakeProbeManager

    return FakeProbeManager(fake_clock, runtime=fake_runtime)


@pytest.fixture
def fake_eviction(fake_clock: FakeClock, fake_stats: FakeStatsProvider) -> FakeEvictionManager:
    """A :class:`FakeEvictionManager` on ``fake_clock`` reading ``fake_stats``."""
    from kubelet_kit.testing.fake_eviction import FakeEvictionManager

    return FakeEvictionManager(clock=fake_clock, stats=fake_stats)


@pytest.fixture
def fake_cm() -> FakeContainerManager:
    """A :class:`FakeContainerManager` with the default capacity."""
    from kubelet_kit.testing.fake_cm import FakeContainerManager

    return FakeContainerManager()


@pytest.fixture
def fake_volumes(fake_clock: FakeClock) -> FakeVolumeManager:
    """A :class:`FakeVolumeManager` on ``fake_clock``."""
    from kubelet_kit.testing.fake_volume import FakeVolumeManager

    return FakeVolumeManager(clock=fake_clock)


@pytest.fixture
def fake_events(fake_clock: FakeClock) -> FakeEventRecorder:
    """A :class:`FakeEventRecorder` on ``fake_clock``."""
    from kubelet_kit.testing.fake_events import FakeEventRecorder

    return FakeEventRecorder(fake_clock)


@pytest.fixture
def pod() -> Callable[..., Pod]:
    """:func:`kubelet_kit.testing.make_pod`: ``pod("web", command=[...], ...)``."""
    from kubelet_kit.testing.builders import make_pod

    return make_pod


@pytest.fixture
def advance(request: pytest.FixtureRequest, fake_clock: FakeClock) -> Advance:
    """``await advance(seconds)``: the node's ``sleep`` when the test has a node,
    else ``fake_clock.run_for``."""
    if not {"node", "kubelet_env"}.isdisjoint(request.fixturenames):
        env: KubeletEnv = request.getfixturevalue("kubelet_env")
        return env.sleep
    return fake_clock.run_for


@pytest.fixture
def _kubelet_kit_node_parts(request: pytest.FixtureRequest) -> dict[str, Any]:
    """The fakes the test asked for that the node is built with, as Kubelet arguments."""
    return {
        argument: request.getfixturevalue(fixture)
        for fixture, argument in NODE_PARTS.items()
        if fixture in request.fixturenames
    }


try:
    import pytest_asyncio
except ImportError:  # pragma: no cover - the node fixtures need pytest-asyncio
    pass
else:

    @pytest_asyncio.fixture
    async def kubelet_env(
        fake_clock: FakeClock,
        fake_runtime: FakeRuntime,
        _kubelet_kit_node_parts: dict[str, Any],
    ) -> AsyncIterator[KubeletEnv]:
        """A running :class:`kubelet_kit.testing.env.KubeletEnv` on ``fake_clock`` and
        ``fake_runtime`` (with the fakes the test asked for), stopped after the test."""
        # Imported here: the agent pulls in every subsystem.
        from kubelet_kit.testing.env import KubeletEnv

        async with KubeletEnv(
            clock=fake_clock, runtime=fake_runtime, **_kubelet_kit_node_parts
        ) as env:
            yield env

    @pytest.fixture
    def node(kubelet_env: KubeletEnv) -> KubeletEnv:
        """The test's running :class:`~kubelet_kit.testing.KubeletEnv` (``kubelet_env``)."""
        return kubelet_env
