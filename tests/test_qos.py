"""QoS class, with upstream's qos_test.go (TestComputePodQOS) cases as data."""

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
    qos_class,
)
from kubelet_kit.api.meta import ObjectMeta

# A container is (requests, limits); each is (cpu, memory), "" meaning absent.
# Extra resources ride along as a third element: {name: quantity}.
R = tuple[Any, ...]


def _list(res: R) -> dict[str, Quantity]:
    cpu, mem, *extra = res
    out = {}
    if cpu:
        out["cpu"] = Quantity.parse(cpu)
    if mem:
        out["memory"] = Quantity.parse(mem)
    for more in extra:
        out.update({k: Quantity.parse(v) for k, v in more.items()})
    return out


def _container(requests: R, limits: R) -> Container:
    return Container(
        name="c",
        image="i",
        resources=ResourceRequirements(requests=_list(requests), limits=_list(limits)),
    )


NONE: R = ("", "")

# name, containers, init containers, pod-level (requests, limits) or None, expected
CASES: list[tuple[str, list[tuple[R, R]], list[tuple[R, R]], tuple[R, R] | None, str]] = [
    ("guaranteed", [(("100m", "100Mi"), ("100m", "100Mi"))], [], None, "Guaranteed"),
    ("guaranteed-guaranteed", [(("100m", "100Mi"), ("100m", "100Mi"))] * 2, [], None, "Guaranteed"),
    ("best-effort-best-effort", [(NONE, NONE)] * 2, [], None, "BestEffort"),
    ("best-effort", [(NONE, NONE)], [], None, "BestEffort"),
    ("best-effort-burstable", [(NONE, NONE), (("1", ""), ("2", ""))], [], None, "Burstable"),
    (
        "best-effort-guaranteed",
        [(NONE, NONE), (("10m", "100Mi"), ("10m", "100Mi"))],
        [],
        None,
        "Burstable",
    ),
    ("burstable-cpu-guaranteed-memory", [(("", "100Mi"), ("", "100Mi"))], [], None, "Burstable"),
    ("burstable-no-limits", [(("100m", "100Mi"), NONE)], [], None, "Burstable"),
    (
        "burstable-guaranteed",
        [(("1", "100Mi"), ("2", "100Mi")), (("100m", "100Mi"), ("100m", "100Mi"))],
        [],
        None,
        "Burstable",
    ),
    (
        "burstable-unbounded-but-requests-match-limits",
        [(("100m", "100Mi"), ("200m", "200Mi")), (("100m", "100Mi"), NONE)],
        [],
        None,
        "Burstable",
    ),
    ("burstable-1", [(("10m", "100Mi"), ("100m", "200Mi"))], [], None, "Burstable"),
    ("burstable-2", [(("0", "0"), ("100m", "200Mi"))], [], None, "Burstable"),
    (
        "best-effort-hugepages",
        [(("0", "0", {"hugepages-2Mi": "1Gi"}), ("0", "0", {"hugepages-2Mi": "1Gi"}))],
        [],
        None,
        "BestEffort",
    ),
    ("init-container", [(NONE, NONE)], [(("10m", "100Mi"), ("100m", "200Mi"))], None, "Burstable"),
    (
        "guaranteed-with-pod-level-resources",
        [(NONE, NONE)],
        [],
        (("10m", "100Mi"), ("10m", "100Mi")),
        "Guaranteed",
    ),
    (
        "guaranteed-with-pod-and-container-level-resources",
        [(("3m", "10Mi"), ("5m", "20Mi"))],
        [],
        (("10m", "100Mi"), ("10m", "100Mi")),
        "Guaranteed",
    ),
    (
        "burstable-with-pod-level-resources",
        [(NONE, NONE)],
        [],
        (("10m", "10Mi"), ("20m", "50Mi")),
        "Burstable",
    ),
    (
        "burstable-with-pod-and-container-level-resources",
        [(("5m", "10Mi"), ("5m", "10Mi"))],
        [],
        (("10m", "10Mi"), ("20m", "50Mi")),
        "Burstable",
    ),
    (
        "burstable-with-pod-and-container-level-requests",
        [(("5m", "10Mi"), NONE)],
        [],
        (("10m", "10Mi"), NONE),
        "Burstable",
    ),
    (
        "burstable-with-pod-and-container-level-resources-2",
        [(("5m", "10Mi"), NONE), (("5m", "10Mi"), ("5m", "10Mi"))],
        [],
        (("10m", "10Mi"), ("5m", "")),
        "Burstable",
    ),
    # Pod-level resources of zero only: the containers decide.
    (
        "zero-pod-level-resources",
        [(("1", "1Gi"), ("1", "1Gi"))],
        [],
        (("0", "0"), ("0", "0")),
        "Guaranteed",
    ),
    # TestCollectContainerLevelResources: sums over app and init containers decide.
    (
        "sums-over-init",
        [(("100m", "100Mi"), ("200m", "200Mi")), (("300m", "400Mi"), ("800m", "1000Mi"))],
        [(("50m", "50Mi"), ("100m", "100Mi"))],
        None,
        "Burstable",
    ),
    # Sidecars count like any init container.
    (
        "guaranteed-with-sidecar",
        [(("1", "1Gi"), ("1", "1Gi"))],
        [(("", ""), ("", ""))],
        None,
        "Burstable",
    ),
]


@pytest.mark.parametrize(
    ("name", "containers", "inits", "pod_level", "expected"), CASES, ids=[c[0] for c in CASES]
)
def test_qos_upstream_cases(
    name: str,
    containers: list[tuple[R, R]],
    inits: list[tuple[R, R]],
    pod_level: tuple[R, R] | None,
    expected: str,
) -> None:
    spec = PodSpec(
        containers=tuple(_container(r, limit) for r, limit in containers),
        init_containers=tuple(_container(r, limit) for r, limit in inits),
        resources=None
        if pod_level is None
        else ResourceRequirements(requests=_list(pod_level[0]), limits=_list(pod_level[1])),
    )
    assert qos_class(Pod(metadata=ObjectMeta(name=name), spec=spec)) == expected


def _manifest(resources: dict[str, Any], *, sidecar: bool = False) -> dict[str, Any]:
    init = (
        [{"name": "proxy", "image": "envoy", "restartPolicy": "Always", "resources": resources}]
        if sidecar
        else []
    )
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": {
            "initContainers": init,
            "containers": [{"name": "c", "image": "i", "resources": resources}],
        },
    }


def test_limits_only_is_guaranteed_after_api_defaulting() -> None:
    # The API server copies limits to missing requests; the loader does the same.
    pod = load_pod(_manifest({"limits": {"cpu": "1", "memory": "1Gi"}}))
    assert qos_class(pod) == "Guaranteed"


def test_guaranteed_sidecar_keeps_pod_guaranteed() -> None:
    res = {"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "1", "memory": "1Gi"}}
    assert qos_class(load_pod(_manifest(res, sidecar=True))) == "Guaranteed"


def test_only_cpu_and_memory_count() -> None:
    res = {"limits": {"ephemeral-storage": "1Gi"}}
    assert qos_class(load_pod(_manifest(res))) == "BestEffort"


def test_equal_values_in_other_units_match() -> None:
    res = {
        "limits": {"cpu": "1", "memory": "1Gi"},
        "requests": {"cpu": "1000m", "memory": "1073741824"},
    }
    assert qos_class(load_pod(_manifest(res))) == "Guaranteed"
