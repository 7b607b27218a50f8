"""The pod source kit against the project's sources (programmatic, static-pod
directory, manifest URL on a local server), the fake, and sources that break the
contract; and the fake's own call log, problems, faults and end."""

from __future__ import annotations

import asyncio
import json
import shutil
import tempfile
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

import pytest
from aiohttp import web

from kubelet_kit.api.loading import load_pod
from kubelet_kit.config import HTTPSource, PodConfig, ProgrammaticSource, SourceSnapshot
from kubelet_kit.errors import ValidationError
from kubelet_kit.testing import ConformanceFailure, FakeClock
from kubelet_kit.testing.fake_source import FakePodSource
from kubelet_kit.testing.kit import KitContext, run_kit
from kubelet_kit.testing.source_kit import (
    CHECKS,
    DirectoryHarness,
    PodSourceConformance,
    ProgrammaticHarness,
    check_pod_source,
    pod_manifest,
)

pytestmark = pytest.mark.timeout(120)


class TestProgrammaticSource(PodSourceConformance):
    def make(self) -> ProgrammaticHarness:
        return ProgrammaticHarness()


class TestFakePodSource(PodSourceConformance):
    def make(self) -> ProgrammaticHarness:
        return ProgrammaticHarness(FakePodSource())


class TestFileSource(PodSourceConformance):
    def make(self, ctx: KitContext[Any]) -> DirectoryHarness:
        directory = tempfile.mkdtemp(prefix="kit-static-")
        ctx.defer(lambda: shutil.rmtree(directory, ignore_errors=True))
        return DirectoryHarness(directory)


class URLHarness:
    """An HTTPSource on a local server whose body is the published manifests
    (a v1 PodList), checked every 20 s of its FakeClock."""

    def __init__(self) -> None:
        self.body = b""
        self.clock = FakeClock()
        self.runner: web.AppRunner | None = None
        self.source: HTTPSource

    async def start(self) -> URLHarness:
        async def manifest(_: web.Request) -> web.Response:
            return web.Response(body=self.body, content_type="application/json")

        app = web.Application()
        app.router.add_get("/pods", manifest)
        self.runner = web.AppRunner(app)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        port = self.runner.addresses[0][1]
        self.source = HTTPSource(
            f"http://127.0.0.1:{port}/pods", node_name="kit-node", clock=self.clock
        )
        return self

    async def publish(self, manifests: Sequence[Mapping[str, Any]]) -> None:
        items = list(manifests)
        self.body = json.dumps({"apiVersion": "v1", "kind": "PodList", "items": items}).encode()

    async def tick(self) -> None:
        self.clock.advance(20)
        await asyncio.sleep(0)

    async def aclose(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()


class TestHTTPSource(PodSourceConformance):
    async def make(self) -> URLHarness:
        return await URLHarness().start()


# ------------------------------------------------------------ broken sources


class DiffSource(ProgrammaticSource):
    """Yields only the pods new since the last snapshot."""

    async def snapshots(self) -> AsyncIterator[SourceSnapshot]:
        seen: set[str] = set()
        async for snap in super().snapshots():
            new = tuple(p for p in snap.pods if p.uid not in seen)
            seen |= {p.uid for p in snap.pods}
            yield SourceSnapshot(new)


class StickySource(ProgrammaticSource):
    """Never lets a pod go."""

    def set_pods(self, pods: Any) -> None:
        for pod in pods:
            self.add(pod)
        self._publish()


class LateSource(ProgrammaticSource):
    """Says nothing until something changes."""

    async def snapshots(self) -> AsyncIterator[SourceSnapshot]:
        self._changed.clear()
        await self._changed.wait()
        async for snap in super().snapshots():
            yield snap


class Swallowing(ProgrammaticHarness):
    """Drops invalid manifests without a word."""

    async def publish(self, manifests: Sequence[Mapping[str, Any]]) -> None:
        good = []
        for m in manifests:
            try:
                load_pod(m)
            except ValidationError:
                continue
            good.append(m)
        await super().publish(good)


@pytest.mark.parametrize(
    ("factory", "check", "message"),
    [
        (lambda: ProgrammaticHarness(DiffSource()), "snapshots_are_complete_sets", "['a', 'b']"),
        (lambda: ProgrammaticHarness(StickySource()), "removed_pod_disappears", "['b']"),
        (lambda: ProgrammaticHarness(LateSource()), "first_snapshot_is_prompt", "no snapshot"),
        (Swallowing, "invalid_pod_is_reported", "no problem names spec.containers[0].image"),
    ],
)
async def test_the_kit_catches_a_broken_source(factory: Any, check: str, message: str) -> None:
    with pytest.raises(ConformanceFailure):
        await check_pod_source(factory, names=[check], timeout=0.3)
    report = await run_kit(CHECKS, factory, names=[check], options={"timeout": 0.3})
    failed = {r.name: r.message for r in report.results if r.status == "failed"}
    assert check in failed and message in failed[check], failed


# ------------------------------------------------------------ the fake itself


async def test_the_fake_logs_calls_and_reports_problems() -> None:
    source = FakePodSource("file")
    bad = pod_manifest("x")
    del bad["spec"]["containers"][0]["image"]
    source.set_manifests([pod_manifest("a"), bad])
    stream = source.snapshots()
    first = await anext(stream)
    assert [p.metadata.name for p in first.pods] == ["kit-a"]
    assert first.problems == ("[1] default/kit-x: spec.containers[0].image: Required value",)
    # A change an update may not make is reported, and the pod held stays.
    renamed = pod_manifest("a")
    renamed["spec"]["containers"][0]["name"] = "other"
    source.set_manifests([renamed])
    second = await anext(stream)
    assert second.pods == first.pods
    assert second.problems[0].startswith("[0] default/kit-a: spec: Forbidden")
    source.remove("kit-uid-a")
    assert (await anext(stream)).pods == ()
    assert [c.method for c in source.calls] == [
        "set_manifests",
        "snapshots",
        "set_manifests",
        "remove",
    ]
    source.set_pods([])
    assert source.problems == ()
    await stream.aclose()


async def test_an_injected_error_crashes_the_stream_and_pod_config_restarts_it() -> None:
    clock = FakeClock()
    source = FakePodSource()
    source.set_manifests([pod_manifest("a")])
    boom = RuntimeError("source bug")
    problems: list[str] = []
    config = PodConfig(source, clock=clock, on_problem=problems.append)
    updates = config.updates()
    first = await anext(updates)
    assert [p.metadata.name for p in first.pods] == ["kit-a"]
    source.inject_error("snapshots", boom)
    source.set_manifests([pod_manifest("a"), pod_manifest("b")])
    pending = asyncio.ensure_future(anext(updates))
    await clock.run_for(60)
    update = await asyncio.wait_for(pending, 5)
    assert [p.metadata.name for p in update.pods] == ["kit-b"]
    assert problems == ["pod source api failed: RuntimeError: source bug"]
    assert len(source.calls_to("snapshots")) == 2
    await updates.aclose()


async def test_stop_ends_the_stream() -> None:
    source = FakePodSource()
    stream = source.snapshots()
    await anext(stream)
    source.stop()
    source.stop()
    with pytest.raises(StopAsyncIteration):
        await anext(stream)
