"""The conformance kit of the :class:`~kubelet_kit.volume.VolumeManager` interface.

What the agent relies on from a volume manager, checked with the kubelet's
semantics: ``run`` returns once stopped and ``stop`` is idempotent;
``wait_for_mounts`` returns once an added pod's volumes are mounted (at once for
a pod without volumes) and otherwise times out on the clock with the kubelet's
error naming the unmounted volumes (``unmounted volumes=[...]``, "timed out
waiting for the condition"); ``add_pod`` is idempotent and ``remove_pod`` then
``wait_for_unmount`` unmounts; ``container_mounts`` maps a container's
volumeMounts to Mounts in order (``readOnly``, configMap and downwardAPI
volumes always read-only, ``subPath`` inside the volume), names the field of an
unusable volumeMount, and answers for a pod it was never given.

Time goes through the check's :class:`~kubelet_kit.testing.FakeClock`
(:func:`kit_clock`), which the checks move in small steps: an implementation
whose file work runs in threads should be given a way to run it inline (the
reference's ``offload``), or its waits may time out before its threads finish.
Each check has a temporary directory of its own for the implementation's state
(:func:`kit_root_dir`), removed afterwards (after unmounting anything left
mounted below it)::

    from kubelet_kit.testing.volume_kit import VolumeManagerConformance, kit_clock, kit_root_dir

    class TestMyVolumes(VolumeManagerConformance):
        def make(self, ctx):            # a fresh manager per check
            return MyVolumeManager(kit_root_dir(ctx), clock=kit_clock(ctx))

or ``await check_volume(factory)``.

The pods use an emptyDir volume ``scratch``, an optional configMap ``settings``
(of ConfigMap ``kit-settings``, which need not exist) and a downwardAPI volume
``info``; the timeout check adds ``broken``, a configMap volume of the ConfigMap
``kit-missing``, which the implementation must fail to mount (the reference
does, having no such ConfigMap; a fake must be told). Options (``ctx.options``):

* ``mounts`` (default True): False claims the implementation mounts nothing
  (every wait returns at once and ``container_mounts`` is always empty); the
  checks of mounting are then skipped, after checking the claim.
* ``api_volumes`` (default True): False leaves the configMap and downwardAPI
  volumes out of the pods.
* ``sub_path`` (default True): False leaves ``subPath`` out.
* ``failing_volume`` (default True): False skips the timeout check.
* ``mount_timeout`` (default 30): clock seconds a mount may take.
* ``clock``, ``root_dir``: set by :func:`kit_clock` and :func:`kit_root_dir`
  (given, they are used instead).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import re
import shutil
import tempfile
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final, TypeVar

from kubelet_kit.api import Pod, load_pod
from kubelet_kit.container import MountPropagation
from kubelet_kit.errors import ValidationError
from kubelet_kit.testing.clock import FakeClock
from kubelet_kit.testing.conformance import ConformanceReport
from kubelet_kit.testing.kit import KitCheck, KitContext, kit_test_class, run_kit
from kubelet_kit.volume.interfaces import VolumeManager

__all__ = [
    "CHECKS",
    "VolumeManagerConformance",
    "check_volume",
    "kit_clock",
    "kit_root_dir",
]

T = TypeVar("T")
Ctx = KitContext[VolumeManager]

#: Clock seconds per step while the kit waits on the implementation.
_STEP: Final = 0.25
_UID_COUNTER = itertools.count(1)

SCRATCH: Final = {"name": "scratch", "emptyDir": {}}
SETTINGS: Final = {"name": "settings", "configMap": {"name": "kit-settings", "optional": True}}
INFO: Final = {
    "name": "info",
    "downwardAPI": {"items": [{"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}}]},
}
BROKEN: Final = {"name": "broken", "configMap": {"name": "kit-missing"}}


# ------------------------------------------------------------------ per-check parts


def kit_clock(ctx: KitContext[Any]) -> FakeClock:
    """The check's FakeClock: ``ctx.options["clock"]``, made on first use.

    A factory hands it to the implementation; the checks move it.
    """
    clock = ctx.options.get("clock")
    if clock is None:
        clock = FakeClock()
        ctx.options["clock"] = clock  # type: ignore[index]
    return clock


def kit_root_dir(ctx: KitContext[Any]) -> Path:
    """The check's state directory: ``ctx.options["root_dir"]``, or a temporary
    directory made on first use and removed after the check (anything mounted
    below it unmounted first)."""
    root = ctx.options.get("root_dir")
    if root is None:
        made = Path(tempfile.mkdtemp(prefix="kubelet-kit-volumes-"))
        ctx.options["root_dir"] = made  # type: ignore[index]
        ctx.defer(lambda: _remove_tree(made))
        return made
    return Path(root)


async def _remove_tree(root: Path) -> None:
    from kubelet_kit.volume import mounter

    def work() -> None:
        with contextlib.suppress(OSError):
            if mounter.mount_points_under(root):
                mounter.unmount_all_under(root)
        shutil.rmtree(root, ignore_errors=True)

    await asyncio.to_thread(work)


# ------------------------------------------------------------------ helpers


def _opt(ctx: Ctx, name: str, default: Any) -> Any:
    return ctx.options.get(name, default)


def _pod(
    ctx: Ctx,
    *,
    volumes: Sequence[Mapping[str, Any]] | None = None,
    mounts: Sequence[Mapping[str, Any]] | None = None,
    valid: bool = True,
) -> Pod:
    """A pod with the kit's volumes (or ``volumes``) and a fresh uid; loaded with
    the API's defaults, or as it is when not ``valid`` (the API would refuse it,
    but a container manager still gets such pods from sources it trusts)."""
    if volumes is None:
        volumes = [SCRATCH, SETTINGS, INFO] if _opt(ctx, "api_volumes", True) else [SCRATCH]
    n = next(_UID_COUNTER)
    data: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"kit-{n}",
            "namespace": "kit",
            "uid": f"f00dcafe-0000-4000-8000-{n:012d}",
            "labels": {"app": "kit"},
        },
        "spec": {
            "volumes": list(volumes),
            "containers": [
                {"name": "main", "image": "busybox", "volumeMounts": list(mounts or [])}
            ],
        },
    }
    return load_pod(data) if valid else Pod.from_dict(data)


async def _drive(
    ctx: Ctx, aw: Awaitable[T], *, limit: float, what: str, may_time_out: bool = False
) -> T:
    """Await ``aw`` while moving the kit's clock, failing after ``limit`` clock
    seconds, or when ``aw`` raises TimeoutError (unless ``may_time_out``)."""
    clock = kit_clock(ctx)
    task = asyncio.ensure_future(aw)
    start = clock.monotonic()
    try:
        while True:
            await clock.settle()
            if task.done():
                exc = task.exception()
                if isinstance(exc, TimeoutError) and not may_time_out:
                    ctx.fail(f"{what} timed out: {exc}")
                return task.result()
            elapsed = clock.monotonic() - start
            if elapsed >= limit:
                ctx.fail(f"{what}: still waiting after {elapsed:g} clock seconds")
            await clock.run_for(min(_STEP, limit - elapsed))
            if not task.done():
                # Real time too, for work the implementation does in threads.
                await asyncio.sleep(0.001)
    finally:
        if not task.done():
            task.cancel()
            with contextlib.suppress(BaseException):
                await task


async def _advance(ctx: Ctx, seconds: float, *, until: asyncio.Future[Any]) -> None:
    """Move the kit's clock ``seconds`` forward in steps, stopping early once
    ``until`` is done."""
    clock = kit_clock(ctx)
    end = clock.monotonic() + seconds
    while not until.done() and clock.monotonic() < end:
        await clock.run_for(min(_STEP, end - clock.monotonic()))
        if not until.done():
            await asyncio.sleep(0.001)


async def _run(ctx: Ctx) -> VolumeManager:
    """Start the implementation's ``run()``; stopped after the check."""
    vm = ctx.subject
    ctx.at("run")
    task = asyncio.ensure_future(vm.run())

    async def stop() -> None:
        await vm.stop()
        try:
            await asyncio.wait_for(task, 10)
        finally:
            task.cancel()

    ctx.defer(stop)
    await kit_clock(ctx).settle()
    if task.done():
        exc = task.exception()
        ctx.fail(f"run() returned before stop() ({exc!r})" if exc else "run() returned at once")
    return vm


async def _mounted(ctx: Ctx, vm: VolumeManager, pod: Pod) -> None:
    ctx.at("add_pod, then wait_for_mounts")
    vm.add_pod(pod)
    timeout: float = _opt(ctx, "mount_timeout", 30.0)
    await _drive(ctx, vm.wait_for_mounts(pod, timeout), limit=timeout + 1, what="wait_for_mounts")


def _claims_mounts(ctx: Ctx) -> bool:
    return bool(_opt(ctx, "mounts", True))


def _skip_without_mounts(ctx: Ctx, vm: VolumeManager, pod: Pod) -> None:
    """Skip when the implementation claims to mount nothing, after checking that
    it gives no container a mount."""
    if _claims_mounts(ctx):
        return
    got = vm.container_mounts(pod, pod.spec.containers[0])
    ctx.expect_eq("container_mounts of a manager mounting nothing", got, [])
    ctx.skip("the implementation mounts no volumes (mounts=False)")


# ------------------------------------------------------------------ checks


async def _check_run_until_stop(ctx: Ctx) -> None:
    vm = ctx.subject
    ctx.at("run")
    task = asyncio.ensure_future(vm.run())
    try:
        await _advance(ctx, 5, until=task)
        if task.done():
            ctx.fail(f"run() returned before stop() ({task.exception()!r})")
        ctx.at("stop")
        await vm.stop()
        await _drive(ctx, asyncio.shield(task), limit=5, what="run() after stop()")
        ctx.at("stop again")
        await vm.stop()
    finally:
        task.cancel()


async def _check_wait_for_mounts_returns_once_mounted(ctx: Ctx) -> None:
    vm = await _run(ctx)
    pod = _pod(ctx)
    await _mounted(ctx, vm, pod)
    ctx.at("wait_for_mounts of a mounted pod (no time passes)")
    await _drive(ctx, vm.wait_for_mounts(pod, 0), limit=0, what="wait_for_mounts, timeout 0")
    ctx.at("a pod without volumes")
    bare = _pod(ctx, volumes=[])
    vm.add_pod(bare)
    await _drive(ctx, vm.wait_for_mounts(bare, 0), limit=0, what="wait_for_mounts, no volumes")


async def _check_wait_for_mounts_times_out_naming_unmounted(ctx: Ctx) -> None:
    vm = await _run(ctx)
    pod = _pod(ctx, volumes=[SCRATCH, BROKEN])
    if not _claims_mounts(ctx):
        vm.add_pod(pod)
        ctx.at("wait_for_mounts of a manager mounting nothing")
        await _drive(ctx, vm.wait_for_mounts(pod, 0), limit=0, what="wait_for_mounts")
        ctx.skip("the implementation mounts no volumes, so none fails (mounts=False)")
    if not _opt(ctx, "failing_volume", True):
        ctx.skip("the implementation cannot be made to fail a mount (failing_volume=False)")
    clock = kit_clock(ctx)
    vm.add_pod(pod)
    timeout = 5.0
    ctx.at(f"wait_for_mounts with the volume 'broken' failing, timeout {timeout:g} s")
    start = clock.monotonic()
    task = asyncio.ensure_future(vm.wait_for_mounts(pod, timeout))
    await _advance(ctx, timeout - 0.5, until=task)
    if task.done():
        exc = task.exception()
        if exc is None:
            ctx.fail("wait_for_mounts returned though the volume 'broken' cannot mount")
        ctx.fail(
            f"wait_for_mounts gave up after {clock.monotonic() - start:g} clock seconds, "
            f"before its timeout of {timeout:g} ({exc!r})"
        )
    ctx.at("wait_for_mounts reaching its timeout")
    try:
        await _drive(ctx, task, limit=2, what="wait_for_mounts", may_time_out=True)
    except TimeoutError as exc:
        message = str(exc)
    else:
        ctx.fail("wait_for_mounts returned though the volume 'broken' cannot mount")
    ctx.expect(
        clock.monotonic() - start >= timeout,
        f"timed out after {clock.monotonic() - start:g} clock seconds, before {timeout:g}",
    )
    found = re.search(r"unmounted volumes=\[([^\]]*)\]", message)
    ctx.expect(found is not None, f"the error names no 'unmounted volumes=[...]': {message!r}")
    assert found is not None
    ctx.expect_eq("unmounted volumes named", found.group(1).split(), ["broken"])
    ctx.expect(
        "timed out waiting for the condition" in message,
        f"the error does not say 'timed out waiting for the condition': {message!r}",
    )


async def _check_add_pod_idempotent(ctx: Ctx) -> None:
    vm = await _run(ctx)
    pod = _pod(ctx)
    ctx.at("add_pod twice")
    vm.add_pod(pod)
    vm.add_pod(pod)
    await _mounted(ctx, vm, pod)
    ctx.at("add_pod of an equal pod object")
    copy = load_pod(pod.to_dict())
    vm.add_pod(copy)
    await _drive(ctx, vm.wait_for_mounts(copy, 1), limit=2, what="wait_for_mounts of the copy")
    ctx.at("remove_pod once")
    vm.remove_pod(pod)
    timeout: float = _opt(ctx, "mount_timeout", 30.0)
    await _drive(ctx, vm.wait_for_unmount(pod, timeout), limit=timeout + 1, what="wait_for_unmount")


async def _check_remove_pod_then_wait_for_unmount(ctx: Ctx) -> None:
    vm = await _run(ctx)
    pod = _pod(ctx)
    await _mounted(ctx, vm, pod)
    if _claims_mounts(ctx):
        ctx.at("wait_for_unmount of a pod still wanted")
        try:
            await _drive(
                ctx,
                vm.wait_for_unmount(pod, 1),
                limit=2,
                what="wait_for_unmount",
                may_time_out=True,
            )
        except TimeoutError:
            pass
        else:
            ctx.fail("wait_for_unmount returned while the pod's volumes are wanted and mounted")
    timeout: float = _opt(ctx, "mount_timeout", 30.0)
    ctx.at("remove_pod, then wait_for_unmount")
    vm.remove_pod(pod)
    await _drive(ctx, vm.wait_for_unmount(pod, timeout), limit=timeout + 1, what="wait_for_unmount")
    # Promptly, but not necessarily at once: an implementation may want one
    # pass of its loop to see that nothing is left.
    ctx.at("remove_pod again, then wait_for_unmount")
    vm.remove_pod(pod)
    await _drive(ctx, vm.wait_for_unmount(pod, 2), limit=2, what="wait_for_unmount again")
    ctx.at("remove_pod and wait_for_unmount of a pod never added")
    stranger = _pod(ctx)
    vm.remove_pod(stranger)
    await _drive(ctx, vm.wait_for_unmount(stranger, 2), limit=2, what="wait_for_unmount")
    ctx.at("the removed pod is added again")
    await _mounted(ctx, vm, pod)


async def _check_container_mounts_map_volume_mounts(ctx: Ctx) -> None:
    vm = await _run(ctx)
    api = bool(_opt(ctx, "api_volumes", True))
    sub = bool(_opt(ctx, "sub_path", True))
    mounts: list[dict[str, Any]] = [
        {"name": "scratch", "mountPath": "/data"},
        {"name": "scratch", "mountPath": "/ro", "readOnly": True},
    ]
    if sub:
        mounts.append({"name": "scratch", "mountPath": "/logs", "subPath": "logs/app"})
    if api:
        mounts.append({"name": "settings", "mountPath": "/etc/settings"})
        mounts.append({"name": "info", "mountPath": "/etc/info", "readOnly": False})
    pod = _pod(ctx, mounts=mounts)
    _skip_without_mounts(ctx, vm, pod)
    await _mounted(ctx, vm, pod)
    ctx.at("container_mounts")
    got = vm.container_mounts(pod, pod.spec.containers[0])
    ctx.expect_eq(
        "container paths", [m.container_path for m in got], [m["mountPath"] for m in mounts]
    )
    by_path = {m.container_path: m for m in got}
    # configMap and downwardAPI volumes are always read-only, as the kubelet mounts them.
    want_ro = {
        "/data": False,
        "/ro": True,
        "/logs": False,
        "/etc/settings": True,
        "/etc/info": True,
    }
    for mount in got:
        ctx.expect_eq(
            f"{mount.container_path}: readonly", mount.readonly, want_ro[mount.container_path]
        )
        ctx.expect_eq(
            f"{mount.container_path}: propagation", mount.propagation, MountPropagation.PRIVATE
        )
        ctx.expect(bool(mount.host_path), f"{mount.container_path}: no host path")
    ctx.expect_eq(
        "host path of /ro (the same volume as /data)",
        by_path["/ro"].host_path,
        by_path["/data"].host_path,
    )
    if sub:
        ctx.expect(
            by_path["/logs"].host_path != by_path["/data"].host_path,
            "the subPath mount has the volume's own host path",
        )
    if api:
        ctx.expect(
            by_path["/etc/settings"].host_path != by_path["/etc/info"].host_path,
            "two volumes share a host path",
        )
    ctx.at("container_mounts again")
    ctx.expect_eq("the second answer", vm.container_mounts(pod, pod.spec.containers[0]), got)


async def _check_container_mounts_name_the_field(ctx: Ctx) -> None:
    vm = await _run(ctx)
    sub = bool(_opt(ctx, "sub_path", True))
    mounts: list[dict[str, Any]] = [
        {"name": "scratch", "mountPath": "/data"},
        {"name": "nowhere", "mountPath": "/x"},
    ]
    if sub:
        mounts.append({"name": "scratch", "mountPath": "/y", "subPath": "../escape"})
    pod = _pod(ctx, volumes=[SCRATCH], mounts=mounts, valid=False)
    _skip_without_mounts(ctx, vm, pod)
    await _mounted(ctx, vm, pod)
    ctx.at("container_mounts with unusable volumeMounts")
    try:
        got = vm.container_mounts(pod, pod.spec.containers[0])
    except ValidationError as exc:
        paths = sorted(e.path for e in exc.errors)
    else:
        ctx.fail(f"container_mounts gave {got!r} instead of raising ValidationError")
    base = "spec.containers[0].volumeMounts"
    want = [f"{base}[1].name"] + ([f"{base}[2].subPath"] if sub else [])
    ctx.expect_eq("fields named by the ValidationError", paths, want)


async def _check_container_mounts_of_an_unknown_pod(ctx: Ctx) -> None:
    vm = await _run(ctx)
    pod = _pod(ctx, volumes=[SCRATCH], mounts=[{"name": "scratch", "mountPath": "/data"}])
    bare = _pod(ctx, volumes=[SCRATCH])
    ctx.at("container_mounts of a container without volumeMounts, pod never added")
    ctx.expect_eq("mounts", vm.container_mounts(bare, bare.spec.containers[0]), [])
    _skip_without_mounts(ctx, vm, pod)
    ctx.at("container_mounts of a pod never added")
    got = vm.container_mounts(pod, pod.spec.containers[0])
    ctx.expect_eq("container paths", [m.container_path for m in got], ["/data"])


#: Every check of the kit, by name, in the order they run.
CHECKS: dict[str, KitCheck[VolumeManager]] = {
    "run_until_stop": _check_run_until_stop,
    "wait_for_mounts_returns_once_mounted": _check_wait_for_mounts_returns_once_mounted,
    "wait_for_mounts_times_out_naming_unmounted": (
        _check_wait_for_mounts_times_out_naming_unmounted
    ),
    "add_pod_idempotent": _check_add_pod_idempotent,
    "remove_pod_then_wait_for_unmount": _check_remove_pod_then_wait_for_unmount,
    "container_mounts_map_volume_mounts": _check_container_mounts_map_volume_mounts,
    "container_mounts_name_the_field": _check_container_mounts_name_the_field,
    "container_mounts_of_an_unknown_pod": _check_container_mounts_of_an_unknown_pod,
}


async def check_volume(
    factory: Callable[..., VolumeManager | Awaitable[VolumeManager]], **options: Any
) -> ConformanceReport:
    """Run the VolumeManager kit and raise if any check failed.

    Args:
        factory: Builds a fresh implementation per check: called with the check's
            :class:`~kubelet_kit.testing.kit.KitContext` (for :func:`kit_clock`
            and :func:`kit_root_dir`) if it takes a positional argument, else
            with none; may be async.
        **options: The kit's options (see the module docstring).

    Returns:
        The report, when every check passed or was skipped.

    Raises:
        ConformanceFailure: (an AssertionError) a check failed; its message lists
            every check with what failed.
    """
    report = await run_kit(CHECKS, factory, options=options)
    report.raise_for_failures()
    return report


VolumeManagerConformance: type = kit_test_class(
    "VolumeManagerConformance",
    CHECKS,
    doc="""Base class for pytest: one test per check of the VolumeManager kit.

    Define ``make(self, ctx)`` returning a fresh implementation on
    ``kit_clock(ctx)`` and ``kit_root_dir(ctx)``, and optionally
    ``kit_options(self)`` (see :mod:`kubelet_kit.testing.volume_kit`).
    """,
)
