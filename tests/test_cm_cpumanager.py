"""CPU manager allocation tables: several pods, reserved CPUs, release, restart, corruption."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kubelet_kit.api import Container, Pod, PodSpec, Quantity, ResourceRequirements
from kubelet_kit.api.meta import ObjectMeta
from kubelet_kit.cm.cpumanager import (
    CHECKPOINT_NAME,
    CPUManager,
    format_cpuset,
    guaranteed_cpus,
    parse_cpuset,
)
from kubelet_kit.errors import ConfigurationError


def _ctr(
    name: str, cpu: str, mem: str = "100Mi", *, limit_cpu: str | None = None, sidecar: bool = False
) -> Container:
    req = {"cpu": Quantity.parse(cpu), "memory": Quantity.parse(mem)} if cpu else {}
    lim = {"cpu": Quantity.parse(limit_cpu or cpu), "memory": Quantity.parse(mem)} if cpu else {}
    return Container(
        name=name,
        image="i",
        resources=ResourceRequirements(requests=req, limits=lim),
        restart_policy="Always" if sidecar else None,
    )


def _pod(uid: str, *containers: Container, init: tuple[Container, ...] = ()) -> Pod:
    return Pod(
        metadata=ObjectMeta(name=uid, uid=uid),
        spec=PodSpec(containers=containers, init_containers=init),
    )


@pytest.mark.parametrize(
    ("text", "cpus"),
    [
        ("", set()),
        ("0", {0}),
        ("0-3", {0, 1, 2, 3}),
        ("0-2,7,9-10", {0, 1, 2, 7, 9, 10}),
    ],
)
def test_cpuset_round_trip(text: str, cpus: set[int]) -> None:
    assert parse_cpuset(text) == cpus
    assert format_cpuset(cpus) == text


@pytest.mark.parametrize("bad", ["a", "3-1", "-1", "1,,2"])
def test_cpuset_parse_errors(bad: str) -> None:
    with pytest.raises(ValueError, match="invalid CPU list"):
        parse_cpuset(bad)


# (container request, limit, expected exclusive CPUs): upstream guaranteedCPUs cases.
@pytest.mark.parametrize(
    ("req", "lim", "want"),
    [
        ("1", "1", 1),
        ("2", "2", 2),
        ("1500m", "1500m", 0),
        ("1000m", "1000m", 1),
        ("1", "2", 0),  # Burstable: request != limit
    ],
)
def test_guaranteed_cpus(req: str, lim: str, want: int) -> None:
    pod = _pod("p", _ctr("c", req, limit_cpu=lim))
    assert guaranteed_cpus(pod, pod.spec.containers[0]) == want


def test_static_policy_needs_a_reservation() -> None:
    with pytest.raises(ConfigurationError, match=r"requires systemreserved\.cpu"):
        CPUManager("static", cpus=range(4))
    with pytest.raises(ConfigurationError, match="cpuManagerPolicy"):
        CPUManager("dynamic", cpus=range(4))


def test_none_policy_pins_nothing() -> None:
    m = CPUManager("none", cpus=range(4))
    m.start()
    pod = _pod("p", _ctr("c", "2"))
    assert m.allocate_pod(pod).admit
    assert m.cpuset(pod, pod.spec.containers[0]) == ""


# Steps: (action, pod, expected admit, expected defaultCpuSet, {(pod, ctr): cpuset}).
G1 = _pod("g1", _ctr("a", "2"))
G2 = _pod("g2", _ctr("a", "1"), _ctr("b", "2"))
BU = _pod("bu", _ctr("a", "2", limit_cpu="3"))
FR = _pod("fr", _ctr("a", "1500m"))
BIG = _pod("big", _ctr("a", "4"))

STEPS = [
    ("add", G1, True, "0,3-7", {("g1", "a"): "1-2"}),
    ("add", G2, True, "0,6-7", {("g2", "a"): "3", ("g2", "b"): "4-5"}),
    # Burstable and fractional Guaranteed containers stay on the shared pool.
    ("add", BU, True, "0,6-7", {("bu", "a"): "0,6-7"}),
    ("add", FR, True, "0,6-7", {("fr", "a"): "0,6-7"}),
    # Only 6-7 are free (0 is reserved): 4 exclusive CPUs cannot be had.
    ("add", BIG, False, "0,6-7", {}),
    ("remove", G1, True, "0-2,6-7", {("g2", "b"): "4-5"}),
    ("add", BIG, True, "0", {("big", "a"): "1-2,6-7"}),
    ("remove", BIG, True, "0-2,6-7", {}),
    ("remove", G2, True, "0-7", {}),
]


def test_static_allocation_table() -> None:
    m = CPUManager("static", cpus=range(8), reserved_milli_cpu=500)
    m.start()
    assert m.reserved == {0}
    for action, pod, admit, default, expect in STEPS:
        if action == "add":
            result = m.allocate_pod(pod)
            assert result.admit == admit, (pod.uid, result)
            if not admit:
                assert result.reason == "UnexpectedAdmissionError"
                assert result.message == (
                    "Allocate failed due to not enough cpus available to "
                    "satisfy request: requested=4, available=2, which is "
                    "unexpected"
                )
        else:
            m.remove_pod(pod.uid)
        assert format_cpuset(m.default_cpuset) == default, (action, pod.uid)
        for (uid, name), cpus in expect.items():
            p = next(x for x in (G1, G2, BU, FR, BIG) if x.uid == uid)
            c = next(x for x in p.spec.containers if x.name == name)
            assert m.cpuset(p, c) == cpus, (action, uid, name)


def test_failed_pod_allocation_is_rolled_back() -> None:
    m = CPUManager("static", cpus=range(4), reserved_milli_cpu=1000)
    m.start()
    pod = _pod("p", _ctr("a", "2"), _ctr("b", "2"))
    assert not m.allocate_pod(pod).admit
    assert m.default_cpuset == {0, 1, 2, 3}
    assert m.assignments == {}


def test_init_container_cpus_are_reused_by_app_containers() -> None:
    m = CPUManager("static", cpus=range(4), reserved_milli_cpu=1000)
    m.start()
    pod = _pod("p", _ctr("app", "2"), init=(_ctr("init", "2"),))
    assert m.allocate_pod(pod).admit
    assert m.assignments["p"] == {"init": {1, 2}, "app": {1, 2}}
    assert m.default_cpuset == {0, 3}
    m.remove_container("p", "init")  # the app still holds them
    assert m.default_cpuset == {0, 3}
    m.remove_container("p", "app")
    assert m.default_cpuset == {0, 1, 2, 3}


def test_sidecar_keeps_its_cpus() -> None:
    m = CPUManager("static", cpus=range(6), reserved_milli_cpu=1000)
    m.start()
    pod = _pod("p", _ctr("app", "2"), init=(_ctr("side", "2", sidecar=True),))
    assert m.allocate_pod(pod).admit
    assert m.assignments["p"] == {"side": {1, 2}, "app": {3, 4}}


def test_explicit_reserved_cpus() -> None:
    m = CPUManager("static", cpus=range(4), reserved_cpus=[3])
    m.start()
    pod = _pod("p", _ctr("a", "3"))
    assert m.allocate_pod(pod).admit
    assert m.cpuset(pod, pod.spec.containers[0]) == "0-2"
    with pytest.raises(ConfigurationError, match="reservedSystemCPUs"):
        CPUManager("static", cpus=range(4), reserved_cpus=[9])


# ----------------------------------------------------------------- checkpoint


def test_state_survives_a_restart(tmp_path: Path) -> None:
    m = CPUManager("static", cpus=range(8), reserved_milli_cpu=1000, state_dir=tmp_path)
    m.start()
    assert m.allocate_pod(G1).admit and m.allocate_pod(G2).admit
    data = json.loads((tmp_path / CHECKPOINT_NAME).read_text())
    assert data["policyName"] == "static"
    assert data["defaultCpuSet"] == "0,6-7"
    assert data["entries"] == {"g1": {"a": "1-2"}, "g2": {"a": "3", "b": "4-5"}}
    again = CPUManager("static", cpus=range(8), reserved_milli_cpu=1000, state_dir=tmp_path)
    again.start()
    assert again.assignments == m.assignments
    assert again.default_cpuset == m.default_cpuset
    # Allocating an already-allocated pod again changes nothing.
    assert again.allocate_pod(G1).admit
    assert again.cpuset(G1, G1.spec.containers[0]) == "1-2"
    again.remove_pod("g1")
    third = CPUManager("static", cpus=range(8), reserved_milli_cpu=1000, state_dir=tmp_path)
    third.start()
    assert format_cpuset(third.default_cpuset) == "0-2,6-7"


def _write_state(tmp_path: Path, mutate: object) -> None:
    m = CPUManager("static", cpus=range(8), reserved_milli_cpu=1000, state_dir=tmp_path)
    m.start()
    assert m.allocate_pod(G1).admit
    path = tmp_path / CHECKPOINT_NAME
    text = path.read_text()
    assert callable(mutate)
    path.write_text(mutate(text))


@pytest.mark.parametrize(
    "mutate",
    [
        lambda t: t.replace('"1-2"', '"1-3"'),  # edited by hand: checksum no longer matches
        lambda t: t[: len(t) // 2],  # truncated
        lambda t: "",
        lambda t: json.dumps({**json.loads(t), "checksum": "x"}),
    ],
)
def test_corrupt_checkpoint_is_refused(tmp_path: Path, mutate: object) -> None:
    _write_state(tmp_path, mutate)
    m = CPUManager("static", cpus=range(8), reserved_milli_cpu=1000, state_dir=tmp_path)
    with pytest.raises(
        ConfigurationError,
        match="checkpoint is corrupted, please drain this "
        "node and delete the CPU manager checkpoint",
    ):
        m.start()


def test_checkpoint_of_another_policy_is_refused(tmp_path: Path) -> None:
    CPUManager("none", cpus=range(8), state_dir=tmp_path).start()
    m = CPUManager("static", cpus=range(8), reserved_milli_cpu=1000, state_dir=tmp_path)
    with pytest.raises(
        ConfigurationError,
        match='configured policy "static" differs from state checkpoint policy "none"',
    ):
        m.start()


def test_checkpoint_for_other_cpus_or_reservations_is_refused(tmp_path: Path) -> None:
    _write_state(tmp_path, lambda t: t)
    fewer = CPUManager("static", cpus=range(4), reserved_milli_cpu=1000, state_dir=tmp_path)
    with pytest.raises(ConfigurationError, match="doesn't match with CPUs in state"):
        fewer.start()
    more_reserved = CPUManager("static", cpus=range(8), reserved_milli_cpu=2000, state_dir=tmp_path)
    with pytest.raises(ConfigurationError, match='not all reserved cpus: "0-1"'):
        more_reserved.start()
