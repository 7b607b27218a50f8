"""cm conversions against upstream Kubernetes' own test tables (as data).

Sources: pkg/kubelet/cm/helpers_linux_test.go (TestMilliCPUToShares,
TestMilliCPUToQuota, TestResourceConfigForPod, TestResourceConfigForPodWithEnforce-
MemoryQoS), pkg/kubelet/qos/policy_test.go (TestGetContainerOOMScoreAdjust),
opencontainers/cgroups utils_test.go (TestConvertCPUSharesToCgroupV2Value, both
formulas) and kuberuntime's TestMilliCPUToQuota.
"""

from __future__ import annotations

from typing import Any

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

import kubelet_kit.cm as cm
from kubelet_kit.api import Container, Pod, PodSpec, Quantity, ResourceRequirements
from kubelet_kit.api.meta import ObjectMeta
from kubelet_kit.cm.cpumanager import format_cpuset, parse_cpuset
from kubelet_kit.cm.helpers import (
    MAX_SHARES,
    MIN_SHARES,
    ResourceConfig,
    container_linux_resources,
    cpu_shares_to_weight_log,
    cpu_weight_to_shares,
    qos_memory_limits,
    resource_config_for_pod,
)

# ----------------------------------------------------------------- shares / quota

# (milli CPU, shares): TestMilliCPUToShares
SHARES = [
    (0, MIN_SHARES),
    (1, MIN_SHARES),
    (2, MIN_SHARES),
    (3, 3),
    (100, 102),
    (500, 512),
    (1000, 1024),
    (255999, 255999 * 1024 // 1000),
    (256000, MAX_SHARES),
    (256001, MAX_SHARES),
    (1000000, MAX_SHARES),
    (-1, MIN_SHARES),
    (-1000000, MIN_SHARES),
]


@pytest.mark.parametrize(("milli", "shares"), SHARES)
def test_milli_cpu_to_shares(milli: int, shares: int) -> None:
    assert cm.milli_cpu_to_shares(milli) == shares


# (milli CPU, quota) at period 100000: TestMilliCPUToQuota
QUOTAS = [
    (0, 0),
    (5, 1000),
    (9, 1000),
    (10, 1000),
    (200, 20000),
    (500, 50000),
    (1000, 100000),
    (1500, 150000),
]


@pytest.mark.parametrize(("milli", "quota"), QUOTAS)
def test_milli_cpu_to_quota(milli: int, quota: int) -> None:
    assert cm.milli_cpu_to_quota(milli, 100000) == quota


def test_quota_with_a_tuned_period_keeps_the_kernel_minimum() -> None:
    # helpers_linux_test: 100m over a 5 ms period would be 500 us; the floor is 1000.
    assert cm.milli_cpu_to_quota(100, 5000) == 1000
    assert cm.milli_cpu_to_quota(200, 5000) == 1000
    assert cm.milli_cpu_to_quota(2000, 5000) == 10000


# ----------------------------------------------------------------- v2 weight

# libcontainer (linear): 0 -> 0 (unset), 2 -> 1, 262144 -> 10000.
LINEAR = [(0, 0), (2, 1), (262144, 10000), (1024, 39), (102, 4), (51, 2)]


@pytest.mark.parametrize(("shares", "weight"), LINEAR)
def test_cpu_shares_to_weight_linear(shares: int, weight: int) -> None:
    assert cm.cpu_shares_to_weight(shares) == weight


# opencontainers/cgroups v0.0.5 (log-based), min/default/max and around them.
LOG = [
    (0, 0),
    (1, 1),
    (2, 1),
    (3, 2),
    (1024, 100),
    (262143, 10000),
    (262144, 10000),
    (262145, 10000),
]


@pytest.mark.parametrize(("shares", "weight"), LOG)
def test_cpu_shares_to_weight_log(shares: int, weight: int) -> None:
    assert cpu_shares_to_weight_log(shares) == weight


# TestCPUSharesEqualAfterV2RoundTrip: 50m -> 51 -> weight 2 -> 28; 100m -> 102 -> 4 -> 80.
@pytest.mark.parametrize(("milli", "readback"), [(50, 28), (100, 80)])
def test_weight_round_trip_is_lossy_like_the_kubelet(milli: int, readback: int) -> None:
    shares = cm.milli_cpu_to_shares(milli)
    assert cpu_weight_to_shares(cm.cpu_shares_to_weight(shares)) == readback


# ----------------------------------------------------------------- pods

Res = tuple[str, str]


def _rl(cpu: str, mem: str) -> dict[str, Quantity]:
    out = {}
    if cpu:
        out["cpu"] = Quantity.parse(cpu)
    if mem:
        out["memory"] = Quantity.parse(mem)
    return out


def _c(req: Res, lim: Res, name: str = "c", **kw: Any) -> Container:
    return Container(
        name=name,
        image="i",
        resources=ResourceRequirements(requests=_rl(*req), limits=_rl(*lim)),
        **kw,
    )


def _pod(
    containers: list[Container],
    init: list[Container] | None = None,
    pod_level: tuple[Res, Res] | None = None,
    **spec: Any,
) -> Pod:
    renamed = [_named(c, f"c{i}") for i, c in enumerate(containers)]
    resources = None
    if pod_level is not None:
        resources = ResourceRequirements(requests=_rl(*pod_level[0]), limits=_rl(*pod_level[1]))
    return Pod(
        metadata=ObjectMeta(name="p", uid="u1"),
        spec=PodSpec(
            containers=tuple(renamed),
            init_containers=tuple(init or ()),
            resources=resources,
            **spec,
        ),
    )


def _named(c: Container, name: str) -> Container:
    return attrs.evolve(c, name=name) if c.name == "c" else c


NONE: Res = ("", "")
MI = 1024 * 1024
B_SHARES = cm.milli_cpu_to_shares(100)
B_PARTIAL = cm.milli_cpu_to_shares(200)
B_QUOTA = cm.milli_cpu_to_quota(200, 100000)
G_QUOTA = cm.milli_cpu_to_quota(100, 100000)
G_TUNED = cm.milli_cpu_to_quota(100, 5000)

# description, containers, init, pod-level, enforce, period, expected (shares, quota,
# period, memory): TestResourceConfigForPod (the non-DRA cases).
POD_CASES: list[tuple[Any, ...]] = [
    ("besteffort", [(NONE, NONE)], [], None, True, 100000, (MIN_SHARES, None, None, None)),
    (
        "burstable-no-limits",
        [(("100m", "100Mi"), NONE)],
        [],
        None,
        True,
        100000,
        (B_SHARES, None, None, None),
    ),
    (
        "burstable-with-limits",
        [(("100m", "100Mi"), ("200m", "200Mi"))],
        [],
        None,
        True,
        100000,
        (B_SHARES, B_QUOTA, 100000, 200 * MI),
    ),
    (
        "burstable-with-limits-no-cpu-enforcement",
        [(("100m", "100Mi"), ("200m", "200Mi"))],
        [],
        None,
        False,
        100000,
        (B_SHARES, -1, 100000, 200 * MI),
    ),
    (
        "burstable-partial-limits",
        [(("100m", "100Mi"), ("200m", "200Mi")), (("100m", "100Mi"), NONE)],
        [],
        None,
        True,
        100000,
        (B_PARTIAL, None, None, None),
    ),
    (
        "burstable-with-limits-with-tuned-quota",
        [(("100m", "100Mi"), ("200m", "200Mi"))],
        [],
        None,
        True,
        5000,
        (B_SHARES, 1000, 5000, 200 * MI),
    ),
    (
        "burstable-with-limits-no-cpu-enforcement-with-tuned-quota",
        [(("100m", "100Mi"), ("200m", "200Mi"))],
        [],
        None,
        False,
        5000,
        (B_SHARES, -1, 5000, 200 * MI),
    ),
    (
        "burstable-partial-limits-with-tuned-quota",
        [(("100m", "100Mi"), ("200m", "200Mi")), (("100m", "100Mi"), NONE)],
        [],
        None,
        True,
        5000,
        (B_PARTIAL, None, None, None),
    ),
    (
        "guaranteed",
        [(("100m", "100Mi"), ("100m", "100Mi"))],
        [],
        None,
        True,
        100000,
        (B_SHARES, G_QUOTA, 100000, 100 * MI),
    ),
    (
        "guaranteed-no-cpu-enforcement",
        [(("100m", "100Mi"), ("100m", "100Mi"))],
        [],
        None,
        False,
        100000,
        (B_SHARES, -1, 100000, 100 * MI),
    ),
    (
        "guaranteed-with-tuned-quota",
        [(("100m", "100Mi"), ("100m", "100Mi"))],
        [],
        None,
        True,
        5000,
        (B_SHARES, G_TUNED, 5000, 100 * MI),
    ),
    (
        "guaranteed-no-cpu-enforcement-with-tuned-quota",
        [(("100m", "100Mi"), ("100m", "100Mi"))],
        [],
        None,
        False,
        5000,
        (B_SHARES, -1, 5000, 100 * MI),
    ),
    (
        "burstable-partial-limits-with-init-containers",
        [(("100m", "100m"), ("100m", "100Mi")), (("100m", "100m"), NONE)],
        [(("100m", "100m"), ("100m", "100Mi")), (("100m", "100m"), NONE)],
        None,
        True,
        5000,
        (B_PARTIAL, None, None, None),
    ),
    (
        "besteffort-with-pod-level-resources-enabled",
        [(NONE, NONE)],
        [],
        (NONE, NONE),
        True,
        100000,
        (MIN_SHARES, None, None, None),
    ),
    (
        "burstable-with-pod-level-requests",
        [(NONE, NONE)],
        [],
        (("100m", "100Mi"), NONE),
        True,
        100000,
        (B_SHARES, None, None, None),
    ),
    (
        "burstable-with-pod-and-container-level-requests",
        [(("10m", "50Mi"), NONE)],
        [],
        (("100m", "100Mi"), NONE),
        True,
        100000,
        (B_SHARES, None, None, None),
    ),
    (
        "burstable-with-pod-level-resources",
        [(NONE, NONE)],
        [],
        (("100m", "100Mi"), ("200m", "200Mi")),
        True,
        100000,
        (B_SHARES, B_QUOTA, 100000, 200 * MI),
    ),
    (
        "burstable-with-pod-and-container-level-resources",
        [(("10m", "50Mi"), ("50m", "100Mi"))],
        [],
        (("100m", "100Mi"), ("200m", "200Mi")),
        True,
        100000,
        (B_SHARES, B_QUOTA, 100000, 200 * MI),
    ),
    (
        "burstable-with-partial-pod-level-resources-limits",
        [(("200m", "200Mi"), ("200m", "200Mi"))],
        [],
        (("200m", "300Mi"), NONE),
        True,
        100000,
        (B_PARTIAL, B_QUOTA, 100000, 200 * MI),
    ),
    (
        "guaranteed-with-pod-level-resources",
        [(NONE, NONE)],
        [],
        (("100m", "100Mi"), ("100m", "100Mi")),
        True,
        100000,
        (B_SHARES, G_QUOTA, 100000, 100 * MI),
    ),
    (
        "guaranteed-with-pod-and-container-level-resources",
        [(("10m", "50Mi"), ("50m", "100Mi"))],
        [],
        (("100m", "100Mi"), ("100m", "100Mi")),
        True,
        100000,
        (B_SHARES, G_QUOTA, 100000, 100 * MI),
    ),
    (
        "guaranteed-pod-level-resources-with-init-containers",
        [(("10m", "50Mi"), ("50m", "50Mi"))],
        [(("10m", "50Mi"), ("50m", "50Mi"))],
        (("100m", "100Mi"), ("100m", "100Mi")),
        True,
        100000,
        (B_SHARES, G_QUOTA, 100000, 100 * MI),
    ),
]


@pytest.mark.parametrize(
    ("desc", "containers", "init", "pod_level", "enforce", "period", "expected"),
    POD_CASES,
    ids=[c[0] for c in POD_CASES],
)
def test_resource_config_for_pod(
    desc: str,
    containers: list[tuple[Res, Res]],
    init: list[tuple[Res, Res]],
    pod_level: Any,
    enforce: bool,
    period: int,
    expected: tuple[Any, ...],
) -> None:
    pod = _pod(
        [_c(r, lim) for r, lim in containers],
        [_c(r, lim, name=f"i{i}") for i, (r, lim) in enumerate(init)],
        pod_level,
    )
    rc = resource_config_for_pod(pod, enforce_cpu_limits=enforce, cpu_period=period)
    assert (rc.cpu_shares, rc.cpu_quota, rc.cpu_period, rc.memory) == expected


# TestResourceConfigForPodWithEnforceMemoryQoS (v1.27-v1.35): unified files.
MEMQOS = [
    ("besteffort", [(NONE, NONE)], {}),
    ("burstable-no-limits", [(("100m", "100Mi"), NONE)], {"memory.min": "104857600"}),
    (
        "burstable-with-limits",
        [(("100m", "100Mi"), ("200m", "200Mi"))],
        {"memory.min": "104857600"},
    ),
    (
        "burstable-partial-limits",
        [(("100m", "100Mi"), ("200m", "200Mi")), (("100m", "100Mi"), NONE)],
        {"memory.min": "209715200"},
    ),
    ("guaranteed", [(("100m", "100Mi"), ("100m", "100Mi"))], {"memory.min": "104857600"}),
]


@pytest.mark.parametrize(("desc", "containers", "unified"), MEMQOS, ids=[c[0] for c in MEMQOS])
def test_memory_qos_unified(
    desc: str, containers: list[tuple[Res, Res]], unified: dict[str, str]
) -> None:
    pod = _pod([_c(r, lim) for r, lim in containers])
    assert dict(resource_config_for_pod(pod, enforce_memory_qos=True).unified) == unified


def test_pod_pids_limit_rides_along_when_positive() -> None:
    pod = _pod([_c(NONE, NONE)])
    assert resource_config_for_pod(pod, pids_limit=100).pids_limit == 100
    assert resource_config_for_pod(pod, pids_limit=-1).pids_limit is None


# ----------------------------------------------------------------- oom_score_adj

STD = 8000000000
# pod containers, priority, memory capacity, low, high: TestGetContainerOOMScoreAdjust
OOM = [
    ("cpuLimit", ((NONE, ("10", ""))), None, 4000000000, 999, 999),
    ("memoryLimitCPURequest", ((("0", ""), ("", "10G"))), None, 8000000000, 999, 999),
    ("zeroMemoryLimit", ((NONE, ("", "0"))), None, 7230457451, 1000, 1000),
    ("noRequestLimit", ((NONE, NONE)), None, 4000000000, 1000, 1000),
    ("equalRequestLimitCPUMemory", ((("5m", "10G"), ("5m", "10G"))), None, 123456789, -997, -997),
    (
        "cpuUnlimitedMemoryLimitedWithRequests",
        ((("5m", str(STD // 2)), ("", "10G"))),
        None,
        STD,
        495,
        505,
    ),
    ("requestNoLimit", ((("5m", str(STD - 1)), NONE)), None, STD, 3, 3),
]


@pytest.mark.parametrize(
    ("desc", "res", "prio", "cap", "low", "high"), OOM, ids=[c[0] for c in OOM]
)
def test_qos_oom_score_adj(
    desc: str, res: tuple[Res, Res], prio: Any, cap: int, low: int, high: int
) -> None:
    pod = _pod([_c(*res)])
    adj = cm.qos_oom_score_adj(pod, pod.spec.containers[0], cap)
    assert low <= adj <= high


def test_node_critical_pod_gets_the_guaranteed_score() -> None:
    pod = _pod([_c(NONE, NONE)], priority=2000001000, priority_class_name="system-node-critical")
    assert cm.qos_oom_score_adj(pod, pod.spec.containers[0], 4000000000) == -997
    # Critical by priority alone is not node-critical: a BestEffort pod stays at 1000.
    pod = _pod([_c(NONE, NONE)], priority=2000001000)
    assert cm.qos_oom_score_adj(pod, pod.spec.containers[0], 4000000000) == 1000


def test_sidecar_scores_no_higher_than_the_smallest_regular_container() -> None:
    sidecar = _c(("", "1Gi"), NONE, name="side", restart_policy="Always")
    pod = _pod(
        [_c(("", "4Gi"), NONE, name="big"), _c(("", "2Gi"), NONE, name="small")], init=[sidecar]
    )
    cap = 8 * 1024**3
    # Its own request would give 875; the smallest regular container gives 750.
    assert cm.qos_oom_score_adj(pod, sidecar, cap) == 750
    assert cm.qos_oom_score_adj(pod, pod.spec.containers[1], cap) == 750


# ----------------------------------------------------------------- container resources


def test_container_resources_follow_request_limit_and_quota() -> None:
    pod = _pod([_c(("250m", "64Mi"), ("500m", "128Mi"))])
    r = container_linux_resources(pod, pod.spec.containers[0], memory_capacity_bytes=8 * 1024**3)
    assert (r.cpu_shares, r.cpu_quota, r.cpu_period, r.memory_limit_in_bytes) == (
        256,
        50000,
        100000,
        128 * MI,
    )
    assert r.oom_score_adj == 1000 - (1000 * 64 * MI) // (8 * 1024**3)


def test_container_shares_default_to_the_limit_without_a_request() -> None:
    pod = _pod([_c(NONE, ("2", ""))])
    r = container_linux_resources(
        pod, pod.spec.containers[0], memory_capacity_bytes=1 << 30, cpu_cfs_quota=False
    )
    assert (r.cpu_shares, r.cpu_quota, r.cpu_period) == (2048, 0, 0)


def test_best_effort_container_gets_min_shares_and_period_without_quota() -> None:
    pod = _pod([_c(NONE, NONE)])
    r = container_linux_resources(pod, pod.spec.containers[0], memory_capacity_bytes=1 << 30)
    assert (r.cpu_shares, r.cpu_quota, r.cpu_period, r.oom_score_adj) == (2, 0, 100000, 1000)


# ----------------------------------------------------------------- QoS tiers


def test_qos_reserved_memory_limits() -> None:
    limits = qos_memory_limits(10_000, {"Guaranteed": 4000, "Burstable": 2000}, 50)
    assert limits == {"Burstable": 8000, "BestEffort": 7000}
    assert qos_memory_limits(0, {"Guaranteed": 1}, 100) == {}


def test_resource_config_is_a_value() -> None:
    assert ResourceConfig(cpu_shares=2) == ResourceConfig(cpu_shares=2)


def test_cm_all_is_honest_and_imports_no_other_subsystem() -> None:
    import subprocess
    import sys

    for name in cm.__all__:
        assert hasattr(cm, name), name
    code = (
        "import sys, kubelet_kit.cm; "
        "bad = [m for m in sys.modules if m.split('.')[:2] in ("
        "['kubelet_kit','pleg'], ['kubelet_kit','cri'], ['kubelet_kit','volume'], "
        "['kubelet_kit','prober'], ['kubelet_kit','eviction'], ['kubelet_kit','status'], "
        "['kubelet_kit','podsync'], ['kubelet_kit','testing'], ['kubelet_kit','kubelet'])]; "
        "print(bad); sys.exit(1 if bad else 0)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout


# kuberuntime TestCalculateLinuxResources (cpuCFSQuota on): request, limit, memory limit,
# expected (period, quota, shares, memory).
CALC = [
    ("Request128MBLimit256MB", "1", "2", "128Mi", (100000, 200000, 1024, 134217728)),
    ("RequestNoMemory", "2", "8", "0", (100000, 800000, 2048, 0)),
    ("RequestNilCPU", None, "2", "0", (100000, 200000, 2048, 0)),
    ("RequestZeroCPU", "0", "2", "0", (100000, 200000, 2, 0)),
]


@pytest.mark.parametrize(("name", "req", "lim", "mem", "expected"), CALC, ids=[c[0] for c in CALC])
def test_calculate_linux_resources(
    name: str, req: str | None, lim: str, mem: str, expected: tuple[int, int, int, int]
) -> None:
    requests = {"cpu": Quantity.parse(req)} if req is not None else {}
    limits = {"cpu": Quantity.parse(lim), "memory": Quantity.parse(mem)}
    c = Container(
        name="foo",
        image="busybox",
        resources=ResourceRequirements(requests=requests, limits=limits),
    )
    pod = _pod([c])
    r = container_linux_resources(pod, pod.spec.containers[0], memory_capacity_bytes=1 << 34)
    assert (r.cpu_period, r.cpu_quota, r.cpu_shares, r.memory_limit_in_bytes) == expected


# kuberuntime TestGenerateLinuxContainerResources (no container status; memory capacity
# 17179860387; cpuCFSQuota off): limits, requests, (shares, memory, oom_score_adj).
GEN = [
    ("guaranteed", ("250m", "500Mi"), ("250m", "500Mi"), (256, 524288000, -997)),
    ("burstable", ("500m", "750Mi"), ("250m", "500Mi"), (256, 786432000, 970)),
    ("best-effort", NONE, NONE, (2, 0, 1000)),
]


@pytest.mark.parametrize(("name", "lim", "req", "expected"), GEN, ids=[c[0] for c in GEN])
def test_generate_linux_container_resources(
    name: str, lim: Res, req: Res, expected: tuple[int, int, int]
) -> None:
    pod = _pod([_c(req, lim, name="c1")])
    r = container_linux_resources(
        pod, pod.spec.containers[0], memory_capacity_bytes=17179860387, cpu_cfs_quota=False
    )
    assert (r.cpu_shares, r.memory_limit_in_bytes, r.oom_score_adj) == expected
    assert (r.cpu_period, r.cpu_quota) == (0, 0)


# ----------------------------------------------------------------- properties


@given(st.integers(min_value=-(10**6), max_value=10**7), st.integers(min_value=0, max_value=10**7))
def test_shares_stay_in_bounds_and_grow_with_cpu(a: int, b: int) -> None:
    lo, hi = sorted((a, b))
    assert MIN_SHARES <= cm.milli_cpu_to_shares(lo) <= cm.milli_cpu_to_shares(hi) <= MAX_SHARES


@given(
    st.integers(min_value=MIN_SHARES, max_value=MAX_SHARES),
    st.integers(min_value=MIN_SHARES, max_value=MAX_SHARES),
)
def test_both_weight_formulas_stay_in_range_and_grow(a: int, b: int) -> None:
    lo, hi = sorted((a, b))
    for convert in (cm.cpu_shares_to_weight, cpu_shares_to_weight_log):
        assert 1 <= convert(lo) <= convert(hi) <= 10000


@given(st.integers(min_value=1, max_value=10**6), st.sampled_from([1000, 5000, 100000]))
def test_quota_never_below_the_kernel_minimum(milli: int, period: int) -> None:
    assert cm.milli_cpu_to_quota(milli, period) >= 1000


@given(st.frozensets(st.integers(min_value=0, max_value=255)))
def test_cpuset_format_round_trips(cpus: frozenset[int]) -> None:
    assert parse_cpuset(format_cpuset(cpus)) == cpus
