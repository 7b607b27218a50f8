"""Cgroup naming and node allocatable, with upstream's test tables as data.

Naming: pkg/kubelet/cm/cgroup_manager_linux_test.go (TestCgroupNameToSystemd*,
TestCgroupNameToCgroupfs, TestParseSystemdToCgroupName, TestNewCgroupName) and
helpers_linux_test.go (TestNodeAllocatableRoot, TestGetPodCgroupNameSuffix).
"""

from __future__ import annotations

import posixpath

import pytest

from kubelet_kit.api import Container, Pod, PodSpec, Quantity, ResourceRequirements
from kubelet_kit.api.meta import ObjectMeta
from kubelet_kit.cm.allocatable import (
    hard_eviction_reservation,
    node_allocatable,
    node_allocatable_reservation,
    parse_reserved,
    validate_reservations,
)
from kubelet_kit.cm.naming import (
    cgroup_name_to_path,
    expand_slice,
    new_cgroup_name,
    parse_cgroupfs,
    parse_systemd,
    pod_cgroup_name,
    qos_cgroup_name,
    root_cgroup_name,
    to_cgroupfs,
    to_systemd,
)
from kubelet_kit.errors import ConfigurationError

POD_UUID = "pod-6c1a4e95-6bb6-11e6-bc26-28d2444e470d"
SYSTEMD_BASENAME = [
    ((), "/"),
    (("system",), "system.slice"),
    (("system", "Burstable"), "system-Burstable.slice"),
    (("Burstable", "pod-123"), "Burstable-pod_123.slice"),
    (("test", "a", "b"), "test-a-b.slice"),
    (("test", "a", "b", "Burstable"), "test-a-b-Burstable.slice"),
    (("Burstable",), "Burstable.slice"),
    (("BestEffort", POD_UUID), "BestEffort-pod_6c1a4e95_6bb6_11e6_bc26_28d2444e470d.slice"),
]


@pytest.mark.parametrize(("name", "expected"), SYSTEMD_BASENAME)
def test_systemd_basename(name: tuple[str, ...], expected: str) -> None:
    assert (posixpath.basename(to_systemd(name)) or "/") == expected


SYSTEMD = [
    ((), "/"),
    (("Burstable",), "/Burstable.slice"),
    (("Burstable", "pod-123"), "/Burstable.slice/Burstable-pod_123.slice"),
    (
        ("BestEffort", POD_UUID),
        "/BestEffort.slice/BestEffort-pod_6c1a4e95_6bb6_11e6_bc26_28d2444e470d.slice",
    ),
    (("kubepods",), "/kubepods.slice"),
    # TestCgroupNameWithEmptyPartToSystemd
    (("Burstable", ""), "/Burstable.slice"),
    (("", "Burstable", "pod-123"), "/Burstable.slice/Burstable-pod_123.slice"),
    (
        ("BestEffort", "", POD_UUID, ""),
        "/BestEffort.slice/BestEffort-pod_6c1a4e95_6bb6_11e6_bc26_28d2444e470d.slice",
    ),
    (("kubepods", ""), "/kubepods.slice"),
    # The docstring example of ToSystemd.
    (
        ("kubepods", "burstable", "pod1234-abcd-5678-efgh"),
        "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1234_abcd_5678_efgh.slice",
    ),
]


@pytest.mark.parametrize(("name", "expected"), SYSTEMD)
def test_to_systemd(name: tuple[str, ...], expected: str) -> None:
    assert to_systemd(name) == expected


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ((), "/"),
        (("Burstable",), "/Burstable"),
        (("kubepods", "burstable", "pod1"), "/kubepods/burstable/pod1"),
    ],
)
def test_to_cgroupfs(name: tuple[str, ...], expected: str) -> None:
    assert to_cgroupfs(name) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [("/test", ("test",)), ("/test.slice", ("test",)), ("/a.slice/a-b_c.slice", ("a", "b-c"))],
)
def test_parse_systemd(text: str, expected: tuple[str, ...]) -> None:
    assert parse_systemd(text) == expected


def test_new_cgroup_name_copies_and_checks_parts() -> None:
    a = parse_cgroupfs("/a/")
    assert a == ("a", "")
    ab = new_cgroup_name(a, "b")
    abc = new_cgroup_name(ab, "c")
    new_cgroup_name(ab, "d")
    assert ab == ("a", "", "b") and abc == ("a", "", "b", "c")
    for bad in ("x/y", "x_y"):
        with pytest.raises(ValueError, match="invalid character"):
            new_cgroup_name((), bad)


@pytest.mark.parametrize(
    ("slice_name", "expected"),
    [
        ("-.slice", "/"),
        ("a.slice", "/a.slice"),
        ("a-b-c.slice", "/a.slice/a-b.slice/a-b-c.slice"),
    ],
)
def test_expand_slice(slice_name: str, expected: str) -> None:
    assert expand_slice(slice_name) == expected


@pytest.mark.parametrize("bad", [".slice", "a", "a/b.slice", "a--b.slice", "-a.slice"])
def test_expand_slice_refuses_bad_names(bad: str) -> None:
    with pytest.raises(ValueError, match="invalid slice name"):
        expand_slice(bad)


# TestNodeAllocatableRoot: cgroupRoot, cgroupsPerQOS, driver, expected.
ROOTS = [
    ("/", True, "cgroupfs", "/kubepods"),
    ("/", False, "cgroupfs", "/"),
    ("/custom", True, "cgroupfs", "/custom/kubepods"),
    ("/custom", False, "cgroupfs", "/custom"),
    ("/", True, "systemd", "/kubepods.slice"),
    ("", True, "cgroupfs", "/kubepods"),
]


@pytest.mark.parametrize(("root", "per_qos", "driver", "expected"), ROOTS)
def test_node_allocatable_root(root: str, per_qos: bool, driver: str, expected: str) -> None:
    base = root_cgroup_name(root, driver)  # type: ignore[arg-type]
    name = (*base, "kubepods") if per_qos else base
    assert cgroup_name_to_path(name, driver) == expected  # type: ignore[arg-type]


def _pod(uid: str, req: dict[str, str], lim: dict[str, str]) -> Pod:
    res = ResourceRequirements(
        requests={k: Quantity.parse(v) for k, v in req.items()},
        limits={k: Quantity.parse(v) for k, v in lim.items()},
    )
    return Pod(
        metadata=ObjectMeta(name="p", uid=uid),
        spec=PodSpec(containers=(Container(name="c", image="i", resources=res),)),
    )


@pytest.mark.parametrize(
    ("req", "lim", "cgroupfs", "systemd"),
    [
        (
            {"cpu": "1", "memory": "1Gi"},
            {"cpu": "1", "memory": "1Gi"},
            "/kubepods/pod12-ab",
            "/kubepods.slice/kubepods-pod12_ab.slice",
        ),
        (
            {"cpu": "1"},
            {},
            "/kubepods/burstable/pod12-ab",
            "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod12_ab.slice",
        ),
        (
            {},
            {},
            "/kubepods/besteffort/pod12-ab",
            "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod12_ab.slice",
        ),
    ],
)
def test_pod_cgroup_names(
    req: dict[str, str], lim: dict[str, str], cgroupfs: str, systemd: str
) -> None:
    name = pod_cgroup_name(_pod("12-ab", req, lim))
    assert to_cgroupfs(name) == cgroupfs
    assert to_systemd(name) == systemd


def test_empty_uid_gives_the_bare_prefix() -> None:
    assert pod_cgroup_name(_pod("", {}, {}))[-1] == "pod"
    assert qos_cgroup_name(("r",), "Guaranteed") == ("r", "kubepods")


# ----------------------------------------------------------------- node allocatable

Q = Quantity.parse


def _cap(**kw: str) -> dict[str, Quantity]:
    return {k.replace("_", "-"): Q(v) for k, v in kw.items()}


def test_allocatable_subtracts_reservations_and_hard_eviction() -> None:
    cap = _cap(cpu="4", memory="10Gi", ephemeral_storage="100Gi", pods="110")
    alloc = node_allocatable(
        cap,
        system_reserved={"cpu": Q("500m"), "memory": Q("1Gi")},
        kube_reserved={"cpu": Q("100m")},
        eviction_hard=None,
    )
    assert alloc["cpu"] == Q("3400m")
    assert alloc["memory"] == Q("10Gi") - Q("1Gi") - Q("100Mi")
    # 10% held as a float32 fraction: 100Gi * 0.1f truncated, not exactly 10Gi.
    assert alloc["ephemeral-storage"] == Q("100Gi") - Q("10737418400")
    assert alloc["pods"] == Q("110")


def test_given_eviction_hard_replaces_the_defaults() -> None:
    cap = _cap(memory="1Gi", ephemeral_storage="10Gi")
    res = hard_eviction_reservation({"memory.available": "200Mi"}, cap)
    assert res == {"memory": Q("200Mi")}
    assert (
        hard_eviction_reservation({"memory.available": "0%", "nodefs.available": "100%"}, cap) == {}
    )
    assert hard_eviction_reservation({"memory.available": "50%"}, cap) == {"memory": Q("512Mi")}


def test_allocatable_never_goes_negative() -> None:
    alloc = node_allocatable(_cap(memory="50Mi"), eviction_hard=None)
    assert alloc["memory"] == Q("0")


def test_reservation_above_capacity_is_refused() -> None:
    cap = _cap(cpu="2", memory="1Gi")
    res = node_allocatable_reservation(cap, system_reserved={"cpu": Q("3")})
    with pytest.raises(
        ConfigurationError,
        match=r'Resource "cpu" has a reservation of 3 but '
        r"capacity of 2",
    ):
        validate_reservations(cap, res)


def test_bad_reserved_values_name_their_field() -> None:
    with pytest.raises(ConfigurationError, match=r"systemReserved\[memory\]"):
        parse_reserved({"memory": "lots"}, "systemReserved")
    with pytest.raises(ConfigurationError, match=r"kubeReserved\[cpu\].*>= 0"):
        parse_reserved({"cpu": "-1"}, "kubeReserved")


@pytest.mark.parametrize(
    ("cgroup_parent", "expected"),
    [
        # The kubelet's systemd driver hands runtimes the expanded path.
        (
            "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1.slice",
            "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1.slice",
        ),
        (
            "kubepods-burstable-pod1.slice",
            "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1.slice",
        ),
        ("/kubepods/burstable/pod1", "/kubepods/burstable/pod1"),
    ],
)
def test_a_cgroup_parent_is_read_as_a_path_or_a_slice_name(
    cgroup_parent: str, expected: str
) -> None:
    from kubelet_kit.container.cgroups import cgroup_parent_path

    assert cgroup_parent_path(cgroup_parent) == expected


def test_an_expanded_path_must_end_in_a_valid_slice() -> None:
    from kubelet_kit.container.cgroups import cgroup_parent_path

    with pytest.raises(ValueError, match="invalid slice name"):
        cgroup_parent_path("/kubepods.slice/-bad-.slice")
