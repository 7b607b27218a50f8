"""Runtime capabilities: how a runtime declares them, and what the agent does on a
runtime lacking each one (it says so, once, and carries on)."""

from __future__ import annotations

import asyncio
import importlib.util
import logging
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from kubelet_kit.api import load_pod
from kubelet_kit.container import (
    CAPABILITIES,
    ImageSpec,
    PodSandboxConfig,
    PodSandboxMetadata,
    not_offered,
    offers,
    runtime_capabilities,
)
from kubelet_kit.container.streams import stream_mode
from kubelet_kit.errors import ConfigurationError, UnimplementedError
from kubelet_kit.eviction.host_stats import HostStatsProvider
from kubelet_kit.eviction.reclaim import delete_unused_images
from kubelet_kit.node.instrumented import InstrumentedRuntime
from kubelet_kit.node.metrics import KubeletMetrics, new_registry
from kubelet_kit.podsync.hooks import HandlerRunner
from kubelet_kit.podsync.imagegc import ImageGCManager, ImageGCResult
from kubelet_kit.podsync.images import ImagePuller
from kubelet_kit.podsync.logrotate import ContainerLogManager
from kubelet_kit.prober import ProbeKind
from kubelet_kit.prober.probers import ProbeStatus, exec_probe
from kubelet_kit.server import Authenticator, KubeletServer
from kubelet_kit.server.stats import SummaryProvider
from kubelet_kit.testing import FakeClock, FakeRuntime
from kubelet_kit.testing.conformance import run_conformance
from kubelet_kit.testing.env import KubeletEnv

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "toy_runtime.py"
EVERYTHING = frozenset(CAPABILITIES)


@pytest.fixture(scope="module")
def toy() -> ModuleType:
    spec = importlib.util.spec_from_file_location("toy_runtime_capabilities", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def manifest(name: str, **container: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
        "spec": {"containers": [{"name": "app", "image": "busybox", **container}]},
    }


class NoExecFake(FakeRuntime):
    """A full fake whose declaration leaves exec out: exec_sync exists but is not used."""

    capabilities = EVERYTHING - {"exec"}


# ------------------------------------------------------------ declaring capabilities


def test_the_project_runtimes_offer_everything_without_declaring() -> None:
    assert runtime_capabilities(FakeRuntime()) == EVERYTHING


def test_a_declaration_is_what_counts(toy: ModuleType) -> None:
    assert runtime_capabilities(toy.ToyRuntime()) == frozenset()
    assert runtime_capabilities(NoExecFake()) == EVERYTHING - {"exec"}
    assert not offers(NoExecFake(), "exec")
    assert offers(NoExecFake(), "images")
    with pytest.raises(ValueError, match="unknown runtime capability 'teleport'"):
        offers(NoExecFake(), "teleport")


def test_a_declaration_is_checked(toy: ModuleType) -> None:
    class Boastful(toy.ToyRuntime):  # type: ignore[name-defined,misc]
        capabilities = frozenset({"exec", "images"})

    with pytest.raises(ConfigurationError) as info:
        runtime_capabilities(Boastful())
    assert str(info.value) == "Boastful declares exec but has no exec_sync"

    class Dreamer(toy.ToyRuntime):  # type: ignore[name-defined,misc]
        capabilities = frozenset({"teleport"})

    with pytest.raises(
        ConfigurationError, match=r"Dreamer.capabilities: unknown teleport; known: "
    ):
        runtime_capabilities(Dreamer())

    class Stringy(toy.ToyRuntime):  # type: ignore[name-defined,misc]
        capabilities = "exec"

    with pytest.raises(ConfigurationError, match="a set of names, not the string 'exec'"):
        runtime_capabilities(Stringy())


def test_a_wrapper_offers_what_it_wraps(toy: ModuleType) -> None:
    class Wrapper:
        """Forwards every call (but exec_sync, when told to hide it)."""

        def __init__(self, inner: object, hide: str = "") -> None:
            self.inner, self.hide = inner, hide

        def __getattr__(self, name: str) -> object:
            if name in (self.hide, "capabilities"):
                raise AttributeError(name)
            return getattr(self.inner, name)

    assert runtime_capabilities(Wrapper(toy.ToyRuntime())) == frozenset()
    assert runtime_capabilities(Wrapper(NoExecFake())) == EVERYTHING - {"exec"}
    assert runtime_capabilities(Wrapper(FakeRuntime())) == EVERYTHING
    # What the wrapper itself lacks is not offered either.
    hiding = Wrapper(FakeRuntime(), hide="list_images")
    assert runtime_capabilities(hiding) == EVERYTHING - {"images"}
    wrapped = InstrumentedRuntime(toy.ToyRuntime(), KubeletMetrics.for_registry(new_registry()))
    assert wrapped.capabilities == frozenset()
    assert runtime_capabilities(wrapped) == frozenset()


def test_streams_left_out_of_a_declaration_are_not_offered() -> None:
    assert stream_mode(FakeRuntime()) == "direct"

    class NoStreams(FakeRuntime):
        capabilities = EVERYTHING - {"streams"}

    assert stream_mode(NoStreams()) is None


def test_not_offered_names_the_runtime_and_the_capability(toy: ModuleType) -> None:
    error = not_offered(toy.ToyRuntime(), "exec")
    assert isinstance(error, UnimplementedError)
    assert str(error) == "runtime ToyRuntime does not offer exec"


# ------------------------------------------------------------------ the agent's parts


async def test_the_metrics_wrapper_refuses_what_is_not_offered(toy: ModuleType) -> None:
    rt = InstrumentedRuntime(toy.ToyRuntime(), KubeletMetrics.for_registry(new_registry()))
    calls = {
        "exec": lambda: rt.exec_sync("c", ["true"]),
        "images": lambda: rt.list_images(),
        "stats": lambda: rt.pod_sandbox_stats("s"),
        "update_resources": lambda: rt.update_container_resources("c", None),  # type: ignore[arg-type]
        "log_reopen": lambda: rt.reopen_container_log("c"),
    }
    for capability, call in calls.items():
        with pytest.raises(UnimplementedError) as info:
            await call()
        assert str(info.value) == f"runtime ToyRuntime does not offer {capability}"
    with pytest.raises(UnimplementedError, match="runtime ToyRuntime does not offer events"):
        async for _ in rt.get_container_events():
            pass
    assert await rt.image_fs_info() == []
    assert (await rt.version()).runtime_name == "toy"


async def test_an_exec_probe_errs_on_a_runtime_without_exec(toy: ModuleType) -> None:
    for runtime in (toy.ToyRuntime(), NoExecFake()):
        outcome = await exec_probe(runtime, "c", ["true"], 1)
        assert outcome.status is ProbeStatus.UNKNOWN
        assert outcome.output == f"runtime {type(runtime).__name__} does not offer exec"


async def test_a_pod_with_an_exec_probe_gets_a_warning_naming_the_probe(toy: ModuleType) -> None:
    clock = FakeClock()
    runtime = toy.ToyRuntime(now=clock.now)
    probe = {"exec": {"command": ["cat", "/tmp/healthy"]}, "periodSeconds": 5}
    async with KubeletEnv(clock=clock, runtime=runtime, auto_images=False) as env:
        env.add_pod(manifest("probed", livenessProbe=probe))
        await env.wait_for(lambda: env.phase("probed") == "Running")

        def unhealthy() -> list[str]:
            return [
                e.message
                for e in env.kubelet.events.events("uid-probed")
                if (e.type, e.reason, e.container) == ("Warning", "Unhealthy", "app")
            ]

        await env.wait_for(lambda: bool(unhealthy()), what="an Unhealthy event")
        assert unhealthy()[0] == "Liveness probe errored: runtime ToyRuntime does not offer exec"
        await env.sleep(60)
        # A prober error says nothing about the container: it is never restarted.
        status = env.status("probed").container_statuses[0]
        assert (status.restart_count, status.state.running is not None) == (0, True)
        assert env.kubelet.probe_manager.has_probe("uid-probed", "app", ProbeKind.LIVENESS)


async def test_an_exec_hook_fails_on_a_runtime_without_exec(toy: ModuleType) -> None:
    hook = {"postStart": {"exec": {"command": ["touch", "/tmp/started"]}}}
    pod = load_pod(manifest("hooked", lifecycle=hook), source="test")
    container = pod.spec.containers[0]
    assert container.lifecycle is not None and container.lifecycle.post_start is not None
    runner = HandlerRunner(toy.ToyRuntime(), FakeClock())
    failure = await runner.run("container-1", pod, container, container.lifecycle.post_start)
    assert failure == (
        'Exec lifecycle hook ([touch /tmp/started]) for Container "app" in Pod '
        '"hooked_default(uid-hooked)" failed - error: runtime ToyRuntime does not offer '
        'exec, message: ""'
    )


async def test_a_pod_with_an_exec_hook_fails_to_start_on_the_toy(toy: ModuleType) -> None:
    clock = FakeClock()
    runtime = toy.ToyRuntime(now=clock.now)
    hook = {"postStart": {"exec": {"command": ["touch", "/tmp/started"]}}}
    async with KubeletEnv(clock=clock, runtime=runtime, auto_images=False) as env:
        env.add_pod(manifest("hooked", lifecycle=hook))

        def failed() -> bool:
            return any(
                e.reason == "FailedPostStartHook" for e in env.kubelet.events.events("uid-hooked")
            )

        await env.wait_for(failed, what="a FailedPostStartHook event")
        await env.wait_for(
            lambda: (
                bool(env.status("hooked").container_statuses)
                and env.status("hooked").container_statuses[0].restart_count > 0
            ),
            what="the container restarted",
        )
        assert env.phase("hooked") != "Succeeded"


async def test_images_are_taken_as_present_without_an_image_service(
    toy: ModuleType, caplog: pytest.LogCaptureFixture
) -> None:
    events: list[tuple[str, str]] = []
    puller = ImagePuller(
        toy.ToyRuntime(),
        FakeClock(),
        on_event=lambda pod, container, kind, reason, message: events.append((reason, message)),
    )
    pod = load_pod(manifest("img", imagePullPolicy="Always"), source="test")
    container = pod.spec.containers[0]
    with caplog.at_level(logging.INFO, logger="kubelet_kit.podsync.images"):
        assert await puller.ensure_image(pod, container) == "busybox:latest"
        assert await puller.ensure_image(pod, container) == "busybox:latest"
    assert events == []
    said = [r.getMessage() for r in caplog.records if r.name == "kubelet_kit.podsync.images"]
    assert said == [
        "runtime ToyRuntime does not offer images: images are not pulled; "
        "every image is taken as present"
    ]


async def test_image_gc_is_off_without_an_image_service(
    toy: ModuleType, caplog: pytest.LogCaptureFixture
) -> None:
    async def usage() -> tuple[int, int]:
        return 100, 1  # full: a collection would be due

    gc = ImageGCManager(toy.ToyRuntime(), usage, clock=FakeClock())
    with caplog.at_level(logging.INFO, logger="kubelet_kit.podsync.imagegc"):
        assert await gc.detect_images() == set()
        assert await gc.garbage_collect() == ImageGCResult(0)
    said = [r.getMessage() for r in caplog.records if r.name == "kubelet_kit.podsync.imagegc"]
    assert said == ["image garbage collection is off: runtime ToyRuntime does not offer images"]


async def test_eviction_deletes_no_images_without_an_image_service(
    toy: ModuleType, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="kubelet_kit.eviction.reclaim"):
        assert await delete_unused_images(toy.ToyRuntime()) == 0
    assert [r.getMessage() for r in caplog.records] == [
        "eviction: no images to delete: runtime ToyRuntime does not offer images"
    ]


async def test_logs_are_not_rotated_without_log_reopen(
    toy: ModuleType, caplog: pytest.LogCaptureFixture
) -> None:
    manager = ContainerLogManager(toy.ToyRuntime(), clock=FakeClock())
    with caplog.at_level(logging.INFO, logger="kubelet_kit.podsync.logrotate"):
        assert await manager.rotate_logs() == []
        assert await manager.rotate_logs() == []
    assert [r.getMessage() for r in caplog.records] == [
        "container logs are not rotated: runtime ToyRuntime does not offer log_reopen"
    ]


async def _running_sandbox(runtime: Any, uid: str) -> str:
    from kubelet_kit.container import labels

    return str(
        await runtime.run_pod_sandbox(
            PodSandboxConfig(
                metadata=PodSandboxMetadata("p", "default", uid),
                labels={labels.POD_UID: uid, labels.POD_NAME: "p", labels.POD_NAMESPACE: "default"},
            )
        )
    )


async def test_eviction_stats_go_without_the_runtimes_figures(
    toy: ModuleType, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    runtime = toy.ToyRuntime()
    await _running_sandbox(runtime, "uid-p")
    stats = HostStatsProvider(root_dir=tmp_path, runtime=runtime, clock=FakeClock())
    pod = load_pod(manifest("p"), source="test")
    with caplog.at_level(logging.INFO, logger="kubelet_kit.eviction.host_stats"):
        await stats.summary([pod])
        await stats.summary([pod])
    assert [r.getMessage() for r in caplog.records] == [
        "pods are measured without the runtime's figures: runtime ToyRuntime does not offer stats"
    ]


async def test_the_stats_summary_lists_pods_without_figures(
    toy: ModuleType, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    runtime = toy.ToyRuntime()
    await _running_sandbox(runtime, "uid-p")
    clock = FakeClock()
    provider = SummaryProvider(
        runtime,
        node_name="n",
        root_dir=tmp_path,
        pod_logs_dir=tmp_path,
        now=clock.now,
        monotonic=clock.monotonic,
    )
    with caplog.at_level(logging.INFO, logger="kubelet_kit.server.stats"):
        summary = await provider.summary()
        await provider.summary()
    assert [p["podRef"]["uid"] for p in summary["pods"]] == ["uid-p"]
    assert (summary["pods"][0]["cpu"], summary["pods"][0]["memory"]) == ({}, {})
    assert [r.getMessage() for r in caplog.records] == [
        "pod stats are left out: runtime ToyRuntime does not offer stats"
    ]


async def test_the_node_api_says_what_the_runtime_cannot_do(toy: ModuleType) -> None:
    clock = FakeClock()
    runtime = toy.ToyRuntime(now=clock.now)
    async with KubeletEnv(clock=clock, runtime=runtime, auto_images=False) as env:
        env.add_pod(manifest("web"))
        await env.wait_for(lambda: env.phase("web") == "Running")
        server = KubeletServer(env.kubelet, port=None, authenticator=Authenticator(anonymous=True))
        async with TestClient(TestServer(server._app("secure"))) as client:
            resp = await client.post("/run/default/web/app?cmd=ls")
            assert (resp.status, await resp.text()) == (
                501,
                "runtime ToyRuntime does not offer exec\n",
            )
            resp = await client.get("/containerLogs/default/web/app")
            assert (resp.status, await resp.text()) == (
                404,
                'container "app" in pod "web" not found: runtime ToyRuntime does not offer logs\n',
            )
            resp = await client.post("/exec/default/web/app?command=ls&output=1")
            assert resp.status == 501


async def test_the_kit_honours_a_declaration_over_the_methods(tmp_path: Path) -> None:
    clock = FakeClock()
    report = await run_conformance(
        NoExecFake(clock, images=["busybox"]),
        log_root=tmp_path,
        checks=["exec", "container_lifecycle", "images"],
    )
    assert [(r.name, r.status, r.message) for r in report.results] == [
        ("exec", "skipped", "not offered: exec"),
        ("container_lifecycle", "passed", ""),
        ("images", "passed", ""),
    ]


async def test_a_pod_with_an_exec_probe_on_a_fake_declaring_no_exec() -> None:
    runtime = NoExecFake(FakeClock())
    async with KubeletEnv(clock=runtime.clock, runtime=runtime) as env:
        probe = {"exec": {"command": ["true"]}, "periodSeconds": 5}
        env.add_pod(manifest("probed", readinessProbe=probe))
        await env.wait_for(lambda: env.phase("probed") == "Running")
        await env.sleep(20)
        messages = {e.message for e in env.kubelet.events.events("uid-probed")}
        assert "Readiness probe errored: runtime NoExecFake does not offer exec" in messages
        assert not env.status("probed").container_statuses[0].ready
        assert not [c for c in runtime.calls if c.method == "exec_sync"]
    await asyncio.sleep(0)


def test_image_spec_still_imports() -> None:
    # The value types stay where they were.
    assert ImageSpec("busybox").image == "busybox"


def test_runtime_is_the_core_and_every_capability() -> None:
    from kubelet_kit.container import Runtime, RuntimeCore
    from kubelet_kit.container.optional import CAPABILITY_METHODS, protocol_methods

    core = protocol_methods(RuntimeCore)
    assert len(core) == 13 and "exec_sync" not in core
    optional = {
        m
        for cap, ms in CAPABILITY_METHODS.items()
        for m in ms
        if cap in ("exec", "images", "stats", "events", "update_resources")
    }
    assert protocol_methods(Runtime) == core | optional
