"""The container lifecycle of the fake runtime.

The part of :class:`~kubelet_kit.testing.FakeRuntime` implementing the CRI's
container calls: create (one per name and attempt in a ready sandbox), start
(the command, or a scripted exit), stop with its SIGTERM grace period, remove,
list, status, ``exec_sync`` with its timeout on the clock, resource updates and
reopening the log file.
"""

from __future__ import annotations

import asyncio
import functools
import os
from collections.abc import Sequence
from pathlib import Path

from kubelet_kit.clock import wait_for
from kubelet_kit.container.interfaces import (
    ContainerConfig,
    ContainerEventType,
    ContainerFilter,
    ContainerInfo,
    ContainerState,
    ContainerStatus,
    DNSConfig,
    ExecResult,
    LinuxContainerResources,
    MountPropagation,
    PodSandboxConfig,
    PodSandboxState,
)
from kubelet_kit.errors import (
    AlreadyExistsError,
    ContainerRuntimeError,
    ContainerStartError,
    DeadlineExceededError,
    UnimplementedError,
)
from kubelet_kit.testing._fake_fs import _ContainerFS
from kubelet_kit.testing._fake_process import _identity, _ProcessPart
from kubelet_kit.testing._fake_records import (
    EXIT_SIGKILL,
    EXIT_SIGTERM,
    POD_UID_LABEL,
    _Container,
    _image_id,
)
from kubelet_kit.testing._fake_security import checked_capabilities, security_files
from kubelet_kit.testing._fake_shell import _run_statements


class _ContainerPart(_ProcessPart):
    """``create_container`` to ``remove_container``, list, status, ``exec_sync``,
    resource updates and log reopening."""

    # ========================================================== Runtime: containers

    async def create_container(
        self, pod_sandbox_id: str, config: ContainerConfig, sandbox_config: PodSandboxConfig
    ) -> str:
        """Create a container in a READY sandbox.

        Raises:
            NotFoundError: unknown sandbox.
            ContainerStartError: the sandbox is not READY.
            AlreadyExistsError: the sandbox has a container of that name and attempt.
            UnimplementedError: a mount asks for Bidirectional propagation (the
                fake's containers cannot make mounts to propagate).
        """
        await self._enter("create_container", (pod_sandbox_id, config, sandbox_config))
        for i, m in enumerate(config.mounts):
            if m.propagation is MountPropagation.BIDIRECTIONAL:
                raise UnimplementedError(
                    f"mounts[{i}].propagation: {m.propagation.value} is not offered by the "
                    "fake runtime (its containers cannot make mounts)"
                )
        sb = self._sandbox(pod_sandbox_id)
        if sb.state != PodSandboxState.READY:
            raise ContainerStartError(
                f"create_container: sandbox {pod_sandbox_id} is in {sb.state.value} state"
            )
        for other in self._containers_by_sandbox.get(sb.id, {}).values():
            if other.config.metadata == config.metadata:
                raise AlreadyExistsError(
                    f"create_container: container name {config.metadata.name!r} attempt "
                    f"{config.metadata.attempt} is reserved for {other.id}"
                )
        sc = config.security_context
        try:
            checked_capabilities(sc)
        except ValueError as exc:
            raise ContainerStartError(f"create_container: {exc}") from None
        cid = self._new_id("container")
        log_dir = sb.config.log_directory or sandbox_config.log_directory
        log_path = ""
        if config.log_path:
            log_path = os.path.join(log_dir, config.log_path) if log_dir else config.log_path
        image = self._registry_image(config.image.image)
        c = _Container(
            id=cid,
            sandbox_id=sb.id,
            config=config,
            created_at=self.clock.now(),
            # Named by id (as the kubelet does after pulling), the container reports
            # the image by its first tag, as containerd does.
            image=(
                image.repo_tags[0]
                if image is not None and image.repo_tags and config.image.image == image.id
                else config.image.image
            ),
            image_ref=image.id if image is not None else _image_id(config.image.image),
            log_path=log_path,
            env={kv.key: kv.value for kv in config.envs},
            fs=_ContainerFS(config.mounts, config.working_dir),
            resources=config.resources,
            ignore_term=config.metadata.name in self._ignore_term,
        )
        # What the container reads to learn who and where it is, as in a real one.
        c.fs.own.update(security_files(sb.id, cid, sb.config, config, _identity(c)))
        c.fs.readonly_root = sc is not None and sc.readonly_rootfs
        dns = _resolv_conf(sb.config.dns_config) if sb.config.dns_config else ""
        if dns:
            # As a real runtime: the sandbox's resolver configuration is the file.
            c.fs.own["/etc/resolv.conf"] = dns
        self._containers[cid] = c
        self._containers_by_sandbox.setdefault(sb.id, {})[cid] = c
        self._containers_by_pod.setdefault(config.labels.get(POD_UID_LABEL, ""), {})[cid] = None
        self._logs[cid] = []
        self._emit(cid, ContainerEventType.CREATED, sb.id)
        return cid

    async def start_container(self, container_id: str) -> None:
        """Start a CREATED container.

        Raises:
            NotFoundError: unknown container.
            ContainerStartError: the container is not CREATED (already started,
                exited) or its sandbox is not READY.
        """
        await self._enter("start_container", (container_id,))
        c = self._container(container_id)
        if c.state != ContainerState.CREATED:
            raise ContainerStartError(
                f"start_container: container {container_id} is in {c.state.value} state, "
                "not CONTAINER_CREATED"
            )
        sb = self._sandboxes[c.sandbox_id]
        if sb.state != PodSandboxState.READY:
            raise ContainerStartError(
                f"start_container: sandbox {sb.id} is in {sb.state.value} state"
            )
        c.state = ContainerState.RUNNING
        c.started_at = self.clock.now()
        c.fs.started()
        if self._names_ignoring_term(c):
            c.ignore_term = True
        self._emit(c.id, ContainerEventType.STARTED, c.sandbox_id)
        rule = self._take_script(c, sb)
        if rule is not None:
            code = rule.exit_code
            if code is None:
                code = EXIT_SIGKILL if rule.oom_killed else 0
            reason = "OOMKilled" if rule.oom_killed else None
            if rule.after <= 0:
                self._finish(c, code, reason=reason)
            else:
                c.timer = self.clock.call_later(
                    rule.after, lambda: self._finish_if_running(c, code, reason)
                )
            return
        statements = self._statements_for(c)
        if isinstance(statements, str):
            # A script the shell cannot parse: sh reports it and exits 2.
            self._write_log(c, "stderr", f"sh: syntax error: {statements}")
            self._finish(c, 2)
            return
        if statements is None:
            return  # nothing to run: runs until stopped
        if statements and statements[0].sleeps_forever:
            # ``sleep infinity`` and the like, as long-running containers often
            # run: the shell would sleep at once until the container is stopped
            # and then run nothing more, so no shell is made to step it.
            return
        c.proc = _run_statements(
            statements,
            c.env,
            lambda stream, text: self._write_log(c, stream, text),
            c.fs,
            unknown_blocks=True,
            on_trap_term=lambda ignore: setattr(c, "ignore_term", ignore),
            identity=_identity(c),
            cwd=c.fs.cwd,
            on_serve=lambda argv: setattr(c, "serving", tuple(argv)),
        )
        self._step(c)

    async def stop_container(self, container_id: str, timeout: float) -> None:
        """SIGTERM the container, SIGKILL it after ``timeout`` clock seconds; returns
        once it has exited. Idempotent (a container not running is left as it is).

        Raises:
            NotFoundError: unknown container.
        """
        await self._enter("stop_container", (container_id, timeout))
        c = self._container(container_id)
        if c.state == ContainerState.UNKNOWN:
            self._finish(c, EXIT_SIGKILL)
            return
        if c.state != ContainerState.RUNNING:
            return
        if timeout <= 0:
            self._finish(c, EXIT_SIGKILL)
            return
        if not c.ignore_term:
            self._finish(c, EXIT_SIGTERM)
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        c.waiters.append(fut)
        try:
            await wait_for(self.clock, asyncio.shield(fut), timeout)
        except TimeoutError:
            if c.state == ContainerState.RUNNING:
                self._finish(c, EXIT_SIGKILL)

    async def remove_container(self, container_id: str) -> None:
        """Remove a container, killing it first if it runs. Idempotent (unknown id
        succeeds)."""
        await self._enter("remove_container", (container_id,))
        c = self._containers.get(container_id)
        if c is not None:
            self._remove_container(c)

    async def list_containers(self, filter: ContainerFilter | None = None) -> list[ContainerInfo]:
        """Every container matching ``filter``, oldest first."""
        await self._enter("list_containers", (filter,))
        out = []
        for c in self._candidates(self._containers, self._containers_by_pod, filter):
            if c.listed is not None and c.listed.state is c.state:
                if filter is None or filter.matches(c.listed):
                    out.append(c.listed)
                continue
            info = c.listed = self._c_info(c)
            if filter is None or filter.matches(info):
                out.append(info)
        return out

    async def container_status(self, container_id: str) -> ContainerStatus:
        """Status of one container. Raises NotFoundError for an unknown id."""
        await self._enter("container_status", (container_id,))
        return self._c_status(self._container(container_id))

    async def exec_sync(
        self, container_id: str, cmd: Sequence[str], timeout: float | None = None
    ) -> ExecResult:
        """Run ``cmd`` with the shell (or the exec handler) in a running container.

        ``timeout`` None or ``<= 0`` means no limit, as in the CRI.

        Raises:
            NotFoundError: unknown container.
            ContainerRuntimeError: the container is not running.
            DeadlineExceededError: it ran longer than ``timeout`` clock seconds.
        """
        await self._enter("exec_sync", (container_id, tuple(cmd), timeout))
        c = self._container(container_id)
        if c.state != ContainerState.RUNNING:
            raise ContainerRuntimeError(
                f"exec_sync: container {container_id} is in {c.state.value} state"
            )
        limit = timeout if timeout is not None and timeout > 0 else None
        try:
            return await wait_for(self.clock, self._exec(c, cmd), limit)
        except TimeoutError:
            raise DeadlineExceededError(
                f"exec_sync: command {list(cmd)!r} in container {container_id} timed out "
                f"after {timeout:g}s"
            ) from None

    async def update_container_resources(
        self, container_id: str, resources: LinuxContainerResources
    ) -> None:
        """Record new resources for a created or running container.

        Raises:
            NotFoundError: unknown container.
            ContainerRuntimeError: the container has exited.
        """
        await self._enter("update_container_resources", (container_id, resources))
        c = self._container(container_id)
        if c.state not in (ContainerState.CREATED, ContainerState.RUNNING):
            raise ContainerRuntimeError(
                f"update_container_resources: container {container_id} is in {c.state.value} state"
            )
        c.resources = resources

    async def reopen_container_log(self, container_id: str) -> None:
        """Start a new, empty log file at the container's log path (the fake opens
        the file for every line anyway, so later output lands in it).

        Raises:
            NotFoundError: unknown container.
            ContainerRuntimeError: the container is not running.
        """
        await self._enter("reopen_container_log", (container_id,))
        c = self._container(container_id)
        if c.state != ContainerState.RUNNING:
            raise ContainerRuntimeError(
                f"reopen_container_log: container {container_id} is {c.state.value}, not running"
            )
        if c.log_path and os.path.isabs(c.log_path):
            Path(c.log_path).parent.mkdir(parents=True, exist_ok=True)
            Path(c.log_path).touch()


def _resolv_conf(dns: DNSConfig) -> str:
    """``dns.resolv_conf()``, worked out once per (frozen, hashable) configuration:
    the pods of a node mostly share one."""
    try:
        return _resolv_conf_of(dns)
    except TypeError:  # a configuration built with a list in it: not hashable
        return dns.resolv_conf()


@functools.lru_cache(maxsize=64)
def _resolv_conf_of(dns: DNSConfig) -> str:
    return dns.resolv_conf()
