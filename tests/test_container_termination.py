"""Reading an exited container's termination message back for its status.

Each test names the kubelet rule (1.20) it follows: ``getTerminationMessage``,
``readLastStringFromContainerLogs`` and ``getPodContainerStatuses`` in
``kuberuntime_container.go``, ``tail.ReadAtMost`` and
``tail.FindTailLineStartIndex``, and the status manager's ``normalizeStatus``.
"""

from __future__ import annotations

import asyncio
import io
from pathlib import Path

import attrs
import pytest

from kubelet_kit.api import (
    Container,
    ContainerState,
    ContainerStateTerminated,
    ContainerStatus,
    ObjectMeta,
    Pod,
    PodSpec,
    PodStatus,
)
from kubelet_kit.container import labels as kl
from kubelet_kit.container.interfaces import (
    ContainerConfig,
    ContainerMetadata,
    ImageSpec,
    Mount,
    PodSandboxConfig,
    PodSandboxMetadata,
)
from kubelet_kit.container.interfaces import ContainerState as RuntimeState
from kubelet_kit.container.interfaces import ContainerStatus as RuntimeStatus
from kubelet_kit.container.logs import LogRecord, LogStream, tail_start
from kubelet_kit.container.pods import get_pod_status
from kubelet_kit.container.termination import (
    log_tail_message,
    read_at_most,
    termination_message,
    with_termination_message,
)
from kubelet_kit.status.manager import cap_termination_messages
from kubelet_kit.testing import FakeRuntime

PATH = "/dev/termination-log"


def _log(path: Path, lines: list[str], stream: LogStream = LogStream.STDOUT) -> None:
    with open(path, "ab") as f:
        for i, text in enumerate(lines):
            f.write(LogRecord(1_700_000_000_000_000_000 + i, stream, False, text.encode()).encode())


def _status(
    tmp: Path,
    *,
    content: bytes | None = b"",
    policy: str = "File",
    exit_code: int = 1,
    reason: str = "Error",
    message: str = "",
    state: RuntimeState = RuntimeState.EXITED,
    log_lines: list[str] | None = None,
) -> RuntimeStatus:
    host = tmp / "termination"
    if content is not None:
        host.write_bytes(content)
    log = tmp / "0.log"
    if log_lines is not None:
        _log(log, log_lines)
    return RuntimeStatus(
        id="c1",
        metadata=ContainerMetadata("app"),
        state=state,
        created_at=1.0,
        image="busybox",
        exit_code=exit_code,
        reason=reason,
        message=message,
        annotations={
            kl.CONTAINER_TERMINATION_MESSAGE_PATH: PATH,
            kl.CONTAINER_TERMINATION_MESSAGE_POLICY: policy,
        },
        mounts=(
            Mount(container_path="/data", host_path=str(tmp)),
            Mount(container_path=PATH, host_path=str(host)),
        ),
        log_path=str(log),
    )


def test_file_content_is_the_message(tmp_path: Path) -> None:
    """getTerminationMessage: the host file behind the mount at terminationMessagePath."""
    assert termination_message(_status(tmp_path, content=b"bye\n", exit_code=0)) == "bye\n"


def test_only_the_last_4096_bytes_are_read(tmp_path: Path) -> None:
    """tail.ReadAtMost(path, MaxContainerTerminationMessageLength): the file's end."""
    data = b"a" * 100 + b"b" * 4096
    assert termination_message(_status(tmp_path, content=data)) == "b" * 4096
    assert read_at_most(str(tmp_path / "termination"), 10) == b"b" * 10


def test_running_container_has_no_message(tmp_path: Path) -> None:
    """getPodContainerStatuses: only exited containers are read."""
    status = _status(tmp_path, content=b"x", state=RuntimeState.RUNNING)
    assert termination_message(status) == ""


def test_fallback_reads_the_log_tail_when_the_file_is_empty(tmp_path: Path) -> None:
    """FallbackToLogsOnError, exit code not 0, empty file: the log's tail."""
    status = _status(tmp_path, policy="FallbackToLogsOnError", log_lines=["one", "two"])
    assert termination_message(status) == "one\ntwo\n"


def test_fallback_when_the_file_or_its_mount_is_missing(tmp_path: Path) -> None:
    """getTerminationMessage: a missing file (or no mount) also falls back."""
    status = _status(tmp_path, content=None, policy="FallbackToLogsOnError", log_lines=["x"])
    assert termination_message(status) == "x\n"
    status = attrs.evolve(status, mounts=())
    assert termination_message(status) == "x\n"


@pytest.mark.parametrize(
    ("policy", "exit_code", "reason"),
    [
        ("File", 1, "Error"),  # the policy is File
        ("FallbackToLogsOnError", 0, "Completed"),  # it succeeded
        ("FallbackToLogsOnError", 128, "ContainerCannotRun"),  # it never ran: no logs
    ],
)
def test_no_fallback(tmp_path: Path, policy: str, exit_code: int, reason: str) -> None:
    """fallbackToLogs only for FallbackToLogsOnError, exit code != 0 and a reason
    other than ContainerCannotRun."""
    status = _status(
        tmp_path, policy=policy, exit_code=exit_code, reason=reason, log_lines=["log text"]
    )
    assert termination_message(status) == ""


def test_a_written_file_wins_over_the_log(tmp_path: Path) -> None:
    """getTerminationMessage: checkLogs only when the file is empty."""
    status = _status(
        tmp_path, content=b"from file", policy="FallbackToLogsOnError", log_lines=["log text"]
    )
    assert termination_message(status) == "from file"


def test_log_tail_is_80_lines_and_2048_bytes(tmp_path: Path) -> None:
    """readLastStringFromContainerLogs: TailLines 80 into a 2048-byte circular buffer."""
    log = tmp_path / "many.log"
    _log(log, [f"line {i}" for i in range(200)])
    text = log_tail_message(str(log))
    assert text.splitlines() == [f"line {i}" for i in range(120, 200)]
    wide = tmp_path / "wide.log"
    _log(wide, ["x" * 100 + str(i) for i in range(50)])
    text = log_tail_message(str(wide))
    assert len(text.encode()) == 2048
    assert text.endswith("x" * 100 + "49\n")


def test_log_tail_keeps_both_streams_and_skips_bad_lines(tmp_path: Path) -> None:
    """The kubelet's log reader: stdout and stderr in order, unparsable lines skipped."""
    log = tmp_path / "0.log"
    _log(log, ["out"])
    with open(log, "ab") as f:
        f.write(b"garbage\n")
    _log(log, ["err"], LogStream.STDERR)
    assert log_tail_message(str(log)) == "out\nerr\n"


def test_unreadable_file_gives_the_kubelets_error(tmp_path: Path) -> None:
    """getTerminationMessage: "Error on reading termination log <path>: <err>", and
    no fallback to the log."""
    status = _status(tmp_path, content=None, policy="FallbackToLogsOnError", log_lines=["x"])
    host = tmp_path / "termination"
    host.mkdir()  # a directory cannot be read as a file
    assert termination_message(status) == (
        f"Error on reading termination log {host}: read {host}: is a directory"
    )


def test_missing_log_gives_the_kubelets_error(tmp_path: Path) -> None:
    """readLastStringFromContainerLogs: a log that cannot be read is the message."""
    missing = tmp_path / "gone.log"
    assert log_tail_message(str(missing)) == (
        "Error on reading termination message from logs: failed to try resolving symlinks "
        f'in path "{missing}": lstat {missing}: no such file or directory'
    )


def test_message_is_appended_to_the_runtimes(tmp_path: Path) -> None:
    """getPodContainerStatuses: the runtime's message, ": ", the termination message."""
    status = _status(tmp_path, content=b"custom", message="oom")
    assert with_termination_message(status).message == "oom: custom"
    status = _status(tmp_path, content=b"custom")
    assert with_termination_message(status).message == "custom"
    empty = _status(tmp_path, content=b"", message="kept")
    assert with_termination_message(empty) is empty


def test_tail_start_counts_newlines_from_the_end() -> None:
    """tail.FindTailLineStartIndex: the start of the last n lines."""
    data = b"".join(f"{i:04d}\n".encode() for i in range(1000))  # spans several blocks
    f = io.BytesIO(data)
    assert data[tail_start(f, 3) :] == b"0997\n0998\n0999\n"
    assert tail_start(f, 5000) == 0
    assert tail_start(f, -1) == 0
    assert tail_start(io.BytesIO(b"a\nb"), 1) == 0  # text after the last newline is extra
    assert tail_start(io.BytesIO(b""), 3) == 0


def _terminated(message: str) -> ContainerState:
    return ContainerState(terminated=ContainerStateTerminated(exit_code=1, message=message))


def test_pod_share_of_12k_cuts_each_message() -> None:
    """normalizeStatus: each terminated message is cut to its first
    MaxPodTerminationMessageLogLength / (containers + init containers) bytes."""
    names = ("a", "b", "c")
    pod = Pod(
        metadata=ObjectMeta(name="p", namespace="n", uid="u"),
        spec=PodSpec(
            containers=tuple(Container(name=n, image="busybox") for n in names[:2]),
            init_containers=(Container(name="c", image="busybox"),),
        ),
    )
    long, short = "x" * 4096 + "tail", "short"
    status = PodStatus(
        container_statuses=(
            ContainerStatus(name="a", state=_terminated(long), last_state=_terminated(long)),
            ContainerStatus(name="b", state=_terminated(short)),
        ),
        init_container_statuses=(ContainerStatus(name="c", state=_terminated(long)),),
    )
    capped = cap_termination_messages(pod, status)
    a, b = capped.container_statuses
    assert a.state.terminated is not None and a.state.terminated.message == "x" * 4096
    assert a.last_state.terminated is not None and a.last_state.terminated.message == "x" * 4096
    assert b is status.container_statuses[1]
    init = capped.init_container_statuses[0].state.terminated
    assert init is not None and init.message == "x" * 4096
    ok = PodStatus(container_statuses=(status.container_statuses[1],))
    assert cap_termination_messages(pod, ok) is ok


def test_get_pod_status_carries_the_message(tmp_path: Path) -> None:
    """getPodContainerStatuses reads the message for every runtime alike."""

    async def main() -> str:
        rt = FakeRuntime()
        sandbox_config = PodSandboxConfig(
            metadata=PodSandboxMetadata("p", "n", "uid-t"), labels={kl.POD_UID: "uid-t"}
        )
        sid = await rt.run_pod_sandbox(sandbox_config)
        host = tmp_path / "msg"
        host.write_text("written")
        config = ContainerConfig(
            metadata=ContainerMetadata("app"),
            image=ImageSpec("busybox"),
            labels={kl.POD_UID: "uid-t", kl.CONTAINER_NAME: "app"},
            annotations={kl.CONTAINER_TERMINATION_MESSAGE_PATH: PATH},
            mounts=(Mount(container_path=PATH, host_path=str(host)),),
        )
        cid = await rt.create_container(sid, config, sandbox_config)
        await rt.start_container(cid)
        await rt.stop_container(cid, 0)
        status = await get_pod_status(rt, "uid-t", "p", "n")
        return status.container_statuses[0].message

    assert asyncio.run(main()) == "written"
