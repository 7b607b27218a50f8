"""The ContainerManager kit against the fake, the reference manager (cgroup v2 on a
fake tree and on this machine's cgroup2 hierarchy, cgroup v1 on its controllers),
the stub, and a broken manager the kit must fail; and the fake's own call log,
errors and test controls."""

from __future__ import annotations

import asyncio
import os
import secrets
from collections.abc import Mapping
from typing import Any

import pytest
from conftest import require_real_part

from kubelet_kit.api import Pod, Quantity, load_pod
from kubelet_kit.api.admission import AdmitResult
from kubelet_kit.api.kubeletconfig import KubeletConfiguration
from kubelet_kit.cm import (
    CgroupContainerManager,
    CgroupV2Driver,
    ContainerManager,
    ContainerRunOptions,
    StubContainerManager,
)
from kubelet_kit.cm.cgroup_v2 import DEFAULT_CONTROLLERS, discover_v2_mount
from kubelet_kit.container import KeyValue
from kubelet_kit.errors import ConfigurationError
from kubelet_kit.testing import Call, FakeCgroupTree, FakeClock, FakeContainerManager
from kubelet_kit.testing.cm_kit import CHECKS, ContainerManagerConformance, check_cm
from kubelet_kit.testing.kit import KitContext, run_kit

Q = Quantity.parse
CAPACITY = {"cpu": Q("4"), "memory": Q("8Gi"), "ephemeral-storage": Q("100Gi"), "pods": Q("16")}
#: systemReserved + kubeReserved + the hard eviction thresholds of ``reference()``.
REFERENCE_RESERVED = {
    "cpu": "500m",
    "memory": str((1 << 30) + (512 << 20) + (100 << 20)),
    "ephemeral-storage": "10Gi",
}


def reference(driver: Any, **config: Any) -> CgroupContainerManager:
    cfg = KubeletConfiguration(
        system_reserved={"cpu": "500m", "memory": "1Gi"},
        kube_reserved={"memory": "512Mi"},
        eviction_hard={"memory.available": "100Mi", "nodefs.available": "10Gi"},
        **config,
    )
    return CgroupContainerManager(cfg, driver=driver, capacity=CAPACITY)


# ------------------------------------------------------------------ the kit, passing


class TestFakeContainerManager(ContainerManagerConformance):
    def make(self) -> FakeContainerManager:
        return FakeContainerManager(reserved={"cpu": "250m", "memory": "1Gi"})

    def kit_options(self) -> Mapping[str, Any]:
        return {"reserved": {"cpu": "250m", "memory": "1Gi"}}


class TestFakeContainerManagerSystemd(ContainerManagerConformance):
    def make(self) -> FakeContainerManager:
        return FakeContainerManager(
            cgroup_driver="systemd",
            cpu_cfs_quota=False,
            capacity={"cpu": "1", "memory": "1Gi", "pods": "20"},
        )

    def kit_options(self) -> Mapping[str, Any]:
        return {"cgroup_driver": "systemd", "cpu_cfs_quota": False, "reserved": {}}


class TestReferenceOnCgroupV2(ContainerManagerConformance):
    def make(self) -> CgroupContainerManager:
        return reference(CgroupV2Driver(files=FakeCgroupTree(), clock=FakeClock()))

    def kit_options(self) -> Mapping[str, Any]:
        return {"reserved": REFERENCE_RESERVED}


class TestReferenceOnCgroupV2SystemdWithRoot(ContainerManagerConformance):
    def make(self) -> CgroupContainerManager:
        return reference(
            CgroupV2Driver(files=FakeCgroupTree(), clock=FakeClock()),
            cgroup_driver="systemd",
            cgroup_root="/agent.slice",
            cpu_cfs_quota=False,
        )

    def kit_options(self) -> Mapping[str, Any]:
        return {
            "reserved": REFERENCE_RESERVED,
            "cgroup_driver": "systemd",
            "cgroup_root": "/agent.slice",
            "cpu_cfs_quota": False,
        }


class TestReferenceOnCgroupV2CgroupfsWithRoot(ContainerManagerConformance):
    def make(self) -> CgroupContainerManager:
        return reference(
            CgroupV2Driver(files=FakeCgroupTree(), clock=FakeClock()), cgroup_root="/agent/nodes"
        )

    def kit_options(self) -> Mapping[str, Any]:
        return {"reserved": REFERENCE_RESERVED, "cgroup_root": "/agent/nodes"}


def _real_v1() -> bool:
    from kubelet_kit.cm.cgroup_v1 import discover_v1_mounts

    mounts = discover_v1_mounts()
    return os.geteuid() == 0 and all(c in mounts for c in ("cpu", "memory", "cpuset", "pids"))


class TestReferenceOnCgroupV1(ContainerManagerConformance):
    """On this machine's cgroup v1 controllers, under a root of the check's own that
    is removed afterwards (the v1 driver writes real cgroupfs files, which no fake
    tree stands in for)."""

    def make(self, ctx: KitContext[Any]) -> CgroupContainerManager:
        require_real_part(_real_v1(), "root and the cgroup v1 controllers")
        from kubelet_kit.cm.cgroup_v1 import CgroupV1Driver, discover_v1_mounts

        driver = CgroupV1Driver(
            discover_v1_mounts(("cpu", "cpuacct", "cpuset", "memory", "pids")), clock=FakeClock()
        )
        root = f"/kubelet-kit-test-{secrets.token_hex(4)}"
        ctx.defer(lambda: driver.remove(root))
        ctx.options["cgroup_root"] = root
        return reference(driver, cgroup_root=root)

    def kit_options(self) -> Mapping[str, Any]:
        return {"reserved": REFERENCE_RESERVED}


def _real_v2_controllers() -> frozenset[str] | None:
    """The controllers the real v2 check may delegate from this machine's cgroup2
    root, or None when it cannot run. The root cgroup is the machine's: only what
    it already delegates is used, except in a throwaway VM, where the check may
    enable the rest."""
    mount = discover_v2_mount()
    if os.geteuid() != 0 or mount is None or not os.access(mount, os.W_OK):
        return None
    try:
        with open(os.path.join(mount, "cgroup.controllers"), encoding="ascii") as f:
            offered = frozenset(f.read().split())
        with open(os.path.join(mount, "cgroup.subtree_control"), encoding="ascii") as f:
            enabled = frozenset(f.read().split())
    except OSError:
        return None
    usable = DEFAULT_CONTROLLERS & (offered if os.environ.get("KUBELET_KIT_IN_VM") else enabled)
    return usable if {"cpu", "memory", "pids"} <= usable else None


class TestReferenceOnRealCgroupV2(ContainerManagerConformance):
    """On this machine's cgroup2 hierarchy with the cpu, memory and pids controllers
    (a pure v2 machine, or the v2 VM), under a root of the check's own that is
    removed afterwards.

    A machine with the v1 controllers has a cgroup2 hierarchy without them, so
    this skips there even under KUBELET_KIT_REQUIRE_REAL (the v1 check runs
    instead); in the v2 VM: ``scripts/test-vm -- .venv/bin/python -m pytest -p
    no:cacheprovider tests/test_cm_kit.py``.
    """

    def make(self, ctx: KitContext[Any]) -> CgroupContainerManager:
        controllers = _real_v2_controllers()
        if controllers is None:
            pytest.skip("root and a cgroup2 hierarchy delegating cpu, memory and pids")
        mount = discover_v2_mount()
        assert mount is not None
        driver = CgroupV2Driver(mount, controllers=controllers, clock=FakeClock())
        root = f"/kubelet-kit-test-{secrets.token_hex(4)}"
        ctx.defer(lambda: driver.remove(root))
        ctx.options["cgroup_root"] = root
        return reference(driver, cgroup_root=root)

    def kit_options(self) -> Mapping[str, Any]:
        return {"reserved": REFERENCE_RESERVED}


class TestStubContainerManager(ContainerManagerConformance):
    def make(self) -> StubContainerManager:
        return StubContainerManager(max_pods=12)

    def kit_options(self) -> Mapping[str, Any]:
        return {"pod_cgroups": False, "container_resources": False, "admits_by_allocatable": False}


def test_the_stub_skips_only_what_it_does_not_claim() -> None:
    report = asyncio.run(
        run_kit(
            CHECKS,
            StubContainerManager,
            options={
                "pod_cgroups": False,
                "container_resources": False,
                "admits_by_allocatable": False,
            },
        )
    )
    assert report.ok, report.summary()
    assert sorted(r.name for r in report.results if r.status == "skipped") == [
        "container_resources",
        "pod_cgroup_named_by_qos",
        "refuses_cpu_over_allocatable",
        "refuses_memory_over_allocatable",
        "remove_orphaned_pod_cgroups",
    ]


def test_check_cm_returns_the_report() -> None:
    report = asyncio.run(check_cm(FakeContainerManager))
    assert report.ok and [r.name for r in report.results] == list(CHECKS)


# ------------------------------------------------------------------ the kit, failing


class BrokenContainerManager(FakeContainerManager):
    """What a careless implementation gets wrong."""

    def node_allocatable(self) -> Mapping[str, Quantity]:
        return self.node_capacity()  # forgets the reservation

    def admit_pod(self, pod: Pod, active_pods: Any) -> AdmitResult:
        result = super().admit_pod(pod, [])  # forgets the active pods
        if not result.admit:
            return AdmitResult.refuse("OutOfResources", result.message)
        return result

    async def ensure_pod_cgroup(self, pod: Pod) -> str:
        path = await super().ensure_pod_cgroup(pod)
        return path.replace("/kubepods/pod", "/kubepods/guaranteed/pod")

    async def remove_orphaned_pod_cgroups(self, active_pod_uids: Any) -> list[str]:
        removed = await super().remove_orphaned_pod_cgroups(active_pod_uids)
        return removed[:1]

    def container_resources(self, pod: Pod, container: Any) -> Any:
        import attrs

        got = super().container_resources(pod, container)
        return attrs.evolve(got, cpu_shares=max(got.cpu_shares, 1) * 1000 // 1024)

    async def stop(self) -> None:
        if not self.started:
            raise RuntimeError("not started")
        await super().stop()


def test_the_kit_catches_a_broken_manager() -> None:
    report = asyncio.run(
        run_kit(
            CHECKS,
            lambda: BrokenContainerManager(reserved={"memory": "1Gi"}),
            options={"reserved": {"memory": "1Gi"}},
        )
    )
    failed = {r.name: r.message for r in report.failures}
    assert sorted(failed) == [
        "capacity_and_allocatable",
        "container_resources",
        "pod_cgroup_named_by_qos",
        "refuses_cpu_over_allocatable",
        "refuses_memory_over_allocatable",
        "refuses_pods_over_allocatable",
        "remove_orphaned_pod_cgroups",
        "remove_pod_cgroup_idempotent",
        "start_stop_idempotent",
    ], report.summary()
    assert failed["capacity_and_allocatable"] == (
        "allocatable = capacity - reserved: allocatable memory (capacity 8Gi, reserved 1Gi): "
        "expected 7Gi, got 8Gi"
    )
    assert "used: 110, capacity: 110" not in failed["refuses_pods_over_allocatable"]
    assert "expected '/kubepods/pod" in failed["pod_cgroup_named_by_qos"]
    assert (
        "reason: expected 'OutOfcpu', got 'OutOfResources'"
        in (failed["refuses_cpu_over_allocatable"])
    )
    assert "cpu_shares: expected 256, got 250" in failed["container_resources"]
    assert failed["start_stop_idempotent"] == "stop again: unexpected RuntimeError: not started"
    with pytest.raises(
        AssertionError, match="failed conformance checks: start_stop_idempotent, capacity"
    ):
        asyncio.run(check_cm(BrokenContainerManager, reserved={"memory": "1Gi"}))


# ------------------------------------------------------------------ the fake itself


def pod(name: str, **resources: str) -> Pod:
    requests = {k: v for k, v in resources.items() if not k.startswith("limit_")}
    limits = {k[6:]: v for k, v in resources.items() if k.startswith("limit_")}
    return load_pod(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "uid": f"{name}-uid"},
            "spec": {
                "containers": [
                    {
                        "name": "main",
                        "image": "busybox",
                        "resources": {"requests": requests, "limits": limits},
                    }
                ]
            },
        }
    )


def test_the_fake_is_a_container_manager() -> None:
    assert isinstance(FakeContainerManager(), ContainerManager)


async def test_the_fake_logs_every_call() -> None:
    cm = FakeContainerManager()
    p = pod("web", cpu="100m")
    await cm.start()
    cm.node_allocatable()
    cm.admit_pod(p, [])
    await cm.ensure_pod_cgroup(p)
    cm.container_resources(p, p.spec.containers[0])
    assert await cm.remove_orphaned_pod_cgroups(["other"]) == ["web-uid"]
    assert [c.method for c in cm.calls] == [
        "start",
        "node_allocatable",
        "admit_pod",
        "ensure_pod_cgroup",
        "container_resources",
        "remove_orphaned_pod_cgroups",
    ]
    assert cm.calls_to("admit_pod") == [Call("admit_pod", (p, []), {"pod": p, "active_pods": []})]
    assert cm.calls_to("remove_orphaned_pod_cgroups")[0].kwargs == {"active_pod_uids": {"other"}}
    cm.clear_calls()
    assert cm.calls == []


async def test_inject_error_fails_the_next_calls_with_the_same_exception() -> None:
    cm = FakeContainerManager()
    boom = ConfigurationError("/kubepods/burstable/podweb-uid/cpu.max: cannot write: EBUSY")
    p = pod("web", cpu="100m")
    cm.inject_error("ensure_pod_cgroup", boom, times=2, when=lambda q: q.uid == "web-uid")
    assert await cm.ensure_pod_cgroup(pod("other")) == "/kubepods/besteffort/podother-uid"
    for _ in range(2):
        with pytest.raises(ConfigurationError) as err:
            await cm.ensure_pod_cgroup(p)
        assert err.value is boom
    assert cm.pending_errors() == []
    assert await cm.ensure_pod_cgroup(p) == "/kubepods/burstable/podweb-uid"
    # A synchronous method fails too; the failed calls are logged.
    cm.inject_error("admit_pod", RuntimeError("admission down"))
    assert [e.method for e in cm.pending_errors("admit_pod")] == ["admit_pod"]
    with pytest.raises(RuntimeError, match="admission down"):
        cm.admit_pod(p, [])
    assert len(cm.calls_to("ensure_pod_cgroup")) == 4 and len(cm.calls_to("admit_pod")) == 1
    cm.inject_error("stop", RuntimeError("x"))
    cm.clear_errors()
    await cm.stop()
    with pytest.raises(ValueError, match="FakeContainerManager has no method"):
        cm.inject_error("create_cgroup", RuntimeError("x"))
    with pytest.raises(ValueError, match="times must be >= 1"):
        cm.inject_error("stop", RuntimeError("x"), times=0)


async def test_the_fake_agrees_with_the_reference() -> None:
    fake = FakeContainerManager(capacity=CAPACITY, reserved=REFERENCE_RESERVED)
    real = reference(CgroupV2Driver(files=FakeCgroupTree(), clock=FakeClock()))
    await fake.start()
    await real.start()
    assert fake.node_allocatable() == real.node_allocatable()
    pods = [
        pod("g", cpu="1", memory="1Gi", limit_cpu="1", limit_memory="1Gi"),
        pod("b", cpu="250m", memory="64Mi", limit_memory="128Mi"),
        pod("e"),
        pod("big", cpu="3", memory="5Gi"),
        pod("disk", **{"ephemeral-storage": "95Gi"}),
        pod("gpu", **{"example.com/gpu": "1", "limit_example.com/gpu": "1"}),
    ]
    for p in pods:
        assert fake.admit_pod(p, pods[:2]) == real.admit_pod(p, pods[:2]), p.name
        for c in p.spec.containers:
            assert fake.container_resources(p, c) == real.container_resources(p, c), p.name
        assert await fake.ensure_pod_cgroup(p) == await real.ensure_pod_cgroup(p)
    assert fake.admit_pod(pods[4], []).reason == "OutOfephemeral-storage"
    assert sorted(await fake.remove_orphaned_pod_cgroups(["b-uid"])) == sorted(
        await real.remove_orphaned_pod_cgroups(["b-uid"])
    )


async def test_test_controls() -> None:
    cm = FakeContainerManager(capacity={"cpu": "2", "memory": "2Gi"}, reserved={"memory": "3Gi"})
    # A reservation above capacity is refused as the kubelet refuses to start.
    with pytest.raises(ConfigurationError, match='Resource "memory" has a reservation of 3Gi'):
        await cm.start()
    assert cm.node_allocatable() == {"cpu": Q("2"), "memory": Q("0")}
    cm = FakeContainerManager(cgroup_root="/agent", cgroups_per_qos=True)
    g = pod("g", cpu="1", memory="1Gi", limit_cpu="1", limit_memory="1Gi")
    path = await cm.ensure_pod_cgroup(g)
    assert path == "/agent/kubepods/podg-uid" == cm.pod_cgroup_path(g)
    assert cm.started and cm.pod_cgroups == {"g-uid": path}
    config = cm.cgroup_config("g-uid")
    assert (config.cpu_shares, config.cpu_quota, config.memory) == (1024, 100000, 1 << 30)
    await cm.remove_pod_cgroup(g)
    assert cm.pod_cgroups == {}
    with pytest.raises(KeyError):
        cm.cgroup_config("g-uid")
    # The test's own admission policy answers first.
    cm.set_admit_handler(
        lambda p, active: AdmitResult.refuse("NodeAffinity", "no") if p.name == "g" else None
    )
    assert cm.admit_pod(g, []).reason == "NodeAffinity"
    assert cm.admit_pod(pod("e"), []).admit
    cm.set_admit_handler(None)
    assert cm.admit_pod(g, []).admit
    # Device plugins' additions, by container name.
    options = ContainerRunOptions(envs=(KeyValue("GPU", "0"),))
    cm.set_run_options("main", options)
    assert await cm.container_run_options(g, g.spec.containers[0]) == options
    without = FakeContainerManager(cgroups_per_qos=False)
    assert await without.ensure_pod_cgroup(g) == ""
    assert without.pod_cgroups == {}


def test_the_stub_refuses_with_the_kubelets_pods_message() -> None:
    # The kit found the stub's own wording ("pods, limit: N"); the kubelet's is the
    # scheduler's InsufficientResource message, as the reference manager gives it.
    stub = StubContainerManager(max_pods=2)
    a, b, c = pod("a"), pod("b"), pod("c")
    assert stub.admit_pod(c, [a]).admit
    assert stub.admit_pod(c, [a, c]).admit  # the pod itself is not counted
    assert stub.admit_pod(c, [a, b]) == AdmitResult.refuse(
        "OutOfpods", "Node didn't have enough resource: pods, requested: 1, used: 2, capacity: 2"
    )
