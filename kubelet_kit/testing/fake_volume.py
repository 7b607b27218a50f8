"""FakeVolumeManager: a pod's volumes "mounted" in memory, on the clock.

A :class:`~kubelet_kit.volume.VolumeManager` for tests of pod sync and of
anything that waits on volumes, touching no file::

    volumes = FakeVolumeManager(clock=clock, mount_delay=2)
    volumes.fail_volume("config")            # its ConfigMap "is missing"
    volumes.add_pod(pod)
    await volumes.wait_for_mounts(pod, 5)    # TimeoutError: unmounted volumes=[config], ...

As the reference :class:`~kubelet_kit.volume.ReconcilingVolumeManager`, volumes
are set up only while :meth:`~FakeVolumeManager.run` runs: each volume of an
added pod is mounted ``mount_delay`` clock seconds after it was wanted (or after
``run`` started, if later), unless the test made it fail; a removed pod's
volumes go ``unmount_delay`` seconds after :meth:`~FakeVolumeManager.remove_pod`.
Waits time out on the clock with the reference's messages (``unmounted
volumes=[...], failed to process volumes=[...]: timed out waiting for the
condition`` and the failing volumes' errors, which are the reference's too:
``configmap "ns/name" not found``...). :meth:`~FakeVolumeManager.container_mounts`
gives the Mounts the reference gives (the same paths under ``root_dir``,
read-only API-data volumes, ``subPath`` joined after the same checks) without
touching the disk.

Every call is logged (``calls``, ``calls_to``); ``inject_error(method, exc)``
makes the next call of a method raise.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from kubelet_kit.api import Container, Pod, Volume
from kubelet_kit.clock import Clock, RealClock, wait_for
from kubelet_kit.container import Mount
from kubelet_kit.errors import PodSyncError
from kubelet_kit.testing._fake_log import FakeCallLog
from kubelet_kit.volume import plugins
from kubelet_kit.volume.reconciler import container_mounts

__all__ = ["FakeVolumeManager"]

_Key = tuple[str, str]


def _failure_message(pod: Pod, volume: Volume) -> str:
    """What the reference's plugin says when the volume's source is missing."""
    if volume.config_map is not None:
        return f'configmap "{pod.namespace}/{volume.config_map.name}" not found'
    if volume.secret is not None:
        return f'secret "{pod.namespace}/{volume.secret.secret_name}" not found'
    if volume.host_path is not None:
        return f"hostPath {volume.host_path.path} doesn't exist"
    try:
        plugins.plugin_name(volume)
    except PodSyncError as exc:
        return exc.message
    return f'volume "{volume.name}": mount failed'


class FakeVolumeManager(FakeCallLog):
    """An in-memory :class:`~kubelet_kit.volume.VolumeManager` (see the module docstring).

    Args:
        clock: Time for delays and waits (default: the real clock).
        root_dir: The agent's state directory the mount paths are under (never
            touched).
        mount_delay: Clock seconds from wanting a volume to having it mounted.
        unmount_delay: Clock seconds from removing a pod to its volumes being gone.
    """

    _PARAMS: ClassVar[Mapping[str, tuple[str, ...]]] = {
        "run": (),
        "stop": (),
        "add_pod": ("pod",),
        "remove_pod": ("pod",),
        "wait_for_mounts": ("pod", "timeout"),
        "wait_for_unmount": ("pod", "timeout"),
        "container_mounts": ("pod", "container", "env"),
    }
    _METHODS: ClassVar[frozenset[str]] = frozenset(_PARAMS)

    def __init__(
        self,
        *,
        clock: Clock | None = None,
        root_dir: str | os.PathLike[str] = "/var/lib/kubelet",
        mount_delay: float = 0.0,
        unmount_delay: float = 0.0,
    ) -> None:
        super().__init__()
        self.clock: Clock = clock if clock is not None else RealClock()
        self.root_dir = Path(root_dir).absolute()
        self.mount_delay = mount_delay
        self.unmount_delay = unmount_delay
        #: The pods whose volumes are wanted, by uid.
        self.pods: dict[str, Pod] = {}
        #: The last error of each failing volume, by (pod uid, volume name).
        self.errors: dict[_Key, str] = {}
        self._wanted: dict[_Key, float] = {}  # not yet mounted: since when wanted
        self._mounted: dict[_Key, float] = {}  # mounted: since when
        self._leaving: dict[_Key, float] = {}  # mounted, no longer wanted: since when
        self._failures: dict[tuple[str | None, str], str | None] = {}
        self._running_since: float | None = None
        self._stopped = asyncio.Event()
        self._changed = asyncio.Event()

    def _record(self, method: str, *args: Any) -> None:
        """Log a call of ``method`` (arguments also by parameter name) and raise
        the fault injected for it, if one is due."""
        self._enter(method, args, dict(zip(self._PARAMS[method], args, strict=True)))

    # ------------------------------------------------------------------ test controls

    def fail_volume(
        self, name: str, message: str | None = None, *, pod_uid: str | None = None
    ) -> None:
        """Make volume ``name`` (of every pod, or of ``pod_uid`` only) fail to mount.

        Args:
            name: The volume's name in the pod.
            message: The error :meth:`wait_for_mounts` reports; default the
                reference's for a missing source (``configmap "ns/name" not
                found``, ``secret "ns/name" not found``, ``hostPath /p doesn't
                exist``, else ``volume "name": mount failed``).
            pod_uid: Only this pod's volume fails.
        """
        self._failures[(pod_uid, name)] = message
        self._changed.set()

    def clear_failure(self, name: str, *, pod_uid: str | None = None) -> None:
        """Let volume ``name`` mount again (it mounts ``mount_delay`` after it was
        first wanted, so at once if that has passed)."""
        self._failures.pop((pod_uid, name), None)
        self._changed.set()

    def mounted(self, pod: Pod | str) -> list[str]:
        """Names of the pod's volumes mounted now."""
        self._update()
        uid = pod if isinstance(pod, str) else pod.uid
        return [name for (u, name) in self._mounted if u == uid]

    @property
    def running(self) -> bool:
        """Whether :meth:`run` is running."""
        return self._running_since is not None

    def volume_path(self, pod: Pod, volume_name: str) -> Path:
        """Where the volume would be on the host (the reference's layout).

        Raises:
            KeyError: The pod has no such volume.
        """
        for volume in pod.spec.volumes:
            if volume.name == volume_name:
                return plugins.volume_path(self.root_dir, pod, volume)
        raise KeyError(volume_name)

    # ------------------------------------------------------------------ lifecycle

    async def run(self) -> None:
        """Mount and unmount (on the clock) until :meth:`stop`."""
        self._record("run")
        self._stopped.clear()
        self._running_since = self.clock.monotonic()
        self._changed.set()
        try:
            await self._stopped.wait()
        finally:
            self._update()
            self._running_since = None

    async def stop(self) -> None:
        """Stop :meth:`run`. Idempotent; mounted volumes stay."""
        self._record("stop")
        self._stopped.set()

    async def __aenter__(self) -> FakeVolumeManager:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # ------------------------------------------------------------------ desired state

    def add_pod(self, pod: Pod) -> None:
        """Want ``pod``'s volumes mounted. Never blocks; idempotent. A volume the
        pod no longer has is unmounted."""
        self._record("add_pod", pod)
        now = self.clock.monotonic()
        self.pods[pod.uid] = pod
        names = {v.name for v in pod.spec.volumes}
        for key in [k for k in self._wanted if k[0] == pod.uid and k[1] not in names]:
            del self._wanted[key]
            self.errors.pop(key, None)
        for key in [k for k in self._mounted if k[0] == pod.uid and k[1] not in names]:
            self._leaving.setdefault(key, now)
        for name in names:
            key = (pod.uid, name)
            if key in self._mounted:
                self._leaving.pop(key, None)
            else:
                self._wanted.setdefault(key, now)
        self._changed.set()

    def remove_pod(self, pod: Pod) -> None:
        """No longer want ``pod``'s volumes. Never blocks; idempotent."""
        self._record("remove_pod", pod)
        now = self.clock.monotonic()
        self.pods.pop(pod.uid, None)
        for key in [k for k in self._wanted if k[0] == pod.uid]:
            del self._wanted[key]
            self.errors.pop(key, None)
        for key in [k for k in self._mounted if k[0] == pod.uid]:
            self._leaving.setdefault(key, now)
        self._changed.set()

    # ------------------------------------------------------------------ the clock's work

    def _failure(self, key: _Key) -> tuple[bool, str | None]:
        for failure in ((key[0], key[1]), (None, key[1])):
            if failure in self._failures:
                return True, self._failures[failure]
        return False, None

    def _due(self, since: float, delay: float) -> float:
        assert self._running_since is not None
        return max(since, self._running_since) + delay

    def _update(self) -> None:
        """Bring the state to the clock's present (only while running)."""
        if self._running_since is None:
            return
        now = self.clock.monotonic()
        for key, since in list(self._wanted.items()):
            failing, message = self._failure(key)
            if failing:
                pod = self.pods[key[0]]
                volume = next(v for v in pod.spec.volumes if v.name == key[1])
                self.errors[key] = message or _failure_message(pod, volume)
                continue
            if now >= self._due(since, self.mount_delay):
                del self._wanted[key]
                self.errors.pop(key, None)
                self._mounted[key] = now
        for key, since in list(self._leaving.items()):
            if now >= self._due(since, self.unmount_delay):
                del self._leaving[key]
                self._mounted.pop(key, None)

    def _next_change(self) -> float | None:
        if self._running_since is None:
            return None
        due = [
            self._due(since, self.mount_delay)
            for key, since in self._wanted.items()
            if not self._failure(key)[0]
        ]
        due += [self._due(since, self.unmount_delay) for since in self._leaving.values()]
        return min(due, default=None)

    async def _wait_change(self, deadline: float) -> None:
        now = self.clock.monotonic()
        nxt = self._next_change()
        delay = deadline - now if nxt is None else min(deadline, nxt) - now
        with contextlib.suppress(TimeoutError):
            await wait_for(self.clock, self._changed.wait(), max(delay, 0.0))

    # ------------------------------------------------------------------ waits

    async def wait_for_mounts(self, pod: Pod, timeout: float) -> None:
        """Block until every volume of ``pod`` is mounted (the pod must have been
        added, and :meth:`run` be running).

        Raises:
            TimeoutError: after ``timeout`` clock seconds, naming the volumes still
                unmounted and, for each that failed, its error (the reference's
                message).
        """
        self._record("wait_for_mounts", pod, timeout)
        deadline = self.clock.monotonic() + timeout
        while True:
            self._changed.clear()
            self._update()
            missing = [v.name for v in pod.spec.volumes if (pod.uid, v.name) not in self._mounted]
            if not missing:
                return
            if self.clock.monotonic() >= deadline:
                failed = [n for n in missing if (pod.uid, n) in self.errors]
                text = (
                    f"unmounted volumes=[{' '.join(missing)}], failed to process volumes="
                    f"[{' '.join(failed)}]: timed out waiting for the condition"
                )
                for name in failed:
                    text += f"; {self.errors[(pod.uid, name)]}"
                raise TimeoutError(text)
            await self._wait_change(deadline)

    async def wait_for_unmount(self, pod: Pod, timeout: float) -> None:
        """Block until every volume of a removed pod is unmounted.

        Raises:
            TimeoutError: after ``timeout`` clock seconds, naming what remains (the
                reference's message).
        """
        self._record("wait_for_unmount", pod, timeout)
        deadline = self.clock.monotonic() + timeout
        while True:
            self._changed.clear()
            self._update()
            left = sorted(name for (uid, name) in self._mounted if uid == pod.uid)
            if not left:
                return
            if self.clock.monotonic() >= deadline:
                raise TimeoutError(
                    f"pod {pod.name}_{pod.namespace}({pod.uid}): volumes=[{' '.join(left)}] "
                    "still mounted: timed out waiting for the condition"
                )
            await self._wait_change(deadline)

    def container_mounts(
        self, pod: Pod, container: Container, env: Mapping[str, str] | None = None
    ) -> list[Mount]:
        """The Mounts the reference gives for ``container``'s volumeMounts, without
        touching the disk (``subPath`` is checked as text and joined).

        Raises:
            ValidationError: naming each unusable volumeMount's field, as the
                reference does.
        """
        self._record("container_mounts", pod, container, env)
        return container_mounts(self.root_dir, pod, container, env, on_disk=False)
