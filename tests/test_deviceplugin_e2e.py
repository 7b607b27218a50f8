"""End to end: the example widget plugin, the device manager of a running agent, and
pods asking for widgets, over real unix-socket gRPC.

The agent runs on FakeRuntime + FakeClock; the gRPC traffic runs in real time, so
the test interleaves clock steps with short real waits, bounded.
"""

from __future__ import annotations

import asyncio
import importlib.util
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kubelet_kit.api import load_pod
from kubelet_kit.cm import StubContainerManager
from kubelet_kit.cm.devicemanager import CHECKPOINT_NAME, DeviceManager
from kubelet_kit.container import ContainerConfig
from kubelet_kit.testing import FakeClock, FakeRuntime
from kubelet_kit.testing.env import KubeletEnv

RES = "example.com/widget"
EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "device_plugin.py"


def _load_example() -> Any:
    spec = importlib.util.spec_from_file_location("device_plugin_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


example = _load_example()


async def step_until(
    clock: FakeClock, predicate: Callable[[], bool], what: str, real_timeout: float = 15.0
) -> None:
    """Let agent time pass in small steps, with short real waits for gRPC."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + real_timeout
    while not predicate():
        if loop.time() > deadline:
            raise AssertionError(f"{what}: not reached within {real_timeout}s")
        await clock.run_for(0.2)
        await asyncio.sleep(0.005)


def widget_pod(name: str, count: int) -> Any:
    return load_pod(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
            "spec": {
                "containers": [
                    {
                        "name": "app",
                        "image": "busybox",
                        "env": [{"name": "OWN", "value": "1"}],
                        "resources": {"limits": {RES: str(count)}},
                    }
                ]
            },
        }
    )


def configs_of(runtime: FakeRuntime, pod_uid: str) -> list[ContainerConfig]:
    out = []
    for call in runtime.calls_to("create_container"):
        config = call.args[1]
        if config.labels.get("io.kubernetes.pod.uid") == pod_uid:
            out.append(config)
    return out


def env_of(config: ContainerConfig) -> dict[str, str]:
    return {kv.key: kv.value for kv in config.envs}


@pytest.fixture
def plugins_dir() -> Iterator[Path]:
    d = Path(tempfile.mkdtemp(prefix="dp-"))  # unix socket paths are short
    yield d
    shutil.rmtree(d, ignore_errors=True)


def agent(
    clock: FakeClock, runtime: FakeRuntime, plugins_dir: Path
) -> tuple[KubeletEnv, DeviceManager, StubContainerManager]:
    dm = DeviceManager(plugins_dir=plugins_dir, clock=clock)
    cm = StubContainerManager(device_manager=dm)
    return KubeletEnv(clock=clock, runtime=runtime, container_manager=cm), dm, cm


def widgets(cm: StubContainerManager) -> tuple[int, int]:
    cap, alloc = cm.node_capacity().get(RES), cm.node_allocatable().get(RES)
    return (cap.value() if cap else -1, alloc.value() if alloc else -1)


async def test_widgets_end_to_end(plugins_dir: Path) -> None:
    clock = FakeClock()
    runtime = FakeRuntime(clock)
    env, dm, cm = agent(clock, runtime, plugins_dir)
    plugin = example.WidgetPlugin(2, plugins_dir=plugins_dir, clock=clock)
    plugin_task: asyncio.Task[None] | None = None
    try:
        async with env:
            # Registration: the plugin finds the agent's socket and registers.
            plugin_task = asyncio.create_task(plugin.run())
            await step_until(clock, lambda: widgets(cm) == (2, 2), "widgets in capacity")
            assert plugin.registrations == 1

            # A pod asking for one widget runs with the plugin's environment.
            env.add_pod(widget_pod("one", 1))
            await step_until(clock, lambda: env.phase("one") == "Running", "pod one running")
            [config] = configs_of(runtime, "uid-one")
            assert env_of(config)["WIDGET_IDS"] == "widget-0"
            assert env_of(config)["OWN"] == "1"
            assert config.annotations["example.com/widget-ids"] == "widget-0"
            assert plugin.allocated == [("widget-0",)]

            # Asking for more than is free is refused at admission.
            env.add_pod(widget_pod("greedy", 2))
            await step_until(clock, lambda: env.phase("greedy") == "Failed", "greedy refused")
            status = env.status("greedy")
            assert status.reason == "UnexpectedAdmissionError"
            assert status.message == (
                "Pod was rejected: "
                f"Allocate failed due to requested number of devices unavailable for {RES}. "
                "Requested: 2, Available: 1, which is unexpected"
            )

            # The plugin restarts: its devices go unhealthy, then come back.
            plugin.stop()
            await asyncio.wait_for(plugin_task, 10)
            await step_until(clock, lambda: widgets(cm) == (2, 0), "plugin gone")
            plugin = example.WidgetPlugin(2, plugins_dir=plugins_dir, clock=clock)
            plugin_task = asyncio.create_task(plugin.run())
            await step_until(clock, lambda: widgets(cm) == (2, 2), "plugin registered again")
            info = dm.plugin(RES)
            assert info is not None and info.connected
        # The agent stopped; the pod's container still runs in the runtime.
        assert (plugins_dir / CHECKPOINT_NAME).exists()
        assert not dm.socket_path.exists()

        # A new agent on the same node: the assignment is kept from the checkpoint.
        env2, dm2, cm2 = agent(clock, runtime, plugins_dir)
        # Its source still wants pod one (a pod no source wants is stopped and its
        # devices freed by housekeeping).
        env2.add_pod(widget_pod("one", 1))
        async with env2:
            # The agent's start reads the checkpoint (in a thread) before its loops run.
            await step_until(clock, lambda: dm2.socket_path.exists(), "new agent started")
            assert dm2.pod_devices("uid-one") == {"app": {RES: ("widget-0",)}}
            # The plugin sees its socket removed by the new agent and registers again.
            await step_until(clock, lambda: widgets(cm2) == (2, 2), "plugin re-registered")
            assert plugin.registrations == 2
            await step_until(clock, lambda: env2.phase("one") == "Running", "pod one adopted")
            # widget-0 stays with pod one: a second pod gets widget-1, a third none.
            env2.add_pod(widget_pod("two", 1))
            await step_until(clock, lambda: env2.phase("two") == "Running", "pod two running")
            assert env_of(configs_of(runtime, "uid-two")[0])["WIDGET_IDS"] == "widget-1"
            env2.add_pod(widget_pod("three", 1))
            await step_until(clock, lambda: env2.phase("three") == "Failed", "three refused")
            assert env2.status("three").reason == "UnexpectedAdmissionError"
            # Pod one's container crashes and restarts with the same widget, without
            # a new Allocate.
            [cid] = [
                c.id
                for c in await runtime.list_containers()
                if c.labels.get("io.kubernetes.pod.uid") == "uid-one"
            ]
            runtime.exit_container(cid, 1)
            await step_until(
                clock,
                lambda: len(configs_of(runtime, "uid-one")) == 2,
                "pod one restarted",
                real_timeout=20,
            )
            assert env_of(configs_of(runtime, "uid-one")[1])["WIDGET_IDS"] == "widget-0"
            assert ("widget-0",) not in plugin.allocated

            # Deleting a pod frees its widget for the next one.
            env2.delete_pod("two")
            await step_until(
                clock, lambda: "uid-two" not in _holders(dm2), "pod two freed", real_timeout=20
            )
    finally:
        plugin.stop()
        if plugin_task is not None:
            await asyncio.wait_for(plugin_task, 10)


def _holders(dm: DeviceManager) -> set[str]:
    return {uid for uid in ("uid-one", "uid-two", "uid-three") if dm.pod_devices(uid)}


async def test_failed_allocate_waits_and_is_retried(plugins_dir: Path) -> None:
    clock = FakeClock()
    runtime = FakeRuntime(clock)
    env, _, cm = agent(clock, runtime, plugins_dir)

    class Flaky(example.WidgetPlugin):  # type: ignore[misc]
        failures = 1

        async def allocate(self, device_ids: Any) -> Any:
            if self.failures:
                self.failures -= 1
                raise RuntimeError("widget firmware is loading")
            return await super().allocate(device_ids)

    plugin = Flaky(1, plugins_dir=plugins_dir, clock=clock)
    task: asyncio.Task[None] | None = None
    try:
        async with env:
            task = asyncio.create_task(plugin.run())
            await step_until(clock, lambda: widgets(cm) == (1, 1), "widget registered")
            env.add_pod(widget_pod("one", 1))

            seen: list[str] = []

            def waited() -> bool:
                # The waiting status can be brief (the retry may follow within one
                # step), so each one seen is kept.
                statuses = env.status("one").container_statuses
                waiting = statuses[0].state.waiting if statuses else None
                if waiting is not None and waiting.reason == "CreateContainerConfigError":
                    seen.append(waiting.message)
                seen.extend(
                    e.message for e in env.kubelet.events.events("uid-one") if e.reason == "Failed"
                )
                return bool(seen)

            await step_until(clock, waited, "container waits")
            assert all("widget firmware is loading" in m for m in seen), seen
            await step_until(
                clock, lambda: env.phase("one") == "Running", "retried and running", real_timeout=30
            )
            assert env_of(configs_of(runtime, "uid-one")[0])["WIDGET_IDS"] == "widget-0"
    finally:
        plugin.stop()
        if task is not None:
            await asyncio.wait_for(task, 10)


async def test_a_plugin_whose_socket_the_agent_cleared_serves_again_and_registers(
    plugins_dir: Path,
) -> None:
    """A plugin that came up first loses its socket when the agent starts and clears
    the directory (as the kubelet does): its registration fails at once as
    unreachable, not after the dial timeout, and its next check serves again."""
    clock = FakeClock()
    plugin = example.WidgetPlugin(1, plugins_dir=plugins_dir, clock=clock)
    await plugin.serve()
    dm = DeviceManager(plugins_dir=plugins_dir, clock=clock)
    await dm.start()
    task: asyncio.Task[None] | None = None
    try:
        with pytest.raises(ConnectionError, match="no such socket"):
            await asyncio.wait_for(plugin.register(), 5)
        task = asyncio.create_task(plugin.run())
        await step_until(clock, lambda: dm.capacity().get(RES) == 1, "registered again")
    finally:
        plugin.stop()
        if task is not None:
            await asyncio.wait_for(task, 10)
        await dm.stop()


async def test_a_socket_removed_as_the_plugin_starts_serving_is_served_again(
    plugins_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The agent clearing its directory can remove the plugin's socket between the
    server binding it and the plugin noting it: the plugin must still see it gone."""
    from kubelet_kit.deviceplugin import plugin as plugin_module

    clock = FakeClock()
    dm = DeviceManager(plugins_dir=plugins_dir, clock=clock)
    await dm.start()
    plugin = example.WidgetPlugin(1, plugins_dir=plugins_dir, clock=clock)
    real = plugin_module._identity
    raced = []

    def identity_with_a_race(path: Path) -> Any:
        if path == plugin.socket_path and not raced and path.exists():
            raced.append(path)
            path.unlink()  # removed just as serve() notes it
        return real(path)

    monkeypatch.setattr(plugin_module, "_identity", identity_with_a_race)
    task = asyncio.create_task(plugin.run())
    try:
        await step_until(clock, lambda: dm.capacity().get(RES) == 1, "registered")
        assert raced
    finally:
        plugin.stop()
        await asyncio.wait_for(task, 10)
        await dm.stop()
