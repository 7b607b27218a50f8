"""The conformance kit of the :class:`~kubelet_kit.cm.ContainerManager` interface.

What the agent relies on from a container manager, checked with the kubelet's
semantics: ``start``/``stop`` are idempotent; allocatable is capacity less the
reservations; admission refuses a pod whose requests do not fit in allocatable
beside the active pods, with the kubelet's ``OutOfcpu``/``OutOfmemory``/
``OutOfpods`` reasons and "Node didn't have enough resource: ..." messages; pod
cgroups are placed by QoS class as the kubelet names them; removing a pod cgroup
is idempotent and harmless for unknown pods; housekeeping removes exactly the
cgroups of pods no longer active and returns their uids; container resources
are the kubelet's CPU shares, CFS quota and memory limit. Expected values are
written out in the checks, not computed by the project's own helpers, so a kit
run catches a mistake in them too.

Run it against your implementation::

    from kubelet_kit.testing.cm_kit import ContainerManagerConformance

    class TestMyManager(ContainerManagerConformance):
        def make(self):                 # a fresh manager per check
            return MyContainerManager(capacity=..., reserved=...)

        def kit_options(self):
            return {"reserved": {"cpu": "500m", "memory": "1Gi"}}

or ``await check_cm(MyContainerManager, reserved={...})``.

Options (``ctx.options``):

* ``reserved``: everything the implementation holds back from pods, per
  resource (system, kube and hard-eviction reservations summed), as quantities
  or their text. With it, allocatable must equal capacity less this exactly;
  without, allocatable is only checked to lie between zero and capacity.
* ``pod_cgroups`` (default True): the implementation makes pod cgroups. False
  claims it makes none: ``ensure_pod_cgroup`` must then return "" and the checks
  of cgroup placement and orphan removal are skipped.
* ``container_resources`` (default True): False claims ``container_resources``
  returns None (the runtime decides); its check is then skipped.
* ``admits_by_allocatable`` (default True): False claims admission looks only at
  the pod count; the cpu and memory refusals are then skipped.
* ``cgroup_root`` (default ""), ``cgroup_driver`` (``"cgroupfs"`` or
  ``"systemd"``), ``cpu_cfs_quota`` (default True), ``cpu_period`` (default
  100000): the kubelet settings the implementation was built with.
"""

from __future__ import annotations

import itertools
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

import attrs

from kubelet_kit.api import Pod, Quantity, load_pod
from kubelet_kit.cm.interfaces import ContainerManager
from kubelet_kit.testing.conformance import ConformanceReport
from kubelet_kit.testing.kit import KitCheck, KitContext, kit_test_class, run_kit

__all__ = ["CHECKS", "ContainerManagerConformance", "check_cm"]

Ctx = KitContext[ContainerManager]

_MIN_SHARES: Final = 2
_MAX_SHARES: Final = 262144
_MIN_QUOTA: Final = 1000
_GUARANTEED_OOM: Final = -997
_BESTEFFORT_OOM: Final = 1000
_UID_COUNTER = itertools.count(1)


# ------------------------------------------------------------------ helpers


def _pod(
    name: str,
    *,
    requests: Mapping[str, str] | None = None,
    limits: Mapping[str, str] | None = None,
) -> Pod:
    """A one-container pod with a fresh uid (API defaulting applied)."""
    uid = f"c0ffee00-0000-4000-8000-{next(_UID_COUNTER):012d}"
    return load_pod(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": "kit", "uid": uid},
            "spec": {
                "containers": [
                    {
                        "name": "main",
                        "image": "busybox",
                        "resources": {
                            "requests": dict(requests or {}),
                            "limits": dict(limits or {}),
                        },
                    }
                ]
            },
        }
    )


def _guaranteed() -> Pod:
    both = {"cpu": "100m", "memory": "32Mi"}
    return _pod("guaranteed", requests=both, limits=both)


def _burstable() -> Pod:
    return _pod("burstable", requests={"cpu": "100m"})


def _best_effort() -> Pod:
    return _pod("besteffort")


def _opt(ctx: Ctx, name: str, default: Any) -> Any:
    return ctx.options.get(name, default)


def _quantity(value: Quantity | str | int) -> Quantity:
    if isinstance(value, Quantity):
        return value
    if isinstance(value, int):
        return Quantity.from_int(value)
    return Quantity.parse(value)


async def _start(ctx: Ctx) -> ContainerManager:
    cm = ctx.subject
    ctx.at("start")
    await cm.start()
    return cm


def _expected_cgroup(ctx: Ctx, tier: tuple[str, ...], uid: str) -> str:
    """The kubelet's name for a pod cgroup, written out for the kit."""
    root: str = _opt(ctx, "cgroup_root", "")
    driver: str = _opt(ctx, "cgroup_driver", "cgroupfs")
    if driver == "systemd":
        last = root.rstrip("/").rsplit("/", 1)[-1].removesuffix(".slice")
        root_parts = [p.replace("_", "-") for p in last.split("-")] if last else []
        parts = [p.replace("-", "_") for p in (*root_parts, "kubepods", *tier, "pod" + uid)]
        slices = ["-".join(parts[: i + 1]) + ".slice" for i in range(len(parts))]
        return "/" + "/".join(slices)
    root_parts = [p for p in root.split("/") if p]
    return "/" + "/".join((*root_parts, "kubepods", *tier, "pod" + uid))


def _claims_cgroups(ctx: Ctx) -> bool:
    return bool(_opt(ctx, "pod_cgroups", True))


async def _skip_without_cgroups(ctx: Ctx) -> None:
    """Skip when the implementation claims to make no pod cgroups, after checking
    the claim: its ``ensure_pod_cgroup`` must then return ""."""
    if _claims_cgroups(ctx):
        return
    ctx.at("ensure_pod_cgroup of a manager making no cgroups")
    got = await ctx.subject.ensure_pod_cgroup(_burstable())
    ctx.expect_eq("ensure_pod_cgroup without pod cgroups", got, "")
    ctx.skip("the implementation makes no pod cgroups (pod_cgroups=False)")


def _expect_refusal(ctx: Ctx, what: str, result: Any, reason: str, message: str) -> None:
    ctx.expect(not result.admit, f"{what}: admitted, expected a refusal with {reason}")
    ctx.expect_eq(f"{what}: reason", result.reason, reason)
    ctx.expect_eq(f"{what}: message", result.message, message)


# ------------------------------------------------------------------ checks


async def _check_start_stop_idempotent(ctx: Ctx) -> None:
    cm = await _start(ctx)
    ctx.at("start again")
    await cm.start()
    ctx.at("stop")
    await cm.stop()
    ctx.at("stop again")
    await cm.stop()
    ctx.at("start after stop")
    await cm.start()
    ctx.at("ensure a pod cgroup after a restart")
    pod = _burstable()
    first = await cm.ensure_pod_cgroup(pod)
    await cm.stop()
    await cm.start()
    ctx.expect_eq("pod cgroup after stop and start", await cm.ensure_pod_cgroup(pod), first)


async def _check_capacity_and_allocatable(ctx: Ctx) -> None:
    cm = await _start(ctx)
    ctx.at("node_capacity")
    capacity = dict(cm.node_capacity())
    for name in ("cpu", "memory", "pods"):
        ctx.expect(name in capacity, f"capacity has no {name!r}: {sorted(capacity)}")
        ctx.expect(capacity[name].sign() > 0, f"capacity of {name} is {capacity[name]}")
    ctx.at("node_allocatable")
    allocatable = dict(cm.node_allocatable())
    ctx.expect_eq("resources of allocatable", sorted(allocatable), sorted(capacity))
    for name, value in allocatable.items():
        ctx.expect(value.sign() >= 0, f"allocatable {name} is negative: {value}")
        ctx.expect(
            value <= capacity[name],
            f"allocatable {name} ({value}) is more than its capacity ({capacity[name]})",
        )
    ctx.expect_eq("allocatable asked again", dict(cm.node_allocatable()), allocatable)
    reserved = _opt(ctx, "reserved", None)
    if reserved is None:
        return
    ctx.at("allocatable = capacity - reserved")
    held = {k: _quantity(v) for k, v in reserved.items()}
    for name, cap in capacity.items():
        want = cap - held[name] if name in held else cap
        if want.sign() < 0:
            want = Quantity.from_int(0)
        got = allocatable[name]
        ctx.expect(
            got == want,
            f"allocatable {name} (capacity {cap}, reserved {held.get(name, 0)}): "
            f"expected {want}, got {got}",
        )


async def _check_admits_what_fits(ctx: Ctx) -> None:
    cm = await _start(ctx)
    ctx.at("admit a BestEffort pod on an empty node")
    result = cm.admit_pod(_best_effort(), [])
    ctx.expect(result.admit, f"a BestEffort pod was refused: {result.reason}: {result.message}")
    allocatable = cm.node_allocatable()
    if not _opt(ctx, "admits_by_allocatable", True):
        return
    cpu = allocatable["cpu"].milli_value() if "cpu" in allocatable else 0
    memory = allocatable["memory"].value() if "memory" in allocatable else 0
    if cpu < 4 or memory < 4:
        ctx.skip(f"allocatable too small to split (cpu {cpu}m, memory {memory})")
    ctx.at("admit two pods that together fill allocatable")
    half = {"cpu": f"{cpu // 2}m", "memory": str(memory // 2)}
    first = _pod("first-half", requests=half)
    rest = {"cpu": f"{cpu - cpu // 2}m", "memory": str(memory - memory // 2)}
    second = _pod("second-half", requests=rest)
    result = cm.admit_pod(first, [])
    ctx.expect(result.admit, f"half of allocatable was refused: {result.reason}: {result.message}")
    result = cm.admit_pod(second, [first])
    ctx.expect(
        result.admit,
        f"the rest of allocatable beside the first half was refused: "
        f"{result.reason}: {result.message}",
    )
    ctx.at("admit the same pod again (an update)")
    result = cm.admit_pod(second, [first])
    ctx.expect(result.admit, f"the second admission was refused: {result.reason}")


async def _check_refuses_cpu_over_allocatable(ctx: Ctx) -> None:
    await _refusal(ctx, "cpu", lambda n: f"{n}m", lambda q: q.milli_value())


async def _check_refuses_memory_over_allocatable(ctx: Ctx) -> None:
    await _refusal(ctx, "memory", str, lambda q: q.value())


async def _refusal(ctx: Ctx, resource: str, text: Any, scaled: Any) -> None:
    cm = await _start(ctx)
    if not _opt(ctx, "admits_by_allocatable", True):
        ctx.skip("the implementation admits by pod count only (admits_by_allocatable=False)")
    allocatable = cm.node_allocatable()
    if resource not in allocatable:
        ctx.skip(f"no allocatable {resource}")
    cap: int = scaled(allocatable[resource])
    if cap < 4:
        ctx.skip(f"allocatable {resource} too small ({cap})")
    ctx.at(f"admit a pod asking for more {resource} than allocatable")
    alone = _pod("too-big", requests={resource: text(cap + 1)})
    _expect_refusal(
        ctx,
        f"{resource} request of {cap + 1} on an empty node",
        cm.admit_pod(alone, []),
        f"OutOf{resource}",
        f"Node didn't have enough resource: {resource}, requested: {cap + 1}, "
        f"used: 0, capacity: {cap}",
    )
    ctx.at(f"admit a pod whose {resource} fits alone but not beside the active pods")
    used = cap // 2 + 1
    active = [_pod("active", requests={resource: text(used)})]
    asked = cap // 2
    late = _pod("late", requests={resource: text(asked)})
    _expect_refusal(
        ctx,
        f"{resource} request of {asked} beside {used} used",
        cm.admit_pod(late, active),
        f"OutOf{resource}",
        f"Node didn't have enough resource: {resource}, requested: {asked}, "
        f"used: {used}, capacity: {cap}",
    )
    ctx.at("admit it once the active pod is gone")
    result = cm.admit_pod(late, [])
    ctx.expect(result.admit, f"refused on an empty node: {result.reason}: {result.message}")


async def _check_refuses_pods_over_allocatable(ctx: Ctx) -> None:
    cm = await _start(ctx)
    allocatable = cm.node_allocatable()
    if "pods" not in allocatable:
        ctx.skip("no allocatable pods")
    cap = allocatable["pods"].value()
    if cap > 1000:
        ctx.skip(f"allocatable pods too many to fill ({cap})")
    ctx.at(f"admit a pod beside {cap - 1} active pods")
    template = _best_effort()
    active = [
        attrs.evolve(
            template,
            metadata=attrs.evolve(template.metadata, uid=f"c0ffee00-0000-4000-9000-{i:012d}"),
        )
        for i in range(cap)
    ]
    new = _best_effort()
    result = cm.admit_pod(new, active[: cap - 1])
    ctx.expect(result.admit, f"the last free pod slot was refused: {result.reason}")
    ctx.at(f"admit a pod beside {cap} active pods")
    _expect_refusal(
        ctx,
        f"a pod beside {cap} active pods",
        cm.admit_pod(new, active),
        "OutOfpods",
        f"Node didn't have enough resource: pods, requested: 1, used: {cap}, capacity: {cap}",
    )


async def _check_ensure_pod_cgroup_idempotent(ctx: Ctx) -> None:
    cm = await _start(ctx)
    for pod in (_guaranteed(), _burstable(), _best_effort()):
        ctx.at(f"ensure_pod_cgroup of the {pod.name} pod")
        first = await cm.ensure_pod_cgroup(pod)
        ctx.at(f"ensure_pod_cgroup of the {pod.name} pod again")
        again = await cm.ensure_pod_cgroup(pod)
        ctx.expect_eq(f"cgroup of the {pod.name} pod the second time", again, first)


async def _check_pod_cgroup_named_by_qos(ctx: Ctx) -> None:
    cm = await _start(ctx)
    await _skip_without_cgroups(ctx)
    cases = ((_guaranteed(), ()), (_burstable(), ("burstable",)), (_best_effort(), ("besteffort",)))
    for pod, tier in cases:
        ctx.at(f"ensure_pod_cgroup of the {pod.name} pod")
        got = await cm.ensure_pod_cgroup(pod)
        ctx.expect_eq(f"cgroup of the {pod.name} pod", got, _expected_cgroup(ctx, tier, pod.uid))


async def _check_remove_pod_cgroup_idempotent(ctx: Ctx) -> None:
    cm = await _start(ctx)
    ctx.at("remove the cgroup of a pod never seen")
    await cm.remove_pod_cgroup(_burstable())
    pod = _guaranteed()
    ctx.at("ensure_pod_cgroup")
    await cm.ensure_pod_cgroup(pod)
    ctx.at("remove_pod_cgroup")
    await cm.remove_pod_cgroup(pod)
    ctx.at("remove_pod_cgroup again")
    await cm.remove_pod_cgroup(pod)
    if _claims_cgroups(ctx):
        ctx.at("housekeeping after the removal")
        left = await cm.remove_orphaned_pod_cgroups([])
        ctx.expect_eq("orphans found after remove_pod_cgroup", left, [])
    ctx.at("ensure_pod_cgroup of the removed pod (it came back)")
    again = await cm.ensure_pod_cgroup(pod)
    if _claims_cgroups(ctx):
        ctx.expect_eq("cgroup made again", again, _expected_cgroup(ctx, (), pod.uid))


async def _check_remove_orphaned_pod_cgroups(ctx: Ctx) -> None:
    cm = await _start(ctx)
    await _skip_without_cgroups(ctx)
    g, b, e = _guaranteed(), _burstable(), _best_effort()
    for pod in (g, b, e):
        ctx.at(f"ensure_pod_cgroup of the {pod.name} pod")
        await cm.ensure_pod_cgroup(pod)
    ctx.at("housekeeping with only the burstable pod active")
    removed = await cm.remove_orphaned_pod_cgroups([b.uid, "c0ffee00-0000-4000-a000-000000000000"])
    ctx.expect_eq("removed uids", sorted(removed), sorted([g.uid, e.uid]))
    ctx.at("housekeeping again")
    ctx.expect_eq("removed the second time", await cm.remove_orphaned_pod_cgroups([b.uid]), [])
    ctx.at("the removed pod comes back")
    await cm.ensure_pod_cgroup(g)
    ctx.at("housekeeping with no pod active")
    removed = await cm.remove_orphaned_pod_cgroups(iter(()))
    ctx.expect_eq("removed uids", sorted(removed), sorted([g.uid, b.uid]))


def _oom_burstable(memory_request: int, capacity: int) -> int:
    adj = 1000 - (1000 * memory_request) // capacity
    if adj < 3:
        return 3
    return 999 if adj == 1000 else adj


async def _check_container_resources(ctx: Ctx) -> None:
    cm = await _start(ctx)
    if not _opt(ctx, "container_resources", True):
        pod = _burstable()
        ctx.at("container_resources of a manager leaving them to the runtime")
        got = cm.container_resources(pod, pod.spec.containers[0])
        ctx.expect_eq("container_resources", got, None)
        ctx.skip("the implementation leaves container resources to the runtime")
    capacity = cm.node_capacity()
    ctx.expect("memory" in capacity, "capacity has no memory")
    mem_cap = capacity["memory"].value()
    period: int = _opt(ctx, "cpu_period", 100000)
    cfs = bool(_opt(ctx, "cpu_cfs_quota", True))
    mi = 1 << 20
    # name, requests, limits, (shares, cpu limit in milli-CPU, memory limit, oom_score_adj)
    cases: list[tuple[str, dict[str, str], dict[str, str], tuple[int, int, int, int]]] = [
        (
            "burstable",
            {"cpu": "250m", "memory": "64Mi"},
            {"cpu": "500m", "memory": "128Mi"},
            (256, 500, 128 * mi, _oom_burstable(64 * mi, mem_cap)),
        ),
        (
            "guaranteed",
            {"cpu": "1", "memory": "256Mi"},
            {"cpu": "1", "memory": "256Mi"},
            (1024, 1000, 256 * mi, _GUARANTEED_OOM),
        ),
        ("besteffort", {}, {}, (_MIN_SHARES, 0, 0, _BESTEFFORT_OOM)),
        ("cpu-limit-only", {}, {"cpu": "2"}, (2048, 2000, 0, 999)),
        ("tiny-cpu", {"cpu": "1m"}, {"cpu": "1m"}, (_MIN_SHARES, 1, 0, 999)),
        ("huge-cpu", {"cpu": "300"}, {}, (_MAX_SHARES, 0, 0, 999)),
    ]
    for name, requests, limits, (shares, limit_milli, memory, oom) in cases:
        pod = _pod(name, requests=requests, limits=limits)
        ctx.at(f"container_resources of the {name} container")
        got = cm.container_resources(pod, pod.spec.containers[0])
        ctx.expect(got is not None, f"no resources for the {name} container")
        assert got is not None
        quota = max(limit_milli * period // 1000, _MIN_QUOTA) if limit_milli else 0
        ctx.expect_eq(f"{name}: cpu_shares", got.cpu_shares, shares)
        ctx.expect_eq(f"{name}: cpu_period", got.cpu_period, period if cfs else 0)
        ctx.expect_eq(f"{name}: cpu_quota", got.cpu_quota, quota if cfs else 0)
        ctx.expect_eq(f"{name}: memory_limit_in_bytes", got.memory_limit_in_bytes, memory)
        ctx.expect_eq(f"{name}: oom_score_adj", got.oom_score_adj, oom)


async def _check_container_run_options_without_devices(ctx: Ctx) -> None:
    cm = await _start(ctx)
    pod = _burstable()
    ctx.at("container_run_options of a container asking for no device")
    options = await cm.container_run_options(pod, pod.spec.containers[0])
    ctx.expect_eq("devices", tuple(options.devices), ())
    ctx.at("container_run_options again")
    again = await cm.container_run_options(pod, pod.spec.containers[0])
    ctx.expect_eq("the second answer", again, options)


#: Every check of the kit, by name, in the order they run.
CHECKS: dict[str, KitCheck[ContainerManager]] = {
    "start_stop_idempotent": _check_start_stop_idempotent,
    "capacity_and_allocatable": _check_capacity_and_allocatable,
    "admits_what_fits": _check_admits_what_fits,
    "refuses_cpu_over_allocatable": _check_refuses_cpu_over_allocatable,
    "refuses_memory_over_allocatable": _check_refuses_memory_over_allocatable,
    "refuses_pods_over_allocatable": _check_refuses_pods_over_allocatable,
    "ensure_pod_cgroup_idempotent": _check_ensure_pod_cgroup_idempotent,
    "pod_cgroup_named_by_qos": _check_pod_cgroup_named_by_qos,
    "remove_pod_cgroup_idempotent": _check_remove_pod_cgroup_idempotent,
    "remove_orphaned_pod_cgroups": _check_remove_orphaned_pod_cgroups,
    "container_resources": _check_container_resources,
    "container_run_options_without_devices": _check_container_run_options_without_devices,
}


async def check_cm(
    factory: Callable[..., ContainerManager | Awaitable[ContainerManager]], **options: Any
) -> ConformanceReport:
    """Run the ContainerManager kit and raise if any check failed.

    Args:
        factory: Builds a fresh implementation per check: called with the check's
            :class:`~kubelet_kit.testing.kit.KitContext` if it takes a positional
            argument, else with none; may be async.
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


ContainerManagerConformance: type = kit_test_class(
    "ContainerManagerConformance",
    CHECKS,
    doc="""Base class for pytest: one test per check of the ContainerManager kit.

    Define ``make(self)`` (or ``make(self, ctx)``) returning a fresh
    implementation, and optionally ``kit_options(self)`` returning the kit's
    options (see :mod:`kubelet_kit.testing.cm_kit`).
    """,
)
