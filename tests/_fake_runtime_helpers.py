"""Builders shared by the FakeRuntime tests: sandbox and container configs of a
pod, and starting a container running a script in a fresh sandbox."""

from __future__ import annotations

from collections.abc import AsyncIterator

from kubelet_kit.container import (
    ContainerConfig,
    ContainerEvent,
    ContainerMetadata,
    ImageSpec,
    KeyValue,
    PodSandboxConfig,
    PodSandboxMetadata,
)
from kubelet_kit.container import labels as klabels
from kubelet_kit.testing import FakeRuntime


def sandbox_config(
    name: str = "web", uid: str = "uid-1", attempt: int = 0, log_dir: str = ""
) -> PodSandboxConfig:
    return PodSandboxConfig(
        metadata=PodSandboxMetadata(name, "default", uid, attempt),
        log_directory=log_dir,
        labels={klabels.POD_NAME: name, klabels.POD_NAMESPACE: "default", klabels.POD_UID: uid},
    )


def container_config(
    name: str = "app",
    script: str | None = None,
    *,
    attempt: int = 0,
    env: dict[str, str] | None = None,
    log_path: str = "",
    uid: str = "uid-1",
) -> ContainerConfig:
    return ContainerConfig(
        metadata=ContainerMetadata(name, attempt),
        image=ImageSpec("busybox"),
        command=("sh", "-c", script) if script is not None else (),
        envs=tuple(KeyValue(k, v) for k, v in (env or {}).items()),
        labels={klabels.POD_UID: uid, klabels.CONTAINER_NAME: name},
        annotations={klabels.CONTAINER_RESTART_COUNT: str(attempt)},
        log_path=log_path,
    )


async def start(
    rt: FakeRuntime, script: str | None, name: str = "app", **kw: object
) -> tuple[str, str]:
    sc = sandbox_config(log_dir=str(kw.pop("log_dir", "")))
    sid = await rt.run_pod_sandbox(sc)
    cid = await rt.create_container(sid, container_config(name, script, **kw), sc)  # type: ignore[arg-type]
    await rt.start_container(cid)
    return sid, cid


async def next_event(stream: AsyncIterator[ContainerEvent]) -> ContainerEvent:
    return await anext(stream)


async def start_other(rt: FakeRuntime) -> tuple[str, str]:
    sc = sandbox_config(name="other", uid="uid-9")
    sid = await rt.run_pod_sandbox(sc)
    cid = await rt.create_container(sid, container_config("x", None, uid="uid-9"), sc)
    await rt.start_container(cid)
    return sid, cid
