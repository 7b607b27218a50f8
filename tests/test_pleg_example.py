"""The user-written PLEG of examples/custom_pleg.py plugs in and works."""

from __future__ import annotations

import asyncio
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from kubelet_kit.container import labels
from kubelet_kit.container.interfaces import PodSandboxConfig, PodSandboxMetadata
from kubelet_kit.pleg import PLEG, PodLifecycleEventType
from kubelet_kit.testing import FakeClock
from kubelet_kit.testing.fake_runtime import FakeRuntime

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "custom_pleg.py"


@pytest.fixture(scope="module")
def example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("custom_pleg_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def sandbox_config(uid: str) -> PodSandboxConfig:
    return PodSandboxConfig(
        metadata=PodSandboxMetadata(f"pod-{uid}", "default", uid),
        labels={
            labels.POD_UID: uid,
            labels.POD_NAME: f"pod-{uid}",
            labels.POD_NAMESPACE: "default",
        },
    )


async def settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


def test_satisfies_the_protocol(example: ModuleType) -> None:
    assert isinstance(example.BusPLEG(FakeRuntime(), asyncio.Queue()), PLEG)


async def test_demo_reports_the_announced_pod(example: ModuleType) -> None:
    events = await asyncio.wait_for(example.demo(FakeRuntime(FakeClock())), 5)
    assert [(e.pod_uid, e.type) for e in events] == [("uid-web", PodLifecycleEventType.POD_SYNC)]


async def test_announced_pods_are_cached_before_their_event(example: ModuleType) -> None:
    clock = FakeClock()
    runtime = FakeRuntime(clock)
    bus: asyncio.Queue[str] = asyncio.Queue()
    pleg = example.BusPLEG(runtime, bus, clock)
    assert pleg.healthy() == (False, "pleg has yet to be successful")
    seen: list[int] = []

    async def agent() -> None:
        async for event in pleg.watch():
            status = pleg.cache.get(event.pod_uid).status
            seen.append(len(status.sandbox_statuses))

    run = asyncio.create_task(pleg.run())
    reader = asyncio.create_task(agent())
    await settle()
    assert pleg.healthy() == (True, "")
    sid = await runtime.run_pod_sandbox(sandbox_config("u1"))
    await bus.put("u1")
    await settle()
    assert seen == [1]

    # A pod the runtime no longer has leaves the cache.
    await runtime.remove_pod_sandbox(sid)
    clock.advance(1)
    await bus.put("u1")
    await settle()
    assert "u1" not in pleg.cache
    pleg.stop()
    pleg.stop()
    await asyncio.wait_for(run, 1)
    await asyncio.wait_for(reader, 1)  # the watch ends with the PLEG
    assert not pleg.healthy()[0]
