"""The reference VolumeManager: desired state, actual state, and a reconciler loop.

:class:`ReconcilingVolumeManager` has the kubelet's shape
(``pkg/kubelet/volumemanager``):

* the **desired state of the world** is filled from the pods given to
  :meth:`~ReconcilingVolumeManager.add_pod` and emptied by
  :meth:`~ReconcilingVolumeManager.remove_pod` (the populator's job);
* the **actual state of the world** records what is set up: each volume's
  plugin, path, the pod and volume spec it was made from, and when its content
  was last refreshed;
* the **reconciler** runs every ``reconcile_period`` seconds on the injected
  clock (and at once after a change): it tears down volumes no pod wants, sets up
  volumes that are missing (a failure is retried with the kubelet's exponential
  back-off, 0.5 s doubling to 2 min 2 s, and its message kept for
  :meth:`~ReconcilingVolumeManager.wait_for_mounts`), and rewrites configMap,
  secret, downwardAPI and projected volumes every ``refresh_period`` or as soon
  as the pod changes, so updates of the source reach running pods (through the
  atomic writer: readers never see a partial update).

At start, :meth:`~ReconcilingVolumeManager.run` reconstructs the volume
directories already under ``<root_dir>/pods`` (an agent that restarted): a pod
added again within ``orphan_grace_period`` adopts its volumes as they are; the
others are orphans and are unmounted and deleted once the grace period ends.

A volumeMount's ``subPath`` is handed to the runtime as a bind mount of the
checked directory or file under ``<root_dir>/pods/<uid>/volume-subpaths`` when the
manager may mount (see :mod:`kubelet_kit.volume.subpath`); those mounts are
removed with their volume, and any left over with the pod's directories.

Every file system operation runs in a worker thread; the event loop only waits.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from kubelet_kit.api import Container, Pod, Quantity, Volume, VolumeMount
from kubelet_kit.api.expand import expand
from kubelet_kit.clock import Clock, RealClock, wait_for
from kubelet_kit.container import Mount, MountPropagation
from kubelet_kit.container.poddirs import pod_dir
from kubelet_kit.errors import FieldError, PodSyncError, ValidationError
from kubelet_kit.volume import mounter, plugins
from kubelet_kit.volume.metrics import OPERATION_MOUNT, OPERATION_UNMOUNT, VolumeMetrics
from kubelet_kit.volume.sources import ConfigSource
from kubelet_kit.volume.subpath import (
    bind_sub_path,
    clean_sub_paths,
    resolve_sub_path,
    validate_sub_path,
)

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

__all__ = [
    "BACKOFF_INITIAL",
    "BACKOFF_MAX",
    "ActualStateOfWorld",
    "DesiredStateOfWorld",
    "MountedVolume",
    "ReconcilingVolumeManager",
    "container_mounts",
    "expand_sub_path_expr",
    "sub_path_target",
]

log = logging.getLogger(__name__)

#: The kubelet's volume operation back-off: initial delay and cap.
BACKOFF_INITIAL = 0.5
BACKOFF_MAX = 122.0

_PROPAGATION = {
    None: MountPropagation.PRIVATE,
    "None": MountPropagation.PRIVATE,
    "HostToContainer": MountPropagation.HOST_TO_CONTAINER,
    "Bidirectional": MountPropagation.BIDIRECTIONAL,
}


@attrs.frozen
class MountedVolume:
    """One volume in the actual state of the world.

    Attributes:
        pod_uid: The pod it belongs to.
        name: The volume's name in the pod.
        plugin: Its plugin (``kubernetes.io/...``); for a reconstructed volume, the
            plugin read back from its directory name.
        path: Its directory on the host.
        pod: The pod spec it was last set up from (None when reconstructed).
        volume: The volume spec it was last set up from (None when reconstructed).
        refreshed_at: Monotonic time of the last set-up or refresh.
    """

    pod_uid: str
    name: str
    plugin: str
    path: Path
    pod: Pod | None = None
    volume: Volume | None = None
    refreshed_at: float = float("-inf")

    @property
    def reconstructed(self) -> bool:
        """Found on disk at start, not (yet) claimed by a pod."""
        return self.pod is None


class DesiredStateOfWorld:
    """The pods whose volumes should be set up, by uid. Not thread-safe (loop only)."""

    def __init__(self) -> None:
        self.pods: dict[str, Pod] = {}

    def volumes(self) -> list[tuple[Pod, Volume]]:
        """Every wanted (pod, volume) pair."""
        return [(pod, vol) for pod in self.pods.values() for vol in pod.spec.volumes]

    def plugin_counts(self) -> dict[str, int]:
        """Wanted volumes by plugin name (``N/A`` for unsupported sources)."""
        counts: dict[str, int] = {}
        for _, vol in self.volumes():
            try:
                name = plugins.plugin_name(vol)
            except PodSyncError:
                name = "N/A"
            counts[name] = counts.get(name, 0) + 1
        return counts


class ActualStateOfWorld:
    """What is set up, by (pod uid, volume name). Not thread-safe (loop only)."""

    def __init__(self) -> None:
        self.volumes: dict[tuple[str, str], MountedVolume] = {}

    def pod_volumes(self, uid: str) -> list[MountedVolume]:
        """The set-up volumes of one pod."""
        return [v for (u, _), v in self.volumes.items() if u == uid]

    def plugin_counts(self) -> dict[str, int]:
        """Set-up volumes by plugin name."""
        counts: dict[str, int] = {}
        for v in self.volumes.values():
            counts[v.plugin] = counts.get(v.plugin, 0) + 1
        return counts


def expand_sub_path_expr(expr: str, env: Mapping[str, str], field: str) -> str:
    """Expand ``$(VAR)`` in a ``subPathExpr`` with the kubelet's expansion rules.

    Raises:
        ValidationError: at ``field``, naming every variable that is undefined or
            empty (sorted), as the kubelet refuses them.
    """
    missing: set[str] = set()

    def lookup(name: str) -> str:
        value = env.get(name, "")
        if not value:
            missing.add(name)
        return value

    expanded = expand(expr, lookup)
    if missing:
        raise ValidationError.single(field, f"missing value for {', '.join(sorted(missing))}")
    return expanded


def _container_field(pod: Pod, container: Container) -> str:
    for kind, items in (
        ("initContainers", pod.spec.init_containers),
        ("containers", pod.spec.containers),
    ):
        for i, c in enumerate(items):
            if c.name == container.name:
                return f"spec.{kind}[{i}]"
    return f"container {container.name!r}"


def sub_path_target(
    root_dir: Path, pod: Pod, volume_name: str, container_name: str, index: int
) -> Path:
    """Where the ``index``-th volumeMount of a container is bind-mounted when it has a
    ``subPath``: ``<root_dir>/pods/<uid>/volume-subpaths/<volume>/<container>/<index>``
    (the kubelet's layout, so its clean-up finds them)."""
    return (
        pod_dir(root_dir, pod.uid) / "volume-subpaths" / volume_name / container_name / str(index)
    )


def _one_mount(
    root_dir: Path,
    pod: Pod,
    container: Container,
    vm: VolumeMount,
    field: str,
    volumes: Mapping[str, Volume],
    env: Mapping[str, str],
    index: int,
    bind_sub_paths: bool,
    on_disk: bool,
) -> Mount:
    volume = volumes.get(vm.name)
    if volume is None:
        raise ValidationError.single(
            f"{field}.name", f'volume "{vm.name}" not found in spec.volumes'
        )
    if not vm.mount_path.startswith("/"):
        raise ValidationError.single(
            f"{field}.mountPath", f'"{vm.mount_path}" must be an absolute path'
        )
    try:
        plugin = plugins.plugin_name(volume)
    except PodSyncError as exc:
        raise ValidationError.single(f"{field}.name", exc.message) from None
    host = plugins.volume_path(root_dir, pod, volume)
    sub = vm.sub_path
    if vm.sub_path_expr:
        sub = expand_sub_path_expr(vm.sub_path_expr, env, f"{field}.subPathExpr")
    if vm.mount_propagation not in _PROPAGATION:
        raise ValidationError.single(
            f"{field}.mountPropagation",
            f'unsupported value "{vm.mount_propagation}": supported values: '
            '"Bidirectional", "HostToContainer", "None"',
        )
    propagation = _PROPAGATION[vm.mount_propagation]
    privileged = bool(container.security_context and container.security_context.privileged)
    if propagation is MountPropagation.BIDIRECTIONAL and not privileged:
        raise ValidationError.single(
            f"{field}.mountPropagation",
            "Bidirectional mount propagation is available only to privileged containers",
        )
    # The sub path is resolved last: a bind mount is made only for a volumeMount
    # that is otherwise valid.
    if sub and bind_sub_paths:
        host = bind_sub_path(
            host,
            sub,
            sub_path_target(root_dir, pod, vm.name, container.name, index),
            field=f"{field}.subPath",
        )
    elif sub and on_disk:
        host = resolve_sub_path(host, sub, field=f"{field}.subPath")
    elif sub:
        validate_sub_path(sub, f"{field}.subPath")
        host = Path(os.path.normpath(host / sub))
    # As the kubelet: API data volumes are always mounted read-only.
    readonly = vm.read_only or plugin in plugins.REFRESHED_PLUGINS
    return Mount(
        container_path=vm.mount_path,
        host_path=str(host),
        readonly=readonly,
        propagation=propagation,
    )


def container_mounts(
    root_dir: Path,
    pod: Pod,
    container: Container,
    env: Mapping[str, str] | None = None,
    *,
    bind_sub_paths: bool = False,
    on_disk: bool = True,
) -> list[Mount]:
    """The runtime mounts for ``container``'s volumeMounts (see
    :meth:`ReconcilingVolumeManager.container_mounts`). Blocks briefly on the
    ``subPath`` walk (and bind mount).

    Args:
        root_dir: The agent's state directory.
        pod: The pod.
        container: One of its containers (or init containers).
        env: The container's resolved environment, for ``subPathExpr``.
        bind_sub_paths: Bind-mount each checked ``subPath`` under
            ``pods/<uid>/volume-subpaths`` and give the runtime that path (see
            :func:`~kubelet_kit.volume.subpath.bind_sub_path`), instead of the
            checked path in the volume, which a workload could swap for a symlink
            before the runtime mounts it. Needs CAP_SYS_ADMIN (without it the
            checked path is given).
        on_disk: Resolve each ``subPath`` on disk (creating what is missing).
            False checks only its text and joins it to the volume's path,
            touching no file: what a double mounting nothing gives.

    Raises:
        ValidationError: naming the volumeMount's field.
    """
    volumes = {v.name: v for v in pod.spec.volumes}
    if env is None:
        env = {e.name: e.value for e in container.env if e.value is not None}
    base = _container_field(pod, container)
    errors: list[FieldError] = []
    mounts: list[Mount] = []
    for i, vm in enumerate(container.volume_mounts):
        try:
            mounts.append(
                _one_mount(
                    root_dir,
                    pod,
                    container,
                    vm,
                    f"{base}.volumeMounts[{i}]",
                    volumes,
                    env,
                    i,
                    bind_sub_paths and on_disk,
                    on_disk,
                )
            )
        except ValidationError as exc:
            errors.extend(exc.errors)
    if errors:
        raise ValidationError(errors)
    return mounts


class ReconcilingVolumeManager:
    """The kubelet's volume manager (see the module doc).

    Args:
        root_dir: The agent's state directory; volumes live under
            ``root_dir/pods/<uid>/volumes``.
        config_source: Where configMap and secret data come from (None: every
            lookup misses, so only ``optional`` sources mount).
        clock: Time for the loop, back-off, refreshes and waits.
        reconcile_period: Seconds between reconciles (the kubelet's 100 ms).
        refresh_period: Seconds between rewrites of configMap, secret, downwardAPI
            and projected volumes (how soon a changed source shows in a pod).
        orphan_grace_period: Seconds after start before volumes found on disk that
            no pod claimed are deleted.
        allow_secrets_on_disk: When no tmpfs can be mounted, put secret, projected
            and memory-backed emptyDir volumes on disk instead of failing.
        may_mount: Whether tmpfs mounts may be made; default: whether this
            process holds CAP_SYS_ADMIN.
        node_allocatable: The node's allocatable resources (downward API defaults
            and tmpfs sizes).
        metrics: Where to record metrics; default a :class:`VolumeMetrics` in
            ``registry`` (or a fresh registry).
        registry: Registry for the default metrics.
        offload: How blocking file work is run: ``await offload(fn, *args)``;
            default :func:`asyncio.to_thread`. A test may pass a runner that calls
            ``fn`` inline, making every pass deterministic on a FakeClock.
    """

    def __init__(
        self,
        root_dir: str | os.PathLike[str],
        *,
        config_source: ConfigSource | None = None,
        clock: Clock | None = None,
        reconcile_period: float = 0.1,
        refresh_period: float = 60.0,
        orphan_grace_period: float = 30.0,
        allow_secrets_on_disk: bool = False,
        may_mount: bool | None = None,
        node_allocatable: Mapping[str, Quantity] | None = None,
        metrics: VolumeMetrics | None = None,
        registry: CollectorRegistry | None = None,
        offload: Callable[..., Awaitable[Any]] | None = None,
    ) -> None:
        self.root_dir = Path(root_dir).absolute()
        self.clock: Clock = clock if clock is not None else RealClock()
        self.reconcile_period = reconcile_period
        self.refresh_period = refresh_period
        self.orphan_grace_period = orphan_grace_period
        self.metrics = metrics if metrics is not None else VolumeMetrics(registry)
        self._offload: Callable[..., Awaitable[Any]] = offload or asyncio.to_thread
        self.env = plugins.PluginEnv(
            config_source=config_source,
            may_mount=mounter.can_mount() if may_mount is None else may_mount,
            allow_secrets_on_disk=allow_secrets_on_disk,
            node_allocatable=dict(node_allocatable or {}),
            now=self.clock.now,
        )
        self.desired = DesiredStateOfWorld()
        self.actual = ActualStateOfWorld()
        #: Last set-up error per (pod uid, volume name).
        self.errors: dict[tuple[str, str], str] = {}
        self._retry: dict[tuple[str, str], tuple[float, float]] = {}
        self._wake = asyncio.Event()
        self._pass_lock = asyncio.Lock()
        self._round = asyncio.Event()
        self._stopped = asyncio.Event()
        self._started_at: float | None = None
        self._pending_dirs: set[str] = set()

    # ------------------------------------------------------------ protocol

    async def __aenter__(self) -> ReconcilingVolumeManager:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def run(self) -> None:
        """Reconstruct what is on disk, then reconcile until :meth:`stop`.

        Raises only on a fatal error (the root directory cannot be made).
        """
        self._stopped.clear()
        await self._offload(self.root_dir.joinpath("pods").mkdir, parents=True, exist_ok=True)
        self._started_at = self.clock.monotonic()
        await self._reconstruct()
        while not self._stopped.is_set():
            self._wake.clear()
            await self.reconcile()
            if self._stopped.is_set():
                break
            with contextlib.suppress(TimeoutError):
                await wait_for(self.clock, self._wake.wait(), self._next_delay())

    async def stop(self) -> None:
        """Stop :meth:`run`. Idempotent; mounted volumes stay."""
        self._stopped.set()
        self._wake.set()

    def add_pod(self, pod: Pod) -> None:
        """Want ``pod``'s volumes set up (or refreshed, if the pod changed).
        Never blocks; idempotent."""
        if self.desired.pods.get(pod.uid) is not pod:
            self.desired.pods[pod.uid] = pod
            self._wake.set()

    def remove_pod(self, pod: Pod) -> None:
        """No longer want ``pod``'s volumes. Never blocks; idempotent."""
        self.desired.pods.pop(pod.uid, None)
        self._pending_dirs.add(pod.uid)
        for key in [k for k in self._retry if k[0] == pod.uid]:
            del self._retry[key]
        self._wake.set()

    async def wait_for_mounts(self, pod: Pod, timeout: float) -> None:
        """Block until every volume of ``pod`` is set up (the pod must have been
        added, and :meth:`run` be running).

        Raises:
            TimeoutError: after ``timeout`` seconds, naming the volumes still
                missing and, for each that failed, the last error.
        """
        deadline = self.clock.monotonic() + timeout
        self._wake.set()  # a pass now, not at the next period
        while True:
            missing = self._unmounted(pod)
            if not missing:
                return
            remaining = deadline - self.clock.monotonic()
            if remaining <= 0:
                raise TimeoutError(self._timeout_message(pod, missing))
            with contextlib.suppress(TimeoutError):
                await wait_for(self.clock, self._round.wait(), remaining)

    async def wait_for_unmount(self, pod: Pod, timeout: float) -> None:
        """Block until every volume of a removed pod is torn down and its volume
        directories are gone.

        Raises:
            TimeoutError: after ``timeout`` seconds, naming what remains.
        """
        deadline = self.clock.monotonic() + timeout
        self._wake.set()
        while True:
            left = sorted(v.name for v in self.actual.pod_volumes(pod.uid))
            if not left and pod.uid not in self._pending_dirs:
                return
            remaining = deadline - self.clock.monotonic()
            if remaining <= 0:
                what = f"volumes=[{' '.join(left)}]" if left else "its volume directories"
                raise TimeoutError(
                    f"pod {pod.name}_{pod.namespace}({pod.uid}): {what} still mounted: "
                    "timed out waiting for the condition"
                )
            with contextlib.suppress(TimeoutError):
                await wait_for(self.clock, self._round.wait(), remaining)

    def container_mounts(
        self, pod: Pod, container: Container, env: Mapping[str, str] | None = None
    ) -> list[Mount]:
        """The runtime mounts for ``container``'s volumeMounts.

        ``subPath`` (or ``subPathExpr``, expanded against ``env``, the container's
        resolved environment, or without it the literal values of
        ``container.env``) is resolved safely inside the volume and created when
        missing; configMap, secret, downwardAPI and projected volumes are always
        read-only; ``mountPropagation`` is recorded (Bidirectional only for
        privileged containers). Blocks briefly on the ``subPath`` walk.

        When the manager may mount, each ``subPath`` is bind-mounted from the
        descriptor that was checked onto
        ``<root_dir>/pods/<uid>/volume-subpaths/<volume>/<container>/<index>``
        and the runtime is given that path, so a workload that swaps a component
        for a symlink after the check cannot redirect the mount; a restarted
        container reuses its mount. They are unmounted when the volume is torn
        down or the pod's directories are removed.

        Raises:
            ValidationError: naming each unusable volumeMount's field.
        """
        return container_mounts(
            self.root_dir, pod, container, env, bind_sub_paths=self.env.may_mount
        )

    # ------------------------------------------------------------ reconciler

    def _next_delay(self) -> float:
        delay = self.reconcile_period
        now = self.clock.monotonic()
        for at, _ in self._retry.values():
            delay = min(delay, max(0.0, at - now))
        return max(delay, 0.0)

    def _unmounted(self, pod: Pod) -> list[str]:
        return [v.name for v in pod.spec.volumes if (pod.uid, v.name) not in self.actual.volumes]

    def _timeout_message(self, pod: Pod, missing: list[str]) -> str:
        failed = [n for n in missing if (pod.uid, n) in self.errors]
        text = (
            f"unmounted volumes=[{' '.join(missing)}], failed to process volumes="
            f"[{' '.join(failed)}]: timed out waiting for the condition"
        )
        for name in failed:
            text += f"; {self.errors[(pod.uid, name)]}"
        return text

    async def reconcile(self) -> None:
        """One reconcile pass: tear down, set up, refresh; then wake waiters.

        Never raises for a volume's failure (it is recorded and retried). Passes
        never overlap: a call made during one waits for it.
        """
        async with self._pass_lock:
            try:
                await self._unmount_unwanted()
                await self._mount_wanted()
                await self._clean_pod_dirs()
            finally:
                self.metrics.set_totals(self.desired.plugin_counts(), self.actual.plugin_counts())
                done, self._round = self._round, asyncio.Event()
                done.set()

    async def _unmount_unwanted(self) -> None:
        grace_over = (
            self._started_at is not None
            and self.clock.monotonic() >= self._started_at + self.orphan_grace_period
        )
        for key, mv in list(self.actual.volumes.items()):
            pod = self.desired.pods.get(mv.pod_uid)
            wanted = (
                next((v for v in pod.spec.volumes if v.name == mv.name), None)
                if (pod is not None)
                else None
            )
            # A volume whose source kind changed (same name) is made anew.
            if wanted is not None and _safe_plugin(wanted) == mv.plugin:
                continue
            if mv.reconstructed and pod is None and not grace_over:
                continue
            started = self.clock.monotonic()
            try:
                # Sub path mounts first (hostPath ones too): they hold the
                # volume's files, and the kubelet removes them before the volume.
                await self._offload(
                    clean_sub_paths,
                    pod_dir(self.root_dir, mv.pod_uid) / "volume-subpaths",
                    mv.name,
                )
                if mv.plugin != plugins.HOST_PATH:
                    await self._offload(plugins.tear_down, mv.path)
            except OSError as exc:
                self.metrics.observe_operation(
                    mv.plugin, OPERATION_UNMOUNT, False, self.clock.monotonic() - started
                )
                self.errors[key] = f'volume "{mv.name}": unmount failed: {exc}'
                log.warning("pod %s: %s", mv.pod_uid, self.errors[key])
                continue
            self.metrics.observe_operation(
                mv.plugin, OPERATION_UNMOUNT, True, self.clock.monotonic() - started
            )
            del self.actual.volumes[key]
            self.errors.pop(key, None)
            if mv.pod_uid not in self.desired.pods:
                self._pending_dirs.add(mv.pod_uid)

    async def _mount_wanted(self) -> None:
        now = self.clock.monotonic()
        wanted = {(pod.uid, vol.name) for pod, vol in self.desired.volumes()}
        for key in [k for k in self._retry if k not in wanted]:
            # A volume dropped from its pod: no retry left behind to wake the loop.
            del self._retry[key]
            self.errors.pop(key, None)
        for pod, volume in self.desired.volumes():
            key = (pod.uid, volume.name)
            mv = self.actual.volumes.get(key)
            if mv is not None:
                refresh = mv.plugin in plugins.REFRESHED_PLUGINS and (
                    mv.pod is not pod or now >= mv.refreshed_at + self.refresh_period
                )
                if not refresh:
                    if mv.pod is not pod:
                        self.actual.volumes[key] = attrs.evolve(mv, pod=pod, volume=volume)
                    continue
            retry = self._retry.get(key)
            if retry is not None and now < retry[0]:
                continue
            started = self.clock.monotonic()
            try:
                plugin = plugins.plugin_name(volume)
                path = await self._offload(plugins.set_up, pod, volume, self.root_dir, self.env)
            except Exception as exc:
                # A plugin's or a config source's failure is this volume's problem
                # only: record it, retry later, keep reconciling the others.
                if isinstance(exc, PodSyncError):
                    message = exc.message
                else:
                    message = f'volume "{volume.name}": {type(exc).__name__}: {exc}'
                delay = BACKOFF_INITIAL if retry is None else min(retry[1] * 2, BACKOFF_MAX)
                self._retry[key] = (self.clock.monotonic() + delay, delay)
                if self.errors.get(key) != message:
                    log.warning("pod %s: %s", pod.uid, message)
                self.errors[key] = message
                self.metrics.observe_operation(
                    mv.plugin if mv else _safe_plugin(volume),
                    OPERATION_MOUNT,
                    False,
                    self.clock.monotonic() - started,
                )
                continue
            if self.desired.pods.get(pod.uid) is not pod:
                # Removed or replaced while the thread worked: the next pass decides.
                if pod.uid not in self.desired.pods:
                    self.actual.volumes[key] = MountedVolume(
                        pod.uid, volume.name, plugin, path, pod, volume, self.clock.monotonic()
                    )
                continue
            self._retry.pop(key, None)
            self.errors.pop(key, None)
            if mv is None:
                self.metrics.observe_operation(
                    plugin, OPERATION_MOUNT, True, self.clock.monotonic() - started
                )
            self.actual.volumes[key] = MountedVolume(
                pod.uid, volume.name, plugin, path, pod, volume, self.clock.monotonic()
            )

    async def _clean_pod_dirs(self) -> None:
        for uid in list(self._pending_dirs):
            if uid in self.desired.pods:
                self._pending_dirs.discard(uid)
                continue
            if self.actual.pod_volumes(uid):
                continue
            try:
                await self._offload(self._remove_pod_dirs, uid)
            except OSError as exc:
                log.warning("pod %s: cannot remove its volume directories: %s", uid, exc)
                continue
            self._pending_dirs.discard(uid)

    def _remove_pod_dirs(self, uid: str) -> None:
        base = pod_dir(self.root_dir, uid)
        for sub in ("volumes", "volume-subpaths"):
            target = base / sub
            if not target.exists():
                continue
            if sub == "volume-subpaths":
                # Every volume is torn down by now, each with its own sub paths;
                # this catches those of volumes no record was left for.
                clean_sub_paths(target)
                continue
            if mounter.mount_points_under(target):
                raise OSError(f"{target}: something is still mounted beneath it")
            # Only empty plugin directories are left once every volume is torn down;
            # anything else would be an unknown volume, kept for the operator.
            for dirpath, _dirnames, filenames in os.walk(target, topdown=False):
                if filenames:
                    raise OSError(f"{dirpath}: not empty")
                os.rmdir(dirpath)
        with contextlib.suppress(OSError):
            # Only if nothing else is there: the pod sync removes its own files
            # (the hosts and termination-message files) and then the directory.
            base.rmdir()

    async def _reconstruct(self) -> None:
        found, uids = await self._offload(self._scan_disk)
        self._pending_dirs.update(uids)
        for mv in found:
            key = (mv.pod_uid, mv.name)
            if key not in self.actual.volumes:
                self.actual.volumes[key] = mv
                log.info("reconstructed volume %s of pod %s at %s", mv.name, mv.pod_uid, mv.path)

    def _scan_disk(self) -> tuple[list[MountedVolume], list[str]]:
        found: list[MountedVolume] = []
        uids: list[str] = []
        pods_dir = self.root_dir / "pods"
        if not pods_dir.is_dir():
            return found, uids
        for entry in sorted(pods_dir.iterdir()):
            volumes = entry / "volumes"
            if not volumes.is_dir():
                if (entry / "volume-subpaths").is_dir():
                    uids.append(entry.name)  # sub path mounts left to clean
                continue
            for plugin_dir in sorted(volumes.iterdir()):
                plugin = plugin_dir.name.replace("~", "/")
                if not plugin_dir.is_dir():
                    continue
                for vol in sorted(plugin_dir.iterdir()):
                    found.append(MountedVolume(entry.name, vol.name, plugin, vol))
            uids.append(entry.name)
        return found, uids


def _safe_plugin(volume: Volume) -> str:
    try:
        return plugins.plugin_name(volume)
    except PodSyncError:
        return "N/A"
