"""FakeRuntime: CRI semantics on a fake clock, faults, latency, events, the shell."""

from __future__ import annotations

import asyncio
import string
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubelet_kit.container import (
    ContainerConfig,
    ContainerEvent,
    ContainerEventType,
    ContainerFilter,
    ContainerMetadata,
    ContainerState,
    ImageFsReporter,
    ImageSpec,
    KeyValue,
    LinuxContainerResources,
    LogReopener,
    PodSandboxConfig,
    PodSandboxFilter,
    PodSandboxMetadata,
    PodSandboxState,
    Runtime,
)
from kubelet_kit.container import labels as klabels
from kubelet_kit.errors import (
    AlreadyExistsError,
    ContainerRuntimeError,
    ContainerStartError,
    DeadlineExceededError,
    ImageNotFoundError,
    ImagePullError,
    NotFoundError,
    RuntimeUnavailableError,
    UnimplementedError,
)
from kubelet_kit.testing import (
    FakeClock,
    FakeRuntime,
    format_cri_log_line,
    format_rfc3339_nano,
    normalize_image_ref,
)
from kubelet_kit.testing.fake_runtime import RUNTIME_METHODS


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


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def rt(clock: FakeClock) -> FakeRuntime:
    return FakeRuntime(clock, events=True)


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


# ---------------------------------------------------------------------- protocol


def test_fake_runtime_satisfies_the_runtime_protocol() -> None:
    assert isinstance(FakeRuntime(), Runtime)


def test_testing_all_is_honest() -> None:
    import kubelet_kit.testing as testing

    assert sorted(testing.__all__) == testing.__all__
    for name in testing.__all__:
        assert getattr(testing, name) is not None


def test_runtime_methods_list_matches_the_protocols() -> None:
    protocol_methods = {
        name
        for protocol in (Runtime, ImageFsReporter, LogReopener)
        for name in vars(protocol)
        if not name.startswith("_") and callable(vars(protocol)[name])
    }
    assert protocol_methods == RUNTIME_METHODS


# ------------------------------------------------------------- exits and reasons


@pytest.mark.parametrize(
    ("script", "code", "reason"),
    [
        ("exit 0", 0, "Completed"),
        ("echo hi", 0, "Completed"),
        ("exit 3", 3, "Error"),
        ("false", 1, "Error"),
        ("true; false; true", 0, "Completed"),
        ("exit 256", 0, "Completed"),
        ("exit 300", 44, "Error"),
        ("exit nope", 2, "Error"),
        ("echo 'unterminated", 2, "Error"),
    ],
)
async def test_script_exit_code_and_reason(
    rt: FakeRuntime, script: str, code: int, reason: str
) -> None:
    _, cid = await start(rt, script)
    st = await rt.container_status(cid)
    assert (st.state, st.exit_code, st.reason) == (ContainerState.EXITED, code, reason)


async def test_sleep_runs_on_the_clock_and_timestamps_come_from_it(
    rt: FakeRuntime, clock: FakeClock
) -> None:
    t0 = clock.now()
    _, cid = await start(rt, "sleep 10; exit 4")
    clock.advance(9.999)
    assert (await rt.container_status(cid)).state == ContainerState.RUNNING
    clock.advance(0.001)
    st = await rt.container_status(cid)
    assert (st.state, st.exit_code) == (ContainerState.EXITED, 4)
    assert (st.created_at, st.started_at, st.finished_at) == (t0, t0, t0 + 10)


async def test_containers_exit_in_deadline_order_ties_in_start_order(
    rt: FakeRuntime, clock: FakeClock
) -> None:
    sc = sandbox_config()
    sid = await rt.run_pod_sandbox(sc)
    ids = {}
    for name, secs in [("c", 3), ("a", 1), ("b1", 2), ("b2", 2)]:
        cid = await rt.create_container(sid, container_config(name, f"sleep {secs}"), sc)
        await rt.start_container(cid)
        ids[cid] = name
    stream = rt.get_container_events()
    await clock.run_for(5)
    stopped: list[tuple[str, float]] = []
    while len(stopped) < 4:
        ev = await asyncio.wait_for(stream.__anext__(), 1)
        if ev.type == ContainerEventType.STOPPED:
            stopped.append((ids[ev.container_id], ev.created_at - clock.now() + 5))
    assert stopped == [("a", 1), ("b1", 2), ("b2", 2), ("c", 3)]


async def test_no_command_runs_until_stopped_with_sigterm(
    rt: FakeRuntime, clock: FakeClock
) -> None:
    _, cid = await start(rt, None)
    await clock.run_for(3600)
    assert (await rt.container_status(cid)).state == ContainerState.RUNNING
    await rt.stop_container(cid, 30)
    st = await rt.container_status(cid)
    assert (st.exit_code, st.reason, st.finished_at) == (143, "Error", clock.now())


async def test_stop_of_container_ignoring_sigterm_waits_timeout_then_kills(
    rt: FakeRuntime, clock: FakeClock
) -> None:
    rt.ignore_sigterm("app")
    _, cid = await start(rt, "sleep infinity")
    t0 = clock.now()
    stop = asyncio.create_task(rt.stop_container(cid, 30))
    await clock.run_for(29)
    assert not stop.done()
    assert (await rt.container_status(cid)).state == ContainerState.RUNNING
    await clock.run_for(1)
    assert stop.done()
    st = await rt.container_status(cid)
    assert (st.exit_code, st.reason, st.finished_at) == (137, "Error", t0 + 30)


async def test_trap_ignores_sigterm_but_own_exit_during_grace_wins(
    rt: FakeRuntime, clock: FakeClock
) -> None:
    _, cid = await start(rt, "trap '' TERM; sleep 5; exit 7")
    stop = asyncio.create_task(rt.stop_container(cid, 30))
    await clock.run_for(6)
    assert stop.done()
    st = await rt.container_status(cid)
    assert (st.exit_code, st.finished_at) == (7, clock.now() - 1)


async def test_stop_with_zero_timeout_kills_at_once(rt: FakeRuntime) -> None:
    rt.ignore_sigterm("app")
    _, cid = await start(rt, "sleep 100")
    await rt.stop_container(cid, 0)
    assert (await rt.container_status(cid)).exit_code == 137


async def test_scripted_exit_oom_and_pod_scoping(rt: FakeRuntime, clock: FakeClock) -> None:
    rt.script("app", oom_killed=True, after=2, pod_uid="uid-1", times=1)
    _, cid = await start(rt, "sleep infinity")
    await clock.run_for(2)
    st = await rt.container_status(cid)
    assert (st.state, st.exit_code, st.reason) == (ContainerState.EXITED, 137, "OOMKilled")
    # times=1: the next start runs its command again.
    sc = sandbox_config(name="web2", uid="uid-1")
    sid2 = await rt.run_pod_sandbox(sc)
    cid2 = await rt.create_container(sid2, container_config("app", "exit 5"), sc)
    await rt.start_container(cid2)
    assert (await rt.container_status(cid2)).exit_code == 5


async def test_script_for_other_pod_does_not_apply(rt: FakeRuntime) -> None:
    rt.script("app", exit_code=9, pod_uid="someone-else")
    _, cid = await start(rt, "exit 1")
    assert (await rt.container_status(cid)).exit_code == 1


async def test_exit_container_ends_a_running_one(rt: FakeRuntime) -> None:
    _, cid = await start(rt, None)
    rt.exit_container(cid, 2, reason="ContainerCannotRun")
    st = await rt.container_status(cid)
    assert (st.exit_code, st.reason) == (2, "ContainerCannotRun")
    with pytest.raises(ValueError, match="CONTAINER_EXITED"):
        rt.exit_container(cid)


# ---------------------------------------------------------------- CRI semantics


async def test_duplicate_sandbox_and_container_names_are_refused(rt: FakeRuntime) -> None:
    sc = sandbox_config()
    sid = await rt.run_pod_sandbox(sc)
    with pytest.raises(AlreadyExistsError, match="web_default_uid-1_0"):
        await rt.run_pod_sandbox(sc)
    await rt.run_pod_sandbox(sandbox_config(attempt=1))  # another attempt is fine
    await rt.create_container(sid, container_config("app"), sc)
    with pytest.raises(AlreadyExistsError, match="'app' attempt 0"):
        await rt.create_container(sid, container_config("app"), sc)
    await rt.create_container(sid, container_config("app", attempt=1), sc)
    # Once removed, the name is free again.
    await rt.remove_pod_sandbox(sid)
    await rt.run_pod_sandbox(sc)


async def test_unknown_ids_raise_not_found_but_removal_succeeds(rt: FakeRuntime) -> None:
    for call in (
        rt.pod_sandbox_status("nope"),
        rt.stop_pod_sandbox("nope"),
        rt.container_status("nope"),
        rt.start_container("nope"),
        rt.stop_container("nope", 1),
        rt.exec_sync("nope", ["true"]),
        rt.container_stats("nope"),
        rt.pod_sandbox_stats("nope"),
        rt.create_container("nope", container_config(), sandbox_config()),
    ):
        with pytest.raises(NotFoundError, match="'nope'"):
            await call
    await rt.remove_container("nope")
    await rt.remove_pod_sandbox("nope")
    await rt.remove_image(ImageSpec("nope"))


async def test_start_of_non_created_container_fails(rt: FakeRuntime) -> None:
    _, cid = await start(rt, None)
    with pytest.raises(ContainerStartError, match="CONTAINER_RUNNING"):
        await rt.start_container(cid)
    await rt.stop_container(cid, 1)
    with pytest.raises(ContainerStartError, match="CONTAINER_EXITED"):
        await rt.start_container(cid)


async def test_stop_and_remove_are_idempotent(rt: FakeRuntime) -> None:
    sid, cid = await start(rt, None)
    await rt.stop_container(cid, 1)
    await rt.stop_container(cid, 1)
    assert (await rt.container_status(cid)).exit_code == 143  # the first stop's
    await rt.remove_container(cid)
    await rt.remove_container(cid)
    await rt.stop_pod_sandbox(sid)
    await rt.stop_pod_sandbox(sid)
    assert (await rt.pod_sandbox_status(sid)).state == PodSandboxState.NOTREADY
    await rt.remove_pod_sandbox(sid)
    await rt.remove_pod_sandbox(sid)
    assert await rt.list_pod_sandboxes() == []


async def test_stop_sandbox_kills_containers_and_refuses_new_ones(rt: FakeRuntime) -> None:
    sid, cid = await start(rt, "sleep 100")
    await rt.stop_pod_sandbox(sid)
    assert (await rt.container_status(cid)).exit_code == 137
    with pytest.raises(ContainerStartError, match="SANDBOX_NOTREADY"):
        await rt.create_container(sid, container_config("other"), sandbox_config())


async def test_remove_running_container_kills_it_and_removes(rt: FakeRuntime) -> None:
    _, cid = await start(rt, None)
    await rt.remove_container(cid)
    assert await rt.list_containers() == []
    with pytest.raises(NotFoundError):
        await rt.container_status(cid)


async def test_list_filters(rt: FakeRuntime) -> None:
    sid, running = await start(rt, None)
    sc = sandbox_config()
    exited = await rt.create_container(sid, container_config("done", "exit 0"), sc)
    await rt.start_container(exited)
    other = await rt.run_pod_sandbox(sandbox_config(name="db", uid="uid-2"))
    await rt.stop_pod_sandbox(other)

    ready = await rt.list_pod_sandboxes(PodSandboxFilter(state=PodSandboxState.READY))
    assert [s.id for s in ready] == [sid]
    by_label = await rt.list_pod_sandboxes(
        PodSandboxFilter(label_selector={klabels.POD_UID: "uid-2"})
    )
    assert [s.id for s in by_label] == [other]
    assert [
        c.id for c in await rt.list_containers(ContainerFilter(state=ContainerState.RUNNING))
    ] == [running]
    named = await rt.list_containers(
        ContainerFilter(label_selector={klabels.CONTAINER_NAME: "done"})
    )
    assert [c.id for c in named] == [exited]
    assert len(await rt.list_containers(ContainerFilter(pod_sandbox_id=other))) == 0


async def test_status_keeps_metadata_labels_annotations_and_log_path(
    rt: FakeRuntime, tmp_path: Path
) -> None:
    _, cid = await start(rt, None, log_dir=tmp_path, log_path="app/0.log")
    st = await rt.container_status(cid)
    assert st.metadata == ContainerMetadata("app", 0)
    assert st.labels[klabels.CONTAINER_NAME] == "app"
    assert st.annotations[klabels.CONTAINER_RESTART_COUNT] == "0"
    assert st.image == "busybox"
    assert st.image_ref.startswith("sha256:")
    assert st.log_path == str(tmp_path / "app/0.log")


async def test_ids_are_unique_hex(rt: FakeRuntime) -> None:
    sc = sandbox_config()
    sid = await rt.run_pod_sandbox(sc)
    cids = [await rt.create_container(sid, container_config(f"c{i}"), sc) for i in range(5)]
    for i in [sid, *cids]:
        assert len(i) == 64
        int(i, 16)
    assert len({sid, *cids}) == 6


# ------------------------------------------------------------------------- logs


async def test_log_file_in_cri_format_and_env_expansion(
    rt: FakeRuntime, clock: FakeClock, tmp_path: Path
) -> None:
    _, cid = await start(
        rt,
        "echo \"hello $KEY\"; sleep 0.5; echo ${KEY}x oops >&2; echo '$KEY'",
        env={"KEY": "world"},
        log_dir=tmp_path,
        log_path="app/0.log",
    )
    await clock.run_for(1)
    text = (tmp_path / "app" / "0.log").read_text()
    t0 = clock.now() - 1
    assert text == (
        f"{format_rfc3339_nano(t0)} stdout F hello world\n"
        f"{format_rfc3339_nano(t0 + 0.5)} stderr F worldx oops\n"
        f"{format_rfc3339_nano(t0 + 0.5)} stdout F $KEY\n"
    )
    assert [ln.text for ln in rt.logs(cid, "stdout")] == ["hello world", "$KEY"]


def test_rfc3339_nano_trims_trailing_zeros_like_go() -> None:
    assert format_rfc3339_nano(1_767_225_600.0) == "2026-01-01T00:00:00Z"
    assert format_rfc3339_nano(1_767_225_600.5) == "2026-01-01T00:00:00.5Z"
    assert format_rfc3339_nano(1_767_225_600.000123) == "2026-01-01T00:00:00.000123Z"
    assert format_cri_log_line(0.0, "stdout", "x") == "1970-01-01T00:00:00Z stdout F x\n"


# ------------------------------------------------------------------------- exec


async def test_exec_sync_exit_code_output_and_env(rt: FakeRuntime) -> None:
    _, cid = await start(rt, None, env={"KEY": "v1"})
    res = await rt.exec_sync(cid, ["sh", "-c", "echo $KEY; echo e >&2; exit 4"])
    assert (res.exit_code, res.stdout, res.stderr) == (4, b"v1\n", b"e\n")
    res = await rt.exec_sync(cid, ["nosuchcmd"])
    assert (res.exit_code, res.stderr) == (127, b"sh: nosuchcmd: not found\n")
    assert (await rt.exec_sync(cid, ["echo", "$KEY"])).stdout == b"$KEY\n"  # no shell, no expansion


async def test_exec_sync_timeout_on_the_clock(rt: FakeRuntime, clock: FakeClock) -> None:
    _, cid = await start(rt, None)
    task = asyncio.create_task(rt.exec_sync(cid, ["sleep", "10"], timeout=2))
    await clock.run_for(1.9)
    assert not task.done()
    await clock.run_for(0.1)
    with pytest.raises(DeadlineExceededError, match="timed out after 2s"):
        await task
    ok = asyncio.create_task(rt.exec_sync(cid, ["sleep", "1"], timeout=2))
    await clock.run_for(1)
    assert (await ok).exit_code == 0


async def test_exec_in_exited_container_and_exec_handler(rt: FakeRuntime) -> None:
    _, cid = await start(rt, "exit 0")
    with pytest.raises(ContainerRuntimeError, match="CONTAINER_EXITED"):
        await rt.exec_sync(cid, ["true"])
    _, live = await start_other(rt)
    from kubelet_kit.container import ExecResult

    rt.set_exec_handler(lambda c, cmd: ExecResult(0, b"scripted") if cmd[0] == "probe" else None)
    assert (await rt.exec_sync(live, ["probe"])).stdout == b"scripted"
    assert (await rt.exec_sync(live, ["false"])).exit_code == 1


async def start_other(rt: FakeRuntime) -> tuple[str, str]:
    sc = sandbox_config(name="other", uid="uid-9")
    sid = await rt.run_pod_sandbox(sc)
    cid = await rt.create_container(sid, container_config("x", None, uid="uid-9"), sc)
    await rt.start_container(cid)
    return sid, cid


# ------------------------------------------------------------ faults and latency


async def test_injected_fault_raised_times_then_gone(rt: FakeRuntime) -> None:
    err = RuntimeUnavailableError("boom")
    rt.inject_error("list_containers", err, times=2)
    for _ in range(2):
        with pytest.raises(RuntimeUnavailableError) as info:
            await rt.list_containers()
        assert info.value is err
    assert rt.pending_errors() == []
    assert await rt.list_containers() == []


async def test_fault_with_predicate_waits_for_matching_call(rt: FakeRuntime) -> None:
    _, a = await start(rt, None)
    _, b = await start_other(rt)
    rt.inject_error("container_status", NotFoundError("gone"), when=lambda cid: cid == b)
    await rt.container_status(a)
    await rt.container_status(a)
    (pending,) = rt.pending_errors("container_status")
    assert pending.remaining == 1
    with pytest.raises(NotFoundError, match="gone"):
        await rt.container_status(b)
    await rt.container_status(b)
    assert rt.pending_errors() == []


async def test_fault_not_lost_when_call_cancelled_during_latency(
    rt: FakeRuntime, clock: FakeClock
) -> None:
    rt.set_latency("version", 5)
    rt.inject_error("version", UnimplementedError("x"))
    task = asyncio.create_task(rt.version())
    await clock.run_for(1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert len(rt.pending_errors("version")) == 1


async def test_latency_is_applied_on_the_clock(clock: FakeClock) -> None:
    rt = FakeRuntime(clock, latency={"container_status": 3, "*": 0.5})
    assert rt.latency_of("list_containers") == 0.5
    task = asyncio.create_task(rt.list_containers())
    await clock.run_for(0.4)
    assert not task.done()
    await clock.run_for(0.1)
    assert task.done()
    rt.set_latency("list_containers", 1e9)  # hangs
    hung = asyncio.create_task(rt.list_containers())
    await clock.run_for(3600)
    assert not hung.done()
    hung.cancel()
    with pytest.raises(asyncio.CancelledError):
        await hung


def test_unknown_method_names_are_refused() -> None:
    rt = FakeRuntime()
    with pytest.raises(ValueError, match="'contaner_status' is not a Runtime method"):
        rt.inject_error("contaner_status", NotFoundError())
    with pytest.raises(ValueError, match="not a Runtime method"):
        rt.set_latency("nope", 1)
    with pytest.raises(ValueError, match="not a Runtime method"):
        FakeRuntime(latency={"nope": 1})


async def test_unavailable_runtime_fails_every_call(rt: FakeRuntime) -> None:
    rt.set_unavailable(True)
    for call in (rt.version(), rt.list_containers(), rt.pull_image(ImageSpec("busybox"))):
        with pytest.raises(RuntimeUnavailableError):
            await call
    rt.set_unavailable(False)
    assert (await rt.version()).runtime_name == "fake"


async def test_call_log_records_arguments_by_position_and_name(rt: FakeRuntime) -> None:
    _, cid = await start(rt, None)
    rt.clear_calls()
    await rt.stop_container(cid, timeout=10)
    (call,) = rt.calls_to("stop_container")
    assert call.args == (cid, 10)
    assert call.kwargs == {"container_id": cid, "timeout": 10}
    assert [c.method for c in rt.calls] == ["stop_container"]


async def test_status_conditions(rt: FakeRuntime) -> None:
    st = await rt.status()
    assert st.condition("RuntimeReady").status is True  # type: ignore[union-attr]
    rt.set_condition("NetworkReady", False, "NetworkPluginNotReady")
    nr = (await rt.status()).condition("NetworkReady")
    assert nr is not None and (nr.status, nr.reason) == (False, "NetworkPluginNotReady")


# ----------------------------------------------------------------------- images


def test_normalize_image_ref() -> None:
    assert normalize_image_ref("busybox") == "docker.io/library/busybox:latest"
    assert normalize_image_ref("busybox:1.36") == "docker.io/library/busybox:1.36"
    assert normalize_image_ref("me/app") == "docker.io/me/app:latest"
    assert normalize_image_ref("localhost:5000/app") == "localhost:5000/app:latest"
    assert normalize_image_ref("registry.k8s.io/pause:3.9") == "registry.k8s.io/pause:3.9"
    digest = "sha256:" + "ab" * 32
    assert normalize_image_ref(f"busybox@{digest}") == f"docker.io/library/busybox@{digest}"
    # Not a reference a runtime accepts (a digest is 32+ hex digits): kept as written.
    assert normalize_image_ref("busybox@sha256:ab") == "busybox@sha256:ab"


async def test_images_pull_status_remove(clock: FakeClock) -> None:
    rt = FakeRuntime(clock, images=["registry.k8s.io/pause:3.9"], pull_latency=4)
    rt.add_image("busybox")
    assert await rt.image_status(ImageSpec("busybox")) is None
    pull = asyncio.create_task(rt.pull_image(ImageSpec("busybox:latest")))
    await clock.run_for(3)
    assert not pull.done()
    await clock.run_for(1)
    ref = await pull
    assert ref.startswith("sha256:")
    img = await rt.image_status(ImageSpec("docker.io/library/busybox"))
    assert img is not None and img.id == ref
    assert await rt.image_status(ImageSpec(ref)) == img
    assert len(await rt.list_images()) == 2
    await rt.remove_image(ImageSpec("busybox"))
    assert await rt.image_status(ImageSpec("busybox")) is None

    missing = asyncio.create_task(rt.pull_image(ImageSpec("nope/missing")))
    await clock.run_for(4)
    with pytest.raises(ImageNotFoundError, match="missing"):
        await missing
    rt.fail_pull("busybox", ImagePullError("429 Too Many Requests"))
    failing = asyncio.create_task(rt.pull_image(ImageSpec("busybox")))
    await clock.run_for(4)
    with pytest.raises(ImagePullError, match="429"):
        await failing


# ------------------------------------------------------------------------ stats


async def test_stats_set_and_aggregated(rt: FakeRuntime) -> None:
    sid, a = await start(rt, None)
    sc = sandbox_config()
    b = await rt.create_container(sid, container_config("b"), sc)
    rt.set_stats(a, cpu_ns=100, memory_working_set=1000)
    rt.set_stats(b, cpu_ns=5, memory_working_set=24)
    assert (await rt.container_stats(a)).memory_working_set_bytes == 1000
    ps = await rt.pod_sandbox_stats(sid)
    assert (ps.cpu_usage_core_nanoseconds, ps.memory_working_set_bytes) == (105, 1024)
    assert ps.process_count == 1  # only a runs
    assert {s.container_id for s in ps.containers} == {a, b}
    listed = await rt.list_container_stats(ContainerFilter(id=b))
    assert [s.cpu_usage_core_nanoseconds for s in listed] == [5]


async def test_update_resources(rt: FakeRuntime) -> None:
    _, cid = await start(rt, None)
    res = LinuxContainerResources(cpu_shares=512)
    await rt.update_container_resources(cid, res)
    assert (await rt.container_status(cid)).resources == res
    await rt.stop_container(cid, 1)
    with pytest.raises(ContainerRuntimeError, match="CONTAINER_EXITED"):
        await rt.update_container_resources(cid, res)


# ----------------------------------------------------------------------- events


async def test_event_stream_content(rt: FakeRuntime, clock: FakeClock) -> None:
    stream = rt.get_container_events()
    sid, cid = await start(rt, "sleep 1; exit 2")
    await clock.run_for(1)
    await rt.remove_container(cid)
    events = [await asyncio.wait_for(stream.__anext__(), 1) for _ in range(6)]
    assert [(e.container_id, e.type) for e in events] == [
        (sid, ContainerEventType.CREATED),
        (sid, ContainerEventType.STARTED),
        (cid, ContainerEventType.CREATED),
        (cid, ContainerEventType.STARTED),
        (cid, ContainerEventType.STOPPED),
        (cid, ContainerEventType.DELETED),
    ]
    stopped = events[4]
    assert stopped.pod_sandbox_status is not None and stopped.pod_sandbox_status.id == sid
    (st,) = stopped.containers_statuses
    assert (st.id, st.state, st.exit_code) == (cid, ContainerState.EXITED, 2)
    assert stopped.created_at == clock.now()
    assert events[5].containers_statuses == ()


async def test_events_unimplemented_when_off(clock: FakeClock) -> None:
    rt = FakeRuntime(clock)
    with pytest.raises(UnimplementedError):
        async for _ in rt.get_container_events():
            pass
    rt.enable_events(True)
    stream = rt.get_container_events()
    await rt.run_pod_sandbox(sandbox_config())
    assert (await stream.__anext__()).type == ContainerEventType.CREATED
    rt.enable_events(False)
    await stream.__anext__()  # the STARTED event queued before
    with pytest.raises(UnimplementedError):
        await stream.__anext__()


async def test_break_event_stream_ends_current_streams_only(rt: FakeRuntime) -> None:
    stream = rt.get_container_events()
    waiter = asyncio.create_task(next_event(stream))
    await asyncio.sleep(0)
    rt.break_event_stream(RuntimeUnavailableError("stream reset"))
    with pytest.raises(RuntimeUnavailableError, match="stream reset"):
        await waiter
    fresh = rt.get_container_events()
    await rt.run_pod_sandbox(sandbox_config())
    assert (await fresh.__anext__()).type == ContainerEventType.CREATED


async def test_fault_on_event_stream_and_unavailable_runtime_end_streams(
    rt: FakeRuntime,
) -> None:
    rt.inject_error("get_container_events", RuntimeUnavailableError("no stream today"))
    with pytest.raises(RuntimeUnavailableError, match="no stream today"):
        await next_event(rt.get_container_events())
    assert rt.event_subscribers == 0
    stream = rt.get_container_events()
    waiter = asyncio.create_task(next_event(stream))
    await asyncio.sleep(0)
    rt.set_unavailable(True)
    with pytest.raises(RuntimeUnavailableError):
        await waiter


async def test_full_event_queue_drops_and_counts(
    rt: FakeRuntime, monkeypatch: pytest.MonkeyPatch
) -> None:
    import kubelet_kit.testing.fake_runtime as fr

    monkeypatch.setattr(fr, "EVENT_QUEUE_SIZE", 3)
    slow = rt.get_container_events()
    await rt.run_pod_sandbox(sandbox_config())  # CREATED + STARTED
    await rt.run_pod_sandbox(sandbox_config(attempt=1))  # two more: one dropped
    assert rt.dropped_events == 1
    got = [(await next_event(slow)).type for _ in range(3)]
    assert got == [
        ContainerEventType.CREATED,
        ContainerEventType.STARTED,
        ContainerEventType.CREATED,
    ]


async def test_fake_runtime_fixture_is_on_the_fake_clock(
    fake_runtime: FakeRuntime, fake_clock: FakeClock
) -> None:
    assert fake_runtime.clock is fake_clock
    _, cid = await start(fake_runtime, "sleep 2")
    await fake_clock.run_for(2)
    assert (await fake_runtime.container_status(cid)).state == ContainerState.EXITED


# ------------------------------------------------------------------- the shell

# (script, exit code, stdout, stderr) for exec_sync in a container whose env has
# KEY=v and whose file system holds /tmp/healthy = "ok\n".
SHELL_TABLE = [
    ("echo a b  c", 0, "a b c\n", ""),
    ('echo "a  b"', 0, "a  b\n", ""),
    ("echo $KEY ${KEY}s '$KEY' \"$KEY\"", 0, "v vs $KEY v\n", ""),
    ("echo $UNSET x", 0, "x\n", ""),
    ("echo x >&2", 0, "", "x\n"),
    ("echo x >/dev/null", 0, "", ""),
    ("false; echo $?", 0, "1\n", ""),
    ("true && echo yes || echo no", 0, "yes\n", ""),
    ("false && echo yes || echo no", 0, "no\n", ""),
    ("false || exit 9; echo unreachable", 9, "", ""),
    ("cat /tmp/healthy", 0, "ok\n", ""),
    ("cat /tmp/missing", 1, "", "cat: can't open '/tmp/missing': No such file or directory\n"),
    ("test -f /tmp/healthy", 0, "", ""),
    ("[ -e /tmp/missing ]", 1, "", ""),
    ("[ $KEY = v ] && echo same", 0, "same\n", ""),
    ("test 3 -gt 2", 0, "", ""),
    ("echo one > /tmp/f; echo two >> /tmp/f; cat /tmp/f", 0, "one\ntwo\n", ""),
    (
        "touch /tmp/t; rm /tmp/t; rm /tmp/t",
        1,
        "",
        "rm: can't remove '/tmp/t': No such file or directory\n",
    ),
    ("rm -f /tmp/t", 0, "", ""),
    ("exec false; echo unreachable", 1, "", ""),
    ("sleep nope", 1, "", "sleep: invalid number 'nope'\n"),
    ("echo a # comment", 0, "a\n", ""),
    ("echo 'open", 2, "", "sh: syntax error: unterminated quoted string\n"),
    ("&& echo", 2, "", "sh: syntax error: unexpected &&\n"),
    ("echo a &&", 2, "", "sh: syntax error: unexpected end of file\n"),
    ("echo a; ls", 127, "a\n", "sh: ls: not found\n"),
]


@pytest.mark.parametrize(("script", "code", "stdout", "stderr"), SHELL_TABLE)
async def test_shell_table(
    rt: FakeRuntime, script: str, code: int, stdout: str, stderr: str
) -> None:
    _, cid = await start(rt, None, env={"KEY": "v"})
    rt.write_file(cid, "/tmp/healthy", "ok\n")
    res = await rt.exec_sync(cid, ["sh", "-c", script])
    assert (res.exit_code, res.stdout.decode(), res.stderr.decode()) == (code, stdout, stderr)


async def test_liveness_style_script_shares_files_with_exec(
    rt: FakeRuntime, clock: FakeClock
) -> None:
    _, cid = await start(rt, "touch /tmp/healthy; sleep 30; rm -f /tmp/healthy; sleep 600")
    assert (await rt.exec_sync(cid, ["cat", "/tmp/healthy"])).exit_code == 0
    await clock.run_for(30)
    assert (await rt.exec_sync(cid, ["cat", "/tmp/healthy"])).exit_code == 1
    assert rt.files(cid) == {}
    rt.write_file(cid, "/tmp/healthy", "")
    assert (await rt.exec_sync(cid, ["cat", "/tmp/healthy"])).exit_code == 0


async def test_mark_unknown_then_stop_kills(rt: FakeRuntime) -> None:
    _, cid = await start(rt, "sleep 5; exit 0")
    rt.mark_unknown(cid)
    assert (await rt.container_status(cid)).state == ContainerState.UNKNOWN
    await rt.stop_container(cid, 10)
    st = await rt.container_status(cid)
    assert (st.state, st.exit_code) == (ContainerState.EXITED, 137)


async def test_inject_latency_hits_only_matching_calls(rt: FakeRuntime, clock: FakeClock) -> None:
    _, a = await start(rt, None)
    _, b = await start_other(rt)
    rt.inject_latency("container_status", 1e9, when=lambda cid: cid == b)
    hung = asyncio.create_task(rt.container_status(b))
    await clock.run_for(60)
    assert not hung.done()
    assert (await rt.container_status(a)).id == a  # others answer at once
    assert (await rt.container_status(b)).id == b  # the delay was used once
    hung.cancel()
    await asyncio.gather(hung, return_exceptions=True)


async def test_exec_dies_with_its_container(rt: FakeRuntime, clock: FakeClock) -> None:
    _, cid = await start(rt, "sleep 5")
    running = asyncio.create_task(rt.exec_sync(cid, ["sh", "-c", "echo started; sleep 60"]))
    await clock.run_for(5)
    res = await running
    assert (res.exit_code, res.stdout) == (137, b"started\n")
    assert (await rt.container_status(cid)).exit_code == 0


_REF_PART = st.text(alphabet=string.ascii_lowercase + string.digits, min_size=1, max_size=6)


@given(
    host=st.sampled_from(["", "registry.k8s.io/", "localhost:5000/", "quay.io/"]),
    path=st.lists(_REF_PART, min_size=1, max_size=3),
    tag=st.one_of(st.just(""), _REF_PART.map(lambda t: ":" + t)),
)
def test_normalize_image_ref_is_idempotent_and_keeps_the_tag(
    host: str, path: list[str], tag: str
) -> None:
    ref = host + "/".join(path) + tag
    norm = normalize_image_ref(ref)
    assert normalize_image_ref(norm) == norm
    assert norm.endswith(tag or ":latest")
    assert norm.startswith(host or "docker.io/")


@given(
    words=st.lists(
        st.text(alphabet=string.ascii_letters + string.digits + ".,-_/", min_size=1, max_size=8),
        min_size=1,
        max_size=5,
    ),
    code=st.integers(min_value=0, max_value=255),
)
@settings(max_examples=30, deadline=None)
def test_echo_and_exit_round_trip(words: list[str], code: int) -> None:
    async def run() -> tuple[int, bytes]:
        rt = FakeRuntime()
        _, cid = await start(rt, None)
        script = "echo " + " ".join(f"'{w}'" for w in words) + f"; exit {code}"
        res = await rt.exec_sync(cid, ["sh", "-c", script])
        return res.exit_code, res.stdout

    assert asyncio.run(run()) == (code, (" ".join(words) + "\n").encode())


async def test_kubelet_env_fixture_runs_on_the_shared_fakes(
    kubelet_env: Any, fake_runtime: FakeRuntime, fake_clock: FakeClock
) -> None:
    assert kubelet_env.runtime is fake_runtime
    assert kubelet_env.clock is fake_clock
    fake_runtime.clear_calls()
    await kubelet_env.sleep(5)
    # The agent's loops ran on the fake clock against the fake runtime.
    assert fake_runtime.calls_to("list_containers")
