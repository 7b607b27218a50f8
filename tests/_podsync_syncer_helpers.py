"""What the RuntimePodSyncer tests share: pod and container builders, a runtime
recording start times, and the test environment of a syncer on FakeRuntime and
FakeClock, driven directly or through PodWorkers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs

from kubelet_kit.api import (
    Container,
    ExecAction,
    LifecycleHandler,
    ObjectMeta,
    Pod,
    PodSpec,
    PodStatus,
)
from kubelet_kit.container.interfaces import ContainerStatus, DNSConfig
from kubelet_kit.node.podworkers import PodWorkers, UpdateType
from kubelet_kit.podsync.syncer import EventLog, RuntimePodSyncer
from kubelet_kit.status import StatusManager
from kubelet_kit.testing import FakeClock, FakeRuntime

IMAGE = "registry.example/app:1"
SERVE = ("sh", "-c", "sleep infinity")


def mkcontainer(name: str = "app", **kw: Any) -> Container:
    kw.setdefault("image", IMAGE)
    kw.setdefault("command", SERVE)
    return Container(name=name, **kw)


def mkpod(
    *containers: Container,
    inits: tuple[Container, ...] = (),
    restart: str = "Always",
    **spec: Any,
) -> Pod:
    return Pod(
        metadata=ObjectMeta(name="web", namespace="ns", uid="u1"),
        spec=PodSpec(
            containers=containers or (mkcontainer(),),
            init_containers=inits,
            restart_policy=restart,
            **spec,
        ),
    )


class RecordingRuntime(FakeRuntime):
    """A FakeRuntime that remembers when each container name was started."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.started: list[tuple[str, float]] = []

    async def start_container(self, container_id: str) -> None:
        await super().start_container(container_id)
        name = (await self.container_status(container_id)).metadata.name
        self.started.append((name, self.clock.now()))


@attrs.define
class Env:
    clock: FakeClock
    runtime: RecordingRuntime
    status: StatusManager
    syncer: RuntimePodSyncer
    workers: PodWorkers | None = None

    async def containers(self, name: str | None = None) -> list[ContainerStatus]:
        """Every container the runtime holds (of ``name``), oldest first."""
        listed = await self.runtime.list_containers()
        statuses = [await self.runtime.container_status(c.id) for c in listed]
        return sorted(
            (s for s in statuses if name is None or s.metadata.name == name),
            key=lambda s: (s.created_at, s.metadata.attempt),
        )

    def starts(self, name: str) -> list[float]:
        """Seconds after the start at which containers called ``name`` started."""
        return [t - self.t0 for n, t in self.runtime.started if n == name]

    @property
    def t0(self) -> float:
        return 1_767_225_600.0

    def pod_status(self) -> PodStatus:
        status = self.status.get_pod_status("u1")
        assert status is not None
        return status

    def waiting(self, name: str = "app") -> tuple[str, str] | None:
        status = self.pod_status()
        for cs in (*status.container_statuses, *status.init_container_statuses):
            if cs.name == name and cs.state.waiting is not None:
                return cs.state.waiting.reason, cs.state.waiting.message
        return None

    def events(self) -> list[tuple[str, str, str, str]]:
        """(container, type, reason, message) of every event so far, oldest first."""
        log = self.syncer.events
        assert isinstance(log, EventLog)
        return [(e.container, e.type, e.reason, e.message) for e in log.events("u1")]

    def start_workers(self, pod: Pod, resync: float = 1.0) -> PodWorkers:
        self.workers = PodWorkers(self.syncer, self.clock, resync_interval=resync)
        self.workers.update_pod(pod, UpdateType.CREATE)
        return self.workers

    async def run_until(self, t: float) -> None:
        """Let clock time pass until ``t`` seconds after the start."""
        await self.clock.run_for(self.t0 + t - self.clock.now(), settle_rounds=200)


def make_env(tmp_path: Path) -> Env:
    """A syncer on a RecordingRuntime and a FakeClock, its pod logs under ``tmp_path``."""
    clock = FakeClock()
    runtime = RecordingRuntime(clock, images=[IMAGE])
    status = StatusManager(clock)
    syncer = RuntimePodSyncer(
        runtime,
        clock,
        status_manager=status,
        pod_logs_dir=str(tmp_path),
        node_name="node-1",
        resolv_conf=DNSConfig(servers=("10.0.0.10",)),
        events=EventLog(clock),
    )
    e = Env(clock, runtime, status, syncer)
    return e


async def shutdown(env: Env) -> None:
    if env.workers is not None:
        await env.workers.shutdown()


def exec_hook(*cmd: str) -> LifecycleHandler:
    return LifecycleHandler(exec=ExecAction(command=cmd))
