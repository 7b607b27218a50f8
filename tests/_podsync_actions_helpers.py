"""What the compute_pod_actions tests share: pods, container and sandbox statuses,
the runtime view of a pod, and the expected kills."""

from __future__ import annotations

import datetime as dt
import zlib

from kubelet_kit.api import Container, ObjectMeta, Pod, PodSpec, Probe
from kubelet_kit.api.pod import ExecAction
from kubelet_kit.container import labels as kl
from kubelet_kit.container.interfaces import (
    ContainerMetadata,
    ContainerState,
    ContainerStatus,
    NamespaceOptions,
    PodSandboxMetadata,
    PodSandboxState,
    PodSandboxStatus,
)
from kubelet_kit.container.pods import PodRuntimeStatus
from kubelet_kit.podsync.actions import (
    ContainerToKill,
    PodActions,
    compute_pod_actions,
)

IMAGE = "registry.example/app:1"
RUNNING, EXITED, CREATED, UNKNOWN = (
    ContainerState.RUNNING,
    ContainerState.EXITED,
    ContainerState.CREATED,
    ContainerState.UNKNOWN,
)
PROBE = Probe(exec=ExecAction(command=("true",)))


def chash(container: Container) -> str:
    return format(zlib.crc32(container.image.encode()), "x")


SPEC_HASH = chash(Container(name="x", image=IMAGE))


def mkpod(
    containers: tuple[str, ...] = ("app",),
    inits: tuple[str, ...] = (),
    *,
    sidecars: tuple[str, ...] = (),
    restart: str = "Always",
    host_network: bool = False,
    deleting: bool = False,
    probes: dict[str, str] | None = None,
) -> Pod:
    probes = probes or {}

    def make(name: str) -> Container:
        kind = probes.get(name)
        return Container(
            name=name,
            image=IMAGE,
            restart_policy="Always" if name in sidecars else None,
            liveness_probe=PROBE if kind == "liveness" else None,
            startup_probe=PROBE if kind == "startup" else None,
        )

    return Pod(
        metadata=ObjectMeta(
            name="web",
            namespace="ns",
            uid="u1",
            deletion_timestamp=dt.datetime(2026, 1, 1, tzinfo=dt.UTC) if deleting else None,
        ),
        spec=PodSpec(
            containers=tuple(make(n) for n in containers),
            init_containers=tuple(make(n) for n in inits),
            restart_policy=restart,
            host_network=host_network,
        ),
    )


def cs(
    name: str,
    state: ContainerState = RUNNING,
    *,
    exit_code: int = 0,
    reason: str = "",
    created: float = 1.0,
    spec_hash: str = SPEC_HASH,
    cid: str | None = None,
) -> ContainerStatus:
    return ContainerStatus(
        id=cid or f"{name}-{int(created)}",
        metadata=ContainerMetadata(name=name),
        state=state,
        created_at=created,
        image=IMAGE,
        exit_code=exit_code,
        reason=reason,
        annotations={kl.CONTAINER_HASH: spec_hash},
    )


def sb(
    state: PodSandboxState = PodSandboxState.READY,
    *,
    attempt: int = 0,
    host_network: bool = False,
    sid: str = "sb",
    created: float = 1.0,
) -> PodSandboxStatus:
    return PodSandboxStatus(
        id=sid,
        metadata=PodSandboxMetadata("web", "ns", "u1", attempt),
        state=state,
        created_at=created,
        namespace_options=NamespaceOptions(host_network=host_network),
    )


def rt(
    *containers: ContainerStatus, sandboxes: tuple[PodSandboxStatus, ...] | None = None
) -> PodRuntimeStatus:
    return PodRuntimeStatus(
        uid="u1",
        name="web",
        namespace="ns",
        sandbox_statuses=(sb(),) if sandboxes is None else sandboxes,
        container_statuses=containers,
    )


def actions(pod: Pod, status: PodRuntimeStatus, **probe_sets: frozenset[str]) -> PodActions:
    return compute_pod_actions(pod, status, container_hash=chash, **probe_sets)


def kill(
    cid: str, name: str, message: str, reason: str = "", pod: Pod | None = None
) -> ContainerToKill:
    spec = None
    if pod is not None:
        spec = next((c for c in pod.spec.all_containers() if c.name == name), None)
    return ContainerToKill(cid, name, message, reason, spec)
