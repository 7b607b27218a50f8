"""Configs labelled the way the kubelet labels them, for the integration tests."""

from __future__ import annotations

import uuid
from pathlib import Path

from kubelet_kit.container import (
    ContainerConfig,
    ContainerMetadata,
    ImageSpec,
    NamespaceOptions,
    PodSandboxConfig,
    PodSandboxMetadata,
)
from kubelet_kit.container import labels as kl

from .containerd import BUSYBOX_IMAGE


def pod_config(
    log_root: Path,
    name: str | None = None,
    attempt: int = 0,
    uid: str | None = None,
    cgroup_parent: str = "",
) -> PodSandboxConfig:
    """A host-network sandbox config labelled the way the kubelet labels it."""
    name = name or f"pod-{uuid.uuid4().hex[:8]}"
    uid = uid or str(uuid.uuid4())
    namespace = "default"
    return PodSandboxConfig(
        metadata=PodSandboxMetadata(name=name, namespace=namespace, uid=uid, attempt=attempt),
        hostname="",  # the kubelet leaves it empty for host-network pods
        log_directory=str(log_root / f"{namespace}_{name}_{uid}"),
        labels={kl.POD_NAME: name, kl.POD_NAMESPACE: namespace, kl.POD_UID: uid},
        namespace_options=NamespaceOptions(host_network=True),
        cgroup_parent=f"{cgroup_parent}/pod{uid}" if cgroup_parent else "",
    )


def container_config(
    pod: PodSandboxConfig, name: str, args: tuple[str, ...], **kw: object
) -> ContainerConfig:
    """A busybox container config labelled the way the kubelet labels it."""
    meta = pod.metadata
    return ContainerConfig(
        metadata=ContainerMetadata(name=name),
        image=ImageSpec(BUSYBOX_IMAGE),
        args=args,
        labels={
            kl.POD_NAME: meta.name,
            kl.POD_NAMESPACE: meta.namespace,
            kl.POD_UID: meta.uid,
            kl.CONTAINER_NAME: name,
        },
        log_path=f"{name}/0.log",
        **kw,  # type: ignore[arg-type]
    )
