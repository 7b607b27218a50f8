"""The VolumeManager kit against the fake, the reference manager (for real on a
temporary directory: without mounts, with tmpfs and bind mounts when root, and
with its file work in threads), the stub, and a broken manager the kit must
fail; and the fake's own call log, errors and test controls."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs
import pytest
from conftest import require_real_part

from kubelet_kit.api import Container, Pod, load_pod
from kubelet_kit.container import Mount
from kubelet_kit.errors import PodSyncError, ValidationError
from kubelet_kit.testing import (
    Call,
    FakeClock,
    FakeVolumeManager,
    VolumeManagerConformance,
    check_volume,
)
from kubelet_kit.testing.kit import KitContext, run_kit
from kubelet_kit.testing.volume_kit import CHECKS, kit_clock, kit_root_dir
from kubelet_kit.volume import (
    ReconcilingVolumeManager,
    StubVolumeManager,
    VolumeManager,
    mounter,
)


async def inline(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    return fn(*args, **kwargs)


def fake(ctx: KitContext[Any]) -> FakeVolumeManager:
    vm = FakeVolumeManager(
        clock=kit_clock(ctx), root_dir=kit_root_dir(ctx), mount_delay=2, unmount_delay=1
    )
    vm.fail_volume("broken")
    return vm


# ------------------------------------------------------------------ the kit, passing


class TestFakeVolumeManager(VolumeManagerConformance):
    def make(self, ctx: KitContext[Any]) -> FakeVolumeManager:
        return fake(ctx)


class TestReferenceVolumeManager(VolumeManagerConformance):
    """The reference on a temporary directory, file work inline, no mounts."""

    def make(self, ctx: KitContext[Any]) -> ReconcilingVolumeManager:
        return ReconcilingVolumeManager(
            kit_root_dir(ctx), clock=kit_clock(ctx), offload=inline, may_mount=False
        )


class TestReferenceVolumeManagerMounting(VolumeManagerConformance):
    """The reference as root: subPath bind mounts (and tmpfs where asked)."""

    def make(self, ctx: KitContext[Any]) -> ReconcilingVolumeManager:
        require_real_part(mounter.can_mount(), "root (CAP_SYS_ADMIN) to mount")
        return ReconcilingVolumeManager(
            kit_root_dir(ctx), clock=kit_clock(ctx), offload=inline, may_mount=True
        )


class TestReferenceVolumeManagerInThreads(VolumeManagerConformance):
    """The reference with its file work in worker threads, as an agent runs it."""

    def make(self, ctx: KitContext[Any]) -> ReconcilingVolumeManager:
        return ReconcilingVolumeManager(kit_root_dir(ctx), clock=kit_clock(ctx), may_mount=False)


class TestStubVolumeManager(VolumeManagerConformance):
    def make(self) -> StubVolumeManager:
        return StubVolumeManager()

    def kit_options(self) -> Mapping[str, Any]:
        return {"mounts": False}


def test_the_stub_skips_only_what_it_does_not_claim() -> None:
    report = asyncio.run(run_kit(CHECKS, StubVolumeManager, options={"mounts": False}))
    assert report.ok, report.summary()
    assert sorted(r.name for r in report.results if r.status == "skipped") == [
        "container_mounts_map_volume_mounts",
        "container_mounts_name_the_field",
        "container_mounts_of_an_unknown_pod",
        "wait_for_mounts_times_out_naming_unmounted",
    ]


def test_check_volume_returns_the_report_and_cleans_up() -> None:
    roots: list[Path] = []

    def factory(ctx: KitContext[Any]) -> FakeVolumeManager:
        roots.append(kit_root_dir(ctx))
        return fake(ctx)

    report = asyncio.run(check_volume(factory))
    assert [r.name for r in report.results] == list(CHECKS)
    assert len(set(roots)) == len(CHECKS) and not any(r.exists() for r in roots)


def test_options_without_api_volumes_sub_paths_or_a_failing_volume() -> None:
    report = asyncio.run(
        run_kit(
            CHECKS,
            lambda ctx: FakeVolumeManager(clock=kit_clock(ctx)),
            options={"api_volumes": False, "sub_path": False, "failing_volume": False},
        )
    )
    assert report.ok, report.summary()
    assert [r.name for r in report.results if r.status == "skipped"] == [
        "wait_for_mounts_times_out_naming_unmounted"
    ]


# ------------------------------------------------------------------ the kit, failing


class BrokenVolumeManager(FakeVolumeManager):
    """What a careless implementation gets wrong, one bug at a time."""

    def __init__(self, bug: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.bug = bug
        self.refs: dict[str, int] = {}

    def add_pod(self, pod: Pod) -> None:
        if self.bug == "counts_references":
            self.refs[pod.uid] = self.refs.get(pod.uid, 0) + 1
        super().add_pod(pod)

    def remove_pod(self, pod: Pod) -> None:
        if self.bug == "counts_references":
            self.refs[pod.uid] = self.refs.get(pod.uid, 1) - 1
            if self.refs[pod.uid] > 0:
                return
        super().remove_pod(pod)

    async def wait_for_mounts(self, pod: Pod, timeout: float) -> None:
        if self.bug == "gives_up_early":
            timeout /= 2
        try:
            await super().wait_for_mounts(pod, timeout)
        except TimeoutError:
            if self.bug == "vague_timeout":
                raise TimeoutError("volumes not ready") from None
            raise

    async def wait_for_unmount(self, pod: Pod, timeout: float) -> None:
        if self.bug != "does_not_wait_for_unmount":
            await super().wait_for_unmount(pod, timeout)

    def container_mounts(
        self, pod: Pod, container: Container, env: Mapping[str, str] | None = None
    ) -> list[Mount]:
        mounts = super().container_mounts(pod, container, env)
        if self.bug == "writable_config_maps":
            wanted = {vm.mount_path: vm.read_only for vm in container.volume_mounts}
            return [Mount(m.container_path, m.host_path, wanted[m.container_path]) for m in mounts]
        if self.bug == "drops_sub_path":
            subs = {vm.mount_path: vm.name for vm in container.volume_mounts if vm.sub_path}
            return [
                attrs.evolve(m, host_path=str(self.volume_path(pod, subs[m.container_path])))
                if m.container_path in subs
                else m
                for m in mounts
            ]
        return mounts


BUGS = {
    "counts_references": (
        "add_pod_idempotent",
        "remove_pod once: wait_for_unmount timed out: pod kit-",
    ),
    "gives_up_early": (
        "wait_for_mounts_times_out_naming_unmounted",
        "wait_for_mounts with the volume 'broken' failing, timeout 5 s: wait_for_mounts gave up "
        "after 2.5 clock seconds, before its timeout of 5 (TimeoutError('unmounted volumes=",
    ),
    "vague_timeout": (
        "wait_for_mounts_times_out_naming_unmounted",
        "wait_for_mounts reaching its timeout: the error names no 'unmounted volumes=[...]': "
        "'volumes not ready'",
    ),
    "does_not_wait_for_unmount": (
        "remove_pod_then_wait_for_unmount",
        "wait_for_unmount of a pod still wanted: wait_for_unmount returned while the pod's "
        "volumes are wanted and mounted",
    ),
    "writable_config_maps": (
        "container_mounts_map_volume_mounts",
        "container_mounts: /etc/settings: readonly: expected True, got False",
    ),
    "drops_sub_path": (
        "container_mounts_map_volume_mounts",
        "container_mounts: the subPath mount has the volume's own host path",
    ),
}


@pytest.mark.parametrize("bug", sorted(BUGS))
def test_the_kit_catches_a_broken_manager(bug: str) -> None:
    def factory(ctx: KitContext[Any]) -> BrokenVolumeManager:
        vm = BrokenVolumeManager(bug, clock=kit_clock(ctx), mount_delay=1)
        vm.fail_volume("broken")
        return vm

    report = asyncio.run(run_kit(CHECKS, factory))
    check, message = BUGS[bug]
    assert [r.name for r in report.failures] == [check], report.summary()
    assert report.result(check).message.startswith(message), report.summary()
    with pytest.raises(AssertionError, match=f"failed conformance checks: {check}"):
        asyncio.run(check_volume(factory))


class HangingVolumeManager(StubVolumeManager):
    """Never mounts, and its waits use real time: the kit must not hang on it."""

    async def wait_for_mounts(self, pod: Pod, timeout: float) -> None:
        await asyncio.sleep(3600)


def test_the_kit_gives_up_on_a_manager_that_never_answers() -> None:
    report = asyncio.run(run_kit(CHECKS, HangingVolumeManager, names=["add_pod_idempotent"]))
    assert report.result("add_pod_idempotent").message == (
        "add_pod, then wait_for_mounts: wait_for_mounts: still waiting after 31 clock seconds"
    )


# ------------------------------------------------------------------ the fake itself


def make_pod(
    uid: str = "u1",
    volumes: list[dict[str, Any]] | None = None,
    mounts: list[dict[str, Any]] | None = None,
    valid: bool = True,
) -> Pod:
    return (load_pod if valid else Pod.from_dict)(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"pod-{uid}", "namespace": "ns", "uid": uid},
            "spec": {
                "volumes": volumes
                if volumes is not None
                else [
                    {"name": "cfg", "configMap": {"name": "cm"}},
                    {"name": "scratch", "emptyDir": {}},
                ],
                "containers": [{"name": "app", "image": "busybox", "volumeMounts": mounts or []}],
            },
        }
    )


class Running:
    def __init__(self, vm: FakeVolumeManager) -> None:
        self.vm = vm
        self.task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> FakeVolumeManager:
        self.task = asyncio.create_task(self.vm.run())
        await asyncio.sleep(0)
        return self.vm

    async def __aexit__(self, *exc: object) -> None:
        await self.vm.stop()
        assert self.task is not None
        await asyncio.wait_for(self.task, 5)


def test_the_fake_is_a_volume_manager() -> None:
    assert isinstance(FakeVolumeManager(), VolumeManager)


async def test_mounts_follow_the_clock_and_need_run() -> None:
    clock = FakeClock()
    vm = FakeVolumeManager(clock=clock, mount_delay=2, unmount_delay=3)
    pod = make_pod()
    vm.add_pod(pod)
    await clock.run_for(10)
    assert vm.mounted(pod) == []  # not running: nothing happens
    async with Running(vm):
        assert vm.running
        waiter = asyncio.create_task(vm.wait_for_mounts(pod, 10))
        await clock.run_for(1.9)
        assert not waiter.done()
        await clock.run_for(0.1)
        await waiter
        assert sorted(vm.mounted("u1")) == ["cfg", "scratch"]
        vm.remove_pod(pod)
        waiter = asyncio.create_task(vm.wait_for_unmount(pod, 10))
        await clock.run_for(2.9)
        assert not waiter.done() and sorted(vm.mounted(pod)) == ["cfg", "scratch"]
        await clock.run_for(0.1)
        await waiter
        assert vm.mounted(pod) == []
    assert not vm.running


async def test_a_failing_volume_times_out_with_the_reference_message() -> None:
    clock = FakeClock()
    vm = FakeVolumeManager(clock=clock)
    vm.fail_volume("cfg")
    pod = make_pod()
    async with Running(vm):
        vm.add_pod(pod)
        waiter = asyncio.create_task(vm.wait_for_mounts(pod, 5))
        await clock.run_for(5)
        with pytest.raises(TimeoutError) as err:
            await waiter
        assert str(err.value) == (
            "unmounted volumes=[cfg], failed to process volumes=[cfg]: timed out waiting for "
            'the condition; configmap "ns/cm" not found'
        )
        assert vm.errors == {("u1", "cfg"): 'configmap "ns/cm" not found'}
        assert vm.mounted(pod) == ["scratch"]
        # A message of the test's own, for one pod only; then the source appears.
        vm.fail_volume("cfg", "rpc error: code = Unavailable", pod_uid="u1")
        vm.clear_failure("cfg")
        with pytest.raises(TimeoutError, match=r"failed to process volumes=\[cfg\]: .*; rpc"):
            await vm.wait_for_mounts(pod, 0)
        vm.clear_failure("cfg", pod_uid="u1")
        await vm.wait_for_mounts(pod, 0)
        assert vm.errors == {}
        # The pod drops a volume: it is unmounted; a still-wanted pod keeps the rest.
        vm.add_pod(make_pod(volumes=[{"name": "scratch", "emptyDir": {}}]))
        await clock.run_for(0)
        assert vm.mounted(pod) == ["scratch"]
        with pytest.raises(TimeoutError) as unmount:
            await vm.wait_for_unmount(pod, 0)
        assert str(unmount.value) == (
            "pod pod-u1_ns(u1): volumes=[scratch] still mounted: timed out waiting for the "
            "condition"
        )


async def test_the_fake_logs_calls_and_injects_errors() -> None:
    vm = FakeVolumeManager(clock=FakeClock())
    pod = make_pod()
    boom = PodSyncError("FailedMount", "the node's disk is gone")
    vm.inject_error("add_pod", boom, when=lambda p: p.uid == "u1")
    with pytest.raises(PodSyncError) as err:
        vm.add_pod(pod)
    assert err.value is boom and vm.pods == {}
    vm.add_pod(pod)
    vm.inject_error("wait_for_mounts", TimeoutError("injected"), times=2)
    for _ in range(2):
        with pytest.raises(TimeoutError, match="injected"):
            await vm.wait_for_mounts(pod, 1)
    assert vm.pending_errors() == []
    vm.container_mounts(pod, pod.spec.containers[0], {"A": "b"})
    assert [c.method for c in vm.calls] == [
        "add_pod",
        "add_pod",
        "wait_for_mounts",
        "wait_for_mounts",
        "container_mounts",
    ]
    assert vm.calls_to("wait_for_mounts")[0] == Call(
        "wait_for_mounts", (pod, 1), {"pod": pod, "timeout": 1}
    )
    assert vm.calls_to("container_mounts")[0].kwargs["env"] == {"A": "b"}
    vm.inject_error("stop", RuntimeError("x"))
    assert [e.method for e in vm.pending_errors("stop")] == ["stop"]
    vm.clear_errors()
    await vm.stop()
    vm.clear_calls()
    assert vm.calls == []
    with pytest.raises(ValueError, match="FakeVolumeManager has no method"):
        vm.inject_error("mount", RuntimeError("x"))


async def test_container_mounts_agree_with_the_reference(tmp_path: Path) -> None:
    mounts = [
        {"name": "cfg", "mountPath": "/etc/config"},
        {"name": "scratch", "mountPath": "/data", "subPath": "app/./logs"},
        {"name": "scratch", "mountPath": "/ro", "readOnly": True},
        {"name": "scratch", "mountPath": "/env", "subPathExpr": "$(POD)/x"},
        {"name": "scratch", "mountPath": "/hc", "mountPropagation": "HostToContainer"},
    ]
    pod = make_pod(mounts=mounts)
    clock = FakeClock()
    real = ReconcilingVolumeManager(tmp_path, clock=clock, offload=inline, may_mount=False)
    vm = FakeVolumeManager(clock=clock, root_dir=tmp_path)
    (tmp_path / "pods/u1/volumes/kubernetes.io~empty-dir/scratch").mkdir(parents=True)
    container = pod.spec.containers[0]
    got = vm.container_mounts(pod, container, {"POD": "p1"})
    assert got == real.container_mounts(pod, container, {"POD": "p1"})
    assert got[1].host_path == str(vm.volume_path(pod, "scratch") / "app" / "logs")
    with pytest.raises(KeyError):
        vm.volume_path(pod, "nope")
    bad = make_pod(
        mounts=[
            {"name": "missing", "mountPath": "/m"},
            {"name": "scratch", "mountPath": "/s", "subPath": "/etc"},
            {"name": "scratch", "mountPath": "relative"},
            {"name": "scratch", "mountPath": "/b", "mountPropagation": "Bidirectional"},
        ],
        valid=False,
    )
    with pytest.raises(ValidationError) as fake_err:
        vm.container_mounts(bad, bad.spec.containers[0])
    with pytest.raises(ValidationError) as real_err:
        real.container_mounts(bad, bad.spec.containers[0])
    assert fake_err.value.errors == real_err.value.errors
    assert len(fake_err.value.errors) == 4
    assert not (tmp_path / "pods/u1/volumes/kubernetes.io~empty-dir/scratch/etc").exists()
