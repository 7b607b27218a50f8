"""FakeRuntime's shell: exec_sync, the script language, files shared with exec."""

from __future__ import annotations

import asyncio
import string

import attrs
import pytest
from _fake_runtime_helpers import container_config, sandbox_config, start, start_other
from hypothesis import given, settings
from hypothesis import strategies as st

from kubelet_kit.container import ContainerState
from kubelet_kit.errors import ContainerRuntimeError, DeadlineExceededError
from kubelet_kit.testing import FakeClock, FakeRuntime


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def rt(clock: FakeClock) -> FakeRuntime:
    return FakeRuntime(clock, events=True)


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


@pytest.mark.parametrize(
    ("command", "files"),
    [
        (("sleep", "infinity"), {}),
        (("sh", "-c", "exec sleep inf"), {}),
        (("busybox", "sleep", "infinity"), {}),
        (("sh", "-c", "sleep infinity >/dev/null 2>/tmp/err"), {}),
        # The shell makes the file its output goes to before sleeping.
        (("sh", "-c", "sleep infinity > /tmp/out"), {"/tmp/out": ""}),
        (("sh", "-c", "sleep infinity; echo never"), {}),
    ],
)
async def test_a_command_sleeping_forever_runs_until_stopped(
    rt: FakeRuntime, clock: FakeClock, command: tuple[str, ...], files: dict[str, str]
) -> None:
    sc = sandbox_config()
    sid = await rt.run_pod_sandbox(sc)
    cid = await rt.create_container(sid, attrs.evolve(container_config(), command=command), sc)
    await rt.start_container(cid)
    await clock.run_for(365 * 86400)
    assert (await rt.container_status(cid)).state is ContainerState.RUNNING
    assert rt.files(cid) == files
    assert (await rt.exec_sync(cid, ["echo", "alive"])).stdout == b"alive\n"
    await rt.stop_container(cid, 10)
    status = await rt.container_status(cid)
    assert (status.state, status.exit_code, status.reason) == (ContainerState.EXITED, 143, "Error")
    assert rt.logs(cid) == []


async def test_a_sleep_forever_after_a_trap_waits_for_the_kill(
    rt: FakeRuntime, clock: FakeClock
) -> None:
    _, cid = await start(rt, "trap '' TERM; sleep infinity")
    stopping = asyncio.create_task(rt.stop_container(cid, 10))
    await clock.run_for(9.9)
    assert not stopping.done()
    await clock.run_for(0.1)
    await stopping
    assert (await rt.container_status(cid)).exit_code == 137


async def test_exec_dies_with_its_container(rt: FakeRuntime, clock: FakeClock) -> None:
    _, cid = await start(rt, "sleep 5")
    running = asyncio.create_task(rt.exec_sync(cid, ["sh", "-c", "echo started; sleep 60"]))
    await clock.run_for(5)
    res = await running
    assert (res.exit_code, res.stdout) == (137, b"started\n")
    assert (await rt.container_status(cid)).exit_code == 0


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
