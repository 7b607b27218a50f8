"""The Runtime conformance kit: behavioural checks any Runtime can run against itself.

The kit exercises a :class:`kubelet_kit.container.Runtime` the way the kubelet
relies on it (sandboxes, containers, exits, logs, exec, images, typed errors),
using only busybox-compatible ``sh -c`` scripts, so the same checks run against
the in-memory :class:`~kubelet_kit.testing.FakeRuntime`, host processes and a
real CRI runtime. Every failure names the check and the step that failed.

A user's test is three lines::

    from kubelet_kit.testing.conformance import check_runtime

    async def test_my_runtime_conforms(tmp_path):
        await check_runtime(MyRuntime(), log_root=tmp_path)

or, one pytest test per check::

    test_my_runtime = conformance_test(MyRuntime)

Time: checks that wait (a container exiting, a stop grace period, an exec
timeout) let time pass through ``wait(seconds)``. By default that is
``FakeClock.run_for`` when the runtime has a ``clock`` attribute holding a
:class:`~kubelet_kit.testing.FakeClock`, and ``asyncio.sleep`` otherwise. Every wait
is bounded by ``timeout`` seconds of that time.

What a real runtime does differently from the fake, and the kit accepts: a stopped
container running ``sleep`` as PID 1 ignores SIGTERM (the kernel drops signals PID 1
has no handler for), so its exit code after a stop may be 143 (terminated) or 137
(killed after the timeout).

Each check runs in its own sandbox (named ``kk-conformance-<check>-<run id>`` in the
namespace ``kubelet-kit-conformance``) and removes it afterwards, even on failure.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import os
import re
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any, Literal, TypeVar

import attrs

from kubelet_kit.container import labels as klabels
from kubelet_kit.container.interfaces import (
    ContainerConfig,
    ContainerEvent,
    ContainerEventType,
    ContainerFilter,
    ContainerMetadata,
    ContainerState,
    ContainerStatus,
    ImageSpec,
    KeyValue,
    PodSandboxConfig,
    PodSandboxFilter,
    PodSandboxMetadata,
    PodSandboxState,
    Runtime,
)
from kubelet_kit.errors import (
    ContainerRuntimeError,
    DeadlineExceededError,
    ImagePullError,
    NotFoundError,
    UnimplementedError,
)
from kubelet_kit.testing.clock import FakeClock

__all__ = [
    "CHECKS",
    "CheckResult",
    "ConformanceFailure",
    "ConformanceReport",
    "check_runtime",
    "conformance_test",
    "run_conformance",
]

#: Namespace of every sandbox the kit creates.
NAMESPACE = "kubelet-kit-conformance"
#: Label the kit puts on its sandboxes and containers, valued with the run id.
RUN_LABEL = "conformance.kubelet-kit.io/run"

#: A CRI log line: RFC3339Nano time, stream, tag (F full, P partial), content.
_CRI_LOG_LINE = re.compile(
    r"^(?P<time>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,9})?(?:Z|[+-]\d\d:\d\d)) "
    r"(?P<stream>stdout|stderr) (?P<tag>[FP]) (?P<text>.*)$"
)

Wait = Callable[[float], Awaitable[None]]
T = TypeVar("T")


# ------------------------------------------------------------------------ results


@attrs.frozen
class CheckResult:
    """The outcome of one check.

    Attributes:
        name: The check's name (a key of :data:`CHECKS`).
        status: ``"passed"``, ``"failed"`` or ``"skipped"`` (the runtime raised
            UnimplementedError for an optional operation).
        message: For a failure, ``<step>: <what was wrong>``; for a skip, why.
    """

    name: str
    status: Literal["passed", "failed", "skipped"]
    message: str = ""


@attrs.frozen
class ConformanceReport:
    """Every check's result, in the order the checks ran."""

    results: tuple[CheckResult, ...]

    @property
    def ok(self) -> bool:
        """True when no check failed."""
        return not self.failures

    @property
    def failures(self) -> list[CheckResult]:
        """The failed checks."""
        return [r for r in self.results if r.status == "failed"]

    def result(self, name: str) -> CheckResult:
        """The result of the check ``name``.

        Raises:
            KeyError: that check did not run.
        """
        for r in self.results:
            if r.name == name:
                return r
        raise KeyError(name)

    def summary(self) -> str:
        """One line per check: ``PASS``/``FAIL``/``SKIP``, its name and message."""
        tags = {"passed": "PASS", "failed": "FAIL", "skipped": "SKIP"}
        return "\n".join(
            f"{tags[r.status]} {r.name}" + (f": {r.message}" if r.message else "")
            for r in self.results
        )

    def raise_for_failures(self) -> None:
        """Raise :class:`ConformanceFailure` if any check failed."""
        if not self.ok:
            raise ConformanceFailure(self)


class ConformanceFailure(AssertionError):
    """A runtime failed the conformance kit; ``report`` holds every result.

    An AssertionError, so pytest shows it as a test failure with the summary.
    """

    def __init__(self, report: ConformanceReport) -> None:
        self.report = report
        failed = ", ".join(r.name for r in report.failures)
        super().__init__(f"runtime failed conformance checks: {failed}\n{report.summary()}")


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
            log_path=f"{name}/0.log",
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


# ------------------------------------------------------------------------- checks


async def _check_version_and_status(ctx: _Ctx) -> None:
    ctx.at("version")
    v = await ctx.runtime.version()
    ctx.expect(bool(v.runtime_name), f"version: empty runtime_name in {v!r}")
    ctx.expect(bool(v.runtime_version), f"version: empty runtime_version in {v!r}")
    ctx.expect(bool(v.runtime_api_version), f"version: empty runtime_api_version in {v!r}")
    ctx.at("status")
    st = await ctx.runtime.status()
    for cond in ("RuntimeReady", "NetworkReady"):
        c = st.condition(cond)
        ctx.expect(c is not None, f"status: condition {cond} missing in {st!r}")
        assert c is not None
        ctx.expect(c.status, f"status: {cond} is false ({c.reason}: {c.message})")


async def _check_sandbox_lifecycle(ctx: _Ctx) -> None:
    rt = ctx.runtime
    sid, config = await ctx.run_sandbox()
    ctx.expect(bool(sid), "run_pod_sandbox returned an empty id")
    ctx.at("pod_sandbox_status (ready)")
    st = await rt.pod_sandbox_status(sid)
    ctx.expect_eq("status.id", st.id, sid)
    ctx.expect_eq("status.state", st.state, PodSandboxState.READY)
    ctx.expect_eq("status.metadata", st.metadata, config.metadata)
    for k, v in config.labels.items():
        ctx.expect_eq(f"status.labels[{k!r}]", st.labels.get(k), v)
    ctx.expect(st.created_at > 0, f"status.created_at not set: {st.created_at!r}")

    mine = {RUN_LABEL: ctx.run_id, klabels.POD_UID: config.metadata.uid}
    ctx.at("list_pod_sandboxes (label selector)")
    listed = await rt.list_pod_sandboxes(PodSandboxFilter(label_selector=mine))
    ctx.expect_eq("ids listed by label selector", [s.id for s in listed], [sid])
    ctx.expect_eq("listed metadata", listed[0].metadata, config.metadata)
    ctx.at("list_pod_sandboxes (non-matching selector)")
    none = await rt.list_pod_sandboxes(
        PodSandboxFilter(label_selector={**mine, klabels.POD_UID: "no-such-uid"})
    )
    ctx.expect_eq("ids listed by a non-matching selector", [s.id for s in none], [])
    ctx.at("list_pod_sandboxes (by id)")
    by_id = await rt.list_pod_sandboxes(PodSandboxFilter(id=sid))
    ctx.expect_eq("ids listed by id", [s.id for s in by_id], [sid])
    ctx.at("list_pod_sandboxes (state READY)")
    ready = await rt.list_pod_sandboxes(
        PodSandboxFilter(state=PodSandboxState.READY, label_selector=mine)
    )
    ctx.expect_eq("ids listed as READY", [s.id for s in ready], [sid])
    ctx.at("list_pod_sandboxes (state NOTREADY, before stop)")
    notready = await rt.list_pod_sandboxes(
        PodSandboxFilter(state=PodSandboxState.NOTREADY, label_selector=mine)
    )
    ctx.expect_eq("ids listed as NOTREADY while ready", [s.id for s in notready], [])

    ctx.at("stop_pod_sandbox")
    await rt.stop_pod_sandbox(sid)
    ctx.at("stop_pod_sandbox (again: idempotent)")
    await rt.stop_pod_sandbox(sid)
    ctx.at("pod_sandbox_status (stopped)")
    ctx.expect_eq(
        "state after stop", (await rt.pod_sandbox_status(sid)).state, PodSandboxState.NOTREADY
    )
    ctx.at("list_pod_sandboxes (state NOTREADY)")
    notready = await rt.list_pod_sandboxes(
        PodSandboxFilter(state=PodSandboxState.NOTREADY, label_selector=mine)
    )
    ctx.expect_eq("ids listed as NOTREADY after stop", [s.id for s in notready], [sid])

    ctx.at("remove_pod_sandbox")
    await rt.remove_pod_sandbox(sid)
    ctx.at("remove_pod_sandbox (again: idempotent)")
    await rt.remove_pod_sandbox(sid)
    ctx.at("pod_sandbox_status (removed)")
    try:
        await rt.pod_sandbox_status(sid)
    except NotFoundError:
        pass
    else:
        ctx.fail("pod_sandbox_status of a removed sandbox did not raise NotFoundError")
    ctx.at("list_pod_sandboxes (after remove)")
    gone = await rt.list_pod_sandboxes(PodSandboxFilter(label_selector=mine))
    ctx.expect_eq("ids listed after remove", [s.id for s in gone], [])


async def _check_unknown_ids(ctx: _Ctx) -> None:
    rt = ctx.runtime
    missing = _missing_id()
    calls: list[tuple[str, Callable[[], Awaitable[object]]]] = [
        ("pod_sandbox_status", lambda: rt.pod_sandbox_status(missing)),
        ("container_status", lambda: rt.container_status(missing)),
        ("start_container", lambda: rt.start_container(missing)),
    ]
    for name, call in calls:
        ctx.at(f"{name}(unknown id)")
        try:
            await call()
        except NotFoundError:
            continue
        except Exception as exc:
            ctx.fail(f"expected NotFoundError, got {type(exc).__name__}: {exc}")
        ctx.fail("expected NotFoundError, the call succeeded")
    ctx.at("remove_container(unknown id)")
    await rt.remove_container(missing)
    ctx.at("remove_pod_sandbox(unknown id)")
    await rt.remove_pod_sandbox(missing)


async def _check_duplicate_names(ctx: _Ctx) -> None:
    rt = ctx.runtime
    sid, sandbox = await ctx.run_sandbox()
    ctx.at("run_pod_sandbox (same name, namespace, uid and attempt)")
    try:
        dup = await rt.run_pod_sandbox(sandbox)
    except ContainerRuntimeError:
        pass  # AlreadyExistsError, or an untyped refusal from older runtimes
    else:
        ctx.sandboxes.append(dup)
        ctx.fail("a second sandbox with the same metadata was created")
    config = ctx.container_config(sandbox, "twin", "sleep 3600")
    ctx.at("create_container")
    await rt.create_container(sid, config, sandbox)
    ctx.at("create_container (same name and attempt in the sandbox)")
    try:
        await rt.create_container(sid, config, sandbox)
    except ContainerRuntimeError:
        pass
    else:
        ctx.fail("a second container with the same name and attempt was created")
    ctx.at("create_container (next attempt)")
    next_attempt = attrs.evolve(config, metadata=ContainerMetadata("twin", 1))
    await rt.create_container(sid, next_attempt, sandbox)


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


async def _check_container_lifecycle(ctx: _Ctx) -> None:
    rt = ctx.runtime
    sid, sandbox = await ctx.run_sandbox()
    config = ctx.container_config(sandbox, "lifecycle", "sleep 3600")
    ctx.at("create_container")
    cid = await rt.create_container(sid, config, sandbox)
    ctx.expect(bool(cid), "create_container returned an empty id")
    ctx.at("container_status (created)")
    st = await rt.container_status(cid)
    ctx.expect_eq("state after create", st.state, ContainerState.CREATED)
    ctx.expect_eq("status.id", st.id, cid)
    ctx.expect_eq("status.metadata", st.metadata, config.metadata)
    for k, v in config.labels.items():
        ctx.expect_eq(f"status.labels[{k!r}]", st.labels.get(k), v)
    for k, v in config.annotations.items():
        ctx.expect_eq(f"status.annotations[{k!r}]", st.annotations.get(k), v)
    image_name = ctx.image.rsplit("/", 1)[-1].split(":")[0].split("@")[0]
    ctx.expect(
        image_name in st.image or st.image.startswith("sha256:"),
        f"status.image {st.image!r} does not name the image {ctx.image!r}",
    )
    ctx.expect(st.created_at > 0, f"status.created_at not set: {st.created_at!r}")

    mine = {RUN_LABEL: ctx.run_id, klabels.CONTAINER_NAME: "lifecycle"}
    ctx.at("list_containers (state CREATED)")
    created = await rt.list_containers(
        ContainerFilter(state=ContainerState.CREATED, label_selector=mine)
    )
    ctx.expect_eq("ids listed as CREATED", [c.id for c in created], [cid])

    ctx.at("start_container")
    await rt.start_container(cid)
    running = await _wait_state(ctx, cid, ContainerState.RUNNING)
    ctx.expect(running.started_at > 0, "status.started_at not set for a running container")
    ctx.at("start_container (again, while running)")
    try:
        await rt.start_container(cid)
    except ContainerRuntimeError:
        pass
    else:
        ctx.fail("starting a running container did not raise a ContainerRuntimeError")
    ctx.at("list_containers (state RUNNING, by sandbox)")
    listed = await rt.list_containers(
        ContainerFilter(state=ContainerState.RUNNING, pod_sandbox_id=sid)
    )
    ctx.expect_eq("ids listed as RUNNING in the sandbox", [c.id for c in listed], [cid])
    info = listed[0]
    ctx.expect_eq("listed pod_sandbox_id", info.pod_sandbox_id, sid)
    ctx.expect_eq("listed metadata", info.metadata, config.metadata)
    for k, v in config.labels.items():
        ctx.expect_eq(f"listed labels[{k!r}]", info.labels.get(k), v)
    ctx.at("list_containers (label selector)")
    by_label = await rt.list_containers(ContainerFilter(label_selector=mine))
    ctx.expect_eq("ids listed by label selector", [c.id for c in by_label], [cid])
    ctx.at("list_containers (state EXITED, while running)")
    exited = await rt.list_containers(
        ContainerFilter(state=ContainerState.EXITED, label_selector=mine)
    )
    ctx.expect_eq("ids listed as EXITED while running", [c.id for c in exited], [])

    ctx.at(f"stop_container(timeout={ctx.stop_timeout:g})")
    await ctx.run_while_waiting(
        "stop_container", rt.stop_container(cid, ctx.stop_timeout), ctx.stop_timeout + ctx.timeout
    )
    ctx.at("container_status (stopped)")
    st = await rt.container_status(cid)
    ctx.expect_eq("state after stop", st.state, ContainerState.EXITED)
    ctx.expect(
        st.exit_code in (137, 143),
        f"exit_code after stop: expected 143 (SIGTERM) or 137 (SIGKILL), got {st.exit_code}",
    )
    ctx.expect(
        st.finished_at >= st.started_at > 0,
        f"finished_at {st.finished_at!r} before started_at {st.started_at!r}",
    )
    ctx.at("stop_container (again: idempotent)")
    await rt.stop_container(cid, ctx.stop_timeout)

    ctx.at("remove_container")
    await rt.remove_container(cid)
    ctx.at("remove_container (again: idempotent)")
    await rt.remove_container(cid)
    ctx.at("container_status (removed)")
    try:
        await rt.container_status(cid)
    except NotFoundError:
        pass
    else:
        ctx.fail("container_status of a removed container did not raise NotFoundError")
    ctx.at("list_containers (after remove)")
    gone = await rt.list_containers(ContainerFilter(label_selector=mine))
    ctx.expect_eq("ids listed after remove", [c.id for c in gone], [])


async def _check_exit_codes_and_logs(ctx: _Ctx) -> None:
    rt = ctx.runtime
    sid, sandbox = await ctx.run_sandbox()
    failing = await ctx.start_container(sid, sandbox, "fails", "echo hello; exit 3")
    succeeding = await ctx.start_container(sid, sandbox, "succeeds", "echo bye >&2; exit 0")

    st = await _wait_state(ctx, failing, ContainerState.EXITED)
    ctx.at("container_status (exit 3)")
    ctx.expect_eq("exit_code of `echo hello; exit 3`", st.exit_code, 3)
    ctx.expect_eq("reason of `exit 3`", st.reason, "Error")
    ctx.expect(
        st.finished_at >= st.started_at > 0,
        f"finished_at {st.finished_at!r} before started_at {st.started_at!r}",
    )
    ok = await _wait_state(ctx, succeeding, ContainerState.EXITED)
    ctx.at("container_status (exit 0)")
    ctx.expect_eq("exit_code of `exit 0`", ok.exit_code, 0)
    ctx.expect_eq("reason of `exit 0`", ok.reason, "Completed")
    ctx.at("list_containers (state EXITED)")
    exited = await rt.list_containers(
        ContainerFilter(state=ContainerState.EXITED, pod_sandbox_id=sid)
    )
    ctx.expect_eq(
        "ids listed as EXITED", sorted(c.id for c in exited), sorted([failing, succeeding])
    )

    for name, stream, text in (("fails", "stdout", "hello"), ("succeeds", "stderr", "bye")):
        path = Path(sandbox.log_directory) / name / "0.log"
        ctx.at(f"log file of {name}")

        async def has_line(path: Path = path, stream: str = stream, text: str = text) -> bool:
            return _find_log_line(path, stream, text)

        await ctx.eventually(
            f"{path.name} of {name} holding a CRI-format {stream} line {text!r}", has_line
        )


def _find_log_line(path: Path, stream: str, text: str) -> bool:
    try:
        content = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return False
    for line in content.splitlines():
        m = _CRI_LOG_LINE.match(line)
        if m and m["stream"] == stream and m["text"] == text:
            return True
    return False


async def _check_exec(ctx: _Ctx) -> None:
    rt = ctx.runtime
    sid, sandbox = await ctx.run_sandbox()
    cid = await ctx.start_container(
        sid, sandbox, "exec", "sleep 3600", env={"KK_CONFORMANCE": "visible value"}
    )
    await _wait_state(ctx, cid, ContainerState.RUNNING)

    async def run(cmd: Sequence[str], timeout: float | None = None) -> Any:
        ctx.at(f"exec_sync({list(cmd)!r})")
        result, _ = await ctx.run_while_waiting(
            "exec_sync", rt.exec_sync(cid, cmd, timeout), ctx.timeout
        )
        return result

    res = await run(["sh", "-c", "echo $KK_CONFORMANCE"])
    ctx.expect_eq("exit_code of echo", res.exit_code, 0)
    ctx.expect_eq("stdout of `echo $KK_CONFORMANCE`", res.stdout, b"visible value\n")
    res = await run(["sh", "-c", "echo oops >&2; exit 7"])
    ctx.expect_eq("exit_code of `exit 7`", res.exit_code, 7)
    ctx.expect_eq("stderr of `echo oops >&2`", res.stderr, b"oops\n")
    ctx.expect_eq("stdout of a command writing only stderr", res.stdout, b"")
    res = await run(["true"])
    ctx.expect_eq("exit_code of true", res.exit_code, 0)

    ctx.at("exec_sync(sleep 60, timeout=1)")
    try:
        await ctx.run_while_waiting(
            "exec_sync with timeout", rt.exec_sync(cid, ["sleep", "60"], 1), 1 + ctx.timeout
        )
    except DeadlineExceededError:
        pass
    else:
        ctx.fail("an exec running past its timeout did not raise DeadlineExceededError")

    ctx.at("stop_container before exec into a stopped container")
    await ctx.run_while_waiting("stop_container", rt.stop_container(cid, 0), ctx.timeout)
    ctx.at("exec_sync into an exited container")
    try:
        await rt.exec_sync(cid, ["true"], 5)
    except ContainerRuntimeError:
        pass
    else:
        ctx.fail("exec into an exited container did not raise a ContainerRuntimeError")


async def _check_sigterm_ignored(ctx: _Ctx) -> None:
    rt = ctx.runtime
    sid, sandbox = await ctx.run_sandbox()
    cid = await ctx.start_container(sid, sandbox, "stubborn", "trap '' TERM; sleep 3600")
    await _wait_state(ctx, cid, ContainerState.RUNNING)
    ctx.at(f"stop_container(timeout={ctx.stop_timeout:g}) of a container ignoring SIGTERM")
    await ctx.run_while_waiting(
        "stop_container", rt.stop_container(cid, ctx.stop_timeout), ctx.stop_timeout + ctx.timeout
    )
    st = await rt.container_status(cid)
    ctx.expect_eq("state after stop", st.state, ContainerState.EXITED)
    ctx.expect_eq("exit_code of a container killed after its stop timeout", st.exit_code, 137)
    # The stop must have waited the grace period (measured on the runtime's clock).
    ctx.expect(
        st.finished_at - st.started_at >= ctx.stop_timeout * 0.9,
        f"container killed {st.finished_at - st.started_at:.3f}s after start, before its "
        f"{ctx.stop_timeout:g}s stop timeout",
    )


async def _check_images(ctx: _Ctx) -> None:
    rt = ctx.runtime
    ctx.at(f"pull_image({ctx.image!r})")
    ref = await rt.pull_image(ImageSpec(ctx.image))
    ctx.expect(bool(ref), "pull_image returned an empty reference")
    ctx.at(f"image_status({ctx.image!r})")
    img = await rt.image_status(ImageSpec(ctx.image))
    ctx.expect(img is not None, "image_status of a pulled image returned None")
    assert img is not None
    ctx.at("list_images")
    ids = [i.id for i in await rt.list_images()]
    ctx.expect(img.id in ids, f"list_images does not hold the pulled image {img.id!r}")

    ctx.at(f"pull_image({ctx.missing_image!r})")
    try:
        await ctx.run_while_waiting(
            "pull of a missing image", rt.pull_image(ImageSpec(ctx.missing_image)), ctx.timeout
        )
    except ImagePullError:
        pass
    except Exception as exc:
        ctx.fail(f"expected ImagePullError, got {type(exc).__name__}: {exc}")
    else:
        ctx.fail("pulling a missing image succeeded")
    ctx.at(f"image_status({ctx.missing_image!r})")
    ctx.expect(
        await rt.image_status(ImageSpec(ctx.missing_image)) is None,
        "image_status of a missing image is not None",
    )
    ctx.at("remove_image(missing: idempotent)")
    await rt.remove_image(ImageSpec(ctx.missing_image))


async def _check_stats(ctx: _Ctx) -> None:
    rt = ctx.runtime
    sid, sandbox = await ctx.run_sandbox()
    cid = await ctx.start_container(sid, sandbox, "stats", "sleep 3600")
    await _wait_state(ctx, cid, ContainerState.RUNNING)
    ctx.at("container_stats")
    cs = await rt.container_stats(cid)
    ctx.expect_eq("container_stats.container_id", cs.container_id, cid)
    ctx.at("list_container_stats (by id)")
    listed = await rt.list_container_stats(ContainerFilter(id=cid))
    ctx.expect_eq("ids in list_container_stats", [s.container_id for s in listed], [cid])
    ctx.at("pod_sandbox_stats")
    ps = await rt.pod_sandbox_stats(sid)
    ctx.expect_eq("pod_sandbox_stats.pod_sandbox_id", ps.pod_sandbox_id, sid)


async def _check_events(ctx: _Ctx) -> None:
    rt = ctx.runtime
    seen: list[ContainerEvent] = []
    stream = rt.get_container_events()
    first: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    async def collect() -> None:
        try:
            async for event in stream:
                seen.append(event)
        except Exception as exc:
            if not first.done():
                first.set_exception(exc)

    ctx.at("get_container_events")
    task = asyncio.ensure_future(collect())
    try:
        # Let the stream start; a runtime without events raises UnimplementedError now.
        for _ in range(5):
            await asyncio.sleep(0)
        if first.done():
            try:
                first.result()
            except UnimplementedError as exc:
                raise _Skip(f"no event stream: {exc}") from None
        sid, sandbox = await ctx.run_sandbox()
        cid = await ctx.start_container(sid, sandbox, "events", "exit 0")
        want = [ContainerEventType.CREATED, ContainerEventType.STARTED, ContainerEventType.STOPPED]

        async def all_seen() -> bool:
            if first.done():
                first.result()  # the stream failed: report it
            got = [e.type for e in seen if e.container_id == cid]
            return all(t in got for t in want)

        ctx.at("container events")
        await ctx.eventually(f"CREATED, STARTED and STOPPED events for {cid[:12]}", all_seen)
        got = [e.type for e in seen if e.container_id == cid]
        ctx.expect_eq("order of the container's events", [t for t in got if t in want], want)
        stopped = next(
            e for e in seen if e.container_id == cid and e.type == ContainerEventType.STOPPED
        )
        ctx.expect(
            stopped.pod_sandbox_status is None or stopped.pod_sandbox_status.id == sid,
            "the STOPPED event carries another sandbox's status",
        )
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        aclose = getattr(stream, "aclose", None)
        if aclose is not None:
            await aclose()


#: Every check, by name, in the order :func:`run_conformance` runs them.
CHECKS: dict[str, Callable[[_Ctx], Awaitable[None]]] = {
    "version_and_status": _check_version_and_status,
    "sandbox_lifecycle": _check_sandbox_lifecycle,
    "unknown_ids": _check_unknown_ids,
    "duplicate_names": _check_duplicate_names,
    "images": _check_images,
    "container_lifecycle": _check_container_lifecycle,
    "exit_codes_and_logs": _check_exit_codes_and_logs,
    "exec": _check_exec,
    "sigterm_ignored": _check_sigterm_ignored,
    "stats": _check_stats,
    "events": _check_events,
}


# ----------------------------------------------------------------------- runners

#: Checks of optional operations: UnimplementedError skips them instead of failing.
_OPTIONAL = frozenset({"stats", "events"})
#: Checks that need no pulled image.
_NEEDS_NO_IMAGE = frozenset({"version_and_status", "sandbox_lifecycle", "unknown_ids", "images"})


def _default_wait(runtime: Runtime) -> Wait:
    clock = getattr(runtime, "clock", None)
    if isinstance(clock, FakeClock):
        return clock.run_for
    return asyncio.sleep


async def run_conformance(
    runtime: Runtime,
    *,
    log_root: str | os.PathLike[str],
    image: str = "busybox",
    missing_image: str = "registry.invalid/kubelet-kit/no-such-image:0",
    wait: Wait | None = None,
    timeout: float = 30.0,
    poll_interval: float = 0.1,
    stop_timeout: float = 2.0,
    checks: Sequence[str] | None = None,
    sandbox_template: PodSandboxConfig | None = None,
    run_id: str | None = None,
) -> ConformanceReport:
    """Run the conformance checks against ``runtime`` and report every result.

    Never raises for a failed check (see :func:`check_runtime` for that). The image
    is pulled as part of the ``images`` check; the container checks expect it to be
    pullable (they pull it themselves if needed).

    Args:
        runtime: The runtime under test.
        log_root: A directory the runtime can write container logs under (each
            sandbox gets ``<log_root>/<namespace>_<name>_<uid>/``).
        image: A busybox-compatible image (``sh``, ``echo``, ``sleep``, ``trap``).
        missing_image: A reference that cannot be pulled.
        wait: Lets ``seconds`` of the runtime's time pass (see the module doc).
        timeout: Most seconds any single wait may take.
        poll_interval: Seconds between two polls of a state.
        stop_timeout: The grace period passed to ``stop_container``.
        checks: Names of the checks to run (default: all of :data:`CHECKS`).
        sandbox_template: Fields (cgroup parent, runtime handler, DNS...) every
            sandbox config starts from; the kit sets metadata, labels, log directory.
        run_id: Distinguishes this run's objects (default: random).

    Raises:
        ValueError: an unknown check name.
    """
    names = list(CHECKS) if checks is None else list(checks)
    unknown = [n for n in names if n not in CHECKS]
    if unknown:
        raise ValueError(f"checks: unknown check(s) {unknown}; known: {', '.join(CHECKS)}")
    root = Path(log_root)
    rid = run_id or uuid.uuid4().hex[:8]
    results = []
    pulled = False
    for name in names:
        ctx = _Ctx(
            runtime=runtime,
            check=name,
            image=image,
            missing_image=missing_image,
            log_root=root,
            wait=wait or _default_wait(runtime),
            timeout=timeout,
            poll_interval=poll_interval,
            stop_timeout=stop_timeout,
            run_id=rid,
            template=sandbox_template,
        )
        try:
            if name not in _NEEDS_NO_IMAGE and not pulled:
                ctx.at(f"setup: pull_image({image!r})")
                await runtime.pull_image(ImageSpec(image))
                pulled = True
            await CHECKS[name](ctx)
        except _CheckFailed as exc:
            results.append(CheckResult(name, "failed", f"{ctx.step}: {exc}"))
        except _Skip as exc:
            results.append(CheckResult(name, "skipped", str(exc)))
        except UnimplementedError as exc:
            if name in _OPTIONAL:
                results.append(CheckResult(name, "skipped", f"{ctx.step}: not offered: {exc}"))
            else:
                results.append(
                    CheckResult(name, "failed", f"{ctx.step}: unexpected UnimplementedError: {exc}")
                )
        except Exception as exc:
            results.append(
                CheckResult(name, "failed", f"{ctx.step}: unexpected {type(exc).__name__}: {exc}")
            )
        else:
            results.append(CheckResult(name, "passed"))
            if name == "images":
                pulled = True
        finally:
            await ctx.cleanup()
    return ConformanceReport(tuple(results))


async def check_runtime(
    runtime: Runtime,
    *,
    log_root: str | os.PathLike[str],
    image: str = "busybox",
    wait: Wait | None = None,
    **options: Any,
) -> ConformanceReport:
    """Run the conformance kit and raise if any check failed.

    Takes the same arguments as :func:`run_conformance`.

    Returns:
        The report, when every check passed or was skipped.

    Raises:
        ConformanceFailure: (an AssertionError) at least one check failed; its
            message lists every check with what failed.
    """
    report = await run_conformance(runtime, log_root=log_root, image=image, wait=wait, **options)
    report.raise_for_failures()
    return report


def conformance_test(
    factory: Callable[[], Runtime | Awaitable[Runtime]],
    **options: Any,
) -> Callable[..., Coroutine[Any, Any, None]]:
    """Build a pytest test that runs each check as its own parametrised case.

    ``test_mine = conformance_test(MyRuntime, image="busybox:1.36")`` in a test
    module gives ``test_mine[version_and_status]``, ``test_mine[exec]``... A
    skipped check is reported with ``pytest.skip``. The runtime is built afresh for
    each case; if it has an ``aclose()`` or ``close()`` method, that is awaited (or
    called) afterwards. ``options`` go to :func:`run_conformance`.
    """
    import pytest

    @pytest.mark.parametrize("check", list(CHECKS))
    async def test(check: str, tmp_path: Path) -> None:
        built = factory()
        runtime = await built if inspect.isawaitable(built) else built
        try:
            report = await run_conformance(runtime, log_root=tmp_path, checks=[check], **options)
        finally:
            await _close(runtime)
        result = report.result(check)
        if result.status == "skipped":
            pytest.skip(result.message)
        report.raise_for_failures()

    return test


async def _close(runtime: object) -> None:
    for name in ("aclose", "close"):
        method = getattr(runtime, name, None)
        if callable(method):
            outcome = method()
            if inspect.isawaitable(outcome):
                await outcome
            return
