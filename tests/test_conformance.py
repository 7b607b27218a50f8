"""The Runtime conformance kit, run against FakeRuntime and against broken runtimes."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import pytest

from kubelet_kit.container import (
    ContainerFilter,
    ContainerInfo,
    ContainerStatus,
    ExecResult,
    PodSandboxConfig,
)
from kubelet_kit.errors import AlreadyExistsError, ContainerStartError
from kubelet_kit.testing import FakeClock, FakeRuntime
from kubelet_kit.testing.conformance import (
    CHECKS,
    ConformanceFailure,
    check_runtime,
    conformance_test,
    run_conformance,
)


def fake() -> FakeRuntime:
    return FakeRuntime(FakeClock(), images=["busybox"], events=True)


async def test_fake_runtime_passes_every_check(tmp_path: Path) -> None:
    report = await check_runtime(fake(), log_root=tmp_path)
    assert [r.name for r in report.results] == list(CHECKS)
    assert {r.status for r in report.results} == {"passed"}, report.summary()


async def test_fake_runtime_cleans_up_after_itself(tmp_path: Path) -> None:
    rt = fake()
    await check_runtime(rt, log_root=tmp_path)
    assert await rt.list_pod_sandboxes() == []
    assert await rt.list_containers() == []


async def test_events_check_skips_a_runtime_without_events(tmp_path: Path) -> None:
    rt = FakeRuntime(FakeClock(), images=["busybox"])
    report = await check_runtime(rt, log_root=tmp_path)
    assert report.result("events").status == "skipped"
    assert "UnimplementedError" not in report.result("events").message
    assert "no event stream" in report.result("events").message


async def test_missing_image_fails_container_checks_with_setup_step(tmp_path: Path) -> None:
    rt = FakeRuntime(FakeClock())  # the registry knows no image
    report = await run_conformance(rt, log_root=tmp_path, checks=["images", "exec"])
    assert report.result("images").status == "failed"
    assert report.result("images").message.startswith("pull_image('busybox')")
    assert report.result("exec").message.startswith("setup: pull_image('busybox')")


def test_unknown_check_name_is_refused(tmp_path: Path) -> None:
    import asyncio

    with pytest.raises(ValueError, match="unknown check"):
        asyncio.run(run_conformance(fake(), log_root=tmp_path, checks=["nope"]))


# ------------------------------------------------------- broken runtimes must fail


class LosesExitCodes(FakeRuntime):
    """Reports every exited container as exit 0."""

    async def container_status(self, container_id: str) -> ContainerStatus:
        st = await super().container_status(container_id)
        return attrs.evolve(st, exit_code=0)


class LosesLabels(FakeRuntime):
    """Lists containers without their labels."""

    async def list_containers(self, filter: ContainerFilter | None = None) -> list[ContainerInfo]:
        listed = await super().list_containers(None)
        stripped = [attrs.evolve(c, labels={}) for c in listed]
        return [c for c in stripped if filter is None or filter.matches(c)]


class NoLogFile(FakeRuntime):
    """Writes log lines without the CRI timestamp and stream prefix."""

    def _write_log(self, c: Any, stream: str, text: str) -> None:
        super()._write_log(attrs.evolve(c, log_path=""), stream, text)
        if c.log_path:
            with open(c.log_path, "a", encoding="utf-8") as f:
                f.write(text + "\n")


class StartsTwice(FakeRuntime):
    """Lets a running container be started again."""

    async def start_container(self, container_id: str) -> None:
        with contextlib.suppress(ContainerStartError):
            await super().start_container(container_id)


class IgnoresExecTimeout(FakeRuntime):
    """Runs exec without its timeout."""

    async def exec_sync(
        self, container_id: str, cmd: Sequence[str], timeout: float | None = None
    ) -> ExecResult:
        return await super().exec_sync(container_id, cmd, None)


class AllowsDuplicateSandboxes(FakeRuntime):
    """Creates a second sandbox for the same pod attempt instead of refusing."""

    async def run_pod_sandbox(self, config: PodSandboxConfig) -> str:
        try:
            return await super().run_pod_sandbox(config)
        except AlreadyExistsError:
            md = attrs.evolve(config.metadata, attempt=config.metadata.attempt + 1000)
            return await super().run_pod_sandbox(attrs.evolve(config, metadata=md))


class KillsAtOnce(FakeRuntime):
    """Ignores the stop grace period: SIGKILL straight away."""

    async def stop_container(self, container_id: str, timeout: float) -> None:
        await super().stop_container(container_id, 0)


@pytest.mark.parametrize(
    ("runtime_class", "failing", "message"),
    [
        (LosesExitCodes, "exit_codes_and_logs", "exit_code of `echo hello; exit 3`: expected 3"),
        (LosesLabels, "container_lifecycle", "ids listed as CREATED"),
        (NoLogFile, "exit_codes_and_logs", "CRI-format stdout line 'hello'"),
        (StartsTwice, "container_lifecycle", "start_container (again, while running): "),
        (AllowsDuplicateSandboxes, "duplicate_names", "a second sandbox with the same"),
        (KillsAtOnce, "sigterm_ignored", "before its 2s stop timeout"),
        (IgnoresExecTimeout, "exec", "exec_sync with timeout: did not return within 6s"),
    ],
)
async def test_broken_runtime_fails_the_kit(
    tmp_path: Path, runtime_class: type[FakeRuntime], failing: str, message: str
) -> None:
    rt = runtime_class(FakeClock(), images=["busybox"], events=True)
    with pytest.raises(ConformanceFailure) as info:
        await check_runtime(rt, log_root=tmp_path, timeout=5)
    report = info.value.report
    assert failing in [r.name for r in report.failures]
    assert message in report.result(failing).message
    assert f"FAIL {failing}" in str(info.value)


async def test_hung_runtime_fails_within_bounded_time(tmp_path: Path) -> None:
    clock = FakeClock()
    rt = FakeRuntime(clock, images=["busybox"])
    rt.set_latency("stop_container", 1e9)
    t0 = clock.monotonic()
    report = await run_conformance(
        rt, log_root=tmp_path, checks=["container_lifecycle"], timeout=3, stop_timeout=1
    )
    assert report.result("container_lifecycle").message == (
        "stop_container(timeout=1): stop_container: did not return within 4s"
    )
    assert clock.monotonic() - t0 < 10


# --------------------------------------------------- the three-line pytest helper

test_fake_runtime_conformance = conformance_test(fake)
