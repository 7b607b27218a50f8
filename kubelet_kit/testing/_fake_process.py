"""How a fake runtime container's command runs.

The part of :class:`~kubelet_kit.testing.FakeRuntime` that runs a container's
command: the shell of :mod:`kubelet_kit.testing._fake_shell` stepped on the
clock, scripted exits (``script``), SIGTERM handling, ending, halting and removing
a container, its in-memory file system, the log lines it writes, and commands
exec'd in it. The sandbox, container and streaming parts build on it.
"""

from __future__ import annotations

import asyncio
import math
import os
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from kubelet_kit.container import labels as klabels
from kubelet_kit.container.interfaces import ContainerEventType, ContainerState, ExecResult
from kubelet_kit.container.streams import ByteSource
from kubelet_kit.errors import ContainerRuntimeError, NotFoundError
from kubelet_kit.testing._fake_base import _FakeRuntimeBase
from kubelet_kit.testing._fake_records import (
    _ALIVE,
    EXIT_SIGKILL,
    POD_UID_LABEL,
    LogLine,
    _Container,
    _Sandbox,
    _ScriptRule,
    format_cri_log_line,
)
from kubelet_kit.testing._fake_shell import (
    _parse_command,
    _ReadStdin,
    _run_statements,
    _ShellSyntaxError,
    _Statement,
)


class _ProcessPart(_FakeRuntimeBase):
    """Containers' commands on the clock: scripts, exits, files, logs, exec."""

    def script(
        self,
        container_name: str,
        *,
        exit_code: int | None = None,
        after: float = 0.0,
        oom_killed: bool = False,
        pod_uid: str | None = None,
        times: int | None = None,
    ) -> None:
        """Script how containers named ``container_name`` behave once started.

        Instead of running its command, a matching container exits ``after`` clock
        seconds after it starts, with ``exit_code`` (0 when None; 137 and reason
        ``OOMKilled`` with ``oom_killed``). ``pod_uid`` limits the rule to one pod
        (by the ``io.kubernetes.pod.uid`` label, else the sandbox's uid); ``times``
        limits how many starts it applies to (None: all). Rules are tried in the
        order they were added; the first with starts left wins.
        """
        self._scripts.append(
            _ScriptRule(container_name, exit_code, after, oom_killed, pod_uid, times)
        )

    def ignore_sigterm(self, container_name: str) -> None:
        """Containers named ``container_name`` ignore SIGTERM from now on, so a stop
        waits its full timeout and then kills them (exit 137)."""
        self._ignore_term.add(container_name)

    def exit_container(
        self, container_id: str, exit_code: int = 0, *, reason: str | None = None
    ) -> None:
        """End a running container now (reason ``Completed``/``Error`` by default).

        Raises:
            NotFoundError: no such container.
            ValueError: it is not running.
        """
        c = self._container(container_id)
        if c.state != ContainerState.RUNNING:
            raise ValueError(f"exit_container: container {container_id} is {c.state.value}")
        self._finish(c, exit_code, reason=reason)

    def mark_unknown(self, container_id: str) -> None:
        """Put a container in CONTAINER_UNKNOWN (the runtime lost track of it).

        Its command stops running; ``stop_container``/``remove_container`` then kill
        it (exit 137) as they would a running one. No event is sent.

        Raises:
            NotFoundError: no such container.
        """
        c = self._container(container_id)
        self._halt(c)
        c.state = ContainerState.UNKNOWN

    def files(self, container_id: str) -> dict[str, str]:
        """A copy of the container's file system (path -> content) as its shell and
        exec'd commands left it (``echo x > f``, ``touch``, ``rm``): its own files,
        not those of the host beneath its mounts (which the host holds), nor the
        kernel's ``/proc`` and ``/dev`` entries the runtime gives it.

        Raises:
            NotFoundError: no such container.
        """
        fs = self._container(container_id).fs
        return {k: v for k, v in fs.items() if not k.startswith(("/proc/", "/dev/"))}

    def write_file(self, container_id: str, path: str, content: str) -> None:
        """Create or replace a file in the container's file system (for ``cat``,
        ``test -f`` in commands and exec probes); beneath a mount, the host's file.

        Raises:
            NotFoundError: no such container.
        """
        self._container(container_id).fs[path] = content

    def remove_file(self, container_id: str, path: str) -> None:
        """Remove a file from the container's file system if it is there.

        Raises:
            NotFoundError: no such container.
        """
        self._container(container_id).fs.pop(path, None)

    def set_exec_handler(
        self,
        handler: Callable[[str, Sequence[str]], ExecResult | Awaitable[ExecResult] | None] | None,
    ) -> None:
        """Script ``exec_sync``: ``handler(container_id, cmd)`` returns the result
        (or an awaitable of it), or None to let the shell run the command."""
        self._exec_handler = handler

    def logs(self, container_id: str, stream: str | None = None) -> list[LogLine]:
        """Lines a container wrote (kept after removal), optionally of one stream.

        Raises:
            NotFoundError: the runtime never had such a container.
        """
        if container_id not in self._logs:
            raise NotFoundError(f"container {container_id!r} not found")
        return [ln for ln in self._logs[container_id] if stream is None or ln.stream == stream]

    def _names_ignoring_term(self, c: _Container) -> bool:
        return c.config.metadata.name in self._ignore_term

    def _take_script(self, c: _Container, sb: _Sandbox) -> _ScriptRule | None:
        if not self._scripts:
            return None
        uid = c.config.labels.get(klabels.POD_UID) or sb.config.metadata.uid
        for rule in self._scripts:
            if rule.container_name != c.config.metadata.name:
                continue
            if rule.pod_uid is not None and rule.pod_uid != uid:
                continue
            if rule.times is not None:
                if rule.times <= 0:
                    continue
                rule.times -= 1
            return rule
        return None

    def _statements_for(self, c: _Container) -> Sequence[_Statement] | str | None:
        try:
            return _parse_command(tuple(c.config.command) + tuple(c.config.args))
        except _ShellSyntaxError as exc:
            return str(exc)

    def _step(self, c: _Container) -> None:
        """Run the container's shell until it sleeps or exits."""
        c.timer = None
        proc = c.proc
        if proc is None or c.state != ContainerState.RUNNING:
            return
        while True:
            try:
                delay = next(proc)
            except StopIteration as stop:
                self._finish(c, int(stop.value))
                return
            if isinstance(delay, _ReadStdin):
                # ``cat`` of the container's stdin: what was written before it
                # read, then what attached clients write, until that stdin ends.
                pending, c.stdin_buffer = c.stdin_buffer, []
                for data in pending:
                    self._stdin_output(c, delay, data)
                if not c.config.stdin or c.stdin_ended:
                    continue
                c.reading = delay
                return
            if delay == math.inf:
                return  # runs until stopped
            if delay > 0:
                c.timer = self.clock.call_later(delay, lambda: self._step(c))
                return

    def _stdin_output(self, c: _Container, reader: _ReadStdin, data: bytes) -> None:
        """Where the container's ``cat`` puts what it read: its log (by line) or a file."""
        text = data.decode("utf-8", "replace")
        if reader.stream == "file":
            c.fs[reader.path] = c.fs.get(reader.path, "") + text
        elif reader.stream != "null":
            for line in text.splitlines():
                self._write_log(c, reader.stream, line)

    def _feed_stdin(self, c: _Container, data: bytes) -> None:
        """Bytes an attached client wrote to the container's stdin."""
        if c.stdin_ended or not c.config.stdin:
            return
        if c.reading is not None:
            self._stdin_output(c, c.reading, data)
        else:
            c.stdin_buffer.append(data)

    def _end_stdin(self, c: _Container) -> None:
        """Close the container's stdin: a ``cat`` reading it ends."""
        c.stdin_ended = True
        if c.reading is not None:
            c.reading = None
            self._step(c)

    def _finish_if_running(self, c: _Container, code: int, reason: str | None) -> None:
        if c.state == ContainerState.RUNNING:
            self._finish(c, code, reason=reason)

    def _halt(self, c: _Container) -> None:
        """Stop the container's command: cancel its timer, close its shell."""
        if c.timer is not None:
            c.timer.cancel()
            c.timer = None
        if c.proc is not None:
            c.proc.close()
            c.proc = None
        c.serving, c.reading = (), None

    def _finish(self, c: _Container, code: int, *, reason: str | None = None) -> None:
        """Mark a running container exited, wake its stoppers, emit STOPPED."""
        self._halt(c)
        c.state = ContainerState.EXITED
        c.exit_code = code
        c.finished_at = self.clock.now()
        c.reason = reason if reason is not None else ("Completed" if code == 0 else "Error")
        for fut in c.waiters:
            if not fut.done():
                fut.set_result(None)
        c.waiters.clear()
        self._emit(c.id, ContainerEventType.STOPPED, c.sandbox_id)

    def _remove_container(self, c: _Container) -> None:
        if c.state in _ALIVE:
            self._finish(c, EXIT_SIGKILL)
        del self._containers[c.id]
        self._containers_by_sandbox.get(c.sandbox_id, {}).pop(c.id, None)
        self._containers_by_pod.get(c.config.labels.get(POD_UID_LABEL, ""), {}).pop(c.id, None)
        self._emit(c.id, ContainerEventType.DELETED, c.sandbox_id)

    def _write_log(self, c: _Container, stream: str, text: str) -> None:
        now = self.clock.now()
        self._logs[c.id].append(LogLine(now, stream, text))
        for queue in self._attached.get(c.id, ()):
            queue.put_nowait((stream, text))
        if c.log_path and os.path.isabs(c.log_path):
            path = Path(c.log_path)
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("a", encoding="utf-8") as f:
                f.write(format_cri_log_line(now, stream, text))

    async def _exec(
        self,
        c: _Container,
        cmd: Sequence[str],
        *,
        stdin: ByteSource | None = None,
        live: Callable[[str, bytes], Awaitable[None]] | None = None,
    ) -> ExecResult:
        """Run ``cmd`` in ``c`` with the shell. ``stdin`` is what ``cat`` reads (none:
        it reads its end at once); with ``live`` the output goes there as it comes
        (``live(stream, data)``) instead of into the result."""
        if self._exec_handler is not None:
            result = self._exec_handler(c.id, tuple(cmd))
            if isinstance(result, Awaitable):
                result = await result
            if result is not None:
                return result
        out: dict[str, list[bytes]] = {"stdout": [], "stderr": []}
        pending: list[tuple[str, bytes]] = []

        def emit(stream: str, text: str) -> None:
            pending.append((stream, (text + "\n").encode()))

        async def flush() -> None:
            for stream, data in pending:
                if live is not None:
                    await live(stream, data)
                else:
                    out[stream].append(data)
            pending.clear()

        try:
            statements = _parse_command(tuple(cmd))
        except _ShellSyntaxError as exc:
            return ExecResult(2, b"", f"sh: syntax error: {exc}\n".encode())
        if statements is None:
            raise ContainerRuntimeError("exec_sync: empty command")
        proc = _run_statements(
            statements,
            c.env,
            emit,
            c.fs,
            unknown_blocks=False,
            on_trap_term=lambda _: None,
            identity=_identity(c),
            cwd=c.fs.cwd,
        )
        try:
            while True:
                step = next(proc)
                await flush()
                if isinstance(step, _ReadStdin):
                    while stdin is not None:
                        data = await self._read_while_running(c, stdin)
                        if not data:
                            break
                        if step.stream == "file":
                            c.fs[step.path] = c.fs.get(step.path, "") + data.decode(
                                "utf-8", "replace"
                            )
                        elif step.stream != "null":
                            pending.append((step.stream, data))
                            await flush()
                    if c.state != ContainerState.RUNNING:
                        code = EXIT_SIGKILL
                        break
                    continue
                if not await self._sleep_while_running(c, step):
                    # The container died under the command: its processes were
                    # killed with it.
                    code = EXIT_SIGKILL
                    break
        except StopIteration as stop:
            code = int(stop.value)
        finally:
            proc.close()
        await flush()
        return ExecResult(code, b"".join(out["stdout"]), b"".join(out["stderr"]))

    async def _read_while_running(self, c: _Container, source: ByteSource) -> bytes:
        """The next bytes of ``source``; ``b""`` at its end or once ``c`` stopped."""
        if c.state != ContainerState.RUNNING:
            return b""
        loop = asyncio.get_running_loop()
        exited: asyncio.Future[None] = loop.create_future()
        c.waiters.append(exited)
        reading: asyncio.Future[bytes] = asyncio.ensure_future(source.read(65536))
        waiting: set[asyncio.Future[Any]] = {reading, exited}
        try:
            await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
            return reading.result() if reading.done() else b""
        finally:
            reading.cancel()
            if exited in c.waiters:
                c.waiters.remove(exited)
            await asyncio.gather(reading, return_exceptions=True)

    async def _sleep_while_running(self, c: _Container, delay: float) -> bool:
        """Sleep ``delay`` clock seconds (``inf``: forever); False if the container
        stopped running first."""
        if c.state != ContainerState.RUNNING:
            return False
        loop = asyncio.get_running_loop()
        exited: asyncio.Future[None] = loop.create_future()
        c.waiters.append(exited)
        sleeper: asyncio.Future[None] = (
            loop.create_future()
            if delay == math.inf
            else asyncio.ensure_future(self.clock.sleep(delay))
        )
        try:
            await asyncio.wait({sleeper, exited}, return_when=asyncio.FIRST_COMPLETED)
            return not exited.done()
        finally:
            sleeper.cancel()
            if exited in c.waiters:
                c.waiters.remove(exited)
            await asyncio.gather(sleeper, return_exceptions=True)

    def _check_running(self, c: _Container, method: str) -> None:
        if c.state != ContainerState.RUNNING:
            raise ContainerRuntimeError(f"{method}: container {c.id} is in {c.state.value} state")


def _identity(c: _Container) -> tuple[int, int]:
    """The (uid, gid) the container's processes run as: its security context's
    user and group, root otherwise (the fake's images name no user)."""
    sc = c.config.security_context
    if sc is None:
        return (0, 0)
    return (sc.run_as_user or 0, sc.run_as_group or 0)
