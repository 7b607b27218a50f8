"""FakeRuntime: the Runtime protocol, CRI semantics, exits, logs and stats on a fake clock."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from _fake_runtime_helpers import container_config, sandbox_config, start

from kubelet_kit.container import (
    ContainerEventType,
    ContainerFilter,
    ContainerMetadata,
    ContainerState,
    ImageFsReporter,
    ImageSpec,
    LinuxContainerResources,
    LogReopener,
    PodSandboxConfig,
    PodSandboxFilter,
    PodSandboxMetadata,
    PodSandboxState,
    PortMapping,
    Runtime,
)
from kubelet_kit.container import labels as klabels
from kubelet_kit.errors import (
    AlreadyExistsError,
    ContainerRuntimeError,
    ContainerStartError,
    NotFoundError,
    UnimplementedError,
)
from kubelet_kit.testing import FakeClock, FakeRuntime, format_cri_log_line, format_rfc3339_nano
from kubelet_kit.testing.fake_runtime import RUNTIME_METHODS


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def rt(clock: FakeClock) -> FakeRuntime:
    return FakeRuntime(clock, events=True)


# ---------------------------------------------------------------------- protocol


def test_fake_runtime_satisfies_the_runtime_protocol() -> None:
    assert isinstance(FakeRuntime(), Runtime)


def test_testing_all_is_honest() -> None:
    import kubelet_kit.testing as testing

    assert sorted(testing.__all__) == testing.__all__
    for name in testing.__all__:
        assert getattr(testing, name) is not None


def test_runtime_methods_list_matches_the_protocols() -> None:
    from kubelet_kit.container.optional import protocol_methods

    methods = {
        name
        for protocol in (Runtime, ImageFsReporter, LogReopener)
        for name in protocol_methods(protocol)
    }
    assert methods == RUNTIME_METHODS


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


async def test_mark_unknown_then_stop_kills(rt: FakeRuntime) -> None:
    _, cid = await start(rt, "sleep 5; exit 0")
    rt.mark_unknown(cid)
    assert (await rt.container_status(cid)).state == ContainerState.UNKNOWN
    await rt.stop_container(cid, 10)
    st = await rt.container_status(cid)
    assert (st.state, st.exit_code) == (ContainerState.EXITED, 137)


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


async def test_fake_runtime_fixture_is_on_the_fake_clock(
    fake_runtime: FakeRuntime, fake_clock: FakeClock
) -> None:
    assert fake_runtime.clock is fake_clock
    _, cid = await start(fake_runtime, "sleep 2")
    await fake_clock.run_for(2)
    assert (await fake_runtime.container_status(cid)).state == ContainerState.EXITED


async def test_kubelet_env_fixture_runs_on_the_shared_fakes(
    kubelet_env: Any, fake_runtime: FakeRuntime, fake_clock: FakeClock
) -> None:
    assert kubelet_env.runtime is fake_runtime
    assert kubelet_env.clock is fake_clock
    fake_runtime.clear_calls()
    await kubelet_env.sleep(5)
    # The agent's loops ran on the fake clock against the fake runtime.
    assert fake_runtime.calls_to("list_containers")


async def test_call_history_keeps_the_latest_calls() -> None:
    rt = FakeRuntime(call_history=3)
    for _ in range(20):
        await rt.version()
    await rt.status()
    assert 3 <= len(rt.calls) <= 7
    assert rt.calls[-1].method == "status"
    unbounded = FakeRuntime()
    for _ in range(20):
        await unbounded.version()
    assert len(unbounded.calls) == 20


async def test_host_ports_are_recorded_by_default_and_declined_when_asked() -> None:
    """A hostPort pod runs on the default fake (a node-policy test wants it to),
    its mapping kept in the sandbox's config; a fake made to decline host ports
    refuses the sandbox, naming the mapping, as the served fake does."""
    mapping = PortMapping(container_port=80, host_port=8080)
    config = PodSandboxConfig(
        metadata=PodSandboxMetadata("web", "default", "uid-web"), port_mappings=(mapping,)
    )
    recording = FakeRuntime()
    sid = await recording.run_pod_sandbox(config)
    assert (await recording.pod_sandbox_status(sid)).state == PodSandboxState.READY
    [call] = recording.calls_to("run_pod_sandbox")
    assert call.args[0].port_mappings == (mapping,)

    declining = FakeRuntime(host_ports="decline")
    with pytest.raises(UnimplementedError, match="port_mappings: host_port 8080"):
        await declining.run_pod_sandbox(config)
    assert await declining.list_pod_sandboxes() == []
    with pytest.raises(ValueError, match="host_ports"):
        FakeRuntime(host_ports="publish")  # type: ignore[arg-type]


async def test_a_host_port_pod_runs_in_the_time_skipping_environment() -> None:
    from kubelet_kit.testing.env import KubeletEnv

    pod = (
        "apiVersion: v1\nkind: Pod\nmetadata: {name: web, namespace: default}\n"
        "spec:\n  containers:\n  - name: app\n    image: busybox\n"
        "    command: [sleep, '3600']\n    ports: [{containerPort: 80, hostPort: 8080}]\n"
    )
    async with KubeletEnv() as env:
        env.add_pod(pod)
        await env.wait_for(lambda: env.status("web").phase == "Running")
