"""What the probe manager tests share: a Prober double with scripted outcomes, pods
and statuses, and an Env running a manager on a FakeClock."""

from __future__ import annotations

import asyncio
import datetime as _dt
from typing import TypeVar

import attrs
from prometheus_client import CollectorRegistry

from kubelet_kit.api import (
    Container,
    ContainerState,
    ContainerStateRunning,
    ContainerStatus,
    ExecAction,
    ObjectMeta,
    Pod,
    PodSpec,
    PodStatus,
    Probe,
)
from kubelet_kit.prober import (
    ProbeKind,
    ProbeOutcome,
    Prober,
    ProbeResult,
    ProbeStatus,
    ProbeUpdate,
    ReferenceProbeManager,
)
from kubelet_kit.testing import FakeClock, FakeRuntime

S, F, U = ProbeResult.SUCCESS, ProbeResult.FAILURE, ProbeResult.UNKNOWN
R, L, ST = ProbeKind.READINESS, ProbeKind.LIVENESS, ProbeKind.STARTUP
UID = "uid-1"
_T = TypeVar("_T")


class ScriptedProber(Prober):
    """Returns scripted outcomes per (container, kind) and records every call."""

    def __init__(self, clock: FakeClock) -> None:
        super().__init__(FakeRuntime(clock), clock)
        self.clock_ = clock
        self.calls: list[tuple[float, str, ProbeKind, str]] = []
        self.scripts: dict[tuple[str, ProbeKind], list[ProbeStatus]] = {}
        self.default: dict[tuple[str, ProbeKind], ProbeStatus] = {}

    def set(self, container: str, kind: ProbeKind, *statuses: ProbeStatus) -> None:
        """Outcomes for the next calls; the last one repeats."""
        self.scripts[(container, kind)] = list(statuses[:-1])
        self.default[(container, kind)] = statuses[-1]

    def times(self, container: str, kind: ProbeKind) -> list[float]:
        start = 1000.0
        return [t - start for t, c, k, _ in self.calls if c == container and k == kind]

    async def probe(
        self,
        kind: ProbeKind,
        pod: Pod,
        container: Container,
        probe: Probe,
        *,
        pod_ip: str,
        container_id: str,
    ) -> ProbeOutcome:
        self.calls.append((self.clock_.monotonic(), container.name, kind, container_id))
        key = (container.name, kind)
        script = self.scripts.get(key)
        status = script.pop(0) if script else self.default.get(key, ProbeStatus.SUCCESS)
        return ProbeOutcome(status, f"{kind.value} said {status.value}")


def probe(**kwargs: int) -> Probe:
    return Probe(exec=ExecAction(command=("check",)), **kwargs)  # type: ignore[arg-type]


def make_pod(*containers: Container, restart_policy: str = "Always", **meta: object) -> Pod:
    return Pod(
        metadata=ObjectMeta(name="web", namespace="ns", uid=UID, **meta),  # type: ignore[arg-type]
        spec=PodSpec(containers=containers, restart_policy=restart_policy),
    )


def running_status(name: str, cid: str, started_at: float) -> ContainerStatus:
    return ContainerStatus(
        name=name,
        container_id=cid,
        state=ContainerState(
            running=ContainerStateRunning(
                started_at=_dt.datetime.fromtimestamp(started_at, _dt.UTC)
            )
        ),
    )


class Env:
    """A manager on a FakeClock with a scripted prober and collected updates."""

    def __init__(self, **kwargs: object) -> None:
        self.clock = FakeClock()
        self.prober = ScriptedProber(self.clock)
        self.registry = CollectorRegistry()
        kwargs.setdefault("agent_start_time", self.clock.now() - 3600)
        self.manager = ReferenceProbeManager(
            self.prober.runtime,
            self.clock,
            prober=self.prober,
            registry=self.registry,
            **kwargs,  # type: ignore[arg-type]
        )
        self.updates: list[ProbeUpdate] = []
        self._collector: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Env:
        await self.manager.__aenter__()

        async def collect() -> None:
            async for update in self.manager.updates():
                self.updates.append(update)

        self._collector = asyncio.create_task(collect())
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.manager.__aexit__(None, None, None)
        assert self._collector is not None
        await asyncio.wait_for(self._collector, 5)

    def start(self, name: str, cid: str, *, at: float | None = None) -> None:
        self.manager.update_container(
            UID, name, cid, running=True, started_at=self.clock.now() if at is None else at
        )

    def seen(self, kind: ProbeKind | None = None) -> list[tuple[str, str, ProbeResult]]:
        return [
            (u.container_id, u.kind.value, u.result)
            for u in self.updates
            if kind is None or u.kind is kind
        ]

    async def run_for(self, seconds: float) -> None:
        await self.clock.run_for(seconds)


def container_status(env: Env, pod: Pod, name: str, cid: str) -> ContainerStatus:
    status = PodStatus(container_statuses=(running_status(name, cid, env.clock.now()),))
    return env.manager.update_pod_status(pod, status).container_statuses[0]


def attrs_evolve(value: _T, **changes: object) -> _T:
    """attrs.evolve for a status in a test, typed as its argument."""
    return attrs.evolve(value, **changes)  # type: ignore[misc]
