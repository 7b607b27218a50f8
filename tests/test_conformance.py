"""The Runtime conformance kit, run against FakeRuntime and against broken runtimes."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import attrs
import pytest

from kubelet_kit.container import (
    ContainerConfig,
    ContainerFilter,
    ContainerInfo,
    ContainerState,
    ContainerStatus,
    ExecResult,
    Mount,
    MountPropagation,
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
from kubelet_kit.testing.fake_runtime import CONFORMANCE_SAME_IMAGE_REFS, CONFORMANCE_USER_IMAGES

#: The images the image checks take, as the fake's conformance images name them.
IMAGES: dict[str, Any] = {
    "same_image_refs": CONFORMANCE_SAME_IMAGE_REFS,
    "user_images": CONFORMANCE_USER_IMAGES,
}


def fake() -> FakeRuntime:
    # It declines host ports: the port_mappings check connects to them for real.
    rt = FakeRuntime(FakeClock(), images=["busybox"], events=True, host_ports="decline")
    rt.add_conformance_images()
    return rt


#: Checks the fake declines (besides apparmor, which needs the node's AppArmor);
#: Bidirectional propagation: its containers cannot make mounts.
SKIPPED_BY_FAKE: frozenset[str] = frozenset({"port_mappings", "mount_propagation_bidirectional"})
#: Checks the kit skips without root: it makes mounts on the host.
NEEDS_ROOT: frozenset[str] = frozenset(
    {"mount_propagation_private", "mount_propagation_host_to_container"}
)


async def test_fake_runtime_passes_every_check(tmp_path: Path) -> None:
    report = await check_runtime(fake(), log_root=tmp_path, **IMAGES)
    assert [r.name for r in report.results] == list(CHECKS)
    # The fake's node has no AppArmor, as this one may not either.
    skipped = {r.name for r in report.results if r.status == "skipped"}
    allowed = {"apparmor"} | SKIPPED_BY_FAKE | (NEEDS_ROOT if os.geteuid() != 0 else set())
    assert skipped <= allowed, report.summary()
    assert not report.failures, report.summary()


async def test_fake_runtime_cleans_up_after_itself(tmp_path: Path) -> None:
    rt = fake()
    await check_runtime(rt, log_root=tmp_path)
    assert await rt.list_pod_sandboxes() == []
    assert await rt.list_containers() == []


async def test_events_check_skips_a_runtime_without_events(tmp_path: Path) -> None:
    rt = FakeRuntime(FakeClock(), images=["busybox"], host_ports="decline")
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


class FailsBeforeStop(FakeRuntime):
    """Its containers' shell fails on its own (says so in the log, exits 2) when a
    stop comes."""

    async def stop_container(self, container_id: str, timeout: float) -> None:
        c = self._containers[container_id]
        if c.state is ContainerState.RUNNING:
            self._write_log(c, "stderr", "sh: can't fork: Resource temporarily unavailable")
            self._finish(c, 2)
        await super().stop_container(container_id, timeout)


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


class AppliesMountsWrongly(FakeRuntime):
    """Applies each mount changed by ``change`` while reporting it as asked."""

    def __init__(self, *args: Any, change: Callable[[Mount], Mount], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.change = change
        self.asked: dict[str, tuple[Mount, ...]] = {}

    async def create_container(
        self, pod_sandbox_id: str, config: ContainerConfig, sandbox_config: PodSandboxConfig
    ) -> str:
        applied = attrs.evolve(config, mounts=tuple(self.change(m) for m in config.mounts))
        cid = await super().create_container(pod_sandbox_id, applied, sandbox_config)
        self.asked[cid] = config.mounts
        return cid

    async def container_status(self, container_id: str) -> ContainerStatus:
        st = await super().container_status(container_id)
        return attrs.evolve(st, mounts=self.asked.get(container_id, st.mounts))


class IgnoresWorkingDir(FakeRuntime):
    """Starts every container in ``/``."""

    async def create_container(
        self, pod_sandbox_id: str, config: ContainerConfig, sandbox_config: PodSandboxConfig
    ) -> str:
        config = attrs.evolve(config, working_dir="")
        return await super().create_container(pod_sandbox_id, config, sandbox_config)


@pytest.mark.parametrize(
    ("make", "failing", "message"),
    [
        (
            lambda: AppliesMountsWrongly(
                FakeClock(), images=["busybox"], change=lambda m: attrs.evolve(m, readonly=False)
            ),
            "volumes",
            "in a read-only mount succeeded",
        ),
        (
            lambda: AppliesMountsWrongly(
                FakeClock(),
                images=["busybox"],
                change=lambda m: attrs.evolve(m, propagation=MountPropagation.HOST_TO_CONTAINER),
            ),
            "mount_propagation_private",
            "is seen in a private mount",
        ),
        (
            lambda: AppliesMountsWrongly(
                FakeClock(), images=["busybox"], change=lambda m: attrs.evolve(m, host_path="/")
            ),
            "volumes",
            "No such file",
        ),
        (
            lambda: IgnoresWorkingDir(FakeClock(), images=["busybox"]),
            "working_dir_and_envs",
            "the container's process printing",
        ),
    ],
)
async def test_runtime_misapplying_mounts_or_working_dir_fails_the_kit(
    tmp_path: Path, make: Callable[[], FakeRuntime], failing: str, message: str
) -> None:
    if failing.startswith("mount_propagation") and os.geteuid() != 0:
        pytest.skip("the propagation checks need root to mount on the host")
    report = await run_conformance(make(), log_root=tmp_path, checks=[failing], timeout=5)
    assert report.result(failing).status == "failed", report.summary()
    assert message in report.result(failing).message, report.summary()


@pytest.mark.parametrize(
    ("runtime_class", "failing", "message"),
    [
        (LosesExitCodes, "exit_codes_and_logs", "exit_code of `echo hello; exit 3`: expected 3"),
        (LosesLabels, "container_lifecycle", "ids listed as CREATED"),
        (NoLogFile, "exit_codes_and_logs", "CRI-format stdout line 'hello'"),
        (StartsTwice, "container_lifecycle", "start_container (again, while running): "),
        (
            FailsBeforeStop,
            "container_lifecycle",
            "expected 143 (SIGTERM) or 137 (SIGKILL), got 2 (reason 'Error'; the container's "
            "log: 20",
        ),
        (FailsBeforeStop, "container_lifecycle", "stderr F sh: can't fork"),
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
    rt = FakeRuntime(clock, images=["busybox"], host_ports="decline")
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

test_fake_runtime_conformance = conformance_test(fake, **IMAGES)
