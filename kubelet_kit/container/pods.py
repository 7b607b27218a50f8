"""Runtime pods: sandboxes and containers grouped by the pod they belong to.

A Runtime knows sandboxes and containers, not pods. The kubelet groups them by the
``io.kubernetes.pod.uid`` label into a runtime pod (``kubecontainer.Pod``) and
gathers every status of one pod into a ``kubecontainer.PodStatus``. These are the
same two shapes, runtime-neutral, so the PLEG, the composer and a user's own
loop read pods the same way whatever the runtime is.

``group_pods`` is pure; ``get_pods`` and ``get_pod_status`` ask a Runtime.
"""

from __future__ import annotations

from collections.abc import Container, Iterable

import attrs

from kubelet_kit.container import labels as kl
from kubelet_kit.container.interfaces import (
    ContainerFilter,
    ContainerInfo,
    ContainerState,
    ContainerStatus,
    PodSandbox,
    PodSandboxFilter,
    PodSandboxState,
    PodSandboxStatus,
    Runtime,
)
from kubelet_kit.errors import NotFoundError

__all__ = [
    "PodRuntimeStatus",
    "RuntimePod",
    "get_pod_status",
    "get_pods",
    "group_pods",
]


@attrs.frozen
class RuntimePod:
    """The sandboxes and containers a runtime holds for one pod.

    Attributes:
        uid: The pod uid (the ``io.kubernetes.pod.uid`` label).
        name: The pod name, from the ``io.kubernetes.pod.name`` label.
        namespace: The pod namespace, from the ``io.kubernetes.pod.namespace`` label.
        sandboxes: The pod's sandboxes, newest first.
        containers: The pod's containers, in the order the runtime listed them.
    """

    uid: str
    name: str = ""
    namespace: str = ""
    sandboxes: tuple[PodSandbox, ...] = ()
    containers: tuple[ContainerInfo, ...] = ()

    @property
    def created_at(self) -> float:
        """Creation time of the newest sandbox (0.0 when the pod has none)."""
        return max((s.created_at for s in self.sandboxes), default=0.0)

    def find_container(self, name: str) -> ContainerInfo | None:
        """The newest container called ``name`` (by creation time), or None."""
        found = [c for c in self.containers if c.metadata.name == name]
        return max(found, key=lambda c: (c.created_at, c.metadata.attempt), default=None)

    def find_container_by_id(self, container_id: str) -> ContainerInfo | None:
        """The container with id ``container_id``, or None."""
        return next((c for c in self.containers if c.id == container_id), None)

    def find_sandbox_by_id(self, sandbox_id: str) -> PodSandbox | None:
        """The sandbox with id ``sandbox_id``, or None."""
        return next((s for s in self.sandboxes if s.id == sandbox_id), None)

    def running_containers(self) -> tuple[ContainerInfo, ...]:
        """The containers whose state is RUNNING."""
        return tuple(c for c in self.containers if c.state is ContainerState.RUNNING)


def _newest_first_statuses(
    statuses: Iterable[ContainerStatus],
) -> tuple[ContainerStatus, ...]:
    # The kubelet keeps container statuses sorted newest first, so "the status of
    # container X" is simply the first one with that name.
    return tuple(sorted(statuses, key=lambda s: (s.created_at, s.metadata.attempt), reverse=True))


@attrs.frozen
class PodRuntimeStatus:
    """Everything the runtime reports about one pod at one moment.

    Attributes:
        uid: The pod uid.
        name: The pod name.
        namespace: The pod namespace.
        ips: The pod's IPs, from its newest sandbox while that sandbox is ready
            (primary IP first).
        sandbox_statuses: Status of each of the pod's sandboxes, newest first.
        container_statuses: Status of each of the pod's containers (every attempt
            the runtime still holds), newest first.
        timestamp: Wall-clock time (seconds since the epoch) at or after which
            this status was observed: everything that happened before it is in it.
    """

    uid: str
    name: str = ""
    namespace: str = ""
    ips: tuple[str, ...] = ()
    sandbox_statuses: tuple[PodSandboxStatus, ...] = ()
    container_statuses: tuple[ContainerStatus, ...] = attrs.field(
        default=(), converter=_newest_first_statuses
    )
    timestamp: float = 0.0

    def find_container_status(self, name: str) -> ContainerStatus | None:
        """The newest status of the container called ``name``, or None."""
        return next((s for s in self.container_statuses if s.metadata.name == name), None)

    def find_container_status_by_id(self, container_id: str) -> ContainerStatus | None:
        """The status of the container with id ``container_id``, or None."""
        return next((s for s in self.container_statuses if s.id == container_id), None)

    def newest_by_name(self) -> dict[str, ContainerStatus]:
        """The newest status of each container name."""
        newest: dict[str, ContainerStatus] = {}
        for status in self.container_statuses:
            newest.setdefault(status.metadata.name, status)
        return newest

    def running_container_statuses(self) -> tuple[ContainerStatus, ...]:
        """Statuses of the containers that are running, newest first."""
        return tuple(s for s in self.container_statuses if s.state is ContainerState.RUNNING)


def group_pods(
    sandboxes: Iterable[PodSandbox],
    containers: Iterable[ContainerInfo],
    only: Container[str] | None = None,
) -> list[RuntimePod]:
    """Group sandboxes and containers into pods by their pod-uid label.

    Objects without an ``io.kubernetes.pod.uid`` label were not made by a kubelet
    (or a kubelet-kit agent) and are ignored. Name and namespace come from the
    first labelled object seen, sandboxes first. Pods come newest first (by their
    newest sandbox), as the kubelet orders them, so a search by pod name finds the
    current pod before one still terminating under the same name.

    Args:
        sandboxes: Sandboxes as listed by the runtime.
        containers: Containers as listed by the runtime.
        only: If given, build only the pods whose uid is in it.

    Returns:
        One RuntimePod per pod uid; sandboxes within a pod are newest first.
    """
    uid_key, name_key, ns_key = kl.POD_UID, kl.POD_NAME, kl.POD_NAMESPACE
    idents: dict[str, tuple[str, str]] = {}
    by_pod_sandboxes: dict[str, list[PodSandbox]] = {}
    by_pod_containers: dict[str, list[ContainerInfo]] = {}
    for sandbox in sandboxes:
        uid = sandbox.labels.get(uid_key)
        if not uid or (only is not None and uid not in only):
            continue
        if uid not in idents:
            idents[uid] = (sandbox.labels.get(name_key, ""), sandbox.labels.get(ns_key, ""))
            by_pod_sandboxes[uid] = [sandbox]
        else:
            by_pod_sandboxes.setdefault(uid, []).append(sandbox)
    for container in containers:
        labels = container.labels
        uid = labels.get(uid_key)
        if not uid or (only is not None and uid not in only):
            continue
        group = by_pod_containers.get(uid)
        if group is None:
            by_pod_containers[uid] = [container]
            if uid not in idents:
                idents[uid] = (labels.get(name_key, ""), labels.get(ns_key, ""))
        else:
            group.append(container)
    pods = []
    for uid, (name, namespace) in idents.items():
        pod_sandboxes = by_pod_sandboxes.get(uid, [])
        if len(pod_sandboxes) > 1:
            pod_sandboxes.sort(key=lambda s: s.created_at, reverse=True)
        pods.append(
            RuntimePod(
                uid,
                name,
                namespace,
                tuple(pod_sandboxes),
                tuple(by_pod_containers.get(uid, ())),
            )
        )
    # A stable sort keeps the listing order among pods created at the same time.
    pods.sort(key=lambda p: p.created_at, reverse=True)
    return pods


async def get_pods(runtime: Runtime, all: bool = True) -> list[RuntimePod]:
    """List the runtime's pods.

    Args:
        runtime: The runtime to ask.
        all: When False, only ready sandboxes and running containers are listed
            (the kubelet's ``GetPods(all=false)``).

    Returns:
        The pods, grouped by :func:`group_pods`.

    Raises:
        ContainerRuntimeError: listing sandboxes or containers failed.
    """
    sandbox_filter = None if all else PodSandboxFilter(state=PodSandboxState.READY)
    container_filter = None if all else ContainerFilter(state=ContainerState.RUNNING)
    sandboxes = await runtime.list_pod_sandboxes(sandbox_filter)
    containers = await runtime.list_containers(container_filter)
    return group_pods(sandboxes, containers)


async def get_pod_status(
    runtime: Runtime, uid: str, name: str, namespace: str, *, timestamp: float = 0.0
) -> PodRuntimeStatus:
    """Inspect one pod: the status of each of its sandboxes and containers.

    A sandbox or container that disappears between the listing and its status
    call is skipped, not an error: the next inspection will not list it.

    Args:
        runtime: The runtime to ask.
        uid: The pod uid (matched against the ``io.kubernetes.pod.uid`` label).
        name: The pod name to report.
        namespace: The pod namespace to report.
        timestamp: The time to stamp the status with; take it *before* calling,
            so the status holds everything that happened before it.

    Returns:
        The pod's status; sandboxes and containers newest first, IPs from the
        newest sandbox if it is ready. An exited container's message carries
        its termination message (:mod:`kubelet_kit.container.termination`).

    Raises:
        ContainerRuntimeError: a list or status call failed for another reason
            than the object being gone.
    """
    selector = {kl.POD_UID: uid}
    listed = await runtime.list_pod_sandboxes(PodSandboxFilter(label_selector=selector))
    # sorted(), not sort(): the list may be the runtime's own.
    sandboxes = sorted(listed, key=lambda s: s.created_at, reverse=True)
    sandbox_statuses: list[PodSandboxStatus] = []
    for sandbox in sandboxes:
        try:
            sandbox_statuses.append(await runtime.pod_sandbox_status(sandbox.id))
        except NotFoundError:
            continue
    ips: tuple[str, ...] = ()
    if sandbox_statuses and sandbox_statuses[0].state is PodSandboxState.READY:
        newest = sandbox_statuses[0]
        ips = tuple(ip for ip in (newest.ip, *newest.additional_ips) if ip)
    # (imported here: the PLEG and the pod grouping load without the log reader)
    from kubelet_kit.container.termination import with_termination_message

    containers = await runtime.list_containers(ContainerFilter(label_selector=selector))
    container_statuses: list[ContainerStatus] = []
    for container in containers:
        try:
            status = await runtime.container_status(container.id)
        except NotFoundError:
            continue
        # The kubelet reads an exited container's termination message here, for
        # every runtime alike: the file is the kubelet's, behind a plain mount.
        container_statuses.append(with_termination_message(status))
    return PodRuntimeStatus(
        uid=uid,
        name=name,
        namespace=namespace,
        ips=ips,
        sandbox_statuses=tuple(sandbox_statuses),
        container_statuses=tuple(container_statuses),
        timestamp=timestamp,
    )
