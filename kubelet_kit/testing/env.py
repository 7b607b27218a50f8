"""KubeletEnv: the whole agent on fakes, where minutes pass in milliseconds.

A node-policy test reads like a story of what happens on the node::

    async with KubeletEnv() as env:
        env.add_pod(CRASHING_POD)
        await env.sleep(600)                    # ten minutes of loops, instantly
        status = env.status("crasher")
        assert status.container_statuses[0].state.waiting.reason == "CrashLoopBackOff"

The agent is a real :class:`kubelet_kit.Kubelet` (real pod workers, PLEG, status
generation, back-off) over a :class:`FakeRuntime` on a :class:`FakeClock`; pods
come from a :class:`kubelet_kit.config.ProgrammaticSource`.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import tempfile
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

from kubelet_kit.api import Pod, PodStatus, load_pod
from kubelet_kit.config import ProgrammaticSource
from kubelet_kit.container import ContainerFilter, ContainerState, labels
from kubelet_kit.testing.clock import FakeClock
from kubelet_kit.testing.fake_runtime import FakeRuntime

__all__ = ["KubeletEnv", "stub_parts"]


def stub_parts(**given: Any) -> dict[str, Any]:
    """Keyword arguments for :class:`kubelet_kit.Kubelet` that leave the machine
    alone, with ``given`` on top: stub container, volume and eviction managers
    (no cgroups, no mounts, no host stats), no image GC and no log rotation.

    ``Kubelet(**stub_parts(runtime=FakeRuntime()))`` is the composer with only
    the parts under test real.
    """
    from kubelet_kit.cm import StubContainerManager
    from kubelet_kit.eviction import StubEvictionManager
    from kubelet_kit.volume import StubVolumeManager

    parts: dict[str, Any] = {
        "container_manager": StubContainerManager(),
        "volume_manager": StubVolumeManager(),
        "eviction_manager": StubEvictionManager(),
        "image_gc": None,
        "container_log_manager": None,
    }
    parts.update(given)
    return parts


class KubeletEnv:
    """A Kubelet wired with fakes and a FakeClock.

    Args:
        clock: The FakeClock (default a new one).
        runtime: The FakeRuntime (default a new one on ``clock``). Images named by
            pods added through :meth:`add_pod` are made available to it unless
            ``auto_images`` is False.
        auto_images: Add each pod's images to the fake runtime before it runs.
        step: Clock seconds per step of :meth:`wait_for`.
        kubelet_options: Further keyword arguments for :class:`kubelet_kit.Kubelet`
            (managers, ``sync_frequency``, ...); the parts not given are those of
            :func:`stub_parts` and the reference PLEG and prober.
    """

    def __init__(
        self,
        *,
        clock: FakeClock | None = None,
        runtime: FakeRuntime | None = None,
        auto_images: bool = True,
        step: float = 1.0,
        **kubelet_options: Any,
    ) -> None:
        from kubelet_kit.kubelet import Kubelet

        self.clock = clock or FakeClock()
        self.runtime = runtime or FakeRuntime(self.clock)
        self.auto_images = auto_images
        self.step = step
        self.source = ProgrammaticSource(clock=self.clock)
        self._tmp = tempfile.TemporaryDirectory(prefix="kubelet-kit-env-")
        root = Path(self._tmp.name)
        kubelet_options.setdefault("node_name", "fake-node")
        # A documentation address (TEST-NET-1): no look-up of the real host's.
        kubelet_options.setdefault("host_ip", "192.0.2.10")
        kubelet_options.setdefault("root_dir", root)
        kubelet_options.setdefault("pod_logs_dir", root / "logs")
        sources = [self.source, *kubelet_options.pop("sources", ())]
        self.kubelet = Kubelet(
            **stub_parts(runtime=self.runtime, clock=self.clock, sources=sources, **kubelet_options)
        )
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> KubeletEnv:
        self._task = asyncio.create_task(self.kubelet.run(), name="kubelet-env")
        await self.clock.settle()
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.kubelet.stop()
        if self._task is not None:
            # Let the loops see the stop without any clock time passing.
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait_for(self._task, timeout=10)
        self._tmp.cleanup()

    # -- pods --------------------------------------------------------------------------

    def add_pod(self, manifest: Pod | Mapping[str, Any] | str) -> Pod:
        """Give the agent a pod (a Pod, a manifest dict, or YAML/JSON text)."""
        pod = manifest if isinstance(manifest, Pod) else load_pod(manifest, source="test")
        if self.auto_images:
            for container in pod.spec.all_containers():
                self.runtime.add_image(container.image)
        self.source.add(pod)
        return pod

    def delete_pod(self, name: str, *, grace_period_seconds: int | None = None) -> None:
        """Delete a pod gracefully, as an API server's delete would."""
        self.source.delete(self.pod(name).metadata.uid, grace_period_seconds=grace_period_seconds)

    def remove_pod(self, name: str) -> None:
        """Drop a pod from its source (as deleting a static pod's file does)."""
        self.source.remove(self.pod(name).metadata.uid)

    def pod(self, name: str) -> Pod:
        """The pod named ``name`` as the source holds it."""
        for pod in self.source.pods():
            if pod.metadata.name == name:
                return pod
        raise KeyError(f"no pod named {name!r}")

    def status(self, name: str) -> PodStatus:
        """The current status of pod ``name`` (an empty status before the first sync)."""
        status = self.kubelet.pod_status(self.pod(name).metadata.uid)
        return status if status is not None else PodStatus()

    def phase(self, name: str) -> str:
        """The current phase of pod ``name``."""
        return self.status(name).phase

    async def running_containers(self, pod_uid: str) -> list[str]:
        """Names of the pod's containers running in the runtime now."""
        return [
            c.metadata.name
            for c in await self.runtime.list_containers(
                ContainerFilter(
                    state=ContainerState.RUNNING, label_selector={labels.POD_UID: pod_uid}
                )
            )
        ]

    # -- time --------------------------------------------------------------------------

    async def sleep(self, seconds: float) -> None:
        """Let ``seconds`` of agent time pass, every loop running as it would."""
        remaining = seconds
        while remaining > 0:
            chunk = min(self.step, remaining)
            await self.clock.run_for(chunk)
            remaining -= chunk
            self._raise_if_crashed()

    async def wait_for(
        self,
        predicate: Callable[[], bool | Awaitable[bool]],
        *,
        timeout: float = 600.0,
        what: str = "",
    ) -> float:
        """Let time pass until ``predicate()`` holds; returns the clock seconds it took.

        ``predicate`` may be a plain function or a coroutine function.

        Raises:
            TimeoutError: still false after ``timeout`` seconds of agent time.
        """

        async def holds() -> bool:
            result = predicate()
            return bool(await result) if inspect.isawaitable(result) else bool(result)

        start = self.clock.monotonic()
        await self.clock.settle()
        while not await holds():
            if self.clock.monotonic() - start >= timeout:
                raise TimeoutError(
                    f"{what or 'condition'} not reached within {timeout:g}s of agent time"
                )
            await self.clock.run_for(self.step)
            self._raise_if_crashed()
        return self.clock.monotonic() - start

    def _raise_if_crashed(self) -> None:
        if self._task is not None and self._task.done() and not self._task.cancelled():
            exc = self._task.exception()
            if exc is not None:
                raise RuntimeError("the agent stopped with an error") from exc
