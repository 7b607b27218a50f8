"""Effective pod requests and limits, with upstream component-helpers cases as data
(helpers_test.go: TestPodRequestsAndLimits, ...WithoutOverhead, TestPodResourceRequests,
TestPodResourceLimits; cases reading container status resources are left out)."""

from __future__ import annotations

from typing import Any

import pytest

from kubelet_kit.api import (
    Container,
    Pod,
    PodSpec,
    Quantity,
    ResourceRequirements,
    load_pod,
    pod_limits,
    pod_requests,
)

RL = dict[str, str]


def _q(values: RL) -> dict[str, Quantity]:
    return {k: Quantity.parse(v) for k, v in values.items()}


def _c(
    requests: RL | None = None, limits: RL | None = None, *, sidecar: bool = False, name: str = "c"
) -> Container:
    return Container(
        name=name,
        image="i",
        restart_policy="Always" if sidecar else None,
        resources=ResourceRequirements(requests=_q(requests or {}), limits=_q(limits or {})),
    )


def _pod(
    containers: list[Container], inits: list[Container] | None = None, overhead: RL | None = None
) -> Pod:
    return Pod(
        spec=PodSpec(
            containers=tuple(containers),
            init_containers=tuple(inits or ()),
            overhead=_q(overhead or {}),
        )
    )


def _single(
    cpu_req: str = "",
    mem_req: str = "",
    cpu_lim: str = "",
    mem_lim: str = "",
    cpu_oh: str = "",
    mem_oh: str = "",
) -> Pod:
    # upstream getPod(): one container plus optional overhead
    def rl(cpu: str, mem: str) -> RL:
        return {k: v for k, v in (("cpu", cpu), ("memory", mem)) if v}

    return _pod([_c(rl(cpu_req, mem_req), rl(cpu_lim, mem_lim))], overhead=rl(cpu_oh, mem_oh))


# TestPodRequestsAndLimits (overhead included)
WITH_OVERHEAD: list[tuple[str, Pod, RL, RL]] = [
    ("just-limit-no-overhead", _single(cpu_lim="9"), {}, {"cpu": "9"}),
    ("just-overhead", _single(cpu_oh="5", mem_oh="5"), {"cpu": "5", "memory": "5"}, {}),
    (
        "req-and-overhead",
        _single(cpu_req="1", mem_req="10", cpu_oh="5", mem_oh="5"),
        {"cpu": "6", "memory": "15"},
        {},
    ),
    (
        "all-req-lim-and-overhead",
        _single(cpu_req="1", cpu_lim="2", mem_req="10", mem_lim="12", cpu_oh="5", mem_oh="5"),
        {"cpu": "6", "memory": "15"},
        {"cpu": "7", "memory": "17"},
    ),
    (
        "req-some-lim-and-overhead",
        _single(cpu_req="1", cpu_lim="2", mem_req="10", cpu_oh="5", mem_oh="5"),
        {"cpu": "6", "memory": "15"},
        {"cpu": "7"},
    ),
]


@pytest.mark.parametrize(
    ("name", "pod", "requests", "limits"), WITH_OVERHEAD, ids=[c[0] for c in WITH_OVERHEAD]
)
def test_requests_and_limits_with_overhead(name: str, pod: Pod, requests: RL, limits: RL) -> None:
    assert pod_requests(pod) == _q(requests)
    assert pod_limits(pod) == _q(limits)


_TWO = [
    _c({"cpu": "1", "memory": "5"}, {"cpu": "2", "memory": "10"}, name="foobar"),
    _c({"cpu": "4", "memory": "12"}, {"cpu": "8", "memory": "24"}, name="foobar2"),
]
_INITS = [
    _c({"cpu": "1", "memory": "5"}, {"cpu": "1", "memory": "5"}, name="small-init"),
    _c({"cpu": "40", "memory": "120"}, {"cpu": "80", "memory": "240"}, name="big-init"),
]

# TestPodRequestsAndLimitsWithoutOverhead (ExcludeOverhead)
WITHOUT_OVERHEAD: list[tuple[str, Pod, RL, RL]] = [
    (
        "two container no overhead",
        _pod(_TWO),
        {"cpu": "5", "memory": "17"},
        {"cpu": "10", "memory": "34"},
    ),
    (
        "two container with overhead",
        _pod(_TWO, overhead={"cpu": "3", "memory": "8"}),
        {"cpu": "5", "memory": "17"},
        {"cpu": "10", "memory": "34"},
    ),
    (
        "massive init",
        _pod(_TWO, _INITS, overhead={"cpu": "3", "memory": "8"}),
        {"cpu": "40", "memory": "120"},
        {"cpu": "80", "memory": "240"},
    ),
]


@pytest.mark.parametrize(
    ("name", "pod", "requests", "limits"), WITHOUT_OVERHEAD, ids=[c[0] for c in WITHOUT_OVERHEAD]
)
def test_requests_and_limits_without_overhead(
    name: str, pod: Pod, requests: RL, limits: RL
) -> None:
    assert pod_requests(pod, exclude_overhead=True) == _q(requests)
    assert pod_limits(pod, exclude_overhead=True) == _q(limits)


def cpu(v: str) -> RL:
    return {"cpu": v}


# TestPodResourceRequests: (name, inits, containers, overhead, exclude_overhead, expected)
REQUESTS: list[tuple[str, list[Container], list[Container], RL, bool, RL]] = [
    ("nil options, larger init container", [_c(cpu("4"))], [_c(cpu("1"))], {}, False, cpu("4")),
    (
        "nil options, larger containers",
        [_c(cpu("2"))],
        [_c(cpu("2")), _c(cpu("3"))],
        {},
        False,
        cpu("5"),
    ),
    (
        "pod overhead excluded",
        [_c(cpu("2"))],
        [_c(cpu("2")), _c(cpu("3"))],
        cpu("1"),
        True,
        cpu("5"),
    ),
    (
        "pod overhead included",
        [_c(cpu("2"), cpu("2"))],
        [_c(cpu("2")), _c(cpu("3"))],
        {"cpu": "1", "memory": "1Gi"},
        False,
        {"cpu": "6", "memory": "1Gi"},
    ),
    (
        "restartable init container",
        [_c(cpu("1"), sidecar=True)],
        [_c(cpu("1"))],
        {},
        False,
        cpu("2"),
    ),
    (
        "multiple restartable init containers",
        [
            _c(cpu("5")),
            _c(cpu("1"), sidecar=True),
            _c(cpu("2"), sidecar=True),
            _c(cpu("3"), sidecar=True),
        ],
        [_c(cpu("1"))],
        {},
        False,
        cpu("7"),
    ),
    (
        "multiple restartable and regular init containers",
        [
            _c(cpu("5")),
            _c(cpu("1"), sidecar=True),
            _c(cpu("2"), sidecar=True),
            _c(cpu("5")),
            _c(cpu("3"), sidecar=True),
        ],
        [_c(cpu("1"))],
        {},
        False,
        cpu("8"),
    ),
    (
        "restartable-init, init and regular",
        [_c(cpu("10"), sidecar=True), _c(cpu("200"))],
        [_c(cpu("100"))],
        {},
        False,
        cpu("210"),
    ),
]


@pytest.mark.parametrize(
    ("name", "inits", "containers", "overhead", "exclude", "expected"),
    REQUESTS,
    ids=[c[0] for c in REQUESTS],
)
def test_pod_resource_requests(
    name: str,
    inits: list[Container],
    containers: list[Container],
    overhead: RL,
    exclude: bool,
    expected: RL,
) -> None:
    pod = _pod(containers, inits, overhead)
    assert pod_requests(pod, exclude_overhead=exclude) == _q(expected)


def lim(values: RL, *, sidecar: bool = False) -> Container:
    return _c(None, values, sidecar=sidecar)


# TestPodResourceLimits: (name, inits, containers, overhead, exclude_overhead, expected)
LIMITS: list[tuple[str, list[Container], list[Container], RL, bool, RL]] = [
    ("nil options, larger init container", [lim(cpu("4"))], [lim(cpu("1"))], {}, False, cpu("4")),
    (
        "nil options, larger containers",
        [lim(cpu("2"))],
        [lim(cpu("2")), lim(cpu("3"))],
        {},
        False,
        cpu("5"),
    ),
    (
        "pod overhead excluded",
        [lim(cpu("2"))],
        [lim(cpu("2")), lim(cpu("3"))],
        cpu("1"),
        True,
        cpu("5"),
    ),
    (
        "pod overhead included (only to existing limits)",
        [lim(cpu("2"))],
        [lim(cpu("2")), lim(cpu("3"))],
        {"cpu": "1", "memory": "1Gi"},
        False,
        cpu("6"),
    ),
    ("no limited containers", [], [_c()], {}, False, {}),
    (
        "one limited and one unlimited container",
        [],
        [lim({"cpu": "2", "memory": "2Gi"}), _c()],
        {},
        False,
        {"cpu": "2", "memory": "2Gi"},
    ),
    (
        "one limited and one unlimited init container",
        [lim({"cpu": "2", "memory": "2Gi"}), _c()],
        [_c()],
        {},
        False,
        {"cpu": "2", "memory": "2Gi"},
    ),
    (
        "restartable init container",
        [lim(cpu("1"), sidecar=True)],
        [lim(cpu("1"))],
        {},
        False,
        cpu("2"),
    ),
    (
        "multiple restartable and regular init containers",
        [
            lim(cpu("5")),
            lim(cpu("1"), sidecar=True),
            lim(cpu("2"), sidecar=True),
            lim(cpu("5")),
            lim(cpu("3"), sidecar=True),
        ],
        [lim(cpu("1"))],
        {},
        False,
        cpu("8"),
    ),
]


@pytest.mark.parametrize(
    ("name", "inits", "containers", "overhead", "exclude", "expected"),
    LIMITS,
    ids=[c[0] for c in LIMITS],
)
def test_pod_resource_limits(
    name: str,
    inits: list[Container],
    containers: list[Container],
    overhead: RL,
    exclude: bool,
    expected: RL,
) -> None:
    pod = _pod(containers, inits, overhead)
    assert pod_limits(pod, exclude_overhead=exclude) == _q(expected)


def test_pod_level_resources_replace_container_aggregate() -> None:
    data: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": {
            "resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "4"}},
            "containers": [
                {
                    "name": "c",
                    "image": "i",
                    "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
                }
            ],
        },
    }
    pod = load_pod(data)
    assert pod_requests(pod) == _q({"cpu": "2", "memory": "1Gi"})
    assert pod_limits(pod) == _q({"cpu": "4"})
