"""The node each check of the ProbeManager kit runs on (see
:mod:`kubelet_kit.testing.prober_kit`): a sandbox in a FakeRuntime whose exec
results the check scripts, the manager running, and one consumer of its updates."""

from __future__ import annotations

import asyncio
import datetime as _dt
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

import attrs

from kubelet_kit.api import (
    Container,
    ContainerState,
    ContainerStateRunning,
    ContainerStateTerminated,
    ContainerStateWaiting,
    ContainerStatus,
    ExecAction,
    ObjectMeta,
    Pod,
    PodSpec,
    PodStatus,
    Probe,
)
from kubelet_kit.container.interfaces import (
    ContainerConfig,
    ContainerMetadata,
    ExecResult,
    ImageSpec,
    PodSandboxConfig,
    PodSandboxMetadata,
)
from kubelet_kit.errors import ContainerRuntimeError
from kubelet_kit.prober.interfaces import ProbeKind, ProbeManager, ProbeResult, ProbeUpdate
from kubelet_kit.testing.clock import FakeClock
from kubelet_kit.testing.fake_runtime import FakeRuntime
from kubelet_kit.testing.kit import KitContext

__all__ = [
    "EXEC_ERROR",
    "KIT_IMAGE",
    "KIT_PROBE_COMMAND",
    "STOP_TIMEOUT",
    "Bench",
    "kit_probe",
    "prober_kit_options",
]

#: The image of the kit's containers; the runtime in the options must have it.
KIT_IMAGE: Final = "busybox"
#: The first word of every probe command the kit writes (``kit-probe Liveness``).
KIT_PROBE_COMMAND: Final = "kit-probe"

_S, _F, _U = ProbeResult.SUCCESS, ProbeResult.FAILURE, ProbeResult.UNKNOWN
_L, _R, _ST = ProbeKind.LIVENESS, ProbeKind.READINESS, ProbeKind.STARTUP
#: A scripted exec that fails in the runtime (a prober error).
EXEC_ERROR: Final = -1
#: Real seconds allowed for stop() and for run() to return after it.
STOP_TIMEOUT: Final = 10.0


def prober_kit_options() -> dict[str, Any]:
    """Fresh options for one run of the kit: a FakeClock and a FakeRuntime on it
    that has :data:`KIT_IMAGE`."""
    clock = FakeClock()
    return {"clock": clock, "runtime": FakeRuntime(clock, images=[KIT_IMAGE])}


def kit_probe(kind: ProbeKind, **timing: int) -> Probe:
    return Probe(exec=ExecAction(command=(KIT_PROBE_COMMAND, kind.value)), **timing)  # type: ignore[arg-type]


@attrs.frozen
class _Exec:
    time: float
    container_id: str
    kind: ProbeKind
    code: int


@attrs.define(eq=False)
class Bench:
    """One check's node: a sandbox in the FakeRuntime, scripted exec results, the
    manager running, and one consumer of its updates."""

    ctx: KitContext[ProbeManager]
    clock: FakeClock
    runtime: FakeRuntime
    uid: str
    start: float
    sandbox: PodSandboxConfig
    sandbox_id: str = ""
    execs: list[_Exec] = attrs.field(factory=list)
    #: (update, runs of that container's probe of that kind when it arrived)
    updates: list[tuple[ProbeUpdate, int]] = attrs.field(factory=list)
    scripts: dict[tuple[str, ProbeKind], list[int]] = attrs.field(factory=dict)
    started_at: dict[str, float] = attrs.field(factory=dict)
    run_task: asyncio.Task[None] | None = None
    consumer: asyncio.Task[None] | None = None
    _error_at: dict[tuple[str, ProbeKind], float] = attrs.field(factory=dict)

    @classmethod
    async def open(cls, ctx: KitContext[ProbeManager]) -> Bench:
        clock, runtime = ctx.options.get("clock"), ctx.options.get("runtime")
        if not isinstance(clock, FakeClock) or not isinstance(runtime, FakeRuntime):
            ctx.fail("options: the kit needs a FakeClock as 'clock' and a FakeRuntime as 'runtime'")
        uid = f"kit-{ctx.check}"
        sandbox = PodSandboxConfig(
            metadata=PodSandboxMetadata(name="web", namespace="kit", uid=uid)
        )
        bench = cls(ctx, clock, runtime, uid, clock.monotonic(), sandbox)
        bench.sandbox_id = await runtime.run_pod_sandbox(sandbox)
        runtime.set_exec_handler(bench._exec)
        ctx.defer(bench.close)
        ctx.at("run the manager and consume its updates")
        bench.run_task = asyncio.ensure_future(ctx.subject.run())
        bench.consumer = asyncio.ensure_future(bench._consume())
        await clock.settle()
        return bench

    async def close(self) -> None:
        try:
            await asyncio.wait_for(self.ctx.subject.stop(), STOP_TIMEOUT)
        finally:
            for task in (self.run_task, self.consumer):
                if task is not None and not task.done():
                    task.cancel()
            self.runtime.set_exec_handler(None)

    async def _consume(self) -> None:
        async for update in self.ctx.subject.updates():
            runs = len(self.runs(update.container_id, update.kind))
            self.updates.append((update, runs))

    def _exec(self, container_id: str, cmd: Sequence[str]) -> ExecResult | None:
        if len(cmd) != 2 or cmd[0] != KIT_PROBE_COMMAND:
            return None
        kind = ProbeKind(cmd[1])
        key = (container_id, kind)
        now = self.clock.monotonic()
        if self._error_at.get(key) == now:
            # A prober retrying an error at once gets the same error.
            self.execs.append(_Exec(now, container_id, kind, EXEC_ERROR))
            raise ContainerRuntimeError("kit: exec failed in the runtime")
        script = self.scripts.get(key, [0])
        code = script.pop(0) if len(script) > 1 else script[0]
        self.execs.append(_Exec(now, container_id, kind, code))
        if code == EXEC_ERROR:
            self._error_at[key] = now
            raise ContainerRuntimeError("kit: exec failed in the runtime")
        return ExecResult(code, b"", b"kit: probe failed\n" if code else b"")

    # ------------------------------------------------------------ the node

    async def container(self, name: str, attempt: int = 0) -> str:
        """Create and start a container in the FakeRuntime; its id."""
        cid = await self.runtime.create_container(
            self.sandbox_id,
            ContainerConfig(
                metadata=ContainerMetadata(name=name, attempt=attempt),
                image=ImageSpec(KIT_IMAGE),
                command=("sleep", "infinity"),
            ),
            self.sandbox,
        )
        await self.runtime.start_container(cid)
        self.started_at[cid] = self.clock.now()
        return cid

    def pod(self, *containers: Container, restart_policy: str = "Always") -> Pod:
        return Pod(
            metadata=ObjectMeta(name="web", namespace="kit", uid=self.uid),
            spec=PodSpec(containers=containers, restart_policy=restart_policy),
        )

    def script(self, cid: str, kind: ProbeKind, *codes: int) -> None:
        """Exit codes of the next exec probes (0 success, 1 failure, EXEC_ERROR an
        error); the last one repeats."""
        self.scripts[(cid, kind)] = list(codes)

    def status(self, containers: Mapping[str, str | None], phase: str = "Running") -> PodStatus:
        """A pod status: each container by name, running under its id, or (None)
        waiting to be created."""
        statuses = []
        for name, cid in containers.items():
            if cid is None:
                state = ContainerState(waiting=ContainerStateWaiting(reason="ContainerCreating"))
                statuses.append(ContainerStatus(name=name, state=state))
                continue
            started = _dt.datetime.fromtimestamp(self.started_at[cid], _dt.UTC)
            state = ContainerState(running=ContainerStateRunning(started_at=started))
            statuses.append(ContainerStatus(name=name, container_id=f"fake://{cid}", state=state))
        return PodStatus(phase=phase, pod_ip="10.0.0.2", container_statuses=tuple(statuses))

    def exited(self, name: str, cid: str) -> PodStatus:
        """A pod status whose container exited with 0."""
        state = ContainerState(terminated=ContainerStateTerminated(exit_code=0, reason="Completed"))
        cs = ContainerStatus(name=name, container_id=f"fake://{cid}", state=state)
        return PodStatus(phase="Running", pod_ip="10.0.0.2", container_statuses=(cs,))

    def fold(self, pod: Pod, status: PodStatus) -> dict[str, ContainerStatus]:
        """What ``update_pod_status`` makes of ``status``, by container name."""
        folded = self.ctx.subject.update_pod_status(pod, status)
        self.ctx.expect_eq(
            "container statuses after update_pod_status",
            [c.name for c in folded.container_statuses],
            [c.name for c in status.container_statuses],
        )
        return {c.name: c for c in folded.container_statuses}

    def add(self, pod: Pod, containers: Mapping[str, str | None]) -> dict[str, ContainerStatus]:
        """``add_pod`` then the first status fold, as the agent does."""
        self.ctx.subject.add_pod(pod)
        return self.fold(pod, self.status(containers))

    # ------------------------------------------------------------ observing

    def runs(self, cid: str, kind: ProbeKind) -> list[_Exec]:
        """Probe runs against ``cid`` (immediate retries of an error count once)."""
        out: list[_Exec] = []
        for e in self.execs:
            if e.container_id == cid and e.kind is kind:
                if (
                    out
                    and out[-1].code == EXEC_ERROR
                    and e.code == EXEC_ERROR
                    and out[-1].time == e.time
                ):
                    continue
                out.append(e)
        return out

    def times(self, cid: str, kind: ProbeKind) -> list[float]:
        """Clock times of the runs, from the start of the check."""
        return [e.time - self.start for e in self.runs(cid, kind)]

    def published(self, cid: str, kind: ProbeKind) -> list[tuple[ProbeUpdate, int]]:
        """Updates for one container's probe of ``kind``, with the run count."""
        return [(u, n) for u, n in self.updates if u.container_id == cid and u.kind is kind]

    def first(
        self, cid: str, kind: ProbeKind, result: ProbeResult
    ) -> tuple[ProbeUpdate, int] | None:
        return next((p for p in self.published(cid, kind) if p[0].result is result), None)

    def now(self) -> float:
        return self.clock.monotonic() - self.start

    async def advance(self, seconds: float) -> None:
        await self.clock.run_for(seconds)

    async def until(self, what: Callable[[], object], limit: float, step: float = 1.0) -> bool:
        """Move the clock in ``step`` until ``what()`` is true; False after ``limit``."""
        deadline = self.clock.monotonic() + limit
        while not what():
            if self.clock.monotonic() >= deadline:
                return False
            await self.clock.run_for(step)
        return True

    def expect_update(self, update: ProbeUpdate, cid: str, name: str, kind: ProbeKind) -> None:
        self.ctx.expect_eq("update's pod uid", update.pod_uid, self.uid)
        self.ctx.expect_eq("update's container name", update.container_name, name)
        self.ctx.expect_eq(
            "update's container id (the runtime's, no prefix)", update.container_id, cid
        )
        self.ctx.expect_eq("update's probe kind", update.kind, kind)
