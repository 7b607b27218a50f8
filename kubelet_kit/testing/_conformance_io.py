"""The conformance checks of what a container's processes say: exits, logs, exec.

Exit codes and reasons of containers that exit on their own, the CRI-format log
lines they leave in their log files, and ``exec_sync`` (output, exit codes, its
timeout, and the refusal to exec into an exited container).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kubelet_kit.container.interfaces import ContainerFilter, ContainerState
from kubelet_kit.errors import ContainerRuntimeError, DeadlineExceededError
from kubelet_kit.testing._conformance_context import _Ctx, _wait_state, log_file

#: A CRI log line: RFC3339Nano time, stream, tag (F full, P partial), content.
_CRI_LOG_LINE = re.compile(
    r"^(?P<time>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,9})?(?:Z|[+-]\d\d:\d\d)) "
    r"(?P<stream>stdout|stderr) (?P<tag>[FP]) (?P<text>.*)$"
)


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
        path = log_file(sandbox, name)
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
