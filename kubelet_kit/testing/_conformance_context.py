"""The check context of the Runtime conformance kit: what every check runs with.

:class:`_Ctx` carries the runtime under test, the kit's settings, the step being
run and the sandboxes to remove afterwards; it builds the kit's sandbox and
container configs, lets the runtime's time pass, and reports a failed step by
raising :class:`_CheckFailed` (or :class:`_Skip` for a check that cannot run).
The names the kit gives its objects (:data:`NAMESPACE`, :data:`RUN_LABEL`) and
the wait for a container state that several checks share live here too.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar

import attrs

from kubelet_kit.container import labels as klabels
from kubelet_kit.container.interfaces import (
    ContainerConfig,
    ContainerMetadata,
    ContainerState,
    ContainerStatus,
    ImageSpec,
    KeyValue,
    PodSandboxConfig,
    PodSandboxMetadata,
    Runtime,
)
from kubelet_kit.errors import UnimplementedError

#: Namespace of every sandbox the kit creates.
NAMESPACE = "kubelet-kit-conformance"
#: Label the kit puts on its sandboxes and containers, valued with the run id.
RUN_LABEL = "conformance.kubelet-kit.io/run"

Wait = Callable[[float], Awaitable[None]]
T = TypeVar("T")


#: The log file of a container's first instance, in its directory under the
#: sandbox's log directory (what container_config names it).
_FIRST_LOG = "0.log"


def log_file(sandbox: PodSandboxConfig, name: str) -> Path:
    """Where the runtime writes the log of container ``name``'s first instance in
    ``sandbox`` (as :meth:`_Ctx.container_config` configures it)."""
    return Path(sandbox.log_directory) / name / _FIRST_LOG


class _CheckFailed(Exception):
    pass


class _Skip(Exception):
    pass


# ------------------------------------------------------------------------ context


@attrs.define
class _Ctx:
    """What a check needs: the runtime, settings, the current step, cleanup."""

    runtime: Runtime
    check: str
    image: str
    missing_image: str
    log_root: Path
    wait: Wait
    timeout: float
    poll_interval: float
    stop_timeout: float
    run_id: str
    template: PodSandboxConfig | None
    step: str = "setup"
    sandboxes: list[str] = attrs.field(factory=list)
    #: References of one image (``image_tags``) and images by the User their
    #: config names (``image_user``), as given to the kit.
    same_image_refs: tuple[str, ...] = ()
    user_images: Mapping[str, str] = attrs.field(factory=dict)
    #: Fields of sandboxes on a pod network of their own (``port_mappings``).
    network_template: PodSandboxConfig | None = None

    def at(self, step: str) -> None:
        """Name the step that runs next (failures are reported against it)."""
        self.step = step

    def fail(self, message: str) -> None:
        raise _CheckFailed(message)

    def expect(self, ok: bool, message: str) -> None:
        if not ok:
            raise _CheckFailed(message)

    def expect_eq(self, what: str, got: object, want: object) -> None:
        if got != want:
            raise _CheckFailed(f"{what}: expected {want!r}, got {got!r}")

    def said(self, sandbox: PodSandboxConfig, name: str, lines: int = 5) -> str:
        """The last ``lines`` lines container ``name`` of ``sandbox`` wrote to its
        log (first instance), for a failure message: a container that exits
        unexpectedly usually says why (``sh: can't fork``)."""
        try:
            text = log_file(sandbox, name).read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            return f"(no log: {exc.strerror or exc})"
        tail = text.splitlines()[-lines:]
        return " | ".join(tail) if tail else "(an empty log)"

    @contextlib.contextmanager
    def declined_is_skip(self, what: str) -> Iterator[None]:
        """Turn the runtime's UnimplementedError inside the block into a skip.

        A runtime that cannot honour a field it was given (a host process asked for
        a read-only root filesystem, say) says so with UnimplementedError naming the
        field, rather than ignoring it; the check is then skipped with that reason.
        A runtime that ignores the field silently fails the check instead.
        """
        try:
            yield
        except UnimplementedError as exc:
            raise _Skip(f"{what}: not honoured: {exc}") from None

    # -- builders

    def sandbox_config(self, suffix: str = "") -> PodSandboxConfig:
        name = f"kk-conformance-{self.check.replace('_', '-')}{suffix}-{self.run_id}"
        uid = str(uuid.uuid5(uuid.NAMESPACE_URL, f"{name}/{self.run_id}"))
        log_dir = self.log_root / f"{NAMESPACE}_{name}_{uid}"
        # The kubelet creates the pod's log directory before running the sandbox.
        log_dir.mkdir(parents=True, exist_ok=True)
        labels = {
            klabels.POD_NAME: name,
            klabels.POD_NAMESPACE: NAMESPACE,
            klabels.POD_UID: uid,
            RUN_LABEL: self.run_id,
        }
        metadata = PodSandboxMetadata(name, NAMESPACE, uid, 0)
        if self.template is not None:
            return attrs.evolve(
                self.template,
                metadata=metadata,
                log_directory=str(log_dir),
                labels={**self.template.labels, **labels},
            )
        return PodSandboxConfig(
            metadata=metadata, hostname=name, log_directory=str(log_dir), labels=labels
        )

    def container_config(
        self,
        sandbox: PodSandboxConfig,
        name: str,
        script: str,
        *,
        env: dict[str, str] | None = None,
    ) -> ContainerConfig:
        # The kubelet creates <log dir>/<container>/ before creating the container.
        (Path(sandbox.log_directory) / name).mkdir(parents=True, exist_ok=True)
        return ContainerConfig(
            metadata=ContainerMetadata(name, 0),
            image=ImageSpec(self.image),
            command=("sh", "-c", script),
            envs=tuple(KeyValue(k, v) for k, v in (env or {}).items()),
            labels={
                klabels.POD_NAME: sandbox.metadata.name,
                klabels.POD_NAMESPACE: NAMESPACE,
                klabels.POD_UID: sandbox.metadata.uid,
                klabels.CONTAINER_NAME: name,
                RUN_LABEL: self.run_id,
            },
            annotations={
                klabels.CONTAINER_RESTART_COUNT: "0",
                klabels.CONTAINER_HASH: "1a2b3c4d",
                "conformance.kubelet-kit.io/note": f"{name} of {self.check}",
            },
            log_path=f"{name}/{_FIRST_LOG}",
        )

    async def run_sandbox(self, suffix: str = "") -> tuple[str, PodSandboxConfig]:
        config = self.sandbox_config(suffix)
        self.at("run_pod_sandbox")
        sid = await self.runtime.run_pod_sandbox(config)
        self.sandboxes.append(sid)
        return sid, config

    async def start_container(
        self,
        sid: str,
        sandbox: PodSandboxConfig,
        name: str,
        script: str,
        *,
        env: dict[str, str] | None = None,
    ) -> str:
        config = self.container_config(sandbox, name, script, env=env)
        self.at(f"create_container({name})")
        cid = await self.runtime.create_container(sid, config, sandbox)
        self.at(f"start_container({name})")
        await self.runtime.start_container(cid)
        return cid

    # -- time

    async def eventually(
        self, what: str, probe: Callable[[], Awaitable[bool]], timeout: float | None = None
    ) -> None:
        """Poll ``probe`` until true, letting at most ``timeout`` seconds pass."""
        limit = self.timeout if timeout is None else timeout
        waited = 0.0
        while True:
            if await probe():
                return
            if waited >= limit:
                self.fail(f"{what}: not reached within {limit:g}s")
            await self.wait(self.poll_interval)
            waited += self.poll_interval

    async def run_while_waiting(
        self, what: str, coro: Coroutine[Any, Any, T], limit: float
    ) -> tuple[T, float]:
        """Await ``coro`` while letting time pass; returns its result and the time let
        pass. Fails when it has not finished after ``limit`` seconds."""
        task = asyncio.ensure_future(coro)
        waited = 0.0
        try:
            # Give the call a chance to finish without any time passing.
            for _ in range(3):
                await asyncio.sleep(0)
            while not task.done():
                if waited >= limit:
                    self.fail(f"{what}: did not return within {limit:g}s")
                await self.wait(self.poll_interval)
                waited += self.poll_interval
            return task.result(), waited
        finally:
            if not task.done():
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)

    async def container_state(self, cid: str) -> ContainerStatus:
        return await self.runtime.container_status(cid)

    async def cleanup(self) -> None:
        # Best effort: the check's own result stands whatever cleanup meets.
        for sid in reversed(self.sandboxes):
            with contextlib.suppress(Exception):
                await self.runtime.stop_pod_sandbox(sid)
            with contextlib.suppress(Exception):
                await self.runtime.remove_pod_sandbox(sid)


def _missing_id() -> str:
    return "f" * 64


async def _wait_state(ctx: _Ctx, cid: str, state: ContainerState) -> ContainerStatus:
    last: list[ContainerStatus] = []

    async def reached() -> bool:
        st = await ctx.runtime.container_status(cid)
        last[:] = [st]
        return st.state == state

    ctx.at(f"wait for {state.value}")
    try:
        await ctx.eventually(f"container {cid[:12]} reaching {state.value}", reached)
    except _CheckFailed as exc:
        seen = last[0].state.value if last else "nothing"
        raise _CheckFailed(f"{exc} (last state {seen})") from None
    return last[0]
