"""The container lifecycle of :class:`~kubelet_kit.runtimes.host.HostProcessRuntime`.

A container is a state directory holding its record and the spec its shim
reads. This part builds that spec (argv, environment, working directory, user,
mounts, cgroups, network namespace), creates containers, starts them through
the shim (at most once, even across runtimes over one root), stops and removes
them, lists and reports them, reopens their logs and records new resources.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import pwd
import shutil
import signal
import socket
import time
import uuid
from pathlib import Path
from typing import Any

import attrs

from kubelet_kit.clock import wait_for
from kubelet_kit.container.interfaces import (
    ContainerConfig,
    ContainerEventType,
    ContainerFilter,
    ContainerInfo,
    ContainerState,
    ContainerStatus,
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
    NotFoundError,
)
from kubelet_kit.runtimes._host_cgroups import _HostCgroups
from kubelet_kit.runtimes._host_events import _HostEvents
from kubelet_kit.runtimes._host_images import image_ref_of, status_image
from kubelet_kit.runtimes._host_records import (
    _CONTAINER_FILE,
    _SHIM_LOG,
    _START_LOCK,
    _container_record_to_json,
    _ContainerRecord,
    _Observed,
    _read_json,
)
from kubelet_kit.runtimes._host_system import _shim_env, cgroup_procs_files
from kubelet_kit.runtimes._shim import EXIT_FILE, SPEC_FILE, START_FILE, write_json_atomic
from kubelet_kit.runtimes._shim_security import check_security, security_spec

#: Where a container's resolver configuration is.
RESOLV_CONF = "/etc/resolv.conf"
#: The PATH containerd gives a container whose image sets none.
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


class _HostContainers(_HostEvents, _HostCgroups):
    """Creating, starting, stopping, removing and reporting containers."""

    def _build_spec(
        self, name: str, config: ContainerConfig, sandbox: PodSandboxConfig, netns: str = ""
    ) -> dict[str, Any]:
        argv = [*config.command, *config.args]
        if not argv:
            raise ContainerStartError(
                f'container "{name}": no command specified (command and args are both '
                "empty, and the host runtime has no image to supply a default)"
            )
        cwd = config.working_dir or "/"
        if not cwd.startswith("/"):
            raise ContainerStartError(
                f'container "{name}": workingDir {cwd!r} must be an absolute path'
            )
        sc = config.security_context
        uid = sc.run_as_user if sc is not None and sc.run_as_user is not None else os.getuid()
        try:
            home = pwd.getpwuid(uid).pw_dir
        except KeyError:
            home = "/"  # runc's default for a user without a passwd entry
        env: dict[str, str] = {
            "PATH": DEFAULT_PATH,
            "HOSTNAME": sandbox.hostname or socket.gethostname(),
        }
        for kv in config.envs:
            env[kv.key] = kv.value
        env.setdefault("HOME", home)
        spec: dict[str, Any] = {
            "name": name,
            "argv": argv,
            "env": env,
            "cwd": cwd,
            "max_line_size": self._max_line,
            # Read by the shim: a stdin pipe it holds open, a terminal it owns.
            "stdin": config.stdin,
            "stdin_once": config.stdin_once,
            "tty": config.tty,
        }
        if config.mounts:
            spec["mounts"] = [
                {
                    "container_path": m.container_path,
                    "host_path": m.host_path,
                    "readonly": m.readonly,
                    "propagation": m.propagation.value,
                }
                for m in config.mounts
            ]
            spec["apply_mounts"] = self._apply_mounts
        if sc is not None:
            spec["user"] = sc.run_as_user
            spec["group"] = sc.run_as_group
            spec["extra_groups"] = list(sc.supplemental_groups) or None
        check_security(name, sc, root=self._apply_mounts)
        if self._apply_mounts or (sc is not None and sc.no_new_privs):
            # As root the shim gives the container containerd's capability set;
            # otherwise its processes hold none, and only the flag applies.
            spec["security"] = security_spec(sc, caps=self._apply_mounts)
        try:
            # The pod cgroup, which a container joins when it gets none of its own.
            procs = cgroup_procs_files(sandbox.cgroup_parent)
        except ValueError as exc:
            raise ContainerStartError(f'container "{name}": cgroup_parent: {exc}') from None
        if procs:
            spec["cgroup_procs"] = procs
        if netns:
            spec["netns"] = netns
        return spec

    def _mount_resolv_conf(
        self, spec: dict[str, Any], sandbox: PodSandboxConfig, cdir: Path
    ) -> None:
        """As containerd: the sandbox's DNS config becomes the container's
        ``/etc/resolv.conf``, bind-mounted from a file of the container's own
        (where the runtime may mount, and no mount of the config's is there
        already). Without a DNS config the host's file shows through."""
        content = sandbox.dns_config.resolv_conf() if sandbox.dns_config else ""
        mounts = spec.get("mounts") or []
        if not content or not self._apply_mounts:
            return
        if any(m["container_path"] == RESOLV_CONF for m in mounts):
            return
        resolv = cdir / "resolv.conf"
        resolv.write_text(content)
        resolv.chmod(0o644)
        spec["mounts"] = [
            *mounts,
            {
                "container_path": RESOLV_CONF,
                "host_path": str(resolv),
                "readonly": False,
                "propagation": MountPropagation.PRIVATE.value,
            },
        ]
        spec["apply_mounts"] = True

    async def create_container(
        self, pod_sandbox_id: str, config: ContainerConfig, sandbox_config: PodSandboxConfig
    ) -> str:
        """Record a container in a sandbox; returns its id. Not idempotent; does not
        block.

        Raises:
            NotFoundError: unknown sandbox.
            AlreadyExistsError: a container with this name and attempt exists in it.
            ContainerStartError: the sandbox is not ready, or the config cannot run
                (no command, relative working directory).
        """
        sandbox = self._load_sandbox(pod_sandbox_id)
        name = config.metadata.name
        if sandbox.state is not PodSandboxState.READY:
            raise ContainerStartError(
                f'container "{name}": sandbox "{pod_sandbox_id}" is not ready'
            )
        for other in self._container_records():
            if other.pod_sandbox_id == pod_sandbox_id and other.config.metadata == config.metadata:
                raise AlreadyExistsError(
                    f'container name "{name}" (attempt {config.metadata.attempt}) in sandbox '
                    f'"{pod_sandbox_id}" is reserved for "{other.id}"'
                )
        spec = self._build_spec(name, config, sandbox.config, sandbox.netns)
        # As containerd: the log path is relative to the log directory of the
        # sandbox config in this request. Without a directory only an absolute
        # path names a file; otherwise the output is discarded.
        log_dir = sandbox_config.log_directory or sandbox.config.log_directory
        log_path = ""
        if config.log_path and (log_dir or config.log_path.startswith("/")):
            log_path = str(Path(log_dir or "/") / config.log_path)
        spec["log_path"] = log_path
        image_ref = image_ref_of(self._root, config.image.image)
        container_id = uuid.uuid4().hex + uuid.uuid4().hex
        rec = _ContainerRecord(
            container_id, pod_sandbox_id, config, self._clock.now(), image_ref, log_path
        )
        cdir = self._container_dir(container_id)
        cdir.mkdir(parents=True)
        self._mount_resolv_conf(spec, sandbox.config, cdir)
        write_json_atomic(cdir / SPEC_FILE, spec)
        # container.json last: a directory without it is not (yet) a container.
        write_json_atomic(cdir / _CONTAINER_FILE, _container_record_to_json(rec))
        self._emit_container(container_id, ContainerEventType.CREATED)
        return container_id

    async def start_container(self, container_id: str) -> None:
        """Start a created container and return once its process runs.

        Waits for the shim's report (at most ``start_timeout`` on the clock). A
        container is started at most once, even by two runtimes over one root.

        Raises:
            NotFoundError: unknown id.
            ContainerStartError: not in CREATED state, sandbox not ready, or the
                process could not be started (recorded as exit 128 StartError).
            DeadlineExceededError: the shim did not report in time.
        """
        rec = self._load_container(container_id)
        name = rec.config.metadata.name
        async with self._lock(container_id):
            try:
                sandbox = self._load_sandbox(rec.pod_sandbox_id)
            except NotFoundError:
                raise ContainerStartError(
                    f'container "{name}" ({container_id}): sandbox "{rec.pod_sandbox_id}" not found'
                ) from None
            if sandbox.state is not PodSandboxState.READY:
                raise ContainerStartError(
                    f'container "{name}" ({container_id}): sandbox "{rec.pod_sandbox_id}" '
                    "is not ready"
                )
            cdir = self._container_dir(container_id)
            try:
                os.close(os.open(cdir / _START_LOCK, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            except FileExistsError:
                state = self._observe(container_id).state
                raise ContainerStartError(
                    f'container "{name}" ({container_id}) is in {state.value} state; '
                    "only a created container can be started"
                ) from None
            try:
                await self._make_cgroup(rec, sandbox.config.cgroup_parent)
            except ContainerStartError as exc:
                self._record_start_error(container_id, str(exc))
                raise
            self._set_process_resources(cdir, rec.config.resources)
            try:
                report = await wait_for(self._clock, self._launch_shim(cdir), self._start_timeout)
            except TimeoutError:
                raise DeadlineExceededError(
                    f'container "{name}" ({container_id}): the shim did not report within '
                    f"{self._start_timeout:g}s"
                ) from None
            if "error" not in report:
                self._emit_container(container_id, ContainerEventType.STARTED)
                self._watch(container_id)
            else:
                self._record_start_error(container_id, report["error"])
                # Nothing runs in it: the failed container keeps no cgroup.
                with contextlib.suppress(ContainerRuntimeError):
                    await self._remove_cgroup(container_id)
                raise ContainerStartError(
                    f'failed to start container "{name}" ({container_id}): {report["error"]}'
                )

    def _record_start_error(self, container_id: str, message: str) -> None:
        """Record a failed start (exit 128, ``StartError``, as runc's) unless the
        shim did, so the container is not CREATED forever; report it stopped."""
        cdir = self._container_dir(container_id)
        if _read_json(cdir / EXIT_FILE) is None and _read_json(cdir / START_FILE) is None:
            write_json_atomic(
                cdir / EXIT_FILE,
                {
                    "exit_code": 128,
                    "reason": "StartError",
                    "message": message,
                    "started_at": 0.0,
                    "finished_at": self._clock.now(),
                },
            )
        self._report_stopped(container_id)

    @staticmethod
    def _set_process_resources(cdir: Path, resources: LinuxContainerResources | None) -> None:
        """Put the container's ``oom_score_adj`` in its spec, for its shim and exec
        helper to set, as root only (lowering it takes CAP_SYS_RESOURCE; 0 is the
        CRI's "not set")."""
        if os.geteuid() != 0 or resources is None or not resources.oom_score_adj:
            return
        spec = _read_json(cdir / SPEC_FILE) or {}
        spec["oom_score_adj"] = resources.oom_score_adj
        write_json_atomic(cdir / SPEC_FILE, spec)

    async def _launch_shim(self, cdir: Path) -> dict[str, Any]:
        env = _shim_env()
        with open(cdir / _SHIM_LOG, "ab") as shim_log:
            proc = await asyncio.create_subprocess_exec(
                self._python,
                "-m",
                "kubelet_kit.runtimes._shim",
                str(cdir),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=shim_log,
                start_new_session=True,
                cwd="/",
                env=env,
            )
        out, _ = await proc.communicate()
        line = out.decode(errors="replace").strip()
        if not line:
            try:
                tail = (cdir / _SHIM_LOG).read_text(errors="replace")[-2000:].strip()
            except OSError:
                tail = ""
            return {"error": f"the shim exited without reporting: {tail or 'no output'}"}
        report: dict[str, Any] = json.loads(line.splitlines()[-1])
        return report

    def _signal_group(self, obs: _Observed, sig: signal.Signals) -> None:
        if obs.pid <= 0:
            return
        # The process leads its own group; signalling the group reaches its children.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(obs.pid, sig)

    async def stop_container(self, container_id: str, timeout: float) -> None:
        """Stop a running container: SIGTERM to its process group, SIGKILL after
        ``timeout`` seconds (at once when ``timeout <= 0``); returns once it has
        exited. Idempotent: a created or exited container is left as it is.

        Raises:
            NotFoundError: unknown id.
            DeadlineExceededError: still running ``kill_timeout`` after SIGKILL.
        """
        self._load_container(container_id)
        async with self._lock(container_id):
            obs = self._observe(container_id)
            if obs.state is not ContainerState.RUNNING:
                return
            try:
                await self._stop_running(container_id, obs, timeout)
            finally:
                if self._observe(container_id).state is ContainerState.EXITED:
                    self._report_stopped(container_id)

    async def _stop_running(self, container_id: str, obs: _Observed, timeout: float) -> None:
        if timeout > 0:
            self._signal_group(obs, signal.SIGTERM)
            with contextlib.suppress(TimeoutError):
                await wait_for(self._clock, self._wait_exited(container_id), timeout)
                return
        obs = self._observe(container_id)
        if obs.state is not ContainerState.RUNNING:
            return
        self._signal_group(obs, signal.SIGKILL)
        try:
            await wait_for(self._clock, self._wait_exited(container_id), self._kill_timeout)
        except TimeoutError:
            raise DeadlineExceededError(
                f'container "{container_id}" still running {self._kill_timeout:g}s after SIGKILL'
            ) from None

    async def remove_container(self, container_id: str) -> None:
        """Kill the container if it runs, remove its cgroup (killing what is left
        in it, such as an exec'd command), then delete its state. The log file is
        kept (the kubelet removes it). Idempotent: an unknown id succeeds.

        Raises:
            ContainerRuntimeError: its cgroup could not be removed (the container
                is kept, so a later removal tries again).
        """
        try:
            self._load_container(container_id)
        except NotFoundError:
            return
        await self.stop_container(container_id, 0)
        async with self._lock(container_id):
            # The status first: it reads the cgroup's OOM kills, if still unread.
            status = self._container_status(container_id)
            sandbox_id = self._load_container(container_id).pod_sandbox_id
            await self._remove_cgroup(container_id)
            self._unwatch(container_id)
            shutil.rmtree(self._container_dir(container_id), ignore_errors=True)
        self._locks.pop(container_id, None)
        self._stop_reported.discard(container_id)
        self._emit(
            container_id,
            ContainerEventType.DELETED,
            self._try_sandbox_status(sandbox_id),
            (status,),
        )

    def _info(self, rec: _ContainerRecord, state: ContainerState) -> ContainerInfo:
        c = rec.config
        return ContainerInfo(
            id=rec.id,
            pod_sandbox_id=rec.pod_sandbox_id,
            metadata=c.metadata,
            image=c.image.image,
            image_ref=rec.image_ref,
            state=state,
            created_at=rec.created_at,
            labels=c.labels,
            annotations=c.annotations,
        )

    async def list_containers(self, filter: ContainerFilter | None = None) -> list[ContainerInfo]:
        """Every container matching ``filter``, oldest first. Raises nothing."""
        result = []
        for rec in self._container_records():
            if filter is not None and filter.id is not None and rec.id != filter.id:
                continue
            info = self._info(rec, self._observe(rec.id).state)
            if filter is None or filter.matches(info):
                result.append(info)
        return result

    async def container_status(self, container_id: str) -> ContainerStatus:
        """Status of one container. Raises NotFoundError for an unknown id."""
        return self._container_status(container_id)

    def _container_status(self, container_id: str) -> ContainerStatus:
        rec = self._load_container(container_id)
        obs = self._observe(container_id)
        c = rec.config
        image, image_ref = status_image(self._root, rec.image_ref, c.image.image)
        return ContainerStatus(
            id=rec.id,
            metadata=c.metadata,
            state=obs.state,
            created_at=rec.created_at,
            image=image,
            image_ref=image_ref,
            started_at=obs.started_at,
            finished_at=obs.finished_at,
            exit_code=obs.exit_code,
            reason=obs.reason,
            message=obs.message,
            labels=c.labels,
            annotations=c.annotations,
            mounts=c.mounts,
            log_path=rec.log_path,
            resources=c.resources,
        )

    async def reopen_container_log(self, container_id: str) -> None:
        """Make the container's shim open its log path again (a new file, after log
        rotation renamed the old one); returns once the new file is there.

        Raises:
            NotFoundError: unknown container.
            ContainerRuntimeError: it is not running (or has no log), or its shim
                did not open the new file within 5 seconds.
        """
        rec = self._load_container(container_id)
        obs = self._observe(container_id)
        if obs.state is not ContainerState.RUNNING or not obs.shim_alive:
            raise ContainerRuntimeError(
                f"reopen_container_log: container {container_id} is not running"
            )
        if not rec.log_path:
            raise ContainerRuntimeError(
                f"reopen_container_log: container {container_id} has no log file"
            )
        try:
            os.kill(obs.shim_pid, signal.SIGUSR1)
        except ProcessLookupError:
            raise ContainerRuntimeError(
                f"reopen_container_log: container {container_id} is not running"
            ) from None
        # The shim is another process: wait on real time, briefly.
        deadline = time.monotonic() + 5.0
        while not os.path.exists(rec.log_path):
            if time.monotonic() > deadline:
                raise ContainerRuntimeError(
                    f"reopen_container_log: container {container_id}: no new log file at "
                    f"{rec.log_path} after 5s"
                )
            await asyncio.sleep(0.01)

    async def update_container_resources(
        self, container_id: str, resources: LinuxContainerResources
    ) -> None:
        """Apply new resources to the container's cgroup, when it has one of its
        own (fields of 0 leave their limit as it is), and record them (reported by
        container_status; a container not yet started gets them at start).

        Raises:
            NotFoundError: unknown id.
            ContainerRuntimeError: the container has exited, or a limit could not
                be written (nothing is recorded then).
        """
        async with self._lock(container_id):
            rec = self._load_container(container_id)
            state = self._observe(container_id).state
            if state not in (ContainerState.CREATED, ContainerState.RUNNING):
                raise ContainerRuntimeError(
                    f'container "{container_id}" is in {state.value} state; only a created '
                    "or running container's resources can be updated"
                )
            await self._update_cgroup(container_id, resources)
            rec = attrs.evolve(rec, config=attrs.evolve(rec.config, resources=resources))
            write_json_atomic(
                self._container_dir(container_id) / _CONTAINER_FILE, _container_record_to_json(rec)
            )
