"""What the tests of HostProcessRuntime share: a bounded wait on real processes,
fixtures giving runtimes, sandboxes and their state roots (whose teardown kills,
then checks, every process a test left), and builders of containers run in them.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kubelet_kit.clock import Clock
from kubelet_kit.container import (
    ContainerConfig,
    ContainerMetadata,
    ContainerState,
    ImageSpec,
    PodSandboxConfig,
    PodSandboxMetadata,
)
from kubelet_kit.container.logs import join_output, read_log
from kubelet_kit.runtimes import HostProcessRuntime

WAIT = 10.0  # upper bound, in real seconds, on any wait for a real process


def _start_ticks(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    fields = stat[stat.rfind(b")") + 2 :].split()
    return None if fields[0] in (b"Z", b"X") else int(fields[19])


def _recorded_processes(root: Path) -> list[tuple[int, int | None, bool]]:
    """(pid, start ticks, is a group leader) of every shim and process under root."""
    found = []
    for start in root.glob("containers/*/start.json"):
        data = json.loads(start.read_text())
        found.append((data["pid"], data["pid_start"], True))
        found.append((data["shim_pid"], data["shim_start"], False))
    return found


def _alive(pid: int, ticks: int | None) -> bool:
    return ticks is not None and _start_ticks(pid) == ticks


async def _poll(predicate: Callable[[], bool], what: str, limit: float = WAIT) -> None:
    deadline = time.monotonic() + limit
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


@pytest.fixture
def roots() -> Iterator[list[Path]]:
    """State roots used by a test; teardown kills and then checks their processes."""
    made: list[Path] = []
    yield made
    leftovers = []
    for root in made:
        for pid, ticks, leader in _recorded_processes(root):
            if _alive(pid, ticks):
                leftovers.append(pid)
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pid, signal.SIGKILL) if leader else os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + WAIT
    for root in made:
        for pid, ticks, _ in _recorded_processes(root):
            while _alive(pid, ticks) and time.monotonic() < deadline:
                time.sleep(0.02)
            assert not _alive(pid, ticks), f"process {pid} survived teardown"


@pytest.fixture
def make_runtime(tmp_path: Path, roots: list[Path]) -> Callable[..., HostProcessRuntime]:
    def make(
        clock: Clock | None = None, name: str = "root", **kwargs: object
    ) -> HostProcessRuntime:
        root = tmp_path / name
        if root not in roots:
            roots.append(root)
        return HostProcessRuntime(root, clock=clock, **kwargs)  # type: ignore[arg-type]

    return make


@pytest.fixture
def runtime(make_runtime: Callable[..., HostProcessRuntime]) -> HostProcessRuntime:
    return make_runtime()


@pytest.fixture
def sandbox_config(tmp_path: Path) -> PodSandboxConfig:
    return PodSandboxConfig(
        metadata=PodSandboxMetadata(name="web", namespace="default", uid="uid-1"),
        hostname="web-pod",
        log_directory=str(tmp_path / "logs"),
        labels={"app": "web"},
    )


@pytest.fixture
async def sandbox(runtime: HostProcessRuntime, sandbox_config: PodSandboxConfig) -> str:
    return await runtime.run_pod_sandbox(sandbox_config)


def container(name: str, *argv: str, attempt: int = 0, **kwargs: object) -> ContainerConfig:
    return ContainerConfig(
        metadata=ContainerMetadata(name=name, attempt=attempt),
        image=ImageSpec("busybox"),
        command=argv[:1],
        args=argv[1:],
        log_path=f"{name}/{attempt}.log",
        **kwargs,  # type: ignore[arg-type]
    )


async def run(rt: HostProcessRuntime, sid: str, sb: PodSandboxConfig, cfg: ContainerConfig) -> str:
    cid = await rt.create_container(sid, cfg, sb)
    await rt.start_container(cid)
    return cid


async def wait_exited(rt: HostProcessRuntime, cid: str) -> None:
    async def exited() -> bool:
        return (await rt.container_status(cid)).state is ContainerState.EXITED

    deadline = time.monotonic() + WAIT
    while not await exited():
        assert time.monotonic() < deadline, f"container {cid} did not exit"
        await asyncio.sleep(0.02)


def log_of(sb: PodSandboxConfig, cfg: ContainerConfig) -> Path:
    return Path(sb.log_directory) / cfg.log_path


async def wait_log(path: Path, text: bytes) -> None:
    def has() -> bool:
        return path.exists() and text in join_output(read_log(path))

    await _poll(has, f"{text!r} in {path}")
