"""A runtime of your own, at its smallest: the core, in memory, and nothing else.

:class:`ToyRuntime` is a :class:`kubelet_kit.container.RuntimeCore` (version,
status, sandboxes, containers, list and status) that declares no optional
capability: no exec, images, logs, stats or events. The agent then pulls no
image (every image is taken as present) and says what a pod asks for that the
toy cannot do (an exec probe errs with ``runtime ToyRuntime does not offer
exec``); the runtime conformance kit passes its core checks and skips the rest
as ``not offered``. Containers "run" until stopped (and obey the SIGTERM: exit
code 143); one whose command is ``true`` exits at once with code 0. Plug it in::

    kubelet = Kubelet(runtime=ToyRuntime(), sources=[...])
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from typing import Any, TypeVar

import attrs

from kubelet_kit.container import interfaces as cri
from kubelet_kit.errors import AlreadyExistsError, ContainerRuntimeError, NotFoundError

C, S, T = cri.ContainerState, cri.PodSandboxState, TypeVar("T")


def _get(table: dict[str, T], key: str) -> T:
    if key not in table:
        raise NotFoundError(f"no sandbox or container {key}")
    return table[key]


def _entry(status: Any, cls: type[T], **more: Any) -> T:
    """A list entry (PodSandbox, ContainerInfo) from a status: the fields both have."""
    shared = attrs.fields_dict(cls).keys() & attrs.fields_dict(type(status)).keys()
    return cls(**{name: getattr(status, name) for name in shared}, **more)


class ToyRuntime:
    """Sandboxes and containers as records in dicts."""

    capabilities: frozenset[str] = frozenset()  # the core, nothing more

    def __init__(self, now: Callable[[], float] = time.time) -> None:
        self.now = now  # wall-clock seconds (a test passes its FakeClock's now)
        self.sandboxes: dict[str, cri.PodSandboxStatus] = {}
        self.containers: dict[str, cri.ContainerStatus] = {}
        self.sandbox_of: dict[str, str] = {}  # container id -> sandbox id
        self.quick: set[str] = set()  # containers running `true`: done at once
        self._ids = itertools.count(1)

    def _in(self, sandbox_id: str) -> list[str]:
        return [cid for cid, sid in self.sandbox_of.items() if sid == sandbox_id]

    def _set(self, container_id: str, **changes: object) -> None:
        self.containers[container_id] = attrs.evolve(self.containers[container_id], **changes)

    async def version(self) -> cri.VersionInfo:
        return cri.VersionInfo("toy", "0.1.0")

    async def status(self) -> cri.RuntimeStatus:
        ready = ("RuntimeReady", "NetworkReady")
        return cri.RuntimeStatus(tuple(cri.RuntimeCondition(c, True) for c in ready))

    async def run_pod_sandbox(self, config: cri.PodSandboxConfig) -> str:
        if any(s.metadata == config.metadata for s in self.sandboxes.values()):
            raise AlreadyExistsError(f"sandbox {config.metadata.name} exists")
        sid = f"sandbox-{next(self._ids)}"
        self.sandboxes[sid] = cri.PodSandboxStatus(
            sid, config.metadata, S.READY, self.now(), labels=config.labels
        )
        return sid

    async def stop_pod_sandbox(self, pod_sandbox_id: str) -> None:
        for cid in self._in(pod_sandbox_id):
            await self.stop_container(cid, 0)
        if sandbox := self.sandboxes.get(pod_sandbox_id):
            self.sandboxes[pod_sandbox_id] = attrs.evolve(sandbox, state=S.NOTREADY)

    async def remove_pod_sandbox(self, pod_sandbox_id: str) -> None:
        for cid in self._in(pod_sandbox_id):
            await self.remove_container(cid)
        self.sandboxes.pop(pod_sandbox_id, None)

    async def pod_sandbox_status(self, pod_sandbox_id: str) -> cri.PodSandboxStatus:
        return _get(self.sandboxes, pod_sandbox_id)

    async def list_pod_sandboxes(
        self, filter: cri.PodSandboxFilter | None = None
    ) -> list[cri.PodSandbox]:
        found = [_entry(s, cri.PodSandbox) for s in self.sandboxes.values()]
        return [s for s in found if filter is None or filter.matches(s)]

    async def create_container(
        self, pod_sandbox_id: str, config: cri.ContainerConfig, _: cri.PodSandboxConfig
    ) -> str:
        _get(self.sandboxes, pod_sandbox_id)
        if any(self.containers[c].metadata == config.metadata for c in self._in(pod_sandbox_id)):
            raise AlreadyExistsError(f"container {config.metadata.name} exists")
        cid = f"container-{next(self._ids)}"
        self.sandbox_of[cid] = pod_sandbox_id
        if (*config.command, *config.args) == ("true",):
            self.quick.add(cid)
        status = cri.ContainerStatus(
            cid, config.metadata, C.CREATED, self.now(), config.image.image
        )
        self.containers[cid] = attrs.evolve(
            status, labels=config.labels, annotations=config.annotations
        )
        return cid

    async def start_container(self, container_id: str) -> None:
        state, now = _get(self.containers, container_id).state, self.now()
        if state is not C.CREATED:
            raise ContainerRuntimeError(f"container {container_id} is {state.value}")
        self._set(container_id, state=C.RUNNING, started_at=now)
        if container_id in self.quick:
            self._set(container_id, state=C.EXITED, finished_at=now, reason="Completed")

    async def stop_container(self, container_id: str, timeout: float) -> None:
        if (c := self.containers.get(container_id)) and c.state is C.RUNNING:
            exited = {"state": C.EXITED, "finished_at": self.now(), "reason": "Error"}
            self._set(container_id, exit_code=143, **exited)

    async def remove_container(self, container_id: str) -> None:
        self.containers.pop(container_id, None)
        self.sandbox_of.pop(container_id, None)
        self.quick.discard(container_id)

    async def list_containers(
        self, filter: cri.ContainerFilter | None = None
    ) -> list[cri.ContainerInfo]:
        found = [
            _entry(c, cri.ContainerInfo, pod_sandbox_id=self.sandbox_of[c.id])
            for c in self.containers.values()
        ]
        return [c for c in found if filter is None or filter.matches(c)]

    async def container_status(self, container_id: str) -> cri.ContainerStatus:
        return _get(self.containers, container_id)
