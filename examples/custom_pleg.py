"""A PLEG of your own: pod changes announced on a message bus.

Some platforms already know when a pod changes (a runtime hook, a message
broker, a device agent); polling the runtime every second is then wasted work.
This PLEG takes pod uids from an ``asyncio.Queue`` (the "bus"), inspects each
announced pod, stores its status in a :class:`~kubelet_kit.pleg.PodCache` and
sends a ``PodSync`` event. It satisfies :class:`kubelet_kit.pleg.PLEG` without
inheriting from anything, so ``Kubelet(pleg=BusPLEG(...))`` accepts it.

Plugging it into the agent takes one argument::

    bus: asyncio.Queue[str] = asyncio.Queue()
    kubelet = Kubelet(runtime=runtime, pleg=BusPLEG(runtime, bus))

Run it: ``python examples/custom_pleg.py`` (an in-memory FakeRuntime).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from kubelet_kit.clock import Clock, RealClock
from kubelet_kit.container import Runtime
from kubelet_kit.container.pods import get_pod_status, get_pods
from kubelet_kit.errors import ContainerRuntimeError
from kubelet_kit.pleg import EventChannel, PLEGMetrics, PodCache, PodLifecycleEvent
from kubelet_kit.pleg import PodLifecycleEventType as EventType


class BusPLEG:
    """Inspects the pods whose uids arrive on ``bus``; one PodSync event each."""

    def __init__(self, runtime: Runtime, bus: asyncio.Queue[str], clock: Clock | None = None):
        self.runtime, self.bus, self.clock = runtime, bus, clock or RealClock()
        self._cache = PodCache()
        self._events = EventChannel(PLEGMetrics())  # bounded (1000), drops counted
        self._task: asyncio.Task[str] | None = None
        self._running = False

    @property
    def cache(self) -> PodCache:
        """The statuses of the pods announced so far."""
        return self._cache

    async def run(self) -> None:
        """Take uids off the bus until stop(); RuntimeError if already running."""
        if self._running:
            raise RuntimeError("BusPLEG.run: already running")
        self._running = True
        self._events.open()
        try:
            while True:
                self._task = asyncio.ensure_future(self.bus.get())
                try:
                    uid = await self._task
                except asyncio.CancelledError:
                    if self._running:  # cancelled from outside, not by stop()
                        raise
                    return
                if await self.update_cache(uid):
                    self._events.send(PodLifecycleEvent(uid, EventType.POD_SYNC))
        finally:
            self._running = False
            self._events.close()

    def stop(self) -> None:
        """Make run() return; idempotent."""
        self._running = False
        if self._task is not None:
            self._task.cancel()

    def watch(self) -> AsyncIterator[PodLifecycleEvent]:
        """The events, for one consumer; ends after stop()."""
        return self._events.watch()

    def healthy(self) -> tuple[bool, str]:
        """Healthy while running."""
        return (True, "") if self._running else (False, "pleg has yet to be successful")

    async def update_cache(self, pod_uid: str) -> bool:
        """Inspect one pod now; False if the cache already held something newer.

        Raises:
            ContainerRuntimeError: the runtime failed; the error is cached too.
        """
        timestamp = self.clock.now()  # before asking: the status holds all before it
        pod = next((p for p in await get_pods(self.runtime) if p.uid == pod_uid), None)
        if pod is None:
            self._cache.delete(pod_uid, timestamp)
            return True
        try:
            status = await get_pod_status(
                self.runtime, pod.uid, pod.name, pod.namespace, timestamp=timestamp
            )
        except ContainerRuntimeError as err:
            # The agent reads the failure from the cache, as from the reference PLEGs.
            self._cache.set(pod_uid, None, err, timestamp)
            raise
        return self._cache.set(pod_uid, status, None, timestamp)


async def demo(runtime: Runtime, clock: Clock | None = None) -> list[PodLifecycleEvent]:
    """Start a pod, announce it on the bus, return the events the PLEG sent."""
    from kubelet_kit.container import labels
    from kubelet_kit.container.interfaces import PodSandboxConfig, PodSandboxMetadata

    bus: asyncio.Queue[str] = asyncio.Queue()
    pleg = BusPLEG(runtime, bus, clock)
    received: list[PodLifecycleEvent] = []
    run = asyncio.create_task(pleg.run())
    config = PodSandboxConfig(
        metadata=PodSandboxMetadata("web", "default", "uid-web"),
        labels={labels.POD_UID: "uid-web", labels.POD_NAME: "web", labels.POD_NAMESPACE: "default"},
    )
    await runtime.run_pod_sandbox(config)
    await bus.put("uid-web")  # what the platform's hook would publish
    async for event in pleg.watch():
        received.append(event)
        status = pleg.cache.get(event.pod_uid).status
        sandboxes = len(status.sandbox_statuses) if status else 0
        print(f"{event.type.value} {event.pod_uid}: {sandboxes} sandbox(es) in the cache")
        pleg.stop()
    await run
    return received


if __name__ == "__main__":
    from kubelet_kit.testing import FakeClock
    from kubelet_kit.testing.fake_runtime import FakeRuntime

    asyncio.run(demo(FakeRuntime(FakeClock())))
