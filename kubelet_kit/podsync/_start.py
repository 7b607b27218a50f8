"""Starting one container in a pod sync, and the reasons it could not start.

:class:`_Starter` is the kubelet's ``startContainer`` with its checks: the
crash-loop back-off, the image (policy and pull back-off), the environment, the
log directory and restart count (:func:`restart_count_from_log_dir` when the
runtime has forgotten the container), create, start and the postStart hook. Each
failure leaves the container's waiting reason (``CrashLoopBackOff``,
``CreateContainerError``, ``RunContainerError``, ``PostStartHookError``, ...).
:func:`_uninterrupted` lets a runtime call that makes something run to its end
even when the sync is cancelled.
"""

from __future__ import annotations

import asyncio
import functools
import os
import re
from collections.abc import Awaitable, Generator, Sequence
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from kubelet_kit.api.duration import format_duration
from kubelet_kit.container import labels as kl
from kubelet_kit.container.interfaces import ContainerState, ContainerStatus, PodSandboxConfig
from kubelet_kit.container.pods import PodRuntimeStatus
from kubelet_kit.errors import ContainerRuntimeError, KubeletKitError, PodSyncError
from kubelet_kit.podsync import configs, podfiles
from kubelet_kit.podsync.actions import KILL_REASON_POST_START
from kubelet_kit.podsync.backoff import format_pod, stable_key

if TYPE_CHECKING:
    from kubelet_kit.api import Container, Pod
    from kubelet_kit.podsync.syncer import RuntimePodSyncer, _SyncState

__all__ = [
    "CRASH_LOOP_BACK_OFF",
    "CREATE_CONTAINER_ERROR",
    "POST_START_HOOK_ERROR",
    "RUN_CONTAINER_ERROR",
    "restart_count_from_log_dir",
]

T = TypeVar("T")

CRASH_LOOP_BACK_OFF = "CrashLoopBackOff"
CREATE_CONTAINER_ERROR = "CreateContainerError"
RUN_CONTAINER_ERROR = "RunContainerError"
POST_START_HOOK_ERROR = "PostStartHookError"


_LOG_NAME = re.compile(r"^(\d+)\.log(\..*)?")


def restart_count_from_log_dir(path: str) -> int:
    """One more than the highest ``<n>.log`` (or rotated ``<n>.log.*``) in ``path``.

    The kubelet's ``calcRestartCountByLogDir``: when the runtime has forgotten a
    container (after a node reboot, say), its next log must not overwrite the
    earlier ones. A missing or unreadable directory gives 0.
    """
    try:
        entries = list(os.scandir(path))
    except OSError:
        return 0
    count = 0
    for entry in entries:
        match = _LOG_NAME.match(entry.name)
        if match is None or entry.is_dir():
            continue
        count = max(count, int(match.group(1)) + 1)
    return count


def _restart_count(status: ContainerStatus | None) -> int:
    """The next restart count: the newest container's annotation (or attempt) + 1."""
    if status is None:
        return 0
    raw = status.annotations.get(kl.CONTAINER_RESTART_COUNT)
    try:
        current = int(raw) if raw is not None else status.metadata.attempt
    except ValueError:
        current = status.metadata.attempt
    return current + 1


class _Starter:
    """Starts one container of one sync (the kubelet's ``startContainer`` with its
    back-off and image checks), recording why it could not."""

    def __init__(
        self,
        syncer: RuntimePodSyncer,
        pod: Pod,
        runtime_status: PodRuntimeStatus,
        sandbox_id: str,
        sandbox_config: PodSandboxConfig,
        pod_ips: Sequence[str],
        state: _SyncState,
    ) -> None:
        self.s = syncer
        self.pod = pod
        self.runtime_status = runtime_status
        self.sandbox_id = sandbox_id
        self.sandbox_config = sandbox_config
        self.pod_ips = tuple(pod_ips)
        self.state = state
        self.reasons = syncer._reasons.setdefault(pod.uid, {})

    def _fail(
        self, container: Container, reason: str, message: str, event: str | None = None
    ) -> bool:
        """Remember why ``container`` did not start; record the kubelet's ``Failed``
        event (``Error: <event>``, the message by default)."""
        self.reasons[container.name] = (reason, message)
        self.s._event(
            self.pod,
            "Warning",
            "Failed",
            f"Error: {message if event is None else event}",
            container.name,
        )
        return False

    async def __call__(self, container: Container) -> bool:
        """Start ``container``; returns whether it runs (postStart done)."""
        s, pod = self.s, self.pod
        newest = self.runtime_status.find_container_status(container.name)
        exited = next(
            (
                c
                for c in self.runtime_status.container_statuses
                if c.metadata.name == container.name and c.state is ContainerState.EXITED
            ),
            None,
        )
        if exited is not None:
            key = stable_key(pod, container, configs.container_hash(container))
            if s.crash_backoff.is_in_backoff_since(key, exited.finished_at):
                delay = s.crash_backoff.get(key)
                self.state.expiries.append(exited.finished_at + delay)
                s._event(
                    pod,
                    "Warning",
                    "BackOff",
                    f"Back-off restarting failed container {container.name} in pod "
                    f"{format_pod(pod)}",
                    container.name,
                )
                self.reasons[container.name] = (
                    CRASH_LOOP_BACK_OFF,
                    f"back-off {format_duration(delay)} restarting failed "
                    f"container={container.name} pod={format_pod(pod)}",
                )
                return False
            s.crash_backoff.next(key, exited.finished_at)

        try:
            image_ref = await s.images.ensure_image(pod, container, self.sandbox_config)
        except PodSyncError as exc:
            expiry = s.images.backoff_expiry(pod, container)
            if expiry is not None:
                self.state.expiries.append(expiry)
            # The image manager's error name is the event: "Error: ErrImagePull".
            return self._fail(container, exc.reason, exc.message, event=exc.reason)

        try:
            resolve = functools.partial(
                configs.resolve_env,
                pod,
                container,
                pod_ip=self.pod_ips[0] if self.pod_ips else "",
                host_ip=s.host_ip,
                node_name=s.node_name,
                pod_ips=self.pod_ips,
                host_ips=(s.host_ip,) if s.host_ip else (),
                config_source=s.config_source,
                services=s.services() if s.services is not None else (),
                allocatable=s.container_manager.node_allocatable(),
            )
            # A ConfigSource may block (files, an API server): look it up off the loop.
            env = (
                await asyncio.to_thread(resolve)
                if s.config_source is not None and _uses_config_objects(container)
                else resolve()
            )
            # Device plugins' envs and mounts go first, as the kubelet orders them
            # (so a variable the pod sets itself still wins), in the config and in
            # the environment subPathExpr expands against.
            devices = await s.container_manager.container_run_options(pod, container)
            mounts = s.volume_manager.container_mounts(
                pod, container, {kv.key: kv.value for kv in (*devices.envs, *env)}
            )
        except PodSyncError as exc:
            return self._fail(container, exc.reason, exc.message)
        except KubeletKitError as exc:
            return self._fail(container, configs.CREATE_CONTAINER_CONFIG_ERROR, str(exc))
        # The sandbox's log directory is the pod's (configs.pod_log_directory).
        log_dir = os.path.join(self.sandbox_config.log_directory, container.name)
        try:
            made = podfiles.make_dir(log_dir, 0o755)
        except OSError as exc:
            return self._fail(
                container,
                configs.CREATE_CONTAINER_CONFIG_ERROR,
                f"create container log directory for container {container.name} failed: {exc}",
            )
        if newest is not None:
            restart_count = _restart_count(newest)
        else:
            # A directory made just now holds no earlier logs.
            restart_count = 0 if made else restart_count_from_log_dir(log_dir)
        kubelet_mounts = []
        if s.root_dir is not None:
            hostname, domain = configs.pod_hostname_and_domain(pod, s.cluster_domain)
            try:
                hosts = podfiles.hosts_mount(
                    s.root_dir,
                    pod,
                    container,
                    self.pod_ips,
                    hostname,
                    domain,
                    node_hosts_path=s.node_hosts_path,
                )
            except OSError as exc:
                return self._fail(
                    container, configs.CREATE_CONTAINER_CONFIG_ERROR, exc.strerror or str(exc)
                )
            # After the volumes, as the kubelet orders them: the termination file
            # last, made just before the container that will write it.
            message = podfiles.termination_message_mount(s.root_dir, pod, container)
            kubelet_mounts = [m for m in (hosts, message) if m is not None]
        config = configs.container_config(
            pod,
            container,
            restart_count=restart_count,
            env=[*devices.envs, *env],
            mounts=[*devices.mounts, *mounts, *kubelet_mounts],
            devices=devices.devices,
            resources=s.container_manager.container_resources(pod, container),
            image=image_ref,
            extra_annotations=devices.annotations,
        )

        async def create() -> str:
            made = await s.runtime.create_container(self.sandbox_id, config, self.sandbox_config)
            s._event(
                pod, "Normal", "Created", f"Created container: {container.name}", container.name
            )
            return made

        async def start() -> None:
            await s.runtime.start_container(container_id)
            s._event(
                pod, "Normal", "Started", f"Started container {container.name}", container.name
            )

        # Each step and its event run to their end even if the sync is cancelled.
        try:
            container_id = await _uninterrupted(create())
        except ContainerRuntimeError as exc:
            return self._fail(container, CREATE_CONTAINER_ERROR, str(exc))
        try:
            await _uninterrupted(start())
        except ContainerRuntimeError as exc:
            return self._fail(container, RUN_CONTAINER_ERROR, str(exc))

        hook = container.lifecycle.post_start if container.lifecycle is not None else None
        if hook is not None:
            failure = await s.hooks.run(container_id, pod, container, hook, pod_ips=self.pod_ips)
            if failure is not None:
                # The message stays out of the event: it may carry secrets.
                s._event(
                    pod, "Warning", "FailedPostStartHook", "PostStartHook failed", container.name
                )
                await s._kill_container(
                    pod,
                    container_id,
                    container.name,
                    container,
                    reason=KILL_REASON_POST_START,
                    message="FailedPostStartHook",
                    pod_ips=self.pod_ips,
                )
                self.reasons[container.name] = (POST_START_HOOK_ERROR, failure)
                return False
        self.reasons.pop(container.name, None)
        return True


def _uninterrupted(call: Awaitable[T]) -> Awaitable[T]:
    """Await a runtime call that makes something (a sandbox, a container, a start)
    to its end, even when the sync is cancelled meanwhile.

    A pod told to terminate cancels its sync. Abandoning RunPodSandbox,
    CreateContainer or StartContainer half-way leaves what the runtime was making
    in a state nobody chose (containerd kills a shim it was starting: a
    ``StartError``), and the termination that follows could list the pod before
    the call lands and miss what it made. So the call ends first; then the
    cancellation goes on, and nothing else is started.
    """
    return _ToTheEnd(call)


class _ToTheEnd(Generic[T]):
    """The awaitable :func:`_uninterrupted` returns: ``asyncio.shield`` without a
    task of its own.

    The call runs in the awaiting task, step by step. Whenever it waits on a
    future, the task waits on a stand-in future that the call's future completes:
    cancelling the task cancels only the stand-in, which is noted, and the call is
    waited on again until it ends. A call that never waits (a runtime answering at
    once) costs no task, no extra future and no turn of the event loop, which a
    burst of pod starts would otherwise pay on every create and start.
    """

    __slots__ = ("_call",)

    def __init__(self, call: Awaitable[T]) -> None:
        self._call = call

    def __await__(self) -> Generator[Any, None, T]:
        steps = self._call.__await__()
        cancelled: BaseException | None = None
        try:
            while True:
                try:
                    waited = steps.send(None)
                except StopIteration as done:
                    if cancelled is not None:
                        raise cancelled from None
                    result: T = done.value
                    return result
                except BaseException:
                    if cancelled is not None:
                        # Its outcome no longer matters to anyone: the sync was cancelled.
                        raise cancelled from None
                    raise
                if getattr(waited, "_asyncio_future_blocking", None) is not True:
                    # A bare yield (a turn of the loop) or something the task
                    # itself reports: passed through as it is.
                    try:
                        yield waited
                    except asyncio.CancelledError as exc:
                        cancelled = exc
                    continue
                waited._asyncio_future_blocking = False
                while True:
                    stand_in = waited.get_loop().create_future()
                    waited.add_done_callback(functools.partial(_complete, stand_in))
                    try:
                        yield from stand_in
                    except asyncio.CancelledError as exc:
                        cancelled = exc
                        if not waited.done():
                            continue  # cancelled meanwhile: wait on for the call
                    break
        finally:
            steps.close()


def _complete(stand_in: asyncio.Future[None], _done: asyncio.Future[Any]) -> None:
    """Wake the task waiting on ``stand_in``: the future it stands in for is done."""
    if not stand_in.done():
        stand_in.set_result(None)


def _uses_config_objects(container: Container) -> bool:
    """Whether the container's env reads ConfigMaps or Secrets."""
    if container.env_from:
        return True
    return any(
        e.value_from is not None
        and (e.value_from.config_map_key_ref is not None or e.value_from.secret_key_ref is not None)
        for e in container.env
    )
