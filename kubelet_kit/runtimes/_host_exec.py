"""Exec, attach and port-forward of :class:`~kubelet_kit.runtimes.host.HostProcessRuntime`.

Every command run in a container (``exec_sync``, ``exec_stream``) starts on
one path, with the container's environment, working directory and user, and
inside its mount and network namespaces and cgroups when it has them (through
the shim's exec helper). Attach reaches the container through its shim's attach
socket; port-forward connects inside the sandbox's network. The session
plumbing itself is in :mod:`kubelet_kit.runtimes.streams`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Sequence

from kubelet_kit.clock import wait_for
from kubelet_kit.container.interfaces import ContainerState, ExecResult, PodSandboxState
from kubelet_kit.container.streams import ByteSink, ByteSource, StreamIO
from kubelet_kit.errors import ContainerRuntimeError, DeadlineExceededError, InvalidArgumentError
from kubelet_kit.runtimes._host_base import _HostRuntimeBase
from kubelet_kit.runtimes._host_records import _ContainerRecord, _read_json
from kubelet_kit.runtimes._host_system import _shim_env
from kubelet_kit.runtimes._shim import SPEC_FILE
from kubelet_kit.runtimes.streams import (
    attach_session,
    exec_session,
    forward_port,
    take_controlling_tty,
)


class _HostExec(_HostRuntimeBase):
    """Running commands in containers, attaching to them, forwarding ports."""

    def _running_record(self, container_id: str, what: str) -> _ContainerRecord:
        """The record of a running container.

        Raises:
            NotFoundError: unknown id.
            ContainerRuntimeError: the container is not running.
        """
        rec = self._load_container(container_id)
        state = self._observe(container_id).state
        if state is not ContainerState.RUNNING:
            # No more specific code in the CRI either (containerd: "container is in
            # CONTAINER_EXITED state"), hence the base class.
            raise ContainerRuntimeError(
                f'container "{container_id}" ({rec.config.metadata.name}) is in {state.value} '
                f"state; {what} needs a running container"
            )
        return rec

    def _check_exec(self, container_id: str, cmd: Sequence[str]) -> None:
        """Raise what an exec of ``cmd`` in the container raises before it runs."""
        self._load_container(container_id)
        if not cmd:
            raise InvalidArgumentError(f'exec in container "{container_id}": cmd is empty')
        self._running_record(container_id, "exec")

    async def _spawn_exec(
        self,
        container_id: str,
        cmd: Sequence[str],
        stdin: int,
        stdout: int,
        stderr: int,
        tty: bool = False,
    ) -> asyncio.subprocess.Process:
        """Start ``cmd`` as the container's processes run: its environment, working
        directory and user, its mount and network namespaces and cgroups when it has
        them, in a session of its own (with ``tty``, on the terminal given as its
        stdio, made its controlling terminal). The one path of every exec.

        Raises:
            OSError: the command could not be started.
        """
        cdir = self._container_dir(container_id)
        spec = _read_json(cdir / SPEC_FILE) or {}
        pid = self._observe(container_id).pid
        in_namespace = bool(spec.get("apply_mounts") and spec.get("mounts"))
        in_namespace = in_namespace or bool(spec.get("netns"))
        # A security context (capabilities, a read-only root) is applied by the helper.
        in_namespace = in_namespace or spec.get("security") is not None
        if (in_namespace or spec.get("cgroup_procs") or tty) and pid > 0:
            # The command must see the container's mounts and count against its
            # cgroups: the shim's exec helper joins them, then becomes the command.
            # On a terminal the helper also takes it as its controlling terminal: a
            # preexec_fn here would run Python in a fork of this process, whose gRPC
            # fork handlers then write to the child's stderr, the user's terminal.
            return await asyncio.create_subprocess_exec(
                self._python,
                "-m",
                "kubelet_kit.runtimes._shim",
                "--exec",
                str(cdir),
                str(pid),
                "--",
                *cmd,
                env=_shim_env(),
                cwd="/",
                stdin=stdin,
                stdout=stdout,
                stderr=stderr,
                start_new_session=True,
            )
        return await asyncio.create_subprocess_exec(
            *cmd,
            env=spec.get("env", {}),
            cwd=spec.get("cwd") or "/",
            stdin=stdin,
            stdout=stdout,
            stderr=stderr,
            start_new_session=True,
            user=spec.get("user"),
            group=spec.get("group"),
            extra_groups=spec.get("extra_groups"),
            preexec_fn=take_controlling_tty if tty else None,
        )

    async def exec_sync(
        self, container_id: str, cmd: Sequence[str], timeout: float | None = None
    ) -> ExecResult:
        """Run ``cmd`` with the container's environment, working directory and user;
        wait for it and return its exit code and output. Not idempotent.

        Raises:
            NotFoundError: unknown id.
            InvalidArgumentError: ``cmd`` is empty.
            ContainerRuntimeError: the container is not running.
            DeadlineExceededError: it ran longer than ``timeout`` seconds (None or
                0: no limit); the command and its children are killed.
        """
        self._check_exec(container_id, cmd)
        devnull, pipe = asyncio.subprocess.DEVNULL, asyncio.subprocess.PIPE
        try:
            proc = await self._spawn_exec(container_id, cmd, devnull, pipe, pipe)
        except OSError as exc:
            # What a shell says and returns for a command it cannot run.
            code = 127 if isinstance(exc, FileNotFoundError) else 126
            return ExecResult(exit_code=code, stderr=f"{cmd[0]}: {exc.strerror}\n".encode())
        try:
            out, err = await wait_for(self._clock, proc.communicate(), timeout if timeout else None)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            await proc.wait()
            raise DeadlineExceededError(
                f'exec {list(cmd)!r} in container "{container_id}" timed out after {timeout:g}s'
            ) from None
        except BaseException:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            raise
        return ExecResult(exit_code=proc.returncode or 0, stdout=out, stderr=err)

    # ------------------------------------------------------------- streams

    async def exec_stream(self, container_id: str, cmd: Sequence[str], io: StreamIO) -> int:
        """Run ``cmd`` as :meth:`exec_sync` does, wired to the client's streams; return
        its exit code (128 + N when killed by signal N) once its output is written.
        Blocks for the whole session; not idempotent. See
        :mod:`kubelet_kit.runtimes.streams` for pipes, terminals and stdin's end.
        Closes ``io.stdout`` and ``io.stderr``; cancelling kills the command.

        Raises:
            NotFoundError: unknown id.
            InvalidArgumentError: ``cmd`` is empty.
            ContainerRuntimeError: the container is not running.
        """
        self._check_exec(container_id, cmd)

        async def spawn(
            stdin: int, stdout: int, stderr: int, tty: bool
        ) -> asyncio.subprocess.Process:
            return await self._spawn_exec(container_id, cmd, stdin, stdout, stderr, tty)

        return await exec_session(spawn, cmd[0], io)

    async def attach_stream(self, container_id: str, io: StreamIO) -> None:
        """Wire ``io`` to the container's own stdin and output (or terminal) through
        its shim, until the container exits, the client's stdin ends and the
        output goes quiet (with ``stdin_once``: the container's stdin is closed
        then, and the output keeps coming until it exits) or the call is
        cancelled. The container's ``stdin``
        and ``tty`` settings decide what flows (the client's stdin is dropped for a
        container without stdin; a terminal has no stderr). Output is streamed from
        the moment of attaching, for any container; everything also goes to the
        log. Blocks for the whole session. Closes ``io.stdout`` and ``io.stderr``.

        Raises:
            NotFoundError: unknown id.
            ContainerRuntimeError: the container is not running, or its shim was
                started by a runtime without attach support.
        """
        rec = self._running_record(container_id, "attach")
        c = rec.config
        await attach_session(
            self._container_dir(container_id),
            io,
            stdin=c.stdin,
            stdin_once=c.stdin_once,
            tty=c.tty,
            where=f'container "{container_id}" ({c.metadata.name})',
        )

    async def port_forward_stream(
        self, sandbox_id: str, port: int, source: ByteSource, sink: ByteSink
    ) -> None:
        """Connect to ``localhost:port`` in the sandbox's network (its own
        namespace with CNI networking, else the host's) and copy bytes both ways
        until the server closes or either side fails; the client's end of input
        half-closes the connection. Blocks for the whole session. Closes ``sink``.

        Raises:
            NotFoundError: unknown sandbox.
            InvalidArgumentError: ``port`` is not a TCP port number.
            ContainerRuntimeError: the sandbox is not ready, or nothing accepts
                connections on that port.
        """
        rec = self._load_sandbox(sandbox_id)
        if not 0 < port < 65536:
            raise InvalidArgumentError(
                f'port-forward in sandbox "{sandbox_id}": port {port} is not in 1-65535'
            )
        if rec.state is not PodSandboxState.READY:
            raise ContainerRuntimeError(
                f'sandbox "{sandbox_id}" ({rec.config.metadata.name}) is not ready; '
                "port-forward needs a ready sandbox"
            )
        await forward_port(
            rec.netns,
            port,
            source,
            sink,
            where=f'sandbox "{sandbox_id}" ({rec.config.metadata.name})',
        )
